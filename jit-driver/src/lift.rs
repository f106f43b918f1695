//! Lift a Cranelift `ir::Function` into LIR.
//!
//! Block parameters become phis (the entry block's become `copy argN`); branch arguments become
//! phi sources, splitting an edge when one block reaches a successor twice with different
//! arguments. Address arithmetic feeding loads and stores (`iadd`, an index scaled by `ishl` or
//! `imul` by 1, 2, 4 or 8, constant offsets, `stack_addr`, `symbol_value`) folds into memory
//! operands. Instructions LIR does not model ride as `opaque` instructions carrying their
//! Cranelift opcode and immediates, so they lower back exactly.

use crate::error::Error;
use crate::opmap::{self, float_cond, int_cond, lir_memflags, lir_type, write_symbol_name};
use cranelift_codegen::ir::{self, InstructionData as D, Opcode as C};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, SecondaryMap};
use midend::lir::{self, effects, MemRef, Opcode as L, Operand, SymbolKind};
use smallvec::SmallVec;

/// A recorded branch edge: the predecessor, its terminator and the operand naming the target,
/// and the arguments (`args[start..start + len]` of `LiftContext::edge_args`).
#[derive(Clone, Copy)]
struct Edge {
    pred: lir::Block,
    term: lir::Inst,
    idx: u32,
    target: ir::Block,
    start: u32,
    len: u32,
}

/// A phi source: the predecessor (or split edge block) and where its arguments start in
/// `LiftContext::edge_args`.
#[derive(Clone, Copy)]
struct Source {
    target: ir::Block,
    pred: lir::Block,
    start: u32,
}

/// The first edge from the predecessor last seen to a block (`fill_phis`).
#[derive(Clone, Copy, Default)]
struct FirstEdge {
    pred: PackedOption<lir::Block>,
    edge: u32,
}

/// What the lifter knows of a value: its register, and for a result of an instruction lifted
/// already, that instruction (what `dfg.value_def` says, without its look-ups, for folding
/// addresses). One table, cleared once per function.
#[derive(Clone, Copy, Default)]
struct ValSlot {
    reg: PackedOption<lir::Reg>,
    def: PackedOption<ir::Inst>,
}

/// See `LiftContext::types`.
struct TypeCache([Option<lir::Type>; 256]);

impl Default for TypeCache {
    fn default() -> Self {
        TypeCache([None; 256])
    }
}

impl std::ops::Deref for TypeCache {
    type Target = [Option<lir::Type>; 256];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for TypeCache {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The lifter's tables, reused from one function to the next (as cranelift-frontend's
/// `FunctionBuilderContext`): lifting a module allocates them once, not per function.
#[derive(Default)]
pub struct LiftContext {
    /// Per value: its register, once made, and its defining instruction once lifted.
    vals: SecondaryMap<ir::Value, ValSlot>,
    blocks: SecondaryMap<ir::Block, PackedOption<lir::Block>>,
    /// Phis created for block parameters: (CLIF block) → (first phi, number of phis, its
    /// place in `phi_blocks`); a block's phis are consecutive instructions. The number is set
    /// before any instruction is lifted, the first phi when the block is.
    phis: SecondaryMap<ir::Block, (u32, u32, u32)>,
    /// The blocks with phis, in layout order.
    phi_blocks: Vec<ir::Block>,
    /// The symbol of each function reference, once looked up.
    func_syms: SecondaryMap<ir::FuncRef, PackedOption<lir::Symbol>>,
    /// The LIR memory flags of each Cranelift memory flags entry, once interned.
    memflags: SecondaryMap<ir::MemFlags, PackedOption<lir::MemFlagsRef>>,
    /// Every signature converted so far, by its Cranelift form (compared whole on a look-up):
    /// a module's functions name few distinct signatures, so most are a look-up and a
    /// clone, which shares the converted lists, where converting allocated a list for each
    /// (and one for each callee signature of each function). Kept from one function to the
    /// next.
    sigs: rustc_hash::FxHashMap<ir::Signature, lir::Signature>,
    /// Branch edges, to fill phis, and their arguments (one array for all).
    edges: Vec<Edge>,
    edge_args: Vec<lir::Reg>,
    /// Per target block, the first edge from the predecessor last seen (`fill_phis`).
    first_edge: SecondaryMap<ir::Block, FirstEdge>,
    /// Phi sources in edge order, then grouped by target block.
    sources: Vec<Source>,
    sorted: Vec<Source>,
    /// Per block, where its sources start in `sorted` (`fill_phis`).
    source_start: Vec<u32>,
    /// The LIR type of each Cranelift type converted so far, by `Type::index` (the fixed-size
    /// types all have an index below 256): a pure function, kept from one function to the next.
    types: TypeCache,
    /// Scratch: a symbol name.
    name: String,
    /// Scratch: the operands of a `br_table`, built before it is pushed.
    ops: Vec<Operand>,
    /// Where each function's operand pool is built before it is cut to size.
    operands: lir::OperandRoom,
    /// The description of each alias region by its user id, as last lifted: the functions of
    /// a module name the same regions, and share one string each (compared before reuse).
    region_names: rustc_hash::FxHashMap<u32, std::sync::Arc<str>>,
    /// Symbols whose address the lifted functions take (`func_addr`, `symbol_value`, symbol
    /// global values), in order, possibly repeated: what `mark_taken` needs, found
    /// while lifting instead of in a second walk.
    pub taken: Vec<lir::Symbol>,
}

impl LiftContext {
    /// Empty tables sized for `func` (sized once, so no access grows them one by one).
    fn clear_for(&mut self, func: &ir::Function) {
        self.vals.clear();
        self.vals.resize(func.dfg.num_values());
        self.blocks.clear();
        self.blocks.resize(func.dfg.num_blocks());
        self.phis.clear();
        self.phis.resize(func.dfg.num_blocks());
        self.phi_blocks.clear();
        self.func_syms.clear();
        self.func_syms.resize(func.dfg.ext_funcs.len());
        self.memflags.clear();
        self.edges.clear();
        self.edge_args.clear();
        self.first_edge.clear();
        self.first_edge.resize(func.dfg.num_blocks());
        self.sources.clear();
    }
}

/// The lifter's results: errors are boxed, so a result travels in registers (most carry a
/// register or an operand) rather than through memory.
type LResult<T> = Result<T, Box<Error>>;

struct Lifter<'a> {
    src: &'a ir::Function,
    syms: lir::SymbolsMut<'a>,
    f: &'a mut lir::Function,
    ctx: &'a mut LiftContext,
    cur_inst: Option<ir::Inst>,
    /// The entry block, once known.
    entry: Option<ir::Block>,
}

impl<'a> Lifter<'a> {
    #[cold]
    #[inline(never)]
    fn err(&self, msg: impl Into<String>) -> Box<Error> {
        Box::new(Error::Lift {
            function: opmap::func_name(&self.src.name),
            inst: self
                .cur_inst
                .map(|i| self.src.dfg.display_inst(i).to_string()),
            msg: msg.into(),
        })
    }

