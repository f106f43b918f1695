//! SSA repair of a merged body whose members' CFGs differ: a value read where its definition
//! no longer dominates the read is carried through phis at the iterated dominance frontier
//! of its definition (SalSSA's repair, after Cytron et al.).

use super::codegen::Codegen;
use crate::analysis::cfg::Cfg;
use crate::analysis::domtree::DomTree;
use crate::hash::HashMap;
use crate::lir::*;
use cranelift_entity::EntityRef;
use smallvec::SmallVec;

/// Dominance frontiers of the blocks of a CFG.
type Frontiers = HashMap<Block, SmallVec<[Block; 4]>>;

impl Codegen<'_, '_> {
    /// Make every read of a register see its definition in the body's CFG. Blocks of one
    /// member only, and branches to each member's own terminator, let a member reach a read
    /// of another member's value without passing its definition. Such a register is carried
    /// through phis at the iterated dominance frontier of its definition (Cytron et al.),
    /// with zero on the paths that do not define it: paths of the other members, which
    /// never read it there. Each read then sees the nearest definition above it in the
    /// dominator tree. `None` for a type with no zero (vectors).
    pub(super) fn repair(&mut self) -> Option<()> {
        let cfg = Cfg::compute(&self.f);
        let dt = DomTree::compute(&cfg);
        let mut def: Vec<Option<Block>> = vec![None; self.f.regs.len()];
        for &b in &cfg.rpo {
            for &i in self.f.block_insts(b) {
                for &r in self.f.results(i) {
                    def[r.index()] = Some(b);
                }
            }
        }
        let broken = broken_reads(&self.f, &cfg, &dt, &def);
        if broken.is_empty() {
            return Some(());
        }
        let df = dominance_frontiers(&cfg, &dt);
        let mut new_phis: Vec<(Block, Inst)> = Vec::new();
        for reads in broken.chunk_by(|x, y| x.0 == y.0) {
            self.carry(
                reads,
                def[reads[0].0.index()],
                (&cfg, &dt, &df),
                &mut new_phis,
            )?;
        }
        self.insert_read_phis(&new_phis);
        Some(())
    }

    /// Carry register `reads[0].0`, defined in block `d`, to its `reads` (register, block,
    /// instruction) that the definition does not dominate: phis at the iterated dominance
    /// frontier of the definition (added to `new_phis`, not yet placed), and each read
    /// rewritten to the nearest definition above it.
    fn carry(
        &mut self,
        reads: &[(Reg, Block, Inst)],
        d: Option<Block>,
        (cfg, dt, df): (&Cfg, &DomTree, &Frontiers),
        new_phis: &mut Vec<(Block, Inst)>,
    ) -> Option<()> {
        let reachable = |b: Block| cfg.rpo_index[b] != u32::MAX;
        let r = reads[0].0;
        let ty = self.f.reg_type(r);
        let zero = self.zero(ty)?;
        // Phi blocks: the iterated dominance frontier of the definition.
        let mut phi_of: HashMap<Block, Reg> = HashMap::default();
        let mut work: Vec<Block> = d.into_iter().collect();
        while let Some(x) = work.pop() {
            for &y in df.get(&x).map(|v| v.as_slice()).unwrap_or(&[]) {
                if let std::collections::hash_map::Entry::Vacant(v) = phi_of.entry(y) {
                    v.insert(self.f.new_reg(ty));
                    work.push(y);
                }
            }
        }
        // The value at the end of block `x`.
        let at_end = |mut x: Block| loop {
            if Some(x) == d {
                return Operand::Reg(r);
            }
            if let Some(&p) = phi_of.get(&x) {
                return Operand::Reg(p);
            }
            match dt.idom[x].expand() {
                Some(up) => x = up,
                None => return zero,
            }
        };
        // The reads the definition does not dominate: in a block with a phi of `r`, that
        // phi; elsewhere the value at the end of the block's immediate dominator (a phi reads
        // at the end of its predecessor).
        for &(_, b, i) in reads {
            let here = match phi_of.get(&b) {
                Some(&p) => Operand::Reg(p),
                None => dt.idom[b].expand().map_or(zero, &at_end),
            };
            let mut ops = self.f.operands(i).to_vec();
            let phi = self.f.insts[i].opcode == Opcode::Phi;
            for q in 0..ops.len() {
                let v = match (phi, ops.get(q + 1)) {
                    (true, Some(Operand::Block(p))) if reachable(*p) => at_end(*p),
                    (true, _) => continue,
                    (false, _) => here,
                };
                let Operand::Reg(v) = v else {
                    return None;
                };
                ops[q].map_regs(|s| if s == r { v } else { s });
            }
            self.f.set_operands(i, &ops);
        }
        for (&y, &p) in &phi_of {
            let ops: Vec<Operand> = cfg.preds[y]
                .iter()
                .filter(|&&q| reachable(q))
                .flat_map(|&q| [at_end(q), Operand::Block(q)])
                .collect();
            let i = self.f.make_inst(Opcode::Phi, ty, &[p], &ops);
            new_phis.push((y, i));
        }
        Some(())
    }

