//! Differential fuzzing of the whole pipeline.
//!
//! A generator of our own builds random but valid CLIF modules (loops with bounded trip counts,
//! calls between the generated functions including recursion bounded by a decreasing depth
//! argument, stack slots, loads and stores through a buffer pointer, i8-i64 and f32/f64
//! arithmetic, `select`, `br_table`, and groups of duplicate and near-duplicate functions so
//! merging and value numbering have work to do). Every generated function gets a wrapper
//! `%run_<name>(i64, i64, i64, i64) -> i64, i64` that owns a 64-byte stack buffer, fills it
//! from its arguments, calls the function with the buffer pointer, and returns a hash of the
//! function's results and a checksum of the buffer. Wrappers are what both sides execute:
//! Cranelift's interpreter (the oracle; it has no host memory, only its own stack, which is why
//! the buffer lives in a stack slot of the wrapper) and our pipeline (lift, passes, lower,
//! cranelift-jit), each JIT call in a forked child so a trap is an outcome, not a crash.
//!
//! Any difference in results, buffer contents or trapping is a failure; it is minimized (drop
//! functions, zero inputs) and written as a `.clif` run test into `FuzzOptions::out_dir`.
//!
//! ## Edges
//!
//! One module in three (chosen by its seed, see [`config_for_seed`]) also exercises a random
//! non-empty set of edge cases ([`GenConfig::edges`]):
//! - [`EDGE_CONSTS`]: extreme constants (`iN::MIN`/`MAX`, 0, -1, the width and around it),
//!   shifts and rotates by amounts >= the width (of any amount type), `sdiv`/`srem` by -1 and
//!   of `MIN` (guarded so `MIN / -1` never happens), `smulhi`/`umulhi`, extreme floats;
//! - [`EDGE_OFFSETS`]: load/store immediate offsets near `i32::MAX`, negative ones down to
//!   `i32::MIN`, address arithmetic through +-2^31, 2^32, 2^40, 2^63, and stack slots of up to
//!   64 KiB accessed near their ends;
//! - [`EDGE_SYMBOLS`]: `symbol_value` of libc symbols (non-colocated) and of generated functions
//!   (colocated) with offsets up to +-2^44, observed only as differences and equalities of two
//!   values of the same symbol (the only thing both sides can agree on);
//! - [`EDGE_CHAINS`]: chains of 8 to 1,500 blocks with block parameters and forward skip edges;
//! - [`EDGE_TAIL`]: `tail`-convention functions (with up to 10 parameters), their addresses
//!   taken (`func_addr`), compared and called through (`call_indirect`), and, where the ISA
//!   allows tail calls, `return_call` and `return_call_indirect` to them. A quarter of these
//!   modules are compiled without frame pointers ([`GenConfig::frame_pointers`]), where x86-64
//!   cannot compile `return_call`: the generator then makes none, and merging must not either.
//!
//! With edge cases the duplicates are planned before the functions are generated, so calls and
//! taken addresses reach them too (merged functions whose addresses are compared must keep
//! distinct addresses). A panic in the pipeline is reported as a failure with a reproducer.
//!
//! The interpreter cannot resolve symbols and zero-extends negative load/store offsets, so it
//! runs an *oracle form* of the module ([`oracle_form`]): each `symbol_value` becomes a fixed
//! fake address plus the offset, and each negative offset an explicit `iadd`.
//!
//! ## Near-duplicates
//!
//! Every module of a campaign is generated in near-duplicate mode ([`GenConfig::near_dups`]),
//! so every module gives `merge-similar` work:
//! - a third of the base functions share the signature of an earlier one (so callees can be
//!   swapped for others of the same signature);
//! - one to three base functions get 1 to 5 clones each (groups of 2 to 6), planned before the
//!   functions are generated, so generated bodies call the clones (and, one call in eight,
//!   take their addresses and call through them);
//! - each group picks its hole positions (1 to 3 integer or float constants, one group in ten
//!   4 to 8 so the parameter cap is hit, and up to 2 direct `call`/`return_call` sites; a
//!   group's source makes at least one direct call), and each clone (five in six; the others
//!   stay exact duplicates) gets other values of the same type at some of them and, at the
//!   call sites, other callees of the same signature and calling convention from outside the
//!   group (one group in ten also from inside: a group calling its own members is not merged);
//!   where the original calls itself, the clones call themselves (self-recursive
//!   near-duplicates; one group in ten calls the original instead), and a source seldom calls
//!   its own clones;
//! - about half the generated functions are local ([`GeneratedModule::locals`], compiled with
//!   `Linkage::Local`), so `merge-similar` folds them and rewrites their callers (the wrappers
//!   and the generated bodies); the others are exported or address-taken and keep thunks.
//!
//! Only constants that feed plain arithmetic are holes (never masks, trip counts, offsets or
//! division guards), and every call passes a decremented depth behind a `depth > 0` test, so
//! swapped callees cannot recurse without bound: the programs stay well defined for both sides.

use crate::harness::Harness;
use arbitrary::Unstructured;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, types, AbiParam, Block, ExtFuncData, ExternalName, FuncRef, Function, GlobalValueData,
    InstBuilder, InstructionData, JumpTableData, MemFlagsData, Opcode, SigRef, Signature,
    StackSlot, StackSlotData, StackSlotKind, Type, UserFuncName, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_codegen::settings;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_interpreter::environment::FunctionStore;
use cranelift_interpreter::interpreter::{Interpreter, InterpreterState};
use cranelift_interpreter::step::ControlFlow;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module, ModuleError};
use jit_driver::{host_isa, MergeConfig, MergeModule, OptLevel, Threads};
use midend::{parse_pass_list, Stats};
use std::path::PathBuf;
use std::time::Instant;

/// Options of a fuzzing run.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    /// Number of random modules.
    pub iterations: usize,
    /// Seed of the random byte stream (a run is deterministic for a seed).
    pub seed: u64,
    /// Comma list of passes for the pipeline side.
    pub passes: String,
    /// Where minimized reproducers are written.
    pub out_dir: PathBuf,
    /// How the pipeline side defines and finalizes a module (one batch, or several: the
    /// incremental path of `MergeModule`).
    pub batch: BatchMode,
    /// In batches: let a function take the address of (`func_addr`, `symbol_value`) a function
    /// of an earlier batch. Off (the default), the two go in one batch (see `batch_plan`); on,
    /// a function merged away in an earlier batch gets a late thunk from `MergeModule`.
    pub late_addresses: bool,
    /// In batches: the pipeline side's `MergeConfig::threads`. The default is `MergeModule`'s
    /// (a fuzzed batch is below the size that starts threads); `Threads::Count(2)` compiles
    /// every batch of two functions or more on two threads.
    pub threads: Threads,
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            iterations: 100,
            seed: 0,
            passes: "merge,merge-similar,lvn".into(),
            out_dir: PathBuf::from("fuzz-failures"),
            batch: BatchMode::One,
            late_addresses: false,
            threads: Threads::default(),
        }
    }
}

/// How the pipeline side defines a module's functions (`mergelift fuzz --batch`).
///
/// In batches, every function is declared first (as in one batch), then the functions are
/// defined a batch at a time with `finalize_definitions` after each, as a lazy JIT does: later
/// batches merge into the functions compiled before (frozen), and a batch of one takes the
/// short path of the merge pass. cranelift-jit resolves a call when it finalizes the caller,
/// so a function is never defined before what it refers to: see [`batch_plan`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchMode {
    /// Everything in one batch (`--batch 0`, the default).
    #[default]
    One,
    /// Batches of this many functions (at least 1).
    Size(usize),
    /// Batches of 1 to 4 functions, the size drawn per module from its seed.
    Random,
}

impl BatchMode {
    /// The batch size for the module of `iter_seed` (0: one batch).
    pub fn size_for(self, iter_seed: u64) -> usize {
        match self {
            BatchMode::One => 0,
            BatchMode::Size(n) => n,
            BatchMode::Random => {
                1 + (SplitMix64::new(iter_seed ^ 0xBA7C_4ED0_0000_0008).next_u64() % 4) as usize
            }
        }
    }
}

impl std::str::FromStr for BatchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(BatchMode::Random),
            _ => match s.parse::<usize>() {
                Ok(0) => Ok(BatchMode::One),
                Ok(n) => Ok(BatchMode::Size(n)),
                Err(_) => Err(format!("`{s}`: a batch size (0 for one batch) or `random`")),
            },
        }
    }
}

impl std::fmt::Display for BatchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchMode::One => write!(f, "0"),
            BatchMode::Size(n) => write!(f, "{n}"),
            BatchMode::Random => write!(f, "random"),
        }
    }
}

/// What a fuzzing run found.
#[derive(Clone, Debug, Default)]
pub struct FuzzReport {
    /// Modules whose every call agreed.
    pub passed: usize,
    /// Modules with at least one disagreement (or a pipeline error).
    pub failed: usize,
    /// One line per failure (with the reproducer's path when one was written).
    pub failures: Vec<String>,
    /// Wrapper calls compared (both sides ran to a result or a trap).
    pub calls: usize,
    /// Calls where both sides trapped.
    pub traps: usize,
    /// Calls skipped because the interpreter could not decide (fuel exhausted).
    pub skipped_calls: usize,
    /// Modules generated with edge cases (`config_for_seed`).
    pub edge_modules: usize,
    /// Modules generated in near-duplicate mode (`GenConfig::near_dups`).
    pub near_dup_modules: usize,
    /// Modules in which `merge-similar` merged at least one function (`merged_similar` > 0).
    pub similar_modules: usize,
    /// Functions `merge-similar` merged, over all modules (the `merged_similar` statistic).
    pub merged_similar: u64,
    /// Pass statistics summed over the iterations (`merged`, `lvn.removed`, ...).
    pub stats: Stats,
    /// Modules compiled in several batches (`FuzzOptions::batch`).
    pub batched_modules: usize,
    /// `finalize_definitions` calls of the batched modules, over all modules.
    pub batches: usize,
    /// On a foreign target (`fuzz_cross`): modules whose plain compile (cranelift-object
    /// alone) disagrees with the interpreter, and a line for each. Not Mergelift's failures.
    pub plain_failed: usize,
    pub plain_failures: Vec<String>,
}

impl FuzzReport {
    /// `N passed, M failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed, self.failed)
    }
}

// ---------------------------------------------------------------------------------------------
// Random bytes.

/// SplitMix64: a tiny deterministic PRNG feeding `arbitrary::Unstructured`.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

// ---------------------------------------------------------------------------------------------
// The generator.

/// Bytes of the buffer every wrapper provides.
pub const BUF_BYTES: u32 = 64;
/// Call depth the wrappers start with.
const START_DEPTH: i64 = 3;

const INT_TYPES: [Type; 4] = [types::I8, types::I16, types::I32, types::I64];
const ALL_TYPES: [Type; 6] = [
    types::I8,
    types::I16,
    types::I32,
    types::I64,
    types::F32,
    types::F64,
];

/// Edge case: extreme constants, shifts by >= the width, division by -1 and of `MIN`.
pub const EDGE_CONSTS: u32 = 1;
/// Edge case: huge and negative load/store offsets, 64-bit address arithmetic, big stack slots.
pub const EDGE_OFFSETS: u32 = 2;
/// Edge case: `symbol_value` with huge offsets.
pub const EDGE_SYMBOLS: u32 = 4;
/// Edge case: long chains of blocks.
pub const EDGE_CHAINS: u32 = 8;
/// Edge case: `tail` functions whose addresses are taken, called through them and by
/// `return_call`.
pub const EDGE_TAIL: u32 = 16;
/// Every edge case.
pub const EDGE_ALL: u32 = 31;

/// How a module is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenConfig {
    /// The edge cases exercised (`EDGE_*` bits; 0 for the plain generator).
    pub edges: u32,
    /// May the module use `return_call` (Cranelift on x86-64 needs frame pointers for it)?
    pub tail_calls: bool,
    /// Does the pipeline compile with `preserve_frame_pointers` (as `host_isa` does)? Without,
    /// x86-64 cannot compile `return_call`, so merging must not make tail-call thunks.
    pub frame_pointers: bool,
    /// Near-duplicate mode: groups of clones with other constants and callees, some
    /// functions local. Without it, 0 to 4 copies, each with one integer constant changed half
    /// the time, all functions exported.
    pub near_dups: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            edges: 0,
            tail_calls: host_tail_calls(),
            frame_pointers: true,
            near_dups: true,
        }
    }
}

