//! What passes read and record beside the program: which functions are open to change, what
//! was merged into what, how calls were rewritten, and the fingerprints of frozen functions.
//!
//! The IR (`lir::Module`) holds only the program: functions, symbols and aliases. A driver
//! (the `opt` command, `MergeModule`) owns one [`PassState`] next to its module and hands it
//! to every pass with the module, as Cranelift keeps its side tables (`ControlFlowGraph`,
//! `DominatorTree`) in the `Context` beside the `Function` rather than in it.

use crate::hash::HashMap;
use crate::lir::{FuncId, Function, Module, Operand, Signature, Symbol, Type};
use cranelift_entity::{EntityRef, SecondaryMap};
use smallvec::SmallVec;

/// What passes did to a function's body since it was lifted (or frozen): see
/// [`PassState::edit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Edit {
    /// Unchanged: the function lowers to what it was lifted from, up to the callees of its
    /// direct calls (`MergeRecord::callers_redirected`), so a backend may compile its
    /// original Cranelift IR instead of lowering it.
    #[default]
    None,
    /// `merge-similar` rewrote some of its direct calls (`PassState::call_rewrites`) and
    /// nothing else: a backend can make the same rewrite in the original IR.
    CallsRewritten,
    /// A pass changed the body (removed instructions, made it a thunk, rewrote calls with new
    /// arguments), or made the function: it must be lowered.
    Modified,
}

/// How a merged function was folded into its survivor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MergeKind {
    /// Every use was redirected and the function deleted.
    Replaced,
    /// The name stays and resolves to the survivor's code: no code of its own.
    Aliased,
    /// A small function that tail-calls (or calls) the survivor keeps a distinct address.
    Thunked,
    /// Folded into a shared body with extra parameters (`merge-similar`): callers call the
    /// shared body with the function's own values; no code is left, and the name must not be
    /// used to call it (the survivor's signature differs).
    Folded,
}

/// Which pass merged a function: what a report calls how it joined its family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MergedBy {
    /// `merge`: equal to its survivor.
    Exact,
    /// `merge-similar`: equal up to constants and callees.
    Similar,
    /// `merge-aligned`: its instructions aligned with another function's.
    Aligned,
}

impl MergedBy {
    /// `exact`, `similar` or `aligned`.
    pub fn name(self) -> &'static str {
        match self {
            MergedBy::Exact => "exact",
            MergedBy::Similar => "similar",
            MergedBy::Aligned => "aligned",
        }
    }
}

/// A record of one merge, kept for the JIT and for reports: the symbols (names) of the merged
/// function and of its survivor (`Module::symbol_name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeRecord {
    /// The function merged away.
    pub merged: Symbol,
    /// The function whose code it now uses.
    pub survivor: Symbol,
    /// How it was folded into the survivor.
    pub kind: MergeKind,
    /// The pass that merged it.
    pub by: MergedBy,
    /// Direct calls to `merged` now call `survivor` (false only for a preemptible merged
    /// function, whose definition may be replaced at link time).
    pub callers_redirected: bool,
}

/// How `merge-similar` rewrote the direct calls (`call`, `tail_call`) of a merged function:
/// they call `shared`, with signature `sig`, passing the call's arguments followed by
/// `extras` (made right before the call). A backend that compiles a caller from the IR it
/// was lifted from (see `Edit::CallsRewritten`) makes the same rewrite there.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRewrite {
    /// The shared body the calls now call.
    pub shared: Symbol,
    /// The shared body's signature.
    pub sig: Signature,
    /// The arguments passed after the call's own, in order.
    pub extras: Vec<ExtraArg>,
}

/// One extra argument of a rewritten call.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtraArg {
    /// A constant (`Operand::Int`, `F32` or `F64`) of the type.
    Const(Type, Operand),
    /// The address of a function, called through it with the signature.
    FuncAddr(Symbol, Signature),
}

