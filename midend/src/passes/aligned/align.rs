//! Alignment: Needleman–Wunsch over the instructions of a block pair against a group's
//! columns (progressive alignment for groups), and for functions whose CFGs differ, the
//! pairing of their blocks in layout order (HyFM's block pairing).

use super::codegen::{Merged, PlanBlock};
use super::estimate::{build, frames_less_thunks};
use super::search::{mix, same_tables, split_phis};
use super::{AlignedOptions, Rejected};
use crate::lir::*;
use cranelift_entity::EntityRef;
use smallvec::SmallVec;

/// The alignment of one block across the members aligned so far: columns of one instruction
/// or none per member. A full column becomes one instruction of the merged body; the
/// instructions of the other columns are unmatched.
#[derive(Clone)]
pub(super) struct Columns {
    pub(super) width: usize,
    pub(super) cells: Vec<Option<Inst>>,
}

impl Columns {
    /// One member's instructions, a column each.
    pub(super) fn of(insts: &[Inst]) -> Self {
        Columns {
            width: 1,
            cells: insts.iter().map(|&i| Some(i)).collect(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.cells.len() / self.width
    }

    pub(super) fn col(&self, c: usize) -> &[Option<Inst>] {
        &self.cells[c * self.width..(c + 1) * self.width]
    }

    pub(super) fn is_full(&self, c: usize) -> bool {
        self.col(c).iter().all(Option::is_some)
    }

    /// The first member present in column `c`, and its instruction.
    pub(super) fn rep(&self, c: usize) -> (usize, Inst) {
        self.col(c)
            .iter()
            .enumerate()
            .find_map(|(k, i)| Some((k, (*i)?)))
            .expect("a column holds an instruction")
    }

    /// Append column `c` of `from` (or a column of none), with `last` for the new member.
    pub(super) fn push(&mut self, from: &Columns, c: Option<usize>, last: Option<Inst>) {
        match c {
            Some(c) => self.cells.extend_from_slice(from.col(c)),
            None => self.cells.extend(core::iter::repeat_n(None, from.width)),
        }
        self.cells.push(last);
    }
}

/// What the members of a group share, for matching: their symbols (a call of a member to
/// itself matches another's call to itself) and how each member's stack objects map to the
/// merged body's.
pub(super) struct GroupCtx<'a> {
    pub(super) fs: Vec<&'a Function>,
    pub(super) sym: Vec<Option<Symbol>>,
    /// Member `k`'s stack object `j` is the merged body's object `stack[k][j]`: the first
    /// member's object at the same index when they are alike, else one of its own.
    pub(super) stack: Vec<Vec<StackObj>>,
}

impl<'a> GroupCtx<'a> {
    /// `members` have the same tables (`screen` checked them before they were aligned).
    pub(super) fn new(m: &'a Module, members: &[FuncId]) -> Self {
        let a = &m.functions[members[0]];
        let mut cx = GroupCtx {
            fs: Vec::with_capacity(members.len()),
            sym: Vec::with_capacity(members.len()),
            stack: Vec::with_capacity(members.len()),
        };
        let mut extra = a.stack_objs.len();
        for &f in members {
            let b = &m.functions[f];
            debug_assert!(same_tables(a, b));
            let map = b
                .stack_objs
                .iter()
                .map(|(k, d)| {
                    if a.stack_objs.get(k) == Some(d) {
                        k
                    } else {
                        extra += 1;
                        StackObj::new(extra - 1)
                    }
                })
                .collect();
            cx.fs.push(b);
            cx.sym.push(m.lookup_symbol(&b.name));
            cx.stack.push(map);
        }
        cx
    }

    pub(super) fn n(&self) -> usize {
        self.fs.len()
    }

    /// Instruction `x` of member `i` and `y` of member `j` can be one instruction, with
    /// selects on differing values.
    pub(super) fn matches(&self, (i, x): (usize, Inst), (j, y): (usize, Inst)) -> bool {
        let (a, b) = (self.fs[i], self.fs[j]);
        let (da, db) = (a.insts[x], b.insts[y]);
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
        if a.results(x)
            .iter()
            .zip(b.results(y))
            .any(|(&r, &s)| a.reg_type(r) != b.reg_type(s))
        {
            return false;
        }
        let call = da.opcode.is_call();
        a.operands(x)
            .into_iter()
            .zip(b.operands(y))
            .enumerate()
            .all(|(k, (p, q))| self.operands_match(i, p, j, q, call && k == 0))
    }

