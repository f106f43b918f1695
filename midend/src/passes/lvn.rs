//! Hash-based local value numbering, block by block.
//!
//! Each register gets a value number (VN). An instruction without side effects is keyed by its
//! opcode, type, flags and operand VNs (commutative operands ordered by VN; comparisons
//! canonicalised by swapping operands and the predicate). A key seen before makes the
//! instruction redundant: its result is renamed to the earlier register and the instruction is
//! deleted. Calls, phis and instructions with side effects get fresh VNs; terminators are
//! ignored.
//!
//! Memory: a load's key includes a memory VN.
//! - Stack objects and external symbols are *memory objects* split into segments by access,
//!   each with its own memory VN and last-stored VN: a store to one segment leaves the others
//!   (and other objects) alone, and a load reading exactly a stored segment with the same type
//!   is forwarded from the stored value.
//! - Generic references `[base + index*scale + disp]` use epochs: a store through a generic
//!   reference clears all memory objects; a load forwards from the last generic store with the
//!   same base, index, scale and displacement if memory did not change since.
//! - Beyond that: `readonly` loads are never invalidated; a store in one alias region does
//!   not change the memory VN of loads in another region.
//! - Calls and instructions with other side effects invalidate everything.
//!
//! Soundness notes: a store to a memory object also bumps the generic epochs (a generic pointer
//! may point into a stack object whose address escaped); forwarding needs the same opcode
//! width (`store`/`load` of one type) so no extension is skipped.
//!
//! How it is made fast (the pass must stream through large modules at tens of millions of
//! instructions a second):
//! - A key is a short run of `u64` words: a header word (opcode, type, flags) and one or two
//!   self-delimiting words per operand (a tag in the top four bits). Equal keys are equal word
//!   runs. Most keys (up to four words) are built in registers and stored in the table entry
//!   itself; longer ones keep their tail in a per-block word arena. Nothing is allocated per
//!   instruction.
//! - A register's VN is a register: the first one in its block to hold the value (itself unless
//!   its instruction was redundant). Reading a VN is one load with nothing to reset between
//!   blocks (a register of another block is its own VN and dominates the use); replacing a
//!   redundant result is renaming it to its VN; calls and phis need no fresh VN. Memory VNs are
//!   a counter of their own, tagged apart in keys.
//! - The table is open addressing sized to the block, cleared in O(block); memory objects and
//!   region epochs carry generation stamps, so forgetting all memory is O(1).
//! - Memory objects are found through per-stack-object and per-symbol slots, not a hash map,
//!   and their segment lists are reused from block to block.
//! - Only blocks with removed instructions are rewritten, and only functions with removals
//!   have their operands renamed.

use crate::error::Error;
use crate::hash::HashMap;
use crate::lir::operand::kind;
use crate::lir::{
    effects, Block, Format, Function, GlobalData, GlobalRef, Inst, MemFlags, MemFlagsRef, Module,
    OpaqueData, OpaqueRef, Opcode, Operand, PackedOperand, Reg, Region, StackObj, Symbol, Type,
};
use crate::pass::{Pass, Stats};
use crate::state::{Edit, PassState};
use cranelift_entity::{EntityRef, SecondaryMap};
use smallvec::SmallVec;

/// The pass. It keeps its tables from one run to the next: a JIT that flushes small
/// batches runs it once per batch, and tables indexed by symbol, made fresh per run, would
/// cost every symbol of the module on each.
#[derive(Default)]
pub struct Lvn {
    lvn: LocalValueNumbering,
}

impl Pass for Lvn {
    fn name(&self) -> &'static str {
        "lvn"
    }
    fn run(
        &mut self,
        module: &mut Module,
        state: &mut PassState,
        stats: &mut Stats,
    ) -> Result<(), Error> {
        let mut st = LvnStats::default();
        self.lvn.run_module(module, state, &mut st);
        stats.add(crate::Counter::LvnRemoved, st.removed);
        stats.add(crate::Counter::LvnForwarded, st.forwarded);
        stats.add(crate::Counter::LvnLoadsRemoved, st.loads_removed);
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

// Key words. An operand is one word, or a tagged word followed by one raw word; the tag in
// the top four bits says which, so a run of words decodes into exactly one operand list.
const TAG_VN: u64 = 0; // a value number (register operands)
const TAG_INT: u64 = 1 << 60; // an integer that fits 60 bits, sign bits dropped
const TAG_INT_WIDE: u64 = 2 << 60; // then the integer
const TAG_F32: u64 = 3 << 60; // bits in the low word
const TAG_F64: u64 = 4 << 60; // then the bits
const TAG_PRED: u64 = 5 << 60;
const TAG_SYM: u64 = 6 << 60; // symbol, then the offset
const TAG_STACK: u64 = 7 << 60; // stack object, then the offset
const TAG_ARG: u64 = 8 << 60;
const TAG_MEM: u64 = 9 << 60; // scale and displacement, then base VN | index VN << 32
const TAG_BLOCK: u64 = 10 << 60;
const TAG_MEMVN: u64 = 11 << 60; // a memory VN or epoch
/// Header bit: the header is followed by a word holding `aux2`.
const HDR_AUX2: u64 = 1 << 56;

#[inline]
fn header(opcode: Opcode, ty: Type, aux: u32) -> u64 {
    opcode as u64 | (ty.raw() as u64) << 8 | (aux as u64) << 24
}

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0xf135_7aea_2e62_a9c5)
}

