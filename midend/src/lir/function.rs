//! Functions: signature, linkage, arenas of registers, instructions and blocks, the block
//! layout, and the side tables (stack objects, signatures, memory flags, global values,
//! opaque records, exception tables) that instructions refer to by index.

use super::entities::*;
use super::inst::{effects, Format, InstData, Opcode, PoolRange};
use super::operand::{Operand, Operands, PackedOperand};
use super::order::EntityOrder;
use super::thin::{thin_vec_heap_bytes, InlineMap, ThinMap};
use super::types::Type;
use super::Name;
use crate::hash::HashMap;
use cranelift_entity::packed_option::ReservedValue;
use cranelift_entity::{PrimaryMap, SecondaryMap};
use smallvec::SmallVec;
use thin_vec::ThinVec;

/// Calling conventions (the names Cranelift prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallConv {
    Fast,
    Tail,
    SystemV,
    WindowsFastcall,
    AppleAarch64,
    Probestack,
    Winch,
    PreserveAll,
}

const CALL_CONVS: [(&str, CallConv); 8] = [
    ("fast", CallConv::Fast),
    ("tail", CallConv::Tail),
    ("system_v", CallConv::SystemV),
    ("windows_fastcall", CallConv::WindowsFastcall),
    ("apple_aarch64", CallConv::AppleAarch64),
    ("probestack", CallConv::Probestack),
    ("winch", CallConv::Winch),
    ("preserve_all", CallConv::PreserveAll),
];

impl CallConv {
    pub fn name(self) -> &'static str {
        CALL_CONVS.iter().find(|c| c.1 == self).unwrap().0
    }
    pub fn parse(s: &str) -> Option<CallConv> {
        CALL_CONVS.iter().find(|c| c.0 == s).map(|c| c.1)
    }
}

/// How a parameter or return value is extended to register width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Ext {
    #[default]
    None,
    Uext,
    Sext,
}

/// Special meaning of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Purpose {
    #[default]
    Normal,
    VmCtx,
    StructReturn,
    StructArgument(u32),
}

/// A parameter or return value of a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbiParam {
    pub ty: Type,
    pub ext: Ext,
    pub purpose: Purpose,
}

impl AbiParam {
    pub fn new(ty: Type) -> Self {
        AbiParam {
            ty,
            ext: Ext::None,
            purpose: Purpose::Normal,
        }
    }
}

/// A function signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signature {
    pub params: AbiParams,
    pub returns: AbiParams,
    pub call_conv: CallConv,
}

/// The parameters or the returns of a signature: a list shared by reference count (an empty
/// list holds nothing). Cloning a signature copies no list, so a lift gives every signature
/// equal to one it has converted the same lists (one allocation per distinct list, where a
/// list per signature cost an allocation per function). It reads as a slice; `push`,
/// `extend` and mutable access copy a list that is shared first.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbiParams(Option<std::sync::Arc<[AbiParam]>>);

impl AbiParams {
    /// An empty list.
    pub const fn new() -> Self {
        AbiParams(None)
    }

    /// An empty list (the room is not kept: a list is built once, then shared).
    pub fn with_capacity(_: usize) -> Self {
        AbiParams(None)
    }

    /// Append `p` (the list is copied, so appending one by one in a loop is quadratic:
    /// `extend`, `collect` or `From` a slice build a list at once).
    pub fn push(&mut self, p: AbiParam) {
        self.extend(core::iter::once(p));
    }

    /// Empty the list.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// The heap bytes this list holds alone (none when it is shared, or empty).
    fn unshared_heap_bytes(&self) -> usize {
        match &self.0 {
            Some(a) if std::sync::Arc::strong_count(a) == 1 => {
                // (the two counts, then the elements)
                2 * core::mem::size_of::<usize>() + core::mem::size_of_val(&**a)
            }
            _ => 0,
        }
    }
}

impl core::ops::Deref for AbiParams {
    type Target = [AbiParam];
    #[inline]
    fn deref(&self) -> &[AbiParam] {
        self.0.as_deref().unwrap_or(&[])
    }
}

impl core::ops::DerefMut for AbiParams {
    fn deref_mut(&mut self) -> &mut [AbiParam] {
        match &mut self.0 {
            Some(a) => std::sync::Arc::make_mut(a),
            None => &mut [],
        }
    }
}

impl FromIterator<AbiParam> for AbiParams {
    fn from_iter<I: IntoIterator<Item = AbiParam>>(iter: I) -> Self {
        // (one allocation: the list, unless it has more than eight entries)
        let v: SmallVec<[AbiParam; 8]> = iter.into_iter().collect();
        AbiParams::from(&v[..])
    }
}

impl From<Vec<AbiParam>> for AbiParams {
    fn from(v: Vec<AbiParam>) -> Self {
        AbiParams::from(&v[..])
    }
}

