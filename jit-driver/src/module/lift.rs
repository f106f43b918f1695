//! Stage 1 of a flush, lift: plan which functions to lift (`skip`), lift them, merge those
//! equal to a function an earlier flush compiled unlifted by their prints, and record what the
//! functions left unlifted observe of the others.

use super::names::{func_symbol_name, lir_linkage};
use super::{final_target, input_index, skip, AddressPolicy, Core, MergeConfig, State};
use crate::lift::lift_function_with;
use cranelift_codegen::ir;
use cranelift_entity::packed_option::PackedOption;
use cranelift_module::{FuncId, Linkage, Module};
use midend::lir;
use midend::state::{MergeKind, MergedBy};
use midend::PassKind;
use rustc_hash::FxHashSet;
use std::time::Instant;

/// What stage 1 of a flush made of the batch.
pub(super) struct Lifted {
    /// The lifted functions, in batch order.
    pub(super) batch: Vec<(FuncId, lir::FuncId)>,
    /// The LIR function of each position of the batch (none: not lifted).
    pub(super) lid_at: Vec<PackedOption<lir::FuncId>>,
    /// Functions merged away by an earlier batch whose address this batch takes.
    pub(super) late: Vec<FuncId>,
    /// The batch surveyed: the shape key of each position (none: every function was
    /// lifted).
    pub(super) survey: skip::Survey,
    /// The positions left unlifted, to index by their prints (`skip::Plan::indexed`).
    pub(super) indexed: Vec<u32>,
    /// The positions merged by their prints, not lifted (`Core::merge_by_print`).
    pub(super) by_print: Vec<u32>,
}

