//! Statistics: typed counters ([`Counter`]) and per-phase wall times, as LLVM's `-stats`.
//!
//! Every counter Mergelift keeps is a [`Counter`]: reading one is `stats.get(Counter::Merged)`,
//! checked by the compiler, so a misspelt counter does not compile. A pass of the user's own
//! (a [`Pass`](crate::Pass)) keeps its counters by name ([`Stats::custom`]), read back as an
//! `Option`, so a name never added reads `None`, not 0.

use std::time::{Duration, Instant};

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $v:ident = $name:literal,)*) => {
        /// A counter Mergelift keeps: what the passes and the driver did. Its
        /// [`name`](Counter::name) is the name `mergelift opt --stats` prints.
        ///
        /// ```
        /// # extern crate midend as mergelift;
        /// use mergelift::{Counter, Stats};
        /// let stats = Stats::default();
        /// assert_eq!(stats.get(Counter::MergedSimilar), 0);
        /// assert_eq!(Counter::MergedSimilar.name(), "merged_similar");
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Counter {
            $($(#[doc = $doc])* $v,)*
        }

        impl Counter {
            /// Every counter, in declaration order.
            pub const ALL: &'static [Counter] = &[$(Counter::$v,)*];

            /// The counter's name as `--stats` prints it (`merge.aliased`, `compiled`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $(Counter::$v => $name,)*
                }
            }
        }
    };
}

counters! {
    // The flush (jit-driver's `MergeModule`).
    /// Functions defined by the host (with Cranelift IR) that reached a flush.
    FunctionsIn = "functions_in",
    /// Functions passed through unmerged: Cranelift IR LIR cannot represent (dynamic stack
    /// slots, `patchable` calls, ...), compiled as defined.
    PassedThrough = "passed_through",
    /// Functions compiled from their Cranelift IR without being lifted (no other function
    /// shares their shape: no pass could merge them).
    NotLifted = "not_lifted",
    /// Functions and thunks compiled into the inner module.
    Compiled = "compiled",
    /// Of those, compiled from the host's own Cranelift IR (no pass changed them).
    CompiledFromInput = "compiled_from_input",
    /// Of those, with calls rewritten to call a shared body or a survivor.
    CallsRewrittenInInput = "calls_rewritten_in_input",
    /// Functions lowered from LIR back to Cranelift IR before compiling.
    Lowered = "lowered",
    /// Batches compiled on more than one thread.
    CompiledInParallel = "compiled_in_parallel",
    /// Thunks written as machine code (x86-64, non-PIC), not compiled by Cranelift.
    NativeThunks = "native_thunks",
    /// Thunks made after the fact for merged functions whose address a later batch took.
    LateThunks = "late_thunks",
    /// Compiled functions of earlier flushes lifted again, as stand-ins: a function of a
    /// later batch equal to one merges into it, or alike one (but for constants) may start
    /// a `merge-similar` family with it.
    StandIns = "stand_ins",
    /// Machine-code bytes compiled.
    CodeBytes = "code_bytes",
    /// LIR instructions entering the passes.
    LirInstsIn = "lir_insts_in",
    /// LIR instructions leaving the passes.
    LirInstsOut = "lir_insts_out",
    /// Flushes (`finalize_definitions`, `finish`, `flush`) that compiled something.
    Flushes = "flushes",
    // merge
    /// Functions `merge` merged into an equal function (any way).
    Merged = "merged",
    /// Of those, made aliases of their survivor (no code).
    MergeAliased = "merge.aliased",
    /// Of those, given a thunk (address significant or preemptible).
    MergeThunked = "merge.thunked",
    /// Of those, replaced (local, every call redirected).
    MergeReplaced = "merge.replaced",
    /// Of those, merged into a function an earlier flush compiled.
    MergeIntoFrozen = "merge.into_frozen",
    /// Of those, found equal to an earlier flush's function by its print.
    MergeByPrint = "merge.by_print",
    /// Fingerprints of frozen functions written again because a callee they name merged
    /// since (a caller compiled before its callee).
    MergeRekeyed = "merge.rekeyed",
    /// Structural comparisons `merge` made.
    MergeCompared = "merge.compared",
    /// Rounds of partition refinement over the callees' classes.
    MergeClassesRounds = "merge.classes_rounds",
    // merge-similar
    /// Functions `merge-similar` folded into a shared body.
    MergedSimilar = "merged_similar",
    /// Shared bodies `merge-similar` made.
    SimilarGroups = "similar.groups",
    /// Extra parameters of those bodies.
    SimilarParams = "similar.params",
    /// Members that kept a thunk.
    SimilarThunks = "similar.thunks",
    /// Callers rewritten to call a shared body.
    SimilarCallersRewritten = "similar.callers_rewritten",
    /// Groups refused by the cost model.
    SimilarUnprofitable = "similar.unprofitable",
    /// Functions that joined a family whose shared body an earlier flush compiled.
    SimilarJoined = "similar.joined",
    /// Groups refused for needing too many extra parameters.
    SimilarTooManyParams = "similar.too_many_params",
    // merge-aligned
    /// Functions `merge-aligned` merged into a shared body.
    MergedAligned = "merged_aligned",
    /// Members folded away (callers call the body with their identifier).
    AlignedFolded = "aligned.folded",
    /// Callers rewritten to call an aligned body.
    AlignedCallersRewritten = "aligned.callers_rewritten",
    /// Aligned bodies made.
    AlignedGroups = "aligned.groups",
    /// Of those, of three or four functions.
    AlignedGroups3Plus = "aligned.groups_3plus",
    /// Bodies with an unmatched run of operations.
    AlignedWithUnmatchedRuns = "aligned.with_unmatched_runs",
    /// Bodies of functions whose CFGs differ.
    AlignedWithExtraBlocks = "aligned.with_extra_blocks",
    /// Diamonds branching on the function identifier.
    AlignedDiamonds = "aligned.diamonds",
    /// Bytes the cost model estimates saved.
    AlignedBytesSaved = "aligned.bytes_saved",
    /// Candidate pairs met in the LSH buckets.
    AlignedCandidates = "aligned.candidates",
    /// Pairs aligned.
    AlignedAligned = "aligned.aligned",
    /// Alignments refused by the cost model.
    AlignedUnprofitable = "aligned.unprofitable",
    /// Pairs that could not be aligned.
    AlignedNotAlignable = "aligned.not_alignable",
    /// Refused: a table too large.
    AlignedRejectedTables = "aligned.rejected.tables",
    /// Refused: too many blocks.
    AlignedRejectedBlocks = "aligned.rejected.blocks",
    /// Refused: a block too long.
    AlignedRejectedLongBlock = "aligned.rejected.long_block",
    /// Refused: code generation failed.
    AlignedRejectedCodegen = "aligned.rejected.codegen",
    /// Refused: too little shared.
    AlignedRejectedShare = "aligned.rejected.share",
    /// Refused: the estimate saves no more than what is saved already.
    AlignedRejectedEstimate = "aligned.rejected.estimate",
    /// Refused: the body built saves no more than what is saved already.
    AlignedRejectedSaving = "aligned.rejected.saving",
    /// Refused before aligning: too little in common.
    AlignedRejectedDissimilar = "aligned.rejected.dissimilar",
    /// Functions left alone because the host marked them hot.
    AlignedHot = "aligned.hot",
    /// Functions `merge-aligned` cannot merge.
    AlignedIneligible = "aligned.ineligible",
    // value numbering and dead code
    /// Instructions `lvn` removed.
    LvnRemoved = "lvn.removed",
    /// Loads `lvn` removed.
    LvnLoadsRemoved = "lvn.loads_removed",
    /// Stores `lvn` forwarded to loads.
    LvnForwarded = "lvn.forwarded",
    /// Instructions `gvn` removed.
    GvnRemoved = "gvn.removed",
    /// Instructions `dce` removed.
    DceRemoved = "dce.removed",
}