impl From<&[AbiParam]> for AbiParams {
    fn from(v: &[AbiParam]) -> Self {
        AbiParams(if v.is_empty() { None } else { Some(v.into()) })
    }
}

impl Extend<AbiParam> for AbiParams {
    fn extend<I: IntoIterator<Item = AbiParam>>(&mut self, iter: I) {
        let mut v: SmallVec<[AbiParam; 8]> = SmallVec::from_slice(self);
        v.extend(iter);
        *self = AbiParams::from(&v[..]);
    }
}

impl<'a> IntoIterator for &'a AbiParams {
    type Item = &'a AbiParam;
    type IntoIter = core::slice::Iter<'a, AbiParam>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut AbiParams {
    type Item = &'a mut AbiParam;
    type IntoIter = core::slice::IterMut<'a, AbiParam>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl core::fmt::Debug for AbiParams {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Signature {
    pub fn new(call_conv: CallConv) -> Self {
        Signature {
            params: AbiParams::new(),
            returns: AbiParams::new(),
            call_conv,
        }
    }
}

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
    pub fn name(self) -> &'static str {
        match self {
            Linkage::Export => "export",
            Linkage::Local => "local",
            Linkage::Preemptible => "preemptible",
            Linkage::Import => "import",
        }
    }
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

/// A stack object: a function-local slot of known size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackObjData {
    pub size: u32,
    pub align_shift: u8,
}

/// An alias region (from Cranelift memory flags): a user id and a description.
///
/// The description is shared (`Arc<str>`): functions of one module name the same few regions
/// ("VMContext+0x8"), and a lifter hands each the same string instead of a copy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegionData {
    pub id: u32,
    pub name: std::sync::Arc<str>,
}

/// Memory flags of a load or store (mirrors Cranelift's): bits, trap code, alias region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemFlags {
    /// `MemFlags::ALIGNED | READONLY | LITTLE | BIG | CAN_MOVE | CHECKED`.
    pub bits: u8,
    /// Trap code raised by a faulting access; 0 = `notrap`.
    pub trap: u8,
    pub region: Option<Region>,
}

impl MemFlags {
    pub const ALIGNED: u8 = 1;
    pub const READONLY: u8 = 2;
    pub const LITTLE: u8 = 4;
    pub const BIG: u8 = 8;
    pub const CAN_MOVE: u8 = 16;
    /// Trap code raised by default (Cranelift's `heap_oob`).
    pub const HEAP_OOB: u8 = 253;

    /// Plain flags: may trap with `heap_oob`, no other property.
    pub fn new() -> Self {
        MemFlags {
            bits: 0,
            trap: Self::HEAP_OOB,
            region: None,
        }
    }
    /// `notrap aligned`.
    pub fn trusted() -> Self {
        MemFlags {
            bits: Self::ALIGNED,
            trap: 0,
            region: None,
        }
    }
    pub fn readonly(self) -> bool {
        self.bits & Self::READONLY != 0
    }
    pub fn notrap(self) -> bool {
        self.trap == 0
    }
}

impl Default for MemFlags {
    fn default() -> Self {
        Self::new()
    }
}

/// Trap code names, as Cranelift prints them (`user7` for user codes).
pub fn trap_code_name(code: u8) -> String {
    match code {
        251 => "stk_ovf".into(),
        252 => "int_ovf".into(),
        253 => "heap_oob".into(),
        254 => "int_divz".into(),
        255 => "bad_toint".into(),
        n => format!("user{n}"),
    }
}

/// Parse a trap code name (`heap_oob`, `user3`).
pub fn parse_trap_code(s: &str) -> Option<u8> {
    Some(match s {
        "stk_ovf" => 251,
        "int_ovf" => 252,
        "heap_oob" => 253,
        "int_divz" => 254,
        "bad_toint" => 255,
        _ => {
            let n: u8 = s.strip_prefix("user")?.parse().ok()?;
            if n == 0 || n >= 251 {
                return None;
            }
            n
        }
    })
}

/// A global value (Cranelift's `gvN`): a chain of loads and offsets rooted at vmctx or a symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalData {
    VmCtx,
    Load {
        base: GlobalRef,
        offset: i32,
        ty: Type,
        flags: MemFlagsRef,
    },
    IAddImm {
        base: GlobalRef,
        offset: i64,
        ty: Type,
    },
    Symbol {
        sym: Symbol,
        offset: i64,
        colocated: bool,
        tls: bool,
    },
}

/// What an opaque instruction is: a Cranelift opcode LIR does not model, with its immediates
/// and effects. Compared exactly when merging; value-numbered only when pure.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpaqueData {
    /// The Cranelift opcode name, e.g. `iadd_pairwise` (a `Name`: held inline, so an
    /// opaque instruction costs no allocation for it).
    pub name: super::Name,
    /// Immediates in a format-specific encoding chosen by the lifter.
    pub imms: SmallVec<[u64; 2]>,
    /// `effects::{LOAD, STORE, TRAP, SIDE}` bits.
    pub effects: u8,
}

