//! Cache hints for the passes' loops over many functions.
//!
//! A module of 100k functions fits in no cache, and a loop over its functions is otherwise
//! bound by the latency of the first touch of each function's tables. A pass asks for the
//! next functions' tables a few places ahead (`ahead`, `bodies_ahead`, `function`); freeing
//! removed bodies asks for the allocator's headers ahead (`drop_bodies`). Without these hints
//! `merge` on 100k generated functions takes about half again as long. They are hints: they
//! never fault and change no result; on targets other than x86-64 they do nothing. Nothing
//! outside the passes' loops calls them, and none is public.

use super::{FuncId, Function, Module, Symbol};
use crate::lir::thin::thin_vec_heap_start;

/// Ask the CPU to start loading the cache line at `p`.
#[inline(always)]
fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint and never faults, whatever the address.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Ask the CPU to start loading the first `max` bytes of a slice.
#[inline(always)]
fn slice<T>(s: &[T], max: usize) {
    let p = s.as_ptr() as *const u8;
    let bytes = core::mem::size_of_val(s).min(max);
    let mut o = 0;
    while o < bytes {
        line(p.wrapping_add(o));
        o += 64;
    }
}

/// Start loading a function's arrays: what the merge walks read.
#[inline]
pub(crate) fn function(f: &Function) {
    body(f);
    slice(&f.result_pool, 256);
    slice(f.regs.as_values_slice(), 512);
    slice(&f.sig.params, 64);
    slice(&f.sig.returns, 64);
    slice(f.sigs.as_values_slice(), 256);
}

/// `function` for a pass that reads only the body: instructions, operands, block lists and
/// memory flags (value numbering), not registers or signatures.
#[inline]
pub(crate) fn body(f: &Function) {
    slice(f.insts.as_values_slice(), 4096);
    slice(&f.operand_pool, 4096);
    slice(&f.inst_order, 1024);
    slice(f.blocks.as_values_slice(), 256);
    slice(&f.layout, 64);
    slice(f.memflags.as_values_slice(), 64);
}

/// Start loading the function's header (the `Function` itself, where the addresses of its
/// tables are), so that a later `function` of it does not wait for it.
#[inline(always)]
pub(crate) fn header(f: &Function) {
    slice(core::slice::from_ref(f), core::mem::size_of::<Function>());
}

/// The second step of `function`, a step later (when the signature table has arrived):
/// start loading the parameter lists of the call signatures.
#[inline]
pub(crate) fn signatures(f: &Function) {
    for s in f.sigs.values().take(8) {
        slice(&s.params, 64);
        slice(&s.returns, 64);
    }
}

/// Start loading the allocator's header of each of the function's tables (the word before
/// each allocation), ahead of `Function::drop_body`.
#[inline]
fn allocations(f: &Function) {
    #[inline(always)]
    fn before<T>(p: *const T, cap: usize) {
        if cap > 0 {
            line((p as *const u8).wrapping_sub(8));
        }
    }
    before(f.regs.as_values_slice().as_ptr(), f.regs.len());
    before(f.insts.as_values_slice().as_ptr(), f.insts.len());
    before(f.blocks.as_values_slice().as_ptr(), f.blocks.len());
    // (lists held as the identity have no capacity, so no allocation to prefetch)
    before(f.inst_order.as_ptr(), f.inst_order.capacity());
    before(f.layout.as_ptr(), f.layout.capacity());
    before(f.operand_pool.as_ptr(), f.operand_pool.capacity());
    let thin = [
        thin_vec_heap_start(&f.result_pool),
        f.sigs.heap_start(),
        f.memflags.heap_start(),
    ];
    for p in thin.into_iter().flatten() {
        before(p, 1);
    }
}

/// Start loading what `Module::defined(sym)` reads (a walk over many functions asks for the
/// symbols of a function's calls before it resolves them).
#[inline]
pub(crate) fn symbol(m: &Module, sym: Symbol) {
    if let Some(d) = m.symbols.get(sym) {
        slice(core::slice::from_ref(d), 1);
    }
}

/// The functions to prefetch while `order[k]` is processed: one and four places ahead. The
/// farther request starts the load early, the nearer one asks again for what has not
/// arrived.
#[inline]
fn next<'a>(m: &'a Module, order: &'a [FuncId], k: usize) -> impl Iterator<Item = &'a Function> {
    [1, 4]
        .into_iter()
        .filter_map(move |d| order.get(k + d))
        .map(|&n| &m.functions[n])
}

/// While `order[k]` is processed, start loading the arrays of the functions `next` and the
/// call signatures of `order[k + 1]`.
#[inline]
pub(crate) fn ahead(m: &Module, order: &[FuncId], k: usize) {
    for f in next(m, order, k) {
        function(f);
    }
    if let Some(&n) = order.get(k + 1) {
        signatures(&m.functions[n]);
    }
}

/// `ahead` for a pass that reads only function bodies (`body`).
#[inline]
pub(crate) fn bodies_ahead(m: &Module, order: &[FuncId], k: usize) {
    for f in next(m, order, k) {
        body(f);
    }
}

/// Free the bodies of `ids` (`Function::drop_body`). Freeing a body frees each of its
/// tables, and the allocator reads a header just before each: on a large module every one
/// of those is a cache miss, so they are asked for a few functions ahead.
pub(crate) fn drop_bodies(m: &mut Module, ids: &[FuncId]) {
    for (k, &f) in ids.iter().enumerate() {
        if let Some(&g) = ids.get(k + 8) {
            header(&m.functions[g]);
        }
        if let Some(&g) = ids.get(k + 3) {
            allocations(&m.functions[g]);
        }
        m.functions[f].drop_body();
    }
}
