//! `MergeModule<JITModule>`: the inherent methods of cranelift-jit's module.

use super::{MergeModule, State};
use cranelift_jit::JITModule;
use cranelift_module::{DataId, FuncId, ModuleRelocTarget, ModuleResult};

impl MergeModule<JITModule> {
    /// Run the passes over the functions defined since the last call, compile what is left
    /// into the JIT module, and finalize it (`JITModule::finalize_definitions`). A function
    /// equal to one compiled by an earlier call gets that code and is not compiled at all.
    ///
    /// A function that fails to compile fails alone: the others are compiled and finalized,
    /// and the error (`ModuleError::Backend` holding a [`FunctionError`](super::FunctionError))
    /// names the failed ones, which are undefined again. Only when code compiled now calls
    /// (or takes the address of) a function that failed is nothing finalized, as the JIT could
    /// not resolve it: define it again, then finalize.
    pub fn finalize_definitions(&mut self) -> ModuleResult<()> {
        let flushed = self.flush();
        if let Some(e) = self.unresolved() {
            return Err(flushed.err().unwrap_or(e));
        }
        self.inner.finalize_definitions()?;
        flushed
    }

    /// The code of a finalized function, whatever its linkage. A merged function gives code
    /// that behaves as its own, with its own signature: its survivor's, or its own thunk
    /// (when its address had to stay distinct, or when it was folded into a shared body with
    /// extra parameters).
    ///
    /// # Panics
    /// As `JITModule::get_finalized_function`: when `id` was not defined and finalized. Also
    /// for a local function folded into a shared body when
    /// [`MergeConfig::fetch_locals`](super::MergeConfig::fetch_locals) is off: it has no code
    /// of its own.
    pub fn get_finalized_function(&self, id: FuncId) -> *const u8 {
        let id = self.core.host.inner_or_same(id);
        let f = self.core.code_of(id, false);
        match self.core.state.get(f) {
            Some(State::Pending) => panic!(
                "function {} is defined but not yet finalized (call finalize_definitions)",
                self.func_name(id)
            ),
            // Folded into a shared body (another signature): no code of its own.
            Some(State::Merged) => panic!(
                "function {} is local and was folded into a shared body by merge-similar with \
                 MergeConfig::fetch_locals off: it has no code of its own",
                self.func_name(id)
            ),
            _ => {}
        }
        self.inner.get_finalized_function(f)
    }

    /// The address a name resolves to (`JITModule::get_address`): for a function of the
    /// module, defined and finalized, its code as [`get_finalized_function`] gives it (a
    /// merged function's survivor's, or its own thunk); anything else (data objects, imports,
    /// libcalls) as the `JITModule` resolves it, with its panics for a name it cannot resolve.
    ///
    /// [`get_finalized_function`]: MergeModule::get_finalized_function
    pub fn get_address(&self, name: &ModuleRelocTarget) -> *const u8 {
        if let ModuleRelocTarget::User {
            namespace: 0,
            index,
        } = *name
        {
            let host = FuncId::from_u32(index);
            let id = self.core.host.inner_or_same(host);
            if matches!(
                self.core.state.get(id),
                Some(State::Compiled | State::Merged)
            ) {
                return self.get_finalized_function(host);
            }
        }
        self.inner
            .get_address(&self.core.host.target_to_inner(name))
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
