//! `MergeModule` as a drop-in: conformance against the module it wraps.
//!
//! Every scenario declares and defines through the `cranelift_module::Module` trait only, and
//! runs twice: on a plain `JITModule` (or `ObjectModule`) and on a `MergeModule` wrapping the
//! same kind of module (under several `MergeConfig`s). Everything observable is logged: the
//! result of every declare, define and finalize (an error as its `ModuleError` variant, at
//! the call that reports it), and the results of calling every function defined, through
//! `get_finalized_function`, through pointers stored in data objects and through code. The
//! two logs must be equal: where the plain module returns code, `MergeModule` returns code
//! that computes the same; where it returns an error, `MergeModule` returns the same error
//! at the same call; it never panics where the plain module does not.
//!
//! Covered: the four definable linkages with exact and near duplicates, declare and define
//! errors, bodies Cranelift's verifier rejects, libcalls and imported host functions, data
//! objects (zero-initialised, initialised, and holding function addresses), several finalize
//! rounds, and object files (symbol tables checked with the `object` crate's read API, then
//! linked with a C driver by `cc` and run).

// `ModuleResult` is cranelift-module's own type, large as it is: the modules return it.
#![allow(clippy::result_large_err)]

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{
    types, AbiParam, FuncRef, GlobalValue, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_codegen::isa::{self, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{CodegenError, Context, FinalizedRelocTarget};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{
    default_libcall_names, DataDescription, DataId, FuncId, Linkage, Module, ModuleError,
    ModuleResult,
};
use cranelift_object::object::{
    self, Object as _, ObjectSection as _, ObjectSymbol as _, SectionKind, SymbolKind, SymbolScope,
};
use cranelift_object::{ObjectBuilder, ObjectModule, ObjectProduct};
use mergelift::{AddressPolicy, MergeConfig, MergeModule, Threads};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Command;

/// The arguments every `(i64) -> i64` function is called with.
const INPUTS: [i64; 4] = [0, 1, -7, 1 << 33];

/// The four linkages a function can be defined with, and a tag for names.
const LINKAGES: [(Linkage, &str); 4] = [
    (Linkage::Local, "local"),
    (Linkage::Export, "export"),
    (Linkage::Preemptible, "preemptible"),
    (Linkage::Hidden, "hidden"),
];

/// Exported and local functions, and a base for their constants. A local function gets
/// constants of its own: one equal to an exported function merges into it, where one with
/// near-duplicates only is folded into their shared body by merge-similar (and has no code).
const EXPORT_LOCAL: [(Linkage, &str, i64); 2] =
    [(Linkage::Export, "e", 0), (Linkage::Local, "l", 50)];

// ---------------------------------------------------------------------------------------
// Modules.

fn isa_with(builder: isa::Builder, flags: &[(&str, &str)]) -> OwnedTargetIsa {
    let mut b = settings::builder();
    for (k, v) in flags {
        b.set(k, v).unwrap();
    }
    builder.finish(settings::Flags::new(b)).unwrap()
}

/// The host's ISA with every feature `cranelift_native` detects.
fn host_isa(flags: &[(&str, &str)]) -> OwnedTargetIsa {
    isa_with(cranelift_native::builder().unwrap(), flags)
}

/// The host's architecture with no optional feature (x86-64: SSE2 only), so that `ceil` and
/// `fma` are libcalls.
fn baseline_isa() -> OwnedTargetIsa {
    isa_with(isa::lookup(target_lexicon::Triple::host()).unwrap(), &[])
}

/// A host function JIT code imports by name.
extern "C" fn host_add(a: i64, b: i64) -> i64 {
    a.wrapping_add(b) ^ 0x55
}

/// The libcalls `rounded` needs on the baseline ISA, given to the JIT by name (the process
/// may not export libm's).
extern "C" fn ceil(x: f64) -> f64 {
    x.ceil()
}

extern "C" fn fma(x: f64, y: f64, z: f64) -> f64 {
    x.mul_add(y, z)
}

fn jit_module(isa: OwnedTargetIsa) -> JITModule {
    let mut b = JITBuilder::with_isa(isa, default_libcall_names());
    b.symbol("host_add", host_add as *const u8);
    b.symbol("ceil", ceil as *const u8);
    b.symbol("fma", fma as *const u8);
    JITModule::new(b)
}

/// The configurations `MergeModule` is checked under.
fn configs() -> Vec<(&'static str, MergeConfig)> {
    vec![
        ("default", MergeConfig::default()),
        (
            "distinct addresses",
            MergeConfig {
                address_policy: AddressPolicy::Distinct,
                ..MergeConfig::default()
            },
        ),
        (
            "3 threads",
            MergeConfig {
                threads: Threads::Count(3),
                ..MergeConfig::default()
            },
        ),
    ]
}

/// What a JIT offers besides the `Module` trait: `JITModule` and `MergeModule<JITModule>`
/// have these as inherent methods of the same names.
trait Jit: Module {
    fn finalize(&mut self) -> ModuleResult<()>;
    fn fetch(&self, id: FuncId) -> *const u8;
    fn fetch_data(&self, id: DataId) -> (*const u8, usize);
}

impl Jit for JITModule {
    fn finalize(&mut self) -> ModuleResult<()> {
        self.finalize_definitions()
    }
    fn fetch(&self, id: FuncId) -> *const u8 {
        self.get_finalized_function(id)
    }
    fn fetch_data(&self, id: DataId) -> (*const u8, usize) {
        self.get_finalized_data(id)
    }
}

impl Jit for MergeModule<JITModule> {
    fn finalize(&mut self) -> ModuleResult<()> {
        self.finalize_definitions()
    }
    fn fetch(&self, id: FuncId) -> *const u8 {
        self.get_finalized_function(id)
    }
    fn fetch_data(&self, id: DataId) -> (*const u8, usize) {
        self.get_finalized_data(id)
    }
}

// ---------------------------------------------------------------------------------------
// What a run observed.

/// One observation.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Ok,
    /// An error, as its `ModuleError` variant.
    Err(&'static str),
    /// What a function returned for each input (or a count).
    Values(Vec<i64>),
    /// `get_finalized_function` or a data slot gave a null pointer.
    Null,
}

/// The name of an error's variant (and of the codegen error inside `Compilation`).
fn variant(e: &ModuleError) -> &'static str {
    match e {
        ModuleError::Undeclared(_) => "Undeclared",
        ModuleError::IncompatibleDeclaration(_) => "IncompatibleDeclaration",
        ModuleError::IncompatibleSignature(..) => "IncompatibleSignature",
        ModuleError::DuplicateDefinition(_) => "DuplicateDefinition",
        ModuleError::InvalidImportDefinition(_) => "InvalidImportDefinition",
        ModuleError::Compilation(CodegenError::Verifier(_)) => "Compilation(Verifier)",
        ModuleError::Compilation(_) => "Compilation",
        ModuleError::Allocation { .. } => "Allocation",
        ModuleError::Backend(_) => "Backend",
        ModuleError::Flag(_) => "Flag",
    }
}

/// Labelled observations in order, with each error's text (shown, not compared).
#[derive(Default)]
struct Log {
    entries: Vec<(String, Seen, Option<String>)>,
    labels: HashSet<String>,
}

impl Log {
    /// Record `seen` as `label` (made unique by a counter when it repeats: both runs repeat
    /// it the same way).
    fn push(&mut self, label: String, seen: Seen, text: Option<String>) {
        let mut unique = label.clone();
        let mut n = 1;
        while !self.labels.insert(unique.clone()) {
            n += 1;
            unique = format!("{label} #{n}");
        }
        self.entries.push((unique, seen, text));
    }

    /// Record `r`; whether it is `Ok`.
    fn result<T>(&mut self, label: String, r: &ModuleResult<T>) -> bool {
        match r {
            Ok(_) => self.push(label, Seen::Ok, None),
            Err(e) => self.push(label, Seen::Err(variant(e)), Some(format!("{e:#}"))),
        }
        r.is_ok()
    }

    fn show(entry: Option<&(String, Seen, Option<String>)>) -> String {
        match entry {
            None => "(nothing: not reached)".into(),
            Some((_, seen, None)) => format!("{seen:?}"),
            Some((_, seen, Some(text))) => {
                let text: String = text.chars().take(300).collect();
                format!("{seen:?}: {}", text.replace('\n', " | "))
            }
        }
    }

    /// Where `merged` differs from `plain`, in `plain`'s order, then what only `merged` has.
    fn differences(plain: &Log, merged: &Log) -> Vec<String> {
        let find = |log: &Log, label: &str| log.entries.iter().find(|e| e.0 == label).cloned();
        let mut out = Vec::new();
        for p in &plain.entries {
            let m = find(merged, &p.0);
            if m.as_ref().map(|m| &m.1) != Some(&p.1) {
                out.push(format!(
                    "  {}:\n    plain:  {}\n    merge:  {}",
                    p.0,
                    Log::show(Some(p)),
                    Log::show(m.as_ref())
                ));
            }
        }
        for m in &merged.entries {
            if !plain.labels.contains(&m.0) {
                out.push(format!(
                    "  {}:\n    plain:  (nothing)\n    merge:  {}",
                    m.0,
                    Log::show(Some(m))
                ));
            }
        }
        out
    }
}

/// The first of `diffs`, and how many more.
fn shorten(diffs: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut s = diffs[..diffs.len().min(SHOWN)].join("\n");
    if diffs.len() > SHOWN {
        s += &format!("\n  ... and {} more", diffs.len() - SHOWN);
    }
    s
}

/// Call an `(i64) -> i64` function at `p` with every input.
fn call(p: *const u8) -> Seen {
    if p.is_null() {
        return Seen::Null;
    }
    // SAFETY: only functions declared `(i64) -> i64` are called (`Run::callable`), at code
    // the module finalized.
    let f = unsafe { std::mem::transmute::<*const u8, extern "C" fn(i64) -> i64>(p) };
    Seen::Values(INPUTS.iter().map(|&x| f(x)).collect())
}

// ---------------------------------------------------------------------------------------
// Defining functions.

/// What a body sees: the entry block's parameters, the declared callees and data objects.
struct Env {
    p: Vec<Value>,
    f: Vec<FuncRef>,
    d: Vec<GlobalValue>,
}

impl Env {
    fn x(&self) -> Value {
        self.p[0]
    }
}

/// `(ty, ..) -> ty` with `params` parameters.
fn signature<M: Module + ?Sized>(m: &M, ty: Type, params: usize) -> Signature {
    let mut s = m.make_signature();
    s.params.extend((0..params).map(|_| AbiParam::new(ty)));
    s.returns.push(AbiParam::new(ty));
    s
}

/// A function of signature `sig` returning `body(builder, env)`, with `funcs` and `data`
/// declared in it, ready to define.
fn build<M: Module + ?Sized>(
    m: &mut M,
    sig: Signature,
    funcs: &[FuncId],
    data: &[DataId],
    body: impl FnOnce(&mut FunctionBuilder, &Env) -> Value,
) -> Context {
    let mut ctx = m.make_context();
    ctx.func.signature = sig;
    let f = funcs
        .iter()
        .map(|&c| m.declare_func_in_func(c, &mut ctx.func))
        .collect();
    let d = data
        .iter()
        .map(|&c| m.declare_data_in_func(c, &mut ctx.func))
        .collect();
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let env = Env {
        p: b.block_params(entry).to_vec(),
        f,
        d,
    };
    let v = body(&mut b, &env);
    b.ins().return_(&[v]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    ctx
}

/// A body of an `(i64) -> i64` function: what it returns for `x`, given a constant.
type Shape = fn(&mut FunctionBuilder, Value, i64) -> Value;

/// `x * k + 1`: too small for merge-similar; merged only with an equal function.
fn affine(b: &mut FunctionBuilder, x: Value, k: i64) -> Value {
    let y = b.ins().imul_imm_s(x, k);
    b.ins().iadd_imm_s(y, 1)
}

/// `(x * (11 + k) + 2^40) * 5 - 9`: merge-similar folds near-duplicates of this (different
/// `k`) into one shared body.
fn near(b: &mut FunctionBuilder, x: Value, k: i64) -> Value {
    let t = b.ins().imul_imm_s(x, 11 + k);
    let t = b.ins().iadd_imm_s(t, 1 << 40);
    let t = b.ins().imul_imm_s(t, 5);
    b.ins().iadd_imm_s(t, -9)
}

/// `x` as f64, divided by `2 + k`, rounded up (`ceil`), times `2 + k` plus `k / 4` (`fma`),
/// back to i64: two libcalls on an ISA without SSE4.1 and FMA.
fn rounded(b: &mut FunctionBuilder, x: Value, k: i64) -> Value {
    let y = b.ins().fcvt_from_sint(types::F64, x);
    let d = b.ins().f64const(2.0 + k as f64);
    let y = b.ins().fdiv(y, d);
    let y = b.ins().ceil(y);
    let a = b.ins().f64const(k as f64 / 4.0);
    let y = b.ins().fma(y, d, a);
    b.ins().fcvt_to_sint_sat(types::I64, y)
}

/// `callee(x + k) * 3` for each callee (`k` its position), summed.
fn sum_of_calls(b: &mut FunctionBuilder, e: &Env) -> Value {
    let mut acc = b.ins().iconst(types::I64, 0);
    for (k, &f) in e.f.iter().enumerate() {
        let a = b.ins().iadd_imm_s(e.x(), k as i64);
        let c = b.ins().call(f, &[a]);
        let r = b.inst_results(c)[0];
        let r = b.ins().imul_imm_s(r, 3);
        acc = b.ins().iadd(acc, r);
    }
    acc
}

/// Call the function at address `ptr`, an `(i64) -> i64`, with `x`.
fn call_indirect(b: &mut FunctionBuilder, sig: &Signature, ptr: Value, x: Value) -> Value {
    let sr = b.import_signature(sig.clone());
    let c = b.ins().call_indirect(sr, ptr, &[x]);
    b.inst_results(c)[0]
}

/// One scenario's run on one module: the module and what was observed.
struct Run<'m, M> {
    m: &'m mut M,
    log: Log,
    /// Functions defined with `(i64) -> i64`, in definition order: each is called after
    /// every successful finalize.
    callable: Vec<(String, FuncId)>,
    /// Whether the last finalize succeeded.
    finalized: bool,
    /// Whether local functions are fetched and called by the host too (else through code
    /// only: fetching them is the linkage tests' matter).
    host_calls_locals: bool,
}

impl<'m, M: Module> Run<'m, M> {
    fn new(m: &'m mut M) -> Self {
        Run {
            m,
            log: Log::default(),
            callable: Vec::new(),
            finalized: false,
            host_calls_locals: true,
        }
    }

    /// `(i64, ..) -> i64` with `params` parameters.
    fn sig(&self, params: usize) -> Signature {
        signature(self.m, types::I64, params)
    }

    fn name(&self, id: FuncId) -> String {
        let decl = self.m.declarations().get_function_decl(id);
        decl.linkage_name(id).into_owned()
    }

    /// Declare an `(i64) -> i64` function (a declaration both modules must accept).
    fn declare(&mut self, name: &str, linkage: Linkage) -> FuncId {
        let s = self.sig(1);
        self.m
            .declare_function(name, linkage, &s)
            .unwrap_or_else(|e| panic!("declare {name}: {e}"))
    }

    /// Define `id` as declared; log the result. A function of signature `(i64) -> i64`
    /// defined without error is called after each finalize from now on (a local one only if
    /// `host_calls_locals`).
    fn define(
        &mut self,
        id: FuncId,
        funcs: &[FuncId],
        data: &[DataId],
        body: impl FnOnce(&mut FunctionBuilder, &Env) -> Value,
    ) -> bool {
        let decl = self.m.declarations().get_function_decl(id);
        let sig = decl.signature.clone();
        let callable =
            sig == self.sig(1) && (self.host_calls_locals || decl.linkage != Linkage::Local);
        let name = self.name(id);
        let mut ctx = build(self.m, sig, funcs, data, body);
        let r = self.m.define_function(id, &mut ctx);
        let ok = self.log.result(format!("define {name}"), &r);
        if ok && callable {
            self.callable.push((name, id));
        }
        ok
    }

    /// Declare and define an `(i64) -> i64` function.
    fn function(
        &mut self,
        name: &str,
        linkage: Linkage,
        funcs: &[FuncId],
        data: &[DataId],
        body: impl FnOnce(&mut FunctionBuilder, &Env) -> Value,
    ) -> FuncId {
        let id = self.declare(name, linkage);
        self.define(id, funcs, data, body);
        id
    }

    /// Declare and define a data object described by `describe`.
    fn data(
        &mut self,
        name: &str,
        linkage: Linkage,
        writable: bool,
        describe: impl FnOnce(&mut Self, &mut DataDescription),
    ) -> DataId {
        let id = self
            .m
            .declare_data(name, linkage, writable, false)
            .unwrap_or_else(|e| panic!("declare data {name}: {e}"));
        let mut d = DataDescription::new();
        describe(self, &mut d);
        let r = self.m.define_data(id, &d);
        self.log.result(format!("define data {name}"), &r);
        id
    }

    /// A data object holding the address of each of `targets`, 8 bytes apart.
    fn function_table(&mut self, name: &str, linkage: Linkage, targets: &[FuncId]) -> DataId {
        self.data(name, linkage, false, |r, d| {
            d.define_zeroinit(8 * targets.len());
            for (i, &f) in targets.iter().enumerate() {
                let fr = r.m.declare_func_in_data(f, d);
                d.write_function_addr(8 * i as u32, fr);
            }
        })
    }

    /// A family of `linkage`: `{prefix}affine{k}` (`affine` with `base + k + 2`) for k in
    /// 0..4 and two copies of `affine2`, `{prefix}near{k}` (`near` with `base + k`) for k in
    /// 0..4 and three copies of `near0`, `{prefix}common` (equal in every family), and an
    /// exported `{prefix}sum` calling all of them. The members (not `{prefix}sum`).
    fn family(&mut self, prefix: &str, linkage: Linkage, base: i64) -> Vec<FuncId> {
        let members = (0..4)
            .map(|k| (format!("affine{k}"), affine as Shape, base + k + 2))
            .chain((0..2).map(|j| (format!("affine_copy{j}"), affine as Shape, base + 4)))
            .chain((0..4).map(|k| (format!("near{k}"), near as Shape, base + k)))
            .chain((0..3).map(|j| (format!("near_copy{j}"), near as Shape, base)))
            .chain([("common".to_string(), near as Shape, 1000)]);
        let ids: Vec<FuncId> = members
            .map(|(name, shape, k)| {
                let name = format!("{prefix}{name}");
                self.function(&name, linkage, &[], &[], |b, e| shape(b, e.x(), k))
            })
            .collect();
        let sum = format!("{prefix}sum");
        self.function(&sum, Linkage::Export, &ids, &[], sum_of_calls);
        ids
    }
}

impl<M: Jit> Run<'_, M> {
    /// Finalize; log the result.
    fn finalize(&mut self, round: &str) -> bool {
        let r = self.m.finalize();
        self.finalized = self.log.result(format!("{round}: finalize"), &r);
        self.finalized
    }

    /// After a successful finalize: fetch every function defined so far and call it.
    fn call_all(&mut self, round: &str) {
        if !self.finalized {
            return;
        }
        for (name, id) in self.callable.clone() {
            let seen = call(self.m.fetch(id));
            self.log.push(format!("{round}: call {name}"), seen, None);
        }
    }

    /// The `slots` function addresses finalized data object `table` holds.
    fn table(&self, table: DataId, slots: usize) -> Vec<*const u8> {
        let (p, size) = self.m.fetch_data(table);
        assert!(size >= 8 * slots, "a table of {size} bytes");
        // SAFETY: the data object holds `slots` addresses.
        (0..slots)
            .map(|i| unsafe { (p as *const *const u8).add(i).read_unaligned() })
            .collect()
    }

    /// After a successful finalize: call every function whose address data object `table`
    /// holds (`slots` of them).
    fn call_table(&mut self, round: &str, table: DataId, slots: usize) {
        if !self.finalized {
            return;
        }
        for (i, f) in self.table(table, slots).into_iter().enumerate() {
            self.log
                .push(format!("{round}: table slot {i}"), call(f), None);
        }
    }
}

