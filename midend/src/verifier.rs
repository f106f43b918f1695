//! The LIR verifier. Invariants checked, for every live function of a module:
//!
//! 1. **Blocks**: the layout lists each block once; every block is non-empty and ends in
//!    exactly one terminator; no terminator appears before the end; branch targets are in
//!    the layout.
//! 2. **Operands**: each opcode gets the operand kinds and counts its format allows (only
//!    loads and stores take memory operands; only `copy` takes a function argument; only
//!    branches and phis take blocks); referenced registers, stack objects, signatures, globals
//!    and symbols exist; each instruction defines the number of results its format requires.
//! 3. **Types**: operand registers have the instruction's type where the opcode requires it;
//!    memory-reference base and index registers are scalar integers; arguments copied match
//!    the signature; returned values match the signature's returns.
//! 4. **Phis**: phis come first in their block and have exactly one (register, block) pair per
//!    predecessor.
//! 5. **SSA** (when `ssa` is set): each register is defined once, and every use is dominated by
//!    its definition (a phi's use at the end of the matching predecessor). Unreachable blocks
//!    are not checked for dominance.
//! 6. **Entry and frame**: no branch targets the entry block and it has no phi (Cranelift's
//!    entry block has no predecessors); stack objects are aligned to at most
//!    [`MAX_STACK_ALIGN`] bytes, and their sizes with alignment padding fit 32 bits.
//!
//! What is inside an opaque instruction (its Cranelift opcode, immediates and types) is the
//! business of lowering, not of the mid-end: [`verify_module_for_lowering`] adds those checks
//! (against [`opaque_opcode`]'s table of the Cranelift opcodes an opaque may carry).

use crate::analysis::{Cfg, DomTree};
use crate::lir::entities::*;
use crate::lir::function::*;
use crate::lir::inst::{effects, Format, Opcode};
use crate::lir::module::{Module, SymbolKind};
use crate::lir::operand::{Cond, Operand};
use crate::lir::parse::{parse_module_with_lines, SourceMap};
use crate::lir::print::write_inst;
use crate::lir::tables::*;
use crate::lir::types::{RegClass, Type};
use core::fmt;
use cranelift_entity::{EntityRef, SecondaryMap};

/// One verifier finding: the function, block and instruction it concerns, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierError {
    /// The name of the function.
    pub function: String,
    /// The block, when the error concerns one.
    pub block: Option<Block>,
    /// The instruction as text, when the error concerns one.
    pub inst: Option<String>,
    /// The instruction itself (an index into the function's instructions; with the source
    /// map of `parse_module_with_lines`, it gives the instruction's line).
    pub inst_id: Option<Inst>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "function {}", self.function)?;
        if let Some(b) = self.block {
            write!(f, ", {b}")?;
        }
        if let Some(i) = &self.inst {
            write!(f, ", `{i}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// All findings of one verifier run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct VerifierErrors(pub Vec<VerifierError>);

impl fmt::Display for VerifierErrors {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

struct Ctx<'a> {
    m: &'a Module,
    f: &'a Function,
    errors: Vec<VerifierError>,
    block: Option<Block>,
    inst: Option<Inst>,
}

impl Ctx<'_> {
    fn report(&mut self, msg: impl Into<String>) {
        let inst = self.inst.map(|i| {
            let mut s = String::new();
            let _ = write_inst(&mut s, self.m, self.f, i);
            s
        });
        self.errors.push(VerifierError {
            function: self.f.name.to_string(),
            block: self.block,
            inst,
            inst_id: self.inst,
            message: msg.into(),
        });
    }
    fn reg_ok(&mut self, r: Reg) -> bool {
        if r.index() >= self.f.regs.len() {
            self.report(format!("{r} does not exist"));
            return false;
        }
        if self.f.regs[r].ty.is_void() {
            self.report(format!("{r} is used but never defined"));
            return false;
        }
        true
    }
    fn reg_type(&mut self, r: Reg, want: Type, what: &str) {
        if self.reg_ok(r) && self.f.regs[r].ty != want {
            self.report(format!(
                "{what} {r} has type {}, expected {want}",
                self.f.regs[r].ty
            ));
        }
    }
    /// A register or constant operand of type `ty` (constants must fit the type class).
    fn value(&mut self, op: &Operand, ty: Option<Type>, what: &str) {
        match *op {
            Operand::Reg(r) => {
                if let Some(t) = ty {
                    self.reg_type(r, t, what);
                } else {
                    self.reg_ok(r);
                }
            }
            Operand::Int(_) | Operand::F32(_) | Operand::F64(_) => {
                if let Some(t) = ty {
                    let ok = match *op {
                        Operand::Int(_) => t.is_scalar_int(),
                        Operand::F32(_) => t == Type::F32,
                        _ => t == Type::F64,
                    };
                    if !ok {
                        self.report(format!("{what} constant does not fit type {t}"));
                    }
                }
            }
            other => self.report(format!(
                "{what} must be a register or constant, not {}",
                kind_name(&other)
            )),
        }
    }
    fn int_value(&mut self, op: &Operand, what: &str) {
        match *op {
            Operand::Reg(r) => {
                if self.reg_ok(r) && !self.f.regs[r].ty.is_scalar_int() {
                    self.report(format!("{what} {r} must be a scalar integer"));
                }
            }
            Operand::Int(_) => {}
            other => self.report(format!(
                "{what} must be an integer register or constant, not {}",
                kind_name(&other)
            )),
        }
    }
    fn memory(&mut self, op: &Operand) {
        match *op {
            Operand::Mem {
                base, index, scale, ..
            } => {
                for r in [base.expand(), index.expand()].into_iter().flatten() {
                    if self.reg_ok(r) && self.f.regs[r].ty.class() != RegClass::Int {
                        self.report(format!(
                            "memory reference register {r} must be an integer register"
                        ));
                    }
                }
                if ![1, 2, 4, 8].contains(&scale) {
                    self.report(format!("scale {scale} is not 1, 2, 4 or 8"));
                }
            }
            Operand::Stack(s, _) => {
                if s.index() >= self.f.stack_objs.len() {
                    self.report(format!("{s} does not exist"));
                }
            }
            Operand::Sym(s, _) => {
                if s.index() >= self.m.symbols.len() {
                    self.report("symbol does not exist");
                }
            }
            other => self.report(format!(
                "expected a memory operand, not {}",
                kind_name(&other)
            )),
        }
    }
    fn block_op(&mut self, op: &Operand, in_layout: &SecondaryMap<Block, bool>) -> Option<Block> {
        match *op {
            Operand::Block(b) => {
                if b.index() >= self.f.blocks.len() || !in_layout[b] {
                    self.report(format!("{b} is not a block of the function"));
                    return None;
                }
                let branch = self
                    .inst
                    .is_some_and(|i| self.f.insts[i].opcode.is_terminator());
                if branch && Some(&b) == self.f.layout.first() {
                    self.report(format!(
                        "branches to the entry block {b} (the entry block can have no predecessors)"
                    ));
                }
                Some(b)
            }
            other => {
                self.report(format!("expected a block, not {}", kind_name(&other)));
                None
            }
        }
    }
}

fn kind_name(op: &Operand) -> &'static str {
    match op {
        Operand::Reg(_) => "a register",
        Operand::Int(_) | Operand::F32(_) | Operand::F64(_) => "a constant",
        Operand::Block(_) => "a block",
        Operand::Mem { .. } => "a memory reference",
        Operand::Sym(..) => "a symbol",
        Operand::Stack(..) => "a stack object",
        Operand::Pred(_) => "a predicate",
        Operand::Arg(_) => "a function argument",
    }
}

fn expect_results(c: &mut Ctx, n: usize) {
    let got = c.f.results(c.inst.unwrap()).len();
    if got != n {
        c.report(format!("expected {n} result(s), found {got}"));
    }
}

fn expect_count(c: &mut Ctx, ops: &[Operand], n: usize) -> bool {
    if ops.len() != n {
        c.report(format!("expected {n} operand(s), found {}", ops.len()));
        return false;
    }
    true
}

