//! Reading `.clif` files: the streaming reader (`open_clif`, one function at a time) gives
//! what the whole-file parser gives, with the same header, calling conventions and errors
//! (naming the file's line numbers).

use mergelift_tools::input::{open_clif, parse_clif, read_text};
use std::path::{Path, PathBuf};

fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Every function, streamed, prints as the whole-file parse prints it; header facts agree.
fn assert_stream_matches(path: &Path) {
    let text = read_text(path).unwrap();
    let whole = parse_clif(path, &text);
    let mut stream = match open_clif(path) {
        Ok(s) => s,
        Err(e) => {
            assert!(
                whole.is_err(),
                "{}: stream fails ({e}), whole parse does not",
                path.display()
            );
            return;
        }
    };
    let mut streamed = Vec::new();
    let mut err = None;
    while let Some(f) = stream.next_function() {
        match f {
            Ok(f) => streamed.push(f.display().to_string()),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    match whole {
        Ok(whole) => {
            assert!(err.is_none(), "{}: {err:?}", path.display());
            let whole_text: Vec<String> = whole
                .functions
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            assert_eq!(streamed, whole_text, "{}", path.display());
            assert_eq!(stream.file.headerless, whole.headerless);
            assert_eq!(stream.file.targets.len(), whole.targets.len());
            assert_eq!(
                mergelift_tools::input::isa_signature(&stream.file),
                mergelift_tools::input::isa_signature(&whole)
            );
        }
        Err(e) => assert_eq!(err.as_deref(), Some(e.as_str()), "{}", path.display()),
    }
}

const TWO: &str = "test run
set opt_level=none
target x86_64

; a comment before the first function
function %a(i32) -> i32 {
block0(v0: i32):
    return v0
}
; run: %a(1) == 1

function %b(i64) -> i64 {
    sig0 = (i64) -> i64
    fn0 = %a(i64) -> i64
block0(v0: i64):
    v1 = call fn0(v0)
    return v1
}
";

#[test]
fn streamed_functions_equal_the_whole_parse() {
    let p = write_temp("two.clif", TWO);
    assert_stream_matches(&p);
    // `test run` files default to the host's calling convention, others to `fast`.
    let mut s = open_clif(&p).unwrap();
    let f = s.next_function().unwrap().unwrap();
    assert_eq!(f.signature.call_conv.to_string(), "system_v");
    let q = write_temp("fast.clif", &TWO.replace("test run\n", ""));
    let mut s = open_clif(&q).unwrap();
    let f = s.next_function().unwrap().unwrap();
    assert_eq!(f.signature.call_conv.to_string(), "fast");
    assert_stream_matches(&q);
}

#[test]
fn stream_errors_name_the_file_line() {
    // An error in the second function: its line in the file, quoted.
    let bad = TWO.replace("v1 = call fn0(v0)", "v1 = frobnicate v0");
    let p = write_temp("bad.clif", &bad);
    let mut s = open_clif(&p).unwrap();
    assert!(s.next_function().unwrap().is_ok());
    let e = s.next_function().unwrap().unwrap_err();
    assert!(e.contains("bad.clif:16:"), "{e}");
    assert!(e.contains("16 | "), "{e}");
    assert!(
        s.next_function().is_none(),
        "the stream ends after an error"
    );
    assert_stream_matches(&p);
    // Entities numbered beyond the budget: refused before cranelift-reader allocates them.
    let huge = TWO.replace("return v0\n}", "return v4000000000\n}");
    let p = write_temp("huge.clif", &huge);
    let mut s = open_clif(&p).unwrap();
    let e = s.next_function().unwrap().unwrap_err();
    assert!(
        e.contains("huge.clif:8:") && e.contains("numbered beyond"),
        "{e}"
    );
    // Not UTF-8: the line is named.
    let mut bytes = TWO.as_bytes().to_vec();
    bytes.extend_from_slice(b"function %c() {\nblock0:\n  return ; \xff\n}\n");
    let p = write_temp("latin.clif", "");
    std::fs::write(&p, bytes).unwrap();
    let mut s = open_clif(&p).unwrap();
    assert!(s.next_function().unwrap().is_ok());
    assert!(s.next_function().unwrap().is_ok());
    let e = s.next_function().unwrap().unwrap_err();
    assert!(e.contains("latin.clif:21: cannot read: not UTF-8"), "{e}");
}

/// On every run test and wasm module of the corpus (when present): the same functions.
#[test]
fn streamed_corpus_equals_the_whole_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus");
    if !root.exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but no corpus at {}",
            root.display()
        );
        eprintln!("no corpus at {}: skipped", root.display());
        return;
    }
    let files = mergelift_tools::input::collect_files(&[root.join("runtests")]).unwrap();
    assert!(files.len() > 100);
    for f in &files {
        assert_stream_matches(f);
    }
    // Two wasm modules (the largest take long in a debug build).
    for name in ["richards.clif", "quicksort.clif"] {
        assert_stream_matches(&root.join("wasm").join(name));
    }
}
