//! `merge-aligned`: one body for two functions whose instructions differ, not only their
//! constants and callees. It runs after `merge` and `merge-similar`, on what they left.
//!
//! What it takes from the research on merging by sequence alignment, and what it leaves:
//! - **Candidates (F3M, CGO 2022).** A fingerprint per function: MinHash over shingles of
//!   three (opcode, type) pairs in layout order, four hash functions. Functions meet in LSH
//!   buckets keyed by the CFG skeleton (below) and one MinHash value each, so only functions
//!   that share a skeleton and a band are ever compared. Each function looks at no more than
//!   `AlignedOptions::neighbours` earlier, unpaired functions per bucket and aligns with at
//!   most `AlignedOptions::tries` of them, those with most MinHash values in common.
//! - **Alignment by block pairs (HyFM, LCTES 2021).** Two functions are aligned only if their
//!   CFGs are the same in layout order (the *skeleton*: signature, per block the number and
//!   types of phis, the terminator's opcode and successors by position). Block `i` is aligned
//!   with block `i`: Needleman–Wunsch over the instructions between the phis and the
//!   terminator (two instructions match when they could be one instruction with `select`s on
//!   its value operands), or, for blocks whose table would exceed `AlignedOptions::max_cells`,
//!   a walk down the diagonal when both have the same length. Unlike HyFM there is no extra
//!   block on one side only; unlike SalSSA, no alignment across blocks.
//! - **Code generation (SalSSA, PLDI 2020, simplified).** The merged body takes the members'
//!   parameters and a last `i32` parameter, the function identifier (0 for the first member,
//!   1 for the second). Matched instructions are emitted once; an operand that differs
//!   (register or constant) becomes a `select` on the identifier. A maximal run of unmatched
//!   instructions becomes a diamond: a branch on the identifier to a block of the first
//!   member's run and a block of the second's, then a join block where each value the run
//!   defines and that is used after it passes through a phi (with a zero from the other
//!   side, where it is never read). Phi sources that differ become `select`s at the end of
//!   the predecessor. Memory operations keep their order on each side: an alignment never
//!   reorders, and each side's run keeps its own order.
//! - **Callers.** A local member whose address nothing observes is folded away, as
//!   `merge-similar` folds its members: its direct calls call the merged body with the
//!   member's identifier as an extra argument (`PassState::call_rewrites`), and it has no code
//!   of its own, when those extra arguments cost no more than a thunk. Every other member
//!   becomes a thunk with its own name and signature that calls the merged body with its
//!   identifier. A recursive call of a member to itself calls the merged body directly,
//!   passing the identifier on. Preemptible, frozen and hot functions
//!   (`AlignedOptions::hot`) are never merged; functions with opaque instructions or
//!   exception handling (`try_call`, `exn_handler_addr`) are left alone, and two functions
//!   merge only if their global values, alias regions and stack limits are the same (the
//!   body keeps the first one's tables).
//! - **Profitability.** The byte cost model of `merge-similar` (`CostModel`): the merged
//!   body's instructions (selects, branches and phis counted) and two thunks with one extra
//!   argument each (a folded member's call sites cost no more), against the two bodies; a diamond in a block of a loop costs
//!   `AlignedOptions::loop_branch` bytes more, for the branch run on every iteration.
//!
//! **Bounds.** The search looks at `4 × neighbours` functions and aligns at most `tries`
//! pairs per function; an alignment costs at most `max_cells` per block pair, and only
//! functions of at most `max_insts` instructions take part. The pass is one pass over the
//! functions: no iteration until nothing changes.

use super::exact::make_thunk_with;
use super::similar::{fresh_name, rewrite_calls_of_folded, CostModel};
use crate::hash::{finish, HashMap, HashSet};
use crate::lir::*;
use crate::state::*;
use cranelift_entity::EntityRef;
use std::sync::Arc;

/// The functions a host marks hot, by name: `merge-aligned` never merges them, so that they
/// run without branches or selects on a function identifier.
#[derive(Clone)]
pub struct HotFunctions(Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl HotFunctions {
    /// The functions for which `is_hot` holds.
    pub fn new(is_hot: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        HotFunctions(Arc::new(is_hot))
    }
    /// The functions named in `names`.
    pub fn named<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        let set: std::collections::HashSet<String> = names.into_iter().map(Into::into).collect();
        HotFunctions::new(move |n| set.contains(n))
    }
    /// Whether the function named `name` is hot.
    pub fn contains(&self, name: &str) -> bool {
        (self.0)(name)
    }
}

impl core::fmt::Debug for HotFunctions {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HotFunctions(..)")
    }
}

/// Options of the pass.
#[derive(Clone, Debug)]
pub struct AlignedOptions {
    /// The byte costs the pass weighs a merge's saving against.
    pub cost: CostModel,
    /// Bytes charged for each branch on the identifier inside a loop.
    pub loop_branch: f64,
    /// Functions larger than this (in instructions) are left alone.
    pub max_insts: usize,
    /// The largest alignment table for one block pair (cells): longer blocks are aligned
    /// position by position when their lengths are equal, else the pair is not merged.
    pub max_cells: usize,
    /// Earlier unpaired functions looked at per bucket.
    pub neighbours: usize,
    /// Alignments tried per function.
    pub tries: usize,
    /// MinHash values (of four) two functions must share to be aligned: an estimate of the
    /// share of their instruction shingles they have in common.
    pub min_common: usize,
    /// Functions the host marks hot: never merged by this pass.
    pub hot: Option<HotFunctions>,
    /// Local functions can be reached by name (`PassOptions::locals_named`): a member keeps
    /// its thunk, as an exported one does.
    pub locals_named: bool,
}

impl Default for AlignedOptions {
    fn default() -> Self {
        AlignedOptions {
            cost: CostModel::default(),
            loop_branch: 8.0,
            max_insts: 2000,
            max_cells: 128 * 128,
            neighbours: 4,
            tries: 2,
            min_common: 2,
            hot: None,
            locals_named: false,
        }
    }
}

