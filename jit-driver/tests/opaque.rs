//! Opaque instructions: the LIR verifier's table of the Cranelift opcodes an opaque may
//! name agrees with Cranelift's own, and lowering never panics on a malformed opaque.

use cranelift_codegen::ir::instructions::{
    InstructionFormat as F, ResolvedConstraint, ValueTypeSet,
};
use cranelift_codegen::ir::{types, Opcode, Type};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_codegen::settings;
use jit_driver::opmap::{clif_type, lir_type};
use jit_driver::{lift_function, lower_function, OriginalNames};
use midend::lir::{self, effects, parse_module};
use midend::verifier::{
    opaque_opcodes, verify_function_for_lowering, verify_module_for_lowering, OpaqueFormat,
    OpaqueOpcode, TypeRule, ATOMIC_RMW_OPS,
};
use std::str::FromStr;

const LANES: [Type; 9] = [
    types::I8,
    types::I16,
    types::I32,
    types::I64,
    types::I128,
    types::F16,
    types::F32,
    types::F64,
    types::F128,
];

fn rebuildable(f: F) -> bool {
    matches!(
        f,
        F::NullAry
            | F::Unary
            | F::Binary
            | F::Ternary
            | F::UnaryImm
            | F::UnaryIeee16
            | F::UnaryIeee32
            | F::UnaryIeee64
            | F::UnaryConst
            | F::Shuffle
            | F::BinaryImm8
            | F::TernaryImm8
            | F::AtomicRmw
            | F::AtomicCas
            | F::LoadNoOffset
            | F::StoreNoOffset
            | F::Load
            | F::Store
            | F::IntAddTrap
            | F::CondTrap
            | F::IntCompare
            | F::FloatCompare
    )
}

/// Every fixed-size Cranelift type (scalars and vectors of up to 256 lanes).
fn all_types() -> Vec<Type> {
    (0..=8u32)
        .flat_map(|log2| LANES.iter().filter_map(move |l| l.by(1 << log2)))
        .collect()
}

/// Every fixed-size Cranelift type of a type set.
fn members(ts: ValueTypeSet) -> Vec<Type> {
    all_types()
        .into_iter()
        .filter(|&t| ts.contains(t))
        .collect()
}

/// The effects the lifter gives an opaque of this opcode.
fn effects_of(op: Opcode) -> u8 {
    let mut fx = 0;
    if op.can_load() {
        fx |= effects::LOAD;
    }
    if op.can_store() {
        fx |= effects::STORE;
    }
    if op.can_trap() {
        fx |= effects::TRAP;
    }
    if op.other_side_effects() || op.is_call() || op.format() == F::NullAry {
        fx |= effects::SIDE;
    }
    fx
}

fn ts_text(ts: ValueTypeSet) -> String {
    format!(
        "ts({:#x}, {:#x}, {:#x})",
        ts.lanes.0, ts.ints.0, ts.floats.0
    )
}

fn ty_text(t: Type) -> String {
    let l = lir_type(t.lane_type()).unwrap().to_string().to_uppercase();
    format!("Fixed(Type::{l}, {})", t.lane_count())
}

/// A type derived from the controlling type.
type Derive = fn(Type) -> Option<Type>;
/// A relation between an operand's type and the controlling type.
type Compare = fn(Type, Type) -> bool;

