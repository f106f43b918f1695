//! The `mergelift` command on a directory of nasty inputs, as a careless or hostile user gives
//! them. Each input gets a clean result, or exactly one `error:` line on stderr (its first
//! line; what follows it is indented detail) with the documented exit code (0 success, 1 test
//! failures, 2 bad input or usage), within a time bound (the child is killed at
//! [`TIME_LIMIT`]) and a memory bound (the child's address space is limited to
//! [`MEMORY_LIMIT`]), and never a panic.

use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIME_LIMIT: Duration = Duration::from_secs(60);
const MEMORY_LIMIT: u64 = 4 << 30;

/// What a bounded run of the command gave.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run `mergelift args` with the time and memory bounds; stdout and stderr go to files (no
/// pipe to fill up).
fn bounded(args: &[&str]) -> Outcome {
    let dir = scratch();
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (o, e) = (dir.join(format!("out{n}")), dir.join(format!("err{n}")));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mergelift"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap());
    limit_memory(&mut cmd);
    let mut child = cmd.spawn().expect("start mergelift");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mergelift {args:?} hangs: killed after {TIME_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    Outcome {
        code: status.code(),
        stdout: read(&o),
        stderr: read(&e),
    }
}

fn limit_memory(cmd: &mut Command) {
    // SAFETY: setrlimit is async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEMORY_LIMIT,
                rlim_max: MEMORY_LIMIT,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn scratch() -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn file(name: &str, text: &[u8]) -> PathBuf {
    let p = scratch().join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::File::create(&p).unwrap().write_all(text).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A clean run: the exit code is `code`, nothing panicked, and a failing run (code 2) says
/// why in exactly one `error:` line, the first on stderr, which contains every `needle`.
#[track_caller]
fn assert_clean(o: &Outcome, code: i32, needles: &[&str]) {
    let what = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    );
    assert!(
        !o.stderr.contains("panicked at") && !o.stderr.contains("internal error"),
        "panic: {what}"
    );
    assert_eq!(o.code, Some(code), "{what}");
    if code == 2 {
        let errors: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        assert_eq!(errors.len(), 1, "one error line: {what}");
        assert!(o.stderr.starts_with("error: "), "{what}");
        let first = o.stderr.lines().next().unwrap_or_default();
        for n in needles {
            assert!(first.contains(n), "`{n}` not in the error line: {what}");
        }
    }
}

const FIB_CLIF: &str = "function %fib(i64) -> i64 {
    sig0 = (i64) -> i64
    fn0 = %fib sig0
block0(v0: i64):
    v7 = iconst.i64 2
    v1 = icmp slt v0, v7
    brif v1, block1, block2
block1:
    return v0
block2:
    v8 = iconst.i64 1
    v2 = isub v0, v8
    v3 = call fn0(v2)
    v4 = isub v0, v7
    v5 = call fn0(v4)
    v6 = iadd v3, v5
    return v6
}
";

const FIB_LIR: &str = "function @fib(i64) -> i64 system_v export {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = icmp.i64 slt %vr0, 2
    brif.i8 ne %vr1, bb1, bb2
bb1:
    ret %vr0
bb2:
    %vr2 = sub.i64 %vr0, 1
    %vr3 = call @fib(%vr2), sig0
    %vr4 = sub.i64 %vr0, 2
    %vr5 = call @fib(%vr4), sig0
    %vr6 = add.i64 %vr3, %vr5
    ret %vr6
}
";

/// Three functions, two of them equal: `twice_a` and `twice_b`.
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

#[test]
fn absurd_entity_numbers_are_refused_before_parsing() {
    // 90 bytes that would make cranelift-reader allocate gigabytes.
    for (name, text) in [
        (
            "bigvalue.clif",
            "function %f() -> i32 {\nblock0:\n    v99999999 = iconst.i32 1\n    return v99999999\n}\n",
        ),
        (
            "bigslot.clif",
            "function %f() {\n    ss4000000000 = explicit_slot 4\nblock0:\n    return\n}\n",
        ),
        (
            "bigblock.clif",
            "function %f() {\nblock0:\n    jump block2000000000\nblock2000000000:\n    return\n}\n",
        ),
    ] {
        let p = file(name, text.as_bytes());
        for cmd in ["opt", "size", "run"] {
            let o = bounded(&[cmd, s(&p)]);
            assert_clean(&o, 2, &[name, "numbered beyond"]);
        }
    }
}