/// One entry of a `try_call` exception table; the entries pair up, in order, with the
/// handler block operands (tags and default) and context register operands (context).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExnItem {
    Tag(u32),
    Default,
    Context,
}

/// A basic block: where its instructions, in order, sit in `Function::inst_order` (`len`
/// used, `cap` reserved). Every block's list lives in that one array, so a walk over a
/// function's blocks reads one contiguous allocation rather than one per block; a list that
/// outgrows its room moves to the end of the array.
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockData {
    start: u32,
    len: u32,
    cap: u32,
}

/// Scratch memory in which functions' operand pools are built, one function after another
/// (`Function::build_operands_in`).
#[derive(Default)]
pub struct OperandRoom(Vec<PackedOperand>);

/// Memory flags tables up to this size are searched rather than indexed.
pub const MEMFLAGS_SCAN: usize = 8;

/// The largest stack object alignment, in bytes (Cranelift takes any power of two below 2^32
/// but lays frames out in 32 bits; nothing honest asks for more than a page or so).
pub const MAX_STACK_ALIGN: u64 = 1 << 16;

/// Per-register data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegData {
    pub ty: Type,
}

/// An LIR function.
#[derive(Clone, Debug)]
pub struct Function {
    /// The name (a `Name` keeps names of up to 24 bytes inline, without an allocation).
    pub name: Name,
    pub sig: Signature,
    pub linkage: Linkage,
    /// The function's address is observed (taken with `func_addr`, or declared so): merging it
    /// must keep a distinct address (a thunk), never an alias.
    pub address_significant: bool,
    /// Compiled already (an earlier batch of an incremental module): passes never change
    /// it, and merging keeps it as the survivor.
    pub frozen: bool,
    /// A pass changed the body (removed instructions, made it a thunk, rewrote calls with
    /// new arguments). An unmodified function lowers to what it was lifted from, up to the
    /// callees of its direct calls (see `MergeRecord::callers_redirected`), so a backend may
    /// compile its original Cranelift IR instead of lowering it.
    pub modified: bool,
    /// `merge-similar` rewrote some direct calls (`Module::call_rewrites`), and nothing else
    /// changed since it was lifted (else `modified`): it lowers to what it was lifted from, up
    /// to those calls (and the callees of `MergeRecord::callers_redirected`). Its walk
    /// tokens are stale, as with `modified`.
    pub calls_rewritten: bool,
    pub regs: PrimaryMap<Reg, RegData>,
    pub insts: PrimaryMap<Inst, InstData>,
    pub blocks: PrimaryMap<Block, BlockData>,
    /// The instruction lists of all blocks (see `BlockData`; read them with `block_insts`).
    /// Not stored while it is the identity, as a lift leaves it (see `EntityOrder`).
    pub(crate) inst_order: EntityOrder<Inst>,
    /// Block order; the first is the entry. It reads as a slice; like `inst_order`, it is
    /// not stored while it is the identity (a lift creates the blocks in layout order).
    pub layout: EntityOrder<Block>,
    /// Every instruction's operands, packed (`InstData::operands` is a range of it; read
    /// them with `operands`).
    pub(crate) operand_pool: Vec<PackedOperand>,
    /// The operands too wide to pack, by the index their packed word holds.
    pub(crate) wide_operands: ThinVec<Operand>,
    pub result_pool: ThinVec<Reg>,
    pub stack_objs: ThinMap<StackObj, StackObjData>,
    /// (one in place: most functions call through one signature or none; 736 of
    /// gcc-loops' 1,103)
    pub sigs: InlineMap<SigRef, [Signature; 1]>,
    pub regions: ThinMap<Region, RegionData>,
    /// (two in place: generated code often uses one or two kinds of memory access; the
    /// functions wasmtime translates, whose alias regions make more kinds, mostly spill)
    pub memflags: InlineMap<MemFlagsRef, [MemFlags; 2]>,
    /// The index of `memflags`, built by `intern_memflags` when it adds past
    /// `MEMFLAGS_SCAN` entries (empty until then; a lifted function's table can be larger
    /// without one: the lifter deduplicates through its own table, and `intern_memflags`
    /// searches until it adds an entry).
    memflags_index: Option<Box<HashMap<MemFlags, MemFlagsRef>>>,
    pub globals: ThinMap<GlobalRef, GlobalData>,
    pub opaques: ThinMap<OpaqueRef, OpaqueData>,
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

