//! JIT compilation of a LIR module with cranelift-jit: declare every function, lower and define
//! each, resolve calls between them and to host symbols, finalize, and hand back function
//! pointers by name. Merged functions cost no code: their names resolve to the survivor.

use crate::lower::{lower_function_with, special_name, NameResolver};
use crate::opmap::clif_type;
use crate::Error;
use cranelift_codegen::ir::{self, InstBuilder};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, DataId, FuncId, Linkage, Module as _};
use midend::lir;
use rustc_hash::FxHashMap;
use std::time::{Duration, Instant};

/// Cranelift optimization level for the final compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OptLevel {
    #[default]
    None,
    Speed,
}

impl OptLevel {
    pub fn parse(s: &str) -> Option<OptLevel> {
        match s {
            "none" => Some(OptLevel::None),
            "speed" => Some(OptLevel::Speed),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            OptLevel::None => "none",
            OptLevel::Speed => "speed",
        }
    }
}

/// The host ISA with the given optimization level (and the JIT's required settings).
pub fn host_isa(opt: OptLevel) -> Result<OwnedTargetIsa, Error> {
    let mut fb = settings::builder();
    fb.set("opt_level", opt.name())
        .map_err(|e| Error::Other(e.to_string()))?;
    fb.set("is_pic", "false")
        .map_err(|e| Error::Other(e.to_string()))?;
    fb.set("use_colocated_libcalls", "false")
        .map_err(|e| Error::Other(e.to_string()))?;
    // Wasmtime's code reads the frame pointer and return address (`get_frame_pointer`).
    fb.set("preserve_frame_pointers", "true")
        .map_err(|e| Error::Other(e.to_string()))?;
    let ib = cranelift_native::builder()
        .map_err(|e| Error::Other(format!("host machine is not supported: {e}")))?;
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| Error::Other(e.to_string()))
}

/// Maps LIR symbols to the JIT module's declarations, declaring imports on first use.
struct JitNames<'j> {
    jit: &'j mut JITModule,
    funcs: FxHashMap<lir::Symbol, FuncId>,
    data: FxHashMap<lir::Symbol, DataId>,
    host: Vec<String>,
    error: Option<String>,
}

impl NameResolver for JitNames<'_> {
    fn function(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
        sig: ir::SigRef,
    ) -> ir::ExternalName {
        let sym = *m.aliases.get(&sym).unwrap_or(&sym);
        if !self.funcs.contains_key(&sym) {
            if let Some(special) = special_name(&m.symbols[sym].name) {
                return special;
            }
        }
        let id = match self.funcs.get(&sym) {
            Some(&id) => id,
            None => {
                // An import: declare it with the signature of its first use.
                let sig = func.dfg.signatures[sig].clone();
                let name = &m.symbols[sym].name;
                if !self.resolvable(name) {
                    self.error
                        .get_or_insert(format!("cannot resolve imported function {name}"));
                }
                match self.jit.declare_function(name, Linkage::Import, &sig) {
                    Ok(id) => {
                        self.funcs.insert(sym, id);
                        id
                    }
                    Err(e) => {
                        self.error.get_or_insert(e.to_string());
                        return ir::ExternalName::testcase(&m.symbols[sym].name);
                    }
                }
            }
        };
        let r = func.declare_imported_user_function(ir::UserExternalName {
            namespace: 0,
            index: id.as_u32(),
        });
        ir::ExternalName::user(r)
    }
    fn data(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
    ) -> ir::ExternalName {
        if let Some(special) = special_name(&m.symbols[sym].name) {
            return special;
        }
        let id = match self.data.get(&sym) {
            Some(&id) => id,
            None if !self.resolvable(&m.symbols[sym].name) => {
                self.error.get_or_insert(format!(
                    "cannot resolve imported data {}",
                    m.symbols[sym].name
                ));
                return ir::ExternalName::testcase(&m.symbols[sym].name);
            }
            None => match self
                .jit
                .declare_data(&m.symbols[sym].name, Linkage::Import, true, false)
            {
                Ok(id) => {
                    self.data.insert(sym, id);
                    id
                }
                Err(e) => {
                    self.error.get_or_insert(e.to_string());
                    return ir::ExternalName::testcase(&m.symbols[sym].name);
                }
            },
        };
        let r = func.declare_imported_user_function(ir::UserExternalName {
            namespace: 1,
            index: id.as_u32(),
        });
        ir::ExternalName::user(r)
    }
}

