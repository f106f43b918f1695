//! Analyses over LIR: control-flow graph, dominator tree (the call graph lives with the
//! module, `Module::call_graph`).

pub mod cfg;
pub mod domtree;

pub use crate::lir::module::CallGraph;
pub use cfg::Cfg;
pub use domtree::DomTree;
