//! An index of the functions a JIT flush compiled from their Cranelift IR without lifting them,
//! so that a later flush can still merge an equal function into one of them.
//!
//! A function is left unlifted when nothing defined so far could merge with it (`skip`). A
//! later batch may define a function equal to it. Merging into a compiled function needs that
//! function's fingerprint in LIR (`midend::passes::merge::freeze`), and an unlifted function
//! has none. Keeping its Cranelift IR until then would cost several times the memory of the
//! fingerprint. So each one is kept here as its *print*: its Cranelift IR written out as
//! words, complete but for two things:
//! - values and blocks are numbered by first appearance, so functions equal up to renaming
//!   have equal prints;
//! - the module functions its external function references name (`u0:N`) are kept apart,
//!   as the *callees*, in the order of those references.
//!
//! Only the blocks the entry reaches are printed, depth first from the entry: the passes
//! compare nothing else, so two functions that differ only in their layout or in blocks no
//! path reaches have equal prints too. (Two functions the passes would still find equal have
//! different prints only where the lifter splits an edge that one of them spells out:
//! a merge a later batch then misses, never a wrong one.)
//!
//! Two functions with equal prints are the same function up to renaming and callees: the one
//! that comes later, with its references renamed to the earlier one's callees, *is* the earlier
//! function. A flush that meets a function whose print equals that of an unlifted function
//! lifts that copy in the earlier function's place (a *stand-in*) and freezes it, so the merge
//! pass finds it as it finds any compiled function, and decides.
//!
//! The print follows what the lifter keeps, so that it tells apart no more than LIR does:
//! types as LIR types, memory flags as LIR's, side tables (stack slots, signatures, alias
//! regions, global values) by their Cranelift index, as LIR keeps them. A function using what
//! the print does not cover (dynamic stack slots or types, stack maps, patchable calls) has no
//! print: it is lifted, as every function used to be.

use crate::opmap::{lir_memflags, lir_type};
use cranelift_codegen::ir::{self, BlockArg, BlockCall, ExternalName, InstructionData as D};
use cranelift_entity::EntityRef;
use cranelift_module::FuncId;
use rustc_hash::{FxHashMap, FxHasher};
use smallvec::SmallVec;
use std::hash::Hasher;

/// A function's Cranelift IR as words (see the module documentation).
#[derive(Default)]
pub(crate) struct Print {
    pub words: Vec<u32>,
    /// The module function each external function reference names, by reference (`u32::MAX`:
    /// it names something else, spelt out in `words`).
    pub callees: Vec<u32>,
    /// Where the immediates of constants (`iconst`, `f16const`, `f32const`, `f64const`: what
    /// `merge-similar` makes holes of) are in `words` (first word, and how many), and their
    /// instructions.
    pub constants: Vec<(u32, u32, ir::Inst)>,
    /// `alike_hash`, once computed.
    alike: std::cell::Cell<Option<u64>>,
}

impl Print {
    fn hash(&self) -> u64 {
        hash_words(&self.words)
    }

    /// The hash of the words but for the constants' immediates: equal for functions that
    /// differ only in the values of constants.
    fn alike_hash(&self) -> u64 {
        if let Some(h) = self.alike.get() {
            return h;
        }
        let mut h = FxHasher::default();
        let mut at = 0usize;
        for &(pos, n, _) in &self.constants {
            let pos = pos as usize;
            for &w in &self.words[at..pos] {
                h.write_u32(w);
            }
            h.write_u32(u32::MAX);
            at = pos + n as usize;
        }
        for &w in &self.words[at..] {
            h.write_u32(w);
        }
        self.alike.set(Some(h.finish()));
        h.finish()
    }
}

fn hash_words(words: &[u32]) -> u64 {
    let mut h = FxHasher::default();
    let pairs = words.chunks_exact(2);
    if let [last] = pairs.remainder() {
        h.write_u32(*last);
    }
    for p in pairs {
        h.write_u64(u64::from(p[0]) | u64::from(p[1]) << 32);
    }
    h.finish()
}

/// The prints of several functions, one after another: each is a position (of a batch), its
/// shape key, and its words and callees.
#[derive(Default)]
pub(crate) struct Prints {
    words: Vec<u32>,
    /// Position, shape key, alike hash (`Print::alike_hash`), words, callees.
    entries: Vec<(u32, u64, u64, u32, u32)>,
}

