//! Code size and compile time, without and with Mergelift: the functions of the inputs are
//! compiled into a plain `ObjectModule` ("before"), then into a `MergeModule<ObjectModule>`
//! ("after"), for the ISA the inputs' `set` and `target` lines ask for (or `--target`). Both
//! sides link the same way (by name, imports left undefined), so the difference is
//! Mergelift's alone.

use crate::input::{file_isa, isa_signature, ClifFile};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::Context;
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use jit_driver::{declare_by_name, MergeConfig, MergeModule, OptLevel};
use midend::state::{MergeKind, MergedBy};
use std::time::Instant;

/// What `mergelift size` measures with.
#[derive(Clone, Debug, Default)]
pub struct SizeOptions {
    /// The passes and the rest of the pipeline's configuration.
    pub config: MergeConfig,
    /// Override the inputs' opt level.
    pub opt_level: Option<OptLevel>,
    /// Keep the object file of the "after" module (`SizeReport::object`).
    pub object: bool,
    /// Which side compiles first.
    pub sides: Sides,
    /// Declare every function `Linkage::Local` (a runtime's internal functions), not
    /// `Export`: `merge-similar` then folds them, each with a thunk while
    /// `config.fetch_locals` keeps them fetchable.
    pub local: bool,
    /// Compile the pipeline's side in batches of this many functions, as a JIT that
    /// finalizes as it goes (`MergeModule::flush` after each; later batches merge into what
    /// earlier ones compiled). `None`: one last batch, as an object file's `finish`.
    pub batch: Option<usize>,
    /// Compile for this target (`--target`): the inputs' target lines of its architecture,
    /// or this triple where they name none. `None`: the host's, or what the inputs name.
    pub target: Option<crate::cross::Target>,
}

/// What `mergelift size` reports.
#[derive(Clone, Debug, Default)]
pub struct SizeReport {
    pub functions_in: usize,
    /// Functions compiled after the passes (merged functions are not).
    pub functions_out: usize,
    pub merged: usize,
    pub replaced: usize,
    pub aliased: usize,
    pub thunked: usize,
    /// Folded into a shared body by merge-similar (no code).
    pub folded: usize,
    pub clif_insts: usize,
    pub lir_insts_before: usize,
    pub lir_insts_after: usize,
    pub code_bytes_before: usize,
    pub code_bytes_after: usize,
    /// Functions compiled from their lowered LIR (a pass changed them).
    pub lowered: usize,
    /// Thunks written as machine code (`MergeConfig::native_thunks`), not compiled.
    pub native_thunks: usize,
    /// Functions compiled from their input without being lifted: no pass could merge them
    /// (`MergeConfig::lift_all`). `lir_insts_before` counts the lifted ones only.
    pub not_lifted: usize,
    /// Which side compiled first (its times include the process's first touches of memory).
    pub sides: Sides,
    /// Phase wall times in ms: parse, compile_before, lift, each pass, lower, verify,
    /// compile_after.
    pub time_ms: Vec<(String, f64)>,
    /// The object file of the "after" module, when asked for.
    pub object: Option<Vec<u8>>,
    /// Every function of the inputs, in input order: its code bytes on both sides and how it
    /// was merged (what `mergelift report` builds families from).
    pub functions: Vec<FunctionSize>,
    /// The functions the passes made (the shared bodies of `merge-similar` and
    /// `merge-aligned`; `bytes_before` 0), which a later pass may merge in turn. With
    /// `functions`' `bytes_after` they add up to `code_bytes_after`.
    pub made: Vec<FunctionSize>,
}

/// One input function's code on both sides of the measurement.
#[derive(Clone, Debug, Default)]
pub struct FunctionSize {
    /// Its name in the Cranelift IR (`u0:12`; `%name` without the `%`).
    pub name: String,
    /// Code bytes compiled plain.
    pub bytes_before: usize,
    /// Code bytes of its own after the pipeline: 0 when merged away with no code (replaced,
    /// aliased, folded), a thunk's bytes when it is a thunk to its survivor.
    pub bytes_after: usize,
    /// Its survivor, when a pass merged it.
    pub merged: Option<MergedInto>,
}

/// Where a merged function's code now is.
#[derive(Clone, Debug)]
pub struct MergedInto {
    /// The survivor's name: an input function, or one the passes made (see `made`).
    pub survivor: String,
    pub by: MergedBy,
    pub kind: MergeKind,
}

impl SizeReport {
    /// The time of a phase in ms (0 when it did not run).
    pub fn time(&self, phase: &str) -> f64 {
        self.time_ms
            .iter()
            .find(|(n, _)| n == phase)
            .map_or(0.0, |(_, v)| *v)
    }

