//! Verifier tests: one malformed function per invariant of `midend/src/verifier.rs`, each
//! checked for the function, block and instruction the error names and its message; and
//! well-formed functions that verify.

use midend::lir::*;
use midend::verifier::*;

/// Verifier errors of the module `src` (which must parse).
fn errors_of(src: &str, ssa: bool) -> Vec<VerifierError> {
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    match verify_module(&m, ssa) {
        Ok(()) => panic!("verified, but should not have:\n{src}"),
        Err(e) => e.0,
    }
}

/// Assert that verifying `src` reports exactly `(block, inst, message)` in function `f`, and
/// that the rendered error names them all.
#[track_caller]
fn assert_reports(src: &str, block: Option<&str>, inst: Option<&str>, message: &str) {
    let errs = errors_of(src, true);
    let found = errs.iter().any(|e| {
        e.function == "f"
            && e.block.map(|b| b.to_string()).as_deref() == block
            && e.inst.as_deref() == inst
            && e.message == message
    });
    assert!(
        found,
        "no error ({block:?}, {inst:?}, {message:?}) among:\n{}",
        VerifierErrors(errs.clone())
    );
    let mut rendered = "function f".to_string();
    if let Some(b) = block {
        rendered += &format!(", {b}");
    }
    if let Some(i) = inst {
        rendered += &format!(", `{i}`");
    }
    rendered += &format!(": {message}");
    assert!(
        VerifierErrors(errs.clone())
            .to_string()
            .lines()
            .any(|l| l == rendered),
        "`{rendered}` not in:\n{}",
        VerifierErrors(errs)
    );
}

/// A function `@f(i32) -> i32` with `body` as its blocks (plus optional preamble lines).
fn func(preamble: &str, body: &str) -> String {
    format!("function @f(i32) -> i32 system_v export {{\n{preamble}{body}}}\n")
}

const FIB: &str = "function @fib(i32) -> i32 system_v export {
    sig0 = (i32) -> i32 system_v
bb0:
    %vr0 = copy.i32 arg0
    %vr1 = icmp.i32 slt %vr0, 2
    brif.i8 ne %vr1, bb1, bb2
bb1:
    ret %vr0
bb2:
    %vr2 = sub.i32 %vr0, 1
    %vr3 = call @fib(%vr2), sig0
    %vr4 = sub.i32 %vr0, 2
    %vr5 = call @fib(%vr4), sig0
    %vr6 = add.i32 %vr3, %vr5
    ret %vr6
}
";

#[test]
fn recursive_fib_verifies() {
    let m = parse_module(FIB).unwrap();
    verify_module(&m, true).unwrap();
    verify_module(&m, false).unwrap();
    assert_eq!(
        module_to_string(&m),
        format!("declare function @fib\n\n{FIB}")
    );
}

/// The same fib, built with the builder, verifies and prints as the text does.
#[test]
fn built_fib_matches_parsed_fib() {
    let mut m = Module::new();
    let mut sig = Signature::new(CallConv::SystemV);
    sig.params.push(AbiParam::new(Type::I32));
    sig.returns.push(AbiParam::new(Type::I32));
    let mut b = Builder::new(&mut m, "fib", sig.clone(), Linkage::Export);
    let (entry, base, rec) = (b.create_block(), b.create_block(), b.create_block());
    b.switch_to_block(entry);
    let n = b.arg(0);
    let c = b.icmp(Cond::Slt, n, Operand::Int(2));
    b.brif(Cond::Ne, c, None, base, rec);
    b.switch_to_block(base);
    b.ret(&[n]);
    b.switch_to_block(rec);
    let n1 = b.binary(Opcode::Sub, n, Operand::Int(1));
    let f1 = b.call("fib", sig.clone(), &[n1])[0];
    let n2 = b.binary(Opcode::Sub, n, Operand::Int(2));
    let f2 = b.call("fib", sig, &[n2])[0];
    let sum = b.binary(Opcode::Add, Operand::Reg(f1), Operand::Reg(f2));
    b.ret(&[sum]);
    let id = b.finish().unwrap();
    verify_function(&m, &m.functions[id], true).unwrap();
    assert_eq!(
        module_to_string(&m),
        module_to_string(&parse_module(FIB).unwrap())
    );
}

#[test]
fn loop_with_phis_verifies() {
    let src = func(
        "",
        "bb0:
    %vr0 = copy.i32 arg0
    %vr1 = copy.i32 0
    jump bb1
bb1:
    %vr2 = phi.i32 [%vr1, bb0], [%vr4, bb2]
    %vr3 = phi.i32 [%vr0, bb0], [%vr5, bb2]
    brif.i32 eq %vr3, bb3, bb2
bb2:
    %vr4 = add.i32 %vr2, %vr3
    %vr5 = sub.i32 %vr3, 1
    jump bb1
bb3:
    ret %vr2
",
    );
    verify_module(&parse_module(&src).unwrap(), true).unwrap();
}

