//! `mergelift report`: where a module's code bytes go. Families of functions whose code ends
//! up in one body (a survivor and every function merged into it, by any pass) with the bytes
//! merging saves on each, the largest functions, and totals per kind of code; and the
//! difference between two builds of one program.
//!
//! The figures come from one `size` measurement ([`crate::size::measure`]): each function
//! compiled plain and through the pipeline. A family saves its members' plain bytes less the
//! bytes of the body they share. What no family accounts for (thunks, the set-up of extra
//! arguments in callers, functions that lower to other code than their input) is
//! `other_saved_bytes`; with the families' savings it adds up to what `size` reports.

use crate::names::{without_hash, FunctionKind, FunctionNames};
use crate::size::{FunctionSize, SizeReport};
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;

/// One function of the input.
#[derive(Clone, Debug)]
pub struct FunctionEntry {
    /// Its name for users (demangled).
    pub name: String,
    pub kind: FunctionKind,
    /// Code bytes compiled plain.
    pub bytes: usize,
    /// Code bytes of its own after merging (0 when it has none, a thunk's when it is one).
    pub bytes_after: usize,
}

/// A member of a family.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
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
    /// The survivor first (when it is a function of the input; a body `merge-similar` or
    /// `merge-aligned` made is not), then the others, largest first.
    pub members: Vec<Member>,
}

/// Totals of one kind of code.
#[derive(Clone, Debug)]
pub struct KindTotal {
    pub kind: FunctionKind,
    pub functions: usize,
    pub bytes: usize,
    pub bytes_after: usize,
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
    /// Per kind of code; the bodies merging made count as functions.
    pub kinds: Vec<KindTotal>,
    /// How many functions and families the module has (`functions` and `families` may show
    /// fewer: `retain_kind`).
    pub function_count: usize,
    pub family_count: usize,
    /// The kind `retain_kind` kept.
    pub shown: Option<FunctionKind>,
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
        let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
        for (k, f) in size.functions.iter().enumerate() {
            if f.merged.is_some() {
                groups.entry(root(k)).or_default().push(k);
            }
        }
        let entry = |k: usize| {
            let f = &size.functions[k];
            let n = names.get(&f.name);
            FunctionEntry {
                name: n.display,
                kind: n.kind,
                bytes: f.bytes_before,
                bytes_after: f.bytes_after,
            }
        };
        let mut families = Vec::new();
        for (root, merged) in groups {
            let mut members: Vec<Member> = merged
                .iter()
                .map(|&k| {
                    let name = names.get(&size.functions[k].name);
                    Member {
                        name: name.display,
                        bytes: size.functions[k].bytes_before,
                        how: size.functions[k].merged.as_ref().expect("merged").by.name(),
                        kind: name.kind,
                    }
                })
                .collect();
            members.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
            if root < n {
                let f = &size.functions[root];
                let name = names.get(&f.name);
                members.insert(
                    0,
                    Member {
                        name: name.display,
                        bytes: f.bytes_before,
                        how: "survivor",
                        kind: name.kind,
                    },
                );
            }
            let body = all[root].bytes_after;
            let plain: usize = members.iter().map(|m| m.bytes).sum();
            families.push(Family {
                saved_bytes: plain as i64 - body as i64,
                members,
            });
        }
        families.sort_by(|a, b| {
            (b.saved_bytes.cmp(&a.saved_bytes))
                .then_with(|| a.members[0].name.cmp(&b.members[0].name))
        });
        let mut functions: Vec<FunctionEntry> = (0..size.functions.len()).map(entry).collect();
        let mut kinds: HashMap<FunctionKind, KindTotal> = HashMap::new();
        fn total(
            kinds: &mut HashMap<FunctionKind, KindTotal>,
            kind: FunctionKind,
        ) -> &mut KindTotal {
            kinds.entry(kind).or_insert(KindTotal {
                kind,
                functions: 0,
                bytes: 0,
                bytes_after: 0,
            })
        }
        for f in &functions {
            let t = total(&mut kinds, f.kind);
            t.functions += 1;
            t.bytes += f.bytes;
            t.bytes_after += f.bytes_after;
        }
        // The bodies the passes made are the program's code.
        if !size.made.is_empty() {
            total(&mut kinds, FunctionKind::Function).bytes_after +=
                size.made.iter().map(|f| f.bytes_after).sum::<usize>();
        }
        let mut kinds: Vec<KindTotal> = kinds.into_values().collect();
        kinds.sort_by_key(|t| t.kind);
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
    /// "families": [{"saved_bytes", "members": [{"name", "bytes", "how"}]}], "largest",
    /// "kinds"}`; `functions` is their number, `largest` the `top` largest of them, and
    /// `families` the `top` first (all when `top` is `None`); members also say their `kind`.
    /// The families' savings add up with `other_saved_bytes` to `saved_bytes` when all are
    /// listed: `family_count` says how many the module has, and `shown_kind` the kind
    /// `retain_kind` kept (`null`: every kind).
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
                "members": f.members.iter().map(|m| json!({
                    "name": m.name, "bytes": m.bytes, "how": m.how, "kind": m.kind.name(),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "largest": self.functions.iter().take(top.unwrap_or(10)).map(|f| json!({
                "name": f.name, "kind": f.kind.name(), "bytes": f.bytes,
                "bytes_after": f.bytes_after,
            })).collect::<Vec<_>>(),
            "kinds": self.kinds.iter().map(|t| json!({
                "kind": t.kind.name(), "functions": t.functions, "bytes": t.bytes,
                "bytes_after": t.bytes_after,
            })).collect::<Vec<_>>(),
        })
    }

