//! The hashing walk: one walk per function, in the order `FunctionComparator` visits it,
//! produces the weak hash (MergeFunctions' cheap filter), a token stream (everything the comparator
//! looks at except which function a direct call calls) with its hash, and the direct call
//! sites; functions are classed into *shapes* (equal token streams) on the way.

use super::scope::ScopeMap;
use super::MergeReport;
use crate::hash::{finish, HashSet};
use crate::lir::*;
use crate::state::*;
use core::hash::{Hash, Hasher};
use cranelift_entity::EntityRef;
use rustc_hash::FxHasher;

/// Scratch tables of the hashing walk, reused across functions.
#[derive(Default)]
pub struct HashScratch {
    reg_sn: Vec<u32>,
    block_sn: Vec<u32>,
    order: Vec<Block>,
    /// The stream being written (`Words`): its length is the most room ever made, all of
    /// it written once (zeros first), so a walk writes into it with no capacity checks and
    /// copies the stream to `WalkOut::tokens` at the end.
    tokens: Vec<u32>,
    /// An instruction's format fields, before they go to the stream.
    fields: Vec<u32>,
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
    /// Walk for `merge-similar`: constant operands are *holes*, written in the stream as
    /// their kind only (so functions equal up to their constants have equal streams) and
    /// listed in `holes`.
    pub similar: bool,
    /// With `similar`: each constant operand (instruction, operand index, the constant), in
    /// walk order.
    pub holes: Vec<(Inst, u16, Operand)>,
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

/// The token stream being written: words go to `buf[n..]`, room made ahead (see `room!` in
/// `walk_function`), so writing a word is a store and a bounds check, with no capacity check
/// and no length kept in memory. The bounds check stays: room too short would be a panic,
/// never a bad write.
struct Words<'b> {
    buf: &'b mut [u32],
    n: usize,
}

impl Words<'_> {
    #[inline(always)]
    fn put(&mut self, x: u32) {
        self.buf[self.n] = x;
        self.n += 1;
    }

    fn put_slice(&mut self, xs: &[u32]) {
        self.buf[self.n..self.n + xs.len()].copy_from_slice(xs);
        self.n += xs.len();
    }

    /// A register operand's serial number: one word (kind 0) when it fits 16 bits (always,
    /// in a `small` function), else two. (The bits above stay clear in a word of one
    /// register: `walk_function` packs a second register there.)
    #[inline(always)]
    fn reg(&mut self, sn: u32, small: bool) {
        if small || sn < 1 << 16 {
            self.put(sn)
        } else {
            self.put(TK_BIG_REG);
            self.put(sn);
        }
    }

    /// One word when `x` fits 25 bits (bit 2 of the word set, `x` in bits 3..28), two when
    /// it fits 32, else three (the low bit of `kind` set). `kind`'s low three bits are clear.
    #[inline(always)]
    fn i64(&mut self, kind: u32, x: i64) {
        if (-(1 << 24)..1 << 24).contains(&x) {
            self.put(kind | 4 | (x as u32 & 0x1FF_FFFF) << 3);
        } else if x == x as i32 as i64 {
            self.put(kind);
            self.put(x as u32);
        } else {
            self.put(kind | 1);
            self.put(x as u32);
            self.put((x >> 32) as u32);
        }
    }
}

/// Make `buf` (all of it, words written before or zeros) at least `len` words long.
#[cold]
#[inline(never)]
fn grow_tokens(buf: &mut Vec<u32>, len: usize) {
    let len = (len + 256).max(2 * buf.len());
    buf.resize(len, 0);
}

/// Words an operand writes at most (a memory reference with two big registers).
const OPERAND_WORDS: usize = 6;

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
/// A constant operand in a `similar` walk (the low bits tell integer, f32, f64).
const TK_HOLE: u32 = 9 << 28;

fn hash_memflags(f: &Function, r: MemFlagsRef, h: &mut Tokens) {
    match memflags_words(f, r) {
        (w, None) => h.0.push(w),
        (w, Some(id)) => h.0.extend_from_slice(&[w, id]),
    }
}

