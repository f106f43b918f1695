//! `merge-similar`: one body for functions equal up to their constants and direct callees
//! (as Swift's MergeFunctionsIgnoringConst and Binaryen's MergeSimilarFunctions do).
//!
//! 1. **Skeletons.** The hashing walk runs in its `similar` mode: constant operands become
//!    *holes*, written as their kind only and listed with their positions, and direct callees
//!    are outside the stream as always. Functions with equal streams (found by hash, confirmed
//!    by comparing the streams word for word) are equal up to their holes: a *group*.
//! 2. **Plan.** For each group, a hole position holding the same value in every member stays
//!    as it is; the others become parameters of a shared body, one per distinct vector of
//!    values (positions that vary alike share one). A differing callee becomes a function
//!    pointer parameter and its call an indirect call; a call of each member to itself stays a
//!    direct call, to the shared body. Callees merged by `merge` resolve to one symbol, so they
//!    are no holes. A group is merged only when the cost model says it saves machine code,
//!    and with at most max(4, size / 100) extra parameters.
//! 3. **Rewrite.** The shared body is the first member's body with holes turned into its
//!    extra parameters. Every direct call of a member (`call`, `tail_call`) calls the shared
//!    body with the member's values as extra arguments. A member whose address is observable
//!    (taken, exported, preemptible callers aside, called by `try_call`) stays as a thunk with
//!    its own name, signature and calling convention; any other member has no code left.
//!    Preemptible functions are left alone. Groups whose differing callees are members of
//!    other groups wait for a later round (bottom-up, as Swift does): after their callees are
//!    folded, their calls differ in constants instead.

use super::fold::{
    call_shared, fresh_name, make_extras, make_thunk_with, materialize_before,
    rewrite_calls_of_folded, CostModel, Extra, Value, NO_SIG,
};
use super::merge::scope::{SymIndex, SymTable};
use super::merge::walk::{function_hashes, light_walk, mix, HashScratch, ShapeTable, WalkOut};
use crate::hash::{finish, HashMap, HashSet};
use crate::lir::*;
use crate::state::*;

/// Options of the pass.
#[derive(Clone, Copy, Debug)]
pub struct SimilarOptions {
    /// Rounds at most (a round folds groups whose differing callees are final).
    pub max_rounds: usize,
    /// The byte costs the pass weighs a group's saving against.
    pub cost: CostModel,
    /// Local functions can be reached by name (`PassOptions::locals_named`): a folded local
    /// member keeps a thunk, as an exported one does.
    pub locals_named: bool,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        SimilarOptions {
            max_rounds: 4,
            cost: CostModel::default(),
            locals_named: false,
        }
    }
}

/// What the pass did.
#[derive(Clone, Debug, Default)]
pub struct SimilarReport {
    /// Groups folded into a shared body.
    pub groups: usize,
    /// Members folded (thunks or no code at all).
    pub merged: usize,
    /// Extra parameters of all shared bodies.
    pub params: usize,
    /// Members kept as thunks.
    pub thunks: usize,
    /// Call sites rewritten to call a shared body.
    pub callers_rewritten: usize,
    /// Groups not folded because they would need too many extra parameters.
    pub too_many_params: usize,
    /// Groups not folded because the cost model says they save no bytes.
    pub unprofitable: usize,
    /// Functions that joined a family whose shared body an earlier batch compiled.
    pub joined: usize,
    /// Rounds run.
    pub rounds: usize,
    /// Wall time of each phase: the scan, walks, plans, folds and caller rewrites.
    pub times: Vec<(&'static str, std::time::Duration)>,
}

impl SimilarReport {
    /// Add the report's counters and phase times to `stats`.
    pub(crate) fn record(&self, stats: &mut crate::pass::Stats) {
        stats.add(crate::Counter::MergedSimilar, self.merged as u64);
        stats.add(crate::Counter::SimilarGroups, self.groups as u64);
        stats.add(crate::Counter::SimilarParams, self.params as u64);
        stats.add(crate::Counter::SimilarThunks, self.thunks as u64);
        stats.add(
            crate::Counter::SimilarCallersRewritten,
            self.callers_rewritten as u64,
        );
        stats.add(
            crate::Counter::SimilarTooManyParams,
            self.too_many_params as u64,
        );
        stats.add(
            crate::Counter::SimilarUnprofitable,
            self.unprofitable as u64,
        );
        stats.add(crate::Counter::SimilarJoined, self.joined as u64);
        for &(phase, d) in &self.times {
            stats.add_time(phase, d);
        }
    }

    fn add_time(&mut self, phase: &'static str, t: std::time::Instant) {
        let d = t.elapsed();
        match self.times.iter_mut().find(|(p, _)| *p == phase) {
            Some(e) => e.1 += d,
            None => self.times.push((phase, d)),
        }
    }
}

/// The `merge-similar` pass.
#[derive(Default)]
pub struct MergeSimilar {
    /// The pass's options.
    pub opts: SimilarOptions,
}

impl crate::pass::Pass for MergeSimilar {
    fn name(&self) -> &'static str {
        "merge-similar"
    }
    fn run(
        &mut self,
        m: &mut Module,
        ps: &mut PassState,
        stats: &mut crate::pass::Stats,
    ) -> Result<(), crate::error::Error> {
        merge_similar(m, ps, self.opts).record(stats);
        Ok(())
    }
}

/// One function of a group: its holes (constants, then callees), in walk order, as ranges
/// of `State::consts` and `State::callees`.
#[derive(Clone, Copy)]
struct Member {
    f: FuncId,
    sym: Symbol,
    consts: (u32, u32),
    callees: (u32, u32),
    named: bool,
    /// Compiled by an earlier batch (`PassState::similar_frozen`): it keeps its code, and
    /// only its values shape the shared body.
    frozen: bool,
}

/// An extra parameter of a shared body: its type and, for a callee, the signature of the
/// calls through it. Each member's value is in `Plan::values`.
struct Param {
    ty: ParamType,
    sig: Option<Signature>,
    /// The parameter planned before this one with the same hash of its values (a chain
    /// through `Scratch::by_values`), or `u32::MAX`.
    next: u32,
}

/// The type of a parameter: known, or that of the constant at (instruction, operand) of the
/// group's first member, looked up only when needed (`Function::constant_type` reads the
/// body): to tell apart parameters with equal values, and for a group that is folded.
#[derive(Clone, Copy)]
enum ParamType {
    Known(Type),
    Const(Inst, u16),
}

impl ParamType {
    fn get(&mut self, rep: &Function) -> Type {
        match *self {
            ParamType::Known(t) => t,
            ParamType::Const(inst, op) => {
                let t = rep.constant_type(inst, op as usize);
                *self = ParamType::Known(t);
                t
            }
        }
    }
}

impl Param {
    /// The type (known once the plan is made).
    fn ty(&self) -> Type {
        match self.ty {
            ParamType::Known(t) => t,
            ParamType::Const(..) => unreachable!("a plan's parameter types are known"),
        }
    }
}
/// What becomes of a hole position.
#[derive(Clone, Copy)]
enum Fate {
    Keep,
    Param(usize),
    SelfCall,
}

struct Plan {
    /// The group's skeleton class and weak hash (what a family is found by later).
    class: u32,
    weak: u64,
    /// The members join a family whose shared body an earlier batch compiled (none of them
    /// gives its body to make it).
    joins: bool,
    members: Vec<Member>,
    params: Vec<Param>,
    /// The value of parameter `q` in member `j`: `values[q * members.len() + j]`.
    values: Vec<Value>,
    const_fate: Vec<Fate>,
    callee_fate: Vec<Fate>,
    /// Per member: it keeps a thunk.
    thunk: Vec<bool>,
    /// Per member: its direct callers are rewritten to call the shared body (always for a
    /// member with no code left; for one with a thunk, when the bytes allow).
    rewrite: Vec<bool>,
}

