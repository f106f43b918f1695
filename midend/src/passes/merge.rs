//! MergeFunctions over LIR (seeds 000 and 001, LLVM's design), and two steps beyond it.
//!
//! 1. **Hash filter**: a cheap hash (signature, block count, opcode sequence in CFG order).
//!    Functions with a unique hash are never compared; the hash is the first key of the order.
//!    The same walk produces a *token stream* per function (what the comparator compares, up
//!    to which function a direct call calls) and the direct callees in the comparator's order.
//!    Functions are classed into *shapes* on the way: a stream is compared (`memcmp`) only with
//!    the first stream of each shape under the same hashes, and only those first streams are
//!    kept. Functions are independent here, so a large module is walked on several threads
//!    (`MergeOptions::threads`); the result does not depend on their number.
//! 2. **FunctionComparator**: a total order broken into small comparisons (`cmp_signature`,
//!    `cmp_types`, `cmp_values` by serial number of first appearance, `cmp_constants`,
//!    `cmp_blocks` in CFG order from the entry, `cmp_operations`, `cmp_memory`, `cmp_callee`).
//! 3. **Beyond LLVM**: callees are compared by *equivalence class*, found by partition
//!    refinement over the call graph (as GCC's IPA-ICF and lld's ICF do): candidates are first
//!    split by exact token-stream equality (equal streams ⇔ the comparator finds the functions
//!    equal up to their callees), then classes split where callee classes differ, until
//!    stable. Self-recursive functions (fact0/fact1) and mutually recursive groups (ping/pong)
//!    merge. Taken addresses (`func_addr`, data symbols) compare by identity, so observable
//!    pointers never change.
//! 4. **FnTree and Deferred**: a sorted set of unique functions with O(log N) lookup (strong
//!    hash, then the comparator; two members of one refined class are known equal without a
//!    walk), and a worklist; strong functions first, then preemptible ones; when G merges into
//!    F, G's callers leave FnTree and return to Deferred.
//! 5. **Merging**: G local with an insignificant address: every use is replaced by F and G is
//!    deleted. G exported with an insignificant address: G becomes an alias (its name resolves
//!    to F's code; no code of its own). G's address significant, or G preemptible: G becomes a
//!    thunk (a tail call to F when the calling convention allows, else call and return), and
//!    its direct callers (unless G is preemptible) call F. A class whose best survivor is
//!    preemptible is left alone (LLVM would need a private copy; we stay conservative).

use crate::hash::{finish, HashMap};
use crate::lir::*;
use crate::pass::{Pass, Stats};
use crate::Error;
use core::cmp::Ordering;
use core::hash::{Hash, Hasher};
use cranelift_entity::{EntityRef, SecondaryMap};
use rustc_hash::FxHasher;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub struct Merge;

impl Pass for Merge {
    fn name(&self) -> &'static str {
        "merge"
    }
    fn run(&mut self, module: &mut Module, stats: &mut Stats) -> Result<(), Error> {
        let r = merge_functions(module);
        stats.add("merged", r.merged as u64);
        stats.add("merge.replaced", r.replaced as u64);
        stats.add("merge.aliased", r.aliased as u64);
        stats.add("merge.thunked", r.thunked as u64);
        stats.add("merge.compared", r.comparisons);
        stats.add("merge.classes_rounds", r.rounds as u64);
        for (phase, d) in r.times {
            stats.add_time(phase, d);
        }
        Ok(())
    }
}

/// What one run of the pass did.
#[derive(Default, Debug, Clone)]
pub struct MergeReport {
    pub merged: usize,
    pub replaced: usize,
    pub aliased: usize,
    pub thunked: usize,
    pub comparisons: u64,
    pub rounds: usize,
    /// (merged, survivor) pairs, for validation.
    pub pairs: Vec<(FuncId, FuncId)>,
    /// Wall time of each phase: the walk (hashes and shapes), refinement, FnTree and
    /// merging, redirecting calls.
    pub times: Vec<(&'static str, Duration)>,
}

impl MergeReport {
    /// Record the time since `clock` under `phase` and restart the clock.
    fn lap(&mut self, phase: &'static str, clock: &mut Instant) {
        let now = Instant::now();
        self.times.push((phase, now - *clock));
        *clock = now;
    }
}

/// Scratch tables of the hashing walk, reused across functions.
#[derive(Default)]
pub struct HashScratch {
    reg_sn: Vec<u32>,
    block_sn: Vec<u32>,
    order: Vec<Block>,
}

/// What the hashing walk collects besides the hashes.
#[derive(Default)]
pub struct WalkOut {
    /// Direct calls: callee symbol and call instruction, in the comparator's walk order.
    pub callees: Vec<(Symbol, Inst)>,
    /// Symbols used other than as a direct callee (taken addresses, data references).
    pub taken: Vec<Symbol>,
    /// The token streams of the functions walked, one after another.
    pub tokens: Vec<u32>,
}

#[inline]
fn serial(map: &mut [u32], next: &mut u32, r: Reg) -> u32 {
    let x = &mut map[r.index()];
    if *x == 0 {
        *x = *next;
        *next += 1;
    }
    *x
}

/// A `Hasher` that records what is hashed instead of mixing it: every `write_*` appends
/// whole words to a token stream. Derived `Hash` writes prefix-free streams (lengths before
/// contents, discriminants before fields), so two values of one type give equal token
/// streams exactly when they are equal.
struct Tokens<'a>(&'a mut Vec<u32>);

impl Hasher for Tokens<'_> {
    fn finish(&self) -> u64 {
        0 // never used: the stream itself is the result
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.push(bytes.len() as u32);
        for c in bytes.chunks(4) {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            self.0.push(u32::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.0.push(x as u32)
    }
    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.0.push(x as u32)
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.0.push(x)
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0.extend_from_slice(&[x as u32, (x >> 32) as u32])
    }
    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64)
    }
}

/// Token kinds: the top four bits of an operand's first token (a register operand is its
/// serial number alone, kind 0).
const TK_BIG_REG: u32 = 0xF << 28;
const TK_IMM: u32 = 1 << 28;
const TK_BLOCK: u32 = 2 << 28;
const TK_MEM: u32 = 3 << 28;
const TK_CALLEE: u32 = 4 << 28;
const TK_SYM: u32 = 5 << 28;
const TK_STACK: u32 = 6 << 28;
const TK_PRED: u32 = 7 << 28;
const TK_ARG: u32 = 8 << 28;

#[inline]
fn push_reg(t: &mut Vec<u32>, sn: u32) {
    if sn < 1 << 28 {
        t.push(sn)
    } else {
        t.extend_from_slice(&[TK_BIG_REG, sn])
    }
}

fn hash_memflags(f: &Function, r: MemFlagsRef, h: &mut Tokens) {
    let x = f.memflags[r];
    match x.region {
        None => h.0.push(x.bits as u32 | (x.trap as u32) << 8),
        Some(g) => h.0.extend_from_slice(&[
            x.bits as u32 | (x.trap as u32) << 8 | 1 << 16,
            f.regions[g].id,
        ]),
    }
}

/// A signature: one token for the convention and the counts, one per parameter.
fn push_sig(sig: &Signature, t: &mut Vec<u32>) {
    let (np, nr) = (sig.params.len(), sig.returns.len());
    if np < 0xFFF && nr < 0xFFF {
        t.push(sig.call_conv as u32 | (np as u32) << 8 | (nr as u32) << 20);
    } else {
        t.extend_from_slice(&[sig.call_conv as u32 | 0xFFF << 8, np as u32, nr as u32]);
    }
    for p in sig.params.iter().chain(&sig.returns) {
        let (tag, extra) = match p.purpose {
            Purpose::Normal => (0, None),
            Purpose::VmCtx => (1, None),
            Purpose::StructReturn => (2, None),
            Purpose::StructArgument(n) => (3, Some(n)),
        };
        t.push(p.ty.raw() as u32 | (p.ext as u32) << 16 | tag << 18);
        if let Some(n) = extra {
            t.push(n);
        }
    }
}

