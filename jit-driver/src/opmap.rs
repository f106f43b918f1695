//! The correspondence between Cranelift opcodes and the LIR opcodes that model them natively,
//! and between the two type systems. Everything not listed here lifts as an `opaque`
//! instruction.

use cranelift_codegen::ir::{self, condcodes::FloatCC, condcodes::IntCC, types, Opcode as C};
use midend::lir::{self, Cond, Opcode as L};

/// Cranelift opcode → LIR opcode, for the arithmetic, conversion, select and memory opcodes
/// that keep their shape (one result, register operands).
pub(crate) const NATIVE: &[(C, L)] = &[
    (C::Iadd, L::Add),
    (C::Isub, L::Sub),
    (C::Imul, L::Mul),
    (C::Sdiv, L::Sdiv),
    (C::Udiv, L::Udiv),
    (C::Srem, L::Srem),
    (C::Urem, L::Urem),
    (C::Umulhi, L::Umulhi),
    (C::Smulhi, L::Smulhi),
    (C::Smin, L::Smin),
    (C::Smax, L::Smax),
    (C::Umin, L::Umin),
    (C::Umax, L::Umax),
    (C::Band, L::And),
    (C::Bor, L::Or),
    (C::Bxor, L::Xor),
    (C::Ishl, L::Shl),
    (C::Ushr, L::Ushr),
    (C::Sshr, L::Sshr),
    (C::Rotl, L::Rotl),
    (C::Rotr, L::Rotr),
    (C::Ineg, L::Neg),
    (C::Bnot, L::Not),
    (C::Iabs, L::Abs),
    (C::Clz, L::Clz),
    (C::Ctz, L::Ctz),
    (C::Cls, L::Cls),
    (C::Popcnt, L::Popcnt),
    (C::Bswap, L::Bswap),
    (C::Bitrev, L::Bitrev),
    (C::Fadd, L::Fadd),
    (C::Fsub, L::Fsub),
    (C::Fmul, L::Fmul),
    (C::Fdiv, L::Fdiv),
    (C::Fmin, L::Fmin),
    (C::Fmax, L::Fmax),
    (C::Fcopysign, L::Fcopysign),
    (C::Fneg, L::Fneg),
    (C::Fabs, L::Fabs),
    (C::Sqrt, L::Sqrt),
    (C::Ceil, L::Ceil),
    (C::Floor, L::Floor),
    (C::Trunc, L::Trunc),
    (C::Nearest, L::Nearest),
    (C::Fma, L::Fma),
    (C::Uextend, L::Uextend),
    (C::Sextend, L::Sextend),
    (C::Ireduce, L::Ireduce),
    (C::Fpromote, L::Fpromote),
    (C::Fdemote, L::Fdemote),
    (C::FcvtToSint, L::FcvtToSint),
    (C::FcvtToUint, L::FcvtToUint),
    (C::FcvtToSintSat, L::FcvtToSintSat),
    (C::FcvtToUintSat, L::FcvtToUintSat),
    (C::FcvtFromSint, L::FcvtFromSint),
    (C::FcvtFromUint, L::FcvtFromUint),
    (C::Bmask, L::Bmask),
    (C::Select, L::Select),
    (C::SelectSpectreGuard, L::SelectSpectreGuard),
    (C::Load, L::Load),
    (C::Uload8, L::Uload8),
    (C::Sload8, L::Sload8),
    (C::Uload16, L::Uload16),
    (C::Sload16, L::Sload16),
    (C::Uload32, L::Uload32),
    (C::Sload32, L::Sload32),
    (C::Store, L::Store),
    (C::Istore8, L::Istore8),
    (C::Istore16, L::Istore16),
    (C::Istore32, L::Istore32),
];

/// Cranelift opcode → native LIR opcode, indexed by the Cranelift opcode (built at compile
/// time, so a look-up is one load).
static TO_LIR: [Option<L>; 1024] = {
    let mut t = [None; 1024];
    let mut k = 0;
    while k < NATIVE.len() {
        t[NATIVE[k].0 as usize] = Some(NATIVE[k].1);
        k += 1;
    }
    t
};

/// The LIR opcode modelling `c` natively, if any (`opmap().lir(c)`).
#[inline]
pub(crate) fn lir_opcode(c: C) -> Option<L> {
    TO_LIR.get(c as usize).copied().flatten()
}

/// Dense lookup tables built once.
pub struct OpMap {
    to_lir: Vec<Option<L>>,
    to_clif: Vec<Option<C>>,
}

