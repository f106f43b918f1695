//! A function: its name, signature and linkage, its registers, instructions and blocks, and
//! the side tables its instructions refer to. The block layout is in `layout.rs`, making
//! instructions and reading their operands in `dfg.rs`, what the side tables hold in
//! `tables.rs`, signatures in `signature.rs`.

use super::entities::*;
use super::inst::{effects, Format, InstData, Opcode};
use super::operand::{Operand, PackedOperand};
use super::signature::Signature;
use super::tables::*;
use super::thin::ThinMap;
use super::types::Type;
use super::Name;
use cranelift_entity::{PrimaryMap, SecondaryMap};

/// Who may see and replace a function (LLVM's linkage classes, as MergeFunctions needs them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Linkage {
    /// Visible outside the module under its name; the definition is final.
    Export,
    /// Visible only inside the module.
    Local,
    /// Exported, but the definition may be replaced (interposed) at link time.
    Preemptible,
    /// Declared here, defined elsewhere (functions of this linkage have no body).
    Import,
}

impl Linkage {
    /// The name LIR text uses (`export`, `local`, `preemptible`, `import`).
    pub fn name(self) -> &'static str {
        match self {
            Linkage::Export => "export",
            Linkage::Local => "local",
            Linkage::Preemptible => "preemptible",
            Linkage::Import => "import",
        }
    }
    /// The linkage named `s` (as `name` prints it), if any.
    pub fn parse(s: &str) -> Option<Linkage> {
        Some(match s {
            "export" => Linkage::Export,
            "local" => Linkage::Local,
            "preemptible" => Linkage::Preemptible,
            "import" => Linkage::Import,
            _ => return None,
        })
    }
}

/// A basic block: where its instructions, in order, sit in `Function::inst_order` (`len`
/// used, `cap` reserved). Every block's list lives in that one array, so a walk over a
/// function's blocks reads one contiguous allocation rather than one per block; a list that
/// outgrows its room moves to the end of the array.
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockData {
    pub(super) start: u32,
    pub(super) len: u32,
    pub(super) cap: u32,
}

/// Per-register data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegData {
    /// The register's type.
    pub ty: Type,
}

/// An LIR function.
#[derive(Clone, Debug)]
pub struct Function {
    /// The name (a `Name` keeps names of up to 24 bytes inline, without an allocation).
    pub name: Name,
    /// The signature.
    pub sig: Signature,
    /// Who may see and replace the function.
    pub linkage: Linkage,
    /// The function's address is observed (taken with `func_addr`, or declared so): merging it
    /// must keep a distinct address (a thunk), never an alias.
    pub address_significant: bool,
    /// The virtual registers, with their types.
    pub regs: PrimaryMap<Reg, RegData>,
    /// Every instruction made, placed in a block or not (the block lists hold the placed ones).
    pub insts: PrimaryMap<Inst, InstData>,
    /// The blocks: where each block's instruction list lies in `inst_order`.
    pub blocks: PrimaryMap<Block, BlockData>,
    /// The instruction lists of all blocks (see `BlockData`; read them with `block_insts`).
    pub(crate) inst_order: Vec<Inst>,
    /// Block order; the first is the entry.
    pub layout: Vec<Block>,
    /// Every instruction's operands, packed (`InstData::operands` is a range of it; read
    /// them with `operands`).
    pub(crate) operand_pool: Vec<PackedOperand>,
    /// The operands too wide to pack, by the index their packed word holds.
    pub(crate) wide_operands: Vec<Operand>,
    /// The results of instructions with more than one (`InstData::results` is a range of it;
    /// read them with `results`).
    pub result_pool: Vec<Reg>,
    /// The stack objects (`Operand::Stack` refers to them).
    pub stack_objs: ThinMap<StackObj, StackObjData>,
    /// The signatures of indirect and direct calls (`SigRef`s).
    pub sigs: ThinMap<SigRef, Signature>,
    /// The alias regions memory flags refer to.
    pub regions: ThinMap<Region, RegionData>,
    /// The memory flags of loads and stores, each kind once (`intern_memflags`).
    pub memflags: ThinMap<MemFlagsRef, MemFlags>,
    /// The global values of `global_value` and `tls_value` instructions, of one another and
    /// of `stack_limit`.
    pub globals: ThinMap<GlobalRef, GlobalData>,
    /// What each opaque instruction is (its `aux`).
    pub opaques: ThinMap<OpaqueRef, OpaqueData>,
    /// The exception tables of `try_call`s (their `aux2`).
    pub exn_tables: ThinMap<ExnTable, Vec<ExnItem>>,
    /// Global value holding the stack limit, checked in the prologue (Cranelift's
    /// `stack_limit = gvN`).
    pub stack_limit: Option<GlobalRef>,
}