#[test]
fn huge_register_numbers_in_lir_are_refused() {
    let p = file(
        "bigreg.lir",
        b"function @f() -> i32 system_v export {\nbb0:\n    %vr16777215 = copy.i32 1\n    ret %vr16777215\n}\n",
    );
    let o = bounded(&["opt", s(&p)]);
    assert_clean(&o, 2, &["bigreg.lir"]);
}

#[test]
fn more_results_than_lir_holds_are_refused() {
    // A callee returning 256 values: a call of it would have 256 results, one more than an
    // LIR instruction holds (its count is a byte).
    let rets = vec!["i32"; 256].join(", ");
    let clif = format!(
        "function %many() -> {rets} {{\nblock0:\n    v0 = iconst.i32 1\n    return {}\n}}\n",
        vec!["v0"; 256].join(", ")
    );
    let p = file("manyrets.clif", clif.as_bytes());
    // `opt` passes a function LIR cannot represent through, saying why.
    let o = bounded(&["opt", s(&p)]);
    assert_clean(&o, 0, &[]);
    assert!(
        o.stdout
            .contains("; not lifted: %many: a signature with 256 return values"),
        "{}",
        o.stdout
    );
    // `size` compiles the input with Cranelift first, which refuses it too.
    let o = bounded(&["size", s(&p)]);
    assert_clean(&o, 2, &["manyrets.clif", "many"]);
    // The same in LIR text: a signature and an instruction with too many.
    let lir = format!("function @many() -> {rets} system_v export {{\nbb0:\n    ret 1\n}}\n");
    let p = file("manyrets.lir", lir.as_bytes());
    let o = bounded(&["opt", s(&p)]);
    assert_clean(&o, 2, &["manyrets.lir", "more than 255 return values"]);
    let regs: Vec<String> = (0..256).map(|i| format!("%vr{i}")).collect();
    let lir = format!(
        "function @f() system_v export {{\nbb0:\n    {} = call sig0 @g()\n    ret\n}}\n",
        regs.join(", ")
    );
    let p = file("manyresults.lir", lir.as_bytes());
    let o = bounded(&["opt", s(&p)]);
    assert_clean(&o, 2, &["manyresults.lir", "more than 255 results"]);
}

#[test]
fn fifos_and_directories_are_not_read() {
    let dir = scratch().join("fifo-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("pipe.clif");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a plain POSIX call on a valid C string.
    unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    // Named directly: an error, no hang.
    for cmd in ["opt", "run", "size"] {
        let o = bounded(&[cmd, s(&fifo)]);
        assert_clean(&o, 2, &["pipe.clif", "not a regular file"]);
    }
    // In a directory: skipped, and then the directory has no .clif file to read.
    for cmd in ["run", "size", "report"] {
        let o = bounded(&[cmd, s(&dir)]);
        assert_clean(&o, 2, &["fifo-dir: no .clif file in this directory"]);
    }
    // A directory where a file is expected.
    let o = bounded(&["opt", s(&dir)]);
    assert_clean(&o, 2, &["fifo-dir: cannot read: a directory (opt takes "]);
}

#[test]
fn symlink_loops_end_and_files_count_once() {
    let dir = scratch().join("loops");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("sub/t.clif"),
        "test run\ntarget x86_64\nfunction %two() -> i32 {\nblock0:\n    v0 = iconst.i32 2\n    return v0\n}\n; run: %two() == 2\n",
    )
    .unwrap();
    let _ = std::os::unix::fs::symlink(&dir, dir.join("sub/up"));
    let _ = std::os::unix::fs::symlink(dir.join("sub"), dir.join("again"));
    let _ = std::os::unix::fs::symlink("self.clif", dir.join("self.clif"));
    let _ = std::os::unix::fs::symlink(dir.join("sub/t.clif"), dir.join("link.clif"));
    let o = bounded(&["run", s(&dir)]);
    assert_clean(&o, 0, &[]);
    assert_eq!(
        o.stdout.lines().last(),
        Some("1 passed, 0 failed"),
        "{}",
        o.stdout
    );
}