/// The state passes share over one module, run after run (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct PassState {
    /// Functions with ids from here on are *open*: passes may change them. Those before are
    /// frozen (compiled by an earlier batch; `passes::merge::freeze`).
    pub first_open: u32,
    /// This batch's functions will be frozen and indexed (an incremental module): passes keep
    /// what the index needs.
    pub incremental: bool,
    /// The target compiles tail calls (`tail_call`) where calling conventions allow them.
    /// Passes that create calls (merge thunks) emit a tail call only then; otherwise a call
    /// and a return. Off by default (x86-64 needs frame pointers for tail calls).
    pub allow_tail_calls: bool,
    /// Free a function's body as soon as a pass removes it (merged into an equal function,
    /// folded into a shared body) rather than when the module is dropped, and give back all
    /// the room a thunk built in a merged function's old tables does not use (by default only
    /// that of the two largest tables): a lower peak of memory on large modules, for the
    /// price of the frees inside the passes. Off by default.
    pub free_removed: bool,
    /// Every merge, in the order the passes made them.
    pub merges: Vec<MergeRecord>,
    /// Functions whose direct calls `merge-similar` rewrote (each once), in the order of
    /// the rewrites (add with `add_call_rewrite`, which indexes them).
    pub call_rewrites: Vec<(Symbol, CallRewrite)>,
    call_rewrite_index: HashMap<Symbol, u32>,
    /// Direct calls (`call`, `tail_call`) of each symbol made by code the module does not
    /// hold: functions a backend compiles from their input without lifting them, whose calls
    /// it redirects itself. `merge-similar`'s cost model counts them as call sites; a merge
    /// that redirects calls moves them to the survivor (`move_external_calls`).
    pub external_calls: SecondaryMap<Symbol, u32>,
    /// Fingerprints of frozen functions, for merging later batches into them.
    pub frozen: FrozenIndex,
    /// Frozen functions whose bodies this batch still holds (a driver lifted them again,
    /// alike in shape to a function of the batch): `merge-similar` may group them with open
    /// functions, as members that keep their code, so that a family can start from a
    /// function an earlier batch compiled alone. The driver drops their bodies and clears
    /// the list when it freezes the batch.
    pub similar_frozen: Vec<FuncId>,
    /// The shared bodies `merge-similar` made in earlier batches, for functions of later
    /// batches to join.
    pub families: Families,
    /// Functions earlier batches compiled on their own that `merge-similar` walked: their
    /// skeletons and holes, for a family to start with them and functions of a later batch.
    pub seeds: Seeds,
    /// Functions removed with `free_removed` set whose bodies are still to be freed
    /// (`free_pending`).
    pending_free: Vec<FuncId>,
    /// What passes did to each open function (`edit`, `record_edit`).
    edits: SecondaryMap<FuncId, Edit>,
}

impl PassState {
    /// Was `f` frozen: compiled by an earlier batch (before `first_open`), so passes never
    /// change it and merging keeps it as the survivor?
    pub fn is_frozen(&self, f: FuncId) -> bool {
        f.as_u32() < self.first_open
    }

    /// Live functions of `m` that passes may change (those from `first_open` on; the others
    /// were frozen by an earlier compile).
    pub fn open_functions<'m>(
        &self,
        m: &'m Module,
    ) -> impl Iterator<Item = (FuncId, &'m Function)> + 'm {
        (self.first_open as usize..m.functions.len())
            .map(FuncId::new)
            .filter(move |&id| !m.removed[id])
            .map(move |id| (id, &m.functions[id]))
    }

    /// The ids of `open_functions`.
    pub fn open_function_ids(&self, m: &Module) -> Vec<FuncId> {
        self.open_functions(m).map(|(id, _)| id).collect()
    }

    /// What passes did to `f`'s body since it was lifted, or since it was frozen.
    pub fn edit(&self, f: FuncId) -> Edit {
        self.edits.get(f).copied().unwrap_or_default()
    }

    /// Record that a pass did `e` to `f` (an edit never undoes a larger one: a modified
    /// function stays modified).
    pub fn record_edit(&mut self, f: FuncId, e: Edit) {
        let old = &mut self.edits[f];
        *old = (*old).max(e);
    }

    /// Forget every edit: the functions were frozen (a later batch sees their compiled code).
    pub(crate) fn clear_edits(&mut self) {
        self.edits.clear();
    }

    /// Mark function `f` of `m` removed by a pass; its body is freed by the next
    /// `free_pending` if `free_removed` is set (see `Function::drop_body`).
    pub fn remove_function(&mut self, m: &mut Module, f: FuncId) {
        m.removed[f] = true;
        if self.free_removed {
            self.pending_free.push(f);
        }
    }

    /// Free the bodies of the functions removed since the last call (with `free_removed`
    /// set). Returns whether any body was freed.
    pub fn free_pending(&mut self, m: &mut Module) -> bool {
        let pending = core::mem::take(&mut self.pending_free);
        for &f in &pending {
            m.functions[f].drop_body();
        }
        !pending.is_empty()
    }

    /// Record how `merge-similar` rewrote the direct calls of `member`.
    pub fn add_call_rewrite(&mut self, member: Symbol, rewrite: CallRewrite) {
        self.move_external_calls(member, rewrite.shared);
        self.call_rewrite_index
            .insert(member, self.call_rewrites.len() as u32);
        self.call_rewrites.push((member, rewrite));
    }

    /// Forget how calls of `member` were rewritten: its calls call it again (a backend whose
    /// shared body failed to compile gives the member code of its own).
    pub fn remove_call_rewrite(&mut self, member: Symbol) {
        let Some(k) = self.call_rewrite_index.remove(&member) else {
            return;
        };
        self.call_rewrites.remove(k as usize);
        for (i, (s, _)) in self.call_rewrites.iter().enumerate().skip(k as usize) {
            self.call_rewrite_index.insert(*s, i as u32);
        }
    }

    /// How direct calls of `sym` are rewritten, if `merge-similar` merged it.
    pub fn call_rewrite(&self, sym: Symbol) -> Option<&CallRewrite> {
        let k = *self.call_rewrite_index.get(&sym)?;
        Some(&self.call_rewrites[k as usize].1)
    }

    /// The direct calls of `from` made outside the module now call `to` (see
    /// `external_calls`).
    pub fn move_external_calls(&mut self, from: Symbol, to: Symbol) {
        if let Some(&n) = self.external_calls.get(from) {
            if n > 0 && from != to {
                self.external_calls[from] = 0;
                self.external_calls[to] += n;
            }
        }
    }
}

