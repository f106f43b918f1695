//! The eight operand kinds of seed 002, and the small immediates they carry.

use super::entities::{Block, Reg, StackObj, Symbol};
use core::fmt;
use cranelift_entity::packed_option::PackedOption;

/// A constant operand. Float constants keep their bit pattern so that ordering and hashing are
/// exact (NaN payloads and -0.0 stay distinct).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Imm {
    Int(i64),
    F32(u32),
    F64(u64),
}

/// A generic memory reference `[base + index*scale + disp]`; base and index are optional
/// integer registers, scale is 1, 2, 4 or 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemRef {
    pub base: PackedOption<Reg>,
    pub index: PackedOption<Reg>,
    pub scale: u8,
    pub disp: i32,
}

impl MemRef {
    pub fn base(base: Reg, disp: i32) -> Self {
        MemRef {
            base: base.into(),
            index: None.into(),
            scale: 1,
            disp,
        }
    }
}

/// A comparison predicate. Integer predicates as in CLIF `icmp`; float predicates carry an `f`
/// prefix in LIR text so the two families never collide (`eq` vs `feq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cond {
    Eq,
    Ne,
    Slt,
    Sge,
    Sgt,
    Sle,
    Ult,
    Uge,
    Ugt,
    Ule,
    FOrd,
    FUno,
    FEq,
    FNe,
    FOne,
    FUeq,
    FLt,
    FLe,
    FGt,
    FGe,
    FUlt,
    FUle,
    FUgt,
    FUge,
}

const COND_NAMES: [&str; 24] = [
    "eq", "ne", "slt", "sge", "sgt", "sle", "ult", "uge", "ugt", "ule", "ford", "funo", "feq",
    "fne", "fone", "fueq", "flt", "fle", "fgt", "fge", "fult", "fule", "fugt", "fuge",
];
const ALL_CONDS: [Cond; 24] = [
    Cond::Eq,
    Cond::Ne,
    Cond::Slt,
    Cond::Sge,
    Cond::Sgt,
    Cond::Sle,
    Cond::Ult,
    Cond::Uge,
    Cond::Ugt,
    Cond::Ule,
    Cond::FOrd,
    Cond::FUno,
    Cond::FEq,
    Cond::FNe,
    Cond::FOne,
    Cond::FUeq,
    Cond::FLt,
    Cond::FLe,
    Cond::FGt,
    Cond::FGe,
    Cond::FUlt,
    Cond::FUle,
    Cond::FUgt,
    Cond::FUge,
];

impl Cond {
    pub fn name(self) -> &'static str {
        COND_NAMES[self as usize]
    }
    pub fn parse(s: &str) -> Option<Cond> {
        COND_NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| ALL_CONDS[i])
    }
    pub fn all() -> &'static [Cond] {
        &ALL_CONDS
    }
    pub fn is_float(self) -> bool {
        self as usize >= Cond::FOrd as usize
    }
    /// The predicate that gives the same result with the operands swapped:
    /// `a slt b` ≡ `b sgt a`. Used by value numbering to canonicalise comparisons.
    pub fn swapped(self) -> Cond {
        use Cond::*;
        match self {
            Slt => Sgt,
            Sgt => Slt,
            Sge => Sle,
            Sle => Sge,
            Ult => Ugt,
            Ugt => Ult,
            Uge => Ule,
            Ule => Uge,
            FLt => FGt,
            FGt => FLt,
            FLe => FGe,
            FGe => FLe,
            FUlt => FUgt,
            FUgt => FUlt,
            FUle => FUge,
            FUge => FUle,
            c => c, // eq, ne, ord, uno, one, ueq are symmetric
        }
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One operand of an instruction: the eight kinds of seed 002.
///
/// The enum is kept at 16 bytes (operands are the bulk of a function's memory, and every pass
/// streams over them): constants and memory references are spelled out as variants of their
/// own rather than wrapping `Imm` and `MemRef`, which would cost a second tag word. `Imm` and
/// `MemRef` stay as value types; `Operand::from`, `imm` and `mem` convert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// A virtual register.
    Reg(Reg),
    /// An integer constant (seed 002's constant, integer kind).
    Int(i64),
    /// A 32-bit float constant, by its bit pattern.
    F32(u32),
    /// A 64-bit float constant, by its bit pattern.
    F64(u64),
    /// A basic block: branch targets and phi sources only.
    Block(Block),
    /// A generic memory reference `[base + index*scale + disp]` (loads and stores only).
    Mem {
        base: PackedOption<Reg>,
        index: PackedOption<Reg>,
        scale: u8,
        disp: i32,
    },
    /// An external symbol plus a byte offset: a memory operand `[@g + 8]` in loads and stores,
    /// the callee of a direct call, or the symbol whose address `func_addr`/`symbol_value` take.
    Sym(Symbol, i64),
    /// A stack object plus a byte offset: a memory operand in loads and stores, or the slot
    /// whose address `stack_addr` takes.
    Stack(StackObj, i32),
    /// A comparison predicate (compares and conditional branches).
    Pred(Cond),
    /// The n-th function argument (only in the `copy` that moves it into a register).
    Arg(u32),
}

