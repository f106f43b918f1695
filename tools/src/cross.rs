//! Foreign targets: code Cranelift compiles for aarch64, riscv64 or s390x, run under qemu-user.
//!
//! Rust's std for another target cannot be installed here, so nothing of Mergelift runs on the
//! foreign ISA. Functions are compiled into object files for it (cranelift-object), each
//! object with a *trampoline* per signature called: `(fn, buf)`, which loads the arguments
//! from 16-byte slots of `buf`, calls `fn` and stores its results back into the slots (as
//! Cranelift's own run-test runner does: scalars in the target's byte order, vectors
//! little-endian). The objects are linked statically with a generated C harness by the
//! target's cross gcc and the program runs under qemu-user. The harness makes every call in
//! order and prints the result slots of each in hex; [`run_harness`] reads them back. A call
//! that traps (a signal) or does not return within the time limit is that call's outcome and
//! the harness goes on with the next.
//!
//! Several modules can share one program (linking costs more than the run): give each its
//! own symbol prefix with [`prefix_names`].

use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::{self, InstBuilder};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use jit_driver::{MergeConfig, MergeModule};
use midend::Stats;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use target_lexicon::{Architecture, Triple};

/// A foreign architecture whose code the tools run under qemu-user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    Aarch64,
    Riscv64,
    S390x,
}

impl Arch {
    /// Every foreign architecture.
    pub const ALL: [Arch; 3] = [Arch::Aarch64, Arch::Riscv64, Arch::S390x];

    /// The architecture of `triple`, if it is one of these.
    pub fn of(triple: &Triple) -> Option<Arch> {
        match triple.architecture {
            Architecture::Aarch64(_) => Some(Arch::Aarch64),
            Architecture::Riscv64(_) => Some(Arch::Riscv64),
            Architecture::S390x => Some(Arch::S390x),
            _ => None,
        }
    }

    /// `aarch64`, `riscv64`, `s390x`: as `target` lines and `--target` spell them.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64",
            Arch::Riscv64 => "riscv64",
            Arch::S390x => "s390x",
        }
    }

    /// The Linux triple the harness is built for.
    pub fn linux_triple(self) -> Triple {
        let t = match self {
            Arch::Aarch64 => "aarch64-unknown-linux-gnu",
            Arch::Riscv64 => "riscv64gc-unknown-linux-gnu",
            Arch::S390x => "s390x-unknown-linux-gnu",
        };
        t.parse().expect("a known triple")
    }

    /// The cross compiler, and the Debian package that has it.
    fn gcc(self) -> (&'static str, &'static str) {
        match self {
            Arch::Aarch64 => ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
            Arch::Riscv64 => ("riscv64-linux-gnu-gcc", "gcc-riscv64-linux-gnu"),
            Arch::S390x => ("s390x-linux-gnu-gcc", "gcc-s390x-linux-gnu"),
        }
    }

    /// The Debian package of the target's C library for static linking (a package the cross
    /// gcc only recommends).
    fn libc_package(self) -> &'static str {
        match self {
            Arch::Aarch64 => "libc6-dev-arm64-cross",
            Arch::Riscv64 => "libc6-dev-riscv64-cross",
            Arch::S390x => "libc6-dev-s390x-cross",
        }
    }

    /// The emulator (Debian package `qemu-user`).
    fn qemu(self) -> &'static str {
        match self {
            Arch::Aarch64 => "qemu-aarch64",
            Arch::Riscv64 => "qemu-riscv64",
            Arch::S390x => "qemu-s390x",
        }
    }

    /// The CPU qemu emulates: every extension Cranelift can use that qemu 7.2 (Debian 12)
    /// has. riscv64: V with 128-bit vectors, Zba, Zbb, Zbc, Zbs, Zbkb, Zfh, Zfhmin (and the
    /// default G and C).
    fn qemu_cpu(self) -> &'static str {
        match self {
            Arch::Aarch64 | Arch::S390x => "max",
            Arch::Riscv64 => {
                "rv64,v=true,vlen=128,elen=64,vext_spec=v1.0,zba=true,zbb=true,zbc=true,\
                 zbs=true,zbkb=true,Zfh=true,Zfhmin=true"
            }
        }
    }

    /// Cranelift ISA flags whose instructions the emulated CPU ([`Arch::qemu_cpu`]) lacks:
    /// code compiled with one of them on cannot run here.
    pub fn unsupported_flags(self) -> &'static [&'static str] {
        match self {
            Arch::Aarch64 => &[],
            Arch::Riscv64 => &["has_zfa", "has_zcb", "has_zicond", "has_zvfh", "has_zvbb"],
            Arch::S390x => &["has_mie4", "has_vxrs_ext3"],
        }
    }

    /// Is the target big-endian (scalars are written and read in its byte order)?
    pub fn big_endian(self) -> bool {
        self == Arch::S390x
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--target`: a triple and ISA flags, spelled as a `target` line of a `.clif` file spells
/// them (`riscv64 has_v`, `x86_64 has_avx`, `aarch64-apple-darwin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub triple: Triple,
    /// ISA flags to set, by name (`name` alone sets a boolean flag).
    pub flags: Vec<(String, String)>,
}

