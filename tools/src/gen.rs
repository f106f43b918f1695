//! A deterministic generator of template-heavy CLIF modules, for benchmarking and fuzzing the
//! merge pass.
//!
//! The model is C++ templates instantiated over several *source types* (`int`, `unsigned`,
//! `int32_t`, `long`, `size_t`, `ptr`, ...). Source types that lower to the same machine type
//! (`i32` or `i64`) give instantiations whose CLIF is identical except for the function name.
//! Templates (see `Tmpl`): `sum` (loop with block parameters over an array), `maxloop` (loop with
//! an inner branch), `count_if` (loop with compare and `select`), `chain` (arithmetic chain with
//! loads, stores and a diamond), `clamp` (compare cascade), `poly` (Horner polynomial), `fib`
//! (double self-recursion) and `fact` (single self-recursion).
//!
//! A *group* is the set of instantiations of one template specialisation over k source types of
//! one machine type; it contributes k - 1 identical duplicates. Instantiations that call other
//! instantiations call the callee's instance *with the same source type* (`sum<int>` calls
//! `helper<int>`, `sum<int32_t>` calls `helper<int32_t>`), so they become identical only after
//! their callees merge (transitive duplicates). Groups use a prefix of the type list of their
//! machine type, so a callee group covering the caller's types is easy to find.
//!
//! Every specialisation carries a unique *key* constant (>= 100; all other constants are < 100),
//! so functions of different groups always differ. A near-duplicate is a copy of an earlier
//! instantiation (same callees, same shape) with only its key replaced: it differs in exactly one
//! constant and must not merge. A *structural* near-duplicate (`edit_ratio`) is such a copy whose
//! arithmetic chains are also edited: an operation inserted, removed or replaced by another
//! (`iadd` by `isub`, `bxor` by `bor`, ...), as template instances over different types differ.
//!
//! Execution: every pointer argument must point to 64 writable, 8-aligned bytes (all accesses are
//! at offsets 0..64 from a pointer argument). Loops run at most 64 iterations, recursion is on
//! `n & 15`, calls never sit inside loops, and the call depth (excluding self-recursion) is at
//! most 3, so every function terminates quickly on any input.

use std::fmt::Write;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Number of functions.
    pub functions: usize,
    /// Fraction of functions that are identical duplicates (including transitive ones).
    pub dup_ratio: f64,
    /// Fraction of functions that are near-duplicates (one constant differs).
    pub near_ratio: f64,
    /// Fraction of functions that are structural near-duplicates (instructions inserted,
    /// removed or replaced, besides the key).
    pub edit_ratio: f64,
    pub seed: u64,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            functions: 1000,
            dup_ratio: 0.3,
            near_ratio: 0.1,
            edit_ratio: 0.0,
            seed: 0,
        }
    }
}

/// The generated module and what is in it.
#[derive(Debug, Clone)]
pub struct GenOutput {
    /// CLIF text: one module, all functions.
    pub text: String,
    /// Identical duplicates, including those identical only once their callees merge: the exact
    /// number of functions a perfect MergeFunctions removes.
    pub duplicates: usize,
    /// Functions that differ from another function in exactly one constant.
    pub near_duplicates: usize,
    /// Functions copied from another with edited instructions (and another key).
    pub edited_duplicates: usize,
    pub functions: usize,
    pub clif_insts: usize,
    pub blocks: usize,
    pub calls: usize,
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A small constant in 1..100 (keys are >= 100).
    fn small(&mut self) -> i64 {
        self.range(1, 99)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// Machine type of a source type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mt {
    I32,
    I64,
}

const I32_TYPES: &[&str] = &[
    "int",
    "unsigned",
    "int32_t",
    "uint32_t",
    "signed",
    "wchar_t",
    "char32_t",
    "int_least32_t",
    "uint_least32_t",
];
const I64_TYPES: &[&str] = &[
    "long",
    "size_t",
    "ptr",
    "int64_t",
    "unsigned_long",
    "uint64_t",
    "long_long",
    "unsigned_long_long",
    "ssize_t",
    "ptrdiff_t",
    "intptr_t",
    "uintptr_t",
    "int_fast64_t",
];

impl Mt {
    fn ty(self) -> &'static str {
        match self {
            Mt::I32 => "i32",
            Mt::I64 => "i64",
        }
    }
    fn size(self) -> i64 {
        match self {
            Mt::I32 => 4,
            Mt::I64 => 8,
        }
    }
    fn names(self) -> &'static [&'static str] {
        match self {
            Mt::I32 => I32_TYPES,
            Mt::I64 => I64_TYPES,
        }
    }
}

/// The templates.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tmpl {
    Sum,
    MaxLoop,
    CountIf,
    Chain,
    Clamp,
    Poly,
    Fib,
    Fact,
}

