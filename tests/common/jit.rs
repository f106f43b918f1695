//! Functions by name in, function pointers by name out: what these tests and benchmarks ask
//! of a `MergeModule<JITModule>` compiled in one batch, with the functions named as in a
//! `.clif` file (`%fib`, `u0:3`) and called by those names.

#![allow(dead_code)]

use cranelift_codegen::ir;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage};
use mergelift::tools::{define_by_name, host_isa, jit_builder, OptLevel};
use mergelift::{MergeConfig, MergeModule};
use std::collections::HashMap;

/// Functions to compile together: add them, then compile.
pub struct JitBatch {
    config: MergeConfig,
    funcs: Vec<(Linkage, ir::Function)>,
    symbols: Vec<(String, *const u8)>,
}

/// A compiled batch: its module, and each function's id by name.
pub struct Jit {
    module: Option<MergeModule<JITModule>>,
    ids: HashMap<String, FuncId>,
}

impl JitBatch {
    /// An empty batch compiled with `config`.
    pub fn new(config: MergeConfig) -> Self {
        JitBatch {
            config,
            funcs: Vec::new(),
            symbols: Vec::new(),
        }
    }

    /// Add a function under its own name; other functions call it by that name.
    pub fn add_function(&mut self, linkage: Linkage, func: ir::Function) {
        self.funcs.push((linkage, func));
    }

    /// Make a host address available to the compiled code under `name`.
    pub fn register_symbol(&mut self, name: &str, ptr: *const u8) {
        self.symbols.push((name.to_string(), ptr));
    }

    /// Merge, compile and finalize everything added, as one last batch.
    pub fn compile(self) -> Result<Jit, Box<dyn std::error::Error>> {
        let isa = host_isa(OptLevel::None)?;
        let jit = JITModule::new(jit_builder(isa, &self.symbols));
        let mut m = MergeModule::with_config(jit, self.config);
        let ids = define_by_name(&mut m, self.funcs)?;
        m.flush_last()?;
        m.finalize_definitions()?;
        Ok(Jit {
            module: Some(m),
            ids: ids.into_iter().collect(),
        })
    }
}

impl Jit {
    /// The module (merges, statistics, code bytes per id).
    pub fn module(&self) -> &MergeModule<JITModule> {
        self.module.as_ref().expect("live")
    }

    /// The id of a function by name.
    pub fn id(&self, name: &str) -> Option<FuncId> {
        self.ids.get(name).copied()
    }

    /// A typed function pointer by name.
    ///
    /// # Safety
    /// `F` must be an `extern "C"` function pointer type matching the function's signature.
    pub unsafe fn get<F: Copy>(&self, name: &str) -> Option<F> {
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*const u8>());
        let p = self.pointer(name)?;
        Some(unsafe { std::mem::transmute_copy::<*const u8, F>(&p) })
    }

    /// The code pointer of a function by name.
    pub fn pointer(&self, name: &str) -> Option<*const u8> {
        Some(self.module().get_finalized_function(self.id(name)?))
    }

    /// Statistics of the compile.
    pub fn stats(&self) -> &mergelift::Stats {
        self.module().stats()
    }

    /// Machine-code bytes of everything compiled.
    pub fn total_code_bytes(&self) -> usize {
        self.module().total_code_bytes()
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the pointers handed out borrow `self`; none outlives it.
            unsafe { m.free_memory() };
        }
    }
}
