//! Parser tests: malformed inputs are rejected with the right position and message; the seed
//! examples parse and print back identically; random inputs never make the parser panic.

use midend::lir::*;
use midend::verifier::*;
use proptest::prelude::*;

const HEADER: &str = "function @f(i32) -> i32 system_v export {\n";

/// Parse `src`, expecting an error at `line:col` with message `msg`.
#[track_caller]
fn assert_parse_error(src: &str, line: u32, col: u32, msg: &str) {
    match parse_module(src) {
        Ok(m) => panic!("expected an error, parsed:\n{}", module_to_string(&m)),
        Err(e) => {
            assert_eq!(
                (e.line, e.col, e.msg.as_str()),
                (line, col, msg),
                "for input {src:?}"
            );
            assert_eq!(e.to_string(), format!("{line}:{col}: {msg}"));
        }
    }
}

/// A function body with the standard header.
fn func(body: &str) -> String {
    format!("{HEADER}{body}}}\n")
}

#[test]
fn truncated_function() {
    assert_parse_error(
        &format!("{HEADER}bb0:\n    ret %vr0\n"),
        4,
        1,
        "missing '}' at the end of function starting at 1:1",
    );
    // Cut in the middle of an instruction, of a signature, of a block label.
    assert_parse_error(
        &format!("{HEADER}bb0:\n    %vr0 = add.i32 %vr1,"),
        3,
        25,
        "expected an operand, found end of file",
    );
    assert_parse_error("function @f(i32", 1, 16, "expected ',', found end of file");
    assert_parse_error(
        &format!("{HEADER}bb0"),
        2,
        1,
        "expected ':' after block label bb0",
    );
    assert_parse_error(
        "function",
        1,
        9,
        "expected a symbol like @name, found end of file",
    );
}

#[test]
fn unknown_opcode() {
    assert_parse_error(
        &func("bb0:\n    %vr0 = frobnicate.i32 %vr1\n    ret %vr0\n"),
        3,
        5,
        "unknown opcode 'frobnicate'",
    );
    assert_parse_error(
        &func("bb0:\n    frobnicate\n"),
        3,
        5,
        "unknown opcode 'frobnicate'",
    );
}

#[test]
fn unknown_type() {
    // In an opcode suffix (reported at the instruction).
    assert_parse_error(
        &func("bb0:\n    %vr0 = add.i33 %vr1, 1\n    ret %vr0\n"),
        3,
        5,
        "unknown type 'i33'",
    );
    // In a signature, a result annotation and a vector of a bad lane count (at the type).
    assert_parse_error(
        "function @f(i64, i33) system_v export {\n}\n",
        1,
        18,
        "unknown type 'i33'",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0: q7 = opaque \"x\" pure\n    ret %vr0\n"),
        3,
        11,
        "unknown type 'q7'",
    );
    assert_parse_error(
        "function @f(i32x3) system_v export {\n}\n",
        1,
        13,
        "unknown type 'i32x3'",
    );
}

#[test]
fn bad_register_token() {
    assert_parse_error(
        &func("bb0:\n    %vr0 = add.i32 %vrx, 1\n    ret %vr0\n"),
        3,
        20,
        "expected a register like %vr3, found '%vrx'",
    );
    assert_parse_error(
        &func("bb0:\n    %v0 = add.i32 %vr1, 1\n    ret %v0\n"),
        3,
        5,
        "expected a register like %vr3, found '%v0'",
    );
    assert_parse_error(
        &func("bb0:\n    ret %\n"),
        3,
        9,
        "expected a register like %vr3, found '%'",
    );
    // Too large to be a register number.
    assert_parse_error(
        &func("bb0:\n    ret %vr4294967295\n"),
        3,
        9,
        "expected a register like %vr3, found '%vr4294967295'",
    );
}

#[test]
fn unterminated_string() {
    assert_parse_error(
        &func("bb0:\n    opaque \"abc\n    ret %vr0\n"),
        3,
        12,
        "unterminated string",
    );
    assert_parse_error("declare function @\"abc", 1, 18, "unterminated string");
    assert_parse_error(
        &func("bb0:\n    opaque \"a\\qb\" pure\n    ret %vr0\n"),
        3,
        15,
        "bad escape in string",
    );
}