/// Run `merge-similar` over the open functions of `m`.
///
/// Bounded work: at most `opts.max_rounds` rounds (4 by default), each walking only the
/// functions whose callees changed in the round before (the first walks every open function
/// once), so the pass costs O(rounds × (instructions + calls)) of the open functions,
/// whatever the call graph's shape. A group whose callees are not final when the rounds run
/// out is left unmerged (a missed merge, never a wrong one).
pub fn merge_similar(m: &mut Module, ps: &mut PassState, opts: SimilarOptions) -> SimilarReport {
    let mut report = SimilarReport::default();
    report.callers_rewritten += rewrite_calls_of_folded(m, ps);
    let (one, two) = {
        let mut open = ps.open_functions(m);
        (open.next().is_some(), open.next().is_some())
    };
    // A group needs two functions, one of them open: two of this batch, or one and a
    // function compiled before (a family's, or one compiled alone: a seed, or held again).
    // A function of a batch others follow may be a seed for them.
    if !(two || one && ps.incremental) {
        return report;
    }
    let mut st = State::new(m, ps.first_open);
    if opts.locals_named {
        st.named_below = m.functions.len() as u32;
    }
    // The functions a round walks, and those whose groups it plans: every open function at
    // first; then those the last round changed or deferred, and the shared bodies it made.
    let mut dirty: Vec<FuncId> = ps.open_function_ids(m);
    // (Frozen functions held again are walked once, first: members listed in walk order.)
    let mut rewalk: Vec<FuncId> = ps.similar_frozen.clone();
    rewalk.sort_unstable();
    rewalk.extend_from_slice(&dirty);
    for k in 0..opts.max_rounds.max(1) {
        report.rounds += 1;
        match round(
            m,
            ps,
            &opts,
            &mut st,
            (&rewalk, k == 0),
            &dirty,
            &mut report,
        ) {
            Some((w, d)) => (rewalk, dirty) = (w, d),
            None => break,
        }
    }
    if ps.incremental {
        keep_seeds(m, ps, &mut st);
    }
    if st.debug {
        eprintln!(
            "merge-similar: merged {} groups {} params {} thunks {} callers_rewritten {} \
             too_many_params {} unprofitable {} rounds {}",
            report.merged,
            report.groups,
            report.params,
            report.thunks,
            report.callers_rewritten,
            report.too_many_params,
            report.unprofitable,
            report.rounds
        );
    }
    report
}

/// A set of symbols: a flag per symbol (`SymTable`: dense when the run touches enough of the
/// module's symbols, else hashed).
#[derive(Default)]
struct SymSet(SymTable<bool>);

impl SymSet {
    fn new(touched: usize, symbols: usize) -> Self {
        SymSet(SymTable::new(false, touched, symbols))
    }
    fn insert(&mut self, s: Symbol) {
        self.0.set(s, true);
    }
    fn contains(&self, s: Symbol) -> bool {
        self.0.get(s)
    }
}

/// A call site: the calling function and the call.
type Site = (FuncId, Inst);

/// The direct calls (`call`, `tail_call`) of each callee symbol, in the order they were
/// found: those of the first walk, indexed by callee once that walk is over, then those
/// added later.
#[derive(Default)]
struct Calls {
    /// The first walk's calls (callee, site), until `index` groups them by callee.
    first: Vec<(Symbol, Site)>,
    /// The first walk's calls, by callee.
    indexed: SymIndex<Site>,
    /// Symbols whose first-walk calls were taken (`take`).
    taken: SymSet,
    /// Calls added after the first walk.
    later: HashMap<Symbol, Vec<Site>>,
}

impl Calls {
    /// Index the first walk's calls by callee (calls of one callee keep their order).
    fn index(&mut self, touched: usize, symbols: usize) {
        self.indexed = SymIndex::new(&self.first, touched, symbols);
        self.first = Vec::new();
    }

    /// The first walk's calls of `s` not yet taken.
    fn indexed(&self, s: Symbol) -> &[Site] {
        if self.taken.contains(s) {
            return &[];
        }
        self.indexed.get(s)
    }

    fn count(&self, s: Symbol) -> usize {
        self.indexed(s).len() + self.later.get(&s).map_or(0, |v| v.len())
    }

    /// Record a call of `s` (after the first walk).
    fn push(&mut self, s: Symbol, site: Site) {
        self.later.entry(s).or_default().push(site);
    }

    /// Append the calls of `s` to `out` and forget them.
    fn take(&mut self, s: Symbol, out: &mut Vec<Site>) {
        out.extend_from_slice(self.indexed(s));
        self.taken.insert(s);
        if let Some(v) = self.later.remove(&s) {
            out.extend_from_slice(&v);
        }
    }
}

/// Buffers of the planning step, reused from group to group.
#[derive(Default)]
struct Scratch {
    members: Vec<Member>,
    /// `members` holds `f` when `State::member_mark[f] == mark`.
    mark: u32,
    /// A symbol is a member of the group being planned when `group[s] == group_mark`.
    group: SymTable<u32>,
    group_mark: u32,
    /// The resolved callee of each member at each callee position (position-major).
    callee_vals: Vec<Value>,
    vals: Vec<Value>,
    params: Vec<Param>,
    values: Vec<Value>,
    /// Hash of a parameter's (type, values) → the last parameter planned with it.
    by_values: HashMap<u64, u32>,
    const_fate: Vec<Fate>,
    callee_fate: Vec<Fate>,
    /// Classes already planned in this round: `class_round[class] == round`.
    class_round: Vec<u32>,
}

/// What the rounds keep: skeleton classes of the walked functions, with their holes; which
/// functions are observed; the direct calls of each function.
struct State {
    table: ShapeTable,
    /// Per walked function: its skeleton class and its holes (ranges of the stores).
    walked: OpenMap<Option<Walked>>,
    /// The functions of each class as a list of `entries` (newest first; entries whose
    /// function moved to another class since are skipped): the index of the newest entry.
    head: Vec<u32>,
    /// Entries of the class lists: a function and the entry after it in its list (`NO_ENTRY`
    /// at the end). A function walked again gets a new entry; its old one keeps its place
    /// and its link, so the list it was in stays whole.
    entries: Vec<(FuncId, u32)>,
    /// The number of walked functions of each class (an upper bound on its members).
    live: Vec<u32>,
    /// The number of walked functions of each weak hash (`function_hashes`).
    weak_live: HashMap<u64, u32>,
    /// Functions that may share a skeleton but whose weak hash no walked function had when
    /// they were walked (lightly: `light_walk`), in walk order: they get their token streams
    /// when another function with their weak hash comes (functions with equal streams have
    /// equal weak hashes), just before it, so classes list their functions in walk order as
    /// if every function had been walked in full.
    pending: HashMap<u64, Vec<FuncId>>,
    /// The weak hash a function waits under in `pending` (`None`: not waiting; entries of a
    /// function no longer waiting are skipped).
    pending_weak: OpenMap<Option<u64>>,
    consts: Vec<(Inst, u16, Operand)>,
    callees: Vec<(Symbol, Inst)>,
    /// Functions whose address is observable (taken, or called by `try_call`).
    observed: SymSet,
    /// The symbols folded away by earlier rounds of this pass (no code left).
    folded: SymSet,
    calls: Calls,
    scratch: HashScratch,
    out: WalkOut,
    plan: Scratch,
    member_mark: OpenMap<u32>,
    /// Rounds run so far.
    rounds: u32,
    /// About how many symbols this run touches (`SymTable`'s estimate).
    touched: usize,
    /// `SimilarOptions::locals_named`: functions below this id (the host's: not the shared
    /// bodies this run makes) are named, local or not.
    named_below: u32,
    /// The first open function (`PassState::first_open`).
    first_open: u32,
    /// `MERGELIFT_DEBUG_SIMILAR` is set: print each group's figures.
    debug: bool,
    /// The weak hashes whose seeds (`PassState::seeds`) are classed.
    seeded: HashSet<u64>,
}

/// The end of a class list (`State::entries`).
const NO_ENTRY: u32 = u32::MAX;

/// Per-function data for the open functions (ids from `base` on), growing as functions are
/// added: tables that cost in proportion to the open functions, not to the module. The few
/// frozen functions a run walks (held again, or a family's seeds) are kept apart, hashed.
struct OpenMap<T> {
    base: u32,
    data: Vec<T>,
    frozen: HashMap<u32, T>,
    /// What an entry never written reads as.
    default: T,
}

