//! `.wasm` input (the `wasm` feature): `opt`, `size` and `report` read a core WebAssembly
//! module through wasmtime's own translation; names come from the name section, in full,
//! demangled; malformed modules get one `error:` line and exit 2, never a panic. The modules
//! are built here from `.wat` text.
#![cfg(feature = "wasm")]

use std::path::{Path, PathBuf};

mod common;
use common::mergelift;

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-wasm-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A Rust legacy symbol longer than the 96 characters wasmtime keeps of a name.
const LONG: &str = "_ZN24mycrate_with_a_long_name28some_module_with_a_long_name15AnotherTypeName32a_method_with_a_rather_long_name17h0123456789abcdefE";
const LONG_DEMANGLED: &str = "mycrate_with_a_long_name::some_module_with_a_long_name::AnotherTypeName::a_method_with_a_rather_long_name::h0123456789abcdef";

/// Two equal functions (one with a long Rust name, one with a C++ name), one that differs
/// only in a constant (a Rust v0 name), one with a `/` in its name, an import and exports.
fn module() -> Vec<u8> {
    let body = |k: i32| {
        format!(
            "(param i32 i32) (result i32)
               local.get 0 local.get 1 i32.mul i32.const {k} i32.add
               local.get 1 i32.xor local.get 0 i32.const 3 i32.shl i32.or
               call $imported"
        )
    };
    let wat = format!(
        r#"(module
             (import "env" "f" (func $imported (param i32) (result i32)))
             (memory 1)
             (func ${LONG} (export "a") {b7})
             (func $_ZN3foo3barIiEEvT_ (export "b") {b7})
             (func $_RNvCs1234_7mycrate3foo (export "c") {b9})
             (func $a/b (export "d") (result i32) i32.const 1))"#,
        b7 = body(7),
        b9 = body(9),
    );
    wat::parse_str(wat).expect("valid wat")
}

