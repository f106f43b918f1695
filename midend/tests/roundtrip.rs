//! Property test: randomly generated, well-formed LIR modules verify, and print -> parse ->
//! print gives back the same text.
//!
//! The generator draws its decisions from a "tape" of random numbers (a `Vec<u32>` chosen by
//! proptest), so shrinking the tape shrinks the program. Reading past the end of the tape
//! yields zeros, which always select the smallest choice.

use midend::lir::*;
use midend::verifier::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use smallvec::SmallVec;

// ---------------------------------------------------------------------------------------------
// Randomness.

struct Tape {
    data: Vec<u32>,
    pos: usize,
}

impl Tape {
    fn new(data: Vec<u32>) -> Self {
        Tape { data, pos: 0 }
    }
    fn next(&mut self) -> u32 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.next() as usize % n
        }
    }
    /// True with probability `pct` percent (false once the tape is exhausted).
    fn chance(&mut self, pct: u32) -> bool {
        self.next() % 100 >= 100 - pct
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn u64(&mut self) -> u64 {
        (u64::from(self.next()) << 32) | u64::from(self.next())
    }
    fn i64(&mut self) -> i64 {
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => -1,
            3 => i64::MIN,
            4 => i64::MAX,
            5 => -(self.below(1000) as i64),
            6 => self.next() as i64,
            _ => self.u64() as i64,
        }
    }
    fn i32(&mut self) -> i32 {
        match self.below(7) {
            0 => 0,
            1 => 16,
            2 => -16,
            3 => i32::MIN,
            4 => i32::MAX,
            5 => -(self.below(4096) as i32),
            _ => self.next() as i32,
        }
    }
    fn f32_bits(&mut self) -> u32 {
        let r = self.next();
        self.pick(&[
            0,
            0x8000_0000,
            0x7fc0_0000,
            0x7f80_0001,
            0x3f80_0000,
            0xff80_0000,
            r,
        ])
    }
    fn f64_bits(&mut self) -> u64 {
        let r = self.u64();
        self.pick(&[
            0,
            1 << 63,
            0x7ff8_0000_0000_0000,
            0x7ff0_0000_0000_0001,
            0x3ff0_0000_0000_0000,
            r,
        ])
    }
    /// A string exercising the printer's quoting: quotes, backslashes, newlines, non-ASCII.
    fn string(&mut self) -> String {
        const CHARS: [char; 16] = [
            'a', 'Z', '0', ' ', ':', '"', '\\', '\n', '\t', '\r', 'é', '_', '.', '$', '-', '🙂',
        ];
        let n = self.below(7);
        (0..n).map(|_| self.pick(&CHARS)).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Vocabulary.

const INTS: [Type; 5] = [Type::I8, Type::I16, Type::I32, Type::I64, Type::I128];
const FLOATS: [Type; 2] = [Type::F32, Type::F64];
/// Types a constant can be materialised in.
const SCALARS: [Type; 7] = [
    Type::I8,
    Type::I16,
    Type::I32,
    Type::I64,
    Type::I128,
    Type::F32,
    Type::F64,
];

fn vector_types() -> [Type; 3] {
    [
        Type::I32.by(4).unwrap(),
        Type::F64.by(2).unwrap(),
        Type::I8.by(16).unwrap(),
    ]
}

const INT_UNARY: [Opcode; 9] = [
    Opcode::Neg,
    Opcode::Not,
    Opcode::Abs,
    Opcode::Clz,
    Opcode::Ctz,
    Opcode::Cls,
    Opcode::Popcnt,
    Opcode::Bswap,
    Opcode::Bitrev,
];
const INT_BINARY: [Opcode; 16] = [
    Opcode::Add,
    Opcode::Sub,
    Opcode::Mul,
    Opcode::Sdiv,
    Opcode::Udiv,
    Opcode::Srem,
    Opcode::Urem,
    Opcode::Umulhi,
    Opcode::Smulhi,
    Opcode::Smin,
    Opcode::Smax,
    Opcode::Umin,
    Opcode::Umax,
    Opcode::And,
    Opcode::Or,
    Opcode::Xor,
];
const SHIFTS: [Opcode; 5] = [
    Opcode::Shl,
    Opcode::Ushr,
    Opcode::Sshr,
    Opcode::Rotl,
    Opcode::Rotr,
];
const FLOAT_UNARY: [Opcode; 7] = [
    Opcode::Fneg,
    Opcode::Fabs,
    Opcode::Sqrt,
    Opcode::Ceil,
    Opcode::Floor,
    Opcode::Trunc,
    Opcode::Nearest,
];
const FLOAT_BINARY: [Opcode; 7] = [
    Opcode::Fadd,
    Opcode::Fsub,
    Opcode::Fmul,
    Opcode::Fdiv,
    Opcode::Fmin,
    Opcode::Fmax,
    Opcode::Fcopysign,
];
const LOADS: [Opcode; 7] = [
    Opcode::Load,
    Opcode::Uload8,
    Opcode::Sload8,
    Opcode::Uload16,
    Opcode::Sload16,
    Opcode::Uload32,
    Opcode::Sload32,
];
const STORES: [Opcode; 4] = [
    Opcode::Store,
    Opcode::Istore8,
    Opcode::Istore16,
    Opcode::Istore32,
];
const CALL_CONVS: [CallConv; 8] = [
    CallConv::Fast,
    CallConv::Tail,
    CallConv::SystemV,
    CallConv::WindowsFastcall,
    CallConv::AppleAarch64,
    CallConv::Probestack,
    CallConv::Winch,
    CallConv::PreserveAll,
];

/// Names of functions defined in the generated module (some need quoting).
const DEFINED_NAMES: [&str; 8] = [
    "fib",
    "u0:12",
    "main",
    "with space",
    "q\"uote",
    "",
    "a.b$c",
    "9lives",
];
/// Imported functions.
const IMPORTED_NAMES: [&str; 3] = ["memcpy", "u0:7", "ext\\fn"];
/// Global data.
const DATA_NAMES: [&str; 3] = ["gdata", "u1:0", "nl\nname"];

fn int_preds() -> Vec<Cond> {
    Cond::all()
        .iter()
        .copied()
        .filter(|c| !c.is_float())
        .collect()
}
fn float_preds() -> Vec<Cond> {
    Cond::all()
        .iter()
        .copied()
        .filter(|c| c.is_float())
        .collect()
}

fn gen_abi_param(t: &mut Tape, ty: Type) -> AbiParam {
    let mut p = AbiParam::new(ty);
    if t.chance(20) {
        p.ext = t.pick(&[Ext::Uext, Ext::Sext]);
    }
    if t.chance(15) {
        p.purpose = match t.below(3) {
            0 => Purpose::VmCtx,
            1 => Purpose::StructReturn,
            _ => Purpose::StructArgument(t.below(4096) as u32),
        };
    }
    p
}

/// A signature whose parameters and returns are scalar types (so values of them can always be
/// materialised), with vector parameters allowed when `vectors` is set.
fn gen_sig(t: &mut Tape, vectors: bool) -> Signature {
    let mut sig = Signature::new(t.pick(&CALL_CONVS));
    for _ in 0..t.below(4) {
        let ty = if vectors && t.chance(15) {
            t.pick(&vector_types())
        } else {
            t.pick(&SCALARS)
        };
        sig.params.push(gen_abi_param(t, ty));
    }
    for _ in 0..t.below(3) {
        let ty = t.pick(&SCALARS);
        sig.returns.push(gen_abi_param(t, ty));
    }
    sig
}

// ---------------------------------------------------------------------------------------------
// Control-flow plan.

#[derive(Clone, Debug)]
enum ExnPlan {
    Tag(u32, usize),
    Default(usize),
    Context,
}

#[derive(Clone, Debug)]
enum TermPlan {
    Ret,
    Trap(u8),
    TailCall,
    Jump(usize),
    Brif {
        two: bool,
        float: bool,
        then_: usize,
        else_: usize,
    },
    BrTable {
        default: usize,
        table: Vec<usize>,
    },
    TryCall {
        normal: usize,
        items: Vec<ExnPlan>,
    },
}

impl TermPlan {
    fn targets(&self) -> Vec<usize> {
        match self {
            TermPlan::Ret | TermPlan::Trap(_) | TermPlan::TailCall => vec![],
            TermPlan::Jump(b) => vec![*b],
            TermPlan::Brif { then_, else_, .. } => vec![*then_, *else_],
            TermPlan::BrTable { default, table } => std::iter::once(*default)
                .chain(table.iter().copied())
                .collect(),
            TermPlan::TryCall { normal, items } => std::iter::once(*normal)
                .chain(items.iter().filter_map(|i| match i {
                    ExnPlan::Tag(_, b) | ExnPlan::Default(b) => Some(*b),
                    ExnPlan::Context => None,
                }))
                .collect(),
        }
    }
}

fn trap_code(t: &mut Tape) -> u8 {
    if t.chance(50) {
        t.pick(&[251, 252, 253, 254, 255])
    } else {
        1 + t.below(250) as u8
    }
}

fn plan_terminator(t: &mut Tape, n: usize) -> TermPlan {
    // Branch targets are never the entry block.
    let target = |t: &mut Tape| 1 + t.below(n - 1);
    if n == 1 {
        return match t.below(3) {
            0 => TermPlan::Ret,
            1 => TermPlan::Trap(trap_code(t)),
            _ => TermPlan::TailCall,
        };
    }
    match t.below(9) {
        0 => TermPlan::Ret,
        1 => TermPlan::Trap(trap_code(t)),
        2 => TermPlan::TailCall,
        3 | 4 => TermPlan::Jump(target(t)),
        5 | 6 => TermPlan::Brif {
            two: t.chance(50),
            float: t.chance(30),
            then_: target(t),
            else_: target(t),
        },
        7 => TermPlan::BrTable {
            default: target(t),
            table: (0..t.below(4)).map(|_| target(t)).collect(),
        },
        _ => {
            let normal = target(t);
            let items = (0..t.below(4))
                .map(|_| match t.below(3) {
                    0 => ExnPlan::Tag(t.below(100) as u32, target(t)),
                    1 => ExnPlan::Default(target(t)),
                    _ => ExnPlan::Context,
                })
                .collect();
            TermPlan::TryCall { normal, items }
        }
    }
}

/// Dominator sets (bit masks) by the textbook data-flow iteration: independent of the
/// analyses under test. Unreachable blocks end up dominated by everything.
fn dominators(preds: &[Vec<usize>]) -> Vec<u64> {
    let n = preds.len();
    let all = (1u64 << n) - 1;
    let mut dom = vec![all; n];
    dom[0] = 1;
    let mut changed = true;
    while changed {
        changed = false;
        for b in 1..n {
            let mut d = all;
            for &p in &preds[b] {
                d &= dom[p];
            }
            d |= 1 << b;
            if d != dom[b] {
                dom[b] = d;
                changed = true;
            }
        }
    }
    dom
}

// ---------------------------------------------------------------------------------------------
// Function generator.

struct Env {
    callees: Vec<String>,
    data: Vec<String>,
}

struct Gen<'t, 'm> {
    t: &'t mut Tape,
    b: Builder<'m>,
    env: &'t Env,
    blocks: Vec<Block>,
    /// Values defined per block (in generation order).
    values: Vec<Vec<(Reg, Type)>>,
    dom: Vec<u64>,
    cur: usize,
    /// Signature of the last `func_addr`.
    addr_sig: u32,
}

impl Gen<'_, '_> {
    /// Values usable at the current point of block `cur`.
    fn avail(&self) -> Vec<(Reg, Type)> {
        let mut v = Vec::new();
        for d in 0..self.cur {
            if self.dom[self.cur] & (1 << d) != 0 {
                v.extend_from_slice(&self.values[d]);
            }
        }
        v.extend_from_slice(&self.values[self.cur]);
        v
    }

    fn new_value(&mut self, ty: Type) -> Reg {
        let r = self.b.func.new_reg(ty);
        self.values[self.cur].push((r, ty));
        r
    }

    fn imm(&mut self, ty: Type) -> Imm {
        if ty == Type::F32 {
            Imm::F32(self.t.f32_bits())
        } else if ty == Type::F64 {
            Imm::F64(self.t.f64_bits())
        } else {
            Imm::Int(self.t.i64())
        }
    }

    /// `%r = copy.T constant`.
    fn materialise(&mut self, ty: Type) -> Reg {
        let imm = self.imm(ty);
        let r = self.new_value(ty);
        self.b.ins(Opcode::Copy, ty, &[r], &[Operand::from(imm)]);
        r
    }

    /// A register of type `ty`, materialising a constant when none is available.
    fn reg(&mut self, ty: Type) -> Option<Reg> {
        let cands: Vec<Reg> = self
            .avail()
            .into_iter()
            .filter(|v| v.1 == ty)
            .map(|v| v.0)
            .collect();
        if !cands.is_empty() && !self.t.chance(10) {
            return Some(self.t.pick(&cands));
        }
        if SCALARS.contains(&ty) {
            Some(self.materialise(ty))
        } else {
            cands.first().copied()
        }
    }

    /// Any available register.
    fn any_reg(&mut self) -> Reg {
        let av = self.avail();
        self.t.pick(&av).0
    }

    /// A register or (for scalars, sometimes) a constant of type `ty`.
    fn value(&mut self, ty: Type) -> Option<Operand> {
        if SCALARS.contains(&ty) && self.t.chance(25) {
            return Some(Operand::from(self.imm(ty)));
        }
        self.reg(ty).map(Operand::Reg)
    }

    fn memflags(&mut self) -> MemFlagsRef {
        let t = &mut *self.t;
        let trap = match t.below(4) {
            0 => 0,
            1 => MemFlags::HEAP_OOB,
            _ => trap_code(t),
        };
        let bits = t.below(32) as u8;
        let nregions = self.b.func.regions.len();
        let region =
            (nregions > 0 && t.chance(40)).then(|| Region::from_u32(t.below(nregions) as u32));
        self.b.func.intern_memflags(MemFlags { bits, trap, region })
    }

    fn data_sym(&mut self) -> Symbol {
        let name = self
            .t
            .pick(&self.env.data.iter().map(String::as_str).collect::<Vec<_>>())
            .to_string();
        self.b.module.symbol(&name, SymbolKind::Data)
    }
    fn func_sym(&mut self) -> Symbol {
        let name = self
            .t
            .pick(
                &self
                    .env
                    .callees
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )
            .to_string();
        self.b.module.symbol(&name, SymbolKind::Function)
    }

    /// A memory operand of each of the three kinds.
    fn mem_operand(&mut self) -> Operand {
        match self.t.below(3) {
            0 => {
                let ints: Vec<Reg> = self
                    .avail()
                    .into_iter()
                    .filter(|v| v.1.is_scalar_int())
                    .map(|v| v.0)
                    .collect();
                let mut m = MemRef {
                    base: None.into(),
                    index: None.into(),
                    scale: 1,
                    disp: self.t.i32(),
                };
                if !ints.is_empty() && self.t.chance(85) {
                    m.base = self.t.pick(&ints).into();
                }
                if !ints.is_empty() && self.t.chance(50) {
                    m.index = self.t.pick(&ints).into();
                    m.scale = self.t.pick(&[1, 2, 4, 8]);
                }
                Operand::from(m)
            }
            1 => {
                let n = self.b.func.stack_objs.len();
                let off = self.t.i32();
                Operand::Stack(StackObj::from_u32(self.t.below(n) as u32), off)
            }
            _ => {
                let s = if self.t.chance(70) {
                    self.data_sym()
                } else {
                    self.func_sym()
                };
                Operand::Sym(s, self.t.i64())
            }
        }
    }

    /// The callee operand of a call: a function symbol or an integer register.
    fn callee(&mut self) -> Option<Operand> {
        if self.t.chance(70) {
            Some(Operand::Sym(self.func_sym(), 0))
        } else {
            let ty = self.t.pick(&[Type::I64, Type::I32]);
            self.reg(ty).map(Operand::Reg)
        }
    }

    /// Register arguments for `sig` (materialised as needed).
    fn call_args(&mut self, sig: &Signature) -> Option<Vec<Operand>> {
        sig.params
            .iter()
            .map(|p| self.reg(p.ty).map(Operand::Reg))
            .collect()
    }

    fn import_sig(&mut self, sig: Signature) -> SigRef {
        self.b.import_signature(sig)
    }

    /// Emit one random non-terminator instruction.
    fn body_inst(&mut self) {
        let t_int = self.t.pick(&INTS);
        let t_float = self.t.pick(&FLOATS);
        match self.t.below(17) {
            0 => {
                let op = self.t.pick(&INT_UNARY);
                let Some(a) = self.value(t_int) else { return };
                let r = self.new_value(t_int);
                self.b.ins(op, t_int, &[r], &[a]);
            }
            1 | 2 => {
                let (op, ty) = match self.t.below(3) {
                    0 => (self.t.pick(&FLOAT_BINARY), t_float),
                    1 if self.t.chance(30) => {
                        // Vector arithmetic on a vector value, when there is one.
                        let vt = self.t.pick(&vector_types());
                        if self.reg(vt).is_none() {
                            return;
                        }
                        (
                            if vt.lane().is_float() {
                                Opcode::Fadd
                            } else {
                                Opcode::Add
                            },
                            vt,
                        )
                    }
                    _ => (self.t.pick(&INT_BINARY), t_int),
                };
                let (Some(a), Some(b)) = (self.value(ty), self.value(ty)) else {
                    return;
                };
                let r = self.new_value(ty);
                self.b.ins(op, ty, &[r], &[a, b]);
            }
            3 => {
                let op = self.t.pick(&SHIFTS);
                let Some(a) = self.value(t_int) else { return };
                let amt_ty = self.t.pick(&INTS);
                let Some(b) = self.value(amt_ty) else { return };
                let r = self.new_value(t_int);
                self.b.ins(op, t_int, &[r], &[a, b]);
            }
            4 => {
                if self.t.chance(30) {
                    let ops: Option<Vec<Operand>> = (0..3).map(|_| self.value(t_float)).collect();
                    let Some(ops) = ops else { return };
                    let r = self.new_value(t_float);
                    self.b.ins(Opcode::Fma, t_float, &[r], &ops);
                } else {
                    let op = self.t.pick(&FLOAT_UNARY);
                    let Some(a) = self.value(t_float) else { return };
                    let r = self.new_value(t_float);
                    self.b.ins(op, t_float, &[r], &[a]);
                }
            }
            5 => {
                let (op, to, from) = self.t.pick(&[
                    (Opcode::Uextend, Type::I64, Type::I32),
                    (Opcode::Sextend, Type::I32, Type::I8),
                    (Opcode::Ireduce, Type::I8, Type::I64),
                    (Opcode::Fpromote, Type::F64, Type::F32),
                    (Opcode::Fdemote, Type::F32, Type::F64),
                    (Opcode::FcvtToSint, Type::I32, Type::F64),
                    (Opcode::FcvtToUintSat, Type::I64, Type::F32),
                    (Opcode::FcvtFromSint, Type::F64, Type::I16),
                    (Opcode::FcvtFromUint, Type::F32, Type::I64),
                    (Opcode::Bmask, Type::I32, Type::I8),
                ]);
                let Some(a) = self.reg(from) else { return };
                let r = self.new_value(to);
                self.b.ins(op, to, &[r], &[Operand::Reg(a)]);
            }
            6 => {
                let float = self.t.chance(40);
                let ty = if float { t_float } else { t_int };
                let pred = if float {
                    self.t.pick(&float_preds())
                } else {
                    self.t.pick(&int_preds())
                };
                let (Some(a), Some(b)) = (self.value(ty), self.value(ty)) else {
                    return;
                };
                // Usually the natural i8 result; sometimes an annotated other type.
                let rty = if self.t.chance(15) {
                    Type::I32
                } else {
                    Type::I8
                };
                let r = self.new_value(rty);
                let op = if float { Opcode::Fcmp } else { Opcode::Icmp };
                self.b.ins(op, ty, &[r], &[Operand::Pred(pred), a, b]);
            }
            7 => {
                let ty = self.t.pick(&SCALARS);
                let op = self.t.pick(&[Opcode::Select, Opcode::SelectSpectreGuard]);
                let (Some(c), Some(a), Some(b)) =
                    (self.reg(Type::I8), self.value(ty), self.value(ty))
                else {
                    return;
                };
                let r = self.new_value(ty);
                self.b.ins(op, ty, &[r], &[Operand::Reg(c), a, b]);
            }
            8 => {
                let ty = self.t.pick(&SCALARS);
                if self.t.chance(50) {
                    self.materialise(ty);
                } else if let Some(a) = self.reg(ty) {
                    let r = self.new_value(ty);
                    self.b.ins(Opcode::Copy, ty, &[r], &[Operand::Reg(a)]);
                }
            }
            9 => {
                let op = self.t.pick(&LOADS);
                let ty = match op {
                    Opcode::Load if self.t.chance(20) => self.t.pick(&vector_types()),
                    Opcode::Load => self.t.pick(&SCALARS),
                    _ => self.t.pick(&[Type::I32, Type::I64]),
                };
                let mem = self.mem_operand();
                let mf = self.memflags();
                let r = self.new_value(ty);
                let i = self.b.ins(op, ty, &[r], &[mem]);
                self.b.func.insts[i].aux = mf.as_u32();
            }
            10 => {
                let op = self.t.pick(&STORES);
                let ty = if op == Opcode::Store {
                    self.t.pick(&SCALARS)
                } else {
                    Type::I64
                };
                let Some(v) = self.value(ty) else { return };
                let mem = self.mem_operand();
                let mf = self.memflags();
                let i = self.b.ins(op, ty, &[], &[mem, v]);
                self.b.func.insts[i].aux = mf.as_u32();
            }
            11 => {
                let (op, operand) = match self.t.below(3) {
                    0 => {
                        let n = self.b.func.stack_objs.len();
                        let s = StackObj::from_u32(self.t.below(n) as u32);
                        (Opcode::StackAddr, Operand::Stack(s, self.t.i32()))
                    }
                    1 => {
                        // The signature of the function whose address is taken.
                        let sig = gen_sig(self.t, false);
                        self.addr_sig = self.import_sig(sig).as_u32();
                        (Opcode::FuncAddr, Operand::Sym(self.func_sym(), 0))
                    }
                    _ => {
                        let s = self.data_sym();
                        (Opcode::SymbolValue, Operand::Sym(s, self.t.i64()))
                    }
                };
                let r = self.new_value(Type::I64);
                let i = self.b.ins(op, Type::I64, &[r], &[operand]);
                if op == Opcode::FuncAddr {
                    self.b.func.insts[i].aux = self.addr_sig;
                }
            }
            12 => {
                let n = self.b.func.globals.len();
                if n == 0 {
                    return;
                }
                let g = self.t.below(n) as u32;
                let r = self.new_value(Type::I64);
                let i = self.b.ins(Opcode::GlobalValue, Type::I64, &[r], &[]);
                self.b.func.insts[i].aux = g;
            }
            13 => {
                let sig = gen_sig(self.t, false);
                let Some(callee) = self.callee() else { return };
                let Some(mut ops) = self.call_args(&sig) else {
                    return;
                };
                ops.insert(0, callee);
                let results: Vec<Reg> = sig.returns.iter().map(|p| self.new_value(p.ty)).collect();
                let sr = self.import_sig(sig);
                let i = self.b.ins(Opcode::Call, Type::VOID, &results, &ops);
                self.b.func.insts[i].aux = sr.as_u32();
            }
            14 => {
                let op = self.t.pick(&[Opcode::Trapz, Opcode::Trapnz]);
                let Some(v) = self.value(t_int) else { return };
                let code = trap_code(self.t);
                let i = self.b.ins(op, t_int, &[], &[v]);
                self.b.func.insts[i].aux = u32::from(code);
            }
            15 => self.opaque(),
            _ => {
                let target = self.blocks[self.t.below(self.blocks.len())];
                let imm = Operand::Int(self.t.i64());
                let r = self.new_value(Type::I64);
                self.b.ins(
                    Opcode::ExnHandlerAddr,
                    Type::I64,
                    &[r],
                    &[Operand::Block(target), imm],
                );
            }
        }
    }

    /// `%a: T, %b: U = opaque.T "name" [imms] effects mem(flags) operands`.
    fn opaque(&mut self) {
        let name = if self.t.chance(50) {
            self.t
                .pick(&[
                    "iadd_pairwise",
                    "fence",
                    "atomic_rmw",
                    "debugtrap",
                    "get_pinned_reg",
                ])
                .to_string()
        } else {
            self.t.string()
        };
        let imms: SmallVec<[u64; 2]> = (0..self.t.below(4)).map(|_| self.t.u64()).collect();
        let effects = self.t.below(16) as u8; // LOAD | STORE | TRAP | SIDE
        let ops: Vec<Operand> = (0..self.t.below(4))
            .map(|_| Operand::Reg(self.any_reg()))
            .collect();
        let ty = if self.t.chance(50) {
            Type::VOID
        } else {
            self.t.pick(&SCALARS)
        };
        let nres = self.t.below(4);
        let mut results = Vec::new();
        for _ in 0..nres {
            let rty = if self.t.chance(15) {
                self.t.pick(&vector_types())
            } else {
                self.t.pick(&SCALARS)
            };
            results.push(self.new_value(rty));
        }
        let aux2 = if self.t.chance(40) {
            self.memflags().as_u32() + 1
        } else {
            0
        };
        let o = self.b.func.opaques.push(OpaqueData {
            name: name.into(),
            imms,
            effects,
        });
        let i = self.b.ins(Opcode::Opaque, ty, &results, &ops);
        self.b.func.insts[i].aux = o.as_u32();
        self.b.func.set_aux2(i, aux2);
    }

    fn terminator(&mut self, plan: &TermPlan) {
        let blk = |g: &Self, i: usize| Operand::Block(g.blocks[i]);
        match plan {
            TermPlan::Ret => {
                let rets: Vec<Type> = self.b.func.sig.returns.iter().map(|p| p.ty).collect();
                let vals: Vec<Operand> = rets.iter().map(|&ty| self.value(ty).unwrap()).collect();
                self.b.ins(Opcode::Ret, Type::VOID, &[], &vals);
            }
            TermPlan::Trap(code) => self.b.trap(*code),
            TermPlan::TailCall => {
                let mut sig = gen_sig(self.t, false);
                sig.returns = self.b.func.sig.returns.clone();
                let callee = self.callee().unwrap();
                let mut ops = self.call_args(&sig).unwrap();
                ops.insert(0, callee);
                let sr = self.import_sig(sig);
                let i = self.b.ins(Opcode::TailCall, Type::VOID, &[], &ops);
                self.b.func.insts[i].aux = sr.as_u32();
            }
            TermPlan::Jump(tb) => self.b.jump(self.blocks[*tb]),
            TermPlan::Brif {
                two,
                float,
                then_,
                else_,
            } => {
                let (ty, pred) = if *float {
                    (self.t.pick(&FLOATS), self.t.pick(&float_preds()))
                } else {
                    (self.t.pick(&INTS), self.t.pick(&int_preds()))
                };
                let mut ops = vec![Operand::Pred(pred), Operand::Reg(self.reg(ty).unwrap())];
                if *two || *float {
                    ops.push(self.value(ty).unwrap());
                }
                ops.push(blk(self, *then_));
                ops.push(blk(self, *else_));
                self.b.ins(Opcode::Brif, ty, &[], &ops);
            }
            TermPlan::BrTable { default, table } => {
                let ty = self.t.pick(&INTS);
                let mut ops = vec![Operand::Reg(self.reg(ty).unwrap()), blk(self, *default)];
                ops.extend(table.iter().map(|&b| blk(self, b)));
                self.b.ins(Opcode::BrTable, ty, &[], &ops);
            }
            TermPlan::TryCall { normal, items } => {
                let sig = gen_sig(self.t, false);
                let callee = self.callee().unwrap();
                let mut ops = self.call_args(&sig).unwrap();
                ops.insert(0, callee);
                ops.push(blk(self, *normal));
                let mut table = Vec::new();
                for item in items {
                    match item {
                        ExnPlan::Tag(tag, b) => {
                            table.push(ExnItem::Tag(*tag));
                            ops.push(blk(self, *b));
                        }
                        ExnPlan::Default(b) => {
                            table.push(ExnItem::Default);
                            ops.push(blk(self, *b));
                        }
                        ExnPlan::Context => {
                            table.push(ExnItem::Context);
                            ops.push(Operand::Reg(self.any_reg()));
                        }
                    }
                }
                let mut results: Vec<Reg> =
                    sig.returns.iter().map(|p| self.new_value(p.ty)).collect();
                if self.t.chance(20) {
                    // An extra (annotated) result beyond the signature's returns.
                    let ty = self.t.pick(&SCALARS);
                    results.push(self.new_value(ty));
                }
                let sr = self.import_sig(sig);
                let et = self.b.func.exn_tables.push(table);
                let i = self.b.ins(Opcode::TryCall, Type::VOID, &results, &ops);
                self.b.func.insts[i].aux = sr.as_u32();
                self.b.func.set_aux2(i, et.as_u32());
            }
        }
    }
}

fn gen_function(t: &mut Tape, m: &mut Module, name: &str, env: &Env) {
    let sig = gen_sig(t, true);
    let linkage = t.pick(&[Linkage::Export, Linkage::Local, Linkage::Preemptible]);
    let mut b = Builder::new(m, name, sig, linkage);
    b.func.address_significant = t.chance(20);
    for _ in 0..t.below(3) {
        let id = t.next();
        let name = t.string();
        b.func.regions.push(RegionData {
            id,
            name: name.into(),
        });
    }
    for _ in 0..1 + t.below(3) {
        let size = t.below(1 << 16) as u32;
        let align = t.below(5) as u8;
        b.stack_obj(size, align);
    }
    // Global values: each refers only to earlier ones.
    let nglobals = t.below(5);
    for gi in 0..nglobals {
        let g = match if gi == 0 { 0 } else { t.below(4) } {
            0 => GlobalData::VmCtx,
            1 => {
                let base = GlobalRef::from_u32(t.below(gi) as u32);
                let bits = t.below(32) as u8;
                let trap = t.pick(&[0, MemFlags::HEAP_OOB, 7]);
                let flags = b.func.intern_memflags(MemFlags {
                    bits,
                    trap,
                    region: None,
                });
                GlobalData::Load {
                    base,
                    offset: t.i32(),
                    ty: t.pick(&[Type::I64, Type::I32]),
                    flags,
                }
            }
            2 => GlobalData::IAddImm {
                base: GlobalRef::from_u32(t.below(gi) as u32),
                offset: t.i64(),
                ty: Type::I64,
            },
            _ => {
                let sym = if t.chance(30) {
                    b.module.symbol(
                        &env.callees[t.below(env.callees.len())],
                        SymbolKind::Function,
                    )
                } else {
                    b.module
                        .symbol(&env.data[t.below(env.data.len())], SymbolKind::Data)
                };
                GlobalData::Symbol {
                    sym,
                    offset: t.i64(),
                    colocated: t.chance(50),
                    tls: t.chance(30),
                }
            }
        };
        b.func.globals.push(g);
    }
    if nglobals > 0 && t.chance(50) {
        b.func.stack_limit = Some(GlobalRef::from_u32(t.below(nglobals) as u32));
    }

    // Plan the CFG, then the dominators, then fill the blocks.
    let n = 1 + t.below(6);
    let blocks: Vec<Block> = (0..n).map(|_| b.create_block()).collect();
    let plans: Vec<TermPlan> = (0..n).map(|_| plan_terminator(t, n)).collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in plans.iter().enumerate() {
        for s in p.targets() {
            if !preds[s].contains(&i) {
                preds[s].push(i);
            }
        }
    }
    let dom = dominators(&preds);
    let mut g = Gen {
        t,
        b,
        env,
        blocks: blocks.clone(),
        values: vec![Vec::new(); n],
        dom,
        cur: 0,
        addr_sig: 0,
    };
    let mut phis: Vec<(Inst, usize, Type)> = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        g.cur = i;
        g.b.switch_to_block(blocks[i]);
        if i == 0 {
            // Arguments, then one constant of every scalar type, so that phi sources of every
            // type exist at the end of every block.
            let params: Vec<Type> = g.b.func.sig.params.iter().map(|p| p.ty).collect();
            for (n, ty) in params.into_iter().enumerate() {
                if g.t.chance(80) {
                    let r = g.new_value(ty);
                    g.b.ins(Opcode::Copy, ty, &[r], &[Operand::Arg(n as u32)]);
                }
            }
            for ty in SCALARS {
                g.materialise(ty);
            }
        } else if !preds[i].is_empty() {
            for _ in 0..g.t.below(3) {
                let ty = g.t.pick(&SCALARS);
                let r = g.new_value(ty);
                let inst = g.b.ins(Opcode::Phi, ty, &[r], &[]);
                phis.push((inst, i, ty));
            }
        }
        for _ in 0..g.t.below(9) {
            g.body_inst();
        }
        g.terminator(plan);
    }
    // Phi sources: one per predecessor, in a random order, each available at the end of it.
    for (inst, bi, ty) in phis {
        let mut ps = preds[bi].clone();
        for k in (1..ps.len()).rev() {
            ps.swap(k, g.t.below(k + 1));
        }
        let mut ops = Vec::new();
        for p in ps {
            let dom_p = g.dom[p] | (1 << p);
            let cands: Vec<Reg> = (0..n)
                .filter(|d| dom_p & (1 << d) != 0)
                .flat_map(|d| g.values[d].iter().filter(|v| v.1 == ty).map(|v| v.0))
                .collect();
            ops.push(Operand::Reg(g.t.pick(&cands)));
            ops.push(Operand::Block(blocks[p]));
        }
        g.b.func.set_operands(inst, &ops);
    }
    // A layout other than creation order (the entry stays first).
    if g.t.chance(30) && n > 2 {
        let mut rest: Vec<Block> = g.b.func.layout[1..].to_vec();
        rest.reverse();
        g.b.func.layout.truncate(1);
        g.b.func.layout.extend(rest);
    }
    g.b.finish().expect("function names are distinct");
}