/// (template, weight in percent).
const TEMPLATES: &[(Tmpl, u32)] = &[
    (Tmpl::Sum, 14),
    (Tmpl::MaxLoop, 12),
    (Tmpl::CountIf, 12),
    (Tmpl::Chain, 18),
    (Tmpl::Clamp, 14),
    (Tmpl::Poly, 14),
    (Tmpl::Fib, 8),
    (Tmpl::Fact, 8),
];

/// Signature shapes (T is the machine type, the pointer is i64).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    /// (T) -> T
    Unary,
    /// (i64, T) -> T
    PtrN,
    /// (i64, T, T) -> T
    PtrAB,
}

impl Tmpl {
    fn name(self) -> &'static str {
        match self {
            Tmpl::Sum => "sum",
            Tmpl::MaxLoop => "maxloop",
            Tmpl::CountIf => "count_if",
            Tmpl::Chain => "chain",
            Tmpl::Clamp => "clamp",
            Tmpl::Poly => "poly",
            Tmpl::Fib => "fib",
            Tmpl::Fact => "fact",
        }
    }
    fn shape(self) -> Shape {
        match self {
            Tmpl::Fib | Tmpl::Fact => Shape::Unary,
            Tmpl::Sum | Tmpl::MaxLoop => Shape::PtrN,
            Tmpl::Chain | Tmpl::Clamp | Tmpl::Poly | Tmpl::CountIf => Shape::PtrAB,
        }
    }
    fn self_recursive(self) -> bool {
        matches!(self, Tmpl::Fib | Tmpl::Fact)
    }
}

fn sig_text(shape: Shape, t: &str) -> String {
    match shape {
        Shape::Unary => format!("({t}) -> {t} system_v"),
        Shape::PtrN => format!("(i64, {t}) -> {t} system_v"),
        Shape::PtrAB => format!("(i64, {t}, {t}) -> {t} system_v"),
    }
}

/// A callee of a specialisation.
#[derive(Clone, Copy, Debug)]
enum Callee {
    /// The callee record's instantiation with the caller's source type.
    PerType(usize),
    /// One fixed function: (record, source type index).
    Fixed(usize, usize),
}

/// One template specialisation: everything but the source type.
#[derive(Clone, Debug)]
struct Spec {
    tmpl: Tmpl,
    mt: Mt,
    /// The unique constant.
    key: i64,
    /// Seeds the shape choices (chain lengths, constants, operators).
    seed: u64,
    callees: Vec<Callee>,
    /// Seeds the edits of a structural near-duplicate (none: no edits).
    edits: Option<u64>,
}

/// Which source types a record is instantiated over.
#[derive(Clone, Copy, Debug)]
enum TySet {
    /// Types `0..k` of the machine type's list.
    Prefix(usize),
    Single(usize),
}

impl TySet {
    fn contains(self, t: usize) -> bool {
        match self {
            TySet::Prefix(k) => t < k,
            TySet::Single(s) => s == t,
        }
    }
    fn members(self) -> Vec<usize> {
        match self {
            TySet::Prefix(k) => (0..k).collect(),
            TySet::Single(s) => vec![s],
        }
    }
    fn first(self) -> usize {
        match self {
            TySet::Prefix(_) => 0,
            TySet::Single(s) => s,
        }
    }
}

struct Record {
    spec: Spec,
    set: TySet,
    /// Call depth excluding self-recursion (0: calls nothing else).
    depth: u32,
}

/// Maximum depth of a function that may be called (so call depth <= MAX_CALLEE_DEPTH + 1).
const MAX_CALLEE_DEPTH: u32 = 2;

fn func_name(records: &[Record], rec: usize, t: usize) -> String {
    let s = &records[rec].spec;
    format!("{}_{}_{}", s.tmpl.name(), s.mt.names()[t], rec)
}

/// Text builder for one function.
struct F {
    t: &'static str,
    size: i64,
    body: String,
    nv: u32,
    insts: usize,
    blocks: usize,
    calls: usize,
    /// (name, shape) of fn0, fn1, ...
    callees: Vec<(String, Shape)>,
    rng: Rng,
    /// The edits of a structural near-duplicate, apart from `rng` so that the shape stays
    /// the base's.
    edits: Option<Rng>,
}