    fn ty(&self, t: ir::Type) -> LResult<lir::Type> {
        lir_type(t).ok_or_else(|| self.err(format!("unsupported type {t}")))
    }

    #[inline]
    fn reg(&mut self, v: ir::Value) -> LResult<lir::Reg> {
        if let Some(r) = self.ctx.vals[v].reg.expand() {
            return Ok(r);
        }
        self.new_reg(v)
    }

    /// The register of a value an instruction or block defines (never an alias).
    #[inline]
    fn def_reg(&mut self, v: ir::Value) -> LResult<lir::Reg> {
        if let Some(r) = self.ctx.vals[v].reg.expand() {
            return Ok(r);
        }
        let ty = self.value_ty(v)?;
        let r = self.f.new_reg(ty);
        self.ctx.vals[v].reg = r.into();
        Ok(r)
    }

    /// The register of result `v` of `inst`, the instruction being lifted; records `inst` as
    /// its definition.
    #[inline(always)]
    fn def_result(&mut self, v: ir::Value, inst: ir::Inst) -> LResult<lir::Reg> {
        let r = match self.ctx.vals[v].reg.expand() {
            Some(r) => r,
            None => {
                let ty = self.value_ty(v)?;
                self.f.new_reg(ty)
            }
        };
        self.ctx.vals[v] = ValSlot {
            reg: r.into(),
            def: inst.into(),
        };
        Ok(r)
    }

    /// The LIR type of a value.
    #[inline(always)]
    fn value_ty(&mut self, v: ir::Value) -> LResult<lir::Type> {
        let t = self.src.dfg.value_type(v);
        self.cached_ty(t)
    }

    /// `ty` through `LiftContext::types`.
    #[inline(always)]
    fn cached_ty(&mut self, t: ir::Type) -> LResult<lir::Type> {
        if let Some(&Some(l)) = self.ctx.types.get(t.index()) {
            return Ok(l);
        }
        self.convert_ty(t)
    }

    /// `value_ty` for a type not converted before.
    #[inline(never)]
    fn convert_ty(&mut self, t: ir::Type) -> LResult<lir::Type> {
        let l = self.ty(t)?;
        if let Some(slot) = self.ctx.types.get_mut(t.index()) {
            *slot = Some(l);
        }
        Ok(l)
    }

    /// The register of a value seen for the first time (through its alias, if it is one).
    #[cold]
    fn new_reg(&mut self, v: ir::Value) -> LResult<lir::Reg> {
        let rv = self.src.dfg.resolve_aliases(v);
        if let Some(r) = self.ctx.vals[rv].reg.expand() {
            self.ctx.vals[v].reg = r.into();
            return Ok(r);
        }
        let ty = self.value_ty(rv)?;
        let r = self.f.new_reg(ty);
        self.ctx.vals[rv].reg = r.into();
        self.ctx.vals[v].reg = r.into();
        Ok(r)
    }

    fn abi_param(&mut self, p: &ir::AbiParam) -> LResult<lir::AbiParam> {
        Ok(lir::AbiParam {
            ty: self.cached_ty(p.value_type)?,
            ext: match p.extension {
                ir::ArgumentExtension::None => lir::Ext::None,
                ir::ArgumentExtension::Uext => lir::Ext::Uext,
                ir::ArgumentExtension::Sext => lir::Ext::Sext,
            },
            purpose: match p.purpose {
                ir::ArgumentPurpose::Normal => lir::Purpose::Normal,
                ir::ArgumentPurpose::VMContext => lir::Purpose::VmCtx,
                ir::ArgumentPurpose::StructReturn => lir::Purpose::StructReturn,
                ir::ArgumentPurpose::StructArgument(n) => lir::Purpose::StructArgument(n),
            },
        })
    }

    /// The LIR signature of `s`: the one converted before for an equal signature (a clone
    /// shares its lists), else converted now and kept.
    fn sig(&mut self, s: &ir::Signature) -> LResult<lir::Signature> {
        if let Some(l) = self.ctx.sigs.get(s) {
            return Ok(l.clone());
        }
        let l = self.convert_sig(s)?;
        self.ctx.sigs.insert(s.clone(), l.clone());
        Ok(l)
    }

    fn convert_sig(&mut self, s: &ir::Signature) -> LResult<lir::Signature> {
        let cc = opmap::lir_call_conv(s.call_conv)
            .ok_or_else(|| self.err(format!("unsupported calling convention {}", s.call_conv)))?;
        let mut list = |ps: &[ir::AbiParam]| -> LResult<lir::AbiParams> {
            let mut buf = SmallVec::<[lir::AbiParam; 8]>::new();
            for p in ps {
                buf.push(self.abi_param(p)?);
            }
            Ok(lir::AbiParams::from(&buf[..]))
        };
        // (checked in this order: the parameters' types, the number of returns, their types)
        let params = list(&s.params)?;
        if s.returns.len() > lir::MAX_RESULTS {
            return Err(self.err(format!(
                "a signature with {} return values (LIR supports at most {})",
                s.returns.len(),
                lir::MAX_RESULTS
            )));
        }
        Ok(lir::Signature {
            params,
            returns: list(&s.returns)?,
            call_conv: cc,
        })
    }

    /// The LIR memory flags of `mf` (interned once per function).
    #[inline]
    fn memflags(&mut self, mf: ir::MemFlags) -> u32 {
        if let Some(r) = self.ctx.memflags[mf].expand() {
            return r.as_u32();
        }
        // Two Cranelift entries can map to one LIR entry: kept once.
        let r = self
            .f
            .intern_memflags(lir_memflags(self.src.dfg.mem_flags[mf]));
        self.ctx.memflags[mf] = r.into();
        r.as_u32()
    }

    fn symbol(
        &mut self,
        name: &ir::ExternalName,
        kind: SymbolKind,
        colocated: bool,
    ) -> lir::Symbol {
        write_symbol_name(&mut self.ctx.name, self.src, name);
        let s = self.syms.symbol(&self.ctx.name, kind);
        if colocated {
            self.syms.data_mut(s).colocated = true;
        }
        s
    }

    fn func_symbol(&mut self, fr: ir::FuncRef) -> LResult<(lir::Symbol, lir::SigRef)> {
        let src = self.src;
        let ext = &src.dfg.ext_funcs[fr];
        if ext.patchable {
            return Err(self.err("patchable calls are not supported"));
        }
        let sig = lir::SigRef::from_u32(ext.signature.as_u32());
        // One name lookup per function reference, not per call.
        if let Some(s) = self.ctx.func_syms[fr].expand() {
            return Ok((s, sig));
        }
        let s = self.symbol(&ext.name, SymbolKind::Function, ext.colocated);
        self.ctx.func_syms[fr] = s.into();
        Ok((s, sig))
    }