impl Core {
    /// Stage 1: lift the batch, except functions no pass could merge (`skip`) and functions
    /// the lifter cannot represent (passed through: compiled as they came, never merged).
    pub(super) fn lift_batch(
        &mut self,
        inner: &dyn Module,
        config: &MergeConfig,
        plan: skip::Plan,
        pending: &mut [(FuncId, ir::Function)],
    ) -> Lifted {
        let t = Instant::now();
        let skip::Plan {
            skip,
            stand_ins,
            indexed,
            merged_at,
        } = plan;
        // (Taken for the flush, given back by `index_batch`; empty when every function is
        // lifted.)
        let mut survey = std::mem::take(&mut self.scratch.survey);
        if skip.is_empty() {
            survey.fill(std::iter::empty(), &mut self.walker, false);
        }
        self.lift_stand_ins(inner, config, stand_ins);
        let mut batch: Vec<(FuncId, lir::FuncId)> = Vec::with_capacity(pending.len());
        // The LIR function of each position of `pending` (none: not lifted).
        let mut lid_at: Vec<PackedOption<lir::FuncId>> = Vec::with_capacity(pending.len());
        // Positions of the functions the lifter could not represent.
        let mut passed: Vec<u32> = Vec::new();
        self.lir.functions.reserve(pending.len());
        // The input of each function stays in `pending` (moved out when compiled as is): a
        // copy of each (960 bytes, to memory not touched yet) cost a sixth of the lift of a
        // module of small functions.
        // Whether the function at a position is lifted.
        let lifted = |j: usize| !skip.get(j).copied().unwrap_or(false);
        self.name_unlifted(pending, |pos| !lifted(pos));
        let mut merged_at = merged_at.into_iter().peekable();
        let mut by_print = Vec::new();
        for (pos, (id, func)) in pending.iter_mut().enumerate() {
            let id = *id;
            let decl = inner.declarations().get_function_decl(id);
            func.name = ir::UserFuncName::user(0, id.as_u32());
            if let Some((_, into)) = merged_at.next_if(|&(p, _)| p as usize == pos) {
                let lid = self.merge_by_print(id, func, decl.linkage, into);
                lid_at.push(lid.into());
                by_print.push(pos as u32);
                continue;
            }
            if !lifted(pos) {
                lid_at.push(None.into());
                continue;
            }
            let linkage = lir_linkage(decl.linkage);
            let lid = match lift_function_with(&mut self.lir, func, linkage, &mut self.lift_ctx) {
                Ok(lid) => lid,
                Err(e) => {
                    self.pass_through(id, e.to_string());
                    passed.push(pos as u32);
                    lid_at.push(None.into());
                    continue;
                }
            };
            // The function's own symbol, which lifting named `u0:N` (looked up by name only
            // if the LIR did not record it).
            let sym = match self.lir.symbol_of(lid) {
                Some(sym) => sym,
                None => self
                    .lir
                    .symbol(&func_symbol_name(id), lir::SymbolKind::Function),
            };
            debug_assert_eq!(self.lir.symbols[sym].name, func_symbol_name(id));
            if config.debug.verify_lir {
                // The input as lifted, before any pass. Cranelift accepted the function at
                // define, so a fault here is the lifter's: the function is passed through.
                if let Err(e) =
                    midend::verifier::verify_function(&self.lir, &self.lir.functions[lid], true)
                {
                    self.pass_state.remove_function(&mut self.lir, lid);
                    self.lir.symbols[sym].def = None.into();
                    self.pass_through(id, format!("LIR verifier: {e}"));
                    passed.push(pos as u32);
                    lid_at.push(None.into());
                    continue;
                }
            }
            self.sym_func[sym] = id.into();
            self.lifted[id] = lid.into();
            if config.address_policy == AddressPolicy::Distinct && decl.linkage != Linkage::Local {
                self.lir.functions[lid].address_significant = true;
            }
            batch.push((id, lid));
            lid_at.push(lid.into());
        }
        // What a passed-through function observes of the others, surveyed as `skip` surveys
        // the functions it does not lift (when it skipped none, it surveyed none).
        if !passed.is_empty() && survey.keys.is_empty() {
            survey = skip::Survey::of(passed.iter().map(|&p| &pending[p as usize].1));
            for r in &mut survey.refs {
                r.0 = passed[r.0 as usize];
            }
            for n in &mut survey.near {
                n.0 = passed[n.0 as usize];
            }
        }
        let observed = if batch.len() < pending.len() {
            self.observe_unlifted(|pos| lid_at[pos as usize].is_none(), &survey)
        } else {
            Vec::new()
        };

        // Addresses taken in the new code, and stored in data: such functions keep an address
        // of their own.
        let taken = std::mem::take(&mut self.lift_ctx.taken);
        // Functions an earlier batch merged away (no code) whose address the new code takes:
        // they get code below, a thunk to their survivor.
        let mut late: Vec<FuncId> = std::mem::take(&mut self.late_data);
        late.extend(
            observed
                .into_iter()
                .filter(|&g| self.state[g] == State::Merged),
        );
        for &s in &taken {
            if let Some(g) = self.func_of(s) {
                self.taken[g] = true;
                if self.state[g] == State::Merged {
                    late.push(g);
                }
            }
        }
        self.lift_ctx.taken = taken;
        self.lift_ctx.taken.clear();
        for &(id, lid) in &batch {
            if self.taken[id] {
                self.lir.functions[lid].address_significant = true;
            }
        }
        self.stats.add_time("lift", t.elapsed());
        self.stats
            .add(midend::Counter::FunctionsIn, pending.len() as u64);
        let unlifted = pending.len() - batch.len() - passed.len();
        if unlifted > 0 {
            self.stats.add(midend::Counter::NotLifted, unlifted as u64);
        }
        Lifted {
            batch,
            lid_at,
            late,
            survey,
            indexed,
            by_print,
        }
    }

    /// The symbol of a function left unlifted is a function's from the start, as its lift
    /// would make it: lifted code may take its address (a symbol global value) before it
    /// calls it, and a later batch's code may refer to it.
    pub(super) fn name_unlifted(
        &mut self,
        pending: &[(FuncId, ir::Function)],
        unlifted: impl Fn(usize) -> bool,
    ) {
        let mut name = String::new();
        for (pos, (id, _)) in pending.iter().enumerate() {
            if unlifted(pos) {
                use std::fmt::Write as _;
                name.clear();
                let _ = write!(name, "u0:{}", id.as_u32());
                let sym = self.lir.symbol(&name, lir::SymbolKind::Function);
                self.lir.symbols[sym].kind = lir::SymbolKind::Function;
                self.sym_func[sym] = (*id).into();
            }
        }
    }

