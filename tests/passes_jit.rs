//! What LVN must not optimise, checked by running the JIT-compiled code and comparing values
//! with the unoptimised pipeline and with Rust; and MergeFunctions end to end (alias and thunk).

mod common;
use common::jit::{Jit, JitBatch};
use cranelift_codegen::ir::Function;
use cranelift_module::Linkage;
use mergelift::MergeConfig;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

/// Host functions share global state: tests using them run one at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn parse_clif(src: &str) -> Vec<Function> {
    cranelift_reader::parse_functions(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"))
}

/// Compile `src` with `passes`, with the given host symbols.
fn compile(src: &str, passes: &str, symbols: &[(&str, *const u8)]) -> Jit {
    let mut p = JitBatch::new(MergeConfig::with_passes(
        &mergelift::parse_pass_list(passes).unwrap(),
    ));
    for f in parse_clif(src) {
        p.add_function(Linkage::Export, f);
    }
    for &(name, ptr) in symbols {
        p.register_symbol(name, ptr);
    }
    p.compile()
        .unwrap_or_else(|e| panic!("compile with {passes}: {e}"))
}

static COUNTER: AtomicI64 = AtomicI64::new(0);

extern "C" fn counter() -> i64 {
    COUNTER.fetch_add(1, Ordering::SeqCst) + 1
}

#[test]
fn two_identical_calls_both_happen() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = "function %twice() -> i64 system_v {
    sig0 = () -> i64 system_v
    fn0 = %counter sig0
block0:
    v0 = call fn0()
    v1 = call fn0()
    v2 = iadd v0, v1
    return v2
}
";
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[("counter", counter as *const u8)]);
        let f: extern "C" fn() -> i64 = unsafe { jit.get("twice").unwrap() };
        COUNTER.store(10, Ordering::SeqCst);
        // 11 + 12: both calls happen, in order.
        assert_eq!(f(), 23, "passes {passes}");
        assert_eq!(COUNTER.load(Ordering::SeqCst), 12, "passes {passes}");
    }
}

#[test]
fn store_through_aliasing_pointers() {
    // *p = a; *q = b; return *p — with p == q the reload must see b.
    let src = "function %alias(i64, i64, i64, i64) -> i64 system_v {
block0(v0: i64, v1: i64, v2: i64, v3: i64):
    store v2, v0
    store v3, v1
    v4 = load.i64 v0
    return v4
}
";
    type F = extern "C" fn(*mut i64, *mut i64, i64, i64) -> i64;
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[]);
        let f: F = unsafe { jit.get("alias").unwrap() };
        let mut buf = [0i64; 2];
        let p = buf.as_mut_ptr();
        assert_eq!(f(p, p, 5, 7), 7, "aliasing, passes {passes}");
        assert_eq!(buf[0], 7);
        let q = unsafe { p.add(1) };
        assert_eq!(f(p, q, 5, 7), 5, "disjoint, passes {passes}");
        assert_eq!(buf, [5, 7]);
    }
}

#[test]
fn store_load_same_address_offsets() {
    // The same with offsets: *(p+8) = a; *(q) = b; return *(p+8), q == p + 8.
    let src = "function %alias_off(i64, i64, i64, i64) -> i64 system_v {
block0(v0: i64, v1: i64, v2: i64, v3: i64):
    store v2, v0+8
    v5 = load.i64 v0+8
    store v3, v1
    v4 = load.i64 v0+8
    v101 = iconst.i64 1000
    v6 = imul v5, v101
    v7 = iadd v4, v6
    return v7
}
";
    type F = extern "C" fn(*mut i64, *mut i64, i64, i64) -> i64;
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[]);
        let f: F = unsafe { jit.get("alias_off").unwrap() };
        let mut buf = [0i64; 2];
        let p = buf.as_mut_ptr();
        let q = unsafe { p.add(1) };
        assert_eq!(f(p, q, 5, 7), 5 * 1000 + 7, "passes {passes}");
        assert_eq!(f(p, p, 5, 7), 5 * 1000 + 5, "passes {passes}");
    }
}

