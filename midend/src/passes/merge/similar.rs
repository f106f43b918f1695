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

use super::exact::make_thunk_with;
use super::walk::{function_hashes, mix, HashScratch, ShapeTable, WalkOut};
use crate::hash::{finish, HashMap, HashSet};
use crate::lir::*;
use cranelift_entity::packed_option::PackedOption;

/// Machine-code bytes, as the cost model counts them (calibrated on Cranelift's x86-64 output
/// at opt level none; BENCHMARKS.md).
#[derive(Clone, Copy, Debug)]
pub struct CostModel {
    /// Bytes per LIR instruction of a body.
    pub bytes_per_inst: f64,
    /// Prologue and epilogue of a function.
    pub frame: f64,
    /// A thunk besides its extra arguments (moves of the arguments it passes on, the jump or
    /// call).
    pub thunk: f64,
    /// Setting up one extra argument (a constant or a function address) at a call site.
    pub per_extra_arg: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            bytes_per_inst: 4.3,
            frame: 12.0,
            thunk: 16.0,
            per_extra_arg: 8.0,
        }
    }
}

/// Options of the pass.
#[derive(Clone, Copy, Debug)]
pub struct SimilarOptions {
    /// Rounds at most (a round folds groups whose differing callees are final).
    pub max_rounds: usize,
    pub cost: CostModel,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        SimilarOptions {
            max_rounds: 4,
            cost: CostModel::default(),
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
    /// Groups not folded: too many parameters, not profitable, waiting on other groups.
    pub too_many_params: usize,
    pub unprofitable: usize,
    pub rounds: usize,
    /// Wall time of each phase: the scan, walks, plans, folds and caller rewrites.
    pub times: Vec<(&'static str, std::time::Duration)>,
}

impl SimilarReport {
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
    pub opts: SimilarOptions,
}

impl crate::pass::Pass for MergeSimilar {
    fn name(&self) -> &'static str {
        "merge-similar"
    }
    fn run(&mut self, m: &mut Module, stats: &mut crate::Stats) -> Result<(), crate::Error> {
        let r = merge_similar(m, self.opts);
        stats.add("merged_similar", r.merged as u64);
        stats.add("similar.groups", r.groups as u64);
        stats.add("similar.params", r.params as u64);
        stats.add("similar.thunks", r.thunks as u64);
        stats.add("similar.callers_rewritten", r.callers_rewritten as u64);
        stats.add("similar.too_many_params", r.too_many_params as u64);
        stats.add("similar.unprofitable", r.unprofitable as u64);
        for (phase, d) in r.times {
            stats.add_time(phase, d);
        }
        Ok(())
    }
}

/// The value a hole position holds in one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Value {
    Const(Operand),
    Callee(Symbol),
    /// A call of the member to itself.
    SelfCall,
}

/// One function of a group: its holes (constants, then callees), in walk order.
struct Member {
    f: FuncId,
    sym: Symbol,
    consts: Vec<(Inst, u16, Operand)>,
    callees: Vec<(Symbol, Inst)>,
}

/// An extra parameter of a shared body: its type, each member's value, and for a callee
/// the signature of the calls through it.
struct Param {
    ty: Type,
    values: Vec<Value>,
    sig: Option<Signature>,
}

/// How to set up one extra argument: its type, the value, and for a function address the
/// signature of the calls it serves.
type Extra = (Type, Value, Option<Signature>);

/// What becomes of a hole position.
#[derive(Clone, Copy)]
enum Fate {
    Keep,
    Param(usize),
    SelfCall,
}

struct Plan {
    members: Vec<Member>,
    params: Vec<Param>,
    const_fate: Vec<Fate>,
    callee_fate: Vec<Fate>,
    /// Per member: it keeps a thunk.
    thunk: Vec<bool>,
    /// Per member: its direct callers are rewritten to call the shared body (always for a
    /// member with no code left; for one with a thunk, when the bytes allow).
    rewrite: Vec<bool>,
}

