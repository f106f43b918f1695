//! What the merging passes share: the byte cost model they weigh a merge against, fresh names
//! for the bodies they make, thunks, and the calls of a folded function, which go to its
//! shared body with the function's extra arguments.
//!
//! `merge` makes thunks; `merge-similar` and `merge-aligned` fold functions into one body
//! (`PassState::call_rewrites`) and rewrite the calls of what they folded.

use crate::lir::*;
use crate::state::*;
use smallvec::SmallVec;

/// Machine-code bytes, as the cost model counts them (calibrated on Cranelift's x86-64 output
/// at opt level none; BENCHMARKS.md).
#[derive(Clone, Copy, Debug)]
pub struct CostModel {
    /// Bytes per LIR instruction of a body.
    pub bytes_per_inst: f64,
    /// Prologue and epilogue of a function.
    pub frame: f64,
    /// A thunk besides its extra arguments (moves of the arguments it passes on, the jump or
    /// call).
    pub thunk: f64,
    /// Setting up one extra argument (a constant or a function address) at a call site.
    pub per_extra_arg: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            bytes_per_inst: 4.3,
            frame: 12.0,
            thunk: 16.0,
            per_extra_arg: 8.0,
        }
    }
}

/// The value a hole position holds in one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Value {
    /// A constant.
    Const(Operand),
    /// The address of a callee.
    Callee(Symbol),
    /// A call of the member to itself.
    SelfCall,
}

/// How to set up one extra argument: its type, the value, and for a function address the
/// signature of the calls it serves (an index into the signatures the caller keeps, or
/// `NO_SIG`).
pub(crate) type Extra = (Type, Value, u32);

pub(crate) const NO_SIG: u32 = u32::MAX;

/// A fresh name for a body a merging pass makes (`pass`: `similar`, `aligned`) from the
/// function named `base`: letters, digits and `_` only, so that it prints as a Cranelift IR
/// name (`%name`) the reader takes back.
pub(crate) fn fresh_name(m: &Module, pass: &str, base: &str) -> String {
    let base: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut k = m.functions.len();
    loop {
        let name = format!("__mergelift_{pass}_{base}_{k}");
        if m.lookup_symbol(&name).is_none() {
            return name;
        }
        k += 1;
    }
}

