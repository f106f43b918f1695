//! One walk over a function's Cranelift IR, which gives everything a flush decides by before
//! it lifts anything: the function's *shape key* (which functions the passes might merge
//! with it, `skip`), what it refers to of the other module functions, and the *digests of
//! its print* (which earlier function it equals, or equals but for constants:
//! `input_index`).
//!
//! # The print
//!
//! The print is the function written out as words, complete but for two things:
//! - values and blocks are numbered densely by first appearance (a slot per value and block
//!   of the function, no map), so functions equal up to renaming have equal prints;
//! - the module functions its external function references name (`u0:N`) are kept apart, as
//!   the *callees*, in the order of those references.
//!
//! Only the blocks the entry reaches are printed, depth first from the entry: the passes
//! compare nothing else, so two functions that differ only in their layout or in blocks no
//! path reaches have equal prints too. (Two functions the passes would still find equal have
//! different prints only where the lifter splits an edge that one of them spells out: a
//! merge a later batch then misses, never a wrong one.) The print follows what the lifter
//! keeps, so that it tells apart no more than LIR does: types as LIR types, memory flags as
//! LIR's, side tables (stack slots, signatures, alias regions, global values) by their
//! Cranelift index, as LIR keeps them. A function using what the print does not cover
//! (dynamic stack slots or types, stack maps, patchable calls) has no print: it is lifted,
//! as every function used to be.
//!
//! The immediates of constants (`iconst`, `f16const`, `f32const`, `f64const`: what
//! `merge-similar` makes holes of) follow the rest of the words, in order (where each goes,
//! its opcode tells). The words up to there are the print *but for constants*.
//!
//! An instruction's head is one word: its opcode, its number of results, and the type of the
//! first, whose number is left out where it is the next (its first appearance, as nearly
//! always). Then come the numbers of its operands, and what else its format holds.
//!
//! # Digests, not words
//!
//! The words are never kept: each goes into a hash as it is written. What is kept of a
//! function compiled unlifted is two digests of its print, its callees and the values of its
//! constants (`input_index`): about 100 bytes, and 8 a constant. The digests are SipHash-1-3
//! with 128 bits of output and a key drawn at random once per process:
//! - *exact*, of the whole print: two functions with equal exact digests are taken to be
//!   equal up to renaming and callees, and are merged on that alone. SipHash is a keyed
//!   pseudo-random function: an input cannot be built to collide with another without the
//!   key, which never leaves the process, and two different prints collide by chance with a
//!   probability of 2^-128 per pair. This is the trust Cranelift's incremental cache places
//!   in SHA-256 (a keyed hash, where SHA-256 needs no key, because it is as strong for
//!   inputs that cannot see the key and costs a fraction of it per word);
//! - *alike*, of the print but for constants (64 bits): it only finds candidates, each
//!   checked by the exact digest of a copy with the candidate's constants.
//!
//! The alternative was to keep the words and compare them when hashes are equal. That costs
//! memory for every function a long-running JIT compiles (about 850 bytes for a function of
//! 30 instructions), and a comparison per candidate.

use crate::opmap::{lir_memflags, lir_type};
use cranelift_codegen::ir::{self, BlockArg, BlockCall, ExternalName, InstructionData as D};
use cranelift_entity::EntityRef;
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

/// A digest of a print (see the module documentation).
pub(crate) type Digest = u128;

/// The print of the function walked last: its digests, callees and constants.
#[derive(Default, Clone)]
pub(crate) struct Print {
    /// The digest of the whole print.
    pub exact: Digest,
    /// The digest of the print but for the values of constants.
    pub alike: u64,
    /// The module function each external function reference names, by reference (`u32::MAX`:
    /// it names something else, spelt out in the print).
    pub callees: Vec<u32>,
    /// The constants, in print order: the bits of each immediate, and its instruction.
    pub constants: Vec<(u64, ir::Inst)>,
}

/// What a walk records of a function's references to others, for `skip::Survey`.
pub(crate) struct Refs<'a> {
    /// The function's position in its batch.
    pub pos: u32,
    /// (position, reference to a module function), as `skip::Survey::refs`.
    pub refs: &'a mut Vec<(u32, Reference)>,
    /// (position, namespace, index, as a function), as `skip::Survey::near`.
    pub near: &'a mut Vec<(u32, u32, u32, bool)>,
}

