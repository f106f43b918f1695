//! `mergelift report`: where a module's code bytes go. Families of functions whose code ends
//! up in one body (a survivor and every function merged into it, by any pass) with the bytes
//! merging saves on each, the largest functions, and totals per kind of code; and the
//! difference between two builds of one program.
//!
//! The figures come from one `size` measurement ([`crate::size::measure`]): each function
//! compiled plain and through the pipeline. A family saves its members' plain bytes less the
//! bytes of the body they share. What no family accounts for (thunks, the set-up of extra
//! arguments in callers, functions that lower to other code than their input) is
//! `other_saved_bytes`; with the families' savings it adds up to what `size` reports. The
//! totals per kind add up to the module's too: a body a pass made counts under the kind of
//! the functions that share it (under `mixed` when they are of several kinds).
//!
//! Every function is named once: a name two functions share (a name section can give one
//! name to several functions) carries what tells them apart, the wasm function's index or
//! else its symbol.

use crate::names::{without_hash, FunctionKind, FunctionName, FunctionNames};
use crate::size::{FunctionSize, SizeReport};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

/// One function of the input.
#[derive(Clone, Debug)]
pub struct FunctionEntry {
    /// Its name for users: demangled, and unique in the module (a name it shares with
    /// another function carries ` [wasm function N]`, or else its symbol: ` [u0:12]`).
    pub name: String,
    /// Its symbol: its name in the Cranelift IR (`u0:12`; `fib` for `%fib`), as the object
    /// file of `size --emit-object` names it.
    pub symbol: String,
    /// Its name without what tells it apart from others, and its wasm function index (of
    /// the function it is, or a trampoline enters): what [`Diff`] matches by.
    pub base: String,
    pub wasm_index: Option<u32>,
    pub kind: FunctionKind,
    /// Code bytes compiled plain.
    pub bytes: usize,
    /// Code bytes of its own after merging (0 when it has none, a thunk's when it is one).
    pub bytes_after: usize,
}

/// A member of a family.
#[derive(Clone, Debug)]
pub struct Member {
    /// As [`FunctionEntry::name`]: unique in the module.
    pub name: String,
    pub symbol: String,
    /// Code bytes compiled plain.
    pub bytes: usize,
    /// `survivor` (its code is the family's body), or how it joined: `exact`, `similar` or
    /// `aligned`.
    pub how: &'static str,
    pub kind: FunctionKind,
}

/// Functions whose code ends up in one body.
#[derive(Clone, Debug)]
pub struct Family {
    /// The members' plain bytes less the body's.
    pub saved_bytes: i64,
    /// Code bytes of the body the members share: the survivor's code, or the body a pass
    /// made.
    pub body_bytes: usize,
    /// The symbol of that body.
    pub body_symbol: String,
    /// The survivor first (when it is a function of the input; a body `merge-similar` or
    /// `merge-aligned` made is not), then the others, largest first.
    pub members: Vec<Member>,
}

impl Family {
    /// The kinds of its members, each once, in order.
    pub fn kinds(&self) -> Vec<FunctionKind> {
        let kinds: BTreeSet<FunctionKind> = self.members.iter().map(|m| m.kind).collect();
        kinds.into_iter().collect()
    }

    /// The members' code bytes compiled plain.
    pub fn plain_bytes(&self) -> usize {
        self.members.iter().map(|m| m.bytes).sum()
    }
}

/// Totals of one kind of code.
#[derive(Clone, Debug)]
pub struct KindTotal {
    /// `None`: the bodies a pass made for families whose members are of several kinds.
    pub kind: Option<FunctionKind>,
    /// Functions of the input of this kind.
    pub functions: usize,
    /// Their code bytes compiled plain.
    pub bytes: usize,
    /// Their code bytes after merging, with the bodies the passes made for families of
    /// this kind only.
    pub bytes_after: usize,
}

impl KindTotal {
    /// The kind's name, or `mixed`.
    pub fn label(&self) -> &'static str {
        self.kind.map_or("mixed", FunctionKind::name)
    }
}

/// What one symbol of the compiled module is.
#[derive(Clone, Debug)]
struct SymbolEntry {
    /// The report's name of the function, or of the family a body serves.
    name: String,
    /// `own code`, `thunk to SYMBOL`, `alias of SYMBOL` or `shared body`.
    code: String,
}

/// What `mergelift report` shows of one module.
#[derive(Clone, Debug)]
pub struct Report {
    /// Code bytes compiled plain.
    pub total_bytes: usize,
    /// Code bytes before less after merging: what `size` reports.
    pub saved_bytes: i64,
    /// What no family accounts for (may be negative).
    pub other_saved_bytes: i64,
    /// Every function of the input, largest first.
    pub functions: Vec<FunctionEntry>,
    /// Largest saving first.
    pub families: Vec<Family>,
    /// Per kind of code (`mixed` last); they add up to the module's totals.
    pub kinds: Vec<KindTotal>,
    /// How many functions and families the module has (`functions` and `families` may show
    /// fewer: `retain_kind`).
    pub function_count: usize,
    pub family_count: usize,
    /// The kind `retain_kind` kept.
    pub shown: Option<FunctionKind>,
    /// Every symbol the compiled module defines (input functions and the bodies the passes
    /// made), for [`Report::symbol_map`].
    symbols: HashMap<String, SymbolEntry>,
    /// How many functions of the module have each name without its legacy Rust hash and
    /// without what tells it apart ([`Diff`] matches such a name where it is unique).
    base_count: HashMap<String, usize>,
}