// ---------------------------------------------------------------------------------------------
// 1. Blocks.

#[test]
fn block_without_terminator() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = add.i32 %vr0, 1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 %vr0, 1"),
        "block does not end in a terminator",
    );
}

#[test]
fn terminator_in_the_middle_of_a_block() {
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\n    %vr1 = copy.i32 1\n    ret %vr1\nbb1:\n    ret %vr0\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("jump bb1"),
        "terminator in the middle of a block",
    );
}

#[test]
fn empty_block() {
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n");
    assert_reports(
        &src,
        Some("bb1"),
        None,
        "block is empty (it needs a terminator)",
    );
}

#[test]
fn function_without_blocks() {
    assert_reports(&func("", ""), None, None, "function has no blocks");
}

#[test]
fn block_twice_in_layout_and_target_outside_layout() {
    let mut m = parse_module(&func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    ret %vr0\n",
    ))
    .unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    f.layout.push(Block::from_u32(0));
    let e = verify_module(&m, true).unwrap_err().0;
    assert!(
        e.iter()
            .any(|e| e.message == "bb0 appears twice in the layout"),
        "{e:?}"
    );

    let f = &mut m.functions[FuncId::from_u32(0)];
    f.layout = vec![Block::from_u32(0)];
    let e = verify_module(&m, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "function f, bb0, `jump bb1`: bb1 is not a block of the function"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Operands and results.

#[test]
fn memory_operand_on_add() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = add.i32 [%vr0 + 8], 1\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 [%vr0 + 8], 1"),
        "first operand must be a register or constant, not a memory reference",
    );
    let src = func(
        "    stack_obj.0 = size 4, align 4\n",
        "bb0:\n    %vr1 = neg.i32 stack_obj.0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = neg.i32 stack_obj.0"),
        "operand must be a register or constant, not a stack object",
    );
}

#[test]
fn arg_outside_copy() {
    let src = func("", "bb0:\n    %vr1 = add.i32 arg0, 1\n    ret %vr1\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 arg0, 1"),
        "first operand must be a register or constant, not a function argument",
    );
}

#[test]
fn block_operand_in_add() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = add.i32 %vr0, bb0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 %vr0, bb0"),
        "second operand must be a register or constant, not a block",
    );
}

#[test]
fn memory_operand_required_by_load() {
    // Built directly: the parser only reads memory operands here.
    let mut m = parse_module(&func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = load.i32 [%vr0]\n    ret %vr1\n",
    ))
    .unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    let load = f.block_insts(Block::from_u32(0))[1];
    f.set_operand(load, 0, Operand::Reg(Reg::from_u32(0)));
    let e = verify_module(&m, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "function f, bb0, `%vr1 = load.i32 %vr0`: expected a memory operand, not a register"
    );
}

#[test]
fn wrong_operand_count() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = add.i32 %vr0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 %vr0"),
        "expected 2 operand(s), found 1",
    );
    // Operands missing altogether: the verifier reports (and prints) it without panicking.
    let src = func("", "bb0:\n    %vr1 = icmp.i32\n    ret %vr1\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = icmp.i32"),
        "expected 3 operand(s), found 0",
    );
    let src = func("", "bb0:\n    %vr1 = stack_addr.i64\n    ret %vr1\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = stack_addr.i64"),
        "expected 1 operand(s), found 0",
    );
    let src = func("", "bb0:\n    brif.i8\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("brif.i8"),
        "brif takes a predicate, one or two values and two blocks",
    );
}

#[test]
fn wrong_result_count() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1, %vr2: i32 = add.i32 %vr0, 1\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1, %vr2: i32 = add.i32 %vr0, 1"),
        "expected 1 result(s), found 2",
    );
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = store.i32 [%vr0], %vr0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = store.i32 [%vr0], %vr0"),
        "expected 0 result(s), found 1",
    );
    let src = func(
        "    sig0 = (i32) -> i32, i64 system_v\n",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = call @g(%vr0), sig0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = call @g(%vr0), sig0"),
        "expected 2 result(s), found 1",
    );
}

#[test]
fn copy_of_missing_argument() {
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg1\n    ret %vr0\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr0 = copy.i32 arg1"),
        "arg1 does not exist (the function has 1 parameters)",
    );
}

#[test]
fn wrong_arg_count_to_call() {
    let src = func(
        "    sig0 = (i32) -> i32 system_v\n",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = call @g(%vr0, %vr0), sig0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = call @g(%vr0, %vr0), sig0"),
        "passes 2 argument(s), the signature has 1",
    );
    let src = func(
        "    sig0 = (i32) -> i32 system_v\n",
        "bb0:\n    %vr1 = call @g(), sig0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = call @g(), sig0"),
        "passes 0 argument(s), the signature has 1",
    );
}