impl F {
    fn val(&mut self) -> String {
        let v = format!("v{}", self.nv);
        self.nv += 1;
        v
    }
    fn op(&mut self, rhs: &str) -> String {
        let v = self.val();
        let _ = writeln!(self.body, "    {v} = {rhs}");
        self.insts += 1;
        v
    }
    fn eff(&mut self, s: &str) {
        let _ = writeln!(self.body, "    {s}");
        self.insts += 1;
    }
    fn c(&mut self, x: i64) -> String {
        let t = self.t;
        self.op(&format!("iconst.{t} {x}"))
    }
    fn block(&mut self, n: u32, params: &[(&str, &str)]) {
        if params.is_empty() {
            let _ = writeln!(self.body, "block{n}:");
        } else {
            let ps: Vec<String> = params.iter().map(|(v, t)| format!("{v}: {t}")).collect();
            let _ = writeln!(self.body, "block{n}({}):", ps.join(", "));
        }
        self.blocks += 1;
    }
    fn load(&mut self, p: &str, slot: i64) -> String {
        let (t, off) = (self.t, slot * self.size);
        if off == 0 {
            self.op(&format!("load.{t} notrap aligned {p}"))
        } else {
            self.op(&format!("load.{t} notrap aligned {p}+{off}"))
        }
    }
    fn store(&mut self, v: &str, p: &str, slot: i64) {
        let off = slot * self.size;
        if off == 0 {
            self.eff(&format!("store notrap aligned {v}, {p}"))
        } else {
            self.eff(&format!("store notrap aligned {v}, {p}+{off}"))
        }
    }
    /// `p + (i & 7) * size`.
    fn index_addr(&mut self, p: &str, i: &str) -> String {
        let seven = self.c(7);
        let idx = self.op(&format!("band {i}, {seven}"));
        let idx = if self.t == "i32" {
            self.op(&format!("uextend.i64 {idx}"))
        } else {
            idx
        };
        let sz = self.op(&format!("iconst.i64 {}", self.size));
        let off = self.op(&format!("imul {idx}, {sz}"));
        self.op(&format!("iadd {p}, {off}"))
    }
    /// A chain of `len` binary operations on `x`, with constants or the `others`.
    fn chain(&mut self, x: &str, len: usize, others: &[&str]) -> String {
        let mut acc = x.to_string();
        for _ in 0..len {
            let op = self.rng.pick(&[
                "iadd", "isub", "imul", "bxor", "bor", "iadd", "imul", "ishl", "ushr",
            ]);
            let rhs = if matches!(op, "ishl" | "ushr") {
                let s = self.rng.range(1, 5);
                self.c(s)
            } else if !others.is_empty() && self.rng.below(3) == 0 {
                others[self.rng.below(others.len())].to_string()
            } else {
                let k = self.rng.small();
                self.c(k)
            };
            acc = match self.edits.as_mut().map(|e| e.below(8)) {
                // Remove the operation (its constant stays, unused).
                Some(0) => acc,
                // Replace it by another.
                Some(1) => {
                    let other = match op {
                        "iadd" => "isub",
                        "isub" => "iadd",
                        "imul" => "iadd",
                        "bxor" => "bor",
                        "bor" => "band",
                        "ishl" => "ushr",
                        _ => "ishl",
                    };
                    self.op(&format!("{other} {acc}, {rhs}"))
                }
                // Insert one after it.
                Some(2) => {
                    let v = self.op(&format!("{op} {acc}, {rhs}"));
                    let k = self.rng_edit_small();
                    let c = self.c(k);
                    self.op(&format!("bxor {v}, {c}"))
                }
                _ => self.op(&format!("{op} {acc}, {rhs}")),
            };
        }
        acc
    }
    /// A small constant drawn from the edits' generator.
    fn rng_edit_small(&mut self) -> i64 {
        self.edits.as_mut().map_or(1, |e| e.range(1, 99))
    }
    /// Call every callee (never in a loop) and add the results to `r`.
    fn calls(&mut self, r: &str, p: &str, x: &str, y: &str) -> String {
        let mut r = r.to_string();
        for j in 0..self.callees.len() {
            let args = match self.callees[j].1 {
                Shape::Unary => x.to_string(),
                Shape::PtrN => format!("{p}, {x}"),
                Shape::PtrAB => format!("{p}, {x}, {y}"),
            };
            let res = self.op(&format!("call fn{j}({args})"));
            self.calls += 1;
            r = self.op(&format!("iadd {r}, {res}"));
        }
        r
    }
    fn cc(&mut self) -> &'static str {
        self.rng
            .pick(&["slt", "sgt", "ult", "ugt", "sle", "sge", "eq", "ne"])
    }
}