/// Names that tell every function apart: a name two functions share gets the wasm
/// function's index (` [wasm function N]`), and where that is not enough (or there is none)
/// the function's symbol (` [u0:12]`), unique in a module.
fn unique_names(names: &[FunctionName], symbols: &[&str]) -> Vec<String> {
    fn counts(names: &[String]) -> HashMap<&str, usize> {
        let mut c: HashMap<&str, usize> = HashMap::new();
        for n in names {
            *c.entry(n.as_str()).or_default() += 1;
        }
        c
    }
    let mut out: Vec<String> = names.iter().map(|n| n.display.clone()).collect();
    let shared: Vec<bool> = {
        let c = counts(&out);
        out.iter().map(|n| c[n.as_str()] > 1).collect()
    };
    for (k, n) in names.iter().enumerate() {
        if let (true, Some(i)) = (shared[k], n.wasm_index) {
            out[k] = format!("{} [wasm function {i}]", n.display);
        }
    }
    let shared: Vec<bool> = {
        let c = counts(&out);
        out.iter().map(|n| c[n.as_str()] > 1).collect()
    };
    for (k, sym) in symbols.iter().enumerate() {
        if shared[k] {
            out[k] = format!("{} [{sym}]", out[k]);
        }
    }
    out
}

/// The key [`Diff`] counts a name under: without a legacy Rust hash.
fn base_key(base: &str) -> &str {
    without_hash(base)
}