/// Can the process resolve `name` (registered host symbols, then the dynamic linker)?
fn dlsym_resolvable(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: dlsym with RTLD_DEFAULT only looks the name up.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) }.is_null()
}

impl JitNames<'_> {
    fn resolvable(&self, name: &str) -> bool {
        self.host.iter().any(|h| h == name) || dlsym_resolvable(name)
    }
}

/// A compiled module: function pointers by name, code bytes per function, phase times.
pub struct CompiledModule {
    jit: Option<JITModule>,
    pointers: FxHashMap<String, *const u8>,
    /// Machine-code bytes per compiled function (merged functions are absent).
    pub code_bytes: Vec<(String, usize)>,
    /// Trampolines by signature, for calling with dynamic values.
    trampolines: Vec<(ir::Signature, *const u8)>,
    /// Exception-handler sites registered for `__cranelift_throw`.
    exn_sites: crate::exn::Registration,
    pub lower_time: Duration,
    pub compile_time: Duration,
}

impl CompiledModule {
    /// The code pointer of `name` (merged names give their survivor's pointer).
    pub fn pointer(&self, name: &str) -> Option<*const u8> {
        self.pointers.get(name).copied()
    }
    /// Total machine-code bytes.
    pub fn total_code_bytes(&self) -> usize {
        self.code_bytes.iter().map(|(_, n)| n).sum()
    }
    /// Call `name` through a trampoline with arguments and results in 16-byte slots.
    ///
    /// # Safety
    /// `buf` must hold at least max(params, returns) slots, filled per the signature.
    pub unsafe fn call_raw(
        &self,
        name: &str,
        sig: &ir::Signature,
        buf: &mut [u128],
    ) -> Result<(), Error> {
        let f = self
            .pointer(name)
            .ok_or_else(|| Error::Other(format!("no function %{name}")))?;
        let t = self
            .trampolines
            .iter()
            .find(|(s, _)| s == sig)
            .map(|(_, p)| *p)
            .ok_or_else(|| Error::Other(format!("no trampoline for the signature of %{name}")))?;
        let tramp: extern "C" fn(*const u8, *mut u128) = unsafe { std::mem::transmute(t) };
        tramp(f, buf.as_mut_ptr());
        Ok(())
    }
}

impl Drop for CompiledModule {
    fn drop(&mut self) {
        // The sites name addresses in this module's code: unregister them first.
        drop(std::mem::take(&mut self.exn_sites));
        if let Some(j) = self.jit.take() {
            // SAFETY: no pointer into the module outlives the CompiledModule.
            unsafe { j.free_memory() };
        }
    }
}

/// Build a trampoline `(fn_ptr, buf)` that loads arguments from 16-byte slots of `buf`, calls
/// `fn_ptr` with `sig` and stores the results back into the slots.
fn build_trampoline(sig: &ir::Signature, isa: &dyn TargetIsa) -> ir::Function {
    let ptr = isa.pointer_type();
    let mut tsig = ir::Signature::new(isa.default_call_conv());
    tsig.params.push(ir::AbiParam::new(ptr));
    tsig.params.push(ir::AbiParam::new(ptr));
    let mut func =
        ir::Function::with_name_signature(ir::UserFuncName::testcase("trampoline"), tsig);
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (fp, buf) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    let flags = ir::MemFlagsData::trusted();
    let args: Vec<ir::Value> = sig
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| b.ins().load(p.value_type, flags, buf, (i * 16) as i32))
        .collect();
    let sr = b.import_signature(sig.clone());
    let call = b.ins().call_indirect(sr, fp, &args);
    let results = b.inst_results(call).to_vec();
    for (i, v) in results.into_iter().enumerate() {
        b.ins().store(flags, v, buf, (i * 16) as i32);
    }
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    func
}