/// Walks functions, with scratch kept from one function to the next.
pub(crate) struct Walker {
    /// First-appearance number + 1 of each value and block (0: not seen yet).
    values: Vec<u32>,
    blocks: Vec<u32>,
    seen_values: u32,
    seen_blocks: u32,
    /// The blocks the entry reaches, in print order, and what finds them.
    order: Vec<ir::Block>,
    stack: Vec<ir::Block>,
    reached: Vec<bool>,
    /// A terminator's destinations (target, place among them).
    dests: Vec<(ir::Block, u32)>,
    /// The print's hash, fed word by word.
    h: Sip13,
    /// The digests' key.
    key: (u64, u64),
    /// The print can be written (nothing it does not cover met yet).
    ok: bool,
    /// The last type printed, and its word (`None`: not LIR's).
    last_type: (ir::Type, Option<u32>),
}

impl Default for Walker {
    /// A walker with the process's key.
    fn default() -> Self {
        Walker::with_key(digest_key())
    }
}

impl Walker {
    /// A walker whose digests use `key`.
    pub(crate) fn with_key(key: (u64, u64)) -> Walker {
        Walker {
            values: Vec::new(),
            blocks: Vec::new(),
            seen_values: 0,
            seen_blocks: 0,
            order: Vec::new(),
            stack: Vec::new(),
            reached: Vec::new(),
            dests: Vec::new(),
            h: Sip13::new(key),
            key,
            ok: true,
            last_type: (
                ir::types::INVALID,
                lir_type(ir::types::INVALID).map(|l| l.raw().into()),
            ),
        }
    }
}

/// SipHash-1-3 with 128 bits of output (Aumasson and Bernstein's SipHash, with one
/// compression and three finalization rounds, as Rust's standard hash maps use it), fed 32-bit
/// words: the message is the words' little-endian bytes, so the digest is that of the
/// reference algorithm over those bytes (`tests::sip13_is_siphash`).
#[derive(Clone)]
struct Sip13 {
    v: [u64; 4],
    /// Words waiting to be hashed, `n` of them (hashed 32 blocks at a time: a word costs a
    /// store, and the rounds run with the state in registers).
    buf: [u32; BUF],
    n: usize,
    /// Bytes hashed so far.
    len: u64,
}

const BUF: usize = 64;

impl Sip13 {
    fn new(key: (u64, u64)) -> Sip13 {
        Sip13 {
            v: Sip13::new_state(key),
            buf: [0; BUF],
            n: 0,
            len: 0,
        }
    }

    fn new_state((k0, k1): (u64, u64)) -> [u64; 4] {
        [
            k0 ^ 0x736f_6d65_7073_6575,
            // (The 128-bit variant's tweak.)
            k1 ^ 0x646f_7261_6e64_6f6d ^ 0xee,
            k0 ^ 0x6c79_6765_6e65_7261,
            k1 ^ 0x7465_6462_7974_6573,
        ]
    }

    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    #[inline(always)]
    fn word(&mut self, w: u32) {
        self.buf[self.n % BUF] = w;
        self.n += 1;
        if self.n == BUF {
            self.blocks();
        }
    }

    /// Start again with `key` (the buffer's old words are never read).
    fn reset(&mut self, key: (u64, u64)) {
        let fresh = Sip13::new_state(key);
        (self.v, self.n, self.len) = (fresh, 0, 0);
    }

    /// Hash the buffered words but an odd last one, which stays.
    fn blocks(&mut self) {
        let mut v = self.v;
        for p in self.buf[..self.n / 2 * 2].chunks_exact(2) {
            let m = u64::from(p[0]) | u64::from(p[1]) << 32;
            v[3] ^= m;
            Self::round(&mut v);
            v[0] ^= m;
        }
        self.v = v;
        self.len += 8 * (self.n / 2) as u64;
        if self.n % 2 == 1 {
            self.buf[0] = self.buf[self.n - 1];
        }
        self.n %= 2;
    }

