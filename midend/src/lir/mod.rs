//! LIR, Mergelift's low-level IR: three-address, load/store, virtual registers in an
//! integer and a float class, eight operand kinds, SSA by convention (phis), dense arenas.

pub mod builder;
pub mod dfg;
pub mod entities;
pub mod function;
pub mod inst;
pub mod layout;
pub mod module;
pub mod operand;
pub mod parse;
pub mod print;
pub mod signature;
pub mod tables;
pub mod thin;
pub mod types;

pub use builder::Builder;
/// A function or symbol name: a string that keeps up to 24 bytes inline (most names fit, so
/// naming a function costs no allocation, and comparing two names reads no other memory).
pub use compact_str::CompactString as Name;
#[doc(hidden)]
pub use dfg::OperandRoom;
pub use entities::*;
pub use function::*;
pub use inst::{effects, Format, InstData, Opcode, MAX_RESULTS};
pub use module::{CallGraph, Module, SymbolData, SymbolKind, SymbolsMut};
pub use operand::{Cond, Imm, MemRef, Operand, OperandIter, Operands, PackedOperand};
pub use parse::{parse_module, ParseError};
pub use print::{module_to_string, write_function, write_inst};
pub use signature::*;
pub use tables::*;
pub use thin::ThinMap;
pub use types::{RegClass, Type};