#[test]
fn call_argument_type_and_callee_kind() {
    let src = func(
        "    sig0 = (i64) -> i32 system_v\n",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = call @g(%vr0), sig0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = call @g(%vr0), sig0"),
        "argument %vr0 has type i32, expected i64",
    );
    let src = format!(
        "declare data @d\n{}",
        func(
            "    sig0 = (i32) -> i32 system_v\n",
            "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = call @d(%vr0), sig0\n    ret %vr1\n"
        )
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = call @d(%vr0), sig0"),
        "callee @d is data, not a function",
    );
}

#[test]
fn return_count_mismatch() {
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg0\n    ret\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("ret"),
        "returns 0 value(s), the signature has 1",
    );
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0, %vr0\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("ret %vr0, %vr0"),
        "returns 2 value(s), the signature has 1",
    );
}

#[test]
fn tail_call_with_other_returns() {
    let src = func(
        "    sig0 = (i32) -> i64 tail\n",
        "bb0:\n    %vr0 = copy.i32 arg0\n    tail_call @g(%vr0), sig0\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("tail_call @g(%vr0), sig0"),
        "tail call's returns differ from the caller's",
    );
}

#[test]
fn try_call_handlers_must_match_table() {
    let mut m = parse_module(&func(
        "    sig0 = (i32) -> i32 system_v\n",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = try_call @g(%vr0), sig0, bb1, [tag1: bb2]\nbb1:\n    ret %vr1\nbb2:\n    ret %vr0\n",
    ))
    .unwrap();
    verify_module(&m, true).unwrap();
    // Drop the table entry: one handler block too many.
    m.functions[FuncId::from_u32(0)].exn_tables[ExnTable::from_u32(0)].clear();
    let e = verify_module(&m, true).unwrap_err().0;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].block, Some(Block::from_u32(0)));
    assert_eq!(
        e[0].message,
        "try_call's handlers do not match its exception table"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Types.

#[test]
fn operand_type_mismatch() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i64 1\n    %vr1 = add.i32 %vr0, 1\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 %vr0, 1"),
        "first operand %vr0 has type i64, expected i32",
    );
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.f32 f32:0x0\n    %vr1 = fadd.f32 %vr0, 1\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = fadd.f32 %vr0, 1"),
        "second operand constant does not fit type f32",
    );
    let src = func("", "bb0:\n    %vr0 = copy.i64 arg0\n    ret %vr0\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr0 = copy.i64 arg0"),
        "arg0 has type i32, copied as i64",
    );
}

#[test]
fn return_type_mismatch() {
    let src = func("", "bb0:\n    %vr0 = copy.i64 1\n    ret %vr0\n");
    assert_reports(
        &src,
        Some("bb0"),
        Some("ret %vr0"),
        "returned value %vr0 has type i64, expected i32",
    );
}

#[test]
fn compare_predicate_family() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.f64 f64:0x0\n    %vr1 = fcmp.f64 slt %vr0, %vr0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = fcmp.f64 slt %vr0, %vr0"),
        "predicate slt does not belong to fcmp",
    );
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = icmp.i32 flt %vr0, %vr0\n    ret %vr0\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = icmp.i32 flt %vr0, %vr0"),
        "predicate flt does not belong to icmp",
    );
}

#[test]
fn memory_reference_register_must_be_integer() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.f64 f64:0x0\n    %vr1 = load.i32 [%vr0 + 8]\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = load.i32 [%vr0 + 8]"),
        "memory reference register %vr0 must be an integer register",
    );
    // A vector lives in the float class too (index register).
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr2: i32x4 = opaque \"v\" pure\n    store.i32 [%vr0 + %vr2*4], %vr0\n    ret %vr0\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("store.i32 [%vr0 + %vr2*4], %vr0"),
        "memory reference register %vr2 must be an integer register",
    );
}

#[test]
fn bad_scale_built_directly() {
    let mut m = parse_module(&func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = load.i32 [%vr0 + %vr0*2]\n    ret %vr1\n",
    ))
    .unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    let load = f.block_insts(Block::from_u32(0))[1];
    let Some(mut mr) = f.operand(load, 0).mem() else {
        unreachable!()
    };
    mr.scale = 3;
    f.set_operand(load, 0, Operand::from(mr));
    let e = verify_module(&m, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "function f, bb0, `%vr1 = load.i32 [%vr0 + %vr0*3]`: scale 3 is not 1, 2, 4 or 8"
    );
}

