//! What a function's side tables hold, the entities instructions refer to by index: stack
//! objects, alias regions, memory flags and trap codes, global values, opaque instructions and
//! exception-table entries (Cranelift's `stackslot`, `memflags`, `globalvalue`, `trapcode`).

use super::entities::*;
use super::types::Type;
use smallvec::SmallVec;

/// A stack object: a function-local slot of known size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackObjData {
    /// The size in bytes.
    pub size: u32,
    /// The alignment, as a power of two: `1 << align_shift` bytes (at most `MAX_STACK_ALIGN`
    /// in a valid function).
    pub align_shift: u8,
}

/// An alias region (from Cranelift memory flags): a user id and a description.
///
/// The description is shared (`Arc<str>`): functions of one module name the same few regions
/// ("VMContext+0x8"), and a lifter hands each the same string instead of a copy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegionData {
    /// The user id (Cranelift's `AliasRegionData::user_id`).
    pub id: u32,
    /// The description (Cranelift's `AliasRegionData::description`).
    pub name: std::sync::Arc<str>,
}

/// Memory flags of a load or store (mirrors Cranelift's): bits, trap code, alias region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemFlags {
    /// `MemFlags::ALIGNED | READONLY | LITTLE | BIG | CAN_MOVE | CHECKED`.
    pub bits: u8,
    /// Trap code raised by a faulting access; 0 = `notrap`.
    pub trap: u8,
    /// The alias region of the access, if any (accesses in different regions never alias).
    pub region: Option<Region>,
}

impl MemFlags {
    /// `aligned`: the address is aligned to the access size.
    pub const ALIGNED: u8 = 1;
    /// `readonly`: the memory is not written while the function runs.
    pub const READONLY: u8 = 2;
    /// `little`: a little-endian access.
    pub const LITTLE: u8 = 4;
    /// `big`: a big-endian access.
    pub const BIG: u8 = 8;
    /// `can_move`: the access does not rely on control flow to be safe, so it may move.
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
    /// The memory is not written while the function runs (`READONLY`).
    pub fn readonly(self) -> bool {
        self.bits & Self::READONLY != 0
    }
    /// The access never traps (trap code 0).
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
    /// The address of the VM context.
    VmCtx,
    /// The value loaded from `base + offset`.
    Load {
        /// The global value holding the address.
        base: GlobalRef,
        /// The byte offset added to the address.
        offset: i32,
        /// The type of the loaded value.
        ty: Type,
        /// The memory flags of the load.
        flags: MemFlagsRef,
    },
    /// `base + offset`.
    IAddImm {
        /// The global value added to.
        base: GlobalRef,
        /// The constant added.
        offset: i64,
        /// The type of the sum.
        ty: Type,
    },
    /// The address of a symbol plus an offset.
    Symbol {
        /// The symbol, in the module's symbol table.
        sym: Symbol,
        /// The byte offset added to the address.
        offset: i64,
        /// The symbol is defined near enough to be addressed directly, without the GOT.
        colocated: bool,
        /// The symbol is thread-local.
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
    /// The handler (its paired block) for exceptions of this tag.
    Tag(u32),
    /// The handler (its paired block) for exceptions no tag before it matches.
    Default,
    /// A context update: its paired register holds the context for the entries that follow.
    Context,
}

/// The largest stack object alignment, in bytes (Cranelift takes any power of two below 2^32
/// but lays frames out in 32 bits; nothing honest asks for more than a page or so).
pub const MAX_STACK_ALIGN: u64 = 1 << 16;