const N: usize = Counter::ALL.len();

/// Typed counters, per-phase wall times, and counters of passes of the user's own.
///
/// ```
/// # extern crate midend as mergelift;
/// use mergelift::{Counter, Stats};
/// let stats = Stats::default();
/// assert_eq!(stats.get(Counter::Merged), 0);
/// for (counter, n) in stats.counters() {
///     println!("{}: {n}", counter.name());
/// }
/// ```
#[derive(Clone)]
pub struct Stats {
    values: [u64; N],
    /// Which counters were ever added to (they are the ones `counters` lists).
    touched: [bool; N],
    custom: crate::hash::HashMap<&'static str, u64>,
    times: Vec<(String, Duration)>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            values: [0; N],
            touched: [false; N],
            custom: Default::default(),
            times: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats")
            .field(
                "counters",
                &self
                    .counters_by_name()
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
            .field("times", &self.times)
            .finish()
    }
}

impl Stats {
    /// The value of `counter` (0 if it was never added to).
    pub fn get(&self, counter: Counter) -> u64 {
        self.values[counter as usize]
    }

    /// The counters added to so far (those of the passes that ran), in declaration order.
    pub fn counters(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL
            .iter()
            .filter(|&&c| self.touched[c as usize])
            .map(|&c| (c, self.values[c as usize]))
    }

