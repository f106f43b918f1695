//! Instructions and their operands (Cranelift's `ir::dfg`): making instructions, the packed
//! operand pool and the wide operands, results, and the instruction's auxiliary words.

use super::entities::*;
use super::function::Function;
use super::inst::{Format, InstData, Opcode, PoolRange};
use super::operand::{Operand, Operands, PackedOperand};
use super::types::Type;

/// Scratch memory in which functions' operand pools are built, one function after another
/// (`Function::build_operands_in`).
#[derive(Default)]
pub struct OperandRoom(pub(super) Vec<PackedOperand>);

impl Function {
    /// Create instruction data (not yet placed in a block).
    #[inline]
    pub fn make_inst(
        &mut self,
        opcode: Opcode,
        ty: Type,
        results: &[Reg],
        operands: &[Operand],
    ) -> Inst {
        self.extend_operands(operands);
        self.make_inst_pooled(opcode, ty, results, operands.len())
    }

    /// Pack `op` (into the wide table if it does not fit in a word).
    #[inline(always)]
    pub fn pack(&mut self, op: Operand) -> PackedOperand {
        match PackedOperand::inline(op) {
            Some(p) => p,
            None => self.pack_wide(op),
        }
    }

    #[inline(never)]
    fn pack_wide(&mut self, op: Operand) -> PackedOperand {
        let k = self.wide_operands.len();
        assert!(k < 1 << 32, "more than 2^32 wide operands in {}", self.name);
        self.wide_operands.push(op);
        PackedOperand::wide(k as u32)
    }

    /// Push an operand onto the end of the operand pool (for `make_inst_pooled`).
    #[inline(always)]
    pub fn push_operand(&mut self, op: Operand) {
        let p = self.pack(op);
        self.operand_pool.push(p);
    }

    /// Push operands onto the end of the operand pool (for `make_inst_pooled`).
    #[inline]
    pub fn extend_operands(&mut self, ops: &[Operand]) {
        self.operand_pool.reserve(ops.len());
        for &op in ops {
            self.push_operand(op);
        }
    }

    /// Make room for `n` more operands in the pool.
    #[inline]
    pub fn reserve_operands(&mut self, n: usize) {
        self.operand_pool.reserve(n);
    }

    /// Build this function's operand pool in `room` until `cut_operands_from(room)`: the
    /// pool grows in memory that is warm and already large enough (kept from one function
    /// to the next), and then moves to an array of exactly its size. A builder that cannot
    /// count a function's operands in advance would otherwise reserve more than it uses in
    /// fresh memory, which costs its page faults whether it is used or not. The pool must
    /// be empty.
    #[doc(hidden)]
    pub fn build_operands_in(&mut self, room: &mut OperandRoom) {
        debug_assert!(self.operand_pool.is_empty());
        core::mem::swap(&mut self.operand_pool, &mut room.0);
        self.operand_pool.clear();
    }

    /// End `build_operands_in`: the pool is copied to an array of exactly its length, and
    /// `room` gets its memory back.
    #[doc(hidden)]
    pub fn cut_operands_from(&mut self, room: &mut OperandRoom) {
        let exact = self.operand_pool.to_vec();
        room.0 = core::mem::replace(&mut self.operand_pool, exact);
    }

    /// `make_inst` for operands the caller has pushed onto the end of the operand pool
    /// (`push_operand`): the last `n` entries become the instruction's operands, where they
    /// are.
    #[doc(hidden)]
    #[inline]
    pub fn make_inst_pooled(
        &mut self,
        opcode: Opcode,
        ty: Type,
        results: &[Reg],
        n: usize,
    ) -> Inst {
        self.make_inst_pooled_aux(opcode, ty, results, n, 0)
    }

