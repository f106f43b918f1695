//! `FunctionComparator`: the total order of functions (LLVM's FunctionComparator, kept apart
//! from the merging as LLVM keeps it), broken into small comparisons (`cmp_signature`,
//! `cmp_types`, `cmp_values` by serial number of first appearance, constants, `cmp_blocks` in
//! CFG order from the entry, `cmp_operations`, memory operands, callees by class), and the
//! merge validator that re-checks a merged pair.

use super::scope::Classes;
use crate::hash::HashMap;
use crate::lir::*;
use core::cmp::Ordering;
use cranelift_entity::{EntityRef, SecondaryMap};

/// The total order of functions: `compare(f, g)` walks both bodies in CFG order.
pub struct FunctionComparator<'m> {
    pub(crate) module: &'m Module,
    /// Equivalence class of each function that may be merged (callees compare by class;
    /// other functions by identity).
    pub class: &'m dyn Classes,
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
pub(crate) struct ComparatorState {
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
    pub(crate) fn into_state(self) -> ComparatorState {
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
    pub(crate) fn from_state(
        module: &'m Module,
        class: &'m dyn Classes,
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

    /// A comparator of functions of `module`, with callees compared by `class`.
    pub fn new(module: &'m Module, class: &'m dyn Classes) -> Self {
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

    /// A callee: functions with a class by class, others by identity (as `Callee::key`).
    fn callee_key(&self, s: Symbol) -> (u32, u32) {
        let s = self.module.resolve_alias(s);
        match self.module.defined(s) {
            Some(f) if !self.module.removed[f] => match self.class.class(f) {
                Some(c) => (0, c),
                None => (1, s.as_u32()),
            },
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
            .then(cmp(a.results().len, b.results().len))
            .then(cmp(a.operands().len, b.operands().len));
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
                    &l.exn_tables[ExnTable::from_u32(l.aux2(i))],
                    &r.exn_tables[ExnTable::from_u32(r.aux2(j))],
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
                    match (l.aux2(i), r.aux2(j)) {
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
            let o = self.cmp_operand(l, &x, r, &y, callee_pos && k == 0);
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

/// The merge validator: re-check that the comparator maps G onto F, and that the value and
/// block correspondences it found are bijections.
pub fn validate_merge(m: &Module, class: &dyn Classes, f: FuncId, g: FuncId) -> Result<(), String> {
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