/// Run `merge-similar` over the open functions of `m`.
pub fn merge_similar(m: &mut Module, opts: SimilarOptions) -> SimilarReport {
    let mut report = SimilarReport::default();
    if m.open_functions().nth(1).is_none() {
        return report; // a group needs two functions (a lazy JIT's batch of one has none)
    }
    let mut st = State::new(m);
    // The functions a round walks, and those whose groups it plans: every open function at
    // first; then those the last round changed or deferred, and the shared bodies it made.
    let mut dirty: Vec<FuncId> = m.open_function_ids();
    let mut rewalk = dirty.clone();
    for k in 0..opts.max_rounds.max(1) {
        report.rounds += 1;
        match round(m, &opts, &mut st, (&rewalk, k == 0), &dirty, &mut report) {
            Some((w, d)) => (rewalk, dirty) = (w, d),
            None => break,
        }
    }
    report
}

/// What the rounds keep: skeleton classes of the walked functions, with their holes; which
/// functions are observed; the direct calls of each function.
struct State {
    table: ShapeTable,
    /// Per walked function: its skeleton class and its holes (ranges of the stores).
    walked: OpenMap<Option<Walked>>,
    /// The functions of each class as a list through `next` (newest first; entries whose
    /// class changed since are skipped).
    head: Vec<PackedOption<FuncId>>,
    next: OpenMap<PackedOption<FuncId>>,
    /// The merges recorded before this pass (later ones are this pass's).
    merges_start: usize,
    consts: Vec<(Inst, u16, Operand)>,
    callees: Vec<(Symbol, Inst)>,
    /// Functions whose address is observable (taken, or called by `try_call`).
    observed: HashSet<Symbol>,
    /// The direct calls (`call`, `tail_call`) of each function: (caller, call).
    calls: HashMap<Symbol, Vec<(FuncId, Inst)>>,
    scratch: HashScratch,
    out: WalkOut,
}

/// Per-function data for the open functions (ids from `base` on), growing as functions are
/// added: tables that cost in proportion to the open functions, not to the module.
struct OpenMap<T> {
    base: u32,
    data: Vec<T>,
    /// What an entry never written reads as.
    default: T,
}

impl<T: Clone + Default> OpenMap<T> {
    fn new(base: u32) -> Self {
        OpenMap {
            base,
            data: Vec::new(),
            default: T::default(),
        }
    }
}

impl<T: Clone + Default> core::ops::Index<FuncId> for OpenMap<T> {
    type Output = T;
    fn index(&self, f: FuncId) -> &T {
        self.data
            .get((f.as_u32() - self.base) as usize)
            .unwrap_or(&self.default)
    }
}

impl<T: Clone + Default> core::ops::IndexMut<FuncId> for OpenMap<T> {
    fn index_mut(&mut self, f: FuncId) -> &mut T {
        let k = (f.as_u32() - self.base) as usize;
        if k >= self.data.len() {
            self.data.resize(k + 1, T::default());
        }
        &mut self.data[k]
    }
}

#[derive(Clone, Copy)]
struct Walked {
    class: u32,
    consts: (u32, u32),
    callees: (u32, u32),
}

impl State {
    fn new(m: &Module) -> State {
        State {
            table: ShapeTable::with_capacity(m.functions.len() - m.first_open as usize),
            walked: OpenMap::new(m.first_open),
            head: Vec::new(),
            next: OpenMap::new(m.first_open),
            merges_start: m.merges.len(),
            consts: Vec::new(),
            callees: Vec::new(),
            observed: HashSet::default(),
            calls: HashMap::default(),
            scratch: HashScratch::default(),
            out: WalkOut {
                similar: true,
                ..Default::default()
            },
        }
    }