#[test]
fn bad_scale() {
    assert_parse_error(
        &func("bb0:\n    %vr0 = load.i32 [%vr1 + %vr2*3 + 4]\n    ret %vr0\n"),
        3,
        34,
        "scale must be 1, 2, 4 or 8, not 3",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = load.i32 [%vr1*2 + %vr2*4]\n    ret %vr0\n"),
        3,
        31,
        "memory reference has two index registers",
    );
}

#[test]
fn undeclared_sig_stack_obj_global_region() {
    assert_parse_error(
        &func("bb0:\n    %vr0 = func_addr.i64 @g, sig2\n    ret %vr0\n"),
        3,
        30,
        "sig2 is not declared",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = call @g(%vr1), sig0\n    ret %vr0\n"),
        3,
        27,
        "sig0 is not declared",
    );
    assert_parse_error(
        &format!("{HEADER}    sig0 = (i32) -> i32 system_v\nbb0:\n    %vr0 = call @g(%vr1), sig1\n    ret %vr0\n}}\n"),
        4,
        27,
        "sig1 is not declared",
    );
    assert_parse_error(
        &func("bb0:\n    store.i32 [stack_obj.1 + 4], %vr1\n    ret %vr1\n"),
        3,
        16,
        "stack_obj.1 is not declared",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = global_value.i64 gv0\n    ret %vr0\n"),
        3,
        29,
        "gv0 is not declared",
    );
    assert_parse_error(
        "function @f() system_v export {\n    gv0 = vmctx\n    stack_limit = gv1\n}\n",
        3,
        19,
        "gv1 is not declared",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = load.i32 region0 [%vr1]\n    ret %vr0\n"),
        3,
        21,
        "region0 is not declared",
    );
    assert_parse_error(
        "function @f() system_v export {\n    gv0 = iadd_imm.i64 gv0, 8\n}\n",
        2,
        24,
        "gv0 refers to gv0, which is not declared before it",
    );
    assert_parse_error(
        "function @f() system_v export {\n    sig1 = () system_v\n}\n",
        2,
        5,
        "'sig1' declared out of order (expected index 0)",
    );
}

#[test]
fn block_used_but_never_defined() {
    assert_parse_error(
        &func("bb0:\n    jump bb3\n"),
        3,
        10,
        "bb3 is used but never defined",
    );
    assert_parse_error(
        &func("bb0:\n    %vr1 = phi.i32 [%vr0, bb7]\n    ret %vr1\n"),
        3,
        27,
        "bb7 is used but never defined",
    );
}

#[test]
fn duplicate_block_label() {
    assert_parse_error(
        &func("bb0:\n    jump bb0\nbb0:\n    ret %vr0\n"),
        4,
        1,
        "bb0 defined twice",
    );
}

#[test]
fn garbage_bytes() {
    assert_parse_error("\u{1}\u{2}garbage", 1, 1, "unexpected character '\u{1}'");
    assert_parse_error("#!/bin/sh", 1, 1, "unexpected character '#'");
    assert_parse_error(
        "function @f() system_v export {\nbb0:\n    ret ~\n}\n",
        3,
        9,
        "unexpected character '~'",
    );
    assert_parse_error(
        "hello",
        1,
        1,
        "expected 'function', 'declare' or 'alias', found 'hello'",
    );
    // Multi-byte characters are reported whole; columns count bytes.
    assert_parse_error("declare data @g\n  é", 2, 3, "unexpected character 'é'");
    assert_parse_error(
        &func("bb0:\n    %vr0 = copy.i32 99999999999999999999999\n    ret %vr0\n"),
        3,
        21,
        "bad number '99999999999999999999999'",
    );
}

