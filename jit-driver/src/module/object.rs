//! `MergeModule<ObjectModule>`: object files where a merged function is an alias symbol.

use super::{MergeModule, State};
use cranelift_module::{Module, ModuleResult};
use cranelift_object::object::write::SymbolSection;
use cranelift_object::{ObjectModule, ObjectProduct};
use midend::lir::MergeKind;

impl MergeModule<ObjectModule> {
    /// Run the passes over the pending functions, compile what is left, and finish the object
    /// (`ObjectModule::finish`). A merged function has no code: its symbol is defined at its
    /// survivor's code (an alias, with its own name and visibility).
    ///
    /// Unlike `ObjectModule::finish`, this returns a `Result`: the compiles happen here.
    pub fn finish(mut self) -> ModuleResult<ObjectProduct> {
        self.flush_batch(true)?;
        let merged: Vec<_> = self
            .merges()
            .filter(|&(g, _, _)| self.core.state[g] == State::Merged)
            .collect();
        // An object file must define every non-import symbol: a merged function gets an empty
        // definition here, moved onto its survivor's code below.
        for &(g, _, _) in &merged {
            self.inner.define_function_bytes(g, 1, &[], &[])?;
        }
        let mut product = self.inner.finish();
        for (g, f, kind) in merged {
            if kind == MergeKind::Folded {
                continue; // a local folded by merge-similar: nothing may call it by name
            }
            let (Some((fsym, true)), Some((gsym, _))) =
                (product.functions[f], product.functions[g])
            else {
                continue;
            };
            let (section, value, size) = {
                let s = product.object.symbol(fsym);
                (s.section, s.value, s.size)
            };
            if let SymbolSection::Section(_) = section {
                let s = product.object.symbol_mut(gsym);
                s.section = section;
                s.value = value;
                s.size = size;
                product.functions[g] = Some((gsym, true));
            }
        }
        Ok(product)
    }
}