/// What the pass did.
#[derive(Clone, Debug, Default)]
pub struct AlignedReport {
    /// Functions merged (each now a thunk of a merged body, or folded).
    pub merged: usize,
    /// Of those, members folded away: local functions whose address nothing observes, whose
    /// callers now call the merged body with the member's identifier (no thunk).
    pub folded: usize,
    /// Direct calls rewritten to call a merged body (of members folded by this run or an
    /// earlier batch).
    pub callers_rewritten: usize,
    /// Merged bodies made.
    pub groups: usize,
    /// Of those, bodies with at least one unmatched instruction.
    pub with_unmatched_runs: usize,
    /// Diamonds made: unmatched runs with a memory access, a call or a possible trap, in
    /// blocks of their own that branch on the identifier.
    pub diamonds: usize,
    /// Bytes saved, as the cost model estimates them.
    pub bytes_saved: u64,
    /// Functions that took part in the search.
    pub candidates: usize,
    /// Pairs aligned.
    pub aligned: usize,
    /// Pairs rejected by the cost model.
    pub unprofitable: usize,
    /// Pairs whose alignment could not be turned into one body (a block too long to align,
    /// a value of a type with no zero to pass around a diamond).
    pub not_alignable: usize,
    /// Functions left alone because the host marks them hot.
    pub hot: usize,
    /// Functions left alone for what they hold (opaque instructions, exception tables, a
    /// register defined twice or read before its definition in layout order), or for their
    /// size.
    pub ineligible: usize,
}

/// The `merge-aligned` pass.
#[derive(Default)]
pub struct MergeAligned {
    /// The pass's options.
    pub opts: AlignedOptions,
}

impl crate::pass::Pass for MergeAligned {
    fn name(&self) -> &'static str {
        "merge-aligned"
    }
    fn run(
        &mut self,
        m: &mut Module,
        ps: &mut PassState,
        stats: &mut crate::pass::Stats,
    ) -> Result<(), crate::error::Error> {
        let r = merge_aligned(m, ps, &self.opts);
        stats.add("merged_aligned", r.merged as u64);
        stats.add("aligned.folded", r.folded as u64);
        stats.add("aligned.callers_rewritten", r.callers_rewritten as u64);
        stats.add("aligned.groups", r.groups as u64);
        stats.add("aligned.with_unmatched_runs", r.with_unmatched_runs as u64);
        stats.add("aligned.diamonds", r.diamonds as u64);
        stats.add("aligned.bytes_saved", r.bytes_saved);
        stats.add("aligned.candidates", r.candidates as u64);
        stats.add("aligned.aligned", r.aligned as u64);
        stats.add("aligned.unprofitable", r.unprofitable as u64);
        stats.add("aligned.not_alignable", r.not_alignable as u64);
        stats.add("aligned.hot", r.hot as u64);
        stats.add("aligned.ineligible", r.ineligible as u64);
        Ok(())
    }
}

/// Number of MinHash functions (and LSH bands of one value each).
const BANDS: usize = 4;

/// One function taking part: its skeleton hash and MinHash values.
struct Candidate {
    f: FuncId,
    skeleton: u64,
    minhash: [u64; BANDS],
}

/// Run `merge-aligned` over the open functions of `m`.
pub fn merge_aligned(m: &mut Module, ps: &mut PassState, opts: &AlignedOptions) -> AlignedReport {
    let mut report = AlignedReport::default();
    let mut cands: Vec<Candidate> = Vec::new();
    for id in ps.open_function_ids(m) {
        let f = &m.functions[id];
        if !eligible(f, opts) {
            report.ineligible += (f.inst_count() >= 6) as usize;
            continue;
        }
        if opts.hot.as_ref().is_some_and(|hot| hot.contains(&f.name)) {
            report.hot += 1;
            continue;
        }
        let Some(skeleton) = skeleton_hash(f) else {
            continue;
        };
        cands.push(Candidate {
            f: id,
            skeleton,
            minhash: minhash(f),
        });
    }
    report.candidates = cands.len();
    let uses = if cands.len() >= 2 {
        SymbolUses::of(m, ps)
    } else {
        SymbolUses::default()
    };
    let mut buckets: HashMap<(u64, usize, u64), Vec<u32>> = HashMap::default();
    let mut paired = vec![false; cands.len()];
    let mut near: Vec<(u32, usize)> = Vec::new();
    for c in 0..cands.len() {
        near.clear();
        for band in 0..BANDS {
            let key = (cands[c].skeleton, band, cands[c].minhash[band]);
            let Some(list) = buckets.get(&key) else {
                continue;
            };
            for &o in list
                .iter()
                .rev()
                .filter(|&&o| !paired[o as usize])
                .take(opts.neighbours)
            {
                if near.iter().any(|&(x, _)| x == o) {
                    continue;
                }
                let common = (0..BANDS)
                    .filter(|&k| cands[o as usize].minhash[k] == cands[c].minhash[k])
                    .count();
                if common >= opts.min_common {
                    near.push((o, common));
                }
            }
        }
        near.sort_by_key(|&(o, common)| (core::cmp::Reverse(common), o));
        let mut best: Option<(u32, Merged, f64)> = None;
        for &(o, _) in near.iter().take(opts.tries) {
            let (a, b) = (cands[o as usize].f, cands[c].f);
            if !same_skeleton(&m.functions[a], &m.functions[b]) {
                continue;
            }
            report.aligned += 1;
            match merge_pair(m, a, b, opts) {
                Ok((merged, saving)) => {
                    if best.as_ref().is_none_or(|(_, _, s)| saving > *s) {
                        best = Some((o, merged, saving));
                    }
                }
                Err(Rejected::Unprofitable) => report.unprofitable += 1,
                Err(Rejected::NotAlignable) => report.not_alignable += 1,
            }
        }
        match best {
            Some((o, merged, saving)) => {
                paired[o as usize] = true;
                paired[c] = true;
                let (unmatched, diamonds) = (merged.unmatched > 0, merged.diamonds);
                let members = [cands[o as usize].f, cands[c].f];
                let Some(folded) = install(m, ps, opts, &uses, members, merged) else {
                    report.not_alignable += 1;
                    continue;
                };
                report.folded += folded;
                report.diamonds += diamonds;
                report.groups += 1;
                report.merged += 2;
                report.with_unmatched_runs += unmatched as usize;
                report.bytes_saved += saving as u64;
            }
            None => {
                for band in 0..BANDS {
                    let key = (cands[c].skeleton, band, cands[c].minhash[band]);
                    buckets.entry(key).or_default().push(c as u32);
                }
            }
        }
    }
    report.callers_rewritten = rewrite_calls_of_folded(m, ps);
    report
}

/// How the open functions use each symbol: which ones they observe (take the address of,
/// name in a global value, or call with `try_call`, whose callee's identity its exception
/// table may depend on), and how many direct calls (`call`, `tail_call`) each has. A symbol
/// used any other way than as a direct callee counts as observed, and so do the bodies other
/// passes made and the functions whose address the callers of a folded member pass
/// (`ExtraArg::FuncAddr`).
#[derive(Default)]
struct SymbolUses {
    observed: HashSet<Symbol>,
    calls: HashMap<Symbol, u32>,
}

