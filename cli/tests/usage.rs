//! The command as a new user meets it: every subcommand reads its inputs alike (the same
//! words for a file that is missing, unreadable, a directory or a FIFO; `-` is standard
//! input; kinds it does not take are refused by name), and input with nothing in it is an
//! error.

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
