//! What a warm lift would gain if its tables did not come from `malloc` one by one: the
//! fastest of N lifts of a CLIF file, each into a region that a bump allocator hands out from
//! the start again (the module before dropped), against the same loop on the system
//! allocator. The lifter's ~9 heap blocks per function, taken from the free lists of the module
//! freed before, cost a warm loop up to a fifth of its time (BENCHMARKS.md, session 20): this
//! is the bound on what one allocation per function, or a module arena, could win back.
//!
//! `cargo run --release -p mergelift-tools --example bump_lift_probe -- malloc|bump RUNS FILE`
//!
//! The bump allocator serves only the timed lifts (one thread: this program's); everything
//! else, and every `free` outside its region, goes to the system allocator.
use jit_driver::lift_functions;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

struct Bump;
static BASE: AtomicUsize = AtomicUsize::new(0);
static TOP: AtomicUsize = AtomicUsize::new(0);
static ON: AtomicBool = AtomicBool::new(false);
const SIZE: usize = 8 << 30;

// SAFETY: blocks are carved from one region, aligned as asked and never handed out twice
// until the region is reset, which `main` does only after dropping the module it held.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !ON.load(Relaxed) {
            return unsafe { System.alloc(l) };
        }
        let t = TOP.load(Relaxed);
        let a = (t + l.align() - 1) & !(l.align() - 1);
        if a + l.size() > BASE.load(Relaxed) + SIZE {
            return std::ptr::null_mut(); // out of the region: an allocation failure
        }
        TOP.store(a + l.size(), Relaxed);
        a as *mut u8
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let b = BASE.load(Relaxed);
        if (p as usize) < b || (p as usize) >= b + SIZE {
            unsafe { System.dealloc(p, l) }
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let b = BASE.load(Relaxed);
        if !ON.load(Relaxed) && ((p as usize) < b || (p as usize) >= b + SIZE) {
            return unsafe { System.realloc(p, l, n) };
        }
        let q = unsafe { self.alloc(Layout::from_size_align_unchecked(n, l.align())) };
        unsafe { std::ptr::copy_nonoverlapping(p, q, l.size().min(n)) };
        unsafe { self.dealloc(p, l) };
        q
    }
}

#[global_allocator]
static A: Bump = Bump;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bump, reps, p) = match &args[..] {
        [m, n, p] if (m == "malloc" || m == "bump") && n.parse::<usize>().is_ok() => {
            (m == "bump", n.parse::<usize>().unwrap_or(20), p.clone())
        }
        _ => {
            eprintln!("usage: bump_lift_probe malloc|bump RUNS FILE");
            std::process::exit(2);
        }
    };
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let funcs = cranelift_reader::parse_functions(&text).unwrap_or_else(|e| panic!("{p}: {e}"));
    let insts: usize = funcs.iter().map(|f| f.dfg.num_insts()).sum();
    // (reserved, not touched: the pages a lift writes are the only ones the system backs)
    let region = unsafe { System.alloc(Layout::from_size_align(SIZE, 4096).unwrap()) } as usize;
    assert!(region != 0, "no room for the bump region");
    BASE.store(region, Relaxed);
    TOP.store(region, Relaxed);
    let mut best = f64::MAX;
    let mut total = 0.0;
    for _ in 0..reps {
        TOP.store(region, Relaxed);
        ON.store(bump, Relaxed);
        let t = Instant::now();
        let m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
        let e = t.elapsed().as_secs_f64();
        drop(std::hint::black_box(m));
        ON.store(false, Relaxed);
        best = best.min(e);
        total += e;
    }
    println!(
        "{} {p}: {insts} insts, best {:.2} ms ({:.1} M/s), mean {:.2} ms",
        if bump { "bump" } else { "malloc" },
        best * 1e3,
        insts as f64 / best / 1e6,
        total / reps as f64 * 1e3
    );
}