    /// Create an instruction of the block being lifted. A block's instructions are
    /// consecutive; `run` places them in the block when it is done.
    #[inline(always)]
    fn push<const N: usize>(
        &mut self,
        op: L,
        ty: lir::Type,
        results: &[lir::Reg],
        operands: [Operand; N],
        aux: u32,
    ) -> lir::Inst {
        // (`make_inst`, with each operand packed here: the operands are values the caller
        // just made, so packing inlined sees their kinds and reads them from registers; an
        // array handed to `extend_operands` was stored field by field and reloaded whole,
        // which stalls store forwarding)
        self.f.reserve_operands(N);
        for op in operands {
            self.f.push_operand(op);
        }
        self.f.make_inst_pooled_aux(op, ty, results, N, aux)
    }

    /// `push` with operands of any number.
    fn push_slice(
        &mut self,
        op: L,
        ty: lir::Type,
        results: &[lir::Reg],
        operands: &[Operand],
        aux: u32,
    ) -> lir::Inst {
        self.f.extend_operands(operands);
        let i = self.f.make_inst_pooled(op, ty, results, operands.len());
        self.f.insts[i].aux = aux;
        i
    }

    /// `push` with register operands for `args`, after `prefix` (written straight into the
    /// operand pool).
    #[inline]
    fn push_args(
        &mut self,
        op: L,
        ty: lir::Type,
        results: &[lir::Reg],
        prefix: Option<Operand>,
        args: &[ir::Value],
        aux: u32,
    ) -> LResult<lir::Inst> {
        let mut n = args.len();
        if let Some(p) = prefix {
            self.f.push_operand(p);
            n += 1;
        }
        for &v in args {
            let r = self.reg(v)?;
            self.f.push_operand(Operand::Reg(r));
        }
        Ok(self.f.make_inst_pooled_aux(op, ty, results, n, aux))
    }

    /// `v` through its aliases, and the instruction defining it (`dfg.value_def`): from
    /// `LiftContext::defs` when the instruction is already lifted (then `v` is no alias).
    #[inline]
    fn resolve_def(&self, v: ir::Value) -> (ir::Value, Option<ir::Inst>) {
        if let Some(i) = self.ctx.vals[v].def.expand() {
            return (v, Some(i));
        }
        let dfg = &self.src.dfg;
        let v = dfg.resolve_aliases(v);
        (v, dfg.value_def(v).inst())
    }

    /// Is `v` (no alias) of type `i64`? From its register when it has one (only Cranelift's
    /// `i64` becomes LIR's `i64`).
    #[inline]
    fn is_i64(&self, v: ir::Value) -> bool {
        match self.ctx.vals[v].reg.expand() {
            Some(r) => self.f.reg_type(r) == lir::Type::I64,
            None => self.src.dfg.value_type(v) == ir::types::I64,
        }
    }