/// Render the instantiation of record `rec` with source type `t`.
/// Returns (text, insts, blocks, calls).
fn render(records: &[Record], rec: usize, t: usize) -> (String, usize, usize, usize) {
    let spec = &records[rec].spec;
    let name = func_name(records, rec, t);
    let callees: Vec<(String, Shape)> = spec
        .callees
        .iter()
        .map(|&c| {
            let (r, ct) = match c {
                Callee::PerType(r) => (r, t),
                Callee::Fixed(r, ct) => (r, ct),
            };
            (func_name(records, r, ct), records[r].spec.tmpl.shape())
        })
        .collect();
    let self_rec = spec.tmpl.self_recursive();
    let mut f = F {
        t: spec.mt.ty(),
        size: spec.mt.size(),
        body: String::new(),
        nv: 0,
        insts: 0,
        blocks: 0,
        calls: 0,
        callees: if self_rec {
            vec![(name.clone(), Shape::Unary)]
        } else {
            callees
        },
        rng: Rng::new(spec.seed),
        edits: spec.edits.map(Rng::new),
    };
    let ty = f.t;
    let k = spec.key;
    match spec.tmpl {
        Tmpl::Sum => {
            let (p, n) = (f.val(), f.val());
            f.block(0, &[(&p, "i64"), (&n, ty)]);
            let mask = f.rng.pick(&[15, 31, 63]);
            let m = f.c(mask);
            let n = f.op(&format!("band {n}, {m}"));
            let z = f.c(0);
            f.eff(&format!("jump block1({z}, {z})"));
            let (i, acc) = (f.val(), f.val());
            f.block(1, &[(&i, ty), (&acc, ty)]);
            let cmp = f.op(&format!("icmp ult {i}, {n}"));
            f.eff(&format!("brif {cmp}, block2, block3"));
            f.block(2, &[]);
            let a = f.index_addr(&p, &i);
            let x = f.op(&format!("load.{ty} notrap aligned {a}"));
            let len = f.rng.below(5) + 2;
            let x = f.chain(&x, len, &[&i]);
            let acc2 = f.op(&format!("iadd {acc}, {x}"));
            let one = f.c(1);
            let i2 = f.op(&format!("iadd {i}, {one}"));
            f.eff(&format!("jump block1({i2}, {acc2})"));
            f.block(3, &[]);
            let kc = f.c(k);
            let r = f.op(&format!("bxor {acc}, {kc}"));
            let r = f.calls(&r, &p, &r, &n);
            let slot = f.rng.range(0, 7);
            f.store(&r, &p, slot);
            f.eff(&format!("return {r}"));
        }
        Tmpl::MaxLoop => {
            let (p, n) = (f.val(), f.val());
            f.block(0, &[(&p, "i64"), (&n, ty)]);
            let mask = f.rng.pick(&[15, 31, 63]);
            let m = f.c(mask);
            let n = f.op(&format!("band {n}, {m}"));
            let init = f.load(&p, 0);
            let z = f.c(0);
            f.eff(&format!("jump block1({z}, {init})"));
            let (i, best) = (f.val(), f.val());
            f.block(1, &[(&i, ty), (&best, ty)]);
            let cmp = f.op(&format!("icmp ult {i}, {n}"));
            f.eff(&format!("brif {cmp}, block2, block5"));
            f.block(2, &[]);
            let a = f.index_addr(&p, &i);
            let x = f.op(&format!("load.{ty} notrap aligned {a}"));
            let kc = f.c(k);
            let x2 = f.op(&format!("iadd {x}, {kc}"));
            let cc = f.rng.pick(&["sgt", "ugt", "slt", "ult"]);
            let gt = f.op(&format!("icmp {cc} {x2}, {best}"));
            f.eff(&format!("brif {gt}, block3, block4({best})"));
            f.block(3, &[]);
            let len = f.rng.below(4) + 2;
            let y = f.chain(&x2, len, &[&best]);
            f.eff(&format!("jump block4({y})"));
            let nb = f.val();
            f.block(4, &[(&nb, ty)]);
            let one = f.c(1);
            let i2 = f.op(&format!("iadd {i}, {one}"));
            f.eff(&format!("jump block1({i2}, {nb})"));
            f.block(5, &[]);
            let r = f.calls(&best, &p, &best, &n);
            f.store(&r, &p, 7);
            f.eff(&format!("return {r}"));
        }
        Tmpl::CountIf => {
            let (p, a, b) = (f.val(), f.val(), f.val());
            f.block(0, &[(&p, "i64"), (&a, ty), (&b, ty)]);
            let mask = f.rng.pick(&[7, 15, 31]);
            let m = f.c(mask);
            let n = f.op(&format!("band {a}, {m}"));
            let z = f.c(0);
            f.eff(&format!("jump block1({z}, {z})"));
            let (i, cnt) = (f.val(), f.val());
            f.block(1, &[(&i, ty), (&cnt, ty)]);
            let cmp = f.op(&format!("icmp ult {i}, {n}"));
            f.eff(&format!("brif {cmp}, block2, block3"));
            f.block(2, &[]);
            let ad = f.index_addr(&p, &i);
            let x = f.op(&format!("load.{ty} notrap aligned {ad}"));
            let len = f.rng.below(4) + 1;
            let x = f.chain(&x, len, &[]);
            let cc = f.cc();
            let hit = f.op(&format!("icmp {cc} {x}, {b}"));
            let w = f.rng.small();
            let wc = f.c(w);
            let zero = f.c(0);
            let inc = f.op(&format!("select {hit}, {wc}, {zero}"));
            let cnt2 = f.op(&format!("iadd {cnt}, {inc}"));
            let one = f.c(1);
            let i2 = f.op(&format!("iadd {i}, {one}"));
            f.eff(&format!("jump block1({i2}, {cnt2})"));
            f.block(3, &[]);
            let kc = f.c(k);
            let r = f.op(&format!("imul {cnt}, {kc}"));
            let r = f.calls(&r, &p, &a, &b);
            f.eff(&format!("return {r}"));
        }
        Tmpl::Chain => {
            let (p, a, b) = (f.val(), f.val(), f.val());
            f.block(0, &[(&p, "i64"), (&a, ty), (&b, ty)]);
            let s1 = f.rng.range(0, 7);
            let s2 = f.rng.range(0, 7);
            let x = f.load(&p, s1);
            let y = f.load(&p, s2);
            let xa = f.op(&format!("iadd {x}, {a}"));
            let len = f.rng.below(10) + 6;
            let acc = f.chain(&xa, len, &[&a, &b, &y]);
            let kc = f.c(k);
            let acc = f.op(&format!("iadd {acc}, {kc}"));
            let cc = f.cc();
            let cmp = f.op(&format!("icmp {cc} {a}, {b}"));
            f.eff(&format!("brif {cmp}, block1, block2"));
            f.block(1, &[]);
            let c = f.rng.small();
            let cv = f.c(c);
            let u = f.op(&format!("imul {acc}, {cv}"));
            let u = f.calls(&u, &p, &u, &b);
            f.eff(&format!("jump block3({u})"));
            f.block(2, &[]);
            let u2 = f.op(&format!("isub {acc}, {b}"));
            f.eff(&format!("jump block3({u2})"));
            let r = f.val();
            f.block(3, &[(&r, ty)]);
            let s3 = f.rng.range(0, 7);
            f.store(&r, &p, s3);
            f.eff(&format!("return {r}"));
        }
        Tmpl::Clamp => {
            let (p, a, b) = (f.val(), f.val(), f.val());
            f.block(0, &[(&p, "i64"), (&a, ty), (&b, ty)]);
            let lo = f.rng.range(1, 40);
            let hi = f.rng.range(50, 99);
            let lov = f.c(lo);
            let hiv = f.c(hi);
            let x = f.op(&format!("iadd {a}, {b}"));
            let len = f.rng.below(4) + 1;
            let x = f.chain(&x, len, &[&a]);
            let c1 = f.op(&format!("icmp slt {x}, {lov}"));
            f.eff(&format!("brif {c1}, block1, block2"));
            f.block(1, &[]);
            let r1 = f.op(&format!("isub {lov}, {x}"));
            f.eff(&format!("jump block5({r1})"));
            f.block(2, &[]);
            let c2 = f.op(&format!("icmp sgt {x}, {hiv}"));
            f.eff(&format!("brif {c2}, block3, block4"));
            f.block(3, &[]);
            let r3 = f.op(&format!("isub {x}, {hiv}"));
            let r3 = f.calls(&r3, &p, &r3, &b);
            f.eff(&format!("jump block5({r3})"));
            f.block(4, &[]);
            let kc = f.c(k);
            let r4 = f.op(&format!("imul {x}, {kc}"));
            let len = f.rng.below(4) + 2;
            let r4 = f.chain(&r4, len, &[&b]);
            f.eff(&format!("jump block5({r4})"));
            let r = f.val();
            f.block(5, &[(&r, ty)]);
            let s = f.rng.range(0, 7);
            f.store(&r, &p, s);
            let s2 = f.rng.range(0, 7);
            let y = f.load(&p, s2);
            let out = f.op(&format!("iadd {r}, {y}"));
            f.eff(&format!("return {out}"));
        }
        Tmpl::Poly => {
            let (p, a, b) = (f.val(), f.val(), f.val());
            f.block(0, &[(&p, "i64"), (&a, ty), (&b, ty)]);
            let deg = f.rng.below(6) + 4;
            let c0 = f.c(k);
            let mut acc = c0;
            for _ in 0..deg {
                let m = f.op(&format!("imul {acc}, {a}"));
                let c = f.rng.small();
                let cv = f.c(c);
                acc = f.op(&format!("iadd {m}, {cv}"));
            }
            let z = f.c(0);
            let cmp = f.op(&format!("icmp eq {b}, {z}"));
            f.eff(&format!("brif {cmp}, block1, block2"));
            f.block(1, &[]);
            f.eff(&format!("jump block3({acc})"));
            f.block(2, &[]);
            let s = f.rng.range(0, 7);
            let y = f.load(&p, s);
            let r = f.op(&format!("bxor {acc}, {y}"));
            let r = f.calls(&r, &p, &r, &b);
            f.eff(&format!("jump block3({r})"));
            let r = f.val();
            f.block(3, &[(&r, ty)]);
            let s = f.rng.range(0, 7);
            f.store(&r, &p, s);
            f.eff(&format!("return {r}"));
        }
        Tmpl::Fib => {
            let n = f.val();
            f.block(0, &[(&n, ty)]);
            let m = f.c(15);
            let x = f.op(&format!("band {n}, {m}"));
            let two = f.c(2);
            let c = f.op(&format!("icmp ult {x}, {two}"));
            f.eff(&format!("brif {c}, block1, block2"));
            f.block(1, &[]);
            let kc = f.c(k);
            let r = f.op(&format!("iadd {x}, {kc}"));
            f.eff(&format!("return {r}"));
            f.block(2, &[]);
            let one = f.c(1);
            let a = f.op(&format!("isub {x}, {one}"));
            let fa = f.op(&format!("call fn0({a})"));
            let b = f.op(&format!("isub {x}, {two}"));
            let fb = f.op(&format!("call fn0({b})"));
            f.calls += 2;
            let s = f.op(&format!("iadd {fa}, {fb}"));
            f.eff(&format!("return {s}"));
        }
        Tmpl::Fact => {
            let n = f.val();
            f.block(0, &[(&n, ty)]);
            let m = f.c(15);
            let x = f.op(&format!("band {n}, {m}"));
            let one = f.c(1);
            let c = f.op(&format!("icmp ule {x}, {one}"));
            f.eff(&format!("brif {c}, block1, block2"));
            f.block(1, &[]);
            let kc = f.c(k);
            f.eff(&format!("jump block3({kc})"));
            f.block(2, &[]);
            let y = f.op(&format!("isub {x}, {one}"));
            let fy = f.op(&format!("call fn0({y})"));
            f.calls += 1;
            let r = f.op(&format!("imul {x}, {fy}"));
            f.eff(&format!("jump block3({r})"));
            let r = f.val();
            f.block(3, &[(&r, ty)]);
            f.eff(&format!("return {r}"));
        }
    }
    let mut text = String::new();
    let params = match spec.tmpl.shape() {
        Shape::Unary => ty.to_string(),
        Shape::PtrN => format!("i64, {ty}"),
        Shape::PtrAB => format!("i64, {ty}, {ty}"),
    };
    let _ = writeln!(text, "function %{name}({params}) -> {ty} system_v {{");
    for (j, (_, shape)) in f.callees.iter().enumerate() {
        let _ = writeln!(text, "    sig{j} = {}", sig_text(*shape, ty));
    }
    for (j, (cname, _)) in f.callees.iter().enumerate() {
        let _ = writeln!(text, "    fn{j} = colocated %{cname} sig{j}");
    }
    if !f.callees.is_empty() {
        text.push('\n');
    }
    text.push_str(&f.body);
    text.push_str("}\n\n");
    (text, f.insts, f.blocks, f.calls)
}