/// Compile every live function of `m` into a new JIT module for `isa`.
/// `trampoline_sigs` lists signatures to build call trampolines for; `host_symbols` resolves
/// imports.
pub fn compile_module(
    m: &lir::Module,
    isa: OwnedTargetIsa,
    trampoline_sigs: &[ir::Signature],
    host_symbols: &[(String, *const u8)],
) -> Result<CompiledModule, Error> {
    let config = isa.frontend_config();
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    for (n, p) in libcall_symbols() {
        builder.symbol(n, p);
    }
    for (n, p) in host_symbols {
        builder.symbol(n.clone(), *p);
    }
    let mut jit = JITModule::new(builder);
    let merr = |e: cranelift_module::ModuleError| Error::Other(format!("{e:?}"));
    let mut funcs: FxHashMap<lir::Symbol, FuncId> = FxHashMap::default();
    let mut order = Vec::new();
    for (id, f) in m.live_functions() {
        let sig = crate::lower::clif_signature(&f.sig);
        let linkage = match f.linkage {
            lir::Linkage::Local => Linkage::Local,
            lir::Linkage::Preemptible => Linkage::Preemptible,
            _ => Linkage::Export,
        };
        let fid = jit.declare_function(&f.name, linkage, &sig).map_err(merr)?;
        if let Some(s) = m.lookup_symbol(&f.name) {
            funcs.insert(s, fid);
        }
        order.push((id, fid));
    }
    let host = host_symbols
        .iter()
        .map(|(n, _)| n.clone())
        .chain(libcall_symbols().into_iter().map(|(n, _)| n))
        .collect();
    let mut names = JitNames {
        jit: &mut jit,
        funcs,
        data: FxHashMap::default(),
        host,
        error: None,
    };
    let mut ctx = Context::new();
    let mut fctx = FunctionBuilderContext::new();
    let mut code_bytes = Vec::with_capacity(order.len());
    let mut lower_time = Duration::ZERO;
    let mut compile_time = Duration::ZERO;
    let mut exn_pending = Vec::new();
    for &(id, fid) in &order {
        let f = &m.functions[id];
        let t = Instant::now();
        let func = lower_function_with(m, f, &mut names, config, &mut fctx)?;
        lower_time += t.elapsed();
        if let Some(e) = names.error.take() {
            return Err(Error::Other(format!("function {}: {e}", f.name)));
        }
        ctx.func = func;
        let t = Instant::now();
        // Cranelift panics on some unsupported input (e.g. i128 arguments without the LLVM
        // ABI extensions); that becomes an error naming the function.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            names.jit.define_function(fid, &mut ctx).map_err(Box::new)
        }))
        .map_err(|p| Error::Other(format!("compile: function {}: {}", f.name, panic_text(&p))))?
        .map_err(|e| {
            Error::Other(format!(
                "compile: function {}: {}",
                f.name,
                module_error_text(&e, &ctx.func)
            ))
        })?;
        compile_time += t.elapsed();
        code_bytes.push((
            f.name.clone(),
            ctx.compiled_code().map_or(0, |c| c.code_buffer().len()),
        ));
        if let Some(c) = ctx.compiled_code() {
            let sites = crate::exn::pending_sites(c.buffer.call_sites());
            if !sites.is_empty() {
                exn_pending.push((fid, sites));
            }
        }
        names.jit.clear_context(&mut ctx);
    }
    let JitNames { funcs, .. } = names;
    let mut tramp_ids = Vec::new();
    for (k, sig) in trampoline_sigs.iter().enumerate() {
        if tramp_ids.iter().any(|(s, _)| s == sig) {
            continue;
        }
        let tf = build_trampoline(sig, jit.isa());
        let tid = jit
            .declare_function(
                &format!("__mergelift_trampoline_{k}"),
                Linkage::Local,
                &tf.signature,
            )
            .map_err(merr)?;
        ctx.func = tf;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            jit.define_function(tid, &mut ctx).map_err(Box::new)
        }))
        .map_err(|p| Error::Other(format!("trampoline: {}", panic_text(&p))))?
        .map_err(|e| Error::Other(format!("trampoline: {e:?}")))?;
        jit.clear_context(&mut ctx);
        tramp_ids.push((sig.clone(), tid));
    }
    // cranelift-jit panics on a symbol it cannot resolve; imports were checked above, and a
    // panic that still escapes becomes an error here.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        jit.finalize_definitions().map_err(Box::new)
    }))
    .map_err(|p| Error::Other(format!("finalize: {}", panic_text(&p))))?
    .map_err(|e| Error::Other(format!("finalize: {e}")))?;
    let mut pointers = FxHashMap::default();
    for (s, d) in m.symbols.iter() {
        let target = *m.aliases.get(&s).unwrap_or(&s);
        if let Some(&fid) = funcs.get(&target) {
            if d.def.is_some() || m.aliases.contains_key(&s) {
                pointers.insert(d.name.clone(), jit.get_finalized_function(fid));
            }
        }
    }
    let trampolines = tramp_ids
        .into_iter()
        .map(|(s, id)| (s, jit.get_finalized_function(id)))
        .collect();
    let mut exn_sites = crate::exn::Registration::default();
    for (fid, sites) in &exn_pending {
        let base = jit.get_finalized_function(*fid) as usize;
        crate::exn::register(&mut exn_sites, base, sites);
    }
    Ok(CompiledModule {
        jit: Some(jit),
        pointers,
        code_bytes,
        trampolines,
        exn_sites,
        lower_time,
        compile_time,
    })
}

