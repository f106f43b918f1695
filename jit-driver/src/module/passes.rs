//! Stage 2 of a flush, passes: run the passes over the batch's LIR, then record what they
//! merged and declare the functions they made.

use super::error::backend;
use super::lift::Lifted;
use super::{Core, MergeConfig, Merged, State};
use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{FuncId, Module, ModuleError};
use midend::lir;
use midend::passes::aligned::HotFunctions;
use midend::{PassManager, PassOptions};

/// Can `isa` compile `return_call`? On x86-64 Cranelift needs frame pointers for it.
pub fn tail_calls_allowed(isa: &dyn TargetIsa) -> bool {
    isa.triple().architecture != target_lexicon::Architecture::X86_64
        || isa.flags().preserve_frame_pointers()
}

impl Core {
    /// Stage 2: the passes over the lifted batch (none when nothing was lifted: nothing to
    /// merge), then what they merged and made (`record_merges`). Returns the functions to
    /// compile besides the batch's own.
    pub(super) fn passes(
        &mut self,
        inner: &mut dyn Module,
        config: &MergeConfig,
        (last, fetch_locals): (bool, bool),
        lifted: &Lifted,
        merges_before: usize,
    ) -> Result<Vec<(FuncId, lir::FuncId)>, ModuleError> {
        let hot =
            (config.hot.as_ref()).map(|h| Self::hot_in_lir(h, inner, &self.lir, &lifted.batch));
        if !lifted.batch.is_empty() {
            self.run_passes(config, (last, fetch_locals), hot, &lifted.batch)?;
        }
        self.record_merges(inner, lifted, merges_before)
    }

    /// The host's hot functions (`MergeConfig::hot`, which names them as they were declared)
    /// among the batch's, as the passes ask for them: by their names in LIR.
    pub(super) fn hot_in_lir(
        hot: &HotFunctions,
        inner: &dyn Module,
        lir: &lir::Module,
        batch: &[(FuncId, lir::FuncId)],
    ) -> HotFunctions {
        let names: Vec<String> = (batch.iter())
            .filter(|(id, _)| hot.contains(&Self::name(inner, *id)))
            .map(|(_, lid)| lir.functions[*lid].name.to_string())
            .collect();
        HotFunctions::named(names)
    }

    /// Stage 2: the passes, over the new functions (frozen ones only survive). `hot`: the
    /// batch's hot functions, by LIR name.
    pub(super) fn run_passes(
        &mut self,
        config: &MergeConfig,
        (last, fetch_locals): (bool, bool),
        hot: Option<HotFunctions>,
        batch: &[(FuncId, lir::FuncId)],
    ) -> Result<(), ModuleError> {
        let insts = |lir: &lir::Module| -> u64 {
            batch
                .iter()
                .filter(|(_, lid)| !lir.removed[*lid])
                .map(|(_, lid)| lir.functions[*lid].inst_count() as u64)
                .sum()
        };
        self.stats
            .add(midend::Counter::LirInstsIn, insts(&self.lir));
        // A function merged away has no code, and without `keep_lir` its body goes at once
        // (unless this is the last batch: then the module's end frees it, and freeing it here
        // would only slow the passes).
        self.pass_state.free_removed = !config.debug.keep_lir && !last;
        // (Made again only when `fetch_locals` changes, an object module flushed before its
        // `finish`, or for each batch's hot functions. A pass keeps only scratch buffers from
        // one run to the next.)
        if hot.is_some()
            || self
                .passes
                .as_ref()
                .is_none_or(|(named, _)| *named != fetch_locals)
        {
            let mut pm = PassManager::from_kinds_with(
                &config.passes,
                &PassOptions {
                    threads: config.threads.get(),
                    locals_named: fetch_locals,
                    hot,
                },
            );
            pm.verify = config.debug.verify_lir;
            self.passes = Some((fetch_locals, pm));
        }
        let (_, pm) = self.passes.as_mut().expect("made above");
        pm.run(&mut self.lir, &mut self.pass_state, &mut self.stats)
            .map_err(|e| backend(e.to_string()))?;
        self.stats
            .add(midend::Counter::LirInstsOut, insts(&self.lir));
        Ok(())
    }

    /// Stage 2, continued: declare the functions the passes made (shared bodies of
    /// `merge-similar`) in the inner module as local anonymous functions, record what was
    /// merged into what, and give a thunk to each function an earlier batch merged away whose
    /// address this batch takes. Returns the functions to compile besides the batch's own.
    pub(super) fn record_merges(
        &mut self,
        inner: &mut dyn Module,
        lifted: &Lifted,
        merges_before: usize,
    ) -> Result<Vec<(FuncId, lir::FuncId)>, ModuleError> {
        let mut made: Vec<(FuncId, lir::FuncId)> = Vec::new();
        let first_made = lifted
            .batch
            .last()
            .map_or(0, |&(_, lid)| lid.as_u32() + 1)
            .max(self.pass_state.first_open);
        let made_ids = (first_made..self.lir.functions.len() as u32)
            .map(lir::FuncId::from_u32)
            .filter(|&lid| !self.lir.removed[lid])
            .collect::<Vec<_>>();
        for lid in made_ids {
            let sig = crate::lower::clif_signature(&self.lir.functions[lid].sig);
            self.host.diverge(inner);
            let id = inner.declare_anonymous_function(&sig)?;
            self.declared.0 = self.declared.0.max(id.as_u32() + 1);
            if let Some(sym) = self.lir.symbol_of(lid) {
                self.sym_func[sym] = id.into();
            }
            self.lifted[id] = lid.into();
            made.push((id, lid));
        }
        for r in &self.pass_state.merges[merges_before..] {
            let (Some(g), Some(f)) = (self.func_of(r.merged), self.func_of(r.survivor)) else {
                continue;
            };
            self.merged[g] = Some(Merged {
                into: f,
                kind: r.kind,
                by: r.by,
                redirect: r.callers_redirected,
            });
            self.any_merged = true;
        }
        // A function merged away by an earlier batch whose address this batch takes becomes a
        // thunk to its survivor, compiled with the batch: the address exists, and is its own.
        // (A fold's thunk may take the address of another such function: a worklist.)
        let mut late = lifted.late.clone();
        while let Some(g) = late.pop() {
            if self.state[g] != State::Merged {
                continue;
            }
            let Some(lid) = self.lifted[g].expand() else {
                continue;
            };
            if !midend::passes::merge::thunk_for_address(&mut self.lir, &mut self.pass_state, lid) {
                continue;
            }
            let mut next = Vec::new();
            self.lir.functions[lid].for_each_taken_symbol(|s| next.push(s));
            late.extend(next.into_iter().filter_map(|s| self.func_of(s)));
            self.state[g] = State::Pending;
            self.taken[g] = true;
            self.stats.add(midend::Counter::LateThunks, 1);
            made.push((g, lid));
        }
        // Survivors merged in turn (into a function of an earlier batch): point at the last.
        for &(g, _) in &lifted.batch {
            if let Some(mg) = self.merged[g] {
                if mg.redirect {
                    let last = self.call_target(mg.into).unwrap_or(mg.into);
                    self.merged[g] = Some(Merged { into: last, ..mg });
                }
            }
        }
        Ok(made)
    }
}
