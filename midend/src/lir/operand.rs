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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// A virtual register.
    Reg(Reg),
    /// An integer or float constant.
    Imm(Imm),
    /// A basic block: branch targets and phi sources only.
    Block(Block),
    /// A generic memory reference (loads and stores only).
    Mem(MemRef),
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
    /// Is this a memory operand (generic reference, stack object or symbol)?
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Operand::Mem(_) | Operand::Stack(..) | Operand::Sym(..)
        )
    }
    /// Registers read by this operand (a memory reference reads its base and index).
    pub fn regs(&self) -> impl Iterator<Item = Reg> {
        let (a, b) = match *self {
            Operand::Reg(r) => (Some(r), None),
            Operand::Mem(m) => (m.base.expand(), m.index.expand()),
            _ => (None, None),
        };
        a.into_iter().chain(b)
    }
    /// Apply `f` to every register this operand reads.
    pub fn map_regs(&mut self, mut f: impl FnMut(Reg) -> Reg) {
        match self {
            Operand::Reg(r) => *r = f(*r),
            Operand::Mem(m) => {
                if let Some(b) = m.base.expand() {
                    m.base = f(b).into();
                }
                if let Some(i) = m.index.expand() {
                    m.index = f(i).into();
                }
            }
            _ => {}
        }
    }
}