    /// Walk `id` (again) and class its skeleton. The first walk of a function also records
    /// the addresses it observes and its direct calls.
    fn walk(&mut self, m: &Module, id: FuncId, first: bool) {
        self.walked[id] = None;
        let f = &m.functions[id];
        if m.removed[id] || f.entry().is_none() {
            return;
        }
        let out = &mut self.out;
        out.tokens.clear();
        out.callees.clear();
        out.holes.clear();
        out.taken.clear();
        let (weak, local) = function_hashes(f, &mut self.scratch, out);
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
                    self.calls.entry(s).or_default().push((id, i));
                }
            }
        }
        if f.inst_count() < 3 || f.linkage == Linkage::Preemptible {
            return; // a thunk or a stub (nothing to share), or left alone
        }
        if out.holes.is_empty() && out.callees.is_empty() {
            return; // equal ones were merged exactly
        }
        if self.table.tokens_reserved() == 0 {
            // Room for a stream per walked function or so: one allocation, no regrowth.
            let open = m.functions.len() - m.first_open as usize;
            self.table.reserve_tokens(out.tokens.len() * open);
        }
        let class = self.table.intern(finish(mix(weak, local)), &out.tokens);
        let c0 = self.consts.len() as u32;
        self.consts.extend_from_slice(&out.holes);
        let k0 = self.callees.len() as u32;
        self.callees.extend_from_slice(&out.callees);
        self.walked[id] = Some(Walked {
            class,
            consts: (c0, self.consts.len() as u32),
            callees: (k0, self.callees.len() as u32),
        });
        if self.head.len() <= class as usize {
            self.head.resize(class as usize + 1, None.into());
        }
        self.next[id] = self.head[class as usize];
        self.head[class as usize] = id.into();
    }

    /// The current members of `class`, with their holes.
    fn members(&self, m: &Module, class: u32) -> Vec<Member> {
        let mut v: Vec<Member> = Vec::new();
        let mut cur = self.head.get(class as usize).and_then(|h| h.expand());
        while let Some(f) = cur {
            cur = self.next[f].expand();
            let Some(w) = self.walked[f] else { continue };
            if w.class != class || v.iter().any(|x| x.f == f) {
                continue;
            }
            let Some(sym) = m.symbol_of(f) else { continue };
            v.push(Member {
                f,
                sym,
                consts: self.consts[w.consts.0 as usize..w.consts.1 as usize].to_vec(),
                callees: self.callees[w.callees.0 as usize..w.callees.1 as usize].to_vec(),
            });
        }
        v
    }

    fn call_count(&self, s: Symbol) -> usize {
        self.calls.get(&s).map_or(0, |v| v.len())
    }
}

/// One round: walk `rewalk`, plan the groups of `dirty`, fold the profitable ones. Returns
/// what the next round walks and plans, or `None` when nothing was folded.
fn round(
    m: &mut Module,
    opts: &SimilarOptions,
    st: &mut State,
    (rewalk, first): (&[FuncId], bool),
    dirty: &[FuncId],
    report: &mut SimilarReport,
) -> Option<(Vec<FuncId>, Vec<FuncId>)> {
    let t = std::time::Instant::now();
    for (k, &id) in rewalk.iter().enumerate() {
        m.prefetch_ahead(rewalk, k);
        st.walk(m, id, first);
    }
    if std::env::var_os("MERGELIFT_DEBUG_SIMILAR").is_some() {
        eprintln!("walked {} in {:?}", rewalk.len(), t.elapsed());
    }
    report.add_time("similar.walk", t);
    let t = std::time::Instant::now();
    let folded = folded_symbols(m, st.merges_start);
    // The classes to plan, each once, in the order their functions come.
    let mut seen_class: HashSet<u32> = HashSet::default();
    let mut plans: Vec<Plan> = Vec::new();
    for &f in dirty {
        let Some(w) = st.walked[f] else { continue };
        if !seen_class.insert(w.class) {
            continue;
        }
        let members = st.members(m, w.class);
        if members.len() < 2 {
            continue;
        }
        if let Some(p) = plan(m, members, opts, st, &folded, report) {
            plans.push(p);
        }
    }
    // Members whose calls this round rewrites: a group calling them through a parameter waits
    // for the next round, when those calls pass constants to a shared body instead (or
    // when the callee has no code left, which a parameter could not point at).
    let rewritten: HashSet<Symbol> = plans
        .iter()
        .flat_map(|p| {
            p.members
                .iter()
                .zip(&p.rewrite)
                .filter(|(_, &r)| r)
                .map(|(x, _)| x.sym)
        })
        .collect();
    let mut next_dirty: Vec<FuncId> = Vec::new();
    plans.retain(|p| {
        let waits = p.params.iter().any(|q| {
            q.values
                .iter()
                .any(|v| matches!(v, Value::Callee(s) if rewritten.contains(s)))
        });
        if waits {
            next_dirty.extend(p.members.iter().map(|x| x.f));
        }
        !waits
    });
    report.add_time("similar.plan", t);
    if plans.is_empty() {
        return None;
    }
    // Fold: shared bodies and members first, then every call of a member.
    let t = std::time::Instant::now();
    let mut next_walk: Vec<FuncId> = Vec::new();
    let mut calls_to: HashMap<Symbol, (Symbol, Vec<Extra>)> = HashMap::default();
    for p in plans {
        // Members become thunks or go: no member is walked again (a thunk shares nothing).
        let (shared, members) = fold(m, p, st, &mut calls_to, report);
        next_walk.push(shared);
        for t in members {
            st.walked[t] = None;
        }
    }
    report.add_time("similar.fold", t);
    let t = std::time::Instant::now();
    rewrite_callers(m, st, &calls_to, &mut next_walk, report);
    report.add_time("similar.rewrite", t);
    next_dirty.extend_from_slice(&next_walk);
    Some((next_walk, next_dirty))
}

