//! The host's view of ids: the plain module's. The inner module hands out function ids in
//! order, and the shared bodies the passes make are declared there too, so after the first
//! one the host's next function would take an id the plain module gives another. From then
//! on the host declares in Mergelift's own `ModuleDeclarations` ([`HostView::decls`]), which
//! holds exactly what the host declared, and every id crosses the boundary through the map
//! here: the host's IR, relocations and data name host ids, the inner module and everything
//! behind it inner ids. Until the first shared body the two are equal: the inner module's
//! declarations are the host's (none is kept twice) and nothing is rewritten. Shared bodies
//! have no host id.

use cranelift_codegen::ir;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;
use cranelift_module::{FuncId, Module, ModuleDeclarations, ModuleReloc, ModuleRelocTarget};

pub(super) struct HostView {
    /// What the host declared, with the ids the plain module would have given, once they
    /// differ from the inner module's (`diverge`; until then, the inner module's).
    decls: Option<ModuleDeclarations>,
    /// The inner id of each host function, by host id.
    to_inner: Vec<FuncId>,
    /// The host id of each inner function (none: a function of Mergelift's own).
    to_host: SecondaryMap<FuncId, PackedOption<FuncId>>,
    /// Every host id so far is its inner id.
    identity: bool,
}

impl HostView {
    /// The view of `inner` as it is: what it declared already, the host's, id for id.
    pub(super) fn of(inner: &dyn Module) -> Self {
        let mut v = HostView {
            decls: None,
            to_inner: Vec::new(),
            to_host: SecondaryMap::new(),
            identity: true,
        };
        for (id, _) in inner.declarations().get_functions() {
            v.map(id, id);
        }
        v
    }

    /// What the host declared, with the ids the plain module would have given.
    pub(super) fn decls<'a>(&'a self, inner: &'a dyn Module) -> &'a ModuleDeclarations {
        self.decls.as_ref().unwrap_or_else(|| inner.declarations())
    }

    /// The host's declarations, where they are kept apart from `inner`'s (`None`: they are
    /// `inner`'s).
    pub(super) fn own_decls(&mut self) -> Option<&mut ModuleDeclarations> {
        self.decls.as_mut()
    }

    /// Mergelift is about to declare a function of its own in `inner`: from now on, the
    /// host's declarations are kept apart, starting as a copy of `inner`'s.
    pub(super) fn diverge(&mut self, inner: &dyn Module) {
        if self.decls.is_some() {
            return;
        }
        let mut decls = ModuleDeclarations::default();
        let d = inner.declarations();
        for (_, f) in d.get_functions() {
            match &f.name {
                Some(n) => decls
                    .declare_function(n, f.linkage, &f.signature)
                    .map(|_| ()),
                None => decls.declare_anonymous_function(&f.signature).map(|_| ()),
            }
            .expect("the inner module's own declarations are consistent");
        }
        for (_, o) in d.get_data_objects() {
            match &o.name {
                Some(n) => decls
                    .declare_data(n, o.linkage, o.writable, o.tls)
                    .map(|_| ()),
                None => decls.declare_anonymous_data(o.writable, o.tls).map(|_| ()),
            }
            .expect("the inner module's own declarations are consistent");
        }
        self.decls = Some(decls);
    }

    /// Host function `host` is inner function `inner` (a new one, or one declared again).
    pub(super) fn map(&mut self, host: FuncId, inner: FuncId) {
        let i = host.as_u32() as usize;
        if i == self.to_inner.len() {
            self.to_inner.push(inner);
            self.to_host[inner] = host.into();
            self.identity &= host == inner;
        }
        debug_assert_eq!(self.to_inner[i], inner);
    }

    /// The inner id of host function `host` (`None`: the host never declared it).
    pub(super) fn inner(&self, host: FuncId) -> Option<FuncId> {
        self.to_inner.get(host.as_u32() as usize).copied()
    }

    /// The inner id of `host`, or `host` itself when the host never declared it (for the
    /// inner module to refuse as the plain module would).
    pub(super) fn inner_or_same(&self, host: FuncId) -> FuncId {
        self.inner(host).unwrap_or(host)
    }

    /// The host id of inner function `inner` (`None`: one of Mergelift's own).
    pub(super) fn host(&self, inner: FuncId) -> Option<FuncId> {
        self.to_host.get(inner).and_then(|h| h.expand())
    }

    /// The host's spelling of inner function `inner`: its name, or `.LfnN` with its host id.
    pub(super) fn name(&self, inner_module: &dyn Module, inner: FuncId) -> String {
        match self.host(inner) {
            Some(h) => (self.decls(inner_module).get_function_decl(h))
                .linkage_name(h)
                .into_owned(),
            None => (inner_module.declarations().get_function_decl(inner))
                .linkage_name(inner)
                .into_owned(),
        }
    }

    /// Rewrite the module functions `func` names (`UserExternalName`s of namespace 0) from
    /// host ids to inner ids (`to_inner`) or back.
    pub(super) fn rewrite_func(&self, func: &mut ir::Function, to_inner: bool) {
        if self.identity {
            return;
        }
        let names: Vec<_> = (func.params.user_named_funcs().iter())
            .filter(|(_, u)| u.namespace == 0)
            .map(|(r, u)| (r, u.index))
            .collect();
        for (r, index) in names {
            let id = FuncId::from_u32(index);
            let to = if to_inner {
                self.inner(id)
            } else {
                self.host(id)
            };
            if let Some(to) = to {
                func.params
                    .reset_user_func_name(r, ir::UserExternalName::new(0, to.as_u32()));
            }
        }
    }

    /// A relocation target named by the host, as the inner module names it.
    pub(super) fn target_to_inner(&self, t: &ModuleRelocTarget) -> ModuleRelocTarget {
        match *t {
            ModuleRelocTarget::User {
                namespace: 0,
                index,
            } => ModuleRelocTarget::user(0, self.inner_or_same(FuncId::from_u32(index)).as_u32()),
            ModuleRelocTarget::FunctionOffset(f, off) => {
                ModuleRelocTarget::FunctionOffset(self.inner_or_same(f), off)
            }
            ref other => other.clone(),
        }
    }

    /// Relocations of code the host defined as bytes, as the inner module names their targets.
    pub(super) fn relocs_to_inner(&self, relocs: &[ModuleReloc]) -> Vec<ModuleReloc> {
        (relocs.iter())
            .map(|r| ModuleReloc {
                name: self.target_to_inner(&r.name),
                ..r.clone()
            })
            .collect()
    }

    /// Every host id is its inner id.
    pub(super) fn is_identity(&self) -> bool {
        self.identity
    }
}

impl super::Core {
    /// An error naming functions by inner id (a [`FunctionError`](super::FunctionError)),
    /// with the host's ids and names instead.
    pub(super) fn error_to_host(
        &self,
        inner: &dyn Module,
        e: cranelift_module::ModuleError,
    ) -> cranelift_module::ModuleError {
        use cranelift_module::ModuleError;
        if self.host.is_identity() {
            return e;
        }
        match e {
            ModuleError::Backend(mut b) => {
                if let Some(fe) = b.downcast_mut::<super::FunctionError>() {
                    for f in &mut fe.failures {
                        if let Some(h) = self.host.host(f.id) {
                            f.function = self.host.name(inner, f.id);
                            f.id = h;
                        }
                    }
                }
                ModuleError::Backend(b)
            }
            other => other,
        }
    }
}