// ---------------------------------------------------------------------------------------
// JIT conformance.

/// A scenario over a JIT module.
trait Scenario {
    /// The ISA both modules compile for.
    fn isa(&self) -> OwnedTargetIsa {
        host_isa(&[])
    }
    fn run<M: Jit>(&self, r: &mut Run<M>);
}

/// Run `s` on a plain `JITModule` and on `MergeModule<JITModule>` under every configuration;
/// every difference fails.
fn conform(name: &str, s: &impl Scenario) {
    conform_except(name, s, &[]);
}

/// `conform`, except for the entries `documented` lists with what each side must give there:
/// differences the crate docs' table of differences from the plain module names.
fn conform_except(name: &str, s: &impl Scenario, documented: &[(&str, Seen, Seen)]) {
    let mut plain = jit_module(s.isa());
    let mut r = Run::new(&mut plain);
    s.run(&mut r);
    let mut plain_log = r.log;
    let take = |log: &mut Log, label: &str| {
        let at = (log.entries.iter().position(|e| e.0 == label))
            .unwrap_or_else(|| panic!("{name}: no entry {label}"));
        log.entries.remove(at).1
    };
    for (label, want, _) in documented {
        assert_eq!(&take(&mut plain_log, label), want, "{name}: plain, {label}");
    }
    assert!(!plain_log.entries.is_empty());
    let mut failures = Vec::new();
    for (label, config) in configs() {
        let mut m = MergeModule::with_config(jit_module(s.isa()), config);
        let mut r = Run::new(&mut m);
        s.run(&mut r);
        for (label, _, want) in documented {
            assert_eq!(
                &take(&mut r.log, label),
                want,
                "{name} [{label}]: MergeModule"
            );
        }
        let diffs = Log::differences(&plain_log, &r.log);
        if !diffs.is_empty() {
            failures.push(format!("[{label}]\n{}", shorten(&diffs)));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: MergeModule differs from JITModule:\n{}",
        failures.join("\n")
    );
}

/// Families of exact and near duplicates of the given linkages, finalized, every function
/// fetched and called.
struct Linkages(&'static [(Linkage, &'static str)]);

