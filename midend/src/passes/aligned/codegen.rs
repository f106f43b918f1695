//! Code generation: the merged body of an aligned group, with selects and diamonds on the
//! function identifier and, where the CFGs differ, the SSA repair of values whose definition
//! no longer dominates their reads (SalSSA, simplified).

use super::align::{block_body, loop_blocks, Columns, GroupCtx};
use super::search::{block_positions, split_phis};
use crate::hash::HashMap;
use crate::lir::*;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::EntityRef;
use smallvec::SmallVec;

/// A merged body, before it has a name.
pub(super) struct Merged {
    pub(super) body: Function,
    /// Calls of the body to itself (their callee is set when the body gets its name).
    pub(super) self_calls: Vec<Inst>,
    /// Diamonds in blocks of loops.
    pub(super) diamonds_in_loops: usize,
    /// Diamonds in all.
    pub(super) diamonds: usize,
    /// Unmatched instructions run by every member, in blocks of loops.
    pub(super) speculated_in_loops: usize,
    /// Unmatched instructions (in diamonds or run by every member).
    pub(super) unmatched: usize,
    /// Selects on the identifier.
    pub(super) selects: usize,
    /// Blocks of one member only.
    pub(super) own_blocks: usize,
    /// Edges into the phis that carry values to the reads their definitions do not
    /// dominate (`Codegen::repair`).
    pub(super) repair_edges: usize,
}

/// A block of the merged body: the members' blocks it stands for (every member's, or one
/// member's only) and, when every member's, the alignment of their bodies.
pub(super) struct PlanBlock {
    pub(super) blocks: SmallVec<[Option<Block>; 4]>,
    pub(super) columns: Option<Columns>,
}

impl PlanBlock {
    /// The members present, and their blocks.
    pub(super) fn members(&self) -> impl Iterator<Item = (usize, Block)> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter_map(|(k, b)| Some((k, (*b)?)))
    }

    /// The first member present.
    pub(super) fn first(&self) -> usize {
        self.members().next().map_or(0, |(k, _)| k)
    }
}

/// Where the plan's entries are in the merged body.
struct BodyBlocks {
    /// The first merged block of each plan entry.
    firsts: Vec<Block>,
    /// The plan entry of each member's blocks.
    at: Vec<Vec<u32>>,
    /// The last merged block of each plan entry, where its terminator goes (filled as the
    /// blocks are emitted).
    lasts: Vec<Block>,
    /// Each member's layout positions of its blocks, and which of them are in a loop.
    pos: Vec<Vec<u32>>,
    loops: Vec<Vec<bool>>,
}

impl BodyBlocks {
    fn new(f: &mut Function, entry: Block, cx: &GroupCtx, plan: &[PlanBlock]) -> Self {
        let fs = &cx.fs;
        let nb = plan.len();
        let firsts: Vec<Block> = core::iter::once(entry)
            .chain((1..nb).map(|_| f.new_block()))
            .collect();
        let mut at: Vec<Vec<u32>> = fs.iter().map(|g| vec![u32::MAX; g.blocks.len()]).collect();
        for (e, p) in plan.iter().enumerate() {
            for (k, b) in p.blocks.iter().enumerate() {
                if let Some(b) = b {
                    at[k][b.index()] = e as u32;
                }
            }
        }
        let pos: Vec<Vec<u32>> = fs.iter().map(|g| block_positions(g)).collect();
        let loops: Vec<Vec<bool>> = fs
            .iter()
            .zip(&pos)
            .map(|(g, p)| loop_blocks(g, p))
            .collect();
        BodyBlocks {
            firsts,
            at,
            lasts: Vec::with_capacity(nb),
            pos,
            loops,
        }
    }

    /// Whether one of the members' blocks of `p` is in a loop.
    fn in_loop(&self, p: &PlanBlock) -> bool {
        p.blocks
            .iter()
            .enumerate()
            .any(|(k, b)| b.is_some_and(|b| self.loops[k][self.pos[k][b.index()] as usize]))
    }
}