impl SymbolUses {
    fn of(m: &Module, ps: &PassState) -> Self {
        let mut uses = SymbolUses::default();
        for (_, f) in ps.open_functions(m) {
            for &b in &f.layout {
                for &i in f.block_insts(b) {
                    let direct = matches!(f.insts[i].opcode, Opcode::Call | Opcode::TailCall);
                    for (k, op) in f.operands(i).into_iter().enumerate() {
                        if let Operand::Sym(s, _) = op {
                            let s = m.resolve_alias(s);
                            if direct && k == 0 {
                                *uses.calls.entry(s).or_insert(0) += 1;
                            } else {
                                uses.observed.insert(s);
                            }
                        }
                    }
                }
            }
            for g in f.globals.values() {
                if let GlobalData::Symbol { sym, .. } = g {
                    uses.observed.insert(m.resolve_alias(*sym));
                }
            }
        }
        // Bodies other passes made (the shared bodies of `merge-similar`, and of this pass in
        // an earlier batch): callers compiled from their input call them by name. (A survivor
        // of `merge` may fold: the calls of what was merged into it follow it.)
        for r in ps.merges.iter().filter(|r| r.by != MergedBy::Exact) {
            uses.observed.insert(m.resolve_alias(r.survivor));
        }
        // Addresses that callers of folded members pass as extra arguments (in code to come,
        // or compiled by an earlier batch).
        for (_, rw) in &ps.call_rewrites {
            for e in &rw.extras {
                if let ExtraArg::FuncAddr(s, _) = e {
                    uses.observed.insert(m.resolve_alias(*s));
                }
            }
        }
        uses
    }
}

/// A function this pass may merge.
fn eligible(f: &Function, opts: &AlignedOptions) -> bool {
    let n = f.inst_count();
    // (Only open functions are candidates: a frozen one is never changed.)
    f.linkage != Linkage::Preemptible
        && f.entry().is_some()
        && (6..=opts.max_insts).contains(&n)
        && f.opaques.is_empty()
        && f.exn_tables.is_empty()
        && is_ssa(f)
        && !f.layout.iter().any(|&b| {
            f.block_insts(b).iter().any(|&i| {
                let op = f.insts[i].opcode;
                op.has_aux2() || op == Opcode::ExnHandlerAddr
            })
        })
        && !f.layout.first().is_some_and(|&b| {
            f.block_insts(b)
                .iter()
                .any(|&i| f.insts[i].opcode == Opcode::Phi)
        })
}

/// Every register is defined by at most one instruction, and every read but a phi's comes
/// after the definition in layout order (so that a merged body built in layout order has
/// every value it reads).
fn is_ssa(f: &Function) -> bool {
    let mut defined = vec![false; f.regs.len()];
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            if f.insts[i].opcode != Opcode::Phi {
                let mut ok = true;
                for_each_use(f, i, |r| ok &= defined[r.index()]);
                if !ok {
                    return false;
                }
            }
            for &r in f.results(i) {
                if core::mem::replace(&mut defined[r.index()], true) {
                    return false;
                }
            }
        }
    }
    true
}

/// The layout position of each block (u32::MAX for blocks not in the layout).
fn block_positions(f: &Function) -> Vec<u32> {
    let mut pos = vec![u32::MAX; f.blocks.len()];
    for (k, &b) in f.layout.iter().enumerate() {
        pos[b.index()] = k as u32;
    }
    pos
}

/// The phis at the head of a block, and the rest.
fn split_phis(f: &Function, b: Block) -> (&[Inst], &[Inst]) {
    let insts = f.block_insts(b);
    let k = insts
        .iter()
        .position(|&i| f.insts[i].opcode != Opcode::Phi)
        .unwrap_or(insts.len());
    insts.split_at(k)
}

/// Visit the skeleton of `f`: the signature, then per block its phis' types and sources'
/// positions, and its terminator's opcode and successors' positions. `None` if a block has
/// no terminator.
fn skeleton(f: &Function, mut each: impl FnMut(u64)) -> Option<()> {
    let pos = block_positions(f);
    each(f.sig.call_conv as u64);
    for p in f.sig.params.iter().chain(f.sig.returns.iter()) {
        each(p.ty.raw() as u64);
    }
    each(u64::MAX);
    for &b in f.layout.iter() {
        let (phis, rest) = split_phis(f, b);
        each(phis.len() as u64);
        for &i in phis {
            each(f.insts[i].ty.raw() as u64);
            for op in f.operands(i) {
                if let Operand::Block(s) = op {
                    each(pos[s.index()] as u64);
                }
            }
        }
        let &t = rest.last()?;
        let d = f.insts[t];
        if !d.opcode.is_terminator() {
            return None;
        }
        each(d.opcode as u64 | 1 << 32);
        for op in f.operands(t) {
            if let Operand::Block(s) = op {
                each(pos[s.index()] as u64);
            }
        }
    }
    Some(())
}

fn skeleton_hash(f: &Function) -> Option<u64> {
    let mut h = 0u64;
    skeleton(f, |w| h = mix(h, w))?;
    Some(finish(h))
}

/// The skeletons of `a` and `b` are equal (confirms what their hashes suggest).
fn same_skeleton(a: &Function, b: &Function) -> bool {
    let mut wa = Vec::new();
    let mut wb = Vec::new();
    a.sig == b.sig
        && skeleton(a, |w| wa.push(w)).is_some()
        && skeleton(b, |w| wb.push(w)).is_some()
        && wa == wb
}

fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// MinHash of the function's shingles of three (opcode, type) pairs, in layout order.
fn minhash(f: &Function) -> [u64; BANDS] {
    const SEEDS: [u64; BANDS] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x27d4_eb2f_1656_67c5,
    ];
    let mut mh = [u64::MAX; BANDS];
    let mut window = [0u64; 3];
    let mut n = 0usize;
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            let d = f.insts[i];
            window = [
                window[1],
                window[2],
                (d.opcode as u64) << 16 | d.ty.raw() as u64,
            ];
            n += 1;
            if n >= 3 {
                let s = mix(mix(window[0], window[1]), window[2]);
                for k in 0..BANDS {
                    mh[k] = mh[k].min(finish(mix(s, SEEDS[k])));
                }
            }
        }
    }
    mh
}

/// Why a pair was not merged.
enum Rejected {
    Unprofitable,
    NotAlignable,
}

/// One step of a block pair's alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Both(Inst, Inst),
    A(Inst),
    B(Inst),
}

