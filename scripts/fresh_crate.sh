#!/usr/bin/env bash
# A new crate outside the workspace, as a user makes one from README's "Add to your project":
# Mergelift by path, Cranelift required as `0.135` and resolved afresh (no lock file: the
# newest 0.135 patch cargo finds, not the workspace's locked one). It defines two equal
# functions and a near-duplicate through `MergeModule`, runs them, and checks the merges (an
# exact one and a shared body).
# Usage: scripts/fresh_crate.sh [DIR]   (default: a new temporary directory, removed after)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$(mktemp -d)}"
[ $# -ge 1 ] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "mergelift-fresh-host"
version = "0.1.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
mergelift = { path = "$root" }
cranelift-codegen = "0.135"
cranelift-frontend = "0.135"
cranelift-jit = "0.135"
cranelift-module = "0.135"
cranelift-native = "0.135"
TOML
cat > "$dir/src/main.rs" <<'RS'
use cranelift_codegen::ir::{types, AbiParam, InstBuilder};
use cranelift_codegen::settings;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use mergelift::{Counter, MergeConfig, MergeModule, Threads};

fn main() {
    let isa = cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(settings::builder()))
        .unwrap();
    let jit = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let config = MergeConfig { threads: Threads::None, ..Default::default() };
    let mut m = MergeModule::with_config(jit, config);
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let mut fctx = FunctionBuilderContext::new();
    let mut ids = Vec::new();
    for (name, k) in [("a", 5), ("b", 5), ("c", 6)] {
        let id = m.declare_function(name, Linkage::Export, &sig).unwrap();
        let mut ctx = m.make_context();
        ctx.func.signature = sig.clone();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        let mut x = b.block_params(block)[0];
        x = b.ins().imul_imm_s(x, k);
        for i in 0..12 {
            let t = b.ins().imul_imm_s(x, 3 + i);
            x = b.ins().iadd_imm_s(t, i);
        }
        b.ins().return_(&[x]);
        b.seal_all_blocks();
        b.finalize(m.target_config());
        m.define_function(id, &mut ctx).unwrap();
        ids.push(id);
    }
    m.finalize_definitions().unwrap();
    let run = |i: usize| {
        let f: extern "C" fn(i64) -> i64 =
            unsafe { std::mem::transmute(m.get_finalized_function(ids[i])) };
        f(3)
    };
    assert_eq!(run(0), run(1));
    assert_ne!(run(0), run(2));
    // `b` equals `a`; `c` differs in one constant: one body shared with a parameter.
    assert!(m.merged_into(ids[1]) == Some(ids[0]) || m.in_shared_body(ids[1]));
    assert!(m.in_shared_body(ids[2]), "{:?}", m.stats());
    println!(
        "merged {} of 3 functions ({} by merge-similar), {} compiled",
        m.merges().count(),
        m.stats().get(Counter::MergedSimilar),
        m.stats().get(Counter::Compiled)
    );
}
RS
cd "$dir"
cargo generate-lockfile -q
echo "fresh crate: $(grep -A1 'name = "cranelift-codegen"' Cargo.lock | tail -1)"
CARGO_TARGET_DIR="${FRESH_TARGET_DIR:-$dir/target}" cargo run -q