/// The terminators of the plan's entries (`Codegen::place_terminators`).
struct Terms {
    /// Per plan entry, each member's terminator (`None` for a block of one member only).
    terms: Vec<Option<Vec<Inst>>>,
    /// Per plan entry, the block of each member's terminator.
    at: Vec<SmallVec<[Block; 4]>>,
    /// Per plan entry, one terminator serves every member.
    shared: Vec<bool>,
    /// Entries that branch on the identifier to each member's own terminator.
    dispatched: usize,
}

/// Builds the merged body of an aligned group.
pub(super) struct Codegen<'a, 'c> {
    pub(super) cx: &'c GroupCtx<'a>,
    pub(super) f: Function,
    /// The identifier: `k` in member `k`.
    pub(super) id: Reg,
    /// Each member's registers, as the merged body holds them.
    pub(super) map: Vec<Vec<PackedOption<Reg>>>,
    /// Calls of a member to itself (their callee is set when the body gets its name).
    pub(super) self_calls: Vec<Inst>,
    /// The merged body's own signature, for those calls.
    pub(super) self_sig: SigRef,
    /// Uses of each register, per member.
    pub(super) uses: Vec<Vec<u32>>,
    /// A register holding zero, per type, at the top of the entry block.
    pub(super) zeros: HashMap<Type, Reg>,
    /// `id == k`, per member `k`, at the top of the entry block (for groups of three or
    /// more; in a pair the identifier itself tells the second member).
    pub(super) flags: HashMap<usize, Reg>,
    /// A member's register was read before the body had it, or a column's callees disagree
    /// (the group is not merged).
    pub(super) missing: core::cell::Cell<bool>,
    /// The entry block.
    pub(super) entry: Block,
    /// Selects made.
    pub(super) selects: usize,
    /// Edges into the phis `repair` made.
    pub(super) repair_edges: usize,
    /// Diamonds made, and of those, diamonds in blocks of loops.
    pub(super) diamonds: usize,
    pub(super) diamonds_in_loops: usize,
    /// Unmatched instructions (in diamonds or run by every member), and of those, the ones
    /// run by every member in blocks of loops.
    pub(super) unmatched: usize,
    pub(super) speculated_in_loops: usize,
}

impl<'a, 'c> Codegen<'a, 'c> {
    pub(super) fn new(cx: &'c GroupCtx<'a>) -> Self {
        let a = cx.fs[0];
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
        let entry = f.new_block();
        Codegen {
            cx,
            f,
            id,
            map: cx
                .fs
                .iter()
                .map(|f| vec![None.into(); f.regs.len()])
                .collect(),
            self_calls: Vec::new(),
            self_sig,
            uses: cx.fs.iter().map(|f| use_counts(f)).collect(),
            zeros: HashMap::default(),
            flags: HashMap::default(),
            missing: core::cell::Cell::new(false),
            entry,
            selects: 0,
            repair_edges: 0,
            diamonds: 0,
            diamonds_in_loops: 0,
            unmatched: 0,
            speculated_in_loops: 0,
        }
    }

    pub(super) fn n(&self) -> usize {
        self.cx.n()
    }

    /// The merged body of `plan`. `None` if some value cannot be carried around a diamond or
    /// to a block of one member only, or an aligned column does not match after all.
    pub(super) fn run(mut self, plan: &[PlanBlock]) -> Option<Merged> {
        self.add_own_stack_objs();
        let mut blocks = BodyBlocks::new(&mut self.f, self.entry, self.cx, plan);
        let np = self.cx.fs[0].sig.params.len() as u32;
        let i = self
            .f
            .make_inst(Opcode::Copy, Type::I32, &[self.id], &[Operand::Arg(np)]);
        self.f.append_inst(self.entry, i);
        let phis = self.emit_blocks(plan, &mut blocks)?;
        let terms = self.place_terminators(plan, &blocks)?;
        self.fill_phis(plan, &blocks, &terms, phis)?;
        self.emit_terminators(plan, &blocks, &terms)?;
        if self.missing.get() {
            return None;
        }
        let own_blocks = plan.iter().filter(|p| p.columns.is_none()).count();
        if own_blocks + terms.dispatched > 0 {
            self.repair()?;
        }
        Some(Merged {
            body: self.f,
            self_calls: self.self_calls,
            diamonds_in_loops: self.diamonds_in_loops,
            diamonds: self.diamonds,
            speculated_in_loops: self.speculated_in_loops,
            unmatched: self.unmatched,
            selects: self.selects,
            own_blocks,
            repair_edges: self.repair_edges,
        })
    }