#[test]
fn a_run_line_that_never_returns_times_out() {
    let p = file(
        "forever.clif",
        b"test run\ntarget x86_64\nfunction %spin(i32) -> i32 {\nblock0(v0: i32):\n    jump block1(v0)\nblock1(v1: i32):\n    v3 = iconst.i32 1\n    v2 = iadd v1, v3\n    jump block1(v2)\n}\n; run: %spin(0) == 0\n\nfunction %one() -> i32 {\nblock0:\n    v0 = iconst.i32 1\n    return v0\n}\n; run: %one() == 1\n",
    );
    let t = Instant::now();
    let o = bounded(&["run", "--timeout", "1", s(&p)]);
    assert_clean(&o, 1, &[]);
    assert!(o.stdout.contains("forever.clif:11:"), "{}", o.stdout);
    assert!(o.stdout.contains("timeout"), "{}", o.stdout);
    assert_eq!(o.stdout.lines().last(), Some("1 passed, 1 failed"));
    assert!(t.elapsed() < Duration::from_secs(30));
    let o = bounded(&["run", "--timeout", "-1", s(&p)]);
    assert_clean(&o, 2, &["--timeout"]);
}

#[test]
fn invalid_clif_is_an_input_error_not_silent_output() {
    let cases: [(&str, &str); 4] = [
        (
            "typeerr.clif",
            "function %f(i32, i64) -> i32 {\nblock0(v0: i32, v1: i64):\n    v2 = iadd v0, v1\n    return v2\n}\n",
        ),
        (
            "noterm.clif",
            "function %f(i32) -> i32 {\nblock0(v0: i32):\n    v1 = iadd v0, v0\n}\n",
        ),
        (
            "retcount.clif",
            "function %f(i32) -> i32 {\nblock0(v0: i32):\n    return v0, v0\n}\n",
        ),
        (
            "emptyblock.clif",
            "function %f(i32) -> i32 {\nblock0(v0: i32):\n    jump block1\nblock1:\n}\n",
        ),
    ];
    for (name, text) in cases {
        let p = file(name, text.as_bytes());
        let o = bounded(&["opt", "--passes", "none", "--emit", "clif", s(&p)]);
        assert!(
            o.stdout.is_empty(),
            "{name}: output for invalid input:\n{}",
            o.stdout
        );
        assert_clean(&o, 2, &[name]);
        // `run` blames the input, not a pass.
        let mut t = String::from("test run\ntarget x86_64\n");
        t.push_str(text);
        t.push_str("; run: %f(1) == 1\n");
        let p = file(&format!("run-{name}"), t.as_bytes());
        let o = bounded(&["run", "--passes", "merge", s(&p)]);
        assert!(!o.stdout.contains("after merge"), "{}", o.stdout);
        assert_clean(&o, 2, &[name]);
    }
}

#[test]
fn errors_name_the_file_that_failed() {
    let good = file("good.clif", FIB_CLIF.as_bytes());
    let bad = file(
        "second-bad.clif",
        b"function %g(i32, i64) -> i32 {\nblock0(v0: i32, v1: i64):\n    v2 = iadd v0, v1\n    return v2\n}\n",
    );
    let o = bounded(&["opt", s(&good), s(&bad)]);
    assert_clean(&o, 2, &["second-bad.clif", "function g"]);
    assert!(!o.stderr.contains("good.clif"), "{}", o.stderr);
}

#[test]
fn parse_errors_quote_the_line_and_have_one_exit_code() {
    let p = file(
        "parse.clif",
        b"function %f(i32) -> i32 {\nblock0(v0: i32):\n    v1 = frobnicate v0\n    return v1\n}\n",
    );
    for cmd in ["opt", "run", "size"] {
        let o = bounded(&[cmd, s(&p)]);
        assert_clean(&o, 2, &["parse.clif:3"]);
        assert!(o.stderr.contains("3 | "), "{}", o.stderr);
    }
}

