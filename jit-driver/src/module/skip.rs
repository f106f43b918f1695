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
//! The passes compare only the blocks the entry reaches, and the lifter adds a block where a
//! predecessor reaches one block twice with different arguments; the key counts exactly
//! those, so neither an unreachable block nor a split edge keeps apart functions the passes
//! would merge (`tools/tests/skip_lift.rs`). Were the key ever too fine, a merge would be
//! missed and the function compiled as it came, which is always correct. A hash collision
//! only lifts a function that needed no lifting.
//!
//! What the passes must still learn from an unlifted function is what it observes of the
//! others: addresses it takes (`func_addr`, a symbol global value) and functions it calls
//! with `try_call` (whose calls `merge-similar` cannot rewrite), both marked on the lifted
//! functions as address-significant, as a lifted caller would have them marked; and how
//! often it calls each (`PassState::external_calls`, for `merge-similar`'s cost model).

use cranelift_codegen::ir::{self, InstructionData};
use cranelift_entity::EntityRef;
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

/// Which functions of a batch a flush lifts (`Core::plan_lift`).
#[derive(Default)]
pub(crate) struct Plan {
    /// By position: compiled from its input without being lifted (empty: every function is
    /// lifted).
    pub skip: Vec<bool>,
    /// Functions compiled unlifted by earlier flushes that a function of this batch equals
    /// up to renaming and callees, each with that function's copy that stands in for it.
    pub stand_ins: Vec<(cranelift_module::FuncId, ir::Function)>,
    /// The prints of the positions left unlifted, to index once they are compiled (a flush
    /// that is not the last).
    pub prints: super::input_index::Prints,
    /// Positions equal to a function an earlier flush compiled unlifted, callees and all,
    /// with that function: merged into it without being lifted (in position order).
    pub merged_at: Vec<(u32, cranelift_module::FuncId)>,
}

/// What a flush learns of the functions of a batch before it decides which to lift, in one
/// pass over each function's instructions: their shape keys, and what each would tell the
/// passes about the others were it not lifted.
#[derive(Default)]
pub(crate) struct Survey {
    /// The shape key of each function, by position in the batch.
    pub keys: Vec<u64>,
    /// The references of each function (by position) to module functions, as the passes
    /// must know them (repeats are possible).
    pub refs: Vec<(u32, Reference)>,
    /// The user names (namespace, index) each function (by position) refers to as
    /// `colocated` (the lifter marks a symbol near once any reference is), and whether as a
    /// function (a call or an address) or as data (a symbol global value).
    pub near: Vec<(u32, u32, u32, bool)>,
    /// Scratch, per block of the function surveyed: the sum of its instructions' mixed
    /// opcodes, and whether the entry reaches it.
    block_sum: Vec<u64>,
    reached: Vec<bool>,
    stack: Vec<ir::Block>,
    /// Scratch: a terminator's destinations (target, place among them).
    dests: Vec<(ir::Block, u32)>,
}