    /// The other members' stack objects of their own, after the first's.
    fn add_own_stack_objs(&mut self) {
        let fs = &self.cx.fs;
        let mut own: Vec<(usize, StackObjData)> = Vec::new();
        for (k, g) in fs.iter().enumerate().skip(1) {
            for (j, d) in g.stack_objs.iter() {
                let to = self.cx.stack[k][j.index()].index();
                if to >= fs[0].stack_objs.len() {
                    own.push((to, *d));
                }
            }
        }
        own.sort_by_key(|x| x.0);
        for (_, d) in own {
            self.f.stack_objs.push(d);
        }
    }

    /// The phis and bodies of the plan's blocks, in plan order: a full column once, a run of
    /// other columns in line (pure operations that cannot trap) or as a diamond. Returns the
    /// body's phis, their sources not yet set: (its instruction, its plan entry, its position
    /// there).
    fn emit_blocks(
        &mut self,
        plan: &[PlanBlock],
        blocks: &mut BodyBlocks,
    ) -> Option<Vec<(Inst, usize, usize)>> {
        let cx = self.cx;
        let fs = &cx.fs;
        let mut phis: Vec<(Inst, usize, usize)> = Vec::new();
        let mut xs: Vec<Inst> = Vec::with_capacity(self.n());
        for (e, p) in plan.iter().enumerate() {
            let cur = blocks.firsts[e];
            let k0 = p.first();
            let (pa, _) = split_phis(fs[k0], p.blocks[k0]?);
            for (q, &x) in pa.iter().enumerate() {
                let ty = fs[k0].insts[x].ty;
                let r = self.f.new_reg(ty);
                let i = self.f.make_inst(Opcode::Phi, ty, &[r], &[]);
                self.f.append_inst(cur, i);
                for (k, b) in p.members() {
                    let y = split_phis(fs[k], b).0[q];
                    self.map[k][fs[k].results(y)[0].index()] = r.into();
                }
                phis.push((i, e, q));
            }
            let Some(cols) = &p.columns else {
                // A block of one member only.
                for &x in block_body(fs[k0], p.blocks[k0]?) {
                    self.emit_one(cur, k0, x);
                }
                blocks.lasts.push(cur);
                continue;
            };
            let looped = blocks.in_loop(p) as usize;
            let last = self.emit_columns(cur, cols, looped, &mut xs)?;
            blocks.lasts.push(last);
        }
        Some(phis)
    }

    /// The columns `cols` of an aligned block, from `cur` on (`looped`: 1 in a block of a
    /// loop); returns the block the last lands in.
    fn emit_columns(
        &mut self,
        mut cur: Block,
        cols: &Columns,
        looped: usize,
        xs: &mut Vec<Inst>,
    ) -> Option<Block> {
        let mut c = 0;
        while c < cols.len() {
            if cols.is_full(c) {
                xs.clear();
                xs.extend(cols.col(c).iter().map(|x| x.unwrap()));
                self.emit_column(cur, xs, |o| o)?;
                c += 1;
                continue;
            }
            let e = (c..cols.len())
                .find(|&e| cols.is_full(e))
                .unwrap_or(cols.len());
            let run: Vec<(usize, Inst)> = (c..e)
                .flat_map(|col| {
                    cols.col(col)
                        .iter()
                        .enumerate()
                        .filter_map(|(j, x)| Some((j, (*x)?)))
                })
                .collect();
            self.unmatched += run.len();
            if run.iter().all(|&(j, x)| self.cx.speculable(j, x)) {
                // Pure operations that cannot trap: every member's run in line, each member
                // reading only its own results.
                for &(j, x) in &run {
                    self.emit_one(cur, j, x);
                }
                self.speculated_in_loops += looped * run.len();
            } else {
                cur = self.diamond(cur, &run)?;
                self.diamonds_in_loops += looped;
                self.diamonds += 1;
            }
            c = e;
        }
        Some(cur)
    }