impl<T: Clone + Default> OpenMap<T> {
    fn new(base: u32) -> Self {
        OpenMap {
            base,
            data: Vec::new(),
            frozen: HashMap::default(),
            default: T::default(),
        }
    }

    fn clear(&mut self) {
        self.data.iter_mut().for_each(|x| *x = T::default());
        self.frozen.clear();
    }
}

impl<T: Clone + Default> core::ops::Index<FuncId> for OpenMap<T> {
    type Output = T;
    fn index(&self, f: FuncId) -> &T {
        match f.as_u32().checked_sub(self.base) {
            Some(k) => self.data.get(k as usize),
            None => self.frozen.get(&f.as_u32()),
        }
        .unwrap_or(&self.default)
    }
}

impl<T: Clone + Default> core::ops::IndexMut<FuncId> for OpenMap<T> {
    fn index_mut(&mut self, f: FuncId) -> &mut T {
        let Some(k) = f.as_u32().checked_sub(self.base) else {
            return self.frozen.entry(f.as_u32()).or_default();
        };
        let k = k as usize;
        if k >= self.data.len() {
            self.data.resize(k + 1, T::default());
        }
        &mut self.data[k]
    }
}

#[derive(Clone, Copy)]
struct Walked {
    class: u32,
    weak: u64,
    consts: (u32, u32),
    callees: (u32, u32),
    /// Its name or address is visible outside the module, or declared significant: folded,
    /// it keeps a thunk (as one whose address is observed does).
    named: bool,
}

impl State {
    fn new(m: &Module, first_open: u32) -> State {
        let open = m.functions.len() - first_open as usize;
        // The symbols a run touches: the open functions' and about as many callees.
        let (touched, symbols) = (2 * open, m.symbols.len());
        State {
            table: ShapeTable::with_capacity(open),
            walked: OpenMap::new(first_open),
            head: Vec::new(),
            entries: Vec::new(),
            live: Vec::new(),
            weak_live: HashMap::default(),
            pending: HashMap::default(),
            pending_weak: OpenMap::new(first_open),
            consts: Vec::new(),
            callees: Vec::new(),
            observed: SymSet::new(touched, symbols),
            folded: SymSet::new(touched, symbols),
            calls: Calls {
                taken: SymSet::new(touched, symbols),
                ..Default::default()
            },
            scratch: HashScratch::default(),
            out: WalkOut {
                similar: true,
                ..Default::default()
            },
            plan: Scratch {
                group: SymTable::new(0, touched, symbols),
                ..Default::default()
            },
            touched,
            member_mark: OpenMap::new(first_open),
            rounds: 0,
            debug: std::env::var_os("MERGELIFT_DEBUG_SIMILAR").is_some(),
            named_below: 0,
            first_open,
            seeded: HashSet::default(),
        }
    }

    /// Walk `id` (again) and class its skeleton. The first walk of a function also records
    /// the addresses it observes and its direct calls.
    ///
    /// The walk is light (`light_walk`: no token stream) when no other function has the same
    /// weak hash: the function waits in `pending` until one comes (see there).
    fn walk(&mut self, m: &Module, ps: &PassState, id: FuncId, first: bool) {
        self.unwalk(id);
        // (A frozen function's calls and the addresses it takes are compiled: nothing to
        // rewrite, and recorded when it was compiled.)
        let first = first && id.as_u32() >= self.first_open;
        let f = &m.functions[id];
        if m.removed[id] || f.entry().is_none() {
            return;
        }
        let out = &mut self.out;
        out.callees.clear();
        out.taken.clear();
        let (weak, holes) = light_walk(f, &mut self.scratch, out);
        if first {
            for &s in &out.taken {
                self.observed.insert(m.resolve_alias(s));
            }
            for g in f.globals.values() {
                if let GlobalData::Symbol { sym, .. } = g {
                    self.observed.insert(m.resolve_alias(*sym));
                }
            }
            for &(s, i) in &out.callees {
                if f.insts[i].opcode == Opcode::TryCall {
                    self.observed.insert(m.resolve_alias(s));
                } else {
                    self.calls.first.push((s, (id, i)));
                }
            }
        }
        if f.inst_count() < 3 || f.linkage == Linkage::Preemptible {
            return; // a thunk or a stub (nothing to share), or left alone
        }
        if holes == 0 && out.callees.is_empty() {
            return; // equal ones were merged exactly
        }
        if ps.seeds.has_weak(weak) && self.seeded.insert(weak) {
            self.add_seeds(m, &ps.seeds, weak);
        }
        let waiting = self.pending.remove(&weak);
        if waiting.is_none()
            && self.weak_live.get(&weak).copied().unwrap_or(0) == 0
            && !ps.families.has_weak(weak)
        {
            // Alone with its weak hash so far: no stream until another comes.
            self.pending.insert(weak, vec![id]);
            self.pending_weak[id] = Some(weak);
            return;
        }
        for p in waiting.into_iter().flatten() {
            if self.pending_weak[p] == Some(weak) && !m.removed[p] {
                self.pending_weak[p] = None;
                self.intern(m, p);
            }
        }
        self.intern(m, id);
    }

    /// Class the seeds of weak hash `weak` (`PassState::seeds`) as the walk of each would.
    fn add_seeds(&mut self, m: &Module, seeds: &Seeds, weak: u64) {
        for &k in seeds.by_weak.get(weak) {
            let seed = seeds.list[k as usize];
            if m.removed[seed.f] {
                continue;
            }
            let tokens = &seeds.words[seed.tokens.0 as usize..seed.tokens.1 as usize];
            let class = self.table.intern(seed.key, tokens);
            let c0 = self.consts.len() as u32;
            (self.consts)
                .extend_from_slice(&seeds.consts[seed.consts.0 as usize..seed.consts.1 as usize]);
            let k0 = self.callees.len() as u32;
            (self.callees).extend_from_slice(
                &seeds.callees[seed.callees.0 as usize..seed.callees.1 as usize],
            );
            self.class_walked(
                seed.f,
                Walked {
                    class,
                    weak,
                    consts: (c0, self.consts.len() as u32),
                    callees: (k0, self.callees.len() as u32),
                    named: true,
                },
            );
        }
    }

    /// Record the walk of `id` (class `w.class`).
    fn class_walked(&mut self, id: FuncId, w: Walked) {
        let class = w.class;
        self.walked[id] = Some(w);
        *self.weak_live.entry(w.weak).or_insert(0) += 1;
        if self.head.len() <= class as usize {
            self.head.resize(class as usize + 1, NO_ENTRY);
            self.live.resize(class as usize + 1, 0);
        }
        self.live[class as usize] += 1;
        self.entries.push((id, self.head[class as usize]));
        self.head[class as usize] = self.entries.len() as u32 - 1;
    }

    /// Walk `id` in full and class its skeleton (it may share one).
    fn intern(&mut self, m: &Module, id: FuncId) {
        let f = &m.functions[id];
        let out = &mut self.out;
        out.tokens.clear();
        out.callees.clear();
        out.holes.clear();
        out.taken.clear();
        let (weak, local) = function_hashes(f, &mut self.scratch, out);
        if self.table.tokens_reserved() == 0 {
            // Room for a stream per walked function or so: one allocation, no regrowth.
            let open = m.functions.len() - self.first_open as usize;
            self.table.reserve_tokens(out.tokens.len() * open);
        }
        let class = self.table.intern(finish(mix(weak, local)), &out.tokens);
        let c0 = self.consts.len() as u32;
        self.consts.extend_from_slice(&out.holes);
        let k0 = self.callees.len() as u32;
        self.callees.extend_from_slice(&out.callees);
        let named =
            f.linkage != Linkage::Local || f.address_significant || id.as_u32() < self.named_below;
        self.class_walked(
            id,
            Walked {
                class,
                weak,
                consts: (c0, self.consts.len() as u32),
                callees: (k0, self.callees.len() as u32),
                named,
            },
        );
    }

