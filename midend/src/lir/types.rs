//! Value types of LIR virtual registers.
//!
//! A [`Type`] is a lane type (an integer or float of some width) and a lane count (a power of
//! two, 1 for scalars). Integers live in the integer register class; floats and vectors in the
//! float class, as on x86-64 where both share the XMM file.

use core::fmt;

/// The class of a virtual register: an integer and a floating-point class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegClass {
    /// General-purpose integer registers (also pointers and i128 pairs).
    Int,
    /// Floating-point and vector registers.
    Float,
}

/// The type of a value: lane kind in the low 4 bits, log2 of the lane count above.
/// `Type::VOID` (0) is the type of instructions that produce nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Type(u16);

const LANE_NAMES: [&str; 10] = [
    "void", "i8", "i16", "i32", "i64", "i128", "f16", "f32", "f64", "f128",
];
const LANE_BITS: [u32; 10] = [0, 8, 16, 32, 64, 128, 16, 32, 64, 128];

impl Type {
    /// No value: the type of instructions that produce nothing.
    pub const VOID: Type = Type(0);
    /// 8-bit integer.
    pub const I8: Type = Type(1);
    /// 16-bit integer.
    pub const I16: Type = Type(2);
    /// 32-bit integer.
    pub const I32: Type = Type(3);
    /// 64-bit integer.
    pub const I64: Type = Type(4);
    /// 128-bit integer.
    pub const I128: Type = Type(5);
    /// 16-bit (half-precision) float.
    pub const F16: Type = Type(6);
    /// 32-bit (single-precision) float.
    pub const F32: Type = Type(7);
    /// 64-bit (double-precision) float.
    pub const F64: Type = Type(8);
    /// 128-bit (quad-precision) float.
    pub const F128: Type = Type(9);

    /// The scalar lane type.
    pub const fn lane(self) -> Type {
        Type(self.0 & 0xf)
    }
    /// log2 of the number of lanes.
    pub const fn log2_lanes(self) -> u32 {
        (self.0 >> 4) as u32
    }
    /// Number of lanes (1 for scalars).
    pub const fn lanes(self) -> u32 {
        1 << self.log2_lanes()
    }
    /// A vector of `lanes` (a power of two, at least 2) of this scalar type.
    pub fn by(self, lanes: u32) -> Option<Type> {
        if !lanes.is_power_of_two() || self.lanes() != 1 || self.is_void() {
            return None;
        }
        let log2 = lanes.trailing_zeros() as u16;
        if log2 > 8 {
            return None;
        }
        Some(Type(self.0 | (log2 << 4)))
    }
    /// Is this `VOID`?
    pub const fn is_void(self) -> bool {
        self.0 == 0
    }
    /// More than one lane?
    pub const fn is_vector(self) -> bool {
        self.log2_lanes() > 0
    }
    /// An integer type, scalar or vector?
    pub const fn is_int(self) -> bool {
        let l = self.0 & 0xf;
        l >= 1 && l <= 5
    }
    /// A float type, scalar or vector?
    pub const fn is_float(self) -> bool {
        let l = self.0 & 0xf;
        l >= 6 && l <= 9
    }
    /// Scalar integer type (not a vector).
    pub const fn is_scalar_int(self) -> bool {
        self.is_int() && !self.is_vector()
    }
    /// Width of one lane in bits.
    pub fn lane_bits(self) -> u32 {
        LANE_BITS[(self.0 & 0xf) as usize]
    }
    /// Total width in bits.
    pub fn bits(self) -> u32 {
        self.lane_bits() * self.lanes()
    }
    /// Total width in bytes.
    pub fn bytes(self) -> u32 {
        self.bits() / 8
    }
    /// The register class holding values of this type.
    pub fn class(self) -> RegClass {
        if self.is_scalar_int() {
            RegClass::Int
        } else {
            RegClass::Float
        }
    }
    /// An integer type of `bits` width, if one exists.
    pub fn int(bits: u32) -> Option<Type> {
        Some(match bits {
            8 => Type::I8,
            16 => Type::I16,
            32 => Type::I32,
            64 => Type::I64,
            128 => Type::I128,
            _ => return None,
        })
    }
    /// The raw encoding (stable; used for hashing and ordering).
    pub const fn raw(self) -> u16 {
        self.0
    }

    /// Parse `i32`, `f64`, `i8x16`, `void`.
    pub fn parse(s: &str) -> Option<Type> {
        let (lane, lanes) = match s.split_once('x') {
            Some((l, n)) => (l, n.parse::<u32>().ok()?),
            None => (s, 1),
        };
        let idx = LANE_NAMES.iter().position(|n| *n == lane)? as u16;
        let t = Type(idx);
        if lanes == 1 {
            if s.contains('x') {
                return None;
            }
            Some(t)
        } else {
            t.by(lanes)
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(LANE_NAMES[(self.0 & 0xf) as usize])?;
        if self.is_vector() {
            write!(f, "x{}", self.lanes())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for s in [
            "i8", "i16", "i32", "i64", "i128", "f16", "f32", "f64", "f128", "i8x16", "f32x4",
            "i64x2",
        ] {
            assert_eq!(Type::parse(s).unwrap().to_string(), s);
        }
        assert!(Type::parse("i7").is_none());
        assert!(Type::parse("i32x3").is_none());
        assert_eq!(Type::parse("i32x4").unwrap().bits(), 128);
        assert_eq!(Type::I64.class(), RegClass::Int);
        assert_eq!(Type::F64.class(), RegClass::Float);
        assert_eq!(Type::parse("i32x4").unwrap().class(), RegClass::Float);
    }
}