impl Target {
    /// Parse a `--target` value: an architecture name (`x86_64`, `aarch64`, `riscv64`,
    /// `s390x`: Linux, or the host itself for the host's architecture) or a full triple, then
    /// ISA flags. Errors name what Cranelift supports, or the flag it does not know.
    pub fn parse(s: &str) -> Result<Target, String> {
        let mut words = s.split_whitespace();
        let arch = words.next().ok_or("--target: empty")?;
        let short = match arch {
            "aarch64" | "arm64" => Some(Arch::Aarch64.linux_triple()),
            "riscv64" | "riscv64gc" => Some(Arch::Riscv64.linux_triple()),
            "s390x" => Some(Arch::S390x.linux_triple()),
            "x86_64" | "x86-64" | "x64" => {
                let host = Triple::host();
                Some(if host.architecture == Architecture::X86_64 {
                    host
                } else {
                    "x86_64-unknown-linux-gnu".parse().expect("a known triple")
                })
            }
            _ => None,
        };
        let triple = match short {
            Some(t) => t,
            None => arch
                .parse::<Triple>()
                .map_err(|e| format!("--target {arch}: not a target triple ({e})"))?,
        };
        let flags = words
            .map(|w| match w.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (w.to_string(), "true".to_string()),
            })
            .collect();
        let t = Target { triple, flags };
        // Cranelift knows the triple and every flag.
        t.builder()?;
        Ok(t)
    }

    /// The foreign architecture, if it is one.
    pub fn arch(&self) -> Option<Arch> {
        Arch::of(&self.triple)
    }

    /// Is this the host as it is (its triple, no flags)? Then the host's own features
    /// (`cranelift_native`) are used.
    pub fn is_host(&self) -> bool {
        self.triple == Triple::host() && self.flags.is_empty()
    }

    /// An ISA builder for the triple (the host's, with every feature it detects, for
    /// [`Target::is_host`]) with the flags set.
    pub fn builder(&self) -> Result<cranelift_codegen::isa::Builder, String> {
        let mut b = if self.is_host() {
            cranelift_native::builder().map_err(|e| format!("this host: {e}"))?
        } else {
            cranelift_codegen::isa::lookup(self.triple.clone()).map_err(|e| {
                format!(
                    "--target {}: Cranelift cannot compile for it ({e}); its targets are \
                     x86_64, aarch64, riscv64 and s390x",
                    self.triple
                )
            })?
        };
        self.set_flags(&mut b)?;
        Ok(b)
    }

    /// Set the flags in `b` (an ISA builder of this architecture).
    pub fn set_flags(&self, b: &mut cranelift_codegen::isa::Builder) -> Result<(), String> {
        for (k, v) in &self.flags {
            b.set(k, v)
                .map_err(|e| format!("--target: {} has no ISA flag {k}={v} ({e})", self.triple))?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.triple)?;
        for (k, v) in &self.flags {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// The architecture of `triple` as a `target` line spells it (`riscv64`, not `riscv64gc`).
pub fn arch_name(triple: &Triple) -> String {
    Arch::of(triple).map_or_else(|| triple.architecture.to_string(), |a| a.name().to_string())
}

/// Do two triples name the same architecture (`riscv64` and `riscv64gc` do)?
pub fn same_arch(a: &Triple, b: &Triple) -> bool {
    std::mem::discriminant(&a.architecture) == std::mem::discriminant(&b.architecture)
}

/// The cross compiler and emulator of one architecture, found on this machine.
#[derive(Clone, Debug)]
pub struct Toolchain {
    pub arch: Arch,
    gcc: String,
    qemu: String,
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Does `gcc` find the target's static C library? (It prints the bare name when not.)
fn has_static_libc(gcc: &str) -> bool {
    Command::new(gcc)
        .arg("-print-file-name=libc.a")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains('/'))
}

impl Toolchain {
    /// Find the cross gcc and qemu-user of `arch`. The error names each program missing and
    /// the Debian package that has it.
    pub fn find(arch: Arch) -> Result<Toolchain, String> {
        let (gcc, gcc_pkg) = arch.gcc();
        let qemu = arch.qemu();
        let mut missing = Vec::new();
        if !runs(gcc, "--version") {
            missing.push((gcc, gcc_pkg));
        } else if !has_static_libc(gcc) {
            missing.push(("libc.a", arch.libc_package()));
        }
        if !runs(qemu, "-version") {
            missing.push((qemu, "qemu-user"));
        }
        if !missing.is_empty() {
            let what: Vec<String> = (missing.iter())
                .map(|(p, pkg)| format!("`{p}` (Debian package {pkg})"))
                .collect();
            let pkgs: Vec<&str> = missing.iter().map(|(_, pkg)| *pkg).collect();
            return Err(format!(
                "running {arch} code needs {}, not found: install with `apt-get install {}`",
                what.join(" and "),
                pkgs.join(" ")
            ));
        }
        Ok(Toolchain {
            arch,
            gcc: gcc.to_string(),
            qemu: qemu.to_string(),
        })
    }
}

/// The toolchain of `arch` for a test: `None` (after saying which packages are missing and
/// that the test skips) when it is not installed, except under `CI=true`, where a missing
/// toolchain is a failure (CI installs them: `.ci/run`).
pub fn toolchain_for_test(arch: Arch) -> Option<Toolchain> {
    match Toolchain::find(arch) {
        Ok(tc) => Some(tc),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true, but {e}")
        }
        Err(e) => {
            eprintln!("skipping the {arch} part: {e}");
            None
        }
    }
}

/// `isa` (its ISA flags and shared flags) rebuilt for `arch`'s Linux triple, with `overrides`
/// of shared flags. (The harness links code statically, PIC or not.)
pub fn linux_isa(
    arch: Arch,
    isa: &dyn TargetIsa,
    overrides: &[(&str, &str)],
) -> Result<OwnedTargetIsa, String> {
    let mut fb = settings::builder();
    for v in isa.flags().iter() {
        let _ = fb.set(v.name, &v.value_string());
    }
    for (k, v) in overrides {
        fb.set(k, v).map_err(|e| format!("setting {k}={v}: {e}"))?;
    }
    let mut ib = cranelift_codegen::isa::lookup(arch.linux_triple()).map_err(|e| e.to_string())?;
    for v in isa.isa_flags() {
        let _ = ib.set(v.name, &v.value_string());
    }
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| e.to_string())
}