/// The ISA the pipeline compiles for: `host_isa`, or the same without frame pointers.
pub fn pipeline_isa(
    frame_pointers: bool,
) -> Result<cranelift_codegen::isa::OwnedTargetIsa, String> {
    if frame_pointers {
        return host_isa(OptLevel::None).map_err(|e| e.to_string());
    }
    let mut fb = settings::builder();
    for (k, v) in [
        ("opt_level", "none"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        ("preserve_frame_pointers", "false"),
    ] {
        settings::Configurable::set(&mut fb, k, v).map_err(|e| e.to_string())?;
    }
    cranelift_native::builder()
        .map_err(|e| e.to_string())?
        .finish(settings::Flags::new(fb))
        .map_err(|e| e.to_string())
}

fn tail_calls_on(frame_pointers: bool) -> bool {
    static ALLOWED: [std::sync::OnceLock<bool>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    *ALLOWED[frame_pointers as usize].get_or_init(|| {
        pipeline_isa(frame_pointers)
            .map(|isa| jit_driver::module::tail_calls_allowed(&*isa))
            .unwrap_or(false)
    })
}

/// Can the host ISA the pipeline compiles for (`host_isa`) compile `return_call`?
pub fn host_tail_calls() -> bool {
    tail_calls_on(true)
}

/// The generator's configuration for an iteration seed: one module in three exercises a random
/// non-empty set of edge cases, the others none; a quarter of those with `tail` functions are
/// compiled without frame pointers (and then, on x86-64, have no `return_call`). Every module
/// has near-duplicates.
pub fn config_for_seed(seed: u64) -> GenConfig {
    config_for_seed_on(seed, &tail_calls_on)
}

/// `config_for_seed` for a pipeline whose ISA can compile `return_call` with or without frame
/// pointers as `tail_calls_on(frame_pointers)` says.
pub fn config_for_seed_on(seed: u64, tail_calls_on: &dyn Fn(bool) -> bool) -> GenConfig {
    let r = SplitMix64::new(seed ^ 0xED6E_5EED_0000_0013).next_u64();
    let edges = if r.is_multiple_of(3) {
        match (r >> 8) as u32 & EDGE_ALL {
            0 => EDGE_ALL,
            e => e,
        }
    } else {
        0
    };
    let frame_pointers = edges & EDGE_TAIL == 0 || !(r >> 16).is_multiple_of(4);
    GenConfig {
        edges,
        tail_calls: tail_calls_on(frame_pointers),
        frame_pointers,
        near_dups: true,
    }
}

/// Libc symbols `symbol_value` names (the JIT resolves them in the process; only differences of
/// two values of one symbol are observed, so their addresses do not matter).
pub(crate) const EXTERN_SYMBOLS: [&str; 4] = ["malloc", "free", "memcpy", "memset"];

/// Offsets of non-colocated symbols (an absolute 64-bit relocation: the address plus the
/// offset must stay a valid user-space address, which +-2^44 around libc does).
const BIG_SYMBOL_OFFSETS: [i64; 16] = [
    0,
    1,
    -1,
    8,
    -8,
    i32::MAX as i64,
    i32::MIN as i64,
    1 << 31,
    (1 << 31) + 1,
    1 << 32,
    -(1 << 32),
    1 << 40,
    -(1 << 40),
    (1 << 40) + 8,
    1 << 44,
    -(1 << 44),
];

/// Offsets of colocated symbols (a 32-bit PC-relative relocation: the address plus the offset
/// must stay within 2 GiB of the code).
const SMALL_SYMBOL_OFFSETS: [i64; 8] = [0, 1, -1, 8, -16, 4096, 1 << 20, -(1 << 20)];

fn frontend_config() -> TargetFrontendConfig {
    TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    }
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

fn mask_of(t: Type) -> u64 {
    if t.bits() >= 64 {
        u64::MAX
    } else {
        (1u64 << t.bits()) - 1
    }
}

/// The shape of one generated function: `(buf: i64, depth: i64, params...) -> rets`.
#[derive(Clone, Debug)]
struct FnSpec {
    name: String,
    params: Vec<Type>,
    rets: Vec<Type>,
    /// The `tail` calling convention (else System V).
    tail: bool,
}

impl FnSpec {
    fn signature(&self) -> Signature {
        let mut s = Signature::new(if self.tail {
            CallConv::Tail
        } else {
            CallConv::SystemV
        });
        s.params.push(AbiParam::new(types::I64));
        s.params.push(AbiParam::new(types::I64));
        s.params
            .extend(self.params.iter().map(|&t| AbiParam::new(t)));
        s.returns
            .extend(self.rets.iter().map(|&t| AbiParam::new(t)));
        s
    }
}

/// The signature of every wrapper: four i64 inputs, (result hash, buffer checksum).
pub fn wrapper_signature() -> Signature {
    let mut s = Signature::new(CallConv::SystemV);
    for _ in 0..4 {
        s.params.push(AbiParam::new(types::I64));
    }
    s.returns.push(AbiParam::new(types::I64));
    s.returns.push(AbiParam::new(types::I64));
    s
}

struct Gen<'a, 'u, 'f> {
    u: &'a mut Unstructured<'u>,
    b: FunctionBuilder<'f>,
    specs: &'a [FnSpec],
    cfg: GenConfig,
    /// Variables by type.
    vars: Vec<(Variable, Type)>,
    buf: Value,
    depth: Value,
    slots: Vec<(StackSlot, u32)>,
    /// Big stack slots (`EDGE_OFFSETS`): only their first and last 32 bytes are used.
    big_slots: Vec<(StackSlot, u32)>,
    fnrefs: Vec<Option<FuncRef>>,
    sigrefs: Vec<Option<SigRef>>,
    /// A function has at most one long block chain.
    long_chain: bool,
    budget: usize,
    loop_depth: usize,
    nest: usize,
    /// Operand constants a near-duplicate may change, integer and float (never masks, trip
    /// counts, offsets or guards).
    tweakable: Vec<ir::Inst>,
    /// Make only direct calls (`call`).
    direct_calls: bool,
    /// Functions calls seldom go to (a group source's own clones: a group calling its own
    /// members other than itself is not merged).
    avoid: Vec<usize>,
}

type GResult<T> = arbitrary::Result<T>;

impl Gen<'_, '_, '_> {
    fn pick<T: Copy>(&mut self, xs: &[T]) -> GResult<T> {
        Ok(*self.u.choose(xs)?)
    }
    fn var_of(&mut self, t: Type) -> GResult<Variable> {
        let c: Vec<Variable> = self
            .vars
            .iter()
            .filter(|(_, vt)| *vt == t)
            .map(|(v, _)| *v)
            .collect();
        Ok(*self.u.choose(&c)?)
    }
    fn use_of(&mut self, t: Type) -> GResult<Value> {
        let v = self.var_of(t)?;
        Ok(self.b.use_var(v))
    }
    fn def_of(&mut self, t: Type, val: Value) -> GResult<()> {
        let v = self.var_of(t)?;
        self.b.def_var(v, val);
        Ok(())
    }
    fn iconst(&mut self, t: Type, v: u64) -> Value {
        let v = v & mask_of(t);
        self.b.ins().iconst(t, v as i64)
    }
    fn edge(&self, e: u32) -> bool {
        self.cfg.edges & e != 0
    }

    /// An extreme value of `t`: 0, -1, 1, `MIN`, `MAX`, one off them, the width and around
    /// it, a power of two.
    fn extreme_value(&mut self, t: Type) -> GResult<u64> {
        let w = t.bits() as u64;
        let min = 1u64 << (w - 1);
        Ok(match self.u.int_in_range(0..=11)? {
            0 => 0,
            1 => u64::MAX,
            2 => min,
            3 => min - 1,
            4 => min + 1,
            5 => 1,
            6 => w,
            7 => w - 1,
            8 => w + 1,
            9 => 2 * w,
            10 => u64::MAX - 1,
            _ => 1u64 << self.u.int_in_range(0..=(w - 1))?,
        })
    }

    fn rand_iconst(&mut self, t: Type) -> GResult<Value> {
        if self.edge(EDGE_CONSTS) && self.u.ratio(1, 2)? {
            let v = self.extreme_value(t)?;
            let c = self.iconst(t, v);
            if let Some(i) = self.b.func.dfg.value_def(c).inst() {
                self.tweakable.push(i);
            }
            return Ok(c);
        }
        let v: u64 = match self.u.int_in_range(0..=5)? {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => 1u64 << (t.bits() - 1),
            4 => self.u.int_in_range(0..=16)?,
            _ => self.u.arbitrary()?,
        };
        let c = self.iconst(t, v);
        if let Some(i) = self.b.func.dfg.value_def(c).inst() {
            self.tweakable.push(i);
        }
        Ok(c)
    }
    fn rand_fconst(&mut self, t: Type) -> GResult<Value> {
        let choices = [0.0, -0.0, 1.0, -1.5, 0.5, 1e10, -3.25, f64::INFINITY, 7.0];
        let extremes = [
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            5e-324,
            f64::NEG_INFINITY,
            f64::NAN,
            f32::MAX as f64,
            f32::MIN_POSITIVE as f64,
            // 2^63, the largest double below it, -2^63: the ends of saturating conversions.
            9_223_372_036_854_775_808.0,
            9_223_372_036_854_774_784.0,
            -9_223_372_036_854_775_808.0,
            4_294_967_296.0,
            2_147_483_648.0,
            -2_147_483_649.0,
        ];
        let x = if self.edge(EDGE_CONSTS) && self.u.ratio(1, 3)? {
            self.pick(&extremes)?
        } else if self.u.ratio(1, 4)? {
            let bits: u64 = self.u.arbitrary()?;
            if t == types::F32 {
                f32::from_bits(bits as u32) as f64
            } else {
                f64::from_bits(bits)
            }
        } else {
            self.pick(&choices)?
        };
        let c = if t == types::F32 {
            self.b.ins().f32const(x as f32)
        } else {
            self.b.ins().f64const(x)
        };
        if let Some(i) = self.b.func.dfg.value_def(c).inst() {
            self.tweakable.push(i);
        }
        Ok(c)
    }
    fn rand_const(&mut self, t: Type) -> GResult<Value> {
        if t.is_float() {
            self.rand_fconst(t)
        } else {
            self.rand_iconst(t)
        }
    }

    /// Bits of a float with NaNs canonicalized (NaN payloads and signs are not portable).
    fn float_bits(&mut self, v: Value) -> Value {
        let t = self.b.func.dfg.value_type(v);
        let it = t.as_int();
        let uno = self.b.ins().fcmp(FloatCC::Unordered, v, v);
        let bits = self.b.ins().bitcast(it, MemFlagsData::new(), v);
        let nan = if t == types::F32 {
            self.iconst(it, 0x7fc0_0000)
        } else {
            self.iconst(it, 0x7ff8_0000_0000_0000)
        };
        self.b.ins().select(uno, nan, bits)
    }

    /// An i64 that is an in-bounds, aligned offset for `bytes`-sized accesses into `size`.
    fn dyn_offset(&mut self, size: u32, bytes: u32) -> GResult<Value> {
        let t = self.pick(&INT_TYPES)?;
        let x = self.use_of(t)?;
        let x = if t == types::I64 {
            x
        } else {
            self.b.ins().uextend(types::I64, x)
        };
        let m = self.iconst(types::I64, (size - bytes) as u64);
        Ok(self.b.ins().band(x, m))
    }

    fn int_binop(&mut self, t: Type) -> GResult<()> {
        let x = self.use_of(t)?;
        let y = self.use_of(t)?;
        let op = self.u.int_in_range(0..=20)?;
        let r = match op {
            0 => self.b.ins().iadd(x, y),
            1 => self.b.ins().isub(x, y),
            2 => self.b.ins().imul(x, y),
            3 => self.b.ins().band(x, y),
            4 => self.b.ins().bor(x, y),
            5 => self.b.ins().bxor(x, y),
            6 => self.b.ins().ishl(x, y),
            7 => self.b.ins().ushr(x, y),
            8 => self.b.ins().sshr(x, y),
            9 => self.b.ins().rotl(x, y),
            10 => self.b.ins().rotr(x, y),
            11 => self.b.ins().smin(x, y),
            12 => self.b.ins().umax(x, y),
            13..=16 => {
                // Division: usually guarded so it cannot trap; sometimes left to trap, which
                // both sides must then agree on.
                let guarded = !self.u.ratio(1, 16)?;
                let d = if guarded {
                    let zero = self.iconst(t, 0);
                    let m1 = self.iconst(t, u64::MAX);
                    let two = self.iconst(t, 2);
                    let z = self.b.ins().icmp(IntCC::Equal, y, zero);
                    let d = self.b.ins().select(z, two, y);
                    let n = self.b.ins().icmp(IntCC::Equal, d, m1);
                    self.b.ins().select(n, two, d)
                } else if op == 16 {
                    // Unguarded `srem` may still divide by zero, but never INT_MIN by -1:
                    // native code gives 0 (Cranelift's semantics) while cranelift-interpreter
                    // traps with `int_ovf`, so the oracle cannot judge it.
                    let m1 = self.iconst(t, u64::MAX);
                    let two = self.iconst(t, 2);
                    let n = self.b.ins().icmp(IntCC::Equal, y, m1);
                    self.b.ins().select(n, two, y)
                } else {
                    y
                };
                match op {
                    13 => self.b.ins().udiv(x, d),
                    14 => self.b.ins().sdiv(x, d),
                    15 => self.b.ins().urem(x, d),
                    _ => self.b.ins().srem(x, d),
                }
            }
            17 => {
                let cc = self.pick(&[
                    IntCC::Equal,
                    IntCC::NotEqual,
                    IntCC::SignedLessThan,
                    IntCC::UnsignedGreaterThan,
                    IntCC::SignedGreaterThanOrEqual,
                    IntCC::UnsignedLessThanOrEqual,
                ])?;
                let c = self.b.ins().icmp(cc, x, y);
                let z = self.use_of(t)?;
                self.b.ins().select(c, y, z)
            }
            18 => {
                let c = self.rand_iconst(t)?;
                self.b.ins().iadd(x, c)
            }
            19 => {
                let c = self.rand_iconst(t)?;
                self.b.ins().imul(x, c)
            }
            _ => {
                let c = self.rand_iconst(t)?;
                self.b.ins().bxor(x, c)
            }
        };
        if op <= 12 {
            // An operation a structural near-duplicate may edit (`edit_structure`).
            if let Some(i) = self.b.func.dfg.value_def(r).inst() {
                self.tweakable.push(i);
            }
        }
        self.def_of(t, r)
    }

    fn int_unop(&mut self, t: Type) -> GResult<()> {
        let x = self.use_of(t)?;
        let r = match self.u.int_in_range(0..=6)? {
            0 => self.b.ins().bnot(x),
            1 => self.b.ins().ineg(x),
            2 => self.b.ins().popcnt(x),
            3 => self.b.ins().clz(x),
            4 => self.b.ins().ctz(x),
            5 => self.b.ins().iabs(x),
            _ => {
                if t == types::I8 {
                    self.b.ins().bnot(x)
                } else {
                    self.b.ins().bswap(x)
                }
            }
        };
        self.def_of(t, r)
    }

    fn float_op(&mut self, t: Type) -> GResult<()> {
        let x = self.use_of(t)?;
        let y = self.use_of(t)?;
        let r = match self.u.int_in_range(0..=13)? {
            0 => self.b.ins().fadd(x, y),
            1 => self.b.ins().fsub(x, y),
            2 => self.b.ins().fmul(x, y),
            3 => self.b.ins().fdiv(x, y),
            4 => self.b.ins().fmin(x, y),
            5 => self.b.ins().fmax(x, y),
            6 => self.b.ins().fneg(x),
            7 => self.b.ins().fabs(x),
            8 => self.b.ins().sqrt(x),
            9 => self.b.ins().floor(x),
            10 => self.b.ins().trunc(x),
            11 => {
                let cc = self.pick(&[
                    FloatCC::Equal,
                    FloatCC::LessThan,
                    FloatCC::UnorderedOrGreaterThan,
                    FloatCC::Ordered,
                ])?;
                let c = self.b.ins().fcmp(cc, x, y);
                let z = self.use_of(t)?;
                self.b.ins().select(c, x, z)
            }
            12 => {
                let c = self.rand_fconst(t)?;
                self.b.ins().fadd(x, c)
            }
            _ => {
                let c = self.rand_fconst(t)?;
                self.b.ins().fmul(x, c)
            }
        };
        self.def_of(t, r)
    }

    fn convert(&mut self) -> GResult<()> {
        let from = self.pick(&ALL_TYPES)?;
        let to = self.pick(&ALL_TYPES)?;
        let x = self.use_of(from)?;
        let r = match (from.is_float(), to.is_float()) {
            (false, false) => {
                if from.bits() < to.bits() {
                    if self.u.arbitrary()? {
                        self.b.ins().sextend(to, x)
                    } else {
                        self.b.ins().uextend(to, x)
                    }
                } else if from.bits() > to.bits() {
                    self.b.ins().ireduce(to, x)
                } else {
                    return Ok(());
                }
            }
            (false, true) => {
                let signed: bool = self.u.arbitrary()?;
                let x = if from.bits() < 32 {
                    if signed {
                        self.b.ins().sextend(types::I32, x)
                    } else {
                        self.b.ins().uextend(types::I32, x)
                    }
                } else {
                    x
                };
                if self.u.ratio(1, 5)? && from.bits() == to.bits() {
                    self.b.ins().bitcast(to, MemFlagsData::new(), x)
                } else if signed {
                    self.b.ins().fcvt_from_sint(to, x)
                } else {
                    self.b.ins().fcvt_from_uint(to, x)
                }
            }
            (true, false) => {
                let wide = if to.bits() == 64 {
                    types::I64
                } else {
                    types::I32
                };
                let r = match self.u.int_in_range(0..=2)? {
                    0 => self.b.ins().fcvt_to_sint_sat(wide, x),
                    1 => self.b.ins().fcvt_to_uint_sat(wide, x),
                    _ => {
                        let bits = self.float_bits(x);
                        let bt = self.b.func.dfg.value_type(bits);
                        if bt == wide {
                            bits
                        } else if bt.bits() < wide.bits() {
                            self.b.ins().uextend(wide, bits)
                        } else {
                            self.b.ins().ireduce(wide, bits)
                        }
                    }
                };
                if to.bits() < wide.bits() {
                    self.b.ins().ireduce(to, r)
                } else {
                    r
                }
            }
            (true, true) => {
                if from == to {
                    return Ok(());
                } else if from == types::F32 {
                    self.b.ins().fpromote(to, x)
                } else {
                    self.b.ins().fdemote(to, x)
                }
            }
        };
        self.def_of(to, r)
    }

    fn load_buf(&mut self) -> GResult<()> {
        let t = self.pick(&ALL_TYPES)?;
        let n = t.bytes();
        let v = if self.u.arbitrary()? {
            let off = self.u.int_in_range(0..=(BUF_BYTES / n - 1))? * n;
            self.b.ins().load(t, flags(), self.buf, off as i32)
        } else {
            let off = self.dyn_offset(BUF_BYTES, n)?;
            let p = self.b.ins().iadd(self.buf, off);
            self.b.ins().load(t, flags(), p, 0)
        };
        self.def_of(t, v)
    }

    /// A storable integer (floats are stored as canonical bits).
    fn storable(&mut self) -> GResult<Value> {
        let t = self.pick(&ALL_TYPES)?;
        let v = self.use_of(t)?;
        Ok(if t.is_float() { self.float_bits(v) } else { v })
    }

    fn store_buf(&mut self) -> GResult<()> {
        let v = self.storable()?;
        let n = self.b.func.dfg.value_type(v).bytes();
        if self.u.arbitrary()? {
            let off = self.u.int_in_range(0..=(BUF_BYTES / n - 1))? * n;
            self.b.ins().store(flags(), v, self.buf, off as i32);
        } else {
            let off = self.dyn_offset(BUF_BYTES, n)?;
            let p = self.b.ins().iadd(self.buf, off);
            self.b.ins().store(flags(), v, p, 0);
        }
        Ok(())
    }

    /// Store `v` at `p + off`, or (no value) load a `t` from there and make it a value.
    fn access(&mut self, t: Type, v: Option<Value>, p: Value, off: i32) -> GResult<()> {
        match v {
            Some(v) => {
                self.b.ins().store(flags(), v, p, off);
            }
            None => {
                let v = self.b.ins().load(t, flags(), p, off);
                self.def_of(t, v)?;
            }
        }
        Ok(())
    }

    /// A memory access to make: a value to store (with its type), or a type to load.
    fn store_or_load(&mut self) -> GResult<(Type, Option<Value>)> {
        if self.u.arbitrary::<bool>()? {
            let v = self.storable()?;
            Ok((self.b.func.dfg.value_type(v), Some(v)))
        } else {
            Ok((self.pick(&ALL_TYPES)?, None))
        }
    }

    fn stack_op(&mut self) -> GResult<()> {
        if self.slots.is_empty() {
            return self.load_buf();
        }
        let (ss, size) = self.pick(&self.slots.clone())?;
        let (t, v) = self.store_or_load()?;
        let n = t.bytes();
        let p = if self.u.arbitrary()? {
            let off = self.u.int_in_range(0..=(size / n - 1))? * n;
            self.b.ins().stack_addr(types::I64, ss, off as i32)
        } else {
            let base = self.b.ins().stack_addr(types::I64, ss, 0);
            let off = self.dyn_offset(size, n)?;
            self.b.ins().iadd(base, off)
        };
        self.access(t, v, p, 0)
    }

    fn cond(&mut self) -> GResult<Value> {
        let t = self.pick(&INT_TYPES)?;
        let x = self.use_of(t)?;
        let y = if self.u.arbitrary()? {
            self.use_of(t)?
        } else {
            self.rand_iconst(t)?
        };
        let cc = self.pick(&[
            IntCC::Equal,
            IntCC::NotEqual,
            IntCC::SignedLessThan,
            IntCC::UnsignedLessThan,
        ])?;
        Ok(self.b.ins().icmp(cc, x, y))
    }

    fn if_else(&mut self) -> GResult<()> {
        let c = self.cond()?;
        let (t, e, j) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(c, t, &[], e, &[]);
        self.nest += 1;
        self.b.switch_to_block(t);
        self.stmts(3)?;
        self.b.ins().jump(j, &[]);
        self.b.switch_to_block(e);
        self.stmts(3)?;
        self.b.ins().jump(j, &[]);
        self.nest -= 1;
        self.b.switch_to_block(j);
        Ok(())
    }

    fn switch(&mut self) -> GResult<()> {
        let t = self.pick(&INT_TYPES)?;
        let x = self.use_of(t)?;
        let x = match t.bits() {
            32 => x,
            64 => self.b.ins().ireduce(types::I32, x),
            _ => self.b.ins().uextend(types::I32, x),
        };
        let n = self.u.int_in_range(1..=4)?;
        let j = self.b.create_block();
        let def = self.b.create_block();
        let mut blocks = Vec::new();
        for _ in 0..n {
            blocks.push(self.b.create_block());
        }
        // Sometimes mask the index so every case is reachable.
        let x = if self.u.arbitrary()? {
            let m = self.iconst(types::I32, 3);
            self.b.ins().band(x, m)
        } else {
            x
        };
        let defc = self.b.func.dfg.block_call(def, &[]);
        let calls: Vec<_> = blocks
            .iter()
            .map(|&bl| self.b.func.dfg.block_call(bl, &[]))
            .collect();
        let jt = self.b.create_jump_table(JumpTableData::new(defc, &calls));
        self.b.ins().br_table(x, jt);
        self.nest += 1;
        for bl in blocks.into_iter().chain([def]) {
            self.b.switch_to_block(bl);
            self.stmts(2)?;
            self.b.ins().jump(j, &[]);
        }
        self.nest -= 1;
        self.b.switch_to_block(j);
        Ok(())
    }

    fn loop_(&mut self) -> GResult<()> {
        let cnt = self.b.declare_var(types::I64);
        let zero = self.iconst(types::I64, 0);
        self.b.def_var(cnt, zero);
        let trip = if self.u.arbitrary()? {
            let k = self.u.int_in_range(1..=4)?;
            self.iconst(types::I64, k)
        } else {
            let x = self.use_of(types::I64)?;
            let three = self.iconst(types::I64, 3);
            let m = self.b.ins().band(x, three);
            let one = self.iconst(types::I64, 1);
            self.b.ins().iadd(m, one)
        };
        let (h, body, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(h, &[]);
        self.b.switch_to_block(h);
        let c = self.b.use_var(cnt);
        let go = self.b.ins().icmp(IntCC::UnsignedLessThan, c, trip);
        self.b.ins().brif(go, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        self.loop_depth += 1;
        self.nest += 1;
        self.stmts(4)?;
        self.nest -= 1;
        self.loop_depth -= 1;
        let c = self.b.use_var(cnt);
        let one = self.iconst(types::I64, 1);
        let c1 = self.b.ins().iadd(c, one);
        self.b.def_var(cnt, c1);
        self.b.ins().jump(h, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// Branch on `depth > 0` into a new block (the current one afterwards) and make there the
    /// arguments of a call of `j`: the buffer, `depth - 1`, then values of its parameter
    /// types. Returns the block the other branch goes to, and the arguments.
    fn depth_guarded_args(&mut self, j: usize) -> GResult<(Block, Vec<Value>)> {
        let zero = self.iconst(types::I64, 0);
        let go = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThan, self.depth, zero);
        let (cb, skip) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(go, cb, &[], skip, &[]);
        self.b.switch_to_block(cb);
        let one = self.iconst(types::I64, 1);
        let d1 = self.b.ins().isub(self.depth, one);
        let mut args = vec![self.buf, d1];
        for t in self.specs[j].params.clone() {
            args.push(self.use_of(t)?);
        }
        Ok((skip, args))
    }

    fn call(&mut self) -> GResult<()> {
        if self.specs.is_empty() || self.loop_depth > 0 {
            return self.int_binop(types::I64);
        }
        let j = self.callee(|_| true)?;
        let fr = self.fnref(j);
        let (jb, args) = self.depth_guarded_args(j)?;
        // With `EDGE_TAIL`, half the calls go through the callee's address; with near-duplicates
        // one in eight (its address is then observed: a merged callee keeps a thunk).
        let indirect = if self.direct_calls {
            false
        } else if self.edge(EDGE_TAIL) {
            self.u.arbitrary()?
        } else {
            self.cfg.near_dups && self.u.ratio(1, 8)?
        };
        let inst = if indirect {
            let sig = self.sigref(j);
            let p = self.b.ins().func_addr(types::I64, fr);
            self.b.ins().call_indirect(sig, p, &args)
        } else {
            self.b.ins().call(fr, &args)
        };
        let rs = self.b.inst_results(inst).to_vec();
        for r in rs {
            let t = self.b.func.dfg.value_type(r);
            self.def_of(t, r)?;
        }
        self.b.ins().jump(jb, &[]);
        self.b.switch_to_block(jb);
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Edge cases.

    /// An integer constant no near-duplicate changes.
    fn fixed(&mut self, t: Type, v: u64) -> Value {
        self.iconst(t, v)
    }

    /// Extreme constants and operations at the edges of `t`.
    fn extreme_op(&mut self, t: Type) -> GResult<()> {
        let w = t.bits() as u64;
        let min = 1u64 << (w - 1);
        let x = self.use_of(t)?;
        let r = match self.u.int_in_range(0..=9)? {
            0..=2 => {
                // Shift or rotate by a constant >= the width, the amount of any integer type.
                let at = self.pick(&INT_TYPES)?;
                let amt = match self.u.int_in_range(0..=4)? {
                    0 => w,
                    1 => w + 1,
                    2 => 2 * w - 1,
                    3 => mask_of(at),
                    _ => self.u.int_in_range(w..=4 * w)?,
                };
                let a = self.fixed(at, amt);
                match self.u.int_in_range(0..=4)? {
                    0 => self.b.ins().ishl(x, a),
                    1 => self.b.ins().ushr(x, a),
                    2 => self.b.ins().sshr(x, a),
                    3 => self.b.ins().rotl(x, a),
                    _ => self.b.ins().rotr(x, a),
                }
            }
            3 => {
                // Shift by a variable of another integer type (any value, masked by the width).
                let at = self.pick(&INT_TYPES)?;
                let a = self.use_of(at)?;
                match self.u.int_in_range(0..=2)? {
                    0 => self.b.ins().ishl(x, a),
                    1 => self.b.ins().sshr(x, a),
                    _ => self.b.ins().rotr(x, a),
                }
            }
            4 => {
                // Wrapping arithmetic with an extreme constant.
                let v = self.extreme_value(t)?;
                let op = self.u.int_in_range(0..=6)?;
                // No division by zero.
                let v = if op >= 5 && v & mask_of(t) == 0 { 1 } else { v };
                let c = self.fixed(t, v);
                match op {
                    0 => self.b.ins().iadd(x, c),
                    1 => self.b.ins().isub(c, x),
                    2 => self.b.ins().imul(x, c),
                    3 => self.b.ins().smax(x, c),
                    4 => self.b.ins().umin(x, c),
                    5 => self.b.ins().udiv(x, c),
                    _ => self.b.ins().urem(x, c),
                }
            }
            5 => {
                // Division by -1 of anything but MIN (MIN / -1 overflows: the interpreter traps
                // where native `srem` gives 0).
                let m = self.fixed(t, min);
                let is_min = self.b.ins().icmp(IntCC::Equal, x, m);
                let zero = self.fixed(t, 0);
                let xg = self.b.ins().select(is_min, zero, x);
                let m1 = self.fixed(t, u64::MAX);
                if self.u.arbitrary()? {
                    self.b.ins().sdiv(xg, m1)
                } else {
                    self.b.ins().srem(xg, m1)
                }
            }
            6 => {
                // MIN (or MAX) divided by anything but 0 and -1.
                let v = if self.u.arbitrary()? { min } else { min - 1 };
                let n = self.fixed(t, v);
                let zero = self.fixed(t, 0);
                let m1 = self.fixed(t, u64::MAX);
                let three = self.fixed(t, 3);
                let z = self.b.ins().icmp(IntCC::Equal, x, zero);
                let d = self.b.ins().select(z, three, x);
                let o = self.b.ins().icmp(IntCC::Equal, d, m1);
                let d = self.b.ins().select(o, three, d);
                match self.u.int_in_range(0..=3)? {
                    0 => self.b.ins().sdiv(n, d),
                    1 => self.b.ins().srem(n, d),
                    2 => self.b.ins().udiv(n, d),
                    _ => self.b.ins().urem(n, d),
                }
            }
            7 => {
                // Negation, absolute value and counts of a value with the sign bit set.
                let m = self.fixed(t, min);
                let xm = self.b.ins().bor(x, m);
                match self.u.int_in_range(0..=3)? {
                    0 => self.b.ins().ineg(xm),
                    1 => self.b.ins().iabs(xm),
                    2 => self.b.ins().clz(xm),
                    _ => self.b.ins().cls(xm),
                }
            }
            8 if w >= 32 => {
                // The high half of a product with an extreme factor.
                let v = self.extreme_value(t)?;
                let c = self.fixed(t, v);
                if self.u.arbitrary()? {
                    self.b.ins().umulhi(x, c)
                } else {
                    self.b.ins().smulhi(x, c)
                }
            }
            _ => {
                // Comparisons against the ends of the range.
                let v = self.extreme_value(t)?;
                let c = self.fixed(t, v);
                let cc = self.pick(&[
                    IntCC::SignedLessThan,
                    IntCC::SignedGreaterThan,
                    IntCC::UnsignedLessThan,
                    IntCC::UnsignedGreaterThanOrEqual,
                    IntCC::Equal,
                ])?;
                let k = self.b.ins().icmp(cc, x, c);
                let k = if t == types::I8 {
                    k
                } else {
                    self.b.ins().uextend(t, k)
                };
                self.b.ins().iadd(x, k)
            }
        };
        self.def_of(t, r)
    }

    /// A load or store of the buffer through a huge or negative offset: the address is always
    /// `buf + k` (in bounds, aligned), reached by way of an offset immediate near `i32::MAX`
    /// or `i32::MIN`, or of 64-bit address arithmetic that wraps.
    fn far_mem(&mut self) -> GResult<()> {
        let (t, v) = self.store_or_load()?;
        let n = t.bytes();
        // `buf + k`, k static or dynamic.
        let target = if self.u.arbitrary()? {
            let k = self.u.int_in_range(0..=(BUF_BYTES / n - 1))? * n;
            let kc = self.fixed(types::I64, k as u64);
            self.b.ins().iadd(self.buf, kc)
        } else {
            let off = self.dyn_offset(BUF_BYTES, n)?;
            self.b.ins().iadd(self.buf, off)
        };
        let (p, off): (Value, i32) = match self.u.int_in_range(0..=2)? {
            0 => {
                let c = match self.u.int_in_range(0..=6)? {
                    0 => i32::MAX,
                    1 => i32::MAX - 7,
                    2 => 1 << 30,
                    3 => 0x7fff_0000,
                    4 => 1 << 16,
                    5 => 4095,
                    _ => self.u.int_in_range(0..=i32::MAX)?,
                };
                let d = self.fixed(types::I64, (c as i64).wrapping_neg() as u64);
                (self.b.ins().iadd(target, d), c)
            }
            1 => {
                let c = match self.u.int_in_range(0..=6)? {
                    0 => i32::MIN,
                    1 => i32::MIN + 8,
                    2 => -(1 << 30),
                    3 => -65536,
                    4 => -8,
                    5 => -1,
                    _ => self.u.int_in_range(i32::MIN..=-1)?,
                };
                let d = self.fixed(types::I64, (c as i64).wrapping_neg() as u64);
                (self.b.ins().iadd(target, d), c)
            }
            _ => {
                let d: u64 = match self.u.int_in_range(0..=7)? {
                    0 => 1 << 40,
                    1 => 1 << 32,
                    2 => 1 << 31,
                    3 => 1 << 63,
                    4 => (1u64 << 40).wrapping_neg(),
                    5 => (1u64 << 31).wrapping_neg(),
                    6 => u64::MAX,
                    _ => self.u.arbitrary()?,
                };
                let small: i32 = self.u.int_in_range(0..=64)?;
                let dc = self.fixed(types::I64, d);
                let p1 = self.b.ins().iadd(target, dc);
                let back = self.fixed(types::I64, d.wrapping_neg().wrapping_sub(small as u64));
                (self.b.ins().iadd(p1, back), small)
            }
        };
        self.access(t, v, p, off)
    }

    /// A load or store near either end of a big stack slot.
    fn big_stack_op(&mut self) -> GResult<()> {
        if self.big_slots.is_empty() {
            return self.far_mem();
        }
        let (ss, size) = self.pick(&self.big_slots.clone())?;
        let (t, v) = self.store_or_load()?;
        let n = t.bytes();
        let start = if self.u.arbitrary()? { 0 } else { size - 32 };
        let p = match self.u.int_in_range(0..=2)? {
            0 => {
                let off = start + self.u.int_in_range(0..=(32 / n - 1))? * n;
                self.b.ins().stack_addr(types::I64, ss, off as i32)
            }
            1 => {
                let base = self.b.ins().stack_addr(types::I64, ss, start as i32);
                let off = self.dyn_offset(32, n)?;
                self.b.ins().iadd(base, off)
            }
            _ => {
                // From the slot's start, with the offset as a constant.
                let base = self.b.ins().stack_addr(types::I64, ss, 0);
                let off = start + self.u.int_in_range(0..=(32 / n - 1))? * n;
                let c = self.fixed(types::I64, off as u64);
                self.b.ins().iadd(base, c)
            }
        };
        self.access(t, v, p, 0)
    }

    fn symbol_value(&mut self, name: &str, colocated: bool, offset: i64) -> Value {
        let gv = self.b.create_global_value(GlobalValueData::Symbol {
            name: ExternalName::testcase(name.as_bytes()),
            offset: ir::immediates::Imm64::new(offset),
            colocated,
            tls: false,
        });
        self.b.ins().symbol_value(types::I64, gv)
    }

    /// Two `symbol_value`s of one symbol with (huge) offsets, observed through their difference
    /// or equality, sometimes with a value of another symbol in between.
    fn sym_op(&mut self) -> GResult<()> {
        let local = !self.specs.is_empty() && self.u.ratio(1, 4)?;
        let (name, colocated, offs): (String, bool, &[i64]) = if local {
            let j = self.u.choose_index(self.specs.len())?;
            (self.specs[j].name.clone(), true, &SMALL_SYMBOL_OFFSETS)
        } else {
            (
                self.pick(&EXTERN_SYMBOLS)?.to_string(),
                false,
                &BIG_SYMBOL_OFFSETS,
            )
        };
        let o1 = *self.u.choose(offs)?;
        let o2 = *self.u.choose(offs)?;
        let a = self.symbol_value(&name, colocated, o1);
        if self.u.ratio(1, 3)? {
            // Another symbol with the other offset: must not be taken for this one.
            let other = self.pick(&EXTERN_SYMBOLS)?;
            let c = self.symbol_value(other, false, o2);
            let c2 = self.symbol_value(other, false, 0);
            let d = self.b.ins().isub(c, c2);
            let x = self.use_of(types::I64)?;
            let r = self.b.ins().bxor(x, d);
            self.def_of(types::I64, r)?;
        }
        let b = self.symbol_value(&name, colocated, o2);
        let r = match self.u.int_in_range(0..=2)? {
            0 => self.b.ins().isub(a, b),
            1 => {
                let e = self.b.ins().icmp(IntCC::Equal, a, b);
                self.b.ins().uextend(types::I64, e)
            }
            _ => {
                let d = self.b.ins().isub(b, a);
                let x = self.use_of(types::I64)?;
                self.b.ins().iadd(x, d)
            }
        };
        self.def_of(types::I64, r)
    }

    /// A chain of blocks carrying two values as block parameters, with forward skip edges.
    fn chain(&mut self) -> GResult<()> {
        let long =
            self.nest == 0 && self.loop_depth == 0 && !self.long_chain && self.u.ratio(1, 6)?;
        let len: usize = if long {
            self.long_chain = true;
            self.u.int_in_range(200..=1500)?
        } else {
            self.u.int_in_range(8..=48)?
        };
        let t2 = self.pick(&ALL_TYPES)?;
        let blocks: Vec<Block> = (0..=len)
            .map(|_| {
                let bl = self.b.create_block();
                self.b.append_block_param(bl, types::I64);
                self.b.append_block_param(bl, t2);
                bl
            })
            .collect();
        let acc = self.use_of(types::I64)?;
        let x = self.use_of(t2)?;
        self.b.ins().jump(blocks[0], &[acc.into(), x.into()]);
        for i in 0..len {
            self.b.switch_to_block(blocks[i]);
            self.b.seal_block(blocks[i]);
            let ps = self.b.block_params(blocks[i]).to_vec();
            let (acc, mut x) = (ps[0], ps[1]);
            let acc = match self.u.int_in_range(0..=3)? {
                0 => {
                    let c = self.fixed(types::I64, (i as u64).wrapping_mul(0x9E37_79B9));
                    self.b.ins().iadd(acc, c)
                }
                1 => {
                    let y = self.use_of(types::I64)?;
                    self.b.ins().bxor(acc, y)
                }
                2 => {
                    let c = self.fixed(types::I64, 2 * i as u64 + 3);
                    self.b.ins().imul(acc, c)
                }
                _ => {
                    let c = self.fixed(types::I64, i as u64 % 64);
                    self.b.ins().rotl(acc, c)
                }
            };
            if self.u.ratio(1, 4)? {
                x = self.use_of(t2)?;
            }
            if self.u.ratio(1, 8)? {
                let t = self.pick(&INT_TYPES)?;
                self.int_binop(t)?;
            }
            if i + 2 < len && self.u.ratio(1, 4)? {
                let far = (i + 2 + self.u.int_in_range(0..=8)?).min(len);
                let three = self.fixed(types::I64, 3);
                let low = self.b.ins().band(acc, three);
                let zero = self.fixed(types::I64, 0);
                let c = self.b.ins().icmp(IntCC::Equal, low, zero);
                let one = self.fixed(types::I64, 1);
                let acc2 = self.b.ins().iadd(acc, one);
                self.b.ins().brif(
                    c,
                    blocks[far],
                    &[acc2.into(), x.into()],
                    blocks[i + 1],
                    &[acc.into(), x.into()],
                );
            } else {
                self.b.ins().jump(blocks[i + 1], &[acc.into(), x.into()]);
            }
        }
        self.b.switch_to_block(blocks[len]);
        self.b.seal_block(blocks[len]);
        let ps = self.b.block_params(blocks[len]).to_vec();
        self.def_of(types::I64, ps[0])?;
        self.def_of(t2, ps[1])
    }

    /// A function to call among those `ok` accepts (there is one), seldom one of `avoid`.
    fn callee(&mut self, ok: impl Fn(usize) -> bool) -> GResult<usize> {
        let all: Vec<usize> = (0..self.specs.len()).filter(|&j| ok(j)).collect();
        let preferred: Vec<usize> = all
            .iter()
            .copied()
            .filter(|j| !self.avoid.contains(j))
            .collect();
        if !self.avoid.is_empty() && !preferred.is_empty() && !self.u.ratio(1, 16)? {
            return self.pick(&preferred);
        }
        self.pick(&all)
    }

    fn fnref(&mut self, j: usize) -> FuncRef {
        if let Some(f) = self.fnrefs[j] {
            return f;
        }
        let sig = self.sigref(j);
        let f = self.b.import_function(ExtFuncData {
            name: ExternalName::testcase(self.specs[j].name.as_bytes()),
            signature: sig,
            colocated: true,
            patchable: false,
        });
        self.fnrefs[j] = Some(f);
        f
    }

    fn sigref(&mut self, j: usize) -> SigRef {
        if let Some(s) = self.sigrefs[j] {
            return s;
        }
        let s = self.b.import_signature(self.specs[j].signature());
        self.sigrefs[j] = Some(s);
        s
    }

    /// Compare the addresses of two generated functions (equal exactly when they are the same
    /// function, whatever merging did).
    fn addr_compare(&mut self) -> GResult<()> {
        if self.specs.is_empty() {
            return self.int_unop(types::I8);
        }
        let a = self.u.choose_index(self.specs.len())?;
        let b = self.u.choose_index(self.specs.len())?;
        let (fa, fb) = (self.fnref(a), self.fnref(b));
        let pa = self.b.ins().func_addr(types::I64, fa);
        let pb = self.b.ins().func_addr(types::I64, fb);
        let cc = self.pick(&[IntCC::Equal, IntCC::NotEqual])?;
        let c = self.b.ins().icmp(cc, pa, pb);
        let x = self.use_of(types::I8)?;
        let r = self.b.ins().bxor(x, c);
        self.def_of(types::I8, r)
    }

    fn edge_stmt(&mut self) -> GResult<()> {
        let mut kinds = Vec::new();
        for e in [
            EDGE_CONSTS,
            EDGE_OFFSETS,
            EDGE_SYMBOLS,
            EDGE_CHAINS,
            EDGE_TAIL,
        ] {
            if self.edge(e) {
                kinds.push(e);
            }
        }
        match self.pick(&kinds)? {
            EDGE_CONSTS => {
                let t = self.pick(&INT_TYPES)?;
                self.extreme_op(t)
            }
            EDGE_OFFSETS => {
                if self.u.ratio(1, 3)? {
                    self.big_stack_op()
                } else {
                    self.far_mem()
                }
            }
            EDGE_SYMBOLS => self.sym_op(),
            EDGE_CHAINS => self.chain(),
            _ => {
                if self.u.arbitrary()? {
                    self.addr_compare()
                } else {
                    self.call()
                }
            }
        }
    }

    /// End a `tail` function: sometimes by a `return_call` (direct or through the address) of
    /// a `tail` function with the same results, while the depth allows.
    fn finish(&mut self, me: usize) -> GResult<()> {
        let spec = &self.specs[me];
        let my_rets = spec.rets.clone();
        if spec.tail && self.cfg.tail_calls && self.edge(EDGE_TAIL) && self.u.ratio(2, 3)? {
            let specs = self.specs;
            let j = self.callee(|j| specs[j].tail && specs[j].rets == my_rets)?;
            let (rb, args) = self.depth_guarded_args(j)?;
            let fr = self.fnref(j);
            if self.u.arbitrary()? {
                self.b.ins().return_call(fr, &args);
            } else {
                let sig = self.sigref(j);
                let p = self.b.ins().func_addr(types::I64, fr);
                self.b.ins().return_call_indirect(sig, p, &args);
            }
            self.b.switch_to_block(rb);
        }
        let mut rets = Vec::new();
        for &t in &my_rets {
            rets.push(self.use_of(t)?);
        }
        self.b.ins().return_(&rets);
        Ok(())
    }

    fn stmt(&mut self) -> GResult<()> {
        if self.cfg.edges != 0 && self.u.ratio(1, 4)? {
            return self.edge_stmt();
        }
        // Near-duplicates: more calls (call sites whose callees clones swap, callers of clones).
        if self.cfg.near_dups && self.u.ratio(1, 12)? {
            return self.call();
        }
        let structured = self.nest < 3 && self.budget > 4;
        let k = self.u.int_in_range(0..=99)?;
        match k {
            0..=24 => {
                let t = self.pick(&INT_TYPES)?;
                self.int_binop(t)
            }
            25..=31 => {
                let t = self.pick(&INT_TYPES)?;
                self.int_unop(t)
            }
            32..=43 => {
                let t = self.pick(&[types::F32, types::F64])?;
                self.float_op(t)
            }
            44..=51 => self.convert(),
            52..=59 => self.load_buf(),
            60..=67 => self.store_buf(),
            68..=75 => self.stack_op(),
            76..=81 if structured => self.if_else(),
            82..=86 if structured => self.loop_(),
            87..=90 if structured => self.switch(),
            91..=96 => self.call(),
            _ => {
                let t = self.pick(&ALL_TYPES)?;
                let c = self.rand_const(t)?;
                self.def_of(t, c)
            }
        }
    }

    fn stmts(&mut self, max: usize) -> GResult<()> {
        let n = self.u.int_in_range(1..=max)?;
        for _ in 0..n {
            if self.budget == 0 {
                break;
            }
            self.budget -= 1;
            self.stmt()?;
        }
        Ok(())
    }
}

/// Generate `specs[me]`; with `must_call`, it makes at least one direct call; it calls the
/// functions of `avoid` one time in sixteen it would otherwise.
fn gen_function(
    u: &mut Unstructured,
    specs: &[FnSpec],
    me: usize,
    cfg: GenConfig,
    (must_call, avoid): (bool, &[usize]),
    fctx: &mut FunctionBuilderContext,
) -> GResult<(Function, Vec<ir::Inst>)> {
    let spec = &specs[me];
    let mut func = Function::with_name_signature(
        UserFuncName::testcase(spec.name.as_bytes()),
        spec.signature(),
    );
    let b = FunctionBuilder::new(&mut func, fctx);
    let mut g = Gen {
        u,
        b,
        specs,
        cfg,
        vars: Vec::new(),
        buf: Value::from_u32(0),
        depth: Value::from_u32(0),
        slots: Vec::new(),
        big_slots: Vec::new(),
        fnrefs: vec![None; specs.len()],
        sigrefs: vec![None; specs.len()],
        long_chain: false,
        budget: 0,
        loop_depth: 0,
        nest: 0,
        tweakable: Vec::new(),
        direct_calls: false,
        avoid: avoid.to_vec(),
    };
    g.budget = g.u.int_in_range(4..=28)?;
    let entry = g.b.create_block();
    g.b.append_block_params_for_function_params(entry);
    g.b.switch_to_block(entry);
    let ps = g.b.block_params(entry).to_vec();
    g.buf = ps[0];
    g.depth = ps[1];
    // Stack slots, zero-filled (the interpreter's stack starts zeroed, the machine's does not).
    for _ in 0..g.u.int_in_range(0..=2)? {
        let size = g.pick(&[16u32, 32])?;
        let ss =
            g.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 3));
        let z = g.iconst(types::I64, 0);
        for off in (0..size).step_by(8) {
            let p = g.b.ins().stack_addr(types::I64, ss, off as i32);
            g.b.ins().store(flags(), z, p, 0);
        }
        g.slots.push((ss, size));
    }
    // A big slot: zero-filled only where it is used, its first and last 32 bytes.
    if g.edge(EDGE_OFFSETS) && g.u.arbitrary()? {
        let size = g.pick(&[4096u32, 32768, 65536])?;
        let align = g.u.int_in_range(3..=6)?;
        let ss = g.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size,
            align,
        ));
        let z = g.iconst(types::I64, 0);
        for off in (0..32).step_by(8).chain((size - 32..size).step_by(8)) {
            let p = g.b.ins().stack_addr(types::I64, ss, off as i32);
            g.b.ins().store(flags(), z, p, 0);
        }
        g.big_slots.push((ss, size));
    }
    // Variables: the parameters, then two of every type.
    for (i, &t) in spec.params.iter().enumerate() {
        let v = g.b.declare_var(t);
        g.b.def_var(v, ps[2 + i]);
        g.vars.push((v, t));
    }
    for t in ALL_TYPES {
        while g.vars.iter().filter(|(_, vt)| *vt == t).count() < 2 {
            let v = g.b.declare_var(t);
            let c = g.rand_const(t)?;
            g.b.def_var(v, c);
            g.vars.push((v, t));
        }
    }
    g.stmts(12)?;
    if must_call {
        g.direct_calls = true;
        g.call()?;
    }
    g.finish(me)?;
    let tweakable = std::mem::take(&mut g.tweakable);
    g.b.seal_all_blocks();
    g.b.finalize(frontend_config());
    Ok((func, tweakable))
}

