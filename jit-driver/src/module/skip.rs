//! Functions a flush need not lift: those no merging pass could merge with anything.
//!
//! Most functions of a real module are equal to no other, even up to constants and callees:
//! on the wasm corpus, 78–91% of the instructions are in functions whose *shape key* (below)
//! no other function of the module has. `merge` and `merge-similar` only merge functions with
//! equal LIR signatures, block counts and instruction sequences (exact, or up to constants
//! and callees), and each of those is fixed by the Cranelift IR instruction by instruction
//! (the lifter maps each instruction alone; blocks become blocks, block parameters phis), so
//! two functions the passes could merge have equal keys. A function whose key is unique is
//! therefore compiled from its input without being lifted: it is never merged and never a
//! survivor, and only its calls need the same redirection any unchanged function gets.
//!
//! The key is built so that it can only be too fine in rare cases (an edge the lifter
//! splits, an unreachable block): then a merge is missed, and the function is compiled as it
//! came, which is always correct. A hash collision only lifts a function that needed no
//! lifting.
//!
//! What the passes must still learn from an unlifted function is what it observes of the
//! others: addresses it takes (`func_addr`, a symbol global value) and functions it calls
//! with `try_call` (whose calls `merge-similar` cannot rewrite), both marked on the lifted
//! functions as address-significant, as a lifted caller would have them marked; and how
//! often it calls each (`lir::Module::external_calls`, for `merge-similar`'s cost model).

use cranelift_codegen::ir::{self, InstructionData};
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

/// The shape key of a function: its signature, numbers of blocks and block parameters, and
/// the multiset of (opcode, number of results, first result type) over its instructions.
/// It ignores the order of blocks (the passes compare blocks in control-flow order, which
/// the layout need not follow) and every operand.
pub(crate) fn shape_key(func: &ir::Function) -> u64 {
    let mut h = FxHasher::default();
    func.signature.hash(&mut h);
    let dfg = &func.dfg;
    let (mut blocks, mut params, mut sum) = (0u64, 0u64, 0u64);
    for b in func.layout.blocks() {
        blocks += 1;
        params += dfg.num_block_params(b) as u64;
        for i in func.layout.block_insts(b) {
            let results = dfg.inst_results(i);
            let mut w = FxHasher::default();
            (dfg.insts[i].opcode(), results.len()).hash(&mut w);
            results.first().map(|&v| dfg.value_type(v)).hash(&mut w);
            sum = sum.wrapping_add(spread(w.finish()));
        }
    }
    (blocks, params, sum).hash(&mut h);
    h.finish()
}

/// A bijective mix of a word (the finaliser of MurmurHash3), so that a sum of mixed words
/// depends on every bit of every word.
fn spread(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ x >> 33
}

/// What an unlifted function's reference to a module function (an index of namespace 0 of
/// user names) tells the passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reference {
    /// Its address is taken (`func_addr`, a symbol global value), or it is called with
    /// `try_call`.
    Observed(u32),
    /// It is called directly (`call`, `return_call`): once per call site.
    Called(u32),
}

/// The references of `func` to module functions, as the passes must know them (repeats are
/// possible), and the user names (namespace, index) it refers to as `colocated` (the lifter
/// marks a symbol near once any reference is).
pub(crate) fn scan_references(
    func: &ir::Function,
    mut each: impl FnMut(Reference),
    mut colocated: impl FnMut(u32, u32),
) {
    let names = func.params.user_named_funcs();
    let mut user = |n: &ir::ExternalName, near: bool| match n {
        ir::ExternalName::User(r) => {
            let u = names.get(*r)?;
            if near {
                colocated(u.namespace, u.index);
            }
            (u.namespace == 0).then_some(u.index)
        }
        _ => None,
    };
    // As the lifter does: every symbol global value counts, used or not.
    for gv in func.global_values.values() {
        if let ir::GlobalValueData::Symbol {
            name, colocated, ..
        } = gv
        {
            if let Some(i) = user(name, *colocated) {
                each(Reference::Observed(i));
            }
        }
    }
    for b in func.layout.blocks() {
        for i in func.layout.block_insts(b) {
            let (fr, observed) = match func.dfg.insts[i] {
                InstructionData::FuncAddr { func_ref, .. }
                | InstructionData::TryCall { func_ref, .. } => (func_ref, true),
                InstructionData::Call { func_ref, .. } => (func_ref, false),
                _ => continue,
            };
            let ext = &func.dfg.ext_funcs[fr];
            if let Some(i) = user(&ext.name, ext.colocated) {
                each(if observed {
                    Reference::Observed(i)
                } else {
                    Reference::Called(i)
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_reader::parse_functions;

    fn keys(text: &str) -> Vec<u64> {
        parse_functions(text)
            .unwrap()
            .iter()
            .map(shape_key)
            .collect()
    }

    #[test]
    fn key_ignores_operands_and_block_order_but_not_shape() {
        let k = keys(
            "function %a(i32) -> i32 {
             block0(v0: i32):
                 v1 = iconst.i32 1
                 v2 = iadd v0, v1
                 jump block1(v2)
             block1(v3: i32):
                 return v3
             }
             function %b(i32) -> i32 {
             block1(v3: i32):
                 return v3
             block0(v0: i32):
                 v1 = iconst.i32 7
                 v2 = iadd v1, v0
                 jump block1(v2)
             }
             function %c(i32) -> i32 {
             block0(v0: i32):
                 v1 = iconst.i32 1
                 v2 = isub v0, v1
                 jump block1(v2)
             block1(v3: i32):
                 return v3
             }
             function %d(i64) -> i64 {
             block0(v0: i64):
                 v1 = iconst.i64 1
                 v2 = iadd v0, v1
                 jump block1(v2)
             block1(v3: i64):
                 return v3
             }
             function %e(i32) -> i32 {
             block0(v0: i32):
                 v1 = iconst.i32 1
                 v2 = iadd v0, v1
                 jump block1(v2)
             block1(v3: i32):
                 v4 = iadd v3, v3
                 return v4
             }",
        );
        assert_eq!(k[0], k[1], "constants and layout order do not count");
        assert_ne!(k[0], k[2], "opcodes count");
        assert_ne!(k[0], k[3], "types count");
        assert_ne!(k[0], k[4], "instruction counts count");
    }

    #[test]
    fn references_are_addresses_try_call_targets_and_calls() {
        let f = &parse_functions(
            "function %f(i64) -> i64 {
                 sig0 = (i64) -> i64
                 fn0 = u0:3 sig0
                 fn1 = colocated u0:4 sig0
                 fn2 = u0:5 sig0
                 gv0 = symbol u0:6
             block0(v0: i64):
                 v1 = func_addr.i64 fn0
                 v2 = call fn1(v0)
                 try_call fn2(v2), sig0, block1(ret0), []
             block1(v3: i64):
                 return v3
             }",
        )
        .unwrap()[0];
        let (mut seen, mut near) = (Vec::new(), Vec::new());
        scan_references(f, |r| seen.push(r), |ns, i| near.push((ns, i)));
        seen.sort();
        use Reference::*;
        assert_eq!(seen, [Observed(3), Observed(5), Observed(6), Called(4)]);
        assert_eq!(near, [(0, 4)]);
    }
}