/// The rule giving an operand's or result's type from the controlling type, as table source.
fn classify(ctrl: &[Type], c: impl Fn(Type) -> ResolvedConstraint) -> String {
    let bound: Option<Vec<(Type, Type)>> = ctrl
        .iter()
        .map(|&t| match c(t) {
            ResolvedConstraint::Bound(b) => Some((t, b)),
            _ => None,
        })
        .collect();
    if let Some(pairs) = bound {
        let derived: [(&str, Derive); 7] = [
            ("Same", Some),
            ("LaneOf", |t| Some(t.lane_of())),
            ("AsTruthy", |t| Some(t.as_truthy())),
            ("HalfWidth", |t| t.half_width()),
            ("DoubleWidth", |t| t.double_width()),
            ("SplitLanes", |t| t.split_lanes()),
            ("MergeLanes", |t| t.merge_lanes()),
        ];
        if pairs.iter().all(|&(_, b)| b == pairs[0].1) && pairs.len() > 1 || ctrl.is_empty() {
            return ty_text(pairs.first().map_or_else(
                || match c(types::INVALID) {
                    ResolvedConstraint::Bound(b) => b,
                    _ => unreachable!(),
                },
                |p| p.1,
            ));
        }
        for (name, d) in derived {
            if pairs.iter().all(|&(t, b)| d(t) == Some(b)) {
                return name.into();
            }
        }
        return "Unchecked".into();
    }
    let sets: Vec<ValueTypeSet> = ctrl
        .iter()
        .filter_map(|&t| match c(t) {
            ResolvedConstraint::Free(s) => Some(s),
            _ => None,
        })
        .collect();
    if sets.len() == ctrl.len() && sets.iter().all(|s| *s == sets[0]) {
        return format!("In({})", ts_text(sets[0]));
    }
    if sets.len() == ctrl.len() {
        let all = all_types();
        let same_kind = |u: Type, t: Type| !u.is_vector() && u.is_int() == t.is_int();
        let rules: [(&str, Compare); 2] = [
            ("Narrower", |u, t| u.lane_bits() < t.lane_bits()),
            ("Wider", |u, t| u.lane_bits() > t.lane_bits()),
        ];
        for (name, rule) in rules {
            let fits = ctrl.iter().zip(&sets).all(|(&t, s)| {
                all.iter()
                    .all(|&u| s.contains(u) == (same_kind(u, t) && rule(u, t)))
            });
            if fits {
                return name.into();
            }
        }
    }
    "Unchecked".into()
}