/// Decide what a group shares and whether it pays.
fn plan(
    m: &Module,
    members: Vec<Member>,
    opts: &SimilarOptions,
    st: &State,
    folded: &HashSet<Symbol>,
    report: &mut SimilarReport,
) -> Option<Plan> {
    let group: HashSet<Symbol> = members.iter().map(|x| x.sym).collect();
    let nconst = members[0].consts.len();
    let ncallee = members[0].callees.len();
    // The callee of each call, resolved; a call to a member of the same group other than
    // itself would make the group call itself through a pointer: not shared.
    let mut callee_vals: Vec<Vec<Value>> = vec![Vec::with_capacity(members.len()); ncallee];
    for mb in &members {
        if mb.consts.len() != nconst || mb.callees.len() != ncallee {
            return None; // equal skeletons have equal hole counts; defensive
        }
        for (k, &(s, _)) in mb.callees.iter().enumerate() {
            let t = m.resolve_alias(s);
            let v = if t == mb.sym {
                Value::SelfCall
            } else if group.contains(&t) || folded.contains(&t) {
                // A call within the group other than to itself, or to a function folded
                // away (defensive: its calls were all rewritten): not shared.
                return None;
            } else {
                Value::Callee(t)
            };
            callee_vals[k].push(v);
        }
    }
    let mut params: Vec<Param> = Vec::new();
    let mut by_values: HashMap<(Type, Vec<Value>), usize> = HashMap::default();
    let mut fate_of =
        |ty: Type, values: Vec<Value>, sig: Option<Signature>, params: &mut Vec<Param>| -> Fate {
            if values.iter().all(|v| *v == values[0]) {
                return match values[0] {
                    Value::SelfCall => Fate::SelfCall,
                    _ => Fate::Keep,
                };
            }
            if values.contains(&Value::SelfCall) {
                // Some members call themselves there, others another function: make it a
                // pointer to the callee, the member itself for the self-callers. Not shared.
                return Fate::Keep;
            }
            let key = (ty, values);
            if let Some(&p) = by_values.get(&key) {
                return Fate::Param(p);
            }
            params.push(Param {
                ty,
                values: key.1.clone(),
                sig,
            });
            by_values.insert(key, params.len() - 1);
            Fate::Param(params.len() - 1)
        };
    let rep = &m.functions[members[0].f];
    let mut const_fate = Vec::with_capacity(nconst);
    for k in 0..nconst {
        let (inst, op, _) = members[0].consts[k];
        let ty = rep.constant_type(inst, op as usize);
        let values = members
            .iter()
            .map(|x| Value::Const(x.consts[k].2))
            .collect();
        const_fate.push(fate_of(ty, values, None, &mut params));
    }
    let mut callee_fate = Vec::with_capacity(ncallee);
    for (k, vals) in callee_vals.into_iter().enumerate() {
        let self_mixed =
            vals.contains(&Value::SelfCall) && !vals.iter().all(|v| *v == Value::SelfCall);
        if self_mixed {
            return None;
        }
        let (_, inst) = members[0].callees[k];
        let sig = rep.sigs[SigRef::from_u32(rep.insts[inst].aux)].clone();
        callee_fate.push(fate_of(Type::I64, vals, Some(sig), &mut params));
    }
    if params.is_empty() {
        return None; // exactly equal: `merge`'s job
    }
    let size = rep.inst_count();
    if params.len() > (size / 100).max(4) {
        if std::env::var_os("MERGELIFT_DEBUG_SIMILAR").is_some() {
            eprintln!(
                "group of {} ({}), {} insts: {} params, too many",
                members.len(),
                m.functions[members[0].f].name,
                size,
                params.len()
            );
        }
        report.too_many_params += 1;
        return None;
    }
    // The cost model, in machine-code bytes: each member's body is saved, the shared body is
    // paid once, and each member pays a thunk (if it keeps one) and its call sites pay the
    // set-up of the extra arguments.
    //
    // The callers of a member with a thunk may also keep calling the thunk (one jump more at
    // run time, no bytes at the call sites): they are rewritten when the group still saves
    // with them rewritten, so calls go straight to the shared body where it is affordable.
    let c = &opts.cost;
    let body = c.frame + c.bytes_per_inst * size as f64;
    let k = params.len() as f64;
    let thunk: Vec<bool> = members
        .iter()
        .map(|mb| keeps_thunk(&m.functions[mb.f], mb.sym, &st.observed))
        .collect();
    let sites = |mb: &Member| st.call_count(mb.sym) as f64;
    // Saved bytes when the thunked members' callers are left alone, and what rewriting them
    // costs.
    let mut saved = -body;
    let mut rewrite_cost = 0.0;
    for (mb, &t) in members.iter().zip(&thunk) {
        saved += body;
        if t {
            saved -= c.thunk + c.per_extra_arg * k;
            rewrite_cost += c.per_extra_arg * k * sites(mb);
        } else {
            saved -= c.per_extra_arg * k * sites(mb);
        }
    }
    let rewrite_thunked = saved - rewrite_cost > 0.0;
    if std::env::var_os("MERGELIFT_DEBUG_SIMILAR").is_some() {
        eprintln!(
            "group of {} ({}), {} insts, {} params: saves {saved:.0} ({:.0} with callers of \
             thunks rewritten)",
            members.len(),
            m.functions[members[0].f].name,
            size,
            params.len(),
            saved - rewrite_cost
        );
    }
    if saved <= 0.0 {
        report.unprofitable += 1;
        return None;
    }
    let rewrite = thunk.iter().map(|&t| !t || rewrite_thunked).collect();
    Some(Plan {
        members,
        params,
        const_fate,
        callee_fate,
        thunk,
        rewrite,
    })
}