/// What the two members share, for matching: their symbols (a call of a member to itself
/// matches the other's call to itself) and how the second's stack objects map to the first's.
struct PairCtx<'a> {
    a: &'a Function,
    b: &'a Function,
    sym: [Option<Symbol>; 2],
    /// B's stack object `k` is the merged body's object `stack_b[k]`.
    stack_b: Vec<StackObj>,
}

impl PairCtx<'_> {
    /// `ia` of A and `ib` of B can be one instruction, with selects on differing values.
    fn matches(&self, ia: Inst, ib: Inst) -> bool {
        let (a, b) = (self.a, self.b);
        let (da, db) = (a.insts[ia], b.insts[ib]);
        if da.opcode != db.opcode
            || da.ty != db.ty
            || da.results().len != db.results().len
            || da.operands().len != db.operands().len
        {
            return false;
        }
        let ok_aux = match da.opcode.format() {
            Format::Load | Format::Store => {
                a.memflags[MemFlagsRef::from_u32(da.aux)]
                    == b.memflags[MemFlagsRef::from_u32(db.aux)]
            }
            Format::Call => a.sigs[SigRef::from_u32(da.aux)] == b.sigs[SigRef::from_u32(db.aux)],
            _ if da.opcode == Opcode::FuncAddr => {
                a.sigs[SigRef::from_u32(da.aux)] == b.sigs[SigRef::from_u32(db.aux)]
            }
            _ => da.aux == db.aux,
        };
        if !ok_aux {
            return false;
        }
        if a.results(ia)
            .iter()
            .zip(b.results(ib))
            .any(|(&x, &y)| a.reg_type(x) != b.reg_type(y))
        {
            return false;
        }
        let call = da.opcode.is_call();
        a.operands(ia)
            .into_iter()
            .zip(b.operands(ib))
            .enumerate()
            .all(|(k, (x, y))| self.operands_match(x, y, call && k == 0))
    }

    /// An unmatched step that may run in both members: an ALU operation, copy or compare
    /// that cannot trap, or an address computation.
    fn speculable(&self, st: Step) -> bool {
        let (f, i) = match st {
            Step::A(x) => (self.a, x),
            Step::B(y) => (self.b, y),
            Step::Both(..) => return false,
        };
        let op = f.insts[i].opcode;
        (op.is_pure_value() || op.format() == Format::Addr)
            && f.inst_effects(i) & (effects::TRAP | effects::SIDE) == 0
    }

    /// The constant operands of `ia` and `ib` (matching instructions) are equal.
    fn same_constants(&self, ia: Inst, ib: Inst) -> bool {
        self.a
            .operands(ia)
            .into_iter()
            .zip(self.b.operands(ib))
            .all(|(x, y)| matches!(x, Operand::Reg(_)) || matches!(y, Operand::Reg(_)) || x == y)
    }

    /// Operand `x` of A and `y` of B can be one operand (a select where they differ).
    /// `callee`: they are the callees of direct calls, where a member's call to itself
    /// matches the other's call to itself (the merged body calls itself).
    fn operands_match(&self, x: Operand, y: Operand, callee: bool) -> bool {
        use Operand::*;
        let (a, b) = (self.a, self.b);
        match (x, y) {
            (Reg(r), Reg(s)) => a.reg_type(r) == b.reg_type(s),
            (Reg(_) | Int(_) | F32(_) | F64(_), Reg(_) | Int(_) | F32(_) | F64(_)) => {
                // A constant against a register or another constant: a select, if the kinds
                // agree (an integer constant is as wide as its place).
                let kind = |o: Operand| match o {
                    Reg(r) => match a.reg_type(r) {
                        Type::F32 => 1,
                        Type::F64 => 2,
                        _ => 0,
                    },
                    F32(_) => 1,
                    F64(_) => 2,
                    _ => 0,
                };
                let kind_b = |o: Operand| match o {
                    Reg(r) => match b.reg_type(r) {
                        Type::F32 => 1,
                        Type::F64 => 2,
                        _ => 0,
                    },
                    other => kind(other),
                };
                kind(x) == kind_b(y)
            }
            (
                Mem {
                    base: b1,
                    index: i1,
                    scale: s1,
                    disp: d1,
                },
                Mem {
                    base: b2,
                    index: i2,
                    scale: s2,
                    disp: d2,
                },
            ) => {
                let same = |x: Option<crate::lir::Reg>, y: Option<crate::lir::Reg>| match (x, y) {
                    (Some(x), Some(y)) => a.reg_type(x) == b.reg_type(y),
                    (None, None) => true,
                    _ => false,
                };
                same(b1.expand(), b2.expand())
                    && same(i1.expand(), i2.expand())
                    && s1 == s2
                    && d1 == d2
            }
            (Sym(s, o), Sym(t, p)) => {
                o == p
                    && (s == t
                        || (callee && o == 0 && Some(s) == self.sym[0] && Some(t) == self.sym[1]))
            }
            (Stack(s, o), Stack(t, p)) => o == p && self.stack_b[t.index()] == s,
            (Block(_), Block(_)) => true, // terminators only; the skeletons agree
            _ => x == y,
        }
    }
}