/// Does resolving every operand and result type of `op` work for every member of its type
/// set? (`extract_vector` claims scalar controlling types but only resolves dynamic ones.)
fn resolves(op: Opcode) -> bool {
    let c = op.constraints();
    let ctrl = match c.ctrl_typeset() {
        Some(ts) => members(ts),
        None => vec![types::INVALID],
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let ok = std::panic::catch_unwind(|| {
        for &t in &ctrl {
            for n in 0..c.num_fixed_results() {
                c.result_type(n, t);
            }
            for n in 0..c.num_fixed_value_arguments() {
                c.value_argument_constraint(n, t);
            }
        }
    })
    .is_ok();
    std::panic::set_hook(hook);
    ok
}

/// The opcodes an opaque may name: rebuildable formats, no control flow, types resolvable.
fn carried(op: Opcode) -> bool {
    rebuildable(op.format())
        && !op.is_terminator()
        && !op.is_branch()
        && !op.is_call()
        && resolves(op)
}

/// The table of `midend::verifier`, as Rust source.
fn table_source() -> String {
    let mut rows = Vec::new();
    for &op in Opcode::all() {
        if !carried(op) {
            continue;
        }
        let c = op.constraints();
        let ctrl = c.ctrl_typeset();
        let ctrl_types = ctrl.map(members).unwrap_or_default();
        let free_ctrl = if ctrl.is_some() {
            ctrl_types.clone()
        } else {
            vec![types::INVALID]
        };
        let args: Vec<String> = (0..c.num_fixed_value_arguments())
            .map(|n| {
                if ctrl.is_none() {
                    match c.value_argument_constraint(n, types::INVALID) {
                        ResolvedConstraint::Bound(b) => ty_text(b),
                        ResolvedConstraint::Free(s) => format!("In({})", ts_text(s)),
                    }
                } else {
                    classify(&free_ctrl, |t| c.value_argument_constraint(n, t))
                }
            })
            .collect();
        let results: Vec<String> = (0..c.num_fixed_results())
            .map(|n| {
                if ctrl.is_none() {
                    ty_text(c.result_type(n, types::INVALID))
                } else {
                    classify(&ctrl_types, |t| {
                        ResolvedConstraint::Bound(c.result_type(n, t))
                    })
                }
            })
            .collect();
        rows.push(format!(
            "    op(\"{op}\", {:?}, {:#x}, {}, &[{}], &[{}]),",
            op.format(),
            effects_of(op),
            ctrl.map_or("None".into(), |t| format!("Some({})", ts_text(t))),
            args.join(", "),
            results.join(", ")
        ));
    }
    rows.sort();
    format!(
        "    #[rustfmt::skip]\n    pub(super) static OPAQUE_OPCODES: [OpaqueOpcode; {}] = [\n{}\n    ];\n",
        rows.len(),
        rows.iter().map(|r| format!("    {r}")).collect::<Vec<_>>().join("\n")
    )
}

#[test]
#[ignore]
fn print_opaque_table() {
    print!("{}", table_source());
}

/// The table in `midend::verifier` says what Cranelift says: the same opcodes, formats,
/// effects, controlling types, and operand and result types for every controlling type.
#[test]
fn opaque_table_matches_cranelift() {
    let regen =
        "regenerate it with `cargo test -p mergelift-jit-driver --test opaque -- --ignored \
                 --nocapture print_opaque_table`";
    let table = opaque_opcodes();
    let names: Vec<&str> = table.iter().map(|o| o.name).collect();
    let mut want: Vec<String> = Opcode::all()
        .iter()
        .filter(|o| carried(**o))
        .map(|o| o.to_string())
        .collect();
    want.sort();
    assert_eq!(names, want, "the opaque table lists other opcodes: {regen}");
    assert_eq!(
        ATOMIC_RMW_OPS as usize,
        cranelift_codegen::ir::AtomicRmwOp::all().len()
    );
    let mut lir_types: Vec<lir::Type> = all_types().into_iter().filter_map(lir_type).collect();
    lir_types.push(lir::Type::VOID);
    for o in table {
        let op = Opcode::from_str(o.name).unwrap();
        assert_eq!(
            format!("{:?}", o.format),
            format!("{:?}", op.format()),
            "{}",
            o.name
        );
        assert_eq!(o.effects, effects_of(op), "effects of {}: {regen}", o.name);
        let c = op.constraints();
        assert_eq!(o.args.len(), c.num_fixed_value_arguments(), "{}", o.name);
        assert_eq!(o.results.len(), c.num_fixed_results(), "{}", o.name);
        let ctrls: Vec<lir::Type> = match (o.ctrl, c.ctrl_typeset()) {
            (None, None) => vec![lir::Type::VOID],
            (Some(mine), Some(theirs)) => {
                for &t in &lir_types {
                    assert_eq!(
                        mine.contains(t),
                        t != lir::Type::VOID && theirs.contains(clif_type(t)),
                        "{} with controlling type {t}",
                        o.name
                    );
                }
                lir_types
                    .iter()
                    .copied()
                    .filter(|&t| mine.contains(t))
                    .collect()
            }
            _ => panic!("{} is polymorphic on one side only: {regen}", o.name),
        };
        for ctrl in ctrls {
            let cc = clif_type(ctrl);
            for (n, rule) in o.results.iter().enumerate() {
                let theirs = lir_type(c.result_type(n, cc));
                assert_eq!(
                    rule.resolve(ctrl),
                    theirs,
                    "{} result {n} for {ctrl}",
                    o.name
                );
            }
            for (n, rule) in o.args.iter().enumerate() {
                let theirs = c.value_argument_constraint(n, cc);
                for &t in lir_types.iter().filter(|t| !t.is_void()) {
                    let admitted = match theirs {
                        ResolvedConstraint::Bound(b) => clif_type(t) == b,
                        ResolvedConstraint::Free(s) => s.contains(clif_type(t)),
                    };
                    if *rule != TypeRule::Unchecked {
                        assert_eq!(
                            rule.admits(t, ctrl),
                            admitted,
                            "{} operand {n} of type {t} for {ctrl}",
                            o.name
                        );
                    }
                }
            }
        }
    }
}

fn config() -> TargetFrontendConfig {
    TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    }
}