impl Report {
    /// The report of one measurement, with the names of `names`.
    pub fn new(size: &SizeReport, names: &FunctionNames) -> Report {
        // Input functions are 0..n, the functions the passes made n.. (not members).
        let n = size.functions.len();
        let all: Vec<&FunctionSize> = size.functions.iter().chain(&size.made).collect();
        let by_name: HashMap<&str, usize> = (all.iter().enumerate())
            .map(|(k, f)| (f.name.as_str(), k))
            .collect();
        // Each function's final survivor: merges chain (into a function merged in turn, or
        // a body a pass made and a later pass merged).
        let root = |mut k: usize| {
            for _ in 0..=all.len() {
                match all[k]
                    .merged
                    .as_ref()
                    .and_then(|m| by_name.get(m.survivor.as_str()))
                {
                    Some(&s) => k = s,
                    None => break,
                }
            }
            k
        };
        let given: Vec<FunctionName> = size.functions.iter().map(|f| names.get(&f.name)).collect();
        let symbols: Vec<&str> = size.functions.iter().map(|f| f.name.as_str()).collect();
        let unique = unique_names(&given, &symbols);
        let member = |k: usize, how: &'static str| Member {
            name: unique[k].clone(),
            symbol: size.functions[k].name.clone(),
            bytes: size.functions[k].bytes_before,
            how,
            kind: given[k].kind,
        };
        // The merged functions of each final survivor.
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (k, f) in size.functions.iter().enumerate() {
            if f.merged.is_some() {
                groups.entry(root(k)).or_default().push(k);
            }
        }
        let mut families = Vec::new();
        for (&root, merged) in &groups {
            let mut members: Vec<Member> = merged
                .iter()
                .map(|&k| {
                    let how = size.functions[k].merged.as_ref().expect("merged").by.name();
                    member(k, how)
                })
                .collect();
            members.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
            if root < n {
                members.insert(0, member(root, "survivor"));
            }
            let body = all[root].bytes_after;
            let plain: usize = members.iter().map(|m| m.bytes).sum();
            families.push(Family {
                saved_bytes: plain as i64 - body as i64,
                body_bytes: body,
                body_symbol: all[root].name.clone(),
                members,
            });
        }
        families.sort_by(|a, b| {
            (b.saved_bytes.cmp(&a.saved_bytes))
                .then_with(|| a.members[0].name.cmp(&b.members[0].name))
        });
        // The kind a function's code counts under: an input function's own; a body a pass
        // made, its family's (`None`: mixed).
        let family_kind: HashMap<usize, Option<FunctionKind>> = (groups.iter())
            .map(|(&root, merged)| {
                let mut kinds: BTreeSet<FunctionKind> =
                    merged.iter().map(|&k| given[k].kind).collect();
                if root < n {
                    kinds.insert(given[root].kind);
                }
                let kind = match kinds.len() {
                    1 => kinds.first().copied(),
                    _ => None,
                };
                (root, kind)
            })
            .collect();
        // (keyed so that `mixed` comes last)
        let mut kinds: BTreeMap<(bool, Option<FunctionKind>), KindTotal> = BTreeMap::new();
        let mut add = |kind: Option<FunctionKind>, functions: usize, bytes: usize, after: usize| {
            let t = kinds.entry((kind.is_none(), kind)).or_insert(KindTotal {
                kind,
                functions: 0,
                bytes: 0,
                bytes_after: 0,
            });
            t.functions += functions;
            t.bytes += bytes;
            t.bytes_after += after;
        };
        for (k, f) in size.functions.iter().enumerate() {
            add(Some(given[k].kind), 1, f.bytes_before, f.bytes_after);
        }
        for (j, f) in size.made.iter().enumerate() {
            let kind = family_kind
                .get(&root(n + j))
                .copied()
                .unwrap_or(Some(FunctionKind::Function));
            add(kind, 0, 0, f.bytes_after);
        }
        let kinds: Vec<KindTotal> = kinds.into_values().collect();
        // What each symbol is.
        let mut symbol_entries = HashMap::new();
        let family_of_root: HashMap<&str, &Family> = (families.iter())
            .map(|f| (f.body_symbol.as_str(), f))
            .collect();
        for k in 0..all.len() {
            let f = all[k];
            let r = all[root(k)];
            let code = match &f.merged {
                None if k < n => "own code".to_string(),
                None => "shared body".to_string(),
                Some(_) if f.bytes_after > 0 => format!("thunk to {}", r.name),
                Some(_) => format!("alias of {}", r.name),
            };
            let name = if k < n {
                unique[k].clone()
            } else {
                match family_of_root.get(r.name.as_str()) {
                    Some(fam) => format!(
                        "shared body of {} and {} more",
                        fam.members[0].name,
                        fam.members.len() - 1
                    ),
                    None => "shared body".to_string(),
                }
            };
            symbol_entries.insert(f.name.clone(), SymbolEntry { name, code });
        }
        let mut base_count: HashMap<String, usize> = HashMap::new();
        for g in &given {
            *base_count
                .entry(base_key(&g.display).to_string())
                .or_default() += 1;
        }
        let mut functions: Vec<FunctionEntry> = (0..n)
            .map(|k| {
                let f = &size.functions[k];
                FunctionEntry {
                    name: unique[k].clone(),
                    symbol: f.name.clone(),
                    base: given[k].display.clone(),
                    wasm_index: given[k].wasm_index,
                    kind: given[k].kind,
                    bytes: f.bytes_before,
                    bytes_after: f.bytes_after,
                }
            })
            .collect();
        functions.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
        let saved_bytes = size.code_bytes_before as i64 - size.code_bytes_after as i64;
        let in_families: i64 = families.iter().map(|f| f.saved_bytes).sum();
        Report {
            total_bytes: size.code_bytes_before,
            saved_bytes,
            other_saved_bytes: saved_bytes - in_families,
            function_count: functions.len(),
            family_count: families.len(),
            functions,
            families,
            kinds,
            shown: None,
            symbols: symbol_entries,
            base_count,
        }
    }

    /// Keep only the families with a member of `kind`, and the functions of `kind` (the
    /// totals stay the module's).
    pub fn retain_kind(&mut self, kind: FunctionKind) {
        self.families
            .retain(|f| f.members.iter().any(|m| m.kind == kind));
        self.functions.retain(|f| f.kind == kind);
        self.shown = Some(kind);
    }

    /// The JSON form: `{"total_bytes", "saved_bytes", "other_saved_bytes", "functions",
    /// "families": [{"saved_bytes", "body_bytes", "body_symbol", "kinds", "members":
    /// [{"name", "symbol", "bytes", "how", "kind"}]}], "largest", "kinds"}`; `functions` is
    /// their number, `largest` the `top` largest of them, and `families` the `top` first
    /// (all when `top` is `None`). The families' savings add up with `other_saved_bytes` to
    /// `saved_bytes` when all are listed: `family_count` says how many the module has, and
    /// `shown_kind` the kind `retain_kind` kept (`null`: every kind). The `kinds` add up to
    /// the module's bytes plain and after.
    pub fn to_json(&self, top: Option<usize>) -> serde_json::Value {
        let n = top.unwrap_or(usize::MAX);
        json!({
            "total_bytes": self.total_bytes,
            "saved_bytes": self.saved_bytes,
            "other_saved_bytes": self.other_saved_bytes,
            "functions": self.function_count,
            "family_count": self.family_count,
            "shown_kind": self.shown.map(|k| k.name()),
            "families": self.families.iter().take(n).map(|f| json!({
                "saved_bytes": f.saved_bytes,
                "body_bytes": f.body_bytes,
                "body_symbol": f.body_symbol,
                "kinds": f.kinds().iter().map(|k| k.name()).collect::<Vec<_>>(),
                "members": f.members.iter().map(|m| json!({
                    "name": m.name, "symbol": m.symbol, "bytes": m.bytes, "how": m.how,
                    "kind": m.kind.name(),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "largest": self.functions.iter().take(top.unwrap_or(10)).map(|f| json!({
                "name": f.name, "symbol": f.symbol, "kind": f.kind.name(), "bytes": f.bytes,
                "bytes_after": f.bytes_after,
            })).collect::<Vec<_>>(),
            "kinds": self.kinds.iter().map(|t| json!({
                "kind": t.label(), "functions": t.functions, "bytes": t.bytes,
                "bytes_after": t.bytes_after,
            })).collect::<Vec<_>>(),
        })
    }

    /// One CSV row per member of a family:
    /// `family,family_saved_bytes,family_body_bytes,how,kind,bytes,symbol,name`.
    pub fn to_csv(&self, top: Option<usize>) -> String {
        let mut out = String::from(
            "family,family_saved_bytes,family_body_bytes,how,kind,bytes,symbol,name\n",
        );
        for (k, f) in self
            .families
            .iter()
            .take(top.unwrap_or(usize::MAX))
            .enumerate()
        {
            for m in &f.members {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{}",
                    k + 1,
                    f.saved_bytes,
                    f.body_bytes,
                    m.how,
                    m.kind.name(),
                    m.bytes,
                    csv_field(&m.symbol),
                    csv_field(&m.name)
                );
            }
        }
        out
    }

    /// The report as aligned text for a terminal: names cut in the middle to `width`
    /// characters (0: not cut).
    pub fn to_text(&self, top: usize, width: usize) -> String {
        let mut out = String::new();
        let pct = |x: i64| {
            if self.total_bytes == 0 {
                0.0
            } else {
                100.0 * x as f64 / self.total_bytes as f64
            }
        };
        let _ = writeln!(
            out,
            "{} functions, {} code bytes compiled plain, {} after the passes: {} saved ({:.1}%)",
            self.function_count,
            self.total_bytes,
            self.total_bytes as i64 - self.saved_bytes,
            self.saved_bytes,
            pct(self.saved_bytes),
        );
        let _ = writeln!(
            out,
            "  = {} by {} families (their members' bytes less their shared body's)\n  {:+} \
             other effects: the thunks merged functions keep, arguments set up in callers, \
             code that lowers differently, other passes",
            self.saved_bytes - self.other_saved_bytes,
            self.family_count,
            self.other_saved_bytes,
        );
        if let Some(kind) = self.shown {
            let _ = writeln!(
                out,
                "  (shown: the {} families with a {} among their members, saving {}; the \
                 largest {}s)",
                self.families.len(),
                kind.name(),
                self.families.iter().map(|f| f.saved_bytes).sum::<i64>(),
                kind.name()
            );
        }
        let _ = writeln!(
            out,
            "\nfamilies, largest saving first (bytes: code bytes compiled plain):"
        );
        if self.families.is_empty() {
            match self.shown {
                Some(kind) if self.family_count > 0 => {
                    let _ = writeln!(
                        out,
                        "  (none of the {} families has a {} among its members)",
                        self.family_count,
                        kind.name()
                    );
                }
                _ => {
                    let _ = writeln!(out, "  (none: no function was merged)");
                }
            }
        } else {
            let _ = writeln!(out, "      {:<8} {:>8}  name", "how", "bytes");
        }
        for (k, f) in self.families.iter().take(top).enumerate() {
            let kinds = f.kinds();
            let what = match kinds[..] {
                [FunctionKind::Function] => "functions".to_string(),
                [kind] => format!("{}s", kind.name()),
                _ => format!(
                    "functions of kinds {}",
                    kinds
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let _ = writeln!(
                out,
                "{:>4}. saves {} bytes: {} {what} ({} bytes) share one body of {} bytes",
                k + 1,
                f.saved_bytes,
                f.members.len(),
                f.plain_bytes(),
                f.body_bytes,
            );
            for m in f.members.iter().take(MEMBERS_SHOWN) {
                let _ = writeln!(
                    out,
                    "      {:<8} {:>8}  {}",
                    m.how,
                    m.bytes,
                    cut_middle(&m.name, width)
                );
            }
            if f.members.len() > MEMBERS_SHOWN {
                let rest = &f.members[MEMBERS_SHOWN..];
                let _ = writeln!(
                    out,
                    "      ... and {} more, {} bytes (--json or --csv lists them all)",
                    rest.len(),
                    rest.iter().map(|m| m.bytes).sum::<usize>()
                );
            }
        }
        if self.families.len() > top {
            let _ = writeln!(out, "  ... {} more (--top N)", self.families.len() - top);
        }
        let _ = writeln!(
            out,
            "\nlargest functions (code bytes compiled plain, and of their own after the passes):"
        );
        let _ = writeln!(
            out,
            "  {:>8}  {:>8}  {:<10}  name",
            "plain", "after", "kind"
        );
        for f in self.functions.iter().take(top) {
            let _ = writeln!(
                out,
                "  {:>8}  {:>8}  {:<10}  {}",
                f.bytes,
                f.bytes_after,
                f.kind.name(),
                cut_middle(&f.name, width)
            );
        }
        let _ = writeln!(
            out,
            "\nby kind (code bytes):   functions        plain        after        saved"
        );
        let row = |out: &mut String, label: &str, functions: usize, plain: usize, after: usize| {
            let _ = writeln!(
                out,
                "  {:<20} {:>10} {:>12} {:>12} {:>12}",
                label,
                functions,
                plain,
                after,
                plain as i64 - after as i64
            );
        };
        for t in &self.kinds {
            row(&mut out, t.label(), t.functions, t.bytes, t.bytes_after);
        }
        row(
            &mut out,
            "total",
            self.kinds.iter().map(|t| t.functions).sum(),
            self.kinds.iter().map(|t| t.bytes).sum(),
            self.kinds.iter().map(|t| t.bytes_after).sum(),
        );
        if self.kinds.iter().any(|t| t.kind.is_none()) {
            let _ = writeln!(
                out,
                "  (mixed: the bodies the passes made for families whose members are of \
                 several kinds)"
            );
        }
        out
    }

    /// A bar chart of the `top` families by saving, as SVG, titled with `module` (the input's
    /// name). Each bar is labelled with the family's first member (in full up to 120
    /// characters; the canvas is as wide as the labels) and how many more it has; the title
    /// gives the families' sum and, apart, the module's net saving.
    pub fn to_svg(&self, top: usize, module: &str) -> String {
        const CHAR_W: f64 = 7.3; // 12px monospace
        const LABEL_CHARS: usize = 120;
        let fams: Vec<&Family> = self.families.iter().take(top).collect();
        let labels: Vec<String> = fams
            .iter()
            .map(|f| {
                format!(
                    "{} (+{})",
                    cut_middle(&f.members[0].name, LABEL_CHARS),
                    f.members.len() - 1
                )
            })
            .collect();
        let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let (row, bar_w, head) = (22, 360, 62);
        let label_w = ((longest as f64 * CHAR_W) as usize + 12).max(200);
        let title = format!("{module}: families of merged functions by bytes saved");
        let shown: i64 = fams.iter().map(|f| f.saved_bytes).sum();
        let in_families = self.saved_bytes - self.other_saved_bytes;
        let sums = format!(
            "the {} families shown save {shown} bytes (all {} families: {in_families}), \
             before thunks and call set-up",
            fams.len(),
            self.family_count
        );
        let pct = if self.total_bytes > 0 {
            100.0 * self.saved_bytes as f64 / self.total_bytes as f64
        } else {
            0.0
        };
        let net = format!(
            "net saving of the module: {} of {} code bytes ({pct:.1}%), {:+} by other effects",
            self.saved_bytes, self.total_bytes, self.other_saved_bytes
        );
        let text_w = [&title, &sums, &net]
            .iter()
            .map(|t| (t.chars().count() as f64 * CHAR_W) as usize + 16)
            .max()
            .unwrap_or(0);
        let width = (label_w + bar_w + 100).max(text_w);
        let height = head + 10 + row * fams.len().max(1);
        let max = fams.first().map_or(1, |f| f.saved_bytes.max(1));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
             font-family=\"monospace\" font-size=\"12\">"
        );
        let _ = writeln!(
            out,
            "<rect width=\"{width}\" height=\"{height}\" fill=\"white\"/>"
        );
        let _ = writeln!(
            out,
            "<text x=\"8\" y=\"18\" font-weight=\"bold\">{}</text>",
            xml_escape(&title)
        );
        let _ = writeln!(out, "<text x=\"8\" y=\"36\">{}</text>", xml_escape(&sums));
        let _ = writeln!(out, "<text x=\"8\" y=\"54\">{}</text>", xml_escape(&net));
        if fams.is_empty() {
            let _ = writeln!(
                out,
                "<text x=\"8\" y=\"{}\">(no family: no function was merged)</text>",
                head + 16
            );
        }
        for (k, (f, label)) in fams.iter().zip(&labels).enumerate() {
            let y = head + row * k;
            let w = (f.saved_bytes.max(0) as f64 / max as f64 * bar_w as f64).round() as i64;
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                label_w - 6,
                y + 14,
                xml_escape(label)
            );
            let _ = writeln!(
                out,
                "<rect x=\"{label_w}\" y=\"{}\" width=\"{w}\" height=\"{}\" fill=\"#4a7ab5\"/>",
                y + 2,
                row - 6
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                label_w as i64 + w + 6,
                y + 14,
                f.saved_bytes
            );
        }
        out.push_str("</svg>\n");
        out
    }

    /// A map of the symbols of `object`, the object file `size --emit-object` wrote of this
    /// module (of a report every family and function of which is kept), to the report's
    /// names: one tab-separated line per function symbol the object defines, `symbol`,
    /// `name`, `bytes` (its size, as `nm -S` shows it) and `code` (`own code`, `thunk to
    /// SYMBOL`, `alias of SYMBOL`: at that symbol's code, or `shared body`), after a header
    /// line that starts with `#`.
    pub fn symbol_map(&self, object: &[u8]) -> Result<String, String> {
        use object::{Object, ObjectSymbol, SymbolKind};
        let file =
            object::File::parse(object).map_err(|e| format!("reading the object file: {e}"))?;
        let mut rows: Vec<(String, String, u64, String)> = Vec::new();
        for s in file.symbols() {
            if s.kind() != SymbolKind::Text || !s.is_definition() {
                continue;
            }
            let Ok(symbol) = s.name() else { continue };
            let (name, code) = match self.symbols.get(symbol) {
                Some(e) => (e.name.clone(), e.code.clone()),
                None => ("(not a function of the input)".into(), "own code".into()),
            };
            rows.push((symbol.to_string(), name, s.size(), code));
        }
        rows.sort();
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        let mut out = String::from("# symbol\tname\tbytes\tcode\n");
        for (symbol, name, bytes, code) in rows {
            let _ = writeln!(
                out,
                "{}\t{}\t{bytes}\t{}",
                clean(&symbol),
                clean(&name),
                clean(&code)
            );
        }
        Ok(out)
    }
}

/// How many members of a family the table lists.
const MEMBERS_SHOWN: usize = 6;

/// `name` cut to `width` characters by dropping its middle (`head...tail`).
pub fn cut_middle(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width || width < 5 {
        return name.to_string();
    }
    let keep = width - 3;
    let head = keep / 2;
    let tail = keep - head;
    let h: String = name.chars().take(head).collect();
    let t: String = name.chars().skip(n - tail).collect();
    format!("{h}...{t}")
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A change between two builds, for one name (functions) or one family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The name it is matched by ([`Diff::new`]); for a family, its first member's.
    pub name: String,
    /// Functions of that name (or families keyed by it) and their bytes, in each build.
    pub old: (usize, i64),
    pub new: (usize, i64),
}

/// What changed from one build to the next.
#[derive(Clone, Debug, Default)]
pub struct Diff {
    pub old_total: usize,
    pub new_total: usize,
    pub old_saved: i64,
    pub new_saved: i64,
    /// Functions by name that appeared, went away, grew or shrank (code bytes compiled
    /// plain), largest change first.
    pub functions: Vec<Change>,
    /// Families by their first member's name, with their savings (a new family that keeps a
    /// member of an old one goes by the old one's name).
    pub families: Vec<Change>,
}

impl Diff {
    /// Match `old` and `new` by demangled name without Rust's legacy hash suffix, and
    /// without the index that tells apart functions of one name, where that name is unique
    /// in both builds: a function whose index changed is the same function. Where several
    /// functions have the name, they are matched by name and wasm index, and functions that
    /// still share a key (instances of one generic function in a legacy-mangled build) are
    /// counted together.
    pub fn new(old: &Report, new: &Report) -> Diff {
        let key = |base: &str, index: Option<u32>| -> String {
            let b = base_key(base);
            let unique = [old, new]
                .iter()
                .all(|r| r.base_count.get(b).copied().unwrap_or(0) <= 1);
            match index {
                Some(i) if !unique => format!("{b} [wasm function {i}]"),
                _ => b.to_string(),
            }
        };
        // Each function's key, by symbol, in each build.
        let keys = |r: &Report| -> HashMap<String, String> {
            (r.functions.iter())
                .map(|f| (f.symbol.clone(), key(&f.base, f.wasm_index)))
                .collect()
        };
        let (old_keys, new_keys) = (keys(old), keys(new));
        fn index<T>(
            items: &[T],
            key: impl Fn(&T) -> (String, i64),
        ) -> HashMap<String, (usize, i64)> {
            let mut m: HashMap<String, (usize, i64)> = HashMap::new();
            for it in items {
                let (name, v) = key(it);
                let e = m.entry(name).or_default();
                e.0 += 1;
                e.1 += v;
            }
            m
        }
        fn changes(
            a: HashMap<String, (usize, i64)>,
            b: HashMap<String, (usize, i64)>,
        ) -> Vec<Change> {
            let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
            names.sort_unstable();
            names.dedup();
            let mut out: Vec<Change> = names
                .into_iter()
                .map(|n| Change {
                    name: n.clone(),
                    old: a.get(n).copied().unwrap_or_default(),
                    new: b.get(n).copied().unwrap_or_default(),
                })
                .filter(|c| c.old != c.new)
                .collect();
            out.sort_by(|x, y| {
                let d = |c: &Change| (c.new.1 - c.old.1).abs();
                d(y).cmp(&d(x)).then_with(|| x.name.cmp(&y.name))
            });
            out
        }
        // A member's key: its function's (a member of a kind `retain_kind` left out of the
        // functions keeps its name without the hash).
        let member_key = |keys: &HashMap<String, String>, m: &Member| -> String {
            keys.get(&m.symbol)
                .cloned()
                .unwrap_or_else(|| base_key(&m.name).to_string())
        };
        let fns = |r: &Report, keys: &HashMap<String, String>| {
            index(&r.functions, |f: &FunctionEntry| {
                (keys[&f.symbol].clone(), f.bytes as i64)
            })
        };
        let old_fams = index(&old.families, |f: &Family| {
            (member_key(&old_keys, &f.members[0]), f.saved_bytes)
        });
        // A family of the new build that keeps a member of an old family is that family, under
        // its old name, whichever member now comes first: a renamed or added member is a
        // change of its saving, not a family gone and another come.
        let old_family_of: HashMap<String, String> = (old.families.iter())
            .flat_map(|f| {
                let fam = member_key(&old_keys, &f.members[0]);
                let old_keys = &old_keys;
                f.members
                    .iter()
                    .map(move |m| (member_key(old_keys, m), fam.clone()))
            })
            .collect();
        let new_fams = index(&new.families, |f: &Family| {
            let key = (f.members.iter())
                .find_map(|m| old_family_of.get(&member_key(&new_keys, m)).cloned())
                .unwrap_or_else(|| member_key(&new_keys, &f.members[0]));
            (key, f.saved_bytes)
        });
        Diff {
            old_total: old.total_bytes,
            new_total: new.total_bytes,
            old_saved: old.saved_bytes,
            new_saved: new.saved_bytes,
            functions: changes(fns(old, &old_keys), fns(new, &new_keys)),
            families: changes(old_fams, new_fams),
        }
    }

    pub fn to_json(&self, top: Option<usize>) -> serde_json::Value {
        let n = top.unwrap_or(usize::MAX);
        let list = |cs: &[Change], what: &str| {
            cs.iter()
                .take(n)
                .map(|c| {
                    json!({
                        "name": c.name,
                        "change": change_word(c),
                        "old_count": c.old.0, "new_count": c.new.0,
                        format!("old_{what}"): c.old.1, format!("new_{what}"): c.new.1,
                    })
                })
                .collect::<Vec<_>>()
        };
        json!({
            "old_total_bytes": self.old_total,
            "new_total_bytes": self.new_total,
            "old_saved_bytes": self.old_saved,
            "new_saved_bytes": self.new_saved,
            "functions": list(&self.functions, "bytes"),
            "families": list(&self.families, "saved_bytes"),
        })
    }

    pub fn to_text(&self, top: usize, width: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "code bytes {} -> {} ({:+}); merging saves {} -> {} ({:+})",
            self.old_total,
            self.new_total,
            self.new_total as i64 - self.old_total as i64,
            self.old_saved,
            self.new_saved,
            self.new_saved - self.old_saved
        );
        for (title, cs) in [
            ("functions (code bytes compiled plain)", &self.functions),
            ("families (bytes saved)", &self.families),
        ] {
            let _ = writeln!(out, "\n{title}, largest change first:");
            if cs.is_empty() {
                let _ = writeln!(out, "  (no change)");
            } else {
                let _ = writeln!(
                    out,
                    "  {:<8} {:>8}    {:>8} {:>10}  name [how many of that name, old -> new]",
                    "change", "old", "new", "difference"
                );
            }
            for c in cs.iter().take(top) {
                let count = if c.old.0 > 1 || c.new.0 > 1 {
                    format!(" [{} -> {}]", c.old.0, c.new.0)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "  {:<8} {:>8} -> {:>8} {:>10}  {}{count}",
                    change_word(c),
                    c.old.1,
                    c.new.1,
                    format!("{:+}", c.new.1 - c.old.1),
                    cut_middle(&c.name, width)
                );
            }
            if cs.len() > top {
                let _ = writeln!(out, "  ... {} more (--top N)", cs.len() - top);
            }
        }
        out
    }
}

/// `new`, `gone`, `grew` or `shrank`.
fn change_word(c: &Change) -> &'static str {
    match (c.old.0, c.new.0) {
        (0, _) => "new",
        (_, 0) => "gone",
        _ if c.new.1 >= c.old.1 => "grew",
        _ => "shrank",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size::MergedInto;
    use midend::state::{MergeKind, MergedBy};

    fn f(name: &str, before: usize, after: usize, into: Option<(&str, MergedBy)>) -> FunctionSize {
        FunctionSize {
            name: name.into(),
            bytes_before: before,
            bytes_after: after,
            merged: into.map(|(s, by)| MergedInto {
                survivor: s.into(),
                by,
                kind: MergeKind::Thunked,
            }),
        }
    }

    #[test]
    fn families_follow_chains_and_add_up_with_the_rest() {
        let size = SizeReport {
            functions: vec![
                f("a", 100, 100, None),
                f("b", 100, 0, Some(("a", MergedBy::Exact))),
                f("c", 100, 10, Some(("b", MergedBy::Exact))),
                f("d", 80, 12, Some(("shared", MergedBy::Similar))),
                f("e", 90, 12, Some(("shared", MergedBy::Similar))),
                f("lone", 50, 48, None),
            ],
            made: vec![f("shared", 0, 95, None)],
            code_bytes_before: 520,
            code_bytes_after: 100 + 10 + 12 + 12 + 48 + 95,
            ..Default::default()
        };
        let r = Report::new(&size, &FunctionNames::default());
        assert_eq!(r.families.len(), 2);
        let first = &r.families[0];
        assert_eq!(first.saved_bytes, 300 - 100);
        assert_eq!(first.members[0].how, "survivor");
        assert_eq!(first.members[0].name, "a");
        assert_eq!(first.members.len(), 3);
        let second = &r.families[1];
        assert_eq!(second.saved_bytes, 170 - 95);
        assert!(second.members.iter().all(|m| m.how == "similar"));
        let families: i64 = r.families.iter().map(|f| f.saved_bytes).sum();
        assert_eq!(families + r.other_saved_bytes, r.saved_bytes);
        assert_eq!(r.saved_bytes, 520 - 277);
        assert_eq!(r.functions[0].bytes, 100);
        let csv = r.to_csv(None);
        assert_eq!(csv.lines().count(), 1 + 5);
        assert!(r.to_svg(10, "m.clif").contains("<rect"));
    }

    /// A family whose first member was renamed in the new build is the same family, its
    /// saving changed if at all: not one gone and one come. A family of other functions is.
    #[test]
    fn the_diff_follows_a_family_through_a_renamed_member() {
        let report = |[a, b, c]: [&str; 3]| {
            let size = SizeReport {
                functions: vec![
                    f(a, 100, 100, None),
                    f(b, 100, 0, Some((a, MergedBy::Exact))),
                    f(c, 100, 0, Some((a, MergedBy::Exact))),
                ],
                code_bytes_before: 300,
                code_bytes_after: 100,
                ..Default::default()
            };
            Report::new(&size, &FunctionNames::default())
        };
        let old = report(["a", "b", "c"]);
        let d = Diff::new(&old, &report(["a_renamed", "b", "c"]));
        assert!(d.families.is_empty(), "{:?}", d.families);
        let d = Diff::new(&old, &report(["x", "y", "z"]));
        let names: Vec<&str> = d.families.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "x"], "{:?}", d.families);
        assert_eq!(d.families[0].new, (0, 0)); // gone
        assert_eq!(d.families[1].old, (0, 0)); // new
    }

    #[test]
    fn long_names_are_cut_in_the_middle() {
        assert_eq!(cut_middle("abcdefghijklmnopqrstuvwxyz", 11), "abcd...wxyz");
        assert_eq!(cut_middle("short", 11), "short");
    }

    #[test]
    fn the_diff_matches_names_without_their_hash() {
        let mk = |fs: Vec<FunctionSize>| {
            let before = fs.iter().map(|f| f.bytes_before).sum();
            let size = SizeReport {
                code_bytes_before: before,
                code_bytes_after: before,
                functions: fs,
                ..Default::default()
            };
            let mut names = FunctionNames::default();
            for (ir, sym) in [
                ("k", "_ZN4core3fmt5write17h0000000000000001E"),
                ("k2", "_ZN4core3fmt5write17h0000000000000002E"),
            ] {
                names.insert(ir, sym);
            }
            Report::new(&size, &names)
        };
        let old = mk(vec![f("k", 40, 40, None), f("gone", 10, 10, None)]);
        let new = mk(vec![f("k2", 60, 60, None), f("fresh", 5, 5, None)]);
        let d = Diff::new(&old, &new);
        let by: HashMap<&str, &Change> = d.functions.iter().map(|c| (c.name.as_str(), c)).collect();
        assert_eq!(by["core::fmt::write"].old, (1, 40));
        assert_eq!(by["core::fmt::write"].new, (1, 60));
        assert_eq!(change_word(by["gone"]), "gone");
        assert_eq!(change_word(by["fresh"]), "new");
        assert_eq!(d.functions[0].name, "core::fmt::write");
    }

    /// Names for functions `ir` from wasmtime symbols.
    fn named(pairs: &[(&str, &str)]) -> FunctionNames {
        let mut names = FunctionNames::default();
        for (ir, sym) in pairs {
            names.insert(ir, sym);
        }
        names
    }

    /// A body merge-similar made for trampolines counts as trampoline code, one made for
    /// members of several kinds as `mixed`; the kinds add up to the module's totals.
    #[test]
    fn a_shared_body_counts_under_its_members_kind() {
        let size = SizeReport {
            functions: vec![
                f("u0:0", 300, 300, None),
                f("u1:0", 100, 10, Some(("body_t", MergedBy::Similar))),
                f("u1:1", 100, 10, Some(("body_t", MergedBy::Similar))),
                f("u1:2", 90, 10, Some(("body_m", MergedBy::Similar))),
                f("u2:0", 90, 10, Some(("body_m", MergedBy::Similar))),
            ],
            made: vec![f("body_t", 0, 105, None), f("body_m", 0, 95, None)],
            code_bytes_before: 680,
            code_bytes_after: 300 + 40 + 105 + 95,
            ..Default::default()
        };
        let names = named(&[
            ("u0:0", "wasm[0]::function[0]::main"),
            ("u1:0", "wasm[0]::array_to_wasm_trampoline[0]"),
            ("u1:1", "signatures[1]::wasm_to_array_trampoline"),
            ("u1:2", "signatures[2]::wasm_to_array_trampoline"),
            ("u2:0", "module_start[0]::Array"),
        ]);
        let r = Report::new(&size, &names);
        let kind = |label: &str| r.kinds.iter().find(|t| t.label() == label).unwrap();
        let function = kind("function");
        assert_eq!((function.bytes, function.bytes_after), (300, 300));
        let trampoline = kind("trampoline");
        assert_eq!((trampoline.functions, trampoline.bytes), (3, 290));
        assert_eq!(trampoline.bytes_after, 30 + 105);
        let mixed = kind("mixed");
        assert_eq!(
            (mixed.functions, mixed.bytes, mixed.bytes_after),
            (0, 0, 95)
        );
        assert_eq!(r.kinds.last().unwrap().label(), "mixed");
        let plain: usize = r.kinds.iter().map(|t| t.bytes).sum();
        let after: usize = r.kinds.iter().map(|t| t.bytes_after).sum();
        assert_eq!(plain, size.code_bytes_before);
        assert_eq!(after, size.code_bytes_after);
        // Every family says its body's bytes; the mixed one names its kinds.
        let by_body: HashMap<&str, &Family> = (r.families.iter())
            .map(|f| (f.body_symbol.as_str(), f))
            .collect();
        assert_eq!(by_body["body_t"].body_bytes, 105);
        assert_eq!(
            by_body["body_m"].kinds(),
            [FunctionKind::Trampoline, FunctionKind::Startup]
        );
        let text = r.to_text(10, 100);
        assert!(
            text.contains(
                "2 functions of kinds trampoline, startup (180 bytes) share one body of 95 bytes"
            ),
            "{text}"
        );
        assert!(
            text.contains("2 trampolines (200 bytes) share one body of 105 bytes"),
            "{text}"
        );
        // --kind: a kind no family has is said so, not "no function was merged".
        let mut only = r.clone();
        only.retain_kind(FunctionKind::Builtin);
        assert!(
            (only.to_text(10, 100))
                .contains("(none of the 2 families has a builtin among its members)"),
            "{}",
            only.to_text(10, 100)
        );
    }

    /// Names two functions share carry the wasm index, and where that is not enough, the
    /// symbol; every row then names one function.
    #[test]
    fn names_are_unique() {
        let size = SizeReport {
            functions: vec![
                f("u0:1", 10, 10, None),
                f("u0:2", 10, 10, None),
                f("u0:3", 10, 10, None),
                f("u1:1", 10, 10, None),
                f("u1:2", 10, 10, None),
                f("p1", 10, 10, None),
                f("p2", 10, 10, None),
            ],
            code_bytes_before: 70,
            code_bytes_after: 70,
            ..Default::default()
        };
        let names = named(&[
            (
                "u0:1",
                "wasm[0]::function[1]::_ZN3foo5write17h0123456789abcdefE",
            ),
            (
                "u0:2",
                "wasm[0]::function[2]::_ZN3foo5write17h0123456789abcdefE",
            ),
            ("u0:3", "wasm[0]::function[3]::other"),
            ("u1:1", "wasm[0]::array_to_wasm_trampoline[1]"),
            ("u1:2", "wasm[0]::array_to_wasm_trampoline[2]"),
            // two plain functions of one name, without an index
            ("p1", "other"),
            ("p2", "other"),
        ]);
        let r = Report::new(&size, &names);
        let mut got: Vec<(&str, &str)> = (r.functions.iter())
            .map(|f| (f.symbol.as_str(), f.name.as_str()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("p1", "other [p1]"),
                ("p2", "other [p2]"),
                ("u0:1", "foo::write::h0123456789abcdef [wasm function 1]"),
                ("u0:2", "foo::write::h0123456789abcdef [wasm function 2]"),
                ("u0:3", "other [wasm function 3]"),
                (
                    "u1:1",
                    "wasm[0]::array_to_wasm_trampoline for foo::write::h0123456789abcdef [wasm function 1]"
                ),
                (
                    "u1:2",
                    "wasm[0]::array_to_wasm_trampoline for foo::write::h0123456789abcdef [wasm function 2]"
                ),
            ]
        );
    }

    /// A function that keeps its name and changes its index is matched; where a name is
    /// given to several functions, the index tells them apart.
    #[test]
    fn the_diff_matches_a_unique_name_whose_index_changed() {
        let report = |symbols: &[(&str, &str, usize)]| {
            let functions: Vec<FunctionSize> = symbols
                .iter()
                .map(|(ir, _, b)| f(ir, *b, *b, None))
                .collect();
            let total = functions.iter().map(|f| f.bytes_before).sum();
            let size = SizeReport {
                functions,
                code_bytes_before: total,
                code_bytes_after: total,
                ..Default::default()
            };
            let pairs: Vec<(&str, &str)> = symbols.iter().map(|(ir, s, _)| (*ir, *s)).collect();
            Report::new(&size, &named(&pairs))
        };
        let old = report(&[
            ("u0:51", "wasm[0]::function[51]::dummy", 40),
            ("u0:60", "wasm[0]::function[60]::dup", 10),
            ("u0:61", "wasm[0]::function[61]::dup", 20),
        ]);
        let new = report(&[
            ("u0:52", "wasm[0]::function[52]::dummy", 40),
            ("u0:60", "wasm[0]::function[60]::dup", 10),
            ("u0:61", "wasm[0]::function[61]::dup", 25),
        ]);
        let d = Diff::new(&old, &new);
        let expected = Change {
            name: "dup [wasm function 61]".into(),
            old: (1, 20),
            new: (1, 25),
        };
        assert_eq!(d.functions, [expected]);
        assert!(Diff::new(&old, &old).functions.is_empty());
    }
}