fn push_i64(t: &mut Vec<u32>, kind: u32, x: i64) {
    if x == x as i32 as i64 {
        t.extend_from_slice(&[kind, x as u32]);
    } else {
        t.extend_from_slice(&[kind | 1, x as u32, (x >> 32) as u32]);
    }
}

fn hash_global(f: &Function, g: GlobalRef, h: &mut Tokens) {
    match f.globals[g] {
        GlobalData::VmCtx => 0u8.hash(h),
        GlobalData::Load {
            base,
            offset,
            ty,
            flags,
        } => {
            (1u8, offset, ty.raw()).hash(h);
            hash_memflags(f, flags, h);
            hash_global(f, base, h);
        }
        GlobalData::IAddImm { base, offset, ty } => {
            (2u8, offset, ty.raw()).hash(h);
            hash_global(f, base, h);
        }
        GlobalData::Symbol {
            sym,
            offset,
            colocated,
            tls,
        } => (3u8, sym, offset, colocated, tls).hash(h),
    }
}

/// One walk over a function that visits blocks and values in the order `FunctionComparator`
/// does (blocks by first reference from the entry, which is a CFG order; registers by first
/// appearance, results before operands). It appends to `out`:
/// - `tokens`: everything the comparator looks at except *which* function a direct call
///   calls, registers and blocks by serial number, as a decodable token stream: two functions
///   have equal streams exactly when the comparator finds them equal up to their callees;
/// - `callees`: the direct calls in walk order (the comparator's order), so the classes of
///   callees can be compared without a second walk of the body;
/// - `taken`: symbols used other than as a direct callee.
///
/// It returns two hashes:
/// - `weak`: signature, reachable block count and opcode sequence: the cheap filter of seed
///   001. Functions with a unique weak hash are never compared.
/// - `local`: the hash of the token stream.
pub fn function_hashes(f: &Function, s: &mut HashScratch, out: &mut WalkOut) -> (u64, u64) {
    let mut weak = FxHasher::default();
    f.sig.hash(&mut weak);
    let mut weak = weak.finish();
    let start = out.tokens.len();
    let t = &mut out.tokens;
    push_sig(&f.sig, t);
    match f.stack_limit {
        Some(g) => {
            t.push(1);
            hash_global(f, g, &mut Tokens(t));
        }
        None => t.push(0),
    }
    if let Some(entry) = f.entry() {
        t.push(1);
        s.reg_sn.clear();
        s.reg_sn.resize(f.regs.len(), 0);
        s.block_sn.clear();
        s.block_sn.resize(f.blocks.len(), 0);
        s.order.clear();
        let (mut next_b, mut next_r) = (2u32, 1u32);
        s.block_sn[entry.index()] = 1;
        s.order.push(entry);
        // The opcode sequence for the weak hash, eight opcodes to a word.
        let (mut opcodes, mut pending) = (0u64, 0u32);
        let mut k = 0;
        while k < s.order.len() {
            let b = s.order[k];
            k += 1;
            let insts = f.block_insts(b);
            t.push(insts.len() as u32);
            for &i in insts {
                let d = &f.insts[i];
                opcodes = opcodes << 8 | d.opcode as u64;
                pending += 1;
                if pending == 8 {
                    weak = mix(weak, opcodes);
                    (opcodes, pending) = (0, 0);
                }
                // One head word: opcode, type, result and operand counts (a long form, type
                // field 0xFF, when they do not fit). The top bit says the instruction has one
                // result, of its own type, a register not seen before: its serial number is
                // the next one, and no result word follows (the common case in SSA form).
                let (ty, nres, nops) = (d.ty.raw() as u32, d.results.len, d.operands.len);
                let results = f.results(i);
                let fresh = match results {
                    [r] => s.reg_sn[r.index()] == 0 && f.reg_type(*r) == d.ty,
                    _ => false,
                };
                if ty < 0xFF && nres < 1 << 4 && nops < 1 << 11 {
                    t.push(
                        d.opcode as u32 | ty << 8 | nres << 16 | nops << 20 | (fresh as u32) << 31,
                    );
                } else {
                    t.extend_from_slice(&[
                        d.opcode as u32 | 0xFF << 8 | (fresh as u32) << 31,
                        ty,
                        nres,
                        nops,
                    ]);
                }
                let format = d.opcode.format();
                match format {
                    Format::Load | Format::Store => {
                        hash_memflags(f, MemFlagsRef::from_u32(d.aux), &mut Tokens(t))
                    }
                    Format::Call => {
                        push_sig(&f.sigs[SigRef::from_u32(d.aux)], t);
                        if d.opcode == Opcode::TryCall {
                            f.exn_tables[ExnTable::from_u32(d.aux2)].hash(&mut Tokens(t));
                        }
                    }
                    Format::Addr if d.opcode == Opcode::FuncAddr => {
                        push_sig(&f.sigs[SigRef::from_u32(d.aux)], t)
                    }
                    Format::Trap | Format::CondTrap => t.push(d.aux),
                    Format::GlobalValue => {
                        hash_global(f, GlobalRef::from_u32(d.aux), &mut Tokens(t))
                    }
                    Format::Opaque => {
                        let o = &f.opaques[OpaqueRef::from_u32(d.aux)];
                        (&o.name, &o.imms, o.effects).hash(&mut Tokens(t));
                        t.push(d.aux2.min(1));
                        if d.aux2 != 0 {
                            hash_memflags(f, MemFlagsRef::from_u32(d.aux2 - 1), &mut Tokens(t));
                        }
                    }
                    _ => {}
                }
                if fresh {
                    serial(&mut s.reg_sn, &mut next_r, results[0]);
                } else {
                    for &r in results {
                        let sn = serial(&mut s.reg_sn, &mut next_r, r);
                        let ty = f.reg_type(r).raw() as u32;
                        if sn < 1 << 16 {
                            t.push(ty | sn << 16);
                        } else {
                            t.extend_from_slice(&[ty, sn]);
                        }
                    }
                }
                let ops = &f.operand_pool[d.operands.range()];
                let mut ops_iter = ops.iter();
                if format == Format::Call {
                    if let Some(Operand::Sym(sym, off)) = ops.first() {
                        // The callee: compared by class, so only its position and offset here.
                        out.callees.push((*sym, i));
                        push_i64(t, TK_CALLEE, *off);
                        ops_iter.next();
                    }
                }
                for &op in ops_iter {
                    match op {
                        Operand::Reg(r) => {
                            let sn = serial(&mut s.reg_sn, &mut next_r, r);
                            push_reg(t, sn)
                        }
                        Operand::Int(x) => push_i64(t, TK_IMM, x),
                        Operand::F32(x) => t.extend_from_slice(&[TK_IMM | 2, x]),
                        Operand::F64(x) => {
                            t.extend_from_slice(&[TK_IMM | 3, x as u32, (x >> 32) as u32])
                        }
                        Operand::Block(bb) => {
                            let x = &mut s.block_sn[bb.index()];
                            if *x == 0 {
                                *x = next_b;
                                next_b += 1;
                                s.order.push(bb);
                            }
                            if *x < (1 << 28) - 1 {
                                t.push(TK_BLOCK | *x);
                            } else {
                                t.extend_from_slice(&[TK_BLOCK | ((1 << 28) - 1), *x]);
                            }
                        }
                        Operand::Mem {
                            base,
                            index,
                            scale,
                            disp,
                        } => {
                            t.extend_from_slice(&[
                                TK_MEM
                                    | (scale as u32) << 8
                                    | (base.is_some() as u32) << 1
                                    | index.is_some() as u32,
                                disp as u32,
                            ]);
                            if let Some(x) = base.expand() {
                                let sn = serial(&mut s.reg_sn, &mut next_r, x);
                                push_reg(t, sn);
                            }
                            if let Some(x) = index.expand() {
                                let sn = serial(&mut s.reg_sn, &mut next_r, x);
                                push_reg(t, sn);
                            }
                        }
                        Operand::Sym(sym, off) => {
                            out.taken.push(sym);
                            push_i64(t, TK_SYM, off);
                            t.push(sym.as_u32());
                        }
                        Operand::Stack(so, off) => {
                            let sd = f.stack_objs[so];
                            t.extend_from_slice(&[
                                TK_STACK,
                                so.as_u32(),
                                sd.size,
                                sd.align_shift as u32,
                                off as u32,
                            ]);
                        }
                        Operand::Pred(c) => t.push(TK_PRED | c as u32),
                        Operand::Arg(n) => t.extend_from_slice(&[TK_ARG, n]),
                    }
                }
            }
        }
        weak = mix(
            mix(weak, opcodes),
            pending as u64 | (s.order.len() as u64) << 8,
        );
    } else {
        t.push(0);
    }
    (finish(weak), finish(hash_words(&out.tokens[start..])))
}