/// The ISA flags of `isa` that are on and that `arch`'s emulator cannot run.
pub fn unrunnable_flags(arch: Arch, isa: &dyn TargetIsa) -> Vec<String> {
    isa.isa_flags()
        .iter()
        .filter(|v| v.as_bool() == Some(true) && arch.unsupported_flags().contains(&v.name))
        .map(|v| v.name.to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Names.

/// A symbol the C harness can name in an `asm` label (and the assembler takes unquoted).
fn plain_symbol(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '.')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$')
}

/// Give every function of `funcs` the name `prefix` + its name (characters a symbol cannot
/// have become `_`), in its definition and in every reference to it (calls, `func_addr`,
/// symbol global values) from the others; names no function of `funcs` defines (imports,
/// libcalls) stay. Returns each function's old name (as `opmap::func_name` spells it) and new
/// one, in order. Modules renamed with distinct prefixes link into one program.
pub fn prefix_names(funcs: &mut [ir::Function], prefix: &str) -> Vec<(String, String)> {
    use std::collections::HashMap;
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(funcs.len());
    for (k, f) in funcs.iter().enumerate() {
        let old = jit_driver::opmap::func_name(&f.name);
        let clean: String = old
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let mut new = format!("{prefix}{clean}");
        if !taken.insert(new.clone()) {
            new = format!("{prefix}{clean}_{k}");
            taken.insert(new.clone());
        }
        renamed.insert(old.clone(), new.clone());
        out.push((old, new));
    }
    let rename = |f: &ir::Function, name: &ir::ExternalName| -> Option<ir::ExternalName> {
        let spelled = match name {
            ir::ExternalName::User(r) => {
                let u = f.params.user_named_funcs().get(*r)?;
                format!("u{}:{}", u.namespace, u.index)
            }
            ir::ExternalName::TestCase(t) => String::from_utf8_lossy(t.raw()).into_owned(),
            _ => return None,
        };
        renamed.get(&spelled).map(ir::ExternalName::testcase)
    };
    for (f, (_, new)) in funcs.iter_mut().zip(&out) {
        f.name = ir::UserFuncName::testcase(new);
        let refs: Vec<(ir::FuncRef, ir::ExternalName)> = (f.dfg.ext_funcs.iter())
            .filter_map(|(r, d)| Some((r, rename(f, &d.name)?)))
            .collect();
        for (r, n) in refs {
            f.dfg.ext_funcs[r].name = n;
        }
        let gvs: Vec<(ir::GlobalValue, ir::ExternalName)> = (f.global_values.iter())
            .filter_map(|(g, d)| match d {
                ir::GlobalValueData::Symbol { name, .. } => Some((g, rename(f, name)?)),
                _ => None,
            })
            .collect();
        for (g, n) in gvs {
            if let ir::GlobalValueData::Symbol { name, .. } = &mut f.global_values[g] {
                *name = n;
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Trampolines and arguments.

/// The trampoline `(fn, buf)` of `sig` (see the module docs), in `isa`'s default calling
/// convention (C's).
pub fn trampoline(
    sig: &ir::Signature,
    isa: &dyn TargetIsa,
    fctx: &mut FunctionBuilderContext,
) -> ir::Function {
    let ptr = isa.pointer_type();
    let mut tsig = ir::Signature::new(isa.default_call_conv());
    tsig.params.push(ir::AbiParam::new(ptr));
    tsig.params.push(ir::AbiParam::new(ptr));
    let mut func = ir::Function::with_name_signature(ir::UserFuncName::default(), tsig);
    let mut b = FunctionBuilder::new(&mut func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (fp, buf) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    let flags = |ty: ir::Type| {
        let mut f = ir::MemFlagsData::trusted();
        if ty.is_vector() {
            f.set_endianness(ir::Endianness::Little);
        }
        f
    };
    let args: Vec<ir::Value> = (sig.params.iter().enumerate())
        .map(|(i, p)| {
            let ty = p.value_type;
            b.ins().load(ty, flags(ty), buf, (i * 16) as i32)
        })
        .collect();
    let sr = b.import_signature(sig.clone());
    let call = b.ins().call_indirect(sr, fp, &args);
    let results = b.inst_results(call).to_vec();
    for (i, v) in results.into_iter().enumerate() {
        let ty = sig.returns[i].value_type;
        b.ins().store(flags(ty), v, buf, (i * 16) as i32);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    func
}

/// Declare and define, in `m`, an exported trampoline named `{prefix}{k}` for each distinct
/// signature of `sigs`; returns each signature with its trampoline's name.
pub fn define_trampolines<M: Module>(
    m: &mut M,
    sigs: &[ir::Signature],
    prefix: &str,
) -> Result<Vec<(ir::Signature, String)>, String> {
    let mut out: Vec<(ir::Signature, String)> = Vec::new();
    let mut fctx = FunctionBuilderContext::new();
    for sig in sigs {
        if out.iter().any(|(s, _)| s == sig) {
            continue;
        }
        let name = format!("{prefix}{}", out.len());
        let func = trampoline(sig, m.isa(), &mut fctx);
        let id: FuncId = m
            .declare_function(&name, Linkage::Export, &func.signature)
            .map_err(|e| format!("trampoline: {e}"))?;
        let mut ctx = m.make_context();
        ctx.func = func;
        m.define_function(id, &mut ctx)
            .map_err(|e| format!("trampoline: {e:#}"))?;
        out.push((sig.clone(), name));
    }
    Ok(out)
}

/// `args` in 16-byte slots as the trampoline reads them: `slots` slots (at least one per
/// argument and per result of the call).
pub fn encode_args(arch: Arch, args: &[DataValue], slots: usize) -> Vec<u8> {
    let mut buf = vec![0u8; 16 * slots.max(args.len()).max(1)];
    for (i, a) in args.iter().enumerate() {
        let slot = &mut buf[16 * i..16 * i + 16];
        if a.is_vector() {
            // (a vector's bytes as they are: little-endian lanes)
            a.write_to_slice_ne(slot);
        } else if arch.big_endian() {
            a.write_to_slice_be(slot);
        } else {
            a.write_to_slice_le(slot);
        }
    }
    buf
}

/// The results of a call of signature `sig` from the slots the harness printed.
pub fn decode_results(arch: Arch, sig: &ir::Signature, slots: &[u8]) -> Option<Vec<DataValue>> {
    let mut out = Vec::with_capacity(sig.returns.len());
    for (i, r) in sig.returns.iter().enumerate() {
        let slot = slots.get(16 * i..16 * i + 16)?;
        let ty = r.value_type;
        out.push(if ty.is_vector() {
            DataValue::read_from_slice_ne(slot, ty)
        } else if arch.big_endian() {
            DataValue::read_from_slice_be(slot, ty)
        } else {
            DataValue::read_from_slice_le(slot, ty)
        });
    }
    Some(out)
}

/// The number of slots a call of `sig` needs.
pub fn slots_of(sig: &ir::Signature) -> usize {
    sig.params.len().max(sig.returns.len()).max(1)
}

// ---------------------------------------------------------------------------------------
// Objects.

/// How a module is compiled into an object file: by cranelift-object alone, or through
/// Mergelift's pipeline (`MergeModule<ObjectModule>`) with this configuration.
#[derive(Clone, Copy, Debug)]
pub enum Side<'a> {
    Plain,
    Pipeline(&'a MergeConfig),
}

/// An object file for the harness: its bytes, the trampoline of each signature to call, and
/// (through the pipeline) the module's statistics.
#[derive(Clone, Debug)]
pub struct CompiledObject {
    pub bytes: Vec<u8>,
    pub trampolines: Vec<(ir::Signature, String)>,
    pub stats: Stats,
}

impl CompiledObject {
    /// The trampoline of `sig`.
    pub fn trampoline(&self, sig: &ir::Signature) -> Option<&str> {
        (self.trampolines.iter())
            .find(|(s, _)| s == sig)
            .map(|(_, n)| n.as_str())
    }
}

/// An `ObjectModule` for `isa`.
pub fn object_module(isa: OwnedTargetIsa, name: &str) -> Result<ObjectModule, String> {
    let b = ObjectBuilder::new(isa, name, default_libcall_names())
        .map_err(|e| format!("object file: {e}"))?;
    Ok(ObjectModule::new(b))
}

/// Compile `funcs` (defined by name, with their linkages) for `isa` into an object file, on
/// `side`, with a trampoline named `{tramp_prefix}{k}` for each signature of `sigs`. A panic
/// of Cranelift or of the pipeline is an error.
pub fn compile_object(
    isa: OwnedTargetIsa,
    funcs: Vec<(Linkage, ir::Function)>,
    side: Side,
    sigs: &[ir::Signature],
    tramp_prefix: &str,
) -> Result<CompiledObject, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let inner = object_module(isa, "mergelift")?;
        match side {
            Side::Plain => {
                let mut m = inner;
                jit_driver::define_by_name(&mut m, funcs).map_err(|e| format!("{e:#}"))?;
                let trampolines = define_trampolines(&mut m, sigs, tramp_prefix)?;
                let bytes = (m.finish().emit()).map_err(|e| format!("object file: {e}"))?;
                Ok(CompiledObject {
                    bytes,
                    trampolines,
                    stats: Stats::default(),
                })
            }
            Side::Pipeline(config) => {
                let mut m = MergeModule::with_config(inner, config.clone());
                jit_driver::define_by_name(&mut m, funcs).map_err(|e| format!("{e:#}"))?;
                let trampolines = define_trampolines(&mut m, sigs, tramp_prefix)?;
                // One batch: nothing merges into it later.
                m.flush_last().map_err(|e| format!("{e:#}"))?;
                let stats = m.stats().clone();
                let product = m.finish().map_err(|e| format!("{e:#}"))?;
                let bytes = product.emit().map_err(|e| format!("object file: {e}"))?;
                Ok(CompiledObject {
                    bytes,
                    trampolines,
                    stats,
                })
            }
        }
    }))
    .unwrap_or_else(|p| {
        Err(format!(
            "the compile panicked: {}",
            jit_driver::module::panic_text(&p)
        ))
    })
}

// ---------------------------------------------------------------------------------------
// The harness.

/// One call the harness makes: `function` through `trampoline` (both symbols of the linked
/// objects), with the arguments `args` (16-byte slots, [`encode_args`]).
#[derive(Clone, Debug)]
pub struct HarnessCall {
    pub function: String,
    pub trampoline: String,
    pub args: Vec<u8>,
}

/// What one call did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// It returned: the slots after the call (results first).
    Returned(Vec<u8>),
    /// It was ended by this signal (a trap).
    Trap(i32),
    /// It did not return within the time limit.
    Timeout,
    /// It did not run: the program stopped before it (the reason).
    Lost(String),
}

impl std::fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallOutcome::Returned(_) => write!(f, "returned"),
            CallOutcome::Trap(s) => write!(f, "trap (signal {s})"),
            CallOutcome::Timeout => write!(f, "timeout"),
            CallOutcome::Lost(why) => write!(f, "not run: {why}"),
        }
    }
}