/// Verify one function of `m`. `ssa` enables the single-definition and dominance checks.
/// Global values are based on global values that exist, with no cycle, and the stack limit
/// is one that exists.
fn check_globals(c: &mut Ctx) {
    let f = c.f;
    let base_of = |g: GlobalRef| match f.globals.get(g) {
        Some(GlobalData::Load { base, .. } | GlobalData::IAddImm { base, .. }) => Some(*base),
        _ => None,
    };
    for (g, _) in f.globals.iter() {
        let Some(base) = base_of(g) else {
            continue;
        };
        if base.index() >= f.globals.len() {
            c.report(format!(
                "global {g} is based on {base}, which the function does not define"
            ));
            continue;
        }
        // A chain longer than the table has a cycle.
        let mut at = base;
        for _ in 0..=f.globals.len() {
            match base_of(at) {
                Some(b) if b.index() < f.globals.len() => at = b,
                _ => break,
            }
            if at == g {
                c.report(format!("global {g} is based on itself (a cycle of bases)"));
                break;
            }
        }
    }
    if let Some(g) = f.stack_limit {
        if g.index() >= f.globals.len() {
            c.report(format!(
                "the stack limit is {g}, which the function does not define"
            ));
        }
    }
}

/// Check function `f` of `m` against the invariants listed in the module documentation (the
/// SSA ones only when `ssa` is set).
pub fn verify_function(m: &Module, f: &Function, ssa: bool) -> Result<(), VerifierErrors> {
    let mut c = Ctx {
        m,
        f,
        errors: Vec::new(),
        block: None,
        inst: None,
    };
    let mut in_layout: SecondaryMap<Block, bool> = SecondaryMap::with_capacity(f.blocks.len());
    for &b in &f.layout {
        if b.index() >= f.blocks.len() {
            c.report(format!("{b} in the layout does not exist"));
            return Err(VerifierErrors(c.errors));
        }
        if in_layout[b] {
            c.report(format!("{b} appears twice in the layout"));
        }
        in_layout[b] = true;
    }
    if f.layout.is_empty() {
        c.report("function has no blocks");
        return Err(VerifierErrors(c.errors));
    }
    check_stack_objs(&mut c);
    check_globals(&mut c);
    let mut def_count: SecondaryMap<Reg, u32> = SecondaryMap::with_capacity(f.regs.len());
    let mut ops: Vec<Operand> = Vec::new();
    for &b in &f.layout {
        c.block = Some(b);
        c.inst = None;
        let insts = f.block_insts(b);
        if insts.is_empty() {
            c.report("block is empty (it needs a terminator)");
            continue;
        }
        let mut seen_non_phi = false;
        for (pos, &i) in insts.iter().enumerate() {
            c.inst = Some(i);
            let d = f.insts[i];
            let is_last = pos + 1 == insts.len();
            if d.opcode.is_terminator() && !is_last {
                c.report("terminator in the middle of a block");
            }
            if is_last && !d.opcode.is_terminator() {
                c.report("block does not end in a terminator");
            }
            if d.opcode == Opcode::Phi {
                if seen_non_phi {
                    c.report("phi after a non-phi instruction");
                }
                if b == f.layout[0] {
                    c.report("phi in the entry block (the entry block has no predecessors)");
                }
            } else {
                seen_non_phi = true;
            }
            for &r in f.results(i) {
                if c.reg_ok_def(r) {
                    def_count[r] += 1;
                }
            }
            ops.clear();
            ops.extend(f.operands(i));
            check_inst(&mut c, i, &in_layout, &ops);
        }
    }
    c.inst = None;
    c.block = None;
    if c.errors.is_empty() {
        check_phis_and_ssa(&mut c, ssa, &def_count);
    }
    if c.errors.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(c.errors))
    }
}

/// Stack objects: alignment at most `MAX_STACK_ALIGN`; each size plus worst-case alignment
/// padding, and all of them together, fit the 32 bits of Cranelift's frame layout.
fn check_stack_objs(c: &mut Ctx) {
    let mut total: u64 = 0;
    let mut each_fits = true;
    for (s, d) in c.f.stack_objs.iter() {
        if u64::from(d.align_shift) > u64::from(MAX_STACK_ALIGN.trailing_zeros()) {
            c.report(format!(
                "{s} has alignment 2^{}, more than the maximum {MAX_STACK_ALIGN}",
                d.align_shift
            ));
            each_fits = false;
            continue;
        }
        let align = 1u64 << d.align_shift;
        let need = u64::from(d.size) + align - 1;
        if need > u64::from(u32::MAX) {
            c.report(format!(
                "{s} of size {} with alignment {align} overflows 32 bits",
                d.size
            ));
            each_fits = false;
        }
        total += need;
    }
    if each_fits && total > u64::from(u32::MAX) {
        c.report(format!(
            "stack objects need up to {total} bytes with alignment padding, more than 32 bits hold"
        ));
    }
}

impl Ctx<'_> {
    fn reg_ok_def(&mut self, r: Reg) -> bool {
        if r.index() >= self.f.regs.len() {
            self.report(format!("result {r} does not exist"));
            return false;
        }
        true
    }
}

