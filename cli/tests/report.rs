//! `mergelift report` on `.clif` input: its families add up to what `size` reports, every
//! member is a function of the input, names come from wasmtime's comments, and `--diff`
//! finds what changed between two generated modules. (`.wasm` input: `tests/wasm.rs`.)

use std::path::{Path, PathBuf};

mod common;
use common::mergelift;

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-report-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn generated(name: &str, args: &[&str]) -> PathBuf {
    let (code, out, err) = mergelift(&[&["gen"], args].concat());
    assert_eq!(code, 0, "{err}");
    let p = dir().join(name);
    std::fs::write(&p, out).unwrap();
    p
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = mergelift(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).expect("one JSON object")
}

/// The report's figures against `size`'s for the same file and passes.
fn check_sums(file: &Path, passes: &str) -> serde_json::Value {
    let f = file.to_str().unwrap();
    let r = json(&[
        "report", "--json", "--top", "1000000", "--passes", passes, f,
    ]);
    let s = json(&["size", "--json", "--passes", passes, f]);
    let before = s["code_bytes_before"].as_i64().unwrap();
    let after = s["code_bytes_after"].as_i64().unwrap();
    assert_eq!(r["total_bytes"].as_i64().unwrap(), before);
    assert_eq!(r["saved_bytes"].as_i64().unwrap(), before - after);
    let families = r["families"].as_array().unwrap();
    // Every family is listed, of every kind: then the sums below hold.
    assert_eq!(r["family_count"].as_u64().unwrap(), families.len() as u64);
    assert!(r["shown_kind"].is_null());
    let in_families: i64 = families
        .iter()
        .map(|f| f["saved_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(
        in_families + r["other_saved_bytes"].as_i64().unwrap(),
        before - after
    );
    assert_eq!(
        r["functions"].as_u64().unwrap(),
        s["functions_in"].as_u64().unwrap()
    );
    // The kinds add up to the module's bytes, plain and after.
    let kinds = r["kinds"].as_array().unwrap();
    let sum = |key: &str| -> i64 { kinds.iter().map(|k| k[key].as_i64().unwrap()).sum() };
    assert_eq!(sum("bytes"), before, "{kinds:?}");
    assert_eq!(sum("bytes_after"), after, "{kinds:?}");
    assert_eq!(sum("functions"), s["functions_in"].as_i64().unwrap());
    // Every function has a name and a symbol of its own.
    let mut functions: std::collections::HashMap<&str, usize> = Default::default();
    let mut symbol_of: std::collections::HashMap<&str, &str> = Default::default();
    for f in r["largest"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        *functions.entry(name).or_default() += 1;
        assert!(
            symbol_of
                .insert(name, f["symbol"].as_str().unwrap())
                .is_none(),
            "two functions named {name}"
        );
    }
    assert_eq!(
        functions.values().sum::<usize>() as u64,
        s["functions_in"].as_u64().unwrap()
    );
    let symbols: std::collections::HashSet<&str> = symbol_of.values().copied().collect();
    assert_eq!(
        symbols.len(),
        functions.len(),
        "two functions of one symbol"
    );
    // Every member is a function of the input, in one family at most, and a family's
    // saving is its members' bytes less its body's.
    let mut merged = 0;
    for fam in families {
        let members = fam["members"].as_array().unwrap();
        assert!(!members.is_empty());
        let plain: i64 = members.iter().map(|m| m["bytes"].as_i64().unwrap()).sum();
        assert_eq!(
            plain - fam["body_bytes"].as_i64().unwrap(),
            fam["saved_bytes"].as_i64().unwrap(),
            "{fam}"
        );
        for m in members {
            let name = m["name"].as_str().unwrap();
            assert_eq!(symbol_of.get(name), Some(&m["symbol"].as_str().unwrap()));
            let left = functions.get_mut(name);
            assert!(
                left.as_ref().is_some_and(|n| **n > 0),
                "{name}: not a function of the input, or in two families"
            );
            *left.unwrap() -= 1;
            let how = m["how"].as_str().unwrap();
            assert!(
                ["survivor", "exact", "similar", "aligned"].contains(&how),
                "{how}"
            );
            merged += (how != "survivor") as u64;
        }
    }
    // `size` also counts the bodies merge-similar made that merge-aligned merged again.
    if passes.contains("aligned") {
        assert!(merged <= s["merged"].as_u64().unwrap());
    } else {
        assert_eq!(merged, s["merged"].as_u64().unwrap());
    }
    r
}

#[test]
fn families_add_up_to_what_size_saves() {
    let g = generated(
        "g.clif",
        &["--functions", "400", "--edit-ratio", "0.2", "--seed", "3"],
    );
    for passes in [
        "merge",
        "merge,merge-similar",
        "merge,merge-similar,merge-aligned",
    ] {
        let r = check_sums(&g, passes);
        assert!(!r["families"].as_array().unwrap().is_empty(), "{passes}");
    }
    // Largest saving first.
    let r = check_sums(&g, "merge,merge-similar");
    let savings: Vec<i64> = (r["families"].as_array().unwrap().iter())
        .map(|f| f["saved_bytes"].as_i64().unwrap())
        .collect();
    assert!(savings.windows(2).all(|w| w[0] >= w[1]), "{savings:?}");
    // The other forms.
    let f = g.to_str().unwrap();
    let (code, csv, err) = mergelift(&["report", "--csv", "--top", "3", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        csv.starts_with("family,family_saved_bytes,family_body_bytes,how,kind,bytes,symbol,name\n")
    );
    assert!(csv
        .lines()
        .skip(1)
        .all(|l| l.split(',').next().unwrap().parse::<usize>().unwrap() <= 3));
    let svg = dir().join("families.svg");
    let (code, text, err) = mergelift(&["report", "--top", "4", "--svg", svg.to_str().unwrap(), f]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("families, largest saving first") && text.contains("largest functions"));
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.matches("<rect x=").count() == 4,
        "{svg}"
    );
}

#[test]
fn wasmtime_comments_name_the_functions() {
    let text = "\
;; Intermediate Representation of function <wasm[0]::function[1]::_ZN5hello5world17h0123456789abcdefE>:
function u0:0(i64) -> i64 tail {
block0(v0: i64):
    v1 = iconst.i64 7
    v2 = iadd v0, v1
    return v2
}
;; Intermediate Representation of function <wasm[0]::function[2]::_ZN5hello5again17h0123456789abcdefE>:
function u0:1(i64) -> i64 tail {
block0(v0: i64):
    v1 = iconst.i64 7
    v2 = iadd v0, v1
    return v2
}
";
    let p = dir().join("named.clif");
    std::fs::write(&p, text).unwrap();
    let r = json(&["report", "--json", "--passes", "merge", p.to_str().unwrap()]);
    let members: Vec<&str> = (r["families"][0]["members"].as_array().unwrap().iter())
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(members.len(), 2, "{r}");
    assert!(
        members.contains(&"hello::world::h0123456789abcdef"),
        "{members:?}"
    );
    assert!(
        members.contains(&"hello::again::h0123456789abcdef"),
        "{members:?}"
    );
}

#[test]
fn the_diff_names_what_appeared_grew_and_went_away() {
    let old = generated("old.clif", &["--functions", "300", "--seed", "1"]);
    let new = generated("new.clif", &["--functions", "360", "--seed", "1"]);
    let d = json(&[
        "report",
        "--json",
        "--diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    let fns = d["functions"].as_array().unwrap();
    assert!(!fns.is_empty());
    assert!(d["new_total_bytes"].as_i64() > d["old_total_bytes"].as_i64());
    // What appeared and went away is the difference of the two files' function names.
    let names = |p: &Path| -> std::collections::BTreeSet<String> {
        (std::fs::read_to_string(p).unwrap().lines())
            .filter_map(|l| l.strip_prefix("function %"))
            .map(|l| l.split('(').next().unwrap().to_string())
            .collect()
    };
    let (a, b) = (names(&old), names(&new));
    let with = |word: &str| -> std::collections::BTreeSet<String> {
        (fns.iter())
            .filter(|c| c["change"] == word)
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(with("new"), b.difference(&a).cloned().collect());
    assert_eq!(with("gone"), a.difference(&b).cloned().collect());
    assert!(!with("new").is_empty());
    // A module against itself: no change.
    let same = json(&[
        "report",
        "--json",
        "--diff",
        old.to_str().unwrap(),
        old.to_str().unwrap(),
    ]);
    assert!(same["functions"].as_array().unwrap().is_empty());
    assert!(same["families"].as_array().unwrap().is_empty());
}

#[test]
fn the_corpus_adds_up() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/wasm/rust-json.clif");
    if !p.is_file() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but the wasm corpus is missing at {}",
            p.display()
        );
        eprintln!("skipping: no corpus at {}", p.display());
        return;
    }
    let r = check_sums(&p, "merge,merge-similar");
    // Names come from wasmtime's comments, demangled.
    let largest = r["largest"].as_array().unwrap();
    assert!(largest.iter().any(|f| f["name"]
        .as_str()
        .unwrap()
        .starts_with("core::num::flt2dec::")));
}

#[cfg(not(feature = "wasm"))]
#[test]
fn wasm_input_without_the_feature_says_how_to_get_it() {
    let p = dir().join("m.wasm");
    std::fs::write(&p, b"\0asm\x01\0\0\0").unwrap();
    for cmd in ["size", "report", "opt"] {
        let (code, _, err) = mergelift(&[cmd, p.to_str().unwrap()]);
        assert_eq!(code, 2, "{cmd}");
        assert!(
            err.starts_with("error: ") && err.contains("--features wasm"),
            "{cmd}: {err}"
        );
    }
}

/// A wasm function in wasmtime's `--emit-clif` form: `u0:INDEX`, named by its comment
/// (`name`), computing with the constant `k`.
fn wasm_function(index: u32, name: &str, k: i32) -> String {
    let (mul, sub) = (
        ["iadd", "imul"][index as usize % 2],
        ["isub", "bxor"][index as usize % 3 / 2],
    );
    format!(
        ";; Intermediate Representation of function <wasm[0]::function[{index}]::{name}>:
function u0:{index}(i64 vmctx, i64, i32, i32) -> i32 tail {{
block0(v0: i64, v1: i64, v2: i32, v3: i32):
    v4 = iconst.i32 {k}
    v5 = {mul} v2, v4
    v6 = {sub} v5, v3
    return v6
}}
"
    )
}

/// wasmtime's trampoline from the host into wasm function `index`: the trampolines of
/// functions of one signature differ only in their callee (`merge-similar` merges them).
fn trampoline(index: u32) -> String {
    format!(
        ";; Intermediate Representation of function <wasm[0]::array_to_wasm_trampoline[{index}]>:
function u268435456:{index}(i64 vmctx, i64, i64, i64) -> i8 system_v {{
    region0 = 2013265920 \"HostValRaw+0x0\"
    region1 = 8 \"VMContext+0x8\"
    region2 = 67108936 \"VMStoreContext+0x48\"
    region3 = 67108928 \"VMStoreContext+0x40\"
    region4 = 67108944 \"VMStoreContext+0x50\"
    region5 = 67109000 \"VMStoreContext+0x88\"
    sig0 = (i64 vmctx, i64, i32, i32) -> i32 tail
    fn0 = colocated u0:{index} sig0

block0(v0: i64, v1: i64, v2: i64, v3: i64):
    jump block1

block1:
    v4 = load.i32 notrap little region0 v2
    v5 = load.i32 notrap little region0 v2+16
    v8 = get_frame_pointer.i64
    v7 = load.i64 notrap aligned readonly can_move region1 v0+8
    store notrap aligned region2 v8, v7+72
    v9 = get_stack_pointer.i64
    store notrap aligned region3 v9, v7+64
    v10 = get_exception_handler_address.i64 block1, 0
    store notrap aligned region4 v10, v7+80
    try_call fn0(v0, v1, v4, v5), sig0, block2(ret0), [ default: block3 ]

block2(v11: i32):
    store notrap little region0 v11, v2
    v12 = iconst.i8 1
    return v12

block3:
    v13 = iconst.i64 1
    store notrap aligned region5 v13, v7+136
    v14 = iconst.i8 0
    return v14
}}
"
    )
}

/// A module as wasmtime writes it: functions named `names` (in index order), all different,
/// and a trampoline into each; only the trampolines merge.
fn wasm_module(file: &str, names: &[(u32, &str)]) -> PathBuf {
    let mut text = String::new();
    for (k, (index, name)) in names.iter().enumerate() {
        text.push_str(&wasm_function(*index, name, 3 + 2 * k as i32));
    }
    for (index, _) in names {
        text.push_str(&trampoline(*index));
    }
    let p = dir().join(file);
    std::fs::write(&p, text).unwrap();
    p
}

const ALPHA: &str = "_ZN5hello5alpha17h0123456789abcdefE";
const BETA: &str = "_ZN5hello4beta17h0123456789abcdefE";
const GAMMA: &str = "_ZN5hello5gamma17h0123456789abcdefE";

/// Where only trampolines merge, their shared body counts as trampoline code: the program's
/// functions do not grow, and the rows and totals add up.
#[test]
fn a_body_only_trampolines_share_is_trampoline_code() {
    let p = wasm_module("tramp.clif", &[(0, ALPHA), (1, BETA), (2, GAMMA)]);
    let f = p.to_str().unwrap();
    let r = check_sums(&p, "merge,merge-similar");
    let families = r["families"].as_array().unwrap();
    assert_eq!(families.len(), 1, "{r}");
    assert_eq!(families[0]["kinds"], serde_json::json!(["trampoline"]));
    assert!(families[0]["body_bytes"].as_i64().unwrap() > 0);
    let kind = |k: &str| {
        (r["kinds"].as_array().unwrap().iter())
            .find(|t| t["kind"] == k)
            .unwrap_or_else(|| panic!("no kind {k}: {r}"))
            .clone()
    };
    let function = kind("function");
    assert_eq!(function["functions"], 3);
    assert_eq!(function["bytes"], function["bytes_after"], "{r}");
    let trampoline = kind("trampoline");
    assert!(trampoline["bytes_after"].as_i64() < trampoline["bytes"].as_i64());
    // The table says so, with its units, and the totals row is the module's.
    let (code, text, err) = mergelift(&["report", f]);
    assert_eq!(code, 0, "{err}");
    let body = families[0]["body_bytes"].as_i64().unwrap();
    let plain: i64 = (families[0]["members"].as_array().unwrap().iter())
        .map(|m| m["bytes"].as_i64().unwrap())
        .sum();
    assert!(
        text.contains(&format!(
            "1. saves {} bytes: 3 trampolines ({plain} bytes) share one body of {body} bytes",
            families[0]["saved_bytes"]
        )),
        "{text}"
    );
    for header in [
        "families, largest saving first (bytes: code bytes compiled plain):",
        "      how         bytes  name",
        "     plain     after  kind        name",
        "by kind (code bytes):   functions        plain        after        saved",
    ] {
        assert!(text.contains(header), "`{header}` not in:\n{text}");
    }
    let row = |label: &str| -> Vec<i64> {
        let line = (text.lines())
            .find(|l| l.split_whitespace().next() == Some(label) && l.starts_with("  "))
            .unwrap_or_else(|| panic!("no row {label}:\n{text}"));
        line.split_whitespace()
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect()
    };
    let (b, a) = (
        function["bytes"].as_i64().unwrap(),
        function["bytes_after"].as_i64().unwrap(),
    );
    assert_eq!(row("function"), [3, b, a, 0]);
    let (before, saved) = (
        r["total_bytes"].as_i64().unwrap(),
        r["saved_bytes"].as_i64().unwrap(),
    );
    assert_eq!(row("total"), [6, before, before - saved, saved]);
    // --kind function: no family, and it says why.
    let (code, text, err) = mergelift(&["report", "--kind", "function", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("(none of the 1 families has a function among its members)"),
        "{text}"
    );
    let (code, text, _) = mergelift(&["report", "--kind", "trampoline", f]);
    assert_eq!(code, 0);
    assert!(text.contains("3 trampolines"), "{text}");
}

/// Two wasm functions the name section names alike: every row tells them apart by index, in
/// the text, the JSON and the CSV.
#[test]
fn every_row_names_one_function() {
    let p = wasm_module("dups.clif", &[(4, BETA), (7, BETA), (9, ALPHA)]);
    let f = p.to_str().unwrap();
    let r = check_sums(&p, "merge,merge-similar");
    let mut names: Vec<&str> = (r["largest"].as_array().unwrap().iter())
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    names.sort();
    let beta = "hello::beta::h0123456789abcdef";
    assert_eq!(
        names,
        [
            "hello::alpha::h0123456789abcdef".to_string(),
            format!("{beta} [wasm function 4]"),
            format!("{beta} [wasm function 7]"),
            "wasm[0]::array_to_wasm_trampoline for hello::alpha::h0123456789abcdef".to_string(),
            format!("wasm[0]::array_to_wasm_trampoline for {beta} [wasm function 4]"),
            format!("wasm[0]::array_to_wasm_trampoline for {beta} [wasm function 7]"),
        ]
    );
    let (code, csv, err) = mergelift(&["report", "--csv", f]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    let distinct: std::collections::HashSet<&str> =
        rows.iter().map(|l| l.rsplit(',').next().unwrap()).collect();
    assert_eq!(distinct.len(), 3, "{csv}");
    assert!(csv.contains(",u268435456:4,"), "{csv}");
    let (code, text, err) = mergelift(&["report", "--width", "0", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(&format!("for {beta} [wasm function 7]")),
        "{text}"
    );
}

/// `--diff` of two builds where one function moved from index 51 to 52: it is the same
/// function (its name is unique in both), and its growth is a change, not one gone and one
/// new. Two functions of one name are matched by index.
#[test]
fn the_diff_matches_a_function_whose_index_changed() {
    let old = wasm_module(
        "v1.clif",
        &[(3, GAMMA), (4, BETA), (6, BETA), (51, "dummy")],
    );
    let new = wasm_module(
        "v2.clif",
        &[(3, GAMMA), (4, BETA), (6, BETA), (52, "dummy")],
    );
    // The new build's `dummy` does more.
    let text = std::fs::read_to_string(&new).unwrap().replace(
        "    return v6\n}\n;; Intermediate Representation of function <wasm[0]::array_to_wasm_trampoline[3]>",
        "    v7 = imul v6, v6\n    v8 = iadd v7, v2\n    v9 = imul v8, v3\n    return v9\n}\n;; Intermediate Representation of function <wasm[0]::array_to_wasm_trampoline[3]>",
    );
    assert!(text.contains("v9 = imul"));
    std::fs::write(&new, text).unwrap();
    let (code, out, err) = mergelift(&[
        "report",
        "--diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !(out.lines()).any(|l| l.starts_with("  new ") || l.starts_with("  gone ")),
        "{out}"
    );
    let grew: Vec<&str> = out.lines().filter(|l| l.contains("grew")).collect();
    assert_eq!(grew.len(), 1, "{out}");
    assert!(grew[0].ends_with("  dummy"), "{out}");
    assert!(
        out.contains("  change        old         new difference  name"),
        "{out}"
    );
    // Unique names match across the move, the shared one by its index.
    let d = json(&[
        "report",
        "--json",
        "--diff",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    let changes: Vec<&str> = (d["functions"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["dummy"], "{d}");
}

/// `size --emit-object --map`: every function symbol of the object (read as `nm` reads it)
/// is in the map, with the name `report` gives the function and its size.
#[test]
fn the_object_map_names_every_symbol() {
    use object::{Object, ObjectSymbol};
    let p = wasm_module("mapped.clif", &[(0, ALPHA), (1, BETA), (2, GAMMA)]);
    let (obj, map) = (dir().join("mapped.o"), dir().join("mapped.map"));
    let (code, _, err) = mergelift(&[
        "size",
        "--emit-object",
        obj.to_str().unwrap(),
        "--map",
        map.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let r = json(&["report", "--json", "--top", "100", p.to_str().unwrap()]);
    let name_of: std::collections::HashMap<&str, &str> = (r["largest"].as_array().unwrap())
        .iter()
        .map(|f| (f["symbol"].as_str().unwrap(), f["name"].as_str().unwrap()))
        .collect();
    let map = std::fs::read_to_string(&map).unwrap();
    assert!(map.starts_with("# symbol\tname\tbytes\tcode\n"), "{map}");
    let rows: std::collections::HashMap<&str, Vec<&str>> = (map.lines().skip(1))
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 4, "{l}");
            (cols[0], cols)
        })
        .collect();
    let bytes = std::fs::read(&obj).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let mut defined = 0;
    for s in file.symbols() {
        if s.kind() != object::SymbolKind::Text || !s.is_definition() {
            continue;
        }
        defined += 1;
        let sym = s.name().unwrap();
        let row = rows
            .get(sym)
            .unwrap_or_else(|| panic!("{sym} not in the map:\n{map}"));
        assert_eq!(row[2], s.size().to_string(), "{sym}");
        match name_of.get(sym) {
            Some(name) => assert_eq!(row[1], *name, "{sym}"),
            // The body merge-similar made for the trampolines.
            None => {
                assert_eq!(row[3], "shared body", "{sym}");
                assert!(row[1].starts_with("shared body of wasm[0]::array_to_wasm_trampoline for"));
            }
        }
    }
    // Every function of the input, and the shared body.
    assert_eq!(defined, name_of.len() + 1, "{map}");
    assert_eq!(rows.len(), defined, "{map}");
    let thunks = rows
        .values()
        .filter(|r| r[3].starts_with("thunk to "))
        .count();
    assert_eq!(thunks, 3, "{map}");
    // `nm`, where it is installed, reads the same symbols.
    match std::process::Command::new("nm").arg(&obj).output() {
        Ok(out) if out.status.success() => {
            let nm = String::from_utf8_lossy(&out.stdout);
            for sym in rows.keys() {
                assert!(
                    nm.lines().any(|l| l.ends_with(&format!(" {sym}"))),
                    "{sym}: {nm}"
                );
            }
        }
        _ => eprintln!("no `nm` (binutils): the object was read with the `object` crate only"),
    }
    // --map without --emit-object is a usage error.
    let (code, _, err) = mergelift(&["size", "--map", "x.map", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--emit-object"), "{err}");
}

/// The chart names the module, gives the families' sum and the net saving apart, and is
/// wide enough for its longest label.
#[test]
fn the_chart_names_the_module_and_fits_its_labels() {
    // (longer than the 40 or so characters a label once had)
    let long = "a_function_with_a_rather_long_name_that_runs_on_and_on_past_forty";
    let p = wasm_module("chart.clif", &[(0, long), (1, BETA), (2, GAMMA)]);
    let svg = dir().join("chart.svg");
    let (code, _, err) = mergelift(&[
        "report",
        "--svg",
        svg.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let r = json(&["report", "--json", p.to_str().unwrap()]);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.contains("chart.clif: families of merged functions by bytes saved"),
        "{svg}"
    );
    assert!(
        svg.contains(&format!(
            "net saving of the module: {} of",
            r["saved_bytes"]
        )),
        "{svg}"
    );
    assert!(svg.contains("the 1 families shown save"), "{svg}");
    // The label in full (the first member's name), and room for it left of the bars.
    let first = r["families"][0]["members"][0]["name"].as_str().unwrap();
    let label = format!("{first} (+2)")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(svg.contains(&label), "{label} not in {svg}");
    // (the first bar's x: the labels end left of it)
    let at = svg.find("<rect x=\"").unwrap() + "<rect x=\"".len();
    let bars_at: f64 = svg[at..].split('"').next().unwrap().parse().unwrap();
    assert!(
        bars_at >= 7.0 * label.chars().count() as f64,
        "bars at {bars_at} for a label of {} characters",
        label.chars().count()
    );
}
