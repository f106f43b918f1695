//! The short path of a flush: a batch whose functions match nothing.
//!
//! A function whose shape key no other function of the batch has, nor any function lifted
//! before, and whose print equals no function compiled unlifted before (not even up to
//! constants), is compiled as the plain module would compile it: `skip` leaves it unlifted,
//! and nothing of it reaches the passes. When a whole batch is such functions (a JIT that
//! finalizes each new function at once, most of the time), the flush skips the stages
//! altogether: it compiles each function from its definition, moved, not copied, with its
//! calls redirected to survivors, and indexes its print for later flushes. No LIR, no pass
//! state, no per-flush tables: the compile plus one walk over the function
//! (`fingerprint`).

use super::define::Compiling;
use super::skip::{self, Reference};
use super::{Core, FunctionError, State};
use cranelift_codegen::ir;
use cranelift_module::{FuncId, Module};
use std::time::{Duration, Instant};

impl Core {
    /// Does `plan` leave every function of its batch unlifted, equal to nothing, starting
    /// nothing, and observing no function merged away (which would need a late thunk)?
    pub(super) fn all_lone(&self, plan: &skip::Plan) -> bool {
        let merged_observed = (self.scratch.survey.refs.iter()).any(|&(_, r)| match r {
            Reference::Observed(i) => {
                i < self.declared.0 && self.state[FuncId::from_u32(i)] == State::Merged
            }
            Reference::Called(_) => false,
        });
        !plan.skip.is_empty()
            && plan.skip.iter().all(|&unlifted| unlifted)
            && plan.merged_at.is_empty()
            && plan.stand_ins.is_empty()
            && self.late_data.is_empty()
            && !merged_observed
    }

    /// Compile a batch that `all_lone` accepted, on this thread, and index the prints of
    /// what compiled (`last`: none, no batch follows). Returns the functions that failed.
    pub(super) fn flush_lone(
        &mut self,
        inner: &mut dyn Module,
        last: bool,
        plan: skip::Plan,
        pending: &mut [(FuncId, ir::Function)],
    ) -> Option<FunctionError> {
        let t = Instant::now();
        let survey = std::mem::take(&mut self.scratch.survey);
        // What the functions observe of the others, as for any function left unlifted.
        self.name_unlifted(pending, |_| true);
        self.observe_unlifted(|_| true, &survey);
        self.stats.add_time("lift", t.elapsed());
        let n = pending.len() as u64;
        self.stats.add(midend::Counter::FunctionsIn, n);
        self.stats.add(midend::Counter::NotLifted, n);
        let mut c = Compiling {
            lid_at: &[],
            from_input: Vec::new(),
            threads: 1,
            failed: Vec::new(),
            is_failed: Default::default(),
            ours: Default::default(),
            refs: Vec::new(),
            lower_time: Duration::ZERO,
            compile_time: Duration::ZERO,
        };
        let jobs: Vec<_> = (0..pending.len())
            .map(|pos| self.input_job(pending, pos, None, &mut c))
            .collect();
        self.compile_jobs(inner, jobs, &mut c);
        let failed = self.end_compiling(inner, c);
        if !last {
            self.index_prints(pending, &survey, &plan.indexed);
        }
        self.scratch.survey = survey;
        self.scratch.indexed = plan.indexed;
        failed
    }
}