#[test]
fn wide_stack_store_narrow_loads() {
    let src = "function %split(i64) -> i64 system_v {
    ss0 = explicit_slot 8, align = 8
block0(v0: i64):
    v114 = stack_addr.i64 ss0
    store v0, v114
    v119 = stack_addr.i64 ss0
    v1 = load.i32 v119
    v120 = stack_addr.i64 ss0
    v2 = load.i32 v120+4
    v3 = uextend.i64 v1
    v4 = uextend.i64 v2
    v102 = iconst.i64 32
    v5 = ishl v4, v102
    v6 = bor v3, v5
    v121 = stack_addr.i64 ss0
    v7 = load.i64 v121
    v8 = isub v6, v7
    v103 = iconst.i64 3
    v9 = imul v4, v103
    v10 = iadd v8, v9
    v11 = iadd v10, v3
    return v11
}
";
    let x: i64 = 0x1122_3344_5566_7788;
    let lo = (x as u64 & 0xffff_ffff) as i64;
    let hi = (x as u64 >> 32) as i64;
    let want = hi * 3 + lo;
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[]);
        let f: extern "C" fn(i64) -> i64 = unsafe { jit.get("split").unwrap() };
        assert_eq!(f(x), want, "passes {passes}");
        assert_eq!(f(-1), 0xffff_ffff * 4, "passes {passes}");
    }
}

#[test]
fn overlapping_stack_stores() {
    // store.i32 at 0, store.i32 at 2 (overlapping), reload the i32 at 0.
    let src = "function %overlap(i32, i32) -> i32 system_v {
    ss0 = explicit_slot 8, align = 8
block0(v0: i32, v1: i32):
    v115 = stack_addr.i64 ss0
    store v0, v115
    v116 = stack_addr.i64 ss0
    store v1, v116+2
    v122 = stack_addr.i64 ss0
    v2 = load.i32 v122
    return v2
}
";
    let (a, b) = (0x1111_2222u32 as i32, 0x3333_4444u32 as i32);
    let want = ((b as u32 & 0xffff) << 16 | (a as u32 & 0xffff)) as i32;
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[]);
        let f: extern "C" fn(i32, i32) -> i32 = unsafe { jit.get("overlap").unwrap() };
        assert_eq!(f(a, b), want, "passes {passes}");
    }
}

extern "C" fn bump(p: *mut i64) {
    unsafe { *p += 100 };
}

#[test]
fn loads_separated_by_a_call_that_writes_memory() {
    let src = "function %reload(i64) -> i64 system_v {
    sig0 = (i64) system_v
    fn0 = %bump sig0
block0(v0: i64):
    v1 = load.i64 v0
    call fn0(v0)
    v2 = load.i64 v0
    v104 = iconst.i64 1000
    v3 = imul v1, v104
    v4 = iadd v3, v2
    return v4
}
";
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[("bump", bump as *const u8)]);
        let f: extern "C" fn(*mut i64) -> i64 = unsafe { jit.get("reload").unwrap() };
        let mut x = 7i64;
        assert_eq!(f(&mut x), 7 * 1000 + 107, "passes {passes}");
        assert_eq!(x, 107);
    }
}

#[test]
fn stack_slot_escapes_through_call() {
    // The address of a stack slot escapes into a host call that writes it.
    let src = "function %escape(i64) -> i64 system_v {
    ss0 = explicit_slot 8, align = 8
    sig0 = (i64) system_v
    fn0 = %bump sig0
block0(v0: i64):
    v117 = stack_addr.i64 ss0
    store v0, v117
    v1 = stack_addr.i64 ss0
    v123 = stack_addr.i64 ss0
    v2 = load.i64 v123
    call fn0(v1)
    v124 = stack_addr.i64 ss0
    v3 = load.i64 v124
    v4 = load.i64 v1
    v105 = iconst.i64 1000
    v5 = imul v2, v105
    v6 = iadd v5, v3
    v7 = iadd v6, v4
    return v7
}
";
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[("bump", bump as *const u8)]);
        let f: extern "C" fn(i64) -> i64 = unsafe { jit.get("escape").unwrap() };
        assert_eq!(f(5), 5 * 1000 + 105 + 105, "passes {passes}");
    }
}