    /// An unmatched instruction `x` of member `k` that may run in every member: an ALU
    /// operation, copy or compare that cannot trap, or an address computation.
    pub(super) fn speculable(&self, k: usize, x: Inst) -> bool {
        let f = self.fs[k];
        let op = f.insts[x].opcode;
        (op.is_pure_value() || op.format() == Format::Addr)
            && f.inst_effects(x) & (effects::TRAP | effects::SIDE) == 0
    }

    /// Every operand of `x` of member `i` and `y` of member `j` (matching instructions)
    /// that is not a register in either is the same in both (constants, symbols, stack
    /// slots, conditions): the alignment scores such a match above one that needs a select.
    pub(super) fn same_constants(&self, (i, x): (usize, Inst), (j, y): (usize, Inst)) -> bool {
        self.fs[i]
            .operands(x)
            .into_iter()
            .zip(self.fs[j].operands(y))
            .all(|(p, q)| matches!(p, Operand::Reg(_)) || matches!(q, Operand::Reg(_)) || p == q)
    }

    /// Operand `x` of member `i` and `y` of member `j` can be one operand (a select where
    /// they differ). `callee`: they are the callees of direct calls, where a member's call to
    /// itself matches another's call to itself (the merged body calls itself).
    pub(super) fn operands_match(
        &self,
        i: usize,
        x: Operand,
        j: usize,
        y: Operand,
        callee: bool,
    ) -> bool {
        use Operand::*;
        let (a, b) = (self.fs[i], self.fs[j]);
        match (x, y) {
            (Reg(r), Reg(s)) => a.reg_type(r) == b.reg_type(s),
            // A constant against a register or another constant: a select, if the kinds agree
            // (an integer constant is as wide as its place).
            (Reg(_) | Int(_) | F32(_) | F64(_), Reg(_) | Int(_) | F32(_) | F64(_)) => {
                value_kind(a, x) == value_kind(b, y)
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
                        || (callee && o == 0 && Some(s) == self.sym[i] && Some(t) == self.sym[j]))
            }
            (Stack(s, o), Stack(t, p)) => {
                o == p && self.stack[i][s.index()] == self.stack[j][t.index()]
            }
            (Block(_), Block(_)) => true, // terminators only; the skeletons agree
            _ => x == y,
        }
    }
}

