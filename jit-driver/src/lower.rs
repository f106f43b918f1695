//! Lower LIR back to Cranelift IR, building the function's data flow graph and layout
//! directly: LIR is in SSA form already, so no SSA construction (cranelift-frontend's
//! `FunctionBuilder`) is needed.
//!
//! Phis become block parameters and branch arguments; memory operands become address
//! arithmetic (`iadd`, `ishl`, `stack_addr`, `symbol_value`) plus a load or store carrying the
//! original flags and offset; calls keep their signatures and calling conventions; opaque
//! instructions are rebuilt from their Cranelift opcode and immediates. Blocks are emitted in
//! reverse post-order so every definition precedes its uses; unreachable blocks are dropped.

use crate::error::Error;
use crate::opmap::{self, clif_cond, clif_memflags, clif_type, ClifCond};
use cranelift_codegen::ir::{
    self, immediates, InstBuilder, InstBuilderBase, InstructionData as D, Opcode as C,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_entity::packed_option::{PackedOption, ReservedValue};
use cranelift_entity::EntityRef;
use midend::lir::{self, Format, Opcode as L, Operand};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::str::FromStr;

/// How LIR symbols become Cranelift external names.
pub trait NameResolver {
    /// The external name of a function symbol.
    fn function(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
        sig: ir::SigRef,
    ) -> ir::ExternalName;
    /// The external name of a data symbol.
    fn data(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
    ) -> ir::ExternalName;
}

/// Names as the producer spelled them (`u0:12`, `%fib`, libcalls), for printing CLIF.
pub struct OriginalNames;

/// Libcalls and known symbols keep their Cranelift names (`libcall.CeilF32`).
pub(crate) fn special_name(s: &str) -> Option<ir::ExternalName> {
    if let Some(l) = s
        .strip_prefix("libcall.")
        .and_then(|l| ir::LibCall::from_str(l).ok())
    {
        return Some(ir::ExternalName::LibCall(l));
    }
    if let Some(k) = s
        .strip_prefix("known.")
        .and_then(|k| ir::KnownSymbol::from_str(k).ok())
    {
        return Some(ir::ExternalName::KnownSymbol(k));
    }
    None
}

impl OriginalNames {
    /// The external name spelt `s`: a user name (`u0:12`), a libcall or known symbol, or
    /// else a test-case name (`%fib`).
    pub(crate) fn name(func: &mut ir::Function, s: &str) -> ir::ExternalName {
        if let Some(u) = opmap::parse_user_name(s) {
            return Self::user(func, u);
        }
        special_name(s).unwrap_or_else(|| ir::ExternalName::testcase(s))
    }

    /// The user name `u`, declared in `func`.
    pub(crate) fn user(func: &mut ir::Function, u: ir::UserExternalName) -> ir::ExternalName {
        ir::ExternalName::user(func.declare_imported_user_function(u))
    }
}

impl NameResolver for OriginalNames {
    fn function(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
        _sig: ir::SigRef,
    ) -> ir::ExternalName {
        Self::name(func, &m.symbols[sym].name)
    }
    fn data(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
    ) -> ir::ExternalName {
        Self::name(func, &m.symbols[sym].name)
    }
}

/// LIR signature → Cranelift signature.
pub(crate) fn clif_signature(s: &lir::Signature) -> ir::Signature {
    let conv = |p: &lir::AbiParam| {
        let mut a = ir::AbiParam::new(clif_type(p.ty));
        a.extension = match p.ext {
            lir::Ext::None => ir::ArgumentExtension::None,
            lir::Ext::Uext => ir::ArgumentExtension::Uext,
            lir::Ext::Sext => ir::ArgumentExtension::Sext,
        };
        a.purpose = match p.purpose {
            lir::Purpose::Normal => ir::ArgumentPurpose::Normal,
            lir::Purpose::VmCtx => ir::ArgumentPurpose::VMContext,
            lir::Purpose::StructReturn => ir::ArgumentPurpose::StructReturn,
            lir::Purpose::StructArgument(n) => ir::ArgumentPurpose::StructArgument(n),
        };
        a
    };
    let mut sig = ir::Signature::new(opmap::clif_call_conv(s.call_conv));
    sig.params = s.params.iter().map(conv).collect();
    sig.returns = s.returns.iter().map(conv).collect();
    sig
}

/// Scratch tables of lowering, reused across functions (their allocations are kept):
/// register → value and block → block maps, the block order, branch argument lists.
#[derive(Default)]
pub struct LowerContext {
    /// Value of each register (dense, by register index).
    values: Vec<PackedOption<ir::Value>>,
    /// Cranelift block of each reachable LIR block.
    blocks: Vec<PackedOption<ir::Block>>,
    /// Interned memory flags of each LIR memory flags record.
    memflags: Vec<Option<ir::MemFlags>>,
    func_refs: FxHashMap<(lir::Symbol, u32), ir::FuncRef>,
    sym_gvs: FxHashMap<lir::Symbol, ir::GlobalValue>,
    /// Result registers of try_calls: they exist only as branch arguments.
    try_results: FxHashMap<lir::Reg, ir::BlockArg>,
    /// Reachable blocks in reverse post-order, and the walk's state.
    rpo: Vec<lir::Block>,
    visited: Vec<bool>,
    stack: Vec<(lir::Block, u32)>,
    /// Argument lists under construction (branch arguments, call arguments, return values).
    args: Vec<ir::BlockArg>,
    args2: Vec<ir::BlockArg>,
    vals: Vec<ir::Value>,
    calls: Vec<ir::BlockCall>,
    /// The operands of the instruction being lowered, unpacked.
    ops: Vec<Operand>,
    /// At a join of many predecessors: the place of each predecessor among the sources of
    /// the block's first phi, (block, predecessor) → place, made on the first edge into the
    /// block (`phi_places_made`, by block index).
    phi_places: FxHashMap<(lir::Block, lir::Block), u32>,
    phi_places_made: Vec<bool>,
}

impl LowerContext {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reachable blocks of `f` in reverse post-order: successors in first-target order, each
    /// once (`Cfg::reverse_post_order`'s order).
    fn compute_rpo(&mut self, f: &lir::Function) {
        self.rpo.clear();
        self.stack.clear();
        self.visited.clear();
        self.visited.resize(f.blocks.len(), false);
        let Some(entry) = f.entry() else {
            return;
        };
        self.visited[entry.index()] = true;
        self.stack.push((entry, 0));
        while let Some(top) = self.stack.last_mut() {
            let (b, i) = *top;
            let ops = match f.terminator(b) {
                Some(t) => f.operands(t),
                None => lir::Operands::empty(),
            };
            let mut k = i as usize;
            let mut next = None;
            while let Some(op) = ops.get(k) {
                k += 1;
                if let Operand::Block(s) = op {
                    if !self.visited[s.index()] {
                        self.visited[s.index()] = true;
                        next = Some(s);
                        break;
                    }
                }
            }
            top.1 = k as u32;
            match next {
                Some(s) => self.stack.push((s, 0)),
                None => {
                    self.rpo.push(b);
                    self.stack.pop();
                }
            }
        }
        self.rpo.reverse();
    }
}

/// Above this many predecessors, a join's phi sources are found through
/// `LowerContext::phi_places` rather than searched.
const JOIN_SEARCH: usize = 16;

/// Appends instructions at the end of one block: `InstBuilder` straight on the function's
/// DFG and layout.
struct Ins<'f> {
    func: &'f mut ir::Function,
    block: ir::Block,
}

