//! A module: functions, external symbols, and the indexes of who calls whom and who takes
//! whose address.

use super::entities::*;
use super::function::Function;
use super::inst::Opcode;
use super::operand::Operand;
use super::Name;
use crate::hash::HashMap;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, PrimaryMap, SecondaryMap};

/// What a symbol names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// A function.
    Function,
    /// Global data.
    Data,
}

/// An external symbol: a function (defined in this module or imported) or global data.
#[derive(Clone, Debug)]
pub struct SymbolData {
    /// The name as the producer spelled it (`fib`, `u0:12`); up to 24 bytes inline.
    pub name: Name,
    /// Whether the symbol names a function or data.
    pub kind: SymbolKind,
    /// The function defining this symbol in this module, if any.
    pub def: PackedOption<FuncId>,
    /// References are `colocated` (near, direct) in Cranelift's sense.
    pub colocated: bool,
}

/// A module of LIR functions.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// The functions, by id (removed ones keep their slot).
    pub functions: PrimaryMap<FuncId, Function>,
    /// Functions removed by a pass (slots stay so ids remain stable).
    pub removed: SecondaryMap<FuncId, bool>,
    /// The symbols, by id.
    pub symbols: PrimaryMap<Symbol, SymbolData>,
    /// The symbols by name: the names are `symbols`' own (hashed with `name_hash`), so a
    /// name is stored once.
    symbol_index: hashbrown::HashTable<Symbol>,
    /// Names that resolve to another symbol's code (aliases made by merging).
    pub aliases: HashMap<Symbol, Symbol>,
    /// The symbol of each function (set by `define_last_function`).
    func_symbol: SecondaryMap<FuncId, PackedOption<Symbol>>,
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
    /// An empty module.
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

    /// The symbol named `name`, if there is one.
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

    /// The function a symbol is defined by.
    pub fn defined(&self, sym: Symbol) -> Option<FuncId> {
        self.symbols[sym].def.expand()
    }

    /// Build the call graph and the address-taken index.
    pub fn call_graph(&self) -> CallGraph {
        CallGraph::build(self)
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
    pub(crate) fn build(m: &Module) -> Self {
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