/// Check one instruction; `ops` are its operands, unpacked.
fn check_inst(c: &mut Ctx, i: Inst, in_layout: &SecondaryMap<Block, bool>, ops: &[Operand]) {
    let f = c.f;
    let d = f.insts[i];
    let ty = d.ty;
    let shiftlike = matches!(
        d.opcode,
        Opcode::Shl | Opcode::Ushr | Opcode::Sshr | Opcode::Rotl | Opcode::Rotr
    );
    let conversion = matches!(
        d.opcode,
        Opcode::Uextend
            | Opcode::Sextend
            | Opcode::Ireduce
            | Opcode::Fpromote
            | Opcode::Fdemote
            | Opcode::FcvtToSint
            | Opcode::FcvtToUint
            | Opcode::FcvtToSintSat
            | Opcode::FcvtToUintSat
            | Opcode::FcvtFromSint
            | Opcode::FcvtFromUint
            | Opcode::Bmask
    );
    match d.opcode.format() {
        Format::Unary => {
            expect_results(c, 1);
            if expect_count(c, ops, 1) {
                c.value(&ops[0], if conversion { None } else { Some(ty) }, "operand");
            }
        }
        Format::Binary => {
            expect_results(c, 1);
            if expect_count(c, ops, 2) {
                c.value(&ops[0], Some(ty), "first operand");
                if shiftlike {
                    if ty.is_vector() {
                        c.int_value(&ops[1], "shift amount")
                    } else {
                        c.value(&ops[1], None, "shift amount")
                    }
                } else {
                    c.value(&ops[1], Some(ty), "second operand");
                }
            }
        }
        Format::Ternary => {
            expect_results(c, 1);
            if expect_count(c, ops, 3) {
                if d.opcode == Opcode::Fma {
                    for o in ops {
                        c.value(o, Some(ty), "operand");
                    }
                } else {
                    c.value(&ops[0], None, "condition");
                    c.value(&ops[1], Some(ty), "second operand");
                    c.value(&ops[2], Some(ty), "third operand");
                }
            }
        }
        Format::Compare => {
            expect_results(c, 1);
            if expect_count(c, ops, 3) {
                match ops[0] {
                    Operand::Pred(p) if p.is_float() != (d.opcode == Opcode::Fcmp) => c.report(
                        format!("predicate {p} does not belong to {}", d.opcode.name()),
                    ),
                    Operand::Pred(_) => {}
                    other => c.report(format!(
                        "first operand must be a predicate, not {}",
                        kind_name(&other)
                    )),
                }
                c.value(&ops[1], Some(ty), "first compared operand");
                c.value(&ops[2], Some(ty), "second compared operand");
            }
        }
        Format::Copy => {
            expect_results(c, 1);
            if expect_count(c, ops, 1) {
                match ops[0] {
                    Operand::Arg(n) => match f.sig.params.get(n as usize) {
                        None => c.report(format!(
                            "arg{n} does not exist (the function has {} parameters)",
                            f.sig.params.len()
                        )),
                        Some(p) if p.ty != ty => {
                            c.report(format!("arg{n} has type {}, copied as {ty}", p.ty))
                        }
                        _ => {}
                    },
                    ref o => c.value(o, Some(ty), "copied value"),
                }
            }
        }
        Format::Load => {
            expect_results(c, 1);
            if expect_count(c, ops, 1) {
                c.memory(&ops[0]);
            }
            if f.memflags.get(MemFlagsRef::from_u32(d.aux)).is_none() {
                c.report("memory flags do not exist");
            }
        }
        Format::Store => {
            expect_results(c, 0);
            if expect_count(c, ops, 2) {
                c.memory(&ops[0]);
                c.value(&ops[1], Some(ty), "stored value");
            }
            if f.memflags.get(MemFlagsRef::from_u32(d.aux)).is_none() {
                c.report("memory flags do not exist");
            }
        }
        Format::Addr => {
            expect_results(c, 1);
            if expect_count(c, ops, 1) {
                let ok = match (d.opcode, ops[0]) {
                    (Opcode::StackAddr, Operand::Stack(s, _)) => s.index() < f.stack_objs.len(),
                    (Opcode::SymbolValue, Operand::Sym(s, _)) => s.index() < c.m.symbols.len(),
                    (Opcode::FuncAddr, Operand::Sym(s, _)) => {
                        s.index() < c.m.symbols.len() && (d.aux as usize) < f.sigs.len()
                    }
                    _ => false,
                };
                if !ok {
                    c.report(format!(
                        "{} takes {}",
                        d.opcode.name(),
                        if d.opcode == Opcode::StackAddr {
                            "a stack object"
                        } else {
                            "a symbol"
                        }
                    ));
                }
            }
        }
        Format::GlobalValue => {
            expect_results(c, 1);
            expect_count(c, ops, 0);
            if d.aux as usize >= f.globals.len() {
                c.report("global value does not exist");
            }
        }
        Format::Call => check_call(c, i, in_layout, ops),
        Format::Phi => {
            expect_results(c, 1);
            if !ops.len().is_multiple_of(2) {
                c.report("phi operands must be (register, block) pairs");
                return;
            }
            for pair in ops.chunks(2) {
                c.value(&pair[0], Some(ty), "phi value");
                if !matches!(pair[0], Operand::Reg(_)) {
                    c.report("phi values must be registers");
                }
                c.block_op(&pair[1], in_layout);
            }
        }
        Format::Jump => {
            expect_results(c, 0);
            if expect_count(c, ops, 1) {
                c.block_op(&ops[0], in_layout);
            }
        }
        Format::Brif => {
            expect_results(c, 0);
            if ops.len() != 4 && ops.len() != 5 {
                c.report("brif takes a predicate, one or two values and two blocks");
                return;
            }
            match ops[0] {
                Operand::Pred(p) if !p.is_float() || ops.len() == 5 => {}
                _ => c.report("brif needs a predicate first"),
            }
            let nvals = ops.len() - 3;
            for o in &ops[1..1 + nvals] {
                c.value(o, Some(ty), "branch condition");
            }
            for o in &ops[1 + nvals..] {
                c.block_op(o, in_layout);
            }
        }
        Format::BrTable => {
            expect_results(c, 0);
            if ops.len() < 2 {
                c.report("br_table needs an index and a default block");
                return;
            }
            c.value(&ops[0], Some(ty), "index");
            for o in &ops[1..] {
                c.block_op(o, in_layout);
            }
        }
        Format::Return => {
            expect_results(c, 0);
            if ops.len() != f.sig.returns.len() {
                c.report(format!(
                    "returns {} value(s), the signature has {}",
                    ops.len(),
                    f.sig.returns.len()
                ));
            } else {
                for (o, p) in ops.iter().zip(&f.sig.returns) {
                    c.value(o, Some(p.ty), "returned value");
                }
            }
        }
        Format::Trap => {
            expect_results(c, 0);
            expect_count(c, ops, 0);
            if d.aux == 0 || d.aux > 255 {
                c.report("bad trap code");
            }
        }
        Format::CondTrap => {
            expect_results(c, 0);
            if expect_count(c, ops, 1) {
                c.value(&ops[0], Some(ty), "trap condition");
            }
            if d.aux == 0 || d.aux > 255 {
                c.report("bad trap code");
            }
        }
        Format::ExnHandlerAddr => {
            expect_results(c, 1);
            if expect_count(c, ops, 2) {
                c.block_op(&ops[0], in_layout);
                if !ops[1].is_imm() {
                    c.report("second operand must be a constant");
                }
            }
        }
        Format::Opaque => {
            if d.aux as usize >= f.opaques.len() {
                c.report("opaque record does not exist");
            }
            for o in ops {
                c.value(o, None, "opaque operand");
                if !matches!(o, Operand::Reg(_)) {
                    c.report("opaque operands must be registers");
                }
            }
        }
    }
}

fn check_call(c: &mut Ctx, i: Inst, in_layout: &SecondaryMap<Block, bool>, ops: &[Operand]) {
    let f = c.f;
    let d = f.insts[i];
    let Some(sig) = f.sigs.get(SigRef::from_u32(d.aux)) else {
        c.report("call signature does not exist");
        return;
    };
    if ops.is_empty() {
        c.report("call needs a callee");
        return;
    }
    match ops[0] {
        Operand::Sym(s, 0) if s.index() < c.m.symbols.len() => {
            if c.m.symbols[s].kind == SymbolKind::Data {
                c.report(format!(
                    "callee @{} is data, not a function",
                    c.m.symbols[s].name
                ));
            }
        }
        Operand::Reg(r) => c.int_value(&Operand::Reg(r), "indirect callee"),
        other => c.report(format!(
            "callee must be a symbol or a register, not {}",
            kind_name(&other)
        )),
    }
    let nargs = ops[1..]
        .iter()
        .take_while(|o| !matches!(o, Operand::Block(_)))
        .count();
    let args = &ops[1..1 + nargs];
    if args.len() != sig.params.len() {
        c.report(format!(
            "passes {} argument(s), the signature has {}",
            args.len(),
            sig.params.len()
        ));
    } else {
        for (a, p) in args.iter().zip(&sig.params) {
            if !matches!(a, Operand::Reg(_)) {
                c.report("call arguments must be registers");
            }
            c.value(a, Some(p.ty), "argument");
        }
    }
    let results = f.results(i);
    match d.opcode {
        Opcode::Call => {
            expect_results(c, sig.returns.len());
            if nargs + 1 != ops.len() {
                c.report("call takes no blocks");
            }
        }
        Opcode::TailCall => {
            expect_results(c, 0);
            if sig.returns != f.sig.returns {
                c.report("tail call's returns differ from the caller's");
            }
        }
        _ => {
            if results.len() < sig.returns.len() {
                c.report("try_call defines fewer results than the signature returns");
            }
            let rest = &ops[1 + nargs..];
            let Some(table) = f.exn_tables.get(ExnTable::from_u32(f.aux2(i))) else {
                c.report("exception table does not exist");
                return;
            };
            if rest.len() != table.len() + 1 {
                c.report("try_call's handlers do not match its exception table");
                return;
            }
            c.block_op(&rest[0], in_layout);
            for (item, o) in table.iter().zip(&rest[1..]) {
                match item {
                    ExnItem::Context => c.value(o, None, "exception context"),
                    _ => {
                        c.block_op(o, in_layout);
                    }
                }
            }
        }
    }
    for (r, p) in results.iter().zip(&sig.returns) {
        if r.index() < f.regs.len() && f.regs[*r].ty != p.ty {
            c.report(format!(
                "result {r} has type {}, the signature returns {}",
                f.regs[*r].ty, p.ty
            ));
        }
    }
}