impl<'f> InstBuilderBase<'f> for Ins<'f> {
    fn data_flow_graph(&self) -> &ir::DataFlowGraph {
        &self.func.dfg
    }
    fn data_flow_graph_mut(&mut self) -> &mut ir::DataFlowGraph {
        &mut self.func.dfg
    }
    fn build(self, data: D, ctrl_typevar: ir::Type) -> (ir::Inst, &'f mut ir::DataFlowGraph) {
        let inst = self.func.dfg.make_inst(data);
        self.func.dfg.make_inst_results(inst, ctrl_typevar);
        self.func.layout.append_inst(inst, self.block);
        (inst, &mut self.func.dfg)
    }
    fn build_aux_inst(&mut self, data: D, ctrl_typevar: ir::Type) -> ir::Inst {
        let inst = self.func.dfg.make_inst(data);
        self.func.dfg.make_inst_results(inst, ctrl_typevar);
        self.func.layout.append_inst(inst, self.block);
        inst
    }
}

struct Lowerer<'a, 'c> {
    m: &'a lir::Module,
    f: &'a lir::Function,
    names: &'a mut dyn NameResolver,
    func: ir::Function,
    /// The block instructions are appended to.
    cb: ir::Block,
    cx: &'c mut LowerContext,
    cur: Option<lir::Inst>,
}

impl Lowerer<'_, '_> {
    fn err(&self, msg: impl Into<String>) -> Error {
        let inst = self.cur.map(|i| {
            let mut s = String::new();
            let _ = lir::write_inst(&mut s, self.m, self.f, i);
            s
        });
        Error::Lower {
            function: self.f.name.to_string(),
            inst,
            msg: msg.into(),
        }
    }

