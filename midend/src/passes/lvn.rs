//! Hash-based local value numbering (seed 002), block by block.
//!
//! Each register gets a value number (VN). An instruction without side effects is keyed by its
//! opcode, type, flags and operand VNs (commutative operands ordered by VN; comparisons
//! canonicalised by swapping operands and the predicate). A key seen before makes the
//! instruction redundant: its result is renamed to the earlier register and the instruction is
//! deleted. Calls, phis and instructions with side effects get fresh VNs; terminators are
//! ignored.
//!
//! Memory (seed 002, "Loads and stores"): a load's key includes a memory VN.
//! - Stack objects and external symbols are *memory objects* split into segments by access,
//!   each with its own memory VN and last-stored VN: a store to one segment leaves the others
//!   (and other objects) alone, and a load reading exactly a stored segment with the same type
//!   is forwarded from the stored value.
//! - Generic references `[base + index*scale + disp]` use epochs: a store through a generic
//!   reference clears all memory objects; a load forwards from the last generic store with the
//!   same base, index, scale and displacement if memory did not change since.
//! - Beyond the seed: `readonly` loads are never invalidated; a store in one alias region does
//!   not change the memory VN of loads in another region.
//! - Calls and instructions with other side effects invalidate everything.
//!
//! Soundness notes: a store to a memory object also bumps the generic epochs (a generic pointer
//! may point into a stack object whose address escaped); forwarding needs the same opcode
//! width (`store`/`load` of one type) so no extension is skipped.

use crate::lir::{
    effects, Cond, Function, Imm, Inst, MemFlagsRef, Module, Opcode, Operand, Reg, Region,
    StackObj, Symbol, Type,
};
use crate::pass::{Pass, Stats};
use crate::Error;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, SecondaryMap};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

pub struct Lvn;

impl Pass for Lvn {
    fn name(&self) -> &'static str {
        "lvn"
    }
    fn run(&mut self, module: &mut Module, stats: &mut Stats) -> Result<(), Error> {
        let mut st = LvnStats::default();
        let mut lvn = LocalValueNumbering::default();
        lvn.run_module(module, &mut st);
        stats.add("lvn.removed", st.removed);
        stats.add("lvn.forwarded", st.forwarded);
        stats.add("lvn.loads_removed", st.loads_removed);
        Ok(())
    }
}

/// Counters of one LVN run.
#[derive(Default, Debug, Clone, Copy)]
pub struct LvnStats {
    /// Instructions deleted (redundant or forwarded).
    pub removed: u64,
    /// Loads replaced by a stored value.
    pub forwarded: u64,
    /// Loads replaced by an earlier identical load.
    pub loads_removed: u64,
}

/// One part of an instruction key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyOp {
    Vn(u32),
    Imm(Imm),
    Pred(Cond),
    Sym(Symbol, i64),
    Stack(StackObj, i32),
    Arg(u32),
    /// Base VN (or 0), index VN (or 0), scale, displacement.
    Mem(u32, u32, u8, i32),
    /// A memory VN or epoch.
    MemVn(u32),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    opcode: Opcode,
    ty: Type,
    aux: u32,
    aux2: u32,
    ops: SmallVec<[KeyOp; 4]>,
}