fn check_phis_and_ssa(c: &mut Ctx, ssa: bool, def_count: &SecondaryMap<Reg, u32>) {
    let f = c.f;
    let cfg = Cfg::compute(f);
    // Phi pairs match predecessors.
    for &b in &f.layout {
        c.block = Some(b);
        for &i in f.block_insts(b) {
            if f.insts[i].opcode != Opcode::Phi {
                break;
            }
            c.inst = Some(i);
            let ops = f.operands(i).unpacked();
            let ops = &ops[..];
            let mut blocks: Vec<Block> = ops.chunks(2).filter_map(|p| p[1].as_block()).collect();
            blocks.sort();
            let n = blocks.len();
            blocks.dedup();
            if blocks.len() != n {
                c.report("phi names a predecessor twice");
            }
            let mut preds: Vec<Block> = cfg.preds[b].to_vec();
            preds.sort();
            if blocks != preds {
                let names = |v: &[Block]| {
                    v.iter()
                        .map(|b| b.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                c.report(format!(
                    "phi sources [{}] do not match the predecessors [{}]",
                    names(&blocks),
                    names(&preds)
                ));
            }
        }
    }
    c.inst = None;
    c.block = None;
    if !ssa || !c.errors.is_empty() {
        return;
    }
    // Reported once per register, at its second definition.
    let mut seen: SecondaryMap<Reg, u32> = SecondaryMap::with_capacity(f.regs.len());
    for &b in &f.layout {
        for &i in f.block_insts(b) {
            for &r in f.results(i) {
                seen[r] += 1;
                if seen[r] == 2 {
                    (c.block, c.inst) = (Some(b), Some(i));
                    c.report(format!("{r} is defined {} times (not SSA)", def_count[r]));
                }
            }
        }
    }
    (c.block, c.inst) = (None, None);
    if !c.errors.is_empty() {
        return;
    }
    let dt = DomTree::compute(&cfg);
    // Definition site: block and position.
    let mut def_site: SecondaryMap<Reg, (u32, u32)> = SecondaryMap::with_default((u32::MAX, 0));
    for &b in &f.layout {
        for (pos, &i) in f.block_insts(b).iter().enumerate() {
            for &r in f.results(i) {
                def_site[r] = (b.as_u32(), pos as u32);
            }
        }
    }
    for &b in &cfg.rpo {
        c.block = Some(b);
        for (pos, &i) in f.block_insts(b).iter().enumerate() {
            c.inst = Some(i);
            let d = f.insts[i];
            let ops = f.operands(i);
            if d.opcode == Opcode::Phi {
                for k in 0..ops.len() / 2 {
                    let (Some(r), Some(p)) = (ops.at(2 * k).as_reg(), ops.at(2 * k + 1).as_block())
                    else {
                        continue;
                    };
                    let (db, _) = def_site[r];
                    if db == u32::MAX {
                        c.report(format!("{r} is never defined"));
                    } else if cfg.is_reachable(p) && !dt.dominates(Block::from_u32(db), p) {
                        c.report(format!("{r} from {p} is not dominated by its definition"));
                    }
                }
                continue;
            }
            for o in ops {
                for r in o.regs() {
                    let (db, dpos) = def_site[r];
                    if db == u32::MAX {
                        c.report(format!("{r} is used but never defined"));
                        continue;
                    }
                    let db = Block::from_u32(db);
                    let ok = if db == b {
                        dpos < pos as u32
                    } else {
                        cfg.is_reachable(db) && dt.dominates(db, b)
                    };
                    if !ok {
                        c.report(format!("use of {r} is not dominated by its definition"));
                    }
                }
            }
        }
    }
}

/// Verify every live function of a module.
pub fn verify_module(m: &Module, ssa: bool) -> Result<(), VerifierErrors> {
    let mut all = Vec::new();
    for (_, f) in m.live_functions() {
        if let Err(e) = verify_function(m, f, ssa) {
            all.extend(e.0);
        }
    }
    if all.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(all))
    }
}

// ---------------------------------------------------------------------------------------------
// Opaque instructions, as lowering to Cranelift needs them.
// ---------------------------------------------------------------------------------------------

/// `verify_function`, and then that each opaque instruction can be rebuilt as the Cranelift
/// instruction it names ([`check_opaque`]). The mid-end never looks inside opaques, so
/// `verify_function` does not check them; run this on input that will be lowered.
pub fn verify_function_for_lowering(
    m: &Module,
    f: &Function,
    ssa: bool,
) -> Result<(), VerifierErrors> {
    verify_function(m, f, ssa)?;
    let mut c = Ctx {
        m,
        f,
        errors: Vec::new(),
        block: None,
        inst: None,
    };
    for &b in &f.layout {
        c.block = Some(b);
        for &i in f.block_insts(b) {
            if f.insts[i].opcode == Opcode::Opaque {
                c.inst = Some(i);
                let mut problems = Vec::new();
                opaque_problems(f, i, &mut |p| problems.push(p));
                for p in problems {
                    c.report(p);
                }
            }
        }
    }
    if c.errors.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(c.errors))
    }
}

/// `verify_module` with the opaque checks of [`verify_function_for_lowering`].
pub fn verify_module_for_lowering(m: &Module, ssa: bool) -> Result<(), VerifierErrors> {
    let mut all = Vec::new();
    for (_, f) in m.live_functions() {
        if let Err(e) = verify_function_for_lowering(m, f, ssa) {
            all.extend(e.0);
        }
    }
    if all.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(all))
    }
}

/// Check one opaque instruction `i` of `f` (the rest of `f` need not be valid): its opcode
/// is one an opaque may carry, and its type, operands, results, immediates, memory flags and
/// effects are what Cranelift's instruction needs. Returns the opcode's description, or the
/// first problem.
pub fn check_opaque(f: &Function, i: Inst) -> Result<&'static OpaqueOpcode, String> {
    let mut first = None;
    opaque_problems(f, i, &mut |p| {
        first.get_or_insert(p);
    });
    match first {
        Some(p) => Err(p),
        None => {
            // No problem: the record and its opcode exist.
            let o = &f.opaques[OpaqueRef::from_u32(f.insts[i].aux)];
            Ok(opaque_opcode(&o.name).expect("checked"))
        }
    }
}

/// The Cranelift instruction format of an opaque's opcode (Cranelift's names). It fixes the
/// immediates, in the lifter's encoding:
/// - `UnaryImm`, `UnaryIeee16/32/64`: the bits; `BinaryImm8`, `TernaryImm8`: the byte (a lane);
/// - `UnaryConst`, `Shuffle`: the byte length, then the bytes packed little-endian in words;
/// - `AtomicRmw`: the index of the operation in Cranelift's `AtomicRmwOp::all()`;
/// - `Load`, `Store`: the offset, sign-extended from 32 bits;
/// - `IntAddTrap`, `CondTrap`: the trap code (1 to 255);
/// - `IntCompare`, `FloatCompare`: the index of the predicate in [`Cond::all`];
/// - the others: none.
///
/// The memory formats (`AtomicRmw`, `AtomicCas`, `LoadNoOffset`, `StoreNoOffset`, `Load`,
/// `Store`) also need memory flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpaqueFormat {
    /// No operands, no immediate.
    NullAry,
    /// One operand.
    Unary,
    /// Two operands.
    Binary,
    /// Three operands.
    Ternary,
    /// An integer immediate, no operand.
    UnaryImm,
    /// A 16-bit float immediate, no operand.
    UnaryIeee16,
    /// A 32-bit float immediate, no operand.
    UnaryIeee32,
    /// A 64-bit float immediate, no operand.
    UnaryIeee64,
    /// A constant of bytes (a vector constant), no operand.
    UnaryConst,
    /// Two operands and a byte mask.
    Shuffle,
    /// One operand and a lane index.
    BinaryImm8,
    /// Two operands and a lane index.
    TernaryImm8,
    /// Atomic read-modify-write: an address, a value and the operation.
    AtomicRmw,
    /// Atomic compare-and-swap: an address, the expected and the new value.
    AtomicCas,
    /// A load from an address, without offset.
    LoadNoOffset,
    /// A store of a value to an address, without offset.
    StoreNoOffset,
    /// A load from an address plus an offset.
    Load,
    /// A store of a value to an address plus an offset.
    Store,
    /// Integer addition that traps on overflow, with its trap code.
    IntAddTrap,
    /// A conditional trap on one operand, with its trap code.
    CondTrap,
    /// Integer comparison under a predicate.
    IntCompare,
    /// Float comparison under a predicate.
    FloatCompare,
}

