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

use super::entities::*;
use super::function::*;
use super::inst::{Format, Opcode};
use super::module::{Module, SymbolKind};
use super::operand::Operand;
use super::print::write_inst;
use super::types::Type;
use crate::analysis::{Cfg, DomTree};
use core::fmt;
use cranelift_entity::{EntityRef, SecondaryMap};

/// One verifier finding: the function, block and instruction it concerns, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierError {
    pub function: String,
    pub block: Option<Block>,
    /// The instruction as text, when the error concerns one.
    pub inst: Option<String>,
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
            function: self.f.name.clone(),
            block: self.block,
            inst,
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
                    if self.reg_ok(r) && self.f.regs[r].ty.class() != super::types::RegClass::Int {
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
    let mut def_count: SecondaryMap<Reg, u32> = SecondaryMap::with_capacity(f.regs.len());
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
            } else {
                seen_non_phi = true;
            }
            for &r in f.results(i) {
                if c.reg_ok_def(r) {
                    def_count[r] += 1;
                }
            }
            check_inst(&mut c, i, &in_layout);
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

impl Ctx<'_> {
    fn reg_ok_def(&mut self, r: Reg) -> bool {
        if r.index() >= self.f.regs.len() {
            self.report(format!("result {r} does not exist"));
            return false;
        }
        true
    }
}

fn check_inst(c: &mut Ctx, i: Inst, in_layout: &SecondaryMap<Block, bool>) {
    let f = c.f;
    let d = f.insts[i];
    let ops = f.operands(i);
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
        Format::Call => check_call(c, i, in_layout),
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

fn check_call(c: &mut Ctx, i: Inst, in_layout: &SecondaryMap<Block, bool>) {
    let f = c.f;
    let d = f.insts[i];
    let ops = f.operands(i);
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
            let Some(table) = f.exn_tables.get(ExnTable::from_u32(d.aux2)) else {
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
            let ops = f.operands(i);
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
                for pair in ops.chunks(2) {
                    let (Some(r), Some(p)) = (pair[0].as_reg(), pair[1].as_block()) else {
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