    /// The digest of the words fed so far (more may follow).
    fn finish(&mut self) -> u128 {
        self.blocks();
        let mut v = self.v;
        let tail = match self.n {
            1 => u64::from(self.buf[0]),
            _ => 0,
        };
        let len = self.len + 4 * self.n as u64;
        let b = (len & 0xff) << 56 | tail;
        v[3] ^= b;
        Self::round(&mut v);
        v[0] ^= b;
        v[2] ^= 0xee;
        for _ in 0..3 {
            Self::round(&mut v);
        }
        let h1 = v[0] ^ v[1] ^ v[2] ^ v[3];
        v[1] ^= 0xdd;
        for _ in 0..3 {
            Self::round(&mut v);
        }
        let h2 = v[0] ^ v[1] ^ v[2] ^ v[3];
        u128::from(h1) | u128::from(h2) << 64
    }
}

/// The digests' key: drawn once per process from the standard library's random hash keys
/// (which the operating system seeds), never shown.
fn digest_key() -> (u64, u64) {
    use std::hash::BuildHasher;
    static KEY: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        let s = std::collections::hash_map::RandomState::new();
        (
            s.hash_one(0x6d65_7267_656c_6966_u64),
            s.hash_one(0x7470_7269_6e74_u64),
        )
    })
}

