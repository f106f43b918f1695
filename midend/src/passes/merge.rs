//! MergeFunctions over LIR (seeds 000 and 001, LLVM's design), and two steps beyond it.
//!
//! 1. **Hash filter**: a cheap hash (signature, block count, opcode sequence in CFG order).
//!    Functions with a unique hash are never compared; the hash is the first key of the order.
//! 2. **FunctionComparator**: a total order broken into small comparisons (`cmp_signature`,
//!    `cmp_types`, `cmp_values` by serial number of first appearance, `cmp_constants`,
//!    `cmp_blocks` in CFG order from the entry, `cmp_operations`, `cmp_memory`, `cmp_callee`).
//! 3. **Beyond LLVM**: callees are compared by *equivalence class*, found by partition
//!    refinement over the call graph (as GCC's IPA-ICF and lld's ICF do). Self-recursive
//!    functions (fact0/fact1) and mutually recursive groups (ping/pong) merge. Taken addresses
//!    (`func_addr`, data symbols) compare by identity, so observable pointers never change.
//! 4. **FnTree and Deferred**: a sorted set of unique functions with O(log N) lookup, and a
//!    worklist; strong functions first, then preemptible ones; when G merges into F, G's
//!    callers leave FnTree and return to Deferred.
//! 5. **Merging**: G local with an insignificant address: every use is replaced by F and G is
//!    deleted. G exported with an insignificant address: G becomes an alias (its name resolves
//!    to F's code; no code of its own). G's address significant, or G preemptible: G becomes a
//!    thunk (a tail call to F when the calling convention allows, else call and return), and
//!    its direct callers (unless G is preemptible) call F. A class whose best survivor is
//!    preemptible is left alone (LLVM would need a private copy; we stay conservative).

use crate::lir::*;
use crate::pass::{Pass, Stats};
use crate::Error;
use core::cmp::Ordering;
use core::hash::{Hash, Hasher};
use cranelift_entity::{EntityRef, SecondaryMap};
use rustc_hash::{FxHashMap, FxHasher};
use smallvec::SmallVec;
use std::collections::BTreeMap;

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
}

/// Scratch tables of the hashing walk, reused across functions.
#[derive(Default)]
pub struct HashScratch {
    reg_sn: SecondaryMap<Reg, u32>,
    block_sn: SecondaryMap<Block, u32>,
    order: Vec<Block>,
}

fn serial(map: &mut SecondaryMap<Reg, u32>, next: &mut u32, r: Reg) -> u32 {
    if map[r] == 0 {
        map[r] = *next;
        *next += 1;
    }
    map[r]
}

/// A callee: defined functions by class, others by identity (as `FunctionComparator`).
fn callee_key(m: &Module, class: &SecondaryMap<FuncId, u32>, s: Symbol) -> (u32, u32) {
    let s = *m.aliases.get(&s).unwrap_or(&s);
    match m.symbols.get(s).and_then(|d| d.def.expand()) {
        Some(f) if !m.removed[f] => (0, class[f]),
        _ => (1, s.as_u32()),
    }
}

fn hash_memflags(f: &Function, r: MemFlagsRef, h: &mut FxHasher) {
    let x = f.memflags[r];
    (x.bits, x.trap, x.region.map(|g| f.regions[g].id)).hash(h);
}

