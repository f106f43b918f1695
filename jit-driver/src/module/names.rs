//! Names: how module functions are spelt in LIR (`u0:N`) and how LIR symbols become the
//! module's external names again when a function is lowered (through merge aliases to the
//! survivor; anything else as [`OriginalNames`] spells it).

use crate::lower::{NameResolver, OriginalNames};
use cranelift_codegen::ir;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;
use cranelift_module::{FuncId, Linkage};
use midend::lir;

/// LIR linkage of a module linkage (`Import` has no body and never reaches here).
pub(super) fn lir_linkage(l: Linkage) -> lir::Linkage {
    match l {
        Linkage::Local => lir::Linkage::Local,
        Linkage::Preemptible => lir::Linkage::Preemptible,
        Linkage::Import => lir::Linkage::Import,
        Linkage::Hidden | Linkage::Export => lir::Linkage::Export,
    }
}

/// LIR symbols name module functions `u0:N` and data objects `u1:N`, as Cranelift prints
/// `UserExternalName`s.
pub(super) fn func_symbol_name(id: FuncId) -> String {
    format!("u0:{}", id.as_u32())
}

/// Names of lowered functions: a LIR symbol that names a module function becomes that
/// function's id (`u0:N`), through merge aliases; any other symbol is spelt as
/// [`OriginalNames`] spells it.
pub(super) struct ModuleNames<'a> {
    pub(super) sym_func: &'a SecondaryMap<lir::Symbol, PackedOption<FuncId>>,
}

impl ModuleNames<'_> {
    /// `sym`'s name: its module function's id, or as the producer spelt it.
    fn name(&self, m: &lir::Module, func: &mut ir::Function, sym: lir::Symbol) -> ir::ExternalName {
        match self.sym_func.get(sym).and_then(|f| f.expand()) {
            Some(id) => OriginalNames::user(func, ir::UserExternalName::new(0, id.as_u32())),
            None => OriginalNames::name(func, &m.symbols[sym].name),
        }
    }
}

impl NameResolver for ModuleNames<'_> {
    fn function(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
        _sig: ir::SigRef,
    ) -> ir::ExternalName {
        // A merged function's name means its survivor, unless it has code of its own again
        // (a late thunk: `thunk_for_address`).
        let own = m.symbols[sym].def.expand().is_some_and(|d| !m.removed[d]);
        let sym = if own { sym } else { m.resolve_alias(sym) };
        self.name(m, func, sym)
    }
    fn data(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
    ) -> ir::ExternalName {
        // (A function symbol used as data: its address in a global value.)
        self.name(m, func, sym)
    }
}
