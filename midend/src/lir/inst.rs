//! Opcodes, their operand formats and effects, and the per-instruction data record.
//!
//! Instruction data is stored apart from the order of instructions (`Function::insts` vs the
//! per-block lists), as Cranelift separates its DataFlowGraph from its Layout. Operands and
//! results live in per-function pools; an instruction holds ranges into them.

use super::types::Type;

/// The operand shape of an opcode: what the verifier, printer and parser expect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `%d = op.T a` (register or constant).
    Unary,
    /// `%d = op.T a, b` (registers or constants).
    Binary,
    /// `%d = op.T a, b, c`.
    Ternary,
    /// `%d = op.T pred a, b`.
    Compare,
    /// `%d = copy.T src` where src is a register, a constant or a function argument.
    Copy,
    /// `%d = op.T flags <mem>`.
    Load,
    /// `op.T flags <mem>, value`.
    Store,
    /// `%d = op.T <stack object or symbol>`: take an address.
    Addr,
    /// `%d = global_value.T gvN`.
    GlobalValue,
    /// `%d.. = call sigN callee(args..)`; `tail_call` and `try_call` extend it.
    Call,
    /// `%d = phi.T [%r, bb], ..`.
    Phi,
    /// `jump bbN`.
    Jump,
    /// `brif pred a[, b], bbT, bbF`.
    Brif,
    /// `br_table a, bbDefault, [bb..]`.
    BrTable,
    /// `ret a, ..`.
    Return,
    /// `trap code`.
    Trap,
    /// `trapz a, code` / `trapnz a, code`.
    CondTrap,
    /// `%d = exn_handler_addr.T bbN, imm`.
    ExnHandlerAddr,
    /// An instruction LIR does not model: its Cranelift opcode name, immediates and effects
    /// ride in `Function::opaques`; operands are registers.
    Opaque,
}

/// Effect bits of an opcode (opaque instructions carry their own).
pub mod effects {
    /// Reads memory.
    pub const LOAD: u8 = 1;
    /// Writes memory.
    pub const STORE: u8 = 2;
    /// May trap.
    pub const TRAP: u8 = 4;
    /// Other side effects (calls, fences, I/O); never removed, never value-numbered.
    pub const SIDE: u8 = 8;
    /// Ends a block.
    pub const TERM: u8 = 16;
    /// Operands may be swapped.
    pub const COMM: u8 = 32;
    /// Call-like (seed 002's `isCall`).
    pub const CALL: u8 = 64;
}

macro_rules! opcodes {
    ($($variant:ident = $name:literal, $fmt:ident, $eff:expr;)*) => {
        /// An LIR opcode.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode { $($variant),* }

        const ALL_OPCODES: &[Opcode] = &[$(Opcode::$variant),*];
        const NUM_OPCODES: usize = ALL_OPCODES.len();
        // Fixed-size tables indexed by the `repr(u8)` discriminant: no bounds check survives
        // optimisation, so the hot `format`/`effects` queries are one load each.
        const NAMES: [&str; NUM_OPCODES] = [$($name),*];
        const FORMATS: [Format; NUM_OPCODES] = [$(Format::$fmt),*];
        const EFFECTS: [u8; NUM_OPCODES] = [$($eff),*];
        const PURE_VALUE: [bool; NUM_OPCODES] = [$(pure_value(Format::$fmt, $eff)),*];
    };
}

/// An ALU instruction, copy or compare that reads and writes no memory and has no other
/// effect (it may trap): `Opcode::is_pure_value`.
const fn pure_value(format: Format, eff: u8) -> bool {
    matches!(
        format,
        Format::Unary | Format::Binary | Format::Ternary | Format::Compare | Format::Copy
    ) && eff & (LOAD | STORE | SIDE | CALL) == 0
}

use effects::*;
const NONE: u8 = 0;

