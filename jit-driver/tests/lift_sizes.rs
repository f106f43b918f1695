//! A lift leaves no room unused in the tables it cannot size in advance: the operand pool is
//! cut to its length and every block holds exactly its instructions, so `shrink_to_fit` finds
//! nothing to give back there (what it still finds is the room of edge-split blocks, which
//! grow as appending does), nor in the memory flags. Unused room would cost a large module's
//! lift fresh memory.

use cranelift_codegen::ir::Function;
use jit_driver::{lift_function_with, lift_functions, LiftContext};
use midend::lir::{self, module_to_string};
use std::collections::BTreeMap;

fn parse(text: &str) -> Vec<Function> {
    cranelift_reader::parse_functions(text).unwrap()
}

/// Heap bytes by table.
fn tables(f: &lir::Function) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    f.heap_blocks(|name, bytes| *m.entry(name).or_insert(0) += bytes);
    m
}

/// Blocks with phis, loads and stores through folded addresses, calls, a loop (every value
/// defined, no edge split; `lift_exact.rs` lifts it too).
const PLAIN: &str = include_str!("inputs/plain.clif");

/// One block reaches another twice with different arguments: the lifter splits an edge.
const SPLIT: &str = "
function %split(i32, i64, i64) -> i64 {
block0(v0: i32, v1: i64, v2: i64):
    brif v0, block1(v1), block1(v2)
block1(v3: i64):
    return v3
}
";

#[test]
fn lifted_operand_pools_and_block_lists_have_no_spare_room() {
    let funcs = parse(PLAIN);
    let mut m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    assert_eq!(m.functions.len(), 2);
    assert!(m.functions.values().any(|f| f.sigs.len() == 1));
    for f in m.functions.values_mut() {
        let before = tables(f);
        assert!(before["operand_pool"] > 0);
        // Without split edges the block lists are the instructions in order, with no room
        // to spare.
        assert_eq!(before["inst_order"], f.insts.len() * 4, "{}", f.name);
        let listed: Vec<u32> = (f.layout.iter())
            .flat_map(|&b| f.block_insts(b).iter().map(|i| i.as_u32()))
            .collect();
        assert_eq!(
            listed,
            (0..f.insts.len() as u32).collect::<Vec<_>>(),
            "{}",
            f.name
        );
        f.shrink_to_fit();
        let after = tables(f);
        assert_eq!(before["operand_pool"], after["operand_pool"], "{}", f.name);
        assert_eq!(before["inst_order"], after["inst_order"], "{}", f.name);
        // Memory flags and call signatures are side tables (`ThinMap`): a heap block when
        // used, none while empty, before and after.
        assert_eq!(f.memflags.is_empty(), f.name != "loops");
        assert_eq!(
            before.contains_key("memflags"),
            !f.memflags.is_empty(),
            "{}",
            f.name
        );
        assert_eq!(
            after.contains_key("memflags"),
            !f.memflags.is_empty(),
            "{}",
            f.name
        );
        assert!(f.sigs.len() <= 1, "{}", f.name);
        assert_eq!(
            before.contains_key("sigs"),
            !f.sigs.is_empty(),
            "{}",
            f.name
        );
    }
}

#[test]
fn only_split_blocks_leave_room_in_the_block_lists() {
    let funcs = parse(SPLIT);
    let mut m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    let f = m.functions.values_mut().next().unwrap();
    // block0, block1 and the split block.
    assert_eq!(f.layout.len(), 3);
    let placed: usize = f.layout.iter().map(|&b| f.block_insts(b).len()).sum();
    let before = tables(f);
    f.shrink_to_fit();
    let after = tables(f);
    assert_eq!(after["inst_order"], placed * 4);
    assert!(before["inst_order"] > after["inst_order"]);
    assert_eq!(before["operand_pool"], after["operand_pool"]);
}

#[test]
fn a_reused_context_lifts_as_a_fresh_one() {
    // The operand pool is built in memory the context keeps. A function that fails after its
    // instructions are lifted (a branch to the entry block, found when phis are filled) takes
    // that memory with it; the lifts after it must not notice, and no lift sees what an
    // earlier one left there (same LIR, same tables).
    let text = format!(
        "{PLAIN}{SPLIT}
function %to_entry(i64) -> i64 {{
block0(v0: i64):
    v1 = iconst.i64 1
    v2 = iadd v0, v1
    jump block0(v2)
}}
"
    );
    let funcs = parse(&text);
    let order = [1, 0, 3, 2, 1, 3, 0];
    let mut ctx = LiftContext::default();
    let mut failed = 0;
    for &k in &order {
        let f = &funcs[k];
        let mut reused = lir::Module::new();
        let mut fresh = lir::Module::new();
        let a = lift_function_with(&mut reused, f, lir::Linkage::Export, &mut ctx);
        let b = lift_function_with(&mut fresh, f, lir::Linkage::Export, &mut Default::default());
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert_eq!(module_to_string(&reused), module_to_string(&fresh));
                // Nothing of an earlier function left in the pool. (A signature's lists are
                // shared with the context's cache when it is kept, so they count as the
                // function's own only in the fresh lift: compared above, as text.)
                let own = |f: &lir::Function| {
                    let mut t = tables(f);
                    t.retain(|k, _| !k.starts_with("sig "));
                    t
                };
                assert_eq!(own(&reused.functions[a]), own(&fresh.functions[b]));
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string());
                assert!(a.to_string().contains("entry block"), "{a}");
                failed += 1;
            }
            (a, b) => panic!("function {k}: {a:?} against {b:?}"),
        }
    }
    assert_eq!(failed, 2);
}

#[test]
fn short_names_take_no_allocation() {
    // A function's name and its symbol's are held inline up to 24 bytes: naming a lifted
    // function costs no allocation, in a module of many small functions one in six.
    let long = "a_function_name_longer_than_twenty_four_bytes";
    let text = format!(
        "{PLAIN}
function u0:7(i64) -> i64 {{
block0(v0: i64):
    return v0
}}

function u4294967295:4294967295(i64) -> i64 {{
block0(v0: i64):
    return v0
}}

function %{long}(i64) -> i64 {{
block0(v0: i64):
    return v0
}}
"
    );
    let funcs = parse(&text);
    let m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
    let names: Vec<&str> = m.functions.values().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["callee", "loops", "u0:7", "u4294967295:4294967295", long]
    );
    for (id, f) in m.functions.iter() {
        let sym = &m.symbols[m.symbol_of(id).unwrap()];
        assert_eq!(sym.name, f.name);
        let heap = f.name.len() > 24;
        assert_eq!(f.name.is_heap_allocated(), heap, "{}", f.name);
        assert_eq!(sym.name.is_heap_allocated(), heap, "{}", f.name);
        assert_eq!(tables(f).contains_key("name"), heap, "{}", f.name);
    }
}
