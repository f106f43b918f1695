//! Mergelift's mid-end: the LIR (a three-address, load/store IR), its analyses, and the
//! passes that run over it (LLVM's MergeFunctions, local and global value numbering,
//! dead-code removal). It does not depend on Cranelift's code generator: `jit-driver` is the
//! bridge.
//!
//! # Writing a pass
//!
//! A pass is a [`Pass`]: it changes the *open* functions of a [`lir::Module`] (those no
//! earlier batch compiled) and reads or records what passes share in the driver's
//! [`PassState`]: merge records, call rewrites, options. The [`PassManager`] runs passes in
//! order, frees what they removed, and verifies after each in debug builds.
//!
//! ```
//! use midend::lir::{parse_module, Module};
//! use midend::{Error, Pass, PassManager, PassState, Stats};
//!
//! /// Counts the instructions of the functions passes may change.
//! struct CountInsts;
//!
//! impl Pass for CountInsts {
//!     fn name(&self) -> &'static str {
//!         "count-insts"
//!     }
//!     fn run(&mut self, m: &mut Module, state: &mut PassState, stats: &mut Stats) -> Result<(), Error> {
//!         let n: usize = state.open_functions(m).map(|(_, f)| f.inst_count()).sum();
//!         stats.add_custom("count-insts.insts", n as u64);
//!         Ok(())
//!     }
//! }
//!
//! let body = "bb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = add.i64 %vr0, 1\n    ret %vr1\n}\n";
//! let text = format!(
//!     "function @f(i64) -> i64 system_v export {{\n{body}\nfunction @g(i64) -> i64 system_v export {{\n{body}"
//! );
//! let mut m = parse_module(&text).unwrap();
//! let mut pm = PassManager::from_names("merge").unwrap();
//! pm.add(Box::new(CountInsts));
//! let (mut state, mut stats) = (PassState::default(), Stats::default());
//! pm.run(&mut m, &mut state, &mut stats).unwrap();
//! // `g` merged into `f` (an alias): one function of three instructions is left to count.
//! assert_eq!(state.merges.len(), 1);
//! assert_eq!(stats.custom("count-insts.insts"), Some(3));
//! ```

#![deny(missing_docs)]

pub mod analysis;
mod error;
pub mod hash;
pub mod lir;
pub mod pass;
pub mod passes;
pub mod state;
pub mod stats;
pub mod verifier;

pub use error::Error;
pub use pass::{Pass, PassManager};
pub use passes::{parse_pass_list, PassKind, PassOptions};
pub use state::PassState;
pub use stats::{Counter, Stats};