opcodes! {
    // Integer arithmetic and bit operations.
    Add = "add", Binary, COMM;
    Sub = "sub", Binary, NONE;
    Mul = "mul", Binary, COMM;
    Sdiv = "sdiv", Binary, TRAP;
    Udiv = "udiv", Binary, TRAP;
    Srem = "srem", Binary, TRAP;
    Urem = "urem", Binary, TRAP;
    Umulhi = "umulhi", Binary, COMM;
    Smulhi = "smulhi", Binary, COMM;
    Smin = "smin", Binary, COMM;
    Smax = "smax", Binary, COMM;
    Umin = "umin", Binary, COMM;
    Umax = "umax", Binary, COMM;
    And = "and", Binary, COMM;
    Or = "or", Binary, COMM;
    Xor = "xor", Binary, COMM;
    Shl = "shl", Binary, NONE;
    Ushr = "ushr", Binary, NONE;
    Sshr = "sshr", Binary, NONE;
    Rotl = "rotl", Binary, NONE;
    Rotr = "rotr", Binary, NONE;
    Neg = "neg", Unary, NONE;
    Not = "not", Unary, NONE;
    Abs = "abs", Unary, NONE;
    Clz = "clz", Unary, NONE;
    Ctz = "ctz", Unary, NONE;
    Cls = "cls", Unary, NONE;
    Popcnt = "popcnt", Unary, NONE;
    Bswap = "bswap", Unary, NONE;
    Bitrev = "bitrev", Unary, NONE;
    // Float arithmetic.
    Fadd = "fadd", Binary, COMM;
    Fsub = "fsub", Binary, NONE;
    Fmul = "fmul", Binary, COMM;
    Fdiv = "fdiv", Binary, NONE;
    Fmin = "fmin", Binary, COMM;
    Fmax = "fmax", Binary, COMM;
    Fcopysign = "fcopysign", Binary, NONE;
    Fneg = "fneg", Unary, NONE;
    Fabs = "fabs", Unary, NONE;
    Sqrt = "sqrt", Unary, NONE;
    Ceil = "ceil", Unary, NONE;
    Floor = "floor", Unary, NONE;
    Trunc = "trunc", Unary, NONE;
    Nearest = "nearest", Unary, NONE;
    Fma = "fma", Ternary, NONE;
    // Conversions.
    Uextend = "uextend", Unary, NONE;
    Sextend = "sextend", Unary, NONE;
    Ireduce = "ireduce", Unary, NONE;
    Fpromote = "fpromote", Unary, NONE;
    Fdemote = "fdemote", Unary, NONE;
    FcvtToSint = "fcvt_to_sint", Unary, TRAP;
    FcvtToUint = "fcvt_to_uint", Unary, TRAP;
    FcvtToSintSat = "fcvt_to_sint_sat", Unary, NONE;
    FcvtToUintSat = "fcvt_to_uint_sat", Unary, NONE;
    FcvtFromSint = "fcvt_from_sint", Unary, NONE;
    FcvtFromUint = "fcvt_from_uint", Unary, NONE;
    Bmask = "bmask", Unary, NONE;
    // Compare and select.
    Icmp = "icmp", Compare, NONE;
    Fcmp = "fcmp", Compare, NONE;
    Select = "select", Ternary, NONE;
    SelectSpectreGuard = "select_spectre_guard", Ternary, NONE;
    // Moves and addresses.
    Copy = "copy", Copy, NONE;
    StackAddr = "stack_addr", Addr, NONE;
    SymbolValue = "symbol_value", Addr, NONE;
    FuncAddr = "func_addr", Addr, NONE;
    GlobalValue = "global_value", GlobalValue, NONE;
    TlsValue = "tls_value", GlobalValue, NONE;
    // Memory.
    Load = "load", Load, LOAD | TRAP;
    Uload8 = "uload8", Load, LOAD | TRAP;
    Sload8 = "sload8", Load, LOAD | TRAP;
    Uload16 = "uload16", Load, LOAD | TRAP;
    Sload16 = "sload16", Load, LOAD | TRAP;
    Uload32 = "uload32", Load, LOAD | TRAP;
    Sload32 = "sload32", Load, LOAD | TRAP;
    Store = "store", Store, STORE | TRAP;
    Istore8 = "istore8", Store, STORE | TRAP;
    Istore16 = "istore16", Store, STORE | TRAP;
    Istore32 = "istore32", Store, STORE | TRAP;
    // Calls.
    Call = "call", Call, CALL | LOAD | STORE | TRAP | SIDE;
    TailCall = "tail_call", Call, CALL | LOAD | STORE | TRAP | SIDE | TERM;
    TryCall = "try_call", Call, CALL | LOAD | STORE | TRAP | SIDE | TERM;
    // Control flow.
    Phi = "phi", Phi, NONE;
    Jump = "jump", Jump, TERM;
    Brif = "brif", Brif, TERM;
    BrTable = "br_table", BrTable, TERM;
    Ret = "ret", Return, TERM;
    Trap = "trap", Trap, TRAP | SIDE | TERM;
    Trapz = "trapz", CondTrap, TRAP | SIDE;
    Trapnz = "trapnz", CondTrap, TRAP | SIDE;
    ExnHandlerAddr = "exn_handler_addr", ExnHandlerAddr, NONE;
    Opaque = "opaque", Opaque, NONE;
}