#[test]
fn merged_functions_stay_in_the_emitted_module() {
    let p = file("dups.clif", DUPS_CLIF.as_bytes());
    for passes in ["merge", "merge,merge-similar", "merge,lvn"] {
        let o = bounded(&["opt", "--passes", passes, "--emit", "clif", s(&p)]);
        assert_clean(&o, 0, &[]);
        for f in ["%twice_a", "%twice_b", "%thrice"] {
            assert!(
                o.stdout.contains(&format!("function {f}(")),
                "{passes}: {f} dropped:\n{}",
                o.stdout
            );
        }
        assert!(o.stdout.contains("call"), "a thunk: {}", o.stdout);
        // The output is a module Cranelift accepts.
        let again = file("dups-out.clif", o.stdout.as_bytes());
        let o2 = bounded(&["opt", "--passes", "none", "--emit", "clif", s(&again)]);
        assert_clean(&o2, 0, &[]);
    }
}

#[test]
fn bad_pass_lists_and_options_are_usage_errors() {
    let p = file("fib.lir", FIB_LIR.as_bytes());
    for passes in ["", ",", "merge,,lvn", "none,merge", "frob"] {
        let o = bounded(&["opt", "--passes", passes, s(&p)]);
        assert_clean(&o, 2, &[]);
    }
    let o = bounded(&["gen", "--functions", "18446744073709551615"]);
    assert_clean(&o, 2, &[]);
    let o = bounded(&["gen", "--dup-ratio", "-0.1"]);
    assert_clean(&o, 2, &["--dup-ratio"]);
    let o = bounded(&["opt", "--no-such-flag", s(&p)]);
    assert_clean(&o, 2, &[]);
    let o = bounded(&["opt", s(&scratch().join("does-not-exist.clif"))]);
    assert_clean(&o, 2, &["does-not-exist.clif"]);
}

#[test]
fn a_closed_pipe_ends_quietly_and_a_full_disk_is_an_error() {
    // `gen | head -1`.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(["gen", "--functions", "200000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("function"), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked at"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    // `opt > /dev/full`.
    if Path::new("/dev/full").exists() {
        let p = file("fib-full.lir", FIB_LIR.as_bytes());
        let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
            .args(["opt", s(&p)])
            .stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked at"), "{err}");
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.starts_with("error: writing to stdout"), "{err}");
    }
}

/// Every prefix of a good `.clif` and `.lir` file, and byte-flipped copies: each gives a
/// clean result or one error line, never a panic.
#[test]
fn truncated_and_mutated_inputs_fail_cleanly() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for (ext, text) in [("clif", FIB_CLIF), ("lir", FIB_LIR)] {
        let b = text.as_bytes();
        let mut inputs: Vec<Vec<u8>> = (1..b.len()).step_by(7).map(|n| b[..n].to_vec()).collect();
        for _ in 0..30 {
            let mut m = b.to_vec();
            for _ in 0..1 + next() % 3 {
                let k = (next() % m.len() as u64) as usize;
                m[k] = b"0123456789v%-,(){}:=.ibx \n\xff"[(next() % 26) as usize];
            }
            inputs.push(m);
        }
        for (k, input) in inputs.iter().enumerate() {
            let p = file(&format!("mut/{k}.{ext}"), input);
            let o = bounded(&[
                "opt",
                "--passes",
                "merge,merge-similar,lvn,gvn,dce",
                "--emit",
                "clif",
                s(&p),
            ]);
            let code = o.code.unwrap_or(-1);
            assert!(
                code == 0 || code == 2,
                "input {k}.{ext}:\n{}\n=> {code}: {}",
                String::from_utf8_lossy(input),
                o.stderr
            );
            assert_clean(&o, code, &[]);
        }
    }
}

/// A function Cranelift's x64 backend cannot take (i128 arguments without the LLVM ABI
/// extensions) panics inside Cranelift: `size` reports it as one error naming the file and
/// function, with no panic report.
#[test]
fn cranelift_panics_become_one_error_line() {
    let p = file(
        "i128.clif",
        b"test interpret\nfunction %wide(i128) -> i128 {\nblock0(v0: i128):\n    return v0\n}\n",
    );
    let o = bounded(&["size", s(&p)]);
    assert_clean(&o, 2, &["i128.clif", "function wide"]);
}