#[test]
fn conditional_trap_code() {
    // Code 0 (`notrap`) is not a trap code: it would print as an unparsable `user0`.
    let mut m = parse_module(&func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    trapz.i32 %vr0, user1\n    ret %vr0\n",
    ))
    .unwrap();
    verify_module(&m, true).unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    let trap = f.block_insts(Block::from_u32(0))[1];
    f.insts[trap].aux = 0;
    let e = verify_module(&m, true).unwrap_err().0;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        (e[0].block, e[0].message.as_str()),
        (Some(Block::from_u32(0)), "bad trap code")
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Phis.

#[test]
fn phi_after_non_phi() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    %vr1 = copy.i32 2\n    %vr2 = phi.i32 [%vr0, bb0]\n    ret %vr2\n",
    );
    assert_reports(
        &src,
        Some("bb1"),
        Some("%vr2 = phi.i32 [%vr0, bb0]"),
        "phi after a non-phi instruction",
    );
}

#[test]
fn phi_pairs_must_match_predecessors() {
    // A predecessor missing.
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    brif.i32 ne %vr0, bb1, bb2\nbb1:\n    jump bb2\nbb2:\n    %vr1 = phi.i32 [%vr0, bb0]\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb2"),
        Some("%vr1 = phi.i32 [%vr0, bb0]"),
        "phi sources [bb0] do not match the predecessors [bb0, bb1]",
    );
    // A block that is not a predecessor.
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb2\nbb1:\n    ret %vr0\nbb2:\n    %vr1 = phi.i32 [%vr0, bb0], [%vr0, bb1]\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb2"),
        Some("%vr1 = phi.i32 [%vr0, bb0], [%vr0, bb1]"),
        "phi sources [bb0, bb1] do not match the predecessors [bb0]",
    );
}

#[test]
fn phi_names_a_predecessor_twice() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    %vr1 = phi.i32 [%vr0, bb0], [%vr0, bb0]\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb1"),
        Some("%vr1 = phi.i32 [%vr0, bb0], [%vr0, bb0]"),
        "phi names a predecessor twice",
    );
}

#[test]
fn phi_operands_are_register_block_pairs() {
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    %vr1 = phi.i32 [5, bb0]\n    ret %vr1\n");
    assert_reports(
        &src,
        Some("bb1"),
        Some("%vr1 = phi.i32 [5, bb0]"),
        "phi values must be registers",
    );
}

// ---------------------------------------------------------------------------------------------
// 5. SSA.

#[test]
fn register_defined_twice() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    %vr0 = copy.i32 1\n    %vr0 = copy.i32 2\n    ret %vr0\n",
    );
    // Reported once, at the second definition.
    assert_reports(
        &src,
        Some("bb1"),
        Some("%vr0 = copy.i32 1"),
        "%vr0 is defined 3 times (not SSA)",
    );
    assert_eq!(errors_of(&src, true).len(), 1);
    // Without SSA checking the function is fine.
    verify_module(&parse_module(&src).unwrap(), false).unwrap();
}

#[test]
fn use_not_dominated_by_definition() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    brif.i32 ne %vr0, bb1, bb2\nbb1:\n    %vr1 = copy.i32 1\n    jump bb3\nbb2:\n    jump bb3\nbb3:\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb3"),
        Some("ret %vr1"),
        "use of %vr1 is not dominated by its definition",
    );
    verify_module(&parse_module(&src).unwrap(), false).unwrap();
    // Used before defined in the same block.
    let src = func(
        "",
        "bb0:\n    %vr1 = add.i32 %vr2, 1\n    %vr2 = copy.i32 arg0\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 %vr2, 1"),
        "use of %vr2 is not dominated by its definition",
    );
    // A phi source must be available at the end of its predecessor.
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    brif.i32 ne %vr0, bb1, bb2\nbb1:\n    %vr1 = copy.i32 1\n    jump bb3\nbb2:\n    jump bb3\nbb3:\n    %vr2 = phi.i32 [%vr1, bb1], [%vr1, bb2]\n    ret %vr2\n",
    );
    assert_reports(
        &src,
        Some("bb3"),
        Some("%vr2 = phi.i32 [%vr1, bb1], [%vr1, bb2]"),
        "%vr1 from bb2 is not dominated by its definition",
    );
}

#[test]
fn unreachable_blocks_are_not_checked_for_dominance() {
    let src = func("", "bb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\nbb1:\n    %vr1 = add.i32 %vr2, 1\n    jump bb2\nbb2:\n    %vr2 = copy.i32 1\n    ret %vr1\n");
    verify_module(&parse_module(&src).unwrap(), true).unwrap();
}