    /// One CSV row per member of a family: `family,family_saved_bytes,how,kind,bytes,name`.
    pub fn to_csv(&self, top: Option<usize>) -> String {
        let mut out = String::from("family,family_saved_bytes,how,kind,bytes,name\n");
        for (k, f) in self
            .families
            .iter()
            .take(top.unwrap_or(usize::MAX))
            .enumerate()
        {
            for m in &f.members {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{}",
                    k + 1,
                    f.saved_bytes,
                    m.how,
                    m.kind.name(),
                    m.bytes,
                    csv_field(&m.name)
                );
            }
        }
        out
    }

    /// The report as aligned text for a terminal: names cut in the middle to `width`
    /// characters.
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
        let _ = writeln!(out, "\nfamilies, largest saving first:");
        if self.families.is_empty() {
            let _ = writeln!(out, "  (none: no function was merged)");
        }
        for (k, f) in self.families.iter().take(top).enumerate() {
            // The kind of code, when all members are of one kind other than the program's.
            let kind = match f.members[0].kind {
                FunctionKind::Function => "",
                k if f.members.iter().all(|m| m.kind == k) => k.name(),
                _ => "",
            };
            let _ = writeln!(
                out,
                "{:>4}. saves {:>8} bytes, {} functions{}",
                k + 1,
                f.saved_bytes,
                f.members.len(),
                if kind.is_empty() {
                    String::new()
                } else {
                    format!(" ({kind}s)")
                }
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
        let _ = writeln!(out, "\nlargest functions:");
        for f in self.functions.iter().take(top) {
            let _ = writeln!(
                out,
                "  {:>8}  {:<10}  {}",
                f.bytes,
                f.kind.name(),
                cut_middle(&f.name, width)
            );
        }
        let _ = writeln!(
            out,
            "\nby kind:            functions  bytes plain  after merging"
        );
        for t in &self.kinds {
            let _ = writeln!(
                out,
                "  {:<16} {:>10} {:>12} {:>14}",
                t.kind.name(),
                t.functions,
                t.bytes,
                t.bytes_after
            );
        }
        out
    }

    /// A bar chart of the `top` families by saving, as SVG.
    pub fn to_svg(&self, top: usize) -> String {
        let fams: Vec<&Family> = self.families.iter().take(top).collect();
        let (row, label_w, bar_w) = (22, 420, 360);
        let height = 40 + row * fams.len().max(1);
        let max = fams.first().map_or(1, |f| f.saved_bytes.max(1));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
             font-family=\"monospace\" font-size=\"12\">",
            label_w + bar_w + 100
        );
        let _ = writeln!(
            out,
            "<text x=\"4\" y=\"18\" font-weight=\"bold\">Families by bytes saved (before \
             thunks and call set-up; {} bytes saved in all)</text>",
            self.saved_bytes
        );
        for (k, f) in fams.iter().enumerate() {
            let y = 30 + row * k;
            let w = (f.saved_bytes.max(0) as f64 / max as f64 * bar_w as f64).round() as i64;
            let label = format!(
                "{} (+{})",
                cut_middle(&f.members[0].name, 48),
                f.members.len() - 1
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                label_w - 6,
                y + 14,
                xml_escape(&label)
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
    /// The demangled name without a legacy Rust hash; for a family, its first member's.
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
    /// Match `old` and `new` by demangled name without Rust's legacy hash suffix. Functions
    /// that share such a name (instances of one generic function in a legacy-mangled build)
    /// are counted together.
    pub fn new(old: &Report, new: &Report) -> Diff {
        fn index<'a, T>(
            items: &'a [T],
            key: impl Fn(&'a T) -> (&'a str, i64),
        ) -> HashMap<&'a str, (usize, i64)> {
            let mut m: HashMap<&str, (usize, i64)> = HashMap::new();
            for it in items {
                let (name, v) = key(it);
                let e = m.entry(without_hash(name)).or_default();
                e.0 += 1;
                e.1 += v;
            }
            m
        }
        fn changes(a: HashMap<&str, (usize, i64)>, b: HashMap<&str, (usize, i64)>) -> Vec<Change> {
            let mut names: Vec<&str> = a.keys().chain(b.keys()).copied().collect();
            names.sort_unstable();
            names.dedup();
            let mut out: Vec<Change> = names
                .into_iter()
                .map(|n| Change {
                    name: n.to_string(),
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
        fn fns(r: &Report) -> HashMap<&str, (usize, i64)> {
            index(&r.functions, |f: &FunctionEntry| (&f.name, f.bytes as i64))
        }
        fn fams(r: &Report) -> HashMap<&str, (usize, i64)> {
            index(&r.families, |f: &Family| {
                (f.members[0].name.as_str(), f.saved_bytes)
            })
        }
        // A family of the new build that keeps a member of an old family is that family, under
        // its old name, whichever member now comes first: a renamed or added member is a
        // change of its saving, not a family gone and another come.
        let old_family_of: HashMap<&str, &str> = (old.families.iter())
            .flat_map(|f| {
                let key = without_hash(&f.members[0].name);
                f.members.iter().map(move |m| (without_hash(&m.name), key))
            })
            .collect();
        let new_fams = index(&new.families, |f: &Family| {
            let key = (f.members.iter())
                .find_map(|m| old_family_of.get(without_hash(&m.name)).copied())
                .unwrap_or(&f.members[0].name);
            (key, f.saved_bytes)
        });
        Diff {
            old_total: old.total_bytes,
            new_total: new.total_bytes,
            old_saved: old.saved_bytes,
            new_saved: new.saved_bytes,
            functions: changes(fns(old), fns(new)),
            families: changes(fams(old), new_fams),
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
            ("functions (bytes compiled plain)", &self.functions),
            ("families (bytes saved)", &self.families),
        ] {
            let _ = writeln!(out, "\n{title}, largest change first:");
            if cs.is_empty() {
                let _ = writeln!(out, "  (no change)");
            }
            for c in cs.iter().take(top) {
                let count = if c.old.0 > 1 || c.new.0 > 1 {
                    format!(" [{} -> {}]", c.old.0, c.new.0)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "  {:<8} {:>8} -> {:>8} ({:+})  {}{count}",
                    change_word(c),
                    c.old.1,
                    c.new.1,
                    c.new.1 - c.old.1,
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
        assert!(r.to_svg(10).contains("<rect"));
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
}