/// A segment `[off, end)` of a memory object.
#[derive(Clone, Copy, Debug)]
struct Segment {
    off: i64,
    end: i64,
    mem_vn: u32,
    /// VN of the last value stored to exactly this segment (`NONE`: none known), with the store's
    /// type and byte-order bits.
    last: u32,
    last_ty: Type,
    last_order: u8,
}

/// The explicit byte order of an access (little, big or native): a stored value forwards only
/// to a load that reads the bytes in the same order.
fn byte_order(f: MemFlags) -> u8 {
    f.bits & (MemFlags::LITTLE | MemFlags::BIG)
}

const SEG_MIN: i64 = -(1 << 40);
/// The most segments one memory object is split into within a block (see `split`).
const MAX_SEGMENTS: usize = 256;
const SEG_MAX: i64 = 1 << 40;

/// The last store through a generic reference.
#[derive(Clone, Copy)]
struct GenericStore {
    /// The address's key words.
    addr: (u64, u64),
    value: u32,
    ty: Type,
    /// Byte-order bits of the store's flags: forwarding needs the load's to match.
    order: u8,
    epoch: u32,
}

/// A memory object an access names.
#[derive(Clone, Copy)]
enum Obj {
    Stack(StackObj),
    Sym(Symbol),
}

/// Keys of pure instructions longer than this many words are not numbered (see `lookup`): no
/// LIR instruction comes near it (an opaque one would need six operands of two words). Loads
/// are keyed apart (`visit_load`), at any length.
const MAX_KEY: usize = 12;

/// A key being built: a header word and the operands' words.
struct Key {
    w: [u64; MAX_KEY],
    /// Words pushed; more than `MAX_KEY` marks a key too long to store.
    n: usize,
}

impl Key {
    #[inline(always)]
    fn new(header: u64) -> Key {
        let mut k = Key {
            w: [0; MAX_KEY],
            n: 1,
        };
        k.w[0] = header;
        k
    }
    #[inline(always)]
    fn push(&mut self, x: u64) {
        if self.n < MAX_KEY {
            self.w[self.n] = x;
        }
        self.n += 1;
    }
}

/// One entry of the block's table: a key and its VN. The first four words (zero-padded) are
/// kept here; the rest of a longer key is at `start` in the word arena.
#[derive(Clone, Copy)]
struct Entry {
    w: [u64; 4],
    len: u32,
    vn: u32,
    start: u32,
}

/// No value (a segment or generic store whose stored value is unknown).
const NONE: u32 = u32::MAX;

/// Reusable state (tables keep their capacity across blocks and functions).
///
/// Value numbers: the VN of a register is a register, the first one in its block to hold the
/// value (itself, unless its instruction was found redundant). So a register's VN is one load,
/// needs no reset between blocks (a register of another block is its own VN, and dominates
/// the use), and the VN of a redundant result *is* the register that replaces it. Memory VNs
/// (segments, epochs) are counters of their own, tagged apart in keys.
#[derive(Default)]
pub struct LocalValueNumbering {
    /// VN (leading register) of each register.
    vn: Vec<u32>,
    /// Memory VNs of this function (segments).
    next_mem: u32,
    /// Instructions of the function, for sizing `dead` on the first removal.
    ninsts: usize,
    /// Some instruction of this function was removed (`dead` and `dirty` are valid).
    any: bool,
    dead: Vec<bool>,
    /// Blocks with removed instructions, each once.
    dirty: Vec<Block>,
    /// The block being numbered.
    cur: Option<Block>,
    /// The block's table: open addressing over `slots[..=mask]`, each the index of an entry
    /// plus one (0: empty). Entries are dense, in the order they were made, so a large block
    /// reads and writes a small slot array and appends its entries, instead of scattering
    /// them over a large table.
    slots: Vec<u32>,
    entries: Vec<Entry>,
    mask: usize,
    /// Words of keys longer than four.
    words: Vec<u64>,
    /// Memory objects: generation `obj_gen` is live; `objs[..objs_used]` are the segment
    /// lists of the live objects (their allocations are reused).
    obj_gen: u32,
    stack_slot: Vec<(u32, u32)>,
    sym_slot: Vec<(u32, u32)>,
    objs: Vec<Vec<Segment>>,
    objs_used: usize,
    /// Bumped by every store or side effect: the memory VN of region-less generic loads.
    epoch_any: u32,
    /// Bumped by stores without a region and by side effects.
    epoch_unregioned: u32,
    /// Per-region epochs, stamped with `region_gen` (older stamps read as 0).
    epoch_region: SecondaryMap<Region, (u32, u32)>,
    region_gen: u32,
    last_generic: Option<GenericStore>,
}