/// The words of a memory-flags entry in the stream: flags and trap code, with bit 16 set when
/// the region's id follows.
#[inline(always)]
fn memflags_words(f: &Function, r: MemFlagsRef) -> (u32, Option<u32>) {
    let x = f.memflags[r];
    let w = x.bits as u32 | (x.trap as u32) << 8;
    match x.region {
        None => (w, None),
        Some(g) => (w | 1 << 16, Some(f.regions[g].id)),
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

/// Formats with fields of their own in the stream (`format_fields`), as a bit set.
const FIELD_FORMATS: u32 = 1 << Format::Load as u32
    | 1 << Format::Store as u32
    | 1 << Format::Call as u32
    | 1 << Format::Addr as u32
    | 1 << Format::Trap as u32
    | 1 << Format::CondTrap as u32
    | 1 << Format::GlobalValue as u32
    | 1 << Format::Opaque as u32;

/// The formats of loads and stores: their fields are memory flags alone, which `put_head_slow`
/// writes to the stream itself (no `format_fields` buffer).
const MEM_FORMATS: u32 = 1 << Format::Load as u32 | 1 << Format::Store as u32;

/// The fields of an instruction particular to its format, written after its head word (to
/// `t`, cleared first): memory flags, signatures, trap codes, global values, opaque records.
#[inline(never)]
fn format_fields(f: &Function, inst: Inst, d: &InstData, format: Format, t: &mut Vec<u32>) {
    t.clear();
    match format {
        Format::Load | Format::Store => {
            hash_memflags(f, MemFlagsRef::from_u32(d.aux), &mut Tokens(t))
        }
        Format::Call => {
            push_sig(&f.sigs[SigRef::from_u32(d.aux)], t);
            if d.opcode == Opcode::TryCall {
                f.exn_tables[ExnTable::from_u32(f.aux2(inst))].hash(&mut Tokens(t));
            }
        }
        Format::Addr if d.opcode == Opcode::FuncAddr => {
            push_sig(&f.sigs[SigRef::from_u32(d.aux)], t)
        }
        Format::Trap | Format::CondTrap => t.push(d.aux),
        Format::GlobalValue => hash_global(f, GlobalRef::from_u32(d.aux), &mut Tokens(t)),
        Format::Opaque => {
            let o = &f.opaques[OpaqueRef::from_u32(d.aux)];
            (&o.name, &o.imms, o.effects).hash(&mut Tokens(t));
            let aux2 = f.aux2(inst);
            t.push(aux2.min(1));
            if aux2 != 0 {
                hash_memflags(f, MemFlagsRef::from_u32(aux2 - 1), &mut Tokens(t));
            }
        }
        _ => {}
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
/// - `weak`: signature, opcode sequence (in walk order) and reachable block count: the cheap
///   filter of MergeFunctions. Functions with a unique weak hash are never compared.
/// - `local`: the hash of the token stream.
pub fn function_hashes(f: &Function, s: &mut HashScratch, out: &mut WalkOut) -> (u64, u64) {
    let (weak, local, len) = walk_stream(f, s, out);
    out.tokens.extend_from_slice(&s.tokens[..len]);
    (weak, local)
}

/// `function_hashes`, leaving the token stream in `s.tokens[..len]` (with `len` returned)
/// rather than appending it to `out.tokens` (the walk of a module interns it from there).
fn walk_stream(f: &Function, s: &mut HashScratch, out: &mut WalkOut) -> (u64, u64, usize) {
    // Serial numbers of registers fit 16 bits, and of blocks 28 bits less one, in most
    // functions: those are walked with no checks for the long forms.
    let small = f.regs.len() < 1 << 16 && f.blocks.len() < (1 << 28) - 2;
    match (out.similar, small) {
        (false, true) => walk_function::<false, true>(f, s, out),
        (false, false) => walk_function::<false, false>(f, s, out),
        (true, true) => walk_function::<true, true>(f, s, out),
        (true, false) => walk_function::<true, false>(f, s, out),
    }
}

/// `function_hashes`, for a `similar` walk (constants are holes) or not, and for a function
/// whose register serial numbers fit 16 bits and block serial numbers `(1 << 28) - 1` (`SMALL`:
/// serial numbers are at most the number of registers, the number of blocks plus one).
fn walk_function<const SIMILAR: bool, const SMALL: bool>(
    f: &Function,
    s: &mut HashScratch,
    out: &mut WalkOut,
) -> (u64, u64, usize) {
    let HashScratch {
        reg_sn,
        block_sn,
        order,
        tokens,
        fields,
    } = s;
    // The stream is written to `buf[..n]`, with `Words` for a while at a time (room made
    // first, once for all its words).
    let (mut buf, mut n) = (&mut tokens[..], 0);
    // Make room for `k` more words.
    macro_rules! room {
        ($k:expr) => {
            let k = $k;
            if buf.len() - n < k {
                grow_tokens(tokens, n + k);
                buf = &mut tokens[..];
            }
        };
    }
    macro_rules! words {
        () => {
            Words { buf: &mut *buf, n }
        };
    }
    fields.clear();
    push_sig(&f.sig, fields);
    match f.stack_limit {
        Some(g) => {
            fields.push(1);
            hash_global(f, g, &mut Tokens(fields));
        }
        None => fields.push(0),
    }
    room!(fields.len() + 1);
    let mut w = words!();
    w.put_slice(fields);
    let mut weak = sig_hash(&f.sig);
    if let Some(entry) = f.entry() {
        w.put(1);
        n = w.n;
        reg_sn.clear();
        reg_sn.resize(f.regs.len(), 0);
        block_sn.clear();
        block_sn.resize(f.blocks.len(), 0);
        order.clear();
        let (reg_sn, block_sn) = (&mut reg_sn[..], &mut block_sn[..]);
        let (mut next_b, mut next_r) = (2u32, 1u32);
        block_sn[entry.index()] = 1;
        order.push(entry);
        let mut k = 0;
        while k < order.len() {
            let b = order[k];
            k += 1;
            let insts = f.block_insts(b);
            room!(1);
            buf[n] = insts.len() as u32;
            n += 1;
            for &i in insts {
                let d = &f.insts[i];
                let opcode = d.opcode;
                weak = mix(weak, opcode as u64);
                let (ty, nres, nops) = (d.ty.raw() as u32, d.results().len, d.operands().len);
                let room = 2 * nres as usize + OPERAND_WORDS * nops as usize;
                room!(4 + room);
                // One head word: opcode, type, result and operand counts (a long form, type
                // field 0xFF, when they do not fit). The top bit says the instruction has one
                // result, of its own type, a register not seen before: its serial number is
                // the next one, and no result word follows (the common case in SSA form). One
                // result's register index is `results.start` itself (see `Function::results`).
                let r0 = d.results().start as usize;
                let fresh = nres == 1 && reg_sn[r0] == 0 && f.regs[Reg::new(r0)].ty == d.ty;
                let format = opcode.format();
                let mut call = false;
                // (ty < 0xFF && nres < 1 << 4 && nops < 1 << 11, in one test.)
                if ((ty + 1) >> 8 | nres >> 4 | nops >> 11) == 0
                    && FIELD_FORMATS & 1 << format as u32 == 0
                {
                    buf[n] =
                        opcode as u32 | ty << 8 | nres << 16 | nops << 20 | (fresh as u32) << 31;
                    n += 1;
                } else {
                    n = put_head_slow(f, i, fresh, tokens, n, fields, room);
                    buf = &mut tokens[..];
                    call = format == Format::Call;
                }
                if fresh {
                    reg_sn[r0] = next_r;
                    next_r += 1;
                } else if nres != 0 {
                    n = put_results::<SMALL>(f, i, reg_sn, &mut next_r, buf, n);
                }
                let mut ops = &f.operand_pool[d.operands().range()];
                let mut first = 0;
                let mut w = words!();
                if call {
                    if let Some((&p, rest)) = ops.split_first() {
                        if let Operand::Sym(sym, off) = f.unpack(p) {
                            // The callee: compared by class, so only its position and offset
                            // here.
                            out.callees.push((sym, i));
                            w.i64(TK_CALLEE, off);
                            ops = rest;
                            first = 1;
                        }
                    }
                }
                let holes = SIMILAR && opcode != Opcode::ExnHandlerAddr;
                let blocks = (&mut block_sn[..], &mut next_b, &mut *order);
                let regs = (&mut reg_sn[..], &mut next_r);
                put_operands::<SMALL>(f, (i, first), ops, holes, &mut w, regs, blocks, out);
                n = w.n;
            }
        }
    } else {
        w.put(0);
        n = w.n;
    }
    if f.entry().is_some() {
        weak = mix(weak, order.len() as u64);
    }
    (finish(weak), finish(hash_words(&tokens[..n])), n)
}

/// The words of the operands `ops` of instruction `i`, the first at position `first`
/// (registers by serial number, two in a word where they fit; the others by
/// `put_operand`).
#[allow(clippy::too_many_arguments)]
fn put_operands<const SMALL: bool>(
    f: &Function,
    (i, first): (Inst, usize),
    ops: &[PackedOperand],
    holes: bool,
    w: &mut Words,
    (reg_sn, next_r): (&mut [u32], &mut u32),
    (block_sn, next_b, order): (&mut [u32], &mut u32, &mut Vec<Block>),
    out: &mut WalkOut,
) {
    // Where the word of a register operand alone is, when the next operand, if a register
    // with a serial number under 1 << 12, may share it: two registers in one word
    // `a | b << 16`. A word of one register has its bits 16.. clear and serial numbers start
    // at 1, so the two forms never meet (the head gives the operand count).
    let mut lone = usize::MAX;
    for (k, &p) in ops.iter().enumerate() {
        // Registers first: most operands are.
        if let Some(r) = p.as_reg() {
            let sn = serial(reg_sn, next_r, r);
            if lone != usize::MAX && sn < 1 << 12 {
                w.buf[lone] |= sn << 16;
                lone = usize::MAX;
            } else {
                lone = if SMALL || sn < 1 << 16 {
                    w.n
                } else {
                    usize::MAX
                };
                w.reg(sn, SMALL);
            }
            continue;
        }
        lone = usize::MAX;
        let op = f.unpack(p);
        let pos = (first + k) as u16;
        let blocks = (&mut *block_sn, &mut *next_b, &mut *order);
        put_operand::<SMALL>(f, (i, pos), op, holes, w, reg_sn, next_r, blocks, out);
    }
}

/// The words of operand `op` of instruction `i` (at position `pos`), one that is not a
/// register (`put_operands` writes those): a constant (a hole when `holes`), a block
/// (numbered, and queued in `order`, when first seen), a memory reference, a symbol (its
/// address taken), a stack object, a predicate or an argument.
#[allow(clippy::too_many_arguments)]
fn put_operand<const SMALL: bool>(
    f: &Function,
    (i, pos): (Inst, u16),
    op: Operand,
    holes: bool,
    w: &mut Words,
    reg_sn: &mut [u32],
    next_r: &mut u32,
    (block_sn, next_b, order): (&mut [u32], &mut u32, &mut Vec<Block>),
    out: &mut WalkOut,
) {
    match op {
        Operand::Reg(_) => {}
        Operand::Int(_) | Operand::F32(_) | Operand::F64(_) if holes => {
            let kind = match op {
                Operand::Int(_) => 0,
                Operand::F32(_) => 2,
                _ => 3,
            };
            w.put(TK_HOLE | kind);
            out.holes.push((i, pos, op));
        }
        Operand::Int(x) => w.i64(TK_IMM, x),
        Operand::F32(x) => {
            w.put(TK_IMM | 2);
            w.put(x);
        }
        Operand::F64(x) => {
            w.put(TK_IMM | 3);
            w.put(x as u32);
            w.put((x >> 32) as u32);
        }
        Operand::Block(bb) => {
            let x = &mut block_sn[bb.index()];
            if *x == 0 {
                *x = *next_b;
                *next_b += 1;
                order.push(bb);
            }
            if SMALL || *x < (1 << 28) - 1 {
                w.put(TK_BLOCK | *x);
            } else {
                w.put(TK_BLOCK | ((1 << 28) - 1));
                w.put(*x);
            }
        }
        Operand::Mem {
            base,
            index,
            scale,
            disp,
        } => {
            let head = TK_MEM
                | (scale as u32) << 8
                | (base.is_some() as u32) << 1
                | index.is_some() as u32;
            // A displacement that fits 16 bits goes in the head (bits
            // 12..28, bit 2 set) when the scale leaves them clear.
            if scale < 16 && disp == disp as i16 as i32 {
                w.put(head | 4 | (disp as u32 & 0xFFFF) << 12);
            } else {
                w.put(head);
                w.put(disp as u32);
            }
            if let Some(x) = base.expand() {
                let sn = serial(reg_sn, next_r, x);
                w.reg(sn, SMALL);
            }
            if let Some(x) = index.expand() {
                let sn = serial(reg_sn, next_r, x);
                w.reg(sn, SMALL);
            }
        }
        Operand::Sym(sym, off) => {
            out.taken.push(sym);
            w.i64(TK_SYM, off);
            w.put(sym.as_u32());
        }
        Operand::Stack(so, off) => {
            let sd = f.stack_objs[so];
            w.put(TK_STACK);
            w.put(so.as_u32());
            w.put(sd.size);
            w.put(sd.align_shift as u32);
            w.put(off as u32);
        }
        Operand::Pred(c) => w.put(TK_PRED | c as u32),
        Operand::Arg(n) => {
            w.put(TK_ARG);
            w.put(n);
        }
    }
}

/// An instruction's head in the rare forms (see `walk_function`): the long form, and the
/// format fields (`format_fields`) that follow the head. Room is made for 4 words, then for
/// the fields and `room` more words. Returns the new length of the stream.
#[inline(never)]
fn put_head_slow(
    f: &Function,
    inst: Inst,
    fresh: bool,
    tokens: &mut Vec<u32>,
    n: usize,
    fields: &mut Vec<u32>,
    room: usize,
) -> usize {
    let d = &f.insts[inst];
    let (ty, nres, nops) = (d.ty.raw() as u32, d.results().len, d.operands().len);
    let fresh = (fresh as u32) << 31;
    let mut w = Words {
        buf: &mut tokens[..],
        n,
    };
    if ((ty + 1) >> 8 | nres >> 4 | nops >> 11) == 0 {
        w.put(d.opcode as u32 | ty << 8 | nres << 16 | nops << 20 | fresh);
    } else {
        w.put(d.opcode as u32 | 0xFF << 8 | fresh);
        w.put(ty);
        w.put(nres);
        w.put(nops);
    }
    let mut n = w.n;
    let format = d.opcode.format();
    if MEM_FORMATS & 1 << format as u32 != 0 {
        // A load's or store's fields, its memory flags (as `format_fields` writes them),
        // straight into the stream: one word, two with a region.
        let (w0, region) = memflags_words(f, MemFlagsRef::from_u32(d.aux));
        if tokens.len() - n < 2 + room {
            grow_tokens(tokens, n + 2 + room);
        }
        tokens[n] = w0;
        n += 1;
        if let Some(id) = region {
            tokens[n] = id;
            n += 1;
        }
        return n;
    }
    if FIELD_FORMATS & 1 << format as u32 != 0 {
        format_fields(f, inst, d, format, fields);
        if tokens.len() - n < fields.len() + room {
            grow_tokens(tokens, n + fields.len() + room);
        }
        tokens[n..n + fields.len()].copy_from_slice(fields);
        n += fields.len();
    }
    n
}

/// The result words of an instruction whose results are not one fresh register (see
/// `walk_function`): type and serial number of each. Returns the new length of the stream.
#[inline(never)]
fn put_results<const SMALL: bool>(
    f: &Function,
    i: Inst,
    reg_sn: &mut [u32],
    next_r: &mut u32,
    buf: &mut [u32],
    n: usize,
) -> usize {
    let mut w = Words { buf, n };
    for &r in f.results(i) {
        let sn = serial(reg_sn, next_r, r);
        let ty = f.reg_type(r).raw() as u32;
        if SMALL || sn < 1 << 16 {
            w.put(ty | sn << 16);
        } else {
            w.put(ty);
            w.put(sn);
        }
    }
    w.n
}

/// The hash of a signature, where the weak hash starts.
fn sig_hash(sig: &Signature) -> u64 {
    let mut h = FxHasher::default();
    sig.hash(&mut h);
    h.finish()
}

/// The light walk: the weak hash `function_hashes` returns, the direct calls and taken
/// symbols it collects (in the same order), and the number of holes a `similar` walk would
/// list, with no token stream. Blocks are visited in the same order (by
/// first reference from the entry), so everything agrees with `function_hashes`; equal token
/// streams imply equal weak hashes, so a function whose weak hash no other function shares
/// cannot share a skeleton and needs no stream yet.
pub(crate) fn light_walk(f: &Function, s: &mut HashScratch, out: &mut WalkOut) -> (u64, usize) {
    let mut weak = sig_hash(&f.sig);
    let mut holes = 0;
    let Some(entry) = f.entry() else {
        return (finish(weak), 0);
    };
    s.block_sn.clear();
    s.block_sn.resize(f.blocks.len(), 0);
    s.order.clear();
    s.block_sn[entry.index()] = 1;
    s.order.push(entry);
    let mut k = 0;
    while k < s.order.len() {
        let b = s.order[k];
        k += 1;
        for &i in f.block_insts(b) {
            let d = &f.insts[i];
            weak = mix(weak, d.opcode as u64);
            let ops = f.operands(i);
            let mut ops_iter = ops.iter();
            if d.opcode.format() == Format::Call {
                if let Some(Operand::Sym(sym, _)) = ops.first() {
                    out.callees.push((sym, i));
                    ops_iter.next();
                }
            }
            let counts = d.opcode != Opcode::ExnHandlerAddr;
            for op in ops_iter {
                match op {
                    Operand::Int(_) | Operand::F32(_) | Operand::F64(_) => holes += counts as usize,
                    Operand::Block(bb) => {
                        let x = &mut s.block_sn[bb.index()];
                        if *x == 0 {
                            *x = 1;
                            s.order.push(bb);
                        }
                    }
                    Operand::Sym(sym, _) => out.taken.push(sym),
                    _ => {}
                }
            }
        }
    }
    (finish(mix(weak, s.order.len() as u64)), holes)
}

#[inline(always)]
pub(crate) fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// A hash of a token stream, four independent lanes so the multiplies overlap (the stream
/// is long: a few words per instruction). Only a filter: equal hashes are confirmed by
/// comparing the streams.
pub(crate) fn hash_words(words: &[u32]) -> u64 {
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

/// The cheap function hash (MergeFunctions' filter): signature, block count and the opcode sequence in CFG
/// order.
pub fn function_hash(f: &Function) -> u64 {
    function_hashes(f, &mut HashScratch::default(), &mut WalkOut::default()).0
}

/// Survivor priority: frozen (compiled already: it must survive) first, then exported strong,
/// then local, then preemptible; then by id. `frozen`: `PassState::is_frozen`.
pub(crate) fn priority(f: &Function, frozen: bool) -> u8 {
    if frozen {
        return PRIO_FROZEN;
    }
    match f.linkage {
        Linkage::Export => 1,
        Linkage::Local => 2,
        Linkage::Preemptible => PRIO_PREEMPTIBLE,
        Linkage::Import => 4,
    }
}

pub(crate) const PRIO_FROZEN: u8 = 0;
pub(crate) const PRIO_PREEMPTIBLE: u8 = 3;

/// The facts of one walk over the functions in scope (`ScopeMap`s: indexed by function, for
/// the open functions only, so a run costs in proportion to them, not to the module).
pub(crate) struct Walked {
    /// The token stream of each shape (its first function's).
    pub(crate) shapes: ShapeTable,
    pub(crate) weak: ScopeMap<u64>,
    pub(crate) local: ScopeMap<u64>,
    /// The shape of each walked function: functions share a shape exactly when their token
    /// streams are equal (equal under the comparator up to their callees).
    pub(crate) shape: ScopeMap<u32>,
    /// Number of functions of each shape.
    pub(crate) shape_size: Vec<u32>,
    /// Direct call sites of all walked functions; `calls[f]` is f's range.
    pub(crate) sites: Vec<(Symbol, Inst)>,
    /// The callee of each site as the comparator sees it (`callee_key`), resolved once.
    pub(crate) targets: Vec<Callee>,
    pub(crate) calls: ScopeMap<(u32, u32)>,
    /// Symbols whose address is taken by a walked function (significant addresses).
    pub(crate) taken: HashSet<Symbol>,
    /// Survivor priority (`priority`), linkage and whether the address is declared
    /// significant: read while the function is in the cache.
    pub(crate) prio: ScopeMap<u8>,
    pub(crate) linkage: ScopeMap<Linkage>,
    pub(crate) significant: ScopeMap<bool>,
}

/// A callee: a function in scope (compared by class) or another symbol (by identity: a frozen
/// function, an import).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callee {
    Func(FuncId),
    Other(Symbol),
}

impl Callee {
    /// What a call to `sym` calls, as the comparator sees it: through merge aliases to a live
    /// function in scope, or the symbol itself.
    #[inline]
    pub(crate) fn resolve(m: &Module, scope: u32, sym: Symbol) -> Callee {
        let s = if m.aliases.is_empty() {
            sym
        } else {
            m.resolve_alias(sym)
        };
        match m.defined(s) {
            Some(d) if d.as_u32() >= scope && !m.removed[d] => Callee::Func(d),
            _ => Callee::Other(s),
        }
    }

    #[inline]
    pub(crate) fn key(self, class: &ScopeMap<u32>) -> (u32, u32) {
        match self {
            Callee::Func(f) => (0, class[f]),
            Callee::Other(s) => (1, s.as_u32()),
        }
    }
}

impl Walked {
    /// The token stream of `f` (its shape's).
    pub(crate) fn tokens_of(&self, f: FuncId) -> &[u32] {
        self.shapes.tokens_of(self.shape[f])
    }

    /// The callee symbols of `f`'s direct calls, in walk order.
    pub(crate) fn callee_symbols(&self, f: FuncId) -> impl Iterator<Item = Symbol> + '_ {
        let (a, b) = self.calls[f];
        self.sites[a as usize..b as usize].iter().map(|&(s, _)| s)
    }

    pub(crate) fn targets_of(&self, f: FuncId) -> &[Callee] {
        let (a, b) = self.calls[f];
        &self.targets[a as usize..b as usize]
    }

    /// The hash of f's callee keys under `class`, in walk order.
    pub(crate) fn callee_hash(&self, f: FuncId, class: &ScopeMap<u32>) -> u64 {
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
pub(crate) struct ShapeTable {
    tokens: Vec<u32>,
    /// Each shape's hash key and stream (a range of `tokens`).
    shapes: Vec<(u64, u32, u32)>,
    /// Open addressing: each slot holds a hash key and its shape + 1 (0: empty), side by
    /// side, so a probe touches one cache line.
    slots: Vec<(u64, u32)>,
    comparisons: u64,
}

impl ShapeTable {
    pub(crate) fn with_capacity(n: usize) -> Self {
        // Room for n / 2 shapes before the slots double (a module with half its functions
        // alike in shape is already one of many duplicates).
        let cap = n.next_power_of_two().max(16);
        ShapeTable {
            tokens: Vec::new(),
            shapes: Vec::with_capacity(n),
            slots: vec![(0, 0); cap],
            comparisons: 0,
        }
    }

    /// Words the stream store has room for.
    pub(crate) fn tokens_reserved(&self) -> usize {
        self.tokens.capacity()
    }

    /// Make room for `n` more stream words.
    pub(crate) fn reserve_tokens(&mut self, n: usize) {
        self.tokens.reserve(n);
    }

    /// The hash key shape `sh` was interned with.
    pub(crate) fn key_of(&self, sh: u32) -> u64 {
        self.shapes[sh as usize].0
    }

    pub(crate) fn tokens_of(&self, sh: u32) -> &[u32] {
        let (_, a, len) = self.shapes[sh as usize];
        &self.tokens[a as usize..(a + len) as usize]
    }

    /// The shape of a stream with hash key `key`, added if no shape has that stream.
    pub(crate) fn intern(&mut self, key: u64, tokens: &[u32]) -> u32 {
        if self.slots.is_empty() {
            self.index_anew();
        }
        let mask = self.slots.len() - 1;
        let mut i = key as usize & mask;
        loop {
            let (h, v) = self.slots[i];
            if v == 0 {
                break;
            }
            if h == key {
                self.comparisons += 1;
                if self.tokens_of(v - 1) == tokens {
                    return v - 1;
                }
            }
            i = (i + 1) & mask;
        }
        if self.shapes.len() * 2 >= self.slots.len() {
            self.grow();
            return self.intern(key, tokens);
        }
        let sh = self.shapes.len() as u32;
        self.shapes
            .push((key, self.tokens.len() as u32, tokens.len() as u32));
        self.tokens.extend_from_slice(tokens);
        self.slots[i] = (key, sh + 1);
        sh
    }

    /// Replace the shapes by `shapes` (the same streams, numbered anew). They are indexed
    /// again only if a shape is looked up (`intern`): the walk of a module on one thread
    /// never does.
    fn renumber(&mut self, shapes: Vec<(u64, u32, u32)>) {
        self.shapes = shapes;
        self.slots = Vec::new();
    }

    /// Index the shapes anew (after `renumber`).
    #[cold]
    fn index_anew(&mut self) {
        let cap = (2 * self.shapes.len()).next_power_of_two().max(16);
        self.slots = vec![(0, 0); cap / 2];
        self.grow();
    }

    /// Double the slots (shapes and streams stay).
    #[cold]
    fn grow(&mut self) {
        let cap = self.slots.len() * 2;
        self.slots = vec![(0, 0); cap];
        for (sh, &(key, _, _)) in self.shapes.iter().enumerate() {
            let mut i = key as usize & (cap - 1);
            while self.slots[i].1 != 0 {
                i = (i + 1) & (cap - 1);
            }
            self.slots[i] = (key, sh as u32 + 1);
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

impl WalkPart {
    fn with_capacity(n: usize) -> Self {
        WalkPart {
            shapes: ShapeTable::with_capacity(n),
            facts: Vec::with_capacity(n),
            // About one call site per function or fewer in most modules; more grow.
            sites: Vec::with_capacity(n),
            targets: Vec::with_capacity(n),
            taken: Vec::new(),
        }
    }

    /// Class a token stream (of one of `n` functions) into a shape.
    fn intern(&mut self, tokens: &[u32], weak: u64, local: u64, n: usize) -> u32 {
        if self.shapes.tokens.is_empty() {
            // Room for a stream per function or so (address space only: pages are mapped as
            // they are written), at most 256 MiB: one allocation, seldom regrown.
            self.shapes.tokens.reserve((tokens.len() * n).min(1 << 26));
        }
        self.shapes.intern(finish(mix(weak, local)), tokens)
    }

    /// Record `f`: its direct calls (`callees`, resolved against the scope), the symbols its
    /// globals take (added to `taken`), its hashes and shape.
    fn push_facts(
        &mut self,
        m: &Module,
        scope: u32,
        (f, frozen): (&Function, bool),
        callees: &[(Symbol, Inst)],
        taken: &mut Vec<Symbol>,
        (weak, local, shape): (u64, u64, u32),
    ) {
        let start = self.sites.len() as u32;
        for &(sym, inst) in callees {
            self.sites.push((sym, inst));
            self.targets.push(Callee::resolve(m, scope, sym));
        }
        for gv in f.globals.values() {
            if let GlobalData::Symbol { sym, .. } = gv {
                taken.push(*sym);
            }
        }
        self.facts.push(FnFacts {
            weak,
            local,
            shape,
            calls: (start, self.sites.len() as u32),
            prio: priority(f, frozen),
            linkage: f.linkage,
            significant: f.address_significant,
        });
    }
}

/// Walk `ids` in order: hashes, token streams classed into shapes, direct calls, taken
/// addresses. Callees are resolved against the scope (functions from `scope` on).
fn walk_part(m: &Module, (scope, first_open): (u32, u32), ids: &[FuncId]) -> WalkPart {
    let mut part = WalkPart::with_capacity(ids.len());
    let mut scratch = HashScratch::default();
    let mut out = WalkOut::default();
    for &id in ids {
        let f = &m.functions[id];
        out.callees.clear();
        let (weak, local, len) = walk_stream(f, &mut scratch, &mut out);
        let shape = part.intern(&scratch.tokens[..len], weak, local, ids.len());
        part.push_facts(
            m,
            scope,
            (f, id.as_u32() < first_open),
            &out.callees,
            &mut out.taken,
            (weak, local, shape),
        );
    }
    part.taken = out.taken;
    part
}

/// A `u32` per weak hash, for `walk_part_light`: open addressing over (key, value), where
/// the key is the weak hash folded to 32 bits (8-byte slots: half the memory to touch). Two
/// weak hashes that fold alike share a slot: the table is a filter, so that only costs both
/// functions a walk in full, whose streams then tell them apart. It starts small and doubles
/// when half full: once every function is walked in full, nothing is added, so it stays in
/// the cache.
struct WeakTable {
    slots: Vec<(u32, u32)>,
    len: usize,
    shift: u32,
}

impl WeakTable {
    /// The value of a slot no key has taken.
    const EMPTY: u32 = u32::MAX - 1;

    fn new() -> Self {
        let cap = 1024;
        WeakTable {
            slots: vec![(0, Self::EMPTY); cap],
            len: 0,
            shift: 64 - cap.trailing_zeros(),
        }
    }

    /// The key of a weak hash.
    #[inline]
    fn fold(weak: u64) -> u32 {
        (weak ^ weak >> 32) as u32
    }

    #[inline]
    fn index(&self, key: u32) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize;
        loop {
            let (k, v) = self.slots[i];
            if v == Self::EMPTY || k == key {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `weak`'s key, if it has one.
    #[inline]
    fn get_mut(&mut self, weak: u64) -> Option<&mut u32> {
        let i = self.index(Self::fold(weak));
        let slot = &mut self.slots[i];
        (slot.1 != Self::EMPTY).then_some(&mut slot.1)
    }

    /// The value of `weak`'s key, `EMPTY` when new (the caller sets it).
    #[inline]
    fn slot(&mut self, weak: u64) -> &mut u32 {
        let key = Self::fold(weak);
        let mut i = self.index(key);
        if self.slots[i].1 == Self::EMPTY {
            if 2 * (self.len + 1) > self.slots.len() {
                self.grow();
                i = self.index(key);
            }
            self.len += 1;
            self.slots[i].0 = key;
        }
        &mut self.slots[i].1
    }

    #[cold]
    fn grow(&mut self) {
        let old = core::mem::take(&mut self.slots);
        self.slots = vec![(0, Self::EMPTY); 2 * old.len()];
        self.shift -= 1;
        for (k, v) in old {
            if v != Self::EMPTY {
                let i = self.index(k);
                self.slots[i] = (k, v);
            }
        }
    }
}

/// `walk_part` for a whole module on one thread, with light walks (`light_walk`): a function
/// gets a token stream only once another function has its weak hash (equal streams have
/// equal weak hashes); one alone with its weak hash is a shape of its own with no stream.
/// Shapes are then numbered by first appearance, as `walk_part` numbers them, so the result
/// is the same.
fn walk_part_light(m: &Module, (scope, first_open): (u32, u32), ids: &[FuncId]) -> WalkPart {
    let mut part = WalkPart::with_capacity(ids.len());
    let mut scratch = HashScratch::default();
    // For the walks in full of functions met earlier (`walk_full`), so that the stream of the
    // function being walked stays in `scratch` meanwhile.
    let mut scratch_full = HashScratch::default();
    let mut out = WalkOut::default();
    let mut full = WalkOut::default();
    // Per weak hash: the function alone with it so far (its index in `ids`), or `SHARED`.
    let mut by_weak = WeakTable::new();
    const SHARED: u32 = u32::MAX;
    // Streams found: (index in `ids`, local hash, shape in the table).
    let mut streams: Vec<(u32, u64, u32)> = Vec::with_capacity(ids.len());
    // Walk `ids[k]` in full (with `o` and `s`) and class its stream into a shape.
    let walk_full = |k: usize, o: &mut WalkOut, s: &mut HashScratch, part: &mut WalkPart| {
        o.callees.clear();
        o.taken.clear();
        let (weak, local, len) = walk_stream(&m.functions[ids[k]], s, o);
        (
            k as u32,
            local,
            part.intern(&s.tokens[..len], weak, local, ids.len()),
        )
    };
    // Instructions of the functions walked so far, and of those walked in full. When most
    // share their weak hash with another function (a module of many near duplicates), a
    // light walk only adds to the full walk that follows: from then on every function is
    // walked in full at once.
    let (mut seen, mut walked_full, mut all_full) = (0usize, 0usize, false);
    for (k, &id) in ids.iter().enumerate() {
        let f = &m.functions[id];
        out.callees.clear();
        seen += f.insts.len();
        all_full = all_full || (k >= 256 && 5 * walked_full > 3 * seen);
        let weak = if all_full {
            let (weak, local, len) = walk_stream(f, &mut scratch, &mut out);
            // Resolved below (`push_facts`), after the lookups that follow.
            // A function walked lightly (before every walk was in full) has a stream only
            // once another shares its weak hash. (No function is added any more.)
            let first = by_weak.get_mut(weak).map(|v| core::mem::replace(v, SHARED));
            if let Some(first) = first.filter(|&x| x != SHARED) {
                streams.push(walk_full(
                    first as usize,
                    &mut full,
                    &mut scratch_full,
                    &mut part,
                ));
            }
            let shape = part.intern(&scratch.tokens[..len], weak, local, ids.len());
            streams.push((k as u32, local, shape));
            weak
        } else {
            let (weak, _) = light_walk(f, &mut scratch, &mut out);
            let v = by_weak.slot(weak);
            match *v {
                WeakTable::EMPTY => *v = k as u32,
                SHARED => {
                    streams.push(walk_full(k, &mut full, &mut scratch, &mut part));
                    walked_full += f.insts.len();
                }
                first => {
                    *v = SHARED;
                    streams.push(walk_full(
                        first as usize,
                        &mut full,
                        &mut scratch,
                        &mut part,
                    ));
                    streams.push(walk_full(k, &mut full, &mut scratch, &mut part));
                    walked_full += f.insts.len() + m.functions[ids[first as usize]].insts.len();
                }
            }
            weak
        };
        // Local hash and shape come with the stream, if the function gets one (below).
        part.push_facts(
            m,
            scope,
            (f, id.as_u32() < first_open),
            &out.callees,
            &mut out.taken,
            (weak, 0, u32::MAX),
        );
    }
    part.taken = out.taken;
    for &(k, local, shape) in &streams {
        let facts = &mut part.facts[k as usize];
        facts.local = local;
        facts.shape = shape;
    }
    // Shapes numbered by first appearance; a function with no stream is a shape of its own.
    let mut number = vec![u32::MAX; part.shapes.shapes.len()];
    let mut shapes = Vec::with_capacity(ids.len());
    for facts in &mut part.facts {
        let sh = if facts.shape == u32::MAX {
            shapes.push((finish(mix(facts.weak, 0)), 0, 0));
            shapes.len() as u32 - 1
        } else {
            let n = &mut number[facts.shape as usize];
            if *n == u32::MAX {
                *n = shapes.len() as u32;
                shapes.push(part.shapes.shapes[facts.shape as usize]);
            }
            *n
        };
        facts.shape = sh;
    }
    part.shapes.renumber(shapes);
    part
}

/// Modules smaller than this are walked on one thread (threads cost more than they save).
const PARALLEL_WALK_MIN: usize = 2048;

/// Walk the functions `ids` (all from `scope` on) once: hashes, shape, direct calls, taken
/// addresses.
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
pub(crate) fn walk_module(
    m: &Module,
    ps: &PassState,
    scope: u32,
    ids: &[FuncId],
    threads: usize,
    report: &mut MergeReport,
) -> Walked {
    let threads = if ids.len() >= PARALLEL_WALK_MIN {
        threads.max(1)
    } else {
        1
    };
    let chunk = ids.len().div_ceil(threads).max(1);
    let first_open = ps.first_open;
    let mut parts: Vec<WalkPart> = if threads == 1 {
        // Frozen functions and incremental modules read the streams of every survivor.
        if ps.frozen.is_empty() && !ps.incremental {
            vec![walk_part_light(m, (scope, first_open), ids)]
        } else {
            vec![walk_part(m, (scope, first_open), ids)]
        }
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .map(|c| s.spawn(move || walk_part(m, (scope, first_open), c)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a merge walk thread panicked"))
                .collect()
        })
    };
    let n = m.functions.len();
    let mut w = Walked {
        shapes: ShapeTable::with_capacity(0),
        weak: ScopeMap::new(scope, n, 0),
        local: ScopeMap::new(scope, n, 0),
        shape: ScopeMap::new(scope, n, 0),
        shape_size: Vec::new(),
        sites: Vec::new(),
        targets: Vec::new(),
        calls: ScopeMap::new(scope, n, (0, 0)),
        taken: HashSet::default(),
        prio: ScopeMap::new(scope, n, 0),
        linkage: ScopeMap::new(scope, n, Linkage::Import),
        significant: ScopeMap::new(scope, n, false),
    };
    // The first part's shapes are the first global shapes; every later part's shapes are
    // looked up there (and added when new), in order.
    let mut global = core::mem::replace(&mut parts[0].shapes, ShapeTable::with_capacity(0));
    let mut to_global: Vec<u32> = Vec::new();
    for (p, part) in parts.iter_mut().enumerate() {
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
        if p == 0 {
            w.sites = core::mem::take(&mut part.sites);
            w.targets = core::mem::take(&mut part.targets);
        } else {
            w.sites.extend_from_slice(&part.sites);
            w.targets.extend_from_slice(&part.targets);
        }
        w.taken.extend(part.taken.iter().copied());
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
    w.shapes = global;
    w
}