#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// A hash of a token stream, four independent lanes so the multiplies overlap (the stream
/// is long: a few words per instruction). Only a filter: equal hashes are confirmed by
/// comparing the streams.
fn hash_words(words: &[u32]) -> u64 {
    let mut lanes = [
        0x243f_6a88_85a3_08d3u64,
        0x1319_8a2e_0370_7344,
        0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    ];
    let mut chunks = words.chunks_exact(8);
    for c in &mut chunks {
        for (j, lane) in lanes.iter_mut().enumerate() {
            let w = c[2 * j] as u64 | (c[2 * j + 1] as u64) << 32;
            *lane = mix(*lane, w);
        }
    }
    for (j, &w) in chunks.remainder().iter().enumerate() {
        lanes[j & 3] = mix(lanes[j & 3], w as u64 | 1 << 32);
    }
    let [a, b, c, d] = lanes;
    mix(mix(mix(mix(words.len() as u64, a), b), c), d)
}

/// The cheap function hash (seed 001): signature, block count and the opcode sequence in CFG
/// order.
pub fn function_hash(f: &Function) -> u64 {
    function_hashes(f, &mut HashScratch::default(), &mut WalkOut::default()).0
}

/// The total order of functions: `compare(f, g)` walks both bodies in CFG order.
pub struct FunctionComparator<'m> {
    pub module: &'m Module,
    /// Equivalence class of each defined function (callees compare by class).
    pub class: &'m SecondaryMap<FuncId, u32>,
    sn_l: SecondaryMap<Reg, u32>,
    sn_r: SecondaryMap<Reg, u32>,
    bn_l: SecondaryMap<Block, u32>,
    bn_r: SecondaryMap<Block, u32>,
    next_sn: u32,
    next_bn: u32,
    /// Block pairs in the order they were first associated (the walk order).
    pub block_pairs: Vec<(Block, Block)>,
    /// Register pairs associated (for the merge validator).
    pub reg_pairs: Vec<(Reg, Reg)>,
    /// Compare direct callees only by position and offset, not by class (the first, local
    /// stage of partition refinement; callee classes are compared apart).
    modulo_callees: bool,
}

/// The reusable tables of a comparator.
pub struct ComparatorState {
    sn_l: SecondaryMap<Reg, u32>,
    sn_r: SecondaryMap<Reg, u32>,
    bn_l: SecondaryMap<Block, u32>,
    bn_r: SecondaryMap<Block, u32>,
    block_pairs: Vec<(Block, Block)>,
    reg_pairs: Vec<(Reg, Reg)>,
}

fn cmp<T: Ord>(a: T, b: T) -> Ordering {
    a.cmp(&b)
}

impl<'m> FunctionComparator<'m> {
    /// Keep the comparator's tables (their capacity) for reuse with another borrow.
    pub fn into_state(self) -> ComparatorState {
        ComparatorState {
            sn_l: self.sn_l,
            sn_r: self.sn_r,
            bn_l: self.bn_l,
            bn_r: self.bn_r,
            block_pairs: self.block_pairs,
            reg_pairs: self.reg_pairs,
        }
    }

    /// Compare direct callees by position and offset only, not by class (what the token
    /// streams of `function_hashes` encode).
    pub fn set_modulo_callees(&mut self, on: bool) {
        self.modulo_callees = on;
    }

    /// A comparator reusing tables from `into_state`.
    pub fn from_state(
        module: &'m Module,
        class: &'m SecondaryMap<FuncId, u32>,
        s: ComparatorState,
    ) -> Self {
        FunctionComparator {
            module,
            class,
            sn_l: s.sn_l,
            sn_r: s.sn_r,
            bn_l: s.bn_l,
            bn_r: s.bn_r,
            next_sn: 0,
            next_bn: 0,
            block_pairs: s.block_pairs,
            reg_pairs: s.reg_pairs,
            modulo_callees: false,
        }
    }

    pub fn new(module: &'m Module, class: &'m SecondaryMap<FuncId, u32>) -> Self {
        FunctionComparator {
            module,
            class,
            sn_l: SecondaryMap::new(),
            sn_r: SecondaryMap::new(),
            bn_l: SecondaryMap::new(),
            bn_r: SecondaryMap::new(),
            next_sn: 0,
            next_bn: 0,
            block_pairs: Vec::new(),
            reg_pairs: Vec::new(),
            modulo_callees: false,
        }
    }

    fn reset(&mut self) {
        self.sn_l.clear();
        self.sn_r.clear();
        self.bn_l.clear();
        self.bn_r.clear();
        self.next_sn = 0;
        self.next_bn = 0;
        self.block_pairs.clear();
        self.reg_pairs.clear();
    }

    /// Compare two functions: Less, Equal or Greater, a total order.
    pub fn compare(&mut self, l: &Function, r: &Function) -> Ordering {
        self.reset();
        self.cmp_signature(l, r).then_with(|| self.cmp_bodies(l, r))
    }