/// Does computing this global value load from memory that is not `readonly`? (Such a
/// `global_value` is a load: a store may change it, so it is not keyed like a pure value.)
fn global_reads_memory(f: &Function, g: GlobalRef) -> bool {
    match f.globals[g] {
        GlobalData::Load { base, flags, .. } => {
            !f.memflags[flags].readonly() || global_reads_memory(f, base)
        }
        GlobalData::IAddImm { base, .. } => global_reads_memory(f, base),
        _ => false,
    }
}

impl LocalValueNumbering {
    /// A fresh memory VN.
    #[inline]
    fn fresh_mem(&mut self) -> u32 {
        self.next_mem += 1;
        self.next_mem
    }

    /// The VN of a register.
    #[inline(always)]
    fn vn_of(&self, r: Reg) -> u32 {
        self.vn[r.index()]
    }

    /// `inst`, defining `dst`, computes the value register `lead` holds: rename `dst` to
    /// `lead` and delete `inst`.
    #[inline]
    fn replace(&mut self, inst: Inst, dst: Reg, lead: u32, st: &mut LvnStats) -> bool {
        // In reachable code `lead` is a register never renamed (its definition dominates
        // `dst`'s, and a register is renamed only at its definition). An unreachable block
        // may use a register before its definition, renamed since `lead` was read: follow the
        // renames, so every rename points at a register not renamed, and renames never form
        // a cycle.
        let mut lead = lead;
        while self.vn[lead as usize] != lead {
            lead = self.vn[lead as usize];
        }
        if lead == dst.as_u32() {
            return false; // only on input that is not SSA, or in unreachable code
        }
        self.vn[dst.index()] = lead;
        if !self.any {
            self.any = true;
            self.dead.clear();
            self.dead.resize(self.ninsts, false);
            self.dirty.clear();
        }
        self.dead[inst.index()] = true;
        if let Some(b) = self.cur.take() {
            self.dirty.push(b); // first removal in this block
        }
        st.removed += 1;
        true
    }

    /// Append the key words of one operand.
    #[inline(always)]
    fn push_operand(&self, k: &mut Key, op: Operand) {
        match self.operand_word(op) {
            Some(w) => k.push(w),
            None => self.push_two_word_operand(k, op),
        }
    }

    /// The key word of an operand that takes one (a register's VN, a small integer, a 32-bit
    /// float, a predicate, an argument, a block); `None` for the two-word ones. Its packed
    /// form's (`packed_word`): the one encoding of these operands, for every path that
    /// builds keys.
    #[inline(always)]
    fn operand_word(&self, op: Operand) -> Option<u64> {
        self.packed_word(PackedOperand::inline(op)?)
    }

    /// The key word of a packed operand that takes one, without unpacking it: these kinds
    /// are packed inline, the word holding their number, bits or (an integer) low 60 bits;
    /// a wide operand is never one of them (the packing is canonical).
    #[inline(always)]
    fn packed_word(&self, p: PackedOperand) -> Option<u64> {
        let x = p.payload();
        Some(match p.kind() {
            kind::REG => TAG_VN | self.vn_of(Reg::from_u32(x as u32)) as u64,
            kind::INT => TAG_INT | x,
            kind::F32 => TAG_F32 | x,
            kind::PRED => TAG_PRED | x,
            kind::ARG => TAG_ARG | x,
            kind::BLOCK => TAG_BLOCK | x,
            _ => return None,
        })
    }

    /// The two key words of a memory operand (a generic reference, a stack object or a
    /// symbol), as `push_operand` writes them.
    #[inline]
    fn mem_key(&self, op: Operand) -> (u64, u64) {
        match op {
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => {
                // A missing base or index is `NONE`: no register has that VN.
                let b = base.expand().map_or(NONE, |r| self.vn_of(r));
                let i = index.expand().map_or(NONE, |r| self.vn_of(r));
                (
                    TAG_MEM | (scale as u64) << 32 | disp as u32 as u64,
                    b as u64 | (i as u64) << 32,
                )
            }
            Operand::Stack(s, off) => (TAG_STACK | s.as_u32() as u64, off as i64 as u64),
            Operand::Sym(s, off) => (TAG_SYM | s.as_u32() as u64, off as u64),
            // Not a memory operand (the verifier rejects it): a key of its own kind.
            other => {
                let mut k = Key::new(0);
                self.push_operand(&mut k, other);
                (k.w[1], k.w[2])
            }
        }
    }

