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

pub(crate) use super::fingerprint::Reference;
use super::fingerprint::{Digest, Print, Refs, Walker};
use cranelift_codegen::ir;

/// Which functions of a batch a flush lifts (`Core::plan_lift`).
#[derive(Default)]
pub(crate) struct Plan {
    /// By position: compiled from its input without being lifted (empty: every function is
    /// lifted).
    pub skip: Vec<bool>,
    /// Functions compiled unlifted by earlier flushes that a function of this batch equals
    /// up to renaming and callees, each with that function's copy that stands in for it.
    pub stand_ins: Vec<(cranelift_module::FuncId, ir::Function)>,
    /// The positions left unlifted, to index by their prints once they are compiled (a
    /// flush that is not the last).
    pub indexed: Vec<u32>,
    /// Positions equal to a function an earlier flush compiled unlifted, callees and all,
    /// with that function: merged into it without being lifted (in position order).
    pub merged_at: Vec<(u32, cranelift_module::FuncId)>,
}

/// What a flush learns of the functions of a batch before it decides which to lift, in one
/// walk over each function (`fingerprint`): their shape keys, what each would tell the passes
/// about the others were it not lifted, and (when asked) their prints.
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
    /// The print of each function, by position (`None`: not printed, or it has none), its
    /// callees and constants in the two lists below.
    prints: Vec<Option<Printed>>,
    callees: Vec<u32>,
    constants: Vec<(u64, ir::Inst)>,
    print: Print,
}

/// A print in a `Survey`: its digests, and where its callees and constants are.
#[derive(Clone, Copy)]
struct Printed {
    exact: Digest,
    alike: u64,
    callees: (u32, u32),
    constants: (u32, u32),
}

/// A function's print, as a `Survey` holds it.
#[derive(Clone, Copy)]
pub(crate) struct PrintRef<'a> {
    pub exact: Digest,
    pub alike: u64,
    pub callees: &'a [u32],
    pub constants: &'a [(u64, ir::Inst)],
}

impl Survey {
    pub(crate) fn of<'a>(funcs: impl ExactSizeIterator<Item = &'a ir::Function>) -> Survey {
        let mut s = Survey::default();
        s.fill(funcs, &mut Walker::default(), false);
        s
    }

    /// Survey `funcs`, with their prints if `prints`, reusing this survey's room (what it
    /// held before is gone).
    pub(crate) fn fill<'a>(
        &mut self,
        funcs: impl ExactSizeIterator<Item = &'a ir::Function>,
        walker: &mut Walker,
        prints: bool,
    ) {
        self.keys.clear();
        self.refs.clear();
        self.near.clear();
        self.prints.clear();
        self.callees.clear();
        self.constants.clear();
        self.keys.reserve(funcs.len());
        for (pos, f) in funcs.enumerate() {
            let refs = Refs {
                pos: pos as u32,
                refs: &mut self.refs,
                near: &mut self.near,
            };
            let key = if prints {
                let (key, printed) = walker.walk::<true>(f, refs, &mut self.print);
                self.keep_print(printed);
                key
            } else {
                self.prints.push(None);
                walker.walk::<false>(f, refs, &mut self.print).0
            };
            self.keys.push(key);
        }
    }

    /// Print `func`, at `pos` of the functions surveyed without prints (a second walk, for
    /// the few a batch needs the prints of), unless it was printed.
    pub(crate) fn print_again(&mut self, pos: usize, func: &ir::Function, walker: &mut Walker) {
        if self.prints[pos].is_none() {
            let (mut refs, mut near) = (Vec::new(), Vec::new());
            let refs = Refs {
                pos: pos as u32,
                refs: &mut refs,
                near: &mut near,
            };
            let (_, printed) = walker.walk::<true>(func, refs, &mut self.print);
            self.keep_print(printed);
            self.prints.swap_remove(pos);
        }
    }

    /// Keep the print just walked (if `printed`) as the next position's.
    fn keep_print(&mut self, printed: bool) {
        let p = &self.print;
        let at = |n: usize, len: usize| (n as u32, len as u32);
        self.prints.push(printed.then(|| Printed {
            exact: p.exact,
            alike: p.alike,
            callees: at(self.callees.len(), p.callees.len()),
            constants: at(self.constants.len(), p.constants.len()),
        }));
        if printed {
            self.callees.extend_from_slice(&p.callees);
            self.constants.extend_from_slice(&p.constants);
        }
    }

    /// The print of the function at `pos` (`None`: it has none, or prints were not asked
    /// for).
    pub(crate) fn print(&self, pos: usize) -> Option<PrintRef<'_>> {
        let p = (*self.prints.get(pos)?)?;
        let range = |(at, n): (u32, u32)| at as usize..(at + n) as usize;
        Some(PrintRef {
            exact: p.exact,
            alike: p.alike,
            callees: &self.callees[range(p.callees)],
            constants: &self.constants[range(p.constants)],
        })
    }
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