impl Scenario for Linkages {
    fn run<M: Jit>(&self, r: &mut Run<M>) {
        for (i, &(linkage, tag)) in self.0.iter().enumerate() {
            r.family(&format!("{tag}_"), linkage, 100 * i as i64);
        }
        r.finalize("batch 1");
        r.call_all("batch 1");
    }
}

#[test]
fn local_functions_conform() {
    conform("Local", &Linkages(&LINKAGES[0..1]));
}

#[test]
fn export_functions_conform() {
    conform("Export", &Linkages(&LINKAGES[1..2]));
}

#[test]
fn preemptible_functions_conform() {
    conform("Preemptible", &Linkages(&LINKAGES[2..3]));
}

#[test]
fn hidden_functions_conform() {
    conform("Hidden", &Linkages(&LINKAGES[3..4]));
}

/// All four linkages in one module: equal functions across linkages.
#[test]
fn mixed_linkages_conform() {
    conform("mixed linkages", &Linkages(&LINKAGES));
}

/// Errors at declare and define time, before and after a finalize, on functions that
/// merged and on data objects.
struct DeclareDefineErrors;

impl Scenario for DeclareDefineErrors {
    fn run<M: Jit>(&self, r: &mut Run<M>) {
        r.host_calls_locals = false;
        let s1 = r.sig(1);
        let s32 = signature(r.m, types::I32, 1);
        let f = r.declare("f", Linkage::Export);
        let again = r.m.declare_function("f", Linkage::Export, &s32);
        r.log
            .result("declare f with another signature".into(), &again);
        let again = r.m.declare_function("f", Linkage::Local, &s1);
        r.log.result("declare f again as Local".into(), &again);
        let as_data = r.m.declare_data("f", Linkage::Export, false, false);
        r.log.result("declare f as data".into(), &as_data);
        let d = r.m.declare_data("d", Linkage::Export, true, false).unwrap();
        let as_func = r.m.declare_function("d", Linkage::Export, &s1);
        r.log
            .result("declare data d as a function".into(), &as_func);

        // Defined twice before a finalize; an import defined.
        r.define(f, &[], &[], |b, e| near(b, e.x(), 0));
        r.define(f, &[], &[], |b, e| near(b, e.x(), 0));
        let imp = r.declare("imp", Linkage::Import);
        r.define(imp, &[], &[], |b, e| affine(b, e.x(), 3));
        // Functions that merge: an exported copy of `f`, local near-duplicates.
        let g = r.function("g", Linkage::Export, &[], &[], |b, e| near(b, e.x(), 0));
        let locals: Vec<FuncId> = (1..4)
            .map(|k| {
                r.function(&format!("loc{k}"), Linkage::Local, &[], &[], |b, e| {
                    near(b, e.x(), k)
                })
            })
            .collect();
        let user = r.function("user", Linkage::Export, &locals, &[], sum_of_calls);
        let define_d = |r: &mut Run<M>| {
            let mut desc = DataDescription::new();
            desc.define_zeroinit(8);
            let res = r.m.define_data(d, &desc);
            r.log.result("define data d".into(), &res);
        };
        define_d(r);
        define_d(r);
        r.finalize("batch 1");
        r.call_all("batch 1");

        // After the finalize: every function defined before is defined (merged or not).
        for id in [f, g, user].into_iter().chain(locals) {
            r.define(id, &[], &[], |b, e| affine(b, e.x(), 5));
        }
        let bytes = r.m.define_function_bytes(f, 16, &[0xc3], &[]);
        r.log.result("define_function_bytes f".into(), &bytes);
        define_d(r);
        // A later batch still works, with its own errors.
        let h = r.function("h", Linkage::Export, &[], &[], |b, e| near(b, e.x(), 0));
        r.define(h, &[], &[], |b, e| near(b, e.x(), 0));
        r.define(imp, &[], &[], |b, e| affine(b, e.x(), 3));
        r.finalize("batch 2");
        r.call_all("batch 2");
    }
}