fn hash_global(f: &Function, g: GlobalRef, h: &mut FxHasher) {
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

/// The two hashes of a function, computed in one walk that visits blocks and values in the
/// order `FunctionComparator` does (blocks by first reference from the entry, which is a CFG
/// order; registers by first appearance, results before operands):
/// - `weak`: signature, reachable block count and opcode sequence: the cheap filter of seed
///   001. Functions with a unique weak hash are never compared.
/// - `strong`: everything the comparator looks at, registers and blocks by serial number and
///   callees by class. `compare(f, g) == Equal` implies equal strong (and weak) hashes, so the
///   strong hash can key FnTree ahead of the comparator, as LLVM's `FunctionNodeCmp` does.
pub fn function_hashes(
    m: &Module,
    f: &Function,
    class: &SecondaryMap<FuncId, u32>,
    s: &mut HashScratch,
) -> (u64, u64) {
    s.reg_sn.clear();
    s.block_sn.clear();
    s.order.clear();
    let mut weak = FxHasher::default();
    let mut strong = FxHasher::default();
    f.sig.hash(&mut weak);
    f.sig.hash(&mut strong);
    if let Some(g) = f.stack_limit {
        hash_global(f, g, &mut strong);
    }
    let Some(entry) = f.entry() else {
        return (weak.finish(), strong.finish());
    };
    let (mut next_b, mut next_r) = (2u32, 1u32);
    s.block_sn[entry] = 1;
    s.order.push(entry);
    let mut k = 0;
    while k < s.order.len() {
        let b = s.order[k];
        k += 1;
        let insts = &f.blocks[b].insts;
        insts.len().hash(&mut strong);
        for &i in insts {
            let d = f.insts[i];
            (d.opcode as u8).hash(&mut weak);
            (d.opcode as u8, d.ty.raw(), d.results.len, d.operands.len).hash(&mut strong);
            match d.opcode.format() {
                Format::Load | Format::Store => {
                    hash_memflags(f, MemFlagsRef::from_u32(d.aux), &mut strong)
                }
                Format::Call => {
                    f.sigs[SigRef::from_u32(d.aux)].hash(&mut strong);
                    if d.opcode == Opcode::TryCall {
                        f.exn_tables[ExnTable::from_u32(d.aux2)].hash(&mut strong);
                    }
                }
                Format::Addr if d.opcode == Opcode::FuncAddr => {
                    f.sigs[SigRef::from_u32(d.aux)].hash(&mut strong)
                }
                Format::Trap | Format::CondTrap => d.aux.hash(&mut strong),
                Format::GlobalValue => hash_global(f, GlobalRef::from_u32(d.aux), &mut strong),
                Format::Opaque => {
                    let o = &f.opaques[OpaqueRef::from_u32(d.aux)];
                    (&o.name, &o.imms, o.effects).hash(&mut strong);
                    if d.aux2 != 0 {
                        hash_memflags(f, MemFlagsRef::from_u32(d.aux2 - 1), &mut strong);
                    }
                }
                _ => {}
            }
            for &r in f.results(i) {
                f.reg_type(r).raw().hash(&mut strong);
                serial(&mut s.reg_sn, &mut next_r, r).hash(&mut strong);
            }
            let call = d.opcode.format() == Format::Call;
            for (idx, op) in f.operands(i).iter().enumerate() {
                operand_kind(op).hash(&mut strong);
                match *op {
                    Operand::Reg(r) => serial(&mut s.reg_sn, &mut next_r, r).hash(&mut strong),
                    Operand::Imm(x) => x.hash(&mut strong),
                    Operand::Block(bb) => {
                        if s.block_sn[bb] == 0 {
                            s.block_sn[bb] = next_b;
                            next_b += 1;
                            s.order.push(bb);
                        }
                        s.block_sn[bb].hash(&mut strong);
                    }
                    Operand::Mem(mr) => {
                        (mr.scale, mr.disp, mr.base.is_some(), mr.index.is_some())
                            .hash(&mut strong);
                        if let Some(x) = mr.base.expand() {
                            serial(&mut s.reg_sn, &mut next_r, x).hash(&mut strong);
                        }
                        if let Some(x) = mr.index.expand() {
                            serial(&mut s.reg_sn, &mut next_r, x).hash(&mut strong);
                        }
                    }
                    Operand::Sym(sym, off) => {
                        if call && idx == 0 {
                            callee_key(m, class, sym).hash(&mut strong);
                        } else {
                            sym.hash(&mut strong);
                        }
                        off.hash(&mut strong);
                    }
                    Operand::Stack(so, off) => {
                        let sd = f.stack_objs[so];
                        (so.index(), sd.size, sd.align_shift, off).hash(&mut strong);
                    }
                    Operand::Pred(c) => c.hash(&mut strong),
                    Operand::Arg(n) => n.hash(&mut strong),
                }
            }
        }
    }
    s.order.len().hash(&mut weak);
    (weak.finish(), strong.finish())
}

/// The cheap function hash (seed 001): signature, block count and the opcode sequence in CFG
/// order.
pub fn function_hash(f: &Function) -> u64 {
    let m = Module::new();
    let class = SecondaryMap::new();
    // The weak hash reads neither the module nor classes.
    function_hashes(&m, f, &class, &mut HashScratch::default()).0
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
            (Operand::Imm(x), Operand::Imm(y)) => cmp(x, y),
            (Operand::Block(x), Operand::Block(y)) => self.cmp_block_refs(*x, *y),
            (Operand::Mem(x), Operand::Mem(y)) => cmp(
                (x.scale, x.disp, x.base.is_some(), x.index.is_some()),
                (y.scale, y.disp, y.base.is_some(), y.index.is_some()),
            )
            .then_with(|| match (x.base.expand(), y.base.expand()) {
                (Some(p), Some(q)) => self.cmp_values(p, q),
                _ => Ordering::Equal,
            })
            .then_with(|| match (x.index.expand(), y.index.expand()) {
                (Some(p), Some(q)) => self.cmp_values(p, q),
                _ => Ordering::Equal,
            }),
            (Operand::Sym(x, o1), Operand::Sym(y, o2)) => {
                if callee {
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
            let (il, ir) = (&l.blocks[bl].insts, &r.blocks[br].insts);
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
        Operand::Imm(_) => 1,
        Operand::Block(_) => 2,
        Operand::Mem(_) => 3,
        Operand::Sym(..) => 4,
        Operand::Stack(..) => 5,
        Operand::Pred(_) => 6,
        Operand::Arg(_) => 7,
    }
}

/// Survivor priority: exported strong first, then local, then preemptible; then by id.
fn priority(f: &Function) -> u8 {
    match f.linkage {
        Linkage::Export => 0,
        Linkage::Local => 1,
        Linkage::Preemptible => 2,
        Linkage::Import => 3,
    }
}

/// Partition refinement: classes of functions equal up to the classes of their callees (the
/// greatest fixpoint, so recursive groups that call each other alike stay together). Each
/// round hashes every candidate under the current classes, groups by (class, strong hash),
/// and splits each group by comparing its members with a leader: O(N) body walks per round.
/// Returns the classes and the strong hashes under them.
fn refine_classes(
    m: &Module,
    candidates: &[FuncId],
    weak: &SecondaryMap<FuncId, u64>,
    report: &mut MergeReport,
) -> (SecondaryMap<FuncId, u32>, SecondaryMap<FuncId, u64>) {
    let mut class: SecondaryMap<FuncId, u32> = SecondaryMap::with_capacity(m.functions.len());
    // Functions that are not candidates (unique weak hash, no body) are callees too: each has
    // a class of its own, never shared with a candidate class.
    for (f, _) in m.functions.iter() {
        class[f] = u32::MAX - f.as_u32();
    }
    let mut order: Vec<FuncId> = candidates.to_vec();
    order.sort_unstable_by_key(|&f| (weak[f], f));
    let mut count = 0u32;
    for (k, &f) in order.iter().enumerate() {
        if k > 0 && weak[order[k - 1]] != weak[f] {
            count += 1;
        }
        class[f] = count;
    }
    count += 1;
    let mut strong: SecondaryMap<FuncId, u64> = SecondaryMap::with_capacity(m.functions.len());
    let mut scratch = HashScratch::default();
    let mut state = None;
    let mut rest: Vec<FuncId> = Vec::new();
    let mut remaining: Vec<FuncId> = Vec::new();
    // Only functions with direct calls read classes: the others are hashed once.
    let has_calls: Vec<FuncId> = candidates
        .iter()
        .copied()
        .filter(|&f| {
            let func = &m.functions[f];
            func.layout.iter().any(|&b| {
                func.blocks[b]
                    .insts
                    .iter()
                    .any(|&i| func.insts[i].opcode.is_call())
            })
        })
        .collect();
    let mut first = true;
    loop {
        report.rounds += 1;
        let snapshot = class.clone();
        for &f in if first { candidates } else { &has_calls[..] } {
            strong[f] = function_hashes(m, &m.functions[f], &snapshot, &mut scratch).1;
        }
        first = false;
        order.sort_unstable_by_key(|&f| (snapshot[f], strong[f], f));
        let mut cmpr = match state.take() {
            Some(s) => FunctionComparator::from_state(m, &snapshot, s),
            None => FunctionComparator::new(m, &snapshot),
        };
        let mut next = count;
        let mut i = 0;
        // The old class whose number was already kept by an earlier subgroup.
        let mut kept: Option<u32> = None;
        while i < order.len() {
            let key = (snapshot[order[i]], strong[order[i]]);
            let mut j = i + 1;
            while j < order.len() && (snapshot[order[j]], strong[order[j]]) == key {
                j += 1;
            }
            rest.clear();
            rest.extend_from_slice(&order[i..j]);
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
                    Some(o) if o < count => o,
                    _ => {
                        let n = next;
                        next += 1;
                        n
                    }
                };
                class[leader] = id;
                remaining.clear();
                for &x in others {
                    report.comparisons += 1;
                    if cmpr.compare(&m.functions[leader], &m.functions[x]) == Ordering::Equal {
                        class[x] = id;
                    } else {
                        remaining.push(x);
                    }
                }
                core::mem::swap(&mut rest, &mut remaining);
            }
            i = j;
        }
        state = Some(cmpr.into_state());
        if next == count {
            // No class split: the hashes of this round were computed under these classes.
            break;
        }
        count = next;
    }
    (class, strong)
}