/// Align the body instructions of one block pair (Needleman–Wunsch, a match scoring one and a
/// gap nothing; ties prefer matches). `None` if the table would be too large and the lengths
/// differ.
fn align_block(cx: &PairCtx, xa: &[Inst], xb: &[Inst], max_cells: usize) -> Option<Vec<Step>> {
    let (n, k) = (xa.len(), xb.len());
    let mut steps = Vec::with_capacity(n.max(k));
    if (n + 1) * (k + 1) > max_cells {
        if n != k {
            return None;
        }
        for (&x, &y) in xa.iter().zip(xb) {
            if cx.matches(x, y) {
                steps.push(Step::Both(x, y));
            } else {
                steps.push(Step::A(x));
                steps.push(Step::B(y));
            }
        }
        return Some(steps);
    }
    let w = k + 1;
    let mut t = vec![0u16; (n + 1) * w];
    // The score of a match: 3 when the constants agree too (no select), else 2.
    let mut hit = vec![0u16; n * k];
    for i in (0..n).rev() {
        for j in (0..k).rev() {
            let m = if cx.matches(xa[i], xb[j]) {
                2 + cx.same_constants(xa[i], xb[j]) as u16
            } else {
                0
            };
            hit[i * k + j] = m;
            let diag = if m > 0 { t[(i + 1) * w + j + 1] + m } else { 0 };
            t[i * w + j] = diag.max(t[(i + 1) * w + j]).max(t[i * w + j + 1]);
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < k {
        if i < n
            && j < k
            && hit[i * k + j] > 0
            && t[i * w + j] == t[(i + 1) * w + j + 1] + hit[i * k + j]
        {
            steps.push(Step::Both(xa[i], xb[j]));
            i += 1;
            j += 1;
        } else if i < n && (j == k || t[i * w + j] == t[(i + 1) * w + j]) {
            steps.push(Step::A(xa[i]));
            i += 1;
        } else {
            steps.push(Step::B(xb[j]));
            j += 1;
        }
    }
    Some(steps)
}

/// The blocks that are in a loop, approximately: those between a block and a later block
/// that branches back to it, in layout order.
fn loop_blocks(f: &Function, pos: &[u32]) -> Vec<bool> {
    let n = f.layout.len();
    let mut in_loop = vec![false; n];
    for (k, &b) in f.layout.iter().enumerate() {
        for s in f.branch_targets(f.block_insts(b)[f.block_insts(b).len() - 1]) {
            let p = pos[s.index()] as usize;
            if p <= k {
                in_loop[p..=k].iter_mut().for_each(|x| *x = true);
            }
        }
    }
    in_loop
}

/// The merged body of `a` and `b` (functions of `m`) and the bytes it saves, if aligned and
/// profitable.
fn merge_pair(
    m: &Module,
    fa: FuncId,
    fb: FuncId,
    opts: &AlignedOptions,
) -> Result<(Merged, f64), Rejected> {
    let (a, b) = (&m.functions[fa], &m.functions[fb]);
    // Tables whose entries refer to one another by index are shared only when equal.
    if a.regions != b.regions || !same_globals(a, b) || a.stack_limit != b.stack_limit {
        return Err(Rejected::NotAlignable);
    }
    // B's stack objects: the same object as A's at the same index when they are alike,
    // else objects of their own after A's.
    let mut stack_b = Vec::with_capacity(b.stack_objs.len());
    let mut extra = a.stack_objs.len();
    for (k, d) in b.stack_objs.iter() {
        if a.stack_objs.get(k) == Some(d) {
            stack_b.push(k);
        } else {
            stack_b.push(StackObj::new(extra));
            extra += 1;
        }
    }
    let cx = PairCtx {
        a,
        b,
        sym: [m.lookup_symbol(&a.name), m.lookup_symbol(&b.name)],
        stack_b,
    };
    let mut aligned = Vec::with_capacity(a.layout.len());
    for (&ba, &bb) in a.layout.iter().zip(b.layout.iter()) {
        let (_, ra) = split_phis(a, ba);
        let (_, rb) = split_phis(b, bb);
        let (xa, xb) = (&ra[..ra.len() - 1], &rb[..rb.len() - 1]);
        let steps = align_block(&cx, xa, xb, opts.max_cells).ok_or(Rejected::NotAlignable)?;
        aligned.push(steps);
    }
    // A cheap estimate first, a lower bound of what code generation makes: matched
    // instructions once (and a select where their constants differ), the rest as they are,
    // and a branch and a jump for each diamond.
    let c = &opts.cost;
    let members = (a.inst_count() + b.inst_count()) as f64;
    let mut merged_est = a.inst_count();
    for steps in &aligned {
        let mut in_run = false;
        let mut diamond = false;
        for &st in steps {
            match st {
                Step::Both(x, y) => {
                    merged_est += !cx.same_constants(x, y) as usize;
                    merged_est += 2 * (in_run && diamond) as usize;
                    (in_run, diamond) = (false, false);
                }
                Step::A(_) | Step::B(_) => {
                    merged_est += matches!(st, Step::B(_)) as usize;
                    in_run = true;
                    diamond |= !cx.speculable(st);
                }
            }
        }
        merged_est += 2 * (in_run && diamond) as usize;
    }
    let overhead = 2.0 * (c.thunk + c.per_extra_arg) + c.frame;
    if c.bytes_per_inst * (members - merged_est as f64) + 2.0 * c.frame - overhead <= 0.0 {
        return Err(Rejected::Unprofitable);
    }
    let merged = Codegen::new(&cx)
        .run(&aligned)
        .ok_or(Rejected::NotAlignable)?;
    let saving = c.bytes_per_inst * (members - merged.body.inst_count() as f64) + 2.0 * c.frame
        - overhead
        - opts.loop_branch * merged.diamonds_in_loops as f64
        - merged.speculated_in_loops as f64;
    if saving <= 0.0 {
        return Err(Rejected::Unprofitable);
    }
    Ok((merged, saving))
}

/// A merged body, before it has a name.
struct Merged {
    body: Function,
    /// Calls of the body to itself (their callee is set when the body gets its name).
    self_calls: Vec<Inst>,
    /// Diamonds in blocks of loops.
    diamonds_in_loops: usize,
    /// Diamonds in all.
    diamonds: usize,
    /// Unmatched instructions run by both members, in blocks of loops.
    speculated_in_loops: usize,
    /// Unmatched instructions (in diamonds or run by both).
    unmatched: usize,
}

/// The global values of `a` and `b` are the same, entry by entry (their memory flags by
/// content: each function has its own table of them). The merged body keeps `a`'s.
fn same_globals(a: &Function, b: &Function) -> bool {
    a.globals.len() == b.globals.len()
        && a.globals
            .values()
            .zip(b.globals.values())
            .all(|(x, y)| match (x, y) {
                (
                    GlobalData::Load {
                        base,
                        offset,
                        ty,
                        flags,
                    },
                    GlobalData::Load {
                        base: base2,
                        offset: offset2,
                        ty: ty2,
                        flags: flags2,
                    },
                ) => {
                    base == base2
                        && offset == offset2
                        && ty == ty2
                        && a.memflags[*flags] == b.memflags[*flags2]
                }
                _ => x == y,
            })
}

/// Which member an instruction or value comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    A = 0,
    B = 1,
}

/// Builds the merged body of an aligned pair.
struct Codegen<'a, 'c> {
    cx: &'c PairCtx<'a>,
    f: Function,
    /// The identifier: 0 in A, 1 in B.
    id: Reg,
    /// Each member's registers, as the merged body holds them.
    map: [HashMap<Reg, Operand>; 2],
    /// Calls of a member to itself (their callee is set when the body gets its name).
    self_calls: Vec<Inst>,
    /// The merged body's own signature, for those calls.
    self_sig: SigRef,
    /// Uses of each register, per member.
    uses: [Vec<u32>; 2],
    /// A register holding zero, per type, at the top of the entry block.
    zeros: HashMap<Type, Reg>,
    /// A member's register was read before the body had it (the pair is not merged).
    missing: core::cell::Cell<bool>,
    /// The entry block.
    entry: Option<Block>,
}

impl<'a, 'c> Codegen<'a, 'c> {
    fn new(cx: &'c PairCtx<'a>) -> Self {
        let a = cx.a;
        let mut sig = a.sig.clone();
        sig.params.push(AbiParam::new(Type::I32));
        let mut f = Function::new(a.name.clone(), sig.clone(), Linkage::Local);
        f.stack_objs = a.stack_objs.clone();
        f.sigs = a.sigs.clone();
        f.regions = a.regions.clone();
        f.globals = a.globals.clone();
        f.stack_limit = a.stack_limit;
        f.memflags = a.memflags.clone();
        let self_sig = f.sigs.push(sig);
        let id = f.new_reg(Type::I32);
        let uses = [use_counts(a), use_counts(cx.b)];
        Codegen {
            cx,
            f,
            id,
            map: [HashMap::default(), HashMap::default()],
            self_calls: Vec::new(),
            self_sig,
            uses,
            zeros: HashMap::default(),
            entry: None,
            missing: core::cell::Cell::new(false),
        }
    }

    fn member(&self, s: Side) -> &'a Function {
        match s {
            Side::A => self.cx.a,
            Side::B => self.cx.b,
        }
    }

    /// The merged body, and how many diamonds lie in loops. `None` if some value cannot be
    /// carried around a diamond or an alignment step does not match after all.
    fn run(mut self, aligned: &[Vec<Step>]) -> Option<Merged> {
        let (a, b) = (self.cx.a, self.cx.b);
        // B's stack objects of their own.
        let mut own: Vec<(usize, StackObjData)> = Vec::new();
        for (k, d) in b.stack_objs.iter() {
            if self.cx.stack_b[k.index()].index() >= a.stack_objs.len() {
                own.push((self.cx.stack_b[k.index()].index(), *d));
            }
        }
        own.sort_by_key(|x| x.0);
        for (_, d) in own {
            self.f.stack_objs.push(d);
        }
        let n = a.layout.len();
        let firsts: Vec<Block> = (0..n).map(|_| self.f.new_block()).collect();
        self.entry = Some(firsts[0]);
        let pos_a = block_positions(a);
        let in_loop = loop_blocks(a, &pos_a);
        let np = a.sig.params.len() as u32;
        let i = self
            .f
            .make_inst(Opcode::Copy, Type::I32, &[self.id], &[Operand::Arg(np)]);
        self.f.append_inst(firsts[0], i);
        let mut lasts = Vec::with_capacity(n);
        let mut phis: Vec<(Inst, Inst, Inst)> = Vec::new();
        let (mut diamonds_in_loops, mut diamonds, mut speculated_in_loops) = (0, 0, 0);
        for (k, steps) in aligned.iter().enumerate() {
            let (ba, bb) = (a.layout[k], b.layout[k]);
            let mut cur = firsts[k];
            let (pa, _) = split_phis(a, ba);
            let (pb, _) = split_phis(b, bb);
            for (&x, &y) in pa.iter().zip(pb) {
                let ty = a.insts[x].ty;
                let r = self.f.new_reg(ty);
                let i = self.f.make_inst(Opcode::Phi, ty, &[r], &[]);
                self.f.append_inst(cur, i);
                self.map[0].insert(a.results(x)[0], Operand::Reg(r));
                self.map[1].insert(b.results(y)[0], Operand::Reg(r));
                phis.push((i, x, y));
            }
            let mut s = 0;
            while s < steps.len() {
                if let Step::Both(x, y) = steps[s] {
                    self.emit_both(cur, x, y)?;
                    s += 1;
                    continue;
                }
                let e = steps[s..]
                    .iter()
                    .position(|st| matches!(st, Step::Both(..)))
                    .map_or(steps.len(), |p| s + p);
                let run = &steps[s..e];
                if run.iter().all(|st| self.cx.speculable(*st)) {
                    // Pure operations that cannot trap: both members' run in line, each
                    // member reading only its own results.
                    for &st in run {
                        match st {
                            Step::A(x) => self.emit_one(cur, Side::A, x),
                            Step::B(y) => self.emit_one(cur, Side::B, y),
                            Step::Both(..) => unreachable!("a run holds unmatched steps only"),
                        }
                    }
                    speculated_in_loops += in_loop[k] as usize * run.len();
                } else {
                    cur = self.diamond(cur, run)?;
                    diamonds_in_loops += in_loop[k] as usize;
                    diamonds += 1;
                }
                s = e;
            }
            lasts.push(cur);
        }
        // Phi sources, a select at the end of the predecessor where the members differ.
        for (i, x, y) in phis {
            let ty = a.insts[x].ty;
            let (oa, ob): (Vec<Operand>, Vec<Operand>) = (
                a.operands(x).into_iter().collect(),
                b.operands(y).into_iter().collect(),
            );
            let mut ops = Vec::with_capacity(oa.len());
            for (pair_a, pair_b) in oa.chunks(2).zip(ob.chunks(2)) {
                let Operand::Block(p) = pair_a[1] else {
                    return None;
                };
                let last = lasts[pos_a[p.index()] as usize];
                let v = self.value(last, ty, pair_a[0], pair_b[0]);
                ops.extend([v, Operand::Block(last)]);
            }
            self.f.set_operands(i, &ops);
        }
        // Terminators, their targets the blocks' first merged blocks.
        for (k, &last) in lasts.iter().enumerate() {
            let ta = *a.block_insts(a.layout[k]).last()?;
            let tb = *b.block_insts(b.layout[k]).last()?;
            if !self.cx.matches(ta, tb) {
                return None;
            }
            let targets = |o: Operand| match o {
                Operand::Block(t) => Operand::Block(firsts[pos_a[t.index()] as usize]),
                o => o,
            };
            self.emit_both_with(last, ta, tb, targets)?;
        }
        if self.missing.get() {
            return None;
        }
        Some(Merged {
            body: self.f,
            self_calls: self.self_calls,
            diamonds_in_loops,
            diamonds,
            speculated_in_loops,
            unmatched: aligned
                .iter()
                .flatten()
                .filter(|s| !matches!(s, Step::Both(..)))
                .count(),
        })
    }

    /// `x` of A and `y` of B as one instruction at the end of `cur`.
    fn emit_both(&mut self, cur: Block, x: Inst, y: Inst) -> Option<()> {
        self.emit_both_with(cur, x, y, |o| o)
    }

    fn emit_both_with(
        &mut self,
        cur: Block,
        x: Inst,
        y: Inst,
        blocks: impl Fn(Operand) -> Operand,
    ) -> Option<()> {
        let (a, b) = (self.cx.a, self.cx.b);
        if !self.cx.matches(x, y) {
            return None;
        }
        let d = a.insts[x];
        let mut ops: Vec<Operand> = Vec::with_capacity(d.operands().len as usize + 1);
        let mut self_call = false;
        for (k, (oa, ob)) in a.operands(x).into_iter().zip(b.operands(y)).enumerate() {
            use Operand::*;
            let o = match (oa, ob) {
                (Reg(_) | Int(_) | F32(_) | F64(_), _) => {
                    let ty = match oa {
                        Reg(r) => a.reg_type(r),
                        _ => match ob {
                            Reg(s) => b.reg_type(s),
                            _ => a.constant_type(x, k),
                        },
                    };
                    self.value(cur, ty, oa, ob)
                }
                (
                    Mem {
                        base,
                        index,
                        scale,
                        disp,
                    },
                    Mem {
                        base: b2,
                        index: i2,
                        ..
                    },
                ) => {
                    let pick = |me: &mut Self,
                                r: Option<crate::lir::Reg>,
                                s: Option<crate::lir::Reg>|
                     -> Option<crate::lir::Reg> {
                        let (r, s) = (r?, s?);
                        let ty = a.reg_type(r);
                        match me.value(cur, ty, Reg(r), Reg(s)) {
                            Reg(v) => Some(v),
                            _ => None,
                        }
                    };
                    let base = pick(self, base.expand(), b2.expand());
                    let index = pick(self, index.expand(), i2.expand());
                    Mem {
                        base: base.into(),
                        index: index.into(),
                        scale,
                        disp,
                    }
                }
                (Sym(s, 0), Sym(t, 0))
                    if d.opcode.is_call()
                        && k == 0
                        && Some(s) == self.cx.sym[0]
                        && Some(t) == self.cx.sym[1] =>
                {
                    self_call = true;
                    Sym(s, 0)
                }
                (o, _) => blocks(o),
            };
            ops.push(o);
        }
        self.finish_inst(cur, Side::A, x, ops, self_call, Some(y));
        Some(())
    }

    /// The merged value of A's operand `oa` and B's `ob` (of type `ty`): the same one, or a
    /// select on the identifier added at the end of `cur`.
    fn value(&mut self, cur: Block, ty: Type, oa: Operand, ob: Operand) -> Operand {
        let va = self.translate(Side::A, oa);
        let vb = self.translate(Side::B, ob);
        if va == vb {
            return va;
        }
        let r = self.f.new_reg(ty);
        let i = self
            .f
            .make_inst(Opcode::Select, ty, &[r], &[Operand::Reg(self.id), vb, va]);
        self.f.append_inst(cur, i);
        Operand::Reg(r)
    }

    /// The merged body's register for `r` of member `s` (`None`, and the pair is given up,
    /// if the body does not have it yet: `is_ssa` rules that out).
    fn reg(&self, s: Side, r: Reg) -> Option<Reg> {
        match self.map[s as usize].get(&r) {
            Some(Operand::Reg(v)) => Some(*v),
            _ => {
                self.missing.set(true);
                None
            }
        }
    }

    /// A member's operand in the merged body (registers mapped; stack objects of B mapped).
    fn translate(&self, s: Side, o: Operand) -> Operand {
        match o {
            Operand::Stack(k, d) if s == Side::B => Operand::Stack(self.cx.stack_b[k.index()], d),
            mut o => {
                o.map_regs(|r| self.reg(s, r).unwrap_or(r));
                o
            }
        }
    }

    /// Add the instruction `x` of `side` with operands `ops` (translated) at the end of `cur`:
    /// fresh results (`y` of B maps to them too), its aux translated, a self-call made one.
    fn finish_inst(
        &mut self,
        cur: Block,
        side: Side,
        x: Inst,
        mut ops: Vec<Operand>,
        self_call: bool,
        y: Option<Inst>,
    ) {
        let src = self.member(side);
        let d = src.insts[x];
        let results: Vec<Reg> = src
            .results(x)
            .iter()
            .map(|&r| self.f.new_reg(src.reg_type(r)))
            .collect();
        if self_call {
            ops.push(Operand::Reg(self.id));
        }
        let i = self.f.make_inst(d.opcode, d.ty, &results, &ops);
        self.f.insts[i].aux = match (d.opcode.format(), side) {
            _ if self_call => self.self_sig.as_u32(),
            (Format::Load | Format::Store, Side::B) => {
                let flags = src.memflags[MemFlagsRef::from_u32(d.aux)];
                self.f.intern_memflags(flags).as_u32()
            }
            (Format::Call, Side::B) => {
                let sig = src.sigs[SigRef::from_u32(d.aux)].clone();
                self.f.sigs.push(sig).as_u32()
            }
            _ if side == Side::B && d.opcode == Opcode::FuncAddr => {
                let sig = src.sigs[SigRef::from_u32(d.aux)].clone();
                self.f.sigs.push(sig).as_u32()
            }
            _ => d.aux,
        };
        if self_call {
            self.self_calls.push(i);
        }
        self.f.append_inst(cur, i);
        for (k, &r) in src.results(x).iter().enumerate() {
            self.map[side as usize].insert(r, Operand::Reg(results[k]));
        }
        if let Some(y) = y {
            for (k, &r) in self.cx.b.results(y).iter().enumerate() {
                self.map[1].insert(r, Operand::Reg(results[k]));
            }
        }
    }

    /// A run of unmatched steps after `cur`: a branch on the identifier to each member's
    /// part, then a join block where the values used later pass through phis. Returns the
    /// join block.
    fn diamond(&mut self, cur: Block, run: &[Step]) -> Option<Block> {
        let mut sides: [Vec<Inst>; 2] = [Vec::new(), Vec::new()];
        for st in run {
            match *st {
                Step::A(x) => sides[0].push(x),
                Step::B(y) => sides[1].push(y),
                Step::Both(..) => unreachable!("a run holds unmatched steps only"),
            }
        }
        let join = self.f.new_block();
        // Each side's part, or the branch straight to the join for an empty one.
        let mut from = [cur; 2];
        let mut targets = [join; 2];
        for s in [Side::A, Side::B] {
            if !sides[s as usize].is_empty() {
                let blk = self.f.new_block();
                targets[s as usize] = blk;
                from[s as usize] = blk;
            }
        }
        let br = self.f.make_inst(
            Opcode::Brif,
            Type::I32,
            &[],
            &[
                Operand::Pred(Cond::Ne),
                Operand::Reg(self.id),
                Operand::Block(targets[1]),
                Operand::Block(targets[0]),
            ],
        );
        self.f.append_inst(cur, br);
        let mut crossing: Vec<(Side, Reg)> = Vec::new();
        for s in [Side::A, Side::B] {
            if sides[s as usize].is_empty() {
                continue;
            }
            let src = self.member(s);
            let blk = targets[s as usize];
            // Uses inside the run, to find the values used after it.
            let mut inside: HashMap<Reg, u32> = HashMap::default();
            for &x in &sides[s as usize] {
                for_each_use(src, x, |r| *inside.entry(r).or_default() += 1);
            }
            for &x in &sides[s as usize] {
                let ops: Vec<Operand> = src
                    .operands(x)
                    .into_iter()
                    .map(|o| self.translate(s, o))
                    .collect();
                let self_call = src.insts[x].opcode.is_call()
                    && matches!(ops.first(), Some(Operand::Sym(c, 0)) if Some(*c) == self.cx.sym[s as usize]);
                self.finish_inst(blk, s, x, ops, self_call, None);
                for &r in src.results(x) {
                    let all = self.uses[s as usize][r.index()];
                    if all > inside.get(&r).copied().unwrap_or(0) {
                        crossing.push((s, r));
                    }
                }
            }
            let j = self
                .f
                .make_inst(Opcode::Jump, Type::VOID, &[], &[Operand::Block(join)]);
            self.f.append_inst(blk, j);
        }
        for (s, r) in crossing {
            let ty = self.member(s).reg_type(r);
            let zero = self.zero(ty)?;
            let v = self.translate(s, Operand::Reg(r));
            let (mine, other) = (from[s as usize], from[1 - s as usize]);
            let p = self.f.new_reg(ty);
            let i = self.f.make_inst(
                Opcode::Phi,
                ty,
                &[p],
                &[v, Operand::Block(mine), zero, Operand::Block(other)],
            );
            self.f.append_inst(join, i);
            self.map[s as usize].insert(r, Operand::Reg(p));
        }
        Some(join)
    }
}

