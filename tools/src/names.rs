//! The names users know their functions by, for reports: the symbol a `.clif` file from
//! wasmtime gives each function in its `;; Intermediate Representation of function <NAME>:`
//! comment (or the wasm name section, for `.wasm` input), demangled, and the kind of code it
//! is (a function of the program, or code wasmtime adds around it).

use std::collections::HashMap;

/// What a function is: the program's own code, or code wasmtime adds to a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FunctionKind {
    /// A function of the program (a wasm function, or any function of a plain `.clif`).
    Function,
    /// A trampoline between the host's calling convention and wasm's.
    Trampoline,
    /// A wasmtime builtin the module uses (`memory_grow`, ...).
    Builtin,
    /// The module's start-up code.
    Startup,
}

impl FunctionKind {
    /// The kind `name` names (`function`, `trampoline`, `builtin`, `startup`).
    pub fn parse(name: &str) -> Option<FunctionKind> {
        [
            FunctionKind::Function,
            FunctionKind::Trampoline,
            FunctionKind::Builtin,
            FunctionKind::Startup,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }

    /// `function`, `trampoline`, `builtin` or `startup`.
    pub fn name(self) -> &'static str {
        match self {
            FunctionKind::Function => "function",
            FunctionKind::Trampoline => "trampoline",
            FunctionKind::Builtin => "builtin",
            FunctionKind::Startup => "startup",
        }
    }
}

/// A function's name for a user, and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionName {
    /// Demangled where the symbol is a mangled Rust or C++ name.
    pub display: String,
    pub kind: FunctionKind,
    /// The index of the wasm function it is (`wasm[0]::function[7]`) or enters (a
    /// trampoline, `wasm[0]::array_to_wasm_trampoline[7]`): what tells apart functions a
    /// name section names alike (`Report` adds it to such names).
    pub wasm_index: Option<u32>,
}

/// The names of a module's functions, by the name the function has in the Cranelift IR
/// (`u0:12`, or `%name` without the `%`, as `jit_driver::opmap::func_name` gives it).
#[derive(Clone, Debug, Default)]
pub struct FunctionNames {
    names: HashMap<String, FunctionName>,
    /// The name of each wasm function, by its index in the module (`wasm[0]::function[7]`),
    /// for the trampolines that enter it (`wasm[0]::array_to_wasm_trampoline[7]`).
    by_index: HashMap<u32, String>,
}

impl FunctionNames {
    /// The names of the functions of a `.clif` text: each `;; Intermediate Representation of
    /// function <SYMBOL>:` comment names the function that follows it.
    pub fn from_clif(text: &str) -> Self {
        let mut names = FunctionNames::default();
        let mut symbol: Option<&str> = None;
        for line in text.lines() {
            let line = line.trim_start();
            if let Some(rest) = line.strip_prefix(";; Intermediate Representation of function <") {
                symbol = rest.strip_suffix(">:");
            } else if let Some(rest) = line.strip_prefix("function ") {
                if let Some(sym) = symbol.take() {
                    let ir = rest.split(['(', ' ']).next().unwrap_or("");
                    let ir = ir.strip_prefix('%').unwrap_or(ir);
                    names.insert(ir, sym);
                }
            }
        }
        names
    }

    /// Name the function `ir` after the symbol `symbol` (wasmtime's, or a linker's).
    pub fn insert(&mut self, ir: &str, symbol: &str) {
        let name = from_symbol(symbol);
        if symbol.starts_with("wasm[0]::function[") && symbol.contains("]::") {
            if let Some(index) = name.wasm_index {
                self.by_index.insert(index, name.display.clone());
            }
        }
        self.names.insert(ir.to_string(), name);
    }

    /// Add every name of `other` (of another file of the same module).
    pub fn extend(&mut self, other: FunctionNames) {
        self.names.extend(other.names);
        self.by_index.extend(other.by_index);
    }