    /// `push_operand` for the operands of two words: a wide integer, a 64-bit float, a
    /// memory operand.
    fn push_two_word_operand(&self, k: &mut Key, op: Operand) {
        let (a, b) = match op {
            Operand::Int(v) => (TAG_INT_WIDE, v as u64),
            Operand::F64(b) => (TAG_F64, b),
            _ => self.mem_key(op),
        };
        k.push(a);
        k.push(b);
    }

    /// Find `key` in the block's table: the VN it has, or `None` after entering it with VN
    /// `dst`. A key too long to store is never found (its instruction keeps a VN of its own:
    /// always safe).
    #[inline]
    fn lookup(&mut self, key: &Key, dst: Reg) -> Option<u32> {
        let n = key.n;
        if n > MAX_KEY {
            return None;
        }
        let head = [key.w[0], key.w[1], key.w[2], key.w[3]];
        self.lookup_words(head, n, &key.w[4..n.max(4)], dst)
    }

    /// `lookup` of a key of `n` words whose first four (zero-padded) are `head` and whose
    /// words after the fourth are `tail`.
    #[inline(always)]
    fn lookup_words(&mut self, head: [u64; 4], n: usize, tail: &[u64], dst: Reg) -> Option<u32> {
        // Most keys are at most four words: they live in the entry itself, zero-padded (the
        // length tells them apart); longer ones live in the word arena.
        // The words are folded side by side and multiplied once: a short dependency chain, as
        // the key's operand VNs are often the results of the instructions just before.
        let mut h = (head[0] ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ head[1]
            ^ head[2].rotate_left(21)
            ^ head[3].rotate_left(42);
        for &w in tail {
            h = mix(h, w);
        }
        let h = crate::hash::finish(h.wrapping_mul(0xf135_7aea_2e62_a9c5));
        let mut i = (h >> 32) as usize & self.mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                break;
            }
            let e = &self.entries[slot as usize - 1];
            if e.len as usize == n && e.w == head && (n <= 4 || self.long_eq(e, tail)) {
                return Some(e.vn);
            }
            i = (i + 1) & self.mask;
        }
        let mut start = 0;
        if n > 4 {
            start = self.words.len() as u32;
            self.words.extend_from_slice(tail);
        }
        self.entries.push(Entry {
            w: head,
            len: n as u32,
            vn: dst.as_u32(),
            start,
        });
        self.slots[i] = self.entries.len() as u32;
        None
    }

    /// The words after the fourth of a long key equal those of entry `e`.
    #[cold]
    fn long_eq(&self, e: &Entry, tail: &[u64]) -> bool {
        self.words[e.start as usize..][..tail.len()] == *tail
    }

    /// Memory changed in a way LVN cannot track: forget every object and bump every epoch.
    #[inline]
    fn clobber_all(&mut self) {
        self.forget_objects();
        self.epoch_any += 1;
        self.epoch_unregioned += 1;
        self.region_gen += 1;
        self.last_generic = None;
    }

    #[inline]
    fn forget_objects(&mut self) {
        self.obj_gen += 1;
        self.objs_used = 0;
    }

    /// Start block `b` of `len` instructions: empty table, no memory knowledge.
    #[inline]
    fn begin_block(&mut self, b: Block, len: usize) {
        self.cur = Some(b);
        self.words.clear();
        self.entries.clear();
        let cap = (8 * len + 8).next_power_of_two().max(32);
        if self.slots.len() < cap {
            self.slots.resize(cap, 0);
        }
        if cap == 32 {
            self.slots[..32].copy_from_slice(&[0; 32]); // most blocks: no `memset` call
        } else {
            self.slots[..cap].fill(0);
        }
        self.mask = cap - 1;
        self.clobber_all();
    }

    /// The segment list of `obj`, created (one segment covering everything, with a fresh
    /// memory VN) if the object is not live.
    fn object(&mut self, obj: Obj) -> usize {
        let slot = match obj {
            Obj::Stack(s) => grow_slot(&mut self.stack_slot, s.index()),
            Obj::Sym(s) => grow_slot(&mut self.sym_slot, s.index()),
        };
        let (g, idx) = *slot;
        if g == self.obj_gen {
            return idx as usize;
        }
        let idx = self.objs_used;
        *slot = (self.obj_gen, idx as u32);
        self.objs_used += 1;
        let v = self.fresh_mem();
        if self.objs.len() <= idx {
            self.objs.push(Vec::new());
        }
        let segs = &mut self.objs[idx];
        segs.clear();
        segs.push(Segment {
            off: SEG_MIN,
            end: SEG_MAX,
            mem_vn: v,
            last: NONE,
            last_ty: Type::VOID,
            last_order: 0,
        });
        idx
    }

    /// Split the segments of `obj` so `[off, end)` starts and ends on boundaries; return the
    /// object and the index range of the covered segments. `None` when the object already has
    /// `MAX_SEGMENTS` segments: the access is then treated as a generic reference (always
    /// safe), so that a block of k accesses at distinct offsets costs O(k log k), not O(k²).
    fn split(&mut self, obj: Obj, off: i64, end: i64) -> Option<(usize, usize, usize)> {
        let o = self.object(obj);
        let segs = &mut self.objs[o];
        if segs.len() >= MAX_SEGMENTS {
            return None;
        }
        // The list is sorted and covers [SEG_MIN, SEG_MAX) without gaps.
        for at in [off, end] {
            let i = segs.partition_point(|s| s.end <= at);
            let s = segs[i];
            if s.off < at {
                // Both halves keep the parent's VNs, as in the hash-based LVN design; a partial
                // last-stored value no longer describes either half.
                segs[i] = Segment {
                    end: at,
                    last: NONE,
                    ..s
                };
                segs.insert(
                    i + 1,
                    Segment {
                        off: at,
                        last: NONE,
                        ..s
                    },
                );
            }
        }
        // A segment now starts at `off` and one ends at `end`.
        let first = segs.partition_point(|s| s.off < off);
        let last = segs.partition_point(|s| s.end < end);
        Some((o, first, last + 1))
    }

    /// The segments an access covers (`mem_target`, then `split`), if it is tracked by
    /// segment; else it is a generic reference.
    fn segments(&mut self, op: Operand, bytes: u32) -> Option<(usize, usize, usize)> {
        let (obj, off, end) = Self::mem_target(op, bytes)?;
        self.split(obj, off, end)
    }

    fn region_value(&self, r: Region) -> u32 {
        let (g, v) = self.epoch_region[r];
        if g == self.region_gen {
            v
        } else {
            0
        }
    }

    fn region_epoch(&self, region: Option<Region>) -> (u32, u32) {
        match region {
            None => (self.epoch_any, 0),
            Some(r) => (self.region_value(r), self.epoch_unregioned),
        }
    }

    /// Number every open function of a module, recording those it changed in `state`.
    pub fn run_module(&mut self, m: &mut Module, state: &mut PassState, st: &mut LvnStats) {
        for id in state.open_function_ids(m) {
            if self.run(&mut m.functions[id], st) {
                state.record_edit(id, Edit::Modified);
            }
        }
    }

    /// Number one function. Returns whether it changed the function.
    pub fn run(&mut self, f: &mut Function, st: &mut LvnStats) -> bool {
        // Every register is its own VN until it is found redundant; memory VNs restart.
        self.vn.clear();
        self.vn.extend(0..f.regs.len() as u32);
        self.next_mem = 0;
        // Generations and epochs need only differ within one function (a block begins by
        // bumping them all); one numbering serves many runs (`Lvn` keeps it), so restart them
        // long before they could wrap.
        self.epoch_any = 0;
        self.epoch_unregioned = 0;
        if self.obj_gen > u32::MAX / 2 || self.region_gen > u32::MAX / 2 {
            self.stack_slot.clear();
            self.sym_slot.clear();
            self.epoch_region.clear();
            self.obj_gen = 0;
            self.region_gen = 0;
        }
        self.ninsts = f.insts.len();
        self.any = false;
        let mut opaque_ids: HashMap<&OpaqueData, u32> = HashMap::default();
        for &b in &f.layout {
            let insts = f.block_insts(b);
            self.begin_block(b, insts.len());
            for &inst in insts {
                // The common case inline: a pure one-result ALU instruction, copy or compare
                // (`visit_simple`); everything else, and operands it does not take, in `visit`.
                let d = &f.insts[inst];
                if d.opcode.is_pure_value() && d.results().len == 1 {
                    let dst = Reg::from_u32(d.results().start); // the only result (`results`)
                    let ops = f.packed_operands(inst);
                    if self.visit_simple(inst, d, dst, ops, st).is_none() {
                        self.visit(f, inst, &mut opaque_ids, st);
                    }
                    continue;
                }
                match d.opcode.format() {
                    Format::Phi => {} // its results are their own VNs
                    Format::Load => self.visit_load(f, inst, st),
                    Format::Store => self.visit_store(f, inst),
                    // A branch, return or trap: nothing to number.
                    _ if d.opcode.effects() & (effects::TERM | effects::CALL) == effects::TERM => {}
                    _ => self.visit(f, inst, &mut opaque_ids, st),
                }
            }
        }
        drop(opaque_ids);
        if !self.any {
            return false;
        }
        // Rewrite uses and delete dead instructions.
        let vn = &self.vn;
        let canon = |r: Reg| {
            let mut r = r.as_u32();
            // One step, but for input that is not SSA (a use before its definition).
            while vn[r as usize] != r {
                r = vn[r as usize];
            }
            Reg::from_u32(r)
        };
        f.map_operand_regs(canon);
        let dead = &self.dead;
        for &b in &self.dirty {
            f.retain_insts(b, |i| !dead[i.index()]);
        }
        true
    }

    /// `dst` is the result of a pure instruction whose key has VN `found` (if seen before):
    /// replace it, or let `dst` lead its own VN.
    #[inline(always)]
    fn settle(&mut self, inst: Inst, dst: Reg, found: Option<u32>, st: &mut LvnStats) -> bool {
        match found {
            Some(lead) => self.replace(inst, dst, lead, st),
            None => false,
        }
    }

    /// Visit one instruction other than a phi, load or store.
    #[inline(never)]
    fn visit<'f>(
        &mut self,
        f: &'f Function,
        inst: Inst,
        opaque_ids: &mut HashMap<&'f OpaqueData, u32>,
        st: &mut LvnStats,
    ) {
        let d = f.insts[inst];
        let results = f.results(inst);
        debug_assert!(!matches!(
            d.opcode.format(),
            Format::Phi | Format::Load | Format::Store
        ));
        let mut fx = d.opcode.effects();
        if fx & (effects::TERM | effects::CALL) == effects::TERM {
            return; // a branch, return or trap
        }
        if d.opcode == Opcode::Opaque {
            fx = f.opaques[OpaqueRef::from_u32(d.aux)].effects;
        }
        // Calls, atomics, fences, traps and opaque instructions with effects.
        let pure = fx & (effects::STORE | effects::SIDE | effects::LOAD | effects::CALL) == 0
            && !(matches!(d.opcode, Opcode::GlobalValue | Opcode::TlsValue)
                && global_reads_memory(f, GlobalRef::from_u32(d.aux)));
        if !pure || results.len() != 1 {
            if fx & (effects::STORE | effects::SIDE | effects::CALL) != 0 {
                self.clobber_all();
            }
            return; // results are their own VNs
        }
        let dst = results[0];
        let ops = f.operands(inst);
        if d.opcode == Opcode::Copy && ops.len() == 1 {
            if let Operand::Reg(src) = ops.at(0) {
                // A register copy has the VN of its source.
                let v = self.vn_of(src);
                self.replace(inst, dst, v, st);
                return;
            }
        }
        // A pure one-result instruction: key it.
        let mut aux = d.aux;
        if d.opcode == Opcode::Opaque {
            // Opaque records are per instruction: key their contents.
            let o = &f.opaques[OpaqueRef::from_u32(d.aux)];
            let n = opaque_ids.len() as u32;
            aux = *opaque_ids.entry(o).or_insert(n);
        }
        let aux2 = f.aux2(inst);
        let mut k = Key::new(header(d.opcode, d.ty, aux) | (HDR_AUX2 * (aux2 != 0) as u64));
        if aux2 != 0 {
            k.push(aux2 as u64);
        }
        // Where the last two operands' words start (for the canonical orders below).
        let (mut second_last, mut last) = (0, 0);
        for op in ops {
            second_last = last;
            last = k.n;
            self.push_operand(&mut k, op);
        }
        let n = ops.len();
        if ((n == 2 && d.opcode.is_commutative())
            || (n == 3 && matches!(d.opcode, Opcode::Icmp | Opcode::Fcmp)))
            && k.n <= MAX_KEY
        {
            // Commutative operands in a canonical order; `a sle b` is `b sge a`: compare
            // operands in a canonical order with the predicate swapped.
            if order_pair(&mut k.w[second_last..k.n], last - second_last) {
                if let Some(Operand::Pred(c)) = ops.first() {
                    k.w[second_last - 1] = TAG_PRED | c.swapped() as u64;
                }
            }
        }
        let found = self.lookup(&k, dst);
        self.settle(inst, dst, found, st);
    }

    /// The common case of `visit`: a pure one-result ALU instruction, copy or compare whose
    /// operands (at most three) are registers, small integers, 32-bit floats or a predicate.
    /// Its key (at most four words) is built in registers; it is exactly the key the general
    /// path would build. `None`: not such an instruction, use the general path.
    #[inline(always)]
    fn visit_simple(
        &mut self,
        inst: Inst,
        d: &crate::lir::InstData,
        dst: Reg,
        ops: &[PackedOperand],
        st: &mut LvnStats,
    ) -> Option<()> {
        let h = header(d.opcode, d.ty, d.aux);
        // One arm per operand count, the words in scalars (a loop over an array of words
        // would keep them on the stack).
        let (w, n) = match *ops {
            [a] => {
                if let (Some(src), Opcode::Copy) = (a.as_reg(), d.opcode) {
                    // A register copy has the VN of its source.
                    let v = self.vn_of(src);
                    self.replace(inst, dst, v, st);
                    return Some(());
                }
                ([h, self.packed_word(a)?, 0, 0], 2)
            }
            [a, b] => {
                let (mut x, mut y) = (self.packed_word(a)?, self.packed_word(b)?);
                if d.opcode.is_commutative() && x > y {
                    (x, y) = (y, x);
                }
                ([h, x, y, 0], 3)
            }
            [a, b, c] => {
                let mut p = self.packed_word(a)?;
                let (mut x, mut y) = (self.packed_word(b)?, self.packed_word(c)?);
                if matches!(d.opcode, Opcode::Icmp | Opcode::Fcmp) && x > y {
                    (x, y) = (y, x);
                    // `a` took one word: it is inline, and unpacks without the wide table.
                    if let Operand::Pred(c) = a.unpack(&[]) {
                        p = TAG_PRED | c.swapped() as u64;
                    }
                }
                ([h, p, x, y], 4)
            }
            _ => return None,
        };
        let found = self.lookup_words(w, n, &[], dst);
        self.settle(inst, dst, found, st);
        Some(())
    }

    /// The memory object and byte range `[off, end)` an access names, if it is a stack
    /// object or a symbol and the range lies strictly inside the segments' span; any other
    /// access (an empty one, or one at an offset of 2^40 or more) is treated as a generic
    /// reference, which is always safe.
    fn mem_target(op: Operand, bytes: u32) -> Option<(Obj, i64, i64)> {
        let (obj, off) = match op {
            Operand::Stack(s, off) => (Obj::Stack(s), off as i64),
            Operand::Sym(s, off) => (Obj::Sym(s), off),
            _ => return None,
        };
        let end = off.checked_add(bytes as i64)?;
        (bytes > 0 && SEG_MIN < off && end < SEG_MAX).then_some((obj, off, end))
    }

    /// Replace a load by the register holding the stored value `v`.
    fn forward(&mut self, inst: Inst, dst: Reg, v: u32, st: &mut LvnStats) -> bool {
        let removed = self.replace(inst, dst, v, st);
        if removed {
            st.forwarded += 1;
        }
        removed
    }

    fn visit_load(&mut self, f: &Function, inst: Inst, st: &mut LvnStats) {
        let d = f.insts[inst];
        let dst = f.results(inst)[0];
        let mem = f.operand(inst, 0);
        let flags = f.memflags[MemFlagsRef::from_u32(d.aux)];
        let bytes = d.opcode.access_bytes(d.ty);
        let (m0, m1) = self.mem_key(mem);
        let head = [header(d.opcode, d.ty, d.aux), m0, m1, 0];
        let found = if flags.readonly() {
            // Never written while the function runs: no memory VN needed.
            self.lookup_words(head, 3, &[], dst)
        } else if let Some((o, a, b)) = self.segments(mem, bytes) {
            let s = self.objs[o][a];
            if b - a == 1
                && d.opcode == Opcode::Load
                && s.last != NONE
                && s.last_ty == d.ty
                && s.last_order == byte_order(flags)
                && self.forward(inst, dst, s.last, st)
            {
                return;
            }
            // The memory VN of every covered segment.
            let segs = &self.objs[o][a..b];
            let head = [head[0], m0, m1, TAG_MEMVN | segs[0].mem_vn as u64];
            let tail: SmallVec<[u64; 8]> = segs[1..]
                .iter()
                .map(|s| TAG_MEMVN | s.mem_vn as u64)
                .collect();
            self.lookup_words(head, 3 + segs.len(), &tail, dst)
        } else {
            if let (Some(g), Opcode::Load) = (self.last_generic, d.opcode) {
                if g.addr == (m0, m1)
                    && g.ty == d.ty
                    && g.order == byte_order(flags)
                    && g.epoch == self.epoch_any
                    && self.forward(inst, dst, g.value, st)
                {
                    return;
                }
            }
            let (e1, e2) = self.region_epoch(flags.region);
            // Both epochs in one word: after a generic address nothing else can follow.
            let head = [head[0], m0, m1, e1 as u64 | (e2 as u64) << 32];
            self.lookup_words(head, 4, &[], dst)
        };
        if self.settle(inst, dst, found, st) {
            st.loads_removed += 1;
        }
    }

    fn visit_store(&mut self, f: &Function, inst: Inst) {
        let d = f.insts[inst];
        let ops = f.operands(inst);
        let (mem, val) = (ops.at(0), ops.at(1));
        let flags = f.memflags[MemFlagsRef::from_u32(d.aux)];
        let bytes = d.opcode.access_bytes(d.ty);
        let value_vn = match val {
            Operand::Reg(r) => self.vn_of(r),
            _ => NONE,
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
        if let Some((o, a, b)) = self.segments(mem, bytes) {
            for k in a..b {
                let v = self.fresh_mem();
                let s = &mut self.objs[o][k];
                s.mem_vn = v;
                s.last = NONE;
            }
            if b - a == 1 && d.opcode == Opcode::Store {
                let s = &mut self.objs[o][a];
                s.last = value_vn;
                s.last_ty = d.ty;
                s.last_order = byte_order(flags);
            }
            self.last_generic = None;
        } else {
            // A store through a generic reference may write any memory object.
            self.forget_objects();
            let addr = self.mem_key(mem);
            self.last_generic = match (value_vn, d.opcode) {
                (v, Opcode::Store) if v != NONE => Some(GenericStore {
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

/// `words` holds two operands' key words, the first `mid` long: put the smaller encoding
/// first. Returns whether they were swapped.
#[inline]
fn order_pair(words: &mut [u64], mid: usize) -> bool {
    if words.len() == 2 {
        if words[0] > words[1] {
            words.swap(0, 1);
            return true;
        }
        return false;
    }
    if words[..mid] > words[mid..] {
        words.rotate_left(mid);
        return true;
    }
    false
}

/// The slot of entity `i` in a generation-stamped table, growing it as needed.
#[inline]
fn grow_slot(t: &mut Vec<(u32, u32)>, i: usize) -> &mut (u32, u32) {
    if t.len() <= i {
        t.resize(i + 1, (0, 0));
    }
    &mut t[i]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lir::{module_to_string, parse_module};

    const SRC: &str = r#"function @f(i64) -> i64 system_v export {
    stack_obj.0 = size 16, align 8
    region0 = 1 "a"
bb0:
    %vr0 = copy.i64 arg0
    store.i64 aligned region0 [stack_obj.0 + 0], %vr0
    %vr1 = load.i64 aligned region0 [stack_obj.0 + 0]
    %vr2 = load.i64 aligned region0 [%vr0 + 8]
    store.i64 aligned [%vr0 + 0], %vr1
    %vr3 = load.i64 aligned region0 [%vr0 + 8]
    jump bb1
bb1:
    %vr4 = load.i64 aligned region0 [stack_obj.0 + 0]
    %vr5 = load.i64 aligned region0 [stack_obj.0 + 0]
    %vr6 = add.i64 %vr4, %vr5
    %vr7 = add.i64 %vr6, %vr3
    %vr8 = add.i64 %vr7, %vr2
    ret %vr8
}
"#;

    /// A function whose stack slot is first touched, in every run, by a load in its second
    /// block: a stale stamp of an earlier run would match that block's generation after a
    /// restart, and the load would take the store that came after it in an earlier run.
    const SECOND_BLOCK: &str = r#"function @g(i64) -> i64 system_v export {
    stack_obj.0 = size 16, align 8
bb0:
    %vr0 = copy.i64 arg0
    jump bb1
bb1:
    %vr1 = load.i64 aligned [stack_obj.0 + 0]
    store.i64 aligned [stack_obj.0 + 0], %vr0
    %vr2 = load.i64 aligned [stack_obj.0 + 0]
    %vr3 = add.i64 %vr1, %vr2
    ret %vr3
}
"#;

    /// A numbering kept across runs gives what a fresh one gives, also when its generations
    /// have reached the point where they restart (before, they would have wrapped).
    #[test]
    fn kept_numbering_restarts_its_generations() {
        for src in [SRC, SECOND_BLOCK] {
            let number = |lvn: &mut LocalValueNumbering| {
                let mut m = parse_module(src).unwrap();
                let mut st = LvnStats::default();
                lvn.run_module(&mut m, &mut PassState::default(), &mut st);
                (module_to_string(&m), st.removed, st.forwarded)
            };
            let fresh = number(&mut LocalValueNumbering::default());
            assert!(fresh.2 >= 1, "{fresh:?}");
            // Restart after 0 to 11 earlier runs: the slots then hold the stamps those runs
            // left, which the runs after the restart reach again (a restart that kept them
            // would let one match).
            for before in 0..12 {
                let mut kept = LocalValueNumbering::default();
                for _ in 0..before {
                    assert_eq!(number(&mut kept), fresh);
                }
                kept.obj_gen = u32::MAX - 1;
                kept.region_gen = u32::MAX - 1;
                kept.epoch_any = u32::MAX;
                kept.epoch_unregioned = u32::MAX;
                for _ in 0..12 {
                    let got = number(&mut kept);
                    assert_eq!(got, fresh, "after {before} runs before the restart");
                }
                assert!(kept.obj_gen < 100 && kept.region_gen < 100);
            }
        }
    }
}