fn module_error_text(e: &cranelift_module::ModuleError, func: &ir::Function) -> String {
    match e {
        cranelift_module::ModuleError::Compilation(cranelift_codegen::CodegenError::Verifier(
            errs,
        )) => cranelift_codegen::print_errors::pretty_verifier_error(func, None, errs.clone()),
        other => format!("{other}"),
    }
}

/// Compile one Cranelift function without linking (imports may stay unresolved) and return
/// its machine-code size.
pub fn code_size(
    func: ir::Function,
    isa: &dyn TargetIsa,
    ctx: &mut Context,
) -> Result<usize, Error> {
    ctx.clear();
    ctx.func = func;
    let name = ctx.func.name.to_string();
    ctx.compile(isa, &mut Default::default())
        .map_err(|e| Error::Other(format!("compile: function {name}: {:?}", e.inner)))?;
    Ok(ctx.compiled_code().map_or(0, |c| c.code_buffer().len()))
}

/// The Cranelift type for slot-packing LIR values.
pub fn slot_type(t: lir::Type) -> ir::Type {
    clif_type(t)
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

extern "C" fn ceilf(x: f32) -> f32 {
    x.ceil()
}
extern "C" fn ceil(x: f64) -> f64 {
    x.ceil()
}
extern "C" fn floorf(x: f32) -> f32 {
    x.floor()
}
extern "C" fn floor(x: f64) -> f64 {
    x.floor()
}
extern "C" fn truncf(x: f32) -> f32 {
    x.trunc()
}
extern "C" fn trunc(x: f64) -> f64 {
    x.trunc()
}
extern "C" fn nearbyintf(x: f32) -> f32 {
    x.round_ties_even()
}
extern "C" fn nearbyint(x: f64) -> f64 {
    x.round_ties_even()
}
extern "C" fn fmaf(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
extern "C" fn fma(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

/// `pshufb` for hosts without SSSE3: byte i of the result is `a[b[i] & 15]`, or 0 when the
/// top bit of `b[i]` is set.
#[allow(improper_ctypes_definitions)] // SysV passes __m128i in an XMM register, as Cranelift expects
extern "C" fn x86_pshufb(
    a: std::arch::x86_64::__m128i,
    b: std::arch::x86_64::__m128i,
) -> std::arch::x86_64::__m128i {
    // SAFETY: __m128i and [u8; 16] have the same size and no invalid bit patterns.
    let (a, b): ([u8; 16], [u8; 16]) = unsafe {
        (
            std::mem::transmute::<std::arch::x86_64::__m128i, [u8; 16]>(a),
            std::mem::transmute::<std::arch::x86_64::__m128i, [u8; 16]>(b),
        )
    };
    let mut r = [0u8; 16];
    for i in 0..16 {
        r[i] = if b[i] & 0x80 != 0 {
            0
        } else {
            a[(b[i] & 15) as usize]
        };
    }
    // SAFETY: as above.
    unsafe { std::mem::transmute::<[u8; 16], std::arch::x86_64::__m128i>(r) }
}

/// The float libcalls Cranelift may emit (names as `default_libcall_names` spells them),
/// implemented in Rust so the JIT never depends on the C math library being linked.
fn libcall_symbols() -> Vec<(String, *const u8)> {
    vec![
        ("ceilf".into(), ceilf as *const u8),
        ("ceil".into(), ceil as *const u8),
        ("floorf".into(), floorf as *const u8),
        ("floor".into(), floor as *const u8),
        ("truncf".into(), truncf as *const u8),
        ("trunc".into(), trunc as *const u8),
        ("nearbyintf".into(), nearbyintf as *const u8),
        ("nearbyint".into(), nearbyint as *const u8),
        ("fmaf".into(), fmaf as *const u8),
        ("fma".into(), fma as *const u8),
        ("__cranelift_x86_pshufb".into(), x86_pshufb as *const u8),
        // The exception runtime of Cranelift's run tests.
        (
            "__cranelift_throw".into(),
            crate::exn::cranelift_throw as *const u8,
        ),
    ]
}