impl Prints {
    pub fn clear(&mut self) {
        self.words.clear();
        self.entries.clear();
    }

    pub fn push(&mut self, pos: u32, key: u64, p: &Print) {
        self.words.extend_from_slice(&p.words);
        self.words.extend_from_slice(&p.callees);
        let alike = p.alike_hash();
        self.entries.push((
            pos,
            key,
            alike,
            p.words.len() as u32,
            p.callees.len() as u32,
        ));
    }

    /// Each print: its position, shape key and alike hash, words and callees.
    pub fn iter(&self) -> impl Iterator<Item = (u32, (u64, u64), &[u32], &[u32])> {
        let mut at = 0usize;
        self.entries.iter().map(move |&(pos, key, alike, n, c)| {
            let (n, c) = (n as usize, c as usize);
            let words = &self.words[at..at + n];
            let callees = &self.words[at + n..at + n + c];
            at += n + c;
            (pos, (key, alike), words, callees)
        })
    }
}

/// Writes prints, with scratch kept from one function to the next.
#[derive(Default)]
pub(crate) struct Printer {
    /// First-appearance number + 1 of each value and block (0: not seen yet).
    values: Vec<u32>,
    blocks: Vec<u32>,
    seen_values: u32,
    seen_blocks: u32,
    /// The blocks to print, in order, and what finds them.
    order: Vec<ir::Block>,
    stack: Vec<ir::Block>,
    reached: Vec<bool>,
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

impl Printer {
    /// The print of `func` into `out` (cleared first); `false` when it has none.
    pub fn print(&mut self, func: &ir::Function, out: &mut Print) -> bool {
        out.words.clear();
        out.callees.clear();
        out.constants.clear();
        out.alike.set(None);
        // (About six words an instruction.)
        out.words.reserve(8 * func.dfg.num_insts() + 64);
        self.values.clear();
        self.values.resize(func.dfg.num_values(), 0);
        self.blocks.clear();
        self.blocks.resize(func.dfg.num_blocks(), 0);
        (self.seen_values, self.seen_blocks) = (0, 0);
        self.function(func, out).is_some()
    }

    fn function(&mut self, func: &ir::Function, out: &mut Print) -> Option<()> {
        let w = &mut out.words;
        let dfg = &func.dfg;
        if !func.dynamic_stack_slots.is_empty() || !dfg.dynamic_types.is_empty() {
            return None;
        }
        signature(w, &func.signature)?;
        w.push(func.sized_stack_slots.len() as u32);
        for ss in func.sized_stack_slots.values() {
            w.extend([ss.size, ss.align_shift.into()]);
        }
        w.push(dfg.signatures.len() as u32);
        for sig in dfg.signatures.values() {
            signature(w, sig)?;
        }
        w.push(dfg.alias_regions.len() as u32);
        for (_, r) in dfg.alias_regions.iter() {
            w.push(r.user_id);
            bytes(w, r.description.as_bytes());
        }
        w.push(func.global_values.len() as u32);
        for gv in func.global_values.values() {
            match *gv {
                ir::GlobalValueData::VMContext => w.push(1),
                ir::GlobalValueData::Load {
                    base,
                    offset,
                    global_type,
                    flags,
                } => {
                    w.extend([2, base.as_u32(), i32::from(offset) as u32, ty(global_type)?]);
                    memflags(w, dfg, flags);
                }
                ir::GlobalValueData::IAddImm {
                    base,
                    offset,
                    global_type,
                } => {
                    w.extend([3, base.as_u32()]);
                    word64(w, offset.bits() as u64);
                    w.push(ty(global_type)?);
                }
                ir::GlobalValueData::Symbol {
                    ref name,
                    offset,
                    colocated,
                    tls,
                } => {
                    w.push(4);
                    external_name(w, func, name);
                    word64(w, offset.bits() as u64);
                    w.extend([u32::from(colocated), u32::from(tls)]);
                }
                ir::GlobalValueData::DynScaleTargetConst { .. } => return None,
            }
        }
        w.push(func.stack_limit.map_or(0, |g| g.as_u32() + 1));
        w.push(dfg.ext_funcs.len() as u32);
        for ext in dfg.ext_funcs.values() {
            // (The lifter refuses patchable calls: such a function is lifted, and passed
            // through, so that `MergeModule::passed_through` names it.)
            if ext.patchable {
                return None;
            }
            w.extend([ext.signature.as_u32(), ext.colocated.into()]);
            let user = match ext.name {
                ExternalName::User(r) => func.params.user_named_funcs().get(r),
                _ => None,
            };
            match user {
                Some(u) if u.namespace == 0 => {
                    w.push(CALLEE);
                    out.callees.push(u.index);
                }
                _ => {
                    external_name(w, func, &ext.name);
                    out.callees.push(u32::MAX);
                }
            }
        }
        // The blocks the entry reaches, depth first: the order of the layout does not count,
        // nor does a block no path reaches (the passes compare neither).
        self.order.clear();
        let mut stack = std::mem::take(&mut self.stack);
        stack.extend(func.layout.entry_block());
        self.reached.clear();
        self.reached.resize(dfg.num_blocks(), false);
        while let Some(b) = stack.pop() {
            if std::mem::replace(&mut self.reached[b.index()], true) {
                continue;
            }
            self.order.push(b);
            let Some(last) = func.layout.last_inst(b) else {
                continue;
            };
            let dests = dfg.insts[last].branch_destination(&dfg.jump_tables, &dfg.exception_tables);
            for bc in dests.iter().rev() {
                let t = bc.block(&dfg.value_lists);
                if t.index() < self.reached.len() && !self.reached[t.index()] {
                    stack.push(t);
                }
            }
        }
        self.stack = stack;
        let order = std::mem::take(&mut self.order);
        let printed = self.blocks_in(func, &order, out);
        self.order = order;
        printed
    }