    /// Forget the walk of `id` (its body changed, or it became a thunk).
    fn unwalk(&mut self, id: FuncId) {
        if let Some(w) = self.walked[id] {
            self.live[w.class as usize] -= 1;
            if let Some(n) = self.weak_live.get_mut(&w.weak) {
                *n -= 1;
            }
            self.walked[id] = None;
        }
        if self.pending_weak[id].is_some() {
            self.pending_weak[id] = None;
        }
    }

    /// The current members of `class`, with their holes, into `self.plan.members`.
    fn members(&mut self, m: &Module, class: u32) {
        let (p, marks) = (&mut self.plan, &mut self.member_mark);
        p.members.clear();
        p.mark = p.mark.wrapping_add(1);
        if p.mark == 0 {
            // The marks wrapped: forget them all.
            marks.clear();
            p.mark = 1;
        }
        let mut cur = self.head.get(class as usize).copied().unwrap_or(NO_ENTRY);
        while cur != NO_ENTRY {
            let (f, next) = self.entries[cur as usize];
            cur = next;
            let Some(w) = self.walked[f] else { continue };
            if w.class != class || marks[f] == p.mark {
                continue; // moved to another class since, or listed twice
            }
            let Some(sym) = m.symbol_of(f) else { continue };
            marks[f] = p.mark;
            p.members.push(Member {
                f,
                sym,
                consts: w.consts,
                callees: w.callees,
                named: w.named,
                frozen: f.as_u32() < self.first_open,
            });
        }
        // The shared body is made of the first member's body: an open one.
        if let Some(k) = p.members.iter().position(|mb| !mb.frozen) {
            if k > 0 {
                let mb = p.members.remove(k);
                p.members.insert(0, mb);
            }
        } else {
            p.members.clear();
        }
    }
}

/// One round: walk `rewalk`, plan the groups of `dirty`, fold the profitable ones. Returns
/// what the next round walks and plans, or `None` when nothing was folded.
fn round(
    m: &mut Module,
    ps: &mut PassState,
    opts: &SimilarOptions,
    st: &mut State,
    (rewalk, first): (&[FuncId], bool),
    dirty: &[FuncId],
    report: &mut SimilarReport,
) -> Option<(Vec<FuncId>, Vec<FuncId>)> {
    let t = std::time::Instant::now();
    // Functions walked again changed since: they wait no longer under their old weak hash.
    for &id in rewalk {
        st.unwalk(id);
    }
    for &id in rewalk {
        st.walk(m, ps, id, first);
    }
    if first {
        st.calls.index(st.touched, m.symbols.len());
    }
    if st.debug {
        eprintln!("walked {} in {:?}", rewalk.len(), t.elapsed());
    }
    report.add_time("similar.walk", t);
    let mut folds = Folds::default();
    let mut joined = false;
    if first && !ps.families.is_empty() {
        let t = std::time::Instant::now();
        joined = join_families(m, ps, opts, st, dirty, &mut folds, report);
        report.add_time("similar.join", t);
    }
    let t = std::time::Instant::now();
    // The classes to plan, each once, in the order their functions come.
    st.rounds += 1;
    let mut plans: Vec<Plan> = Vec::new();
    for &f in dirty {
        let Some(w) = st.walked[f] else { continue };
        let seen = &mut st.plan.class_round;
        if seen.len() <= w.class as usize {
            seen.resize(w.class as usize + 1, 0);
        }
        if seen[w.class as usize] == st.rounds {
            continue;
        }
        seen[w.class as usize] = st.rounds;
        if st.live[w.class as usize] < 2 {
            continue; // alone in its class
        }
        st.members(m, w.class);
        if st.plan.members.len() < 2 {
            continue;
        }
        if let Some(p) = plan(m, ps, opts, st, report) {
            plans.push(p);
        }
    }
    // Members whose calls this round rewrites: a group calling them through a parameter waits
    // for the next round, when those calls pass constants to a shared body instead (or
    // when the callee has no code left, which a parameter could not point at).
    let mut rewritten = SymSet::new(st.touched, m.symbols.len());
    for p in &plans {
        for (x, &r) in p.members.iter().zip(&p.rewrite) {
            if r {
                rewritten.insert(x.sym);
            }
        }
    }
    let mut next_dirty: Vec<FuncId> = Vec::new();
    plans.retain(|p| {
        let waits = p
            .values
            .iter()
            .any(|v| matches!(v, Value::Callee(s) if rewritten.contains(*s)));
        if waits {
            next_dirty.extend(p.members.iter().map(|x| x.f));
        }
        !waits
    });
    report.add_time("similar.plan", t);
    if plans.is_empty() && !joined {
        return None;
    }
    // Fold: shared bodies and members first, then every call of a member.
    let t = std::time::Instant::now();
    let mut next_walk: Vec<FuncId> = Vec::new();
    for p in &plans {
        // Members become thunks or go: no member is walked again (a thunk shares nothing).
        let (shared, members) = fold(m, ps, p, st, &mut folds, report);
        next_walk.push(shared);
        for t in members {
            st.unwalk(t);
        }
    }
    report.add_time("similar.fold", t);
    let t = std::time::Instant::now();
    if ps.free_pending(m) {
        report.add_time("similar.free", t);
    }
    let t = std::time::Instant::now();
    rewrite_callers(m, ps, st, &folds, &mut next_walk, report);
    report.add_time("similar.rewrite", t);
    next_dirty.extend_from_slice(&next_walk);
    Some((next_walk, next_dirty))
}

/// The parameter whose type and member values are `(ty, vals)`, added (with the signature
/// `sig` gives) when there is none yet. `rep` is the group's first member.
fn param_for(
    s: &mut Scratch,
    rep: &Function,
    mut ty: ParamType,
    vals: &[Value],
    sig: impl FnOnce() -> Option<Signature>,
) -> usize {
    use core::hash::BuildHasher;
    let h = crate::hash::MidBuildHasher.hash_one(vals);
    let n = vals.len();
    // The parameters with this hash; equal hashes are confirmed on the values, then the
    // types.
    let head = s.by_values.get(&h).copied().unwrap_or(u32::MAX);
    let mut q = head;
    while q != u32::MAX {
        let k = q as usize;
        if s.values[k * n..(k + 1) * n] == *vals && s.params[k].ty.get(rep) == ty.get(rep) {
            return k;
        }
        q = s.params[k].next;
    }
    let k = s.params.len();
    s.params.push(Param {
        ty,
        sig: sig(),
        next: head,
    });
    s.values.extend_from_slice(vals);
    s.by_values.insert(h, k as u32);
    k
}

/// Decide what the group in `st.plan.members` shares and whether it pays. Members compiled
/// before (frozen) only widen what the body shares: where the group does not pay with them,
/// the open members are planned alone.
fn plan(
    m: &Module,
    ps: &PassState,
    opts: &SimilarOptions,
    st: &mut State,
    report: &mut SimilarReport,
) -> Option<Plan> {
    if let Some(p) = plan_members(m, ps, opts, st, report) {
        return Some(p);
    }
    let members = &mut st.plan.members;
    if !members.iter().any(|mb| mb.frozen) {
        return None;
    }
    members.retain(|mb| !mb.frozen);
    if members.len() < 2 {
        return None;
    }
    plan_members(m, ps, opts, st, report)
}

/// `plan` for the members as they are.
fn plan_members(
    m: &Module,
    ps: &PassState,
    opts: &SimilarOptions,
    st: &mut State,
    report: &mut SimilarReport,
) -> Option<Plan> {
    resolve_callees(m, st)?;
    let m0 = st.plan.members[0];
    let rep = &m.functions[m0.f];
    params_of_holes(rep, st)?;
    let s = &st.plan;
    if s.params.is_empty() {
        return None; // exactly equal: `merge`'s job
    }
    let size = rep.inst_count();
    let k = s.params.len();
    if k > (size / 100).max(4) {
        if st.debug {
            eprintln!(
                "group of {} ({}), {} insts: {} params, too many",
                s.members.len(),
                rep.name,
                size,
                k
            );
        }
        report.too_many_params += 1;
        return None;
    }
    let (thunk, rewrite) = thunks_and_rewrites(ps, opts, st, rep, report)?;
    let w = st.walked[m0.f].expect("a member is walked");
    let s = &mut st.plan;
    for q in &mut s.params {
        q.ty.get(rep);
    }
    Some(Plan {
        class: w.class,
        weak: w.weak,
        joins: false,
        members: s.members.clone(),
        params: core::mem::take(&mut s.params),
        values: s.values.clone(),
        const_fate: s.const_fate.clone(),
        callee_fate: s.callee_fate.clone(),
        thunk,
        rewrite,
    })
}