#[test]
fn declare_and_define_errors_conform() {
    conform("declare and define errors", &DeclareDefineErrors);
}

/// A body whose signature is not the declared one (`(i32) -> i32` for `(i64) -> i64`).
struct BodySignature;

impl Scenario for BodySignature {
    fn run<M: Jit>(&self, r: &mut Run<M>) {
        let f = r.declare("f", Linkage::Export);
        let s32 = signature(r.m, types::I32, 1);
        let mut ctx = build(r.m, s32, &[], &[], |b, e| b.ins().iadd_imm_s(e.x(), 1));
        let res = r.m.define_function(f, &mut ctx);
        r.log
            .result("define f with an (i32) -> i32 body".into(), &res);
        r.function("g", Linkage::Export, &[], &[], |b, e| near(b, e.x(), 1));
        r.finalize("batch 1");
        r.call_all("batch 1");
    }
}

/// A documented difference: `JITModule` compiles a body whose signature is not its
/// declaration's (callers would call it with the declared one); `MergeModule` refuses it at
/// define. Everything else is alike.
#[test]
fn body_signature_mismatch_differs_as_documented() {
    conform_except(
        "body signature mismatch",
        &BodySignature,
        &[(
            "define f with an (i32) -> i32 body",
            Seen::Ok,
            Seen::Err("IncompatibleSignature"),
        )],
    );
}

/// `(x * (11 + k) + 2^40)`, then `+ 1i32` on the i64: Cranelift's verifier rejects it.
fn mixed_types(b: &mut FunctionBuilder, x: Value, k: i64) -> Value {
    let t = b.ins().imul_imm_s(x, 11 + k);
    let t = b.ins().iadd_imm_s(t, 1 << 40);
    let one = b.ins().iconst(types::I32, 1);
    b.ins().iadd(t, one)
}