#[cfg(test)]
thread_local! {
    /// Tests only: exact digests keep 4 bits, so that different prints collide.
    pub(crate) static WEAK_DIGESTS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks in a print: which kind of name or item follows.
const NAME_USER: u32 = 1;
const NAME_TESTCASE: u32 = 2;
const NAME_LIBCALL: u32 = 3;
const NAME_KNOWN: u32 = 4;
const CALLEE: u32 = 5;
const ARG_VALUE: u32 = 6;
const ARG_RET: u32 = 7;
const ARG_EXN: u32 = 8;
const ITEM_TAG: u32 = 9;
const ITEM_DEFAULT: u32 = 10;
const ITEM_CONTEXT: u32 = 11;

impl Walker {
    /// Walk `func`: its shape key, with its references recorded in `refs`; with `PRINT`, its
    /// print into `print` too (`false` when it has none; without `PRINT`, always `false`).
    pub(crate) fn walk<const PRINT: bool>(
        &mut self,
        func: &ir::Function,
        mut refs: Refs,
        print: &mut Print,
    ) -> (u64, bool) {
        self.ok = PRINT;
        if PRINT {
            print.callees.clear();
            print.constants.clear();
            self.h.reset(self.key);
            self.values.clear();
            self.values.resize(func.dfg.num_values(), 0);
            self.blocks.clear();
            self.blocks.resize(func.dfg.num_blocks(), 0);
            (self.seen_values, self.seen_blocks) = (0, 0);
        }
        let (blocks, split) = self.reach(func);
        self.header::<PRINT>(func, &mut refs, print);
        let mut sum = 0u64;
        let order = std::mem::take(&mut self.order);
        for &b in &order {
            if PRINT {
                self.block_params(func, b);
            }
            for inst in func.layout.block_insts(b) {
                let (mixed, data) = survey_inst(func, inst, &mut refs);
                sum = sum.wrapping_add(mixed);
                if PRINT {
                    self.inst(func, inst, data, print);
                }
            }
        }
        // The blocks no path reaches refer to functions too (the lifter lifts every block).
        if order.len() < func.dfg.num_blocks() {
            for b in func.layout.blocks() {
                if !self.reached.get(b.index()).copied().unwrap_or(false) {
                    for inst in func.layout.block_insts(b) {
                        survey_inst(func, inst, &mut refs);
                    }
                }
            }
        }
        self.order = order;
        sum = sum.wrapping_add(u64::from(split).wrapping_mul(spread(ir::Opcode::Jump as u64)));
        let mut key = FxHasher::default();
        func.signature.hash(&mut key);
        (blocks + split as u64, sum).hash(&mut key);
        if !(PRINT && self.ok) {
            return (key.finish(), false);
        }
        // The print but for constants, then the constants' values.
        print.alike = self.h.finish() as u64;
        for &(bits, _) in &print.constants {
            self.h.word(bits as u32);
            self.h.word((bits >> 32) as u32);
        }
        print.exact = self.h.finish();
        #[cfg(test)]
        if WEAK_DIGESTS.get() {
            print.exact &= 0xf;
        }
        (key.finish(), true)
    }

    /// The blocks the entry reaches, depth first (`self.order`: the layout's order does not
    /// count, nor does a block no path reaches), their number, and the edges the lifter
    /// splits on the way: an edge to a target reached before from the same terminator with
    /// other arguments than the first such edge (`Lifter::fill_phis`) gets a block with a
    /// `jump`, as if the input had spelled it out.
    fn reach(&mut self, func: &ir::Function) -> (u64, u32) {
        let dfg = &func.dfg;
        let n = dfg.num_blocks();
        self.order.clear();
        self.reached.clear();
        self.reached.resize(n, false);
        let mut stack = std::mem::take(&mut self.stack);
        stack.extend(func.layout.entry_block());
        let mut split = 0u32;
        let pool = &dfg.value_lists;
        while let Some(b) = stack.pop() {
            if std::mem::replace(&mut self.reached[b.index()], true) {
                continue;
            }
            self.order.push(b);
            let Some(last) = func.layout.last_inst(b) else {
                continue;
            };
            let calls = dfg.insts[last].branch_destination(&dfg.jump_tables, &dfg.exception_tables);
            self.dests.clear();
            for (k, bc) in calls.iter().enumerate().rev() {
                let t = bc.block(pool);
                // (Not a block of this function: unverified input, which the lifter refuses.)
                if t.index() < n {
                    self.dests.push((t, k as u32));
                    if !self.reached[t.index()] {
                        stack.push(t);
                    }
                }
            }
            if self.dests.len() > 1 {
                self.dests.sort_unstable();
                let same_args = |a: &BlockCall, b: &BlockCall| {
                    let arg = |x: BlockArg| match x {
                        BlockArg::Value(v) => BlockArg::Value(dfg.resolve_aliases(v)),
                        x => x,
                    };
                    a.args(pool).map(arg).eq(b.args(pool).map(arg))
                };
                // The first edge of each target's run (sorted: the earliest one).
                let mut g = 0;
                for w in 1..self.dests.len() {
                    if self.dests[w].0 != self.dests[g].0 {
                        g = w;
                        continue;
                    }
                    let (first, k) = (self.dests[g].1, self.dests[w].1);
                    if !same_args(&calls[first as usize], &calls[k as usize]) {
                        split += 1;
                    }
                }
            }
        }
        self.stack = stack;
        (self.order.len() as u64, split)
    }

    #[inline]
    fn word(&mut self, w: u32) {
        self.h.word(w);
    }

    fn word64(&mut self, x: u64) {
        self.h.word(x as u32);
        self.h.word((x >> 32) as u32);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u32);
        for c in b.chunks(4) {
            let mut x = [0u8; 4];
            x[..c.len()].copy_from_slice(c);
            self.word(u32::from_le_bytes(x));
        }
    }

    #[inline]
    fn ty(&mut self, t: ir::Type) {
        let w = self.lir_ty(t);
        self.word(w);
    }

    /// A type's word: LIR's type (none: the print has none).
    #[inline]
    fn lir_ty(&mut self, t: ir::Type) -> u32 {
        // (Most values have the type the last one had.)
        if t != self.last_type.0 {
            self.last_type = (t, lir_type(t).map(|l| l.raw().into()));
        }
        self.last_type.1.unwrap_or_else(|| {
            self.ok = false;
            0
        })
    }

    #[inline]
    fn memflags(&mut self, dfg: &ir::DataFlowGraph, mf: ir::MemFlags) {
        let f = lir_memflags(dfg.mem_flags[mf]);
        self.word(u32::from(f.trap) | u32::from(f.bits) << 8);
        self.word(f.region.map_or(0, |r| r.as_u32() + 1));
    }

    fn signature(&mut self, sig: &ir::Signature) {
        self.word(sig.call_conv as u32);
        for list in [&sig.params, &sig.returns] {
            self.word(list.len() as u32);
            for p in list {
                let purpose = match p.purpose {
                    ir::ArgumentPurpose::Normal => 0,
                    ir::ArgumentPurpose::StructArgument(size) => {
                        size.checked_add(4).unwrap_or_else(|| {
                            self.ok = false;
                            0
                        })
                    }
                    ir::ArgumentPurpose::StructReturn => 1,
                    ir::ArgumentPurpose::VMContext => 2,
                };
                self.ty(p.value_type);
                self.word(p.extension as u32);
                self.word(purpose);
            }
        }
    }

    fn external_name(&mut self, func: &ir::Function, name: &ExternalName) {
        match name {
            ExternalName::User(r) => match func.params.user_named_funcs().get(*r) {
                Some(u) => {
                    self.word(NAME_USER);
                    self.word(u.namespace);
                    self.word(u.index);
                }
                // (Unverified input; such a function is never lifted.)
                None => {
                    self.word(NAME_USER);
                    self.word64(u64::MAX);
                }
            },
            ExternalName::TestCase(t) => {
                self.word(NAME_TESTCASE);
                self.bytes(t.raw());
            }
            ExternalName::LibCall(l) => {
                self.word(NAME_LIBCALL);
                self.word(*l as u32);
            }
            ExternalName::KnownSymbol(k) => {
                self.word(NAME_KNOWN);
                self.word(*k as u32);
            }
        }
    }

    /// Everything but the blocks: the signature and side tables (printed), and the
    /// references of symbol global values (every one counts, used or not, as the lifter
    /// lifts them).
    fn header<const PRINT: bool>(
        &mut self,
        func: &ir::Function,
        refs: &mut Refs,
        print: &mut Print,
    ) {
        let dfg = &func.dfg;
        for gv in func.global_values.values() {
            if let ir::GlobalValueData::Symbol {
                name, colocated, ..
            } = gv
            {
                if let Some(i) = user(func, refs, name, *colocated, false) {
                    refs.refs.push((refs.pos, Reference::Observed(i)));
                }
            }
        }
        if !PRINT {
            return;
        }
        if !func.dynamic_stack_slots.is_empty() || !dfg.dynamic_types.is_empty() {
            self.ok = false;
            return;
        }
        self.signature(&func.signature);
        self.word(func.sized_stack_slots.len() as u32);
        for ss in func.sized_stack_slots.values() {
            self.word(ss.size);
            self.word(ss.align_shift.into());
        }
        self.word(dfg.signatures.len() as u32);
        for sig in dfg.signatures.values() {
            self.signature(sig);
        }
        self.word(dfg.alias_regions.len() as u32);
        for (_, r) in dfg.alias_regions.iter() {
            self.word(r.user_id);
            self.bytes(r.description.as_bytes());
        }
        self.word(func.global_values.len() as u32);
        for gv in func.global_values.values() {
            match *gv {
                ir::GlobalValueData::VMContext => self.word(1),
                ir::GlobalValueData::Load {
                    base,
                    offset,
                    global_type,
                    flags,
                } => {
                    self.word(2);
                    self.word(base.as_u32());
                    self.word(i32::from(offset) as u32);
                    self.ty(global_type);
                    self.memflags(dfg, flags);
                }
                ir::GlobalValueData::IAddImm {
                    base,
                    offset,
                    global_type,
                } => {
                    self.word(3);
                    self.word(base.as_u32());
                    self.word64(offset.bits() as u64);
                    self.ty(global_type);
                }
                ir::GlobalValueData::Symbol {
                    ref name,
                    offset,
                    colocated,
                    tls,
                } => {
                    self.word(4);
                    self.external_name(func, name);
                    self.word64(offset.bits() as u64);
                    self.word(u32::from(colocated));
                    self.word(u32::from(tls));
                }
                ir::GlobalValueData::DynScaleTargetConst { .. } => self.ok = false,
            }
        }
        self.word(func.stack_limit.map_or(0, |g| g.as_u32() + 1));
        self.word(dfg.ext_funcs.len() as u32);
        for ext in dfg.ext_funcs.values() {
            // (The lifter refuses patchable calls: such a function is lifted, and passed
            // through, so that `MergeModule::passed_through` names it.)
            if ext.patchable {
                self.ok = false;
            }
            self.word(ext.signature.as_u32());
            self.word(ext.colocated.into());
            let named = match ext.name {
                ExternalName::User(r) => func.params.user_named_funcs().get(r),
                _ => None,
            };
            match named {
                Some(u) if u.namespace == 0 => {
                    self.word(CALLEE);
                    print.callees.push(u.index);
                }
                _ => {
                    self.external_name(func, &ext.name);
                    print.callees.push(u32::MAX);
                }
            }
        }
    }

    fn block_params(&mut self, func: &ir::Function, b: ir::Block) {
        let dfg = &func.dfg;
        let n = self.block(b);
        self.word(n);
        self.word(func.layout.is_cold(b).into());
        let params = dfg.block_params(b);
        self.word(params.len() as u32);
        for &p in params {
            let v = self.def(p);
            self.word(v);
            self.ty(dfg.value_type(p));
        }
    }

    /// An instruction's words (its data is `data`).
    fn inst(&mut self, func: &ir::Function, inst: ir::Inst, data: D, print: &mut Print) {
        let dfg = &func.dfg;
        let opcode = data.opcode();
        if dfg
            .user_stack_map_entries(inst)
            .is_some_and(|e| !e.is_empty())
        {
            self.ok = false;
        }
        // The instruction's head, in one word: its opcode, how many results it has (15: the
        // count follows), whether the first is numbered next (its first appearance; else its
        // number follows) and its type. (The controlling type variable is the type of a
        // result or of an operand, both in the print.)
        let results = dfg.inst_results(inst);
        let mut head = opcode as u32 | (results.len().min(15) as u32) << 8;
        let mut number = None;
        if let Some(&r) = results.first() {
            match self.def_fresh(r) {
                (_, true) => head |= 1 << 12,
                (n, false) => number = Some(n),
            }
            head |= self.lir_ty(dfg.value_type(r)) << 16;
        }
        self.word(head);
        if results.len() >= 15 {
            self.word(results.len() as u32);
        }
        if let Some(n) = number {
            self.word(n);
        }
        for &r in results.iter().skip(1) {
            let v = self.def(r);
            self.word(v);
            self.ty(dfg.value_type(r));
        }
        let pool = &dfg.value_lists;
        match data {
            D::AtomicCas { args, flags, .. } => {
                self.fixed(dfg, &args);
                self.memflags(dfg, flags);
            }
            D::AtomicRmw {
                args, flags, op, ..
            } => {
                self.fixed(dfg, &args);
                self.memflags(dfg, flags);
                self.word(op as u32);
            }
            D::Binary { args, .. } => self.fixed(dfg, &args),
            D::BinaryImm8 { arg, imm, .. } => {
                self.fixed(dfg, &[arg]);
                self.word(imm.into());
            }
            D::BranchTable { arg, table, .. } => {
                self.fixed(dfg, &[arg]);
                let jt = &dfg.jump_tables[table];
                self.word(jt.as_slice().len() as u32);
                self.block_call(dfg, &jt.default_block());
                for bc in jt.as_slice() {
                    self.block_call(dfg, bc);
                }
            }
            D::Brif { arg, blocks, .. } => {
                self.fixed(dfg, &[arg]);
                for bc in &blocks {
                    self.block_call(dfg, bc);
                }
            }
            D::Call { args, func_ref, .. } => {
                self.word(func_ref.as_u32());
                self.values_of(dfg, args.as_slice(pool));
            }
            D::CallIndirect { args, sig_ref, .. } => {
                self.word(sig_ref.as_u32());
                self.values_of(dfg, args.as_slice(pool));
            }
            D::CondTrap { arg, code, .. } => {
                self.fixed(dfg, &[arg]);
                self.word(code.as_raw().get().into());
            }
            D::DynamicStackAddr { .. } => self.ok = false,
            D::ExceptionHandlerAddress { block, imm, .. } => {
                let n = self.block(block);
                self.word(n);
                self.word64(imm.bits() as u64);
            }
            D::FloatCompare { args, cond, .. } => {
                self.fixed(dfg, &args);
                self.word(cond as u32);
            }
            D::FuncAddr { func_ref, .. } => self.word(func_ref.as_u32()),
            D::IntAddTrap { args, code, .. } => {
                self.fixed(dfg, &args);
                self.word(code.as_raw().get().into());
            }
            D::IntCompare { args, cond, .. } => {
                self.fixed(dfg, &args);
                self.word(cond as u32);
            }
            D::Jump { destination, .. } => self.block_call(dfg, &destination),
            D::Load {
                arg, flags, offset, ..
            } => {
                self.fixed(dfg, &[arg]);
                self.memflags(dfg, flags);
                self.word(i32::from(offset) as u32);
            }
            D::LoadNoOffset { arg, flags, .. } => {
                self.fixed(dfg, &[arg]);
                self.memflags(dfg, flags);
            }
            D::MultiAry { args, .. } => self.values_of(dfg, args.as_slice(pool)),
            D::NullAry { .. } => {}
            D::Shuffle { args, imm, .. } => {
                self.fixed(dfg, &args);
                match dfg.immediates.get(imm) {
                    Some(b) => self.bytes(b.as_slice()),
                    None => self.ok = false,
                }
            }
            D::StackAddr {
                stack_slot, offset, ..
            } => {
                self.word(stack_slot.as_u32());
                self.word(i32::from(offset) as u32);
            }
            D::Store {
                args,
                flags,
                offset,
                ..
            } => {
                self.fixed(dfg, &args);
                self.memflags(dfg, flags);
                self.word(i32::from(offset) as u32);
            }
            D::StoreNoOffset { args, flags, .. } => {
                self.fixed(dfg, &args);
                self.memflags(dfg, flags);
            }
            D::Ternary { args, .. } => self.fixed(dfg, &args),
            D::TernaryImm8 { args, imm, .. } => {
                self.fixed(dfg, &args);
                self.word(imm.into());
            }
            D::Trap { code, .. } => self.word(code.as_raw().get().into()),
            D::TryCall {
                args,
                func_ref,
                exception,
                ..
            } => {
                self.word(func_ref.as_u32());
                self.values_of(dfg, args.as_slice(pool));
                self.exception_table(dfg, exception);
            }
            D::TryCallIndirect {
                args, exception, ..
            } => {
                self.values_of(dfg, args.as_slice(pool));
                self.exception_table(dfg, exception);
            }
            D::Unary { arg, .. } => self.fixed(dfg, &[arg]),
            D::UnaryConst {
                constant_handle, ..
            } => self.bytes(dfg.constants.get(constant_handle).as_slice()),
            D::UnaryGlobalValue { global_value, .. } => self.word(global_value.as_u32()),
            D::UnaryIeee16 { imm, .. } => Self::constant(print, imm.bits().into(), inst),
            D::UnaryIeee32 { imm, .. } => Self::constant(print, imm.bits().into(), inst),
            D::UnaryIeee64 { imm, .. } => Self::constant(print, imm.bits(), inst),
            D::UnaryImm { imm, .. } => Self::constant(print, imm.bits() as u64, inst),
        }
    }

    /// A constant's immediate: its value after the rest of the print (where it is, the
    /// opcode tells).
    #[inline]
    fn constant(print: &mut Print, bits: u64, inst: ir::Inst) {
        print.constants.push((bits, inst));
    }

    fn exception_table(&mut self, dfg: &ir::DataFlowGraph, et: ir::ExceptionTable) {
        let data = &dfg.exception_tables[et];
        self.word(data.signature().as_u32());
        self.block_call(dfg, data.normal_return());
        for item in data.items() {
            match item {
                ir::ExceptionTableItem::Tag(tag, bc) => {
                    self.word(ITEM_TAG);
                    self.word(tag.as_u32());
                    self.block_call(dfg, &bc);
                }
                ir::ExceptionTableItem::Default(bc) => {
                    self.word(ITEM_DEFAULT);
                    self.block_call(dfg, &bc);
                }
                ir::ExceptionTableItem::Context(v) => {
                    self.word(ITEM_CONTEXT);
                    self.fixed(dfg, &[v]);
                }
            }
        }
        self.word(0);
    }

    #[inline]
    fn block_call(&mut self, dfg: &ir::DataFlowGraph, bc: &BlockCall) {
        let n = self.block(bc.block(&dfg.value_lists));
        self.word(n);
        let args = bc.args(&dfg.value_lists);
        self.word(args.len() as u32);
        for a in args {
            match a {
                BlockArg::Value(v) => {
                    let v = self.value(dfg, v);
                    self.word(ARG_VALUE);
                    self.word(v);
                }
                BlockArg::TryCallRet(i) => {
                    self.word(ARG_RET);
                    self.word(i);
                }
                BlockArg::TryCallExn(i) => {
                    self.word(ARG_EXN);
                    self.word(i);
                }
            }
        }
    }

    /// The values of a list (a call's arguments, a return's), counted.
    #[inline]
    fn values_of(&mut self, dfg: &ir::DataFlowGraph, vs: &[ir::Value]) {
        self.word(vs.len() as u32);
        self.fixed(dfg, vs);
    }

    /// Values as many as the opcode's format always has.
    #[inline]
    fn fixed(&mut self, dfg: &ir::DataFlowGraph, vs: &[ir::Value]) {
        for &v in vs {
            let n = self.value(dfg, v);
            self.word(n);
        }
    }

    /// The number of `v`, defined here (a result or a block parameter, never an alias): its
    /// first appearance.
    #[inline]
    fn def(&mut self, v: ir::Value) -> u32 {
        let slot = &mut self.values[v.index()];
        if *slot == 0 {
            self.seen_values += 1;
            *slot = self.seen_values;
        }
        *slot
    }

    /// The number of `v`, defined here, and whether this is its first appearance.
    #[inline]
    fn def_fresh(&mut self, v: ir::Value) -> (u32, bool) {
        let slot = &mut self.values[v.index()];
        if *slot == 0 {
            self.seen_values += 1;
            *slot = self.seen_values;
            return (*slot, true);
        }
        (*slot, false)
    }

    /// The number of `v`, used here: an alias's is that of the value it stands for (resolved
    /// once, at its first appearance).
    #[inline]
    fn value(&mut self, dfg: &ir::DataFlowGraph, v: ir::Value) -> u32 {
        match self.values[v.index()] {
            0 => {
                let n = self.def(dfg.resolve_aliases(v));
                self.values[v.index()] = n;
                n
            }
            n => n,
        }
    }

    #[inline]
    fn block(&mut self, b: ir::Block) -> u32 {
        let slot = &mut self.blocks[b.index()];
        if *slot == 0 {
            self.seen_blocks += 1;
            *slot = self.seen_blocks;
        }
        *slot
    }
}

