//! Where a lifted module's memory goes: the heap blocks of its LIR functions by table, their
//! bytes, and what glibc's malloc reserves for them (8 bytes of header, 16-byte granules,
//! 32 bytes at least), next to the CLIF text's size. The functions are shrunk first, as
//! `mergelift opt` holds them; with `--as-lifted`, they are measured as the lifter leaves
//! them (with the room it reserves), which is what a lift writes to fresh memory.
//!
//! `cargo run --release -p mergelift-tools --example lir_memory -- [--as-lifted] FILE.clif`

use jit_driver::lift_functions;
use std::collections::BTreeMap;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let as_lifted = args.iter().any(|a| a == "--as-lifted");
    let path = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .expect("usage: lir_memory [--as-lifted] FILE.clif")
        .clone();
    let text = std::fs::read_to_string(&path).unwrap();
    let funcs = cranelift_reader::parse_functions(&text).unwrap();
    let mut m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    drop(funcs);
    let n = m.functions.len();
    let mut by: BTreeMap<&'static str, (usize, usize, usize)> = BTreeMap::new();
    for f in m.functions.values_mut() {
        if !as_lifted {
            f.shrink_to_fit();
        }
        f.heap_blocks(|name, bytes| {
            let e = by.entry(name).or_default();
            e.0 += 1;
            e.1 += bytes;
            e.2 += (bytes + 8).div_ceil(16).max(2) * 16;
        });
    }
    let header = std::mem::size_of::<midend::lir::Function>();
    println!(
        "{path}: {n} functions, {} bytes of text ({:.0} per function)",
        text.len(),
        text.len() as f64 / n as f64
    );
    println!(
        "{:<16} {:>8} {:>10} {:>12} {:>12}",
        "table", "blocks/fn", "bytes/fn", "malloc/fn", "MB"
    );
    let (mut tb, mut tm, mut tc) = (0, 0, 0);
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .2));
    for (name, (count, bytes, malloc)) in rows {
        println!(
            "{name:<16} {:>8.2} {:>10.1} {:>12.1} {:>12.1}",
            count as f64 / n as f64,
            bytes as f64 / n as f64,
            malloc as f64 / n as f64,
            malloc as f64 / 1e6
        );
        tb += bytes;
        tm += malloc;
        tc += count;
    }
    println!(
        "{:<16} {:>8.2} {:>10.1} {:>12.1} {:>12.1}",
        "header",
        1.0,
        header as f64,
        header as f64,
        (header * n) as f64 / 1e6
    );
    println!(
        "{:<16} {:>8.2} {:>10.1} {:>12.1} {:>12.1}",
        "total",
        tc as f64 / n as f64,
        (tb + header * n) as f64 / n as f64,
        (tm + header * n) as f64 / n as f64,
        (tm + header * n) as f64 / 1e6
    );
}
