//! Installing a merged body: the body joins the module under a fresh name, and each member
//! is folded away or becomes a thunk that calls the body with its identifier.

use super::codegen::Merged;
use super::search::SymbolUses;
use super::AlignedOptions;
use crate::lir::*;
use crate::passes::fold::{fresh_name, make_thunk_with};
use crate::state::*;

/// Add the merged body of `members` to `m`. Each member is folded away (its calls rewritten
/// to call the body with its identifier) when it is local, nothing observes its address and
/// those calls, an extra argument each, cost no more than a thunk; otherwise it becomes a
/// thunk that calls the body with its identifier. Returns the members folded, or `None` if
/// the body is not installed.
pub(super) fn install(
    m: &mut Module,
    ps: &mut PassState,
    opts: &AlignedOptions,
    uses: &SymbolUses,
    members: &[FuncId],
    merged: Merged,
) -> Option<usize> {
    let name = fresh_name(m, "aligned", &m.functions[members[0]].name);
    let sym = m.symbol(&name, SymbolKind::Function);
    let mut body = merged.body;
    body.name = name.into();
    for &i in &merged.self_calls {
        body.set_operand(i, 0, Operand::Sym(sym, 0));
    }
    let sig = body.sig.clone();
    let id = m.add_function(body).expect("a fresh name");
    ps.record_edit(id, Edit::Modified);
    // A merged body is checked before any member gives its body up: one the verifier
    // rejects is a bug of this pass, and the members stay as they were.
    if let Err(e) = crate::verifier::verify_function(m, &m.functions[id], true) {
        debug_assert!(false, "merge-aligned made an invalid body:\n{e}");
        ps.remove_function(m, id);
        return None;
    }
    let c = &opts.cost;
    let mut folded = 0;
    for (k, &f) in members.iter().enumerate() {
        let member = m
            .lookup_symbol(&m.functions[f].name)
            .expect("a defined function has a symbol");
        let func = &m.functions[f];
        let sites = uses.calls.get(&member).copied().unwrap_or(0)
            + ps.external_calls.get(member).copied().unwrap_or(0);
        let fold = func.linkage == Linkage::Local
            && !func.address_significant
            && !opts.locals_named
            && !uses.observed.contains(&member)
            && c.per_extra_arg * sites as f64 <= c.thunk + c.per_extra_arg;
        let id_arg = Operand::Int(k as i64);
        let kind = if fold {
            ps.remove_function(m, f);
            m.symbols[member].def = None.into();
            ps.add_call_rewrite(
                member,
                CallRewrite {
                    shared: sym,
                    sig: sig.clone(),
                    extras: vec![ExtraArg::Const(Type::I32, id_arg)],
                },
            );
            folded += 1;
            MergeKind::Folded
        } else {
            make_thunk_with(m, ps, f, (sym, sig.clone()), 1, false, |t, b, ops| {
                let r = t.new_reg(Type::I32);
                let i = t.make_inst(Opcode::Copy, Type::I32, &[r], &[id_arg]);
                t.append_inst(b, i);
                ops.push(Operand::Reg(r));
            });
            MergeKind::Thunked
        };
        ps.merges.push(MergeRecord {
            merged: member,
            survivor: sym,
            kind,
            by: MergedBy::Aligned,
            callers_redirected: false,
        });
    }
    Some(folded)
}