/// The callee of each call of each member (`st.plan.callee_vals`), resolved; `None` if a
/// call to a member of the same group other than itself would make the group call itself
/// through a pointer: not shared.
fn resolve_callees(m: &Module, st: &mut State) -> Option<()> {
    let s = &mut st.plan;
    let callees = &st.callees;
    let n = s.members.len();
    s.group_mark = s.group_mark.wrapping_add(1);
    if s.group_mark == 0 {
        s.group.reset();
        s.group_mark = 1;
    }
    for mb in &s.members {
        s.group.set(mb.sym, s.group_mark);
    }
    let in_group = |g: &SymTable<u32>, mark: u32, t: Symbol| g.get(t) == mark;
    let m0 = s.members[0];
    let nconst = (m0.consts.1 - m0.consts.0) as usize;
    let ncallee = (m0.callees.1 - m0.callees.0) as usize;
    s.callee_vals.clear();
    s.callee_vals.resize(ncallee * n, Value::SelfCall);
    for (j, mb) in s.members.iter().enumerate() {
        if (mb.consts.1 - mb.consts.0) as usize != nconst
            || (mb.callees.1 - mb.callees.0) as usize != ncallee
        {
            return None; // equal skeletons have equal hole counts; defensive
        }
        let calls = &callees[mb.callees.0 as usize..mb.callees.1 as usize];
        for (k, &(c, _)) in calls.iter().enumerate() {
            let t = m.resolve_alias(c);
            let v = if t == mb.sym {
                Value::SelfCall
            } else if in_group(&s.group, s.group_mark, t) || st.folded.contains(t) {
                // A call within the group other than to itself, or to a function folded
                // away (defensive: its calls were all rewritten): not shared.
                return None;
            } else {
                Value::Callee(t)
            };
            s.callee_vals[k * n + j] = v;
        }
    }
    Some(())
}

/// What becomes of each hole of the group (`st.plan`): kept where every member holds the
/// same value, else a parameter (one per distinct vector of values). `None` where some
/// members call themselves at a call and others do not.
fn params_of_holes(rep: &Function, st: &mut State) -> Option<()> {
    let s = &mut st.plan;
    let (consts, callees) = (&st.consts, &st.callees);
    let n = s.members.len();
    let m0 = s.members[0];
    let nconst = (m0.consts.1 - m0.consts.0) as usize;
    let ncallee = (m0.callees.1 - m0.callees.0) as usize;
    s.params.clear();
    s.values.clear();
    s.by_values.clear();
    s.const_fate.clear();
    s.callee_fate.clear();
    for k in 0..nconst {
        let (inst, op, v0) = consts[m0.consts.0 as usize + k];
        let at = |mb: &Member| consts[mb.consts.0 as usize + k].2;
        if s.members.iter().all(|mb| at(mb) == v0) {
            s.const_fate.push(Fate::Keep);
            continue;
        }
        let mut vals = core::mem::take(&mut s.vals);
        vals.clear();
        vals.extend(s.members.iter().map(|mb| Value::Const(at(mb))));
        let q = param_for(s, rep, ParamType::Const(inst, op), &vals, || None);
        s.vals = vals;
        s.const_fate.push(Fate::Param(q));
    }
    let callee_vals = core::mem::take(&mut s.callee_vals);
    for k in 0..ncallee {
        let vals = &callee_vals[k * n..(k + 1) * n];
        let all_self = vals.iter().all(|v| *v == Value::SelfCall);
        if !all_self && vals.contains(&Value::SelfCall) {
            s.callee_vals = callee_vals;
            return None;
        }
        let fate = if vals.iter().all(|v| *v == vals[0]) {
            match vals[0] {
                Value::SelfCall => Fate::SelfCall,
                _ => Fate::Keep,
            }
        } else {
            let (_, inst) = callees[m0.callees.0 as usize + k];
            Fate::Param(param_for(s, rep, ParamType::Known(Type::I64), vals, || {
                Some(rep.sigs[SigRef::from_u32(rep.insts[inst].aux)].clone())
            }))
        };
        s.callee_fate.push(fate);
    }
    s.callee_vals = callee_vals;
    Some(())
}

/// The cost model, in machine-code bytes: each member's body is saved, the shared body is
/// paid once, and each member pays a thunk (if it keeps one) and its call sites pay the
/// set-up of the extra arguments. Per member: whether it keeps a thunk, and whether its
/// callers are rewritten; `None` when the group saves nothing.
///
/// The callers of a member with a thunk may also keep calling the thunk (one jump more at
/// run time, no bytes at the call sites): they are rewritten when the group still saves with
/// them rewritten, so calls go straight to the shared body where it is affordable.
fn thunks_and_rewrites(
    ps: &PassState,
    opts: &SimilarOptions,
    st: &State,
    rep: &Function,
    report: &mut SimilarReport,
) -> Option<(Vec<bool>, Vec<bool>)> {
    let s = &st.plan;
    let size = rep.inst_count();
    let c = &opts.cost;
    let body = body_bytes(c, size);
    let k = s.params.len() as f64;
    // (A frozen member keeps its code; it counts as it would in one batch with the others,
    // so that a family starts where its members, all in one batch, would pay. Starting it
    // costs bytes now, the shared body beside the frozen members' code: it is a bet that
    // more alike functions come, taken only where the next that joins pays it back.)
    let thunk: Vec<bool> = s
        .members
        .iter()
        .map(|mb| mb.named || st.observed.contains(mb.sym))
        .collect();
    let sites = |mb: &Member| call_sites(ps, st, mb.sym);
    // Saved bytes when the thunked members' callers are left alone, and what rewriting them
    // costs.
    let mut saved = -body;
    let mut rewrite_cost = 0.0;
    // What the open members alone save (the frozen ones keep their code).
    let mut saved_open = -body;
    for (mb, &t) in s.members.iter().zip(&thunk) {
        let cost = member_cost(c, t, k, sites(mb));
        saved += body - cost;
        if t {
            rewrite_cost += c.per_extra_arg * k * sites(mb);
        }
        if !mb.frozen {
            saved_open += body - cost;
        }
    }
    let frozen = s.members.iter().any(|mb| mb.frozen);
    // (The next member to join: a thunk, at least.)
    if frozen && saved_open + body - member_cost(c, true, k, 0.0) <= 0.0 {
        report.unprofitable += 1;
        return None;
    }
    let rewrite_thunked = saved - rewrite_cost > 0.0;
    if st.debug {
        eprintln!(
            "group of {} ({}), {} insts, {} params: saves {saved:.0} ({:.0} with callers of \
             thunks rewritten)",
            s.members.len(),
            rep.name,
            size,
            s.params.len(),
            saved - rewrite_cost
        );
    }
    if saved <= 0.0 {
        report.unprofitable += 1;
        return None;
    }
    let rewrite = (thunk.iter().zip(&s.members))
        .map(|(&t, mb)| !mb.frozen && (!t || rewrite_thunked))
        .collect();
    let thunk = (thunk.iter().zip(&s.members))
        .map(|(&t, mb)| t && !mb.frozen)
        .collect();
    Some((thunk, rewrite))
}

/// The cost model's bytes of a body of `size` instructions.
fn body_bytes(c: &CostModel, size: usize) -> f64 {
    c.frame + c.bytes_per_inst * size as f64
}

