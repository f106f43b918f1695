//! A lift reserves the instruction, block and register tables at the size they end up with
//! when no edge is split and every value is defined (one instruction per CLIF instruction and
//! block parameter, one register per value), so the CLI's `shrink_to_fit` of such a
//! function allocates nothing: each reallocation there was a `malloc` call, and a copy, per
//! lifted function of a cold process. The allocations of this thread are counted by a
//! global allocator (this file is a test binary of its own, so no other test's run is
//! counted).

use jit_driver::lift_functions;
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