/// The fixed part of the harness: signal handling and the call loop.
const HARNESS_MAIN: &str = r#"
static sigjmp_buf ml_env;
static volatile sig_atomic_t ml_in_call;

static void ml_on_signal(int sig) {
    if (ml_in_call)
        siglongjmp(ml_env, sig);
    _exit(100 + sig);
}

int main(void) {
    static char altstack[1 << 16];
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ml_on_signal;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = {SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGTRAP, SIGALRM};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, 0);
    static unsigned char buf[16 * ML_MAX_SLOTS] __attribute__((aligned(16)));
    for (unsigned k = 0; k < sizeof ml_calls / sizeof ml_calls[0]; k++) {
        const struct ml_call *c = &ml_calls[k];
        memset(buf, 0, sizeof buf);
        memcpy(buf, c->args, 16 * c->slots);
        int sig = sigsetjmp(ml_env, 1);
        if (sig == 0) {
            struct itimerval t;
            memset(&t, 0, sizeof t);
            t.it_value.tv_sec = ML_TIMEOUT_US / 1000000;
            t.it_value.tv_usec = ML_TIMEOUT_US % 1000000;
            setitimer(ITIMER_REAL, &t, 0);
            ml_in_call = 1;
            c->tramp(c->fn, buf);
            ml_in_call = 0;
            memset(&t, 0, sizeof t);
            setitimer(ITIMER_REAL, &t, 0);
            printf("R %u ", k);
            for (unsigned i = 0; i < 16 * c->slots; i++)
                printf("%02x", buf[i]);
            printf("\n");
        } else {
            struct itimerval t;
            memset(&t, 0, sizeof t);
            setitimer(ITIMER_REAL, &t, 0);
            ml_in_call = 0;
            if (sig == SIGALRM)
                printf("X %u\n", k);
            else
                printf("T %u %d\n", k, sig);
        }
        fflush(stdout);
    }
    return 0;
}
"#;