    /// Signature and attributes: calling convention, parameter and return types, extensions
    /// and purposes, the stack-limit chain.
    fn cmp_signature(&self, l: &Function, r: &Function) -> Ordering {
        cmp(&l.sig, &r.sig).then_with(|| match (l.stack_limit, r.stack_limit) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => self.cmp_global(l, a, r, b),
        })
    }

    fn cmp_types(a: Type, b: Type) -> Ordering {
        cmp(a.raw(), b.raw())
    }

    /// Values by serial number of first appearance (LLVM's `cmpValues`).
    fn cmp_values(&mut self, a: Reg, b: Reg) -> Ordering {
        let (sa, sb) = (self.sn_l[a], self.sn_r[b]);
        match (sa, sb) {
            (0, 0) => {
                self.next_sn += 1;
                self.sn_l[a] = self.next_sn;
                self.sn_r[b] = self.next_sn;
                self.reg_pairs.push((a, b));
                Ordering::Equal
            }
            (0, _) => Ordering::Greater,
            (_, 0) => Ordering::Less,
            _ => cmp(sa, sb),
        }
    }

    fn cmp_block_refs(&mut self, a: Block, b: Block) -> Ordering {
        let (sa, sb) = (self.bn_l[a], self.bn_r[b]);
        match (sa, sb) {
            (0, 0) => {
                self.next_bn += 1;
                self.bn_l[a] = self.next_bn;
                self.bn_r[b] = self.next_bn;
                self.block_pairs.push((a, b));
                Ordering::Equal
            }
            (0, _) => Ordering::Greater,
            (_, 0) => Ordering::Less,
            _ => cmp(sa, sb),
        }
    }

    /// A callee: defined functions by class, others by identity.
    fn callee_key(&self, s: Symbol) -> (u32, u32) {
        let s = *self.module.aliases.get(&s).unwrap_or(&s);
        match self.module.defined(s) {
            Some(f) if !self.module.removed[f] => (0, self.class[f]),
            _ => (1, s.as_u32()),
        }
    }

    fn cmp_memflags(&self, l: &Function, a: MemFlagsRef, r: &Function, b: MemFlagsRef) -> Ordering {
        let (x, y) = (l.memflags[a], r.memflags[b]);
        cmp(x.bits, y.bits).then(cmp(x.trap, y.trap)).then_with(|| {
            let rx = x.region.map(|g| l.regions[g].id);
            let ry = y.region.map(|g| r.regions[g].id);
            cmp(rx, ry)
        })
    }

    fn cmp_global(&self, l: &Function, a: GlobalRef, r: &Function, b: GlobalRef) -> Ordering {
        match (l.globals[a], r.globals[b]) {
            (GlobalData::VmCtx, GlobalData::VmCtx) => Ordering::Equal,
            (
                GlobalData::Load {
                    base: b1,
                    offset: o1,
                    ty: t1,
                    flags: f1,
                },
                GlobalData::Load {
                    base: b2,
                    offset: o2,
                    ty: t2,
                    flags: f2,
                },
            ) => cmp(o1, o2)
                .then(Self::cmp_types(t1, t2))
                .then_with(|| self.cmp_memflags(l, f1, r, f2))
                .then_with(|| self.cmp_global(l, b1, r, b2)),
            (
                GlobalData::IAddImm {
                    base: b1,
                    offset: o1,
                    ty: t1,
                },
                GlobalData::IAddImm {
                    base: b2,
                    offset: o2,
                    ty: t2,
                },
            ) => cmp(o1, o2)
                .then(Self::cmp_types(t1, t2))
                .then_with(|| self.cmp_global(l, b1, r, b2)),
            (
                GlobalData::Symbol {
                    sym: s1,
                    offset: o1,
                    colocated: c1,
                    tls: t1,
                },
                GlobalData::Symbol {
                    sym: s2,
                    offset: o2,
                    colocated: c2,
                    tls: t2,
                },
            ) => cmp((s1, o1, c1, t1), (s2, o2, c2, t2)),
            (x, y) => cmp(global_kind(&x), global_kind(&y)),
        }
    }

    /// Memory operands and other operands.
    fn cmp_operand(
        &mut self,
        l: &Function,
        a: &Operand,
        r: &Function,
        b: &Operand,
        callee: bool,
    ) -> Ordering {
        match (a, b) {
            (Operand::Reg(x), Operand::Reg(y)) => self.cmp_values(*x, *y),
            (Operand::Int(x), Operand::Int(y)) => cmp(x, y),
            (Operand::F32(x), Operand::F32(y)) => cmp(x, y),
            (Operand::F64(x), Operand::F64(y)) => cmp(x, y),
            (Operand::Block(x), Operand::Block(y)) => self.cmp_block_refs(*x, *y),
            (
                Operand::Mem {
                    base: b1,
                    index: i1,
                    scale: s1,
                    disp: d1,
                },
                Operand::Mem {
                    base: b2,
                    index: i2,
                    scale: s2,
                    disp: d2,
                },
            ) => cmp(
                (s1, d1, b1.is_some(), i1.is_some()),
                (s2, d2, b2.is_some(), i2.is_some()),
            )
            .then_with(|| match (b1.expand(), b2.expand()) {
                (Some(p), Some(q)) => self.cmp_values(p, q),
                _ => Ordering::Equal,
            })
            .then_with(|| match (i1.expand(), i2.expand()) {
                (Some(p), Some(q)) => self.cmp_values(p, q),
                _ => Ordering::Equal,
            }),
            (Operand::Sym(x, o1), Operand::Sym(y, o2)) => {
                if callee && self.modulo_callees {
                    cmp(o1, o2)
                } else if callee {
                    cmp(self.callee_key(*x), self.callee_key(*y)).then(cmp(o1, o2))
                } else {
                    cmp((x, o1), (y, o2))
                }
            }
            (Operand::Stack(x, o1), Operand::Stack(y, o2)) => {
                let (dx, dy) = (l.stack_objs[*x], r.stack_objs[*y]);
                cmp(
                    (x.index(), dx.size, dx.align_shift, o1),
                    (y.index(), dy.size, dy.align_shift, o2),
                )
            }
            (Operand::Pred(x), Operand::Pred(y)) => cmp(x, y),
            (Operand::Arg(x), Operand::Arg(y)) => cmp(x, y),
            (x, y) => cmp(operand_kind(x), operand_kind(y)),
        }
    }

    /// Opcode, type, counts, flags and per-format side data, then operands.
    fn cmp_operations(&mut self, l: &Function, i: Inst, r: &Function, j: Inst) -> Ordering {
        let (a, b) = (l.insts[i], r.insts[j]);
        let o = cmp(a.opcode, b.opcode)
            .then(Self::cmp_types(a.ty, b.ty))
            .then(cmp(a.results.len, b.results.len))
            .then(cmp(a.operands.len, b.operands.len));
        if o != Ordering::Equal {
            return o;
        }
        let o = match a.opcode.format() {
            Format::Load | Format::Store => self.cmp_memflags(
                l,
                MemFlagsRef::from_u32(a.aux),
                r,
                MemFlagsRef::from_u32(b.aux),
            ),
            Format::Call => cmp(
                &l.sigs[SigRef::from_u32(a.aux)],
                &r.sigs[SigRef::from_u32(b.aux)],
            )
            .then_with(|| match a.opcode {
                Opcode::TryCall => cmp(
                    &l.exn_tables[ExnTable::from_u32(a.aux2)],
                    &r.exn_tables[ExnTable::from_u32(b.aux2)],
                ),
                _ => Ordering::Equal,
            }),
            Format::Addr if a.opcode == Opcode::FuncAddr => cmp(
                &l.sigs[SigRef::from_u32(a.aux)],
                &r.sigs[SigRef::from_u32(b.aux)],
            ),
            Format::Trap | Format::CondTrap => cmp(a.aux, b.aux),
            Format::GlobalValue => {
                self.cmp_global(l, GlobalRef::from_u32(a.aux), r, GlobalRef::from_u32(b.aux))
            }
            Format::Opaque => {
                let (x, y) = (
                    &l.opaques[OpaqueRef::from_u32(a.aux)],
                    &r.opaques[OpaqueRef::from_u32(b.aux)],
                );
                cmp((&x.name, &x.imms, x.effects), (&y.name, &y.imms, y.effects)).then_with(|| {
                    match (a.aux2, b.aux2) {
                        (0, 0) => Ordering::Equal,
                        (0, _) => Ordering::Less,
                        (_, 0) => Ordering::Greater,
                        (p, q) => self.cmp_memflags(
                            l,
                            MemFlagsRef::from_u32(p - 1),
                            r,
                            MemFlagsRef::from_u32(q - 1),
                        ),
                    }
                })
            }
            _ => Ordering::Equal,
        };
        if o != Ordering::Equal {
            return o;
        }
        for (x, y) in l.results(i).iter().zip(r.results(j)) {
            let o = Self::cmp_types(l.reg_type(*x), r.reg_type(*y))
                .then_with(|| self.cmp_values(*x, *y));
            if o != Ordering::Equal {
                return o;
            }
        }
        let callee_pos = matches!(a.opcode.format(), Format::Call);
        for (k, (x, y)) in l.operands(i).iter().zip(r.operands(j)).enumerate() {
            let o = self.cmp_operand(l, x, r, y, callee_pos && k == 0);
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Walk both CFGs from the entry in the same order, comparing paired blocks.
    fn cmp_bodies(&mut self, l: &Function, r: &Function) -> Ordering {
        let (Some(el), Some(er)) = (l.entry(), r.entry()) else {
            return cmp(l.entry().is_some(), r.entry().is_some());
        };
        self.cmp_block_refs(el, er);
        let mut k = 0;
        while k < self.block_pairs.len() {
            let (bl, br) = self.block_pairs[k];
            k += 1;
            let (il, ir) = (l.block_insts(bl), r.block_insts(br));
            let o = cmp(il.len(), ir.len());
            if o != Ordering::Equal {
                return o;
            }
            for (&i, &j) in il.iter().zip(ir) {
                let o = self.cmp_operations(l, i, r, j);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
        Ordering::Equal
    }
}

fn global_kind(g: &GlobalData) -> u8 {
    match g {
        GlobalData::VmCtx => 0,
        GlobalData::Load { .. } => 1,
        GlobalData::IAddImm { .. } => 2,
        GlobalData::Symbol { .. } => 3,
    }
}

fn operand_kind(o: &Operand) -> u8 {
    match o {
        Operand::Reg(_) => 0,
        Operand::Int(_) => 1,
        Operand::F32(_) => 2,
        Operand::F64(_) => 3,
        Operand::Block(_) => 4,
        Operand::Mem { .. } => 5,
        Operand::Sym(..) => 6,
        Operand::Stack(..) => 7,
        Operand::Pred(_) => 8,
        Operand::Arg(_) => 9,
    }
}

/// Survivor priority: frozen (compiled already: it must survive) first, then exported strong,
/// then local, then preemptible; then by id.
fn priority(f: &Function) -> u8 {
    if f.frozen {
        return PRIO_FROZEN;
    }
    match f.linkage {
        Linkage::Export => 1,
        Linkage::Local => 2,
        Linkage::Preemptible => PRIO_PREEMPTIBLE,
        Linkage::Import => 4,
    }
}

const PRIO_FROZEN: u8 = 0;
const PRIO_PREEMPTIBLE: u8 = 3;

/// The facts of one walk over every function with a body.
struct Walked {
    weak: SecondaryMap<FuncId, u64>,
    local: SecondaryMap<FuncId, u64>,
    /// The shape of each walked function: functions share a shape exactly when their token
    /// streams are equal (equal under the comparator up to their callees).
    shape: SecondaryMap<FuncId, u32>,
    /// Number of functions of each shape.
    shape_size: Vec<u32>,
    /// Direct call sites of all walked functions; `calls[f]` is f's range.
    sites: Vec<(Symbol, Inst)>,
    /// The callee of each site as the comparator sees it (`callee_key`), resolved once.
    targets: Vec<Callee>,
    calls: SecondaryMap<FuncId, (u32, u32)>,
    /// Symbols whose address is taken somewhere (significant addresses).
    taken: SecondaryMap<Symbol, bool>,
    /// Survivor priority (`priority`), linkage and whether the address is declared
    /// significant: read while the function is in the cache.
    prio: SecondaryMap<FuncId, u8>,
    linkage: SecondaryMap<FuncId, Linkage>,
    significant: SecondaryMap<FuncId, bool>,
}

/// A callee: a defined function (compared by class) or another symbol (by identity).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Callee {
    Func(FuncId),
    Other(Symbol),
}

impl Callee {
    #[inline]
    fn key(self, class: &SecondaryMap<FuncId, u32>) -> (u32, u32) {
        match self {
            Callee::Func(f) => (0, class[f]),
            Callee::Other(s) => (1, s.as_u32()),
        }
    }
}

impl Walked {
    fn targets_of(&self, f: FuncId) -> &[Callee] {
        let (a, b) = self.calls[f];
        &self.targets[a as usize..b as usize]
    }

    /// The hash of f's callee keys under `class`, in walk order.
    fn callee_hash(&self, f: FuncId, class: &SecondaryMap<FuncId, u32>) -> u64 {
        let mut h = FxHasher::default();
        for c in self.targets_of(f) {
            let (k, v) = c.key(class);
            h.write_u64((k as u64) << 32 | v as u64);
        }
        finish(h.finish())
    }
}

/// Shapes told apart by hash, then by comparing token streams: open addressing over (a hash
/// of the weak and local hashes, shape + 1). Only the first function of a shape keeps its
/// stream here.
struct ShapeTable {
    tokens: Vec<u32>,
    /// Each shape's hash key and stream (a range of `tokens`).
    shapes: Vec<(u64, u32, u32)>,
    slot_hash: Vec<u64>,
    slot_shape: Vec<u32>,
    comparisons: u64,
}

impl ShapeTable {
    fn with_capacity(n: usize) -> Self {
        let cap = (2 * n).next_power_of_two().max(16);
        ShapeTable {
            tokens: Vec::new(),
            shapes: Vec::new(),
            slot_hash: vec![0; cap],
            slot_shape: vec![0; cap],
            comparisons: 0,
        }
    }

    fn tokens_of(&self, sh: u32) -> &[u32] {
        let (_, a, len) = self.shapes[sh as usize];
        &self.tokens[a as usize..(a + len) as usize]
    }

    /// The shape of a stream with hash key `key`, added if no shape has that stream.
    fn intern(&mut self, key: u64, tokens: &[u32]) -> u32 {
        let mask = self.slot_shape.len() - 1;
        let mut i = key as usize & mask;
        loop {
            let v = self.slot_shape[i];
            if v == 0 {
                break;
            }
            if self.slot_hash[i] == key {
                self.comparisons += 1;
                if self.tokens_of(v - 1) == tokens {
                    return v - 1;
                }
            }
            i = (i + 1) & mask;
        }
        if self.shapes.len() * 2 >= self.slot_shape.len() {
            self.grow();
            return self.intern(key, tokens);
        }
        let sh = self.shapes.len() as u32;
        self.shapes
            .push((key, self.tokens.len() as u32, tokens.len() as u32));
        self.tokens.extend_from_slice(tokens);
        self.slot_hash[i] = key;
        self.slot_shape[i] = sh + 1;
        sh
    }

    /// Double the slots (shapes and streams stay).
    #[cold]
    fn grow(&mut self) {
        let cap = self.slot_shape.len() * 2;
        self.slot_hash = vec![0; cap];
        self.slot_shape = vec![0; cap];
        for (sh, &(key, _, _)) in self.shapes.iter().enumerate() {
            let mut i = key as usize & (cap - 1);
            while self.slot_shape[i] != 0 {
                i = (i + 1) & (cap - 1);
            }
            self.slot_hash[i] = key;
            self.slot_shape[i] = sh as u32 + 1;
        }
    }
}

/// What the walk learns about one function.
#[derive(Clone, Copy)]
struct FnFacts {
    weak: u64,
    local: u64,
    /// Shape in the walking part's table.
    shape: u32,
    /// Range of the part's call sites.
    calls: (u32, u32),
    prio: u8,
    linkage: Linkage,
    significant: bool,
}

/// The walk over a run of functions (one thread's share).
struct WalkPart {
    shapes: ShapeTable,
    facts: Vec<FnFacts>,
    sites: Vec<(Symbol, Inst)>,
    targets: Vec<Callee>,
    taken: Vec<Symbol>,
}

/// Walk `ids` in order: hashes, token streams classed into shapes, direct calls, taken
/// addresses.
fn walk_part(m: &Module, callee_of: &[Callee], ids: &[FuncId]) -> WalkPart {
    let mut part = WalkPart {
        shapes: ShapeTable::with_capacity(ids.len()),
        facts: Vec::with_capacity(ids.len()),
        sites: Vec::new(),
        targets: Vec::new(),
        taken: Vec::new(),
    };
    let mut scratch = HashScratch::default();
    let mut out = WalkOut::default();
    for (k, &id) in ids.iter().enumerate() {
        m.prefetch_ahead(ids, k);
        let f = &m.functions[id];
        out.callees.clear();
        out.tokens.clear();
        let (weak, local) = function_hashes(f, &mut scratch, &mut out);
        if part.shapes.tokens.is_empty() {
            // Room for a stream per function or so: one allocation, no regrowth.
            part.shapes.tokens.reserve(out.tokens.len() * ids.len() / 2);
        }
        let shape = part.shapes.intern(finish(mix(weak, local)), &out.tokens);
        let start = part.sites.len() as u32;
        for &(sym, inst) in &out.callees {
            part.sites.push((sym, inst));
            part.targets.push(callee_of[sym.index()]);
        }
        for gv in f.globals.values() {
            if let GlobalData::Symbol { sym, .. } = gv {
                out.taken.push(*sym);
            }
        }
        part.facts.push(FnFacts {
            weak,
            local,
            shape,
            calls: (start, part.sites.len() as u32),
            prio: priority(f),
            linkage: f.linkage,
            significant: f.address_significant,
        });
    }
    part.taken = out.taken;
    part
}

/// Modules smaller than this are walked on one thread (threads cost more than they save).
const PARALLEL_WALK_MIN: usize = 2048;

/// Walk every function once: hashes, shape, direct calls, taken addresses.
///
/// Shapes are found on the way (the hash filter and the first stage of refinement in one):
/// a function's token stream goes to a buffer reused for every function; functions with the
/// same (weak, local) hashes are compared with the first function of each shape already seen
/// under those hashes (a `memcmp` of the streams). Only the first function of a shape keeps
/// its stream, so a duplicate costs no memory, and a function with a unique weak hash is
/// never compared with anything.
///
/// Functions are independent here, so a large module is walked in `threads` runs at once
/// (as lld's ICF hashes sections in parallel); the runs' shapes are then joined in order, so
/// shapes are numbered exactly as one thread would number them.
fn walk_module(m: &Module, ids: &[FuncId], threads: usize, report: &mut MergeReport) -> Walked {
    let threads = if ids.len() >= PARALLEL_WALK_MIN {
        threads.max(1)
    } else {
        1
    };
    let chunk = ids.len().div_ceil(threads).max(1);
    // What each symbol calls, as the comparator sees it (`callee_key`): resolved once, in one
    // pass over the symbol table, instead of a lookup in it per call site.
    let callee_of: Vec<Callee> = m
        .symbols
        .keys()
        .map(|sym| {
            let s = *m.aliases.get(&sym).unwrap_or(&sym);
            match m.defined(s) {
                Some(d) if !m.removed[d] => Callee::Func(d),
                _ => Callee::Other(s),
            }
        })
        .collect();
    let callee_of = &callee_of[..];
    let mut parts: Vec<WalkPart> = if threads == 1 {
        vec![walk_part(m, callee_of, ids)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .map(|c| s.spawn(move || walk_part(m, callee_of, c)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a merge walk thread panicked"))
                .collect()
        })
    };
    let n = m.functions.len();
    let mut w = Walked {
        weak: SecondaryMap::with_capacity(n),
        local: SecondaryMap::with_capacity(n),
        shape: SecondaryMap::with_capacity(n),
        shape_size: Vec::new(),
        sites: Vec::new(),
        targets: Vec::new(),
        calls: SecondaryMap::with_capacity(n),
        taken: SecondaryMap::with_capacity(m.symbols.len()),
        prio: SecondaryMap::with_capacity(n),
        linkage: SecondaryMap::with_default(Linkage::Import),
        significant: SecondaryMap::with_capacity(n),
    };
    w.linkage.resize(n);
    // The first part's shapes are the first global shapes; every later part's shapes are
    // looked up there (and added when new), in order.
    let mut global = core::mem::replace(&mut parts[0].shapes, ShapeTable::with_capacity(0));
    let mut to_global: Vec<u32> = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        to_global.clear();
        if p == 0 {
            to_global.extend(0..global.shapes.len() as u32);
        } else {
            for sh in 0..part.shapes.shapes.len() as u32 {
                let key = part.shapes.shapes[sh as usize].0;
                to_global.push(global.intern(key, part.shapes.tokens_of(sh)));
            }
        }
        report.comparisons += part.shapes.comparisons;
        w.shape_size.resize(global.shapes.len(), 0);
        let base = w.sites.len() as u32;
        w.sites.extend_from_slice(&part.sites);
        w.targets.extend_from_slice(&part.targets);
        for &s in &part.taken {
            w.taken[s] = true;
        }
        for (&id, facts) in ids[p * chunk..].iter().zip(&part.facts) {
            let sh = to_global[facts.shape as usize];
            w.shape[id] = sh;
            w.shape_size[sh as usize] += 1;
            w.weak[id] = facts.weak;
            w.local[id] = facts.local;
            w.calls[id] = (base + facts.calls.0, base + facts.calls.1);
            w.prio[id] = facts.prio;
            w.linkage[id] = facts.linkage;
            w.significant[id] = facts.significant;
        }
    }
    report.comparisons += global.comparisons;
    report.rounds += 1;
    w
}

/// Partition refinement: classes of functions equal up to the classes of their callees (the
/// coarsest stable partition, so recursive groups that call each other alike stay together).
///
/// 1. Shapes (found by `walk_module`): functions with equal (weak, local) hashes are split by
///    comparing token streams (equal streams = equal under the comparator up to callees).
/// 2. Rounds: a class splits where its members' callee classes differ (compared exactly, in
///    the comparator's order, no body walk), until no class splits (as lld's ICF iterates
///    over relocations). Classes only split, so equal-at-the-end implies never split.
///
/// Returns the classes and the strong hashes (local hash plus callee classes).
fn refine_classes(
    m: &Module,
    w: &Walked,
    candidates: &[FuncId],
    report: &mut MergeReport,
) -> (SecondaryMap<FuncId, u32>, SecondaryMap<FuncId, u64>) {
    let mut class: SecondaryMap<FuncId, u32> = SecondaryMap::with_capacity(m.functions.len());
    // Functions that are not candidates (unique weak hash, no body) are callees too: each has
    // a class of its own, never shared with a candidate class.
    for (f, _) in m.functions.iter() {
        class[f] = u32::MAX - f.as_u32();
    }
    // The first stage, shapes, was done by the walk: the candidates' shapes are the first
    // classes.
    for &f in candidates {
        class[f] = w.shape[f];
    }
    let mut count = w.shape_size.len() as u32;
    let mut rest: Vec<FuncId> = Vec::new();
    let mut remaining: Vec<FuncId> = Vec::new();

    // Only functions with direct calls can split further (a shape fixes the call count).
    let mut order: Vec<(u32, u64, FuncId)> = Vec::new();
    let with_calls: Vec<FuncId> = candidates
        .iter()
        .copied()
        .filter(|&f| w.calls[f].0 != w.calls[f].1)
        .collect();
    loop {
        report.rounds += 1;
        let snapshot = class.clone();
        order.clear();
        order.extend(
            with_calls
                .iter()
                .map(|&f| (snapshot[f], w.callee_hash(f, &snapshot), f)),
        );
        order.sort_unstable();
        let same_callees = |a: FuncId, b: FuncId| {
            w.targets_of(a)
                .iter()
                .zip(w.targets_of(b))
                .all(|(x, y)| x.key(&snapshot) == y.key(&snapshot))
        };
        let mut next = count;
        let mut kept: Option<u32> = None;
        let mut i = 0;
        while i < order.len() {
            let key = (order[i].0, order[i].1);
            let mut j = i + 1;
            while j < order.len() && (order[j].0, order[j].1) == key {
                j += 1;
            }
            rest.clear();
            rest.extend(order[i..j].iter().map(|x| x.2));
            // Stable numbering: the first subgroup of an old class keeps its number, split-off
            // subgroups get new ones, so an unchanged partition keeps unchanged classes.
            let mut old = if kept == Some(key.0) {
                None
            } else {
                Some(key.0)
            };
            kept = Some(key.0);
            while let Some((&leader, others)) = rest.split_first() {
                let id = match old.take() {
                    Some(o) => o,
                    None => {
                        next += 1;
                        next - 1
                    }
                };
                class[leader] = id;
                remaining.clear();
                for &x in others {
                    if same_callees(leader, x) {
                        class[x] = id;
                    } else {
                        remaining.push(x);
                    }
                }
                core::mem::swap(&mut rest, &mut remaining);
            }
            i = j;
        }
        if next == count {
            break;
        }
        count = next;
    }
    let mut strong: SecondaryMap<FuncId, u64> = SecondaryMap::with_capacity(m.functions.len());
    for &f in candidates {
        let mut h = FxHasher::default();
        h.write_u64(w.local[f]);
        h.write_u64(w.callee_hash(f, &class));
        strong[f] = finish(h.finish());
    }
    (class, strong)
}

/// Run MergeFunctions on a module.
pub fn merge_functions(m: &mut Module) -> MergeReport {
    merge_functions_with(m, MergeOptions::default())
}

/// Options of the pass.
#[derive(Clone, Copy, Debug)]
pub struct MergeOptions {
    /// Threads for the hashing walk of large modules (every later step runs on one; the
    /// result does not depend on the number). Default: the machine's cores, at most 8.
    pub threads: usize,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
        }
    }
}