#[test]
fn bad_names_and_attributes() {
    assert_parse_error(
        "function @f() bogus_cc export {\n}\n",
        1,
        15,
        "unknown calling convention 'bogus_cc'",
    );
    assert_parse_error(
        "function @f() system_v exported {\n}\n",
        1,
        24,
        "unknown linkage 'exported'",
    );
    assert_parse_error(
        &func("bb0:\n    trap nope\n"),
        3,
        10,
        "unknown trap code 'nope'",
    );
    assert_parse_error(
        &func("bb0:\n    trapz.i32 %vr0, user0\n    ret %vr0\n"),
        3,
        21,
        "unknown trap code 'user0'",
    );
    assert_parse_error(
        &func("bb0:\n    opaque \"x\" load+jump\n    ret %vr0\n"),
        3,
        21,
        "unknown effect 'jump'",
    );
    assert_parse_error(
        "function @f() system_v export {\n    stack_obj.0 = size 8, align 3\n}\n",
        2,
        33,
        "alignment must be a power of two",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = copy.i32 arg0\n    %vr0 = copy.i64 1\n    ret %vr0\n"),
        4,
        5,
        "%vr0 redefined with another type",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = opaque \"x\" pure\n    ret %vr0\n"),
        3,
        5,
        "result %vr0 needs a type annotation (%vr0: T)",
    );
    assert_parse_error(
        "function @f() system_v export {\n}\nfunction @f() system_v export {\n}\n",
        3,
        1,
        "function f is defined twice",
    );
    assert_parse_error(
        &func("    ret %vr0\n"),
        2,
        5,
        "expected a block label like bb0: before the first instruction",
    );
}

#[test]
fn empty_input_is_an_empty_module() {
    for src in ["", "   \n\t\n", "; just a comment\n", "\n\n; one\n; two"] {
        let m = parse_module(src).unwrap();
        assert_eq!(m.functions.len(), 0);
        assert_eq!(m.symbols.len(), 0);
        assert_eq!(module_to_string(&m), "");
    }
}