/// An i32 returned from an `(i64) -> i64` function: Cranelift's verifier rejects it.
fn returns_i32(b: &mut FunctionBuilder, _: Value, k: i64) -> Value {
    b.ins().iconst(types::I32, k)
}

/// Bodies the verifier rejects, among valid near-duplicates: the error at define, the rest
/// of the batch compiled and callable, the rejected ids defined again, later batches.
struct InvalidBodies;

impl Scenario for InvalidBodies {
    fn run<M: Jit>(&self, r: &mut Run<M>) {
        r.host_calls_locals = false;
        let mut valid = Vec::new();
        for (linkage, tag, base) in EXPORT_LOCAL {
            for k in 0..3 {
                valid.push(r.function(&format!("{tag}{k}"), linkage, &[], &[], |b, e| {
                    near(b, e.x(), base + k)
                }));
            }
        }
        // Rejected bodies: an exported function returning an i32, a local near-duplicate of
        // `l1` adding an i32 to an i64.
        let bad_ret = r.function("bad_ret", Linkage::Export, &[], &[], |b, e| {
            returns_i32(b, e.x(), 1)
        });
        let bad_mix = r.function("bad_mix", Linkage::Local, &[], &[], |b, e| {
            mixed_types(b, e.x(), 51)
        });
        r.function("caller", Linkage::Export, &valid, &[], sum_of_calls);
        r.finalize("batch 1");
        r.call_all("batch 1");

        // The rejected ids, defined again validly (`bad_mix` equal to `l1`).
        r.define(bad_ret, &[], &[], |b, e| near(b, e.x(), 7));
        r.define(bad_mix, &[], &[], |b, e| near(b, e.x(), 51));
        r.finalize("batch 2");
        r.call_all("batch 2");

        // A later batch with another rejected body, valid functions, and callers of the
        // functions defined again.
        let late = r.function("late_bad", Linkage::Local, &[], &[], |b, e| {
            mixed_types(b, e.x(), 52)
        });
        r.function("late_near", Linkage::Export, &[], &[], |b, e| {
            near(b, e.x(), 9)
        });
        r.function(
            "late_caller",
            Linkage::Export,
            &[bad_ret, bad_mix, valid[0]],
            &[],
            sum_of_calls,
        );
        r.finalize("batch 3");
        r.call_all("batch 3");
        r.define(late, &[], &[], |b, e| affine(b, e.x(), 3));
        r.finalize("batch 4");
        r.call_all("batch 4");
    }
}

#[test]
fn invalid_bodies_conform() {
    conform("invalid bodies", &InvalidBodies);
}

/// Calls to an imported host function (`JITBuilder::symbol`) and libcalls (`ceil`, `fma` on
/// an ISA without SSE4.1 and FMA), in exact and near duplicates.
struct Libcalls;

impl Scenario for Libcalls {
    fn isa(&self) -> OwnedTargetIsa {
        baseline_isa()
    }

    fn run<M: Jit>(&self, r: &mut Run<M>) {
        r.host_calls_locals = false;
        let s2 = r.sig(2);
        let host =
            r.m.declare_function("host_add", Linkage::Import, &s2)
                .unwrap();
        let host_call = |k: i64| {
            move |b: &mut FunctionBuilder, e: &Env| {
                let kk = b.ins().iconst(types::I64, 100 + k);
                let c = b.ins().call(e.f[0], &[e.x(), kk]);
                let v = b.inst_results(c)[0];
                near(b, v, k)
            }
        };
        let mut all = Vec::new();
        for (linkage, tag, base) in EXPORT_LOCAL {
            for k in 0..3 {
                all.push(r.function(
                    &format!("{tag}_host{k}"),
                    linkage,
                    &[host],
                    &[],
                    host_call(base + k),
                ));
                all.push(
                    r.function(&format!("{tag}_round{k}"), linkage, &[], &[], |b, e| {
                        rounded(b, e.x(), base + k)
                    }),
                );
            }
            for j in 0..2 {
                all.push(r.function(
                    &format!("{tag}_host_copy{j}"),
                    linkage,
                    &[host],
                    &[],
                    host_call(base),
                ));
                all.push(r.function(
                    &format!("{tag}_round_copy{j}"),
                    linkage,
                    &[],
                    &[],
                    |b, e| rounded(b, e.x(), base),
                ));
            }
        }
        r.function("caller", Linkage::Export, &all, &[], sum_of_calls);
        r.finalize("batch 1");
        r.call_all("batch 1");
    }
}

/// Whether `rounded` compiles to code with libcalls on `isa` (else the test tests nothing).
fn rounded_uses_libcalls(isa: OwnedTargetIsa) -> bool {
    let mut m = jit_module(isa);
    let s = signature(&m, types::I64, 1);
    let mut ctx = build(&mut m, s, &[], &[], |b, e| rounded(b, e.x(), 1));
    let code = ctx.compile(m.isa(), &mut ControlPlane::default()).unwrap();
    code.buffer.relocs().iter().any(|rel| {
        matches!(
            rel.target,
            FinalizedRelocTarget::ExternalName(cranelift_codegen::ir::ExternalName::LibCall(_))
        )
    })
}

#[test]
fn libcalls_and_host_functions_conform() {
    assert!(
        rounded_uses_libcalls(Libcalls.isa()),
        "ceil and fma are libcalls on the baseline ISA"
    );
    conform("libcalls and host functions", &Libcalls);
}

/// Data objects: zero-initialised (written and read by functions), initialised (read), and
/// a table of function addresses defined with the functions (read in IR and called, fetched
/// and called by the host); with `later_table`, a second batch with a table of the same and
/// other functions, merged by the first finalize.
struct DataObjects {
    later_table: bool,
}

