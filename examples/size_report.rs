//! Code size per module of the wasm corpus, without and with Mergelift's passes: prints the
//! table of BENCHMARKS.md and writes the chart `docs/code-size.svg`.
//!
//! `cargo run --release --example size_report [-- PASSES [OPT_LEVEL [CORPUS_DIR]]]`
//! (defaults: `merge,lvn`, `none`, `../shared/corpus/wasm`).

use mergelift::tools::OptLevel;
use mergelift::MergeConfig;
use mergelift_tools::input::{parse_clif, read_text};
use mergelift_tools::size::{measure, SizeOptions, SizeReport};
use std::fmt::Write as _;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let passes = args.get(1).cloned().unwrap_or_else(|| "merge,lvn".into());
    let opt = OptLevel::parse(args.get(2).map_or("none", |s| s.as_str()))
        .ok_or("opt level must be none or speed")?;
    let dir = args
        .get(3)
        .cloned()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/wasm").into());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{dir}: {e}"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "clif"))
        .collect();
    files.sort();
    let mut rows: Vec<(String, SizeReport)> = Vec::new();
    for p in &files {
        let t = Instant::now();
        let text = read_text(p)?;
        let file = parse_clif(p, &text)?;
        let opts = SizeOptions {
            config: MergeConfig::with_passes(&mergelift::parse_pass_list(&passes)?),
            opt_level: Some(opt),
            object: false,
            ..Default::default()
        };
        let r = measure(
            &[file],
            &opts,
            t.elapsed().as_secs_f64() * 1e3,
            |_, _, _| {},
        )?;
        rows.push((p.file_stem().unwrap().to_string_lossy().into_owned(), r));
    }
    println!("passes `{passes}`, opt level {}\n", opt.name());
    println!("| module | functions | merged (alias/replace/thunk) | LIR insts before → after | code bytes before → after | saving | lift+lower / compile |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let (mut tb, mut ta, mut tll, mut tc) = (0usize, 0usize, 0.0, 0.0);
    for (name, r) in &rows {
        let t = |k: &str| {
            r.time_ms
                .iter()
                .find(|(n, _)| n == k)
                .map_or(0.0, |(_, v)| *v)
        };
        let ll = t("lift") + t("lower");
        tb += r.code_bytes_before;
        ta += r.code_bytes_after;
        tll += ll;
        tc += t("compile_before");
        println!(
            "| {name} | {} | {} ({}/{}/{}) | {} → {} | {} → {} | {:.2}% | {:.1}% |",
            r.functions_in,
            r.merged,
            r.aliased,
            r.replaced,
            r.thunked,
            r.lir_insts_before,
            r.lir_insts_after,
            r.code_bytes_before,
            r.code_bytes_after,
            100.0 * (1.0 - r.code_bytes_after as f64 / r.code_bytes_before as f64),
            100.0 * ll / t("compile_before")
        );
    }
    println!(
        "| **total** | | | | {tb} → {ta} | {:.2}% | {:.1}% |",
        100.0 * (1.0 - ta as f64 / tb as f64),
        100.0 * tll / tc
    );
    let svg = chart(&rows, &passes);
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/code-size.svg");
    std::fs::write(out, svg)?;
    eprintln!("wrote {out}");
    Ok(())
}

/// A grouped bar chart: code bytes before (grey) and after (blue) per module.
fn chart(rows: &[(String, SizeReport)], passes: &str) -> String {
    let (w, h, left, bottom, top) = (900.0, 420.0, 70.0, 90.0, 40.0);
    let max = rows
        .iter()
        .map(|(_, r)| r.code_bytes_before.max(r.code_bytes_after))
        .max()
        .unwrap_or(1) as f64;
    let plot_h = h - bottom - top;
    let slot = (w - left - 20.0) / rows.len().max(1) as f64;
    let bar = slot * 0.35;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="24" font-size="15">Machine-code bytes per wasm module, before and after Mergelift ({passes})</text>"#
    );
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let y = top + plot_h - plot_h * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{:.0}k</text>"##,
            w - 20.0,
            left - 6.0,
            y + 4.0,
            v / 1000.0
        );
    }
    for (i, (name, r)) in rows.iter().enumerate() {
        let x = left + slot * i as f64 + slot * 0.15;
        for (j, (v, color)) in [
            (r.code_bytes_before, "#9e9e9e"),
            (r.code_bytes_after, "#1e88e5"),
        ]
        .into_iter()
        .enumerate()
        {
            let bh = plot_h * v as f64 / max;
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{bar:.1}" height="{bh:.1}" fill="{color}"><title>{name}: {v} bytes</title></rect>"#,
                x + bar * j as f64,
                top + plot_h - bh
            );
        }
        let saving = 100.0 * (1.0 - r.code_bytes_after as f64 / r.code_bytes_before.max(1) as f64);
        let cx = x + bar;
        let _ = write!(
            s,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="11">-{saving:.1}%</text>"#,
            top + plot_h - plot_h * r.code_bytes_before as f64 / max - 4.0
        );
        let _ = write!(
            s,
            r#"<text transform="translate({cx:.1},{:.1}) rotate(30)" font-size="11">{name}</text>"#,
            top + plot_h + 14.0
        );
    }
    let _ = write!(
        s,
        r##"<rect x="{:.1}" y="30" width="12" height="12" fill="#9e9e9e"/><text x="{:.1}" y="40">before</text><rect x="{:.1}" y="30" width="12" height="12" fill="#1e88e5"/><text x="{:.1}" y="40">after</text></svg>"##,
        w - 190.0,
        w - 174.0,
        w - 110.0,
        w - 94.0
    );
    s
}