impl OpMap {
    fn build() -> OpMap {
        let mut to_lir = vec![None; 1024];
        let mut to_clif = vec![None; 256];
        for &(c, l) in NATIVE {
            to_lir[c as usize] = Some(l);
            to_clif[l as usize] = Some(c);
        }
        OpMap { to_lir, to_clif }
    }
    /// The LIR opcode modelling `c` natively, if any.
    pub fn lir(&self, c: C) -> Option<L> {
        self.to_lir.get(c as usize).copied().flatten()
    }
    /// The Cranelift opcode of a native LIR opcode.
    pub fn clif(&self, l: L) -> Option<C> {
        self.to_clif[l as usize]
    }
}

/// The opcode tables, built on first use.
pub fn opmap() -> &'static OpMap {
    static MAP: std::sync::OnceLock<OpMap> = std::sync::OnceLock::new();
    MAP.get_or_init(OpMap::build)
}

/// Cranelift type → LIR type.
pub fn lir_type(t: ir::Type) -> Option<lir::Type> {
    if t == types::INVALID {
        return Some(lir::Type::VOID);
    }
    if t.is_dynamic_vector() {
        return None;
    }
    let lane = match t.lane_type() {
        types::I8 => lir::Type::I8,
        types::I16 => lir::Type::I16,
        types::I32 => lir::Type::I32,
        types::I64 => lir::Type::I64,
        types::I128 => lir::Type::I128,
        types::F16 => lir::Type::F16,
        types::F32 => lir::Type::F32,
        types::F64 => lir::Type::F64,
        types::F128 => lir::Type::F128,
        _ => return None,
    };
    if t.lane_count() == 1 {
        Some(lane)
    } else {
        lane.by(t.lane_count())
    }
}

/// LIR type → Cranelift type.
pub fn clif_type(t: lir::Type) -> ir::Type {
    let lane = match t.lane() {
        lir::Type::I8 => types::I8,
        lir::Type::I16 => types::I16,
        lir::Type::I32 => types::I32,
        lir::Type::I64 => types::I64,
        lir::Type::I128 => types::I128,
        lir::Type::F16 => types::F16,
        lir::Type::F32 => types::F32,
        lir::Type::F64 => types::F64,
        lir::Type::F128 => types::F128,
        _ => return types::INVALID,
    };
    if t.lanes() == 1 {
        lane
    } else {
        lane.by(t.lanes()).unwrap_or(types::INVALID)
    }
}

/// An integer condition as a LIR predicate.
pub fn int_cond(c: IntCC) -> Cond {
    match c {
        IntCC::Equal => Cond::Eq,
        IntCC::NotEqual => Cond::Ne,
        IntCC::SignedLessThan => Cond::Slt,
        IntCC::SignedGreaterThanOrEqual => Cond::Sge,
        IntCC::SignedGreaterThan => Cond::Sgt,
        IntCC::SignedLessThanOrEqual => Cond::Sle,
        IntCC::UnsignedLessThan => Cond::Ult,
        IntCC::UnsignedGreaterThanOrEqual => Cond::Uge,
        IntCC::UnsignedGreaterThan => Cond::Ugt,
        IntCC::UnsignedLessThanOrEqual => Cond::Ule,
    }
}

/// A float condition as a LIR predicate.
pub(crate) fn float_cond(c: FloatCC) -> Cond {
    match c {
        FloatCC::Ordered => Cond::FOrd,
        FloatCC::Unordered => Cond::FUno,
        FloatCC::Equal => Cond::FEq,
        FloatCC::NotEqual => Cond::FNe,
        FloatCC::OrderedNotEqual => Cond::FOne,
        FloatCC::UnorderedOrEqual => Cond::FUeq,
        FloatCC::LessThan => Cond::FLt,
        FloatCC::LessThanOrEqual => Cond::FLe,
        FloatCC::GreaterThan => Cond::FGt,
        FloatCC::GreaterThanOrEqual => Cond::FGe,
        FloatCC::UnorderedOrLessThan => Cond::FUlt,
        FloatCC::UnorderedOrLessThanOrEqual => Cond::FUle,
        FloatCC::UnorderedOrGreaterThan => Cond::FUgt,
        FloatCC::UnorderedOrGreaterThanOrEqual => Cond::FUge,
    }
}

/// LIR predicate → Cranelift condition (integer or float).
pub enum ClifCond {
    /// For `icmp`.
    Int(IntCC),
    /// For `fcmp`.
    Float(FloatCC),
}