/// A frozen function and where its fingerprint sits in `FrozenIndex::words`.
pub(crate) type FrozenEntry = (FuncId, u32, u32);

/// A range of a buffer: start and end.
pub(crate) type Range = (u32, u32);

/// Fingerprints of frozen functions: built and searched by `passes::merge` (its `index`
/// module says what a fingerprint is), kept here between batches.
#[derive(Clone, Debug, Default)]
pub struct FrozenIndex {
    /// What the merge walk of this batch learnt of each unchanged survivor (its token stream
    /// and callee symbols, ranges of `pending_words` and `pending_callees`), so that freezing
    /// it needs no second walk. Kept in buffers reused batch after batch (a lazy JIT freezes
    /// one function per batch).
    pub(crate) pending: Vec<(FuncId, Range, Range)>,
    pub(crate) pending_words: Vec<u32>,
    pub(crate) pending_callees: Vec<Symbol>,
    /// A fingerprint being built by `freeze`.
    pub(crate) fp: Vec<u32>,
    /// Every fingerprint's words, one after another.
    pub(crate) words: Vec<u32>,
    /// Fingerprint hash → the frozen functions with that hash.
    pub(crate) table: HashMap<u64, SmallVec<[FrozenEntry; 1]>>,
    /// Callee symbols no frozen function defined when a fingerprint named them (a caller
    /// compiled before its callee) → those fingerprints (with the number of their token
    /// words): when such a callee merges into another function later, each is written
    /// again with the survivor (`passes::merge::index`).
    pub(crate) unsettled: HashMap<Symbol, SmallVec<[(FrozenEntry, u32); 1]>>,
    /// The merges (`PassState::merges`) already looked at for `unsettled`.
    pub(crate) merges_seen: usize,
}

impl FrozenIndex {
    /// Number of frozen functions indexed.
    pub fn len(&self) -> usize {
        self.table.values().map(|v| v.len()).sum()
    }

    /// Is the index empty?
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// What becomes of one hole of a family's members in its shared body: a value every member
/// shares, a call of the member to itself, or an extra parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FamilyHole {
    /// The constant every member has here.
    Const(Operand),
    /// The callee (resolved through aliases) every member calls here.
    Callee(Symbol),
    /// Every member calls itself here (the shared body calls itself).
    SelfCall,
    /// The extra parameter with this index.
    Param(u32),
}

/// A `merge-similar` family whose shared body is compiled: what a function of a later batch
/// must have to join it (the skeleton, and the holes that are no parameters), and what it
/// passes (its values at the others).
#[derive(Clone, Debug)]
pub(crate) struct Family {
    /// The skeleton's hash key and stream (a range of `Families::words`).
    pub key: u64,
    pub tokens: Range,
    /// The shared body and its signature (the members' parameters, then the extra ones).
    pub shared: Symbol,
    pub sig: Signature,
    /// Per hole, in walk order: constants, then direct callees.
    pub consts: Vec<FamilyHole>,
    pub callees: Vec<FamilyHole>,
    /// Each extra parameter's type, and for a callee the signature of the calls through it.
    pub params: Vec<(Type, Option<Signature>)>,
}