/// A segment `[off, off+size)` of a memory object.
#[derive(Clone, Copy, Debug)]
struct Segment {
    off: i64,
    end: i64,
    mem_vn: u32,
    /// VN of the last value stored to exactly this segment, with the store's type.
    /// (value VN, stored type, byte-order bits of the store's flags).
    last_stored: Option<(u32, Type, u8)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ObjKey {
    Stack(StackObj),
    Sym(Symbol),
}

/// The explicit byte order of an access (little, big or native): a stored value forwards only
/// to a load that reads the bytes in the same order.
fn byte_order(f: crate::lir::MemFlags) -> u8 {
    f.bits & (crate::lir::MemFlags::LITTLE | crate::lir::MemFlags::BIG)
}

const SEG_MIN: i64 = -(1 << 40);
const SEG_MAX: i64 = 1 << 40;

/// The last store through a generic reference.
#[derive(Clone, Copy)]
struct GenericStore {
    addr: KeyOp,
    value: u32,
    ty: Type,
    /// Byte-order bits of the store's flags: forwarding needs the load's to match.
    order: u8,
    epoch: u32,
}

/// Reusable state (tables keep their capacity across blocks and functions).
#[derive(Default)]
pub struct LocalValueNumbering {
    next_vn: u32,
    /// Block generation: register VNs and region epochs of older blocks are stale.
    gen: u32,
    /// (generation, VN) of each register.
    vn: SecondaryMap<Reg, (u32, u32)>,
    /// First VN of the current block; only VNs from here on have leaders.
    block_base: u32,
    /// VN - block_base → register holding it (first definition in the block).
    leader: Vec<PackedOption<Reg>>,
    /// The block's table: an open-addressing hash table sized to the block (cleared in
    /// O(block), not O(capacity)); `slots` index `keys`/`key_vns` plus one.
    keys: Vec<Key>,
    key_vns: Vec<u32>,
    slots: Vec<u32>,
    mask: usize,
    objects: FxHashMap<ObjKey, Vec<Segment>>,
    /// Bumped by every store or side effect: the memory VN of region-less generic loads.
    epoch_any: u32,
    /// Bumped by stores without a region and by side effects.
    epoch_unregioned: u32,
    /// Per-region epochs, stamped with `region_gen` (older stamps read as 0).
    epoch_region: SecondaryMap<Region, (u32, u32)>,
    region_gen: u32,
    last_generic: Option<GenericStore>,
    /// Register renaming: redundant result → earlier register.
    rename: SecondaryMap<Reg, Option<Reg>>,
    dead: SecondaryMap<Inst, bool>,
    /// Canonical id of each opaque record's contents.
    opaque_ids: FxHashMap<(String, SmallVec<[u64; 2]>, u8), u32>,
}

/// Does computing this global value load from memory that is not `readonly`? (Such a
/// `global_value` is a load: a store may change it, so it is not keyed like a pure value.)
fn global_reads_memory(f: &Function, g: crate::lir::GlobalRef) -> bool {
    match f.globals[g] {
        crate::lir::GlobalData::Load { base, flags, .. } => {
            !f.memflags[flags].readonly() || global_reads_memory(f, base)
        }
        crate::lir::GlobalData::IAddImm { base, .. } => global_reads_memory(f, base),
        _ => false,
    }
}

impl LocalValueNumbering {
    fn fresh(&mut self) -> u32 {
        self.next_vn += 1;
        if self.next_vn >= self.block_base {
            self.leader.push(None.into());
        }
        self.next_vn
    }

    fn leader_of(&self, vn: u32) -> Option<Reg> {
        if vn < self.block_base {
            return None;
        }
        self.leader
            .get((vn - self.block_base) as usize)
            .and_then(|r| r.expand())
    }

    fn set_leader(&mut self, vn: u32, r: Reg) {
        if vn >= self.block_base {
            if let Some(slot) = self.leader.get_mut((vn - self.block_base) as usize) {
                *slot = r.into();
            }
        }
    }

    fn set_vn(&mut self, r: Reg, vn: u32) {
        self.vn[r] = (self.gen, vn);
    }

    /// The VN of a register. A register defined in another block gets a fresh VN of this
    /// block, and holds it (its definition dominates this use).
    fn vn_of(&mut self, r: Reg) -> u32 {
        let r = self.rename[r].unwrap_or(r);
        let (g, v) = self.vn[r];
        if g == self.gen && v != 0 {
            return v;
        }
        let v = self.fresh();
        self.set_leader(v, r);
        self.set_vn(r, v);
        v
    }