    /// Where each member's terminator goes, per plan entry: one instruction for all members
    /// when they branch alike (to the same merged blocks), else a branch on the identifier
    /// to a block of each member's own terminator (pairs only).
    fn place_terminators(&mut self, plan: &[PlanBlock], blocks: &BodyBlocks) -> Option<Terms> {
        let n = self.n();
        let fs = &self.cx.fs;
        let at = &blocks.at;
        let terms: Vec<Option<Vec<Inst>>> = plan
            .iter()
            .map(|p| {
                let ts: Vec<Inst> = p
                    .members()
                    .map(|(k, b)| fs[k].terminator(b))
                    .collect::<Option<_>>()?;
                (ts.len() == n).then_some(ts)
            })
            .collect();
        let mut dispatched = 0;
        let mut at_of: Vec<SmallVec<[Block; 4]>> = Vec::with_capacity(plan.len());
        let mut shared: Vec<bool> = Vec::with_capacity(plan.len());
        for (e, ts) in terms.iter().enumerate() {
            let alike = ts.as_ref().is_some_and(|ts| {
                (1..n).all(|k| {
                    self.cx.matches((0, ts[0]), (k, ts[k]))
                        && fs[0]
                            .branch_targets(ts[0])
                            .zip(fs[k].branch_targets(ts[k]))
                            .all(|(s, t)| at[0][s.index()] == at[k][t.index()])
                })
            });
            shared.push(alike);
            if alike || ts.is_none() {
                at_of.push(core::iter::repeat_n(blocks.lasts[e], n).collect());
            } else {
                if n != 2 {
                    return None;
                }
                dispatched += 1;
                at_of.push((0..n).map(|_| self.f.new_block()).collect());
            }
        }
        Some(Terms {
            terms,
            at: at_of,
            shared,
            dispatched,
        })
    }

    /// Phi sources: per predecessor in the body, the members' values (a select at the end of
    /// the predecessor where they differ).
    fn fill_phis(
        &mut self,
        plan: &[PlanBlock],
        blocks: &BodyBlocks,
        terms: &Terms,
        phis: Vec<(Inst, usize, usize)>,
    ) -> Option<()> {
        let n = self.n();
        let cx = self.cx;
        let fs = &cx.fs;
        for (i, e, q) in phis {
            let p = &plan[e];
            let k0 = p.first();
            let x = split_phis(fs[k0], p.blocks[k0]?).0[q];
            let ty = fs[k0].insts[x].ty;
            // (predecessor in the body, the members' values on that edge), in the order of
            // the first member's sources; an edge of one member only has that member's value.
            let mut srcs: Vec<(Block, SmallVec<[Option<Operand>; 4]>)> = Vec::new();
            for (k, b) in p.members() {
                let y = split_phis(fs[k], b).0[q];
                let ops = fs[k].operands(y).to_vec();
                for (t, pair) in ops.chunks(2).enumerate() {
                    let (v, Operand::Block(pred)) = (pair[0], pair[1]) else {
                        return None;
                    };
                    let e = blocks.at[k][pred.index()];
                    let mp = *terms.at.get(e as usize)?.get(k)?;
                    let slot = match srcs.get(t) {
                        Some(s) if s.0 == mp && s.1[k].is_none() => t,
                        _ => match srcs.iter().position(|s| s.0 == mp && s.1[k].is_none()) {
                            Some(s) => s,
                            None => {
                                srcs.push((mp, core::iter::repeat_n(None, n).collect()));
                                srcs.len() - 1
                            }
                        },
                    };
                    srcs[slot].1[k] = Some(v);
                }
            }
            let mut ops = Vec::with_capacity(2 * srcs.len());
            let mut vals: Vec<Operand> = Vec::with_capacity(n);
            for (mp, vs) in srcs {
                let v = if vs.iter().all(Option::is_some) {
                    vals.clear();
                    vals.extend(vs.iter().map(|v| v.unwrap()));
                    self.value(mp, ty, &vals)
                } else {
                    let mut own = vs.iter().enumerate().filter_map(|(k, v)| Some((k, (*v)?)));
                    let (k, v) = own.next()?;
                    if own.next().is_some() {
                        return None;
                    }
                    self.translate(k, v)
                };
                ops.extend([v, Operand::Block(mp)]);
            }
            self.f.set_operands(i, &ops);
        }
        Some(())
    }