#[test]
fn use_of_undefined_register() {
    // From text: the register never gets a type.
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = add.i32 %vr0, %vr7\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = add.i32 %vr0, %vr7"),
        "%vr7 is used but never defined",
    );
    // Built: the register has a type but no definition.
    let mut m = parse_module(&func("", "bb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\n")).unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    let r = f.new_reg(Type::I32);
    let ret = f.block_insts(Block::from_u32(0))[1];
    f.set_operand(ret, 0, Operand::Reg(r));
    assert_eq!(
        verify_module(&m, true).unwrap_err().to_string(),
        "function f, bb0, `ret %vr1`: %vr1 is used but never defined"
    );
    // A register number past the function's registers.
    let f = &mut m.functions[FuncId::from_u32(0)];
    f.set_operand(ret, 0, Operand::Reg(Reg::from_u32(99)));
    assert_eq!(
        verify_module(&m, false).unwrap_err().to_string(),
        "function f, bb0, `ret %vr99`: %vr99 does not exist"
    );
}

// ---------------------------------------------------------------------------------------------
// References to side tables (the parser refuses these, so they are built).

/// A module with `@f(i32) -> i32`: `%vr0 = copy.i32 arg0; <inst>; ret %vr0`.
fn with_inst(make: impl FnOnce(&mut Function) -> Inst) -> (Module, String) {
    let mut m = parse_module(&func("", "bb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\n")).unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    let i = make(f);
    f.insert_inst(Block::from_u32(0), 1, i);
    let e = verify_module(&m, true).unwrap_err().to_string();
    (m, e)
}

#[test]
fn undeclared_stack_object() {
    let (_, e) = with_inst(|f| {
        let i = f.make_inst(
            Opcode::Store,
            Type::I32,
            &[],
            &[
                Operand::Stack(StackObj::from_u32(3), 0),
                Operand::Reg(Reg::from_u32(0)),
            ],
        );
        f.insts[i].aux = f.intern_memflags(MemFlags::new()).as_u32();
        i
    });
    assert_eq!(
        e,
        "function f, bb0, `store.i32 [stack_obj.3], %vr0`: stack_obj.3 does not exist"
    );
    let (_, e) = with_inst(|f| {
        let r = f.new_reg(Type::I64);
        f.make_inst(
            Opcode::StackAddr,
            Type::I64,
            &[r],
            &[Operand::Stack(StackObj::from_u32(0), 8)],
        )
    });
    assert_eq!(
        e,
        "function f, bb0, `%vr1 = stack_addr.i64 stack_obj.0 + 8`: stack_addr takes a stack object"
    );
}

#[test]
fn undeclared_signature() {
    let (_, e) = with_inst(|f| {
        let r = f.new_reg(Type::I32);
        let i = f.make_inst(
            Opcode::Call,
            Type::VOID,
            &[r],
            &[Operand::Reg(Reg::from_u32(0))],
        );
        f.insts[i].aux = 5;
        i
    });
    assert_eq!(
        e,
        "function f, bb0, `%vr1: i32 = call %vr0(), sig5`: call signature does not exist"
    );
}

#[test]
fn undeclared_global_value() {
    let (_, e) = with_inst(|f| {
        let r = f.new_reg(Type::I64);
        let i = f.make_inst(Opcode::GlobalValue, Type::I64, &[r], &[]);
        f.insts[i].aux = 2;
        i
    });
    assert_eq!(
        e,
        "function f, bb0, `%vr1 = global_value.i64 gv2`: global value does not exist"
    );
}

/// Malformed instructions whose side-table references dangle are reported, not a panic in
/// the printer that renders them.
#[test]
fn dangling_references_do_not_panic() {
    let (_, e) = with_inst(|f| {
        let r = f.new_reg(Type::I32);
        let i = f.make_inst(
            Opcode::Load,
            Type::I32,
            &[r],
            &[Operand::from(MemRef::base(Reg::from_u32(0), 0))],
        );
        f.insts[i].aux = 9;
        i
    });
    assert_eq!(
        e,
        "function f, bb0, `%vr1 = load.i32 [%vr0]`: memory flags do not exist"
    );
    let (_, e) = with_inst(|f| {
        let i = f.make_inst(Opcode::Opaque, Type::VOID, &[], &[]);
        f.insts[i].aux = 4;
        i
    });
    assert_eq!(e, "function f, bb0, `opaque`: opaque record does not exist");
    let (_, e) = with_inst(|f| {
        f.make_inst(
            Opcode::Copy,
            Type::I32,
            &[Reg::from_u32(50)],
            &[Operand::Int(1)],
        )
    });
    assert!(
        e.starts_with("function f, bb0, `%vr50 = copy.i32 1`: result %vr50 does not exist"),
        "{e}"
    );
    let (_, e) = with_inst(|f| {
        let r = f.new_reg(Type::I64);
        f.make_inst(
            Opcode::FuncAddr,
            Type::I64,
            &[r],
            &[Operand::Sym(Symbol::from_u32(40), 0)],
        )
    });
    assert_eq!(
        e,
        "function f, bb0, `%vr1 = func_addr.i64 @sym40, sig0`: func_addr takes a symbol"
    );
    let (_, e) = with_inst(|f| f.make_inst(Opcode::Brif, Type::I8, &[], &[]));
    assert!(
        e.contains("`brif.i8`: brif takes a predicate, one or two values and two blocks"),
        "{e}"
    );
}