    /// Every counter added to, Mergelift's and custom ones alike, by name, in name order
    /// (what `--stats` prints).
    pub fn counters_by_name(&self) -> impl Iterator<Item = (&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = self
            .counters()
            .map(|(c, n)| (c.name(), n))
            .chain(self.custom.iter().map(|(&k, &n)| (k, n)))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v.into_iter()
    }

    /// The value of the counter `name` of a pass of the user's own, `None` if no pass added
    /// to it.
    pub fn custom(&self, name: &str) -> Option<u64> {
        self.custom.get(name).copied()
    }

    /// Phases in the order they ran, with their wall times (a phase that runs twice
    /// accumulates).
    pub fn times(&self) -> &[(String, Duration)] {
        &self.times
    }

    /// The wall time recorded for `phase`, in milliseconds (0 if it never ran).
    pub fn time_ms(&self, phase: &str) -> f64 {
        self.times
            .iter()
            .find(|(n, _)| n == phase)
            .map_or(0.0, |(_, d)| d.as_secs_f64() * 1e3)
    }

    /// Add `n` to `counter`.
    #[doc(hidden)]
    pub fn add(&mut self, counter: Counter, n: u64) {
        self.values[counter as usize] += n;
        self.touched[counter as usize] = true;
    }

    /// Add `n` to the counter `name` of a pass of the user's own (created at 0 if new).
    pub fn add_custom(&mut self, name: &'static str, n: u64) {
        *self.custom.entry(name).or_insert(0) += n;
    }

    /// Add `d` to the wall time of `phase` (appended to `times` when new).
    #[doc(hidden)]
    pub fn add_time(&mut self, phase: &str, d: Duration) {
        if let Some(e) = self.times.iter_mut().find(|(n, _)| n == phase) {
            e.1 += d;
        } else {
            self.times.push((phase.to_string(), d));
        }
    }

    /// Run `f` and record its wall time under `phase`.
    #[doc(hidden)]
    pub fn time<T>(&mut self, phase: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        let t = Instant::now();
        let r = f(self);
        self.add_time(phase, t.elapsed());
        r
    }

    /// Add `other`'s counters and phase times to these.
    #[doc(hidden)]
    pub fn merge_from(&mut self, other: &Stats) {
        for i in 0..N {
            self.values[i] += other.values[i];
            self.touched[i] |= other.touched[i];
        }
        for (&k, &v) in &other.custom {
            self.add_custom(k, v);
        }
        for (k, d) in &other.times {
            self.add_time(k, *d);
        }
    }

    /// The difference `self - before` (counters and times), for what one flush did:
    /// `before` is what these statistics held earlier.
    pub fn since(&self, before: &Stats) -> Stats {
        self.since_mark(&before.mark())
    }

    /// What the statistics hold now, for [`since_mark`](Stats::since_mark): the counters
    /// and the times, not the phases' names (phases only ever add to the end of `times`).
    #[doc(hidden)]
    pub fn mark(&self) -> StatsMark {
        StatsMark {
            values: self.values,
            custom: self.custom.iter().map(|(&k, &v)| (k, v)).collect(),
            times: self.times.iter().map(|e| e.1).collect(),
        }
    }

    /// The difference between these statistics and what they held at `m`.
    #[doc(hidden)]
    pub fn since_mark(&self, m: &StatsMark) -> Stats {
        let mut d = Stats::default();
        self.since_mark_into(m, &mut d);
        d
    }

    /// `since_mark`, written over `d` (whose room, and phases' names where they are the
    /// same, it reuses: a JIT flushing one function at a time makes one such difference a
    /// flush).
    #[doc(hidden)]
    pub fn since_mark_into(&self, m: &StatsMark, d: &mut Stats) {
        for i in 0..N {
            d.values[i] = self.values[i] - m.values[i];
            d.touched[i] = self.touched[i] && d.values[i] > 0;
        }
        d.custom.clear();
        for (&k, &v) in &self.custom {
            let b = (m.custom.iter()).find(|e| e.0 == k).map_or(0, |e| e.1);
            if v > b {
                d.custom.insert(k, v - b);
            }
        }
        let mut j = 0;
        for (i, (k, t)) in self.times.iter().enumerate() {
            let b = m.times.get(i).copied().unwrap_or(Duration::ZERO);
            if *t > b {
                match d.times.get_mut(j) {
                    Some(e) if e.0 == *k => e.1 = *t - b,
                    _ => {
                        d.times.truncate(j);
                        d.times.push((k.clone(), *t - b));
                    }
                }
                j += 1;
            }
        }
        d.times.truncate(j);
    }
}

/// What [`Stats`] held at one moment ([`Stats::mark`]).
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct StatsMark {
    values: [u64; N],
    custom: smallvec::SmallVec<[(&'static str, u64); 4]>,
    times: smallvec::SmallVec<[Duration; 8]>,
}
