//! The eight operand kinds of LIR, and the small immediates they carry.

use super::entities::{Block, Reg, StackObj, Symbol};
use core::fmt;
use cranelift_entity::packed_option::PackedOption;
use smallvec::SmallVec;

/// A constant operand. Float constants keep their bit pattern so that ordering and hashing are
/// exact (NaN payloads and -0.0 stay distinct).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Imm {
    /// An integer constant.
    Int(i64),
    /// A 32-bit float constant, by its bit pattern.
    F32(u32),
    /// A 64-bit float constant, by its bit pattern.
    F64(u64),
}

/// A generic memory reference `[base + index*scale + disp]`; base and index are optional
/// integer registers, scale is 1, 2, 4 or 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemRef {
    /// The base register, if any.
    pub base: PackedOption<Reg>,
    /// The index register, if any.
    pub index: PackedOption<Reg>,
    /// The factor of the index: 1, 2, 4 or 8.
    pub scale: u8,
    /// The byte displacement.
    pub disp: i32,
}

impl MemRef {
    /// `[base + disp]`: no index, scale 1.
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
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Signed less than.
    Slt,
    /// Signed greater than or equal.
    Sge,
    /// Signed greater than.
    Sgt,
    /// Signed less than or equal.
    Sle,
    /// Unsigned less than.
    Ult,
    /// Unsigned greater than or equal.
    Uge,
    /// Unsigned greater than.
    Ugt,
    /// Unsigned less than or equal.
    Ule,
    /// Ordered: neither operand is NaN.
    FOrd,
    /// Unordered: either operand is NaN.
    FUno,
    /// Ordered and equal.
    FEq,
    /// Unordered or not equal.
    FNe,
    /// Ordered and not equal.
    FOne,
    /// Unordered or equal.
    FUeq,
    /// Ordered and less than.
    FLt,
    /// Ordered and less than or equal.
    FLe,
    /// Ordered and greater than.
    FGt,
    /// Ordered and greater than or equal.
    FGe,
    /// Unordered or less than.
    FUlt,
    /// Unordered or less than or equal.
    FUle,
    /// Unordered or greater than.
    FUgt,
    /// Unordered or greater than or equal.
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
    /// The name, as the `.lir` text spells it (`eq`, `ult`).
    pub fn name(self) -> &'static str {
        COND_NAMES[self as usize]
    }
    /// The predicate named `s`.
    pub fn parse(s: &str) -> Option<Cond> {
        COND_NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| ALL_CONDS[i])
    }
    /// Every predicate: the ten integer ones, then the fourteen float ones.
    pub fn all() -> &'static [Cond] {
        &ALL_CONDS
    }
    /// Is this a float predicate (`f` prefix)?
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

