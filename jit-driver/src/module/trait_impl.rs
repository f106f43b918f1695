//! `impl Module for MergeModule`: declarations go straight to the inner module; a defined
//! function is checked as the plain module would check it, then kept for the next flush; data
//! is defined at once, its function addresses pointed at the code they now use.

use super::error::{backend, verify_caught, VerifyFailure};
use super::{Core, FunctionError, MergeModule, State};
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir;
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::{CodegenError, Context};
use cranelift_module::{
    DataDescription, DataId, FuncId, Linkage, Module, ModuleDeclarations, ModuleError, ModuleReloc,
    ModuleRelocTarget, ModuleResult,
};
use std::time::Instant;

impl<M: Module> Module for MergeModule<M> {
    fn isa(&self) -> &dyn TargetIsa {
        self.inner.isa()
    }

    /// The host's declarations: what it declared, with the ids the plain module gives
    /// (Mergelift's shared bodies are not among them).
    fn declarations(&self) -> &ModuleDeclarations {
        self.core.host.decls(&self.inner)
    }

    fn get_name(&self, name: &str) -> Option<cranelift_module::FuncOrDataId> {
        self.core.host.decls(&self.inner).get_name(name)
    }

    fn target_config(&self) -> cranelift_codegen::isa::TargetFrontendConfig {
        self.inner.target_config()
    }

    fn make_context(&self) -> Context {
        self.inner.make_context()
    }

    fn clear_context(&self, ctx: &mut Context) {
        self.inner.clear_context(ctx)
    }

    fn make_signature(&self) -> ir::Signature {
        self.inner.make_signature()
    }

    fn clear_signature(&self, sig: &mut ir::Signature) {
        self.inner.clear_signature(sig)
    }

    // Declared in the inner module, then in the host's declarations (which accept what the
    // inner module accepted: the same names, linkages and signatures), the two ids mapped.
    fn declare_function(
        &mut self,
        name: &str,
        linkage: Linkage,
        signature: &ir::Signature,
    ) -> ModuleResult<FuncId> {
        let id = self.inner.declare_function(name, linkage, signature)?;
        self.core.declared.0 = self.core.declared.0.max(id.as_u32() + 1);
        let hid = match self.core.host.own_decls() {
            Some(d) => d.declare_function(name, linkage, signature)?.0,
            None => id,
        };
        self.core.host.map(hid, id);
        Ok(hid)
    }

    fn declare_anonymous_function(&mut self, signature: &ir::Signature) -> ModuleResult<FuncId> {
        let id = self.inner.declare_anonymous_function(signature)?;
        self.core.declared.0 = self.core.declared.0.max(id.as_u32() + 1);
        let hid = match self.core.host.own_decls() {
            Some(d) => d.declare_anonymous_function(signature)?,
            None => id,
        };
        self.core.host.map(hid, id);
        Ok(hid)
    }

    // Data ids are the same in both: Mergelift declares no data of its own.
    fn declare_data(
        &mut self,
        name: &str,
        linkage: Linkage,
        writable: bool,
        tls: bool,
    ) -> ModuleResult<DataId> {
        let id = self.inner.declare_data(name, linkage, writable, tls)?;
        self.core.declared.1 = self.core.declared.1.max(id.as_u32() + 1);
        if let Some(d) = self.core.host.own_decls() {
            let (hid, _) = d.declare_data(name, linkage, writable, tls)?;
            debug_assert_eq!(hid, id);
        }
        Ok(id)
    }

    fn declare_anonymous_data(&mut self, writable: bool, tls: bool) -> ModuleResult<DataId> {
        let id = self.inner.declare_anonymous_data(writable, tls)?;
        self.core.declared.1 = self.core.declared.1.max(id.as_u32() + 1);
        if let Some(d) = self.core.host.own_decls() {
            let hid = d.declare_anonymous_data(writable, tls)?;
            debug_assert_eq!(hid, id);
        }
        Ok(id)
    }

    // `declare_func_in_func` and the like are the trait's own: they read `declarations()`,
    // the host's, so the host's IR and data name host ids (rewritten at define).

    /// Keep the function for the next flush. Unlike the inner module, this does not compile:
    /// `ctx` is left holding an empty function and no compiled code (use
    /// [`MergeModule::on_compiled`] to see the code). Defining an import, defining twice, and a
    /// body whose signature differs from the declaration are errors here, at once.
    fn define_function_with_control_plane(
        &mut self,
        host_func: FuncId,
        ctx: &mut Context,
        _ctrl_plane: &mut ControlPlane,
    ) -> ModuleResult<()> {
        // (Errors name the function as the host declared it; behind this, inner ids.)
        let decl = self
            .core
            .host
            .decls(&self.inner)
            .get_function_decl(host_func);
        let name = || decl.linkage_name(host_func).into_owned();
        let func = self.core.host.inner_or_same(host_func);
        if !decl.linkage.is_definable() {
            return Err(ModuleError::InvalidImportDefinition(name()));
        }
        if self.core.state[func] != State::Declared {
            return Err(ModuleError::DuplicateDefinition(name()));
        }
        if ctx.func.signature != decl.signature {
            return Err(ModuleError::IncompatibleSignature(
                name(),
                decl.signature.clone(),
                ctx.func.signature.clone(),
            ));
        }
        // Cranelift's verifier, where the plain module's compile would run it: at define.
        let isa = self.inner.isa();
        if self.config.verify_input || isa.flags().enable_verifier() {
            let t = Instant::now();
            let r = verify_caught(&ctx.func, isa);
            self.core.verify_time += t.elapsed();
            match r {
                Ok(()) => {}
                Err(VerifyFailure::Rejected(e)) => {
                    return Err(ModuleError::Compilation(CodegenError::Verifier(e)))
                }
                Err(VerifyFailure::Panicked(p)) => {
                    let e = backend(format!("Cranelift's verifier panicked: {p}"));
                    return Err(FunctionError::one(host_func, name(), e, None).into());
                }
            }
        }
        // The host's IR names host ids; from here on, inner ids (back, if refused).
        self.core.host.rewrite_func(&mut ctx.func, true);
        if let Err(e) = self.core.check_references(&self.inner, func, &ctx.func) {
            self.core.host.rewrite_func(&mut ctx.func, false);
            return Err(self.core.error_to_host(&self.inner, e));
        }
        self.core.note_undefined_callees(func, &ctx.func);
        let f = std::mem::replace(&mut ctx.func, ir::Function::new());
        self.core.disasm |= ctx.want_disasm;
        self.core.state[func] = State::Pending;
        self.core.pending.push((func, f));
        Ok(())
    }

