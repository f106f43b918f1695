//! Stage 3 of a flush, compile: decide what each function of the batch is compiled from (its
//! input, its lowered LIR, a native thunk, or nothing when merged away), in the order that
//! lets a failure fall back to the functions merged into it, and hand the jobs to the serial
//! (`define`) or threaded (`parallel`) compile.

use super::define::{user_funcs, Compiling, Definer, Job};
use super::error::{backend, error_text};
use super::lift::Lifted;
use super::names::ModuleNames;
use super::{thunk, Core, FailedFunction, FunctionError, MergeConfig, State, Threads};
use crate::lower::lower_function_with;
use cranelift_codegen::ir;
use cranelift_module::{FuncId, Module, ModuleReloc, ModuleRelocTarget};
use midend::lir;
use midend::state::Edit;
use rustc_hash::{FxHashMap, FxHashSet};
use std::time::{Duration, Instant};

/// The smallest flush, in Cranelift instructions, that `Threads::Available` compiles on more
/// than the caller's thread.
pub(super) const PARALLEL_MIN_INSTS: usize = 1000;

/// The module functions relocations refer to.
pub(super) fn reloc_funcs(relocs: &[ModuleReloc]) -> impl Iterator<Item = FuncId> + '_ {
    relocs.iter().filter_map(|r| match r.name {
        ModuleRelocTarget::User {
            namespace: 0,
            index,
        } => Some(FuncId::from_u32(index)),
        _ => None,
    })
}

impl Core {
    /// The threads to compile a flush on: one, unless code may be defined as bytes; with
    /// `Threads::Available`, only for a flush of at least `PARALLEL_MIN_INSTS` instructions
    /// (below that, starting threads costs more than they save).
    pub(super) fn compile_threads(
        &self,
        threads: Threads,
        pending: &[(FuncId, ir::Function)],
        made: usize,
    ) -> usize {
        if self.definer != Definer::Bytes || pending.len() + made < 2 {
            return 1;
        }
        if threads == Threads::Available {
            let insts: usize = pending.iter().map(|(_, f)| f.dfg.num_insts()).sum();
            if insts < PARALLEL_MIN_INSTS {
                return 1;
            }
        }
        threads.get()
    }

    /// Stage 3: compile. First what other functions' code stands on (the functions the passes
    /// made, and the survivors of this batch's merges), so that where one of those fails, the
    /// functions merged into it get code of their own (from their input) before any caller is
    /// compiled; then the rest. Returns the functions that failed, if any.
    pub(super) fn compile_batch(
        &mut self,
        inner: &mut dyn Module,
        config: &MergeConfig,
        pending: &mut [(FuncId, ir::Function)],
        lifted: &Lifted,
        made: Vec<(FuncId, lir::FuncId)>,
    ) -> Option<FunctionError> {
        let mut c = Compiling {
            lid_at: &lifted.lid_at,
            from_input: vec![false; pending.len()],
            // Decided once for the flush, so that the code does not depend on its rounds.
            threads: self.compile_threads(config.threads, pending, made.len()),
            failed: Vec::new(),
            is_failed: FxHashSet::default(),
            ours: FxHashSet::default(),
            refs: Vec::new(),
            lower_time: Duration::ZERO,
            compile_time: Duration::ZERO,
        };
        self.compile_made(inner, made, &mut c);
        // The survivors of this batch's merges, then the rest.
        let survivors: FxHashSet<FuncId> = (pending.iter())
            .filter_map(|(g, _)| self.merged[*g].map(|m| m.into))
            .collect();
        let (first, rest): (Vec<usize>, Vec<usize>) =
            (0..pending.len()).partition(|&pos| survivors.contains(&pending[pos].0));
        let mut jobs = Vec::with_capacity(first.len());
        for pos in self.unmerge_members_of_failed(pending, &mut c) {
            c.from_input[pos] = true;
        }
        for &pos in &first {
            if let Some(job) = self.job(inner, config, pending, pos, &mut c) {
                jobs.push(job);
            }
        }
        self.compile_jobs(inner, jobs, &mut c);
        // Then the rest; and, while functions fail, what was merged into them.
        // (Each round compiles only functions not seen before, or merged away when seen and
        // unmerged since: every function is compiled at most twice, so the rounds end.)
        let mut seen = vec![false; pending.len()];
        for &pos in &first {
            seen[pos] = true;
        }
        let mut round = rest;
        loop {
            for pos in self.unmerge_members_of_failed(pending, &mut c) {
                c.from_input[pos] = true;
                if seen[pos] {
                    round.push(pos);
                }
            }
            if round.is_empty() {
                break;
            }
            let mut jobs = Vec::with_capacity(round.len());
            for pos in std::mem::take(&mut round) {
                seen[pos] = true;
                if let Some(job) = self.job(inner, config, pending, pos, &mut c) {
                    jobs.push(job);
                }
            }
            self.compile_jobs(inner, jobs, &mut c);
        }
        self.end_compiling(inner, c)
    }

