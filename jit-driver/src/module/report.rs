//! What one flush did ([`FlushReport`]), and the `log` events of a flush (target
//! `mergelift`): at `debug`, each merge decision and a summary of the flush; at `warn`, each
//! function passed through unmerged.

use super::{MergeModule, State};
use cranelift_module::{FuncId, Module};
use midend::{Counter, Stats};
use std::time::{Duration, Instant};

/// What the last flush (`finalize_definitions`, `finish`, `flush`) did with the functions
/// the host defined since the one before ([`MergeModule::last_flush`]).
///
/// ```
/// use mergelift::{Counter, FlushReport};
/// fn show(r: &FlushReport) {
///     println!(
///         "{} functions: {} merged, {} compiled ({} bytes), {} passed through, in {:?}",
///         r.defined.len(),
///         r.merged.len(),
///         r.stats.get(Counter::Compiled),
///         r.stats.get(Counter::CodeBytes),
///         r.passed_through.len(),
///         r.time,
///     );
/// }
/// ```
#[derive(Clone, Debug, Default)]
pub struct FlushReport {
    /// The host's functions the flush took (defined since the flush before), in definition
    /// order.
    pub defined: Vec<FuncId>,
    /// Of those, the ones merged into another function (no code of their own, or a thunk):
    /// [`MergeModule::merged_into`] names where each went.
    pub merged: Vec<FuncId>,
    /// Of those, the ones compiled as they came, never merged, because Mergelift cannot
    /// represent them ([`MergeModule::passed_through`] says why).
    pub passed_through: Vec<FuncId>,
    /// Of those, the ones that failed to compile (the flush's error names them; they are
    /// undefined again).
    pub failed: Vec<FuncId>,
    /// This flush's counters and phase times alone (`stats.get(Counter::Compiled)`: functions
    /// and thunks compiled; `stats.times()`: lift, each pass, lower, compile).
    pub stats: Stats,
    /// The flush's wall time.
    pub time: Duration,
}

/// What a report needs from before the flush.
pub(super) struct Before {
    stats: midend::stats::StatsMark,
    defined: Vec<FuncId>,
    passed: usize,
    /// How many flushes there were.
    flushes: u64,
    at: Instant,
}

impl<M: Module> MergeModule<M> {
    /// Before a flush: what it starts from.
    pub(super) fn report_begin(&mut self) -> Before {
        let mut defined = std::mem::take(&mut self.report_ids);
        defined.clear();
        defined.extend(self.core.pending.iter().map(|(id, _)| *id));
        Before {
            stats: self.core.stats.mark(),
            defined,
            passed: self.core.passed_through.len(),
            flushes: self.core.stats.get(Counter::Flushes),
            at: Instant::now(),
        }
    }

    /// After a flush: its report, and its log events.
    pub(super) fn report_end(&mut self, before: Before) {
        let did =
            !before.defined.is_empty() || self.core.stats.get(Counter::Flushes) > before.flushes;
        // (A flush with nothing to do leaves the report of the last that had.)
        if !did {
            self.report_ids = before.defined;
            return;
        }
        let core = &self.core;
        // (The last report's room, reused.)
        let mut r = std::mem::take(&mut self.last_flush);
        r.time = before.at.elapsed();
        core.stats.since_mark_into(&before.stats, &mut r.stats);
        r.merged.clear();
        r.failed.clear();
        for &id in &before.defined {
            if core.merged.get(id).copied().flatten().is_some() {
                r.merged.push(id);
            } else if core.state.get(id) == Some(&State::Declared) {
                r.failed.push(id);
            }
        }
        let passed = &core.passed_through[before.passed.min(core.passed_through.len())..];
        r.passed_through.clear();
        r.passed_through.extend(passed.iter().map(|(id, _)| *id));
        self.report_ids = std::mem::replace(&mut r.defined, before.defined);
        if log::log_enabled!(target: "mergelift", log::Level::Warn) {
            for (id, why) in passed {
                log::warn!(
                    target: "mergelift",
                    "mergelift: {} passed through unmerged: {why}",
                    self.func_name(*id)
                );
            }
        }
        if log::log_enabled!(target: "mergelift", log::Level::Debug) {
            for &g in &r.merged {
                let m = core.merged[g].expect("merged");
                let into = match core.host.host(m.into) {
                    Some(_) => self.func_name(m.into),
                    None => "a shared body".to_string(),
                };
                log::debug!(
                    target: "mergelift",
                    "mergelift: {} merged into {into} ({:?}, by {})",
                    self.func_name(g),
                    m.kind,
                    m.by.name()
                );
            }
            log::debug!(
                    target: "mergelift",
                "mergelift: flush of {} functions: {} merged, {} compiled ({} bytes), {} passed \
                 through, {} failed, in {:.3} ms",
                r.defined.len(),
                r.merged.len(),
                r.stats.get(Counter::Compiled),
                r.stats.get(Counter::CodeBytes),
                r.passed_through.len(),
                r.failed.len(),
                r.time.as_secs_f64() * 1e3
            );
        }
        // The host's ids.
        for ids in [
            &mut r.defined,
            &mut r.merged,
            &mut r.passed_through,
            &mut r.failed,
        ] {
            for id in ids.iter_mut() {
                *id = self.core.host.host(*id).unwrap_or(*id);
            }
        }
        self.last_flush = r;
    }

    /// What the last flush did: the functions it took, merged, passed through and failed,
    /// with its own counters and times (empty before the first flush).
    pub fn last_flush(&self) -> &FlushReport {
        &self.last_flush
    }
}

/// A function of Mergelift's own (a shared body), for the tools' reports.
#[doc(hidden)]
pub struct OwnFunction {
    /// Its name in the inner module (`.LfnN`).
    pub name: String,
    /// Its machine-code bytes, if compiled.
    pub code_bytes: Option<usize>,
    /// Its survivor's name, how and by what, if it was merged in turn.
    pub merged: Option<(String, midend::state::MergeKind, midend::state::MergedBy)>,
}

impl<M: Module> MergeModule<M> {
    /// The name of the function whose code host function `id` uses, when it was merged: a
    /// function the host declared, or a shared body as the inner module names it (`.LfnN`).
    /// For the tools' reports of families.
    #[doc(hidden)]
    pub fn survivor_name(&self, id: FuncId) -> Option<String> {
        let inner = self.core.host.inner(id)?;
        let m = self.core.merged.get(inner).copied().flatten()?;
        Some(self.func_name(m.into))
    }

    /// The functions of Mergelift's own (shared bodies), out of the host's sight: for the
    /// tools' reports of what the passes made.
    #[doc(hidden)]
    pub fn own_functions(&self) -> Vec<OwnFunction> {
        let core = &self.core;
        (core.state.keys())
            .filter(|&id| core.host.host(id).is_none())
            .map(|id| OwnFunction {
                name: self.func_name(id),
                code_bytes: (core.state[id] == State::Compiled)
                    .then(|| core.code_bytes[id] as usize),
                merged: core
                    .merged
                    .get(id)
                    .copied()
                    .flatten()
                    .map(|m| (self.func_name(m.into), m.kind, m.by)),
            })
            .collect()
    }
}