#[test]
fn comments_and_whitespace_are_ignored() {
    let src = "; a module\nfunction @f(i32) -> i32 system_v export { ; header\nbb0: ; entry\n    %vr0 = copy.i32 arg0 ; the argument\n    ret %vr0\n}\n";
    let m = parse_module(src).unwrap();
    assert_eq!(
        module_to_string(&m),
        "declare function @f\n\nfunction @f(i32) -> i32 system_v export {\nbb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\n}\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Seed examples.

/// Parse `src` (canonical text without declarations), check it prints back identically after
/// the `declare` lines, and return the module.
#[track_caller]
fn roundtrip(src: &str) -> Module {
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    let printed = module_to_string(&m);
    let body = &printed[printed.find("\nfunction").map_or(0, |i| i + 1)..];
    assert_eq!(body, src);
    m
}

/// The one instruction of `f` at `block`, position `pos`.
fn inst_at(f: &Function, block: usize, pos: usize) -> Inst {
    f.block_insts(f.layout[block])[pos]
}

#[test]
fn seed_add() {
    let src = "function @f(i32, i32) -> i32 system_v export {\nbb0:\n    %vr1 = copy.i32 arg0\n    %vr2 = copy.i32 arg1\n    %vr3 = add.i32 %vr1, %vr2\n    ret %vr3\n}\n";
    let m = roundtrip(src);
    let f = &m.functions[FuncId::from_u32(0)];
    let i = inst_at(f, 0, 2);
    assert_eq!(f.insts[i].opcode, Opcode::Add);
    assert_eq!(f.insts[i].ty, Type::I32);
    assert_eq!(
        f.operands(i),
        &[
            Operand::Reg(Reg::from_u32(1)),
            Operand::Reg(Reg::from_u32(2))
        ]
    );
    assert_eq!(f.results(i), &[Reg::from_u32(3)]);
    assert_eq!(f.reg_type(Reg::from_u32(3)), Type::I32);
    verify_module(&m, true).unwrap();
}

#[test]
fn seed_load() {
    let src = "function @f(i64, i64) -> i32 system_v export {\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = copy.i64 arg1\n    %vr4 = load.i32 [%vr0 + %vr1*8 + 16]\n    ret %vr4\n}\n";
    let m = roundtrip(src);
    let f = &m.functions[FuncId::from_u32(0)];
    let i = inst_at(f, 0, 2);
    assert_eq!(f.insts[i].opcode, Opcode::Load);
    let Some(mr) = f.operand(i, 0).mem() else {
        panic!("not a memory reference")
    };
    assert_eq!(mr.base.expand(), Some(Reg::from_u32(0)));
    assert_eq!(mr.index.expand(), Some(Reg::from_u32(1)));
    assert_eq!((mr.scale, mr.disp), (8, 16));
    // No flags written: may trap with heap_oob.
    assert_eq!(
        f.memflags[MemFlagsRef::from_u32(f.insts[i].aux)],
        MemFlags::new()
    );
    verify_module(&m, true).unwrap();
}

#[test]
fn seed_store() {
    let src = "function @f(i32) system_v export {\n    stack_obj.0 = size 8, align 8\n    stack_obj.1 = size 16, align 4\nbb0:\n    %vr1 = copy.i32 arg0\n    store.i32 [stack_obj.1 + 4], %vr1\n    ret\n}\n";
    let m = roundtrip(src);
    let f = &m.functions[FuncId::from_u32(0)];
    let i = inst_at(f, 0, 1);
    assert_eq!(f.insts[i].opcode, Opcode::Store);
    assert_eq!(
        f.operands(i),
        &[
            Operand::Stack(StackObj::from_u32(1), 4),
            Operand::Reg(Reg::from_u32(1))
        ]
    );
    assert_eq!(
        f.stack_objs[StackObj::from_u32(1)],
        StackObjData {
            size: 16,
            align_shift: 2
        }
    );
    verify_module(&m, true).unwrap();
}

#[test]
fn seed_call() {
    let src = "function @fib(i32) -> i32 system_v export {\n    sig0 = (i32) -> i32 system_v\nbb0:\n    %vr8 = copy.i32 arg0\n    %vr9 = call @fib(%vr8), sig0\n    ret %vr9\n}\n";
    let m = roundtrip(src);
    let f = &m.functions[FuncId::from_u32(0)];
    let i = inst_at(f, 0, 1);
    let fib = m.lookup_symbol("fib").unwrap();
    assert_eq!(f.insts[i].opcode, Opcode::Call);
    assert_eq!(
        f.operands(i),
        &[Operand::Sym(fib, 0), Operand::Reg(Reg::from_u32(8))]
    );
    assert_eq!(f.insts[i].aux, 0, "sig0");
    // The result's type comes from the signature.
    assert_eq!(f.reg_type(Reg::from_u32(9)), Type::I32);
    assert_eq!(m.defined(fib), Some(FuncId::from_u32(0)));
    verify_module(&m, true).unwrap();
}

#[test]
fn seed_phi() {
    let src = "function @f(i64) -> i64 system_v export {\nbb0:\n    %vr1 = copy.i64 arg0\n    jump bb1\nbb1:\n    %vr5 = phi.i64 [%vr1, bb0], [%vr4, bb2]\n    brif.i64 eq %vr5, bb3, bb2\nbb2:\n    %vr4 = sub.i64 %vr5, 1\n    jump bb1\nbb3:\n    ret %vr5\n}\n";
    let m = roundtrip(src);
    let f = &m.functions[FuncId::from_u32(0)];
    let i = inst_at(f, 1, 0);
    assert_eq!(f.insts[i].opcode, Opcode::Phi);
    assert_eq!(
        f.operands(i),
        &[
            Operand::Reg(Reg::from_u32(1)),
            Operand::Block(Block::from_u32(0)),
            Operand::Reg(Reg::from_u32(4)),
            Operand::Block(Block::from_u32(2)),
        ]
    );
    verify_module(&m, true).unwrap();
}

/// Every operand kind and instruction format, written by hand in canonical form.
#[test]
fn every_format_roundtrips() {
    let src = r#"declare function @"u0:12" colocated
declare data @g
declare function @f

function @f(i64 vmctx, f64, i32 sext) -> i64, f32 fast local address_significant {
    stack_obj.0 = size 16, align 8
    sig0 = (i64) -> i64, i32 system_v
    sig1 = (i64 uext, f64) -> i64, f32 fast
    sig2 = (i32) -> i8 sret tail
    region0 = 7 "heap \"main\""
    gv0 = vmctx
    gv1 = load.i64 notrap aligned readonly gv0 + 8
    gv2 = iadd_imm.i64 gv1, -16
    gv3 = symbol colocated tls @g - 4
    stack_limit = gv2
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = copy.f64 arg1
    %vr2 = copy.i32 arg2
    %vr3 = copy.i64 -9223372036854775808
    %vr4 = copy.f32 f32:0x80000000
    %vr5 = copy.f64 f64:0x7ff8000000000001
    %vr6 = icmp.i64 ule %vr0, %vr3
    %vr7: i32 = fcmp.f64 fueq %vr1, %vr5
    %vr8 = select.i64 %vr6, %vr0, -1
    %vr9 = fma.f64 %vr1, %vr1, f64:0x0
    %vr10 = load.i64 user9 aligned little can_move region0 [%vr0 - 2147483648]
    %vr11 = sload16.i32 notrap big [@g - 8]
    %vr12 = uload8.i64 [stack_obj.0 - 1]
    %vr13 = load.i32x4 [%vr3*4]
    istore8.i64 readonly [-16], %vr12
    %vr14 = stack_addr.i64 stack_obj.0 + 4
    %vr15 = func_addr.i64 @"u0:12", sig1
    %vr16 = symbol_value.i64 @g + 9223372036854775807
    %vr17 = global_value.i64 gv3
    %vr18, %vr19 = call @"u0:12"(%vr0), sig0
    %vr20, %vr21 = call %vr15(%vr0, %vr1), sig1
    trapz.i64 %vr18, int_divz
    trapnz.i8 %vr6, user250
    %vr22: i64, %vr23: f32x4 = opaque.i32 "iadd \"cout\"\n" [0x0, 0xffffffffffffffff] load+store+trap+side mem(notrap region0) %vr0, %vr13
    opaque "fence" side
    %vr24 = exn_handler_addr.i64 bb2, 0
    br_table.i32 %vr2, bb1, [bb1, bb2, bb3]
bb1:
    brif.i64 sgt %vr0, %vr3, bb2, bb3
bb2:
    brif.f64 funo %vr1, %vr5, bb3, bb4
bb3:
    try_call @f(%vr0, %vr1), sig1, bb4, [tag3: bb5, default: bb5, context %vr0]
bb4:
    %vr25 = phi.i64 [%vr0, bb2], [%vr0, bb3]
    ret %vr25, %vr4
bb5:
    trap stk_ovf
bb6:
    tail_call @f(%vr2), sig2
}
"#;
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(module_to_string(&m), src);
}

#[test]
fn void_return_and_operandless_opaque_before_a_definition() {
    // `ret` with no values followed by a block label, and an operand-less opaque followed by
    // an instruction with results: the next line is not an operand list.
    let src = "declare function @f\n\nfunction @f() system_v export {\nbb0:\n    opaque \"fence\" side\n    %vr0 = copy.i32 1\n    opaque \"x\" pure\n    %vr1: i32, %vr2: i64 = opaque \"y\" pure %vr0\n    brif.i32 ne %vr0, bb1, bb2\nbb1:\n    ret\nbb2:\n    ret\n}\n";
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(module_to_string(&m), src);
    let f = &m.functions[FuncId::from_u32(0)];
    assert!(f.operands(inst_at(f, 0, 0)).is_empty());
    assert!(f.operands(inst_at(f, 1, 0)).is_empty());
    verify_module(&m, true).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Robustness.

const TOKENS: &[&str] = &[
    "function",
    "declare",
    "data",
    "@f",
    "@\"u0:1\"",
    "(",
    ")",
    "i32",
    "i64",
    "f64",
    "i32x4",
    "->",
    "system_v",
    "export",
    "{",
    "}",
    "bb0",
    "bb1",
    ":",
    "%vr0",
    "%vr1",
    "=",
    "add.i32",
    "copy.i32",
    "arg0",
    "ret",
    "jump",
    "brif.i32",
    "ne",
    "icmp.i32",
    "slt",
    ",",
    "[",
    "]",
    "+",
    "-",
    "*",
    "8",
    "-16",
    "sig0",
    "stack_obj.0",
    "size",
    "align",
    "call",
    "phi.i32",
    "load.i32",
    "store.i32",
    "notrap",
    "region0",
    "\"s\"",
    "opaque",
    "pure",
    "mem",
    "try_call",
    "tag1",
    "default",
    "context",
    "br_table.i32",
    "trap",
    "user3",
    "gv0",
    "vmctx",
    "f32:0x1",
    "\n",
    " ",
    "\n    ",
    "\"",
    ";",
];

const VALID: &str = "declare data @g\ndeclare function @fib\n\nfunction @fib(i32) -> i32 system_v export {\n    stack_obj.0 = size 8, align 8\n    sig0 = (i32) -> i32 system_v\n    gv0 = symbol @g + 8\nbb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = icmp.i32 slt %vr0, 2\n    brif.i8 ne %vr1, bb1, bb2\nbb1:\n    ret %vr0\nbb2:\n    %vr2 = sub.i32 %vr0, 1\n    %vr3 = call @fib(%vr2), sig0\n    store.i32 notrap [stack_obj.0 + 4], %vr3\n    %vr4 = load.i32 [@g - 8]\n    ret %vr4\n}\n";

/// Whatever the parser accepts prints back in a form that parses to the same text.
fn check_accepted(src: &str) -> Result<(), TestCaseError> {
    let Ok(m) = parse_module(src) else {
        return Ok(());
    };
    let text = module_to_string(&m);
    let m2 = parse_module(&text)
        .map_err(|e| TestCaseError::fail(format!("{e} reparsing:\n{text}\nfrom:\n{src}")))?;
    prop_assert_eq!(module_to_string(&m2), text);
    // The verifier never panics either, whatever it decides.
    let _ = verify_module(&m2, true);
    Ok(())
}

/// An error position is inside the input (or just past its end).
fn check_position(src: &str) -> Result<(), TestCaseError> {
    if let Err(e) = parse_module(src) {
        let lines: Vec<&str> = src.split('\n').collect();
        prop_assert!(
            e.line >= 1 && (e.line as usize) <= lines.len(),
            "line {} of {}",
            e.line,
            lines.len()
        );
        prop_assert!(
            e.col >= 1 && (e.col as usize) <= lines[e.line as usize - 1].len() + 1,
            "col {} in {:?}",
            e.col,
            src
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let src = String::from_utf8_lossy(&bytes);
        check_position(&src)?;
        check_accepted(&src)?;
    }

    #[test]
    fn random_token_soup_never_panics(toks in prop::collection::vec(prop::sample::select(TOKENS), 0..60)) {
        let src = toks.join(" ");
        check_position(&src)?;
        check_accepted(&src)?;
    }

    #[test]
    fn edited_valid_text_never_panics(pos in 0..VALID.len(), len in 0usize..12,
                                      insert in prop::collection::vec(prop::sample::select(TOKENS), 0..3)) {
        // Replace a range of the valid module by a few tokens.
        let start = (0..=pos).rev().find(|&i| VALID.is_char_boundary(i)).unwrap();
        let end = (start + len).min(VALID.len());
        let src = format!("{}{}{}", &VALID[..start], insert.join(" "), &VALID[end..]);
        check_position(&src)?;
        check_accepted(&src)?;
    }

    #[test]
    fn every_prefix_of_valid_text_is_handled(cut in 0..VALID.len()) {
        let src = &VALID[..cut];
        check_position(src)?;
        check_accepted(src)?;
    }
}

#[test]
fn valid_text_is_valid() {
    let m = parse_module(VALID).unwrap();
    assert_eq!(module_to_string(&m), VALID);
    verify_module(&m, true).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Entity numbers against the input's size (issue 13: a 600-byte file naming %vr16777215 took
// 4.6 GB, as registers and blocks are allocated densely up to the number).

/// `body` padded with a comment to `len` bytes in all.
fn padded(text: &str, len: usize) -> String {
    let pad = len - text.len() - 2;
    format!("{text};{}\n", "x".repeat(pad))
}

#[test]
fn register_number_beyond_the_input_budget() {
    let src = padded(
        &func("bb0:\n    %vr16777215 = copy.i32 arg0\n    ret %vr16777215\n"),
        600,
    );
    assert_eq!(src.len(), 600);
    assert_parse_error(
        &src,
        3,
        5,
        "register number %vr16777215 is out of range (at most 4799 for an input of this size)",
    );
    // As an operand, and in a memory reference.
    assert_parse_error(
        &func("bb0:\n    %vr0 = copy.i32 arg0\n    ret %vr9999\n"),
        4,
        9,
        "register number %vr9999 is out of range (at most 4095 for an input of this size)",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = load.i32 [%vr7000 + 8]\n    ret %vr0\n"),
        3,
        22,
        "register number %vr7000 is out of range (at most 4095 for an input of this size)",
    );
}

#[test]
fn block_number_beyond_the_input_budget() {
    assert_parse_error(
        &func("bb0:\n    jump bb16777215\n"),
        3,
        10,
        "block number bb16777215 is out of range (at most 4095 for an input of this size)",
    );
    assert_parse_error(
        &func("bb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\nbb5000:\n    ret %vr0\n"),
        5,
        1,
        "block number bb5000 is out of range (at most 4095 for an input of this size)",
    );
}

#[test]
fn entity_budget_is_shared_by_the_functions() {
    // Each function alone fits; together they exceed the budget.
    let f = |name: &str| {
        format!(
            "function @{name}() -> i32 system_v export {{\nbb0:\n    %vr3000 = copy.i32 1\n    ret %vr3000\n}}\n"
        )
    };
    let src = format!("{}{}", f("a"), f("b"));
    assert!(parse::entity_budget(src.len()) == 4096);
    assert_parse_error(
        &src,
        8,
        5,
        "register number %vr3000 is out of range (at most 1094 for an input of this size)",
    );
    // Once used up, no number is left.
    let g = |name: &str| {
        format!(
            "function @{name}() -> i32 system_v export {{\nbb0:\n    %vr4095 = copy.i32 1\n    ret %vr4095\n}}\n"
        )
    };
    let src = format!("{}{}", g("a"), g("b"));
    assert_parse_error(
        &src,
        8,
        5,
        "register number %vr4095 is out of range (the input's budget is used up by the \
         functions before)",
    );
}

#[test]
fn entity_budget_grows_with_the_input() {
    assert_eq!(parse::entity_budget(0), 4096);
    assert_eq!(parse::entity_budget(512), 4096);
    assert_eq!(parse::entity_budget(10_000), 80_000);
    assert_eq!(parse::entity_budget(usize::MAX), usize::MAX);
    // A sparse but honest numbering (a pass removed most instructions) parses.
    let text = func("bb0:\n    %vr0 = copy.i32 arg0\n    %vr79990 = add.i32 %vr0, 1\n    jump bb79990\nbb79990:\n    ret %vr79990\n");
    let src = padded(&text, 10_000);
    let m = parse_module(&src).unwrap();
    verify_module(&m, true).unwrap();
    let src = padded(&text.replace("79990", "80000"), 10_000);
    assert_parse_error(
        &src,
        4,
        5,
        "register number %vr80000 is out of range (at most 79999 for an input of this size)",
    );
}

#[test]
fn stack_alignment_beyond_the_maximum() {
    // The verifier's cap (Cranelift keeps the alignment as a shift below 32, and lays frames
    // out in 32 bits).
    assert_eq!(MAX_STACK_ALIGN, 65536);
    for align in ["131072", "1099511627776", "9223372036854775808"] {
        assert_parse_error(
            &func(&format!(
                "    stack_obj.0 = size 8, align {align}\nbb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\n"
            )),
            2,
            33,
            &format!("alignment {align} is more than the maximum 65536"),
        );
    }
    let src = func(
        "    stack_obj.0 = size 8, align 65536\nbb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\n",
    );
    verify_module(&parse_module(&src).unwrap(), true).unwrap();
}