fn pick_template(rng: &mut Rng) -> Tmpl {
    let total: u32 = TEMPLATES.iter().map(|&(_, w)| w).sum();
    let mut x = rng.below(total as usize) as u32;
    for &(t, w) in TEMPLATES {
        if x < w {
            return t;
        }
        x -= w;
    }
    TEMPLATES[0].0
}

/// Choose callees for a new specialisation over `set` of machine type `mt`.
fn pick_callees(
    rng: &mut Rng,
    records: &[Record],
    by_mt: &[Vec<usize>; 2],
    mt: Mt,
    set: TySet,
    count: usize,
) -> Vec<Callee> {
    let pool = &by_mt[mt as usize];
    let mut out = Vec::new();
    if pool.is_empty() {
        return out;
    }
    for _ in 0..count {
        // Prefer the callee's instance with the caller's source type(s).
        let mut found = None;
        for _ in 0..24 {
            let r = pool[rng.below(pool.len())];
            let ok = match set {
                TySet::Prefix(k) => matches!(records[r].set, TySet::Prefix(ck) if ck >= k),
                TySet::Single(t) => records[r].set.contains(t),
            };
            if ok {
                found = Some(Callee::PerType(r));
                break;
            }
        }
        // Otherwise one fixed function for every instance.
        let c = found.unwrap_or_else(|| {
            let r = pool[rng.below(pool.len())];
            Callee::Fixed(r, records[r].set.first())
        });
        out.push(c);
    }
    out
}