/// Run MergeFunctions on a module with `opts`.
pub fn merge_functions_with(m: &mut Module, opts: MergeOptions) -> MergeReport {
    let mut report = MergeReport::default();
    let ids: Vec<FuncId> = m
        .live_functions()
        .filter(|(_, f)| f.entry().is_some())
        .map(|(id, _)| id)
        .collect();
    // One walk over every body: hashes, direct calls, taken addresses.
    let mut clock = Instant::now();
    let w = walk_module(m, &ids, opts.threads, &mut report);
    report.lap("merge.walk", &mut clock);
    // The hash filter: only functions sharing a shape with another (so a weak hash, a local
    // hash and a token stream) are candidates; no other function can ever merge.
    let candidates: Vec<FuncId> = ids
        .iter()
        .copied()
        .filter(|&f| w.shape_size[w.shape[f] as usize] > 1)
        .collect();
    if candidates.is_empty() {
        return report;
    }
    let (class, strong) = refine_classes(m, &w, &candidates, &mut report);
    report.lap("merge.refine", &mut clock);

    // The symbol of each function, and the candidates calling each symbol (to re-queue them).
    let mut sym_of: SecondaryMap<FuncId, Option<Symbol>> =
        SecondaryMap::with_capacity(m.functions.len());
    for (s, d) in m.symbols.iter() {
        if let Some(f) = d.def.expand() {
            sym_of[f] = Some(s);
        }
    }
    let mut caller_start = vec![0u32; m.symbols.len() + 1];
    for &c in &candidates {
        let (a, b) = w.calls[c];
        for &(s, _) in &w.sites[a as usize..b as usize] {
            caller_start[s.index() + 1] += 1;
        }
    }
    for k in 1..caller_start.len() {
        caller_start[k] += caller_start[k - 1];
    }
    let mut fill = caller_start.clone();
    let mut caller_list = vec![FuncId::from_u32(0); *caller_start.last().unwrap() as usize];
    for &c in &candidates {
        let (a, b) = w.calls[c];
        for &(s, _) in &w.sites[a as usize..b as usize] {
            caller_list[fill[s.index()] as usize] = c;
            fill[s.index()] += 1;
        }
    }
    drop(fill);
    let callers_of = |s: Symbol| {
        &caller_list[caller_start[s.index()] as usize..caller_start[s.index() + 1] as usize]
    };
    // Symbols folded into each survivor symbol (their callers now call the survivor), as a
    // list per survivor: first and last member, and each member's successor.
    let ns = m.symbols.len();
    let mut absorbed: SecondaryMap<Symbol, Option<(Symbol, Symbol)>> =
        SecondaryMap::with_capacity(ns);
    let mut absorbed_next: SecondaryMap<Symbol, Option<Symbol>> = SecondaryMap::with_capacity(ns);
    m.aliases.reserve(candidates.len() / 2);

    // Deferred: strong functions first, then preemptible ones.
    let mut deferred: Vec<FuncId> = candidates.clone();
    // (`priority` ranks preemptible after every strong linkage.)
    deferred.sort_unstable_by_key(|&f| (w.prio[f], f));
    deferred.reverse(); // pop from the end
    let mut state = Some(FunctionComparator::new(m, &class).into_state());
    // FnTree: ordered by (strong hash, FunctionComparator); each entry is the short list of
    // unique functions sharing a strong hash, kept in comparator order. Refinement proved
    // members of one class equal under the comparator, so a lookup meeting its own class
    // needs no body walk; any other meeting is compared in full.
    let mut fn_tree: BTreeMap<u64, SmallVec<[FuncId; 1]>> = BTreeMap::new();
    let mut in_tree: SecondaryMap<FuncId, bool> = SecondaryMap::with_capacity(m.functions.len());
    let mut merged_into: SecondaryMap<FuncId, Option<FuncId>> =
        SecondaryMap::with_capacity(m.functions.len());
    let mut requeue: Vec<FuncId> = Vec::new();
    while let Some(g) = deferred.pop() {
        if m.removed[g] || merged_into[g].is_some() {
            continue;
        }
        let found = {
            let mut cmpr = FunctionComparator::from_state(m, &class, state.take().unwrap());
            let bucket = fn_tree.entry(strong[g]).or_default();
            let pos = bucket.binary_search_by(|&x| {
                if class[x] == class[g] {
                    return Ordering::Equal;
                }
                report.comparisons += 1;
                cmpr.compare(&m.functions[x], &m.functions[g])
            });
            state = Some(cmpr.into_state());
            match pos {
                Err(p) => {
                    bucket.insert(p, g);
                    in_tree[g] = true;
                    None
                }
                Ok(p) => {
                    let f = bucket[p];
                    // The better survivor stays in the tree.
                    if w.prio[g] < w.prio[f] {
                        bucket[p] = g;
                        in_tree[g] = true;
                        in_tree[f] = false;
                        Some((g, f))
                    } else {
                        Some((f, g))
                    }
                }
            }
        };
        let Some((f, g)) = found else { continue };
        if w.prio[f] == PRIO_PREEMPTIBLE {
            continue; // no safe survivor (see the module comment)
        }
        if w.prio[g] == PRIO_FROZEN {
            continue; // both compiled already: neither may change
        }
        // The merge validator re-checks every pair in debug builds (and in tests).
        #[cfg(debug_assertions)]
        if let Err(e) = validate_merge(m, &class, f, g) {
            panic!("merge validator: {e}");
        }
        let (fs, gs) = (sym_of[f].expect("symbol"), sym_of[g].expect("symbol"));
        let significant = w.significant[g] || w.taken[gs];
        merge_two(m, g, w.linkage[g], (fs, gs), significant, &mut report);
        merged_into[g] = Some(f);
        report.pairs.push((g, f));
        // G's callers now call F (unless G is preemptible): they leave FnTree and return
        // to Deferred.
        if w.prio[g] != PRIO_PREEMPTIBLE {
            requeue.clear();
            requeue.extend_from_slice(callers_of(gs));
            // G and what G absorbed move to F's list.
            let mut moved = (gs, gs);
            if let Some((first, last)) = absorbed[gs].take() {
                let mut s = Some(first);
                while let Some(x) = s {
                    requeue.extend_from_slice(callers_of(x));
                    s = absorbed_next[x];
                }
                absorbed_next[gs] = Some(first);
                moved.1 = last;
            }
            absorbed[fs] = Some(match absorbed[fs] {
                None => moved,
                Some((first, last)) => {
                    absorbed_next[last] = Some(moved.0);
                    (first, moved.1)
                }
            });
            for &c in &requeue {
                if in_tree[c] && c != f {
                    if let Some(bucket) = fn_tree.get_mut(&strong[c]) {
                        bucket.retain(|x| *x != c);
                    }
                    in_tree[c] = false;
                    deferred.push(c);
                }
            }
        }
    }
    report.lap("merge.fn_tree", &mut clock);
    // Direct calls to a merged function call its final survivor (a preemptible G may be
    // replaced at link time: calls to it stay).
    let mut redirect: SecondaryMap<Symbol, Option<Symbol>> =
        SecondaryMap::with_capacity(m.symbols.len());
    let mut any = false;
    for &(g, _) in &report.pairs {
        if w.prio[g] == PRIO_PREEMPTIBLE {
            continue;
        }
        let mut f = g;
        while let Some(h) = merged_into[f] {
            f = h;
        }
        redirect[sym_of[g].unwrap()] = sym_of[f];
        any = true;
    }
    // Aliases made by earlier runs may name a function merged now: point every alias at its
    // final target, so one lookup always reaches a defined function.
    if any && !m.aliases.is_empty() {
        let keys: Vec<Symbol> = m.aliases.keys().copied().collect();
        for k in keys {
            let mut t = m.aliases[&k];
            let mut steps = 0;
            while let Some(&n) = m.aliases.get(&t) {
                if n == k || steps > m.aliases.len() {
                    break; // never loops: merges only point at live survivors
                }
                t = n;
                steps += 1;
            }
            m.aliases.insert(k, t);
        }
    }
    if any {
        // The call sites to rewrite, found from the walk's tables alone; then each rewrite,
        // with the instruction data of the next functions on its way into the cache.
        let mut edits: Vec<(FuncId, Inst, Symbol, Symbol)> = Vec::new();
        for &c in &ids {
            if m.removed[c] || merged_into[c].is_some() || w.prio[c] == PRIO_FROZEN {
                continue; // deleted, its body is now a thunk, or compiled already
            }
            let (a, b) = w.calls[c];
            for &(s, inst) in &w.sites[a as usize..b as usize] {
                if let Some(t) = redirect[s] {
                    edits.push((c, inst, s, t));
                }
            }
        }
        for (k, &(c, inst, s, t)) in edits.iter().enumerate() {
            if let Some(&(n, ..)) = edits.get(k + 4) {
                m.functions[n].prefetch();
            }
            let op = &mut m.functions[c].operands_mut(inst)[0];
            if *op == Operand::Sym(s, 0) {
                *op = Operand::Sym(t, 0);
            }
        }
    }
    report.lap("merge.redirect", &mut clock);
    report
}