    /// `make_inst_pooled` with `aux` set, inlined into the caller (the lifter's hot path).
    #[doc(hidden)]
    #[inline(always)]
    pub fn make_inst_pooled_aux(
        &mut self,
        opcode: Opcode,
        ty: Type,
        results: &[Reg],
        n: usize,
        aux: u32,
    ) -> Inst {
        let results = match *results {
            // The only result lives in the instruction itself (see `results`).
            [r] => PoolRange {
                start: r.as_u32(),
                len: 1,
            },
            _ => push_range(&mut self.result_pool, results),
        };
        if opcode.has_aux2() {
            // The second auxiliary word sits just before the operands (`aux2`).
            let at = self.operand_pool.len() - n;
            self.operand_pool
                .insert(at, PackedOperand::inline(Operand::Int(0)).unwrap());
        }
        let operands = PoolRange {
            start: (self.operand_pool.len() - n) as u32,
            len: n as u32,
        };
        self.insts
            .push(InstData::new(opcode, ty, aux, results, operands))
    }

    /// The result registers of an instruction. One result (the common case) is held in the
    /// instruction's `results.start`; several are a range of `result_pool`.
    #[inline]
    pub fn results(&self, inst: Inst) -> &[Reg] {
        let d = &self.insts[inst];
        let r = d.results();
        if r.len == 1 {
            // SAFETY: `Reg` is a `repr(transparent)` wrapper of `u32`, and for one result
            // the start of the range holds that register's index.
            core::slice::from_ref(unsafe { &*(d.results_start_ref() as *const u32 as *const Reg) })
        } else {
            &self.result_pool[r.range()]
        }
    }

