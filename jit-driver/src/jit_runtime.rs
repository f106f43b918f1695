//! What a JIT needs beside the module: the host ISA at an opt level, and the runtime symbols
//! Cranelift's code may call.

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_jit::JITBuilder;
use cranelift_module::default_libcall_names;

/// A JIT builder for `isa` that resolves the runtime symbols Cranelift's code may call
/// (`runtime_symbols`) and then `symbols`.
pub fn jit_builder(isa: OwnedTargetIsa, symbols: &[(String, *const u8)]) -> JITBuilder {
    let mut b = JITBuilder::with_isa(isa, default_libcall_names());
    for (n, p) in runtime_symbols() {
        b.symbol(n, p);
    }
    for (n, p) in symbols {
        b.symbol(n.clone(), *p);
    }
    b
}

extern "C" fn ceilf(x: f32) -> f32 {
    x.ceil()
}
extern "C" fn ceil(x: f64) -> f64 {
    x.ceil()
}
extern "C" fn floorf(x: f32) -> f32 {
    x.floor()
}
extern "C" fn floor(x: f64) -> f64 {
    x.floor()
}
extern "C" fn truncf(x: f32) -> f32 {
    x.trunc()
}
extern "C" fn trunc(x: f64) -> f64 {
    x.trunc()
}
extern "C" fn nearbyintf(x: f32) -> f32 {
    x.round_ties_even()
}
extern "C" fn nearbyint(x: f64) -> f64 {
    x.round_ties_even()
}
extern "C" fn fmaf(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
extern "C" fn fma(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

#[cfg(target_arch = "x86_64")]
/// `pshufb` for hosts without SSSE3: byte i of the result is `a[b[i] & 15]`, or 0 when the
/// top bit of `b[i]` is set.
#[allow(improper_ctypes_definitions)] // SysV passes __m128i in an XMM register, as Cranelift expects
extern "C" fn x86_pshufb(
    a: std::arch::x86_64::__m128i,
    b: std::arch::x86_64::__m128i,
) -> std::arch::x86_64::__m128i {
    // SAFETY: __m128i and [u8; 16] have the same size and no invalid bit patterns.
    let (a, b): ([u8; 16], [u8; 16]) = unsafe {
        (
            std::mem::transmute::<std::arch::x86_64::__m128i, [u8; 16]>(a),
            std::mem::transmute::<std::arch::x86_64::__m128i, [u8; 16]>(b),
        )
    };
    let mut r = [0u8; 16];
    for i in 0..16 {
        r[i] = if b[i] & 0x80 != 0 {
            0
        } else {
            a[(b[i] & 15) as usize]
        };
    }
    // SAFETY: as above.
    unsafe { std::mem::transmute::<[u8; 16], std::arch::x86_64::__m128i>(r) }
}

/// The float libcalls Cranelift may emit (names as `default_libcall_names` spells them),
/// implemented in Rust so the JIT never depends on the C math library being linked.
pub(crate) fn runtime_symbols() -> Vec<(String, *const u8)> {
    vec![
        ("ceilf".into(), ceilf as *const u8),
        ("ceil".into(), ceil as *const u8),
        ("floorf".into(), floorf as *const u8),
        ("floor".into(), floor as *const u8),
        ("truncf".into(), truncf as *const u8),
        ("trunc".into(), trunc as *const u8),
        ("nearbyintf".into(), nearbyintf as *const u8),
        ("nearbyint".into(), nearbyint as *const u8),
        ("fmaf".into(), fmaf as *const u8),
        ("fma".into(), fma as *const u8),
        #[cfg(target_arch = "x86_64")]
        ("__cranelift_x86_pshufb".into(), x86_pshufb as *const u8),
    ]
}
