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
}

/// The names of a module's functions, by the name the function has in the Cranelift IR
/// (`u0:12`, or `%name` without the `%`, as `jit_driver::opmap::func_name` gives it).
#[derive(Clone, Debug, Default)]
pub struct FunctionNames {
    names: HashMap<String, FunctionName>,
    /// The name of each wasm function, by its index in the module (`wasm[0]::function[7]`),
    /// for the trampolines that enter it (`wasm[0]::array_to_wasm_trampoline[7]`).
    by_index: HashMap<String, String>,
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
        if let Some((index, _)) = symbol
            .strip_prefix("wasm[0]::function[")
            .and_then(|rest| rest.split_once("]::"))
        {
            self.by_index
                .insert(index.to_string(), name.display.clone());
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
            };
        };
        let entered = (name
            .display
            .strip_prefix("wasm[0]::array_to_wasm_trampoline["))
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|index| self.by_index.get(index));
        match entered {
            Some(f) => FunctionName {
                display: format!("wasm[0]::array_to_wasm_trampoline for {f}"),
                kind: name.kind,
            },
            None => name.clone(),
        }
    }
}

/// How many characters of a name wasmtime keeps in its symbols.
const WASMTIME_NAME_CUT: usize = 96;

/// A wasmtime symbol (`wasm[0]::function[7]::NAME`, `wasm[0]::array_to_wasm_trampoline[7]`,
/// `signatures[3]::wasm_to_array_trampoline`, `wasmtime_builtin_memory_grow`,
/// `module_start[0]::Wasm`) as a name and kind; any other symbol is a function's own.
fn from_symbol(symbol: &str) -> FunctionName {
    let function = |display: String| FunctionName {
        display,
        kind: FunctionKind::Function,
    };
    if let Some(rest) = symbol.strip_prefix("wasm[0]::function[") {
        // A name given to several functions has the index at its end (see `crate::wasm`).
        if let Some((head, index)) = rest.rsplit_once(" [wasm function ") {
            if let Some((_, name)) = head.split_once("]::") {
                return function(format!("{} [wasm function {index}", demangle(name)));
            }
        }
        return match rest.split_once("]::") {
            // wasmtime cuts names at 96 characters: a cut one keeps the function's index,
            // which tells apart names that were equal up to the cut.
            Some((index, name)) if name.chars().count() == WASMTIME_NAME_CUT => {
                function(format!("{} [wasm function {index}]", demangle(name)))
            }
            Some((_, name)) => function(demangle(name)),
            None => function(format!("wasm-function[{}", rest)),
        };
    }
    let kind = if symbol.contains("trampoline") {
        FunctionKind::Trampoline
    } else if symbol.starts_with("wasmtime_builtin_") {
        FunctionKind::Builtin
    } else if symbol.starts_with("module_start[") {
        FunctionKind::Startup
    } else {
        return function(demangle(symbol));
    };
    FunctionName {
        display: symbol.to_string(),
        kind,
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
            let cut = &rest[start..];
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