/// An instruction's references recorded in `refs`. Returns its opcode, mixed, for the shape
/// key, and its data.
#[inline(always)]
fn survey_inst(func: &ir::Function, inst: ir::Inst, refs: &mut Refs) -> (u64, D) {
    let dfg = &func.dfg;
    let data = dfg.insts[inst];
    // (Opcodes are numbered from 1, so every instruction adds to the key's sum.)
    let mixed = spread(data.opcode() as u64);
    if let D::FuncAddr { func_ref, .. } | D::TryCall { func_ref, .. } | D::Call { func_ref, .. } =
        data
    {
        let ext = &dfg.ext_funcs[func_ref];
        if let Some(i) = user(func, refs, &ext.name, ext.colocated, true) {
            let r = match data {
                D::Call { .. } => Reference::Called(i),
                _ => Reference::Observed(i),
            };
            refs.refs.push((refs.pos, r));
        }
    }
    (mixed, data)
}

/// The module function index of user name `n` (namespace 0), recording it as near when
/// `colocated` (as a function or as data).
fn user(
    func: &ir::Function,
    refs: &mut Refs,
    n: &ExternalName,
    colocated: bool,
    as_func: bool,
) -> Option<u32> {
    let ExternalName::User(r) = n else {
        return None;
    };
    let u = func.params.user_named_funcs().get(*r)?;
    if colocated {
        refs.near.push((refs.pos, u.namespace, u.index, as_func));
    }
    (u.namespace == 0).then_some(u.index)
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

/// A bijective mix of a word (the finaliser of MurmurHash3), so that a sum of mixed words
/// depends on every bit of every word.
pub(crate) fn spread(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ x >> 33
}

#[cfg(test)]
mod tests {
    use super::*;
    use siphasher::sip128::{Hasher128, SipHasher13};

    /// Our word-fed SipHash-1-3 is the reference algorithm over the words' bytes.
    #[test]
    fn sip13_is_siphash() {
        for n in 0..200u32 {
            let words: Vec<u32> = (0..n)
                .map(|k| k.wrapping_mul(0x9e37_79b9) ^ 0x5a5a)
                .collect();
            let key = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908 + u64::from(n));
            let mut ours = Sip13::new(key);
            let mut theirs = SipHasher13::new_with_keys(key.0, key.1);
            for (k, &w) in words.iter().enumerate() {
                // (A digest taken midway, as the alike digest is, changes nothing after.)
                if k == words.len() / 2 {
                    ours.finish();
                }
                ours.word(w);
                theirs.write(&w.to_le_bytes());
            }
            let d = theirs.finish128();
            assert_eq!(
                ours.finish(),
                u128::from(d.h1) | u128::from(d.h2) << 64,
                "{n} words"
            );
        }
    }
}