/// Generate a module. Deterministic: the same options give byte-identical output.
pub fn generate(opts: &GenOptions) -> GenOutput {
    let mut text = Vec::new();
    let mut out = generate_to(opts, &mut text).expect("writing to memory does not fail");
    out.text = String::from_utf8(text).expect("generated text is UTF-8");
    out
}

/// [`generate`], writing each function to `w` as it is made (the returned `text` is empty):
/// memory stays in proportion to the functions' records, not to the text.
pub fn generate_to(opts: &GenOptions, w: &mut dyn std::io::Write) -> std::io::Result<GenOutput> {
    let n = opts.functions;
    let mut rng = Rng::new(opts.seed ^ 0x6D65_7267_656C_6966);
    let near_target = ((opts.near_ratio.clamp(0.0, 1.0) * n as f64).round() as usize).min(n);
    let edit_target =
        ((opts.edit_ratio.clamp(0.0, 1.0) * n as f64).round() as usize).min(n - near_target);
    let dup_target = ((opts.dup_ratio.clamp(0.0, 1.0) * n as f64).round() as usize)
        .min(n - near_target - edit_target);
    let mut out = GenOutput {
        text: String::new(),
        duplicates: 0,
        near_duplicates: 0,
        edited_duplicates: 0,
        functions: 0,
        clif_insts: 0,
        blocks: 0,
        calls: 0,
    };
    let mut records: Vec<Record> = Vec::new();
    // Records that may be called (depth <= MAX_CALLEE_DEPTH), by machine type.
    let mut by_mt: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    let key_of = |id: usize| 100 + 7 * id as i64;

    while out.functions < n {
        let rem = n - out.functions;
        let rem_near = near_target.saturating_sub(out.near_duplicates);
        let rem_edit = edit_target.saturating_sub(out.edited_duplicates);
        let rem_dup = dup_target.saturating_sub(out.duplicates);
        let id = records.len();

        // A near-duplicate: an earlier instantiation with only its key changed, and with
        // edited instructions for a structural one.
        let near = rem_near > 0 && rng.f64() * rem as f64 <= rem_near as f64;
        let edit = !near && rem_edit > 0 && rng.f64() * rem as f64 <= rem_edit as f64;
        if (near || edit) && !records.is_empty() {
            let base = rng.below(records.len());
            let b = &records[base];
            let t = b.set.first();
            let mut spec = b.spec.clone();
            spec.key = key_of(id);
            spec.edits = edit.then(|| rng.next());
            spec.callees = spec
                .callees
                .iter()
                .map(|&c| match c {
                    Callee::PerType(r) => Callee::Fixed(r, t),
                    c => c,
                })
                .collect();
            let depth = b.depth;
            records.push(Record {
                spec,
                set: TySet::Single(t),
                depth,
            });
            let (text, insts, blocks, calls) = render(&records, id, t);
            w.write_all(text.as_bytes())?;
            out.clif_insts += insts;
            out.blocks += blocks;
            out.calls += calls;
            out.functions += 1;
            if edit {
                out.edited_duplicates += 1;
            } else {
                out.near_duplicates += 1;
            }
            continue;
        }

        // Group size: k instances give k - 1 duplicates.
        let avail = rem.saturating_sub(rem_near + rem_edit).max(1);
        let mut size = 1usize;
        if rem_dup > 0 {
            let q = (rem_dup as f64 / avail as f64).min(0.99);
            let kmin = ((1.0 / (1.0 - q)).ceil() as usize).max(2);
            let cap = I64_TYPES.len().min(rem_dup + 1).min(rem);
            let k = (kmin + rng.below(3)).min(cap).max(2.min(cap));
            if k >= 2 {
                let p = q / ((k - 1) as f64 * (1.0 - q));
                if avail <= rem_dup + 1 || rng.f64() < p {
                    size = k;
                }
            }
        }
        let mt = if size <= I32_TYPES.len() && rng.below(5) < 2 {
            Mt::I32
        } else {
            Mt::I64
        };
        let set = if size > 1 {
            TySet::Prefix(size)
        } else {
            TySet::Single(rng.below(mt.names().len()))
        };
        let tmpl = pick_template(&mut rng);
        let ncalls = if tmpl.self_recursive() {
            0
        } else {
            match rng.below(20) {
                0..=7 => 0,
                8..=17 => 1,
                _ => 2,
            }
        };
        let callees = pick_callees(&mut rng, &records, &by_mt, mt, set, ncalls);
        let depth = callees
            .iter()
            .map(|&c| match c {
                Callee::PerType(r) | Callee::Fixed(r, _) => records[r].depth + 1,
            })
            .max()
            .unwrap_or(0);
        let spec = Spec {
            tmpl,
            mt,
            key: key_of(id),
            seed: rng.next(),
            callees,
            edits: None,
        };
        records.push(Record { spec, set, depth });
        if depth <= MAX_CALLEE_DEPTH {
            by_mt[mt as usize].push(id);
        }
        for t in set.members() {
            let (text, insts, blocks, calls) = render(&records, id, t);
            w.write_all(text.as_bytes())?;
            out.clif_insts += insts;
            out.blocks += blocks;
            out.calls += calls;
            out.functions += 1;
        }
        out.duplicates += size - 1;
    }
    Ok(out)
}