#[test]
fn errors_from_several_functions_are_all_reported() {
    let src = format!(
        "{}{}",
        func("", "bb0:\n    %vr0 = copy.i32 arg0\n    ret\n"),
        "function @g() system_v export {\nbb0:\n    %vr0 = copy.i32 1\n}\n"
    );
    let e = errors_of(&src, true);
    let rendered: Vec<String> = e.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        rendered,
        [
            "function f, bb0, `ret`: returns 0 value(s), the signature has 1",
            "function g, bb0, `%vr0 = copy.i32 1`: block does not end in a terminator",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Entry block and frame.

#[test]
fn jump_to_the_entry_block() {
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    jump bb0\n",
    );
    assert_reports(
        &src,
        Some("bb1"),
        Some("jump bb0"),
        "branches to the entry block bb0 (the entry block can have no predecessors)",
    );
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    brif.i32 ne %vr0, bb1, bb0\nbb1:\n    ret %vr0\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("brif.i32 ne %vr0, bb1, bb0"),
        "branches to the entry block bb0 (the entry block can have no predecessors)",
    );
    let src = func(
        "",
        "bb0:\n    %vr0 = copy.i32 arg0\n    br_table.i32 %vr0, bb1, [bb0]\nbb1:\n    ret %vr0\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("br_table.i32 %vr0, bb1, [bb0]"),
        "branches to the entry block bb0 (the entry block can have no predecessors)",
    );
}

#[test]
fn phi_in_the_entry_block() {
    let src = func(
        "",
        "bb0:\n    %vr1 = phi.i32 [%vr0, bb1]\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    ret %vr1\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = phi.i32 [%vr0, bb1]"),
        "phi in the entry block (the entry block has no predecessors)",
    );
    // Even one with no pairs, which matches the entry block's (empty) predecessors.
    let src = func(
        "",
        "bb0:\n    %vr1 = phi.i32\n    %vr0 = copy.i32 arg0\n    ret %vr0\n",
    );
    assert_reports(
        &src,
        Some("bb0"),
        Some("%vr1 = phi.i32"),
        "phi in the entry block (the entry block has no predecessors)",
    );
}

/// Verifier errors of `src` after setting stack object `k` to `size` and `align_shift`.
fn stack_errors(src: &str, objs: &[(u32, u8)]) -> Result<(), VerifierErrors> {
    let mut m = parse_module(src).unwrap();
    let f = &mut m.functions[FuncId::from_u32(0)];
    f.stack_objs.clear();
    for &(size, align_shift) in objs {
        f.stack_objs.push(StackObjData { size, align_shift });
    }
    verify_module(&m, true)
}

#[test]
fn stack_alignment_that_overflows() {
    let src = func(
        "    stack_obj.0 = size 8, align 8\n",
        "bb0:\n    %vr0 = load.i32 [stack_obj.0]\n    ret %vr0\n",
    );
    let message = |objs: &[(u32, u8)]| stack_errors(&src, objs).unwrap_err().to_string();
    // Cranelift debug-asserts align_shift < 32 and shifts a u32 by it.
    assert_eq!(
        message(&[(8, 32)]),
        "function f: stack_obj.0 has alignment 2^32, more than the maximum 65536"
    );
    assert_eq!(
        message(&[(8, 255)]),
        "function f: stack_obj.0 has alignment 2^255, more than the maximum 65536"
    );
    assert_eq!(
        message(&[(8, 17)]),
        "function f: stack_obj.0 has alignment 2^17, more than the maximum 65536"
    );
    // Size plus padding beyond 32 bits.
    assert_eq!(
        message(&[(u32::MAX, 3)]),
        "function f: stack_obj.0 of size 4294967295 with alignment 8 overflows 32 bits"
    );
    assert_eq!(
        message(&[(u32::MAX - 65534, 16)]),
        "function f: stack_obj.0 of size 4294901761 with alignment 65536 overflows 32 bits"
    );
    // Each fits, together they do not.
    assert_eq!(
        message(&[(1 << 31, 3), (1 << 31, 3)]),
        "function f: stack objects need up to 4294967310 bytes with alignment padding, more \
         than 32 bits hold"
    );
    // The largest that fit.
    stack_errors(&src, &[(u32::MAX - 65535, 16)]).unwrap();
    stack_errors(&src, &[(u32::MAX, 0)]).unwrap();
    verify_module(&parse_module(&src).unwrap(), true).unwrap();
}

// ---------------------------------------------------------------------------------------------
// 7. Opaque instructions, for lowering.

