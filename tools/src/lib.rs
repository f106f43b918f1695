//! Mergelift's tools, apart from what a library user links: the template-heavy module
//! generator (`gen`), the differential fuzzer against cranelift-interpreter (`fuzz`; on
//! foreign targets under qemu-user, `fuzz_cross`), the runner
//! of Cranelift's `.clif` run tests (`runtest`; on foreign targets under qemu-user,
//! `cross_run`), the code-size and compile-time measurement (`size`), and what they share
//! (`input`, `harness`, and `cross`: object files for aarch64, riscv64 and s390x linked with a
//! C harness and run under qemu-user). The `mergelift` command (crate
//! `mergelift-cli`) is built on them.

// `ModuleResult` is cranelift-module's own (large) error type.
#![allow(clippy::result_large_err)]

pub mod cross;
pub mod cross_run;
mod exn;
pub mod fuzz;
pub mod fuzz_cross;
pub mod gen;
pub mod harness;
pub mod input;
pub mod llvm;
pub mod names;
pub mod report;
pub mod runtest;
pub mod size;
#[cfg(feature = "wasm")]
pub mod wasm;