/// What a member of a group with `k` extra parameters costs in bytes: a thunk passing them,
/// or (none) their set-up at each of its `sites` call sites.
fn member_cost(c: &CostModel, thunk: bool, k: f64, sites: f64) -> f64 {
    match thunk {
        true => c.thunk + c.per_extra_arg * k,
        false => c.per_extra_arg * k * sites,
    }
}

/// The direct calls of `sym`, those of code the module does not hold included.
fn call_sites(ps: &PassState, st: &State, sym: Symbol) -> f64 {
    let external = ps.external_calls.get(sym).copied().unwrap_or(0);
    (st.calls.count(sym) + external as usize) as f64
}

/// What a round's folds leave for rewriting the calls of members.
#[derive(Default)]
struct Folds {
    /// Signatures the rewrites use: of shared bodies and of calls through parameters.
    sigs: Vec<Signature>,
    /// Each member's extra arguments, one after another.
    extras: Vec<Extra>,
    /// Members whose calls call a shared body instead: the shared body, its signature
    /// (in `sigs`) and the member's extra arguments (a range of `extras`).
    calls_to: HashMap<Symbol, (Symbol, u32, (u32, u32))>,
}

/// Build the shared body of a plan, make each member a thunk or fold it away, and record how
/// calls of each member become calls of the shared body.
/// Returns the shared body and the members that kept a body (thunks), to walk again.
fn fold(
    m: &mut Module,
    ps: &mut PassState,
    p: &Plan,
    st: &mut State,
    folds: &mut Folds,
    report: &mut SimilarReport,
) -> (FuncId, Vec<FuncId>) {
    let rep = p.members[0];
    let name = fresh_name(m, "similar", &m.functions[rep.f].name);
    let shared = m.symbol(&name, SymbolKind::Function);
    let tys: Vec<Type> = p.params.iter().map(Param::ty).collect();
    let mut shared_sig = m.functions[rep.f].sig.clone();
    let nparams = shared_sig.params.len();
    shared_sig
        .params
        .extend(tys.iter().map(|&t| AbiParam::new(t)));
    let (shared_ref, extras0) = add_extras(folds, p, shared_sig.clone());
    let extras_of = |j: usize| {
        let a = extras0 + j * tys.len();
        (a as u32, (a + tys.len()) as u32)
    };
    if ps.incremental {
        record_family(m, ps, p, st, (shared, &shared_sig));
    }
    // The shared body: the first member's body. A member that keeps a thunk gives its old
    // body up and gets a new one; one that goes gives it up too (it is removed, and a
    // removed function's body is never read: see `Function::drop_body`).
    let mut s = if p.thunk[0] {
        thunk_member(
            m,
            ps,
            rep.f,
            (shared, shared_ref),
            extras_of(0),
            folds,
            true,
        )
    } else {
        m.functions[rep.f].take_body()
    };
    s.name = name.into();
    s.sig = shared_sig.clone();
    s.linkage = Linkage::Local;
    s.address_significant = false;
    holes_to_params(&mut s, p, st, (shared, shared_sig), (nparams, &tys));
    let sid = m.add_function(s).expect("a fresh name");
    ps.record_edit(sid, Edit::Modified);
    // The shared body's own direct calls (its instructions keep the first member's ids).
    let rep_callees = &st.callees[rep.callees.0 as usize..rep.callees.1 as usize];
    for (&(c, i), fate) in rep_callees.iter().zip(&p.callee_fate) {
        let c = match fate {
            Fate::Keep => c,
            Fate::SelfCall => shared,
            Fate::Param(_) => continue,
        };
        if m.functions[sid].insts[i].opcode != Opcode::TryCall {
            st.calls.push(c, (sid, i));
        }
    }
    // Addresses the extra arguments take are observed from now on.
    for v in &p.values {
        if let Value::Callee(c) = v {
            st.observed.insert(*c);
        }
    }
    report.groups += 1;
    report.params += tys.len();
    let thunks = fold_members(m, ps, p, st, folds, (shared, shared_ref), extras_of, report);
    (sid, thunks)
}

/// The signatures and extra arguments of the calls of `p`'s members to their shared body
/// (signature `shared_sig`), into `folds`: returns the shared body's signature (an index of
/// `folds.sigs`) and the first member's first extra argument (an index of `folds.extras`;
/// member `j`'s follow those of member `j - 1`).
fn add_extras(folds: &mut Folds, p: &Plan, shared_sig: Signature) -> (u32, usize) {
    let n = p.members.len();
    let shared_ref = folds.sigs.len() as u32;
    folds.sigs.push(shared_sig);
    let mut param_sig = Vec::with_capacity(p.params.len());
    for q in &p.params {
        param_sig.push(match &q.sig {
            Some(s) => {
                folds.sigs.push(s.clone());
                folds.sigs.len() as u32 - 1
            }
            None => NO_SIG,
        });
    }
    let extras0 = folds.extras.len();
    for j in 0..n {
        for (q, par) in p.params.iter().enumerate() {
            folds
                .extras
                .push((par.ty(), p.values[q * n + j], param_sig[q]));
        }
    }
    (shared_ref, extras0)
}

/// Keep what a function of a later batch needs to join `p`'s family, whose shared body is
/// `shared` (signature `sig`): its skeleton, the values its members share, and which holes
/// are parameters (`PassState::families`).
fn record_family(
    m: &Module,
    ps: &mut PassState,
    p: &Plan,
    st: &State,
    (shared, sig): (Symbol, &Signature),
) {
    let rep = p.members[0];
    let hole = |fate: &Fate, keep: FamilyHole| match *fate {
        Fate::Keep => keep,
        Fate::Param(q) => FamilyHole::Param(q as u32),
        Fate::SelfCall => FamilyHole::SelfCall,
    };
    let consts = &st.consts[rep.consts.0 as usize..rep.consts.1 as usize];
    let callees = &st.callees[rep.callees.0 as usize..rep.callees.1 as usize];
    let family = Family {
        key: st.table.key_of(p.class),
        tokens: (0, 0),
        shared,
        sig: sig.clone(),
        consts: (p.const_fate.iter().zip(consts))
            .map(|(fate, &(_, _, v))| hole(fate, FamilyHole::Const(v)))
            .collect(),
        callees: (p.callee_fate.iter().zip(callees))
            .map(|(fate, &(c, _))| hole(fate, FamilyHole::Callee(m.resolve_alias(c))))
            .collect(),
        params: p.params.iter().map(|q| (q.ty(), q.sig.clone())).collect(),
    };
    ps.families
        .insert(p.weak, st.table.tokens_of(p.class), family);
}

/// Keep, as seeds of families for later batches (`PassState::seeds`), the functions of this
/// batch that stay on their own (held again, or open and unchanged but for their calls) and
/// that a family could have: walked, with holes.
fn keep_seeds(m: &Module, ps: &mut PassState, st: &mut State) {
    let mut ids = core::mem::take(&mut ps.similar_frozen);
    let open = ids.len();
    ids.extend(ps.open_functions(m).map(|(id, _)| id));
    for (k, &f) in ids.iter().enumerate() {
        if m.removed[f] || (k >= open && ps.edit(f) == Edit::Modified) {
            continue; // merged, or a thunk or shared body
        }
        if st.walked[f].is_none() && st.pending_weak[f].is_some() {
            st.pending_weak[f] = None;
            st.intern(m, f);
        }
        let Some(w) = st.walked[f] else { continue };
        let consts = &st.consts[w.consts.0 as usize..w.consts.1 as usize];
        let callees = &st.callees[w.callees.0 as usize..w.callees.1 as usize];
        let skeleton = (
            w.weak,
            st.table.key_of(w.class),
            st.table.tokens_of(w.class),
        );
        ps.seeds.insert(f, skeleton, consts, callees);
    }
    ids.truncate(open);
    ps.similar_frozen = ids;
}