/// The errors of `verify_module_for_lowering` on the module `src`, rendered.
fn lowering_errors(src: &str) -> String {
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    midend::verifier::verify_module_for_lowering(&m, true)
        .unwrap_err()
        .to_string()
}

#[test]
fn opaques_are_checked_for_lowering_only() {
    // The mid-end does not look inside opaques: any name verifies...
    let src = func(
        "",
        "bb0:\n    %vr0: i32 = opaque \"x\" [0x1] pure\n    ret %vr0\n",
    );
    verify_module(&parse_module(&src).unwrap(), true).unwrap();
    // ...but lowering needs a Cranelift opcode it can rebuild.
    assert_eq!(
        lowering_errors(&src),
        "function f, bb0, `%vr0: i32 = opaque \"x\" [0x1] pure`: 'x' is not a Cranelift \
         opcode an opaque instruction can carry"
    );
}

#[test]
fn opaque_iconst_without_a_type() {
    // Lowered, this made a Cranelift instruction that panics when printed ("Polymorphic
    // instruction must produce a result").
    let src = func(
        "",
        "bb0:\n    %vr0: i32 = opaque \"iconst\" [0x5] pure\n    ret %vr0\n",
    );
    assert_eq!(
        lowering_errors(&src),
        "function f, bb0, `%vr0: i32 = opaque \"iconst\" [0x5] pure`: 'iconst' needs a \
         controlling type (iconst.T, T one of i8, i16, i32, i64)"
    );
    let src = func(
        "",
        "bb0:\n    %vr0: i32 = opaque.f32 \"iconst\" [0x5] pure\n    ret %vr0\n",
    );
    assert!(
        lowering_errors(&src).ends_with("'iconst' does not take type f32, only i8, i16, i32, i64"),
        "{}",
        lowering_errors(&src)
    );
}

#[test]
fn opaque_vconst_with_a_huge_length() {
    // Lowered, this allocated the length ("capacity overflow").
    let src = func(
        "",
        "bb0:\n    %vr1: i8x16 = opaque.i8x16 \"vconst\" [0xffffffffffffffff] pure\n    %vr0 = copy.i32 arg0\n    ret %vr0\n",
    );
    assert!(
        lowering_errors(&src)
            .ends_with("'vconst' constant has 18446744073709551615 bytes, its type needs 16"),
        "{}",
        lowering_errors(&src)
    );
    let src = src.replace("[0xffffffffffffffff]", "[0x10, 0x1]");
    assert!(
        lowering_errors(&src).ends_with("'vconst' packs 16 bytes in 1 word(s), expected 2"),
        "{}",
        lowering_errors(&src)
    );
    let src = src.replace("[0x10, 0x1]", "[0x10, 0x1, 0x2]");
    midend::verifier::verify_module_for_lowering(&parse_module(&src).unwrap(), true).unwrap();
}

#[test]
fn opaque_results_operands_and_immediates() {
    let cases = [
        (
            "%vr1: i32, %vr2: i32 = opaque.i32 \"iadd\" pure %vr0, %vr0",
            "'iadd' defines 2 result(s), Cranelift's instruction has 1",
        ),
        (
            "%vr1: i32 = opaque.i32 \"iadd\" pure %vr0",
            "'iadd' takes 2 operand(s), found 1",
        ),
        (
            "%vr1: i64 = opaque.i32 \"iadd\" pure %vr0, %vr0",
            "'iadd' result %vr1 has type i64, Cranelift's instruction gives i32",
        ),
        (
            "%vr1: i64 = opaque.i64 \"iadd\" pure %vr0, %vr0",
            "'iadd' operand %vr0 has type i32, expected i64",
        ),
        (
            "%vr1: i32 = opaque.i32 \"iconst\" [0x1, 0x2] pure",
            "'iconst' takes 1 immediate(s), found 2",
        ),
        (
            "%vr1: i32 = opaque.i32 \"iconst\" [0x100000000] pure",
            "'iconst' immediate 0x100000000 does not fit i32 (zero-extended)",
        ),
        (
            "%vr1: i8 = opaque.i32 \"icmp\" [0xa] pure %vr0, %vr0",
            "'icmp' immediate 0xa is not an integer predicate",
        ),
        (
            "%vr1: i32 = opaque.i32 \"load\" [0x0] pure mem() %vr0",
            "'load' has effects load, but the instruction declares pure",
        ),
        (
            "%vr1: i32 = opaque.i32 \"load\" [0x0] load %vr0",
            "'load' needs memory flags",
        ),
        (
            "opaque.i32 \"store\" [0x0] store mem(readonly) %vr0, %vr0",
            "'store' stores, so its memory cannot be readonly",
        ),
        (
            "%vr1: i32 = opaque.i32 \"iadd\" pure mem() %vr0, %vr0",
            "'iadd' takes no memory flags",
        ),
        (
            "%vr1: i32 = opaque.i32 \"uextend\" pure %vr0",
            "'uextend' operand %vr0 has type i32, which is not a narrower scalar of the same \
             kind as i32",
        ),
        (
            "%vr1: i8x16 = opaque \"shuffle\" [0x10, 0x20, 0x0] pure %vr0, %vr0",
            "'shuffle' operand %vr0 has type i32, expected i8x16",
        ),
    ];
    for (inst, message) in cases {
        let src = func(
            "",
            &format!("bb0:\n    %vr0 = copy.i32 arg0\n    {inst}\n    ret %vr0\n"),
        );
        let e = lowering_errors(&src);
        assert!(
            e.lines()
                .any(|l| l.ends_with(&format!("`{inst}`: {message}"))),
            "no `{message}` for `{inst}` in:\n{e}"
        );
    }
}

