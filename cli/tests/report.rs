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
    // Every member is a function of the input, in one family at most. (Names need not be
    // unique: a name section can give two functions one name.)
    let mut functions: std::collections::HashMap<&str, usize> = Default::default();
    for f in r["largest"].as_array().unwrap() {
        *functions.entry(f["name"].as_str().unwrap()).or_default() += 1;
    }
    assert_eq!(
        functions.values().sum::<usize>() as u64,
        s["functions_in"].as_u64().unwrap()
    );
    let mut merged = 0;
    for fam in families {
        let members = fam["members"].as_array().unwrap();
        assert!(!members.is_empty());
        for m in members {
            let name = m["name"].as_str().unwrap();
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
    assert!(csv.starts_with("family,family_saved_bytes,how,kind,bytes,name\n"));
    assert!(csv
        .lines()
        .skip(1)
        .all(|l| l.split(',').next().unwrap().parse::<usize>().unwrap() <= 3));
    let svg = dir().join("families.svg");
    let (code, text, err) = mergelift(&["report", "--top", "4", "--svg", svg.to_str().unwrap(), f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("families, largest saving first:") && text.contains("largest functions:")
    );
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.matches("<rect").count() == 4,
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
