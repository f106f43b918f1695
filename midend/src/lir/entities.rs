//! Entity references: every LIR object is a `u32` index into a dense arena, as in Cranelift.

use cranelift_entity::entity_impl;

/// A virtual register (`%vr3`). `repr(transparent)`: an instruction's only result is kept in
/// its `InstData` as a bare index and read back as a `Reg` (`Function::results`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Reg(u32);
entity_impl!(Reg, "%vr");

/// A basic block (`bb2`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(u32);
entity_impl!(Block, "bb");

/// An instruction (data lives in `Function::insts`, order in the block's list).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inst(u32);
entity_impl!(Inst, "inst");

/// A stack object of a function (`stack_obj.1`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackObj(u32);
entity_impl!(StackObj, "stack_obj.");

/// A module-level external symbol: a function (defined here or imported) or global data.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(u32);
entity_impl!(Symbol, "sym");

/// A function defined in a module.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(u32);
entity_impl!(FuncId, "func");

/// A call signature of a function (`sig0`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SigRef(u32);
entity_impl!(SigRef, "sig");

/// An alias region of a function (`region0`), carried from Cranelift memory flags.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region(u32);
entity_impl!(Region, "region");

/// A global value of a function (`gv0`): vmctx, loads from it, symbols.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GlobalRef(u32);
entity_impl!(GlobalRef, "gv");

/// Side data of an opaque instruction (`Function::opaques`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpaqueRef(u32);
entity_impl!(OpaqueRef, "opq");

/// An exception table of a `try_call` (`Function::exn_tables`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExnTable(u32);
entity_impl!(ExnTable, "exn");

/// Memory flags interned in a function (`Function::memflags`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemFlagsRef(u32);
entity_impl!(MemFlagsRef, "mf");