/// Lower the only function of `src` (which must parse), without verifying it first.
fn lower(src: &str) -> Result<cranelift_codegen::ir::Function, jit_driver::Error> {
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    let (_, f) = m.live_functions().next().unwrap();
    lower_function(&m, f, &mut OriginalNames, config())
}

/// The opaque `inst` in a function whose operands `%vr0`, `%vr1`.. copy its parameters.
fn with_opaque(params: &[&str], inst: &str) -> String {
    let mut s = format!(
        "function @f({}) system_v export {{\nbb0:\n",
        params.join(", ")
    );
    for (k, p) in params.iter().enumerate() {
        s += &format!("    %vr{k} = copy.{p} arg{k}\n");
    }
    s + &format!("    {inst}\n    ret\n}}\n")
}

/// Malformed opaque instructions (missing controlling types, impossible immediates and their
/// kin): the verifier rejects each, and lowering (which may be reached without the verifier)
/// returns an error rather than panicking or building an instruction Cranelift cannot print.
#[test]
fn malformed_opaques_do_not_lower() {
    let cases: &[(&[&str], &str, &str)] = &[
        // "Polymorphic instruction must produce a result" when printed.
        (
            &[],
            "%vr9: i32 = opaque \"iconst\" [0x5] pure",
            "needs a controlling type",
        ),
        // "capacity overflow" from Vec::with_capacity.
        (
            &[],
            "%vr9: i8x16 = opaque.i8x16 \"vconst\" [0xffffffffffffffff] pure",
            "constant has 18446744073709551615 bytes",
        ),
        (
            &[],
            "%vr9: i8x16 = opaque.i8x16 \"vconst\" [0x10, 0x1] pure",
            "packs 16 bytes",
        ),
        (
            &[],
            "%vr9: i8x16 = opaque.i8x16 \"vconst\" pure",
            "byte length",
        ),
        (
            &["i8x16", "i8x16"],
            "%vr9: i8x16 = opaque \"shuffle\" [0x8, 0x1] pure %vr0, %vr1",
            "constant has 8 bytes",
        ),
        (
            &[],
            "%vr9: i32 = opaque.i32 \"iconst\" pure",
            "takes 1 immediate(s), found 0",
        ),
        (
            &[],
            "%vr9: i8 = opaque.i8 \"iconst\" [0x100] pure",
            "does not fit i8",
        ),
        (
            &[],
            "%vr9: f16 = opaque \"f16const\" [0x10000] pure",
            "does not fit 16 bits",
        ),
        (
            &[],
            "opaque.i32 \"iconst\" [0x1] pure",
            "defines 0 result(s)",
        ),
        (
            &["i32"],
            "%vr9: i32, %vr8: i32 = opaque.i32 \"iadd\" pure %vr0, %vr0",
            "defines 2 result(s)",
        ),
        (
            &["i32"],
            "%vr9: i32 = opaque.i32 \"iadd\" pure %vr0",
            "takes 2 operand(s), found 1",
        ),
        (
            &["i32", "i64"],
            "%vr9: i32 = opaque.i32 \"iadd\" pure %vr0, %vr1",
            "has type i64, expected i32",
        ),
        (
            &["i32"],
            "%vr9: i64 = opaque.i32 \"iadd\" pure %vr0, %vr0",
            "result %vr9 has type i64",
        ),
        (
            &["i32"],
            "%vr9: i8 = opaque.i32 \"icmp\" [0xc] pure %vr0, %vr0",
            "not an integer predicate",
        ),
        (
            &["f32"],
            "%vr9: i8 = opaque.f32 \"fcmp\" [0x2] pure %vr0, %vr0",
            "not a float predicate",
        ),
        (
            &["i64"],
            "%vr9: i32 = opaque.i32 \"load\" [0x0] load %vr0",
            "needs memory flags",
        ),
        (
            &["i64"],
            "%vr9: i32 = opaque.i32 \"load\" [0x0] pure mem() %vr0",
            "has effects load",
        ),
        (
            &["i64"],
            "%vr9: i32 = opaque.i32 \"load\" [0x100000000] load mem() %vr0",
            "32-bit offset",
        ),
        (
            &["i64", "i64"],
            "%vr9: i64 = opaque.i64 \"atomic_rmw\" [0xff] load+store+side mem() %vr0, %vr1",
            "not an atomic operation",
        ),
        (
            &["i32x4"],
            "%vr9: i32 = opaque.i32x4 \"extractlane\" [0x4] pure %vr0",
            "not a lane of i32x4",
        ),
        (
            &["i32"],
            "opaque.i32 \"trapz\" [0x0] trap %vr0",
            "not a trap code",
        ),
        (
            &["i8"],
            "%vr9: i32 = opaque.i32 \"uextend\" pure %vr9",
            "not dominated by its definition",
        ),
        (
            &["i64"],
            "%vr9: i32 = opaque.i32 \"uextend\" pure %vr0",
            "not a narrower scalar",
        ),
        (
            &["i64"],
            "%vr9: i32x4 = opaque.i32x4 \"bitcast\" pure mem() %vr0",
            "has 64 bits",
        ),
        (
            &["i64x2"],
            "%vr9: i32x4 = opaque.i32x4 \"bitcast\" pure mem() %vr0",
            "needs big or little",
        ),
        (
            &[],
            "%vr9: i32 = opaque.i32 \"frobnicate\" pure",
            "not a Cranelift opcode",
        ),
        (
            &[],
            "%vr9: i32 = opaque.i32 \"extract_vector\" [0x0] pure",
            "not a Cranelift opcode",
        ),
        (&[], "opaque \"return\" side", "not a Cranelift opcode"),
    ];
    for (params, inst, msg) in cases {
        let src = with_opaque(params, inst);
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
        let errs = midend::verifier::verify_module_for_lowering(&m, true)
            .expect_err(&src)
            .to_string();
        assert!(
            errs.contains(msg),
            "expected `{msg}` in `{errs}` for:\n{src}"
        );
        match lower(&src) {
            Err(e) => assert!(!e.to_string().is_empty()),
            Ok(func) => panic!("lowered:\n{}\nfrom:\n{src}", func.display()),
        }
    }
}

