//! A lift reserves the instruction, block and register tables at the size they end up with
//! when no edge is split and every value is defined (one instruction per CLIF instruction and
//! block parameter, one register per value), so the CLI's `shrink_to_fit` of such a
//! function allocates nothing: each reallocation there was a `malloc` call, and a copy, per
//! lifted function of a cold process. And a lift whose context has seen the function's
//! signatures allocates only the blocks the lifted function keeps: no scratch list of its
//! own, no copy of the input, no signature list or opaque name per function. The
//! allocations of this thread are counted by a global allocator (this file is a test binary
//! of its own, so no other test's run is counted).

use jit_driver::{lift_function_with, lift_functions, LiftContext};
use midend::lir;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // (`try_with`: no count while this thread's locals are being torn down)
    let _ = CALLS.try_with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn calls() -> usize {
    CALLS.with(|c| c.get())
}

/// Values all defined, no edge split: blocks with parameters, loads, stores, a call, a loop
/// (`lift_sizes.rs` lifts it too).
const DENSE: &str = include_str!("inputs/plain.clif");

#[test]
fn shrinking_a_lifted_function_allocates_nothing() {
    let funcs = cranelift_reader::parse_functions(DENSE).unwrap();
    let mut m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    assert_eq!(m.functions.len(), 2);
    for (f, src) in m.functions.values_mut().zip(&funcs) {
        // The premise: one register per value, one instruction per CLIF instruction and
        // block parameter.
        let params: usize = src
            .layout
            .blocks()
            .map(|b| src.dfg.block_params(b).len())
            .sum();
        assert_eq!(f.regs.len(), src.dfg.num_values(), "{}", f.name);
        assert_eq!(f.insts.len(), src.dfg.num_insts() + params, "{}", f.name);
        let before = calls();
        f.shrink_to_fit();
        assert_eq!(calls() - before, 0, "{}: shrink_to_fit allocated", f.name);
    }
    // The counter counts: a table that has room to give back is reallocated.
    let f = m.functions.values_mut().next().unwrap();
    f.regs.reserve(64);
    let before = calls();
    f.shrink_to_fit();
    assert_eq!(calls() - before, 1);
}

/// A `try_call` with a handler, a `br_table`, an opaque instruction (`uadd_overflow_trap`),
/// more memory flags than a function searches one by one, and a call: `NAME` is replaced to
/// make copies.
const WIDE: &str = "
function %NAME(i64, i32, i32) -> i32 tail {
    sig0 = (i64, i32) -> i32 tail
    fn0 = %callee sig0
    fn1 = %other(i64, i32, i32) -> i32 tail
block0(v0: i64, v1: i32, v2: i32):
    v3 = uadd_overflow_trap v1, v2, user1
    v4 = load.i32 notrap aligned v0
    v5 = load.i32 notrap aligned readonly v0+4
    v6 = load.i32 aligned v0+8
    v7 = load.i32 aligned readonly v0+12
    v8 = load.i32 notrap v0+16
    v9 = load.i32 notrap readonly v0+20
    v10 = load.i32 little v0+24
    v11 = load.i32 notrap little v0+28
    v12 = load.i32 aligned little v0+32
    v13 = load.i32 notrap can_move v0+36
    v14 = load.i32 readonly v0+40
    v15 = iadd v4, v5
    v16 = iadd v15, v6
    v17 = iadd v16, v7
    v18 = iadd v17, v8
    v19 = iadd v18, v9
    v20 = iadd v19, v10
    v21 = iadd v20, v11
    v22 = iadd v21, v12
    v23 = iadd v22, v13
    v24 = iadd v23, v14
    v25 = call fn1(v0, v24, v3)
    try_call fn0(v0, v25), sig0, block1(ret0), [ default: block2(exn0) ]
block1(v26: i32):
    br_table v26, block3, [block4, block3, block4]
block2(v27: i64):
    v28 = ireduce.i32 v27
    return v28
block3:
    return v26
block4:
    return v24
}
";

#[test]
fn a_warm_lift_allocates_only_what_the_function_keeps() {
    let text: String = ["first", "second", "third"]
        .iter()
        .map(|n| WIDE.replace("NAME", n))
        .collect();
    let funcs = cranelift_reader::parse_functions(&text).unwrap();
    let mut m = lir::Module::new();
    m.reserve_functions(funcs.len() + 8);
    let mut ctx = LiftContext::default();
    // The first lift sizes the context's tables and converts the signatures.
    lift_function_with(&mut m, &funcs[0], lir::Linkage::Export, &mut ctx).unwrap();
    for src in &funcs[1..] {
        let before = calls();
        let id = lift_function_with(&mut m, src, lir::Linkage::Export, &mut ctx).unwrap();
        let allocated = calls() - before;
        let f = &m.functions[id];
        let mut blocks = Vec::new();
        f.heap_blocks(|table, _| blocks.push(table));
        // The premise: the function has what the lift would have allocated for. (A table
        // that grew, the registers past a `try_call`'s results say, reallocated: counted.)
        assert!(f.memflags.len() > 8, "{}", f.name);
        assert_eq!(f.opaques.len(), 1);
        assert_eq!(f.exn_tables.len(), 1);
        assert!(f.sig.params.len() > 1 && f.sigs.values().all(|s| s.params.len() > 1));
        assert_eq!(
            allocated,
            blocks.len(),
            "{}: allocated beside {blocks:?}",
            f.name
        );
    }
    // Equal signatures share their lists: the functions' own, and their callees'.
    let [a, b] = [1, 2].map(|k| m.functions.values().nth(k).unwrap());
    assert_eq!(a.sig.params.as_ptr(), b.sig.params.as_ptr());
    assert_eq!(
        a.sig.params.as_ptr(),
        a.sigs.values().nth(1).unwrap().params.as_ptr()
    );
    assert!(!a.opaques.values().next().unwrap().name.is_heap_allocated());
}
