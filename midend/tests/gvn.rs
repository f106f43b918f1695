//! GVN: values from dominating blocks are reused; siblings never share; loads cross blocks
//! only when nothing in the function writes memory (or they are readonly).

use midend::lir::{module_to_string, parse_module};
use midend::passes::gvn::gvn_function;
use midend::verifier::verify_module;

fn run(text: &str) -> (usize, String) {
    let mut m = parse_module(text).expect("parse");
    verify_module(&m, true).expect("valid input");
    let mut removed = 0;
    for (_, f) in m.functions.iter_mut() {
        removed += gvn_function(f);
    }
    verify_module(&m, true).expect("valid output");
    (removed, module_to_string(&m))
}

#[test]
fn reuses_value_from_dominating_block() {
    let (n, out) = run("function @f(i64, i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.i64 arg1
    %vr2 = mul.i64 %vr0, %vr1
    brif.i64 ne %vr0, bb1, bb2
bb1:
    %vr3 = mul.i64 %vr1, %vr0
    ret %vr3
bb2:
    ret %vr2
}
");
    assert_eq!(n, 1, "{out}");
    assert!(out.contains("bb1:\n    ret %vr2"), "{out}");
}

#[test]
fn cheap_operations_stay_block_local() {
    let (n, out) = run("function @f(i64, i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.i64 arg1
    %vr2 = add.i64 %vr0, %vr1
    brif.i64 ne %vr0, bb1, bb2
bb1:
    %vr3 = add.i64 %vr1, %vr0
    %vr4 = add.i64 %vr0, %vr1
    %vr5 = add.i64 %vr3, %vr4
    ret %vr5
bb2:
    ret %vr2
}
");
    // Recomputed in bb1 rather than kept live from bb0, but numbered within bb1.
    assert_eq!(n, 1, "{out}");
    assert!(out.contains("%vr5 = add.i64 %vr3, %vr3"), "{out}");
}

#[test]
fn siblings_do_not_share() {
    let (n, out) = run("function @f(i64, i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.i64 arg1
    brif.i64 ne %vr0, bb1, bb2
bb1:
    %vr2 = mul.i64 %vr0, %vr1
    ret %vr2
bb2:
    %vr3 = mul.i64 %vr0, %vr1
    ret %vr3
}
");
    assert_eq!(n, 0, "{out}");
}

#[test]
fn loads_do_not_cross_blocks_when_memory_is_written() {
    let (n, out) = run("function @f(i64, i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.i64 arg1
    %vr2 = load.i64 [%vr0 + 8]
    brif.i64 ne %vr1, bb1, bb2
bb1:
    store.i64 [%vr1], %vr1
    jump bb2
bb2:
    %vr3 = load.i64 [%vr0 + 8]
    ret %vr3
}
");
    assert_eq!(n, 0, "{out}");
}

#[test]
fn loads_cross_blocks_in_store_free_functions_and_when_readonly() {
    let (n, out) = run("function @f(i64, i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.i64 arg1
    %vr2 = load.i64 [%vr0 + 8]
    brif.i64 ne %vr1, bb1, bb2
bb1:
    %vr3 = load.i64 [%vr0 + 8]
    ret %vr3
bb2:
    ret %vr2
}
");
    assert_eq!(n, 1, "{out}");
    let (n, out) = run("function @g(i64, i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.i64 arg1
    %vr2 = load.i64 readonly [%vr0 + 8]
    store.i64 [%vr1], %vr1
    brif.i64 ne %vr1, bb1, bb2
bb1:
    %vr3 = load.i64 readonly [%vr0 + 8]
    ret %vr3
bb2:
    ret %vr2
}
");
    assert_eq!(n, 1, "{out}");
}

#[test]
fn calls_and_stores_are_never_numbered() {
    let (n, out) = run("declare function @h
function @f(i64) -> i64 system_v export {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = call @h(%vr0), sig0
    %vr2 = call @h(%vr0), sig0
    store.i64 [%vr0], %vr1
    store.i64 [%vr0], %vr1
    %vr3 = add.i64 %vr1, %vr2
    ret %vr3
}
");
    assert_eq!(n, 0, "{out}");
}

/// Regression: callers of two near-duplicates (same opcodes, one constant apart) must not
/// merge, whatever the numbering of classes during refinement.
#[test]
fn callers_of_near_duplicates_do_not_merge() {
    let text = "function @x1(i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = add.i64 %vr0, 1
    ret %vr1
}
function @x2(i64) -> i64 system_v export {
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = add.i64 %vr0, 2
    ret %vr1
}
function @a(i64) -> i64 system_v export {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = call @x1(%vr0), sig0
    ret %vr1
}
function @b(i64) -> i64 system_v export {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = call @x2(%vr0), sig0
    ret %vr1
}
";
    let mut m = parse_module(text).unwrap();
    let r = midend::passes::merge::merge_functions(&mut m, &mut midend::PassState::default());
    assert_eq!(r.merged, 0, "{}", module_to_string(&m));
}

/// Issue 13, finding 1: GVN keyed a symbol operand by a 64-bit hash of (symbol, offset) and
/// took equal hashes for equal operands. `@free + OFF` is chosen so that FxHash gives it the
/// hash of `@malloc + 0`; the two `symbol_value`s name different addresses and must both stay.
#[test]
fn colliding_symbol_operands_stay_distinct() {
    use core::hash::{Hash, Hasher};
    use midend::lir::Operand;
    let text = |off: i64| {
        let off = if off < 0 {
            format!("- {}", off.unsigned_abs())
        } else {
            format!("+ {off}")
        };
        format!(
            "function @f() -> i8 system_v export {{
bb0:
    %vr0 = symbol_value.i64 @malloc
    %vr1 = symbol_value.i64 @free {off}
    %vr2 = icmp.i64 eq %vr0, %vr1
    ret %vr2
}}
"
        )
    };
    let m = parse_module(&text(0)).expect("parse");
    let (malloc, free) = (
        m.lookup_symbol("malloc").unwrap(),
        m.lookup_symbol("free").unwrap(),
    );
    // FxHash adds each word and multiplies by K: (s + off) * K collides with (s' + 0) * K
    // when off = s' - s, one word earlier multiplied by K.
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let off = (malloc.as_u32() as i64 - free.as_u32() as i64).wrapping_mul(K as i64);
    let fx = |op: Operand| {
        let mut h = rustc_hash::FxHasher::default();
        op.hash(&mut h);
        h.finish()
    };
    assert_eq!(
        fx(Operand::Sym(malloc, 0)),
        fx(Operand::Sym(free, off)),
        "the offset should make the two operands' FxHashes collide"
    );
    let (n, out) = run(&text(off));
    assert_eq!(n, 0, "{out}");
    assert!(out.contains("%vr2 = icmp.i64 eq %vr0, %vr1"), "{out}");
}
