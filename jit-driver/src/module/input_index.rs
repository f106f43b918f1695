//! An index of the functions a JIT flush compiled from their Cranelift IR without lifting them,
//! so that a later flush can still merge an equal function into one of them.
//!
//! A function is left unlifted when nothing defined so far could merge with it (`skip`). A
//! later batch may define a function equal to it. Merging into a compiled function needs that
//! function's fingerprint in LIR (`midend::passes::merge::freeze`), and an unlifted function
//! has none. Keeping its Cranelift IR until then would cost many times the memory of what is
//! kept here: the digests of its print (`fingerprint`), its callees, and the values of its
//! constants.
//!
//! Two functions with equal exact digests are the same function up to renaming and callees:
//! the one that comes later, with its references renamed to the earlier one's callees, *is*
//! the earlier function. A flush that meets a function whose print equals that of an unlifted
//! function either merges it into that function at once (same callees, no address of its
//! own: `Core::merge_by_print`), or lifts that copy in the earlier function's place (a
//! *stand-in*) and freezes it, so the merge pass finds it as it finds any compiled function,
//! and decides. A function equal to an indexed one but for constants gets a stand-in too,
//! with the indexed one's constants (checked by its exact digest), for `merge-similar`.

use super::fingerprint::{Digest, Print, Walker};
use super::skip::PrintRef;
use cranelift_codegen::ir::{self, ExternalName, InstructionData as D};
use cranelift_module::FuncId;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// An indexed function: its id, its exact digest, and where its callees and constants are.
#[derive(Clone, Copy)]
struct Entry {
    id: FuncId,
    /// The shape key (`skip::Survey`).
    shape: u64,
    exact: Digest,
    callees: (u32, u32),
    constants: (u32, u32),
}

/// The functions compiled unlifted so far, by the digests of their prints.
#[derive(Default)]
pub(crate) struct InputIndex {
    /// Every entry ever indexed (one taken out is left, unreachable from the tables).
    entries: Vec<Entry>,
    /// Every entry's callees, then constants' values, one after another.
    callees: Vec<u32>,
    constants: Vec<u64>,
    /// Exact digest → the entries with it.
    exact: FxHashMap<Digest, SmallVec<[u32; 1]>>,
    /// Alike digest (the print but for constants) → the entries with it.
    alike: FxHashMap<u64, SmallVec<[u32; 1]>>,
    /// Shape key → how many entries have it (only a function of one of these shapes can
    /// equal an indexed one, even but for constants: a batch prints no other).
    shapes: FxHashMap<u64, u32>,
}

/// How many functions alike a function of a later batch takes from the index at most, to
/// start a family with (each is lifted again).
const ALIKE_TAKEN: usize = 4;

impl InputIndex {
    /// Is nothing indexed?
    pub(crate) fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// Does an indexed function have shape key `key`?
    pub(crate) fn has_shape(&self, key: u64) -> bool {
        !self.shapes.is_empty() && self.shapes.contains_key(&key)
    }

    /// The functions indexed now.
    #[cfg(test)]
    pub(crate) fn ids(&self) -> Vec<FuncId> {
        let entries = self.exact.values().flatten();
        entries.map(|&e| self.entries[e as usize].id).collect()
    }

    /// Index `id`, of shape key `shape`, by its print.
    pub(crate) fn insert(&mut self, id: FuncId, shape: u64, p: PrintRef) {
        let at = |n: usize, len: usize| (n as u32, len as u32);
        let e = self.entries.len() as u32;
        self.entries.push(Entry {
            id,
            shape,
            exact: p.exact,
            callees: at(self.callees.len(), p.callees.len()),
            constants: at(self.constants.len(), p.constants.len()),
        });
        self.callees.extend_from_slice(p.callees);
        self.constants
            .extend(p.constants.iter().map(|&(bits, _)| bits));
        self.exact.entry(p.exact).or_default().push(e);
        self.alike.entry(p.alike).or_default().push(e);
        *self.shapes.entry(shape).or_default() += 1;
    }

    fn callees_of(&self, e: &Entry) -> &[u32] {
        &self.callees[e.callees.0 as usize..(e.callees.0 + e.callees.1) as usize]
    }

    fn constants_of(&self, e: &Entry) -> &[u64] {
        &self.constants[e.constants.0 as usize..(e.constants.0 + e.constants.1) as usize]
    }