    /// Merge `id` (defined as `func`) into `into`, a function an earlier flush compiled
    /// unlifted whose print and callees `func` shares (`plan_lift` checked that it needs no
    /// address of its own), as the merge pass merges a function into a frozen one: an alias
    /// (a local one replaced), its calls redirected. Its LIR is what a merged function's is
    /// once its body is gone: a name and a signature, for a thunk should a later batch take
    /// its address. Returns it (`None`: the signature is not LIR's; then it is compiled).
    pub(super) fn merge_by_print(
        &mut self,
        id: FuncId,
        func: &ir::Function,
        linkage: Linkage,
        into: FuncId,
    ) -> Option<lir::FuncId> {
        let lid = crate::lift::lift_header(
            &mut self.lir,
            func,
            lir_linkage(linkage),
            &mut self.lift_ctx,
        )
        .ok()?;
        let gs = self.lir.symbol_of(lid)?;
        let fs = (self.lir).symbol(&func_symbol_name(into), lir::SymbolKind::Function);
        self.sym_func[gs] = id.into();
        self.sym_func[fs] = into.into();
        self.lifted[id] = lid.into();
        self.pass_state.remove_function(&mut self.lir, lid);
        self.lir.symbols[gs].def = None.into();
        self.lir.aliases.insert(gs, fs);
        self.pass_state.move_external_calls(gs, fs);
        let kind = if linkage == Linkage::Local {
            MergeKind::Replaced
        } else {
            MergeKind::Aliased
        };
        self.pass_state.merges.push(midend::state::MergeRecord {
            merged: gs,
            survivor: fs,
            kind,
            by: MergedBy::Exact,
            callers_redirected: true,
        });
        self.stats.add(midend::Counter::Merged, 1);
        self.stats.add(midend::Counter::MergeByPrint, 1);
        Some(lid)
    }

    /// Lift the stand-ins of functions compiled unlifted by earlier flushes and freeze them,
    /// as their own lift and freeze would have: the passes then merge into them as into any
    /// function compiled before.
    pub(super) fn lift_stand_ins(
        &mut self,
        inner: &dyn Module,
        config: &MergeConfig,
        stand_ins: Vec<(FuncId, ir::Function)>,
    ) {
        if stand_ins.is_empty() {
            return;
        }
        let mut lids = Vec::with_capacity(stand_ins.len());
        for (id, mut func) in stand_ins {
            let decl = inner.declarations().get_function_decl(id);
            func.name = ir::UserFuncName::user(0, id.as_u32());
            let linkage = lir_linkage(decl.linkage);
            // (The function it stands for is compiled; one that cannot be lifted stays as
            // it is, never merged into.)
            let Ok(lid) = lift_function_with(&mut self.lir, &func, linkage, &mut self.lift_ctx)
            else {
                continue;
            };
            let sym = match self.lir.symbol_of(lid) {
                Some(sym) => sym,
                None => (self.lir).symbol(&func_symbol_name(id), lir::SymbolKind::Function),
            };
            self.sym_func[sym] = id.into();
            self.lifted[id] = lid.into();
            if self.taken[id]
                || (config.address_policy == AddressPolicy::Distinct
                    && decl.linkage != Linkage::Local)
            {
                self.lir.functions[lid].address_significant = true;
            }
            lids.push(lid);
            self.stats.add(midend::Counter::StandIns, 1);
        }
        // What they take and call was recorded when the functions they stand for were
        // compiled.
        self.lift_ctx.taken.clear();
        midend::passes::merge::freeze(&mut self.lir, &mut self.pass_state, &lids, true);
        // Their bodies stay until the batch is frozen: `merge-similar` may start a family
        // with one of them and functions of the batch.
        self.pass_state.similar_frozen.extend_from_slice(&lids);
    }

    /// What later batches find this one's functions by: the shape keys of the lifted ones
    /// (frozen, with their fingerprints), and the prints of those compiled unlifted.
    pub(super) fn index_batch(
        &mut self,
        pending: &[(FuncId, ir::Function)],
        lifted: Lifted,
        last: bool,
    ) {
        if !last {
            let mut by_print = lifted.by_print.iter().peekable();
            for (pos, &key) in lifted.survey.keys.iter().enumerate() {
                if by_print.next_if(|&&p| p as usize == pos).is_some() {
                    continue;
                }
                if lifted.lid_at[pos].is_some() {
                    self.lifted_shapes.insert(key);
                }
            }
            self.index_prints(pending, &lifted.survey, &lifted.indexed);
        }
        self.scratch.survey = lifted.survey;
        self.scratch.indexed = lifted.indexed;
    }