/// One operand of an instruction: one of LIR's eight kinds.
///
/// This is the operand as passes read and match it (16 bytes: constants and memory
/// references are spelled out as variants of their own rather than wrapping `Imm` and
/// `MemRef`, which would cost a second tag word). A function stores its operands packed in
/// 8 bytes (`PackedOperand`); `Function::operands` unpacks them. `Imm` and `MemRef` stay as
/// value types; `Operand::from`, `imm` and `mem` convert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// A virtual register.
    Reg(Reg),
    /// An integer constant.
    Int(i64),
    /// A 32-bit float constant, by its bit pattern.
    F32(u32),
    /// A 64-bit float constant, by its bit pattern.
    F64(u64),
    /// A basic block: branch targets and phi sources only.
    Block(Block),
    /// A generic memory reference `[base + index*scale + disp]` (loads and stores only).
    Mem {
        /// The base register, if any.
        base: PackedOption<Reg>,
        /// The index register, if any.
        index: PackedOption<Reg>,
        /// The factor of the index: 1, 2, 4 or 8.
        scale: u8,
        /// The byte displacement.
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
    /// The register, for a register operand.
    pub fn as_reg(self) -> Option<Reg> {
        match self {
            Operand::Reg(r) => Some(r),
            _ => None,
        }
    }
    /// The block, for a block operand.
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

/// An operand as a function's operand pool stores it: one 64-bit word, the kind in the low
/// 4 bits and the payload above (operands are the largest table of a function, and most are
/// registers, small constants and blocks). What does not fit, a constant wider than 60 bits,
/// a float whose low 4 bits are set, a memory reference with an index register or a register
/// number of 2^24 or more, a symbol offset beyond 28 bits or a stack object of 2^28 or more,
/// is kept whole in the function's table of wide operands and the word holds its index
/// there.
///
/// The packing is canonical: an operand is packed inline whenever it fits. So two inline
/// words are equal exactly when their operands are, and an inline word never equals a wide
/// one's operand; two wide words may hold equal operands (unpack to compare).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct PackedOperand(u64);

const _: () = assert!(core::mem::size_of::<PackedOperand>() == 8);

/// The kind field of a `PackedOperand` (`PackedOperand::kind`); the payload
/// (`PackedOperand::payload`) of a register, a block, a 32-bit float, a predicate or an
/// argument is its number or bits, of an integer its low 60 bits.
pub(crate) mod kind {
    pub const REG: u64 = 0;
    pub const INT: u64 = 1;
    pub const F32: u64 = 2;
    pub const F64: u64 = 3;
    pub const BLOCK: u64 = 4;
    pub const MEM: u64 = 5;
    pub const SYM: u64 = 6;
    pub const STACK: u64 = 7;
    pub const PRED: u64 = 8;
    pub const ARG: u64 = 9;
    pub const WIDE: u64 = 10;
}

/// The base field of an inline memory reference (24 bits) when it has no base register.
const NO_BASE: u64 = 0xFF_FFFF;

impl PackedOperand {
    /// The word for `op` when it fits in one (see the type's comment), else `None`.
    #[inline(always)]
    pub fn inline(op: Operand) -> Option<PackedOperand> {
        let w = match op {
            Operand::Reg(r) => PackedOperand::reg(r).0,
            Operand::Int(v) => {
                if (v << 4) >> 4 != v {
                    return None;
                }
                (v << 4) as u64 | kind::INT
            }
            Operand::F32(b) => (b as u64) << 4 | kind::F32,
            Operand::F64(b) => {
                if b & 0xF != 0 {
                    return None;
                }
                b | kind::F64
            }
            Operand::Block(b) => (b.as_u32() as u64) << 4 | kind::BLOCK,
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => {
                let base = match base.expand() {
                    None => NO_BASE,
                    Some(r) if (r.as_u32() as u64) < NO_BASE => r.as_u32() as u64,
                    Some(_) => return None,
                };
                if index.is_some() || !matches!(scale, 1 | 2 | 4 | 8) {
                    return None;
                }
                let log = scale.trailing_zeros() as u64;
                (base | log << 24 | (disp as u32 as u64) << 26) << 4 | kind::MEM
            }
            Operand::Sym(s, off) => {
                if (off << 36) >> 36 != off {
                    return None;
                }
                (off << 36) as u64 | (s.as_u32() as u64) << 4 | kind::SYM
            }
            Operand::Stack(s, off) => {
                if s.as_u32() >= 1 << 28 {
                    return None;
                }
                (off as u32 as u64) << 32 | (s.as_u32() as u64) << 4 | kind::STACK
            }
            Operand::Pred(c) => (c as u64) << 4 | kind::PRED,
            Operand::Arg(n) => (n as u64) << 4 | kind::ARG,
        };
        Some(PackedOperand(w))
    }

    /// The word for the wide operand at `index` of the function's wide table.
    #[inline]
    pub fn wide(index: u32) -> PackedOperand {
        PackedOperand((index as u64) << 4 | kind::WIDE)
    }

    /// The index in the wide table, for a wide operand.
    #[inline(always)]
    pub fn wide_index(self) -> Option<usize> {
        (self.kind() == kind::WIDE).then_some(self.payload() as usize)
    }

    /// The word of a register operand.
    #[inline(always)]
    pub fn reg(r: Reg) -> PackedOperand {
        PackedOperand((r.as_u32() as u64) << 4 | kind::REG)
    }

    /// Is this a memory reference or a wide operand (which may be one)? The only words,
    /// besides registers, that may name a register.
    #[inline(always)]
    pub fn may_hold_mem(self) -> bool {
        matches!(self.kind(), kind::MEM | kind::WIDE)
    }

    /// The kind field (`kind::REG`, ...; `kind::WIDE` for a wide operand).
    #[inline(always)]
    pub(crate) fn kind(self) -> u64 {
        self.0 & 0xF
    }

    /// The 60 bits above the kind field.
    #[inline(always)]
    pub fn payload(self) -> u64 {
        self.0 >> 4
    }

    /// The register, for a register operand (without unpacking).
    #[inline(always)]
    pub fn as_reg(self) -> Option<Reg> {
        if self.kind() == kind::REG {
            Some(Reg::from_u32(self.payload() as u32))
        } else {
            None
        }
    }

    /// The operand, with `wide` the function's table of wide operands.
    #[inline(always)]
    pub fn unpack(self, wide: &[Operand]) -> Operand {
        let w = self.0;
        let p = self.payload();
        match self.kind() {
            kind::REG => Operand::Reg(Reg::from_u32(p as u32)),
            kind::INT => Operand::Int(w as i64 >> 4),
            kind::F32 => Operand::F32(p as u32),
            kind::F64 => Operand::F64(w & !0xF),
            kind::BLOCK => Operand::Block(Block::from_u32(p as u32)),
            kind::MEM => {
                let base = p & NO_BASE;
                Operand::Mem {
                    base: if base == NO_BASE {
                        None.into()
                    } else {
                        Reg::from_u32(base as u32).into()
                    },
                    index: None.into(),
                    scale: 1 << ((p >> 24) & 3),
                    disp: (p >> 26) as u32 as i32,
                }
            }
            kind::SYM => Operand::Sym(Symbol::from_u32(p as u32), w as i64 >> 36),
            kind::STACK => Operand::Stack(
                StackObj::from_u32((p & 0xFFF_FFFF) as u32),
                (w >> 32) as u32 as i32,
            ),
            kind::PRED => Operand::Pred(ALL_CONDS[p as usize]),
            kind::ARG => Operand::Arg(p as u32),
            _ => wide[p as usize],
        }
    }

    /// The raw word (for tests and debugging).
    pub fn bits(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for PackedOperand {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.wide_index() {
            Some(k) => write!(f, "wide#{k}"),
            None => write!(f, "{:?}", self.unpack(&[])),
        }
    }
}

/// The operands of one instruction, unpacked as they are read (`Function::operands`): a
/// view of the packed words and the function's wide table.
#[derive(Clone, Copy)]
pub struct Operands<'a> {
    packed: &'a [PackedOperand],
    wide: &'a [Operand],
}

impl<'a> Operands<'a> {
    #[inline(always)]
    pub(crate) fn new(packed: &'a [PackedOperand], wide: &'a [Operand]) -> Self {
        Operands { packed, wide }
    }
    /// No operands.
    pub fn empty() -> Operands<'static> {
        Operands {
            packed: &[],
            wide: &[],
        }
    }
    /// The number of operands.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.packed.len()
    }
    /// No operands?
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }
    /// Operand `k` (panics past the end, as indexing a slice does).
    #[inline(always)]
    pub fn at(&self, k: usize) -> Operand {
        self.packed[k].unpack(self.wide)
    }
    /// Operand `k`, if there is one.
    #[inline(always)]
    pub fn get(&self, k: usize) -> Option<Operand> {
        self.packed.get(k).map(|p| p.unpack(self.wide))
    }
    /// The first operand, if any.
    #[inline(always)]
    pub fn first(&self) -> Option<Operand> {
        self.get(0)
    }
    /// The last operand, if any.
    #[inline(always)]
    pub fn last(&self) -> Option<Operand> {
        self.packed.last().map(|p| p.unpack(self.wide))
    }
    /// The operands from `k` on.
    #[inline(always)]
    pub fn skip(&self, k: usize) -> Operands<'a> {
        Operands {
            packed: &self.packed[k.min(self.packed.len())..],
            wide: self.wide,
        }
    }
    /// The operands in order, unpacked one by one.
    #[inline(always)]
    pub fn iter(&self) -> OperandIter<'a> {
        OperandIter {
            packed: self.packed.iter(),
            wide: self.wide,
        }
    }
    /// The operands unpacked into a vector.
    pub fn to_vec(&self) -> Vec<Operand> {
        self.iter().collect()
    }
    /// All the operands unpacked, on the stack when there are few (for code that wants a
    /// slice: the printer, the verifier).
    #[inline]
    pub fn unpacked(&self) -> SmallVec<[Operand; 8]> {
        let n = self.len();
        if n > 8 {
            return self.iter().collect();
        }
        let mut buf = [Operand::Int(0); 8];
        for (slot, p) in buf.iter_mut().zip(self.packed) {
            *slot = p.unpack(self.wide);
        }
        SmallVec::from_buf_and_len(buf, n)
    }
}