    /// Passed straight to the inner module (machine code cannot be merged).
    fn define_function_bytes(
        &mut self,
        host_func: FuncId,
        alignment: u64,
        bytes: &[u8],
        relocs: &[ModuleReloc],
    ) -> ModuleResult<()> {
        let func_id = self.core.host.inner_or_same(host_func);
        if self.core.state[func_id] != State::Declared {
            return Err(ModuleError::DuplicateDefinition(self.func_name(func_id)));
        }
        if self.core.host.is_identity() {
            self.inner
                .define_function_bytes(func_id, alignment, bytes, relocs)?;
        } else {
            let relocs = self.core.host.relocs_to_inner(relocs);
            self.inner
                .define_function_bytes(func_id, alignment, bytes, &relocs)?;
        }
        self.core.state[func_id] = State::Bytes;
        Ok(())
    }

    /// Passed to the inner module at once. A function whose address the data holds keeps an
    /// address of its own: one not merged yet is never merged away without a thunk, and one
    /// merged away before gets a thunk at the next flush.
    fn define_data(&mut self, data_id: DataId, data: &DataDescription) -> ModuleResult<()> {
        // An address stored in data is observed, whatever the policy: a function merged away
        // by an earlier flush (no code of its own, or its survivor's) gets a thunk of its own
        // at the next flush, as one whose address is taken in IR does.
        let mut rewritten: Option<DataDescription> = None;
        for (fr, target) in data.function_decls.iter() {
            if let ModuleRelocTarget::User {
                namespace: 0,
                index,
            } = *target
            {
                // (The host's id, then the inner one.)
                let g = self.core.host.inner_or_same(FuncId::from_u32(index));
                self.core.taken[g] = true;
                if self.core.state[g] == State::Merged {
                    self.core.late_data.push(g);
                }
                if g.as_u32() != index {
                    rewritten.get_or_insert_with(|| data.clone()).function_decls[fr] =
                        ModuleRelocTarget::user(0, g.as_u32());
                }
            }
        }
        self.inner
            .define_data(data_id, rewritten.as_ref().unwrap_or(data))
    }
}

impl Core {
    /// Note the module functions `func` (defined as `id`) refers to that are not defined yet:
    /// if none is defined in this batch, the code compiled for `func` refers to it by name,
    /// and it must have code under that name once it is defined, even if it merges, unless
    /// the inner module makes aliases (a JIT resolves none).
    pub(super) fn note_undefined_callees(&mut self, id: FuncId, func: &ir::Function) {
        if self.aliases {
            return; // (the name resolves to the survivor's code)
        }
        let names = func.params.user_named_funcs();
        for ext in func.dfg.ext_funcs.values() {
            let ir::ExternalName::User(r) = ext.name else {
                continue;
            };
            match names.get(r) {
                Some(u)
                    if u.namespace == 0 && u.index < self.declared.0 && u.index != id.as_u32() =>
                {
                    let g = FuncId::from_u32(u.index);
                    if self.state[g] == State::Declared {
                        self.undefined_callees.push(g);
                    }
                }
                _ => {}
            }
        }
    }

    /// References the inner module could not link: a `colocated` (near) reference to an
    /// imported function or data object, which a JIT places anywhere in the address space.
    pub(super) fn check_references(
        &self,
        inner: &dyn Module,
        id: FuncId,
        func: &ir::Function,
    ) -> ModuleResult<()> {
        let decls = inner.declarations();
        let user = |r: ir::UserExternalNameRef| func.params.user_named_funcs().get(r).cloned();
        let bad = |what: &str, name: String| {
            let e = backend(format!(
                "refers to the imported {what} {name} as `colocated` (a near reference), but \
                 an import may be anywhere in memory: declare the reference without \
                 `colocated` (Module::declare_func_in_func does)"
            ));
            Err(FunctionError::one(id, Self::name(inner, id), e, None).into())
        };
        for (_, ext) in func.dfg.ext_funcs.iter() {
            if let (true, ir::ExternalName::User(r)) = (ext.colocated, &ext.name) {
                if let Some(u) = user(*r) {
                    if u.namespace == 0 && u.index < self.declared.0 {
                        let f = FuncId::from_u32(u.index);
                        let d = decls.get_function_decl(f);
                        if d.linkage == Linkage::Import {
                            return bad("function", d.linkage_name(f).into_owned());
                        }
                    }
                }
            }
        }
        for (_, gv) in func.global_values.iter() {
            if let ir::GlobalValueData::Symbol {
                name: ir::ExternalName::User(r),
                colocated: true,
                ..
            } = gv
            {
                if let Some(u) = user(*r) {
                    if u.namespace == 1 && u.index < self.declared.1 {
                        let d = DataId::from_u32(u.index);
                        let dd = decls.get_data_decl(d);
                        if dd.linkage == Linkage::Import {
                            return bad("data object", dd.linkage_name(d).into_owned());
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
