//! `MergeModule<ObjectModule>`: object files where a merged function is an alias symbol.

use super::{Definer, MergeModule, State};
use cranelift_module::{Module, ModuleResult};
use cranelift_object::object::write::SymbolSection;
use cranelift_object::{ObjectModule, ObjectProduct};

impl MergeModule<ObjectModule> {
    /// Tell the module that its `ObjectBuilder` left `unwind_info` off (cranelift-object's
    /// default). Its flushes then compile as a JIT's do: on the machine's threads
    /// ([`MergeConfig::threads`](super::MergeConfig::threads)), and a function Cranelift's
    /// verifier accepted at define without the verifier's reruns, the code defined as bytes.
    /// cranelift-object keeps that setting to itself; without this call every function is
    /// compiled through `ObjectModule::define_function`, on the caller's thread, so that the
    /// unwind entries (FDEs) the builder may write are all there.
    pub fn without_unwind_info(mut self) -> Self {
        self.core.set_definer(self.inner.isa(), Definer::Bytes);
        self
    }

    /// Run the passes over the pending functions, compile what is left, and finish the object
    /// (`ObjectModule::finish`). A merged function has no code: its symbol is defined at its
    /// survivor's code, with the survivor's size (an alias, with its own name and
    /// visibility). A local function folded into a shared body by `merge-similar` is an alias
    /// of the shared body (nothing calls it by name: its callers call the shared body).
    ///
    /// Unlike `ObjectModule::finish`, this returns a `Result`: the compiles happen here. A
    /// function that fails to compile is an error naming it
    /// ([`FunctionError`](super::FunctionError)); the object would otherwise lack its symbol.
    ///
    /// Aliases share their survivor's unwind information (one FDE in `.eh_frame` for all of
    /// them). With per-function sections, an alias's own section (`.text.<name>`) stays in
    /// the object, empty: `ObjectModule` makes it when the function is declared, and an object
    /// being written cannot lose a section.
    pub fn finish(mut self) -> ModuleResult<ObjectProduct> {
        self.flush_batch(true, false)?;
        // (Inner ids, as the inner module's product has them.)
        let merged: Vec<_> = (self.core.merged.iter())
            .filter_map(|(g, m)| Some((g, (*m)?.into)))
            .filter(|&(g, _)| self.core.state[g] == State::Merged)
            .collect();
        // An object file must define every non-import symbol: a merged function gets an empty
        // definition here, moved onto its survivor's code below.
        for &(g, _) in &merged {
            self.inner.define_function_bytes(g, 1, &[], &[])?;
        }
        // Each alias's code: through survivors merged in turn, to the one compiled.
        let merged: Vec<_> = (merged.into_iter())
            .map(|(g, f)| (g, self.core.code_of(f, true)))
            .collect();
        let mut product = self.inner.finish();
        for (g, f) in merged {
            let (Some((fsym, _)), Some((gsym, _))) = (product.functions[f], product.functions[g])
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
        // The host's ids: its functions' symbols by the ids it was given (shared bodies'
        // symbols stay in the object, local, out of the table).
        if !self.core.host.is_identity() {
            let mut functions = cranelift_entity::SecondaryMap::new();
            for (id, entry) in product.functions.iter() {
                if let Some(h) = self.core.host.host(id) {
                    functions[h] = *entry;
                }
            }
            product.functions = functions;
        }
        Ok(product)
    }
}