#[test]
fn opaque_table_lookups() {
    let iadd = midend::verifier::opaque_opcode("iadd").unwrap();
    assert_eq!(iadd.format, midend::verifier::OpaqueFormat::Binary);
    assert_eq!(iadd.args.len(), 2);
    assert!(midend::verifier::opaque_opcode("jump").is_none());
    assert!(midend::verifier::opaque_opcode("").is_none());
    let names: Vec<&str> = midend::verifier::opaque_opcodes()
        .iter()
        .map(|o| o.name)
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "the table must be sorted for binary search");
}

// ---------------------------------------------------------------------------------------------
// Source lines of verifier errors.

#[test]
fn verifier_errors_have_source_lines() {
    let src = "declare function @g

function @f(i32) -> i32 system_v export {
bb0:
    %vr0 = copy.i32 arg0
    jump bb1
bb1:
    %vr1 = add.i32 %vr0, 1
    ret
}

function @g() system_v export {
bb0:
    ret
}
";
    let (m, lines) = parse::parse_module_with_lines(src).unwrap();
    let e = verify_module(&m, true).unwrap_err().0;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].inst.as_deref(), Some("ret"));
    assert_eq!(lines.error_line(&e[0]), Some(9));
    assert_eq!(midend::verifier::verifier_error_line(src, &e[0]), Some(9));
    assert_eq!(lines.function_line("f"), Some(3));
    assert_eq!(lines.function_line("g"), Some(12));
    assert_eq!(lines.block_line("f", Block::from_u32(1)), Some(7));
    assert_eq!(lines.inst_line("g", Inst::from_u32(0)), Some(14));
    // An error about a block, and one about the function, fall back to their lines.
    let mut block_err = e[0].clone();
    block_err.inst_id = None;
    assert_eq!(lines.error_line(&block_err), Some(7));
    block_err.block = None;
    assert_eq!(lines.error_line(&block_err), Some(3));
    block_err.function = "nope".into();
    assert_eq!(lines.error_line(&block_err), None);
}

#[test]
fn global_values_with_bad_bases_and_stack_limits() {
    // The parser refuses these; a lifter or a pass could make them. A cycle of bases would
    // make lowering recurse forever, a missing global would be read out of bounds.
    let src = "function @f(i64 vmctx) -> i64 system_v export {\n    gv0 = vmctx\n    gv1 = load.i64 notrap aligned gv0 + 8\nbb0:\n    %vr0 = global_value.i64 gv1\n    ret %vr0\n}\n";
    let mut m = parse_module(src).unwrap_or_else(|e| panic!("{e}"));
    verify_module(&m, true).unwrap();
    let f = m.functions.values_mut().next().unwrap();
    let (g0, g1) = (GlobalRef::from_u32(0), GlobalRef::from_u32(1));
    if let GlobalData::Load { base, .. } = &mut f.globals[g1] {
        *base = g1;
    }
    let errs = verify_module(&m, true).expect_err("a cycle of bases verified");
    assert!(
        errs.to_string().contains("gv1 is based on itself"),
        "{errs}"
    );
    let f = m.functions.values_mut().next().unwrap();
    if let GlobalData::Load { base, .. } = &mut f.globals[g1] {
        *base = GlobalRef::from_u32(7);
    }
    let errs = verify_module(&m, true).expect_err("a missing base verified");
    assert!(
        errs.to_string()
            .contains("based on gv7, which the function does not define"),
        "{errs}"
    );
    let f = m.functions.values_mut().next().unwrap();
    if let GlobalData::Load { base, .. } = &mut f.globals[g1] {
        *base = g0;
    }
    f.stack_limit = Some(GlobalRef::from_u32(5));
    let errs = verify_module(&m, true).expect_err("a missing stack limit verified");
    assert!(
        errs.to_string().contains("the stack limit is gv5"),
        "{errs}"
    );
}