    /// The name and kind of the function `ir`: the IR name itself, demangled, where no
    /// symbol names it. A trampoline into a named wasm function is named after it
    /// (`wasm[0]::array_to_wasm_trampoline for NAME`), so that it reads, and compares
    /// between two builds, by the function it enters rather than by its index.
    pub fn get(&self, ir: &str) -> FunctionName {
        let Some(name) = self.names.get(ir) else {
            return FunctionName {
                display: demangle(ir),
                kind: FunctionKind::Function,
                wasm_index: None,
            };
        };
        let entered = (name.display)
            .starts_with("wasm[0]::array_to_wasm_trampoline[")
            .then_some(name.wasm_index)
            .flatten()
            .and_then(|index| self.by_index.get(&index));
        match entered {
            Some(f) => FunctionName {
                display: format!("wasm[0]::array_to_wasm_trampoline for {f}"),
                ..name.clone()
            },
            None => name.clone(),
        }
    }
}

/// A wasmtime symbol (`wasm[0]::function[7]::NAME`, `wasm[0]::array_to_wasm_trampoline[7]`,
/// `signatures[3]::wasm_to_array_trampoline`, `wasmtime_builtin_memory_grow`,
/// `module_start[0]::Wasm`) as a name and kind; any other symbol is a function's own.
///
/// wasmtime's own `--emit-clif` comments cut names at 96 characters: such a name demangles
/// to its whole elements and `...` ([`demangle`]).
fn from_symbol(symbol: &str) -> FunctionName {
    let index_in = |s: &str| {
        s.split_once(']')
            .and_then(|(index, _)| index.parse::<u32>().ok())
    };
    if let Some(rest) = symbol.strip_prefix("wasm[0]::function[") {
        let wasm_index = index_in(rest);
        let display = match rest.split_once("]::") {
            // (a `[wasm function N]` suffix, as older versions wrote it, is the index again)
            Some((_, name)) => {
                let name = match name.rsplit_once(" [wasm function ") {
                    Some((head, _)) => head,
                    None => name,
                };
                demangle(name)
            }
            None => format!("wasm-function[{rest}"),
        };
        return FunctionName {
            display,
            kind: FunctionKind::Function,
            wasm_index,
        };
    }
    let kind = if symbol.contains("trampoline") {
        FunctionKind::Trampoline
    } else if symbol.starts_with("wasmtime_builtin_") {
        FunctionKind::Builtin
    } else if symbol.starts_with("module_start[") {
        FunctionKind::Startup
    } else {
        return FunctionName {
            display: demangle(symbol),
            kind: FunctionKind::Function,
            wasm_index: None,
        };
    };
    let wasm_index = symbol
        .strip_prefix("wasm[0]::array_to_wasm_trampoline[")
        .and_then(index_in);
    FunctionName {
        display: symbol.to_string(),
        kind,
        wasm_index,
    }
}

/// `name` demangled if it is a mangled Rust (legacy or v0) or C++ (Itanium) symbol, else as
/// it is. A legacy Rust name keeps its hash (`::h0123..`), which tells apart the instances
/// of one generic function; [`without_hash`] drops it.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return if name.starts_with("_R") {
            // v0 names carry their generic arguments; the crate disambiguators only clutter.
            format!("{d:#}")
        } else {
            d.to_string()
        };
    }
    for partial in cut_rust_legacy(name) {
        if let Ok(d) = rustc_demangle::try_demangle(&partial) {
            return format!("{d}...");
        }
    }
    if name.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle() {
                return d;
            }
        }
    }
    name.to_string()
}