/// Well-formed opaques of every kind of immediate verify, lower, and pass Cranelift's
/// verifier.
#[test]
fn wellformed_opaques_lower() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "%vr9: i32 = opaque.i32 \"iconst\" [0xffffffff] pure"),
        (&[], "%vr9: i8x16 = opaque.i8x16 \"vconst\" [0x10, 0x1, 0x2] pure"),
        (&[], "%vr9: f128 = opaque \"f128const\" [0x10, 0x0, 0x3fff000000000000] pure"),
        (&["i8x16", "i8x16"], "%vr9: i8x16 = opaque \"shuffle\" [0x10, 0x1f1e1d1c1b1a1918, 0x0] pure %vr0, %vr1"),
        (&[], "%vr9: f16 = opaque \"f16const\" [0x3c00] pure"),
        (&["i32x4"], "%vr9: i32 = opaque.i32x4 \"extractlane\" [0x3] pure %vr0"),
        (&["i64", "i64"], "%vr9: i64 = opaque.i64 \"atomic_rmw\" [0x0] load+store+trap+side mem(notrap aligned) %vr0, %vr1"),
        (&["i64"], "%vr9: i16x8 = opaque.i64 \"uload8x8\" [0xfffffffffffffff8] load+trap mem() %vr0"),
        (&["i32"], "%vr9: i8 = opaque.i32 \"icmp\" [0x2] pure %vr0, %vr0"),
        (&["i32"], "%vr9: i32 = opaque.i32 \"uadd_overflow_trap\" [0x1] trap %vr0, %vr0"),
        (&["i8"], "%vr9: i32 = opaque.i32 \"uextend\" pure %vr0"),
        (&["i64x2"], "%vr9: i32x4 = opaque.i32x4 \"bitcast\" pure mem(little) %vr0"),
        (&["i128"], "%vr9: i64, %vr8: i64 = opaque.i128 \"isplit\" pure %vr0"),
        (&[], "opaque \"fence\" side"),
    ];
    let flags = settings::Flags::new(settings::builder());
    for (params, inst) in cases {
        let src = with_opaque(params, inst);
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
        midend::verifier::verify_module_for_lowering(&m, true)
            .unwrap_or_else(|e| panic!("{e} in:\n{src}"));
        let func = lower(&src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
        cranelift_codegen::verify_function(&func, &flags)
            .unwrap_or_else(|e| panic!("{e} in:\n{}\nfrom:\n{src}", func.display()));
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
}

/// A random opaque of opcode `op`, mostly well-formed, as a function's text.
fn random_case(rng: &mut Rng, op: &OpaqueOpcode, types: &[lir::Type]) -> String {
    let any = |rng: &mut Rng| rng.pick(types);
    let member = |rng: &mut Rng, ok: &dyn Fn(lir::Type) -> bool| -> Option<lir::Type> {
        let m: Vec<lir::Type> = types.iter().copied().filter(|&t| ok(t)).collect();
        (!m.is_empty()).then(|| rng.pick(&m))
    };
    let ctrl = match op.ctrl {
        Some(ts) if rng.chance(90) => member(rng, &|t| ts.contains(t)).unwrap(),
        _ if rng.chance(30) => lir::Type::VOID,
        _ => any(rng),
    };
    let mut params = Vec::new();
    for rule in op.args {
        let t = if rng.chance(92) {
            member(rng, &|t| rule.admits(t, ctrl)).unwrap_or_else(|| any(rng))
        } else {
            any(rng)
        };
        params.push(t);
    }
    if rng.chance(3) {
        params.push(any(rng));
    } else if rng.chance(3) {
        params.pop();
    }
    let mut results: Vec<lir::Type> = op
        .results
        .iter()
        .map(|r| match r.resolve(ctrl) {
            Some(t) if rng.chance(95) => t,
            _ => any(rng),
        })
        .collect();
    if rng.chance(3) {
        results.push(any(rng));
    } else if rng.chance(3) {
        results.pop();
    }
    let pack = |bytes: &[u8]| {
        let mut v = vec![bytes.len() as u64];
        v.extend(bytes.chunks(8).map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        }));
        v
    };
    let imms: Vec<u64> = if rng.chance(90) {
        use OpaqueFormat as F;
        let r = rng.next();
        match op.format {
            F::UnaryImm if ctrl.bits() < 64 && ctrl.bits() > 0 => {
                vec![r & ((1 << ctrl.bits()) - 1)]
            }
            F::UnaryImm | F::UnaryIeee64 => vec![r],
            F::UnaryIeee16 => vec![r & 0xffff],
            F::UnaryIeee32 => vec![r & 0xffff_ffff],
            F::UnaryConst => {
                let n = results.first().map_or(16, |t| t.bytes() as usize);
                pack(&(0..n).map(|_| rng.next() as u8).collect::<Vec<_>>())
            }
            F::Shuffle => pack(&(0..16).map(|_| rng.below(32) as u8).collect::<Vec<_>>()),
            F::BinaryImm8 | F::TernaryImm8 => vec![rng.below(ctrl.lanes() as usize) as u64],
            F::AtomicRmw => vec![rng.below(ATOMIC_RMW_OPS as usize) as u64],
            F::Load | F::Store => vec![r as i32 as i64 as u64],
            F::IntAddTrap | F::CondTrap => vec![1 + rng.below(255) as u64],
            F::IntCompare => vec![rng.below(10) as u64],
            F::FloatCompare => vec![10 + rng.below(14) as u64],
            _ => vec![],
        }
    } else {
        let specials = [0, 1, 16, 255, 1 << 32, u64::MAX, u64::MAX >> 1];
        (0..rng.below(4))
            .map(|_| {
                if rng.chance(50) {
                    rng.pick(&specials)
                } else {
                    rng.next()
                }
            })
            .collect()
    };
    let fx = if rng.chance(95) {
        op.effects
    } else {
        rng.below(16) as u8
    };
    let mut fx_text: Vec<&str> = [(1, "load"), (2, "store"), (4, "trap"), (8, "side")]
        .into_iter()
        .filter(|(b, _)| fx & b != 0)
        .map(|(_, n)| n)
        .collect();
    if fx_text.is_empty() {
        fx_text.push("pure");
    }
    let mem = if op.format.has_memflags() != rng.chance(4) {
        let choices = ["", "notrap aligned", "little", "big", "readonly", "notrap"];
        let lanes_change =
            op.name == "bitcast" && params.first().is_some_and(|p| p.lanes() != ctrl.lanes());
        let k = if lanes_change && rng.chance(80) {
            2
        } else {
            rng.below(choices.len())
        };
        format!(" mem({})", choices[k])
    } else {
        String::new()
    };
    let imms_text = if imms.is_empty() {
        String::new()
    } else {
        let v: Vec<String> = imms.iter().map(|v| format!("{v:#x}")).collect();
        format!(" [{}]", v.join(", "))
    };
    let first = params.len();
    let defs: Vec<String> = results
        .iter()
        .enumerate()
        .map(|(k, t)| format!("%vr{}: {t}", first + k))
        .collect();
    let uses: Vec<String> = (0..params.len()).map(|k| format!("%vr{k}")).collect();
    let inst = format!(
        "{}{}opaque.{ctrl} \"{}\"{imms_text} {}{mem}{}{}",
        defs.join(", "),
        if defs.is_empty() { "" } else { " = " },
        op.name,
        fx_text.join("+"),
        if uses.is_empty() { "" } else { " " },
        uses.join(", ")
    );
    let names: Vec<String> = params.iter().map(|t| t.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    with_opaque(&refs, &inst)
}