impl Scenario for DataObjects {
    fn run<M: Jit>(&self, r: &mut Run<M>) {
        r.host_calls_locals = false;
        let s1 = r.sig(1);
        let zeros = r.data("zeros", Linkage::Local, true, |_, d| d.define_zeroinit(32));
        let values: Vec<u8> = [3i64, -5, 1 << 35, 77]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let table = r.data("table", Linkage::Export, false, |_, d| {
            d.define(values.into_boxed_slice())
        });
        let flags = MemFlagsData::trusted();
        let mut in_table = Vec::new();
        let mut later = Vec::new();
        for (linkage, tag, base) in EXPORT_LOCAL {
            for k in 0..4 {
                // table[k] * x + base + k
                r.function(&format!("{tag}_read{k}"), linkage, &[], &[table], |b, e| {
                    let a = b.ins().symbol_value(types::I64, e.d[0]);
                    let v = b.ins().load(types::I64, flags, a, 8 * k as i32);
                    let v = b.ins().imul(v, e.x());
                    b.ins().iadd_imm_s(v, base + k)
                });
                // zeros[k % 2] += x * (base + k + 1), the new value.
                r.function(&format!("{tag}_bump{k}"), linkage, &[], &[zeros], |b, e| {
                    let a = b.ins().symbol_value(types::I64, e.d[0]);
                    let off = 8 * (k % 2) as i32;
                    let v = b.ins().load(types::I64, flags, a, off);
                    let inc = b.ins().imul_imm_s(e.x(), base + k + 1);
                    let v = b.ins().iadd(v, inc);
                    b.ins().store(flags, v, a, off);
                    v
                });
            }
            // Targets whose addresses the first table holds, and targets that merge freely
            // before the second table takes their addresses.
            for (list, what, base) in [
                (&mut in_table, "target", base),
                (&mut later, "later", base + 20),
            ] {
                for k in 0..3 {
                    list.push(r.function(
                        &format!("{tag}_{what}{k}"),
                        linkage,
                        &[],
                        &[],
                        |b, e| near(b, e.x(), base + k),
                    ));
                }
                list.push(
                    r.function(&format!("{tag}_{what}_copy"), linkage, &[], &[], |b, e| {
                        near(b, e.x(), base)
                    }),
                );
            }
        }
        let vtable = r.function_table("vtable", Linkage::Export, &in_table);
        // Calls through the table in IR: vtable[i](x).
        for i in 0..in_table.len() {
            r.function(
                &format!("via{i}"),
                Linkage::Export,
                &[],
                &[vtable],
                |b, e| {
                    let a = b.ins().symbol_value(types::I64, e.d[0]);
                    let p = b.ins().load(types::I64, flags, a, 8 * i as i32);
                    call_indirect(b, &s1, p, e.x())
                },
            );
        }
        r.finalize("batch 1");
        r.call_all("batch 1");
        r.call_table("batch 1 vtable", vtable, in_table.len());
        if r.finalized {
            // Addresses stored in data with the functions stay distinct (`MergeConfig`).
            let distinct: HashSet<_> = r.table(vtable, in_table.len()).into_iter().collect();
            let distinct = Seen::Values(vec![distinct.len() as i64]);
            r.log
                .push("batch 1 vtable: distinct addresses".into(), distinct, None);
        }
        if !self.later_table {
            return;
        }

        // A second batch: a table of every target, defined after they were finalized, and
        // a new near-duplicate.
        let fresh = r.function("fresh", Linkage::Local, &[], &[], |b, e| near(b, e.x(), 75));
        let targets: Vec<FuncId> = in_table
            .iter()
            .chain(&later)
            .copied()
            .chain([fresh])
            .collect();
        let vtable2 = r.function_table("vtable2", Linkage::Local, &targets);
        r.finalize("batch 2");
        r.call_all("batch 2");
        r.call_table("batch 2 vtable2", vtable2, targets.len());
        if r.finalized {
            // Addresses stored in data after their functions merged are distinct too (a late
            // thunk each, as for an address taken in IR), whatever the policy.
            let distinct: HashSet<_> = r.table(vtable2, targets.len()).into_iter().collect();
            let distinct = Seen::Values(vec![distinct.len() as i64]);
            r.log
                .push("batch 2 vtable2: distinct addresses".into(), distinct, None);
        }
    }
}

#[test]
fn data_objects_conform() {
    conform("data objects", &DataObjects { later_table: false });
}

/// A table of function addresses defined after the functions were merged.
#[test]
fn data_objects_of_a_later_batch_conform() {
    conform(
        "data objects of a later batch",
        &DataObjects { later_table: true },
    );
}

/// Several finalize rounds: later batches hold copies and near-duplicates of earlier
/// functions, call them, and take their addresses; every function is called after every
/// round.
struct Rounds;

impl Scenario for Rounds {
    fn run<M: Jit>(&self, r: &mut Run<M>) {
        r.host_calls_locals = false;
        let s1 = r.sig(1);
        let mut first = Vec::new();
        for (linkage, tag, base) in EXPORT_LOCAL {
            first.extend(r.family(&format!("{tag}1_"), linkage, base));
        }
        r.finalize("batch 1");
        r.call_all("batch 1");

        let mut second = Vec::new();
        for (linkage, tag, base) in EXPORT_LOCAL {
            for k in 0..3 {
                // Equal to batch 1's `near{k}`, `affine{k}`.
                second.push(
                    r.function(&format!("{tag}2_near{k}"), linkage, &[], &[], |b, e| {
                        near(b, e.x(), base + k)
                    }),
                );
                second.push(
                    r.function(&format!("{tag}2_affine{k}"), linkage, &[], &[], |b, e| {
                        affine(b, e.x(), base + k + 2)
                    }),
                );
                // Near-duplicates of batch 1's.
                second.push(
                    r.function(&format!("{tag}2_new{k}"), linkage, &[], &[], |b, e| {
                        near(b, e.x(), base + k + 20)
                    }),
                );
            }
        }
        // Callers of every function of batch 1, by call and by address taken in IR.
        r.function("calls_first", Linkage::Export, &first, &[], sum_of_calls);
        for (i, &f) in first.iter().enumerate() {
            r.function(
                &format!("address_of{i}"),
                Linkage::Export,
                &[f],
                &[],
                |b, e| {
                    let p = b.ins().func_addr(types::I64, e.f[0]);
                    call_indirect(b, &s1, p, e.x())
                },
            );
        }
        r.finalize("batch 2");
        r.call_all("batch 2");

        // A third batch: copies of batch 2's local new functions and callers of batch 2.
        let (linkage, _, base) = EXPORT_LOCAL[1];
        for k in 0..3 {
            r.function(&format!("l3_new{k}"), linkage, &[], &[], |b, e| {
                near(b, e.x(), base + k + 20)
            });
        }
        r.function("calls_second", Linkage::Export, &second, &[], sum_of_calls);
        r.finalize("batch 3");
        r.call_all("batch 3");
    }
}

#[test]
fn finalize_rounds_conform() {
    conform("finalize rounds", &Rounds);
}

// ---------------------------------------------------------------------------------------
// Object files.

/// The module of the object-file tests: exact and near duplicates of every linkage, an
/// exported caller of each local function, and an exported caller of all. The functions
/// a C program can call.
fn object_functions<M: Module>(r: &mut Run<M>) -> Vec<String> {
    r.host_calls_locals = false;
    let mut all = Vec::new();
    for (i, &(linkage, tag)) in LINKAGES.iter().enumerate() {
        all.extend(r.family(&format!("{tag}_"), linkage, 100 * i as i64));
    }
    let locals: Vec<FuncId> = all
        .iter()
        .copied()
        .filter(|&id| r.m.declarations().get_function_decl(id).linkage == Linkage::Local)
        .collect();
    for id in locals {
        let name = format!("call_{}", r.name(id));
        r.function(&name, Linkage::Export, &[id], &[], sum_of_calls);
    }
    r.function("call_all", Linkage::Export, &all, &[], sum_of_calls);
    r.callable.iter().map(|(name, _)| name.clone()).collect()
}

/// A function symbol as the emitted object file has it.
#[derive(Clone, Debug)]
struct FnSymbol {
    section: Option<object::SectionIndex>,
    start: u64,
    end: u64,
    kind: SymbolKind,
    scope: SymbolScope,
    weak: bool,
}

/// An emitted object file: its bytes and the symbol name of each function.
struct Emitted {
    bytes: Vec<u8>,
    names: Vec<(FuncId, String)>,
}

