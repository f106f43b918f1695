//! `define_by_name` across batches: a name an earlier batch referred to (declared as an
//! import) is defined by a later one, and a name defined twice in one call is refused, whether
//! or not the module knew it before.

use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module, ModuleError};
use jit_driver::{define_by_name, host_isa, OptLevel};

fn parse(text: &str) -> Vec<(Linkage, cranelift_codegen::ir::Function)> {
    cranelift_reader::parse_functions(text)
        .unwrap()
        .into_iter()
        .map(|f| (Linkage::Export, f))
        .collect()
}

const CALLER: &str = "function %f() -> i64 {
    sig0 = () -> i64
    fn0 = %g sig0
block0:
    v0 = call fn0()
    v1 = iconst.i64 1
    v2 = iadd v0, v1
    return v2
}";

const G: &str = "function %g() -> i64 {
block0:
    v0 = iconst.i64 41
    return v0
}";

#[test]
fn a_later_batch_defines_what_an_earlier_one_called() {
    let mut m = JITModule::new(JITBuilder::with_isa(
        host_isa(OptLevel::None).unwrap(),
        default_libcall_names(),
    ));
    let f = define_by_name(&mut m, parse(CALLER)).unwrap()[0].1;
    // `%g` is known to the module now, as an import.
    assert!(m.get_name("g").is_some());
    let g = define_by_name(&mut m, parse(G)).unwrap()[0].1;
    assert_eq!(
        m.declarations().get_function_decl(g).linkage,
        Linkage::Export
    );
    m.finalize_definitions().unwrap();
    let code = m.get_finalized_function(f);
    // SAFETY: `%f` was compiled for the host with the signature `() -> i64`.
    let f: extern "C" fn() -> i64 = unsafe { std::mem::transmute(code) };
    assert_eq!(f(), 42);
}

#[test]
fn a_name_defined_twice_in_one_call_is_refused() {
    let mut m = JITModule::new(JITBuilder::with_isa(
        host_isa(OptLevel::None).unwrap(),
        default_libcall_names(),
    ));
    let twice = format!("{G}\n{G}");
    // A name new to the module.
    assert!(matches!(
        define_by_name(&mut m, parse(&twice)),
        Err(ModuleError::DuplicateDefinition(n)) if n == "g"
    ));

    let mut m = JITModule::new(JITBuilder::with_isa(
        host_isa(OptLevel::None).unwrap(),
        default_libcall_names(),
    ));
    define_by_name(&mut m, parse(CALLER)).unwrap();
    // A name the module knew as an import: once is a definition, twice an error.
    assert!(matches!(
        define_by_name(&mut m, parse(&twice)),
        Err(ModuleError::DuplicateDefinition(n)) if n == "g"
    ));
}
