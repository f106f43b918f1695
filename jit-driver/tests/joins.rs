//! Lowering a join of many predecessors (the phi sources found through a table rather than
//! searched) gives each edge its own arguments, whatever order each phi lists its sources in:
//! the lowered function computes what the input did, under cranelift-interpreter.

use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_interpreter::environment::FunctionStore;
use cranelift_interpreter::interpreter::{Interpreter, InterpreterState};
use cranelift_interpreter::step::ControlFlow;
use jit_driver::{lift_function, lower_function, OriginalNames};
use midend::lir::{self, Opcode, Operand};

fn config() -> TargetFrontendConfig {
    TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    }
}

/// `%join(x)`: a `br_table` on `x` into `arms` blocks (and a default), each jumping to one
/// join with its own two arguments; the join returns `1000 * a + b`.
fn join_clif(arms: usize) -> String {
    let mut s = String::from("function %join(i32) -> i64 {\nblock0(v0: i32):\n");
    let targets: Vec<String> = (1..=arms).map(|k| format!("block{k}")).collect();
    s += &format!(
        "    br_table v0, block{}, [{}]\n",
        arms + 1,
        targets.join(", ")
    );
    for k in 1..=arms + 1 {
        s += &format!(
            "block{k}:\n    v{a} = iconst.i64 {x}\n    v{b} = iconst.i64 {y}\n    jump block{j}(v{a}, v{b})\n",
            a = 2 * k + 1,
            b = 2 * k + 2,
            x = 3 * k + 1,
            y = 7 * k % 11,
            j = arms + 2,
        );
    }
    let v = 2 * (arms + 2) + 10;
    s += &format!(
        "block{j}(v{v}: i64, v{w}: i64):\n    v{c} = iconst.i64 1000\n    v{d} = imul v{v}, v{c}\n    v{e} = iadd v{d}, v{w}\n    return v{e}\n}}\n",
        j = arms + 2,
        w = v + 1,
        c = v + 2,
        d = v + 3,
        e = v + 4,
    );
    s
}

fn run(f: &Function, x: i32) -> i64 {
    let mut store = FunctionStore::default();
    store.add(f.name.to_string(), f);
    let mut interp = Interpreter::new(InterpreterState::default().with_function_store(store));
    match interp.call_by_name("%join", &[DataValue::I32(x)]).unwrap() {
        ControlFlow::Return(rs) => match rs[0] {
            DataValue::I64(v) => v,
            ref other => panic!("returned {other}"),
        },
        _ => panic!("did not return"),
    }
}

#[test]
fn joins_of_many_predecessors_lower_to_the_same_function() {
    for arms in [3, 15, 16, 17, 40, 200] {
        let src = cranelift_reader::parse_functions(&join_clif(arms))
            .unwrap()
            .remove(0);
        let mut m = lir::Module::new();
        let id = lift_function(&mut m, &src, lir::Linkage::Export).unwrap();
        let want: Vec<i64> = (0..arms as i32 + 3).map(|x| run(&src, x)).collect();
        // As lifted (every phi lists its sources in one order), then with the second phi's
        // sources reversed and then rotated (the table's place is wrong for it).
        for variant in 0..3 {
            if variant > 0 {
                let f = &mut m.functions[id];
                let join = *f.layout.last().unwrap();
                let phis: Vec<lir::Inst> = f
                    .block_insts(join)
                    .iter()
                    .copied()
                    .filter(|&i| f.insts[i].opcode == Opcode::Phi)
                    .collect();
                assert_eq!(phis.len(), 2);
                let ops = f.operands(phis[1]).to_vec();
                let mut pairs: Vec<&[Operand]> = ops.chunks(2).collect();
                if variant == 1 {
                    pairs.reverse();
                } else {
                    pairs.rotate_left(1);
                }
                let flat: Vec<Operand> = pairs.concat();
                f.set_operands(phis[1], &flat);
            }
            let lowered = lower_function(&m, &m.functions[id], &mut OriginalNames, config())
                .unwrap_or_else(|e| panic!("{arms} arms, variant {variant}: {e}"));
            let got: Vec<i64> = (0..arms as i32 + 3).map(|x| run(&lowered, x)).collect();
            assert_eq!(got, want, "{arms} arms, variant {variant}");
        }
    }
}