/// Call-graph shapes of identical (or, `ChainConst`, near-identical) small functions, for
/// measuring how merging scales with the shape of the call graph (`mergelift gen --shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallShape {
    /// `%c0 -> %c1 -> ... -> %c{N-1}`: equal, except the last, which makes no call. No two
    /// are equal (each is as far from the end), which refinement learns one link at a time.
    Chain,
    /// `Chain` with the constant `i % 7` in function `i`: near-duplicates, none equal.
    ChainConst,
    /// A ring of equal functions, each calling the next: all merge.
    Ring,
    /// Half leaves, equal; half callers of two leaves each, equal: all but two merge.
    Star,
    /// A binary call tree (`%c{i}` calls `%c{2i+1}` and `%c{2i+2}`, where they exist): the
    /// functions of one depth with whole subtrees below merge.
    Tree,
    /// Wide fan-in: `N - 1` equal callers of one function.
    FanIn,
    /// Wide fan-out: dispatchers calling 64 functions each, all leaves equal.
    FanOut,
}

impl CallShape {
    /// Every shape, with its `--shape` name.
    pub const ALL: [(&'static str, CallShape); 7] = [
        ("chain", CallShape::Chain),
        ("chain-const", CallShape::ChainConst),
        ("ring", CallShape::Ring),
        ("star", CallShape::Star),
        ("tree", CallShape::Tree),
        ("fan-in", CallShape::FanIn),
        ("fan-out", CallShape::FanOut),
    ];

    /// The shape named `name`.
    pub fn parse(name: &str) -> Option<CallShape> {
        CallShape::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, s)| s)
    }
}

