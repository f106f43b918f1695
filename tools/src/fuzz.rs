//! Differential fuzzing of the whole pipeline (issue 7).
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

use crate::harness::Harness;
use arbitrary::Unstructured;
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, types, AbiParam, ExtFuncData, ExternalName, FuncRef, Function, InstBuilder,
    InstructionData, JumpTableData, MemFlagsData, Opcode, Signature, StackSlot, StackSlotData,
    StackSlotKind, Type, UserFuncName, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_codegen::settings;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_interpreter::environment::FunctionStore;
use cranelift_interpreter::interpreter::{Interpreter, InterpreterState};
use cranelift_interpreter::step::ControlFlow;
use jit_driver::{host_isa, MergeConfig, OptLevel};
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
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            iterations: 100,
            seed: 0,
            passes: "merge,lvn".into(),
            out_dir: PathBuf::from("fuzz-failures"),
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
    /// Pass statistics summed over the iterations (`merged`, `lvn.removed`, ...).
    pub stats: Stats,
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
}

impl FnSpec {
    fn signature(&self) -> Signature {
        let mut s = Signature::new(CallConv::SystemV);
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
    /// Variables by type.
    vars: Vec<(Variable, Type)>,
    buf: Value,
    depth: Value,
    slots: Vec<(StackSlot, u32)>,
    fnrefs: Vec<Option<FuncRef>>,
    budget: usize,
    loop_depth: usize,
    nest: usize,
    /// Operand constants a near-duplicate may change (never masks, offsets or guards).
    tweakable: Vec<ir::Inst>,
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
    fn rand_iconst(&mut self, t: Type) -> GResult<Value> {
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
        let x = if self.u.ratio(1, 4)? {
            let bits: u64 = self.u.arbitrary()?;
            if t == types::F32 {
                f32::from_bits(bits as u32) as f64
            } else {
                f64::from_bits(bits)
            }
        } else {
            self.pick(&choices)?
        };
        Ok(if t == types::F32 {
            self.b.ins().f32const(x as f32)
        } else {
            self.b.ins().f64const(x)
        })
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

    fn stack_op(&mut self) -> GResult<()> {
        if self.slots.is_empty() {
            return self.load_buf();
        }
        let (ss, size) = self.pick(&self.slots.clone())?;
        let store: bool = self.u.arbitrary()?;
        let (t, v) = if store {
            let v = self.storable()?;
            (self.b.func.dfg.value_type(v), Some(v))
        } else {
            (self.pick(&ALL_TYPES)?, None)
        };
        let n = t.bytes();
        let p = if self.u.arbitrary()? {
            let off = self.u.int_in_range(0..=(size / n - 1))? * n;
            self.b.ins().stack_addr(types::I64, ss, off as i32)
        } else {
            let base = self.b.ins().stack_addr(types::I64, ss, 0);
            let off = self.dyn_offset(size, n)?;
            self.b.ins().iadd(base, off)
        };
        match v {
            Some(v) => {
                self.b.ins().store(flags(), v, p, 0);
            }
            None => {
                let v = self.b.ins().load(t, flags(), p, 0);
                self.def_of(t, v)?;
            }
        }
        Ok(())
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

    fn call(&mut self) -> GResult<()> {
        if self.specs.is_empty() || self.loop_depth > 0 {
            return self.int_binop(types::I64);
        }
        let j = self.u.choose_index(self.specs.len())?;
        let fr = match self.fnrefs[j] {
            Some(f) => f,
            None => {
                let sig = self.b.import_signature(self.specs[j].signature());
                let f = self.b.import_function(ExtFuncData {
                    name: ExternalName::testcase(self.specs[j].name.as_bytes()),
                    signature: sig,
                    colocated: true,
                    patchable: false,
                });
                self.fnrefs[j] = Some(f);
                f
            }
        };
        let zero = self.iconst(types::I64, 0);
        let go = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThan, self.depth, zero);
        let (cb, jb) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(go, cb, &[], jb, &[]);
        self.b.switch_to_block(cb);
        let one = self.iconst(types::I64, 1);
        let d1 = self.b.ins().isub(self.depth, one);
        let mut args = vec![self.buf, d1];
        for t in self.specs[j].params.clone() {
            args.push(self.use_of(t)?);
        }
        let inst = self.b.ins().call(fr, &args);
        let rs = self.b.inst_results(inst).to_vec();
        for r in rs {
            let t = self.b.func.dfg.value_type(r);
            self.def_of(t, r)?;
        }
        self.b.ins().jump(jb, &[]);
        self.b.switch_to_block(jb);
        Ok(())
    }

    fn stmt(&mut self) -> GResult<()> {
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

fn gen_function(
    u: &mut Unstructured,
    specs: &[FnSpec],
    me: usize,
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
        vars: Vec::new(),
        buf: Value::from_u32(0),
        depth: Value::from_u32(0),
        slots: Vec::new(),
        fnrefs: vec![None; specs.len()],
        budget: 0,
        loop_depth: 0,
        nest: 0,
        tweakable: Vec::new(),
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
    let mut rets = Vec::new();
    for &t in &spec.rets {
        rets.push(g.use_of(t)?);
    }
    g.b.ins().return_(&rets);
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
}

/// Generate a random module from `u`. Every function passes Cranelift's verifier.
pub fn generate_module(u: &mut Unstructured) -> arbitrary::Result<GeneratedModule> {
    let n_base = u.int_in_range(1..=5)?;
    let mut specs = Vec::new();
    for i in 0..n_base {
        let np = u.int_in_range(0..=3)?;
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
        });
    }
    let mut fctx = FunctionBuilderContext::new();
    let mut funcs = Vec::new();
    let mut tweakables = Vec::new();
    for i in 0..n_base {
        let (f, t) = gen_function(u, &specs, i, &mut fctx)?;
        funcs.push(f);
        tweakables.push(t);
    }
    // Duplicates and near-duplicates of random base functions.
    let n_dup = u.int_in_range(0..=4)?;
    for d in 0..n_dup {
        let src = u.choose_index(n_base)?;
        let near: bool = u.arbitrary()?;
        let name = format!(
            "{}{}{d}",
            specs[src].name,
            if near { "_near" } else { "_dup" }
        );
        let mut f = funcs[src].clone();
        f.name = UserFuncName::testcase(name.as_bytes());
        if near {
            perturb_constant(u, &mut f, &tweakables[src])?;
        }
        let mut s = specs[src].clone();
        s.name = name;
        specs.push(s);
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

/// Run `entry(args)` in Cranelift's interpreter.
pub fn interpret(funcs: &[Function], entry: &str, args: &[i64]) -> Outcome {
    let mut store = FunctionStore::default();
    for f in funcs {
        store.add(f.name.to_string(), f);
    }
    let mut interp = Interpreter::new(InterpreterState::default().with_function_store(store))
        .with_fuel(Some(FUEL));
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
    let config = MergeConfig {
        passes: parse_pass_list(passes).map_err(|e| e.to_string())?,
        verify_lir: true,
        lower_all,
        ..Default::default()
    };
    let isa = host_isa(OptLevel::None).map_err(|e| e.to_string())?;
    let h = Harness::compile(isa, funcs.to_vec(), config, &[wrapper_signature()])?;
    stats.merge_from(h.stats());
    Ok(h)
}

/// Run the calls in forked children (one child runs calls until one traps; the next child
/// resumes after it).
pub fn run_jit(module: &Harness, calls: &[(String, Vec<i64>)]) -> Vec<Outcome> {
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
                    let ok = module.call_raw(&calls[i].0, &sig, &mut bufs[i]).is_ok();
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

/// The first disagreement of a module on the given calls: (call index, description).
fn first_mismatch(
    funcs: &[Function],
    calls: &[(String, Vec<i64>)],
    (passes, lower_all): (&str, bool),
    mut report: Option<&mut FuzzReport>,
) -> Option<(usize, String, Vec<Outcome>)> {
    let oracle: Vec<Outcome> = calls.iter().map(|(n, a)| interpret(funcs, n, a)).collect();
    let mut stats = Stats::default();
    let compiled = compile_pipeline_with_stats(funcs, passes, lower_all, &mut stats);
    if let Some(r) = report.as_deref_mut() {
        r.stats.merge_from(&stats);
    }
    let compiled = match compiled {
        Ok(c) => c,
        Err(e) => return Some((0, format!("pipeline error: {e}"), oracle)),
    };
    let got = run_jit(&compiled, calls);
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
    mut funcs: Vec<Function>,
    mut call: (String, Vec<i64>),
    setup: (&str, bool),
) -> (Vec<Function>, (String, Vec<i64>), String) {
    let fails = |fs: &[Function], c: &(String, Vec<i64>)| {
        first_mismatch(fs, std::slice::from_ref(c), setup, None).map(|(_, d, _)| d)
    };
    let mut desc = fails(&funcs, &call).unwrap_or_else(|| "not reproducible alone".into());
    let entry = format!("%{}", call.0);
    loop {
        let mut changed = false;
        let mut i = 0;
        while i < funcs.len() {
            let name = funcs[i].name.to_string();
            let referenced = name == entry
                || funcs
                    .iter()
                    .enumerate()
                    .any(|(j, f)| j != i && called_names(f).contains(&name));
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

/// The text of a `.clif` run test reproducing a failure.
pub fn reproducer_text(
    funcs: &[Function],
    call: &(String, Vec<i64>),
    oracle: &Outcome,
    header: &str,
) -> String {
    let mut s = String::new();
    s.push_str("test interpret\ntest run\ntarget x86_64\n\n");
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
const INPUTS: usize = 3;

fn random_input(rng: &mut SplitMix64) -> Vec<i64> {
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

/// Generate a module from a seed (the same module `fuzz` builds for an iteration seed).
pub fn module_for_seed(seed: u64) -> Result<GeneratedModule, String> {
    let mut rng = SplitMix64::new(seed);
    let bytes = rng.bytes(16 * 1024);
    let mut u = Unstructured::new(&bytes);
    generate_module(&mut u).map_err(|e| format!("generator: {e}"))
}

/// One iteration: `None` when everything agreed, else a description of the failure.
pub fn fuzz_one(iter_seed: u64, opts: &FuzzOptions, report: &mut FuzzReport) -> Option<String> {
    let t0 = Instant::now();
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
    let setup = (opts.passes.as_str(), iter_seed & 1 == 1);
    let (idx, desc, oracle) = first_mismatch(&gm.functions, &calls, setup, Some(report))?;
    let (funcs, call, mdesc) = minimize(gm.functions.clone(), calls[idx].clone(), setup);
    let oracle_min = interpret(&funcs, &call.0, &call.1);
    let _ = oracle;
    let header = format!(
        "mergelift fuzz: iteration seed {iter_seed:#x}, passes `{}`{}\n{}\n(before minimizing: {desc})",
        opts.passes,
        if setup.1 { ", every function lowered" } else { "" },
        mdesc
    );
    let text = reproducer_text(&funcs, &call, &oracle_min, &header);
    let _ = std::fs::create_dir_all(&opts.out_dir);
    let path = opts.out_dir.join(format!("fuzz-{iter_seed:016x}.clif"));
    let written = std::fs::write(&path, text).is_ok();
    log::debug!("fuzz iteration took {:?}", t0.elapsed());
    Some(format!(
        "seed {iter_seed:#x}: %{}: {mdesc}{}",
        call.0,
        if written {
            format!(" (reproducer: {})", path.display())
        } else {
            String::new()
        }
    ))
}