/// Merging `tail` functions whose addresses are taken makes thunks; in a file without frame
/// pointers they must not tail-call (x64 Cranelift panics at emission then): what compiles
/// without the pass compiles with it.
#[test]
fn tail_thunks_compile_without_frame_pointers() {
    let p = file(
        "tail.clif",
        b"test run
target x86_64

function %a(i64) -> i64 tail {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}

function %b(i64) -> i64 tail {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}

function %same() -> i8 {
    sig0 = (i64) -> i64 tail
    fn0 = %a sig0
    fn1 = %b sig0
block0:
    v0 = func_addr.i64 fn0
    v1 = func_addr.i64 fn1
    v2 = icmp eq v0, v1
    return v2
}
; run: %same() == 0

function %callb(i64) -> i64 {
    sig0 = (i64) -> i64 tail
    fn0 = %b sig0
block0(v0: i64):
    v1 = call fn0(v0)
    return v1
}
; run: %callb(3) == 6
",
    );
    for passes in ["none", "merge", "merge,merge-similar,lvn"] {
        let o = bounded(&["run", "--passes", passes, s(&p)]);
        assert_clean(&o, 0, &[]);
        assert_eq!(
            o.stdout.lines().last(),
            Some("2 passed, 0 failed"),
            "{passes}"
        );
    }
}

/// LIR that the verifier must refuse before lowering: opaque instructions Cranelift cannot
/// build (an `iconst` without a type, a `vconst` whose length immediate is absurd) and a jump
/// to the entry block; each error names the file and the line.
#[test]
fn unlowerable_lir_is_an_input_error() {
    let head = "function @f(i32) -> i32 system_v export {\n";
    for (name, body, line) in [
        (
            "iconst-void.lir",
            "bb0:\n    %vr0: i32 = opaque \"iconst\" [0x5] pure\n    ret %vr0\n}\n",
            3,
        ),
        (
            "vconst-huge.lir",
            "bb0:\n    %vr1: i8x16 = opaque.i8x16 \"vconst\" [0xffffffffffffffff] pure\n    %vr0 = copy.i32 arg0\n    ret %vr0\n}\n",
            3,
        ),
        (
            "entry-jump.lir",
            "bb0:\n    %vr0 = copy.i32 arg0\n    jump bb1\nbb1:\n    jump bb0\n}\n",
            6,
        ),
    ] {
        let p = file(name, format!("{head}{body}").as_bytes());
        for emit in ["clif", "lir"] {
            let o = bounded(&["opt", "--passes", "none", "--emit", emit, s(&p)]);
            assert_clean(&o, 2, &[&format!("{name}:{line}:")]);
            assert!(o.stdout.is_empty(), "{}", o.stdout);
        }
    }
}

/// Found by the cargo-fuzz targets: input on which cranelift-reader or Cranelift's verifier
/// panic, or that Cranelift's verifier accepts but names a global value that does not exist.
/// Each is one error line naming the file, from every command.
#[test]
fn inputs_that_panic_cranelift_or_read_out_of_bounds() {
    for (name, text, needle) in [
        (
            "dyn-type.clif",
            "function %f() {\n    gv0 = dyn_scale_target_const.i8x16\n    dt0 = i8*gv0\n\nblock0:\n    return\n}\n",
            "cranelift-reader cannot parse it",
        ),
        (
            "stack-limit.clif",
            "function %a(i64 vmctx) {\n    gv0 = vmctx\n    stack_limit = gv5\n\nblock0(v0: i64):\n    return\n}\n",
            "stack_limit names gv5",
        ),
        (
            "no-blocks.clif",
            "function %f() {\n    gv0 = vmctx\n}\n",
            "Function is empty",
        ),
    ] {
        let p = file(name, text.as_bytes());
        let o = bounded(&["opt", s(&p)]);
        assert_clean(&o, 2, &[name, needle]);
        for cmd in ["size", "run"] {
            let o = bounded(&[cmd, s(&p)]);
            let code = o.code.unwrap_or(-1);
            // `run` skips a file with no `test run` line; otherwise an error.
            assert!(code == 0 || code == 2, "{cmd} {name}: {}", o.stderr);
            assert_clean(&o, code, &[name]);
        }
    }
}