/// Random opaques of every opcode: lowering never panics; what the verifier accepts lowers
/// and passes Cranelift's verifier; what lowering accepts prints.
#[test]
fn random_opaques_lower_or_fail_cleanly() {
    let flags = settings::Flags::new(settings::builder());
    let types: Vec<lir::Type> = all_types().into_iter().filter_map(lir_type).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut total) = (0, 0);
    for op in opaque_opcodes() {
        for _ in 0..150 {
            let src = random_case(&mut rng, op, &types);
            let m = parse_module(&src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
            let (_, f) = m.live_functions().next().unwrap();
            let verdict = verify_function_for_lowering(&m, f, true);
            let lowered = lower_function(&m, f, &mut OriginalNames, config());
            total += 1;
            match (verdict, lowered) {
                (Ok(()), Ok(func)) => {
                    accepted += 1;
                    // Without an ISA, Cranelift cannot check the frame and return address
                    // opcodes (their type is the pointer's).
                    match cranelift_codegen::verify_function(&func, &flags) {
                        Err(e) if !e.to_string().contains("an ISA") => {
                            panic!("{e} in:\n{}\nfrom:\n{src}", func.display())
                        }
                        _ => {}
                    }
                    // Lifted back, the Cranelift instruction is an opaque (or a LIR
                    // instruction) that verifies for lowering: the lifter's encoding is the
                    // verifier's.
                    let mut back = lir::Module::new();
                    if lift_function(&mut back, &func, lir::Linkage::Export).is_ok() {
                        if let Err(e) = verify_module_for_lowering(&back, true) {
                            panic!(
                                "lifted back: {e} in:\n{}\nfrom:\n{}",
                                lir::module_to_string(&back),
                                func.display()
                            );
                        }
                    }
                }
                (Ok(()), Err(e)) => panic!("verified, but lowering says {e}:\n{src}"),
                (Err(e), Ok(func)) => {
                    panic!(
                        "lowered:\n{}\nalthough the verifier says {e}:\n{src}",
                        func.display()
                    )
                }
                (Err(_), Err(_)) => {}
            }
        }
    }
    assert!(
        accepted * 3 > total,
        "only {accepted} of {total} random opaques verify"
    );
}