    /// Terminators, their targets the blocks' first merged blocks.
    fn emit_terminators(
        &mut self,
        plan: &[PlanBlock],
        blocks: &BodyBlocks,
        terms: &Terms,
    ) -> Option<()> {
        let fs = &self.cx.fs;
        let (firsts, at) = (&blocks.firsts, &blocks.at);
        for (e, ts) in terms.terms.iter().enumerate() {
            let last = blocks.lasts[e];
            match ts {
                Some(ts) if terms.shared[e] => {
                    let targets = |o: Operand| match o {
                        Operand::Block(t) => Operand::Block(firsts[at[0][t.index()] as usize]),
                        o => o,
                    };
                    self.emit_column(last, ts, targets)?;
                }
                Some(ts) => {
                    self.branch_on(last, 1, terms.at[e][1], terms.at[e][0]);
                    self.diamonds += 1;
                    self.diamonds_in_loops += blocks.in_loop(&plan[e]) as usize;
                    for (k, &t) in ts.iter().enumerate() {
                        self.emit_own(terms.at[e][k], k, t, |b| firsts[at[k][b.index()] as usize]);
                    }
                }
                None => {
                    let k = plan[e].first();
                    let t = fs[k].terminator(plan[e].blocks[k]?)?;
                    self.emit_own(last, k, t, |b| firsts[at[k][b.index()] as usize]);
                }
            }
        }
        Some(())
    }

    /// The members' instructions `xs` (one each) as one instruction at the end of `cur`;
    /// `blocks` maps the first member's block operands.
    pub(super) fn emit_column(
        &mut self,
        cur: Block,
        xs: &[Inst],
        blocks: impl Fn(Operand) -> Operand,
    ) -> Option<()> {
        let n = self.n();
        let fs = &self.cx.fs;
        let (a, x) = (fs[0], xs[0]);
        if (1..n).any(|k| !self.cx.matches((0, x), (k, xs[k]))) {
            return None;
        }
        let d = a.insts[x];
        let nops = d.operands().len as usize;
        let mut ops: Vec<Operand> = Vec::with_capacity(nops + 1);
        let mut self_call = false;
        let mut vals: SmallVec<[Operand; 4]> = SmallVec::new();
        for p in 0..nops {
            use Operand::*;
            vals.clear();
            vals.extend(fs.iter().zip(xs).map(|(g, &y)| g.operand(y, p)));
            let o = match vals[0] {
                Reg(_) | Int(_) | F32(_) | F64(_) => {
                    let ty = fs
                        .iter()
                        .zip(&vals)
                        .find_map(|(g, v)| match v {
                            Reg(r) => Some(g.reg_type(*r)),
                            _ => None,
                        })
                        .unwrap_or_else(|| a.constant_type(x, p));
                    self.value(cur, ty, &vals)
                }
                Mem { scale, disp, .. } => {
                    let part = |o: &Operand, base: bool| match *o {
                        Mem { base: b, index, .. } => if base { b } else { index }.expand(),
                        _ => None,
                    };
                    let base = self.mem_part(cur, vals.iter().map(|o| part(o, true)))?;
                    let index = self.mem_part(cur, vals.iter().map(|o| part(o, false)))?;
                    Mem {
                        base: base.into(),
                        index: index.into(),
                        scale,
                        disp,
                    }
                }
                Sym(s, off) if vals.iter().any(|v| *v != vals[0]) => {
                    // Only a call of each member to itself differs: the body calls itself.
                    let selfs = d.opcode.is_call()
                        && p == 0
                        && off == 0
                        && vals
                            .iter()
                            .zip(&self.cx.sym)
                            .all(|(v, s)| matches!((v, s), (Sym(v, 0), Some(s)) if v == s));
                    if !selfs {
                        self.missing.set(true);
                        return None;
                    }
                    self_call = true;
                    Sym(s, 0)
                }
                o => blocks(o),
            };
            ops.push(o);
        }
        self.finish_inst(cur, 0, x, ops, self_call, &xs[1..]);
        Some(())
    }