/// Change one integer constant of `f` (a near-duplicate). False when `f` has none to change.
fn perturb_constant(
    u: &mut Unstructured,
    f: &mut Function,
    tweakable: &[ir::Inst],
) -> GResult<bool> {
    let consts: Vec<ir::Inst> = f
        .layout
        .blocks()
        .flat_map(|b| f.layout.block_insts(b))
        .filter(|&i| f.dfg.insts[i].opcode() == Opcode::Iconst && tweakable.contains(&i))
        .collect();
    if consts.is_empty() {
        return Ok(false);
    }
    let i = *u.choose(&consts)?;
    let t = f.dfg.ctrl_typevar(i);
    if let InstructionData::UnaryImm { imm, .. } = &mut f.dfg.insts[i] {
        let delta: u64 = u.int_in_range(1..=3)?;
        let nv = ((imm.bits() as u64).wrapping_add(delta)) & mask_of(t);
        *imm = ir::immediates::Imm64::new(nv as i64);
    }
    Ok(true)
}

/// The wrapper `%run_<name>(x0, x1, x2, x3) -> (results hash, buffer checksum)`.
fn gen_wrapper(spec: &FnSpec, fctx: &mut FunctionBuilderContext) -> Function {
    let name = format!("run_{}", spec.name);
    let mut func =
        Function::with_name_signature(UserFuncName::testcase(name.as_bytes()), wrapper_signature());
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let xs = b.block_params(entry).to_vec();
    let ss = b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        BUF_BYTES,
        3,
    ));
    let buf = b.ins().stack_addr(types::I64, ss, 0);
    for k in 0..(BUF_BYTES / 8) as usize {
        let c = b.ins().iconst(
            types::I64,
            (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(2 * k as u64 + 1)) as i64,
        );
        let w = b.ins().imul(xs[k % 4], c);
        let kk = b.ins().iconst(types::I64, k as i64);
        let w = b.ins().iadd(w, kk);
        b.ins().store(flags(), w, buf, (8 * k) as i32);
    }
    let depth = b.ins().iconst(types::I64, START_DEPTH);
    let mut args = vec![buf, depth];
    for (i, &t) in spec.params.iter().enumerate() {
        let x = xs[(i + 1) % 4];
        let a = if t.is_float() {
            if i % 2 == 0 {
                b.ins().fcvt_from_sint(t, x)
            } else {
                let x = if t == types::F32 {
                    b.ins().ireduce(types::I32, x)
                } else {
                    x
                };
                b.ins().bitcast(t, MemFlagsData::new(), x)
            }
        } else if t == types::I64 {
            x
        } else {
            b.ins().ireduce(t, x)
        };
        args.push(a);
    }
    let sig = b.import_signature(spec.signature());
    let fr = b.import_function(ExtFuncData {
        name: ExternalName::testcase(spec.name.as_bytes()),
        signature: sig,
        colocated: true,
        patchable: false,
    });
    let call = b.ins().call(fr, &args);
    let rs = b.inst_results(call).to_vec();
    let k = b.ins().iconst(types::I64, 0x100_0000_01B3);
    let mut h = b.ins().iconst(types::I64, 0);
    for r in rs {
        let t = b.func.dfg.value_type(r);
        let bits = if t.is_float() {
            let it = t.as_int();
            let uno = b.ins().fcmp(FloatCC::Unordered, r, r);
            let bits = b.ins().bitcast(it, MemFlagsData::new(), r);
            let nan = if t == types::F32 {
                b.ins().iconst(it, 0x7fc0_0000)
            } else {
                b.ins().iconst(it, 0x7ff8_0000_0000_0000)
            };
            b.ins().select(uno, nan, bits)
        } else {
            r
        };
        let bt = b.func.dfg.value_type(bits);
        let bits = if bt == types::I64 {
            bits
        } else {
            b.ins().uextend(types::I64, bits)
        };
        let hk = b.ins().imul(h, k);
        h = b.ins().bxor(hk, bits);
    }
    let mut c = b.ins().iconst(types::I64, 0);
    for k2 in 0..(BUF_BYTES / 8) as i64 {
        let w = b.ins().load(types::I64, flags(), buf, (8 * k2) as i32);
        let x = b.ins().bxor(c, w);
        let x = b.ins().imul(x, k);
        let kk = b.ins().iconst(types::I64, k2);
        c = b.ins().iadd(x, kk);
    }
    b.ins().return_(&[h, c]);
    b.seal_all_blocks();
    b.finalize(frontend_config());
    func
}