impl Function {
    /// Call `each` with every symbol whose address this function takes (`func_addr`,
    /// `symbol_value`, symbol global values), in order, possibly more than once.
    pub fn for_each_taken_symbol(&self, mut each: impl FnMut(Symbol)) {
        for &b in &self.layout {
            for &i in self.block_insts(b) {
                if matches!(self.insts[i].opcode, Opcode::FuncAddr | Opcode::SymbolValue) {
                    if let Some(Operand::Sym(s, _)) = self.operands(i).first() {
                        each(s);
                    }
                }
            }
        }
        for g in self.globals.values() {
            if let GlobalData::Symbol { sym, .. } = g {
                each(*sym);
            }
        }
    }

    /// A function without a body: no blocks, instructions or registers, and no flag set.
    pub fn new(name: impl Into<Name>, sig: Signature, linkage: Linkage) -> Self {
        Function {
            name: name.into(),
            sig,
            linkage,
            address_significant: false,
            regs: PrimaryMap::new(),
            insts: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            inst_order: Vec::new(),
            layout: Vec::new(),
            operand_pool: Vec::new(),
            wide_operands: Vec::new(),
            result_pool: Vec::new(),
            stack_objs: ThinMap::new(),
            sigs: ThinMap::new(),
            regions: ThinMap::new(),
            memflags: ThinMap::new(),
            globals: ThinMap::new(),
            opaques: ThinMap::new(),
            exn_tables: ThinMap::new(),
            stack_limit: None,
        }
    }

    /// The entry block, if the function has a body.
    pub fn entry(&self) -> Option<Block> {
        self.layout.first().copied()
    }

    /// A new register of type `ty`.
    #[inline]
    pub fn new_reg(&mut self, ty: Type) -> Reg {
        self.regs.push(RegData { ty })
    }

    /// The type of register `r`.
    #[inline]
    pub fn reg_type(&self, r: Reg) -> Type {
        self.regs[r].ty
    }

    /// Give back the room reserved for growth: every block's instruction list packed without
    /// spare room (in layout order), every table at its length. For a large module kept in
    /// memory, after building each function (the lifter reserves generously). The function is
    /// unchanged otherwise.
    pub fn shrink_to_fit(&mut self) {
        let spare: usize = self.blocks.values().map(|d| (d.cap - d.len) as usize).sum();
        if spare > 0 || self.inst_order.len() > self.blocks.values().map(|d| d.len as usize).sum() {
            let mut order = Vec::with_capacity(self.blocks.values().map(|d| d.len as usize).sum());
            let mut placed = SecondaryMap::<Block, bool>::with_capacity(self.blocks.len());
            let keys: Vec<Block> = self
                .layout
                .iter()
                .copied()
                .chain(self.blocks.keys())
                .collect();
            for b in keys {
                if core::mem::replace(&mut placed[b], true) {
                    continue;
                }
                let d = &mut self.blocks[b];
                let (start, len) = (d.start as usize, d.len as usize);
                d.start = order.len() as u32;
                d.cap = d.len;
                order.extend_from_slice(&self.inst_order[start..start + len]);
            }
            self.inst_order = order;
        } else {
            self.inst_order.shrink_to_fit();
        }
        self.regs.shrink_to_fit();
        self.insts.shrink_to_fit();
        self.blocks.shrink_to_fit();
        self.layout.shrink_to_fit();
        self.operand_pool.shrink_to_fit();
        self.wide_operands.shrink_to_fit();
        self.result_pool.shrink_to_fit();
        self.stack_objs.shrink_to_fit();
        self.sigs.shrink_to_fit();
        self.regions.shrink_to_fit();
        self.memflags.shrink_to_fit();
        self.globals.shrink_to_fit();
        self.opaques.shrink_to_fit();
        self.exn_tables.shrink_to_fit();
        self.name.shrink_to_fit();
    }