/// A LIR predicate as a Cranelift condition.
pub(crate) fn clif_cond(c: Cond) -> ClifCond {
    use ClifCond::*;
    match c {
        Cond::Eq => Int(IntCC::Equal),
        Cond::Ne => Int(IntCC::NotEqual),
        Cond::Slt => Int(IntCC::SignedLessThan),
        Cond::Sge => Int(IntCC::SignedGreaterThanOrEqual),
        Cond::Sgt => Int(IntCC::SignedGreaterThan),
        Cond::Sle => Int(IntCC::SignedLessThanOrEqual),
        Cond::Ult => Int(IntCC::UnsignedLessThan),
        Cond::Uge => Int(IntCC::UnsignedGreaterThanOrEqual),
        Cond::Ugt => Int(IntCC::UnsignedGreaterThan),
        Cond::Ule => Int(IntCC::UnsignedLessThanOrEqual),
        Cond::FOrd => Float(FloatCC::Ordered),
        Cond::FUno => Float(FloatCC::Unordered),
        Cond::FEq => Float(FloatCC::Equal),
        Cond::FNe => Float(FloatCC::NotEqual),
        Cond::FOne => Float(FloatCC::OrderedNotEqual),
        Cond::FUeq => Float(FloatCC::UnorderedOrEqual),
        Cond::FLt => Float(FloatCC::LessThan),
        Cond::FLe => Float(FloatCC::LessThanOrEqual),
        Cond::FGt => Float(FloatCC::GreaterThan),
        Cond::FGe => Float(FloatCC::GreaterThanOrEqual),
        Cond::FUlt => Float(FloatCC::UnorderedOrLessThan),
        Cond::FUle => Float(FloatCC::UnorderedOrLessThanOrEqual),
        Cond::FUgt => Float(FloatCC::UnorderedOrGreaterThan),
        Cond::FUge => Float(FloatCC::UnorderedOrGreaterThanOrEqual),
    }
}

/// Cranelift call conv ↔ LIR call conv.
pub(crate) fn lir_call_conv(cc: cranelift_codegen::isa::CallConv) -> Option<lir::CallConv> {
    use cranelift_codegen::isa::CallConv as C;
    // By name (`CallConv::parse(&cc.to_string())`), without building the string.
    Some(match cc {
        C::Fast => lir::CallConv::Fast,
        C::Tail => lir::CallConv::Tail,
        C::SystemV => lir::CallConv::SystemV,
        C::WindowsFastcall => lir::CallConv::WindowsFastcall,
        C::AppleAarch64 => lir::CallConv::AppleAarch64,
        C::Probestack => lir::CallConv::Probestack,
        C::Winch => lir::CallConv::Winch,
        C::PreserveAll => lir::CallConv::PreserveAll,
    })
}

/// A LIR calling convention as Cranelift's.
pub(crate) fn clif_call_conv(cc: lir::CallConv) -> cranelift_codegen::isa::CallConv {
    cc.name()
        .parse()
        .unwrap_or(cranelift_codegen::isa::CallConv::SystemV)
}

/// Memory flags: Cranelift → LIR (regions keep their index).
pub(crate) fn lir_memflags(d: ir::MemFlagsData) -> lir::MemFlags {
    let mut f = lir::MemFlags::new();
    f.trap = d.trap_code().map_or(0, |c| c.as_raw().get());
    if d.aligned() {
        f.bits |= lir::MemFlags::ALIGNED;
    }
    if d.readonly() {
        f.bits |= lir::MemFlags::READONLY;
    }
    if d.can_move() {
        f.bits |= lir::MemFlags::CAN_MOVE;
    }
    match d.explicit_endianness() {
        Some(ir::Endianness::Little) => f.bits |= lir::MemFlags::LITTLE,
        Some(ir::Endianness::Big) => f.bits |= lir::MemFlags::BIG,
        None => {}
    }
    f.region = d.alias_region().map(|r| lir::Region::from_u32(r.as_u32()));
    f
}

/// Memory flags: LIR → Cranelift data.
pub(crate) fn clif_memflags(f: lir::MemFlags) -> ir::MemFlagsData {
    let mut d = ir::MemFlagsData::new();
    d = d.with_trap_code(std::num::NonZeroU8::new(f.trap).map(ir::TrapCode::from_raw));
    if f.bits & lir::MemFlags::ALIGNED != 0 {
        d = d.with_aligned();
    }
    if f.bits & lir::MemFlags::READONLY != 0 {
        d = d.with_readonly();
    }
    if f.bits & lir::MemFlags::CAN_MOVE != 0 {
        d = d.with_can_move();
    }
    if f.bits & lir::MemFlags::LITTLE != 0 {
        d = d.with_endianness(ir::Endianness::Little);
    }
    if f.bits & lir::MemFlags::BIG != 0 {
        d = d.with_endianness(ir::Endianness::Big);
    }
    d.with_alias_region(f.region.map(|r| ir::AliasRegion::from_u32(r.as_u32())))
}

/// The LIR symbol name of a Cranelift external name.
pub fn symbol_name(func: &ir::Function, name: &ir::ExternalName) -> String {
    let mut s = String::new();
    write_symbol_name(&mut s, func, name);
    s
}

