//! The layout: the order of a function's blocks, and the instructions of each block, in order
//! (Cranelift's `ir::layout`). Every block's instruction list lives in one array,
//! `Function::inst_order`; a block's `BlockData` says where.

use super::entities::*;
use super::function::{BlockData, Function};
use cranelift_entity::packed_option::ReservedValue;

impl Function {
    /// Create a block and append it to the layout.
    pub fn new_block(&mut self) -> Block {
        let b = self.blocks.push(BlockData {
            start: self.inst_order.len() as u32,
            len: 0,
            cap: 0,
        });
        self.layout.push(b);
        b
    }

    /// The instructions of a block, in order.
    #[inline]
    pub fn block_insts(&self, b: Block) -> &[Inst] {
        let d = self.blocks[b];
        &self.inst_order[d.start as usize..(d.start + d.len) as usize]
    }

    /// Make room for `n` more instructions in block `b` for an edit (see `reserve_edit`): a
    /// list that must move to the end of the array of lists grows by `n` or by half,
    /// whichever is more (a list that moves leaves its old room unused: growing by half
    /// bounds that waste to twice the list), and the array, when it must grow, by what the
    /// move needs or an eighth, whichever is more.
    pub fn reserve_block_edit(&mut self, b: Block, n: usize) {
        let d = self.blocks[b];
        if d.cap - d.len >= n as u32 {
            return;
        }
        let want = d.len as usize + n.max(d.len as usize / 2);
        let at_end = d.start as usize + d.cap as usize == self.inst_order.len();
        let grow = if at_end { want - d.cap as usize } else { want };
        let order = &mut self.inst_order;
        let (len, cap) = (order.len(), order.capacity());
        if cap - len < grow {
            order.reserve_exact(grow.max(len / 8));
        }
        self.move_block_to_end(b, want);
    }

    /// Make room, exactly, for `n` more instructions in the instruction table and in the
    /// block lists: for a builder that knows how many instructions it places (as the lifter
    /// does), so that the function keeps no spare room.
    pub fn reserve_insts_exact(&mut self, n: usize) {
        self.insts.reserve_exact(n);
        self.inst_order.reserve_exact(n);
    }

    /// Make room for `n` more instructions in block `b` (so appending them moves nothing).
    pub fn reserve_block(&mut self, b: Block, n: usize) {
        let d = self.blocks[b];
        let want = d.len as usize + n;
        if want > d.cap as usize {
            self.move_block_to_end(b, want);
        }
    }

    /// Move block `b`'s list to the end of `inst_order` with room for `cap` instructions
    /// (in place when it is already last).
    fn move_block_to_end(&mut self, b: Block, cap: usize) {
        let d = &mut self.blocks[b];
        let (start, len) = (d.start as usize, d.len as usize);
        let order = &mut self.inst_order;
        if start + d.cap as usize != order.len() {
            let new_start = order.len();
            order.extend_from_within(start..start + len);
            d.start = new_start as u32;
        }
        order.resize(d.start as usize + cap, Inst::reserved_value());
        d.cap = cap as u32;
    }

    /// Append an instruction to block `b`.
    #[inline]
    pub fn append_inst(&mut self, b: Block, i: Inst) {
        let d = self.blocks[b];
        if d.len == d.cap {
            let cap = (2 * d.len as usize).max(4);
            self.move_block_to_end(b, cap);
        }
        let d = &mut self.blocks[b];
        self.inst_order[(d.start + d.len) as usize] = i;
        d.len += 1;
    }

    /// Append the consecutive instructions `first..first + n` to block `b` (as `n` calls of
    /// `append_inst`, with room made once).
    pub fn append_inst_range(&mut self, b: Block, first: Inst, n: usize) {
        self.reserve_block(b, n);
        let d = &mut self.blocks[b];
        let at = (d.start + d.len) as usize;
        d.len += n as u32;
        let first = first.as_u32();
        for (k, slot) in self.inst_order[at..at + n].iter_mut().enumerate() {
            *slot = Inst::from_u32(first + k as u32);
        }
    }

    /// `place_inst_range(b, first, n, n)`: fill block `b` with the consecutive instructions
    /// `first..first + n` and no room to spare, at the end of the function's array (a
    /// builder's step for each block it fills once; see `place_inst_range`).
    #[doc(hidden)]
    #[inline]
    pub fn place_inst_range_exact(&mut self, b: Block, first: Inst, n: usize) {
        let d = self.blocks[b];
        if d.len != 0 || d.cap != 0 {
            return self.place_inst_range(b, first, n, n);
        }
        let start = self.inst_order.len();
        let first = first.as_u32();
        self.inst_order
            .extend((first..first + n as u32).map(Inst::from_u32));
        self.blocks[b] = BlockData {
            start: start as u32,
            len: n as u32,
            cap: n as u32,
        };
    }