    /// The heap blocks this function owns, by table: `(table, bytes reserved)` for every
    /// table holding an allocation (an empty `Vec` holds none). Memory reports
    /// (`tools/examples/lir_memory.rs`) sum it over a module.
    pub fn heap_blocks(&self, mut each: impl FnMut(&'static str, usize)) {
        fn v<T>(each: &mut impl FnMut(&'static str, usize), name: &'static str, cap: usize) {
            if cap > 0 && core::mem::size_of::<T>() > 0 {
                each(name, cap * core::mem::size_of::<T>());
            }
        }
        // Held inline up to 24 bytes.
        if self.name.is_heap_allocated() {
            v::<u8>(&mut each, "name", self.name.capacity());
        }
        for s in core::iter::once(&self.sig).chain(self.sigs.values()) {
            // Lists shared with other signatures (or a lifter's cache of them) are nobody's
            // alone: not counted here, as region names are not (a memory report of a
            // module undercounts them by one copy of each distinct list).
            v::<u8>(&mut each, "sig params", s.params.unshared_heap_bytes());
            v::<u8>(&mut each, "sig returns", s.returns.unshared_heap_bytes());
        }
        v::<RegData>(&mut each, "regs", self.regs.len());
        v::<InstData>(&mut each, "insts", self.insts.len());
        v::<BlockData>(&mut each, "blocks", self.blocks.len());
        v::<Inst>(&mut each, "inst_order", self.inst_order.capacity());
        v::<Block>(&mut each, "layout", self.layout.capacity());
        v::<PackedOperand>(&mut each, "operand_pool", self.operand_pool.capacity());
        v::<Operand>(&mut each, "wide_operands", self.wide_operands.capacity());
        v::<Reg>(&mut each, "result_pool", self.result_pool.capacity());
        for (name, bytes) in [
            ("stack_objs", self.stack_objs.heap_bytes()),
            ("sigs", self.sigs.heap_bytes()),
        ] {
            if bytes > 0 {
                each(name, bytes);
            }
        }
        if self.regions.heap_bytes() > 0 {
            each("regions", self.regions.heap_bytes());
        }
        // (region names are shared between functions: not counted here)
        if self.memflags.heap_bytes() > 0 {
            each("memflags", self.memflags.heap_bytes());
        }
        if self.globals.heap_bytes() > 0 {
            each("globals", self.globals.heap_bytes());
        }
        if self.opaques.heap_bytes() > 0 {
            each("opaques", self.opaques.heap_bytes());
        }
        for o in self.opaques.values() {
            if o.name.is_heap_allocated() {
                v::<u8>(&mut each, "opaque names", o.name.capacity());
            }
            if o.imms.spilled() {
                v::<u64>(&mut each, "opaque imms", o.imms.capacity());
            }
        }
        if self.exn_tables.heap_bytes() > 0 {
            each("exn_tables", self.exn_tables.heap_bytes());
        }
        for t in self.exn_tables.values() {
            v::<ExnItem>(&mut each, "exn items", t.capacity());
        }
    }

    /// Free the body of a function a pass removed (merged into an equal one, or folded into a
    /// shared body): every table is emptied and its memory given back; the name, signature,
    /// linkage and flags stay, so the slot still names the function (and
    /// `passes::merge::thunk_merged` can give it a thunk as its body again). A removed
    /// function's body is never read, and on a large module freeing it early lowers the peak
    /// memory of the passes that follow.
    pub fn drop_body(&mut self) {
        drop(self.take_body());
    }

    /// Take the body out of a function a pass removes, leaving what `drop_body` leaves: the
    /// function returned has the body, the flags and the linkage, with no name and an empty
    /// signature of the same calling convention (`merge-similar` moves a removed member's
    /// body into the shared function this way, rather than copying it).
    pub fn take_body(&mut self) -> Function {
        let cc = self.sig.call_conv;
        let header = Function::new(
            core::mem::take(&mut self.name),
            core::mem::replace(&mut self.sig, Signature::new(cc)),
            self.linkage,
        );
        let old = core::mem::replace(self, header);
        self.address_significant = old.address_significant;
        old
    }

    /// Make room, exactly, for an edit of a finished function (whose tables are cut to
    /// size): `insts` new instructions (of one result each) with `operands` new operands,
    /// `regs` new registers and `sigs` new call signatures. `Vec`'s doubling would give a
    /// one-call rewrite twice the room it needs in every table: on a large module, a pass
    /// that rewrites calls would add half the module again in memory. Give the totals of all the edits a pass makes in the
    /// function at once (growing by small steps, edit by edit, would copy the tables each
    /// time). Place the new instructions with `reserve_block_edit`.
    pub fn reserve_edit(&mut self, insts: usize, operands: usize, regs: usize, sigs: usize) {
        self.insts.reserve_exact(insts);
        self.result_pool.reserve_exact(insts);
        self.operand_pool.reserve_exact(operands);
        self.regs.reserve_exact(regs);
        self.sigs.reserve_exact(sigs);
    }

    /// Intern memory flags: the entry equal to `f`, added if there is none. A function has
    /// a few kinds of memory flags, so this is a search of the table.
    pub fn intern_memflags(&mut self, f: MemFlags) -> MemFlagsRef {
        let found = self.memflags.iter().find(|(_, m)| **m == f).map(|(r, _)| r);
        found.unwrap_or_else(|| self.memflags.push(f))
    }

    /// Effect bits of an instruction (opaque ones carry their own).
    pub fn inst_effects(&self, inst: Inst) -> u8 {
        let d = &self.insts[inst];
        if d.opcode == Opcode::Opaque {
            self.opaques[OpaqueRef::from_u32(d.aux)].effects
        } else if d.opcode.format() == Format::Load
            && self.memflags[MemFlagsRef::from_u32(d.aux)].notrap()
        {
            effects::LOAD
        } else {
            d.opcode.effects()
        }
    }

    /// May this instruction be removed when its results are unused?
    pub fn is_removable(&self, inst: Inst) -> bool {
        let e = self.inst_effects(inst);
        e & (effects::STORE | effects::TRAP | effects::SIDE | effects::TERM) == 0
            && !self.insts[inst].opcode.is_terminator()
    }

    /// Successor blocks of a terminator, in operand order (duplicates kept).
    pub fn branch_targets(&self, inst: Inst) -> impl Iterator<Item = Block> + '_ {
        let is_branch = self.insts[inst].opcode.is_terminator();
        self.operands(inst)
            .iter()
            .filter(move |_| is_branch)
            .filter_map(|o| o.as_block())
    }

    /// Number of instructions placed in blocks.
    pub fn inst_count(&self) -> usize {
        self.layout
            .iter()
            .map(|&b| self.blocks[b].len as usize)
            .sum()
    }

    /// Per-register defining instruction (unset for registers never defined).
    pub fn def_map(&self) -> SecondaryMap<Reg, Option<Inst>> {
        let mut defs = SecondaryMap::with_capacity(self.regs.len());
        for &b in &self.layout {
            for &i in self.block_insts(b) {
                for &r in self.results(i) {
                    defs[r] = Some(i);
                }
            }
        }
        defs
    }
}

#[cfg(test)]
mod tests {
    use crate::lir::*;

