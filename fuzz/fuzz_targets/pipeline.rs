//! Parse arbitrary text as CLIF, lift, run every pass
//! (`merge,merge-similar,merge-aligned,lvn,gvn,dce`) and lower every function back: passes
//! must keep the module valid and every surviving function must lower to valid CLIF.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|text: &str| {
    let Some(funcs) = common::parse_verified_clif(text) else {
        return;
    };
    let mut stats = midend::Stats::default();
    let Ok(mut m) = jit_driver::lift_functions(funcs.iter(), &mut stats) else {
        return;
    };
    midend::verifier::verify_module(&m, true).expect("lifted module verifies");
    let mut pm =
        midend::PassManager::from_names("merge,merge-similar,merge-aligned,lvn,gvn,dce").unwrap();
    pm.verify = true;
    if let Err(e) = pm.run(&mut m, &mut midend::PassState::default(), &mut stats) {
        panic!("passes failed on a verified module: {e}\n{m}");
    }
    let config = cranelift_codegen::isa::TargetFrontendConfig {
        default_call_conv: cranelift_codegen::isa::CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    };
    let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
    let ids: Vec<_> = m.live_functions().map(|(id, _)| id).collect();
    for id in ids {
        let f = &m.functions[id];
        let lowered = jit_driver::lower_function(&m, f, &mut jit_driver::OriginalNames, config)
            .unwrap_or_else(|e| panic!("lowering {} failed: {e}", f.name));
        if let Err(e) = cranelift_codegen::verifier::verify_function(&lowered, &flags) {
            panic!(
                "lowered {} fails Cranelift's verifier: {e}\n{}",
                f.name,
                lowered.display()
            );
        }
    }
});