/// Let the open functions of `dirty` join a family an earlier batch made
/// (`PassState::families`): a function with the family's skeleton and its value at every
/// hole that is no parameter becomes what a member becomes in one batch (a thunk passing its
/// values to the shared body, or folded, its callers passing them), where that saves bytes.
/// The shared body is compiled already and never changes. Returns whether any joined.
fn join_families(
    m: &mut Module,
    ps: &mut PassState,
    opts: &SimilarOptions,
    st: &mut State,
    dirty: &[FuncId],
    folds: &mut Folds,
    report: &mut SimilarReport,
) -> bool {
    let mut joined = false;
    let mut vals: Vec<Option<Value>> = Vec::new();
    for &f in dirty {
        let Some(w) = st.walked[f] else { continue };
        let Some(sym) = m.symbol_of(f) else { continue };
        if m.removed[f] || !ps.families.has_weak(w.weak) {
            continue;
        }
        let (key, tokens) = (st.table.key_of(w.class), st.table.tokens_of(w.class));
        let consts = &st.consts[w.consts.0 as usize..w.consts.1 as usize];
        let callees = &st.callees[w.callees.0 as usize..w.callees.1 as usize];
        let Some(family) = (ps.families.find(w.weak, key, tokens))
            .find(|fam| fits(m, ps, st, fam, sym, (consts, callees), &mut vals))
            .cloned()
        else {
            continue;
        };
        // The cost model of one batch, for this member alone: its body is saved; it pays a
        // thunk, or its call sites pay the extra arguments.
        let c = &opts.cost;
        let body = body_bytes(c, m.functions[f].inst_count());
        let k = family.params.len() as f64;
        let thunk = w.named || st.observed.contains(sym);
        let sites = call_sites(ps, st, sym);
        let saved = body - member_cost(c, thunk, k, sites);
        if saved <= 0.0 {
            continue;
        }
        let rewrite = !thunk || saved - c.per_extra_arg * k * sites > 0.0;
        let plan = Plan {
            class: w.class,
            weak: w.weak,
            joins: true,
            members: vec![Member {
                f,
                sym,
                consts: w.consts,
                callees: w.callees,
                named: w.named,
                frozen: false,
            }],
            params: (family.params.iter())
                .map(|(t, sig)| Param {
                    ty: ParamType::Known(*t),
                    sig: sig.clone(),
                    next: u32::MAX,
                })
                .collect(),
            values: vals
                .iter()
                .map(|v| v.expect("every parameter is set"))
                .collect(),
            const_fate: Vec::new(),
            callee_fate: Vec::new(),
            thunk: vec![thunk],
            rewrite: vec![rewrite],
        };
        // Addresses the extra arguments take are observed from now on.
        for v in &plan.values {
            if let Value::Callee(c) = v {
                st.observed.insert(*c);
            }
        }
        let (shared_ref, extras0) = add_extras(folds, &plan, family.sig.clone());
        let n = plan.params.len();
        let extras = (extras0 as u32, (extras0 + n) as u32);
        fold_members(
            m,
            ps,
            &plan,
            st,
            folds,
            (family.shared, shared_ref),
            |_| extras,
            report,
        );
        st.unwalk(f);
        report.joined += 1;
        joined = true;
    }
    joined
}

/// A constant hole: its instruction, operand and value.
type ConstHole = (Inst, u16, Operand);