/// `symbol_name` written into `out` (cleared first), so a caller can reuse one buffer.
pub fn write_symbol_name(out: &mut String, func: &ir::Function, name: &ir::ExternalName) {
    use std::fmt::Write;
    out.clear();
    match name {
        ir::ExternalName::User(r) => {
            let u = &func.params.user_named_funcs()[*r];
            write_user_name(out, u.namespace, u.index);
        }
        ir::ExternalName::TestCase(t) => match std::str::from_utf8(t.raw()) {
            // (the common case, without `from_utf8_lossy`'s chunked walk)
            Ok(s) => out.push_str(s),
            Err(_) => out.push_str(&String::from_utf8_lossy(t.raw())),
        },
        ir::ExternalName::LibCall(l) => {
            let _ = write!(out, "libcall.{l}");
        }
        ir::ExternalName::KnownSymbol(k) => {
            let _ = write!(out, "known.{k}");
        }
    }
}

/// `u{namespace}:{index}`, as `format!` writes it.
fn write_user_name(out: &mut String, namespace: u32, index: u32) {
    out.push_str(user_name(&mut [0; USER_NAME_MAX], namespace, index));
}

/// The longest `u{namespace}:{index}`: `u4294967295:4294967295`.
const USER_NAME_MAX: usize = 22;

/// `u{namespace}:{index}`, written at the end of `buf`.
fn user_name(buf: &mut [u8; USER_NAME_MAX], namespace: u32, index: u32) -> &str {
    fn digits(buf: &mut [u8], k: &mut usize, mut n: u32) {
        loop {
            *k -= 1;
            buf[*k] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
    }
    let mut k = buf.len();
    digits(buf, &mut k, index);
    k -= 1;
    buf[k] = b':';
    digits(buf, &mut k, namespace);
    k -= 1;
    buf[k] = b'u';
    // ASCII only.
    std::str::from_utf8(&buf[k..]).unwrap_or_default()
}

/// The name of a function as a LIR symbol name.
pub fn func_name(name: &ir::UserFuncName) -> String {
    func_lir_name(name).into_string()
}

/// `func_name` as a `lir::Name`: no allocation for a name of up to 24 bytes.
pub fn func_lir_name(name: &ir::UserFuncName) -> midend::lir::Name {
    use midend::lir::Name;
    match name {
        ir::UserFuncName::User(u) => {
            Name::new(user_name(&mut [0; USER_NAME_MAX], u.namespace, u.index))
        }
        ir::UserFuncName::Testcase(t) => match std::str::from_utf8(t.raw()) {
            Ok(s) => Name::new(s),
            Err(_) => Name::from(String::from_utf8_lossy(t.raw())),
        },
    }
}

/// Parse `uN:M` back into a user name.
pub(crate) fn parse_user_name(s: &str) -> Option<ir::UserExternalName> {
    let (ns, idx) = s.strip_prefix('u')?.split_once(':')?;
    Some(ir::UserExternalName {
        namespace: ns.parse().ok()?,
        index: idx.parse().ok()?,
    })
}

/// A Cranelift function name for a LIR name.
pub(crate) fn clif_func_name(s: &str) -> ir::UserFuncName {
    match parse_user_name(s) {
        Some(u) => ir::UserFuncName::User(u),
        None => ir::UserFuncName::testcase(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_spelled_as_format_spells_them() {
        let edges = [
            0,
            1,
            9,
            10,
            99,
            100,
            12345,
            999_999_999,
            1_000_000_000,
            u32::MAX,
        ];
        for ns in edges {
            for idx in edges {
                let want = format!("u{ns}:{idx}");
                let name = ir::UserFuncName::user(ns, idx);
                assert_eq!(func_name(&name), want);
                assert_eq!(func_lir_name(&name), want);
                let mut s = String::from("stale");
                s.clear();
                write_user_name(&mut s, ns, idx);
                assert_eq!(s, want);
                assert_eq!(
                    parse_user_name(&want),
                    Some(ir::UserExternalName::new(ns, idx))
                );
            }
        }
    }

    #[test]
    fn testcase_names_keep_their_bytes() {
        let name = ir::UserFuncName::testcase("a_test_case_name_of_more_than_24_bytes");
        assert_eq!(func_name(&name), "a_test_case_name_of_more_than_24_bytes");
        assert_eq!(func_lir_name(&ir::UserFuncName::testcase("fib")), "fib");
        // Not UTF-8: replaced as `String::from_utf8_lossy` does.
        let bad = ir::UserFuncName::testcase([b'f', 0xff, b'g']);
        assert_eq!(func_lir_name(&bad), "f\u{fffd}g");
    }
}