    /// Place the new phis that something reads (a phi read only by phis that nothing reads
    /// is dropped too) at the top of their blocks.
    fn insert_read_phis(&mut self, new_phis: &[(Block, Inst)]) {
        let mut uses: HashMap<Reg, u32> = HashMap::default();
        let count = |f: &Function, i: Inst, uses: &mut HashMap<Reg, u32>, by: i32| {
            for o in f.operands(i) {
                for r in o.regs() {
                    let u = uses.entry(r).or_default();
                    *u = u.wrapping_add_signed(by);
                }
            }
        };
        for &b in &self.f.layout {
            for &i in self.f.block_insts(b) {
                count(&self.f, i, &mut uses, 1);
            }
        }
        for &(_, i) in new_phis {
            count(&self.f, i, &mut uses, 1);
        }
        let mut live = vec![true; new_phis.len()];
        loop {
            let mut changed = false;
            for (k, &(_, i)) in new_phis.iter().enumerate() {
                let r = self.f.results(i)[0];
                let read_by_self = self
                    .f
                    .operands(i)
                    .iter()
                    .filter(|o| matches!(o, Operand::Reg(s) if *s == r))
                    .count() as u32;
                if live[k] && uses.get(&r).copied().unwrap_or(0) == read_by_self {
                    live[k] = false;
                    changed = true;
                    count(&self.f, i, &mut uses, -1);
                }
            }
            if !changed {
                break;
            }
        }
        for (k, &(y, i)) in new_phis.iter().enumerate() {
            if live[k] {
                self.f.insert_inst(y, 0, i);
                self.repair_edges += self.f.operands(i).len() / 2;
            }
        }
    }
}

/// The reads of registers of `f` where their definition (`def`, by register) does not
/// dominate the read (a phi reads at the end of its predecessor): (register, block,
/// instruction), sorted by register, then instruction.
fn broken_reads(
    f: &Function,
    cfg: &Cfg,
    dt: &DomTree,
    def: &[Option<Block>],
) -> Vec<(Reg, Block, Inst)> {
    let reachable = |b: Block| cfg.rpo_index[b] != u32::MAX;
    let mut broken: Vec<(Reg, Block, Inst)> = Vec::new();
    for &b in &cfg.rpo {
        for &i in f.block_insts(b) {
            let ops = f.operands(i).unpacked();
            let phi = f.insts[i].opcode == Opcode::Phi;
            for (q, o) in ops.iter().enumerate() {
                let at = match (phi, ops.get(q + 1)) {
                    (true, Some(Operand::Block(p))) if reachable(*p) => *p,
                    (true, _) => continue,
                    (false, _) => b,
                };
                for r in o.regs() {
                    if !def[r.index()].is_some_and(|d| dt.dominates(d, at)) {
                        broken.push((r, b, i));
                    }
                }
            }
        }
    }
    broken.sort_unstable_by_key(|&(r, _, i)| (r, i));
    broken.dedup();
    broken
}

/// Dominance frontiers (Cooper, Harvey and Kennedy).
fn dominance_frontiers(cfg: &Cfg, dt: &DomTree) -> Frontiers {
    let reachable = |b: Block| cfg.rpo_index[b] != u32::MAX;
    let mut df: Frontiers = HashMap::default();
    for &b in &cfg.rpo {
        let preds = &cfg.preds[b];
        if preds.len() < 2 {
            continue;
        }
        let idom = dt.idom[b].expand();
        for &p in preds.iter().filter(|&&p| reachable(p)) {
            let mut x = Some(p);
            while let Some(y) = x.filter(|&y| Some(y) != idom) {
                let f = df.entry(y).or_default();
                if !f.contains(&b) {
                    f.push(b);
                }
                x = dt.idom[y].expand();
            }
        }
    }
    df
}