/// The C source of a harness making `calls` (at least one), each with a time limit of
/// `timeout` (none: a day), defining the data symbols `data` (64 bytes each).
fn harness_source(
    calls: &[HarnessCall],
    timeout: Option<Duration>,
    data: &[String],
) -> Result<String, String> {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    let mut s = String::from(
        "#include <setjmp.h>\n#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n\
         #include <sys/time.h>\n#include <unistd.h>\n\n\
         typedef void (*ml_tramp)(const void *, void *);\n\
         struct ml_call { const void *fn; ml_tramp tramp; unsigned slots; const unsigned char *args; };\n\n",
    );
    // Each symbol once, by a C name of its own.
    let mut functions: BTreeMap<&str, usize> = BTreeMap::new();
    let mut trampolines: BTreeMap<&str, usize> = BTreeMap::new();
    for c in calls {
        for name in [&c.function, &c.trampoline] {
            if !plain_symbol(name) {
                return Err(format!("`{name}` is not a symbol the harness can name"));
            }
        }
        let n = functions.len();
        functions.entry(&c.function).or_insert(n);
        let n = trampolines.len();
        trampolines.entry(&c.trampoline).or_insert(n);
    }
    for (name, k) in &functions {
        let _ = writeln!(s, "extern char ml_f{k}[] __asm__(\"{name}\");");
    }
    for (k, name) in data.iter().enumerate() {
        if !plain_symbol(name) {
            return Err(format!("`{name}` is not a symbol the harness can name"));
        }
        let _ = writeln!(
            s,
            "char ml_d{k}[64] __asm__(\"{name}\") __attribute__((aligned(16)));"
        );
    }
    for (name, k) in &trampolines {
        let _ = writeln!(
            s,
            "extern void ml_t{k}(const void *, void *) __asm__(\"{name}\");"
        );
    }
    let mut max_slots = 1;
    for (k, c) in calls.iter().enumerate() {
        let _ = write!(s, "static const unsigned char ml_a{k}[] = {{");
        for (i, b) in c.args.iter().enumerate() {
            if i % 32 == 0 {
                s.push_str("\n   ");
            }
            let _ = write!(s, " {b},");
        }
        s.push_str("\n};\n");
        max_slots = max_slots.max(c.args.len() / 16);
    }
    s.push_str("static const struct ml_call ml_calls[] = {\n");
    for (k, c) in calls.iter().enumerate() {
        let _ = writeln!(
            s,
            "    {{ml_f{}, ml_t{}, {}, ml_a{k}}},",
            functions[c.function.as_str()],
            trampolines[c.trampoline.as_str()],
            c.args.len() / 16
        );
    }
    s.push_str("};\n");
    let us = timeout.map_or(86_400_000_000u128, |t| t.as_micros().max(1));
    let _ = writeln!(s, "#define ML_MAX_SLOTS {max_slots}");
    let _ = writeln!(s, "#define ML_TIMEOUT_US {us}ULL");
    s.push_str(HARNESS_MAIN);
    Ok(s)
}

