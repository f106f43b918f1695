//! `mergelift size --first pipeline` measures the same thing as the default order: the two
//! sides are independent modules, so which one compiles first in the process changes only
//! the times (the first runs in a heap the process has not used yet).

use mergelift_tools::gen::{generate, GenOptions};
use mergelift_tools::input::parse_clif;
use mergelift_tools::size::{measure, Sides, SizeOptions, SizeReport};
use std::path::Path;

fn size(text: &str, sides: Sides) -> SizeReport {
    let file = parse_clif(Path::new("generated.clif"), text).unwrap();
    let opts = SizeOptions {
        object: true,
        sides,
        ..Default::default()
    };
    let mut phases = Vec::new();
    let r = measure(&[file], &opts, 0.0, |phase, _, _| {
        phases.push(phase.to_string())
    })
    .unwrap();
    let expected = match sides {
        Sides::PlainFirst => ["compile_before", "pipeline"],
        Sides::PipelineFirst => ["pipeline", "compile_before"],
    };
    assert_eq!(phases, expected, "the sides run in the order asked for");
    assert_eq!(r.sides, sides);
    let first = r.to_json()["first"].as_str().unwrap().to_string();
    assert_eq!(first, expected[0].replace("compile_before", "plain"));
    r
}

#[test]
fn either_order_measures_the_same_code() {
    let text = generate(&GenOptions {
        functions: 300,
        dup_ratio: 0.3,
        near_ratio: 0.2,
        edit_ratio: 0.0,
        seed: 77,
    })
    .text;
    let a = size(&text, Sides::PlainFirst);
    let b = size(&text, Sides::PipelineFirst);
    assert!(a.merged > 0 && a.code_bytes_after < a.code_bytes_before);
    for (what, x, y) in [
        (
            "code bytes before",
            a.code_bytes_before,
            b.code_bytes_before,
        ),
        ("code bytes after", a.code_bytes_after, b.code_bytes_after),
        ("merged", a.merged, b.merged),
        ("functions out", a.functions_out, b.functions_out),
        ("lowered", a.lowered, b.lowered),
        ("not lifted", a.not_lifted, b.not_lifted),
    ] {
        assert_eq!(x, y, "{what}");
    }
    assert_eq!(a.object, b.object, "the same object file");
    for r in [&a, &b] {
        assert!(r.time("compile_before") > 0.0 && r.time("compile_after") > 0.0);
        assert!(r.pipeline_ms() > r.time("compile_after"));
    }
}