    fn inst(n: u32) -> Inst {
        Inst::from_u32(n)
    }

    /// `shrink_to_fit` closes the gaps between block lists, whether the lists lie in block
    /// order (as the lifter leaves them, with room to grow and an empty block with room) or
    /// an edit moved one past a later block's: every block lists the same instructions after,
    /// and the array holds nothing else.
    #[test]
    fn shrinking_keeps_every_block_list() {
        for moved in [false, true] {
            let mut f = Function::new("f", Signature::new(CallConv::SystemV), Linkage::Export);
            let blocks: Vec<Block> = (0..4).map(|_| f.new_block()).collect();
            f.layout = vec![blocks[0], blocks[2], blocks[1], blocks[3]];
            for (k, &b) in blocks.iter().enumerate() {
                // Block 2 stays empty, with room for 4.
                let n = [3i64, 5, 0, 1][k];
                let first = f.insts.len() as u32;
                for j in 0..n {
                    let r = f.new_reg(Type::I64);
                    f.make_inst(Opcode::Copy, Type::I64, &[r], &[Operand::Int(j)]);
                }
                if n > 0 {
                    f.place_inst_range(b, Inst::from_u32(first), n as usize, 8);
                } else {
                    f.reserve_block(b, 4);
                }
            }
            if moved {
                // Block 0's list grows past its room: it moves to the end.
                for j in 0..6 {
                    let r = f.new_reg(Type::I64);
                    let i = f.make_inst(Opcode::Copy, Type::I64, &[r], &[Operand::Int(j)]);
                    f.reserve_block(blocks[0], 1);
                    f.append_inst(blocks[0], i);
                }
            }
            let lists = |f: &Function| -> Vec<Vec<Inst>> {
                blocks.iter().map(|&b| f.block_insts(b).to_vec()).collect()
            };
            let before = lists(&f);
            f.shrink_to_fit();
            assert_eq!(before, lists(&f), "moved: {moved}");
            let total: usize = before.iter().map(|l| l.len()).sum();
            assert_eq!(f.inst_order.len(), total, "moved: {moved}");
            assert!(f.blocks.values().all(|d| d.cap == d.len));
        }
    }