/// A directory of this process's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("mergelift-cross-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The first lines of a tool's complaint.
fn first_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().take(n).collect();
    let more = s.lines().count().saturating_sub(n);
    let mut out = lines.join("\n    ");
    if more > 0 {
        out.push_str(&format!("\n    ... ({more} more lines)"));
    }
    out
}

/// Link `objects` (object files for `tc`'s architecture, every symbol of `calls` defined in
/// one of them) with a harness making `calls` and defining `data`, in `dir`: the program's
/// path.
fn link(
    tc: &Toolchain,
    dir: &Path,
    objects: &[Vec<u8>],
    calls: &[HarnessCall],
    (timeout, data): (Option<Duration>, &[String]),
) -> Result<PathBuf, String> {
    let src = dir.join("harness.c");
    std::fs::write(&src, harness_source(calls, timeout, data)?)
        .map_err(|e| format!("{}: {e}", src.display()))?;
    let mut cmd = Command::new(&tc.gcc);
    cmd.args(["-O1", "-static", "-no-pie", "-w"]).arg(&src);
    for (k, o) in objects.iter().enumerate() {
        let p = dir.join(format!("m{k}.o"));
        std::fs::write(&p, o).map_err(|e| format!("{}: {e}", p.display()))?;
        cmd.arg(&p);
    }
    let exe = dir.join("harness");
    let out = cmd
        .arg("-lm")
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("{}: {e}", tc.gcc))?;
    if !out.status.success() {
        return Err(format!(
            "linking with {} failed:\n    {}",
            tc.gcc,
            first_lines(&String::from_utf8_lossy(&out.stderr), 8)
        ));
    }
    Ok(exe)
}