#[test]
fn generic_store_into_stack_slot() {
    // A store through the escaped address of a stack slot, then a stack_load.
    let src = "function %through(i64, i64) -> i64 system_v {
    ss0 = explicit_slot 8, align = 8
block0(v0: i64, v1: i64):
    v118 = stack_addr.i64 ss0
    store v0, v118
    v2 = stack_addr.i64 ss0
    v3 = load.i64 v2
    store v1, v2
    v125 = stack_addr.i64 ss0
    v4 = load.i64 v125
    v5 = load.i64 v2
    v106 = iconst.i64 100
    v6 = imul v3, v106
    v107 = iconst.i64 10
    v7 = imul v4, v107
    v8 = iadd v6, v7
    v9 = iadd v8, v5
    return v9
}
";
    for passes in ["none", "lvn"] {
        let jit = compile(src, passes, &[]);
        let f: extern "C" fn(i64, i64) -> i64 = unsafe { jit.get("through").unwrap() };
        assert_eq!(f(1, 2), 100 + 20 + 2, "passes {passes}");
    }
}

const DUPS: &str = "function %f(i64) -> i64 system_v {
block0(v0: i64):
    v108 = iconst.i64 3
    v1 = imul v0, v108
    v109 = iconst.i64 1
    v2 = iadd v1, v109
    return v2
}

function %g(i64) -> i64 system_v {
block0(v0: i64):
    v110 = iconst.i64 3
    v1 = imul v0, v110
    v111 = iconst.i64 1
    v2 = iadd v1, v111
    return v2
}

function %h(i64) -> i64 system_v {
    sig0 = (i64) -> i64 system_v
    fn0 = %g sig0
block0(v0: i64):
    v1 = call fn0(v0)
    v112 = iconst.i64 5
    v2 = iadd v1, v112
    return v2
}
";

#[test]
fn merge_identical_exported_functions_alias() {
    let jit = compile(DUPS, "merge", &[]);
    assert_eq!(jit.stats().get(mergelift::Counter::Merged), 1);
    assert_eq!(jit.stats().get(mergelift::Counter::MergeAliased), 1);
    let f: extern "C" fn(i64) -> i64 = unsafe { jit.get("f").unwrap() };
    let g: extern "C" fn(i64) -> i64 = unsafe { jit.get("g").unwrap() };
    let h: extern "C" fn(i64) -> i64 = unsafe { jit.get("h").unwrap() };
    for x in [-3i64, 0, 1, 14] {
        assert_eq!(f(x), 3 * x + 1);
        assert_eq!(g(x), 3 * x + 1);
        assert_eq!(h(x), 3 * x + 6);
    }
    assert_eq!(jit.pointer("f"), jit.pointer("g"), "g is an alias of f");
    assert!(jit.pointer("h").is_some());
}

#[test]
fn merge_address_significant_gets_a_thunk() {
    let src = format!(
        "{DUPS}
function %addr_of_g() -> i64 system_v {{
    sig0 = (i64) -> i64 system_v
    fn0 = %g sig0
block0:
    v0 = func_addr.i64 fn0
    return v0
}}
"
    );
    let jit = compile(&src, "merge", &[]);
    assert_eq!(jit.stats().get(mergelift::Counter::Merged), 1);
    assert_eq!(jit.stats().get(mergelift::Counter::MergeThunked), 1);
    let f: extern "C" fn(i64) -> i64 = unsafe { jit.get("f").unwrap() };
    let g: extern "C" fn(i64) -> i64 = unsafe { jit.get("g").unwrap() };
    let h: extern "C" fn(i64) -> i64 = unsafe { jit.get("h").unwrap() };
    let addr: extern "C" fn() -> i64 = unsafe { jit.get("addr_of_g").unwrap() };
    assert_ne!(
        jit.pointer("f"),
        jit.pointer("g"),
        "g keeps its own address"
    );
    let ga = addr();
    assert_eq!(ga as usize, jit.pointer("g").unwrap() as usize);
    let g2: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(ga as usize) };
    for x in [-3i64, 0, 1, 14] {
        assert_eq!(f(x), 3 * x + 1);
        assert_eq!(g(x), 3 * x + 1);
        assert_eq!(g2(x), 3 * x + 1);
        assert_eq!(h(x), 3 * x + 6);
    }
}

/// `c` calls `a` (which calls `x1`, returning 1) and `d` calls `b` (which calls `x2`,
/// returning 2): `c` and `d` must not merge (the refinement once gave every non-candidate
/// callee class 0).
#[test]
fn merge_keeps_callers_of_distinct_callees_apart() {
    let src = "function %x1() -> i64 system_v {
block0:
    v0 = iconst.i64 1
    return v0
}

function %x2() -> i64 system_v {
block0:
    v0 = iconst.i64 2
    v113 = iconst.i64 0
    v1 = iadd v0, v113
    return v1
}