impl fmt::Debug for Operands<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq<[Operand]> for Operands<'_> {
    fn eq(&self, other: &[Operand]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == *b)
    }
}

impl<const N: usize> PartialEq<[Operand; N]> for Operands<'_> {
    fn eq(&self, other: &[Operand; N]) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<&[Operand; N]> for Operands<'_> {
    fn eq(&self, other: &&[Operand; N]) -> bool {
        *self == other[..]
    }
}

impl PartialEq<&[Operand]> for Operands<'_> {
    fn eq(&self, other: &&[Operand]) -> bool {
        *self == **other
    }
}

impl<'a> IntoIterator for Operands<'a> {
    type Item = Operand;
    type IntoIter = OperandIter<'a>;
    #[inline(always)]
    fn into_iter(self) -> OperandIter<'a> {
        self.iter()
    }
}

/// The iterator of `Operands`.
#[derive(Clone)]
pub struct OperandIter<'a> {
    packed: core::slice::Iter<'a, PackedOperand>,
    wide: &'a [Operand],
}

impl Iterator for OperandIter<'_> {
    type Item = Operand;
    #[inline(always)]
    fn next(&mut self) -> Option<Operand> {
        self.packed.next().map(|p| p.unpack(self.wide))
    }
    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.packed.size_hint()
    }
}