/// Fold G into F: G is deleted (replaced), becomes an alias, or becomes a thunk. Direct calls
/// are redirected by the caller of this function.
fn merge_two(
    m: &mut Module,
    g: FuncId,
    linkage: Linkage,
    (fs, gs): (Symbol, Symbol),
    significant: bool,
    report: &mut MergeReport,
) {
    let preemptible = linkage == Linkage::Preemptible;
    let kind = if significant || preemptible {
        MergeKind::Thunked
    } else if linkage == Linkage::Local {
        MergeKind::Replaced
    } else {
        MergeKind::Aliased
    };
    match kind {
        MergeKind::Replaced | MergeKind::Aliased => {
            m.removed[g] = true;
            m.symbols[gs].def = None.into();
            m.aliases.insert(gs, fs);
            if kind == MergeKind::Aliased {
                report.aliased += 1;
            } else {
                report.replaced += 1;
            }
        }
        MergeKind::Thunked => {
            make_thunk(m, g, fs);
            report.thunked += 1;
        }
    }
    report.merged += 1;
    m.merges.push(MergeRecord {
        merged: gs,
        survivor: fs,
        kind,
        callers_redirected: !preemptible,
    });
}

/// Replace G's body with a call to `target`: a tail call where the calling convention is
/// `tail` and the target allows tail calls (`Module::allow_tail_calls`), else call and return.
fn make_thunk(m: &mut Module, g: FuncId, target: Symbol) {
    let old = &m.functions[g];
    let mut t = Function::new(old.name.clone(), old.sig.clone(), old.linkage);
    t.address_significant = old.address_significant;
    t.modified = true;
    t.stack_limit = None;
    let sig = t.sigs.push(old.sig.clone());
    let b = t.new_block();
    let mut args = Vec::new();
    for (k, p) in old.sig.params.iter().enumerate() {
        let r = t.new_reg(p.ty);
        let i = t.make_inst(Opcode::Copy, p.ty, &[r], &[Operand::Arg(k as u32)]);
        t.append_inst(b, i);
        args.push(Operand::Reg(r));
    }
    let mut ops = vec![Operand::Sym(target, 0)];
    ops.extend(args);
    if old.sig.call_conv == CallConv::Tail && m.allow_tail_calls {
        let i = t.make_inst(Opcode::TailCall, Type::VOID, &[], &ops);
        t.insts[i].aux = sig.as_u32();
        t.append_inst(b, i);
    } else {
        let rets: Vec<Reg> = old.sig.returns.iter().map(|p| t.new_reg(p.ty)).collect();
        let i = t.make_inst(Opcode::Call, Type::VOID, &rets, &ops);
        t.insts[i].aux = sig.as_u32();
        t.append_inst(b, i);
        let rv: Vec<Operand> = rets.into_iter().map(Operand::Reg).collect();
        let i = t.make_inst(Opcode::Ret, Type::VOID, &[], &rv);
        t.append_inst(b, i);
    }
    m.functions[g] = t;
}