    fn blocks_in(
        &mut self,
        func: &ir::Function,
        order: &[ir::Block],
        out: &mut Print,
    ) -> Option<()> {
        let dfg = &func.dfg;
        for &b in order {
            let n = self.block(b);
            out.words.extend([n, func.layout.is_cold(b).into()]);
            let params = dfg.block_params(b);
            out.words.push(params.len() as u32);
            for &p in params {
                let v = self.def(p);
                out.words.extend([v, ty(dfg.value_type(p))?]);
            }
            for inst in func.layout.block_insts(b) {
                self.inst(func, inst, out)?;
            }
        }
        Some(())
    }

    fn inst(&mut self, func: &ir::Function, inst: ir::Inst, out: &mut Print) -> Option<()> {
        let dfg = &func.dfg;
        if dfg
            .user_stack_map_entries(inst)
            .is_some_and(|e| !e.is_empty())
        {
            return None;
        }
        // (The controlling type variable is the type of a result or of an operand, both in
        // the print.)
        let data = dfg.insts[inst];
        let results = dfg.inst_results(inst);
        out.words
            .push(data.opcode() as u32 | (results.len() as u32) << 16);
        for &r in results {
            let v = self.def(r);
            out.words.extend([v, ty(dfg.value_type(r))?]);
        }
        let pool = &dfg.value_lists;
        match data {
            D::AtomicCas { args, flags, .. } => {
                self.fixed(dfg, &args, out);
                memflags(&mut out.words, dfg, flags);
            }
            D::AtomicRmw {
                args, flags, op, ..
            } => {
                self.fixed(dfg, &args, out);
                memflags(&mut out.words, dfg, flags);
                out.words.push(op as u32);
            }
            D::Binary { args, .. } => self.fixed(dfg, &args, out),
            D::BinaryImm8 { arg, imm, .. } => {
                self.fixed(dfg, &[arg], out);
                out.words.push(imm.into());
            }
            D::BranchTable { arg, table, .. } => {
                self.fixed(dfg, &[arg], out);
                let jt = &dfg.jump_tables[table];
                out.words.push(jt.as_slice().len() as u32);
                self.block_call(dfg, &jt.default_block(), out);
                for bc in jt.as_slice() {
                    self.block_call(dfg, bc, out);
                }
            }
            D::Brif { arg, blocks, .. } => {
                self.fixed(dfg, &[arg], out);
                for bc in &blocks {
                    self.block_call(dfg, bc, out);
                }
            }
            D::Call { args, func_ref, .. } => {
                out.words.push(func_ref.as_u32());
                self.values_of(dfg, args.as_slice(pool), out);
            }
            D::CallIndirect { args, sig_ref, .. } => {
                out.words.push(sig_ref.as_u32());
                self.values_of(dfg, args.as_slice(pool), out);
            }
            D::CondTrap { arg, code, .. } => {
                self.fixed(dfg, &[arg], out);
                out.words.push(code.as_raw().get().into());
            }
            D::DynamicStackAddr { .. } => return None,
            D::ExceptionHandlerAddress { block, imm, .. } => {
                let n = self.block(block);
                out.words.push(n);
                word64(&mut out.words, imm.bits() as u64);
            }
            D::FloatCompare { args, cond, .. } => {
                self.fixed(dfg, &args, out);
                out.words.push(cond as u32);
            }
            D::FuncAddr { func_ref, .. } => out.words.push(func_ref.as_u32()),
            D::IntAddTrap { args, code, .. } => {
                self.fixed(dfg, &args, out);
                out.words.push(code.as_raw().get().into());
            }
            D::IntCompare { args, cond, .. } => {
                self.fixed(dfg, &args, out);
                out.words.push(cond as u32);
            }
            D::Jump { destination, .. } => self.block_call(dfg, &destination, out),
            D::Load {
                arg, flags, offset, ..
            } => {
                self.fixed(dfg, &[arg], out);
                memflags(&mut out.words, dfg, flags);
                out.words.push(i32::from(offset) as u32);
            }
            D::LoadNoOffset { arg, flags, .. } => {
                self.fixed(dfg, &[arg], out);
                memflags(&mut out.words, dfg, flags);
            }
            D::MultiAry { args, .. } => self.values_of(dfg, args.as_slice(pool), out),
            D::NullAry { .. } => {}
            D::Shuffle { args, imm, .. } => {
                self.fixed(dfg, &args, out);
                bytes(&mut out.words, dfg.immediates.get(imm)?.as_slice());
            }
            D::StackAddr {
                stack_slot, offset, ..
            } => out
                .words
                .extend([stack_slot.as_u32(), i32::from(offset) as u32]),
            D::Store {
                args,
                flags,
                offset,
                ..
            } => {
                self.fixed(dfg, &args, out);
                memflags(&mut out.words, dfg, flags);
                out.words.push(i32::from(offset) as u32);
            }
            D::StoreNoOffset { args, flags, .. } => {
                self.fixed(dfg, &args, out);
                memflags(&mut out.words, dfg, flags);
            }
            D::Ternary { args, .. } => self.fixed(dfg, &args, out),
            D::TernaryImm8 { args, imm, .. } => {
                self.fixed(dfg, &args, out);
                out.words.push(imm.into());
            }
            D::Trap { code, .. } => out.words.push(code.as_raw().get().into()),
            D::TryCall {
                args,
                func_ref,
                exception,
                ..
            } => {
                out.words.push(func_ref.as_u32());
                self.values_of(dfg, args.as_slice(pool), out);
                self.exception_table(dfg, exception, out);
            }
            D::TryCallIndirect {
                args, exception, ..
            } => {
                self.values_of(dfg, args.as_slice(pool), out);
                self.exception_table(dfg, exception, out);
            }
            D::Unary { arg, .. } => self.fixed(dfg, &[arg], out),
            D::UnaryConst {
                constant_handle, ..
            } => bytes(
                &mut out.words,
                dfg.constants.get(constant_handle).as_slice(),
            ),
            D::UnaryGlobalValue { global_value, .. } => out.words.push(global_value.as_u32()),
            D::UnaryIeee16 { imm, .. } => {
                out.constants.push((out.words.len() as u32, 1, inst));
                out.words.push(imm.bits().into())
            }
            D::UnaryIeee32 { imm, .. } => {
                out.constants.push((out.words.len() as u32, 1, inst));
                out.words.push(imm.bits())
            }
            D::UnaryIeee64 { imm, .. } => {
                out.constants.push((out.words.len() as u32, 2, inst));
                word64(&mut out.words, imm.bits())
            }
            D::UnaryImm { imm, .. } => {
                out.constants.push((out.words.len() as u32, 2, inst));
                word64(&mut out.words, imm.bits() as u64)
            }
        }
        Some(())
    }