    /// A base or index register of a memory operand, one per member (all present or all
    /// absent, as `matches` made sure): the merged register.
    pub(super) fn mem_part(
        &mut self,
        cur: Block,
        parts: impl Iterator<Item = Option<Reg>>,
    ) -> Option<Option<Reg>> {
        let parts: SmallVec<[Option<Reg>; 4]> = parts.collect();
        let Some(first) = parts[0] else {
            return Some(None);
        };
        let ops: SmallVec<[Operand; 4]> = parts
            .iter()
            .map(|r| r.map(Operand::Reg))
            .collect::<Option<_>>()?;
        let ty = self.cx.fs[0].reg_type(first);
        match self.value(cur, ty, &ops) {
            Operand::Reg(v) => Some(Some(v)),
            _ => None,
        }
    }

    /// The merged value of the members' operands `ops` (of type `ty`): the same one, or
    /// selects on the identifier added at the end of `cur`.
    pub(super) fn value(&mut self, cur: Block, ty: Type, ops: &[Operand]) -> Operand {
        let vs: SmallVec<[Operand; 4]> = ops
            .iter()
            .enumerate()
            .map(|(k, &o)| self.translate(k, o))
            .collect();
        if vs.iter().all(|v| *v == vs[0]) {
            return vs[0];
        }
        let mut acc = vs[0];
        for (k, &v) in vs.iter().enumerate().skip(1) {
            if v == vs[0] {
                continue;
            }
            let flag = self.flag(k);
            let r = self.f.new_reg(ty);
            let i = self
                .f
                .make_inst(Opcode::Select, ty, &[r], &[Operand::Reg(flag), v, acc]);
            self.f.append_inst(cur, i);
            self.selects += 1;
            acc = Operand::Reg(r);
        }
        acc
    }

    /// End `cur` with a branch to `yes` in member `k`, else to `no`.
    pub(super) fn branch_on(&mut self, cur: Block, k: usize, yes: Block, no: Block) {
        let flag = self.flag(k);
        let ty = self.f.reg_type(flag);
        let br = self.f.make_inst(
            Opcode::Brif,
            ty,
            &[],
            &[
                Operand::Pred(Cond::Ne),
                Operand::Reg(flag),
                Operand::Block(yes),
                Operand::Block(no),
            ],
        );
        self.f.append_inst(cur, br);
    }

    /// A register that is nonzero exactly in member `k`: the identifier itself for the
    /// second of a pair, else `icmp eq id, k` at the top of the entry block.
    pub(super) fn flag(&mut self, k: usize) -> Reg {
        if self.n() == 2 && k == 1 {
            return self.id;
        }
        if let Some(&r) = self.flags.get(&k) {
            return r;
        }
        let r = self.f.new_reg(Type::I8);
        let i = self.f.make_inst(
            Opcode::Icmp,
            Type::I32,
            &[r],
            &[
                Operand::Pred(Cond::Eq),
                Operand::Reg(self.id),
                Operand::Int(k as i64),
            ],
        );
        // After the copy of the identifier.
        self.f.insert_inst(self.entry, 1, i);
        self.flags.insert(k, r);
        r
    }