/// A generated module: the functions (generated ones first, then the wrappers) and the names
/// of the wrappers to call.
#[derive(Clone, Debug)]
pub struct GeneratedModule {
    pub functions: Vec<Function>,
    pub entries: Vec<String>,
    /// Functions to compile with `Linkage::Local` (names without `%`); the others are exported.
    pub locals: Vec<String>,
}

/// Generate a random module from `u` without edge cases. Every function passes Cranelift's
/// verifier.
pub fn generate_module(u: &mut Unstructured) -> arbitrary::Result<GeneratedModule> {
    generate_module_with(u, GenConfig::default())
}

/// Generate a random module from `u` with the edge cases of `cfg`.
pub fn generate_module_with(
    u: &mut Unstructured,
    cfg: GenConfig,
) -> arbitrary::Result<GeneratedModule> {
    let n_base = u.int_in_range(1..=5)?;
    let mut specs: Vec<FnSpec> = Vec::new();
    for i in 0..n_base {
        if cfg.near_dups && i > 0 && u.ratio(1, 3)? {
            // The signature of an earlier function: callees a near-duplicate can swap.
            let mut s = specs[u.choose_index(i)?].clone();
            s.name = format!("f{i}");
            specs.push(s);
            continue;
        }
        // `tail` functions take up to 10 arguments (some on the stack).
        let tail = cfg.edges & EDGE_TAIL != 0 && u.ratio(2, 3)?;
        let np = u.int_in_range(0..=if tail { 8 } else { 3 })?;
        let nr = u.int_in_range(1..=2)?;
        let mut params = Vec::new();
        for _ in 0..np {
            params.push(*u.choose(&ALL_TYPES)?);
        }
        let mut rets = Vec::new();
        for _ in 0..nr {
            rets.push(*u.choose(&ALL_TYPES)?);
        }
        specs.push(FnSpec {
            name: format!("f{i}"),
            params,
            rets,
            tail,
        });
    }
    if cfg.near_dups {
        return near_dup_module(u, cfg, specs);
    }
    // Duplicates and near-duplicates of random base functions: (source, near). With edge
    // cases they are planned first, so the generated functions can call them, take their
    // addresses and compare them (the addresses of merged functions must stay distinct).
    let dup_spec = |specs: &[FnSpec], d: usize, src: usize, near: bool| {
        let mut s = specs[src].clone();
        s.name = format!(
            "{}{}{d}",
            specs[src].name,
            if near { "_near" } else { "_dup" }
        );
        s
    };
    let mut plan = Vec::new();
    if cfg.edges != 0 {
        for d in 0..u.int_in_range(0..=4)? {
            let (src, near) = (u.choose_index(n_base)?, u.arbitrary()?);
            specs.push(dup_spec(&specs, d, src, near));
            plan.push((src, near));
        }
    }
    let mut fctx = FunctionBuilderContext::new();
    let mut funcs = Vec::new();
    let mut tweakables = Vec::new();
    for i in 0..n_base {
        let (f, t) = gen_function(u, &specs, i, cfg, (false, &[]), &mut fctx)?;
        funcs.push(f);
        tweakables.push(t);
    }
    if cfg.edges == 0 {
        for d in 0..u.int_in_range(0..=4)? {
            let (src, near) = (u.choose_index(n_base)?, u.arbitrary()?);
            specs.push(dup_spec(&specs, d, src, near));
            plan.push((src, near));
        }
    }
    for (d, &(src, near)) in plan.iter().enumerate() {
        let mut f = funcs[src].clone();
        f.name = UserFuncName::testcase(specs[n_base + d].name.as_bytes());
        if near {
            perturb_constant(u, &mut f, &tweakables[src])?;
        }
        funcs.push(f);
    }
    let mut entries = Vec::new();
    for s in &specs {
        let w = gen_wrapper(s, &mut fctx);
        entries.push(jit_driver::opmap::func_name(&w.name));
        funcs.push(w);
    }
    Ok(GeneratedModule {
        functions: funcs,
        entries,
        locals: Vec::new(),
    })
}