#[test]
fn report_names_families_in_full_and_adds_up() {
    let p = write("m.wasm", &module());
    let f = p.to_str().unwrap();
    let (code, out, err) = mergelift(&["report", "--json", "--top", "100", f]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (code, out, err) = mergelift(&["size", "--json", f]);
    assert_eq!(code, 0, "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    let saved = s["code_bytes_before"].as_i64().unwrap() - s["code_bytes_after"].as_i64().unwrap();
    assert_eq!(r["saved_bytes"].as_i64().unwrap(), saved);
    let families = r["families"].as_array().unwrap();
    let sum: i64 = families
        .iter()
        .map(|f| f["saved_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(sum + r["other_saved_bytes"].as_i64().unwrap(), saved);
    // The equal functions are one family, under their demangled names: the long one in full.
    let names: Vec<Vec<&str>> = families
        .iter()
        .map(|f| {
            (f["members"].as_array().unwrap().iter())
                .map(|m| m["name"].as_str().unwrap())
                .collect()
        })
        .collect();
    let fam = names
        .iter()
        .find(|n| n.contains(&LONG_DEMANGLED))
        .unwrap_or_else(|| panic!("no family with {LONG_DEMANGLED}: {names:?}"));
    assert!(fam.contains(&"void foo::bar<int>(int)"), "{fam:?}");
    // Every function the module defines, and what wasmtime adds, is reported by kind.
    let all: Vec<&str> = (r["largest"].as_array().unwrap().iter())
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        all.contains(&"a/b") && all.contains(&"mycrate::foo"),
        "{all:?}"
    );
    let kinds: Vec<&str> = (r["kinds"].as_array().unwrap().iter())
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"function") && kinds.contains(&"trampoline"),
        "{kinds:?}"
    );
    let functions = &r["kinds"].as_array().unwrap()[0];
    assert_eq!(functions["functions"], 4);
    // --kind function: only the program's functions and their families.
    let (code, out, err) =
        mergelift(&["report", "--json", "--kind", "function", "--top", "100", f]);
    assert_eq!(code, 0, "{err}");
    let k: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        (k["largest"].as_array().unwrap().iter()).all(|f| f["kind"] == "function"),
        "{k}"
    );
    assert_eq!(k["largest"].as_array().unwrap().len(), 4);
    assert!(
        (k["families"].as_array().unwrap().iter()).all(|f| f["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["kind"] == "function"))
    );
}

#[test]
fn a_name_two_functions_share_keeps_their_indices() {
    // (`wat` refuses two functions of one name: name them apart, then give both one name
    // in the name section)
    let wat = r#"(module
        (func $dup1 (export "a") (param i32) (result i32) local.get 0 i32.const 1 i32.add)
        (func $dup2 (export "b") (param i32) (result i32) local.get 0 i32.const 2 i32.mul))"#;
    let mut bytes = wat::parse_str(wat).unwrap();
    let (a, b) = (b"dup1", b"dup2");
    let at = bytes.windows(4).position(|w| w == b).unwrap();
    bytes[at..at + 4].copy_from_slice(a);
    let p = write("dup.wasm", &bytes);
    let (code, out, err) = mergelift(&["report", "--json", "--top", "100", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut names: Vec<&str> = (r["largest"].as_array().unwrap().iter())
        .filter(|f| f["kind"] == "function")
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["dup1 [wasm function 0]", "dup1 [wasm function 1]"]);
}

#[test]
fn opt_and_size_read_wasm() {
    let p = write("m2.wasm", &module());
    let f = p.to_str().unwrap();
    let (code, out, err) = mergelift(&["opt", "--emit", "clif", f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("function u0:0("), "{out}");
    let (code, out, err) = mergelift(&["size", f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("code bytes"), "{out}");
}

#[test]
fn malformed_modules_get_one_error_line() {
    let good = module();
    let component = wat::parse_str("(component)").unwrap();
    let shared = wat::parse_str("(module (memory 1 1 shared))").unwrap();
    let mut bad_section = good.clone();
    bad_section.extend_from_slice(&[0x42, 0x01, 0x00]);
    let cases: [(&str, &[u8]); 7] = [
        ("empty.wasm", b""),
        ("truncated.wasm", &good[..good.len() / 2]),
        ("header.wasm", b"\0asm\x01\0"),
        ("text.wasm", b"this is not wasm\n"),
        ("section.wasm", &bad_section),
        ("component.wasm", &component),
        ("shared.wasm", &shared),
    ];
    // Cut at every seventh length (a section whose stated size runs past the end included):
    // a cut at a section's end is a valid module (exit 0), any other an error.
    let cuts: Vec<(String, Vec<u8>)> = (1..good.len())
        .step_by(7)
        .map(|n| (format!("cut{n}.wasm"), good[..n].to_vec()))
        .collect();
    for (name, bytes) in &cuts {
        let p = write(name, bytes);
        let (code, out, err) = mergelift(&["report", p.to_str().unwrap()]);
        assert!(code == 0 || code == 2, "{name}: {out}{err}");
        assert!(
            !err.contains("panicked") && !err.contains("internal error"),
            "{name}: {err}"
        );
        assert_eq!(err.lines().count(), (code == 2) as usize, "{name}: {err}");
    }
    for (name, bytes) in cases {
        let p = write(name, bytes);
        for cmd in ["report", "size", "opt"] {
            let (code, out, err) = mergelift(&[cmd, p.to_str().unwrap()]);
            assert_eq!(code, 2, "{name} {cmd}: {out}{err}");
            assert!(!err.contains("panicked"), "{name} {cmd}: {err}");
            assert_eq!(err.lines().count(), 1, "{name} {cmd}: {err}");
            assert!(
                err.starts_with("error: ") && err.contains(name),
                "{name} {cmd}: {err}"
            );
        }
    }
    // A .wasm file is a module of its own: two at once are refused, by every command alike.
    let (a, b) = (write("one.wasm", &good), write("two.wasm", &good));
    for cmd in ["report", "size", "opt"] {
        let (code, out, err) = mergelift(&[cmd, a.to_str().unwrap(), b.to_str().unwrap()]);
        assert_eq!(code, 2, "{cmd}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(err.contains("give one .wasm file"), "{cmd}: {err}");
    }
}

/// A `.wasm` module on standard input (`-`) reads as the file does.
#[test]
fn a_module_on_standard_input_is_read_as_the_file() {
    use std::io::Write;
    let bytes = module();
    let p = write("stdin.wasm", &bytes);
    let (code, from_file, err) = mergelift(&["report", "--json", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(["report", "--json", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), from_file);
}

/// A module with what wasmtime adds to a module's own functions: array-to-wasm trampolines
/// (exports), a wasm-to-array trampoline (an import), builtins (`memory.grow`, `table.grow`,
/// `memory.fill`), start-up code (a global set from an import, passive element segments); a
/// name section; code Cranelift removes before code generation (unreachable blocks,
/// constant block parameters) and aliases.
fn module_with_everything() -> Vec<u8> {
    let wat = r#"(module
        (import "env" "log" (func $log (param i32)))
        (import "env" "base" (global $base i32))
        (global $g (mut i32) (global.get $base))
        (memory 1)
        (table $t 2 funcref)
        (elem $passive func $square $grow)
        (func $square (export "square") (param i32) (result i32)
          local.get 0 local.get 0 i32.mul)
        (func $grow (export "grow") (param i32) (result i32)
          local.get 0 memory.grow
          ref.null func i32.const 1 table.grow $t drop
          i32.const 0 i32.const 7 i32.const 16 memory.fill)
        (func $loop (export "loop") (param i32) (result i32) (local i32 i32)
          i32.const 5 local.set 2
          block $out
            loop $again
              local.get 0 i32.eqz br_if $out
              local.get 1 local.get 2 i32.add local.set 1
              local.get 0 i32.const 1 i32.sub local.set 0
              br $again
            end
          end
          local.get 1)
        (func $dead (export "dead") (param i32) (result i32)
          local.get 0 if (result i32)
            unreachable
          else
            local.get 0 call $log i32.const 3
          end
          return
          i32.const 9)
        (func $global (result i32) global.get $g global.get $base i32.add))"#;
    wat::parse_str(wat).expect("valid wat")
}

/// The functions of a module's text (wasmtime's `--emit-clif` form), by symbol, in order.
fn functions_of(text: &str) -> Vec<(String, String)> {
    text.split(";; Intermediate Representation of function <")
        .skip(1)
        .map(|f| {
            let (symbol, body) = f.split_once(">:\n").expect("a symbol comment");
            (symbol.to_string(), body.to_string())
        })
        .collect()
}

/// The IR read in process is what wasmtime 48 writes with `emit_clif`, function by function
/// (module functions, trampolines, builtins, start-up code, names from the name section),
/// on one thread and on several.
#[test]
fn in_process_ir_is_what_emit_clif_writes() {
    use mergelift_tools::wasm::{wasm_to_clif_by_files, wasm_to_clif_captured, Translation};
    let bytes = module_with_everything();
    let reference = functions_of(&wasm_to_clif_by_files(&bytes, 1).unwrap());
    let symbols: Vec<&str> = reference.iter().map(|(s, _)| s.as_str()).collect();
    for kind in [
        "wasm[0]::function[1]::square",
        "wasm[0]::function[4]::dead",
        "wasmtime_builtin_ref_func",
        "wasm[0]::array_to_wasm_trampoline[1]",
        "::wasm_to_array_trampoline",
        "wasmtime_builtin_memory_grow",
        "wasmtime_builtin_table_grow",
        "wasmtime_builtin_memory_fill",
        "module_start[0]::Wasm",
        "module_start[0]::Array",
    ] {
        assert!(
            symbols.iter().any(|s| s.contains(kind)),
            "{kind} not among {symbols:?}"
        );
    }
    // What Cranelift removes before code generation is gone from the reference too.
    let dead = &reference[symbols.iter().position(|s| s.ends_with("::dead")).unwrap()].1;
    assert!(!dead.contains("iconst.i32 9"), "{dead}");
    for threads in [1, 3] {
        let t = Translation {
            threads,
            progress: None,
        };
        let captured = wasm_to_clif_captured(&bytes, &t)
            .unwrap()
            .expect("the capture runs in this process");
        let captured = functions_of(&captured);
        assert_eq!(captured.len(), reference.len(), "{threads} threads");
        for ((s1, b1), (s2, b2)) in reference.iter().zip(&captured) {
            assert_eq!(s1, s2, "{threads} threads");
            assert_eq!(b1, b2, "{s1}, {threads} threads");
        }
    }
}

/// `size` and `report` print the same on one thread as on several, every format (size's
/// timings aside); `--quiet` changes nothing on stdout, and with stderr not a terminal no
/// progress is drawn.
#[test]
fn output_is_the_same_on_any_number_of_threads() {
    let p = write("threads.wasm", &module_with_everything());
    let f = p.to_str().unwrap();
    let without_times = |cmd: &str, out: String| -> String {
        if cmd != "size" {
            return out;
        }
        if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&out) {
            for k in ["time_ms", "pipeline_ms", "ratio"] {
                v.as_object_mut().unwrap().remove(k);
            }
            return v.to_string();
        }
        (out.lines())
            .filter(|l| !l.starts_with("time ") && !l.starts_with("pipeline / plain"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for args in [
        &["size", "--json"][..],
        &["size"],
        &["report", "--json"],
        &["report", "--csv"],
        &["report"],
    ] {
        let run = |extra: &[&str]| {
            let mut a = args.to_vec();
            a.extend_from_slice(extra);
            a.push(f);
            let (code, out, err) = mergelift(&a);
            assert_eq!(code, 0, "{a:?}: {err}");
            assert_eq!(
                err, "",
                "{a:?}: nothing on stderr when it is not a terminal"
            );
            without_times(args[0], out)
        };
        let one = run(&["--threads", "1"]);
        assert!(!one.is_empty());
        assert_eq!(one, run(&["--threads", "4"]), "{args:?}");
        assert_eq!(one, run(&[]), "{args:?}: the default, every core");
        assert_eq!(one, run(&["--quiet", "--threads", "2"]), "{args:?}");
    }
}
