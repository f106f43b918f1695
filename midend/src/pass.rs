//! One pass interface, one statistics type, and the pass manager that runs passes in order,
//! times them, counts what they did (as LLVM's `-stats`) and verifies after each in debug
//! builds. (The passes themselves, and the pass manager's constructors from pass names, are
//! in `passes`.)

use crate::error::Error;
use crate::lir::Module;
use crate::state::PassState;
use crate::verifier::{verify_function, VerifierErrors};
use std::time::{Duration, Instant};

/// Named counters, read in name order (`for (name, n) in &stats.counters`). Kept in a hash
/// table: a lazy JIT adds a few dozen counters per function it defines, and a search among
/// sorted strings cost it about a microsecond each time.
#[derive(Clone, Default)]
pub struct Counters(crate::hash::HashMap<String, u64>);

impl Counters {
    /// The value of counter `name` (0 if it was never added to).
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }
    /// The counters in name order.
    pub fn iter(&self) -> std::vec::IntoIter<(&String, &u64)> {
        let mut v: Vec<(&String, &u64)> = self.0.iter().collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v.into_iter()
    }
    /// How many counters there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// No counter yet.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a Counters {
    type Item = (&'a String, &'a u64);
    type IntoIter = std::vec::IntoIter<(&'a String, &'a u64)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Named counters and per-phase wall times.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Named counters (what the passes and the driver did).
    pub counters: Counters,
    /// Phases in the order they ran (a phase that runs twice accumulates).
    pub times: Vec<(String, Duration)>,
}

impl Stats {
    /// Add `n` to counter `name` (created at 0 if it does not exist).
    pub fn add(&mut self, name: &str, n: u64) {
        // No allocation for a counter that exists (a lazy JIT adds a dozen per function).
        match self.counters.0.get_mut(name) {
            Some(v) => *v += n,
            None => {
                self.counters.0.insert(name.to_string(), n);
            }
        }
    }
    /// The value of counter `name` (0 if it was never added to).
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).unwrap_or(0)
    }
    /// Add `d` to the wall time of `phase` (appended to `times` when new).
    pub fn add_time(&mut self, phase: &str, d: Duration) {
        if let Some(e) = self.times.iter_mut().find(|(n, _)| n == phase) {
            e.1 += d;
        } else {
            self.times.push((phase.to_string(), d));
        }
    }
    /// Run `f` and record its wall time under `phase`.
    pub fn time<T>(&mut self, phase: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        let t = Instant::now();
        let r = f(self);
        self.add_time(phase, t.elapsed());
        r
    }
    /// The wall time recorded for `phase`, in milliseconds (0 if it never ran).
    pub fn time_ms(&self, phase: &str) -> f64 {
        self.times
            .iter()
            .find(|(n, _)| n == phase)
            .map_or(0.0, |(_, d)| d.as_secs_f64() * 1e3)
    }
    /// Add `other`'s counters and phase times to these.
    pub fn merge_from(&mut self, other: &Stats) {
        for (k, v) in &other.counters {
            self.add(k, *v);
        }
        for (k, d) in &other.times {
            self.add_time(k, *d);
        }
    }
}

/// A transformation over a whole module.
pub trait Pass: Send {
    /// The name used in `--passes` and in statistics.
    fn name(&self) -> &'static str;
    /// Run over the open functions of `module` (`PassState::open_functions`), reading and
    /// recording in `state` what passes share.
    fn run(
        &mut self,
        module: &mut Module,
        state: &mut PassState,
        stats: &mut Stats,
    ) -> Result<(), Error>;
}

/// Runs passes in order.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    /// Verify the module after every pass (on by default in debug builds).
    pub verify: bool,
}

impl Default for PassManager {
    fn default() -> Self {
        Self::new()
    }
}

impl PassManager {
    /// An empty pass manager (verifying after each pass in debug builds).
    pub fn new() -> Self {
        PassManager {
            passes: Vec::new(),
            verify: cfg!(debug_assertions),
        }
    }

    /// Run `p` after the passes added before it (a pass of the caller's own, say).
    pub fn add(&mut self, p: Box<dyn Pass>) {
        self.passes.push(p);
    }

    /// The names of the passes, in the order they run.
    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Run the passes in order over `module`, with the state they share.
    pub fn run(
        &mut self,
        module: &mut Module,
        state: &mut PassState,
        stats: &mut Stats,
    ) -> Result<(), Error> {
        for p in &mut self.passes {
            let name = p.name();
            let t = Instant::now();
            p.run(module, state, stats)?;
            // Bodies a pass removed and left to be freed (`PassState::free_removed`).
            state.free_pending(module);
            stats.add_time(name, t.elapsed());
            if self.verify {
                // The functions the pass may have changed: the open ones.
                let t = Instant::now();
                let mut errors = Vec::new();
                for (_, f) in state.open_functions(module) {
                    if let Err(e) = verify_function(module, f, true) {
                        errors.extend(e.0);
                    }
                }
                stats.add_time("verify", t.elapsed());
                if !errors.is_empty() {
                    return Err(Error::Verify {
                        after: name.to_string(),
                        errors: VerifierErrors(errors),
                    });
                }
            }
        }
        Ok(())
    }
}