/// Does this member keep a thunk of its own (its address or name is observable)?
fn keeps_thunk(f: &Function, sym: Symbol, observed: &HashSet<Symbol>) -> bool {
    f.linkage != Linkage::Local || f.address_significant || observed.contains(&sym)
}

/// The symbols folded away by earlier rounds of this pass (no code left).
fn folded_symbols(m: &Module, since: usize) -> HashSet<Symbol> {
    m.merges[since..]
        .iter()
        .filter(|r| r.kind == MergeKind::Folded)
        .map(|r| r.merged)
        .collect()
}

/// A fresh name for a shared body.
fn shared_name(m: &Module, base: &str) -> String {
    let mut k = m.functions.len();
    loop {
        let name = format!("__mergelift_similar.{base}.{k}");
        if m.lookup_symbol(&name).is_none() {
            return name;
        }
        k += 1;
    }
}

/// Build the shared body of a plan, make each member a thunk or fold it away, and record how
/// calls of each member become calls of the shared body.
/// Returns the shared body and the members that kept a body (thunks), to walk again.
fn fold(
    m: &mut Module,
    p: Plan,
    st: &mut State,
    calls_to: &mut HashMap<Symbol, (Symbol, Vec<Extra>)>,
    report: &mut SimilarReport,
) -> (FuncId, Vec<FuncId>) {
    let rep = &p.members[0];
    let mut s = m.functions[rep.f].clone();
    s.name = shared_name(m, &m.functions[rep.f].name);
    s.linkage = Linkage::Local;
    s.address_significant = false;
    s.modified = true;
    s.frozen = false;
    let nparams = s.sig.params.len();
    let tys: Vec<Type> = p.params.iter().map(|q| q.ty).collect();
    for &t in &tys {
        s.sig.params.push(AbiParam::new(t));
    }
    // The extra parameters, moved into registers at the top of the entry block.
    let entry = s.entry().expect("a body");
    let mut regs = Vec::with_capacity(tys.len());
    for (k, &t) in tys.iter().enumerate() {
        let r = s.new_reg(t);
        let i = s.make_inst(Opcode::Copy, t, &[r], &[Operand::Arg((nparams + k) as u32)]);
        s.insert_inst(entry, k, i);
        regs.push(r);
    }
    let shared_sig = s.sig.clone();
    // Holes that became parameters read them; self-calls call the shared body, passing the
    // extra parameters on.
    for (k, fate) in p.const_fate.iter().enumerate() {
        if let Fate::Param(q) = *fate {
            let (inst, op, _) = rep.consts[k];
            s.operands_mut(inst)[op as usize] = Operand::Reg(regs[q]);
        }
    }
    let shared = m.symbol(&s.name, SymbolKind::Function);
    let self_sig = s.sigs.push(shared_sig.clone());
    for (k, fate) in p.callee_fate.iter().enumerate() {
        let (_, inst) = rep.callees[k];
        match *fate {
            Fate::Keep => {}
            Fate::Param(q) => s.operands_mut(inst)[0] = Operand::Reg(regs[q]),
            Fate::SelfCall => {
                let mut ops: Vec<Operand> = s.operands(inst).to_vec();
                ops[0] = Operand::Sym(shared, 0);
                ops.extend(regs.iter().map(|&r| Operand::Reg(r)));
                s.set_operands(inst, &ops);
                s.insts[inst].aux = self_sig.as_u32();
            }
        }
    }
    // The shared body's own direct calls (a clone's instructions keep their ids).
    let kept_calls: Vec<(Symbol, Inst)> = rep
        .callees
        .iter()
        .zip(&p.callee_fate)
        .filter_map(|(&(c, i), fate)| match fate {
            Fate::Keep => Some((c, i)),
            Fate::SelfCall => Some((shared, i)),
            Fate::Param(_) => None,
        })
        .collect();
    let sid = m.add_function(s).expect("a fresh name");
    for (c, i) in kept_calls {
        if m.functions[sid].insts[i].opcode != Opcode::TryCall {
            st.calls.entry(c).or_default().push((sid, i));
        }
    }
    // Addresses the extra arguments take are observed from now on.
    for q in &p.params {
        for v in &q.values {
            if let Value::Callee(c) = v {
                st.observed.insert(*c);
            }
        }
    }
    report.groups += 1;
    report.params += tys.len();
    let mut thunks = Vec::new();
    // Members: a thunk passing the member's values, or nothing.
    for (j, mb) in p.members.iter().enumerate() {
        let (thunk, rewrite) = (p.thunk[j], p.rewrite[j]);
        let extras: Vec<Extra> = p
            .params
            .iter()
            .map(|q| (q.ty, q.values[j], q.sig.clone()))
            .collect();
        let kind = if thunk {
            let e = extras.clone();
            make_thunk_with(m, mb.f, shared, shared_sig.clone(), move |t, b| {
                let n = t.block_insts(b).len();
                materialize(t, b, n, &e).0
            });
            // The thunk's call of the shared body.
            let t = &m.functions[mb.f];
            if let Some(&i) = t.layout.first().and_then(|&b| {
                t.block_insts(b)
                    .iter()
                    .find(|&&i| t.insts[i].opcode.is_call())
            }) {
                st.calls.entry(shared).or_default().push((mb.f, i));
            }
            thunks.push(mb.f);
            report.thunks += 1;
            MergeKind::Thunked
        } else {
            m.removed[mb.f] = true;
            m.symbols[mb.sym].def = None.into();
            MergeKind::Folded
        };
        report.merged += 1;
        m.merges.push(MergeRecord {
            merged: mb.sym,
            survivor: shared,
            kind,
            callers_redirected: false,
        });
        if rewrite {
            calls_to.insert(mb.sym, (shared, extras));
        }
    }
    (sid, thunks)
}