impl OpaqueFormat {
    /// Does an instruction of this format carry memory flags?
    pub fn has_memflags(self) -> bool {
        use OpaqueFormat::*;
        matches!(
            self,
            AtomicRmw | AtomicCas | LoadNoOffset | StoreNoOffset | Load | Store
        )
    }
}

/// The number of Cranelift's atomic read-modify-write operations (`AtomicRmwOp::all()`).
pub const ATOMIC_RMW_OPS: u64 = 11;

/// A set of fixed-size types (Cranelift's `ValueTypeSet`): bit `k` of `lanes` admits 2^k
/// lanes, bit `k` of `ints` or `floats` admits lanes of that kind 2^k bits wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeSet {
    pub(crate) lanes: u16,
    pub(crate) ints: u8,
    pub(crate) floats: u8,
}

impl TypeSet {
    /// Is `t` in the set? (`VOID` never is.)
    pub fn contains(self, t: Type) -> bool {
        if t.is_void() {
            return false;
        }
        let kinds = if t.is_int() { self.ints } else { self.floats };
        let lanes_ok = t.log2_lanes() < 16 && self.lanes & (1 << t.log2_lanes()) != 0;
        lanes_ok && kinds & (1 << t.lane_bits().trailing_zeros()) != 0
    }
}

impl fmt::Display for TypeSet {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut sep = "";
        for (kinds, prefix) in [(self.ints, "i"), (self.floats, "f")] {
            for k in 0..8 {
                if kinds & (1 << k) != 0 {
                    write!(f, "{sep}{prefix}{}", 1u32 << k)?;
                    sep = ", ";
                }
            }
        }
        let counts: Vec<u32> = (0..16).filter(|k| self.lanes & (1 << k) != 0).collect();
        match counts.as_slice() {
            [0] => Ok(()),
            [] => f.write_str(" (no lane count)"),
            [a, .., b] if (*a..=*b).all(|k| counts.contains(&k)) => {
                write!(f, " ({} to {} lanes)", 1u32 << a, 1u32 << b)
            }
            _ => {
                let s: Vec<String> = counts.iter().map(|k| (1u32 << k).to_string()).collect();
                write!(f, " ({} lanes)", s.join(", "))
            }
        }
    }
}

/// How the type of an opaque's operand or result follows from its controlling type (the
/// instruction's type, `opaque.T`), as in Cranelift's operand constraints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeRule {
    /// The controlling type.
    Same,
    /// This lane type with this many lanes.
    Fixed(Type, u32),
    /// The controlling type's lane type.
    LaneOf,
    /// `i8` for scalars; for vectors, integer lanes of the same width.
    AsTruthy,
    /// Lanes half as wide.
    HalfWidth,
    /// Lanes twice as wide.
    DoubleWidth,
    /// Lanes half as wide, twice as many.
    SplitLanes,
    /// Lanes twice as wide, half as many.
    MergeLanes,
    /// Any type of the set.
    In(TypeSet),
    /// A scalar of the controlling type's kind (integer or float), narrower than it.
    Narrower,
    /// A scalar of the controlling type's kind, wider than it.
    Wider,
    /// Not checked (left to Cranelift's verifier).
    Unchecked,
}

impl TypeRule {
    /// The one type this rule gives for controlling type `ctrl` (None for `In`, `Unchecked`,
    /// or a type that has no such derived type).
    pub fn resolve(self, ctrl: Type) -> Option<Type> {
        let with_lane = |lane: Option<Type>, lanes: u32| match lane? {
            l if lanes == 1 => Some(l),
            l => l.by(lanes),
        };
        let lane = ctrl.lane();
        let half = || {
            if lane.is_int() {
                Type::int(lane.lane_bits() / 2)
            } else {
                [Type::F16, Type::F32, Type::F64]
                    .into_iter()
                    .find(|t| 2 * t.lane_bits() == lane.lane_bits())
            }
        };
        let double = || {
            if lane.is_int() {
                Type::int(lane.lane_bits() * 2)
            } else {
                [Type::F32, Type::F64, Type::F128]
                    .into_iter()
                    .find(|t| t.lane_bits() == 2 * lane.lane_bits())
            }
        };
        if ctrl.is_void() && !matches!(self, TypeRule::Fixed(..)) {
            return None;
        }
        match self {
            TypeRule::Same => Some(ctrl),
            TypeRule::Fixed(t, n) => with_lane(Some(t), n),
            TypeRule::LaneOf => Some(lane),
            TypeRule::AsTruthy if !ctrl.is_vector() => Some(Type::I8),
            TypeRule::AsTruthy => with_lane(Type::int(lane.lane_bits()), ctrl.lanes()),
            TypeRule::HalfWidth => with_lane(half(), ctrl.lanes()),
            TypeRule::DoubleWidth => with_lane(double(), ctrl.lanes()),
            TypeRule::SplitLanes => with_lane(half(), ctrl.lanes() * 2),
            TypeRule::MergeLanes if ctrl.is_vector() => with_lane(double(), ctrl.lanes() / 2),
            TypeRule::MergeLanes
            | TypeRule::In(_)
            | TypeRule::Narrower
            | TypeRule::Wider
            | TypeRule::Unchecked => None,
        }
    }

    /// Does this rule admit type `t` for controlling type `ctrl`?
    pub fn admits(self, t: Type, ctrl: Type) -> bool {
        let same_kind = !t.is_vector() && t.is_int() == ctrl.is_int() && !t.is_void();
        match self {
            TypeRule::Unchecked => true,
            TypeRule::In(ts) => ts.contains(t),
            TypeRule::Narrower => same_kind && t.lane_bits() < ctrl.lane_bits(),
            TypeRule::Wider => same_kind && t.lane_bits() > ctrl.lane_bits(),
            rule => rule.resolve(ctrl) == Some(t),
        }
    }
}

/// A Cranelift opcode an opaque instruction may carry: what lowering needs to rebuild it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpaqueOpcode {
    /// Cranelift's name (`iadd_pairwise`).
    pub name: &'static str,
    /// Cranelift's instruction format: the operands and immediates.
    pub format: OpaqueFormat,
    /// The `effects` bits the opcode has; an opaque must declare at least these.
    pub effects: u8,
    /// The controlling types, for a polymorphic opcode.
    pub ctrl: Option<TypeSet>,
    /// One rule per value operand.
    pub args: &'static [TypeRule],
    /// One rule per result.
    pub results: &'static [TypeRule],
}

/// The description of Cranelift opcode `name`, if an opaque may carry it (a format lowering
/// rebuilds, no control flow, no dynamic vectors).
pub fn opaque_opcode(name: &str) -> Option<&'static OpaqueOpcode> {
    table::OPAQUE_OPCODES
        .binary_search_by(|o| o.name.cmp(name))
        .ok()
        .map(|k| &table::OPAQUE_OPCODES[k])
}

/// All opcodes an opaque may carry, by name.
pub fn opaque_opcodes() -> &'static [OpaqueOpcode] {
    &table::OPAQUE_OPCODES
}

fn effects_name(e: u8) -> String {
    let names: Vec<&str> = [
        (effects::LOAD, "load"),
        (effects::STORE, "store"),
        (effects::TRAP, "trap"),
        (effects::SIDE, "side"),
    ]
    .into_iter()
    .filter(|(bit, _)| e & bit != 0)
    .map(|(_, n)| n)
    .collect();
    if names.is_empty() {
        "pure".into()
    } else {
        names.join("+")
    }
}