impl Codegen<'_, '_> {
    /// The unmatched instruction `x` of `side` at the end of `cur`.
    fn emit_one(&mut self, cur: Block, side: Side, x: Inst) {
        let src = self.member(side);
        let ops: Vec<Operand> = src
            .operands(x)
            .into_iter()
            .map(|o| self.translate(side, o))
            .collect();
        self.finish_inst(cur, side, x, ops, false, None);
    }

    /// A register holding zero of type `ty`, defined at the top of the entry block (it
    /// dominates every block), for the side of a diamond's phi that never reads it. `None`
    /// for a type with no zero constant in LIR (vectors).
    fn zero(&mut self, ty: Type) -> Option<Operand> {
        if let Some(&r) = self.zeros.get(&ty) {
            return Some(Operand::Reg(r));
        }
        let c = match ty {
            Type::F32 => Operand::F32(0),
            Type::F64 => Operand::F64(0),
            t if t.class() == RegClass::Int && t.bytes() <= 8 => Operand::Int(0),
            _ => return None,
        };
        let r = self.f.new_reg(ty);
        let i = self.f.make_inst(Opcode::Copy, ty, &[r], &[c]);
        // After the copy of the identifier.
        self.f.insert_inst(self.entry?, 1, i);
        self.zeros.insert(ty, r);
        Some(Operand::Reg(r))
    }
}