    /// Index the functions at `positions` of the batch that compiled, by their prints (from
    /// `survey`), for later flushes to find them by.
    pub(super) fn index_prints(
        &mut self,
        pending: &[(FuncId, ir::Function)],
        survey: &skip::Survey,
        positions: &[u32],
    ) {
        for &pos in positions {
            let (id, pos) = (pending[pos as usize].0, pos as usize);
            if let (State::Compiled, Some(p)) = (self.state[id], survey.print(pos)) {
                self.input_index.insert(id, survey.keys[pos], p);
            }
        }
    }

    /// `id` is compiled as it came, never merged: the lifter cannot represent it (`why`).
    pub(super) fn pass_through(&mut self, id: FuncId, why: String) {
        self.stats.add(midend::Counter::PassedThrough, 1);
        self.passed_through.push((id, why));
    }

    /// What the functions not lifted observe of the others (addresses taken, `try_call`
    /// targets, near references): marked as a lifted caller would have them. Returns the
    /// module functions whose address they observe.
    pub(super) fn observe_unlifted(
        &mut self,
        unlifted: impl Fn(u32) -> bool,
        survey: &skip::Survey,
    ) -> Vec<FuncId> {
        let mut observed = Vec::new();
        if survey.refs.is_empty() && survey.near.is_empty() {
            return observed;
        }
        let mut near: Vec<(u32, u32, bool)> = (survey.near.iter())
            .filter(|&&(pos, ..)| unlifted(pos))
            .map(|&(_, ns, i, func)| (ns, i, func))
            .collect();
        // (A name referred to both ways is made a function.)
        near.sort_unstable_by_key(|&(ns, i, func)| (ns, i, !func));
        near.dedup_by_key(|n| (n.0, n.1));
        for &(pos, r) in &survey.refs {
            if !unlifted(pos) {
                continue;
            }
            let (skip::Reference::Observed(i) | skip::Reference::Called(i)) = r;
            if let (skip::Reference::Observed(_), true) = (r, i < self.declared.0) {
                let g = FuncId::from_u32(i);
                self.taken[g] = true;
                observed.push(g);
            }
            let Some(lid) = (i < self.declared.0)
                .then(|| self.lifted[FuncId::from_u32(i)].expand())
                .flatten()
            else {
                continue;
            };
            match r {
                skip::Reference::Observed(_) => {
                    self.lir.functions[lid].address_significant = true;
                }
                skip::Reference::Called(_) => {
                    if let Some(sym) = self.lir.symbol_of(lid) {
                        self.pass_state.external_calls[sym] += 1;
                    }
                }
            }
        }
        // Marked near as the lifter would mark them, made if no lifted code names them yet
        // (a later batch's may: it must find them near, as with this function lifted).
        for (ns, i, func) in near {
            let kind = if func {
                lir::SymbolKind::Function
            } else {
                lir::SymbolKind::Data
            };
            let sym = self.lir.symbol(&format!("u{ns}:{i}"), kind);
            self.lir.symbols[sym].colocated = true;
        }
        observed
    }