const _: () = assert!(core::mem::size_of::<Operand>() == 16);

impl From<Imm> for Operand {
    fn from(i: Imm) -> Operand {
        match i {
            Imm::Int(v) => Operand::Int(v),
            Imm::F32(b) => Operand::F32(b),
            Imm::F64(b) => Operand::F64(b),
        }
    }
}

impl From<MemRef> for Operand {
    fn from(m: MemRef) -> Operand {
        Operand::Mem {
            base: m.base,
            index: m.index,
            scale: m.scale,
            disp: m.disp,
        }
    }
}

impl Operand {
    pub fn as_reg(self) -> Option<Reg> {
        match self {
            Operand::Reg(r) => Some(r),
            _ => None,
        }
    }
    pub fn as_block(self) -> Option<Block> {
        match self {
            Operand::Block(b) => Some(b),
            _ => None,
        }
    }
    /// The constant, if this is one.
    pub fn imm(self) -> Option<Imm> {
        match self {
            Operand::Int(v) => Some(Imm::Int(v)),
            Operand::F32(b) => Some(Imm::F32(b)),
            Operand::F64(b) => Some(Imm::F64(b)),
            _ => None,
        }
    }
    /// The generic memory reference, if this is one.
    pub fn mem(self) -> Option<MemRef> {
        match self {
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => Some(MemRef {
                base,
                index,
                scale,
                disp,
            }),
            _ => None,
        }
    }
    /// Is this a constant?
    pub fn is_imm(self) -> bool {
        matches!(self, Operand::Int(_) | Operand::F32(_) | Operand::F64(_))
    }
    /// Is this a memory operand (generic reference, stack object or symbol)?
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Operand::Mem { .. } | Operand::Stack(..) | Operand::Sym(..)
        )
    }
    /// Registers read by this operand (a memory reference reads its base and index).
    pub fn regs(&self) -> impl Iterator<Item = Reg> {
        let (a, b) = match *self {
            Operand::Reg(r) => (Some(r), None),
            Operand::Mem { base, index, .. } => (base.expand(), index.expand()),
            _ => (None, None),
        };
        a.into_iter().chain(b)
    }
    /// Apply `f` to every register this operand reads.
    #[inline]
    pub fn map_regs(&mut self, mut f: impl FnMut(Reg) -> Reg) {
        match self {
            Operand::Reg(r) => *r = f(*r),
            Operand::Mem { base, index, .. } => {
                if let Some(b) = base.expand() {
                    *base = f(b).into();
                }
                if let Some(i) = index.expand() {
                    *index = f(i).into();
                }
            }
            _ => {}
        }
    }
}