/// Clones at most per module in near-duplicate mode.
const MAX_CLONES: usize = 12;

/// The rest of `generate_module_with` in near-duplicate mode: plan groups of clones, generate
/// the base functions (which may call the clones), make the clones with other constants and
/// callees, choose the local functions, add the wrappers.
fn near_dup_module(
    u: &mut Unstructured,
    cfg: GenConfig,
    mut specs: Vec<FnSpec>,
) -> GResult<GeneratedModule> {
    let n_base = specs.len();
    // Groups: (source, [(clone's spec index, mutated)]).
    let mut groups: Vec<(usize, Vec<(usize, bool)>)> = Vec::new();
    let mut clones = 0;
    for _ in 0..u.int_in_range(1..=n_base.min(3))? {
        let src = u.choose_index(n_base)?;
        if groups.iter().any(|(s, _)| *s == src) || clones == MAX_CLONES {
            continue;
        }
        let n = u.int_in_range(1..=5)?.min(MAX_CLONES - clones);
        let mut members = Vec::new();
        for c in 0..n {
            let mutated = !u.ratio(1, 6)?;
            let mut s = specs[src].clone();
            s.name = format!(
                "{}_{}{c}",
                specs[src].name,
                if mutated { "near" } else { "dup" }
            );
            members.push((specs.len(), mutated));
            specs.push(s);
        }
        clones += n;
        groups.push((src, members));
    }
    let mut fctx = FunctionBuilderContext::new();
    let mut funcs = Vec::new();
    let mut tweakables = Vec::new();
    for i in 0..n_base {
        // A group's source makes a direct call (a site whose callee its clones may swap), and
        // seldom calls its own clones.
        let own: Vec<usize> = groups
            .iter()
            .filter(|(s, _)| *s == i)
            .flat_map(|(_, ms)| ms.iter().map(|&(k, _)| k))
            .collect();
        let source = groups.iter().any(|(s, _)| *s == i);
        let (f, t) = gen_function(u, &specs, i, cfg, (source, &own), &mut fctx)?;
        funcs.push(f);
        tweakables.push(t);
    }
    for (src, members) in &groups {
        let mut group = vec![*src];
        group.extend(members.iter().map(|&(k, _)| k));
        let plan = HolePlan::new(u, &funcs[*src], &tweakables[*src], &specs, &group)?;
        // Where the original refers to itself, the clones refer to themselves (in one group
        // in ten they call the original: a call within the group, which is not merged).
        let self_calls = !u.ratio(1, 10)?;
        for &(k, mutated) in members {
            let mut f = funcs[*src].clone();
            f.name = UserFuncName::testcase(specs[k].name.as_bytes());
            if self_calls {
                let me = ExternalName::testcase(specs[*src].name.as_bytes());
                for e in f.dfg.ext_funcs.values_mut() {
                    if e.name == me {
                        e.name = ExternalName::testcase(specs[k].name.as_bytes());
                    }
                }
            }
            if mutated {
                plan.apply(u, &mut f, &specs)?;
                // Half of them differ in their instructions too (for `merge-aligned`).
                if u.ratio(1, 2)? {
                    edit_structure(u, &mut f, &tweakables[*src])?;
                }
            }
            funcs.push(f);
        }
    }
    // Locals: group members more often than the others.
    let mut locals = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let member = i >= n_base || groups.iter().any(|(src, _)| *src == i);
        let local = if member {
            u.ratio(2, 3)?
        } else {
            u.ratio(1, 2)?
        };
        if local {
            locals.push(s.name.clone());
        }
    }
    let mut entries = Vec::new();
    for s in &specs {
        let w = gen_wrapper(s, &mut fctx);
        entries.push(jit_driver::opmap::func_name(&w.name));
        funcs.push(w);
    }
    Ok(GeneratedModule {
        functions: funcs,
        entries,
        locals,
    })
}

/// Edit one to three integer operations of `f` (of those in `editable`), as instances of a
/// template over different types differ: replace one by another operation, insert one
/// before it (its first operand xor a constant), remove it (its result becomes its first
/// operand), or split its block before it (an extra block, entered by a `jump`). Only the
/// generator's data operations are edited, never loop counters or addresses, so the function
/// still terminates and stays in bounds.
fn edit_structure(u: &mut Unstructured, f: &mut Function, editable: &[ir::Inst]) -> GResult<()> {
    let mut ops: Vec<ir::Inst> = editable
        .iter()
        .copied()
        .filter(|&i| {
            f.layout.inst_block(i).is_some()
                && matches!(
                    f.dfg.insts[i].opcode(),
                    Opcode::Iadd
                        | Opcode::Isub
                        | Opcode::Imul
                        | Opcode::Band
                        | Opcode::Bor
                        | Opcode::Bxor
                        | Opcode::Ishl
                        | Opcode::Ushr
                        | Opcode::Sshr
                        | Opcode::Rotl
                        | Opcode::Rotr
                        | Opcode::Smin
                        | Opcode::Umax
                )
        })
        .collect();
    for _ in 0..u.int_in_range(1..=3)? {
        if ops.is_empty() {
            break;
        }
        let inst = ops.swap_remove(u.choose_index(ops.len())?);
        let [x, y] = [f.dfg.inst_args(inst)[0], f.dfg.inst_args(inst)[1]];
        let r = f.dfg.first_result(inst);
        let t = f.dfg.value_type(r);
        match u.int_in_range(0..=3)? {
            // An extra block: the rest of the block from `inst` on, entered by a `jump`.
            3 => {
                let old = f.layout.inst_block(inst).expect("in the layout");
                let rest = f.dfg.make_block();
                f.layout.split_block(rest, inst);
                FuncCursor::new(f).at_bottom(old).ins().jump(rest, &[]);
            }
            0 => {
                let _ = match f.dfg.insts[inst].opcode() {
                    Opcode::Iadd => f.replace(inst).isub(x, y),
                    Opcode::Isub | Opcode::Imul => f.replace(inst).iadd(x, y),
                    Opcode::Bxor => f.replace(inst).bor(x, y),
                    Opcode::Bor | Opcode::Band => f.replace(inst).bxor(x, y),
                    _ => f.replace(inst).band(x, y),
                };
            }
            1 => {
                let k: u8 = u.arbitrary()?;
                let mut pos = FuncCursor::new(f).at_inst(inst);
                let c = pos.ins().iconst(t, k as i64);
                let x2 = pos.ins().bxor(x, c);
                f.dfg.inst_args_mut(inst)[0] = x2;
            }
            _ => {
                f.dfg.clear_results(inst);
                f.dfg.change_to_alias(r, x);
                f.layout.remove_inst(inst);
            }
        }
    }
    Ok(())
}

/// The holes of a group of near-duplicates: constants of the source function whose values the
/// clones change, and direct call sites whose callees they swap (with the candidates: the
/// generated functions of the callee's signature).
struct HolePlan {
    consts: Vec<ir::Inst>,
    sites: Vec<(ir::Inst, Vec<usize>)>,
}

