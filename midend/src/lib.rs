//! Mergelift's mid-end: the LIR (seed 002), its analyses, and the passes that run over it
//! (MergeFunctions, local and global value numbering, dead-code removal). It does not depend
//! on Cranelift's code generator: `jit-driver` is the bridge.

#![deny(missing_docs)]

pub mod analysis;
mod error;
pub mod hash;
pub mod lir;
pub mod mem;
pub mod pass;
pub mod passes;
pub mod state;
pub mod verifier;

pub use error::Error;
pub use pass::{Counters, Pass, PassManager, Stats};
pub use passes::{parse_pass_list, PassKind, PassOptions};
pub use state::PassState;