/// Replace G's body with a thunk calling `target` with signature `call_sig`: a tail call
/// where the calling convention is `tail` and the target allows tail calls
/// (`PassState::allow_tail_calls`), else call and return. The call passes G's arguments, then
/// the `n_extra` operands `extra` sets up in the thunk's block (one instruction each) and
/// appends to the call's operands. Returns G's old body, without its name and signature (the thunk
/// took them), for a caller that wants to keep it; unless `keep_old`, the thunk is built in
/// the old body's tables (cleared), which the old body returned no longer has.
pub(crate) fn make_thunk_with(
    m: &mut Module,
    ps: &mut PassState,
    g: FuncId,
    (target, call_sig): (Symbol, Signature),
    n_extra: usize,
    keep_old: bool,
    extra: impl FnOnce(&mut Function, Block, &mut Vec<Operand>),
) -> Function {
    let tail_calls = ps.allow_tail_calls;
    ps.record_edit(g, Edit::Modified);
    let old = &mut m.functions[g];
    let cc = old.sig.call_conv;
    let sig = core::mem::replace(&mut old.sig, Signature::new(cc));
    let mut t = Function::new(core::mem::take(&mut old.name), sig, old.linkage);
    if !keep_old {
        // The old body's allocations serve the thunk: none to free, none to make.
        t.regs = core::mem::take(&mut old.regs);
        t.regs.clear();
        t.insts = core::mem::take(&mut old.insts);
        t.insts.clear();
        t.blocks = core::mem::take(&mut old.blocks);
        t.blocks.clear();
        t.layout = core::mem::take(&mut old.layout);
        t.layout.clear();
        t.operand_pool = core::mem::take(&mut old.operand_pool);
        t.operand_pool.clear();
        t.result_pool = core::mem::take(&mut old.result_pool);
        t.result_pool.clear();
    }
    t.address_significant = old.address_significant;
    t.stack_limit = None;
    // Every table sized once: the copies of the arguments, the extra operands, the call (and
    // the return).
    let (np, nr) = (t.sig.params.len(), t.sig.returns.len());
    let tail = t.sig.call_conv == CallConv::Tail && tail_calls;
    let (nrets, ninsts) = if tail {
        (0, np + n_extra + 1)
    } else {
        (nr, np + n_extra + 2)
    };
    t.regs.reserve_exact(np + n_extra + nrets);
    t.insts.reserve_exact(ninsts);
    t.operand_pool.reserve_exact(2 * (np + n_extra) + 1 + nrets);
    if nrets != 1 {
        t.result_pool.reserve_exact(nrets);
    }
    let sig = t.sigs.push(call_sig);
    let b = t.new_block();
    t.reserve_block(b, ninsts);
    let mut ops = Vec::with_capacity(1 + np + n_extra);
    ops.push(Operand::Sym(target, 0));
    for k in 0..np {
        let ty = t.sig.params[k].ty;
        let r = t.new_reg(ty);
        let i = t.make_inst(Opcode::Copy, ty, &[r], &[Operand::Arg(k as u32)]);
        t.append_inst(b, i);
        ops.push(Operand::Reg(r));
    }
    extra(&mut t, b, &mut ops);
    if tail {
        let i = t.make_inst(Opcode::TailCall, Type::VOID, &[], &ops);
        t.insts[i].aux = sig.as_u32();
        t.append_inst(b, i);
    } else {
        let mut rets: SmallVec<[Reg; 4]> = SmallVec::new();
        for k in 0..nr {
            let ty = t.sig.returns[k].ty;
            rets.push(t.new_reg(ty));
        }
        let i = t.make_inst(Opcode::Call, Type::VOID, &rets, &ops);
        t.insts[i].aux = sig.as_u32();
        t.append_inst(b, i);
        let rv: SmallVec<[Operand; 4]> = rets.into_iter().map(Operand::Reg).collect();
        let i = t.make_inst(Opcode::Ret, Type::VOID, &[], &rv);
        t.append_inst(b, i);
    }
    if !keep_old {
        // Give back what the old body's two largest tables had beyond the thunk's needs (a
        // shrink in place: no copy), for the allocations of the edits that follow; with
        // `free_removed`, every table's.
        if ps.free_removed {
            t.shrink_to_fit();
        } else {
            t.insts.shrink_to_fit();
            t.operand_pool.shrink_to_fit();
        }
    }
    core::mem::replace(&mut m.functions[g], t)
}

/// Materialise the extra arguments of a call before instruction `before` of `f`, appending the
/// registers holding them to `ops`. The placing is left to the caller: each new instruction
/// is recorded as `(before, new)` in `pending`, for `Function::insert_before_each` to place
/// with the rest of its block's at once.
pub(crate) fn materialize_before(
    f: &mut Function,
    before: Inst,
    extras: &[Extra],
    sigs: &[Signature],
    ops: &mut Vec<Operand>,
    pending: &mut Vec<(Inst, Inst)>,
) {
    make_extras(f, extras, sigs, ops, |_, i| pending.push((before, i)));
}

/// Make the instructions setting up `extras` (a register each, appended to `ops`), handing
/// each to `place` as it is made.
pub(crate) fn make_extras(
    f: &mut Function,
    extras: &[Extra],
    sigs: &[Signature],
    ops: &mut Vec<Operand>,
    mut place: impl FnMut(&mut Function, Inst),
) {
    for &(ty, v, sig) in extras {
        let r = f.new_reg(ty);
        let i = match v {
            Value::Const(c) => f.make_inst(Opcode::Copy, ty, &[r], &[c]),
            Value::Callee(s) => {
                // The address of the callee, declared with the signature of its calls.
                assert!(sig != NO_SIG, "a callee parameter has a signature");
                let sig = f.sigs.push(sigs[sig as usize].clone());
                let i = f.make_inst(Opcode::FuncAddr, Type::I64, &[r], &[Operand::Sym(s, 0)]);
                f.insts[i].aux = sig.as_u32();
                i
            }
            Value::SelfCall => unreachable!("self-calls are not parameters"),
        };
        place(f, i);
        ops.push(Operand::Reg(r));
    }
}