/// Call `each` with every register instruction `i` of `f` reads.
fn for_each_use(f: &Function, i: Inst, mut each: impl FnMut(Reg)) {
    for o in f.operands(i) {
        o.regs().for_each(&mut each);
    }
}

/// The number of reads of each register of `f`.
fn use_counts(f: &Function) -> Vec<u32> {
    let mut n = vec![0u32; f.regs.len()];
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            for_each_use(f, i, |r| n[r.index()] += 1);
        }
    }
    n
}

/// Add the merged body of `members` to `m`. Each member is folded away (its calls rewritten
/// to call the body with its identifier) when it is local, nothing observes its address and
/// those calls, an extra argument each, cost no more than a thunk; otherwise it becomes a
/// thunk that calls the body with its identifier. Returns the members folded, or `None` if
/// the body is not installed.
fn install(
    m: &mut Module,
    ps: &mut PassState,
    opts: &AlignedOptions,
    uses: &SymbolUses,
    members: [FuncId; 2],
    merged: Merged,
) -> Option<usize> {
    let name = fresh_name(m, "aligned", &m.functions[members[0]].name);
    let sym = m.symbol(&name, SymbolKind::Function);
    let mut body = merged.body;
    body.name = name.into();
    for &i in &merged.self_calls {
        body.set_operand(i, 0, Operand::Sym(sym, 0));
    }
    let sig = body.sig.clone();
    let id = m.add_function(body).expect("a fresh name");
    ps.record_edit(id, Edit::Modified);
    // A merged body is checked before any member gives its body up: one the verifier
    // rejects is a bug of this pass, and the members stay as they were.
    if let Err(e) = crate::verifier::verify_function(m, &m.functions[id], true) {
        debug_assert!(false, "merge-aligned made an invalid body:\n{e}");
        ps.remove_function(m, id);
        return None;
    }
    let c = &opts.cost;
    let mut folded = 0;
    for (k, &f) in members.iter().enumerate() {
        let member = m
            .lookup_symbol(&m.functions[f].name)
            .expect("a defined function has a symbol");
        let func = &m.functions[f];
        let sites = uses.calls.get(&member).copied().unwrap_or(0)
            + ps.external_calls.get(member).copied().unwrap_or(0);
        let fold = func.linkage == Linkage::Local
            && !func.address_significant
            && !opts.locals_named
            && !uses.observed.contains(&member)
            && c.per_extra_arg * sites as f64 <= c.thunk + c.per_extra_arg;
        let id_arg = Operand::Int(k as i64);
        let kind = if fold {
            ps.remove_function(m, f);
            m.symbols[member].def = None.into();
            ps.add_call_rewrite(
                member,
                CallRewrite {
                    shared: sym,
                    sig: sig.clone(),
                    extras: vec![ExtraArg::Const(Type::I32, id_arg)],
                },
            );
            folded += 1;
            MergeKind::Folded
        } else {
            make_thunk_with(m, ps, f, (sym, sig.clone()), 1, false, |t, b, ops| {
                let r = t.new_reg(Type::I32);
                let i = t.make_inst(Opcode::Copy, Type::I32, &[r], &[id_arg]);
                t.append_inst(b, i);
                ops.push(Operand::Reg(r));
            });
            MergeKind::Thunked
        };
        ps.merges.push(MergeRecord {
            merged: member,
            survivor: sym,
            kind,
            by: MergedBy::Aligned,
            callers_redirected: false,
        });
    }
    Some(folded)
}
