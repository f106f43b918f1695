//! One pass interface, one statistics type, and the pass manager that runs passes in order,
//! times them, counts what they did (as LLVM's `-stats`) and verifies after each in debug
//! builds. (The passes themselves, and the pass manager's constructors from pass names, are
//! in `passes`.)

use crate::error::Error;
use crate::lir::Module;
use crate::state::PassState;
pub use crate::stats::Stats;
use crate::verifier::{verify_function, VerifierErrors};
use std::time::Instant;

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