impl HolePlan {
    /// The plan of the group `group` (the source first) of spec indices.
    fn new(
        u: &mut Unstructured,
        f: &Function,
        tweakable: &[ir::Inst],
        specs: &[FnSpec],
        group: &[usize],
    ) -> GResult<HolePlan> {
        let insts: Vec<ir::Inst> = f
            .layout
            .blocks()
            .flat_map(|b| f.layout.block_insts(b))
            .collect();
        let mut consts: Vec<ir::Inst> = insts
            .iter()
            .copied()
            .filter(|&i| {
                matches!(
                    f.dfg.insts[i].opcode(),
                    Opcode::Iconst | Opcode::F32const | Opcode::F64const
                ) && tweakable.contains(&i)
            })
            .collect();
        // One group in ten has more holes than the parameter cap allows.
        let n = if u.ratio(1, 10)? {
            u.int_in_range(4..=8)?
        } else {
            u.int_in_range(1..=3)?
        };
        let mut chosen = Vec::new();
        while chosen.len() < n && !consts.is_empty() {
            chosen.push(consts.swap_remove(u.choose_index(consts.len())?));
        }
        // New callees come from outside the group, but in one group in ten also from inside
        // (not merged: the group would call itself through a pointer).
        let inside = u.ratio(1, 10)?;
        let mut sites: Vec<(ir::Inst, Vec<usize>)> = Vec::new();
        for &i in &insts {
            if let InstructionData::Call { func_ref, .. } = f.dfg.insts[i] {
                let name = f.dfg.ext_funcs[func_ref].name.clone();
                let Some(j) = specs
                    .iter()
                    .position(|s| ExternalName::testcase(s.name.as_bytes()) == name)
                else {
                    continue;
                };
                let sig = specs[j].signature();
                let cands: Vec<usize> = (0..specs.len())
                    .filter(|&c| {
                        c != j && specs[c].signature() == sig && (inside || !group.contains(&c))
                    })
                    .collect();
                if !cands.is_empty() {
                    sites.push((i, cands));
                }
            }
        }
        let n_sites = if u.ratio(3, 4)? {
            u.int_in_range(1..=2)?
        } else {
            0
        };
        let mut chosen_sites = Vec::new();
        while chosen_sites.len() < n_sites && !sites.is_empty() {
            chosen_sites.push(sites.swap_remove(u.choose_index(sites.len())?));
        }
        Ok(HolePlan {
            consts: chosen,
            sites: chosen_sites,
        })
    }

    /// Give the clone `f` other values at some hole constants (at least one when there are
    /// any) and other callees at some call sites.
    fn apply(&self, u: &mut Unstructured, f: &mut Function, specs: &[FnSpec]) -> GResult<()> {
        let mut changed = false;
        for (k, &i) in self.consts.iter().enumerate() {
            let last = k + 1 == self.consts.len();
            if u.ratio(3, 4)? || (last && !changed) {
                mutate_constant(u, f, i)?;
                changed = true;
            }
        }
        for (i, cands) in &self.sites {
            if !u.ratio(2, 3)? {
                continue;
            }
            let c = *u.choose(cands)?;
            let name = ExternalName::testcase(specs[c].name.as_bytes());
            let InstructionData::Call { func_ref, .. } = f.dfg.insts[*i] else {
                continue;
            };
            let signature = f.dfg.ext_funcs[func_ref].signature;
            let existing = f
                .dfg
                .ext_funcs
                .iter()
                .find(|(_, e)| e.name == name && e.signature == signature)
                .map(|(r, _)| r);
            let r = match existing {
                Some(r) => r,
                None => f.import_function(ExtFuncData {
                    name,
                    signature,
                    colocated: true,
                    patchable: false,
                }),
            };
            if let InstructionData::Call { func_ref, .. } = &mut f.dfg.insts[*i] {
                *func_ref = r;
            }
        }
        Ok(())
    }
}

/// Give the constant `i` of `f` another value of its type (integer: near, random or extreme;
/// float: another number, an infinity, a NaN or random bits).
fn mutate_constant(u: &mut Unstructured, f: &mut Function, i: ir::Inst) -> GResult<()> {
    let t = f.dfg.ctrl_typevar(i);
    match &mut f.dfg.insts[i] {
        InstructionData::UnaryImm { imm, .. } => {
            let m = mask_of(t);
            let old = imm.bits() as u64 & m;
            let min = 1u64 << (t.bits() - 1);
            let nv = match u.int_in_range(0..=4)? {
                0 => old.wrapping_add(u.int_in_range(1..=3)?),
                1 => u.arbitrary()?,
                2 => *u.choose(&[0, 1, u64::MAX, min, min - 1])?,
                3 => u.int_in_range(0..=16)?,
                _ => old ^ (1u64 << u.int_in_range(0..=(t.bits() as u64 - 1))?),
            } & m;
            let nv = if nv == old {
                old.wrapping_add(1) & m
            } else {
                nv
            };
            *imm = ir::immediates::Imm64::new(nv as i64);
        }
        InstructionData::UnaryIeee32 { imm, .. } => {
            let old = imm.bits();
            let x = new_float(u, f32::from_bits(old) as f64)?;
            let nb = if u.ratio(1, 5)? {
                u.arbitrary()?
            } else {
                (x as f32).to_bits()
            };
            let nb = if nb == old { old ^ 1 } else { nb };
            *imm = ir::immediates::Ieee32::with_bits(nb);
        }
        InstructionData::UnaryIeee64 { imm, .. } => {
            let old = imm.bits();
            let x = new_float(u, f64::from_bits(old))?;
            let nb = if u.ratio(1, 5)? {
                u.arbitrary()?
            } else {
                x.to_bits()
            };
            let nb = if nb == old { old ^ 1 } else { nb };
            *imm = ir::immediates::Ieee64::with_bits(nb);
        }
        _ => {}
    }
    Ok(())
}

/// Another float near `old`, or a special one.
fn new_float(u: &mut Unstructured, old: f64) -> GResult<f64> {
    Ok(match u.int_in_range(0..=3)? {
        0 => -old,
        1 => old * 2.0 + 1.0,
        _ => *u.choose(&[
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.5,
            2.0,
            1e10,
            -3.25,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            7.0,
        ])?,
    })
}

/// Run Cranelift's verifier on every function.
pub fn verify_all(funcs: &[Function]) -> Result<(), String> {
    let fl = settings::Flags::new(settings::builder());
    for f in funcs {
        if let Err(e) = cranelift_codegen::verifier::verify_function(f, &fl) {
            return Err(cranelift_codegen::print_errors::pretty_verifier_error(
                f, None, e,
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Execution.

/// The outcome of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// (results hash, buffer checksum).
    Values(Vec<u64>),
    Trap(String),
    /// The call could not be run (interpreter limits, timeout, ...).
    Error(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Outcome::Values(v) => {
                let s: Vec<String> = v.iter().map(|x| format!("{:#x}", x)).collect();
                write!(f, "[{}]", s.join(", "))
            }
            Outcome::Trap(t) => write!(f, "trap ({t})"),
            Outcome::Error(e) => write!(f, "error ({e})"),
        }
    }
}

/// Compare the oracle's outcome with the pipeline's: `None` when they agree (values equal, or
/// both trapped), else a description of the difference.
pub fn compare_outcomes(oracle: &Outcome, actual: &Outcome) -> Option<String> {
    match (oracle, actual) {
        (Outcome::Values(a), Outcome::Values(b)) if a == b => None,
        (Outcome::Trap(_), Outcome::Trap(_)) => None,
        (Outcome::Values(a), Outcome::Values(b)) if a.len() == b.len() && a.len() == 2 => {
            let what = match (a[0] == b[0], a[1] == b[1]) {
                (false, true) => "results differ",
                (true, false) => "memory differs",
                _ => "results and memory differ",
            };
            Some(format!("{what}: interpreter {oracle}, pipeline {actual}"))
        }
        _ => Some(format!("interpreter {oracle}, pipeline {actual}")),
    }
}

const FUEL: u64 = 2_000_000;

/// The fake address the oracle gives a symbol (only differences and equalities of one symbol's
/// values are observed, so any address will do).
fn fake_symbol_address(name: &ExternalName) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.display(None).to_string().bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    0x5000_0000_0000 + ((h & 0xffff) << 24)
}

fn needs_oracle_form(f: &Function) -> bool {
    f.layout
        .blocks()
        .flat_map(|b| f.layout.block_insts(b))
        .any(|i| match f.dfg.insts[i] {
            InstructionData::UnaryGlobalValue { .. } => true,
            InstructionData::Load { offset, .. } | InstructionData::Store { offset, .. } => {
                i32::from(offset) < 0
            }
            _ => false,
        })
}

/// What the interpreter runs for `f`: the same function, except that each `symbol_value` of a
/// symbol plus an offset becomes a constant (a fake address of the symbol plus the offset; the
/// interpreter cannot resolve symbols), and each load or store with a negative offset gets the
/// offset added explicitly (cranelift-interpreter 0.135 zero-extends the offset immediate where
/// Cranelift's semantics sign-extend it).
pub fn oracle_form(f: &Function) -> Function {
    let mut f = f.clone();
    let mut pos = FuncCursor::new(&mut f);
    while pos.next_block().is_some() {
        while let Some(inst) = pos.next_inst() {
            match pos.func.dfg.insts[inst] {
                InstructionData::UnaryGlobalValue {
                    opcode: Opcode::SymbolValue,
                    global_value,
                } => {
                    if let GlobalValueData::Symbol {
                        ref name, offset, ..
                    } = pos.func.global_values[global_value]
                    {
                        let v = fake_symbol_address(name).wrapping_add(offset.bits() as u64);
                        // The result (an i64) stays; only the instruction changes.
                        pos.func.dfg.insts[inst] = InstructionData::UnaryImm {
                            opcode: Opcode::Iconst,
                            imm: ir::immediates::Imm64::new(v as i64),
                        };
                    }
                }
                InstructionData::Load { arg, offset, .. } if i32::from(offset) < 0 => {
                    let c = pos.ins().iconst(types::I64, i64::from(i32::from(offset)));
                    let p = pos.ins().iadd(arg, c);
                    if let InstructionData::Load { arg, offset, .. } = &mut pos.func.dfg.insts[inst]
                    {
                        *arg = p;
                        *offset = 0.into();
                    }
                }
                InstructionData::Store { args, offset, .. } if i32::from(offset) < 0 => {
                    let c = pos.ins().iconst(types::I64, i64::from(i32::from(offset)));
                    let p = pos.ins().iadd(args[1], c);
                    if let InstructionData::Store { args, offset, .. } =
                        &mut pos.func.dfg.insts[inst]
                    {
                        args[1] = p;
                        *offset = 0.into();
                    }
                }
                _ => {}
            }
        }
    }
    f
}

/// Run `entry(args)` in Cranelift's interpreter.
pub fn interpret(funcs: &[Function], entry: &str, args: &[i64]) -> Outcome {
    interpret_on(funcs, entry, args, cfg!(target_endian = "big"))
}

/// `interpret` for a target of the given byte order (memory accesses without an explicit
/// one take the target's).
pub fn interpret_on(funcs: &[Function], entry: &str, args: &[i64], big_endian: bool) -> Outcome {
    let rewritten: Vec<Option<Function>> = funcs
        .iter()
        .map(|f| needs_oracle_form(f).then(|| oracle_form(f)))
        .collect();
    let mut store = FunctionStore::default();
    for (f, r) in funcs.iter().zip(&rewritten) {
        store.add(f.name.to_string(), r.as_ref().unwrap_or(f));
    }
    let mut state = InterpreterState::default().with_function_store(store);
    state.native_endianness = if big_endian {
        ir::Endianness::Big
    } else {
        ir::Endianness::Little
    };
    let mut interp = Interpreter::new(state).with_fuel(Some(FUEL));
    let dv: Vec<DataValue> = args.iter().map(|&a| DataValue::I64(a)).collect();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        interp.call_by_name(&format!("%{entry}"), &dv)
    })) {
        Ok(Ok(ControlFlow::Return(rs))) => Outcome::Values(
            rs.iter()
                .map(|r| match r {
                    DataValue::I64(x) => *x as u64,
                    other => other.to_string().len() as u64,
                })
                .collect(),
        ),
        Ok(Ok(ControlFlow::Trap(t))) => Outcome::Trap(t.to_string()),
        Ok(Ok(_)) => Outcome::Error("unexpected control flow".into()),
        Ok(Err(e)) => Outcome::Error(e.to_string()),
        Err(_) => Outcome::Error("interpreter panicked".into()),
    }
}

/// Lift, run the passes, lower and JIT-compile `funcs` (every function from its lowered LIR
/// with `lower_all`; otherwise only those a pass changed).
pub fn compile_pipeline(funcs: &[Function], passes: &str) -> Result<Harness, String> {
    compile_pipeline_with_stats(funcs, passes, false, &mut Stats::default())
}

/// `compile_pipeline`, adding the statistics to `stats`.
pub fn compile_pipeline_with_stats(
    funcs: &[Function],
    passes: &str,
    lower_all: bool,
    stats: &mut Stats,
) -> Result<Harness, String> {
    compile_pipeline_on(true, funcs, passes, lower_all, stats)
}

/// `compile_pipeline_with_stats` for `pipeline_isa(frame_pointers)`. A panic in the pipeline is
/// an error (so a campaign goes on and writes a reproducer).
pub fn compile_pipeline_on(
    frame_pointers: bool,
    funcs: &[Function],
    passes: &str,
    lower_all: bool,
    stats: &mut Stats,
) -> Result<Harness, String> {
    let config = MergeConfig {
        passes: parse_pass_list(passes).map_err(|e| e.to_string())?,
        debug: jit_driver::DebugOptions {
            verify_lir: true,
            lower_all,
            ..Default::default()
        },
        ..Default::default()
    };
    let isa = pipeline_isa(frame_pointers)?;
    let h = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Harness::compile(isa, funcs.to_vec(), config, &[wrapper_signature()])
    }))
    .map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("the pipeline panicked: {msg}")
    })??;
    stats.merge_from(h.stats());
    Ok(h)
}

/// A module compiled with some functions local (`compile_pipeline_linked`): `Harness` exports
/// every function, and `merge-similar` folds only local ones. Only the wrappers (exported) are
/// called.
pub struct LinkedJit {
    module: Option<MergeModule<JITModule>>,
    ids: std::collections::HashMap<String, FuncId>,
}

impl LinkedJit {
    /// Statistics of the compile.
    pub fn stats(&self) -> &Stats {
        self.module().stats()
    }

    /// The module (merge map, statistics).
    pub fn module(&self) -> &MergeModule<JITModule> {
        self.module.as_ref().expect("live")
    }

    /// How the function `name` (without `%`) was merged, if it was.
    pub fn merge_kind(&self, name: &str) -> Option<midend::state::MergeKind> {
        self.module().merge_kind(*self.ids.get(name)?)
    }
}

impl Drop for LinkedJit {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: no pointer into the module outlives it.
            unsafe { m.free_memory() };
        }
    }
}

/// The results of a wrapper, as the System V ABI returns two `i64`s (in two registers).
#[repr(C)]
struct WrapperResults(u64, u64);

#[cfg(target_arch = "x86_64")]
type WrapperFn = extern "sysv64" fn(u64, u64, u64, u64) -> WrapperResults;
#[cfg(not(target_arch = "x86_64"))]
type WrapperFn = extern "C" fn(u64, u64, u64, u64) -> WrapperResults;

/// Compiled code whose wrappers `run_jit` can call.
pub trait WrapperCall {
    /// Call the wrapper `name` (of signature `sig`, `wrapper_signature()`) with its four
    /// arguments in `buf[..4]`; its two results are stored to `buf[0]` and `buf[1]`. Must not
    /// allocate on success (it runs in a forked child).
    ///
    /// # Safety
    /// `buf` holds at least four slots and `name` is a wrapper of the module.
    unsafe fn call_wrapper(
        &self,
        name: &str,
        sig: &Signature,
        buf: &mut [u128],
    ) -> Result<(), String>;
}