/// Entries of a list (`Families`, `Seeds`) by the weak hash of their skeleton.
#[derive(Clone, Debug, Default)]
pub(crate) struct ByWeak(HashMap<u64, SmallVec<[u32; 1]>>);

impl ByWeak {
    pub(crate) fn has(&self, weak: u64) -> bool {
        !self.0.is_empty() && self.0.contains_key(&weak)
    }

    pub(crate) fn push(&mut self, weak: u64, k: usize) {
        self.0.entry(weak).or_default().push(k as u32);
    }

    pub(crate) fn get(&self, weak: u64) -> &[u32] {
        self.0.get(&weak).map_or(&[], |v| v.as_slice())
    }
}

/// The families `merge-similar` made, by the weak hash of their skeleton (see
/// [`PassState::families`]). Kept small: a family's skeleton stream and hole layout, never a
/// body.
#[derive(Clone, Debug, Default)]
pub struct Families {
    pub(crate) words: Vec<u32>,
    pub(crate) list: Vec<Family>,
    pub(crate) by_weak: ByWeak,
}

impl Families {
    /// No family yet?
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// May a skeleton of weak hash `weak` join a family?
    pub(crate) fn has_weak(&self, weak: u64) -> bool {
        self.by_weak.has(weak)
    }

    pub(crate) fn insert(&mut self, weak: u64, tokens: &[u32], mut f: Family) {
        let a = self.words.len() as u32;
        self.words.extend_from_slice(tokens);
        f.tokens = (a, self.words.len() as u32);
        self.by_weak.push(weak, self.list.len());
        self.list.push(f);
    }

    /// The families of skeleton `key` (weak hash `weak`) with stream `tokens`.
    pub(crate) fn find<'a>(
        &'a self,
        weak: u64,
        key: u64,
        tokens: &'a [u32],
    ) -> impl Iterator<Item = &'a Family> + 'a {
        (self.by_weak.get(weak).iter())
            .map(|&k| &self.list[k as usize])
            .filter(move |f| {
                f.key == key && self.words[f.tokens.0 as usize..f.tokens.1 as usize] == *tokens
            })
    }

    /// Forget the family of shared body `shared` (it failed to compile: nothing may call it).
    pub fn forget(&mut self, shared: Symbol) {
        let list = &self.list;
        self.by_weak.0.retain(|_, ks| {
            ks.retain(|k| list[*k as usize].shared != shared);
            !ks.is_empty()
        });
    }
}

/// A function an earlier batch compiled on its own, as `merge-similar` walked it: enough to
/// count it as a member (that keeps its code) of a family started later.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seed {
    pub f: FuncId,
    /// The skeleton's hash key and stream (a range of `Seeds::words`).
    pub key: u64,
    pub tokens: Range,
    /// Its holes: ranges of `Seeds::consts` and `Seeds::callees`.
    pub consts: Range,
    pub callees: Range,
}

/// The seeds of families (see [`PassState::seeds`]), by weak hash.
#[derive(Clone, Debug, Default)]
pub struct Seeds {
    pub(crate) words: Vec<u32>,
    pub(crate) consts: Vec<(crate::lir::Inst, u16, Operand)>,
    pub(crate) callees: Vec<(Symbol, crate::lir::Inst)>,
    pub(crate) list: Vec<Seed>,
    pub(crate) by_weak: ByWeak,
}

impl Seeds {
    pub(crate) fn has_weak(&self, weak: u64) -> bool {
        self.by_weak.has(weak)
    }

    /// Keep `f` (skeleton `tokens` of key `key` and weak hash `weak`, holes `consts` and
    /// `callees`).
    pub(crate) fn insert(
        &mut self,
        f: FuncId,
        (weak, key, tokens): (u64, u64, &[u32]),
        consts: &[(crate::lir::Inst, u16, Operand)],
        callees: &[(Symbol, crate::lir::Inst)],
    ) {
        let range = |a: usize, b: usize| (a as u32, b as u32);
        let (w, c, k) = (self.words.len(), self.consts.len(), self.callees.len());
        self.words.extend_from_slice(tokens);
        self.consts.extend_from_slice(consts);
        self.callees.extend_from_slice(callees);
        self.by_weak.push(weak, self.list.len());
        self.list.push(Seed {
            f,
            key,
            tokens: range(w, self.words.len()),
            consts: range(c, self.consts.len()),
            callees: range(k, self.callees.len()),
        });
    }
}