    /// The merged body's register for `r` of member `k` (`None`, and the group is given up,
    /// if the body does not have it yet: `is_ssa` rules that out).
    pub(super) fn reg(&self, k: usize, r: Reg) -> Option<Reg> {
        let v = self.map[k][r.index()].expand();
        if v.is_none() {
            self.missing.set(true);
        }
        v
    }

    /// Member `k`'s operand in the merged body (registers and stack objects mapped).
    pub(super) fn translate(&self, k: usize, o: Operand) -> Operand {
        match o {
            Operand::Stack(s, d) => Operand::Stack(self.cx.stack[k][s.index()], d),
            mut o => {
                o.map_regs(|r| self.reg(k, r).unwrap_or(r));
                o
            }
        }
    }

    /// Add instruction `x` of member `k` with operands `ops` (translated) at the end of
    /// `cur`: fresh results (to which `others`, the instructions of members `1..` aligned
    /// with it, map too), its aux translated, a self-call made one.
    pub(super) fn finish_inst(
        &mut self,
        cur: Block,
        k: usize,
        x: Inst,
        mut ops: Vec<Operand>,
        self_call: bool,
        others: &[Inst],
    ) {
        let src = self.cx.fs[k];
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
        self.f.insts[i].aux = match d.opcode.format() {
            _ if self_call => self.self_sig.as_u32(),
            _ if k == 0 => d.aux,
            Format::Load | Format::Store => {
                let flags = src.memflags[MemFlagsRef::from_u32(d.aux)];
                self.f.intern_memflags(flags).as_u32()
            }
            Format::Call => {
                let sig = src.sigs[SigRef::from_u32(d.aux)].clone();
                self.f.sigs.push(sig).as_u32()
            }
            _ if d.opcode == Opcode::FuncAddr => {
                let sig = src.sigs[SigRef::from_u32(d.aux)].clone();
                self.f.sigs.push(sig).as_u32()
            }
            _ => d.aux,
        };
        if self_call {
            self.self_calls.push(i);
        }
        self.f.append_inst(cur, i);
        for (j, &r) in src.results(x).iter().enumerate() {
            self.map[k][r.index()] = results[j].into();
        }
        for (j, &y) in others.iter().enumerate() {
            let g = self.cx.fs[j + 1];
            for (q, &r) in g.results(y).iter().enumerate() {
                self.map[j + 1][r.index()] = results[q].into();
            }
        }
    }