    fn exception_table(
        &mut self,
        dfg: &ir::DataFlowGraph,
        et: ir::ExceptionTable,
        out: &mut Print,
    ) {
        let data = &dfg.exception_tables[et];
        out.words.push(data.signature().as_u32());
        self.block_call(dfg, data.normal_return(), out);
        for item in data.items() {
            match item {
                ir::ExceptionTableItem::Tag(tag, bc) => {
                    out.words.extend([ITEM_TAG, tag.as_u32()]);
                    self.block_call(dfg, &bc, out);
                }
                ir::ExceptionTableItem::Default(bc) => {
                    out.words.push(ITEM_DEFAULT);
                    self.block_call(dfg, &bc, out);
                }
                ir::ExceptionTableItem::Context(v) => {
                    out.words.push(ITEM_CONTEXT);
                    self.fixed(dfg, &[v], out);
                }
            }
        }
        out.words.push(0);
    }

    fn block_call(&mut self, dfg: &ir::DataFlowGraph, bc: &BlockCall, out: &mut Print) {
        let n = self.block(bc.block(&dfg.value_lists));
        out.words.push(n);
        let args = bc.args(&dfg.value_lists);
        out.words.push(args.len() as u32);
        for a in args {
            match a {
                BlockArg::Value(v) => {
                    let v = self.value(dfg, v);
                    out.words.extend([ARG_VALUE, v]);
                }
                BlockArg::TryCallRet(i) => out.words.extend([ARG_RET, i]),
                BlockArg::TryCallExn(i) => out.words.extend([ARG_EXN, i]),
            }
        }
    }