    /// Operands too wide to pack go through every way of writing them (`make_inst`,
    /// `set_operand`, `set_operands` growing and shrinking, `map_operand_regs`, `aux2`) and
    /// read back as written; a wide word copied by a rewrite keeps its meaning when the
    /// original is overwritten.
    #[test]
    fn wide_operands_read_back_as_written() {
        let mut f = Function::new("f", Signature::new(CallConv::SystemV), Linkage::Export);
        let (r0, r1) = (f.new_reg(Type::I64), f.new_reg(Type::I64));
        let big = Operand::Int(i64::MIN + 7);
        let float = Operand::F64(0.1f64.to_bits());
        let indexed = Operand::Mem {
            base: r0.into(),
            index: r1.into(),
            scale: 8,
            disp: -16,
        };
        let far = Operand::Sym(Symbol::from_u32(3), 1 << 40);
        let ops = [big, Operand::Reg(r0), float, indexed, far];
        assert!(
            ops.iter()
                .filter(|o| PackedOperand::inline(**o).is_none())
                .count()
                == 4
        );
        let i = f.make_inst(Opcode::Store, Type::I64, &[], &ops);
        assert_eq!(f.operands(i), ops);
        assert_eq!(f.operand(i, 3), indexed);

        // Overwrite a wide operand with another, then with an inline one.
        f.set_operand(i, 0, Operand::Int(i64::MAX));
        assert_eq!(f.operand(i, 0), Operand::Int(i64::MAX));
        f.set_operand(i, 2, Operand::Int(5));
        assert_eq!(f.operand(i, 2), Operand::Int(5));
        assert_eq!(f.operand(i, 4), far);

        // A copy of the list in a second instruction, then the first rewritten.
        let copy = f.operands(i).to_vec();
        let j = f.make_inst(Opcode::Store, Type::I64, &[], &copy);
        f.set_operands(i, &[far, far]);
        assert_eq!(f.operands(i), [far, far]);
        assert_eq!(f.operands(j), copy[..]);
        f.set_operands(i, &[big, float, indexed, far, big, float]); // grows: moves
        assert_eq!(f.operands(i), [big, float, indexed, far, big, float]);
        assert_eq!(f.operands(j), copy[..]);

        // Renaming registers reaches the base and index of a wide memory reference.
        let r2 = f.new_reg(Type::I64);
        f.map_operand_regs(|r| if r == r1 { r2 } else { r });
        let renamed = Operand::Mem {
            base: r0.into(),
            index: r2.into(),
            scale: 8,
            disp: -16,
        };
        assert_eq!(f.operand(i, 2), renamed);
        assert_eq!(f.operand(j, 3), renamed);
        assert_eq!(f.operand(j, 1), Operand::Reg(r0));

        // The second auxiliary word lives in the pool too.
        let t = f.make_inst(Opcode::TryCall, Type::VOID, &[], &[far, big]);
        f.set_aux2(t, u32::MAX);
        assert_eq!(f.aux2(t), u32::MAX);
        assert_eq!(f.operands(t), [far, big]);
        f.set_operands(t, &[far, big, float]);
        assert_eq!(
            (f.aux2(t), f.operands(t).to_vec()),
            (u32::MAX, vec![far, big, float])
        );
    }

