//! The command as a new user meets it: every subcommand reads its inputs alike (the same
//! words for a file that is missing, unreadable, a directory or a FIFO; `-` is standard
//! input; kinds it does not take are refused by name), input with nothing in it is an error,
//! an option that has no effect says so in one `warning:` line, and the help gives every
//! option's range and default.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::mergelift;

fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-usage-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn file(name: &str, text: &str) -> PathBuf {
    let p = dir().join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `mergelift args` with `stdin` on its standard input: exit code, stdout, stderr.
fn with_stdin(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An error run: exit 2 and one `error:` line on stderr, equal to `expected`.
#[track_caller]
fn assert_error(r: &(i32, String, String), expected: &str) {
    let (code, out, err) = r;
    assert_eq!(*code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(
        err.trim_end(),
        format!("error: {expected}"),
        "stdout:\n{out}"
    );
}

/// A clean run with one warning: exit 0 and exactly `warning: {expected}` on stderr.
#[track_caller]
fn assert_warns(r: &(i32, String, String), expected: &str) {
    let (code, out, err) = r;
    assert_eq!(*code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings, [format!("warning: {expected}")], "stderr:\n{err}");
}

const DUPS_CLIF: &str = "function %twice_a(i32) -> i32 {
block0(v0: i32):
    v1 = iadd v0, v0
    return v1
}

function %twice_b(i32) -> i32 {
block0(v0: i32):
    v1 = iadd v0, v0
    return v1
}

function %thrice(i32) -> i32 {
block0(v0: i32):
    v1 = iconst.i32 3
    v2 = imul v0, v1
    return v2
}
";

/// A run test with two run lines for two x86-64 targets, and one interpret-only file.
const RUN_TWICE: &str = "test run
target x86_64
target x86_64 has_avx
function %two() -> i32 {
block0:
    v0 = iconst.i32 2
    return v0
}
; run: %two() == 2
; run: %two() != 3
";

const INTERPRET_ONLY: &str = "test interpret
function %one() -> i32 {
block0:
    v0 = iconst.i32 1
    return v0
}
; run: %one() == 1
";

#[test]
fn input_without_a_function_is_an_error_everywhere() {
    let empty = file("empty.clif", "");
    let comments = file("comments.clif", "; nothing here\ntest compile\n");
    let lir = file("empty.lir", "declare function @f\n");
    for cmd in ["opt", "size", "report"] {
        for p in [&empty, &comments, &lir] {
            assert_error(
                &mergelift(&[cmd, s(p)]),
                &format!(
                    "{}: no function in it (an input must define at least one)",
                    s(p)
                ),
            );
        }
        assert_error(
            &mergelift(&[cmd, s(&empty), s(&comments)]),
            &format!(
                "no function in the inputs {}, {} (they must define at least one)",
                s(&empty),
                s(&comments)
            ),
        );
    }
    // `run`: a file, or a directory, with no run line.
    assert_error(
        &mergelift(&["run", s(&empty)]),
        &format!(
            "{}: no run line in it (a `; run:` or `; print:` line)",
            s(&empty)
        ),
    );
    let no_runs = dir().join("no-runs");
    std::fs::create_dir_all(&no_runs).unwrap();
    std::fs::write(no_runs.join("dups.clif"), DUPS_CLIF).unwrap();
    std::fs::write(no_runs.join("empty.clif"), "").unwrap();
    let r = mergelift(&["run", s(&no_runs)]);
    assert_eq!(r.0, 2, "{r:?}");
    assert!(
        r.2.starts_with("error: no run line in the 2 inputs (")
            && r.2.contains("none has a `; run:` or `; print:` line"),
        "{r:?}"
    );
    // A directory with no .clif file, in every subcommand that searches directories.
    let bare = dir().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::write(bare.join("notes.txt"), "not a test").unwrap();
    for (cmd, takes) in [
        ("run", ".clif files, or directories of .clif files"),
        (
            "size",
            ".clif, .lir or .wasm files, directories of .clif files, or - (standard input)",
        ),
    ] {
        assert_error(
            &mergelift(&[cmd, s(&bare)]),
            &format!(
                "{}: no .clif file in this directory ({cmd} takes {takes})",
                s(&bare)
            ),
        );
    }
}

#[test]
fn kinds_of_input_a_subcommand_does_not_take_are_refused_by_name() {
    let txt = file("notes.txt", DUPS_CLIF);
    let none = file("noext", DUPS_CLIF);
    for (cmd, takes) in [
        ("opt", ".clif, .lir or .wasm files, or - (standard input)"),
        (
            "size",
            ".clif, .lir or .wasm files, directories of .clif files, or - (standard input)",
        ),
        (
            "report",
            ".clif, .lir or .wasm files, directories of .clif files, or - (standard input)",
        ),
        ("run", ".clif files, or directories of .clif files"),
    ] {
        for p in [&txt, &none] {
            assert_error(
                &mergelift(&[cmd, s(p)]),
                &format!(
                    "{}: not an input {cmd} takes, by its name: it takes {takes}",
                    s(p)
                ),
            );
        }
    }
    let lir = file("t.lir", "declare function @f\n");
    let r = mergelift(&["run", s(&lir)]);
    assert_eq!(r.0, 2);
    assert!(r.2.contains("it takes .clif files"), "{r:?}");
}

/// What `opt` prints by default (LIR) is input `size` and `report` take.
#[test]
fn size_and_report_take_lir() {
    let clif = file("dups.clif", DUPS_CLIF);
    let (code, lir, err) = mergelift(&["opt", "--passes", "none", s(&clif)]);
    assert_eq!(code, 0, "{err}");
    let lir = file("dups.lir", &lir);
    let size = |p: &Path| -> serde_json::Value {
        let (code, out, err) = mergelift(&["size", "--json", s(p)]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let (a, b) = (size(&clif), size(&lir));
    assert_eq!(a["functions_in"], 3);
    assert_eq!(b["functions_in"], 3);
    assert_eq!(a["merged"], b["merged"]);
    let (code, out, err) = mergelift(&["report", s(&lir)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("twice_a") && out.contains("twice_b"), "{out}");
    // A malformed .lir file is reported with its line, as `opt` reports it.
    let bad = file(
        "bad.lir",
        "function @f() system_v export {\nbb0:\n    frob\n}\n",
    );
    for cmd in ["opt", "size", "report"] {
        let r = mergelift(&[cmd, s(&bad)]);
        assert_eq!(r.0, 2, "{cmd}: {r:?}");
        assert!(
            r.2.starts_with(&format!("error: {}:3:", s(&bad))),
            "{cmd}: {r:?}"
        );
    }
}

/// A missing file, an unreadable one, a directory and a FIFO read the same in every
/// subcommand.
#[test]
fn unreadable_inputs_read_the_same_everywhere() {
    let missing = dir().join("missing.clif");
    let fifo = dir().join("pipe.clif");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a plain POSIX call on a valid C string.
    unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    for cmd in ["opt", "size", "report", "run"] {
        assert_error(
            &mergelift(&[cmd, s(&missing)]),
            &format!("{}: cannot read: no such file or directory", s(&missing)),
        );
        let hint = if cmd == "run" {
            ""
        } else {
            "; `-` reads standard input"
        };
        assert_error(
            &mergelift(&[cmd, s(&fifo)]),
            &format!(
                "{}: cannot read: not a regular file (a FIFO{hint})",
                s(&fifo)
            ),
        );
    }
    let d = dir().join("a-dir");
    std::fs::create_dir_all(&d).unwrap();
    assert_error(
        &mergelift(&["opt", s(&d)]),
        &format!(
            "{}: cannot read: a directory (opt takes .clif, .lir or .wasm files, or - \
             (standard input))",
            s(&d)
        ),
    );
    // (root reads any file: the permission case needs another user)
    let locked = file("locked.clif", DUPS_CLIF);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&locked).is_ok() {
        eprintln!("skipping the unreadable file: this user reads a file of mode 000 (root)");
        return;
    }
    for cmd in ["opt", "size", "report", "run"] {
        assert_error(
            &mergelift(&[cmd, s(&locked)]),
            &format!("{}: cannot read: permission denied", s(&locked)),
        );
    }
}

#[test]
fn dash_is_standard_input() {
    let (code, gen, err) = mergelift(&["gen", "--functions", "40", "--seed", "5"]);
    assert_eq!(code, 0, "{err}");
    let g = file("g.clif", &gen);
    // `gen | opt -` is `opt FILE`, as CLIF and as LIR, and `/dev/stdin` is `-`.
    let (code, from_file, err) = mergelift(&["opt", s(&g)]);
    assert_eq!(code, 0, "{err}");
    for dash in ["-", "/dev/stdin"] {
        let (code, out, err) = with_stdin(&["opt", dash], gen.as_bytes());
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, from_file);
    }
    let (code, again, err) = with_stdin(&["opt", "--passes", "none", "-"], from_file.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert!(again.contains("function @"), "{again}");
    // `size` and `report` alike.
    let (code, a, err) = mergelift(&["size", "--json", s(&g)]);
    assert_eq!(code, 0, "{err}");
    let (code, b, err) = with_stdin(&["size", "--json", "-"], gen.as_bytes());
    assert_eq!(code, 0, "{err}");
    let bytes = |j: &str| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(j).unwrap();
        serde_json::json!([v["code_bytes_before"], v["code_bytes_after"], v["merged"]])
    };
    assert_eq!(bytes(&a), bytes(&b));
    let (code, out, err) = with_stdin(&["report", "-"], gen.as_bytes());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("families, largest saving first"), "{out}");
    // Errors name standard input; nothing on it is empty input; it is read once.
    let r = with_stdin(&["opt", "-"], b"function %f() {\nblock0:\n    frob\n}\n");
    assert_eq!(r.0, 2, "{r:?}");
    assert!(r.2.starts_with("error: <stdin>:3:"), "{r:?}");
    assert_error(
        &with_stdin(&["size", "-"], b""),
        "<stdin>: no function in it (an input must define at least one)",
    );
    assert_error(
        &with_stdin(&["opt", "-", "-"], gen.as_bytes()),
        "-: standard input is named twice",
    );
    assert_error(
        &with_stdin(&["run", "-"], gen.as_bytes()),
        "-: run does not read standard input: it takes .clif files, or directories of .clif \
         files",
    );
}

#[test]
fn options_without_effect_warn_in_one_line() {
    let p = file("warn.clif", DUPS_CLIF);
    let f = s(&p);
    let cases: [(&[&str], &str); 9] = [
        (
            &["size", "--no-fetch-locals"],
            "--no-fetch-locals has no effect without --local",
        ),
        (
            &["size", "--hot", "twice_a"],
            "--hot has no effect: it keeps functions out of merge-aligned, which --passes does \
             not run",
        ),
        (
            &["opt", "--emit", "none", "--hot", "twice_a"],
            "--hot has no effect: it keeps functions out of merge-aligned, which --passes does \
             not run",
        ),
        (
            &[
                "opt",
                "--emit",
                "none",
                "--passes",
                "merge,merge-similar,merge-aligned",
                "--hot",
                "twice_a,nosuch",
            ],
            "--hot names no function of the input: nosuch",
        ),
        (
            &["opt", "--emit", "none", "--passes", "merge,merge"],
            "--passes lists merge 2 times: it runs 2 times",
        ),
        (
            &["size", "--passes", "merge,lvn,merge"],
            "--passes lists merge 2 times: it runs 2 times",
        ),
        (
            &["size", "--lift-all", "--passes", "lvn"],
            "--lift-all has no effect: every function is lifted when --passes has a pass other \
             than merge and merge-similar",
        ),
        (
            &["report", "--json", "--width", "40"],
            "--width has no effect with --json: names are written whole",
        ),
        (
            &["opt", "--emit", "none", "--low-memory", "--passes", "lvn"],
            "--low-memory has no effect: --passes merges no function",
        ),
    ];
    for (args, warning) in cases {
        let mut all = args.to_vec();
        all.push(f);
        assert_warns(&mergelift(&all), warning);
    }
    // Given where they have an effect: no warning.
    for args in [
        &["size", "--local", "--no-fetch-locals", f][..],
        &[
            "size",
            "--passes",
            "merge,merge-similar,merge-aligned",
            "--hot",
            "twice_a",
            f,
        ],
        &["report", "--width", "40", f],
    ] {
        let (code, _, err) = mergelift(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!err.contains("warning:"), "{args:?}: {err}");
    }
    assert_warns(
        &mergelift(&["fuzz", "--iterations", "1", "--late-addresses"]),
        "--late-addresses has no effect without --batch N or --batch random",
    );
}

/// Every option that takes a value says its default (or that it has none, as an output
/// file) and the range of numbers; `--passes` has the same help and default everywhere.
#[test]
fn help_gives_every_default_and_range() {
    let mut passes_help = Vec::new();
    for cmd in ["opt", "run", "size", "report", "gen", "fuzz"] {
        let (code, help, err) = mergelift(&[cmd, "--help"]);
        assert_eq!(code, 0, "{err}");
        // Each option's paragraph: from its `--name` line to the next.
        let mut paragraphs: Vec<(String, String)> = Vec::new();
        for line in help.lines() {
            let t = line.trim_start();
            if t.starts_with("--") || t.starts_with("-v, ") || t.starts_with("-h, ") {
                let name = t.split_whitespace().find(|w| w.starts_with("--")).unwrap();
                paragraphs.push((name.to_string(), line.to_string()));
            } else if let Some(p) = paragraphs.last_mut() {
                p.1.push('\n');
                p.1.push_str(line);
            }
        }
        assert!(!paragraphs.is_empty(), "{cmd}: {help}");
        for (name, text) in &paragraphs {
            let takes_value = text.lines().next().unwrap().contains('<');
            // Files written, and the two builds compared, have no default.
            let output =
                ["--emit-object", "--map", "--svg", "--diff", "--out-dir"].contains(&name.as_str());
            if takes_value && !output {
                assert!(
                    text.contains("[default: "),
                    "{cmd} {name}: no default in its help:\n{text}"
                );
            }
            if name == "--passes" {
                assert!(
                    text.contains("merge-aligned, lvn, gvn, dce"),
                    "{cmd}: {text}"
                );
                let default = text.split("[default: ").nth(1).unwrap();
                passes_help.push(default.split(']').next().unwrap().to_string());
            }
        }
        for (name, range) in [
            ("--threads", "1 to 64"),
            ("--width", "0 (names are not cut) or at least 5"),
            ("--timeout", "0 or more"),
            ("--functions", "1 to 1,000,000"),
            ("--top", "0 or more"),
            ("--iterations", "1 or more"),
            ("--seed", "from 0 to 2^64 - 1"),
        ] {
            if let Some((_, text)) = paragraphs.iter().find(|(n, _)| n == name) {
                let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
                assert!(
                    flat.contains(range),
                    "{cmd} {name}: `{range}` not in {flat}"
                );
            }
        }
    }
    // One default pipeline, in every subcommand that runs passes.
    assert_eq!(passes_help.len(), 5, "{passes_help:?}");
    assert!(
        passes_help.iter().all(|d| d == "merge,merge-similar"),
        "{passes_help:?}"
    );
    // `--width 0` keeps names whole; 1 to 4 is refused.
    let r = mergelift(&["report", "--width", "3", "x.clif"]);
    assert_eq!(r.0, 2);
    assert!(r.2.contains("0 (names are not cut) or at least 5"), "{r:?}");
}

/// `run` counts run lines (once per target they run on) apart from files.
#[test]
fn run_counts_run_lines_and_files_apart() {
    let d = dir().join("runs");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("twice.clif"), RUN_TWICE).unwrap();
    std::fs::write(d.join("interp.clif"), INTERPRET_ONLY).unwrap();
    std::fs::write(d.join("plain.clif"), DUPS_CLIF).unwrap();
    let (code, out, err) = mergelift(&["run", s(&d)]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    // Two run lines on two targets (the second only where the host has AVX).
    let host_avx = std::is_x86_feature_detected!("avx");
    let (passed, targets) = if host_avx {
        (4, "")
    } else {
        (2, " (1 of their targets skipped)")
    };
    assert_eq!(
        lines,
        [
            format!(
                "files: 3 read, 1 run{targets}, 1 skipped (--verbose says why), 1 without a run \
                 line"
            ),
            format!("{passed} passed, 0 failed"),
        ],
        "{out}"
    );
    let (code, out, _) = mergelift(&["run", "--verbose", s(&d)]);
    assert_eq!(code, 0);
    assert!(
        out.contains("interp.clif: interpret-only test (no `test run`)"),
        "{out}"
    );
    assert!(!out.contains("plain.clif"), "{out}");
}

/// `size` says what its "functions" count: those compiled, of three sorts that add up.
#[test]
fn size_says_what_functions_after_counts() {
    let p = file("size-dups.clif", DUPS_CLIF);
    let (code, out, err) = mergelift(&["size", s(&p)]);
    assert_eq!(code, 0, "{err}");
    let (code, json, _) = mergelift(&["size", "--json", s(&p)]);
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["plain", "pipeline"],
        "{out}"
    );
    let functions = lines[1];
    let nums: Vec<u64> = functions
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    assert!(
        functions.contains("compiled: ")
            && functions.contains("with their own code")
            && functions.contains("thunks of merged functions")
            && functions.contains("bodies the passes made"),
        "{out}"
    );
    assert_eq!(nums[0], j["functions_in"].as_u64().unwrap());
    assert_eq!(nums[1], j["functions_out"].as_u64().unwrap());
    assert_eq!(nums[2] + nums[3] + nums[4], nums[1], "{functions}");
    assert!(lines[2].starts_with("merged "), "{out}");
    assert!(lines[2].contains("with no code of their own"), "{out}");
}

/// `opt --stats`'s `merged` counts the merges of every pass, as `size`'s does (`merge`'s own
/// count is `merged_exact`).
#[test]
fn opt_stats_count_every_merge() {
    let (code, gen, err) = mergelift(&["gen", "--functions", "60", "--seed", "3"]);
    assert_eq!(code, 0, "{err}");
    let g = file("stats.clif", &gen);
    let (code, _, err) = mergelift(&["opt", "--emit", "none", "--stats", s(&g)]);
    assert_eq!(code, 0, "{err}");
    let o: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    let n = |k: &str| o[k].as_u64().unwrap_or_else(|| panic!("no {k}: {o}"));
    assert!(n("merged_similar") > 0, "{o}");
    assert_eq!(
        n("merged"),
        n("replaced") + n("aliased") + n("thunked") + n("folded"),
        "{o}"
    );
    assert_eq!(n("merged"), n("merged_exact") + n("merged_similar"), "{o}");
    let (code, out, err) = mergelift(&["size", "--json", s(&g)]);
    assert_eq!(code, 0, "{err}");
    let sz: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(sz["merged"], o["merged"], "size {sz}\nopt {o}");
}
