//! A module: functions, external symbols, and the indexes of who calls whom and who takes
//! whose address.

use super::entities::*;
use super::function::{Function, Signature};
use super::inst::Opcode;
use super::operand::Operand;
use super::types::Type;
use super::Name;
use crate::hash::HashMap;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, PrimaryMap, SecondaryMap};

/// What a symbol names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    Function,
    Data,
}

/// An external symbol: a function (defined in this module or imported) or global data.
#[derive(Clone, Debug)]
pub struct SymbolData {
    /// The name as the producer spelled it (`fib`, `u0:12`); up to 24 bytes inline.
    pub name: Name,
    pub kind: SymbolKind,
    /// The function defining this symbol in this module, if any.
    pub def: PackedOption<FuncId>,
    /// References are `colocated` (near, direct) in Cranelift's sense.
    pub colocated: bool,
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

/// A record of one merge, kept for the JIT and for reports: the symbols (names) of the merged
/// function and of its survivor (`Module::symbol_name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeRecord {
    pub merged: Symbol,
    pub survivor: Symbol,
    pub kind: MergeKind,
    /// Direct calls to `merged` now call `survivor` (false only for a preemptible merged
    /// function, whose definition may be replaced at link time).
    pub callers_redirected: bool,
}

/// How `merge-similar` rewrote the direct calls (`call`, `tail_call`) of a merged function:
/// they call `shared`, with signature `sig`, passing the call's arguments followed by
/// `extras` (made right before the call). A backend that compiles a caller from the IR it
/// was lifted from (see `Function::calls_rewritten`) makes the same rewrite there.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRewrite {
    pub shared: Symbol,
    pub sig: Signature,
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

/// A module of LIR functions.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub functions: PrimaryMap<FuncId, Function>,
    /// Functions removed by a pass (slots stay so ids remain stable).
    pub removed: SecondaryMap<FuncId, bool>,
    pub symbols: PrimaryMap<Symbol, SymbolData>,
    /// The symbols by name: the names are `symbols`' own (hashed with `name_hash`), so a
    /// name is stored once.
    symbol_index: hashbrown::HashTable<Symbol>,
    /// Names that resolve to another symbol's code (aliases made by merging).
    pub aliases: HashMap<Symbol, Symbol>,
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
    /// Functions with ids from here on are *open*: passes may change them. Those before are
    /// frozen (compiled by an earlier batch; `passes::merge::freeze`).
    pub first_open: u32,
    /// Fingerprints of frozen functions, for merging later batches into them.
    pub frozen_index: crate::passes::merge::FrozenIndex,
    /// This batch's functions will be frozen and indexed (an incremental module): passes keep
    /// what the index needs.
    pub incremental: bool,
    /// The symbol of each function (set by `define_last_function`).
    func_symbol: SecondaryMap<FuncId, PackedOption<Symbol>>,
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
    /// Functions removed with `free_removed` set whose bodies are still to be freed
    /// (`free_pending`).
    pending_free: Vec<FuncId>,
}

/// A module's symbols, borrowed apart from its functions: a lift builds a function in its
/// slot of `Module::functions` and makes the symbols it refers to through this
/// (`Module::function_and_symbols`).
pub struct SymbolsMut<'a> {
    symbols: &'a mut PrimaryMap<Symbol, SymbolData>,
    index: &'a mut hashbrown::HashTable<Symbol>,
}

impl SymbolsMut<'_> {
    /// The symbol of `name`, created as `kind` if it does not exist yet (`Module::symbol`).
    #[inline]
    pub fn symbol(&mut self, name: &str, kind: SymbolKind) -> Symbol {
        symbol_named(self.symbols, self.index, name, kind, || Name::new(name))
    }

    /// The data of symbol `s`.
    #[inline]
    pub fn data_mut(&mut self, s: Symbol) -> &mut SymbolData {
        &mut self.symbols[s]
    }
}

/// The symbol of `name` in `symbols` (indexed by `index`), created as `kind` with the name
/// `make` gives if it does not exist yet (a clone of a `Name` at hand copies its inline
/// bytes whole, where `Name::new` copies the string's bytes one run at a time and reads them
/// back in words).
#[inline]
fn symbol_named(
    symbols: &mut PrimaryMap<Symbol, SymbolData>,
    index: &mut hashbrown::HashTable<Symbol>,
    name: &str,
    kind: SymbolKind,
    make: impl FnOnce() -> Name,
) -> Symbol {
    let h = name_hash(name);
    let syms = &*symbols;
    let entry = index.entry(h, |&s| syms[s].name == name, |&s| name_hash(&syms[s].name));
    match entry {
        hashbrown::hash_table::Entry::Occupied(e) => *e.get(),
        hashbrown::hash_table::Entry::Vacant(e) => {
            let s = symbols.next_key();
            e.insert(s);
            symbols.push(SymbolData {
                name: make(),
                kind,
                def: None.into(),
                colocated: false,
            });
            s
        }
    }
}