    pub fn new(name: impl Into<Name>, sig: Signature, linkage: Linkage) -> Self {
        Function {
            name: name.into(),
            sig,
            linkage,
            address_significant: false,
            frozen: false,
            modified: false,
            calls_rewritten: false,
            regs: PrimaryMap::new(),
            insts: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            inst_order: EntityOrder::new(),
            layout: EntityOrder::new(),
            operand_pool: Vec::new(),
            wide_operands: ThinVec::new(),
            result_pool: ThinVec::new(),
            stack_objs: ThinMap::new(),
            sigs: InlineMap::new(),
            regions: ThinMap::new(),
            memflags: InlineMap::new(),
            memflags_index: None,
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

    #[inline]
    pub fn new_reg(&mut self, ty: Type) -> Reg {
        self.regs.push(RegData { ty })
    }
    #[inline]
    pub fn reg_type(&self, r: Reg) -> Type {
        self.regs[r].ty
    }

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
            self.inst_order = EntityOrder::from(order);
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
        if let Some(ix) = &mut self.memflags_index {
            ix.shrink_to_fit();
        }
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
        for (name, bytes) in [
            ("wide_operands", thin_vec_heap_bytes(&self.wide_operands)),
            ("result_pool", thin_vec_heap_bytes(&self.result_pool)),
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
        if let Some(ix) = &self.memflags_index {
            each("memflags_index", core::mem::size_of_val(&**ix));
            each(
                "memflags_index",
                ix.capacity() * (core::mem::size_of::<(MemFlags, MemFlagsRef)>() + 1),
            );
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
        self.frozen = old.frozen;
        self.modified = old.modified;
        self.calls_rewritten = old.calls_rewritten;
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
        let order = self.inst_order.stored_mut();
        let (len, cap) = (order.len(), order.capacity());
        if cap - len < grow {
            order.reserve_exact(grow.max(len / 8));
        }
        self.move_block_to_end(b, want);
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
        let order = self.inst_order.stored_mut();
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
    #[inline]
    pub fn place_inst_range_exact(&mut self, b: Block, first: Inst, n: usize) {
        let d = self.blocks[b];
        if d.len != 0 || d.cap != 0 {
            return self.place_inst_range(b, first, n, n);
        }
        let start = self.inst_order.len();
        self.inst_order.extend_range(first, n);
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
        let order = self.inst_order.stored_mut();
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

    /// Intern memory flags. A function has a few: up to `MEMFLAGS_SCAN` are found by a
    /// search of the table, without building (and allocating) the hash index.
    pub fn intern_memflags(&mut self, f: MemFlags) -> MemFlagsRef {
        let Some(index) = &mut self.memflags_index else {
            if let Some(k) = self.memflags.values().position(|m| *m == f) {
                return MemFlagsRef::from_u32(k as u32);
            }
            if self.memflags.heap_bytes() == 0 {
                // Room for the table's scanned size at once (it would grow 4 -> 8), unless
                // room was made already (a lifter knows how many flags there can be).
                self.memflags.reserve_exact(MEMFLAGS_SCAN);
            }
            let r = self.memflags.push(f);
            if self.memflags.len() > MEMFLAGS_SCAN {
                let mut index = Box::<HashMap<MemFlags, MemFlagsRef>>::default();
                for (r, m) in self.memflags.iter() {
                    index.entry(*m).or_insert(r);
                }
                self.memflags_index = Some(index);
            }
            return r;
        };
        if let Some(&r) = index.get(&f) {
            return r;
        }
        let r = self.memflags.push(f);
        index.insert(f, r);
        r
    }

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
    pub fn build_operands_in(&mut self, room: &mut OperandRoom) {
        debug_assert!(self.operand_pool.is_empty());
        core::mem::swap(&mut self.operand_pool, &mut room.0);
        self.operand_pool.clear();
    }

    /// End `build_operands_in`: the pool is copied to an array of exactly its length, and
    /// `room` gets its memory back.
    pub fn cut_operands_from(&mut self, room: &mut OperandRoom) {
        let exact = self.operand_pool.to_vec();
        room.0 = core::mem::replace(&mut self.operand_pool, exact);
    }

    /// `make_inst` for operands the caller has pushed onto the end of the operand pool
    /// (`push_operand`): the last `n` entries become the instruction's operands, where they
    /// are.
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

    /// The terminator of a block, if its last instruction is one.
    pub fn terminator(&self, block: Block) -> Option<Inst> {
        let last = *self.block_insts(block).last()?;
        self.insts[last].opcode.is_terminator().then_some(last)
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

#[inline]
fn push_range<T: Copy>(pool: &mut ThinVec<T>, items: &[T]) -> PoolRange {
    let start = pool.len() as u32;
    pool.extend_from_slice(items);
    PoolRange {
        start,
        len: items.len() as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            f.layout = vec![blocks[0], blocks[2], blocks[1], blocks[3]].into();
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