/// Every problem of opaque instruction `i`, reported in order.
fn opaque_problems(f: &Function, i: Inst, report: &mut dyn FnMut(String)) {
    let d = f.insts[i];
    let Some(o) = f.opaques.get(OpaqueRef::from_u32(d.aux)) else {
        report("opaque record does not exist".into());
        return;
    };
    let name = o.name.as_str();
    let Some(op) = opaque_opcode(name) else {
        report(format!(
            "'{name}' is not a Cranelift opcode an opaque instruction can carry"
        ));
        return;
    };
    if o.effects & op.effects != op.effects {
        report(format!(
            "'{name}' has effects {}, but the instruction declares {}",
            effects_name(op.effects),
            effects_name(o.effects)
        ));
    }
    match (op.format.has_memflags(), f.aux2(i)) {
        (true, 0) => report(format!("'{name}' needs memory flags")),
        (false, 0) => {}
        (false, _) => report(format!("'{name}' takes no memory flags")),
        (true, n) => match f.memflags.get(MemFlagsRef::from_u32(n - 1)) {
            None => report("memory flags do not exist".into()),
            Some(mf) if op.format == OpaqueFormat::Store && mf.readonly() => {
                report(format!("'{name}' stores, so its memory cannot be readonly"))
            }
            Some(_) => {}
        },
    }
    // The controlling type; `None` when types cannot be checked further.
    let ctrl = match op.ctrl {
        None => Some(d.ty),
        Some(ts) if ts.contains(d.ty) => Some(d.ty),
        Some(ts) if d.ty.is_void() => {
            report(format!(
                "'{name}' needs a controlling type ({name}.T, T one of {ts})"
            ));
            None
        }
        Some(ts) => {
            report(format!("'{name}' does not take type {}, only {ts}", d.ty));
            None
        }
    };
    let reg_type = |r: Reg| f.regs.get(r).map(|rd| rd.ty);
    let ops = f.operands(i).unpacked();
    let ops = &ops[..];
    if ops.len() != op.args.len() {
        report(format!(
            "'{name}' takes {} operand(s), found {}",
            op.args.len(),
            ops.len()
        ));
    } else {
        for (k, (o, rule)) in ops.iter().zip(op.args).enumerate() {
            let Operand::Reg(r) = *o else {
                report(format!("'{name}' operand {k} must be a register"));
                continue;
            };
            let (Some(t), Some(ctrl)) = (reg_type(r), ctrl) else {
                continue;
            };
            if rule.admits(t, ctrl) {
                continue;
            }
            match *rule {
                TypeRule::In(ts) => report(format!(
                    "'{name}' operand {r} has type {t}, not one of {ts}"
                )),
                TypeRule::Narrower | TypeRule::Wider => report(format!(
                    "'{name}' operand {r} has type {t}, which is not a {} scalar of the \
                     same kind as {ctrl}",
                    if *rule == TypeRule::Narrower {
                        "narrower"
                    } else {
                        "wider"
                    }
                )),
                rule => match rule.resolve(ctrl) {
                    Some(want) => report(format!(
                        "'{name}' operand {r} has type {t}, expected {want}"
                    )),
                    None => report(format!(
                        "'{name}' has no operand type for controlling type {ctrl}"
                    )),
                },
            }
        }
    }
    if name == "bitcast" {
        check_bitcast(f, i, ctrl, report);
    }
    let results = f.results(i);
    let mut result_type = None;
    if results.len() != op.results.len() {
        report(format!(
            "'{name}' defines {} result(s), Cranelift's instruction has {}",
            results.len(),
            op.results.len()
        ));
    } else if let Some(ctrl) = ctrl {
        for (k, (&r, rule)) in results.iter().zip(op.results).enumerate() {
            let want = rule.resolve(ctrl);
            if k == 0 {
                result_type = want;
            }
            match (reg_type(r), want) {
                (_, None) => report(format!(
                    "'{name}' has no result type for controlling type {ctrl}"
                )),
                (Some(t), Some(want)) if t != want => report(format!(
                    "'{name}' result {r} has type {t}, Cranelift's instruction gives {want}"
                )),
                _ => {}
            }
        }
    }
    check_opaque_imms(op, &o.imms, ctrl, result_type, report);
}

/// `bitcast` keeps the bit width; its memory flags give only the byte order (`big` or
/// `little`), which it needs to change the lane count.
fn check_bitcast(f: &Function, i: Inst, ctrl: Option<Type>, report: &mut dyn FnMut(String)) {
    let (Some(ctrl), [Operand::Reg(r)]) = (ctrl, &f.operands(i).unpacked()[..]) else {
        return;
    };
    let Some(t) = f.regs.get(*r).map(|d| d.ty) else {
        return;
    };
    if t.bits() != ctrl.bits() {
        report(format!(
            "'bitcast' operand {r} has {} bits, {ctrl} has {}",
            t.bits(),
            ctrl.bits()
        ));
    }
    let order = MemFlags::LITTLE | MemFlags::BIG;
    let Some(mf) = f
        .aux2(i)
        .checked_sub(1)
        .and_then(|k| f.memflags.get(MemFlagsRef::from_u32(k)))
    else {
        return;
    };
    if mf.region.is_some() || mf.trap != MemFlags::new().trap || mf.bits & !order != 0 {
        report("'bitcast' takes no memory flags but big or little".into());
    } else if mf.bits & order == 0 && t.lanes() != ctrl.lanes() {
        report(format!(
            "'bitcast' from {t} to {ctrl} changes the lane count: it needs big or little"
        ));
    }
}

fn check_opaque_imms(
    op: &OpaqueOpcode,
    imms: &[u64],
    ctrl: Option<Type>,
    result_type: Option<Type>,
    report: &mut dyn FnMut(String),
) {
    use OpaqueFormat as F;
    let name = op.name;
    let want = match op.format {
        F::NullAry
        | F::Unary
        | F::Binary
        | F::Ternary
        | F::AtomicCas
        | F::LoadNoOffset
        | F::StoreNoOffset => 0,
        F::UnaryConst | F::Shuffle => {
            let Some(&len) = imms.first() else {
                report(format!("'{name}' needs its byte length as immediate 0"));
                return;
            };
            let need = match op.format {
                F::Shuffle => Some(16),
                _ => result_type.map(|t| u64::from(t.bytes())),
            };
            if let Some(need) = need {
                if len != need {
                    report(format!(
                        "'{name}' constant has {len} bytes, its type needs {need}"
                    ));
                    return;
                }
            }
            let words = len.div_ceil(8);
            if imms.len() as u64 - 1 != words {
                report(format!(
                    "'{name}' packs {len} bytes in {} word(s), expected {words}",
                    imms.len() - 1
                ));
                return;
            }
            if op.format == F::Shuffle {
                let bytes = imms[1..].iter().flat_map(|w| w.to_le_bytes());
                if let Some(b) = bytes.take(16).find(|&b| b >= 32) {
                    report(format!("'{name}' lane index {b} is more than 31"));
                }
            }
            return;
        }
        _ => 1,
    };
    if imms.len() != want {
        report(format!(
            "'{name}' takes {want} immediate(s), found {}",
            imms.len()
        ));
        return;
    }
    let Some(&v) = imms.first() else {
        return;
    };
    let bad = |what: &str| format!("'{name}' immediate {v:#x} {what}");
    match op.format {
        F::UnaryImm => {
            if let Some(t) = ctrl.filter(|t| t.bits() < 64) {
                if v >> t.bits() != 0 {
                    report(bad(&format!("does not fit {t} (zero-extended)")));
                }
            }
        }
        F::UnaryIeee16 if v > u64::from(u16::MAX) => report(bad("does not fit 16 bits")),
        F::UnaryIeee32 if v > u64::from(u32::MAX) => report(bad("does not fit 32 bits")),
        F::BinaryImm8 | F::TernaryImm8 => {
            if v > 255 {
                report(bad("does not fit 8 bits"));
            } else if let Some(t) = ctrl.filter(|t| t.is_vector()) {
                if v >= u64::from(t.lanes()) {
                    report(bad(&format!("is not a lane of {t}")));
                }
            }
        }
        F::AtomicRmw if v >= ATOMIC_RMW_OPS => report(bad("is not an atomic operation")),
        F::Load | F::Store if i32::try_from(v as i64).is_err() => {
            report(bad("is not a 32-bit offset"))
        }
        F::IntAddTrap | F::CondTrap if v == 0 || v > 255 => report(bad("is not a trap code")),
        F::IntCompare | F::FloatCompare => {
            let float = op.format == F::FloatCompare;
            match Cond::all().get(v as usize) {
                Some(c) if c.is_float() == float => {}
                _ => report(bad(if float {
                    "is not a float predicate"
                } else {
                    "is not an integer predicate"
                })),
            }
        }
        _ => {}
    }
}