    /// The values of a list (a call's arguments, a return's), counted.
    fn values_of(&mut self, dfg: &ir::DataFlowGraph, vs: &[ir::Value], out: &mut Print) {
        out.words.push(vs.len() as u32);
        self.fixed(dfg, vs, out);
    }

    /// Values as many as the opcode's format always has.
    fn fixed(&mut self, dfg: &ir::DataFlowGraph, vs: &[ir::Value], out: &mut Print) {
        for &v in vs {
            let n = self.value(dfg, v);
            out.words.push(n);
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

    fn block(&mut self, b: ir::Block) -> u32 {
        let slot = &mut self.blocks[b.index()];
        if *slot == 0 {
            self.seen_blocks += 1;
            *slot = self.seen_blocks;
        }
        *slot
    }
}

/// A type as LIR holds it (`None`: a type the lifter refuses).
fn ty(t: ir::Type) -> Option<u32> {
    lir_type(t).map(|t| t.raw().into())
}

fn word64(w: &mut Vec<u32>, x: u64) {
    w.extend([x as u32, (x >> 32) as u32]);
}

fn bytes(w: &mut Vec<u32>, b: &[u8]) {
    w.push(b.len() as u32);
    w.extend(b.chunks(4).map(|c| {
        let mut x = [0u8; 4];
        x[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(x)
    }));
}

fn memflags(w: &mut Vec<u32>, dfg: &ir::DataFlowGraph, mf: ir::MemFlags) {
    let f = lir_memflags(dfg.mem_flags[mf]);
    w.extend([
        u32::from(f.trap) | u32::from(f.bits) << 8,
        f.region.map_or(0, |r| r.as_u32() + 1),
    ]);
}

fn signature(w: &mut Vec<u32>, sig: &ir::Signature) -> Option<()> {
    w.push(sig.call_conv as u32);
    for list in [&sig.params, &sig.returns] {
        w.push(list.len() as u32);
        for p in list {
            let purpose = match p.purpose {
                ir::ArgumentPurpose::Normal => 0,
                ir::ArgumentPurpose::StructArgument(size) => size.checked_add(4)?,
                ir::ArgumentPurpose::StructReturn => 1,
                ir::ArgumentPurpose::VMContext => 2,
            };
            w.extend([ty(p.value_type)?, p.extension as u32, purpose]);
        }
    }
    Some(())
}

fn external_name(w: &mut Vec<u32>, func: &ir::Function, name: &ExternalName) {
    match name {
        ExternalName::User(r) => match func.params.user_named_funcs().get(*r) {
            Some(u) => w.extend([NAME_USER, u.namespace, u.index]),
            // (Unverified input; such a function is never lifted.)
            None => w.extend([NAME_USER, u32::MAX, u32::MAX]),
        },
        ExternalName::TestCase(t) => {
            w.push(NAME_TESTCASE);
            bytes(w, t.raw());
        }
        ExternalName::LibCall(l) => w.extend([NAME_LIBCALL, *l as u32]),
        ExternalName::KnownSymbol(k) => w.extend([NAME_KNOWN, *k as u32]),
    }
}

/// An indexed function: its id, where its print starts in `InputIndex::words`, the number of
/// its words and of its callees (which follow the words).
type Entry = (FuncId, u32, u32, u32);

/// The prints of the unlifted functions compiled so far, by hash, and how many of them have
/// each shape key (`skip::Survey`: only a function of one of those shapes can equal one).
#[derive(Default)]
pub(crate) struct InputIndex {
    /// Every print's words, then its callees, one print after another.
    words: Vec<u32>,
    /// Print hash → the functions with that hash.
    table: FxHashMap<u64, SmallVec<[Entry; 1]>>,
    /// Shape key → how many functions have that key.
    shapes: FxHashMap<u64, u32>,
    /// Alike hash (`Print::alike_hash`) → the functions with that hash.
    alike: FxHashMap<u64, SmallVec<[Entry; 1]>>,
}

/// How many functions alike a function of a later batch takes from the index at most, to
/// start a family with (each is lifted again).
const ALIKE_TAKEN: usize = 4;

impl InputIndex {
    /// Does an indexed function have shape key `key`?
    pub(crate) fn has_shape(&self, key: u64) -> bool {
        !self.shapes.is_empty() && self.shapes.contains_key(&key)
    }

    /// Index `id`, of shape key `key` and alike hash `alike`, by its print (`words`,
    /// `callees`).
    pub fn insert(&mut self, id: FuncId, (key, alike): (u64, u64), words: &[u32], callees: &[u32]) {
        let start = self.words.len() as u32;
        self.words.extend_from_slice(words);
        self.words.extend_from_slice(callees);
        let entry = (id, start, words.len() as u32, callees.len() as u32);
        self.table.entry(hash_words(words)).or_default().push(entry);
        self.alike.entry(alike).or_default().push(entry);
        *self.shapes.entry(key).or_default() += 1;
    }

    /// `entry` (of shape key `key`), indexed at `start`, leaves the shape's count and the
    /// alike lists.
    fn unshape(&mut self, key: u64, alike: u64, start: u32) {
        if let Some(n) = self.shapes.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.shapes.remove(&key);
            }
        }
        if let Some(list) = self.alike.get_mut(&alike) {
            list.retain(|e| e.1 != start);
            if list.is_empty() {
                self.alike.remove(&alike);
            }
        }
    }

    /// The indexed functions (of shape key `key`) whose print has the words of `p`, each with
    /// its callees (they stay indexed).
    pub fn equal(&self, key: u64, p: &Print) -> Vec<(FuncId, &[u32])> {
        if !self.has_shape(key) {
            return Vec::new();
        }
        let Some(entries) = self.table.get(&p.hash()) else {
            return Vec::new();
        };
        (entries.iter())
            .filter_map(|&(id, start, n, c)| {
                let (s, n, c) = (start as usize, n as usize, c as usize);
                (self.words[s..s + n] == p.words[..]).then(|| (id, &self.words[s + n..s + n + c]))
            })
            .collect()
    }

    /// The indexed functions (of shape key `key`) whose print has the words of `p`, each with
    /// its callees. They leave the index: each is about to get a fingerprint of its own.
    pub(crate) fn take_equal(&mut self, key: u64, p: &Print) -> Vec<(FuncId, Vec<u32>)> {
        let h = p.hash();
        let Some(entries) = self.table.get_mut(&h) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        entries.retain(|&mut (id, start, n, c)| {
            let (s, n, c) = (start as usize, n as usize, c as usize);
            if self.words[s..s + n] == p.words[..] {
                found.push((id, (self.words[s + n..s + n + c].to_vec(), start)));
                false
            } else {
                true
            }
        });
        if entries.is_empty() {
            self.table.remove(&h);
        }
        let alike = p.alike_hash();
        for (_, (_, start)) in &found {
            self.unshape(key, alike, *start);
        }
        found.into_iter().map(|(f, (c, _))| (f, c)).collect()
    }

    /// Indexed functions (of shape key `key`) that differ from `func` (whose print is `p`)
    /// only in the values of constants (found by the print's alike hash), each with a copy of `func` that has their constants
    /// and callees: the function it stands for, up to renaming (its print is checked equal).
    /// They leave the index: each is about to get a fingerprint of its own, and to meet
    /// `func` in `merge-similar`. The newest first, `ALIKE_TAKEN` at most.
    pub(crate) fn take_alike(
        &mut self,
        key: u64,
        p: &Print,
        func: &ir::Function,
        printer: &mut Printer,
    ) -> Vec<(FuncId, ir::Function)> {
        let alike = p.alike_hash();
        let Some(list) = self.alike.get(&alike) else {
            return Vec::new();
        };
        let (n, c) = (p.words.len(), p.callees.len());
        let candidates: SmallVec<[Entry; ALIKE_TAKEN]> = (list.iter().rev())
            .filter(|e| (e.2 as usize, e.3 as usize) == (n, c))
            .take(ALIKE_TAKEN)
            .copied()
            .collect();
        let mut found = Vec::new();
        let mut check = Print::default();
        for e in candidates {
            let s = e.1 as usize;
            let (words, callees) = (&self.words[s..s + n], &self.words[s + n..s + n + c]);
            let Some(copy) = with_constants_of(func, p, words, callees) else {
                continue;
            };
            // The copy's print is the indexed one, callees and all: it *is* that function.
            if !printer.print(&copy, &mut check) || check.words != words || check.callees != callees
            {
                continue;
            }
            found.push((e.0, copy));
            let h = hash_words(words);
            if let Some(entries) = self.table.get_mut(&h) {
                entries.retain(|x| x.1 != e.1);
                if entries.is_empty() {
                    self.table.remove(&h);
                }
            }
            self.unshape(key, alike, e.1);
        }
        found
    }
}

/// `func` (whose print is `p`) with the callees `callees` and the constants of the print
/// `words`, where the two prints differ only in constants (`None` where they differ
/// elsewhere, or not at all).
fn with_constants_of(
    func: &ir::Function,
    p: &Print,
    words: &[u32],
    callees: &[u32],
) -> Option<ir::Function> {
    let mut differ: SmallVec<[(u32, ir::Inst); 4]> = SmallVec::new();
    let mut constants = p.constants.iter().peekable();
    for (i, (a, b)) in p.words.iter().zip(words).enumerate() {
        if a == b {
            continue;
        }
        // The constant whose words hold position i.
        while constants
            .next_if(|&&(at, n, _)| (at + n) as usize <= i)
            .is_some()
        {}
        let &&(at, _, inst) = constants.peek().filter(|&&&(at, _, _)| at as usize <= i)?;
        if differ.last().map(|d| d.0) != Some(at) {
            differ.push((at, inst));
        }
    }
    if differ.is_empty() {
        return None;
    }
    let mut f = with_callees(func, callees);
    for (at, inst) in differ {
        let at = at as usize;
        let lo = words[at];
        let wide = || u64::from(lo) | u64::from(*words.get(at + 1).unwrap_or(&0)) << 32;
        match &mut f.dfg.insts[inst] {
            D::UnaryImm { imm, .. } => *imm = ir::immediates::Imm64::new(wide() as i64),
            D::UnaryIeee64 { imm, .. } => *imm = ir::immediates::Ieee64::with_bits(wide()),
            D::UnaryIeee32 { imm, .. } => *imm = ir::immediates::Ieee32::with_bits(lo),
            D::UnaryIeee16 { imm, .. } => *imm = ir::immediates::Ieee16::with_bits(lo as u16),
            _ => return None,
        }
    }
    Some(f)
}

/// `func` with the module functions its references name replaced by `callees` (a print's:
/// one per external function reference, `u32::MAX` to leave it): the function whose print
/// gave `callees`, when `func`'s print has the same words.
pub(crate) fn with_callees(func: &ir::Function, callees: &[u32]) -> ir::Function {
    let mut f = func.clone();
    let refs: Vec<ir::FuncRef> = f.dfg.ext_funcs.keys().collect();
    for (fr, &callee) in refs.into_iter().zip(callees) {
        if callee != u32::MAX {
            let r = f.declare_imported_user_function(ir::UserExternalName::new(0, callee));
            f.dfg.ext_funcs[fr].name = ExternalName::User(r);
        }
    }
    f
}
