//! One pass interface, one statistics type, and the pass manager that runs passes in order,
//! times them, counts what they did (as LLVM's `-stats`) and verifies after each in debug
//! builds.

use crate::lir::{verify_function, Module, VerifierErrors};
use crate::passes::{PassKind, PassOptions};
use crate::Error;
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
    pub counters: Counters,
    /// Phases in the order they ran (a phase that runs twice accumulates).
    pub times: Vec<(String, Duration)>,
}

impl Stats {
    pub fn add(&mut self, name: &str, n: u64) {
        // No allocation for a counter that exists (a lazy JIT adds a dozen per function).
        match self.counters.0.get_mut(name) {
            Some(v) => *v += n,
            None => {
                self.counters.0.insert(name.to_string(), n);
            }
        }
    }
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).unwrap_or(0)
    }
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
    pub fn time_ms(&self, phase: &str) -> f64 {
        self.times
            .iter()
            .find(|(n, _)| n == phase)
            .map_or(0.0, |(_, d)| d.as_secs_f64() * 1e3)
    }
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
    fn run(&mut self, module: &mut Module, stats: &mut Stats) -> Result<(), Error>;
}

/// Parse a pass list: pass names separated by commas (`merge,lvn`), or `none` alone for no
/// pass. An empty list or an empty name (`""`, `,`, `merge,,lvn`), an unknown name and `none`
/// beside other names are errors.
pub fn parse_pass_list(list: &str) -> Result<Vec<PassKind>, Error> {
    let list = list.trim();
    if list == "none" {
        return Ok(Vec::new());
    }
    let known = || {
        PassKind::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if list.is_empty() {
        return Err(Error::PassList(format!(
            "empty pass list (give pass names separated by commas, from {}; or `none`)",
            known()
        )));
    }
    let mut out = Vec::new();
    for (k, name) in list.split(',').map(str::trim).enumerate() {
        match name {
            "" => {
                return Err(Error::PassList(format!(
                    "empty pass name at position {} of `{list}`",
                    k + 1
                )))
            }
            "none" => {
                return Err(Error::PassList(format!(
                    "`none` must stand alone, not in `{list}`"
                )))
            }
            _ => out.push(PassKind::parse(name).ok_or_else(|| Error::UnknownPass(name.into()))?),
        }
    }
    Ok(out)
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
    pub fn new() -> Self {
        PassManager {
            passes: Vec::new(),
            verify: cfg!(debug_assertions),
        }
    }

    pub fn add(&mut self, p: Box<dyn Pass>) {
        self.passes.push(p);
    }

    /// Build from a pass list (`parse_pass_list`: `merge,lvn`, or `none`).
    pub fn from_names(list: &str) -> Result<Self, Error> {
        Ok(Self::from_kinds(&parse_pass_list(list)?))
    }

    /// Build from passes given as values.
    pub fn from_kinds(kinds: &[PassKind]) -> Self {
        Self::from_kinds_with(kinds, &PassOptions::default())
    }

    /// Build from passes given as values, with `opts`.
    pub fn from_kinds_with(kinds: &[PassKind], opts: &PassOptions) -> Self {
        let mut pm = PassManager::new();
        for k in kinds {
            pm.add(k.create_with(opts));
        }
        pm
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    pub fn run(&mut self, module: &mut Module, stats: &mut Stats) -> Result<(), Error> {
        for p in &mut self.passes {
            let name = p.name();
            let t = Instant::now();
            p.run(module, stats)?;
            // Bodies a pass removed and left to be freed (`Module::free_removed`).
            module.free_pending();
            stats.add_time(name, t.elapsed());
            if self.verify {
                // The functions the pass may have changed: the open ones.
                let t = Instant::now();
                let mut errors = Vec::new();
                for (_, f) in module.open_functions() {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of the error `parse_pass_list(list)` gives.
    fn list_error(list: &str) -> String {
        match parse_pass_list(list) {
            Ok(kinds) => panic!("`{list}` parsed as {kinds:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn pass_lists() {
        assert_eq!(parse_pass_list("none").unwrap(), []);
        assert_eq!(parse_pass_list(" none ").unwrap(), []);
        assert_eq!(parse_pass_list("merge").unwrap(), [PassKind::Merge]);
        assert_eq!(
            parse_pass_list("merge, lvn,gvn ,dce,merge-similar").unwrap(),
            [
                PassKind::Merge,
                PassKind::Lvn,
                PassKind::Gvn,
                PassKind::Dce,
                PassKind::MergeSimilar
            ]
        );
        assert_eq!(
            parse_pass_list("lvn,lvn").unwrap(),
            [PassKind::Lvn, PassKind::Lvn]
        );
    }

    /// Issue 13: `--passes ''`, `,` and `merge,,lvn` were accepted silently.
    #[test]
    fn empty_pass_lists_and_names_are_errors() {
        let empty = "empty pass list (give pass names separated by commas, from merge, \
                     merge-similar, lvn, gvn, dce; or `none`)";
        assert_eq!(list_error(""), empty);
        assert_eq!(list_error("  "), empty);
        assert_eq!(list_error(","), "empty pass name at position 1 of `,`");
        assert_eq!(
            list_error("merge,,lvn"),
            "empty pass name at position 2 of `merge,,lvn`"
        );
        assert_eq!(
            list_error("merge,"),
            "empty pass name at position 2 of `merge,`"
        );
        assert_eq!(
            list_error(",lvn"),
            "empty pass name at position 1 of `,lvn`"
        );
        assert_eq!(
            list_error("merge, ,lvn"),
            "empty pass name at position 2 of `merge, ,lvn`"
        );
    }

    #[test]
    fn none_must_stand_alone() {
        assert_eq!(
            list_error("none,merge"),
            "`none` must stand alone, not in `none,merge`"
        );
        assert_eq!(
            list_error("merge,none"),
            "`none` must stand alone, not in `merge,none`"
        );
        assert_eq!(
            list_error("none,none"),
            "`none` must stand alone, not in `none,none`"
        );
    }

    #[test]
    fn unknown_pass_names() {
        assert!(matches!(
            parse_pass_list("merge,frob"),
            Err(Error::UnknownPass(n)) if n == "frob"
        ));
        assert!(matches!(
            parse_pass_list("Merge"),
            Err(Error::UnknownPass(n)) if n == "Merge"
        ));
        assert!(matches!(
            PassManager::from_names("merge,,lvn"),
            Err(Error::PassList(_))
        ));
        assert_eq!(
            PassManager::from_names("merge,lvn").unwrap().names(),
            ["merge", "lvn"]
        );
    }
}