fn emit(product: ObjectProduct) -> Emitted {
    let names = product
        .functions
        .iter()
        .filter_map(|(id, s)| (*s).map(|(sym, _)| (id, sym)))
        .map(|(id, sym)| {
            let name = &product.object.symbol(sym).name;
            (id, String::from_utf8(name.clone()).unwrap())
        })
        .collect();
    Emitted {
        bytes: product.emit().unwrap(),
        names,
    }
}

/// Every function symbol of `e` (declared imports aside), by name, read back from the
/// bytes; and what is wrong with them: a function symbol missing, not a function, of 0 bytes,
/// outside a code section, or overlapping another function's code other than as an alias
/// of the same survivor (`survivor`: the function whose code a merged function uses).
fn function_symbols(
    e: &Emitted,
    survivor: &HashMap<FuncId, FuncId>,
) -> (BTreeMap<String, FnSymbol>, Vec<String>) {
    let file = object::File::parse(&*e.bytes).unwrap();
    let by_name: HashMap<&[u8], FnSymbol> = file
        .symbols()
        .filter_map(|s| {
            let sym = FnSymbol {
                section: s.section_index(),
                start: s.address(),
                end: s.address() + s.size(),
                kind: s.kind(),
                scope: s.scope(),
                weak: s.is_weak(),
            };
            Some((s.name_bytes().ok()?, sym))
        })
        .collect();
    let root = |mut f: FuncId| {
        for _ in 0..survivor.len() + 1 {
            match survivor.get(&f) {
                Some(&g) if g != f => f = g,
                _ => break,
            }
        }
        f
    };
    let mut problems = Vec::new();
    let mut symbols = BTreeMap::new();
    // The functions with code, for the overlap check.
    let mut defined: Vec<(FuncId, &str, FnSymbol)> = Vec::new();
    for (id, name) in &e.names {
        let Some(s) = by_name.get(name.as_bytes()) else {
            problems.push(format!("{name}: no symbol in the object file"));
            continue;
        };
        let Some(index) = s.section else {
            continue; // an import
        };
        symbols.insert(name.clone(), s.clone());
        let section = file.section_by_index(index).unwrap();
        if s.kind != SymbolKind::Text {
            problems.push(format!("{name}: a {:?} symbol, not a function", s.kind));
        }
        if s.end == s.start {
            problems.push(format!("{name}: a 0-byte symbol at {:#x}", s.start));
            continue;
        }
        let in_section =
            section.address() <= s.start && s.end <= section.address() + section.size();
        if section.kind() != SectionKind::Text || !in_section {
            problems.push(format!(
                "{name}: [{:#x}, {:#x}) is not within a code section ({:?} {:?}, {:#x} bytes)",
                s.start,
                s.end,
                section.kind(),
                section.name().unwrap_or("?"),
                section.size()
            ));
        }
        defined.push((*id, name, s.clone()));
    }
    for (i, (f, fname, fs)) in defined.iter().enumerate() {
        for (g, gname, gs) in &defined[i + 1..] {
            let overlap = fs.section == gs.section && fs.start < gs.end && gs.start < fs.end;
            let alias = fs.start == gs.start && fs.end == gs.end && root(*f) == root(*g);
            if overlap && !alias {
                problems.push(format!(
                    "{fname} [{:#x}, {:#x}) overlaps {gname} [{:#x}, {:#x}) (survivors {} and {})",
                    fs.start,
                    fs.end,
                    gs.start,
                    gs.end,
                    root(*f),
                    root(*g),
                ));
            }
        }
    }
    (symbols, problems)
}

/// The C driver of the object-file tests: it calls each of `callable` with every input and
/// prints `name input result`.
fn driver_source(callable: &[String]) -> String {
    let mut c = String::from("#include <stdio.h>\n");
    for f in callable {
        c += &format!("extern long long {f}(long long);\n");
    }
    c += "int main(void) {\n";
    c += &format!(
        "    static const long long xs[] = {{{}}};\n",
        INPUTS.map(|x| format!("{x}LL")).join(", ")
    );
    c += "    for (unsigned i = 0; i < sizeof xs / sizeof xs[0]; i++) {\n";
    for f in callable {
        c += &format!("        printf(\"{f} %lld %lld\\n\", xs[i], {f}(xs[i]));\n");
    }
    c += "    }\n    return 0;\n}\n";
    c
}

/// Link `object` with the C driver calling each of `callable` with every input (in `dir`,
/// as `tag`) by the host's `cc`, run it, and return what it printed, or why not.
fn link_and_run(
    dir: &Path,
    tag: &str,
    object: &[u8],
    callable: &[String],
    pic: bool,
) -> Result<String, String> {
    let obj = dir.join(format!("{tag}.o"));
    std::fs::write(&obj, object).unwrap();
    let driver = dir.join(format!("{tag}.c"));
    std::fs::write(&driver, driver_source(callable)).unwrap();
    let exe = dir.join(tag);
    let mut cc = Command::new("cc");
    if !pic {
        cc.arg("-no-pie");
    }
    let out = cc
        .arg(&driver)
        .arg(&obj)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "linking failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = Command::new(&exe).output().unwrap();
    if !run.status.success() {
        return Err(format!("the program failed: {:?}", run.status));
    }
    Ok(String::from_utf8(run.stdout).unwrap())
}

fn cc_available() -> bool {
    Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The start (section, offset) of each FDE of the object's `.eh_frame`, read from the
/// relocations of the FDEs' initial locations.
fn fde_starts(bytes: &[u8]) -> Vec<(object::SectionIndex, u64)> {
    use object::ObjectSymbolTable as _;
    let file = object::File::parse(bytes).unwrap();
    let Some(eh) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let symbols = file.symbol_table().expect("a symbol table");
    let mut out = Vec::new();
    for (_, r) in eh.relocations() {
        let object::RelocationTarget::Symbol(i) = r.target() else {
            continue;
        };
        let sym = symbols.symbol_by_index(i).unwrap();
        if let Some(section) = sym.section_index() {
            out.push((section, sym.address().wrapping_add(r.addend() as u64)));
        }
    }
    out
}

/// What is wrong with the unwind information of `e`: a function symbol with code (an alias
/// included) whose start no FDE covers.
fn unwind_problems(e: &Emitted, symbols: &BTreeMap<String, FnSymbol>) -> Vec<String> {
    let fdes = fde_starts(&e.bytes);
    if fdes.is_empty() {
        return vec!["no FDE in .eh_frame".into()];
    }
    symbols
        .iter()
        .filter(|(_, s)| !fdes.contains(&(s.section.unwrap(), s.start)))
        .map(|(name, s)| format!("{name}: no FDE starts at its code ({:#x})", s.start))
        .collect()
}

/// The ISA of an object-file test with some shared flags set.
type IsaWith<'a> = dyn Fn(&[(&str, &str)]) -> OwnedTargetIsa + 'a;

/// `(dir, tag, object, callable, pic)`: what the C driver linked with the object printed.
type RunDriver<'a> = dyn Fn(&Path, &str, &[u8], &[String], bool) -> Result<String, String> + 'a;

/// A target of the object-file tests: how its ISA is built and, where the tools are there,
/// how a C program linked with an object file runs.
struct ObjectTarget<'a> {
    what: &'a str,
    isa: &'a IsaWith<'a>,
    run: Option<&'a RunDriver<'a>>,
    /// Emit `.eh_frame` (`ObjectBuilder::unwind_info`) and check an FDE for every function.
    unwind: bool,
}