    /// Fill block `b`, which has no instructions yet, with the consecutive instructions
    /// `first..first + n`, with room for `cap` (at least `n`): what `reserve_block(b, cap)` then
    /// `append_inst_range(b, first, n)` leave, in one pass at the end of the function's array.
    pub fn place_inst_range(&mut self, b: Block, first: Inst, n: usize, cap: usize) {
        debug_assert!(n <= cap);
        let d = self.blocks[b];
        if d.len != 0 || d.cap as usize >= cap {
            self.reserve_block(b, cap);
            self.append_inst_range(b, first, n);
            return;
        }
        // An empty block's list moves to the end of the array, with room for `cap`.
        let start = if d.start as usize + d.cap as usize == self.inst_order.len() {
            d.start as usize
        } else {
            self.inst_order.len()
        };
        let order = &mut self.inst_order;
        order.truncate(start);
        let first = first.as_u32();
        let n = n as u32;
        order.reserve(cap);
        order.extend((first..first + n).map(Inst::from_u32));
        order.resize(start + cap, Inst::reserved_value());
        let d = &mut self.blocks[b];
        d.start = start as u32;
        d.len = n;
        d.cap = cap as u32;
    }

    /// Insert an instruction into block `b` before position `pos`.
    pub fn insert_inst(&mut self, b: Block, pos: usize, i: Inst) {
        self.append_inst(b, i);
        let d = self.blocks[b];
        self.inst_order[d.start as usize + pos..(d.start + d.len) as usize].rotate_right(1);
    }

    /// Insert instructions into block `b`, each just before the instruction it is paired
    /// with (`(before, new)` pairs; several before one instruction go in the order given):
    /// what `insert_inst` at each `before`'s place would do, with the block's list rebuilt
    /// once instead of shifted per instruction. `pending` is emptied; `scratch` is a buffer.
    ///
    /// Panics if a `before` is not in the block (its instruction would be lost).
    pub fn insert_before_each(
        &mut self,
        b: Block,
        pending: &mut Vec<(Inst, Inst)>,
        scratch: &mut Vec<Inst>,
    ) {
        if pending.is_empty() {
            return;
        }
        pending.sort_by_key(|&(before, _)| before);
        self.reserve_block_edit(b, pending.len());
        let d = self.blocks[b];
        let (start, len) = (d.start as usize, d.len as usize);
        scratch.clear();
        scratch.reserve(len + pending.len());
        for &x in &self.inst_order[start..start + len] {
            let a = pending.partition_point(|&(p, _)| p < x);
            for &(p, n) in &pending[a..] {
                if p != x {
                    break;
                }
                scratch.push(n);
            }
            scratch.push(x);
        }
        assert_eq!(
            scratch.len(),
            len + pending.len(),
            "insert_before_each: an instruction to insert before is not in {b}"
        );
        self.inst_order[start..start + scratch.len()].copy_from_slice(scratch);
        self.blocks[b].len = scratch.len() as u32;
        pending.clear();
    }

    /// Keep only the instructions of block `b` for which `keep` is true, in order.
    pub fn retain_insts(&mut self, b: Block, mut keep: impl FnMut(Inst) -> bool) {
        let d = &mut self.blocks[b];
        let range = d.start as usize..(d.start + d.len) as usize;
        // (read first: a list that keeps everything is not written, so an array that is
        // still the identity is not stored)
        let Some(first) = self.inst_order[range.clone()]
            .iter()
            .position(|&i| !keep(i))
        else {
            return;
        };
        let list = &mut self.inst_order[range];
        let mut n = first;
        for k in first + 1..list.len() {
            if keep(list[k]) {
                list[n] = list[k];
                n += 1;
            }
        }
        d.len = n as u32;
    }

    /// Keep only the instructions, in every block of the layout, for which `keep` is true.
    pub fn retain_all_insts(&mut self, mut keep: impl FnMut(Inst) -> bool) {
        for k in 0..self.layout.len() {
            let b = self.layout[k];
            self.retain_insts(b, &mut keep);
        }
    }

    /// The terminator of a block, if its last instruction is one.
    pub fn terminator(&self, block: Block) -> Option<Inst> {
        let last = *self.block_insts(block).last()?;
        self.insts[last].opcode.is_terminator().then_some(last)
    }
}