impl Opcode {
    /// The instructions with a second auxiliary word (`Function::aux2`): `try_call` (its
    /// exception table) and `opaque` (its memory flags plus one, or 0).
    #[inline(always)]
    pub fn has_aux2(self) -> bool {
        matches!(self, Opcode::TryCall | Opcode::Opaque)
    }
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }
    #[inline]
    pub fn format(self) -> Format {
        FORMATS[self as usize]
    }
    /// Static effect bits; for `opaque` see `Function::inst_effects`.
    #[inline]
    pub fn effects(self) -> u8 {
        EFFECTS[self as usize]
    }
    #[inline]
    pub fn is_terminator(self) -> bool {
        self.effects() & TERM != 0
    }
    #[inline]
    pub fn is_commutative(self) -> bool {
        self.effects() & COMM != 0
    }
    #[inline]
    pub fn is_call(self) -> bool {
        self.effects() & CALL != 0
    }
    #[inline]
    pub fn is_load(self) -> bool {
        self.format() == Format::Load
    }
    #[inline]
    pub fn is_store(self) -> bool {
        self.format() == Format::Store
    }
    /// A unary, binary or ternary ALU operation, copy or compare with no memory access and
    /// no side effect (it may trap): what value numbering keys most often.
    #[inline]
    pub fn is_pure_value(self) -> bool {
        PURE_VALUE[self as usize]
    }
    /// Bytes accessed by a load or store of value type `ty` (narrow forms access less).
    pub fn access_bytes(self, ty: Type) -> u32 {
        match self {
            Opcode::Uload8 | Opcode::Sload8 | Opcode::Istore8 => 1,
            Opcode::Uload16 | Opcode::Sload16 | Opcode::Istore16 => 2,
            Opcode::Uload32 | Opcode::Sload32 | Opcode::Istore32 => 4,
            _ => ty.bytes(),
        }
    }
    pub fn parse(s: &str) -> Option<Opcode> {
        NAMES.iter().position(|n| *n == s).map(|i| ALL_OPCODES[i])
    }
    pub fn all() -> &'static [Opcode] {
        ALL_OPCODES
    }
}

/// A range in one of a function's pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PoolRange {
    pub start: u32,
    pub len: u32,
}

impl PoolRange {
    pub fn range(self) -> core::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// The most results one instruction has (and the most return values a signature has): the
/// count is one byte of `InstData`. The lifter and the LIR parser reject more.
pub const MAX_RESULTS: usize = u8::MAX as usize;

/// The data of one instruction: 20 bytes.
///
/// `aux` depends on the format: memory flags (`MemFlagsRef`) for loads and stores, the
/// signature (`SigRef`) for calls, the trap code for traps, the global value for
/// `global_value`, the opaque record for `opaque`. Unused fields are 0. The two opcodes
/// that need a second word (`Opcode::has_aux2`: a `try_call`'s exception table, an opaque
/// instruction's memory flags) keep it in the operand pool (`Function::aux2`). `results()` is a range of `Function::result_pool`, except
/// for one result, whose register index is `results().start` itself (read results with
/// `Function::results`); `operands()` is a range of `Function::operand_pool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InstData {
    pub opcode: Opcode,
    n_results: u8,
    /// Controlling type: the result type, the stored type, or VOID.
    pub ty: Type,
    pub aux: u32,
    results_start: u32,
    operands_start: u32,
    n_operands: u32,
}

const _: () = assert!(core::mem::size_of::<InstData>() == 20);

impl InstData {
    /// An instruction with these results and operands (ranges as `results()` and
    /// `operands()` describe them; at most `MAX_RESULTS` results).
    #[inline]
    pub fn new(
        opcode: Opcode,
        ty: Type,
        aux: u32,
        results: PoolRange,
        operands: PoolRange,
    ) -> Self {
        assert!(
            results.len as usize <= MAX_RESULTS,
            "an instruction with {} results (LIR allows {MAX_RESULTS})",
            results.len
        );
        InstData {
            opcode,
            n_results: results.len as u8,
            ty,
            aux,
            results_start: results.start,
            operands_start: operands.start,
            n_operands: operands.len,
        }
    }

    /// The results: a range of `Function::result_pool`, or for one result the register index
    /// itself in `start`.
    #[inline(always)]
    pub fn results(&self) -> PoolRange {
        PoolRange {
            start: self.results_start,
            len: self.n_results as u32,
        }
    }

    /// The operands: a range of `Function::operand_pool`.
    #[inline(always)]
    pub fn operands(&self) -> PoolRange {
        PoolRange {
            start: self.operands_start,
            len: self.n_operands,
        }
    }

    #[inline]
    pub fn set_operands(&mut self, r: PoolRange) {
        self.operands_start = r.start;
        self.n_operands = r.len;
    }

    /// The register index of the only result (`results().len == 1`), or the start of the
    /// results' range in `result_pool`.
    #[inline(always)]
    pub(crate) fn results_start_ref(&self) -> &u32 {
        &self.results_start
    }
}