function %a() -> i64 system_v {
    sig0 = () -> i64 system_v
    fn0 = %x1 sig0
block0:
    v0 = call fn0()
    return v0
}

function %b() -> i64 system_v {
    sig0 = () -> i64 system_v
    fn0 = %x2 sig0
block0:
    v0 = call fn0()
    return v0
}

function %c() -> i64 system_v {
    sig0 = () -> i64 system_v
    fn0 = %a sig0
block0:
    v0 = call fn0()
    return v0
}

function %d() -> i64 system_v {
    sig0 = () -> i64 system_v
    fn0 = %b sig0
block0:
    v0 = call fn0()
    return v0
}
";
    let jit = compile(src, "merge,lvn", &[]);
    for (name, want) in [("a", 1), ("b", 2), ("c", 1), ("d", 2)] {
        let f: extern "C" fn() -> i64 = unsafe { jit.get(name).unwrap() };
        assert_eq!(f(), want, "{name}");
    }
}

/// One block of many stores and loads at distinct offsets of one stack slot, more than LVN
/// tracks by segment (it then treats the accesses as generic references): every load must
/// still see the last store to its bytes. Checked against a byte-level model in Rust, with
/// and without LVN.
#[test]
fn many_stack_offsets_in_one_block() {
    const SLOTS: u64 = 400;
    let mut src = format!(
        "function %many(i64) -> i64 system_v {{\n    ss0 = explicit_slot {}, align = 8\nblock0(v0: i64):\n    v1 = iconst.i64 0\n    v2 = iconst.i64 31\n",
        8 * SLOTS
    );
    let mut next = 3;
    let mut acc = 1; // the register holding the running sum
    let val = |n: &mut u32| {
        *n += 1;
        *n - 1
    };
    // The model: the slot's bytes, the running sum, for an argument `x`.
    let x: i64 = 0x0123_4567_89ab_cdef;
    let mut mem = vec![0u8; 8 * SLOTS as usize];
    let mut sum: i64 = 0;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    // Every slot written once first (so no load reads uninitialised stack), then a mix.
    for step in 0..(SLOTS as u32 + 1200) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let k = if step < SLOTS as u32 {
            step as u64
        } else {
            state % SLOTS
        };
        let kind = if step < SLOTS as u32 {
            0
        } else {
            (state >> 40) % 3
        };
        let addr = val(&mut next);
        match kind {
            0 => {
                // store.i64 (x + step) at 8k
                let (c, v) = (val(&mut next), val(&mut next));
                src += &format!(
                    "    v{addr} = stack_addr.i64 ss0+{}\n    v{c} = iconst.i64 {step}\n    v{v} = iadd v0, v{c}\n    store.i64 v{v}, v{addr}\n",
                    8 * k
                );
                let w = x.wrapping_add(step as i64);
                mem[8 * k as usize..8 * k as usize + 8].copy_from_slice(&w.to_le_bytes());
            }
            1 => {
                // store.i32 (step) at 8k + 4: overlaps the i64 at 8k
                let c = val(&mut next);
                src += &format!(
                    "    v{addr} = stack_addr.i64 ss0+{}\n    v{c} = iconst.i32 {step}\n    store.i32 v{c}, v{addr}\n",
                    8 * k + 4
                );
                mem[8 * k as usize + 4..8 * k as usize + 8]
                    .copy_from_slice(&(step as i32).to_le_bytes());
            }
            _ => {
                // sum = sum * 31 + load.i64 at 8k
                let (l, m, s) = (val(&mut next), val(&mut next), val(&mut next));
                src += &format!(
                    "    v{addr} = stack_addr.i64 ss0+{}\n    v{l} = load.i64 v{addr}\n    v{m} = imul v{acc}, v2\n    v{s} = iadd v{m}, v{l}\n",
                    8 * k
                );
                acc = s;
                let w =
                    i64::from_le_bytes(mem[8 * k as usize..8 * k as usize + 8].try_into().unwrap());
                sum = sum.wrapping_mul(31).wrapping_add(w);
            }
        }
    }
    src += &format!("    return v{acc}\n}}\n");
    for passes in ["none", "lvn"] {
        let jit = compile(&src, passes, &[]);
        let f: extern "C" fn(i64) -> i64 = unsafe { jit.get("many").unwrap() };
        assert_eq!(f(x), sum, "passes {passes}");
    }
}