    /// The pipeline's time: every phase of the "after" side (sub-phases such as
    /// `merge.walk` are part of their pass and not counted again).
    pub fn pipeline_ms(&self) -> f64 {
        self.time_ms
            .iter()
            .filter(|(n, _)| n != "parse" && n != "compile_before" && !n.contains('.'))
            .map(|(_, v)| v)
            .sum()
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut time = serde_json::Map::new();
        for (k, v) in &self.time_ms {
            time.insert(k.clone(), serde_json::json!(v));
        }
        let before = self.time("compile_before");
        serde_json::json!({
            "functions_in": self.functions_in,
            "functions_out": self.functions_out,
            "merged": self.merged,
            "replaced": self.replaced,
            "aliased": self.aliased,
            "thunked": self.thunked,
            "folded": self.folded,
            "lowered": self.lowered,
            "native_thunks": self.native_thunks,
            "not_lifted": self.not_lifted,
            "first": match self.sides {
                Sides::PlainFirst => "plain",
                Sides::PipelineFirst => "pipeline",
            },
            "clif_insts": self.clif_insts,
            "lir_insts_before": self.lir_insts_before,
            "lir_insts_after": self.lir_insts_after,
            "code_bytes_before": self.code_bytes_before,
            "code_bytes_after": self.code_bytes_after,
            "time_ms": time,
            "pipeline_ms": self.pipeline_ms(),
            "ratio": if before > 0.0 { self.pipeline_ms() / before } else { 0.0 },
        })
    }
}

/// The ISA all `files` ask for (for `target`, see [`file_isa`]); they must agree.
pub fn common_isa(
    files: &[ClifFile],
    opt: Option<OptLevel>,
    target: Option<&crate::cross::Target>,
) -> Result<OwnedTargetIsa, String> {
    let first = files.first().ok_or("no input files")?;
    let sig = isa_signature(first);
    for f in &files[1..] {
        if isa_signature(f) != sig {
            return Err(format!(
                "{} and {} ask for different ISA settings (`set`/`target` lines): the inputs \
                 form one module; measure them one at a time",
                first.path.display(),
                f.path.display()
            ));
        }
    }
    file_isa(first, opt, target)
}

fn object_module(isa: OwnedTargetIsa) -> Result<ObjectModule, String> {
    let b = ObjectBuilder::new(isa, "mergelift", default_libcall_names())
        .map_err(|e| format!("object file: {e}"))?;
    Ok(ObjectModule::new(b))
}

/// The file that defines each function, by name.
type FileOf<'a> = midend::hash::HashMap<String, &'a std::path::Path>;

/// `msg` about function `name`, prefixed with its file.
fn in_file(name: &str, msg: String, file_of: &FileOf) -> String {
    match file_of.get(name) {
        Some(p) => format!("{}: {msg}", p.display()),
        None => msg,
    }
}

/// A module error as text, prefixed with the file of the function it names.
fn module_error(e: cranelift_module::ModuleError, file_of: &FileOf) -> String {
    let msg = format!("{e:#}");
    match &e {
        cranelift_module::ModuleError::Backend(b) => {
            match b.downcast_ref::<jit_driver::FunctionError>() {
                Some(f) => in_file(&f.failures[0].function, msg, file_of),
                None => msg,
            }
        }
        _ => msg,
    }
}

/// The functions of all files, with a name defined twice reported with both files.
fn functions(
    files: &[ClifFile],
    linkage: Linkage,
) -> Result<(Vec<(Linkage, cranelift_codegen::ir::Function)>, FileOf<'_>), String> {
    let mut seen: FileOf = Default::default();
    let mut out = Vec::new();
    for file in files {
        for f in &file.functions {
            let name = jit_driver::opmap::func_name(&f.name);
            if let Some(prev) = seen.insert(name.clone(), &file.path) {
                return Err(if prev == file.path {
                    format!("{}: function {name} is defined twice", file.path.display())
                } else {
                    format!(
                        "function {name} is defined in both {} and {}: the inputs form one \
                         module; measure them one at a time",
                        prev.display(),
                        file.path.display()
                    )
                });
            }
            out.push((linkage, f.clone()));
        }
    }
    Ok((out, seen))
}

/// Which side of the comparison `measure` compiles first.
///
/// The first side runs in a heap the process has not used yet (every allocation grows it and
/// touches new pages); the second reuses what the first freed. Measuring in both orders
/// shows how much that favours the second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sides {
    /// The plain compile, then the pipeline (the default).
    #[default]
    PlainFirst,
    /// The pipeline, then the plain compile.
    PipelineFirst,
}

