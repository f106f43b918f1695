//! Global value numbering scoped along the dominator tree (as Cranelift's GVN): a value
//! computed in a block is reused by every block it dominates. The table is a scoped hash
//! table: entries made in a block are undone when the walk leaves the block's subtree, so a
//! reuse always refers to a dominating definition.
//!
//! Memory: `readonly` loads are numbered across the whole tree. Other loads are numbered across
//! blocks only when no instruction of the function can write memory (no store, call or other
//! side effect: then no path can write it); otherwise they get a memory epoch that is fresh at
//! every block entry and after every write, which confines them to straight-line stretches
//! with no write in between (what LVN does, without its object segments).

use crate::analysis::{Cfg, DomTree};
use crate::error::Error;
use crate::hash::HashMap;
use crate::lir::{
    effects, Block, Cond, Function, Imm, Inst, MemFlagsRef, Module, Opcode, Operand, Reg, StackObj,
    Symbol, Type,
};
use crate::pass::{Pass, Stats};
use crate::state::{Edit, PassState};
use cranelift_entity::SecondaryMap;
use smallvec::SmallVec;

/// How far down the dominator tree a value is reused. Reuse extends a live range; across long
/// stretches of a large function that costs spills at opt level none, which can cost more
/// code than the reuse saves.
pub const MAX_REUSE_DEPTH: usize = 3;

pub(crate) struct Gvn;