/// Write a module of `n` functions of `shape` to `w` (in CLIF text); returns the number of
/// calls.
pub fn generate_shape(
    shape: CallShape,
    n: usize,
    w: &mut dyn std::io::Write,
) -> std::io::Result<usize> {
    const FAN: usize = 64;
    let mut calls = 0;
    for i in 0..n {
        let (callees, k): (Vec<usize>, usize) = match shape {
            CallShape::Chain => ((i + 1 < n).then_some(i + 1).into_iter().collect(), 1),
            CallShape::ChainConst => ((i + 1 < n).then_some(i + 1).into_iter().collect(), i % 7),
            CallShape::Ring => (vec![(i + 1) % n], 1),
            CallShape::Star => {
                let leaves = n.div_ceil(2);
                if i < leaves {
                    (vec![], 1)
                } else {
                    let j = 2 * (i - leaves);
                    (vec![j % leaves, (j + 1) % leaves], 1)
                }
            }
            CallShape::Tree => (
                [2 * i + 1, 2 * i + 2]
                    .into_iter()
                    .filter(|&c| c < n)
                    .collect(),
                1,
            ),
            CallShape::FanIn => ((i > 0).then_some(0).into_iter().collect(), 1),
            CallShape::FanOut => {
                let hubs = n.div_ceil(FAN + 1);
                if i < hubs {
                    let first = hubs + i * FAN;
                    ((first..(first + FAN).min(n)).collect(), 1)
                } else {
                    (vec![], 1)
                }
            }
        };
        calls += callees.len();
        writeln!(w, "function %c{i}(i64) -> i64 {{")?;
        if !callees.is_empty() {
            writeln!(w, "    sig0 = (i64) -> i64")?;
        }
        for (j, c) in callees.iter().enumerate() {
            writeln!(w, "    fn{j} = %c{c} sig0")?;
        }
        writeln!(w, "block0(v0: i64):")?;
        writeln!(w, "    v100 = iconst.i64 {k}")?;
        writeln!(w, "    v1 = iadd v0, v100")?;
        let mut v = 1;
        for j in 0..callees.len() {
            writeln!(w, "    v{} = call fn{j}(v{v})", v + 1)?;
            v += 1;
        }
        writeln!(w, "    return v{v}\n}}\n")?;
    }
    Ok(calls)
}