/// Align member `k`'s body instructions `xb` of one block with the columns of the members
/// before it (Needleman–Wunsch against each column's first instruction, a match scoring 3
/// when the constants agree too, 2 when they need a select, and a gap nothing; ties prefer
/// matches). `None` if the table would be too large and the lengths differ.
pub(super) fn align_block(
    cx: &GroupCtx,
    cols: &Columns,
    k: usize,
    xb: &[Inst],
    max_cells: usize,
) -> Option<Columns> {
    let (n, l) = (cols.len(), xb.len());
    let mut out = Columns {
        width: cols.width + 1,
        cells: Vec::with_capacity(n.max(l) * (cols.width + 1)),
    };
    if (n + 1) * (l + 1) > max_cells {
        if n != l {
            return None;
        }
        for (c, &y) in xb.iter().enumerate() {
            if cx.matches(cols.rep(c), (k, y)) {
                out.push(cols, Some(c), Some(y));
            } else {
                out.push(cols, Some(c), None);
                out.push(cols, None, Some(y));
            }
        }
        return Some(out);
    }
    let w = l + 1;
    let mut t = vec![0u16; (n + 1) * w];
    let mut hit = vec![0u16; n * l];
    // Keys once per instruction, so that most cells compare two words.
    let keys: SmallVec<[u64; 32]> = xb.iter().map(|&y| match_key(cx.fs[k], y)).collect();
    for i in (0..n).rev() {
        let rep = cols.rep(i);
        let key = match_key(cx.fs[rep.0], rep.1);
        for j in (0..l).rev() {
            debug_assert!(key == keys[j] || !cx.matches(rep, (k, xb[j])));
            let m = if key == keys[j] && cx.matches(rep, (k, xb[j])) {
                2 + cx.same_constants(rep, (k, xb[j])) as u16
            } else {
                0
            };
            hit[i * l + j] = m;
            let diag = if m > 0 { t[(i + 1) * w + j + 1] + m } else { 0 };
            t[i * w + j] = diag.max(t[(i + 1) * w + j]).max(t[i * w + j + 1]);
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < l {
        if i < n
            && j < l
            && hit[i * l + j] > 0
            && t[i * w + j] == t[(i + 1) * w + j + 1] + hit[i * l + j]
        {
            out.push(cols, Some(i), Some(xb[j]));
            i += 1;
            j += 1;
        } else if i < n && (j == l || t[i * w + j] == t[(i + 1) * w + j]) {
            out.push(cols, Some(i), None);
            i += 1;
        } else {
            out.push(cols, None, Some(xb[j]));
            j += 1;
        }
    }
    Some(out)
}

/// A hash of what `GroupCtx::matches` requires to be equal in two instructions, apart from
/// the tables it looks up (memory flags, signatures, symbols, stack objects): two
/// instructions that match have equal keys.
pub(super) fn match_key(f: &Function, x: Inst) -> u64 {
    let d = f.insts[x];
    let mut h = mix(
        (d.opcode as u64) << 32 | d.ty.raw() as u64,
        (d.results().len as u64) << 32 | d.operands().len as u64,
    );
    let tables = matches!(
        d.opcode.format(),
        Format::Load | Format::Store | Format::Call
    ) || d.opcode == Opcode::FuncAddr;
    if !tables {
        h = mix(h, d.aux as u64);
    }
    for &r in f.results(x) {
        h = mix(h, f.reg_type(r).raw() as u64);
    }
    for o in f.operands(x) {
        let w = match o {
            // A register and a constant can share a select: only their kind must agree.
            Operand::Reg(_) | Operand::Int(_) | Operand::F32(_) | Operand::F64(_) => {
                value_kind(f, o)
            }
            Operand::Block(_) => 3,
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => mix(
                4 | (base.is_some() as u64) << 8 | (index.is_some() as u64) << 9,
                (scale as u64) << 32 | disp as u32 as u64,
            ),
            Operand::Sym(_, o) => mix(5, o as u64),
            Operand::Stack(_, o) => mix(6, o as u64),
            Operand::Pred(c) => mix(7, c as u64),
            Operand::Arg(n) => mix(8, n as u64),
        };
        h = mix(h, w);
    }
    h
}

/// Whether a value operand (register or constant) is an integer (0), an `f32` (1) or an
/// `f64` (2).
pub(super) fn value_kind(f: &Function, o: Operand) -> u64 {
    match o {
        Operand::Reg(r) => match f.reg_type(r) {
            Type::F32 => 1,
            Type::F64 => 2,
            _ => 0,
        },
        Operand::F32(_) => 1,
        Operand::F64(_) => 2,
        _ => 0,
    }
}

/// The blocks that are in a loop, approximately: those between a block and a later block
/// that branches back to it, in layout order.
pub(super) fn loop_blocks(f: &Function, pos: &[u32]) -> Vec<bool> {
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

/// The instructions of block `b` between its phis and its terminator.
pub(super) fn block_body(f: &Function, b: Block) -> &[Inst] {
    let (_, rest) = split_phis(f, b);
    &rest[..rest.len() - 1]
}

/// A group's alignment and merged body, and the bytes it saves.
pub(super) struct Aligned {
    /// The blocks of the merged body.
    pub(super) plan: Vec<PlanBlock>,
    pub(super) merged: Merged,
    pub(super) saving: f64,
}

/// Align `members` (functions of `m` with one skeleton) and build their merged body, if it
/// saves more than `floor` bytes. `base`: the alignment of all members but the last, when
/// they are a group already (else there are two members).
pub(super) fn merge_group(
    m: &Module,
    members: &[FuncId],
    base: Option<&[PlanBlock]>,
    floor: f64,
    opts: &AlignedOptions,
) -> Result<Aligned, Rejected> {
    let cx = GroupCtx::new(m, members);
    let n = cx.n();
    let last = n - 1;
    let (a, z) = (cx.fs[0], cx.fs[last]);
    let mut columns = Vec::with_capacity(a.layout.len());
    for (k, (&ba, &bz)) in a.layout.iter().zip(z.layout.iter()).enumerate() {
        let first;
        let cols = match base {
            // (Groups of more than two are all of one skeleton: every block is aligned.)
            Some(base) => base[k].columns.as_ref().ok_or(Rejected::Blocks)?,
            None => {
                debug_assert_eq!(n, 2);
                first = Columns::of(block_body(a, ba));
                &first
            }
        };
        let al = align_block(&cx, cols, last, block_body(z, bz), opts.max_cells)
            .ok_or(Rejected::LongBlock)?;
        columns.push(al);
    }
    let plan: Vec<PlanBlock> = columns
        .into_iter()
        .enumerate()
        .map(|(k, cols)| PlanBlock {
            blocks: cx.fs.iter().map(|g| Some(g.layout[k])).collect(),
            columns: Some(cols),
        })
        .collect();
    build(&cx, plan, floor, opts)
}

/// What must agree for two blocks of functions with differing CFGs to be one block of the
/// merged body (their phis' types, their terminators' opcode and number of targets), and a
/// histogram of their bodies' opcodes for scoring the pairing.
pub(super) struct BlockKey {
    /// A hash of `phis` and `term`, compared first.
    pub(super) shape: u64,
    pub(super) phis: SmallVec<[Type; 4]>,
    pub(super) term: Option<(Opcode, usize)>,
    pub(super) hist: [u8; 16],
}

impl BlockKey {
    pub(super) fn of(f: &Function, b: Block) -> Self {
        let (phis, _) = split_phis(f, b);
        let mut hist = [0u8; 16];
        for &i in block_body(f, b) {
            let h = &mut hist[(f.insts[i].opcode as usize * 7) % 16];
            *h = h.saturating_add(1);
        }
        let phis: SmallVec<[Type; 4]> = phis.iter().map(|&i| f.insts[i].ty).collect();
        let term = f
            .terminator(b)
            .map(|t| (f.insts[t].opcode, f.branch_targets(t).count()));
        let shape = phis.iter().fold(
            term.map_or(0, |(op, n)| (op as u64) << 32 | n as u64),
            |h, ty| mix(h, ty.raw() as u64),
        );
        BlockKey {
            shape,
            phis,
            term,
            hist,
        }
    }

    /// The score of pairing two blocks: 0 if they cannot be one block, else one more than
    /// the opcodes their bodies have in common (as far as the histograms tell).
    pub(super) fn score(&self, o: &BlockKey) -> u32 {
        if self.shape != o.shape
            || self.term.is_none()
            || self.term != o.term
            || self.phis != o.phis
        {
            return 0;
        }
        1 + self
            .hist
            .iter()
            .zip(&o.hist)
            .map(|(&x, &y)| x.min(y) as u32)
            .sum::<u32>()
    }
}

/// Pair the blocks of `a` and `b` in layout order (Needleman–Wunsch, a gap scoring
/// nothing): a pair becomes one block of the merged body, an unpaired block stays one
/// member's. The entry blocks are always paired. `None` if they cannot be, or the table
/// would exceed `max_cells`.
pub(super) fn align_blocks(
    a: &Function,
    b: &Function,
    max_cells: usize,
) -> Option<Vec<(Option<Block>, Option<Block>)>> {
    let (n, l) = (a.layout.len(), b.layout.len());
    if n == 0 || l == 0 || (n + 1) * (l + 1) > max_cells {
        return None;
    }
    let ka: Vec<BlockKey> = a.layout.iter().map(|&x| BlockKey::of(a, x)).collect();
    let kb: Vec<BlockKey> = b.layout.iter().map(|&y| BlockKey::of(b, y)).collect();
    if ka[0].score(&kb[0]) == 0 {
        return None;
    }
    // `t[i][j]`: the best score of blocks `i..` of `a` against `j..` of `b` (from 1 on).
    let w = l + 1;
    let mut t = vec![0u32; (n + 1) * w];
    let mut hit = vec![0u32; n * l];
    for i in (1..n).rev() {
        for j in (1..l).rev() {
            let s = ka[i].score(&kb[j]);
            hit[i * l + j] = s;
            let diag = if s > 0 { t[(i + 1) * w + j + 1] + s } else { 0 };
            t[i * w + j] = diag.max(t[(i + 1) * w + j]).max(t[i * w + j + 1]);
        }
    }
    let mut out = vec![(Some(a.layout[0]), Some(b.layout[0]))];
    let (mut i, mut j) = (1, 1);
    while i < n || j < l {
        if i < n
            && j < l
            && hit[i * l + j] > 0
            && t[i * w + j] == t[(i + 1) * w + j + 1] + hit[i * l + j]
        {
            out.push((Some(a.layout[i]), Some(b.layout[j])));
            i += 1;
            j += 1;
        } else if i < n && (j == l || t[i * w + j] == t[(i + 1) * w + j]) {
            out.push((Some(a.layout[i]), None));
            i += 1;
        } else {
            out.push((None, Some(b.layout[j])));
            j += 1;
        }
    }
    Some(out)
}

/// The share of the larger function's instructions that two functions whose CFGs differ
/// must have in common (by the alignment, before code generation) to be merged. Below it,
/// the branches on the identifier and the phis that carry values around the other member's
/// blocks cost about what the pair saves, and such pairs take most of the pass's time.
pub(super) const MIN_SHARED_DIFFERING_CFGS: f64 = 0.6;

/// Align two functions whose CFGs differ (`members`: a pair) and build their merged body,
/// if it saves more than `floor` bytes: their blocks paired by `align_blocks`, each pair's
/// bodies aligned as in `merge_group`, the unpaired blocks kept for their own member.
pub(super) fn merge_pair_cfg(
    m: &Module,
    members: &[FuncId],
    floor: f64,
    opts: &AlignedOptions,
) -> Result<Aligned, Rejected> {
    let cx = GroupCtx::new(m, members);
    let (a, b) = (cx.fs[0], cx.fs[1]);
    if a.sig != b.sig {
        return Err(Rejected::Tables);
    }
    // A pair must share `MIN_SHARED_DIFFERING_CFGS` of the larger function's instructions,
    // and can share no more than the smaller one has.
    let larger = a.inst_count().max(b.inst_count());
    let enough = |shared: usize| shared as f64 >= MIN_SHARED_DIFFERING_CFGS * larger as f64;
    if !enough(a.inst_count().min(b.inst_count())) {
        return Err(Rejected::Share);
    }
    let pairs = align_blocks(a, b, opts.max_cells).ok_or(Rejected::Blocks)?;
    // What the merge could save at most, from the instructions that could be shared: first
    // the paired blocks' phis, terminators and shorter bodies, then what their bodies'
    // alignments share.
    let c = &opts.cost;
    let bound = |shared: usize| c.bytes_per_inst * shared as f64 + frames_less_thunks(2, c);
    let paired: usize = pairs
        .iter()
        .filter_map(|&(x, y)| {
            let (x, y) = (x?, y?);
            let body = block_body(a, x).len().min(block_body(b, y).len());
            Some(body + split_phis(a, x).0.len() + 1)
        })
        .sum();
    if !enough(paired) {
        return Err(Rejected::Share);
    }
    if bound(paired) <= floor {
        return Err(Rejected::Estimate);
    }
    let mut plan = Vec::with_capacity(pairs.len());
    let mut shared = 0;
    for (x, y) in pairs {
        let columns = match (x, y) {
            (Some(x), Some(y)) => {
                let first = Columns::of(block_body(a, x));
                let cols = align_block(&cx, &first, 1, block_body(b, y), opts.max_cells)
                    .ok_or(Rejected::LongBlock)?;
                shared += (0..cols.len()).filter(|&c| cols.is_full(c)).count();
                shared += split_phis(a, x).0.len() + 1;
                Some(cols)
            }
            _ => None,
        };
        plan.push(PlanBlock {
            blocks: [x, y].into_iter().collect(),
            columns,
        });
    }
    if !enough(shared) {
        return Err(Rejected::Share);
    }
    if bound(shared) <= floor {
        return Err(Rejected::Estimate);
    }
    build(&cx, plan, floor, opts)
}
