//! A lift that fails leaves the module as it was: the lifter builds a function in its slot of
//! the module's table, and takes it off again when the body cannot be lifted or its name is
//! defined already. The functions lifted before and after keep their ids and symbols, and the
//! module still verifies.

use jit_driver::{lift_function, Error};
use midend::lir;

const CLIF: &str = "
function u0:1(i32) -> i32 {
block0(v0: i32):
    v1 = iconst.i32 1
    v2 = iadd v0, v1
    return v2
}

function u0:2(i32) -> i32 {
    sig0 = (i32) -> i32
    fn0 = u0:7 sig0
block0(v0: i32):
    v1 = call fn0(v0)
    brif v1, block1, block2
block1:
    jump block0(v1)
block2:
    return v1
}

function u0:3(i64) -> i32 {
    sig0 = (i32) -> i32
    fn0 = u0:1 sig0
block0(v0: i64):
    v1 = ireduce.i32 v0
    v2 = call fn0(v1)
    return v2
}
";

fn lift_msg(r: Result<lir::FuncId, Error>) -> String {
    match r {
        Err(Error::Lift { msg, .. }) => msg,
        Err(e) => panic!("not a lift error: {e}"),
        Ok(id) => panic!("lifted as {id}"),
    }
}

#[test]
fn a_failed_lift_leaves_the_module_as_it_was() {
    let funcs = cranelift_reader::parse_functions(CLIF).unwrap();
    let mut m = lir::Module::new();
    let first = lift_function(&mut m, &funcs[0], lir::Linkage::Export).unwrap();
    assert_eq!(m.functions.len(), 1);

    // The body cannot be lifted (a branch back to the entry block): no function is added.
    let msg = lift_msg(lift_function(&mut m, &funcs[1], lir::Linkage::Export));
    assert!(msg.contains("entry block"), "{msg}");
    assert_eq!(m.functions.len(), 1);
    // Its name defines nothing; a symbol it referred to stays, undefined, as any reference
    // leaves it.
    let failed = m.lookup_symbol("u0:2");
    assert!(failed.is_none_or(|s| m.symbols[s].def.is_none()));
    if let Some(callee) = m.lookup_symbol("u0:7") {
        assert!(m.symbols[callee].def.is_none());
    }

    // The next function takes the next id, and calls the first by its symbol.
    let third = lift_function(&mut m, &funcs[2], lir::Linkage::Export).unwrap();
    assert_eq!(third.as_u32(), 1);
    assert_eq!(m.symbol_of(first), m.lookup_symbol("u0:1"));
    assert_eq!(m.symbol_of(third), m.lookup_symbol("u0:3"));
    let s1 = m.lookup_symbol("u0:1").unwrap();
    assert_eq!(m.symbols[s1].def.expand(), Some(first));

    // A name defined twice: an error, and the table is unchanged.
    let before = m.functions.len();
    let msg = lift_msg(lift_function(&mut m, &funcs[0], lir::Linkage::Export));
    assert!(msg.contains("defined twice"), "{msg}");
    assert_eq!(m.functions.len(), before);
    assert_eq!(m.symbols[s1].def.expand(), Some(first));

    midend::verifier::verify_module(&m, true).unwrap();
}

#[test]
fn add_function_refuses_a_name_defined_twice() {
    let funcs = cranelift_reader::parse_functions(CLIF).unwrap();
    let mut m = lir::Module::new();
    let id = lift_function(&mut m, &funcs[0], lir::Linkage::Export).unwrap();
    let copy = m.functions[id].clone();
    let err = m.add_function(copy).unwrap_err();
    assert!(err.contains("defined twice"), "{err}");
    assert_eq!(m.functions.len(), 1);
    let s = m.lookup_symbol("u0:1").unwrap();
    assert_eq!(m.symbols[s].def.expand(), Some(id));
}