    /// Entry `e` (of alike digest `alike`) leaves the tables.
    fn remove(&mut self, e: u32, alike: u64) {
        let Entry { exact, shape, .. } = self.entries[e as usize];
        if let Some(n) = self.shapes.get_mut(&shape) {
            *n -= 1;
            if *n == 0 {
                self.shapes.remove(&shape);
            }
        }
        if let Some(list) = self.exact.get_mut(&exact) {
            list.retain(|x| *x != e);
            if list.is_empty() {
                self.exact.remove(&exact);
            }
        }
        if let Some(list) = self.alike.get_mut(&alike) {
            list.retain(|x| *x != e);
            if list.is_empty() {
                self.alike.remove(&alike);
            }
        }
    }

    /// The indexed functions whose print is `p`'s, each with its callees (they stay
    /// indexed).
    pub(crate) fn equal(&self, p: PrintRef) -> impl Iterator<Item = (FuncId, &[u32])> + '_ {
        (self.exact.get(&p.exact).into_iter().flatten()).map(|&e| {
            let e = &self.entries[e as usize];
            (e.id, self.callees_of(e))
        })
    }

    /// The indexed functions whose print is `p`'s, each with its callees. They leave the
    /// index: each is about to get a fingerprint of its own.
    pub(crate) fn take_equal(&mut self, p: PrintRef) -> Vec<(FuncId, Vec<u32>)> {
        let Some(list) = self.exact.get(&p.exact).cloned() else {
            return Vec::new();
        };
        let mut found = Vec::with_capacity(list.len());
        for e in list {
            let entry = self.entries[e as usize];
            found.push((entry.id, self.callees_of(&entry).to_vec()));
            self.remove(e, p.alike);
        }
        found
    }

    /// Indexed functions that differ from `func` (whose print is `p`) only in the values of
    /// constants (found by the alike digest), each with a copy of `func` that has their
    /// constants and callees: the function it stands for, up to renaming (its exact digest is
    /// checked equal). They leave the index: each is about to get a fingerprint of its own,
    /// and to meet `func` in `merge-similar`. The newest first, `ALIKE_TAKEN` at most.
    pub(crate) fn take_alike(
        &mut self,
        p: PrintRef,
        func: &ir::Function,
        walker: &mut Walker,
    ) -> Vec<(FuncId, ir::Function)> {
        let Some(list) = self.alike.get(&p.alike) else {
            return Vec::new();
        };
        let candidates: SmallVec<[u32; ALIKE_TAKEN]> = (list.iter().rev())
            .filter(|&&e| {
                let e = &self.entries[e as usize];
                e.constants.1 as usize == p.constants.len()
                    && e.callees.1 as usize == p.callees.len()
                    && e.exact != p.exact
            })
            .take(ALIKE_TAKEN)
            .copied()
            .collect();
        let mut found = Vec::new();
        let (mut check, mut refs, mut near) = (Print::default(), Vec::new(), Vec::new());
        for e in candidates {
            let entry = self.entries[e as usize];
            let callees = self.callees_of(&entry);
            let Some(copy) = with_constants(func, p, self.constants_of(&entry), callees) else {
                continue;
            };
            // The copy's print is the indexed one, callees and all: it *is* that function.
            let refs = super::fingerprint::Refs {
                pos: 0,
                refs: &mut refs,
                near: &mut near,
            };
            let (_, printed) = walker.walk::<true>(&copy, refs, &mut check);
            if !printed || check.exact != entry.exact || check.callees != callees {
                continue;
            }
            found.push((entry.id, copy));
            self.remove(e, p.alike);
        }
        found
    }
}

/// `func` (whose print is `p`) with the callees `callees` and the constants' values
/// `constants` (another print's, in the same order; `None` where an instruction cannot take
/// its value).
fn with_constants(
    func: &ir::Function,
    p: PrintRef,
    constants: &[u64],
    callees: &[u32],
) -> Option<ir::Function> {
    let mut f = with_callees(func, callees);
    for (&(mine, inst), &bits) in p.constants.iter().zip(constants) {
        if mine == bits {
            continue;
        }
        match &mut f.dfg.insts[inst] {
            D::UnaryImm { imm, .. } => *imm = ir::immediates::Imm64::new(bits as i64),
            D::UnaryIeee64 { imm, .. } => *imm = ir::immediates::Ieee64::with_bits(bits),
            D::UnaryIeee32 { imm, .. } => {
                *imm = ir::immediates::Ieee32::with_bits(u32::try_from(bits).ok()?)
            }
            D::UnaryIeee16 { imm, .. } => {
                *imm = ir::immediates::Ieee16::with_bits(u16::try_from(bits).ok()?)
            }
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