/// Does the function of symbol `sym`, whose holes are `consts` and `callees`, fit `family`?
/// Its value for each extra parameter into `vals`.
fn fits(
    m: &Module,
    ps: &PassState,
    st: &State,
    family: &Family,
    sym: Symbol,
    (consts, callees): (&[ConstHole], &[(Symbol, Inst)]),
    vals: &mut Vec<Option<Value>>,
) -> bool {
    if family.consts.len() != consts.len() || family.callees.len() != callees.len() {
        return false;
    }
    vals.clear();
    vals.resize(family.params.len(), None);
    // (A parameter several holes share takes one value.)
    let mut set = |q: u32, v: Value| match &mut vals[q as usize] {
        slot @ None => {
            *slot = Some(v);
            true
        }
        Some(x) => *x == v,
    };
    for (hole, &(_, _, c)) in family.consts.iter().zip(consts) {
        let ok = match *hole {
            FamilyHole::Const(v) => v == c,
            FamilyHole::Param(q) => set(q, Value::Const(c)),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    for (hole, &(c, _)) in family.callees.iter().zip(callees) {
        let t = m.resolve_alias(c);
        let own = t == sym;
        let ok = match *hole {
            FamilyHole::SelfCall => own,
            FamilyHole::Callee(s) => !own && m.resolve_alias(s) == t,
            // (A callee with no code, folded now or before, has no address to pass.)
            FamilyHole::Param(q) => {
                !own && !st.folded.contains(t)
                    && ps.call_rewrite(t).is_none()
                    && set(q, Value::Callee(t))
            }
            FamilyHole::Const(_) => false,
        };
        if !ok {
            return false;
        }
    }
    vals.iter().all(Option::is_some)
}

/// Turn the first member's body `s` into the shared body (symbol `shared`, signature `sig`:
/// the member's `nparams` parameters, then `tys`): the extra parameters, moved into registers at
/// the top of the entry block; holes that became parameters read them; self-calls call the
/// shared body, passing the extra parameters on.
fn holes_to_params(
    s: &mut Function,
    p: &Plan,
    st: &State,
    (shared, sig): (Symbol, Signature),
    (nparams, tys): (usize, &[Type]),
) {
    let rep = p.members[0];
    // Room for that, exactly (`Function::reserve_edit`).
    let entry = s.entry().expect("a body");
    let rep_callees = &st.callees[rep.callees.0 as usize..rep.callees.1 as usize];
    {
        let self_ops: usize = p
            .callee_fate
            .iter()
            .zip(rep_callees)
            .filter(|(fate, _)| matches!(fate, Fate::SelfCall))
            .map(|(_, &(_, inst))| s.operands(inst).len() + tys.len())
            .sum();
        s.reserve_edit(tys.len(), tys.len() + self_ops, tys.len(), 1);
        s.reserve_block_edit(entry, tys.len());
    }
    let mut regs = Vec::with_capacity(tys.len());
    for (k, &t) in tys.iter().enumerate() {
        let r = s.new_reg(t);
        let i = s.make_inst(Opcode::Copy, t, &[r], &[Operand::Arg((nparams + k) as u32)]);
        s.insert_inst(entry, k, i);
        regs.push(r);
    }
    for (k, fate) in p.const_fate.iter().enumerate() {
        if let Fate::Param(q) = *fate {
            let (inst, op, _) = st.consts[rep.consts.0 as usize + k];
            s.set_operand(inst, op as usize, Operand::Reg(regs[q]));
        }
    }
    let self_sig = s.sigs.push(sig);
    let mut ops: Vec<Operand> = Vec::new();
    for (k, fate) in p.callee_fate.iter().enumerate() {
        let (_, inst) = rep_callees[k];
        match *fate {
            Fate::Keep => {}
            Fate::Param(q) => s.set_operand(inst, 0, Operand::Reg(regs[q])),
            Fate::SelfCall => {
                ops.clear();
                ops.extend(s.operands(inst));
                ops[0] = Operand::Sym(shared, 0);
                ops.extend(regs.iter().map(|&r| Operand::Reg(r)));
                s.set_operands(inst, &ops);
                s.insts[inst].aux = self_sig.as_u32();
            }
        }
    }
}

/// Each member of `p`: a thunk passing the member's values to the shared body (`shared`,
/// its signature `shared_ref` in `folds`), or nothing; its calls are rewritten later where
/// the plan says so. `extras_of(j)` is member `j`'s range of `folds.extras`. Returns the
/// members that kept a body (thunks).
#[allow(clippy::too_many_arguments)]
fn fold_members(
    m: &mut Module,
    ps: &mut PassState,
    p: &Plan,
    st: &mut State,
    folds: &mut Folds,
    (shared, shared_ref): (Symbol, u32),
    extras_of: impl Fn(usize) -> (u32, u32),
    report: &mut SimilarReport,
) -> Vec<FuncId> {
    let mut thunks = Vec::new();
    // (When the shared body was made of the first member's body, `fold` made its thunk.)
    let made_of_first = !p.joins;
    for (j, mb) in p.members.iter().enumerate() {
        if mb.frozen {
            continue; // compiled: it keeps its code
        }
        let (thunk, rewrite) = (p.thunk[j], p.rewrite[j]);
        let (a, b) = extras_of(j);
        let kind = if thunk {
            if j > 0 || !made_of_first {
                // Its old body is dropped; the thunk is built in its tables.
                thunk_member(m, ps, mb.f, (shared, shared_ref), (a, b), folds, false);
            }
            // The thunk's call of the shared body.
            let t = &m.functions[mb.f];
            if let Some(&i) = t.layout.first().and_then(|&b| {
                t.block_insts(b)
                    .iter()
                    .find(|&&i| t.insts[i].opcode.is_call())
            }) {
                st.calls.push(shared, (mb.f, i));
            }
            thunks.push(mb.f);
            report.thunks += 1;
            MergeKind::Thunked
        } else {
            ps.remove_function(m, mb.f);
            m.symbols[mb.sym].def = None.into();
            st.folded.insert(mb.sym);
            MergeKind::Folded
        };
        report.merged += 1;
        ps.merges.push(MergeRecord {
            merged: mb.sym,
            survivor: shared,
            kind,
            by: MergedBy::Similar,
            callers_redirected: false,
        });
        if rewrite {
            let to = (shared, shared_ref, (a, b));
            folds.calls_to.insert(mb.sym, to);
        }
    }
    thunks
}

/// Make member `f` a thunk calling the shared body `shared` (signature `sig` in `folds`) with
/// the extra arguments `extras` (a range of `folds.extras`); returns its old body (see
/// `make_thunk_with` for `keep_old`).
fn thunk_member(
    m: &mut Module,
    ps: &mut PassState,
    f: FuncId,
    (shared, sig): (Symbol, u32),
    (a, b): (u32, u32),
    folds: &Folds,
    keep_old: bool,
) -> Function {
    let (extras, sigs) = (&folds.extras[a as usize..b as usize], &folds.sigs);
    let call_sig = sigs[sig as usize].clone();
    make_thunk_with(
        m,
        ps,
        f,
        (shared, call_sig),
        extras.len(),
        keep_old,
        |t, b, ops| make_extras(t, extras, sigs, ops, |t, i| t.append_inst(b, i)),
    )
}

/// Every direct call (`call`, `tail_call`) of a folded member now calls its shared body with
/// the member's extra arguments. The callers changed are added to `changed`.
fn rewrite_callers(
    m: &mut Module,
    ps: &mut PassState,
    st: &mut State,
    folds: &Folds,
    changed: &mut Vec<FuncId>,
    report: &mut SimilarReport,
) {
    let mut members: Vec<Symbol> = folds.calls_to.keys().copied().collect();
    members.sort_unstable();
    for &member in &members {
        let (shared, sig, (a, b)) = folds.calls_to[&member];
        let extras = folds.extras[a as usize..b as usize]
            .iter()
            .map(|&(ty, v, sig)| match v {
                Value::Const(c) => ExtraArg::Const(ty, c),
                Value::Callee(s) => ExtraArg::FuncAddr(s, folds.sigs[sig as usize].clone()),
                Value::SelfCall => unreachable!("self-calls are not parameters"),
            })
            .collect();
        ps.add_call_rewrite(
            member,
            CallRewrite {
                shared,
                sig: folds.sigs[sig as usize].clone(),
                extras,
            },
        );
    }
    // The call sites to rewrite, member by member, each with its member; then each rewrite,
    // with the next callers on their way into the cache.
    let mut edits: Vec<(Symbol, Site)> = Vec::new();
    let mut sites: Vec<Site> = Vec::new();
    for &member in &members {
        sites.clear();
        st.calls.take(member, &mut sites);
        edits.extend(sites.iter().map(|&s| (member, s)));
    }
    let mut seen: HashSet<FuncId> = changed.iter().copied().collect();
    // What the rewrites add to each caller, so that its tables grow once and exactly
    // (`Function::reserve_edit`): per call, an instruction, register and operand per extra
    // argument, the call's new operand list, its signature and those of the addresses.
    let mut needs: HashMap<FuncId, [usize; 4]> = HashMap::default();
    for &(member, (id, i)) in &edits {
        let f = &m.functions[id];
        if m.removed[id] || !is_call_of(f, i, member) {
            continue;
        }
        let (_, _, (a, b)) = folds.calls_to[&member];
        let extras = &folds.extras[a as usize..b as usize];
        let addrs = extras.iter().filter(|e| e.2 != NO_SIG).count();
        let n = needs.entry(id).or_default();
        n[0] += extras.len();
        n[1] += 2 * extras.len() + f.operands(i).len();
        n[2] += extras.len();
        n[3] += 1 + addrs;
    }
    // The block of each site, from one walk of each caller's layout (a search from the top
    // per site would cost sites × caller size).
    let mut block_of: Vec<Option<Block>> = vec![None; edits.len()];
    {
        let mut order: Vec<usize> = (0..edits.len()).collect();
        order.sort_by_key(|&k| edits[k].1 .0);
        let mut want: HashMap<Inst, Option<Block>> = HashMap::default();
        for run in order.chunk_by(|&x, &y| edits[x].1 .0 == edits[y].1 .0) {
            let id = edits[run[0]].1 .0;
            if m.removed[id] {
                continue;
            }
            want.clear();
            for &k in run {
                want.insert(edits[k].1 .1, None);
            }
            let f = &m.functions[id];
            for &b in &f.layout {
                for &i in f.block_insts(b) {
                    if let Some(slot) = want.get_mut(&i) {
                        *slot = Some(b);
                    }
                }
            }
            for &k in run {
                block_of[k] = want[&edits[k].1 .1];
            }
        }
    }
    // The instructions made for the extra arguments, (caller, block, before, new), placed
    // block by block once every call is rewritten.
    let mut placed: Vec<(FuncId, Block, Inst, Inst)> = Vec::new();
    let mut pending: Vec<(Inst, Inst)> = Vec::new();
    let (mut regs, mut ops) = (Vec::new(), Vec::new());
    for (k, &(member, (id, i))) in edits.iter().enumerate() {
        if m.removed[id] {
            continue;
        }
        let (shared, sig, (a, b)) = folds.calls_to[&member];
        let extras = &folds.extras[a as usize..b as usize];
        let f = &mut m.functions[id];
        // The index may be stale (a body replaced by a thunk): check the call is there.
        let Some(b) = block_of[k].filter(|_| is_call_of(f, i, member)) else {
            continue;
        };
        if let Some([insts, operands, nregs, sigs]) = needs.remove(&id) {
            f.reserve_edit(insts, operands, nregs, sigs);
        }
        regs.clear();
        pending.clear();
        materialize_before(f, i, extras, &folds.sigs, &mut regs, &mut pending);
        placed.extend(pending.iter().map(|&(before, new)| (id, b, before, new)));
        call_shared(
            f,
            i,
            shared,
            folds.sigs[sig as usize].clone(),
            &regs,
            &mut ops,
        );
        ps.record_edit(id, Edit::CallsRewritten);
        st.calls.push(shared, (id, i));
        if seen.insert(id) {
            changed.push(id);
        }
        report.callers_rewritten += 1;
    }
    // Each block's new instructions at once, before their calls (a stable sort: those
    // before one call keep their order).
    placed.sort_by_key(|&(id, b, ..)| (id, b));
    let mut scratch: Vec<Inst> = Vec::new();
    for run in placed.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
        let (id, b) = (run[0].0, run[0].1);
        pending.clear();
        pending.extend(run.iter().map(|&(_, _, before, new)| (before, new)));
        m.functions[id].insert_before_each(b, &mut pending, &mut scratch);
    }
}

/// Whether instruction `i` of `f` is a direct call (`call`, `tail_call`) of `member` (a call
/// site recorded earlier may be stale: the body replaced by a thunk).
fn is_call_of(f: &Function, i: Inst, member: Symbol) -> bool {
    matches!(
        f.insts.get(i).map(|d| d.opcode),
        Some(Opcode::Call | Opcode::TailCall)
    ) && f.operands(i).first() == Some(Operand::Sym(member, 0))
}