    /// The end of stage 3: its times to the stats, and the functions that failed (if any)
    /// undefined again, reported as the plain module would report them.
    pub(super) fn end_compiling(
        &mut self,
        inner: &dyn Module,
        c: Compiling,
    ) -> Option<FunctionError> {
        self.stats.add_time("lower", c.lower_time);
        self.stats.add_time("compile", c.compile_time);
        if c.failed.is_empty() {
            return None;
        }
        // Failed functions that code compiled now refers to: the inner module cannot be
        // finalized before they are defined again, and then they must keep code of their own.
        for &(from, to) in &c.refs {
            if c.is_failed.contains(&to)
                && !c.is_failed.contains(&from)
                && !self.unresolved.contains(&to)
            {
                self.unresolved.push(to);
                self.taken[to] = true;
            }
        }
        let mut failures = Vec::new();
        for (id, error, func) in c.failed {
            self.undefine(id);
            if let (Some(error), false) = (error, c.ours.contains(&id)) {
                let detail = error_text(&error, func.as_ref());
                failures.push(FailedFunction {
                    id,
                    function: Self::name(inner, id),
                    error,
                    detail,
                });
            }
        }
        (!failures.is_empty()).then_some(FunctionError { failures })
    }

    /// Compile the functions the passes made (shared bodies, and thunks for addresses taken
    /// late), lowered from LIR, before anything that stands on them. One that refers to
    /// another is compiled after it (in rounds, by Kahn's order over their references; a
    /// cycle goes in one round), and not at all when that one failed.
    pub(super) fn compile_made(
        &mut self,
        inner: &mut dyn Module,
        made: Vec<(FuncId, lir::FuncId)>,
        c: &mut Compiling,
    ) {
        let config_fe = inner.isa().frontend_config();
        let mut funcs: Vec<(FuncId, Option<ir::Function>)> = Vec::with_capacity(made.len());
        for (id, lid) in made {
            let t = Instant::now();
            let mut names = ModuleNames {
                sym_func: &self.sym_func,
            };
            let f = &self.lir.functions[lid];
            let lowered = lower_function_with(&self.lir, f, &mut names, config_fe, &mut self.fctx);
            c.lower_time += t.elapsed();
            // A shared body is Mergelift's own, not the host's: its failure is not reported
            // (what was merged into it gets code of its own).
            if self.state[id] != State::Pending {
                c.ours.insert(id);
            }
            match lowered {
                Ok(mut func) => {
                    func.name = ir::UserFuncName::user(0, id.as_u32());
                    self.stats.add(midend::Counter::Lowered, 1);
                    funcs.push((id, Some(func)));
                }
                Err(e) if !c.ours.contains(&id) => c.fail(id, backend(e.to_string()), None),
                Err(_) => c.fail_quietly(id),
            }
        }
        let index: FxHashMap<FuncId, usize> = (funcs.iter().enumerate())
            .map(|(k, (id, _))| (*id, k))
            .collect();
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); funcs.len()];
        let mut waits = vec![0u32; funcs.len()];
        for (k, (_, func)) in funcs.iter().enumerate() {
            for g in user_funcs(func.as_ref().expect("lowered")) {
                if let Some(&j) = index.get(&g).filter(|&&j| j != k) {
                    users[j].push(k);
                    waits[k] += 1;
                }
            }
        }
        let mut level: Vec<usize> = (0..funcs.len()).filter(|&k| waits[k] == 0).collect();
        let mut left = funcs.len();
        while left > 0 {
            if level.is_empty() {
                level = (0..funcs.len()).filter(|&k| funcs[k].1.is_some()).collect();
            }
            let mut jobs = Vec::with_capacity(level.len());
            for &k in &level {
                let (id, func) = (funcs[k].0, funcs[k].1.take().expect("once"));
                if !c.refers_to_failed(&func) {
                    jobs.push(Job {
                        id,
                        func,
                        verified: false,
                    });
                } else if c.ours.contains(&id) {
                    c.fail_quietly(id);
                } else {
                    let e = "its thunk refers to a function that failed to compile";
                    c.fail(id, backend(e.into()), None);
                }
            }
            left -= level.len();
            self.compile_jobs(inner, jobs, c);
            let mut next = Vec::new();
            for &k in &level {
                for &u in &users[k] {
                    waits[u] -= 1;
                    if waits[u] == 0 && funcs[u].1.is_some() {
                        next.push(u);
                    }
                }
            }
            level = next;
        }
    }

    /// The job that compiles the function at `pos` of the batch, if it needs one: none for a
    /// function merged away, or one whose code was defined already (a native thunk).
    pub(super) fn job(
        &mut self,
        inner: &mut dyn Module,
        config: &MergeConfig,
        pending: &mut [(FuncId, ir::Function)],
        pos: usize,
        c: &mut Compiling,
    ) -> Option<Job> {
        let id = pending[pos].0;
        // For a lifted function compiled as defined: whether a pass rewrote its calls.
        let mut pass_rewrote = None;
        if let (Some(lid), false) = (c.lid_at[pos].expand(), c.from_input[pos]) {
            if self.lir.removed[lid] {
                // Merged away: no code (its LIR is its survivor's, which is compiled).
                self.state[id] = State::Merged;
                return None;
            }
            let f = &self.lir.functions[lid];
            let edit = self.pass_state.edit(lid);
            if edit == Edit::Modified && config.debug.native_thunks && !config.debug.lower_all {
                let sym_func = &self.sym_func;
                let mut target = |s: lir::Symbol| {
                    let id = sym_func.get(s).and_then(|f| f.expand())?;
                    Some(ModuleRelocTarget::user(0, id.as_u32()))
                };
                let native = thunk::native_thunk(&self.lir, f, inner.isa(), &mut target);
                // (Not when it would jump to a function that failed: then it is compiled from
                // its input below.)
                let native =
                    native.filter(|t| !reloc_funcs(&t.relocs).any(|g| c.is_failed.contains(&g)));
                if let Some(t) = native {
                    let t0 = Instant::now();
                    let r = inner.define_function_bytes(id, thunk::ALIGNMENT, &t.bytes, &t.relocs);
                    c.compile_time += t0.elapsed();
                    match r {
                        Ok(()) => {
                            self.note_compiled(id, t.bytes.len());
                            self.stats.add(midend::Counter::NativeThunks, 1);
                            c.refs.extend(reloc_funcs(&t.relocs).map(|g| (id, g)));
                        }
                        Err(e) => c.fail(id, e, None),
                    }
                    return None;
                }
            }
            if edit == Edit::Modified || config.debug.lower_all {
                let t = Instant::now();
                let mut names = ModuleNames {
                    sym_func: &self.sym_func,
                };
                let lowered = lower_function_with(
                    &self.lir,
                    f,
                    &mut names,
                    inner.isa().frontend_config(),
                    &mut self.fctx,
                );
                c.lower_time += t.elapsed();
                match lowered {
                    // Code that calls a function that failed is compiled from its input
                    // instead, where calls go to the functions merged into the failed one.
                    Ok(func) if !c.refers_to_failed(&func) => {
                        let mut func = func;
                        func.name = ir::UserFuncName::user(0, id.as_u32());
                        self.stats.add(midend::Counter::Lowered, 1);
                        return Some(Job {
                            id,
                            func,
                            verified: false,
                        });
                    }
                    // A function the lowerer cannot represent is compiled from its input:
                    // every pass keeps a function's behaviour, so that is the same function.
                    Ok(_) | Err(_) => {}
                }
            } else {
                pass_rewrote = Some(edit == Edit::CallsRewritten);
            }
        }
        Some(self.input_job(pending, pos, pass_rewrote, c))
    }

    /// The job that compiles the function at `pos` of the batch as defined (no pass changed
    /// it, it was not lifted, or its lowered form cannot be used), its calls redirected.
    /// `pass_rewrote`: for a lifted function, whether a pass rewrote its calls. Each position
    /// is compiled once: what is left behind is an empty function.
    pub(super) fn input_job(
        &mut self,
        pending: &mut [(FuncId, ir::Function)],
        pos: usize,
        pass_rewrote: Option<bool>,
        c: &mut Compiling,
    ) -> Job {
        let id = pending[pos].0;
        let mut func = std::mem::replace(&mut pending[pos].1, ir::Function::new());
        let t = Instant::now();
        let mut names = ModuleNames {
            sym_func: &self.sym_func,
        };
        let rewritten = self.redirect_calls(&mut func, &mut names);
        c.lower_time += t.elapsed();
        self.stats.add(midend::Counter::CompiledFromInput, 1);
        if pass_rewrote.unwrap_or(rewritten) {
            self.stats.add(midend::Counter::CallsRewrittenInInput, 1);
        }
        // Verified at define, unless calls were rewritten to pass extra arguments (moving a
        // call to a survivor of the same signature changes nothing the verifier checks).
        let verified = self.verified_at_define && !rewritten;
        Job { id, func, verified }
    }

    /// Compile `jobs` into the inner module, on `c.threads` threads; failures go to `c`.
    pub(super) fn compile_jobs(
        &mut self,
        inner: &mut dyn Module,
        jobs: Vec<Job>,
        c: &mut Compiling,
    ) {
        for j in &jobs {
            c.refs.extend(user_funcs(&j.func).map(|g| (j.id, g)));
        }
        let t = Instant::now();
        if c.threads > 1 && jobs.len() > 1 {
            self.compile_parallel(inner, jobs, c.threads, c);
        } else {
            for job in jobs {
                self.compile(inner, job, c);
            }
        }
        c.compile_time += t.elapsed();
    }

    /// The batch functions merged into a function that failed, at their positions: each gets
    /// code of its own, from its input, and calls to it call it again.
    pub(super) fn unmerge_members_of_failed(
        &mut self,
        pending: &[(FuncId, ir::Function)],
        c: &mut Compiling,
    ) -> Vec<usize> {
        let mut members = Vec::new();
        if c.failed.is_empty() {
            return members;
        }
        for (pos, (g, _)) in pending.iter().enumerate() {
            let Some(m) = self.merged[*g] else { continue };
            if !c.is_failed.contains(&m.into) || c.from_input[pos] {
                continue;
            }
            self.merged[*g] = None;
            self.state[*g] = State::Pending;
            if let Some(sym) = self.lifted[*g].expand().and_then(|l| self.lir.symbol_of(l)) {
                self.pass_state.remove_call_rewrite(sym);
                self.lir.aliases.remove(&sym);
            }
            members.push(pos);
        }
        members
    }

    /// `id` failed to compile: it is undefined again (it may be defined anew), and nothing
    /// later merges into it.
    pub(super) fn undefine(&mut self, id: FuncId) {
        self.state[id] = State::Declared;
        self.merged[id] = None;
        if let Some(lid) = self.lifted[id].take() {
            if let Some(sym) = self.lir.symbol_of(lid) {
                self.lir.symbols[sym].def = None.into();
                self.lir.aliases.remove(&sym);
                // (A shared body that failed: no later function joins its family.)
                self.pass_state.families.forget(sym);
            }
            if !self.lir.removed[lid] {
                self.pass_state.remove_function(&mut self.lir, lid);
            }
        }
    }
}