    /// Which functions of `pending` to lift (`skip::Plan`). None is left unlifted unless every
    /// pass merges functions (a per-function pass would change functions on their own), and
    /// neither `lift_all`, `lower_all` nor `keep_lir` asks for the LIR of every function.
    /// Otherwise a function is lifted when another of the batch has its shape key (the passes
    /// might merge the two), when a function lifted by an earlier flush has it (it might equal
    /// that frozen function), or when its print equals that of a function an earlier flush
    /// left unlifted (then a copy of it is lifted and frozen in that function's place: a
    /// stand-in). A function left unlifted by a flush that is not the last keeps its print,
    /// for later flushes to find it by.
    pub(super) fn plan_lift(
        &mut self,
        inner: &dyn Module,
        config: &MergeConfig,
        last: bool,
        pending: &[(FuncId, ir::Function)],
    ) -> skip::Plan {
        let t = Instant::now();
        let merging_only = config
            .passes
            .iter()
            .all(|p| matches!(p, PassKind::Merge | PassKind::MergeSimilar));
        let merge_similar = config.passes.contains(&PassKind::MergeSimilar);
        let mut plan = skip::Plan {
            indexed: std::mem::take(&mut self.scratch.indexed),
            ..Default::default()
        };
        plan.indexed.clear();
        if !merging_only || config.debug.lift_all || config.debug.lower_all || config.debug.keep_lir
        {
            return plan;
        }
        let survey = &mut self.scratch.survey;
        // A function's print is for later flushes to find it by (one left unlifted by a flush
        // that is not the last), and to find the functions earlier flushes indexed (one of
        // their shapes). A batch of one function, most often left unlifted, is printed in the
        // one walk that surveys it; a larger batch prints only the functions that need it,
        // once the survey has told which.
        let one = pending.len() == 1 && (!last || !self.input_index.is_empty());
        survey.fill(pending.iter().map(|(_, f)| f), &mut self.walker, one);
        // How many functions have each key, up to two.
        let count = &mut self.scratch.count;
        count.clear();
        for &k in &survey.keys {
            let c = count.entry(k).or_insert(0);
            *c = (*c + 1).min(2);
        }
        plan.skip.reserve(pending.len());
        // The module functions whose address the batch observes (made when first needed).
        let mut observed: Option<FxHashSet<u32>> = None;
        for (pos, (id, func)) in pending.iter().enumerate() {
            let key = survey.keys[pos];
            let indexed_shape = self.input_index.has_shape(key);
            let alone = count[&key] == 1 && !self.lifted_shapes.contains(&key);
            if indexed_shape || (alone && !last) {
                survey.print_again(pos, func, &mut self.walker);
            }
            let print = survey.print(pos);
            let mut found = false;
            // Is this function equal to one an earlier flush left unlifted?
            if let Some(p) = print.filter(|_| indexed_shape) {
                // Equal, callees and all: merged into it as the merge pass would, where
                // that makes it an alias (and nothing needs its body).
                let decls = inner.declarations();
                let linkage = decls.get_function_decl(*id).linkage;
                let observed = observed.get_or_insert_with(|| {
                    (survey.refs.iter())
                        .filter_map(|&(_, r)| match r {
                            skip::Reference::Observed(i) => Some(i),
                            skip::Reference::Called(_) => None,
                        })
                        .collect()
                });
                let own_address = self.taken[*id]
                    || observed.contains(&id.as_u32())
                    || linkage == Linkage::Preemptible
                    || (config.address_policy == AddressPolicy::Distinct
                        && linkage != Linkage::Local);
                let same = |callees: &[u32]| {
                    (p.callees.iter().zip(callees)).all(|(&a, &b)| {
                        // (`u32::MAX`: not a module function, spelt out in the print.)
                        let fin = |c: u32| match c {
                            u32::MAX => c,
                            c => final_target(&self.merged, FuncId::from_u32(c)).as_u32(),
                        };
                        fin(a) == fin(b)
                    })
                };
                let into = (!own_address)
                    .then(|| {
                        (self.input_index.equal(p))
                            .find(|&(f, callees)| {
                                self.state[f] == State::Compiled
                                    && decls.get_function_decl(f).linkage != Linkage::Preemptible
                                    && *id != f
                                    && same(callees)
                            })
                            .map(|(f, _)| f)
                    })
                    .flatten();
                if let Some(f) = into {
                    plan.merged_at.push((pos as u32, f));
                    plan.skip.push(true);
                    continue;
                }
                for (f, callees) in self.input_index.take_equal(p) {
                    let stand_in = input_index::with_callees(func, &callees);
                    plan.stand_ins.push((f, stand_in));
                    found = true;
                }
                if !found && merge_similar {
                    // Alike but for constants: its stand-ins meet it in `merge-similar`,
                    // which may start a family with them.
                    let alike = (self.input_index).take_alike(p, func, &mut self.walker);
                    found = !alike.is_empty();
                    plan.stand_ins.extend(alike);
                }
            }
            let lift = found || !alone;
            if lift || last {
                plan.skip.push(!lift);
                continue;
            }
            // Left unlifted, and later flushes must be able to find it: by its print (a
            // function without one is lifted).
            if print.is_none() {
                plan.skip.push(false);
                continue;
            }
            plan.skip.push(true);
            plan.indexed.push(pos as u32);
        }
        self.stats.add_time("lift", t.elapsed());
        plan
    }
}