/// Run MergeFunctions on a module.
pub fn merge_functions(m: &mut Module) -> MergeReport {
    let mut report = MergeReport::default();
    let ids: Vec<FuncId> = m
        .live_functions()
        .filter(|(_, f)| f.entry().is_some())
        .map(|(id, _)| id)
        .collect();
    // The hash filter: only functions sharing a weak hash with another are candidates.
    let mut weak: SecondaryMap<FuncId, u64> = SecondaryMap::with_capacity(m.functions.len());
    let mut seen: FxHashMap<u64, u32> = FxHashMap::default();
    {
        let no_classes = SecondaryMap::new();
        let mut scratch = HashScratch::default();
        for &id in &ids {
            let h = function_hashes(m, &m.functions[id], &no_classes, &mut scratch).0;
            weak[id] = h;
            *seen.entry(h).or_insert(0) += 1;
        }
    }
    let candidates: Vec<FuncId> = ids
        .iter()
        .copied()
        .filter(|&f| seen[&weak[f]] > 1)
        .collect();
    if candidates.is_empty() {
        return report;
    }
    let (class, strong) = refine_classes(m, &candidates, &weak, &mut report);

    // Deferred: strong functions first, then preemptible ones.
    let mut deferred: Vec<FuncId> = candidates.clone();
    deferred.sort_by_key(|&f| {
        (
            m.functions[f].linkage == Linkage::Preemptible,
            priority(&m.functions[f]),
            f,
        )
    });
    deferred.reverse(); // pop from the end
    let mut cg = m.call_graph();
    let mut state = Some(FunctionComparator::new(m, &class).into_state());
    // FnTree: ordered by (strong hash, FunctionComparator); each entry is the short list of
    // unique functions sharing a strong hash, kept in comparator order.
    let mut fn_tree: BTreeMap<u64, SmallVec<[FuncId; 1]>> = BTreeMap::new();
    let mut in_tree: SecondaryMap<FuncId, bool> = SecondaryMap::with_capacity(m.functions.len());
    let mut merged_into: SecondaryMap<FuncId, Option<FuncId>> =
        SecondaryMap::with_capacity(m.functions.len());
    while let Some(g) = deferred.pop() {
        if m.removed[g] || merged_into[g].is_some() {
            continue;
        }
        let found = {
            let mut cmpr = FunctionComparator::from_state(m, &class, state.take().unwrap());
            let bucket = fn_tree.entry(strong[g]).or_default();
            let pos = bucket.binary_search_by(|&x| {
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
                    if priority(&m.functions[g]) < priority(&m.functions[f]) {
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
        if m.functions[f].linkage == Linkage::Preemptible {
            continue; // no safe survivor (see the module comment)
        }
        // The merge validator re-checks every pair in debug builds (and in tests).
        #[cfg(debug_assertions)]
        if let Err(e) = validate_merge(m, &class, f, g) {
            panic!("merge validator: {e}");
        }
        let callers = merge_two(m, &mut cg, f, g, &mut report);

        merged_into[g] = Some(f);
        report.pairs.push((g, f));
        // G's callers changed: they leave FnTree and return to Deferred.
        for c in callers {
            if in_tree[c] && c != f {
                if let Some(bucket) = fn_tree.get_mut(&strong[c]) {
                    bucket.retain(|x| *x != c);
                }
                in_tree[c] = false;
                deferred.push(c);
            }
        }
    }
    report
}

/// Fold G into F; returns the functions whose bodies changed (G's rewritten callers).
fn merge_two(
    m: &mut Module,
    cg: &mut CallGraph,
    f: FuncId,
    g: FuncId,
    report: &mut MergeReport,
) -> Vec<FuncId> {
    let fs = m
        .lookup_symbol(&m.functions[f].name)
        .expect("function symbol");
    let gs = m
        .lookup_symbol(&m.functions[g].name)
        .expect("function symbol");
    let gf = &m.functions[g];
    // A taken address is significant even when the producer did not mark it (`.lir` input).
    let significant = gf.address_significant || !cg.address_takers[gs].is_empty();
    let preemptible = gf.linkage == Linkage::Preemptible;

    let callers: Vec<FuncId> = cg.callers[gs].clone();
    let kind = if significant || preemptible {
        MergeKind::Thunked
    } else if gf.linkage == Linkage::Local {
        MergeKind::Replaced
    } else {
        MergeKind::Aliased
    };
    // Redirect direct calls to G (a preemptible G may be replaced at link time: keep them).
    let mut changed = Vec::new();
    if !preemptible {
        for &c in &callers {
            if c == g {
                continue;
            }
            let func = &mut m.functions[c];
            let mut any = false;
            for b in func.layout.clone() {
                for i in func.blocks[b].insts.clone() {
                    if func.insts[i].opcode.is_call() {
                        if let Some(Operand::Sym(s, 0)) = func.operands(i).first().copied() {
                            if s == gs {
                                func.operands_mut(i)[0] = Operand::Sym(fs, 0);
                                any = true;
                            }
                        }
                    }
                }
            }
            if any {
                changed.push(c);
                if !cg.callers[fs].contains(&c) {
                    cg.callers[fs].push(c);
                }
            }
        }
        cg.callers[gs].retain(|&c| c == g);
    }
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
        merged: m.functions[g].name.clone(),
        survivor: m.functions[f].name.clone(),
        kind,
    });
    changed
}

/// Replace G's body with a call to `target`: a tail call where the calling convention is
/// `tail`, else call and return.
fn make_thunk(m: &mut Module, g: FuncId, target: Symbol) {
    let old = &m.functions[g];
    let mut t = Function::new(old.name.clone(), old.sig.clone(), old.linkage);
    t.address_significant = old.address_significant;
    t.stack_limit = None;
    let sig = t.sigs.push(old.sig.clone());
    let b = t.new_block();
    let mut args = Vec::new();
    for (k, p) in old.sig.params.iter().enumerate() {
        let r = t.new_reg(p.ty);
        let i = t.make_inst(Opcode::Copy, p.ty, &[r], &[Operand::Arg(k as u32)]);
        t.blocks[b].insts.push(i);
        args.push(Operand::Reg(r));
    }
    let mut ops = vec![Operand::Sym(target, 0)];
    ops.extend(args);
    if old.sig.call_conv == CallConv::Tail {
        let i = t.make_inst(Opcode::TailCall, Type::VOID, &[], &ops);
        t.insts[i].aux = sig.as_u32();
        t.blocks[b].insts.push(i);
    } else {
        let rets: Vec<Reg> = old.sig.returns.iter().map(|p| t.new_reg(p.ty)).collect();
        let i = t.make_inst(Opcode::Call, Type::VOID, &rets, &ops);
        t.insts[i].aux = sig.as_u32();
        t.blocks[b].insts.push(i);
        let rv: Vec<Operand> = rets.into_iter().map(Operand::Reg).collect();
        let i = t.make_inst(Opcode::Ret, Type::VOID, &[], &rv);
        t.blocks[b].insts.push(i);
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
    let mut seen_l = FxHashMap::default();
    let mut seen_r = FxHashMap::default();
    for &(a, b) in &c.reg_pairs {
        if seen_l.insert(a, b).is_some_and(|x| x != b)
            || seen_r.insert(b, a).is_some_and(|x| x != a)
        {
            return Err(format!(
                "register correspondence {a} ↔ {b} is not a bijection"
            ));
        }
    }
    let mut bl = FxHashMap::default();
    let mut br = FxHashMap::default();
    for &(a, b) in &c.block_pairs {
        if bl.insert(a, b).is_some_and(|x| x != b) || br.insert(b, a).is_some_and(|x| x != a) {
            return Err(format!("block correspondence {a} ↔ {b} is not a bijection"));
        }
    }
    Ok(())
}
