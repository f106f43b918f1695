//! Redirecting the calls of a function compiled from its input: calls to a merged function go
//! to its survivor, and calls to a function `merge-similar` folded call its shared body with
//! the extra arguments, as the pass rewrote them in LIR.

use super::names::ModuleNames;
use super::Core;
use crate::lower::NameResolver;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::{self, InstBuilder, InstructionData};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;
use cranelift_module::FuncId;
use midend::lir;
use midend::state::ExtraArg;

impl Core {
    /// Point the direct calls of an unchanged function at the survivors of merged callees
    /// (a merged function may have no code at all). Addresses (`func_addr`) stay: a function
    /// whose address is taken keeps code of its own. Calls (`call`, `return_call`) of a
    /// function merged by `merge-similar` call its shared body with its extra arguments, as
    /// the pass rewrote them in LIR (`PassState::call_rewrites`; a member behaves as its
    /// shared body called with its extras, so the rewrite is exact wherever it is made).
    ///
    /// Returns whether some call was rewritten for `merge-similar`.
    pub(super) fn redirect_calls(&self, func: &mut ir::Function, names: &mut ModuleNames) -> bool {
        if !self.any_merged && self.pass_state.call_rewrites.is_empty() {
            return false;
        }
        let mut moves: Vec<(ir::FuncRef, FuncId)> = Vec::new();
        let mut rewrites: Vec<(ir::FuncRef, lir::Symbol)> = Vec::new();
        for (fr, ext) in func.dfg.ext_funcs.iter() {
            if let ir::ExternalName::User(r) = ext.name {
                let u = func.params.user_named_funcs()[r].clone();
                if u.namespace == 0 {
                    let g = FuncId::from_u32(u.index);
                    let t = self.call_target(g);
                    if let Some(f) = t {
                        moves.push((fr, f));
                    }
                    // The callee's LIR symbol, if merge-similar rewrote its calls.
                    let rewritten = self
                        .lifted
                        .get(t.unwrap_or(g))
                        .and_then(|l| l.expand())
                        .and_then(|l| self.lir.symbol_of(l))
                        .filter(|&sym| self.pass_state.call_rewrite(sym).is_some());
                    if let Some(sym) = rewritten {
                        rewrites.push((fr, sym));
                    }
                }
            }
        }
        if moves.is_empty() && rewrites.is_empty() {
            return false;
        }
        let mut rewritten = false;
        // A new function reference per redirected one, used by calls only.
        let mut new_ref: SecondaryMap<ir::FuncRef, PackedOption<ir::FuncRef>> = SecondaryMap::new();
        for (fr, f) in moves {
            let ext = func.dfg.ext_funcs[fr].clone();
            let nr = func.declare_imported_user_function(ir::UserExternalName {
                namespace: 0,
                index: f.as_u32(),
            });
            new_ref[fr] = func
                .import_function(ir::ExtFuncData {
                    name: ir::ExternalName::user(nr),
                    ..ext
                })
                .into();
        }
        // The shared body's reference, per rewritten callee reference, made when first used.
        let mut rewrite_for: SecondaryMap<
            ir::FuncRef,
            Option<(lir::Symbol, PackedOption<ir::FuncRef>)>,
        > = SecondaryMap::new();
        for (fr, sym) in rewrites {
            rewrite_for[fr] = Some((sym, None.into()));
        }
        let blocks: Vec<ir::Block> = func.layout.blocks().collect();
        let mut extra_vals: Vec<ir::Value> = Vec::new();
        for b in blocks {
            let mut cur = func.layout.first_inst(b);
            while let Some(i) = cur {
                cur = func.layout.next_inst(i);
                match func.dfg.insts[i] {
                    InstructionData::Call {
                        opcode: ir::Opcode::Call | ir::Opcode::ReturnCall,
                        func_ref,
                        ..
                    } if rewrite_for[func_ref].is_some() => {
                        let (sym, shared) = rewrite_for[func_ref].expect("checked");
                        let rw = self.pass_state.call_rewrite(sym).expect("checked");
                        let shared = match shared.expand() {
                            Some(s) => s,
                            None => {
                                let s = self.import_symbol(func, names, rw.shared, &rw.sig);
                                rewrite_for[func_ref] = Some((sym, s.into()));
                                s
                            }
                        };
                        extra_vals.clear();
                        let mut pos = FuncCursor::new(func).at_inst(i);
                        for e in &rw.extras {
                            let v = match e {
                                ExtraArg::Const(ty, lir::Operand::Int(x)) => {
                                    pos.ins().iconst(crate::opmap::clif_type(*ty), *x)
                                }
                                ExtraArg::Const(_, lir::Operand::F32(x)) => {
                                    pos.ins().f32const(ir::immediates::Ieee32::with_bits(*x))
                                }
                                ExtraArg::Const(_, lir::Operand::F64(x)) => {
                                    pos.ins().f64const(ir::immediates::Ieee64::with_bits(*x))
                                }
                                ExtraArg::Const(_, other) => {
                                    unreachable!("merge-similar passes constants only: {other:?}")
                                }
                                ExtraArg::FuncAddr(s, sig) => {
                                    let fr = self.import_symbol(pos.func, names, *s, sig);
                                    pos.ins().func_addr(ir::types::I64, fr)
                                }
                            };
                            extra_vals.push(v);
                        }
                        let dfg = &mut func.dfg;
                        if let InstructionData::Call { func_ref, args, .. } = &mut dfg.insts[i] {
                            *func_ref = shared;
                            args.extend(extra_vals.iter().copied(), &mut dfg.value_lists);
                            rewritten = true;
                        }
                    }
                    _ => {
                        if let InstructionData::Call { func_ref, .. }
                        | InstructionData::TryCall { func_ref, .. } = &mut func.dfg.insts[i]
                        {
                            if let Some(n) = new_ref[*func_ref].expand() {
                                *func_ref = n;
                            }
                        }
                    }
                }
            }
        }
        rewritten
    }

    /// A reference in `func` to the function of LIR symbol `sym`, with signature `sig`, named
    /// and placed (`colocated`) as lowering names it.
    pub(super) fn import_symbol(
        &self,
        func: &mut ir::Function,
        names: &mut ModuleNames,
        sym: lir::Symbol,
        sig: &lir::Signature,
    ) -> ir::FuncRef {
        let signature = func.import_signature(crate::lower::clif_signature(sig));
        let name = names.function(&self.lir, func, sym, signature);
        func.import_function(ir::ExtFuncData {
            name,
            signature,
            colocated: self.lir.symbols[sym].colocated,
            patchable: false,
        })
    }
}