impl WrapperCall for Harness {
    unsafe fn call_wrapper(
        &self,
        name: &str,
        sig: &Signature,
        buf: &mut [u128],
    ) -> Result<(), String> {
        // SAFETY: as the caller promises; `sig` is the wrapper's signature.
        unsafe { self.call_raw(name, sig, buf) }
    }
}

impl WrapperCall for LinkedJit {
    unsafe fn call_wrapper(
        &self,
        name: &str,
        _sig: &Signature,
        buf: &mut [u128],
    ) -> Result<(), String> {
        let m = self.module.as_ref().expect("live");
        let id = *self
            .ids
            .get(name)
            .ok_or_else(|| format!("no function %{name}"))?;
        // SAFETY: wrappers have the signature `WrapperFn` describes (System V, four i64
        // parameters, two i64 results).
        let f: WrapperFn = unsafe { std::mem::transmute(m.get_finalized_function(id)) };
        let r = f(buf[0] as u64, buf[1] as u64, buf[2] as u64, buf[3] as u64);
        buf[0] = r.0 as u128;
        buf[1] = r.1 as u128;
        Ok(())
    }
}

/// `compile_pipeline_on` with the functions named in `locals` compiled with `Linkage::Local`
/// (the others exported). A panic in the pipeline is an error.
pub fn compile_pipeline_linked(
    frame_pointers: bool,
    funcs: &[Function],
    locals: &[String],
    passes: &str,
    lower_all: bool,
    stats: &mut Stats,
) -> Result<LinkedJit, String> {
    let define = |m: &mut MergeModule<JITModule>, linked| {
        let ids = jit_driver::define_by_name(m, linked)?;
        m.flush_last()?;
        m.finalize_definitions()?;
        Ok(ids)
    };
    compile_linked_with(
        frame_pointers,
        funcs,
        locals,
        passes,
        (lower_all, Threads::default()),
        stats,
        define,
    )
}

/// The pipeline over `funcs` (those named in `locals` with `Linkage::Local`, the others
/// exported), defined and finalized in a new module by `define`. A panic is an error.
fn compile_linked_with(
    frame_pointers: bool,
    funcs: &[Function],
    locals: &[String],
    passes: &str,
    (lower_all, threads): (bool, Threads),
    stats: &mut Stats,
    define: impl FnOnce(
        &mut MergeModule<JITModule>,
        Vec<(Linkage, Function)>,
    ) -> cranelift_module::ModuleResult<Vec<(String, FuncId)>>,
) -> Result<LinkedJit, String> {
    // The host calls only the exported wrappers: local functions are folded with no code of
    // their own (with `fetch_locals` on, a local function is merged as an exported one is,
    // which `compile_pipeline_on` covers).
    let config = MergeConfig {
        passes: parse_pass_list(passes).map_err(|e| e.to_string())?,
        fetch_locals: false,
        threads,
        debug: jit_driver::DebugOptions {
            verify_lir: true,
            lower_all,
            ..Default::default()
        },
        ..Default::default()
    };
    let isa = pipeline_isa(frame_pointers)?;
    let linked: Vec<(Linkage, Function)> = funcs
        .iter()
        .map(|f| {
            let local = locals.contains(&jit_driver::opmap::func_name(&f.name));
            let l = if local {
                Linkage::Local
            } else {
                Linkage::Export
            };
            (l, f.clone())
        })
        .collect();
    let j = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let jit = JITModule::new(jit_driver::jit_builder(isa, &[]));
        let mut m = MergeModule::with_config(jit, config);
        let ids = match define(&mut m, linked) {
            Ok(ids) => ids,
            Err(e) => {
                // SAFETY: nothing was called.
                unsafe { m.free_memory() };
                return Err(format!("{e:#}"));
            }
        };
        Ok(LinkedJit {
            module: Some(m),
            ids: ids.into_iter().collect(),
        })
    }))
    .map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        format!("the pipeline panicked: {msg}")
    })??;
    stats.merge_from(j.stats());
    Ok(j)
}

/// The names a function refers to, spelled as `Function::name` displays them (`%f0`), each
/// with whether its address is taken (`func_addr`, `symbol_value`) rather than only called.
fn referenced_names(f: &Function) -> Vec<(String, bool)> {
    let mut addressed: std::collections::HashSet<FuncRef> = std::collections::HashSet::new();
    for b in f.layout.blocks() {
        for i in f.layout.block_insts(b) {
            if let InstructionData::FuncAddr { func_ref, .. } = f.dfg.insts[i] {
                addressed.insert(func_ref);
            }
        }
    }
    let mut names: Vec<(String, bool)> = f
        .dfg
        .ext_funcs
        .iter()
        .map(|(r, e)| {
            let name = e.name.display(Some(&f.params)).to_string();
            (name, addressed.contains(&r))
        })
        .collect();
    for gv in f.global_values.values() {
        if let GlobalValueData::Symbol { name, .. } = gv {
            names.push((name.display(Some(&f.params)).to_string(), true));
        }
    }
    names
}

/// The batches in which `compile_pipeline_batched` defines `funcs` (indices into `funcs`), for
/// batches of `size` (at least 1).
///
/// cranelift-jit patches a function's calls when it finalizes it, so everything a function
/// refers to must be defined by then: in its own batch or an earlier one. The functions go in
/// module order, except that one waits until what it refers to is placed (the generator's
/// base functions call the clones that follow them), and functions that refer to each other
/// (a cycle of the reference graph, recursion) go in one batch, which may then hold more than
/// `size`. A batch is closed once it holds `size` functions, or before a cycle that would
/// make it exceed `size`.
///
/// Unless `late_addresses`, a function whose address another takes goes in one batch with it,
/// as if they called each other: `MergeModule` learns that an address is observed when it
/// sees the code taking it (with `late_addresses`, a function it merged away in an earlier
/// batch gets a thunk in the later one).
pub fn batch_plan(funcs: &[Function], size: usize, late_addresses: bool) -> Vec<Vec<usize>> {
    let size = size.max(1);
    let n = funcs.len();
    let index: std::collections::HashMap<String, usize> = funcs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.to_string(), i))
        .collect();
    let mut refs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, f) in funcs.iter().enumerate() {
        for (name, address) in referenced_names(f) {
            let Some(&j) = index.get(&name) else {
                continue;
            };
            if j != i {
                refs[i].push(j);
                if address && !late_addresses {
                    refs[j].push(i);
                }
            }
        }
    }
    for r in &mut refs {
        r.sort_unstable();
        r.dedup();
    }
    // Strongly connected components (Tarjan, iterative), numbered in completion order.
    let mut comp = vec![usize::MAX; n];
    let mut num = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut n_comps = 0;
    let mut counter = 0;
    for root in 0..n {
        if num[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        num[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if let Some(&w) = refs[v].get(*k) {
                *k += 1;
                if num[w] == usize::MAX {
                    num[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(num[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == num[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = n_comps;
                    if w == v {
                        break;
                    }
                }
                n_comps += 1;
            }
        }
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_comps];
    for (i, &c) in comp.iter().enumerate() {
        members[c].push(i); // in module order
    }
    // Components in module order of their first member, each once those it refers to are
    // placed (Kahn's algorithm, the smallest first member first).
    let mut waits_on = vec![0usize; n_comps];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n_comps];
    for c in 0..n_comps {
        let mut deps: Vec<usize> = members[c]
            .iter()
            .flat_map(|&i| refs[i].iter().map(|&j| comp[j]))
            .filter(|&d| d != c)
            .collect();
        deps.sort_unstable();
        deps.dedup();
        waits_on[c] = deps.len();
        for d in deps {
            users[d].push(c);
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(usize, usize)>> = (0..n_comps)
        .filter(|&c| waits_on[c] == 0)
        .map(|c| std::cmp::Reverse((members[c][0], c)))
        .collect();
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    while let Some(std::cmp::Reverse((_, c))) = ready.pop() {
        if !current.is_empty() && current.len() + members[c].len() > size {
            batches.push(std::mem::take(&mut current));
        }
        current.extend_from_slice(&members[c]);
        if current.len() >= size {
            batches.push(std::mem::take(&mut current));
        }
        for &u in &users[c] {
            waits_on[u] -= 1;
            if waits_on[u] == 0 {
                ready.push(std::cmp::Reverse((members[u][0], u)));
            }
        }
    }
    if !current.is_empty() {
        batches.push(current);
    }
    debug_assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), n);
    batches
}

/// `compile_pipeline_linked` in batches (`FuzzOptions::batch`): every function is declared
/// first, then the batches of `plan` (indices into `funcs`, each function once, as
/// `batch_plan` makes them) are defined one after another, each
/// followed by `finalize_definitions` (the incremental path: later batches merge into the
/// frozen functions of earlier ones). The statistics are those of all the batches.
///
/// Batches also get invalid functions, drawn at random from the plan: one Cranelift's
/// verifier rejects (`define_function` must refuse it as the plain module does, leaving the
/// module as it was) and one that passes the verifier but fails to compile (the batch's
/// `finalize_definitions` must name exactly it in a `FunctionError` and compile the rest).
/// Every valid function must still compile and agree with the interpreter. The counts are
/// the statistics `fuzz.invalid_refused` and `fuzz.invalid_failed`.
pub fn compile_pipeline_batched(
    frame_pointers: bool,
    funcs: &[Function],
    locals: &[String],
    passes: &str,
    (lower_all, threads): (bool, Threads),
    plan: &[Vec<usize>],
    stats: &mut Stats,
) -> Result<LinkedJit, String> {
    let invalid = std::cell::Cell::new((0u64, 0u64));
    let define = |m: &mut MergeModule<JITModule>, linked| {
        let declared = jit_driver::declare_by_name(m, linked)?;
        let mut bodies: Vec<Option<(String, FuncId, Function)>> =
            declared.into_iter().map(Some).collect();
        let mut ids = Vec::with_capacity(bodies.len());
        let mut ctx = cranelift_codegen::Context::new();
        let mut rng = SplitMix64::new(plan.len() as u64 ^ (funcs.len() as u64) << 32);
        for (k, b) in plan.iter().enumerate() {
            let draw = rng.next_u64();
            let bad = (draw & 3 == 0).then(|| define_unverifiable(m, "", k));
            let failing = (draw & 12 == 0).then(|| define_uncompilable(m, "", k));
            for &i in b {
                let (name, id, f) = bodies[i].take().expect("each function in one batch");
                ctx.clear();
                ctx.func = f;
                m.define_function(id, &mut ctx)?;
                ids.push((name, id));
            }
            if let Some(bad) = bad {
                bad.map_err(|e| ModuleError::Backend(anyhow::anyhow!(e)))?;
                invalid.set((invalid.get().0 + 1, invalid.get().1));
            }
            match (m.finalize_definitions(), failing) {
                (Ok(()), None) => {}
                (Err(e), Some(Ok(id))) if failed_ids(&e) == Some(vec![id]) => {
                    invalid.set((invalid.get().0, invalid.get().1 + 1));
                }
                (r, failing) => {
                    return Err(ModuleError::Backend(anyhow::anyhow!(
                        "batch {k}: finalize_definitions returned {r:?}, with {failing:?} \
                         failing to compile"
                    )))
                }
            }
        }
        distinct_addresses_in_data(m, &ids)?;
        Ok(ids)
    };
    let j = compile_linked_with(
        frame_pointers,
        funcs,
        locals,
        passes,
        (lower_all, threads),
        stats,
        define,
    )?;
    let (refused, failed) = invalid.get();
    stats.add_custom("fuzz.invalid_refused", refused);
    stats.add_custom("fuzz.invalid_failed", failed);
    Ok(j)
}

/// After the last batch, a data object holding the address of every function: defined
/// after they were merged (a late thunk each for those merged away), each address is its
/// own, as with the plain module, whatever the address policy.
fn distinct_addresses_in_data(
    m: &mut MergeModule<JITModule>,
    ids: &[(String, FuncId)],
) -> cranelift_module::ModuleResult<()> {
    let table = m.declare_anonymous_data(false, false)?;
    let mut d = cranelift_module::DataDescription::new();
    d.define_zeroinit(8 * ids.len());
    for (k, (_, id)) in ids.iter().enumerate() {
        let r = m.declare_func_in_data(*id, &mut d);
        d.write_function_addr(8 * k as u32, r);
    }
    m.define_data(table, &d)?;
    m.finalize_definitions()?;
    let (p, _) = m.get_finalized_data(table);
    // SAFETY: the table holds `ids.len()` addresses, finalized.
    let slots = unsafe { std::slice::from_raw_parts(p as *const usize, ids.len()) };
    let mut seen = std::collections::HashMap::new();
    for (k, &a) in slots.iter().enumerate() {
        if let Some(j) = seen.insert(a, k) {
            return Err(ModuleError::Backend(anyhow::anyhow!(
                "a data object holds one address for {} and {}",
                ids[j].0,
                ids[k].0
            )));
        }
    }
    Ok(())
}

/// Declare `name`, `(i64) -> i64`, and define it with the body `body` builds in its one
/// block (given the parameter): what `define_function` returned, and the id.
fn define_invalid<M: Module>(
    m: &mut MergeModule<M>,
    name: &str,
    body: impl FnOnce(&mut FunctionBuilder, Value),
) -> Result<(cranelift_module::ModuleResult<()>, FuncId), String> {
    let mut s = m.make_signature();
    s.params.push(AbiParam::new(types::I64));
    s.returns.push(AbiParam::new(types::I64));
    let id = m
        .declare_function(name, Linkage::Export, &s)
        .map_err(|e| e.to_string())?;
    let mut ctx = m.make_context();
    ctx.func.signature = s;
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let x = b.block_params(block)[0];
    body(&mut b, x);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    Ok((m.define_function(id, &mut ctx), id))
}

/// Define a function Cranelift's verifier rejects (it returns nothing from a function that
/// returns an `i64`), named `{prefix}__fuzz_unverifiable{batch}`: `Ok` when `define_function`
/// refuses it as the plain module does.
pub(crate) fn define_unverifiable<M: Module>(
    m: &mut MergeModule<M>,
    prefix: &str,
    batch: usize,
) -> Result<(), String> {
    let name = format!("{prefix}__fuzz_unverifiable{batch}");
    match define_invalid(m, &name, |b, _| {
        b.ins().return_(&[]);
    })?
    .0
    {
        Err(ModuleError::Compilation(cranelift_codegen::CodegenError::Verifier(_))) => Ok(()),
        other => Err(format!(
            "an unverifiable function: define_function returned {other:?}, not the verifier's \
             error"
        )),
    }
}

/// Define a function that passes Cranelift's verifier but not its compile (two stack slots
/// larger than any frame), named `{prefix}__fuzz_uncompilable{batch}`; its id, or why it
/// could not be defined.
pub(crate) fn define_uncompilable<M: Module>(
    m: &mut MergeModule<M>,
    prefix: &str,
    batch: usize,
) -> Result<FuncId, String> {
    let name = format!("{prefix}__fuzz_uncompilable{batch}");
    let (r, id) = define_invalid(m, &name, |b, x| {
        for _ in 0..2 {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                u32::MAX - 64,
                0,
            ));
        }
        b.ins().return_(&[x]);
    })?;
    r.map_err(|e| format!("an uncompilable function refused at define: {e}"))?;
    Ok(id)
}

/// The functions a flush error names as failed, if it is a `FunctionError`.
pub(crate) fn failed_ids(e: &ModuleError) -> Option<Vec<FuncId>> {
    let ModuleError::Backend(b) = e else {
        return None;
    };
    let f = b.downcast_ref::<jit_driver::FunctionError>()?;
    Some(f.failures.iter().map(|f| f.id).collect())
}

/// Run the calls in forked children (one child runs calls until one traps; the next child
/// resumes after it).
pub fn run_jit<M: WrapperCall + ?Sized>(module: &M, calls: &[(String, Vec<i64>)]) -> Vec<Outcome> {
    let sig = wrapper_signature();
    let mut out = Vec::with_capacity(calls.len());
    // Pre-allocated per-call slot buffers: the child must not allocate.
    let mut bufs: Vec<Vec<u128>> = calls
        .iter()
        .map(|(_, a)| a.iter().map(|&x| x as u64 as u128).collect())
        .collect();
    while out.len() < calls.len() {
        let start = out.len();
        let mut fds = [0i32; 2];
        // SAFETY: plain POSIX calls; the child only runs JIT code, writes to a pipe and exits.
        unsafe {
            if libc::pipe(fds.as_mut_ptr()) != 0 {
                out.push(Outcome::Error("pipe failed".into()));
                continue;
            }
            let pid = libc::fork();
            if pid < 0 {
                libc::close(fds[0]);
                libc::close(fds[1]);
                out.push(Outcome::Error("fork failed".into()));
                continue;
            }
            if pid == 0 {
                libc::close(fds[0]);
                libc::alarm(10);
                for i in start..calls.len() {
                    let ok = module.call_wrapper(&calls[i].0, &sig, &mut bufs[i]).is_ok();
                    if !ok {
                        libc::_exit(3);
                    }
                    let rec: [u64; 2] = [bufs[i][0] as u64, bufs[i][1] as u64];
                    libc::write(fds[1], rec.as_ptr() as *const libc::c_void, 16);
                }
                libc::_exit(0);
            }
            libc::close(fds[1]);
            let mut data = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = libc::read(fds[0], chunk.as_mut_ptr() as *mut libc::c_void, chunk.len());
                if n <= 0 {
                    break;
                }
                data.extend_from_slice(&chunk[..n as usize]);
            }
            libc::close(fds[0]);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            for rec in data.chunks_exact(16) {
                let a = u64::from_ne_bytes(rec[..8].try_into().unwrap());
                let b = u64::from_ne_bytes(rec[8..].try_into().unwrap());
                out.push(Outcome::Values(vec![a, b]));
            }
            if out.len() < calls.len() {
                if libc::WIFSIGNALED(status) {
                    let sig = libc::WTERMSIG(status);
                    if sig == libc::SIGALRM {
                        out.push(Outcome::Error("timeout".into()));
                    } else {
                        out.push(Outcome::Trap(format!("signal {sig}")));
                    }
                } else {
                    out.push(Outcome::Error("the call did not complete".into()));
                }
            }
        }
    }
    out
}