    /// A run of unmatched instructions (member, instruction) after `cur`: branches on the
    /// identifier to each member's part, then a join block where the values used later pass
    /// through phis. Returns the join block.
    pub(super) fn diamond(&mut self, cur: Block, run: &[(usize, Inst)]) -> Option<Block> {
        let n = self.n();
        let mut sides: Vec<Vec<Inst>> = vec![Vec::new(); n];
        for &(k, x) in run {
            sides[k].push(x);
        }
        let join = self.f.new_block();
        // Member `k` goes to its part, or straight to the join when it has none. The first
        // member is where the last test falls through; each other member whose target
        // differs from the first's is tested in turn, from the last.
        let tests: Vec<usize> = (1..n)
            .rev()
            .filter(|&k| !sides[k].is_empty() || !sides[0].is_empty())
            .collect();
        let dispatch: Vec<Block> = core::iter::once(cur)
            .chain((1..tests.len()).map(|_| self.f.new_block()))
            .collect();
        let targets: Vec<Block> = sides
            .iter()
            .map(|s| {
                if s.is_empty() {
                    join
                } else {
                    self.f.new_block()
                }
            })
            .collect();
        // The join's predecessors, and the member whose part each is (`None`: a branch
        // straight to it).
        let mut preds: Vec<(Block, Option<usize>)> = Vec::new();
        for (t, &k) in tests.iter().enumerate() {
            let next = dispatch.get(t + 1).copied().unwrap_or(targets[0]);
            self.branch_on(dispatch[t], k, targets[k], next);
            if targets[k] == join || next == join {
                preds.push((dispatch[t], None));
            }
        }
        let mut crossing: Vec<(usize, Reg)> = Vec::new();
        for (k, side) in sides.iter().enumerate() {
            if side.is_empty() {
                continue;
            }
            let src = self.cx.fs[k];
            let blk = targets[k];
            // Uses inside the run, to find the values used after it.
            let mut inside: HashMap<Reg, u32> = HashMap::default();
            for &x in side {
                for_each_use(src, x, |r| *inside.entry(r).or_default() += 1);
            }
            for &x in side {
                self.emit_one(blk, k, x);
                for &r in src.results(x) {
                    let all = self.uses[k][r.index()];
                    if all > inside.get(&r).copied().unwrap_or(0) {
                        crossing.push((k, r));
                    }
                }
            }
            let j = self
                .f
                .make_inst(Opcode::Jump, Type::VOID, &[], &[Operand::Block(join)]);
            self.f.append_inst(blk, j);
            preds.push((blk, Some(k)));
        }
        for (k, r) in crossing {
            let ty = self.cx.fs[k].reg_type(r);
            let zero = self.zero(ty)?;
            let v = self.translate(k, Operand::Reg(r));
            let ops: Vec<Operand> = preds
                .iter()
                .flat_map(|&(p, side)| [if side == Some(k) { v } else { zero }, Operand::Block(p)])
                .collect();
            let p = self.f.new_reg(ty);
            let i = self.f.make_inst(Opcode::Phi, ty, &[p], &ops);
            self.f.append_inst(join, i);
            self.map[k][r.index()] = p.into();
        }
        Some(join)
    }

    /// The unmatched instruction `x` of member `k` at the end of `cur` (a call of the member
    /// to itself calls the body, passing the identifier on).
    pub(super) fn emit_one(&mut self, cur: Block, k: usize, x: Inst) {
        self.emit_own(cur, k, x, |t| t);
    }

    /// Instruction `x` of member `k` alone at the end of `cur`, its block operands mapped by
    /// `target`.
    pub(super) fn emit_own(
        &mut self,
        cur: Block,
        k: usize,
        x: Inst,
        target: impl Fn(Block) -> Block,
    ) {
        let src = self.cx.fs[k];
        let ops: Vec<Operand> = src
            .operands(x)
            .into_iter()
            .map(|o| match o {
                Operand::Block(t) => Operand::Block(target(t)),
                o => self.translate(k, o),
            })
            .collect();
        let self_call = src.insts[x].opcode.is_call()
            && matches!(ops.first(), Some(Operand::Sym(c, 0)) if Some(*c) == self.cx.sym[k]);
        self.finish_inst(cur, k, x, ops, self_call, &[]);
    }

    /// A register holding zero of type `ty`, defined at the top of the entry block (it
    /// dominates every block), for the sides of a diamond's phi that never read it. `None`
    /// for a type with no zero constant in LIR (vectors).
    pub(super) fn zero(&mut self, ty: Type) -> Option<Operand> {
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
        self.f.insert_inst(self.entry, 1, i);
        self.zeros.insert(ty, r);
        Some(Operand::Reg(r))
    }
}

/// Call `each` with every register instruction `i` of `f` reads.
pub(super) fn for_each_use(f: &Function, i: Inst, mut each: impl FnMut(Reg)) {
    for o in f.operands(i) {
        o.regs().for_each(&mut each);
    }
}

/// The number of reads of each register of `f`.
pub(super) fn use_counts(f: &Function) -> Vec<u32> {
    let mut n = vec![0u32; f.regs.len()];
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            for_each_use(f, i, |r| n[r.index()] += 1);
        }
    }
    n
}