/// A legacy Rust symbol cut short (wasmtime's CLIF comments cut names at 96 characters) as
/// complete symbols to try, longest first: `_ZN` + `<len><ident>`... + `E`, with the cut
/// element shortened to what is left of it, then without it.
fn cut_rust_legacy(name: &str) -> Vec<String> {
    let Some(rest) = name.strip_prefix("_ZN") else {
        return Vec::new();
    };
    if rest.ends_with('E') {
        return Vec::new();
    }
    let b = rest.as_bytes();
    let (mut at, mut whole) = (0, String::new());
    while at < b.len() && b[at].is_ascii_digit() {
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        let Ok(len) = rest[at..at + digits].parse::<usize>() else {
            break;
        };
        let start = at + digits;
        if start + len > b.len() {
            let mut cut = &rest[start..];
            // (an escape the cut left open, `$LT` of `$LT$`, goes)
            if cut.matches('$').count() % 2 == 1 {
                cut = &cut[..cut.rfind('$').unwrap_or(0)];
            }
            let mut out = Vec::new();
            if !cut.is_empty() {
                out.push(format!("_ZN{whole}{}{cut}E", cut.len()));
            }
            if !whole.is_empty() {
                out.push(format!("_ZN{whole}E"));
            }
            return out;
        }
        whole.push_str(&rest[at..start + len]);
        at = start + len;
    }
    // Cut just after a whole element (the hash's, or the `E`, lost).
    if at == b.len() && !whole.is_empty() {
        return vec![format!("_ZN{whole}E")];
    }
    Vec::new()
}

/// A demangled name without a legacy Rust hash suffix (`::h` and 16 hex digits), the key that
/// matches one function across two builds.
pub fn without_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_and_v0_and_cpp_names_demangle() {
        assert_eq!(
            demangle("_ZN4core3fmt9Formatter3pad17h0123456789abcdefE"),
            "core::fmt::Formatter::pad::h0123456789abcdef"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("_ZN3foo3barIiEEvT_"), "void foo::bar<int>(int)");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
        // Cut short (at 96 characters by wasmtime): the whole elements, and a mark.
        assert_eq!(
            demangle("_ZN4core3fmt9Formatter3pa"),
            "core::fmt::Formatter::pa..."
        );
        assert_eq!(
            demangle("_ZN4core3fmt12Form$LT$u8"),
            "core::fmt::Form<u8..."
        );
        // Cut inside an escape, and just after an element.
        assert_eq!(
            demangle("_ZN5alloc5boxed40From$LT$alloc..string..String$G"),
            "alloc::boxed::From<alloc::string::String..."
        );
        assert_eq!(
            demangle("_ZN81_$LT$std..io..default_write_fmt..Adapter$LT$T$GT$$u20$as$u20$core..fmt..Write$GT$9write_str"),
            "<std::io::default_write_fmt::Adapter<T> as core::fmt::Write>::write_str..."
        );
        assert_eq!(
            without_hash("core::fmt::Formatter::pad::h0123456789abcdef"),
            "core::fmt::Formatter::pad"
        );
        assert_eq!(without_hash("a::hello"), "a::hello");
    }

    #[test]
    fn wasmtime_comments_name_the_functions_that_follow() {
        let text = "\
;; Intermediate Representation of function <wasm[0]::function[3]::_ZN4core3fmt9Formatter3pad17h0123456789abcdefE>:
function u0:1(i64 vmctx, i64) tail {
block0(v0: i64, v1: i64):
    return
}
;; Intermediate Representation of function <wasm[0]::array_to_wasm_trampoline[3]>:
function u268435456:1(i64 vmctx, i64) system_v {
block0(v0: i64, v1: i64):
    return
}
;; Intermediate Representation of function <wasm[0]::function[4]>:
function u0:2() tail {
block0:
    return
}
function %plain() {
block0:
    return
}
";
        let names = FunctionNames::from_clif(text);
        let f = names.get("u0:1");
        assert_eq!(f.display, "core::fmt::Formatter::pad::h0123456789abcdef");
        assert_eq!(f.kind, FunctionKind::Function);
        let t = names.get("u268435456:1");
        assert_eq!(t.kind, FunctionKind::Trampoline);
        assert_eq!(
            t.display,
            "wasm[0]::array_to_wasm_trampoline for core::fmt::Formatter::pad::h0123456789abcdef"
        );
        assert_eq!(names.get("u0:2").display, "wasm-function[4]");
        assert_eq!(names.get("plain").display, "plain");
        assert_eq!(names.get("plain").kind, FunctionKind::Function);
    }
}