/// The hash of a symbol name in `Module::symbol_index` (the mid-end's hasher).
#[inline]
fn name_hash(name: &str) -> u64 {
    use core::hash::BuildHasher;
    crate::hash::MidBuildHasher.hash_one(name)
}

impl Module {
    pub fn new() -> Self {
        Self::default()
    }

    /// Make room for `n` more functions and as many symbols (each function defines one; the
    /// functions it calls are mostly among them), so adding them seldom grows a table.
    pub fn reserve_functions(&mut self, n: usize) {
        self.functions.reserve(n);
        self.symbols.reserve(n);
        let symbols = &self.symbols;
        self.symbol_index
            .reserve(n, |&s| name_hash(&symbols[s].name));
    }

    /// Mark function `f` removed by a pass; its body is freed now if `free_removed` is set
    /// (see `Function::drop_body`).
    pub fn remove_function(&mut self, f: FuncId) {
        self.removed[f] = true;
        if self.free_removed {
            self.pending_free.push(f);
        }
    }

    /// Free the bodies of the functions removed since the last call (with `free_removed`
    /// set). Freeing a body frees each of its tables, and the allocator reads a header just
    /// before each: on a large module every one of those is a cache miss. In a batch they are
    /// asked for a few functions ahead, so they come in together. Returns whether any
    /// body was freed.
    pub fn free_pending(&mut self) -> bool {
        let pending = core::mem::take(&mut self.pending_free);
        for (k, &f) in pending.iter().enumerate() {
            if let Some(&g) = pending.get(k + 8) {
                self.functions[g].prefetch_header();
            }
            if let Some(&g) = pending.get(k + 3) {
                self.functions[g].prefetch_allocations();
            }
            self.functions[f].drop_body();
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

    /// How direct calls of `sym` are rewritten, if `merge-similar` merged it.
    pub fn call_rewrite(&self, sym: Symbol) -> Option<&CallRewrite> {
        let k = *self.call_rewrite_index.get(&sym)?;
        Some(&self.call_rewrites[k as usize].1)
    }

    /// The symbol of `name`, created as `kind` if it does not exist yet.
    pub fn symbol(&mut self, name: &str, kind: SymbolKind) -> Symbol {
        symbol_named(
            &mut self.symbols,
            &mut self.symbol_index,
            name,
            kind,
            || Name::new(name),
        )
    }

    /// Function `f`, and the symbols apart from it (see `SymbolsMut`).
    #[inline]
    pub fn function_and_symbols(&mut self, f: FuncId) -> (&mut Function, SymbolsMut<'_>) {
        (
            &mut self.functions[f],
            SymbolsMut {
                symbols: &mut self.symbols,
                index: &mut self.symbol_index,
            },
        )
    }

    /// Make function `f`, pushed to `functions` last, the definition of its name's symbol (made
    /// if new): the end of `add_function`, for a function built in place. If a function
    /// defines that name already, `f` is taken off the table again and the error says so.
    pub fn define_last_function(&mut self, f: FuncId) -> Result<(), String> {
        let name = &self.functions[f].name;
        let sym = symbol_named(
            &mut self.symbols,
            &mut self.symbol_index,
            name,
            SymbolKind::Function,
            || name.clone(),
        );
        if self.symbols[sym].def.is_some() {
            let msg = format!("function {name} is defined twice");
            self.pop_last_function(f);
            return Err(msg);
        }
        self.symbols[sym].def = f.into();
        self.func_symbol[f] = sym.into();
        self.symbols[sym].kind = SymbolKind::Function;
        Ok(())
    }

    /// Take function `f`, the last of `functions` and not yet defining a symbol, off the
    /// table again (a lift that failed).
    #[cold]
    pub fn pop_last_function(&mut self, f: FuncId) {
        assert_eq!(f.index() + 1, self.functions.len(), "not the last function");
        debug_assert!(self.func_symbol.get(f).is_none_or(|s| s.is_none()));
        // (`PrimaryMap` has no `pop`; its conversions to and from a `Vec` move the array)
        let mut v: Vec<Function> = core::mem::take(&mut self.functions).into();
        v.pop();
        self.functions = v.into();
    }

    pub fn lookup_symbol(&self, name: &str) -> Option<Symbol> {
        self.symbol_index
            .find(name_hash(name), |&s| self.symbols[s].name == name)
            .copied()
    }

    /// The name of a symbol.
    pub fn symbol_name(&self, s: Symbol) -> &str {
        &self.symbols[s].name
    }

    /// Add a function; its symbol (same name) now points at it.
    pub fn add_function(&mut self, f: Function) -> Result<FuncId, String> {
        let id = self.functions.push(f);
        self.define_last_function(id)?;
        Ok(id)
    }

    /// Live (not removed) functions.
    pub fn live_functions(&self) -> impl Iterator<Item = (FuncId, &Function)> {
        self.functions
            .iter()
            .filter(move |(id, _)| !self.removed[*id])
    }

    /// The symbol whose code `s` uses: `s` itself, or the end of its chain of merge aliases.
    pub fn resolve_alias(&self, s: Symbol) -> Symbol {
        let mut t = s;
        let mut steps = 0;
        while let Some(&n) = self.aliases.get(&t) {
            t = n;
            steps += 1;
            if n == s || steps > self.aliases.len() {
                break; // never loops: merging only points at live survivors
            }
        }
        t
    }

    /// The symbol naming function `f`.
    pub fn symbol_of(&self, f: FuncId) -> Option<Symbol> {
        self.func_symbol
            .get(f)
            .and_then(|s| s.expand())
            .or_else(|| self.lookup_symbol(&self.functions[f].name))
    }

    /// Live functions that passes may change (those from `first_open` on; the others were
    /// frozen by an earlier compile).
    pub fn open_functions(&self) -> impl Iterator<Item = (FuncId, &Function)> {
        (self.first_open as usize..self.functions.len())
            .map(FuncId::new)
            .filter(move |&id| !self.removed[id])
            .map(move |id| (id, &self.functions[id]))
    }

    /// The ids of `open_functions`.
    pub fn open_function_ids(&self) -> Vec<FuncId> {
        self.open_functions().map(|(id, _)| id).collect()
    }

    /// Start loading what `defined(sym)` reads (a hint: a walk over many functions asks for
    /// the symbols of a function's calls before it resolves them).
    #[inline]
    pub fn prefetch_symbol(&self, sym: Symbol) {
        if let Some(d) = self.symbols.get(sym) {
            super::function::prefetch_slice(core::slice::from_ref(d), 1);
        }
    }

    /// The function a symbol is defined by.
    pub fn defined(&self, sym: Symbol) -> Option<FuncId> {
        self.symbols[sym].def.expand()
    }

    /// Build the call graph and the address-taken index.
    pub fn call_graph(&self) -> CallGraph {
        CallGraph::build(self)
    }

    /// The functions to prefetch while `order[k]` is processed: one and four places ahead.
    /// The farther request starts the load early, the nearer one asks again for what has not
    /// arrived (a walk of 10k functions is about 15% faster than with either alone;
    /// BENCHMARKS.md).
    #[inline]
    fn ahead<'a>(&'a self, order: &'a [FuncId], k: usize) -> impl Iterator<Item = &'a Function> {
        [1, 4]
            .into_iter()
            .filter_map(move |d| order.get(k + d))
            .map(|&n| &self.functions[n])
    }

    /// While `order[k]` is processed, start loading the arrays of the functions `ahead` and
    /// the call signatures of `order[k + 1]` (see `Function::prefetch`).
    #[inline]
    pub fn prefetch_ahead(&self, order: &[FuncId], k: usize) {
        for f in self.ahead(order, k) {
            f.prefetch();
        }
        if let Some(&n) = order.get(k + 1) {
            self.functions[n].prefetch_signatures();
        }
    }

    /// `prefetch_ahead` for a pass that reads only function bodies (`Function::prefetch_body`).
    #[inline]
    pub fn prefetch_bodies_ahead(&self, order: &[FuncId], k: usize) {
        for f in self.ahead(order, k) {
            f.prefetch_body();
        }
    }

    /// Total instructions of live functions.
    pub fn inst_count(&self) -> usize {
        self.live_functions().map(|(_, f)| f.inst_count()).sum()
    }
}

/// Who calls whom, and who takes whose address, over live functions.
#[derive(Clone, Debug, Default)]
pub struct CallGraph {
    /// Direct callees of each function (symbols, deduplicated, in first-use order).
    pub callees: SecondaryMap<FuncId, Vec<Symbol>>,
    /// Functions that call each symbol directly (deduplicated).
    pub callers: SecondaryMap<Symbol, Vec<FuncId>>,
    /// Functions that take each symbol's address (`func_addr`, `symbol_value`, globals).
    pub address_takers: SecondaryMap<Symbol, Vec<FuncId>>,
}

impl CallGraph {
    pub fn build(m: &Module) -> Self {
        let mut g = CallGraph::default();
        // Functions come in increasing id order, so a symbol's list holds `id` already exactly
        // when `id` is its last entry: no search of the lists (a symbol called or taken by
        // every function would make one quadratic).
        for (id, f) in m.live_functions() {
            let mut seen: Vec<Symbol> = Vec::new();
            for &b in &f.layout {
                for &i in f.block_insts(b) {
                    if matches!(
                        f.insts[i].opcode,
                        Opcode::Call | Opcode::TailCall | Opcode::TryCall
                    ) {
                        if let Some(Operand::Sym(s, _)) = f.operands(i).first() {
                            if g.callers[s].last() != Some(&id) {
                                seen.push(s);
                                g.callers[s].push(id);
                            }
                        }
                    }
                }
            }
            f.for_each_taken_symbol(|s| {
                if g.address_takers[s].last() != Some(&id) {
                    g.address_takers[s].push(id);
                }
            });
            g.callees[id] = seen;
        }
        g
    }
}