/// Make call `i` of `f` call `shared` with signature `sig`: its arguments, then the extra
/// arguments `extras` (registers set up before it), then any other operands. The caller's
/// edit is `Edit::CallsRewritten`: a backend can make this rewrite in the caller's own IR
/// (`PassState::call_rewrites`).
pub(crate) fn call_shared(
    f: &mut Function,
    i: Inst,
    shared: Symbol,
    sig: Signature,
    extras: &[Operand],
    ops: &mut Vec<Operand>,
) {
    let old = f.operands(i);
    let nargs = (1 + f.sigs[SigRef::from_u32(f.insts[i].aux)].params.len()).min(old.len());
    ops.clear();
    ops.push(Operand::Sym(shared, 0));
    ops.extend(old.iter().take(nargs).skip(1));
    ops.extend_from_slice(extras);
    ops.extend(old.skip(nargs));
    f.set_operands(i, ops);
    let sr = f.sigs.push(sig);
    f.insts[i].aux = sr.as_u32();
}

/// Direct calls (`call`, `tail_call`) in the open functions of folded functions (members
/// with no code of their own: `PassState::call_rewrites`) call their shared body with the
/// member's extra arguments, as `rewrite_callers` makes them. For members an earlier batch
/// folded, and for those `merge-aligned` folds. Returns the calls rewritten.
pub(crate) fn rewrite_calls_of_folded(m: &mut Module, ps: &mut PassState) -> usize {
    let mut rewritten = 0;
    if ps.call_rewrites.is_empty() {
        return rewritten;
    }
    let mut sites: Vec<(Block, Inst)> = Vec::new();
    let (mut regs, mut ops, mut extras, mut sigs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut pending, mut scratch): (Vec<(Inst, Inst)>, Vec<Inst>) = (Vec::new(), Vec::new());
    for id in ps.open_function_ids(m) {
        sites.clear();
        let f = &m.functions[id];
        for &b in &f.layout {
            for &i in f.block_insts(b) {
                if matches!(f.insts[i].opcode, Opcode::Call | Opcode::TailCall) {
                    if let Some(Operand::Sym(s, 0)) = f.operands(i).first() {
                        // Through aliases: a function merged by `merge` into a member (its
                        // calls go to the member, which has no code either).
                        if ps.call_rewrite(m.resolve_alias(s)).is_some() {
                            sites.push((b, i));
                        }
                    }
                }
            }
        }
        for (k, &(b, i)) in sites.iter().enumerate() {
            if let Some(Operand::Sym(member, 0)) = m.functions[id].operands(i).first() {
                let rw = ps
                    .call_rewrite(m.resolve_alias(member))
                    .expect("found above")
                    .clone();
                extras.clear();
                sigs.clear();
                for e in &rw.extras {
                    extras.push(match e {
                        ExtraArg::Const(ty, c) => (*ty, Value::Const(*c), NO_SIG),
                        ExtraArg::FuncAddr(s, sig) => {
                            sigs.push(sig.clone());
                            (Type::I64, Value::Callee(*s), sigs.len() as u32 - 1)
                        }
                    });
                }
                let f = &mut m.functions[id];
                regs.clear();
                materialize_before(f, i, &extras, &sigs, &mut regs, &mut pending);
                call_shared(f, i, rw.shared, rw.sig, &regs, &mut ops);
                ps.record_edit(id, Edit::CallsRewritten);
                rewritten += 1;
            }
            // The sites come block by block: a block's new instructions are placed at once.
            if sites.get(k + 1).map(|&(nb, _)| nb) != Some(b) {
                m.functions[id].insert_before_each(b, &mut pending, &mut scratch);
            }
        }
    }
    rewritten
}