impl Pass for Gvn {
    fn name(&self) -> &'static str {
        "gvn"
    }
    fn run(
        &mut self,
        module: &mut Module,
        state: &mut PassState,
        stats: &mut Stats,
    ) -> Result<(), Error> {
        let mut removed = 0;
        for id in state.open_function_ids(module) {
            let n = gvn_function(&mut module.functions[id]);
            if n > 0 {
                state.record_edit(id, Edit::Modified);
            }
            removed += n;
        }
        stats.add(crate::Counter::GvnRemoved, removed as u64);
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum K {
    Reg(Reg),
    Imm(Imm),
    Mem(Option<Reg>, Option<Reg>, u8, i32),
    /// Symbols, stack objects, predicates, blocks and arguments are keyed by their own
    /// value, never by a hash of it: equal hashes are not equal operands.
    Sym(Symbol, i64),
    Stack(StackObj, i32),
    Pred(Cond),
    Block(Block),
    Arg(u32),
    Epoch(u32),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct GKey {
    opcode: Opcode,
    ty: Type,
    aux: u32,
    aux2: u32,
    ops: SmallVec<[K; 4]>,
}

fn canon(rename: &SecondaryMap<Reg, Option<Reg>>, r: Reg) -> Reg {
    let mut r = r;
    while let Some(n) = rename[r] {
        r = n;
    }
    r
}

fn key_op(rename: &SecondaryMap<Reg, Option<Reg>>, op: &Operand) -> K {
    match *op {
        Operand::Reg(r) => K::Reg(canon(rename, r)),
        Operand::Int(v) => K::Imm(Imm::Int(v)),
        Operand::F32(b) => K::Imm(Imm::F32(b)),
        Operand::F64(b) => K::Imm(Imm::F64(b)),
        Operand::Mem {
            base,
            index,
            scale,
            disp,
        } => K::Mem(
            base.expand().map(|r| canon(rename, r)),
            index.expand().map(|r| canon(rename, r)),
            scale,
            disp,
        ),
        Operand::Sym(s, off) => K::Sym(s, off),
        Operand::Stack(s, off) => K::Stack(s, off),
        Operand::Pred(c) => K::Pred(c),
        Operand::Block(b) => K::Block(b),
        Operand::Arg(n) => K::Arg(n),
    }
}

/// Cheap, rematerialisable operations.
fn is_cheap(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Add
            | Opcode::Sub
            | Opcode::And
            | Opcode::Or
            | Opcode::Xor
            | Opcode::Not
            | Opcode::Neg
            | Opcode::Shl
            | Opcode::Ushr
            | Opcode::Sshr
            | Opcode::Uextend
            | Opcode::Sextend
            | Opcode::Ireduce
            | Opcode::Icmp
            | Opcode::Select
    )
}

/// Number one function; returns the number of instructions removed.
pub fn gvn_function(f: &mut Function) -> usize {
    let Some(entry) = f.entry() else { return 0 };
    let cfg = Cfg::compute(f);
    let dt = DomTree::compute(&cfg);
    let mem_free = cfg.rpo.iter().all(|&b| {
        f.block_insts(b).iter().all(|&i| {
            f.inst_effects(i) & (effects::STORE | effects::SIDE) == 0
                && !f.insts[i].opcode.is_call()
        })
    });
    // Opaque records are compared by content.
    let mut opaque_ids: HashMap<(crate::lir::Name, SmallVec<[u64; 2]>, u8), u32> =
        HashMap::default();
    let mut rename: SecondaryMap<Reg, Option<Reg>> = SecondaryMap::with_capacity(f.regs.len());
    let mut dead: SecondaryMap<Inst, bool> = SecondaryMap::with_capacity(f.insts.len());
    // Key → (register, dominator-tree depth of its block).
    let mut table: HashMap<GKey, (Reg, usize)> = HashMap::default();
    let mut undo: Vec<(GKey, Option<(Reg, usize)>)> = Vec::new();
    let mut removed = 0;
    let mut epoch = 0u32;
    // Iterative DFS over the dominator tree: (block, child index, undo mark).
    let mut stack: Vec<(Block, usize, usize)> = vec![(entry, 0, 0)];
    let mut entered = true;
    while !stack.is_empty() {
        let depth_here = stack.len();
        let (b, mark) = {
            let top = stack.last().unwrap();
            (top.0, top.2)
        };
        if entered {
            entered = false;
            epoch += 1;
            for &inst in f.block_insts(b) {
                let d = f.insts[inst];
                let fx = f.inst_effects(inst);
                if fx & (effects::STORE | effects::SIDE) != 0 || d.opcode.is_call() {
                    epoch += 1;
                    continue;
                }
                let results = f.results(inst);
                if d.opcode == Opcode::Phi || d.opcode.is_terminator() || results.len() != 1 {
                    continue;
                }
                let is_load = d.opcode.is_load();
                if fx & effects::TRAP != 0 && !is_load {
                    // Trapping arithmetic (division): keep it local to be safe about order.
                    continue;
                }
                if matches!(d.opcode, Opcode::GlobalValue | Opcode::TlsValue)
                    || (fx & effects::LOAD != 0 && !is_load)
                {
                    continue;
                }
                let mut key = GKey {
                    opcode: d.opcode,
                    ty: d.ty,
                    aux: d.aux,
                    aux2: f.aux2(inst),
                    ops: SmallVec::new(),
                };
                if d.opcode == Opcode::Opaque {
                    let o = &f.opaques[crate::lir::OpaqueRef::from_u32(d.aux)];
                    let n = opaque_ids.len() as u32;
                    key.aux = *opaque_ids
                        .entry((o.name.clone(), o.imms.clone(), o.effects))
                        .or_insert(n);
                }
                for op in f.operands(inst) {
                    key.ops.push(key_op(&rename, &op));
                }
                if is_load {
                    let readonly = f.memflags[MemFlagsRef::from_u32(d.aux)].readonly();
                    key.ops
                        .push(K::Epoch(if readonly || mem_free { 0 } else { epoch }));
                }
                if d.opcode == Opcode::Copy {
                    if let K::Reg(src) = key.ops[0] {
                        rename[results[0]] = Some(src);
                        dead[inst] = true;
                        removed += 1;
                        continue;
                    }
                }
                if d.opcode.is_commutative() && key.ops.len() == 2 && key.ops[0] > key.ops[1] {
                    key.ops.swap(0, 1);
                }
                if matches!(d.opcode, Opcode::Icmp | Opcode::Fcmp) && key.ops[1] > key.ops[2] {
                    key.ops.swap(1, 2);
                    if let Some(Operand::Pred(c)) = f.operands(inst).first() {
                        key.ops[0] = key_op(&rename, &Operand::Pred(c.swapped()));
                    }
                }
                if (d.opcode == Opcode::Copy && matches!(key.ops[0], K::Imm(_)))
                    || is_cheap(d.opcode)
                {
                    // Constants and one-cycle ALU operations are cheaper to recompute than to
                    // keep live across blocks (x64 also folds address arithmetic into
                    // addressing modes): they are reused only within a block.
                    key.ops.push(K::Epoch(epoch));
                }
                let dst = results[0];
                match table.get(&key) {
                    Some(&(lead, depth)) if depth_here - depth <= MAX_REUSE_DEPTH => {
                        rename[dst] = Some(lead);
                        dead[inst] = true;
                        removed += 1;
                    }
                    prev => {
                        // New, or too far up the tree: this definition leads its subtree.
                        let prev = prev.copied();
                        undo.push((key.clone(), prev));
                        table.insert(key, (dst, depth_here));
                    }
                }
            }
        }
        let child = &mut stack.last_mut().unwrap().1;
        if let Some(&c) = dt.children[b].get(*child) {
            *child += 1;
            stack.push((c, 0, undo.len()));
            entered = true;
        } else {
            // Leave the subtree: undo its table entries.
            while undo.len() > mark {
                let (k, prev) = undo.pop().unwrap();
                match prev {
                    Some(r) => {
                        table.insert(k, r);
                    }
                    None => {
                        table.remove(&k);
                    }
                }
            }
            stack.pop();
        }
    }
    if removed == 0 {
        return 0;
    }
    f.map_operand_regs(|r| canon(&rename, r));
    f.retain_all_insts(|i| !dead[i]);
    removed
}