impl Survey {
    pub(crate) fn of<'a>(funcs: impl ExactSizeIterator<Item = &'a ir::Function>) -> Survey {
        let mut s = Survey::default();
        s.fill(funcs);
        s
    }

    /// Survey `funcs`, reusing this survey's room (what it held before is gone).
    pub(crate) fn fill<'a>(&mut self, funcs: impl ExactSizeIterator<Item = &'a ir::Function>) {
        self.keys.clear();
        self.refs.clear();
        self.near.clear();
        self.keys.reserve(funcs.len());
        for (pos, f) in funcs.enumerate() {
            let key = self.function(pos as u32, f);
            self.keys.push(key);
        }
    }

    /// The shape key of `func`: its signature, and the number of blocks and multiset of
    /// opcodes of what the passes compare: the blocks the entry reaches, and the blocks the
    /// lifter adds (an edge it splits: a predecessor reaching one block twice with different
    /// arguments gets a block with a `jump`, as if the input had spelled it out). It ignores
    /// the order of blocks (the passes compare blocks in control-flow order, which the layout
    /// need not follow), every operand, and what the signature and opcodes nearly always tell
    /// apart already: the types of results (on the wasm corpus, adding them makes 0–1% more of
    /// the instructions unique, and reading them doubled the key's cost) and block parameters
    /// (no function more unique on the corpus). A coarser key only lifts more. Its references
    /// are recorded as it goes, from every block, as the lifter lifts every block.
    fn function(&mut self, pos: u32, func: &ir::Function) -> u64 {
        let mut h = FxHasher::default();
        func.signature.hash(&mut h);
        let names = func.params.user_named_funcs();
        let (refs, near) = (&mut self.refs, &mut self.near);
        let mut user = |n: &ir::ExternalName, colocated: bool, func: bool| match n {
            ir::ExternalName::User(r) => {
                let u = names.get(*r)?;
                if colocated {
                    near.push((pos, u.namespace, u.index, func));
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
                if let Some(i) = user(name, *colocated, false) {
                    refs.push((pos, Reference::Observed(i)));
                }
            }
        }
        let dfg = &func.dfg;
        let n = dfg.num_blocks();
        self.block_sum.clear();
        self.block_sum.resize(n, 0);
        for b in func.layout.blocks() {
            let mut sum = 0u64;
            for i in func.layout.block_insts(b) {
                let d = &dfg.insts[i];
                // (Opcodes are numbered from 1, so every instruction adds to the sum.)
                sum = sum.wrapping_add(spread(d.opcode() as u64));
                let (fr, observed) = match *d {
                    InstructionData::FuncAddr { func_ref, .. }
                    | InstructionData::TryCall { func_ref, .. } => (func_ref, true),
                    InstructionData::Call { func_ref, .. } => (func_ref, false),
                    _ => continue,
                };
                let ext = &dfg.ext_funcs[fr];
                if let Some(i) = user(&ext.name, ext.colocated, true) {
                    refs.push((
                        pos,
                        if observed {
                            Reference::Observed(i)
                        } else {
                            Reference::Called(i)
                        },
                    ));
                }
            }
            self.block_sum[b.index()] = sum;
        }
        // The blocks the entry reaches, and the edges the lifter splits on the way.
        let (mut blocks, mut sum) = (0u64, 0u64);
        self.reached.clear();
        self.reached.resize(n, false);
        self.stack.clear();
        if let Some(entry) = func.layout.entry_block() {
            self.reached[entry.index()] = true;
            self.stack.push(entry);
        }
        let pool = &dfg.value_lists;
        let same_args = |a: &ir::BlockCall, b: &ir::BlockCall| {
            let arg = |x: ir::BlockArg| match x {
                ir::BlockArg::Value(v) => ir::BlockArg::Value(dfg.resolve_aliases(v)),
                x => x,
            };
            a.args(pool).map(arg).eq(b.args(pool).map(arg))
        };
        while let Some(b) = self.stack.pop() {
            blocks += 1;
            sum = sum.wrapping_add(self.block_sum[b.index()]);
            let Some(last) = func.layout.last_inst(b) else {
                continue;
            };
            let calls = dfg.insts[last].branch_destination(&dfg.jump_tables, &dfg.exception_tables);
            self.dests.clear();
            for (k, bc) in calls.iter().enumerate() {
                let t = bc.block(pool);
                if t.index() >= n {
                    // Not a block of this function (unverified input): the lifter refuses
                    // it, and the key need not be right.
                    continue;
                }
                self.dests.push((t, k as u32));
                if !self.reached[t.index()] {
                    self.reached[t.index()] = true;
                    self.stack.push(t);
                }
            }
            if self.dests.len() > 1 {
                // An edge to a target reached before from this block with other arguments
                // than the first such edge is split (`Lifter::fill_phis`).
                self.dests.sort_unstable();
                // The first edge of each target's run (sorted: the earliest one).
                let mut g = 0;
                for w in 1..self.dests.len() {
                    if self.dests[w].0 != self.dests[g].0 {
                        g = w;
                        continue;
                    }
                    let (first, k) = (self.dests[g].1, self.dests[w].1);
                    if !same_args(&calls[first as usize], &calls[k as usize]) {
                        blocks += 1;
                        sum = sum.wrapping_add(spread(ir::Opcode::Jump as u64));
                    }
                }
            }
        }
        (blocks, sum).hash(&mut h);
        h.finish()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_reader::parse_functions;

    fn keys(text: &str) -> Vec<u64> {
        Survey::of(parse_functions(text).unwrap().iter()).keys
    }

    /// A function of three blocks: the entry computes `v2 = {op}` from `v0` and the constant
    /// `c`, and branches to a block returning 3 or one returning `v2` (after `extra`),
    /// laid out in that order or swapped; `unreachable` adds a block nothing branches to.
    fn branchy(
        ty: &str,
        c: i64,
        op: &str,
        extra: &str,
        swapped: bool,
        unreachable: bool,
    ) -> String {
        let three = format!("block1:\n v3 = iconst.{ty} 3\n return v3\n");
        let v2 = format!("block2:\n{extra} return v2\n");
        let (x, y) = if swapped {
            (&v2, &three)
        } else {
            (&three, &v2)
        };
        format!(
            "function %f({ty}) -> {ty} {{\n\
             block0(v0: {ty}):\n v1 = iconst.{ty} {c}\n v2 = {op}\n brif v0, block1, block2\n\
             {x}{y}{}}}\n",
            if unreachable {
                "block3:\n trap user1\n"
            } else {
                ""
            }
        )
    }

    #[test]
    fn key_ignores_operands_and_block_order_but_not_shape() {
        let k: Vec<u64> = [
            branchy("i32", 1, "iadd v0, v1", "", false, false),
            branchy("i32", 7, "iadd v1, v0", "", true, false),
            branchy("i32", 1, "isub v0, v1", "", false, false),
            branchy("i64", 1, "iadd v0, v1", "", false, false),
            branchy("i32", 1, "iadd v0, v1", " v9 = iadd v2, v2\n", false, false),
            branchy("i32", 1, "iadd v0, v1", "", false, true),
        ]
        .iter()
        .map(|t| keys(t)[0])
        .collect();
        assert_eq!(
            k[0], k[1],
            "constants, operand order and block order do not count"
        );
        assert_ne!(k[0], k[2], "opcodes count");
        assert_ne!(k[0], k[3], "signatures count");
        assert_ne!(k[0], k[4], "instruction counts count");
        assert_eq!(k[0], k[5], "blocks the entry does not reach do not count");
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
        let s = Survey::of([f, f].into_iter());
        let refs = |pos| {
            let mut r: Vec<Reference> = (s.refs.iter())
                .filter(|&&(p, _)| p == pos)
                .map(|&(_, r)| r)
                .collect();
            r.sort();
            r
        };
        use Reference::*;
        assert_eq!(refs(0), [Observed(3), Observed(5), Observed(6), Called(4)]);
        assert_eq!(refs(1), refs(0), "each function's own");
        assert_eq!(s.near, [(0, 0, 4, true), (1, 0, 4, true)]);
        assert_eq!(s.keys[0], s.keys[1]);
    }
}