/// Materialise the extra arguments of a call in `f` before position `pos` of block `b`:
/// returns the registers holding them and how many instructions were inserted.
fn materialize(f: &mut Function, b: Block, pos: usize, extras: &[Extra]) -> (Vec<Operand>, usize) {
    let mut ops = Vec::with_capacity(extras.len());
    let mut n = 0;
    for (ty, v, sig) in extras {
        let (ty, v) = (*ty, *v);
        let r = f.new_reg(ty);
        let i = match v {
            Value::Const(c) => f.make_inst(Opcode::Copy, ty, &[r], &[c]),
            Value::Callee(s) => {
                // The address of the callee, declared with the signature of its calls.
                let sig = f
                    .sigs
                    .push(sig.clone().expect("a callee parameter has a signature"));
                let i = f.make_inst(Opcode::FuncAddr, Type::I64, &[r], &[Operand::Sym(s, 0)]);
                f.insts[i].aux = sig.as_u32();
                i
            }
            Value::SelfCall => unreachable!("self-calls are not parameters"),
        };
        f.insert_inst(b, pos + n, i);
        n += 1;
        ops.push(Operand::Reg(r));
    }
    (ops, n)
}

/// Every direct call (`call`, `tail_call`) of a folded member now calls its shared body with
/// the member's extra arguments. The callers changed are added to `changed`.
fn rewrite_callers(
    m: &mut Module,
    st: &mut State,
    calls_to: &HashMap<Symbol, (Symbol, Vec<Extra>)>,
    changed: &mut Vec<FuncId>,
    report: &mut SimilarReport,
) {
    let mut members: Vec<Symbol> = calls_to.keys().copied().collect();
    members.sort_unstable();
    let mut seen: HashSet<FuncId> = changed.iter().copied().collect();
    for member in members {
        let (shared, extras) = &calls_to[&member];
        let sig = m.functions[m.defined(*shared).expect("a shared body")]
            .sig
            .clone();
        let sites = st.calls.remove(&member).unwrap_or_default();
        for (id, i) in sites {
            if m.removed[id] {
                continue;
            }
            let f = &mut m.functions[id];
            // The index may be stale (a body replaced by a thunk): check the call is there.
            let here = matches!(
                f.insts.get(i).map(|d| d.opcode),
                Some(Opcode::Call | Opcode::TailCall)
            ) && f.operands(i).first() == Some(&Operand::Sym(member, 0));
            let Some((b, pos)) = here
                .then(|| {
                    f.layout.iter().find_map(|&b| {
                        f.block_insts(b)
                            .iter()
                            .position(|&x| x == i)
                            .map(|p| (b, p))
                    })
                })
                .flatten()
            else {
                continue;
            };
            let (regs, _) = materialize(f, b, pos, extras);
            let mut ops: Vec<Operand> = f.operands(i).to_vec();
            ops[0] = Operand::Sym(*shared, 0);
            let nargs = 1 + f.sigs[SigRef::from_u32(f.insts[i].aux)].params.len();
            let tail: Vec<Operand> = ops.split_off(nargs.min(ops.len()));
            ops.extend(regs);
            ops.extend(tail);
            f.set_operands(i, &ops);
            let sr = f.sigs.push(sig.clone());
            f.insts[i].aux = sr.as_u32();
            f.modified = true;
            st.calls.entry(*shared).or_default().push((id, i));
            if seen.insert(id) {
                changed.push(id);
            }
            report.callers_rewritten += 1;
        }
    }
}