/// Object files of `t`, PIC and not: `MergeModule<ObjectModule>` accepts what the plain
/// module does and emits the functions it does, with the same symbol kinds, scopes and
/// weakness; every function symbol has code of its own or exactly its survivor's (never 0
/// bytes, never outside code, never overlapping other code), and with unwind information an
/// FDE at its start (an alias shares its survivor's); a C program linked with either object
/// prints the same. The failures, one entry per configuration.
fn check_object_files(t: &ObjectTarget) -> Vec<String> {
    let object_module = |isa: OwnedTargetIsa| {
        let mut b = ObjectBuilder::new(isa, "dropin", default_libcall_names()).unwrap();
        b.unwind_info(t.unwind);
        ObjectModule::new(b)
    };
    let dir = std::env::temp_dir().join(format!(
        "mergelift-dropin-{}-{}",
        t.what,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for pic in [false, true] {
        let flags: &[(&str, &str)] = if pic { &[("is_pic", "true")] } else { &[] };
        let what = format!("{}, {}", t.what, if pic { "PIC" } else { "non-PIC" });

        let mut plain = object_module((t.isa)(flags));
        let mut r = Run::new(&mut plain);
        let callable = object_functions(&mut r);
        let plain_log = r.log;
        let plain_object = emit(plain.finish());
        let (plain_syms, mut plain_problems) = function_symbols(&plain_object, &HashMap::new());
        if t.unwind {
            plain_problems.extend(unwind_problems(&plain_object, &plain_syms));
        }
        assert!(
            plain_problems.is_empty(),
            "{what}: plain object: {plain_problems:?}"
        );
        let want = t.run.map(|run| {
            let out = run(&dir, "plain", &plain_object.bytes, &callable, pic)
                .unwrap_or_else(|e| panic!("{what} plain object: {e}"));
            assert_eq!(out.lines().count(), callable.len() * INPUTS.len());
            out
        });

        for (label, config) in configs() {
            // Every function with code has its FDE, threads or not: an object module whose
            // builder may write unwind information compiles through `define_function`.
            let unwind = t.unwind;
            let mut m = MergeModule::with_config(object_module((t.isa)(flags)), config);
            let mut r = Run::new(&mut m);
            assert_eq!(callable, object_functions(&mut r));
            let mut problems = Log::differences(&plain_log, &r.log);
            // The last flush, as `finish` runs it, to read the merges before `finish`
            // consumes the module.
            let mut survivors = HashMap::new();
            let product = m.flush_last().and_then(|()| {
                // A shared body has no id of the host's: each stands for itself here, by
                // an id no function has.
                let mut bodies: HashMap<String, FuncId> = HashMap::new();
                let merges: Vec<_> = m.merges().collect();
                for (g, f, _) in merges {
                    let f = f.unwrap_or_else(|| {
                        let body = m.survivor_name(g).expect("merged");
                        let next = FuncId::from_u32(u32::MAX - 1 - bodies.len() as u32);
                        *bodies.entry(body).or_insert(next)
                    });
                    survivors.insert(g, f);
                }
                m.finish()
            });
            let product = match product {
                Ok(p) => p,
                Err(e) => {
                    problems.push(format!("  finish: {}: {e:#}", variant(&e)));
                    failures.push(format!("[{what}, {label}]\n{}", shorten(&problems)));
                    continue;
                }
            };
            let merged_object = emit(product);

            let (syms, bad) = function_symbols(&merged_object, &survivors);
            problems.extend(bad.into_iter().map(|p| format!("  {p}")));
            if unwind {
                let bad = unwind_problems(&merged_object, &syms);
                problems.extend(bad.into_iter().map(|p| format!("  {p}")));
            }
            for (name, p) in &plain_syms {
                let attrs = |s: &FnSymbol| (s.kind, s.scope, s.weak);
                match syms.get(name) {
                    None => problems.push(format!("  {name}: not defined in the object")),
                    Some(s) if attrs(s) != attrs(p) => problems.push(format!(
                        "  {name}: (kind, scope, weak) {:?}, plain {:?}",
                        attrs(s),
                        attrs(p)
                    )),
                    Some(_) => {}
                }
            }

            if let (Some(want), Some(run)) = (&want, t.run) {
                match run(&dir, "merged", &merged_object.bytes, &callable, pic) {
                    Err(e) => problems.push(format!("  C driver: {e}")),
                    Ok(got) if got.lines().count() != want.lines().count() => {
                        problems.push(format!("  C driver printed {got:?}, plain {want:?}"))
                    }
                    Ok(got) => {
                        for (w, g) in want.lines().zip(got.lines()).filter(|(w, g)| w != g) {
                            problems.push(format!("  C driver printed {g:?}, plain {w:?}"));
                        }
                    }
                }
            }
            if !problems.is_empty() {
                failures.push(format!("[{what}, {label}]\n{}", shorten(&problems)));
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    failures
}

/// Object files for the host (x86-64: native thunks, no unwind information asked for),
/// linked by `cc`.
#[test]
fn object_files_conform() {
    let cc = cc_available();
    if !cc {
        println!("object_files_conform: no `cc`, the link test is skipped");
    }
    let failures = check_object_files(&ObjectTarget {
        what: "host",
        isa: &host_isa,
        run: cc.then_some(&link_and_run),
        unwind: false,
    });
    assert!(
        failures.is_empty(),
        "MergeModule<ObjectModule> differs from ObjectModule:\n{}",
        failures.join("\n")
    );
}

/// Object files for aarch64, riscv64 and s390x (thunks compiled by Cranelift), with
/// `.eh_frame`, linked statically with the C driver by the target's cross gcc and run under
/// qemu-user. Without those tools the link is skipped with a message naming the packages
/// (under CI=true that fails).
#[test]
fn object_files_conform_on_every_target() {
    use mergelift_tools::cross::{linux_isa, run_c_program, toolchain_for_test, Arch};
    let mut failures = Vec::new();
    for arch in Arch::ALL {
        let isa = |flags: &[(&str, &str)]| {
            let base = isa_with(isa::lookup(arch.linux_triple()).unwrap(), &[]);
            linux_isa(arch, &*base, flags).unwrap()
        };
        let tc = toolchain_for_test(arch);
        let run = |_: &Path, _: &str, object: &[u8], callable: &[String], _: bool| {
            let tc = tc.as_ref().expect("checked");
            run_c_program(tc, &driver_source(callable), &[object.to_vec()])
        };
        failures.extend(check_object_files(&ObjectTarget {
            what: arch.name(),
            isa: &isa,
            run: tc.is_some().then_some(&run),
            unwind: true,
        }));
    }
    assert!(
        failures.is_empty(),
        "MergeModule<ObjectModule> differs from ObjectModule:\n{}",
        failures.join("\n")
    );
}
