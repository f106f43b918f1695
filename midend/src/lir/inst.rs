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
    /// Call-like (a call, or an instruction that behaves as one).
    pub const CALL: u8 = 64;
}

macro_rules! opcodes {
    ($($(#[$attr:meta])* $variant:ident = $name:literal, $fmt:ident, $eff:expr;)*) => {
        /// An LIR opcode.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode { $($(#[$attr])* $variant),* }

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
    /// Integer addition (wrapping).
    Add = "add", Binary, COMM;
    /// Integer subtraction (wrapping).
    Sub = "sub", Binary, NONE;
    /// Integer multiplication (wrapping).
    Mul = "mul", Binary, COMM;
    /// Signed integer division (traps on zero and on overflow).
    Sdiv = "sdiv", Binary, TRAP;
    /// Unsigned integer division (traps on zero).
    Udiv = "udiv", Binary, TRAP;
    /// Signed integer remainder (traps on zero).
    Srem = "srem", Binary, TRAP;
    /// Unsigned integer remainder (traps on zero).
    Urem = "urem", Binary, TRAP;
    /// High half of an unsigned integer multiplication.
    Umulhi = "umulhi", Binary, COMM;
    /// High half of a signed integer multiplication.
    Smulhi = "smulhi", Binary, COMM;
    /// Signed integer minimum.
    Smin = "smin", Binary, COMM;
    /// Signed integer maximum.
    Smax = "smax", Binary, COMM;
    /// Unsigned integer minimum.
    Umin = "umin", Binary, COMM;
    /// Unsigned integer maximum.
    Umax = "umax", Binary, COMM;
    /// Bitwise and.
    And = "and", Binary, COMM;
    /// Bitwise or.
    Or = "or", Binary, COMM;
    /// Bitwise exclusive or.
    Xor = "xor", Binary, COMM;
    /// Shift left.
    Shl = "shl", Binary, NONE;
    /// Logical (unsigned) shift right.
    Ushr = "ushr", Binary, NONE;
    /// Arithmetic (signed) shift right.
    Sshr = "sshr", Binary, NONE;
    /// Rotate left.
    Rotl = "rotl", Binary, NONE;
    /// Rotate right.
    Rotr = "rotr", Binary, NONE;
    /// Integer negation (wrapping).
    Neg = "neg", Unary, NONE;
    /// Bitwise not.
    Not = "not", Unary, NONE;
    /// Integer absolute value.
    Abs = "abs", Unary, NONE;
    /// Count of leading zero bits.
    Clz = "clz", Unary, NONE;
    /// Count of trailing zero bits.
    Ctz = "ctz", Unary, NONE;
    /// Count of leading sign bits (not counting the sign bit itself).
    Cls = "cls", Unary, NONE;
    /// Count of one bits.
    Popcnt = "popcnt", Unary, NONE;
    /// Byte order reversal.
    Bswap = "bswap", Unary, NONE;
    /// Bit order reversal.
    Bitrev = "bitrev", Unary, NONE;
    // Float arithmetic.
    /// Float addition.
    Fadd = "fadd", Binary, COMM;
    /// Float subtraction.
    Fsub = "fsub", Binary, NONE;
    /// Float multiplication.
    Fmul = "fmul", Binary, COMM;
    /// Float division.
    Fdiv = "fdiv", Binary, NONE;
    /// Float minimum.
    Fmin = "fmin", Binary, COMM;
    /// Float maximum.
    Fmax = "fmax", Binary, COMM;
    /// The first operand with the sign of the second.
    Fcopysign = "fcopysign", Binary, NONE;
    /// Float negation.
    Fneg = "fneg", Unary, NONE;
    /// Float absolute value.
    Fabs = "fabs", Unary, NONE;
    /// Float square root.
    Sqrt = "sqrt", Unary, NONE;
    /// Float rounding toward positive infinity.
    Ceil = "ceil", Unary, NONE;
    /// Float rounding toward negative infinity.
    Floor = "floor", Unary, NONE;
    /// Float rounding toward zero.
    Trunc = "trunc", Unary, NONE;
    /// Float rounding to nearest, ties to even.
    Nearest = "nearest", Unary, NONE;
    /// Fused multiply-add: `a * b + c`, rounded once.
    Fma = "fma", Ternary, NONE;
    // Conversions.
    /// Zero-extension to a wider integer type.
    Uextend = "uextend", Unary, NONE;
    /// Sign-extension to a wider integer type.
    Sextend = "sextend", Unary, NONE;
    /// Truncation to a narrower integer type.
    Ireduce = "ireduce", Unary, NONE;
    /// Conversion to a wider float type.
    Fpromote = "fpromote", Unary, NONE;
    /// Conversion to a narrower float type.
    Fdemote = "fdemote", Unary, NONE;
    /// Float to signed integer (traps on NaN and out-of-range values).
    FcvtToSint = "fcvt_to_sint", Unary, TRAP;
    /// Float to unsigned integer (traps on NaN and out-of-range values).
    FcvtToUint = "fcvt_to_uint", Unary, TRAP;
    /// Float to signed integer, saturating (NaN gives 0).
    FcvtToSintSat = "fcvt_to_sint_sat", Unary, NONE;
    /// Float to unsigned integer, saturating (NaN gives 0).
    FcvtToUintSat = "fcvt_to_uint_sat", Unary, NONE;
    /// Signed integer to float.
    FcvtFromSint = "fcvt_from_sint", Unary, NONE;
    /// Unsigned integer to float.
    FcvtFromUint = "fcvt_from_uint", Unary, NONE;
    /// All ones if the operand is nonzero, else zero.
    Bmask = "bmask", Unary, NONE;
    // Compare and select.
    /// Integer comparison under a predicate: 1 if it holds, else 0.
    Icmp = "icmp", Compare, NONE;
    /// Float comparison under a predicate: 1 if it holds, else 0.
    Fcmp = "fcmp", Compare, NONE;
    /// `a` if the condition is nonzero, else `b`.
    Select = "select", Ternary, NONE;
    /// A `select` that code generation must not turn into a branch (Spectre guard).
    SelectSpectreGuard = "select_spectre_guard", Ternary, NONE;
    // Moves and addresses.
    /// Copy of a register, a constant or a function argument.
    Copy = "copy", Copy, NONE;
    /// Address of a stack object plus an offset.
    StackAddr = "stack_addr", Addr, NONE;
    /// Address of a data symbol plus an offset.
    SymbolValue = "symbol_value", Addr, NONE;
    /// Address of a function.
    FuncAddr = "func_addr", Addr, NONE;
    /// Value of a Cranelift global value that LIR does not model as a symbol.
    GlobalValue = "global_value", GlobalValue, NONE;
    /// Address of a thread-local global value.
    TlsValue = "tls_value", GlobalValue, NONE;
    // Memory.
    /// Load of the controlling type.
    Load = "load", Load, LOAD | TRAP;
    /// Load of 8 bits, zero-extended.
    Uload8 = "uload8", Load, LOAD | TRAP;
    /// Load of 8 bits, sign-extended.
    Sload8 = "sload8", Load, LOAD | TRAP;
    /// Load of 16 bits, zero-extended.
    Uload16 = "uload16", Load, LOAD | TRAP;
    /// Load of 16 bits, sign-extended.
    Sload16 = "sload16", Load, LOAD | TRAP;
    /// Load of 32 bits, zero-extended.
    Uload32 = "uload32", Load, LOAD | TRAP;
    /// Load of 32 bits, sign-extended.
    Sload32 = "sload32", Load, LOAD | TRAP;
    /// Store of the controlling type.
    Store = "store", Store, STORE | TRAP;
    /// Store of an integer's low 8 bits.
    Istore8 = "istore8", Store, STORE | TRAP;
    /// Store of an integer's low 16 bits.
    Istore16 = "istore16", Store, STORE | TRAP;
    /// Store of an integer's low 32 bits.
    Istore32 = "istore32", Store, STORE | TRAP;
    // Calls.
    /// Call of a symbol or of an address in a register.
    Call = "call", Call, CALL | LOAD | STORE | TRAP | SIDE;
    /// Tail call: ends the block and the function.
    TailCall = "tail_call", Call, CALL | LOAD | STORE | TRAP | SIDE | TERM;
    /// Call that ends the block, with an exception table naming where to continue.
    TryCall = "try_call", Call, CALL | LOAD | STORE | TRAP | SIDE | TERM;
    // Control flow.
    /// SSA phi: one source per predecessor block.
    Phi = "phi", Phi, NONE;
    /// Unconditional branch.
    Jump = "jump", Jump, TERM;
    /// Conditional branch on a predicate.
    Brif = "brif", Brif, TERM;
    /// Branch through a jump table, with a default target.
    BrTable = "br_table", BrTable, TERM;
    /// Return from the function.
    Ret = "ret", Return, TERM;
    /// Unconditional trap.
    Trap = "trap", Trap, TRAP | SIDE | TERM;
    /// Trap if the operand is zero.
    Trapz = "trapz", CondTrap, TRAP | SIDE;
    /// Trap if the operand is nonzero.
    Trapnz = "trapnz", CondTrap, TRAP | SIDE;
    /// Address of an exception-handler block.
    ExnHandlerAddr = "exn_handler_addr", ExnHandlerAddr, NONE;
    /// An instruction LIR does not model (`Format::Opaque`).
    Opaque = "opaque", Opaque, NONE;
}

impl Opcode {
    /// The instructions with a second auxiliary word (`Function::aux2`): `try_call` (its
    /// exception table) and `opaque` (its memory flags plus one, or 0).
    #[inline(always)]
    pub fn has_aux2(self) -> bool {
        matches!(self, Opcode::TryCall | Opcode::Opaque)
    }
    /// The name, as the `.lir` text spells it (`add`, `tail_call`).
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }
    /// The operand shape of the opcode.
    #[inline]
    pub fn format(self) -> Format {
        FORMATS[self as usize]
    }
    /// Static effect bits; for `opaque` see `Function::inst_effects`.
    #[inline]
    pub fn effects(self) -> u8 {
        EFFECTS[self as usize]
    }
    /// Ends a block (branches, returns, traps).
    #[inline]
    pub fn is_terminator(self) -> bool {
        self.effects() & TERM != 0
    }
    /// Its two operands can be swapped without changing the result.
    #[inline]
    pub fn is_commutative(self) -> bool {
        self.effects() & COMM != 0
    }
    /// A call (`call`, `tail_call`, `try_call`).
    #[inline]
    pub fn is_call(self) -> bool {
        self.effects() & CALL != 0
    }
    /// A load (`Format::Load`).
    #[inline]
    pub fn is_load(self) -> bool {
        self.format() == Format::Load
    }
    /// A store (`Format::Store`).
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
    /// The opcode named `s` (see `name`).
    pub fn parse(s: &str) -> Option<Opcode> {
        NAMES.iter().position(|n| *n == s).map(|i| ALL_OPCODES[i])
    }
    /// Every opcode, in declaration order.
    pub fn all() -> &'static [Opcode] {
        ALL_OPCODES
    }
}

/// A range in one of a function's pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct PoolRange {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl PoolRange {
    pub(crate) fn range(self) -> core::ops::Range<usize> {
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
    /// The opcode.
    pub opcode: Opcode,
    n_results: u8,
    /// Controlling type: the result type, the stored type, or VOID.
    pub ty: Type,
    /// The auxiliary word, by format (see above; 0 when unused).
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
    pub(crate) fn new(
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
    pub(crate) fn results(&self) -> PoolRange {
        PoolRange {
            start: self.results_start,
            len: self.n_results as u32,
        }
    }

    /// The operands: a range of `Function::operand_pool`.
    #[inline(always)]
    pub(crate) fn operands(&self) -> PoolRange {
        PoolRange {
            start: self.operands_start,
            len: self.n_operands,
        }
    }

    #[inline]
    pub(crate) fn set_operands(&mut self, r: PoolRange) {
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