    /// Block lists share one array: filling blocks out of order, growing past the reserved
    /// room, inserting and retaining keep every list intact and in order.
    #[test]
    fn block_lists_in_one_array() {
        let mut f = Function::new("f", Signature::new(CallConv::SystemV), Linkage::Export);
        let (a, b, c) = (f.new_block(), f.new_block(), f.new_block());
        f.reserve_block(a, 2);
        f.append_inst(a, inst(0));
        f.append_inst(b, inst(10));
        f.append_inst(a, inst(1));
        f.append_inst(a, inst(2)); // beyond the reserved room: a moves
        f.append_inst(c, inst(20));
        f.append_inst(b, inst(11));
        for k in 3..9 {
            f.append_inst(a, inst(k));
        }
        f.insert_inst(b, 1, inst(15));
        f.insert_inst(c, 0, inst(19));
        assert_eq!(f.block_insts(a), (0..9).map(inst).collect::<Vec<_>>());
        assert_eq!(f.block_insts(b), [inst(10), inst(15), inst(11)]);
        assert_eq!(f.block_insts(c), [inst(19), inst(20)]);
        f.retain_all_insts(|i| i.as_u32() % 2 == 0);
        assert_eq!(
            f.block_insts(a),
            [inst(0), inst(2), inst(4), inst(6), inst(8)]
        );
        assert_eq!(f.block_insts(b), [inst(10)]);
        assert_eq!(f.block_insts(c), [inst(20)]);
        f.append_inst(b, inst(12));
        assert_eq!(f.block_insts(b), [inst(10), inst(12)]);
        assert_eq!(f.block_insts(a).len(), 5);
        assert_eq!(f.inst_count(), 8);
    }

    /// Two empty functions with `n` blocks each, paired: one to fill a way, one another.
    fn twin_functions(n: usize) -> (Function, Function, Vec<(Block, Block)>) {
        let mut f = Function::new("f", Signature::new(CallConv::SystemV), Linkage::Export);
        let mut g = f.clone();
        let blocks = (0..n).map(|_| (f.new_block(), g.new_block())).collect();
        (f, g, blocks)
    }

    /// `place_inst_range` leaves a block as `reserve_block` then `append_inst_range` do, and
    /// later appends grow it alike.
    #[test]
    fn place_inst_range_as_reserve_and_append() {
        let (mut f, mut g, blocks) = twin_functions(3);
        for (k, &(bf, bg)) in blocks.iter().enumerate() {
            let (first, n) = (10 * k as u32, k + 3);
            let cap = n.next_power_of_two().max(4);
            f.place_inst_range(bf, inst(first), n, cap);
            g.reserve_block(bg, cap);
            g.append_inst_range(bg, inst(first), n);
        }
        f.append_inst(blocks[1].0, inst(99));
        g.append_inst(blocks[1].1, inst(99));
        for &(bf, bg) in &blocks {
            assert_eq!(f.block_insts(bf), g.block_insts(bg));
            assert_eq!(
                (f.blocks[bf].start, f.blocks[bf].cap),
                (g.blocks[bg].start, g.blocks[bg].cap)
            );
        }
        assert_eq!(f.inst_order, g.inst_order);
    }

