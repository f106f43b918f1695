//! Profitability: an upper bound of a merge's saving from its alignment, computed before the
//! body is built, and the saving of a built body under the byte cost model.

use super::align::{block_body, Aligned, GroupCtx};
use super::codegen::{Codegen, Merged, PlanBlock};
use super::search::split_phis;
use super::{AlignedOptions, Rejected};
use crate::lir::*;
use crate::passes::fold::CostModel;
use cranelift_entity::EntityRef;

/// What the merged body of `plan` could save at most, without building it: an upper bound
/// of `saving_of`, from a lower bound of what code generation makes. Each block's phis and
/// a terminator once, the identifier's copy, a full column once and a select for each
/// member whose operand differs from the first's (a constant, or a register that is not the
/// result of the same column or phi: `Codegen` gives a member's register the merged
/// register of another member's only there), every other instruction as it is, and a
/// branch and a jump for each run of unmatched instructions that cannot run in every
/// member (a diamond). Leaving out the selects of phi sources and terminators, and the
/// charges for loops and repair phis, only raises the bound (the cost model's charges are
/// not negative).
pub(super) fn estimate(cx: &GroupCtx, plan: &[PlanBlock], opts: &AlignedOptions) -> f64 {
    use Operand::*;
    let n = cx.n();
    let fs = &cx.fs;
    // Per member and register: the column or phi of the merged body it is a result of,
    // numbered from 1; 0 for a value of that member only.
    let mut ids: Vec<Vec<u32>> = fs.iter().map(|f| vec![0; f.regs.len()]).collect();
    let mut next = 0;
    // Whether member `k`'s operand `y` needs a select against the first member's `x`:
    // the number of selects (a memory operand's base and index are selected apart).
    let selects_for = |ids: &[Vec<u32>], k: usize, x: Operand, y: Operand| -> usize {
        let reg = |r: Option<crate::lir::Reg>, s: Option<crate::lir::Reg>| match (r, s) {
            (Some(r), Some(s)) => {
                let id = ids[0][r.index()];
                (id == 0 || ids[k][s.index()] != id) as usize
            }
            _ => 0,
        };
        match (x, y) {
            (Reg(r), Reg(s)) => reg(Some(r), Some(s)),
            (Reg(_) | Int(_) | F32(_) | F64(_), _) => (x != y) as usize,
            (
                Mem { base, index, .. },
                Mem {
                    base: b2,
                    index: i2,
                    ..
                },
            ) => reg(base.expand(), b2.expand()) + reg(index.expand(), i2.expand()),
            _ => 0,
        }
    };
    let (mut insts, mut selects) = (1, 0);
    for p in plan {
        let k0 = p.first();
        let Some(b0) = p.blocks[k0] else { continue };
        let phis = split_phis(fs[k0], b0).0.len();
        for q in 0..phis {
            next += 1;
            for (k, b) in p.members() {
                ids[k][fs[k].results(split_phis(fs[k], b).0[q])[0].index()] = next;
            }
        }
        insts += phis + 1;
        let Some(cols) = &p.columns else {
            insts += block_body(fs[k0], b0).len();
            continue;
        };
        let (mut in_run, mut diamond) = (false, false);
        for c in 0..cols.len() {
            if !cols.is_full(c) {
                for (j, x) in cols.col(c).iter().enumerate() {
                    if let Some(x) = *x {
                        insts += 1;
                        diamond |= !cx.speculable(j, x);
                    }
                }
                in_run = true;
                continue;
            }
            insts += 1 + 2 * (in_run && diamond) as usize;
            (in_run, diamond) = (false, false);
            let xs = cols.col(c);
            let x0 = xs[0].unwrap();
            for (at, o) in fs[0].operands(x0).into_iter().enumerate() {
                for (k, x) in xs.iter().enumerate().skip(1) {
                    selects += selects_for(&ids, k, o, fs[k].operand(x.unwrap(), at));
                }
            }
            for j in 0..fs[0].results(x0).len() {
                next += 1;
                for (k, x) in xs.iter().enumerate() {
                    ids[k][fs[k].results(x.unwrap())[j].index()] = next;
                }
            }
        }
        insts += 2 * (in_run && diamond) as usize;
    }
    let c = &opts.cost;
    let members_insts: usize = fs.iter().map(|f| f.inst_count()).sum();
    c.bytes_per_inst * (members_insts as f64 - (insts + selects) as f64) + frames_less_thunks(n, c)
        - opts.select_extra * selects as f64
}

/// The merged body of `plan`, if it saves more than `floor` bytes. Most alignments save
/// nothing: `estimate` rejects them before the body is built.
pub(super) fn build(
    cx: &GroupCtx,
    plan: Vec<PlanBlock>,
    floor: f64,
    opts: &AlignedOptions,
) -> Result<Aligned, Rejected> {
    let most = estimate(cx, &plan, opts);
    // Debug builds also build the plans the estimate turns away, to check the bound where
    // it decides.
    if most <= floor && !cfg!(debug_assertions) {
        return Err(Rejected::Estimate);
    }
    let merged = Codegen::new(cx).run(&plan);
    let saving = merged.as_ref().map(|b| saving_of(cx, b, opts));
    if let Some(saving) = saving {
        debug_assert!(
            saving <= most + 1e-6,
            "estimate {most} below the saving {saving}"
        );
    }
    if most <= floor {
        return Err(Rejected::Estimate);
    }
    let (Some(merged), Some(saving)) = (merged, saving) else {
        return Err(Rejected::Codegen);
    };
    if saving <= floor {
        return Err(Rejected::Saving);
    }
    Ok(Aligned {
        plan,
        merged,
        saving,
    })
}

/// The frames of `n` members the merge saves, less the thunks (with their identifier
/// argument) and the merged body's frame it adds.
pub(super) fn frames_less_thunks(n: usize, c: &CostModel) -> f64 {
    let n = n as f64;
    n * c.frame - (n * (c.thunk + c.per_extra_arg) + c.frame)
}

/// The bytes a merged body saves against its members, as the cost model estimates them.
pub(super) fn saving_of(cx: &GroupCtx, merged: &Merged, opts: &AlignedOptions) -> f64 {
    let c = &opts.cost;
    let members_insts: usize = cx.fs.iter().map(|f| f.inst_count()).sum();
    c.bytes_per_inst * (members_insts as f64 - merged.body.inst_count() as f64)
        + frames_less_thunks(cx.n(), c)
        - opts.loop_branch * merged.diamonds_in_loops as f64
        - opts.select_extra * merged.selects as f64
        - merged.speculated_in_loops as f64
        - opts.repair_edge * merged.repair_edges as f64
}