impl DoubleEndedIterator for OperandIter<'_> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Operand> {
        self.packed.next_back().map(|p| p.unpack(self.wide))
    }
}

impl ExactSizeIterator for OperandIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(op: Operand) -> bool {
        match PackedOperand::inline(op) {
            Some(p) => {
                assert_eq!(p.unpack(&[]), op, "{op:?} packed as {:#x}", p.bits());
                true
            }
            None => {
                let wide = [Operand::Int(0), op];
                assert_eq!(PackedOperand::wide(1).unpack(&wide), op);
                false
            }
        }
    }

    /// Every kind packs inline up to the edge of its fields and goes wide past it, and
    /// unpacks to itself either way.
    #[test]
    fn packing_at_the_edges() {
        let r = Reg::from_u32;
        for (op, inline) in [
            (Operand::Reg(r(0)), true),
            (Operand::Reg(r(u32::MAX - 1)), true),
            (Operand::Int(0), true),
            (Operand::Int(-1), true),
            (Operand::Int((1 << 59) - 1), true),
            (Operand::Int(-(1 << 59)), true),
            (Operand::Int(1 << 59), false),
            (Operand::Int(-(1 << 59) - 1), false),
            (Operand::Int(i64::MAX), false),
            (Operand::Int(i64::MIN), false),
            (Operand::F32(u32::MAX), true),
            (Operand::F64(1f64.to_bits()), true),
            (Operand::F64((-0f64).to_bits()), true),
            (Operand::F64(0.1f64.to_bits()), false),
            (Operand::F64(f64::NAN.to_bits() | 1), false),
            (Operand::Block(Block::from_u32(7)), true),
            (Operand::from(MemRef::base(r(5), -8)), true),
            (Operand::from(MemRef::base(r(0xFF_FFFE), i32::MIN)), true),
            (Operand::from(MemRef::base(r(0xFF_FFFF), 0)), false),
            (Operand::from(MemRef::base(r(3), i32::MAX)), true),
            (
                Operand::Mem {
                    base: None.into(),
                    index: None.into(),
                    scale: 8,
                    disp: 4096,
                },
                true,
            ),
            (
                Operand::Mem {
                    base: r(1).into(),
                    index: r(2).into(),
                    scale: 4,
                    disp: 0,
                },
                false,
            ),
            (
                Operand::Mem {
                    base: r(1).into(),
                    index: None.into(),
                    scale: 3,
                    disp: 0,
                },
                false,
            ),
            (Operand::Sym(Symbol::from_u32(u32::MAX - 1), 0), true),
            (Operand::Sym(Symbol::from_u32(9), (1 << 27) - 1), true),
            (Operand::Sym(Symbol::from_u32(9), -(1 << 27)), true),
            (Operand::Sym(Symbol::from_u32(9), 1 << 27), false),
            (Operand::Sym(Symbol::from_u32(9), i64::MIN), false),
            (
                Operand::Stack(StackObj::from_u32((1 << 28) - 1), i32::MIN),
                true,
            ),
            (Operand::Stack(StackObj::from_u32(1 << 28), 0), false),
            (Operand::Pred(Cond::FUge), true),
            (Operand::Pred(Cond::Eq), true),
            (Operand::Arg(u32::MAX), true),
        ] {
            assert_eq!(round_trip(op), inline, "{op:?}");
        }
    }

    /// Canonical: equal operands that fit pack to equal words, different ones to different
    /// words.
    #[test]
    fn packing_is_canonical() {
        let ops = [
            Operand::Reg(Reg::from_u32(1)),
            Operand::Int(1),
            Operand::F32(1),
            Operand::F64(16),
            Operand::Block(Block::from_u32(1)),
            Operand::from(MemRef::base(Reg::from_u32(1), 0)),
            Operand::Sym(Symbol::from_u32(1), 0),
            Operand::Stack(StackObj::from_u32(1), 0),
            Operand::Pred(Cond::Ne),
            Operand::Arg(1),
        ];
        for a in ops {
            for b in ops {
                let (pa, pb) = (PackedOperand::inline(a), PackedOperand::inline(b));
                assert_eq!(pa == pb, a == b, "{a:?} {b:?}");
            }
        }
    }
}