    /// The operands of an instruction (unpacked as they are read).
    #[inline(always)]
    pub fn operands(&self, inst: Inst) -> Operands<'_> {
        Operands::new(self.packed_operands(inst), &self.wide_operands)
    }

    /// Operand `k` of an instruction.
    #[inline(always)]
    pub fn operand(&self, inst: Inst, k: usize) -> Operand {
        self.operands(inst).at(k)
    }

    /// Unpack a word of this function's operand pool.
    #[inline(always)]
    pub fn unpack(&self, p: PackedOperand) -> Operand {
        p.unpack(&self.wide_operands)
    }

    /// The packed operand words of an instruction.
    #[inline(always)]
    pub fn packed_operands(&self, inst: Inst) -> &[PackedOperand] {
        &self.operand_pool[self.insts[inst].operands().range()]
    }

    /// Set operand `k` of an instruction.
    pub fn set_operand(&mut self, inst: Inst, k: usize, op: Operand) {
        let r = self.insts[inst].operands();
        assert!(k < r.len as usize, "{inst} has no operand {k}");
        self.put_operand(r.start as usize + k, op);
    }

    /// Store `op` at `at` in the pool. A wide operand takes a new slot of the wide table (an
    /// old slot is left unused, never overwritten: the table is append-only, so a packed
    /// word, wherever it was copied, always means the same operand).
    fn put_operand(&mut self, at: usize, op: Operand) {
        let p = self.pack(op);
        self.operand_pool[at] = p;
    }

    /// Apply `f` to every register every operand in the pool reads (registers, and the base
    /// and index of memory references), instructions placed or not.
    /// A word is written only when its operand changes (untouched cache lines stay clean).
    pub fn map_operand_regs(&mut self, mut f: impl FnMut(Reg) -> Reg) {
        for at in 0..self.operand_pool.len() {
            let p = self.operand_pool[at];
            if let Some(r) = p.as_reg() {
                let c = f(r);
                if c != r {
                    self.operand_pool[at] = PackedOperand::reg(c);
                }
            } else if p.may_hold_mem() {
                let old = p.unpack(&self.wide_operands);
                let mut op = old;
                op.map_regs(&mut f);
                if op != old {
                    self.put_operand(at, op);
                }
            }
        }
    }

    /// Make the last `n` operands pushed onto the pool (`push_operand`) the operand list of
    /// `inst`, an instruction made with none and without a second auxiliary word (a phi
    /// whose sources are known only once every edge is: `set_operands` without the list in
    /// between).
    #[inline]
    pub fn set_pushed_operands(&mut self, inst: Inst, n: usize) {
        let d = &mut self.insts[inst];
        debug_assert!(d.operands().len == 0 && !d.opcode.has_aux2());
        d.set_operands(PoolRange {
            start: (self.operand_pool.len() - n) as u32,
            len: n as u32,
        });
    }

    /// Replace the operand list of `inst` (appends to the pool when it grows).
    pub fn set_operands(&mut self, inst: Inst, ops: &[Operand]) {
        let cur = self.insts[inst].operands();
        if ops.len() <= cur.len as usize {
            let start = cur.start as usize;
            for (k, &op) in ops.iter().enumerate() {
                self.put_operand(start + k, op);
            }
            self.insts[inst].set_operands(PoolRange {
                start: cur.start,
                len: ops.len() as u32,
            });
        } else {
            if self.insts[inst].opcode.has_aux2() {
                let a = self.aux2(inst);
                self.push_operand(Operand::Int(a as i64));
            }
            let start = self.operand_pool.len() as u32;
            self.extend_operands(ops);
            self.insts[inst].set_operands(PoolRange {
                start,
                len: ops.len() as u32,
            });
        }
    }

    /// The second auxiliary word of an instruction (`Opcode::has_aux2`; 0 for the others): a
    /// `try_call`'s exception table, an opaque instruction's memory flags plus one (0 for
    /// none). It is kept in the operand pool just before the operands, so the instruction
    /// record of every other instruction is a word smaller.
    #[inline]
    pub fn aux2(&self, inst: Inst) -> u32 {
        let d = &self.insts[inst];
        if !d.opcode.has_aux2() {
            return 0;
        }
        match self.unpack(self.operand_pool[d.operands().start as usize - 1]) {
            Operand::Int(v) => v as u32,
            _ => unreachable!("the aux2 word of {inst} is not a constant"),
        }
    }

    /// Set the second auxiliary word of a `try_call` or opaque instruction (see `aux2`).
    pub fn set_aux2(&mut self, inst: Inst, v: u32) {
        let d = self.insts[inst];
        assert!(d.opcode.has_aux2(), "{} has no aux2 word", d.opcode.name());
        self.put_operand(d.operands().start as usize - 1, Operand::Int(v as i64));
    }

    /// The type a constant operand stands for: what lowering materialises for operand `k` of
    /// `inst` (the instruction's type; a shift amount or a select condition, a call argument
    /// or a returned value by its own type; integers of other types as `i64`).
    pub fn constant_type(&self, inst: Inst, k: usize) -> Type {
        let d = self.insts[inst];
        match self.operand(inst, k) {
            Operand::F32(_) => return Type::F32,
            Operand::F64(_) => return Type::F64,
            _ => {}
        }
        let t = match d.opcode.format() {
            Format::Unary | Format::Binary | Format::Ternary => match d.opcode {
                Opcode::Shl | Opcode::Ushr | Opcode::Sshr | Opcode::Rotl | Opcode::Rotr
                    if k == 1 =>
                {
                    Type::I64
                }
                Opcode::Select | Opcode::SelectSpectreGuard if k == 0 => Type::I8,
                _ => d.ty,
            },
            Format::Return => self.sig.returns.get(k).map_or(Type::I64, |p| p.ty),
            Format::Call => self.sigs[SigRef::from_u32(d.aux)]
                .params
                .get(k.wrapping_sub(1))
                .map_or(Type::I64, |p| p.ty),
            _ => d.ty,
        };
        if t.is_scalar_int() {
            t
        } else {
            Type::I64
        }
    }
}

#[inline]
fn push_range<T: Copy>(pool: &mut Vec<T>, items: &[T]) -> PoolRange {
    let start = pool.len() as u32;
    pool.extend_from_slice(items);
    PoolRange {
        start,
        len: items.len() as u32,
    }
}