/// Measure `files` as one module. `progress(phase, k, n)` is called before each of the `n`
/// phases (the plain compile, the pipeline); both compile on `opts.config.threads` threads. Any function Cranelift cannot compile is an error naming it.
pub fn measure(
    files: &[ClifFile],
    opts: &SizeOptions,
    parse_ms: f64,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<SizeReport, String> {
    let linkage = if opts.local {
        Linkage::Local
    } else {
        Linkage::Export
    };
    let (funcs, file_of) = functions(files, linkage)?;
    let file_of = &file_of;
    let mut r = SizeReport {
        sides: opts.sides,
        functions_in: funcs.len(),
        // (the instructions in the layout: a function Cranelift's steps took code out of
        // keeps it in its tables)
        clif_insts: (funcs.iter())
            .flat_map(|(_, f)| f.layout.blocks().map(|b| f.layout.block_insts(b).count()))
            .sum(),
        functions: (funcs.iter())
            .map(|(_, f)| FunctionSize {
                name: jit_driver::opmap::func_name(&f.name),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    r.time_ms.push(("parse".into(), parse_ms));
    match opts.sides {
        Sides::PlainFirst => {
            progress("compile_before", 0, 2);
            compile_plain(files, opts, funcs.clone(), file_of, &mut r)?;
            progress("pipeline", 1, 2);
            compile_pipeline(files, opts, funcs, file_of, &mut r)?;
        }
        Sides::PipelineFirst => {
            let plain_funcs = funcs.clone();
            progress("pipeline", 0, 2);
            compile_pipeline(files, opts, funcs, file_of, &mut r)?;
            progress("compile_before", 1, 2);
            compile_plain(files, opts, plain_funcs, file_of, &mut r)?;
        }
    }
    Ok(r)
}

type Functions = Vec<(Linkage, cranelift_codegen::ir::Function)>;

/// The "before" side: plain Cranelift (`compile_before`, `code_bytes_before`). Never inlined,
/// as `compile_pipeline`: `scripts/iratios.sh` finds the two sides by name in a profile.
#[inline(never)]
fn compile_plain(
    files: &[ClifFile],
    opts: &SizeOptions,
    funcs: Functions,
    file_of: &FileOf,
    r: &mut SizeReport,
) -> Result<(), String> {
    let mut plain = object_module(common_isa(files, opts.opt_level, opts.target.as_ref())?)?;
    let declared = declare_by_name(&mut plain, funcs).map_err(|e| format!("{e:#}"))?;
    let n = declared.len();
    let threads = opts.config.threads.get();
    let mut names = midend::hash::HashMap::default();
    let mut jobs = Vec::with_capacity(n);
    for (name, id, f) in declared {
        names.insert(id, name);
        jobs.push((id, f));
    }
    let t = Instant::now();
    let bytes = jit_driver::module::define_plain(&mut plain, jobs, threads)
        .map_err(|(id, msg)| in_file(names.get(&id).map_or("", |s| s.as_str()), msg, file_of))?;
    r.code_bytes_before = bytes.iter().sum();
    // (`declare_by_name` keeps the order of the inputs, and `define_plain` of its jobs.)
    for (f, b) in r.functions.iter_mut().zip(&bytes) {
        f.bytes_before = *b;
    }
    r.time_ms
        .push(("compile_before".into(), t.elapsed().as_secs_f64() * 1e3));
    Ok(())
}

/// The "after" side: the pipeline (its phases, `compile_after`, the merge counts).
#[inline(never)]
fn compile_pipeline(
    files: &[ClifFile],
    opts: &SizeOptions,
    funcs: Functions,
    file_of: &FileOf,
    r: &mut SizeReport,
) -> Result<(), String> {
    let inner = object_module(common_isa(files, opts.opt_level, opts.target.as_ref())?)?;
    // (`object_module`'s builder writes no unwind information.)
    let mut m = MergeModule::with_config(inner, opts.config.clone()).without_unwind_info();
    let declared = declare_by_name(&mut m, funcs).map_err(|e| format!("{e:#}"))?;
    let ids: Vec<FuncId> = declared.iter().map(|(_, id, _)| *id).collect();
    let mut ctx = Context::new();
    let batch = opts.batch.unwrap_or(usize::MAX).max(1);
    for (k, (_, id, f)) in declared.into_iter().enumerate() {
        ctx.clear();
        ctx.func = f;
        m.define_function(id, &mut ctx)
            .map_err(|e| module_error(e, file_of))?;
        if (k + 1).is_multiple_of(batch) {
            m.flush().map_err(|e| module_error(e, file_of))?;
        }
    }
    // The last batch (the only one, unless `batch`), as an object file's `finish` compiles it.
    m.flush_last().map_err(|e| module_error(e, file_of))?;
    let stats = m.stats().clone();
    for (phase, d) in stats.times() {
        let name = if phase == "compile" {
            "compile_after".to_string()
        } else {
            phase.clone()
        };
        r.time_ms.push((name, d.as_secs_f64() * 1e3));
    }
    r.lir_insts_before = stats.get(midend::Counter::LirInstsIn) as usize;
    r.lir_insts_after = stats.get(midend::Counter::LirInstsOut) as usize;
    r.code_bytes_after = stats.get(midend::Counter::CodeBytes) as usize;
    r.functions_out = stats.get(midend::Counter::Compiled) as usize;
    r.lowered = stats.get(midend::Counter::Lowered) as usize;
    r.native_thunks = stats.get(midend::Counter::NativeThunks) as usize;
    r.not_lifted = stats.get(midend::Counter::NotLifted) as usize;
    let name = |id: FuncId| {
        m.declarations()
            .get_function_decl(id)
            .linkage_name(id)
            .into_owned()
    };
    // (Survivors by name: a shared body is Mergelift's own, with no id of the host's.)
    let merged_into = |id: FuncId| match (m.survivor_name(id), m.merge_kind(id), m.merged_by(id)) {
        (Some(survivor), Some(kind), Some(by)) => Some(MergedInto { survivor, by, kind }),
        _ => None,
    };
    let mut input = cranelift_entity::EntitySet::<FuncId>::new();
    for (f, &id) in r.functions.iter_mut().zip(&ids) {
        input.insert(id);
        f.bytes_after = m.code_bytes(id).unwrap_or(0);
        f.merged = merged_into(id);
    }
    for (id, _) in m.declarations().get_functions() {
        if input.contains(id) {
            continue;
        }
        let merged = merged_into(id);
        if let (None, None) = (m.code_bytes(id), &merged) {
            continue; // an import
        }
        r.made.push(FunctionSize {
            name: name(id),
            bytes_before: 0,
            bytes_after: m.code_bytes(id).unwrap_or(0),
            merged,
        });
    }
    // What the passes made: shared bodies.
    for f in m.own_functions() {
        let merged = f
            .merged
            .map(|(survivor, kind, by)| MergedInto { survivor, by, kind });
        if let (None, None) = (f.code_bytes, &merged) {
            continue;
        }
        r.made.push(FunctionSize {
            name: f.name,
            bytes_before: 0,
            bytes_after: f.code_bytes.unwrap_or(0),
            merged,
        });
    }
    for (_, _, kind) in m.merges() {
        r.merged += 1;
        match kind {
            MergeKind::Replaced => r.replaced += 1,
            MergeKind::Aliased => r.aliased += 1,
            MergeKind::Thunked => r.thunked += 1,
            MergeKind::Folded => r.folded += 1,
        }
    }
    if opts.object {
        let product = m.finish().map_err(|e| format!("{e:#}"))?;
        r.object = Some(
            product
                .emit()
                .map_err(|e| format!("writing the object file: {e}"))?,
        );
    }
    Ok(())
}

/// What merging could save at most when functions are compiled in batches of `batch`, in
/// input order (`size --batch N`), each merged only with functions of its own batch or an
/// earlier one: the *order-limited ceiling*, from what one flush merged (`one_flush`, a
/// report of the same inputs in one batch; one flush is the ceiling without order).
///
/// An exact merge loses nothing to order: of equal functions the first compiled survives and
/// the others merge into it as they come. A `merge-similar` family does, where its first batch
/// holds only one of its members: that member was compiled on its own before any other was
/// defined, and keeps its code; the family saves what it saves in one flush less that
/// member's saving, or nothing. (Where its first batch holds two or more, the family can start
/// there and save what it does in one flush.)
pub fn order_limited_saving(one_flush: &SizeReport, batch: usize) -> usize {
    let batch = batch.max(1);
    let saved = |f: &FunctionSize| f.bytes_before as i64 - f.bytes_after as i64;
    let mut total: i64 = 0;
    // Each similar family by its shared body: its saving in one flush, and its first batch
    // with the saving of its members there.
    let mut families: std::collections::BTreeMap<&str, (i64, usize, Vec<i64>)> = Default::default();
    for (pos, f) in one_flush.functions.iter().enumerate() {
        match &f.merged {
            Some(m) if m.by == MergedBy::Similar => {
                let e = families
                    .entry(m.survivor.as_str())
                    .or_insert((0, usize::MAX, Vec::new()));
                e.0 += saved(f);
                let b = pos / batch;
                if b < e.1 {
                    e.1 = b;
                    e.2.clear();
                }
                if b == e.1 {
                    e.2.push(saved(f));
                }
            }
            _ => total += saved(f),
        }
    }
    for f in &one_flush.made {
        match families.get_mut(f.name.as_str()) {
            // (A shared body's `bytes_before` is 0.)
            Some(e) => e.0 += saved(f),
            None => total += saved(f),
        }
    }
    for (_, (family, _, first)) in families {
        let lost = match first.as_slice() {
            [one] => *one,
            _ => 0,
        };
        total += (family - lost).max(0);
    }
    total.max(0) as usize
}