fn gen_module(tape: Vec<u32>) -> Module {
    let t = &mut Tape::new(tape);
    let mut m = Module::new();
    // Some symbols declared up front, possibly colocated.
    for name in IMPORTED_NAMES {
        if t.chance(60) {
            let s = m.symbol(name, SymbolKind::Function);
            m.symbols[s].colocated = t.chance(50);
        }
    }
    for name in DATA_NAMES {
        if t.chance(60) {
            let s = m.symbol(name, SymbolKind::Data);
            m.symbols[s].colocated = t.chance(50);
        }
    }
    let mut names: Vec<&str> = DEFINED_NAMES.to_vec();
    for k in (1..names.len()).rev() {
        names.swap(k, t.below(k + 1));
    }
    let nf = 1 + t.below(3);
    let defined: Vec<String> = names[..nf].iter().map(|s| s.to_string()).collect();
    let env = Env {
        callees: defined
            .iter()
            .cloned()
            .chain(IMPORTED_NAMES.iter().map(|s| s.to_string()))
            .collect(),
        data: DATA_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    for name in &defined {
        gen_function(t, &mut m, name, &env);
    }
    m
}

/// Remove one instruction somewhere (the result may be malformed, but prints and parses).
fn drop_one_inst(m: &mut Module, a: usize, b: usize, c: usize) -> bool {
    let nf = m.functions.len();
    let f = &mut m.functions[FuncId::from_u32((a % nf) as u32)];
    let blk = f.layout[b % f.layout.len()];
    let n = f.block_insts(blk).len();
    if n == 0 {
        return false;
    }
    let k = c % n;
    let mut pos = 0;
    f.retain_insts(blk, |_| {
        pos += 1;
        pos - 1 != k
    });
    true
}

fn check_roundtrip(m: &Module) -> Result<String, TestCaseError> {
    let text = module_to_string(m);
    let m2 = parse_module(&text).map_err(|e| {
        let line = text.lines().nth(e.line as usize - 1).unwrap_or("");
        TestCaseError::fail(format!("parse error {e} at `{line}` in:\n{text}"))
    })?;
    let text2 = module_to_string(&m2);
    prop_assert_eq!(&text, &text2, "print -> parse -> print differs");
    prop_assert_eq!(m.functions.len(), m2.functions.len());
    prop_assert_eq!(m.inst_count(), m2.inst_count());
    Ok(text)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_modules_verify_and_roundtrip(tape in prop::collection::vec(any::<u32>(), 0..2500)) {
        let m = gen_module(tape);
        if let Err(e) = verify_module(&m, true) {
            return Err(TestCaseError::fail(format!("generated module does not verify:\n{e}\n{}", module_to_string(&m))));
        }
        let text = check_roundtrip(&m)?;
        let m2 = parse_module(&text).unwrap();
        prop_assert!(verify_module(&m2, true).is_ok(), "parsed module does not verify:\n{}", text);
    }

    /// `Function::shrink_to_fit` (packing block lists, dropping spare room) changes nothing a
    /// walk or the printer sees, and the function still grows afterwards.
    #[test]
    fn shrink_to_fit_keeps_the_function(tape in prop::collection::vec(any::<u32>(), 0..2500)) {
        let mut m = gen_module(tape);
        let before = module_to_string(&m);
        let ids: Vec<FuncId> = m.functions.keys().collect();
        for &id in &ids {
            m.functions[id].shrink_to_fit();
        }
        prop_assert_eq!(&before, &module_to_string(&m));
        prop_assert!(verify_module(&m, true).is_ok());
        // Appending after shrinking moves the full list, keeping the others intact.
        for &id in &ids {
            let f = &mut m.functions[id];
            if let Some(b) = f.entry() {
                let k = f.block_insts(b).len();
                let i = f.make_inst(Opcode::Add, Type::VOID, &[], &[]);
                f.insert_inst(b, k.saturating_sub(1), i);
                f.retain_insts(b, |x| x != i);
            }
        }
        prop_assert_eq!(&before, &module_to_string(&m));
    }

    /// Malformed functions (an instruction removed: a missing terminator, an empty block, an
    /// undefined register) still print and parse back identically.
    #[test]
    fn mutated_modules_roundtrip(tape in prop::collection::vec(any::<u32>(), 0..2500),
                                 a in any::<usize>(), b in any::<usize>(), c in any::<usize>()) {
        let mut m = gen_module(tape);
        drop_one_inst(&mut m, a, b, c);
        check_roundtrip(&m)?;
    }
}

/// The generator covers what it claims to: over a fixed set of tapes, every opcode family and
/// operand kind appears (so the properties above are not vacuous).
#[test]
fn generator_coverage() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec(any::<u32>(), 2000..2500);
    let mut text = String::new();
    for _ in 0..200 {
        let tape = strategy.new_tree(&mut runner).unwrap().current();
        text.push_str(&module_to_string(&gen_module(tape)));
    }
    for needle in [
        "= phi.",
        "= load.",
        "store.",
        "uload8.",
        "istore16.",
        "[stack_obj.",
        " + %vr",
        "*8",
        "[@",
        "= call @",
        "= call %vr",
        "@\"u0:12\"",
        "tail_call",
        "try_call",
        ", [tag",
        "default: bb",
        "context %vr",
        "icmp.",
        "fcmp.",
        "select.",
        "br_table.",
        "brif.",
        "trapz.",
        "trapnz.",
        "    trap ",
        "    ret\nbb",
        "opaque",
        " mem(",
        "gv0 = vmctx",
        "load.i",
        "iadd_imm.i64",
        "symbol ",
        "stack_limit = gv",
        "f32:0x",
        "f64:0x",
        "copy.i64 -",
        " - ",
        "region0",
        "notrap",
        "readonly",
        "can_move",
        "big",
        "little",
        "aligned",
        "exn_handler_addr",
        "address_significant",
        "sarg(",
        ": i32 = icmp",
        "= global_value.i64 gv",
        "func_addr.i64 @",
        "stack_addr.i64",
        "symbol_value.i64",
        "copy.i32 arg0",
        "i32x4",
    ] {
        assert!(
            text.contains(needle),
            "generated modules never contain {needle:?}"
        );
    }
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let some_line = |what: &str, p: &dyn Fn(&str) -> bool| {
        assert!(lines.iter().any(|l| p(l)), "no generated line has {what}");
    };
    some_line("a call with several results", &|l| {
        l.split_once(" = call")
            .is_some_and(|(r, _)| r.contains(", "))
    });
    some_line("an opaque with several annotated results", &|l| {
        l.split_once(" = opaque")
            .is_some_and(|(r, _)| r.matches(": ").count() >= 2)
    });
    some_line("a brif on one value", &|l| {
        l.starts_with("brif.") && l.matches(',').count() == 2
    });
    some_line("a brif on two values", &|l| {
        l.starts_with("brif.") && l.matches(',').count() == 3
    });
    some_line("a negative displacement", &|l| {
        l.contains("[%vr") && l.contains(" - ")
    });
    some_line("a base + index*scale + displacement", &|l| {
        l.split_once('[')
            .and_then(|(_, rest)| rest.split_once(']'))
            .is_some_and(|(mem, _)| {
                mem.starts_with("%vr")
                    && mem.contains(" + %vr")
                    && mem.contains('*')
                    && mem.matches(['+', '-']).count() == 2
            })
    });
    some_line("a quoted function name", &|l| l.starts_with("function @\""));
    some_line("a negative integer constant", &|l| {
        l.contains("copy.i") && l.contains(" -")
    });
}