/// How the pipeline side compiles: passes, every function lowered, frame pointers, the local
/// functions, the batch size (0: one batch; see `compile_pipeline_batched`) and whether
/// addresses may be taken in later batches (`FuzzOptions::late_addresses`), on how many
/// threads (`FuzzOptions::threads`).
type Setup<'a> = (&'a str, bool, bool, &'a [String], (usize, bool, Threads));

/// The first disagreement of a module on the given calls: (call index, description).
fn first_mismatch(
    funcs: &[Function],
    calls: &[(String, Vec<i64>)],
    (passes, lower_all, frame_pointers, locals, (batch, late, threads)): Setup,
    mut report: Option<&mut FuzzReport>,
) -> Option<(usize, String, Vec<Outcome>)> {
    let oracle: Vec<Outcome> = calls.iter().map(|(n, a)| interpret(funcs, n, a)).collect();
    let mut stats = Stats::default();
    let compiled: Result<Box<dyn WrapperCall>, String> = if batch > 0 {
        let plan = batch_plan(funcs, batch, late);
        if let Some(r) = report.as_deref_mut() {
            r.batched_modules += 1;
            r.batches += plan.len();
        }
        compile_pipeline_batched(
            frame_pointers,
            funcs,
            locals,
            passes,
            (lower_all, threads),
            &plan,
            &mut stats,
        )
        .map(|j| Box::new(j) as Box<dyn WrapperCall>)
    } else if locals.is_empty() {
        compile_pipeline_on(frame_pointers, funcs, passes, lower_all, &mut stats)
            .map(|h| Box::new(h) as Box<dyn WrapperCall>)
    } else {
        compile_pipeline_linked(frame_pointers, funcs, locals, passes, lower_all, &mut stats)
            .map(|j| Box::new(j) as Box<dyn WrapperCall>)
    };
    if let Some(r) = report.as_deref_mut() {
        r.stats.merge_from(&stats);
        let merged = stats.get(midend::Counter::MergedSimilar);
        r.merged_similar += merged;
        if merged > 0 {
            r.similar_modules += 1;
        }
    }
    let compiled = match compiled {
        Ok(c) => c,
        Err(e) => return Some((0, format!("pipeline error: {e}"), oracle)),
    };
    let got = run_jit(&*compiled, calls);
    for (i, (o, g)) in oracle.iter().zip(&got).enumerate() {
        if matches!(o, Outcome::Error(_)) {
            // The oracle could not decide (fuel).
            if let Some(r) = report.as_deref_mut() {
                r.skipped_calls += 1;
            }
            continue;
        }
        if let Some(r) = report.as_deref_mut() {
            r.calls += 1;
            if matches!((o, g), (Outcome::Trap(_), Outcome::Trap(_))) {
                r.traps += 1;
            }
        }
        if let Some(d) = compare_outcomes(o, g) {
            return Some((i, d, oracle));
        }
    }
    None
}

fn called_names(f: &Function) -> Vec<String> {
    f.dfg
        .ext_funcs
        .values()
        .map(|e| e.name.display(Some(&f.params)).to_string())
        .collect()
}

/// Minimize a failing (functions, call) pair: drop functions nothing remaining calls, then zero
/// arguments, as long as it still fails.
fn minimize(
    funcs: Vec<Function>,
    call: (String, Vec<i64>),
    setup: Setup,
) -> (Vec<Function>, (String, Vec<i64>), String) {
    let fails = |fs: &[Function], c: &(String, Vec<i64>)| {
        first_mismatch(fs, std::slice::from_ref(c), setup, None).map(|(_, d, _)| d)
    };
    // Batched, symbols (`symbol_value`) count too: a module without the function a symbol
    // names fails otherwise (in one batch, as this minimizer always did).
    minimize_with(funcs, call, setup.4 .0 > 0, &fails)
}

/// A minimizer's test: the difference, if (functions, call) still fails.
pub(crate) type StillFails<'a> = dyn Fn(&[Function], &(String, Vec<i64>)) -> Option<String> + 'a;

/// `minimize` with the test `fails` (the difference, if the pair still fails). A function is
/// kept while another calls it, or with `by_reference`, refers to it in any way (an object
/// file must define every symbol its code names).
pub(crate) fn minimize_with(
    mut funcs: Vec<Function>,
    mut call: (String, Vec<i64>),
    by_reference: bool,
    fails: &StillFails<'_>,
) -> (Vec<Function>, (String, Vec<i64>), String) {
    let mut desc = fails(&funcs, &call).unwrap_or_else(|| "not reproducible alone".into());
    let entry = format!("%{}", call.0);
    loop {
        let mut changed = false;
        let mut i = 0;
        while i < funcs.len() {
            let name = funcs[i].name.to_string();
            let referenced = name == entry
                || funcs.iter().enumerate().any(|(j, f)| {
                    j != i
                        && if by_reference {
                            referenced_names(f).iter().any(|(n, _)| *n == name)
                        } else {
                            called_names(f).contains(&name)
                        }
                });
            if referenced {
                i += 1;
                continue;
            }
            let mut trial = funcs.clone();
            trial.remove(i);
            if let Some(d) = fails(&trial, &call) {
                funcs = trial;
                desc = d;
                changed = true;
            } else {
                i += 1;
            }
        }
        if !changed {
            break;
        }
    }
    for k in 0..call.1.len() {
        if call.1[k] == 0 {
            continue;
        }
        let mut trial = call.clone();
        trial.1[k] = 0;
        if let Some(d) = fails(&funcs, &trial) {
            call = trial;
            desc = d;
        }
    }
    (funcs, call, desc)
}

/// The setting of `host_isa` a reproducer states (`return_call` needs it on x86-64).
const FP_SETTING: &str = "set preserve_frame_pointers=true\n";

/// The text of a `.clif` run test reproducing a failure (symbols and negative offsets: the
/// interpreter needs the oracle form, see `oracle_form`).
pub fn reproducer_text(
    funcs: &[Function],
    call: &(String, Vec<i64>),
    oracle: &Outcome,
    header: &str,
) -> String {
    reproducer_text_for(
        funcs,
        call,
        oracle,
        header,
        &format!("{FP_SETTING}target x86_64"),
    )
}

/// `reproducer_text` with `settings` (`set` and `target` lines) for its header.
pub(crate) fn reproducer_text_for(
    funcs: &[Function],
    call: &(String, Vec<i64>),
    oracle: &Outcome,
    header: &str,
    settings: &str,
) -> String {
    let mut s = String::new();
    s.push_str("test interpret\ntest run\n");
    s.push_str(settings);
    s.push_str("\n\n");
    for line in header.lines() {
        s.push_str(&format!("; {line}\n"));
    }
    s.push('\n');
    let args: Vec<String> = call.1.iter().map(|a| a.to_string()).collect();
    for f in funcs {
        s.push_str(&f.display().to_string());
        if f.name.to_string() == format!("%{}", call.0) {
            match oracle {
                Outcome::Values(v) => s.push_str(&format!(
                    "; run: %{}({}) == [{}]\n",
                    call.0,
                    args.join(", "),
                    v.iter()
                        .map(|x| (*x as i64).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                other => s.push_str(&format!(
                    "; the interpreter gives {other} for %{}({})\n",
                    call.0,
                    args.join(", ")
                )),
            }
        }
        s.push('\n');
    }
    s
}

/// Inputs per wrapper.
pub(crate) const INPUTS: usize = 3;

pub(crate) fn random_input(rng: &mut SplitMix64) -> Vec<i64> {
    (0..4)
        .map(|_| match rng.next_u64() % 4 {
            0 => (rng.next_u64() % 9) as i64 - 4,
            1 => [i64::MIN, i64::MAX, -1, 0, 255, 65536][(rng.next_u64() % 6) as usize],
            _ => rng.next_u64() as i64,
        })
        .collect()
}

/// Generate, run and compare `opts.iterations` random modules.
pub fn fuzz(opts: &FuzzOptions) -> FuzzReport {
    let mut report = FuzzReport::default();
    let mut rng = SplitMix64::new(opts.seed);
    for it in 0..opts.iterations {
        let iter_seed = rng.next_u64();
        if let Some(f) = fuzz_one(iter_seed, opts, &mut report) {
            report.failed += 1;
            report.failures.push(format!("iteration {it}: {f}"));
        } else {
            report.passed += 1;
        }
    }
    report
}

/// Generate a module from a seed (the same module `fuzz` builds for an iteration seed, with the
/// edge cases of `config_for_seed`).
pub fn module_for_seed(seed: u64) -> Result<GeneratedModule, String> {
    module_for_seed_with(seed, config_for_seed(seed))
}

/// Generate a module from a seed with the given configuration.
pub fn module_for_seed_with(seed: u64, cfg: GenConfig) -> Result<GeneratedModule, String> {
    let mut rng = SplitMix64::new(seed);
    // Long block chains take more bytes; the plain generator uses a prefix of the same stream.
    let bytes = rng.bytes(64 * 1024);
    let mut u = Unstructured::new(&bytes);
    generate_module_with(&mut u, cfg).map_err(|e| format!("generator: {e}"))
}

/// One iteration: `None` when everything agreed, else a description of the failure.
pub fn fuzz_one(iter_seed: u64, opts: &FuzzOptions, report: &mut FuzzReport) -> Option<String> {
    let t0 = Instant::now();
    let cfg = config_for_seed(iter_seed);
    if cfg.edges != 0 {
        report.edge_modules += 1;
    }
    if cfg.near_dups {
        report.near_dup_modules += 1;
    }
    let gm = match module_for_seed(iter_seed) {
        Ok(g) => g,
        Err(e) => return Some(format!("seed {iter_seed:#x}: {e}")),
    };
    if let Err(e) = verify_all(&gm.functions) {
        return Some(format!(
            "seed {iter_seed:#x}: generator made an invalid function: {e}"
        ));
    }
    let mut rng = SplitMix64::new(iter_seed ^ 0x5555_5555_5555_5555);
    let mut calls = Vec::new();
    for e in &gm.entries {
        for _ in 0..INPUTS {
            calls.push((e.clone(), random_input(&mut rng)));
        }
    }
    // Every other module compiles every function from its lowered LIR (testing lift and
    // lower everywhere); the others compile unchanged functions from their input (testing
    // that rule and the redirected calls).
    let batch = opts.batch.size_for(iter_seed);
    let setup = (
        opts.passes.as_str(),
        iter_seed & 1 == 1,
        cfg.frame_pointers,
        gm.locals.as_slice(),
        (batch, opts.late_addresses, opts.threads),
    );
    let (idx, desc, oracle) = first_mismatch(&gm.functions, &calls, setup, Some(report))?;
    let (funcs, call, mdesc) = minimize(gm.functions.clone(), calls[idx].clone(), setup);
    let oracle_min = interpret(&funcs, &call.0, &call.1);
    let _ = oracle;
    let names: Vec<String> = funcs
        .iter()
        .map(|f| jit_driver::opmap::func_name(&f.name))
        .collect();
    let locals: Vec<String> = gm
        .locals
        .iter()
        .filter(|l| names.contains(l))
        .map(|l| format!("%{l}"))
        .collect();
    // Batched: the batches of the minimized module, each followed by finalize_definitions.
    let batches = if batch > 0 {
        let plan: Vec<String> = batch_plan(&funcs, batch, opts.late_addresses)
            .iter()
            .map(|b| {
                let names: Vec<String> = b.iter().map(|&i| funcs[i].name.to_string()).collect();
                format!("[{}]", names.join(" "))
            })
            .collect();
        format!(
            "\nbatch mode `--batch {}{}`: batches of {batch} (all functions declared first; \
             finalize_definitions after each batch): {}",
            opts.batch,
            if opts.late_addresses {
                " --late-addresses"
            } else {
                ""
            },
            plan.join(" ")
        )
    } else {
        String::new()
    };
    let header = format!(
        "mergelift fuzz: iteration seed {iter_seed:#x}, passes `{}`{}{}, edge cases {:#x}{batches}\n\
         local functions (Linkage::Local; the others exported): {}\n{}\n(before minimizing: {desc})",
        opts.passes,
        if setup.1 { ", every function lowered" } else { "" },
        if setup.2 { "" } else { ", without frame pointers" },
        cfg.edges,
        if locals.is_empty() { "none".to_string() } else { locals.join(" ") },
        mdesc
    );
    let mut text = reproducer_text(&funcs, &call, &oracle_min, &header);
    if !setup.2 {
        text = text.replacen(FP_SETTING, "", 1);
    }
    let _ = std::fs::create_dir_all(&opts.out_dir);
    let path = if batch > 0 {
        opts.out_dir
            .join(format!("fuzz-{iter_seed:016x}-batch{batch}.clif"))
    } else {
        opts.out_dir.join(format!("fuzz-{iter_seed:016x}.clif"))
    };
    let written = std::fs::write(&path, text).is_ok();
    log::debug!("fuzz iteration took {:?}", t0.elapsed());
    Some(format!(
        "seed {iter_seed:#x}{}: %{}: {mdesc}{}",
        if batch > 0 {
            format!(" (batches of {batch})")
        } else {
            String::new()
        },
        call.0,
        if written {
            format!(" (reproducer: {})", path.display())
        } else {
            String::new()
        }
    ))
}