/// Run `program` under qemu, killed after `limit`: its stdout, and how it ended.
fn run_program(
    tc: &Toolchain,
    program: &Path,
    limit: Duration,
) -> Result<(String, String), String> {
    let mut child = Command::new(&tc.qemu)
        .args(["-cpu", tc.arch.qemu_cpu()])
        .arg(program)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", tc.qemu))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("{}: {e}", tc.qemu)),
        }
    };
    let out = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    let how = match status {
        None => format!("the program was killed after {:.0} s", limit.as_secs_f64()),
        Some(s) if s.success() => String::new(),
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            let what = match (s.code(), s.signal()) {
                (Some(c), _) if c > 100 => format!("killed by signal {} outside a call", c - 100),
                (Some(c), _) => format!("exited with {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => "ended".to_string(),
            };
            let err = err.trim();
            if err.is_empty() {
                format!("the program {what}")
            } else {
                format!("the program {what}: {}", first_lines(err, 4))
            }
        }
    };
    Ok((out, how))
}

/// Link `objects` with a harness making `calls` and run it under qemu: the outcome of each
/// call, in order. Each call may take `timeout` (`None`: no limit); the whole program is
/// killed after the sum of the limits and a minute. The harness defines the data symbols
/// `data` (64 bytes each, for code that takes their addresses). An error: the program could
/// not be linked or started (the message quotes the linker).
pub fn run_harness(
    tc: &Toolchain,
    objects: &[Vec<u8>],
    calls: &[HarnessCall],
    timeout: Option<Duration>,
    data: &[String],
) -> Result<Vec<CallOutcome>, String> {
    if calls.is_empty() {
        return Ok(Vec::new());
    }
    let dir = TempDir::new()?;
    let exe = link(tc, &dir.0, objects, calls, (timeout, data))?;
    let limit = match timeout {
        Some(t) => t * (calls.len() as u32 + 1) + Duration::from_secs(60),
        None => Duration::from_secs(86_400),
    };
    let (out, how) = run_program(tc, &exe, limit)?;
    let mut outcomes: Vec<Option<CallOutcome>> = vec![None; calls.len()];
    for line in out.lines() {
        let mut w = line.split(' ');
        let (kind, k) = (w.next(), w.next().and_then(|k| k.parse::<usize>().ok()));
        let Some(k) = k.filter(|&k| k < calls.len()) else {
            continue;
        };
        outcomes[k] = match kind {
            Some("R") => w.next().and_then(unhex).map(CallOutcome::Returned),
            Some("T") => w.next().and_then(|s| s.parse().ok()).map(CallOutcome::Trap),
            Some("X") => Some(CallOutcome::Timeout),
            _ => None,
        };
    }
    let why = if how.is_empty() {
        "the program ended before it".to_string()
    } else {
        how
    };
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| CallOutcome::Lost(why.clone())))
        .collect())
}

