//! Alias region descriptions survive lift and lower, and the lifter shares one string per
//! region id across functions (without confusing two descriptions of the same id).

use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use jit_driver::{lift_functions, lower_function, OriginalNames};
use std::sync::Arc;

const CLIF: &str = r#"
function %a(i64) -> i64 {
    region0 = 8 "VMContext+0x8"
block0(v0: i64):
    v1 = load.i64 notrap aligned region0 v0+8
    return v1
}

function %b(i64) -> i64 {
    region0 = 8 "another description"
block0(v0: i64):
    v1 = load.i64 notrap aligned region0 v0+16
    return v1
}

function %c(i64) -> i64 {
    region0 = 8 "VMContext+0x8"
    region1 = 9 "VMContext+0x10"
block0(v0: i64):
    v1 = load.i64 notrap aligned region1 v0+8
    store notrap aligned region0 v1, v0
    return v1
}

function %d(i64) -> i64 {
    region0 = 9 "VMContext+0x10"
block0(v0: i64):
    v1 = load.i64 notrap aligned region0 v0
    return v1
}
"#;

#[test]
fn region_descriptions_are_kept_and_shared() {
    let funcs = cranelift_reader::parse_functions(CLIF).unwrap();
    let m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    let names: Vec<Vec<(u32, Arc<str>)>> = m
        .functions
        .values()
        .map(|f| f.regions.values().map(|r| (r.id, r.name.clone())).collect())
        .collect();
    assert_eq!(&*names[0][0].1, "VMContext+0x8");
    assert_eq!(&*names[1][0].1, "another description");
    assert_eq!(&*names[2][0].1, "VMContext+0x8");
    assert_eq!(&*names[2][1].1, "VMContext+0x10");
    assert_eq!(&*names[3][0].1, "VMContext+0x10");
    // Same id, same description: one string shared by the functions.
    assert!(Arc::ptr_eq(&names[2][1].1, &names[3][0].1));

    let config = TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    };
    let regions = |f: &Function| -> Vec<(u32, String)> {
        (f.dfg.alias_regions.iter())
            .map(|(_, r)| (r.user_id, r.description.to_string()))
            .collect()
    };
    for ((_, f), src) in m.functions.iter().zip(&funcs) {
        let out = lower_function(&m, f, &mut OriginalNames, config).unwrap();
        assert_eq!(regions(&out), regions(src), "function {}", f.name);
    }
}
