//! LLVM's MergeFunctions over LIR, and steps beyond it.
//!
//! 1. **Hash filter**: a cheap hash (signature, block count, opcode sequence in CFG order).
//!    Functions with a unique hash are never compared; the hash is the first key of the order.
//!    The same walk produces a *token stream* per function (what the comparator compares, up
//!    to which function a direct call calls) and the direct callees in the comparator's order.
//!    Functions are classed into *shapes* on the way: a stream is compared (`memcmp`) only with
//!    the first stream of each shape under the same hashes, and only those first streams are
//!    kept. Functions are independent here, so a large module is walked on several threads
//!    (`MergeOptions::threads`); the result does not depend on their number.
//! 2. **FunctionComparator**: a total order broken into small comparisons (`cmp_signature`,
//!    `cmp_types`, `cmp_values` by serial number of first appearance, `cmp_constants`,
//!    `cmp_blocks` in CFG order from the entry, `cmp_operations`, `cmp_memory`, `cmp_callee`).
//! 3. **Beyond LLVM**: callees are compared by *equivalence class*, found by partition
//!    refinement over the call graph (as GCC's IPA-ICF and lld's ICF do): candidates are first
//!    split by exact token-stream equality (equal streams ⇔ the comparator finds the functions
//!    equal up to their callees), then classes split where callee classes differ, until
//!    stable. Self-recursive functions (fact0/fact1) and mutually recursive groups (ping/pong)
//!    merge. Taken addresses (`func_addr`, data symbols) compare by identity, so observable
//!    pointers never change.
//! 4. **FnTree and Deferred**: a sorted set of unique functions with O(log N) lookup (strong
//!    hash, then the comparator; two members of one refined class are known equal without a
//!    walk), and a worklist; strong functions first, then preemptible ones; when G merges into
//!    F, G's callers leave FnTree and return to Deferred.
//! 5. **Merging**: G local with an insignificant address: every use is replaced by F and G is
//!    deleted. G exported with an insignificant address: G becomes an alias (its name resolves
//!    to F's code; no code of its own). G's address significant, or G preemptible: G becomes a
//!    thunk (a tail call to F when the calling convention allows, else call and return), and
//!    its direct callers (unless G is preemptible) call F. A class whose best survivor is
//!    preemptible is left alone (LLVM would need a private copy; we stay conservative).
//! 6. **Incremental**: a run looks only at the *open* functions (those added since the module
//!    was last frozen: `PassState::first_open` on), with tables over them alone (`scope`), so a
//!    batch of one costs as much as one function. Functions compiled by earlier batches are
//!    frozen (`index::freeze`): they never change and always survive, and a new survivor equal
//!    to one of them is found by its fingerprint (`index`) and merged into it.
//!
//! The steps live in one file each: `walk` (hashes, token streams, shapes), `comparator`
//! (the total order and the validator), `refine` (partition refinement), `exact` (FnTree,
//! Deferred, folding, redirecting calls), `index` (frozen functions), `scope` (per-function
//! tables).

mod comparator;
mod exact;
mod index;
mod refine;
pub(crate) mod scope;
pub(crate) mod walk;

pub use comparator::{validate_merge, FunctionComparator};
pub use exact::{merge_functions_with, thunk_for_address, thunk_merged};
pub use index::freeze;
pub use scope::Classes;
pub use walk::function_hash;

use exact::{merge_functions_reusing, MergeScratch};

/// The hashing walk's own interface, for the tests that check its token streams against the
/// comparator: not part of the API.
#[doc(hidden)]
pub mod internals {
    pub use super::walk::{function_hashes, HashScratch, WalkOut};
}

use crate::error::Error;
use crate::lir::{FuncId, Module};
use crate::pass::{Pass, Stats};
use crate::state::PassState;
use std::time::{Duration, Instant};

/// The `merge` pass.
#[derive(Default)]
pub struct Merge {
    /// The pass's options.
    pub opts: MergeOptions,
    /// Buffers kept from one run to the next (a lazy JIT runs the pass once per function).
    pub(crate) scratch: MergeScratch,
}

impl Pass for Merge {
    fn name(&self) -> &'static str {
        "merge"
    }
    fn run(
        &mut self,
        module: &mut Module,
        state: &mut PassState,
        stats: &mut Stats,
    ) -> Result<(), Error> {
        merge_functions_reusing(module, state, self.opts, &mut self.scratch).record(stats);
        Ok(())
    }
}

/// Options of the pass.
#[derive(Clone, Copy, Debug)]
pub struct MergeOptions {
    /// Threads for the hashing walk of large modules (every later step runs on one; the
    /// result does not depend on the number). Default: 1 (no thread is started).
    pub threads: usize,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions { threads: 1 }
    }
}

/// What one run of the pass did.
#[derive(Default, Debug, Clone)]
pub struct MergeReport {
    /// Functions merged into another (each way below).
    pub merged: usize,
    /// Merged local functions whose uses now name the survivor (deleted).
    pub replaced: usize,
    /// Merged functions that became aliases of the survivor.
    pub aliased: usize,
    /// Merged functions that became thunks calling the survivor.
    pub thunked: usize,
    /// Merged into a frozen function (found by fingerprint).
    pub into_frozen: usize,
    pub(crate) comparisons: u64,
    pub(crate) rounds: usize,
    /// (merged, survivor) pairs, for validation.
    pub pairs: Vec<(FuncId, FuncId)>,
    /// Wall time of each phase: the walk (hashes and shapes), refinement, FnTree and
    /// merging, frozen lookups, redirecting calls.
    pub times: Vec<(&'static str, Duration)>,
}

impl MergeReport {
    /// Add the report's counters and phase times to `stats`.
    pub(crate) fn record(&self, stats: &mut Stats) {
        stats.add(crate::Counter::Merged, self.merged as u64);
        stats.add(crate::Counter::MergeReplaced, self.replaced as u64);
        stats.add(crate::Counter::MergeAliased, self.aliased as u64);
        stats.add(crate::Counter::MergeThunked, self.thunked as u64);
        stats.add(crate::Counter::MergeIntoFrozen, self.into_frozen as u64);
        stats.add(crate::Counter::MergeCompared, self.comparisons);
        stats.add(crate::Counter::MergeClassesRounds, self.rounds as u64);
        for &(phase, d) in &self.times {
            stats.add_time(phase, d);
        }
    }

    /// Record the time since `clock` under `phase` and restart the clock.
    fn lap(&mut self, phase: &'static str, clock: &mut Instant) {
        let now = Instant::now();
        self.times.push((phase, now - *clock));
        *clock = now;
    }
}

/// Run MergeFunctions on a module (one thread).
pub fn merge_functions(m: &mut Module, state: &mut PassState) -> MergeReport {
    merge_functions_with(m, state, MergeOptions::default())
}