/// Link the C program `source` with `objects` statically by `tc`'s cross gcc and run it
/// under qemu (for at most a minute): what it printed, or why it did not link or run to a
/// successful end.
pub fn run_c_program(tc: &Toolchain, source: &str, objects: &[Vec<u8>]) -> Result<String, String> {
    let dir = TempDir::new()?;
    let src = dir.0.join("main.c");
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    let exe = dir.0.join("main");
    let mut cmd = Command::new(&tc.gcc);
    cmd.args(["-O1", "-static", "-no-pie", "-w"]).arg(&src);
    for (k, o) in objects.iter().enumerate() {
        let p = dir.0.join(format!("m{k}.o"));
        std::fs::write(&p, o).map_err(|e| format!("{}: {e}", p.display()))?;
        cmd.arg(&p);
    }
    let out =
        (cmd.arg("-lm").arg("-o").arg(&exe).output()).map_err(|e| format!("{}: {e}", tc.gcc))?;
    if !out.status.success() {
        return Err(format!(
            "linking with {} failed:\n    {}",
            tc.gcc,
            first_lines(&String::from_utf8_lossy(&out.stderr), 8)
        ));
    }
    let (stdout, how) = run_program(tc, &exe, Duration::from_secs(60))?;
    if how.is_empty() {
        Ok(stdout)
    } else {
        Err(how)
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        let arch = |s: &str| Target::parse(s).unwrap().arch();
        assert_eq!(arch("aarch64"), Some(Arch::Aarch64));
        assert_eq!(arch("riscv64"), Some(Arch::Riscv64));
        assert_eq!(arch("s390x-unknown-linux-gnu"), Some(Arch::S390x));
        let mac = Target::parse("aarch64-apple-darwin").unwrap();
        assert_eq!(
            mac.triple.operating_system,
            target_lexicon::OperatingSystem::Darwin(None)
        );
        let v = Target::parse("riscv64 has_v has_zbb=false").unwrap();
        assert_eq!(
            v.flags,
            [
                ("has_v".to_string(), "true".to_string()),
                ("has_zbb".to_string(), "false".to_string())
            ]
        );
        assert!(Target::parse("mips64")
            .unwrap_err()
            .contains("x86_64, aarch64"));
        assert!(Target::parse("aarch64 has_avx")
            .unwrap_err()
            .contains("has_avx"));
        assert!(Target::parse("not-a-triple").is_err());
    }

    #[test]
    fn arguments_round_trip_in_each_byte_order() {
        let mut sig = ir::Signature::new(cranelift_codegen::isa::CallConv::SystemV);
        let vals = [
            DataValue::I8(-3),
            DataValue::I32(0x1234_5678),
            DataValue::I128(-2),
            DataValue::V128([7; 16]),
        ];
        for v in &vals {
            sig.returns.push(ir::AbiParam::new(v.ty()));
        }
        for arch in Arch::ALL {
            let buf = encode_args(arch, &vals, 4);
            let back = decode_results(arch, &sig, &buf).unwrap();
            assert!(
                back.iter().zip(&vals).all(|(a, b)| a.bitwise_eq(b)),
                "{arch}"
            );
        }
        assert_eq!(
            encode_args(Arch::S390x, &[DataValue::I32(1)], 1)[..4],
            [0, 0, 0, 1]
        );
        assert_eq!(
            encode_args(Arch::Aarch64, &[DataValue::I32(1)], 1)[..4],
            [1, 0, 0, 0]
        );
    }

    #[test]
    fn prefixes_rename_definitions_and_references() {
        let text = "function %f(i64) -> i64 {
    sig0 = (i64) -> i64
    fn0 = %g sig0
    fn1 = %imported sig0
block0(v0: i64):
    v1 = call fn0(v0)
    v2 = call fn1(v1)
    return v2
}
function %g(i64) -> i64 {
block0(v0: i64):
    return v0
}
";
        let mut funcs = cranelift_reader::parse_functions(text).unwrap();
        let names = prefix_names(&mut funcs, "p1_");
        assert_eq!(names[0], ("f".to_string(), "p1_f".to_string()));
        let shown = funcs[0].display().to_string();
        assert!(shown.contains("function %p1_f("), "{shown}");
        assert!(shown.contains("fn0 = %p1_g sig0"), "{shown}");
        assert!(shown.contains("fn1 = %imported sig0"), "{shown}");
    }
}
