//! `MergeModule<JITModule>`: the inherent methods of cranelift-jit's module.

use super::{MergeModule, State};
use cranelift_jit::JITModule;
use cranelift_module::{DataId, FuncId, ModuleResult};
use midend::lir::MergeKind;

impl MergeModule<JITModule> {
    /// Run the passes over the functions defined since the last call, compile what is left
    /// into the JIT module, and finalize it (`JITModule::finalize_definitions`). A function
    /// equal to one compiled by an earlier call gets that code and is not compiled at all.
    pub fn finalize_definitions(&mut self) -> ModuleResult<()> {
        self.flush()?;
        self.inner.finalize_definitions()
    }

    /// The code of a finalized function. A merged function gives code that behaves as its
    /// own: its survivor's (or its own thunk, when its address had to stay distinct).
    ///
    /// # Panics
    /// As `JITModule::get_finalized_function`: when `id` was not defined and finalized.
    pub fn get_finalized_function(&self, id: FuncId) -> *const u8 {
        assert!(
            self.core.state.get(id) != Some(&State::Pending),
            "function {} is defined but not yet finalized (call finalize_definitions)",
            self.func_name(id)
        );
        match self.core.state.get(id) {
            Some(State::Merged) => {
                assert!(
                    self.merge_kind(id) != Some(MergeKind::Folded),
                    "function {} is local and was folded into a shared body by merge-similar: \
                     it has no code of its own (declare functions the host calls as Export)",
                    self.func_name(id)
                );
                let f = self
                    .merged_into(id)
                    .expect("a merged function has a survivor");
                self.inner.get_finalized_function(f)
            }
            _ => self.inner.get_finalized_function(id),
        }
    }

    /// The address and size of a finalized data object (`JITModule::get_finalized_data`).
    pub fn get_finalized_data(&self, id: DataId) -> (*const u8, usize) {
        self.inner.get_finalized_data(id)
    }

    /// Free the memory of all compiled code and data (`JITModule::free_memory`).
    ///
    /// # Safety
    /// No function of the module may be running or called afterwards.
    pub unsafe fn free_memory(self) {
        unsafe { self.inner.free_memory() }
    }
}