    /// Find `key` in the block's table, or insert it with a fresh VN: (VN, found).
    fn lookup(&mut self, key: Key) -> (u32, bool) {
        use core::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        key.hash(&mut h);
        let mut i = (h.finish() as usize) & self.mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                let v = self.fresh();
                self.keys.push(key);
                self.key_vns.push(v);
                self.slots[i] = self.keys.len() as u32;
                return (v, false);
            }
            if self.keys[slot as usize - 1] == key {
                return (self.key_vns[slot as usize - 1], true);
            }
            i = (i + 1) & self.mask;
        }
    }

    fn key_op(&mut self, op: &Operand) -> KeyOp {
        match *op {
            Operand::Reg(r) => KeyOp::Vn(self.vn_of(r)),
            Operand::Int(v) => KeyOp::Imm(Imm::Int(v)),
            Operand::F32(b) => KeyOp::Imm(Imm::F32(b)),
            Operand::F64(b) => KeyOp::Imm(Imm::F64(b)),
            Operand::Pred(c) => KeyOp::Pred(c),
            Operand::Sym(s, o) => KeyOp::Sym(s, o),
            Operand::Stack(s, o) => KeyOp::Stack(s, o),
            Operand::Arg(n) => KeyOp::Arg(n),
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => {
                let b = base.expand().map_or(0, |r| self.vn_of(r));
                let i = index.expand().map_or(0, |r| self.vn_of(r));
                KeyOp::Mem(b, i, scale, disp)
            }
            Operand::Block(b) => KeyOp::Arg(u32::MAX - b.index() as u32),
        }
    }

    /// Memory changed in a way LVN cannot track: forget every object and bump every epoch.
    fn clobber_all(&mut self) {
        if !self.objects.is_empty() {
            self.objects.clear();
        }
        self.epoch_any += 1;
        self.epoch_unregioned += 1;
        self.region_gen += 1;
        self.last_generic = None;
    }

    /// Start a block of `len` instructions: empty table, no leaders, no memory knowledge.
    fn begin_block(&mut self, len: usize) {
        self.gen += 1;
        self.block_base = self.next_vn + 1;
        self.leader.clear();
        self.keys.clear();
        self.key_vns.clear();
        let cap = (2 * len + 2).next_power_of_two().max(16);
        if self.slots.len() < cap {
            self.slots.resize(cap, 0);
        }
        self.slots[..cap].fill(0);
        self.mask = cap - 1;
        self.clobber_all();
    }

    /// Split the segments of `obj` so `[off, end)` starts and ends on boundaries; return the
    /// index range of the covered segments.
    fn split(&mut self, obj: ObjKey, off: i64, end: i64) -> (usize, usize) {
        if !self.objects.contains_key(&obj) {
            // Initially one segment covering everything, with a fresh memory VN.
            let v = self.fresh();
            self.objects.insert(
                obj,
                vec![Segment {
                    off: SEG_MIN,
                    end: SEG_MAX,
                    mem_vn: v,
                    last_stored: None,
                }],
            );
        }
        let segs = self.objects.get_mut(&obj).unwrap();
        for at in [off, end] {
            if let Some(i) = segs.iter().position(|s| s.off < at && at < s.end) {
                let s = segs[i];
                // Both halves keep the parent's VNs, as in the seed's walk-through; a partial
                // last-stored value no longer describes either half.
                segs[i] = Segment {
                    end: at,
                    last_stored: None,
                    ..s
                };
                segs.insert(
                    i + 1,
                    Segment {
                        off: at,
                        last_stored: None,
                        ..s
                    },
                );
            }
        }
        let first = segs.iter().position(|s| s.off == off).unwrap_or(0);
        let last = segs
            .iter()
            .position(|s| s.end == end)
            .unwrap_or(segs.len() - 1);
        (first, last + 1)
    }

    fn region_value(&self, r: Region) -> u32 {
        let (g, v) = self.epoch_region[r];
        if g == self.region_gen {
            v
        } else {
            0
        }
    }

    fn region_epoch(&mut self, region: Option<Region>) -> (u32, u32) {
        match region {
            None => (self.epoch_any, 0),
            Some(r) => (self.region_value(r), self.epoch_unregioned),
        }
    }

    /// Number every live function of a module, loading the next function's arrays while
    /// the current one is numbered (a large module does not fit in any cache).
    pub fn run_module(&mut self, m: &mut Module, st: &mut LvnStats) {
        let ids: Vec<crate::lir::FuncId> = m.live_functions().map(|(id, _)| id).collect();
        for (k, &id) in ids.iter().enumerate() {
            m.prefetch_ahead(&ids, k);
            self.run(&mut m.functions[id], st);
        }
    }

    /// Number one function.
    pub fn run(&mut self, f: &mut Function, st: &mut LvnStats) {
        // Register VNs and region epochs are stamped with generations and need no reset.
        self.rename.clear();
        self.dead.clear();
        if !self.opaque_ids.is_empty() {
            self.opaque_ids.clear();
        }
        let mut any = false;
        for bi in 0..f.layout.len() {
            let b = f.layout[bi];
            self.begin_block(f.blocks[b].insts.len());
            for ii in 0..f.blocks[b].insts.len() {
                let inst = f.blocks[b].insts[ii];
                any |= self.visit(f, inst, st);
            }
        }
        if !any {
            return;
        }
        // Rewrite uses and delete dead instructions.
        let rename = &self.rename;
        for op in f.operand_pool.iter_mut() {
            op.map_regs(|r| {
                let mut r = r;
                while let Some(n) = rename[r] {
                    r = n;
                }
                r
            });
        }
        for &b in &f.layout {
            f.blocks[b].insts.retain(|&i| !self.dead[i]);
        }
    }

    fn redundant(&mut self, inst: Inst, dst: Reg, vn: u32, st: &mut LvnStats) -> bool {
        match self.leader_of(vn) {
            Some(lead) if lead != dst => {
                self.rename[dst] = Some(lead);
                self.set_vn(dst, vn);
                self.dead[inst] = true;
                st.removed += 1;
                true
            }
            _ => {
                self.set_vn(dst, vn);
                self.set_leader(vn, dst);
                false
            }
        }
    }

    /// Visit one instruction; returns whether it was removed.
    fn visit(&mut self, f: &Function, inst: Inst, st: &mut LvnStats) -> bool {
        let d = f.insts[inst];
        let results = f.results(inst);
        let ops = f.operands(inst);
        let fx = f.inst_effects(inst);
        match d.opcode {
            Opcode::Phi => {
                for &r in results {
                    let v = self.fresh();
                    self.set_vn(r, v);
                    self.set_leader(v, r);
                }
                return false;
            }
            _ if d.opcode.is_terminator() && !d.opcode.is_call() => return false,
            _ => {}
        }
        if d.opcode.is_load() {
            return self.visit_load(f, inst, st);
        }
        if d.opcode.is_store() {
            self.visit_store(f, inst);
            return false;
        }
        // Calls, atomics, fences, traps and opaque instructions with effects.
        let pure = fx & (effects::STORE | effects::SIDE | effects::LOAD) == 0
            && !d.opcode.is_call()
            && !(d.opcode == Opcode::GlobalValue
                && global_reads_memory(f, crate::lir::GlobalRef::from_u32(d.aux)));
        if !pure || results.len() != 1 {
            if fx & (effects::STORE | effects::SIDE) != 0 || d.opcode.is_call() {
                self.clobber_all();
            }
            for &r in results {
                let v = self.fresh();
                self.set_vn(r, v);
                self.set_leader(v, r);
            }
            return false;
        }
        // A pure one-result instruction: hash it.
        let mut key = Key {
            opcode: d.opcode,
            ty: d.ty,
            aux: d.aux,
            aux2: d.aux2,
            ops: SmallVec::new(),
        };
        if d.opcode == Opcode::Opaque {
            let o = &f.opaques[crate::lir::OpaqueRef::from_u32(d.aux)];
            let k = (o.name.clone(), o.imms.clone(), o.effects);
            let n = self.opaque_ids.len() as u32;
            key.aux = *self.opaque_ids.entry(k).or_insert(n);
        }
        for op in ops {
            let k = self.key_op(op);
            key.ops.push(k);
        }
        if d.opcode == Opcode::Copy {
            if let KeyOp::Vn(v) = key.ops[0] {
                // A register copy has the VN of its source.
                return self.redundant(inst, results[0], v, st);
            }
        }
        if d.opcode.is_commutative() && key.ops.len() == 2 && key.ops[0] > key.ops[1] {
            key.ops.swap(0, 1);
        }
        if matches!(d.opcode, Opcode::Icmp | Opcode::Fcmp) && key.ops[1] > key.ops[2] {
            key.ops.swap(1, 2);
            if let KeyOp::Pred(c) = key.ops[0] {
                key.ops[0] = KeyOp::Pred(c.swapped());
            }
        }
        let dst = results[0];
        let (vn, _) = self.lookup(key);
        self.redundant(inst, dst, vn, st)
    }

    fn mem_target(&mut self, op: &Operand, bytes: u32) -> Option<(ObjKey, i64, i64)> {
        match *op {
            Operand::Stack(s, off) => {
                Some((ObjKey::Stack(s), off as i64, off as i64 + bytes as i64))
            }
            Operand::Sym(s, off) => Some((ObjKey::Sym(s), off, off.saturating_add(bytes as i64))),
            _ => None,
        }
    }

    fn visit_load(&mut self, f: &Function, inst: Inst, st: &mut LvnStats) -> bool {
        let d = f.insts[inst];
        let dst = f.results(inst)[0];
        let mem = f.operands(inst)[0];
        let flags = f.memflags[MemFlagsRef::from_u32(d.aux)];
        let bytes = d.opcode.access_bytes(d.ty);
        let mut key = Key {
            opcode: d.opcode,
            ty: d.ty,
            aux: d.aux,
            aux2: 0,
            ops: SmallVec::new(),
        };
        key.ops.push(self.key_op(&mem));
        if flags.readonly() {
            // Never written while the function runs: no memory VN needed.
        } else if let Some((obj, off, end)) = self.mem_target(&mem, bytes) {
            let (a, b) = self.split(obj, off, end);
            let segs = &self.objects[&obj];
            if b - a == 1 && d.opcode == Opcode::Load {
                if let Some((v, ty, order)) = segs[a].last_stored {
                    if ty == d.ty && order == byte_order(flags) {
                        if let Some(lead) = self.leader_of(v) {
                            self.rename[dst] = Some(lead);
                            self.set_vn(dst, v);
                            self.dead[inst] = true;
                            st.removed += 1;
                            st.forwarded += 1;
                            return true;
                        }
                    }
                }
            }
            for s in &segs[a..b] {
                key.ops.push(KeyOp::MemVn(s.mem_vn));
            }
        } else {
            if let (Some(g), Opcode::Load) = (self.last_generic, d.opcode) {
                if g.addr == key.ops[0]
                    && g.ty == d.ty
                    && g.order == byte_order(flags)
                    && g.epoch == self.epoch_any
                {
                    if let Some(lead) = self.leader_of(g.value) {
                        self.rename[dst] = Some(lead);
                        self.set_vn(dst, g.value);
                        self.dead[inst] = true;
                        st.removed += 1;
                        st.forwarded += 1;
                        return true;
                    }
                }
            }
            let (e1, e2) = self.region_epoch(flags.region);
            key.ops.push(KeyOp::MemVn(e1));
            key.ops.push(KeyOp::MemVn(e2));
        }
        let (vn, found) = self.lookup(key);
        let removed = self.redundant(inst, dst, vn, st);
        if removed && found {
            st.loads_removed += 1;
        }
        removed
    }

    fn visit_store(&mut self, f: &Function, inst: Inst) {
        let d = f.insts[inst];
        let ops = f.operands(inst);
        let (mem, val) = (ops[0], ops[1]);
        let flags = f.memflags[MemFlagsRef::from_u32(d.aux)];
        let bytes = d.opcode.access_bytes(d.ty);
        let value_vn = match val {
            Operand::Reg(r) => Some(self.vn_of(r)),
            _ => None,
        };
        // Any store may be seen by generic loads.
        self.epoch_any += 1;
        match flags.region {
            Some(r) => {
                let v = self.region_value(r) + 1;
                self.epoch_region[r] = (self.region_gen, v);
            }
            None => self.epoch_unregioned += 1,
        }
        if let Some((obj, off, end)) = self.mem_target(&mem, bytes) {
            let (a, b) = self.split(obj, off, end);
            let exact = b - a == 1 && d.opcode == Opcode::Store;
            let mut vns = SmallVec::<[u32; 4]>::new();
            for _ in a..b {
                vns.push(self.fresh());
            }
            let segs = self.objects.get_mut(&obj).unwrap();
            for (s, v) in segs[a..b].iter_mut().zip(vns) {
                s.mem_vn = v;
                s.last_stored = None;
            }
            if exact {
                segs[a].last_stored = value_vn.map(|v| (v, d.ty, byte_order(flags)));
            }
            self.last_generic = None;
        } else {
            // A store through a generic reference may write any memory object.
            self.objects.clear();
            let addr = self.key_op(&mem);
            self.last_generic = match (value_vn, d.opcode) {
                (Some(v), Opcode::Store) => Some(GenericStore {
                    addr,
                    value: v,
                    ty: d.ty,
                    order: byte_order(flags),
                    epoch: self.epoch_any,
                }),
                _ => None,
            };
        }
    }
}