/// The merge validator: re-check that the comparator maps G onto F, and that the value and
/// block correspondences it found are bijections.
pub fn validate_merge(
    m: &Module,
    class: &SecondaryMap<FuncId, u32>,
    f: FuncId,
    g: FuncId,
) -> Result<(), String> {
    let mut c = FunctionComparator::new(m, class);
    if c.compare(&m.functions[f], &m.functions[g]) != Ordering::Equal {
        return Err(format!(
            "{} and {} are not equal",
            m.functions[f].name, m.functions[g].name
        ));
    }
    let mut seen_l = HashMap::default();
    let mut seen_r = HashMap::default();
    for &(a, b) in &c.reg_pairs {
        if seen_l.insert(a, b).is_some_and(|x| x != b)
            || seen_r.insert(b, a).is_some_and(|x| x != a)
        {
            return Err(format!(
                "register correspondence {a} ↔ {b} is not a bijection"
            ));
        }
    }
    let mut bl = HashMap::default();
    let mut br = HashMap::default();
    for &(a, b) in &c.block_pairs {
        if bl.insert(a, b).is_some_and(|x| x != b) || br.insert(b, a).is_some_and(|x| x != a) {
            return Err(format!("block correspondence {a} ↔ {b} is not a bijection"));
        }
    }
    Ok(())
}