/// The opcodes an opaque may carry, sorted by name. Generated from Cranelift 0.135.8 by
/// `cargo test -p mergelift-jit-driver --test opaque -- --ignored --nocapture print_opaque_table`;
/// jit-driver's `opaque_table_matches_cranelift` checks it against Cranelift.
mod table {
    use super::OpaqueFormat::*;
    use super::TypeRule::*;
    use super::{OpaqueFormat, OpaqueOpcode, TypeRule, TypeSet};
    use crate::lir::types::Type;

    const fn ts(lanes: u16, ints: u8, floats: u8) -> TypeSet {
        TypeSet {
            lanes,
            ints,
            floats,
        }
    }

    const fn op(
        name: &'static str,
        format: OpaqueFormat,
        effects: u8,
        ctrl: Option<TypeSet>,
        args: &'static [TypeRule],
        results: &'static [TypeRule],
    ) -> OpaqueOpcode {
        OpaqueOpcode {
            name,
            format,
            effects,
            ctrl,
            args,
            results,
        }
    }

    #[rustfmt::skip]
    pub(super) static OPAQUE_OPCODES: [OpaqueOpcode; 144] = [
        op("atomic_cas", AtomicCas, 0xb, Some(ts(0x1, 0xf8, 0x0)), &[In(ts(0x1, 0x60, 0x0)), Same, Same], &[Same]),
        op("atomic_load", LoadNoOffset, 0x9, Some(ts(0x1, 0xf8, 0x0)), &[In(ts(0x1, 0x60, 0x0))], &[Same]),
        op("atomic_rmw", AtomicRmw, 0xb, Some(ts(0x1, 0xf8, 0x0)), &[In(ts(0x1, 0x60, 0x0)), Same], &[Same]),
        op("atomic_store", StoreNoOffset, 0xa, Some(ts(0x1, 0xf8, 0x0)), &[Same, In(ts(0x1, 0x60, 0x0))], &[]),
        op("avg_round", Binary, 0x0, Some(ts(0x1fe, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("band", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same, Same], &[Same]),
        op("bitcast", LoadNoOffset, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[In(ts(0x1ff, 0xf8, 0xf0))], &[Same]),
        op("bitrev", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same], &[Same]),
        op("bitselect", Ternary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same, Same, Same], &[Same]),
        op("blendv", Ternary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same, Same, Same], &[Same]),
        op("bmask", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[In(ts(0x1, 0xf8, 0x0))], &[Same]),
        op("bnot", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same], &[Same]),
        op("bor", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same, Same], &[Same]),
        op("bswap", Unary, 0x0, Some(ts(0x1, 0xf0, 0x0)), &[Same], &[Same]),
        op("bxor", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same, Same], &[Same]),
        op("ceil", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("cls", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same], &[Same]),
        op("clz", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same], &[Same]),
        op("ctz", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same], &[Same]),
        op("debugtrap", NullAry, 0xb, None, &[], &[]),
        op("extractlane", BinaryImm8, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[Same], &[LaneOf]),
        op("f128const", UnaryConst, 0x0, None, &[], &[Fixed(Type::F128, 1)]),
        op("f16const", UnaryIeee16, 0x0, None, &[], &[Fixed(Type::F16, 1)]),
        op("f32const", UnaryIeee32, 0x0, None, &[], &[Fixed(Type::F32, 1)]),
        op("f64const", UnaryIeee64, 0x0, None, &[], &[Fixed(Type::F64, 1)]),
        op("fabs", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("fadd", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fcmp", FloatCompare, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[AsTruthy]),
        op("fcopysign", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fcvt_from_sint", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[In(ts(0x1ff, 0xf8, 0x0))], &[Same]),
        op("fcvt_from_uint", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[In(ts(0x1ff, 0xf8, 0x0))], &[Same]),
        op("fcvt_to_sint", Unary, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[In(ts(0x1, 0x0, 0xf0))], &[Same]),
        op("fcvt_to_sint_sat", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[In(ts(0x1ff, 0x0, 0xf0))], &[Same]),
        op("fcvt_to_uint", Unary, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[In(ts(0x1, 0x0, 0xf0))], &[Same]),
        op("fcvt_to_uint_sat", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[In(ts(0x1ff, 0x0, 0xf0))], &[Same]),
        op("fdemote", Unary, 0x0, Some(ts(0x1, 0x0, 0xf0)), &[Wider], &[Same]),
        op("fdiv", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fence", NullAry, 0x8, None, &[], &[]),
        op("floor", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("fma", Ternary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same, Same], &[Same]),
        op("fmax", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fmin", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fmul", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fneg", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("fpromote", Unary, 0x0, Some(ts(0x1, 0x0, 0xf0)), &[Narrower], &[Same]),
        op("fsub", Binary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same, Same], &[Same]),
        op("fvdemote", Unary, 0x0, None, &[Fixed(Type::F64, 2)], &[Fixed(Type::F32, 4)]),
        op("fvpromote_low", Unary, 0x0, None, &[Fixed(Type::F32, 4)], &[Fixed(Type::F64, 2)]),
        op("get_frame_pointer", NullAry, 0x8, Some(ts(0x1, 0x60, 0x0)), &[], &[Same]),
        op("get_pinned_reg", NullAry, 0x8, Some(ts(0x1, 0x60, 0x0)), &[], &[Same]),
        op("get_return_address", NullAry, 0x8, Some(ts(0x1, 0x60, 0x0)), &[], &[Same]),
        op("get_stack_pointer", NullAry, 0x8, Some(ts(0x1, 0x60, 0x0)), &[], &[Same]),
        op("iabs", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same], &[Same]),
        op("iadd", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("iadd_pairwise", Binary, 0x0, Some(ts(0x1e, 0x38, 0x0)), &[Same, Same], &[Same]),
        op("icmp", IntCompare, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[AsTruthy]),
        op("iconcat", Binary, 0x0, Some(ts(0x1, 0x78, 0x0)), &[Same, Same], &[DoubleWidth]),
        op("iconst", UnaryImm, 0x0, Some(ts(0x1, 0x78, 0x0)), &[], &[Same]),
        op("imul", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("ineg", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same], &[Same]),
        op("insertlane", TernaryImm8, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[Same, LaneOf], &[Same]),
        op("ireduce", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Wider], &[Same]),
        op("ishl", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, In(ts(0x1, 0xf8, 0x0))], &[Same]),
        op("isplit", Unary, 0x0, Some(ts(0x1, 0xf0, 0x0)), &[Same], &[HalfWidth, HalfWidth]),
        op("istore16", Store, 0x2, Some(ts(0x1, 0x60, 0x0)), &[Same, In(ts(0x1, 0x60, 0x0))], &[]),
        op("istore32", Store, 0x2, Some(ts(0x1, 0x40, 0x0)), &[Same, In(ts(0x1, 0x60, 0x0))], &[]),
        op("istore8", Store, 0x2, Some(ts(0x1, 0x70, 0x0)), &[Same, In(ts(0x1, 0x60, 0x0))], &[]),
        op("isub", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("load", Load, 0x1, Some(ts(0x1ff, 0xf8, 0xf0)), &[In(ts(0x1, 0x60, 0x0))], &[Same]),
        op("nearest", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("nop", NullAry, 0x8, None, &[], &[]),
        op("popcnt", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same], &[Same]),
        op("rotl", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, In(ts(0x1, 0xf8, 0x0))], &[Same]),
        op("rotr", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, In(ts(0x1, 0xf8, 0x0))], &[Same]),
        op("sadd_overflow", Binary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same, Fixed(Type::I8, 1)]),
        op("sadd_overflow_cin", Ternary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same, Fixed(Type::I8, 1)], &[Same, Fixed(Type::I8, 1)]),
        op("sadd_sat", Binary, 0x0, Some(ts(0x1fe, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("scalar_to_vector", Unary, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[LaneOf], &[Same]),
        op("sdiv", Binary, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("select", Ternary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[In(ts(0x1, 0xf8, 0x0)), Same, Same], &[Same]),
        op("select_spectre_guard", Ternary, 0x0, Some(ts(0x1ff, 0xf8, 0xf0)), &[In(ts(0x1, 0xf8, 0x0)), Same, Same], &[Same]),
        op("sequence_point", NullAry, 0x8, None, &[], &[]),
        op("set_pinned_reg", Unary, 0x8, Some(ts(0x1, 0x60, 0x0)), &[Same], &[]),
        op("sextend", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Narrower], &[Same]),
        op("shuffle", Shuffle, 0x0, None, &[Fixed(Type::I8, 16), Fixed(Type::I8, 16)], &[Fixed(Type::I8, 16)]),
        op("sload16", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[In(ts(0x1, 0x60, 0x0))], &[Same]),
        op("sload16x4", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I32, 4)]),
        op("sload32", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I64, 1)]),
        op("sload32x2", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I64, 2)]),
        op("sload8", Load, 0x1, Some(ts(0x1, 0x70, 0x0)), &[In(ts(0x1, 0x60, 0x0))], &[Same]),
        op("sload8x8", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I16, 8)]),
        op("smax", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("smin", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("smul_overflow", Binary, 0x0, Some(ts(0x1, 0x78, 0x0)), &[Same, Same], &[Same, Fixed(Type::I8, 1)]),
        op("smulhi", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("snarrow", Binary, 0x0, Some(ts(0xe, 0x70, 0x0)), &[Same, Same], &[SplitLanes]),
        op("splat", Unary, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[LaneOf], &[Same]),
        op("sqmul_round_sat", Binary, 0x0, Some(ts(0xc, 0x30, 0x0)), &[Same, Same], &[Same]),
        op("sqrt", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("srem", Binary, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("sshr", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, In(ts(0x1, 0xf8, 0x0))], &[Same]),
        op("ssub_overflow", Binary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same, Fixed(Type::I8, 1)]),
        op("ssub_overflow_bin", Ternary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same, Fixed(Type::I8, 1)], &[Same, Fixed(Type::I8, 1)]),
        op("ssub_sat", Binary, 0x0, Some(ts(0x1fe, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("store", Store, 0x2, Some(ts(0x1ff, 0xf8, 0xf0)), &[Same, In(ts(0x1, 0x60, 0x0))], &[]),
        op("swiden_high", Unary, 0x0, Some(ts(0x1e, 0x38, 0x0)), &[Same], &[MergeLanes]),
        op("swiden_low", Unary, 0x0, Some(ts(0x1e, 0x38, 0x0)), &[Same], &[MergeLanes]),
        op("swizzle", Binary, 0x0, None, &[Fixed(Type::I8, 16), Fixed(Type::I8, 16)], &[Fixed(Type::I8, 16)]),
        op("trapnz", CondTrap, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[Same], &[]),
        op("trapz", CondTrap, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[Same], &[]),
        op("trunc", Unary, 0x0, Some(ts(0x1ff, 0x0, 0xf0)), &[Same], &[Same]),
        op("uadd_overflow", Binary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same, Fixed(Type::I8, 1)]),
        op("uadd_overflow_cin", Ternary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same, Fixed(Type::I8, 1)], &[Same, Fixed(Type::I8, 1)]),
        op("uadd_overflow_trap", IntAddTrap, 0x4, Some(ts(0x1, 0x60, 0x0)), &[Same, Same], &[Same]),
        op("uadd_sat", Binary, 0x0, Some(ts(0x1fe, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("udiv", Binary, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("uextend", Unary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Narrower], &[Same]),
        op("uload16", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[In(ts(0x1, 0x60, 0x0))], &[Same]),
        op("uload16x4", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I32, 4)]),
        op("uload32", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I64, 1)]),
        op("uload32x2", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I64, 2)]),
        op("uload8", Load, 0x1, Some(ts(0x1, 0x70, 0x0)), &[In(ts(0x1, 0x60, 0x0))], &[Same]),
        op("uload8x8", Load, 0x1, Some(ts(0x1, 0x60, 0x0)), &[Same], &[Fixed(Type::I16, 8)]),
        op("umax", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("umin", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("umul_overflow", Binary, 0x0, Some(ts(0x1, 0x78, 0x0)), &[Same, Same], &[Same, Fixed(Type::I8, 1)]),
        op("umulhi", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("unarrow", Binary, 0x0, Some(ts(0xe, 0x70, 0x0)), &[Same, Same], &[SplitLanes]),
        op("urem", Binary, 0x4, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("ushr", Binary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[Same, In(ts(0x1, 0xf8, 0x0))], &[Same]),
        op("usub_overflow", Binary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same], &[Same, Fixed(Type::I8, 1)]),
        op("usub_overflow_bin", Ternary, 0x0, Some(ts(0x1, 0xf8, 0x0)), &[Same, Same, Fixed(Type::I8, 1)], &[Same, Fixed(Type::I8, 1)]),
        op("usub_sat", Binary, 0x0, Some(ts(0x1fe, 0xf8, 0x0)), &[Same, Same], &[Same]),
        op("uunarrow", Binary, 0x0, Some(ts(0xe, 0x70, 0x0)), &[Same, Same], &[SplitLanes]),
        op("uwiden_high", Unary, 0x0, Some(ts(0x1e, 0x38, 0x0)), &[Same], &[MergeLanes]),
        op("uwiden_low", Unary, 0x0, Some(ts(0x1e, 0x38, 0x0)), &[Same], &[MergeLanes]),
        op("vall_true", Unary, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[Same], &[Fixed(Type::I8, 1)]),
        op("vany_true", Unary, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[Same], &[Fixed(Type::I8, 1)]),
        op("vconst", UnaryConst, 0x0, Some(ts(0x1fe, 0xf8, 0xf0)), &[], &[Same]),
        op("vhigh_bits", Unary, 0x0, Some(ts(0x1, 0x78, 0x0)), &[In(ts(0x1fe, 0xf8, 0xf0))], &[Same]),
        op("x86_cvtt2dq", Unary, 0x0, Some(ts(0x1ff, 0xf8, 0x0)), &[In(ts(0x1ff, 0x0, 0xf0))], &[Same]),
        op("x86_pmaddubsw", Binary, 0x0, None, &[Fixed(Type::I8, 16), Fixed(Type::I8, 16)], &[Fixed(Type::I16, 8)]),
        op("x86_pmulhrsw", Binary, 0x0, Some(ts(0xc, 0x30, 0x0)), &[Same, Same], &[Same]),
        op("x86_pshufb", Binary, 0x0, None, &[Fixed(Type::I8, 16), Fixed(Type::I8, 16)], &[Fixed(Type::I8, 16)]),
    ];
}

impl SourceMap {
    /// The line a verifier error of the parsed module points at: its instruction's, else its
    /// block's, else its function's.
    pub fn error_line(&self, e: &VerifierError) -> Option<u32> {
        e.inst_id
            .and_then(|i| self.inst_line(&e.function, i))
            .or_else(|| e.block.and_then(|b| self.block_line(&e.function, b)))
            .or_else(|| self.function_line(&e.function))
    }
}

/// The line of `text` that verifier error `e`, found in the module parsed from `text`, points
/// at (see [`SourceMap::error_line`]). Parses `text` again: meant for reporting errors.
pub fn verifier_error_line(text: &str, e: &VerifierError) -> Option<u32> {
    let (_, lines) = parse_module_with_lines(text).ok()?;
    lines.error_line(e)
}
