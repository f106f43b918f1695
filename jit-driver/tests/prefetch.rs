//! The lifter's input prefetch (`prefetch_header`, `prefetch_arrays`, `prefetch_indirect`,
//! `prefetch_ahead`) is a hint: it never
//! panics on a function the lifter is handed, whatever its size or emptiness, and a batch
//! lifted with it gives the same LIR as its functions lifted one by one.

use cranelift_codegen::ir::{self, Function};
use jit_driver::{
    lift_function, lift_functions, prefetch_ahead, prefetch_arrays, prefetch_header,
    prefetch_indirect,
};
use midend::lir::{self, module_to_string};

/// A function larger than every cap of the prefetch: `blocks` blocks in a chain, each
/// defining `per_block` constants.
fn chain(name: &str, blocks: usize, per_block: usize) -> String {
    let mut s = format!("function %{name}(i64) -> i64 {{\nblock0(v0: i64):\n    jump block1(v0)\n");
    let mut v = 1;
    for b in 1..=blocks {
        s += &format!("block{b}(v{v}: i64):\n");
        let mut acc = v;
        v += 1;
        for k in 0..per_block {
            s += &format!(
                "    v{v} = iconst.i64 {k}\n    v{} = iadd v{acc}, v{v}\n",
                v + 1
            );
            acc = v + 1;
            v += 2;
        }
        if b == blocks {
            s += &format!("    return v{acc}\n");
        } else {
            s += &format!("    jump block{}(v{acc})\n", b + 1);
        }
    }
    s + "}\n"
}

/// A function calling `n` others by test-case names, each through a signature of its own
/// (more than `prefetch_indirect` reads).
fn caller(name: &str, n: usize) -> String {
    let mut s = format!("function %{name}(i64) -> i64 {{\n");
    for k in 0..n {
        s += &format!(
            "    sig{k} = (i64) -> i64\n    fn{k} = %callee_with_a_long_name_{k} sig{k}\n"
        );
    }
    s += "block0(v0: i64):\n";
    let mut acc = 0;
    for k in 0..n {
        s += &format!("    v{} = call fn{k}(v{acc})\n", k + 1);
        acc = k + 1;
    }
    s + &format!("    return v{acc}\n}}\n")
}

/// A function with `n` alias regions (more than `prefetch_arrays` and `prefetch_indirect`
/// read), each loaded from with memory flags.
fn regions(name: &str, n: usize) -> String {
    let mut s = format!("function %{name}(i64) -> i64 {{\n");
    for k in 0..n {
        s += &format!(
            "    region{k} = {} \"a region described at some length, {k}\"\n",
            100 + k
        );
    }
    s += "block0(v0: i64):\n    v1 = iconst.i64 0\n";
    for k in 0..n {
        s += &format!(
            "    v{} = load.i64 notrap aligned region{k} v0+{}\n    v{} = iadd v{}, v{}\n",
            2 * k + 2,
            8 * k,
            2 * k + 3,
            2 * k + 1,
            2 * k + 2
        );
    }
    s + &format!("    return v{}\n}}\n", 2 * n + 1)
}

fn parse(text: &str) -> Vec<Function> {
    cranelift_reader::parse_functions(text).unwrap()
}

#[test]
fn prefetch_takes_any_function() {
    let empty = Function::new();
    prefetch_header(&empty);
    prefetch_arrays(&empty);
    prefetch_indirect(&empty);
    let big = parse(&chain("big", 700, 3)); // 700 blocks, 4,900 instructions, 4,901 values
    prefetch_header(&big[0]);
    prefetch_arrays(&big[0]);
    prefetch_indirect(&big[0]);
    let calls = parse(&caller("calls", 12));
    prefetch_indirect(&calls[0]);
    let regs = parse(&regions("regions", 12));
    prefetch_arrays(&regs[0]);
    prefetch_indirect(&regs[0]);
    let funcs: Vec<&Function> = vec![&big[0], &empty, &calls[0], &regs[0], &big[0]];
    for k in 0..funcs.len() + 4 {
        prefetch_ahead(k, |j| funcs.get(j).copied());
    }
}

#[test]
fn a_batch_lifts_as_its_functions_do_one_by_one() {
    let text = [
        chain("a", 3, 2),
        chain("big", 600, 2),
        chain("c", 1, 0),
        chain("d", 40, 30),
        caller("calls", 12),
        regions("regions", 12),
        chain("e", 2, 1),
    ]
    .concat();
    let funcs = parse(&text);
    let batch = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    let mut one_by_one = lir::Module::new();
    for f in &funcs {
        lift_function(&mut one_by_one, f, lir::Linkage::Export).unwrap();
    }
    assert_eq!(module_to_string(&batch), module_to_string(&one_by_one));
}

/// A function with no body, two places after the one being lifted, is prefetched before the
/// lifter reaches it and refuses it: the batch fails with the lifter's error, not a panic.
#[test]
fn a_bodiless_function_ahead_is_an_error_when_reached() {
    let mut funcs = parse(&[chain("a", 2, 1), chain("b", 2, 1)].concat());
    let sig = funcs[0].signature.clone();
    funcs.push(Function::with_name_signature(
        ir::UserFuncName::testcase("hollow"),
        sig,
    ));
    let e = lift_functions(funcs.iter(), &mut Default::default()).unwrap_err();
    assert!(e.to_string().contains("no body"), "{e}");
}