    #[inline]
    fn ins(&mut self) -> Ins<'_> {
        Ins {
            func: &mut self.func,
            block: self.cb,
        }
    }

    fn mf(&mut self, r: lir::MemFlagsRef) -> ir::MemFlags {
        if let Some(h) = self.cx.memflags[r.index()] {
            return h;
        }
        let h = self
            .func
            .dfg
            .mem_flags
            .insert_unchecked(clif_memflags(self.f.memflags[r]));
        self.cx.memflags[r.index()] = Some(h);
        h
    }

    #[inline]
    fn reg(&self, r: lir::Reg) -> Result<ir::Value, Error> {
        match self.cx.values.get(r.index()).and_then(|v| v.expand()) {
            Some(v) => Ok(v),
            None => Err(self.err(format!("{r} is used before it is defined"))),
        }
    }

    #[inline]
    fn value(&mut self, op: Operand, ty: lir::Type) -> Result<ir::Value, Error> {
        match op {
            Operand::Reg(r) => self.reg(r),
            Operand::Int(v) => {
                let t = if ty.is_scalar_int() {
                    ty
                } else {
                    lir::Type::I64
                };
                Ok(self.ins().iconst(clif_type(t), v))
            }
            Operand::F32(bits) => Ok(self.ins().f32const(immediates::Ieee32::with_bits(bits))),
            Operand::F64(bits) => Ok(self.ins().f64const(immediates::Ieee64::with_bits(bits))),
            _ => Err(self.err("expected a register or constant")),
        }
    }

    fn reg_value(&mut self, op: Operand) -> Result<ir::Value, Error> {
        let ty = match op {
            Operand::Reg(r) => self.f.reg_type(r),
            _ => lir::Type::I64,
        };
        self.value(op, ty)
    }

    #[inline]
    fn define(&mut self, r: lir::Reg, v: ir::Value) {
        self.cx.values[r.index()] = v.into();
    }

    #[inline]
    fn define_results(&mut self, inst: lir::Inst, ci: ir::Inst) -> Result<(), Error> {
        let rs = self.f.results(inst);
        let vs = self.func.dfg.inst_results(ci);
        if rs.len() != vs.len() {
            return Err(self.err(format!(
                "defines {} results, Cranelift's instruction has {}",
                rs.len(),
                vs.len()
            )));
        }
        for (&r, &v) in rs.iter().zip(vs) {
            self.cx.values[r.index()] = v.into();
        }
        Ok(())
    }

    fn func_ref(&mut self, sym: lir::Symbol, sig: u32) -> ir::FuncRef {
        if let Some(&fr) = self.cx.func_refs.get(&(sym, sig)) {
            return fr;
        }
        let name = self
            .names
            .function(self.m, &mut self.func, sym, ir::SigRef::from_u32(sig));
        let fr = self.func.import_function(ir::ExtFuncData {
            name,
            signature: ir::SigRef::from_u32(sig),
            colocated: self.m.symbols[sym].colocated,
            patchable: false,
        });
        self.cx.func_refs.insert((sym, sig), fr);
        fr
    }

    fn sym_gv(&mut self, sym: lir::Symbol) -> ir::GlobalValue {
        if let Some(&g) = self.cx.sym_gvs.get(&sym) {
            return g;
        }
        let name = self.names.data(self.m, &mut self.func, sym);
        let g = self.func.create_global_value(ir::GlobalValueData::Symbol {
            name,
            offset: immediates::Imm64::new(0),
            colocated: self.m.symbols[sym].colocated,
            tls: false,
        });
        self.cx.sym_gvs.insert(sym, g);
        g
    }

    /// A memory operand as (address, offset).
    fn address(&mut self, op: Operand) -> Result<(ir::Value, i32), Error> {
        let i64t = ir::types::I64;
        match op {
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => {
                let scaled = match index.expand() {
                    Some(i) => {
                        let iv = self.reg(i)?;
                        Some(if scale > 1 {
                            let k = self.ins().iconst(i64t, scale.trailing_zeros() as i64);
                            self.ins().ishl(iv, k)
                        } else {
                            iv
                        })
                    }
                    None => None,
                };
                let addr = match (base.expand(), scaled) {
                    (Some(b), Some(s)) => {
                        let bv = self.reg(b)?;
                        self.ins().iadd(bv, s)
                    }
                    (Some(b), None) => self.reg(b)?,
                    (None, Some(s)) => s,
                    (None, None) => self.ins().iconst(i64t, 0),
                };
                Ok((addr, disp))
            }
            Operand::Stack(s, off) => Ok((
                self.ins()
                    .stack_addr(i64t, ir::StackSlot::from_u32(s.as_u32()), off),
                0,
            )),
            Operand::Sym(s, off) => {
                let g = self.sym_gv(s);
                let a = self.ins().symbol_value(i64t, g);
                match i32::try_from(off) {
                    Ok(o) => Ok((a, o)),
                    Err(_) => {
                        let k = self.ins().iconst(i64t, off);
                        Ok((self.ins().iadd(a, k), 0))
                    }
                }
            }
            _ => Err(self.err("expected a memory operand")),
        }
    }

    /// The Cranelift block of a block operand, with the branch arguments of the edge from
    /// `from` into `out` (cleared first): one per phi of the target, in order.
    fn target(
        &mut self,
        from: lir::Block,
        op: Operand,
        out: &mut Vec<ir::BlockArg>,
    ) -> Result<ir::Block, Error> {
        out.clear();
        let Operand::Block(to) = op else {
            return Err(self.err("expected a block"));
        };
        let cb = self
            .cx
            .blocks
            .get(to.index())
            .and_then(|b| b.expand())
            .ok_or_else(|| self.err(format!("{to} is not reachable")))?;
        let f = self.f;
        // Where `from` is among the sources of the last phi: the phis of a block usually list
        // their predecessors in one order, so the next phi is looked at there first (a search
        // per phi would cost predecessors × phis per edge at a join of many edges). A phi
        // names each predecessor once (the LIR verifier checks), so either way finds the same.
        let mut hint: Option<usize> = None;
        let mut first = true;
        for &phi in f.block_insts(to) {
            if f.insts[phi].opcode != L::Phi {
                break;
            }
            let ops = f.operands(phi);
            if first {
                first = false;
                if ops.len() / 2 > JOIN_SEARCH {
                    let made = &mut self.cx.phi_places_made;
                    if made.len() <= to.index() {
                        made.resize(to.index() + 1, false);
                    }
                    if !made[to.index()] {
                        made[to.index()] = true;
                        for k in 0..ops.len() / 2 {
                            if let Operand::Block(p) = ops.at(2 * k + 1) {
                                self.cx.phi_places.entry((to, p)).or_insert(k as u32);
                            }
                        }
                    }
                    hint = self.cx.phi_places.get(&(to, from)).map(|&k| k as usize);
                }
            }
            let k = match hint {
                Some(k) if 2 * k + 1 < ops.len() && ops.at(2 * k + 1) == Operand::Block(from) => {
                    Some(k)
                }
                _ => (0..ops.len() / 2).find(|&k| ops.at(2 * k + 1) == Operand::Block(from)),
            };
            hint = k;
            let src = k.map(|k| ops.at(2 * k));
            let Some(Operand::Reg(r)) = src else {
                return Err(self.err(format!("phi in {to} has no source for {from}")));
            };
            match self.cx.values.get(r.index()).and_then(|v| v.expand()) {
                Some(v) => out.push(ir::BlockArg::Value(v)),
                None => match self.cx.try_results.get(&r) {
                    Some(&a) => out.push(a),
                    None => return Err(self.err(format!("{r} is used before it is defined"))),
                },
            }
        }
        Ok(cb)
    }

    fn block_call(&mut self, from: lir::Block, op: Operand) -> Result<ir::BlockCall, Error> {
        let mut args = std::mem::take(&mut self.cx.args);
        let r = self
            .target(from, op, &mut args)
            .map(|b| self.func.dfg.block_call(b, &args));
        self.cx.args = args;
        r
    }

    fn lower_inst(&mut self, lb: lir::Block, inst: lir::Inst) -> Result<(), Error> {
        let mut ops = std::mem::take(&mut self.cx.ops);
        ops.clear();
        ops.extend(self.f.operands(inst));
        let r = self.lower_inst_with(lb, inst, &ops);
        self.cx.ops = ops;
        r
    }

    /// `lower_inst` with the instruction's operands unpacked.
    fn lower_inst_with(
        &mut self,
        lb: lir::Block,
        inst: lir::Inst,
        ops: &[Operand],
    ) -> Result<(), Error> {
        self.cur = Some(inst);
        let f = self.f;
        let d = f.insts[inst];
        let ty = d.ty;
        let cty = clif_type(ty);
        match d.opcode.format() {
            Format::Phi => {}
            Format::Copy => {
                let r = f.results(inst)[0];
                let v = match ops[0] {
                    Operand::Arg(n) => {
                        let entry = self.cx.blocks[f.layout[0].index()].unwrap();
                        *self
                            .func
                            .dfg
                            .block_params(entry)
                            .get(n as usize)
                            .ok_or_else(|| self.err(format!("no argument {n}")))?
                    }
                    op => self.value(op, ty)?,
                };
                self.define(r, v);
            }
            Format::Unary | Format::Binary | Format::Ternary => {
                let c = opmap::opmap()
                    .clif(d.opcode)
                    .ok_or_else(|| self.err("no Cranelift opcode"))?;
                let shift = matches!(d.opcode, L::Shl | L::Ushr | L::Sshr | L::Rotl | L::Rotr);
                let mut vals = [ir::Value::reserved_value(); 3];
                for (k, &op) in ops.iter().enumerate().take(3) {
                    let vty = match op {
                        Operand::Reg(r) => f.reg_type(r),
                        _ if shift && k == 1 => lir::Type::I64,
                        _ if matches!(d.opcode, L::Select | L::SelectSpectreGuard) && k == 0 => {
                            lir::Type::I8
                        }
                        _ => ty,
                    };
                    vals[k] = self.value(op, vty)?;
                }
                let data = match ops.len() {
                    1 => D::Unary {
                        opcode: c,
                        arg: vals[0],
                    },
                    2 => D::Binary {
                        opcode: c,
                        args: [vals[0], vals[1]],
                    },
                    3 => D::Ternary {
                        opcode: c,
                        args: [vals[0], vals[1], vals[2]],
                    },
                    n => return Err(self.err(format!("{n} operands"))),
                };
                let (ci, _) = self.ins().build(data, cty);
                self.define_results(inst, ci)?;
            }
            Format::Compare => {
                let Operand::Pred(p) = ops[0] else {
                    return Err(self.err("compare without predicate"));
                };
                let (x, y) = (self.value(ops[1], ty)?, self.value(ops[2], ty)?);
                let data = match clif_cond(p) {
                    ClifCond::Int(cond) => D::IntCompare {
                        opcode: C::Icmp,
                        args: [x, y],
                        cond,
                    },
                    ClifCond::Float(cond) => D::FloatCompare {
                        opcode: C::Fcmp,
                        args: [x, y],
                        cond,
                    },
                };
                let (ci, _) = self.ins().build(data, cty);
                self.define_results(inst, ci)?;
            }
            Format::Load => {
                let c = opmap::opmap().clif(d.opcode).unwrap();
                let (addr, offset) = self.address(ops[0])?;
                let flags = self.mf(lir::MemFlagsRef::from_u32(d.aux));
                let (ci, _) = self.ins().build(
                    D::Load {
                        opcode: c,
                        arg: addr,
                        flags,
                        offset: offset.into(),
                    },
                    cty,
                );
                self.define_results(inst, ci)?;
            }
            Format::Store => {
                let c = opmap::opmap().clif(d.opcode).unwrap();
                let v = self.value(ops[1], ty)?;
                let (addr, offset) = self.address(ops[0])?;
                let flags = self.mf(lir::MemFlagsRef::from_u32(d.aux));
                self.ins().build(
                    D::Store {
                        opcode: c,
                        args: [v, addr],
                        flags,
                        offset: offset.into(),
                    },
                    cty,
                );
            }
            Format::Addr => {
                let v = match (d.opcode, ops[0]) {
                    (L::StackAddr, Operand::Stack(s, off)) => {
                        self.ins()
                            .stack_addr(cty, ir::StackSlot::from_u32(s.as_u32()), off)
                    }
                    (L::SymbolValue, Operand::Sym(s, off)) => {
                        let g = if off == 0 {
                            self.sym_gv(s)
                        } else {
                            let name = self.names.data(self.m, &mut self.func, s);
                            self.func.create_global_value(ir::GlobalValueData::Symbol {
                                name,
                                offset: immediates::Imm64::new(off),
                                colocated: self.m.symbols[s].colocated,
                                tls: false,
                            })
                        };
                        self.ins().symbol_value(cty, g)
                    }
                    (L::FuncAddr, Operand::Sym(s, _)) => {
                        let fr = self.func_ref(s, d.aux);
                        self.ins().func_addr(cty, fr)
                    }
                    _ => return Err(self.err("bad address operand")),
                };
                self.define(f.results(inst)[0], v);
            }
            Format::GlobalValue => {
                let gv = ir::GlobalValue::from_u32(d.aux);
                let v = if d.opcode == L::TlsValue {
                    self.ins().tls_value(cty, gv)
                } else {
                    self.ins().symbol_value(cty, gv)
                };
                self.define(f.results(inst)[0], v);
            }
            Format::Call => self.lower_call(lb, inst, ops)?,
            Format::Jump => {
                let mut args = std::mem::take(&mut self.cx.args);
                let r = self.target(lb, ops[0], &mut args).map(|t| {
                    self.ins().jump(t, &args);
                });
                self.cx.args = args;
                r?;
            }
            Format::Brif => {
                let Operand::Pred(p) = ops[0] else {
                    return Err(self.err("brif without predicate"));
                };
                let nvals = ops.len() - 3;
                let mut at = std::mem::take(&mut self.cx.args);
                let mut af = std::mem::take(&mut self.cx.args2);
                let r = self.lower_brif(lb, p, nvals, ty, ops, &mut at, &mut af);
                self.cx.args = at;
                self.cx.args2 = af;
                r?;
            }
            Format::BrTable => {
                let idx = self.value(ops[0], ty)?;
                let def = self.block_call(lb, ops[1])?;
                let mut table = std::mem::take(&mut self.cx.calls);
                table.clear();
                let mut r = Ok(());
                for &op in &ops[2..] {
                    match self.block_call(lb, op) {
                        Ok(c) => table.push(c),
                        Err(e) => {
                            r = Err(e);
                            break;
                        }
                    }
                }
                if r.is_ok() {
                    let jt = self
                        .func
                        .create_jump_table(ir::JumpTableData::new(def, &table));
                    self.ins().br_table(idx, jt);
                }
                self.cx.calls = table;
                r?;
            }
            Format::Return => {
                let mut vals = std::mem::take(&mut self.cx.vals);
                vals.clear();
                let mut r = Ok(());
                for (op, p) in ops.iter().zip(&f.sig.returns) {
                    match self.value(*op, p.ty) {
                        Ok(v) => vals.push(v),
                        Err(e) => {
                            r = Err(e);
                            break;
                        }
                    }
                }
                if r.is_ok() {
                    self.ins().return_(&vals);
                }
                self.cx.vals = vals;
                r?;
            }
            Format::Trap => {
                let code = trap_code(d.aux).ok_or_else(|| self.err("bad trap code"))?;
                self.ins().trap(code);
            }
            Format::CondTrap => {
                let code = trap_code(d.aux).ok_or_else(|| self.err("bad trap code"))?;
                let c = self.value(ops[0], ty)?;
                if d.opcode == L::Trapz {
                    self.ins().trapz(c, code);
                } else {
                    self.ins().trapnz(c, code);
                }
            }
            Format::ExnHandlerAddr => {
                let Operand::Block(t) = ops[0] else {
                    return Err(self.err("expected a block"));
                };
                let cb = self
                    .cx
                    .blocks
                    .get(t.index())
                    .and_then(|b| b.expand())
                    .ok_or_else(|| self.err(format!("{t} is not reachable")))?;
                let Operand::Int(k) = ops[1] else {
                    return Err(self.err("expected a constant"));
                };
                let v = self.ins().get_exception_handler_address(cty, cb, k);
                self.define(f.results(inst)[0], v);
            }
            Format::Opaque => self.lower_opaque(inst)?,
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn lower_brif(
        &mut self,
        lb: lir::Block,
        p: lir::Cond,
        nvals: usize,
        ty: lir::Type,
        ops: &[Operand],
        at: &mut Vec<ir::BlockArg>,
        af: &mut Vec<ir::BlockArg>,
    ) -> Result<(), Error> {
        let bt = self.target(lb, ops[ops.len() - 2], at)?;
        let bf = self.target(lb, ops[ops.len() - 1], af)?;
        let x = self.value(ops[1], ty)?;
        if nvals == 1 && p == lir::Cond::Ne {
            self.ins().brif(x, bt, &*at, bf, &*af);
        } else if nvals == 1 && p == lir::Cond::Eq {
            self.ins().brif(x, bf, &*af, bt, &*at);
        } else {
            let y = if nvals == 2 {
                self.value(ops[2], ty)?
            } else {
                self.value(Operand::Int(0), ty)?
            };
            let c = match clif_cond(p) {
                ClifCond::Int(cc) => self.ins().icmp(cc, x, y),
                ClifCond::Float(cc) => self.ins().fcmp(cc, x, y),
            };
            self.ins().brif(c, bt, &*at, bf, &*af);
        }
        Ok(())
    }

    fn lower_call(
        &mut self,
        lb: lir::Block,
        inst: lir::Inst,
        ops: &[Operand],
    ) -> Result<(), Error> {
        let mut args = std::mem::take(&mut self.cx.vals);
        let r = self.lower_call_with(lb, inst, ops, &mut args);
        self.cx.vals = args;
        r
    }

    fn lower_call_with(
        &mut self,
        lb: lir::Block,
        inst: lir::Inst,
        ops: &[Operand],
        args: &mut Vec<ir::Value>,
    ) -> Result<(), Error> {
        let f = self.f;
        let d = f.insts[inst];
        let sig = ir::SigRef::from_u32(d.aux);
        let lsig = &f.sigs[lir::SigRef::from_u32(d.aux)];
        let nargs = ops[1..]
            .iter()
            .take_while(|o| !matches!(o, Operand::Block(_)))
            .count();
        args.clear();
        for (op, p) in ops[1..1 + nargs].iter().zip(&lsig.params) {
            args.push(self.value(*op, p.ty)?);
        }
        let callee = ops[0];
        let ci = match (d.opcode, callee) {
            (L::Call, Operand::Sym(s, _)) => {
                let fr = self.func_ref(s, d.aux);
                self.ins().call(fr, args)
            }
            (L::Call, op) => {
                let c = self.reg_value(op)?;
                self.ins().call_indirect(sig, c, args)
            }
            (L::TailCall, Operand::Sym(s, _)) => {
                let fr = self.func_ref(s, d.aux);
                self.ins().return_call(fr, args)
            }
            (L::TailCall, op) => {
                let c = self.reg_value(op)?;
                self.ins().return_call_indirect(sig, c, args)
            }
            _ => {
                // try_call: the results exist only as branch arguments.
                let results = f.results(inst);
                let nrets = lsig.returns.len();
                for (k, &r) in results.iter().enumerate() {
                    let a = if k < nrets {
                        ir::BlockArg::TryCallRet(k as u32)
                    } else {
                        ir::BlockArg::TryCallExn((k - nrets) as u32)
                    };
                    self.cx.try_results.insert(r, a);
                }
                let rest = &ops[1 + nargs..];
                let normal = self.block_call(lb, rest[0])?;
                let table = &f.exn_tables[lir::ExnTable::from_u32(f.aux2(inst))];
                let mut items = Vec::with_capacity(table.len());
                for (item, &op) in table.iter().zip(&rest[1..]) {
                    items.push(match item {
                        lir::ExnItem::Tag(t) => ir::ExceptionTableItem::Tag(
                            ir::ExceptionTag::from_u32(*t),
                            self.block_call(lb, op)?,
                        ),
                        lir::ExnItem::Default => {
                            ir::ExceptionTableItem::Default(self.block_call(lb, op)?)
                        }
                        lir::ExnItem::Context => {
                            ir::ExceptionTableItem::Context(self.reg_value(op)?)
                        }
                    });
                }
                let et = self
                    .func
                    .dfg
                    .exception_tables
                    .push(ir::ExceptionTableData::new(sig, normal, items));
                match callee {
                    Operand::Sym(s, _) => {
                        let fr = self.func_ref(s, d.aux);
                        self.ins().try_call(fr, args, et);
                    }
                    op => {
                        let c = self.reg_value(op)?;
                        self.ins().try_call_indirect(c, args, et);
                    }
                }
                return Ok(());
            }
        };
        if d.opcode == L::Call {
            self.define_results(inst, ci)?;
        }
        Ok(())
    }

    /// Rebuild an opaque instruction. Never panics and never allocates in proportion to an
    /// immediate, whatever the instruction holds: the mid-end's checks (`check_opaque`) come
    /// first, then Cranelift's own view of the opcode's types and operands.
    fn lower_opaque(&mut self, inst: lir::Inst) -> Result<(), Error> {
        let f = self.f;
        let d = f.insts[inst];
        let o = f
            .opaques
            .get(lir::OpaqueRef::from_u32(d.aux))
            .ok_or_else(|| self.err("opaque record does not exist"))?;
        midend::verifier::check_opaque(f, inst).map_err(|msg| self.err(msg))?;
        let opcode = C::from_str(&o.name)
            .map_err(|_| self.err(format!("unknown Cranelift opcode '{}'", o.name)))?;
        let constraints = opcode.constraints();
        let ctrl = clif_type(d.ty);
        if let Some(ts) = constraints.ctrl_typeset() {
            if !ts.contains(ctrl) {
                return Err(self.err(format!("'{}' does not take type {}", o.name, d.ty)));
            }
        }
        let ops = f.operands(inst);
        if ops.len() != constraints.num_fixed_value_arguments() {
            return Err(self.err(format!(
                "'{}' takes {} operand(s), found {}",
                o.name,
                constraints.num_fixed_value_arguments(),
                ops.len()
            )));
        }
        let mut vals: SmallVec<[ir::Value; 4]> = SmallVec::new();
        for (k, op) in ops.iter().enumerate() {
            let Operand::Reg(r) = op else {
                return Err(self.err(format!("'{}' operand {k} must be a register", o.name)));
            };
            if f.regs.get(r).is_none() {
                return Err(self.err(format!("{r} does not exist")));
            }
            let v = self.reg_value(op)?;
            let t = self.func.dfg.value_type(v);
            let ok = match constraints.value_argument_constraint(k, ctrl) {
                ir::instructions::ResolvedConstraint::Bound(want) => t == want,
                ir::instructions::ResolvedConstraint::Free(ts) => ts.contains(t),
            };
            if !ok {
                return Err(self.err(format!(
                    "'{}' operand {r} has a type Cranelift's instruction does not take",
                    o.name
                )));
            }
            vals.push(v);
        }
        let flags = match f.aux2(inst) {
            0 => None,
            n => {
                let r = lir::MemFlagsRef::from_u32(n - 1);
                if f.memflags.get(r).is_none() {
                    return Err(self.err("memory flags do not exist"));
                }
                Some(self.mf(r))
            }
        };
        let data = opaque_data(&mut self.func, o, opcode, &vals, flags).map_err(|m| self.err(m))?;
        let (ci, _) = self.ins().build(data, ctrl);
        let rs = f.results(inst);
        let vs = self.func.dfg.inst_results(ci);
        if rs.len() == vs.len() {
            for (&r, &v) in rs.iter().zip(vs) {
                if f.regs.get(r).map(|d| clif_type(d.ty)) != Some(self.func.dfg.value_type(v)) {
                    return Err(self.err(format!(
                        "'{}' result {r} does not have the type Cranelift's instruction gives",
                        o.name
                    )));
                }
            }
        }
        self.define_results(inst, ci)
    }
}

/// The instruction data of an opaque instruction: its immediates decoded (`OpaqueFormat`'s
/// encoding), constants and shuffle masks stored in `func`; a message when they are wrong.
fn opaque_data(
    func: &mut ir::Function,
    o: &lir::OpaqueData,
    opcode: C,
    vals: &[ir::Value],
    flags: Option<ir::MemFlags>,
) -> Result<D, String> {
    let imm = |k: usize| {
        o.imms
            .get(k)
            .copied()
            .ok_or_else(|| format!("'{}' is missing immediate {k}", o.name))
    };
    let narrow = |k: usize, bits: u32| -> Result<u64, String> {
        let v = imm(k)?;
        if bits < 64 && v >> bits != 0 {
            return Err(format!(
                "'{}' immediate {v:#x} does not fit {bits} bits",
                o.name
            ));
        }
        Ok(v)
    };
    let offset = |k: usize| -> Result<immediates::Offset32, String> {
        let v = imm(k)? as i64;
        i32::try_from(v)
            .map(Into::into)
            .map_err(|_| format!("'{}' offset {v} does not fit 32 bits", o.name))
    };
    let flags_or = || flags.ok_or_else(|| format!("'{}' needs memory flags", o.name));
    let arg = |k: usize| {
        vals.get(k)
            .copied()
            .ok_or_else(|| format!("'{}' is missing operand {k}", o.name))
    };
    // The byte length, then the bytes in words: the length is bounded by the words the
    // instruction holds, never trusted for an allocation.
    let unpack = || -> Result<Vec<u8>, String> {
        let len = imm(0)?;
        let words = &o.imms[1..];
        if len.div_ceil(8) != words.len() as u64 {
            return Err(format!(
                "'{}' packs {len} bytes in {} word(s)",
                o.name,
                words.len()
            ));
        }
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.truncate(len as usize);
        Ok(bytes)
    };
    use cranelift_codegen::ir::instructions::InstructionFormat as F;
    let data = match opcode.format() {
        F::NullAry => D::NullAry { opcode },
        F::Unary => D::Unary {
            opcode,
            arg: arg(0)?,
        },
        F::Binary => D::Binary {
            opcode,
            args: [arg(0)?, arg(1)?],
        },
        F::Ternary => D::Ternary {
            opcode,
            args: [arg(0)?, arg(1)?, arg(2)?],
        },
        F::UnaryImm => D::UnaryImm {
            opcode,
            imm: immediates::Imm64::new(imm(0)? as i64),
        },
        F::UnaryIeee16 => D::UnaryIeee16 {
            opcode,
            imm: immediates::Ieee16::with_bits(narrow(0, 16)? as u16),
        },
        F::UnaryIeee32 => D::UnaryIeee32 {
            opcode,
            imm: immediates::Ieee32::with_bits(narrow(0, 32)? as u32),
        },
        F::UnaryIeee64 => D::UnaryIeee64 {
            opcode,
            imm: immediates::Ieee64::with_bits(imm(0)?),
        },
        F::UnaryConst => {
            let bytes = unpack()?;
            let h = func.dfg.constants.insert(ir::ConstantData::from(bytes));
            D::UnaryConst {
                opcode,
                constant_handle: h,
            }
        }
        F::Shuffle => {
            let bytes = unpack()?;
            if bytes.len() != 16 {
                return Err(format!("'{}' mask is not 16 bytes", o.name));
            }
            let h = func.dfg.immediates.push(ir::ConstantData::from(bytes));
            D::Shuffle {
                opcode,
                args: [arg(0)?, arg(1)?],
                imm: h,
            }
        }
        F::BinaryImm8 => D::BinaryImm8 {
            opcode,
            arg: arg(0)?,
            imm: immediates::Uimm8::from(narrow(0, 8)? as u8),
        },
        F::TernaryImm8 => D::TernaryImm8 {
            opcode,
            args: [arg(0)?, arg(1)?],
            imm: immediates::Uimm8::from(narrow(0, 8)? as u8),
        },
        F::AtomicRmw => {
            let op = usize::try_from(imm(0)?)
                .ok()
                .and_then(|k| ir::AtomicRmwOp::all().get(k))
                .copied()
                .ok_or_else(|| String::from("bad atomic op"))?;
            D::AtomicRmw {
                opcode,
                args: [arg(0)?, arg(1)?],
                flags: flags_or()?,
                op,
            }
        }
        F::AtomicCas => D::AtomicCas {
            opcode,
            args: [arg(0)?, arg(1)?, arg(2)?],
            flags: flags_or()?,
        },
        F::LoadNoOffset => D::LoadNoOffset {
            opcode,
            arg: arg(0)?,
            flags: flags_or()?,
        },
        F::StoreNoOffset => D::StoreNoOffset {
            opcode,
            args: [arg(0)?, arg(1)?],
            flags: flags_or()?,
        },
        F::Load => D::Load {
            opcode,
            arg: arg(0)?,
            flags: flags_or()?,
            offset: offset(0)?,
        },
        F::Store => D::Store {
            opcode,
            args: [arg(0)?, arg(1)?],
            flags: flags_or()?,
            offset: offset(0)?,
        },
        F::IntAddTrap => D::IntAddTrap {
            opcode,
            args: [arg(0)?, arg(1)?],
            code: trap_code_imm(imm(0)?).ok_or_else(|| String::from("bad trap code"))?,
        },
        F::CondTrap => D::CondTrap {
            opcode,
            arg: arg(0)?,
            code: trap_code_imm(imm(0)?).ok_or_else(|| String::from("bad trap code"))?,
        },
        format @ (F::IntCompare | F::FloatCompare) => {
            let c = usize::try_from(imm(0)?)
                .ok()
                .and_then(|k| lir::Cond::all().get(k))
                .copied()
                .ok_or_else(|| String::from("bad condition"))?;
            match (clif_cond(c), format) {
                (ClifCond::Int(cond), F::IntCompare) => D::IntCompare {
                    opcode,
                    args: [arg(0)?, arg(1)?],
                    cond,
                },
                (ClifCond::Float(cond), F::FloatCompare) => D::FloatCompare {
                    opcode,
                    args: [arg(0)?, arg(1)?],
                    cond,
                },
                _ => return Err(format!("'{}' does not take predicate {c}", o.name)),
            }
        }
        other => return Err(format!("cannot rebuild '{}' (format {other:?})", o.name)),
    };
    Ok(data)
}
/// A trap code immediate (1 to 255).
fn trap_code_imm(raw: u64) -> Option<ir::TrapCode> {
    trap_code(u32::try_from(raw).ok()?)
}

fn trap_code(raw: u32) -> Option<ir::TrapCode> {
    let b = u8::try_from(raw).ok()?;
    std::num::NonZeroU8::new(b).map(ir::TrapCode::from_raw)
}

/// Lower one LIR function to Cranelift IR. `config` gives the pointer width and default
/// calling convention of the target.
pub fn lower_function(
    m: &lir::Module,
    f: &lir::Function,
    names: &mut dyn NameResolver,
    config: TargetFrontendConfig,
) -> Result<ir::Function, Error> {
    lower_function_with(m, f, names, config, &mut LowerContext::new())
}

/// `lower_function` reusing a lowering context (its allocations) across functions.
pub fn lower_function_with(
    m: &lir::Module,
    f: &lir::Function,
    names: &mut dyn NameResolver,
    config: TargetFrontendConfig,
    cx: &mut LowerContext,
) -> Result<ir::Function, Error> {
    // The function is built directly (LIR is in SSA form already): nothing depends on the
    // target's frontend configuration.
    let _ = config;
    let err = |msg: String| Error::Lower {
        function: f.name.to_string(),
        inst: None,
        msg,
    };
    if f.layout.is_empty() {
        return Err(err("function has no body".into()));
    }
    let mut func =
        ir::Function::with_name_signature(opmap::clif_func_name(&f.name), clif_signature(&f.sig));
    for (_, s) in &f.stack_objs {
        func.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            s.size,
            s.align_shift,
        ));
    }
    for (_, s) in &f.sigs {
        func.import_signature(clif_signature(s));
    }
    for (_, r) in &f.regions {
        func.dfg.alias_regions.push(ir::AliasRegionData {
            user_id: r.id,
            description: r.name.to_string().into(),
        });
    }
    for (_, d) in &f.globals {
        let data = match *d {
            lir::GlobalData::VmCtx => ir::GlobalValueData::VMContext,
            lir::GlobalData::Load {
                base,
                offset,
                ty,
                flags,
            } => {
                let h = func
                    .dfg
                    .mem_flags
                    .insert_unchecked(clif_memflags(f.memflags[flags]));
                ir::GlobalValueData::Load {
                    base: ir::GlobalValue::from_u32(base.as_u32()),
                    offset: offset.into(),
                    global_type: clif_type(ty),
                    flags: h,
                }
            }
            lir::GlobalData::IAddImm { base, offset, ty } => ir::GlobalValueData::IAddImm {
                base: ir::GlobalValue::from_u32(base.as_u32()),
                offset: immediates::Imm64::new(offset),
                global_type: clif_type(ty),
            },
            lir::GlobalData::Symbol {
                sym,
                offset,
                colocated,
                tls,
            } => {
                let name = names.data(m, &mut func, sym);
                ir::GlobalValueData::Symbol {
                    name,
                    offset: immediates::Imm64::new(offset),
                    colocated,
                    tls,
                }
            }
        };
        func.create_global_value(data);
    }
    func.stack_limit = f.stack_limit.map(|g| ir::GlobalValue::from_u32(g.as_u32()));

    cx.compute_rpo(f);
    cx.values.clear();
    cx.values.resize(f.regs.len(), None.into());
    cx.blocks.clear();
    cx.blocks.resize(f.blocks.len(), None.into());
    cx.memflags.clear();
    cx.memflags.resize(f.memflags.len(), None);
    cx.func_refs.clear();
    cx.phi_places.clear();
    cx.phi_places_made.clear();
    cx.sym_gvs.clear();
    cx.try_results.clear();
    let rpo = std::mem::take(&mut cx.rpo);
    // Result and argument lists: about one four-slot list per instruction, allocated once
    // rather than grown by doubling.
    func.dfg.value_lists = ir::ValueListPool::with_capacity(5 * f.inst_count());
    // Blocks in reverse post-order, so every definition precedes its uses; a phi becomes a
    // parameter of its block.
    func.dfg.blocks.reserve(rpo.len());
    for &lb in &rpo {
        let cb = func.dfg.make_block();
        func.layout.append_block(cb);
        cx.blocks[lb.index()] = cb.into();
        for &i in f.block_insts(lb) {
            if f.insts[i].opcode != L::Phi {
                break;
            }
            let r = f.results(i)[0];
            let v = func.dfg.append_block_param(cb, clif_type(f.reg_type(r)));
            cx.values[r.index()] = v.into();
        }
    }
    let entry = cx.blocks[f.layout[0].index()]
        .expand()
        .ok_or_else(|| err("the entry block is not first".into()))?;
    for k in 0..func.signature.params.len() {
        let ty = func.signature.params[k].value_type;
        func.dfg.append_block_param(entry, ty);
    }
    let mut l = Lowerer {
        m,
        f,
        names,
        func,
        cb: entry,
        cx,
        cur: None,
    };
    let mut r = Ok(());
    'blocks: for &lb in &rpo {
        l.cb = l.cx.blocks[lb.index()].unwrap();
        for &i in f.block_insts(lb) {
            if let Err(e) = l.lower_inst(lb, i) {
                r = Err(e);
                break 'blocks;
            }
        }
    }
    let Lowerer { func, cx, .. } = l;
    cx.rpo = rpo;
    r.map(|()| func)
}