    /// A pool built in an `OperandRoom` ends with exactly its length of capacity and the
    /// operands pushed, and the room keeps its memory for the next function (whose pool
    /// starts empty, however large the last one was).
    #[test]
    fn operand_room_cuts_pools_to_size() {
        let mut room = OperandRoom::default();
        for (k, n) in [(0u32, 37usize), (1, 5), (2, 0)] {
            let mut f = Function::new("f", Signature::new(CallConv::SystemV), Linkage::Export);
            f.build_operands_in(&mut room);
            assert!(f.operand_pool.is_empty());
            f.reserve_operands(64);
            for j in 0..n {
                f.push_operand(Operand::Int((k as i64) << 40 | j as i64));
            }
            f.cut_operands_from(&mut room);
            assert_eq!(f.operand_pool.len(), n);
            assert_eq!(f.operand_pool.capacity(), n);
            for (j, p) in f.operand_pool.iter().enumerate() {
                assert_eq!(f.unpack(*p), Operand::Int((k as i64) << 40 | j as i64));
            }
            assert!(room.0.capacity() >= 64);
        }
    }

    /// Operands pushed after other instructions were made become a phi's sources with
    /// `set_pushed_operands`, as `set_operands` would give them, and the instructions made
    /// before and after keep theirs.
    #[test]
    fn pushed_operands_become_a_phis_sources() {
        let mut f = Function::new("f", Signature::new(CallConv::SystemV), Linkage::Export);
        let mut g = f.clone();
        let (b0, b1) = (f.new_block(), f.new_block());
        g.new_block();
        g.new_block();
        let mut made = Vec::new();
        for h in [&mut f, &mut g] {
            let r = h.new_reg(Type::I64);
            let phi = h.make_inst(Opcode::Phi, Type::I64, &[r], &[]);
            let c = h.make_inst(Opcode::Copy, Type::I64, &[r], &[Operand::Int(7)]);
            made.push((r, phi, c));
        }
        let srcs = [
            Operand::Reg(made[0].0),
            Operand::Block(b0),
            Operand::Int(-3),
            Operand::Block(b1),
        ];
        for &op in &srcs {
            f.push_operand(op);
        }
        f.set_pushed_operands(made[0].1, srcs.len());
        g.set_operands(made[1].1, &srcs);
        let after = f.make_inst(Opcode::Copy, Type::I64, &[made[0].0], &[Operand::Int(9)]);
        let ops = |h: &Function, i: Inst| h.operands(i).into_iter().collect::<Vec<_>>();
        assert_eq!(ops(&f, made[0].1), srcs);
        assert_eq!(ops(&f, made[0].1), ops(&g, made[1].1));
        assert_eq!(ops(&f, made[0].2), [Operand::Int(7)]);
        assert_eq!(ops(&f, after), [Operand::Int(9)]);
    }

    /// `place_inst_range_exact` leaves a function as `place_inst_range` with no room to spare
    /// does, for new blocks and for a block already filled (which it appends to), and a
    /// block's list still grows and moves when a pass appends to it.
    #[test]
    fn place_inst_range_exact_as_place_with_no_room() {
        let (mut f, mut g, blocks) = twin_functions(4);
        for (k, &(bf, bg)) in blocks.iter().enumerate() {
            let (first, n) = (10 * k as u32, k + 1);
            f.place_inst_range_exact(bf, inst(first), n);
            g.place_inst_range(bg, inst(first), n, n);
            assert_eq!(f.blocks[bf].cap as usize, n);
        }
        // A block placed already: appended to.
        f.place_inst_range_exact(blocks[0].0, inst(50), 2);
        g.place_inst_range(blocks[0].1, inst(50), 2, 2);
        f.append_inst(blocks[2].0, inst(99));
        g.append_inst(blocks[2].1, inst(99));
        for &(bf, bg) in &blocks {
            assert_eq!(f.block_insts(bf), g.block_insts(bg));
            assert_eq!(
                (f.blocks[bf].start, f.blocks[bf].len, f.blocks[bf].cap),
                (g.blocks[bg].start, g.blocks[bg].len, g.blocks[bg].cap)
            );
        }
        assert_eq!(f.inst_order, g.inst_order);
        assert_eq!(f.block_insts(blocks[0].0), &[inst(0), inst(50), inst(51)]);
        assert_eq!(
            f.block_insts(blocks[2].0),
            &[inst(20), inst(21), inst(22), inst(99)]
        );
    }
}