    /// The constant a value is defined by, if it is an `iconst`.
    fn iconst_of(&self, v: ir::Value) -> Option<i64> {
        let i = self.resolve_def(v).1?;
        match self.src.dfg.insts[i] {
            D::UnaryImm {
                opcode: C::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    /// Fold the address `addr + offset` into a memory operand.
    fn memory_operand(&mut self, addr: ir::Value, offset: i32) -> LResult<Operand> {
        let (addr, def) = self.resolve_def(addr);
        // (`src` borrowed apart from `self`: names are read where they are, not cloned)
        let src = self.src;
        let dfg = &src.dfg;
        if let Some(di) = def {
            match dfg.insts[di] {
                D::StackAddr {
                    stack_slot,
                    offset: o,
                    ..
                } => {
                    if let Some(off) = i32::from(o).checked_add(offset) {
                        return Ok(Operand::Stack(
                            lir::StackObj::from_u32(stack_slot.as_u32()),
                            off,
                        ));
                    }
                }
                D::UnaryGlobalValue {
                    opcode: C::SymbolValue,
                    global_value,
                } => {
                    if let ir::GlobalValueData::Symbol {
                        ref name,
                        offset: o,
                        colocated,
                        tls: false,
                    } = src.global_values[global_value]
                    {
                        if let Some(off) = o.bits().checked_add(offset as i64) {
                            let s = self.symbol(name, SymbolKind::Data, colocated);
                            return Ok(Operand::Sym(s, off));
                        }
                    }
                }
                D::Binary {
                    opcode: C::Iadd,
                    args,
                } if self.is_i64(addr) => {
                    let (a, b) = (args[0], args[1]);
                    // base + constant
                    if let Some(k) = self.iconst_of(b) {
                        if let Some(disp) =
                            i32::try_from(k).ok().and_then(|k| k.checked_add(offset))
                        {
                            let base = self.reg(a)?;
                            return Ok(Operand::from(MemRef::base(base, disp)));
                        }
                    }
                    // base + index*scale
                    let (index, scale) = self.scaled_index(b);
                    let base = self.reg(a)?;
                    let index = self.reg(index)?;
                    return Ok(Operand::from(MemRef {
                        base: base.into(),
                        index: index.into(),
                        scale,
                        disp: offset,
                    }));
                }
                _ => {}
            }
        }
        let base = self.reg(addr)?;
        Ok(Operand::from(MemRef::base(base, offset)))
    }

    /// `v` as (index, scale) when it is `ishl x, k` or `imul x, 2^k` with scale 1, 2, 4 or 8.
    fn scaled_index(&self, v: ir::Value) -> (ir::Value, u8) {
        let (v, def) = self.resolve_def(v);
        if let Some(i) = def {
            if let D::Binary { opcode, args } = self.src.dfg.insts[i] {
                let k = self.iconst_of(args[1]);
                match (opcode, k) {
                    (C::Ishl, Some(k @ 0..=3)) => return (args[0], 1 << k),
                    (C::Imul, Some(k @ (1 | 2 | 4 | 8))) => return (args[0], k as u8),
                    _ => {}
                }
            }
        }
        (v, 1)
    }

    /// Record the arguments of a branch edge (`bc`, to `target`, its block).
    // (the target, which every caller has at hand, passed apart: one argument more than clippy's
    // default, for fewer instructions than a grouped argument in this hot path)
    #[allow(clippy::too_many_arguments)]
    fn edge(
        &mut self,
        pred: lir::Block,
        term: lir::Inst,
        idx: usize,
        bc: ir::BlockCall,
        target: ir::Block,
        try_results: &[lir::Reg],
        nrets: usize,
    ) -> LResult<()> {
        let pool = &self.src.dfg.value_lists;
        let start = self.ctx.edge_args.len();
        for a in bc.args(pool) {
            let r = match a {
                ir::BlockArg::Value(v) => self.reg(v)?,
                ir::BlockArg::TryCallRet(i) => *try_results
                    .get(i as usize)
                    .ok_or_else(|| self.err("try_call return index out of range"))?,
                ir::BlockArg::TryCallExn(i) => *try_results
                    .get(nrets + i as usize)
                    .ok_or_else(|| self.err("try_call payload index out of range"))?,
            };
            self.ctx.edge_args.push(r);
        }
        let len = self.ctx.edge_args.len() - start;
        if len == 0 && Some(target) != self.entry && self.ctx.phis[target].1 == 0 {
            // Nothing for `fill_phis` to check or fill.
            return Ok(());
        }
        self.ctx.edges.push(Edge {
            pred,
            term,
            idx: idx as u32,
            target,
            start: start as u32,
            len: len as u32,
        });
        Ok(())
    }

    fn block_op(&self, b: ir::Block) -> LResult<Operand> {
        self.ctx.blocks[b]
            .expand()
            .map(Operand::Block)
            .ok_or_else(|| self.err(format!("branch to {b}, which is not in the layout")))
    }

    #[inline(always)]
    fn lift_inst(&mut self, b: lir::Block, inst: ir::Inst) -> LResult<()> {
        self.cur_inst = Some(inst);
        let dfg = &self.src.dfg;
        let data = dfg.insts[inst];
        let opcode = data.opcode();
        let src = self.src;
        // (`inst_results`, with the slice taken here, inline)
        let result_vals = src.dfg.inst_results_list(inst);
        let result_vals = result_vals.as_slice(&src.dfg.value_lists);
        let mut buf = [lir::Reg::from_u32(0); 4];
        let many: Vec<lir::Reg>;
        let results: &[lir::Reg] = if result_vals.len() <= buf.len() {
            for (k, &v) in result_vals.iter().enumerate() {
                buf[k] = self.def_result(v, inst)?;
            }
            &buf[..result_vals.len()]
        } else {
            many = result_vals
                .iter()
                .map(|&v| self.def_reg(v))
                .collect::<Result<_, _>>()?;
            &many
        };
        // The controlling type: the first result's, unless the opcode takes it from an
        // operand (`dfg.ctrl_typevar`, without its second look-up of the result).
        let constraints = opcode.constraints();
        let mut ctrl = if !constraints.is_polymorphic() {
            lir::Type::VOID
        } else if constraints.requires_typevar_operand() || results.is_empty() {
            self.cached_ty(dfg.ctrl_typevar(inst))?
        } else {
            self.f.reg_type(results[0])
        };
        if ctrl.is_void() && !results.is_empty() && !opcode.is_call() {
            // Non-polymorphic opcodes (f64const, get_frame_pointer..) have no controlling
            // type: LIR uses the result type.
            ctrl = self.f.reg_type(results[0]);
        }
        // (the argument list, `data.arguments`, only where a list of any length is taken)
        let pool = &src.dfg.value_lists;

        if let Some(l) = opmap::lir_opcode(opcode) {
            match data {
                D::Load {
                    arg, flags, offset, ..
                } => {
                    let aux = self.memflags(flags);
                    let mem = self.memory_operand(arg, offset.into())?;
                    self.push(l, ctrl, results, [mem], aux);
                }
                D::Store {
                    args: [v, addr],
                    flags,
                    offset,
                    ..
                } => {
                    let aux = self.memflags(flags);
                    let mem = self.memory_operand(addr, offset.into())?;
                    let v = Operand::Reg(self.reg(v)?);
                    self.push(l, ctrl, &[], [mem, v], aux);
                }
                // Register operands in argument order (`push_args`, for a fixed count).
                D::Unary { arg, .. } => {
                    let x = self.reg(arg)?;
                    self.push(l, ctrl, results, [Operand::Reg(x)], 0);
                }
                D::Binary { args: [x, y], .. } => {
                    let x = self.reg(x)?;
                    let y = self.reg(y)?;
                    self.push(l, ctrl, results, [Operand::Reg(x), Operand::Reg(y)], 0);
                }
                D::Ternary {
                    args: [x, y, z], ..
                } => {
                    let x = self.reg(x)?;
                    let y = self.reg(y)?;
                    let z = self.reg(z)?;
                    let ops = [Operand::Reg(x), Operand::Reg(y), Operand::Reg(z)];
                    self.push(l, ctrl, results, ops, 0);
                }
                _ => return self.lift_opaque(inst, ctrl, results),
            }
            return Ok(());
        }

        match data {
            D::UnaryImm {
                opcode: C::Iconst,
                imm,
            } => {
                self.push(L::Copy, ctrl, results, [Operand::Int(imm.bits())], 0);
            }
            D::UnaryIeee32 {
                opcode: C::F32const,
                imm,
            } => {
                self.push(L::Copy, ctrl, results, [Operand::F32(imm.bits())], 0);
            }
            D::UnaryIeee64 {
                opcode: C::F64const,
                imm,
            } => {
                self.push(L::Copy, ctrl, results, [Operand::F64(imm.bits())], 0);
            }
            D::IntCompare { args, .. } | D::FloatCompare { args, .. } => {
                let (op, pred) = match data {
                    D::IntCompare { cond, .. } => (L::Icmp, int_cond(cond)),
                    D::FloatCompare { cond, .. } => (L::Fcmp, float_cond(cond)),
                    _ => unreachable!(),
                };
                let (x, y) = (self.reg(args[0])?, self.reg(args[1])?);
                let ops = [Operand::Pred(pred), Operand::Reg(x), Operand::Reg(y)];
                self.push(op, ctrl, results, ops, 0);
            }
            D::StackAddr {
                stack_slot, offset, ..
            } => {
                let op =
                    Operand::Stack(lir::StackObj::from_u32(stack_slot.as_u32()), offset.into());
                self.push(L::StackAddr, ctrl, results, [op], 0);
            }
            D::UnaryGlobalValue {
                opcode: C::SymbolValue,
                global_value,
            } => match src.global_values[global_value] {
                ir::GlobalValueData::Symbol {
                    ref name,
                    offset,
                    colocated,
                    tls: false,
                } => {
                    let s = self.symbol(name, SymbolKind::Data, colocated);
                    self.ctx.taken.push(s);
                    self.push(
                        L::SymbolValue,
                        ctrl,
                        results,
                        [Operand::Sym(s, offset.bits())],
                        0,
                    );
                }
                _ => {
                    self.push(L::GlobalValue, ctrl, results, [], global_value.as_u32());
                }
            },
            D::UnaryGlobalValue {
                opcode: C::TlsValue,
                global_value,
            } => {
                self.push(L::TlsValue, ctrl, results, [], global_value.as_u32());
            }
            D::FuncAddr { func_ref, .. } => {
                let (s, sig) = self.func_symbol(func_ref)?;
                self.ctx.taken.push(s);
                self.push(
                    L::FuncAddr,
                    ctrl,
                    results,
                    [Operand::Sym(s, 0)],
                    sig.as_u32(),
                );
            }
            D::Call {
                opcode, func_ref, ..
            } => {
                let (s, sig) = self.func_symbol(func_ref)?;
                let op = if opcode == C::ReturnCall {
                    L::TailCall
                } else {
                    L::Call
                };
                let sym = Some(Operand::Sym(s, 0));
                let args = data.arguments(pool);
                self.push_args(op, lir::Type::VOID, results, sym, args, sig.as_u32())?;
            }
            D::CallIndirect {
                opcode, sig_ref, ..
            } => {
                let op = if opcode == C::ReturnCallIndirect {
                    L::TailCall
                } else {
                    L::Call
                };
                let args = data.arguments(pool);
                self.push_args(op, lir::Type::VOID, results, None, args, sig_ref.as_u32())?;
            }
            D::TryCall { .. } | D::TryCallIndirect { .. } => self.lift_try_call(b, inst)?,
            D::Jump { destination, .. } => {
                let target = destination.block(pool);
                let op = self.block_op(target)?;
                let t = self.push(L::Jump, lir::Type::VOID, &[], [op], 0);
                self.edge(b, t, 0, destination, target, &[], 0)?;
            }
            D::Brif {
                arg,
                blocks: [bt, bf],
                ..
            } => {
                let pool = &self.src.dfg.value_lists;
                let (tb, fb) = (bt.block(pool), bf.block(pool));
                let c = self.reg(arg)?;
                let cty = self.f.reg_type(c);
                let ops = [
                    Operand::Pred(lir::Cond::Ne),
                    Operand::Reg(c),
                    self.block_op(tb)?,
                    self.block_op(fb)?,
                ];
                let t = self.push(L::Brif, cty, &[], ops, 0);
                self.edge(b, t, 2, bt, tb, &[], 0)?;
                self.edge(b, t, 3, bf, fb, &[], 0)?;
            }
            D::BranchTable { arg, table, .. } => {
                // (the table read in place; its operands built in the context's list)
                let jt = &src.dfg.jump_tables[table];
                let calls =
                    || std::iter::once(jt.default_block()).chain(jt.as_slice().iter().copied());
                let idx = self.reg(arg)?;
                let ity = self.f.reg_type(idx);
                // (taken out of the context while `self` is borrowed; an error leaves it
                // empty, to grow again)
                let mut ops = core::mem::take(&mut self.ctx.ops);
                ops.clear();
                ops.push(Operand::Reg(idx));
                for bc in calls() {
                    ops.push(self.block_op(bc.block(pool))?);
                }
                let t = self.push_slice(L::BrTable, ity, &[], &ops, 0);
                self.ctx.ops = ops;
                for (k, bc) in calls().enumerate() {
                    let target = bc.block(pool);
                    self.edge(b, t, k + 1, bc, target, &[], 0)?;
                }
            }
            D::MultiAry {
                opcode: C::Return, ..
            } => {
                let args = data.arguments(pool);
                self.push_args(L::Ret, lir::Type::VOID, &[], None, args, 0)?;
            }
            D::Trap { code, .. } => {
                self.push(
                    L::Trap,
                    lir::Type::VOID,
                    &[],
                    [],
                    code.as_raw().get() as u32,
                );
            }
            D::CondTrap { opcode, arg, code } => {
                let c = self.reg(arg)?;
                let cty = self.f.reg_type(c);
                let op = if opcode == C::Trapz {
                    L::Trapz
                } else {
                    L::Trapnz
                };
                self.push(op, cty, &[], [Operand::Reg(c)], code.as_raw().get() as u32);
            }
            D::ExceptionHandlerAddress { block, imm, .. } => {
                let bo = self.block_op(block)?;
                self.push(
                    L::ExnHandlerAddr,
                    ctrl,
                    results,
                    [bo, Operand::Int(imm.bits())],
                    0,
                );
            }
            _ => self.lift_opaque(inst, ctrl, results)?,
        }
        Ok(())
    }

    fn lift_try_call(&mut self, b: lir::Block, inst: ir::Inst) -> LResult<()> {
        // (the input read through `src`, not `self`: nothing of it is copied, and the
        // lists built here live on the stack unless a call is unusually wide)
        let src = self.src;
        let dfg = &src.dfg;
        let (callee, exception) = match dfg.insts[inst] {
            D::TryCall {
                func_ref,
                exception,
                ..
            } => (Some(func_ref), exception),
            D::TryCallIndirect { exception, .. } => (None, exception),
            _ => unreachable!(),
        };
        let et = &dfg.exception_tables[exception];
        let sig = et.signature();
        let nrets = dfg.signatures[sig].returns.len();
        // Results: the callee's returns, then as many payload registers as handlers use.
        let mut results: SmallVec<[lir::Reg; 4]> = SmallVec::new();
        for p in &dfg.signatures[sig].returns {
            let t = self.ty(p.value_type)?;
            results.push(self.f.new_reg(t));
        }
        let pool = &dfg.value_lists;
        let mut exn_types: SmallVec<[Option<ir::Type>; 2]> = SmallVec::new();
        for (i, target, k) in exn_payloads(et, pool) {
            let t = dfg.block_params(target).get(k).map(|&v| dfg.value_type(v));
            if exn_types.len() <= i {
                exn_types.resize(i + 1, None);
            }
            exn_types[i] = t;
        }
        for t in exn_types {
            let t = self.ty(t.unwrap_or(ir::types::I64))?;
            results.push(self.f.new_reg(t));
        }
        let mut ops: SmallVec<[Operand; 16]> = SmallVec::new();
        if let Some(fr) = callee {
            let (s, _) = self.func_symbol(fr)?;
            ops.push(Operand::Sym(s, 0));
        }
        for &v in dfg.inst_args(inst) {
            ops.push(Operand::Reg(self.reg(v)?));
        }
        let normal = *et.normal_return();
        let normal_idx = ops.len();
        ops.push(self.block_op(normal.block(pool))?);
        let mut items = Vec::with_capacity(et.items().count());
        let mut handler_calls: SmallVec<[(usize, ir::BlockCall); 4]> = SmallVec::new();
        for item in et.items() {
            match item {
                ir::ExceptionTableItem::Tag(tag, bc) => {
                    items.push(lir::ExnItem::Tag(tag.as_u32()));
                    handler_calls.push((ops.len(), bc));
                    ops.push(self.block_op(bc.block(pool))?);
                }
                ir::ExceptionTableItem::Default(bc) => {
                    items.push(lir::ExnItem::Default);
                    handler_calls.push((ops.len(), bc));
                    ops.push(self.block_op(bc.block(pool))?);
                }
                ir::ExceptionTableItem::Context(v) => {
                    items.push(lir::ExnItem::Context);
                    ops.push(Operand::Reg(self.reg(v)?));
                }
            }
        }
        let table = self.f.exn_tables.push(items);
        let t = self.push_slice(L::TryCall, lir::Type::VOID, &results, &ops, sig.as_u32());
        self.f.set_aux2(t, table.as_u32());
        let target = normal.block(pool);
        self.edge(b, t, normal_idx, normal, target, &results, nrets)?;
        for (idx, bc) in handler_calls {
            let target = bc.block(pool);
            self.edge(b, t, idx, bc, target, &results, nrets)?;
        }
        Ok(())
    }

    /// An instruction LIR does not model: keep its opcode and immediates.
    fn lift_opaque(
        &mut self,
        inst: ir::Inst,
        ctrl: lir::Type,
        results: &[lir::Reg],
    ) -> LResult<()> {
        let dfg = &self.src.dfg;
        let data = dfg.insts[inst];
        let opcode = data.opcode();
        let mut imms: SmallVec<[u64; 2]> = SmallVec::new();
        let mut flags = None;
        let pack = |imms: &mut SmallVec<[u64; 2]>, bytes: &[u8]| {
            imms.push(bytes.len() as u64);
            for chunk in bytes.chunks(8) {
                let mut w = [0u8; 8];
                w[..chunk.len()].copy_from_slice(chunk);
                imms.push(u64::from_le_bytes(w));
            }
        };
        match data {
            D::Unary { .. } | D::Binary { .. } | D::Ternary { .. } | D::NullAry { .. } => {}
            D::UnaryImm { imm, .. } => imms.push(imm.bits() as u64),
            D::UnaryIeee16 { imm, .. } => imms.push(imm.bits() as u64),
            D::UnaryIeee32 { imm, .. } => imms.push(imm.bits() as u64),
            D::UnaryIeee64 { imm, .. } => imms.push(imm.bits()),
            D::UnaryConst {
                constant_handle, ..
            } => pack(&mut imms, dfg.constants.get(constant_handle).as_slice()),
            D::Shuffle { imm, .. } => {
                let bytes = dfg
                    .immediates
                    .get(imm)
                    .ok_or_else(|| self.err("shuffle mask missing"))?;
                pack(&mut imms, bytes.as_slice());
            }
            D::BinaryImm8 { imm, .. } | D::TernaryImm8 { imm, .. } => imms.push(imm as u64),
            D::AtomicRmw { op, flags: f, .. } => {
                imms.push(
                    ir::AtomicRmwOp::all()
                        .iter()
                        .position(|o| *o == op)
                        .unwrap() as u64,
                );
                flags = Some(f);
            }
            D::AtomicCas { flags: f, .. }
            | D::LoadNoOffset { flags: f, .. }
            | D::StoreNoOffset { flags: f, .. } => flags = Some(f),
            D::Load {
                flags: f, offset, ..
            }
            | D::Store {
                flags: f, offset, ..
            } => {
                imms.push(i32::from(offset) as i64 as u64);
                flags = Some(f);
            }
            D::IntAddTrap { code, .. } => imms.push(code.as_raw().get() as u64),
            D::CondTrap { code, .. } => imms.push(code.as_raw().get() as u64),
            D::IntCompare { cond, .. } => imms.push(int_cond(cond) as u64),
            D::FloatCompare { cond, .. } => imms.push(float_cond(cond) as u64),
            _ => return Err(self.err(format!("unsupported instruction {opcode}"))),
        }
        let mut fx = 0u8;
        if opcode.can_load() {
            fx |= effects::LOAD;
        }
        if opcode.can_store() {
            fx |= effects::STORE;
        }
        if opcode.can_trap() {
            fx |= effects::TRAP;
        }
        if opcode.other_side_effects()
            || opcode.is_call()
            || opcode.is_terminator()
            || opcode.is_branch()
            || matches!(data, D::NullAry { .. })
        {
            fx |= effects::SIDE;
        }
        if opcode.is_terminator() || opcode.is_branch() {
            return Err(self.err(format!("unsupported control-flow instruction {opcode}")));
        }
        // (written in place: an opcode's name fits a `Name` inline)
        use std::fmt::Write as _;
        let mut name = lir::Name::default();
        let _ = write!(name, "{opcode}");
        // Only opcodes the lowering can rebuild ride as opaque instructions: any other
        // (`stack_switch`) leaves the function unlifted, compiled as it came.
        if midend::verifier::opaque_opcode(&name).is_none() {
            return Err(self.err(format!("unsupported instruction {opcode}")));
        }
        let o = self.f.opaques.push(lir::OpaqueData {
            name,
            imms,
            effects: fx,
        });
        let args = self.src.dfg.inst_args(inst);
        let i = self.push_args(L::Opaque, ctrl, results, None, args, o.as_u32())?;
        if let Some(fl) = flags {
            let mf = self.memflags(fl) + 1;
            self.f.set_aux2(i, mf);
        }
        Ok(())
    }

    /// Lift the body into `self.f` (`lift_function_with` adds it to the module).
    fn run(&mut self) -> LResult<()> {
        let src = self.src;
        // Side tables keep Cranelift's indices.
        let mut frame = 0u64;
        for (_, ss) in src.sized_stack_slots.iter() {
            self.f.stack_objs.push(lir::StackObjData {
                size: ss.size,
                align_shift: ss.align_shift,
            });
            frame += u64::from(ss.size) + (1u64 << ss.align_shift.min(31)) - 1;
        }
        // (Cranelift cannot compile such a frame either; lifted, its function could merge
        // with one it can.)
        if frame > u64::from(u32::MAX) {
            return Err(self.err(format!(
                "stack slots of {frame} bytes with alignment padding are not supported (LIR \
                 holds 32 bits)"
            )));
        }
        if !src.dynamic_stack_slots.is_empty() {
            return Err(self.err("dynamic stack slots are not supported"));
        }
        for (_, s) in src.dfg.signatures.iter() {
            let s = self.sig(s)?;
            self.f.sigs.push(s);
        }
        for (_, r) in src.dfg.alias_regions.iter() {
            let shared = (self.ctx.region_names.entry(r.user_id))
                .or_insert_with(|| r.description.as_ref().into());
            if **shared != *r.description {
                *shared = r.description.as_ref().into();
            }
            self.f.regions.push(lir::RegionData {
                id: r.user_id,
                name: shared.clone(),
            });
        }
        for (_, gv) in src.global_values.iter() {
            let g = match *gv {
                ir::GlobalValueData::VMContext => lir::GlobalData::VmCtx,
                ir::GlobalValueData::Load {
                    base,
                    offset,
                    global_type,
                    flags,
                } => lir::GlobalData::Load {
                    base: lir::GlobalRef::from_u32(base.as_u32()),
                    offset: offset.into(),
                    ty: self.ty(global_type)?,
                    flags: lir::MemFlagsRef::from_u32(self.memflags(flags)),
                },
                ir::GlobalValueData::IAddImm {
                    base,
                    offset,
                    global_type,
                } => lir::GlobalData::IAddImm {
                    base: lir::GlobalRef::from_u32(base.as_u32()),
                    offset: offset.bits(),
                    ty: self.ty(global_type)?,
                },
                ir::GlobalValueData::Symbol {
                    ref name,
                    offset,
                    colocated,
                    tls,
                } => {
                    let sym = self.symbol(name, SymbolKind::Data, colocated);
                    self.ctx.taken.push(sym);
                    lir::GlobalData::Symbol {
                        sym,
                        offset: offset.bits(),
                        colocated,
                        tls,
                    }
                }
                ir::GlobalValueData::DynScaleTargetConst { .. } => {
                    return Err(self.err("dynamic vector scale globals are not supported"))
                }
            };
            self.f.globals.push(g);
        }
        if let Some(g) = src.stack_limit {
            // Cranelift's verifier lets this through; it would be read out of bounds later.
            if g.as_u32() as usize >= self.f.globals.len() {
                return Err(self.err(format!(
                    "stack_limit names {g}, which the function does not define"
                )));
            }
        }
        self.f.stack_limit = src
            .stack_limit
            .map(|g| lir::GlobalRef::from_u32(g.as_u32()));

        let Some(entry) = src.layout.entry_block() else {
            return Err(self.err("function has no body"));
        };
        self.entry = Some(entry);
        // Block parameters become phis or argument copies: count them, for exact room.
        let mut nparams = 0;
        for b in src.layout.blocks() {
            let lb = self.f.new_block();
            self.ctx.blocks[b] = lb.into();
            let np = src.dfg.block_params(b).len();
            nparams += np;
            if b != entry && np != 0 {
                let ord = self.ctx.phi_blocks.len() as u32;
                self.ctx.phis[b] = (0, np as u32, ord);
                self.ctx.phi_blocks.push(b);
            }
        }
        let n = src.dfg.num_insts();
        let nb = src.dfg.num_blocks();
        // Instructions: the CLIF ones, and a phi or copy per parameter. Exactly: an edge split
        // (rare) grows the tables, and the CLI's `shrink_to_fit` has nothing to give back (no
        // `realloc` per function; `Vec::reserve` would also round a small table up to four).
        self.f.reserve_insts_exact(n + nparams);
        // Operands: about two per instruction, a branch's targets, a phi's sources (a
        // register and a block each); beyond this (1% of functions) the pool grows. (The
        // pool is built in `LiftContext::operands`, so this is mostly room it has already.)
        self.f.reserve_operands(2 * n + 2 * nb + 2 * nparams);
        // One block after the other, so each block's list grows at the end of the function's
        // one instruction array (in place): entry parameters become argument copies, others
        // phis, then the instructions.
        for b in src.layout.blocks() {
            let lb = self.ctx.blocks[b].unwrap();
            let first = self.f.insts.len();
            let params = src.dfg.block_params(b);
            if b != entry && !params.is_empty() {
                self.ctx.phis[b].0 = self.f.insts.len() as u32;
            }
            for (k, &v) in params.iter().enumerate() {
                let r = self.def_reg(v)?;
                let ty = self.f.reg_type(r);
                if b == entry {
                    self.push(L::Copy, ty, &[r], [Operand::Arg(k as u32)], 0);
                } else {
                    self.push(L::Phi, ty, &[r], [], 0);
                }
            }
            // (`layout.block_insts`, stepping with `next_inst`: the iterator's step is dearer)
            let last = src.layout.last_inst(b);
            let mut at = src.layout.first_inst(b);
            while let Some(inst) = at {
                self.lift_inst(lb, inst)?;
                at = if at == last {
                    None
                } else {
                    src.layout.next_inst(inst)
                };
            }
            // The block's instructions, with no room to spare: passes rarely add to a
            // block, and one that does moves its list to the end of the array (with room
            // to grow), as appending does.
            let n = self.f.insts.len() - first;
            if n > 0 {
                self.f.place_inst_range_exact(lb, lir::Inst::new(first), n);
            }
        }
        self.cur_inst = None;
        self.fill_phis(entry)?;
        self.f.cut_operands_from(&mut self.ctx.operands);
        Ok(())
    }

    /// Turn recorded edges into phi sources, splitting edges where one predecessor reaches a
    /// block twice with different arguments.
    fn fill_phis(&mut self, entry: ir::Block) -> LResult<()> {
        let ctx = &mut *self.ctx;
        // A block's edges are recorded together, the blocks in layout order: the edges of one
        // predecessor are consecutive, so per target only the first edge from the current
        // predecessor is needed to find a repeated edge.
        for e in 0..ctx.edges.len() {
            let Edge {
                pred,
                term,
                idx,
                target,
                start,
                len,
            } = ctx.edges[e];
            if target == entry {
                return Err(self.err("branch to the entry block is not supported"));
            }
            let nphis = ctx.phis[target].1;
            if len != nphis {
                return Err(self.err(format!(
                    "branch to {target} passes {len} arguments, the block has {nphis} parameters",
                )));
            }
            if len == 0 {
                continue;
            }
            let args = start as usize..(start + len) as usize;
            let first = ctx.first_edge[target];
            if first.pred.expand() == Some(pred) {
                let prev = ctx.edges[first.edge as usize].start as usize;
                if ctx.edge_args[prev..prev + len as usize] == ctx.edge_args[args] {
                    continue;
                }
                // Split: pred → E → target, with E carrying these arguments.
                let e = self.f.new_block();
                let tb = ctx.blocks[target].unwrap();
                let j = self
                    .f
                    .make_inst(L::Jump, lir::Type::VOID, &[], &[Operand::Block(tb)]);
                self.f.append_inst(e, j);
                self.f.set_operand(term, idx as usize, Operand::Block(e));
                ctx.sources.push(Source {
                    target,
                    pred: e,
                    start,
                });
            } else {
                ctx.first_edge[target] = FirstEdge {
                    pred: pred.into(),
                    edge: e as u32,
                };
                ctx.sources.push(Source {
                    target,
                    pred,
                    start,
                });
            }
        }
        if ctx.sources.is_empty() {
            return Ok(());
        }
        // Group the sources by target, keeping their order (a counting sort, by the target's
        // place among the blocks with phis: every source's target has phis).
        let nb = ctx.phi_blocks.len();
        ctx.source_start.clear();
        ctx.source_start.resize(nb + 1, 0);
        for s in &ctx.sources {
            ctx.source_start[ctx.phis[s.target].2 as usize + 1] += 1;
        }
        for k in 0..nb {
            ctx.source_start[k + 1] += ctx.source_start[k];
        }
        ctx.sorted.clear();
        ctx.sorted.resize(
            ctx.sources.len(),
            Source {
                target: entry,
                pred: lir::Block::from_u32(0),
                start: 0,
            },
        );
        for s in &ctx.sources {
            let at = &mut ctx.source_start[ctx.phis[s.target].2 as usize];
            ctx.sorted[*at as usize] = *s;
            *at += 1;
        }
        // `source_start[k]` is now where the k-th phi block's sources end (and k + 1's begin).
        let phi_operands: usize = ctx
            .sources
            .iter()
            .map(|s| 2 * ctx.phis[s.target].1 as usize)
            .sum();
        self.f.reserve_operands(phi_operands);
        for (ord, &b) in ctx.phi_blocks.iter().enumerate() {
            let (first_phi, nphis, _) = ctx.phis[b];
            let end = ctx.source_start[ord] as usize;
            let begin = if ord == 0 {
                0
            } else {
                ctx.source_start[ord - 1] as usize
            };
            let srcs = &ctx.sorted[begin..end];
            for k in 0..nphis {
                // (written straight into the pool, which has room for them all)
                for s in srcs {
                    self.f
                        .push_operand(Operand::Reg(ctx.edge_args[(s.start + k) as usize]));
                    self.f.push_operand(Operand::Block(s.pred));
                }
                self.f
                    .set_pushed_operands(lir::Inst::from_u32(first_phi + k), 2 * srcs.len());
            }
        }
        Ok(())
    }
}

/// Lift one function into `module` with the given linkage.
pub fn lift_function(
    module: &mut lir::Module,
    func: &ir::Function,
    linkage: lir::Linkage,
) -> Result<lir::FuncId, Error> {
    lift_function_with(module, func, linkage, &mut LiftContext::default())
}

/// `lift_function` reusing the tables of `ctx`; the symbols whose address the function takes
/// are appended to `ctx.taken`.
pub fn lift_function_with(
    module: &mut lir::Module,
    func: &ir::Function,
    linkage: lir::Linkage,
    ctx: &mut LiftContext,
) -> Result<lir::FuncId, Error> {
    let name = opmap::func_lir_name(&func.name);
    ctx.clear_for(func);
    // The function is built in its slot of the module's table, and taken off it again if
    // the lift fails: moving a lifted function there (a `Function`, 368 bytes just written,
    // copied through the stack) cost 6-10% of a warm lift.
    let id = module.functions.push(lir::Function::new(
        name,
        lir::Signature::new(lir::CallConv::SystemV),
        linkage,
    ));
    let (f, syms) = module.function_and_symbols(id);
    let mut l = Lifter {
        src: func,
        syms,
        f,
        ctx,
        cur_inst: None,
        entry: None,
    };
    if let Err(e) = lift_into(&mut l) {
        module.pop_last_function(id);
        return Err(*e);
    }
    module.define_last_function(id).map_err(|msg| Error::Lift {
        function: opmap::func_name(&func.name),
        inst: None,
        msg,
    })?;
    Ok(id)
}

/// The LIR function of `func` without its body: its name, signature and linkage, as a
/// function merged away keeps them once its body is gone (a driver that merges a function
/// without lifting it records the merge on this).
pub(crate) fn lift_header(
    module: &mut lir::Module,
    func: &ir::Function,
    linkage: lir::Linkage,
    ctx: &mut LiftContext,
) -> Result<lir::FuncId, Error> {
    let name = opmap::func_lir_name(&func.name);
    ctx.clear_for(func);
    let id = module.functions.push(lir::Function::new(
        name,
        lir::Signature::new(lir::CallConv::SystemV),
        linkage,
    ));
    let (f, syms) = module.function_and_symbols(id);
    let mut l = Lifter {
        src: func,
        syms,
        f,
        ctx,
        cur_inst: None,
        entry: None,
    };
    match l.sig(&func.signature) {
        Ok(sig) => l.f.sig = sig,
        Err(e) => {
            module.pop_last_function(id);
            return Err(*e);
        }
    }
    module.define_last_function(id).map_err(|msg| Error::Lift {
        function: opmap::func_name(&func.name),
        inst: None,
        msg,
    })?;
    Ok(id)
}

/// Lift `l.src` into `l.f`.
#[inline]
fn lift_into(l: &mut Lifter) -> LResult<()> {
    let func = l.src;
    l.f.sig = l.sig(&func.signature)?;
    let nb = func.dfg.num_blocks();
    // Blocks: exactly the CLIF ones (an edge split grows the table).
    l.f.blocks.reserve_exact(nb);
    l.f.layout.reserve_exact(nb);
    // Exact room where the count is known: what a lift reserves and leaves unused costs
    // fresh memory all the same.
    l.f.stack_objs.reserve_exact(func.sized_stack_slots.len());
    l.f.sigs.reserve_exact(func.dfg.signatures.len());
    l.f.regions.reserve_exact(func.dfg.alias_regions.len());
    l.f.globals.reserve_exact(func.global_values.len());
    // Memory flags: at most one per Cranelift entry (interned there already).
    l.f.memflags
        .reserve_exact(mem_flags_len(&func.dfg.mem_flags));
    // Registers: one per value, and the results of `try_call`s.
    l.f.regs
        .reserve_exact(func.dfg.num_values() + try_call_regs(func));
    l.f.build_operands_in(&mut l.ctx.operands);
    l.run()
}

/// The registers the `try_call`s of `func` make beyond its values: each call's results are
/// its callee's returns and the payloads its handlers take (`Lifter::lift_try_call`).
fn try_call_regs(func: &ir::Function) -> usize {
    let dfg = &func.dfg;
    let payloads = |et| {
        (exn_payloads(et, &dfg.value_lists))
            .map(|(i, ..)| i + 1)
            .max()
            .unwrap_or(0)
    };
    (dfg.exception_tables.values())
        .map(|et| dfg.signatures[et.signature()].returns.len() + payloads(et))
        .sum()
}

/// The payload arguments (`exn0`, `exn1`..) a `try_call`'s exception table passes to its
/// blocks: each payload's index, the block, and its place among that block's arguments.
fn exn_payloads<'a>(
    et: &'a ir::ExceptionTableData,
    pool: &'a ir::ValueListPool,
) -> impl Iterator<Item = (usize, ir::Block, usize)> + 'a {
    et.all_branches().iter().flat_map(move |bc| {
        let target = bc.block(pool);
        bc.args(pool).enumerate().filter_map(move |(k, a)| match a {
            ir::BlockArg::TryCallExn(i) => Some((i as usize, target, k)),
            _ => None,
        })
    })
}

/// The number of entries of a memory flags table, up to 256 (`MemFlagsSet` tells only
/// whether an entry is valid; a function has a few).
fn mem_flags_len(set: &ir::MemFlagsSet) -> usize {
    (0..256)
        .take_while(|&n| set.is_valid(ir::MemFlags::new(n)))
        .count()
}

/// Lift Cranelift functions into one LIR module (exported, address-significant where taken),
/// timing it as `lift` in `stats`.
pub fn lift_functions<'a>(
    funcs: impl IntoIterator<Item = &'a ir::Function>,
    stats: &mut midend::Stats,
) -> Result<lir::Module, Error> {
    let t = std::time::Instant::now();
    let mut m = lir::Module::new();
    let mut ctx = LiftContext::default();
    let funcs: Vec<&ir::Function> = funcs.into_iter().collect();
    m.reserve_functions(funcs.len());
    for f in &funcs {
        lift_function_with(&mut m, f, lir::Linkage::Export, &mut ctx)?;
    }
    mark_taken(&mut m, &ctx.taken);
    stats.add_time("lift", t.elapsed());
    Ok(m)
}

/// Mark the functions defined by `taken` symbols as address-significant.
pub fn mark_taken(module: &mut lir::Module, taken: &[lir::Symbol]) {
    for &s in taken {
        if let Some(f) = module.symbols[s].def.expand() {
            module.functions[f].address_significant = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_flags_len_counts_every_entry_up_to_256() {
        let mut set = ir::MemFlagsSet::new();
        for n in 0..=300usize {
            assert_eq!(mem_flags_len(&set), n.min(256), "{n} entries");
            let region = ir::AliasRegion::new(n);
            let data = ir::MemFlagsData::new().with_alias_region(Some(region));
            set.insert_unchecked(data);
        }
    }
}
