//! Reading the inputs into one LIR module: `.clif` functions verified and lifted, `.lir`
//! parsed, and every reference to a module function checked against its signature.

use super::*;

/// Parse `.lir` and `.clif` inputs into one LIR module. Every `.clif` function must pass
/// Cranelift's verifier, every reference to a function of the module must declare that
/// function's signature, and the lifted module must pass the LIR verifier, before any pass: a
/// fault there is the input's, and the error names its file and function. A `.clif` function
/// LIR cannot represent is passed through (returned apart, its text kept if `keep_text`).
pub(super) fn load_module(
    inputs: &[inputs::Input],
    keep_text: bool,
    target: Option<&mergelift_tools::cross::Target>,
    stats: &mut Stats,
) -> Result<(lir::Module, Vec<PassedThrough>)> {
    let mut module = lir::Module::new();
    let mut ctx = LiftContext::default();
    // The file of each lifted function, by LIR function id.
    let mut file_of: Vec<usize> = Vec::new();
    let mut passed: Vec<PassedThrough> = Vec::new();
    let mut sigs = SignatureCheck::default();
    let mut lift_time = Duration::ZERO;
    let mut verify_time = Duration::ZERO;
    one_module(inputs)?;
    let files: Vec<PathBuf> = inputs.iter().map(|i| i.path.clone()).collect();
    let files = &files[..];
    for (k, input) in inputs.iter().enumerate() {
        let path = &input.path;
        if input.format == inputs::Format::Lir {
            if files.len() > 1 {
                bail!("{}: .lir input must be the only input", path.display());
            }
            let text = input.read_text()?;
            let t = Instant::now();
            let m = inputs::parse_lir(path, &text)?;
            stats.add_time("parse", t.elapsed());
            return Ok((m, passed));
        }
        // One function at a time: parsed, verified, lifted and dropped (a large module never
        // has all its text or all its Cranelift IR in memory).
        let t = Instant::now();
        let mut stream = match (&input.text, &input.wasm) {
            (Some(text), _) => mergelift_tools::input::clif_stream(
                path,
                Box::new(std::io::Cursor::new(text.clone().into_bytes())),
            ),
            (None, Some(_)) => mergelift_tools::input::clif_stream(
                path,
                Box::new(std::io::Cursor::new(input.read_text()?.into_bytes())),
            ),
            (None, None) => mergelift_tools::input::open_clif(path),
        }
        .map_err(|e| anyhow!(e))?;
        let mut parse_time = t.elapsed();
        // Verify as `run` and `size` compile: for the file's target (or `--target`, or the
        // host) with its flags (a file with no `set` or `target` line keeps frame pointers, as
        // wasmtime's CLIF needs); some instructions (`get_frame_pointer`) are checked only
        // against an ISA. A file naming no target of `--target`'s architecture is an error.
        let isa = match mergelift_tools::input::file_isa(&stream.file, None, target) {
            Ok(isa) => Some(isa),
            Err(e) if target.is_some() => bail!(e),
            Err(_) => None,
        };
        loop {
            let t = Instant::now();
            let Some(f) = stream.next_function() else {
                break;
            };
            let f = f.map_err(|e| anyhow!(e))?;
            parse_time += t.elapsed();
            let f = &f;
            let t = Instant::now();
            let verified = match &isa {
                Some(isa) => mergelift_tools::input::verify_clif(f, &**isa),
                None => mergelift_tools::input::verify_clif(f, &stream.file.flags),
            };
            verified.map_err(|e| {
                anyhow!(
                    "{}: function {}: invalid input: {e}",
                    path.display(),
                    jit_driver::opmap::func_name(&f.name),
                )
            })?;
            // A name a function passed through defines (the module does not know it).
            if !sigs.passed.is_empty() {
                let name = jit_driver::opmap::func_lir_name(&f.name);
                if sigs.passed.contains_key(name.as_str()) {
                    bail!("{}: function {name} is defined twice", path.display());
                }
            }
            verify_time += t.elapsed();
            let t = Instant::now();
            let taken = ctx.taken.len();
            let read = match lift_function_with(&mut module, f, lir::Linkage::Export, &mut ctx) {
                Ok(id) => {
                    // The lifter reserves room to grow; a module held whole does not need it.
                    module.functions[id].shrink_to_fit();
                    file_of.push(k);
                    Read::Lifted(id)
                }
                Err(e) => {
                    let Some(reason) = unrepresentable(&e) else {
                        return Err(anyhow!("{}: {e}", path.display()));
                    };
                    let key = jit_driver::opmap::func_name(&f.name);
                    if module
                        .lookup_symbol(&key)
                        .and_then(|s| module.defined(s))
                        .is_some()
                    {
                        bail!("{}: function {key} is defined twice", path.display());
                    }
                    // Nothing of it reaches the passes: not the addresses it took before the
                    // lifter stopped.
                    ctx.taken.truncate(taken);
                    passed.push(PassedThrough {
                        before: module.functions.len(),
                        name: f.name.to_string(),
                        key,
                        file: k,
                        reason: reason.replace(['\n', '\r'], " "),
                        text: keep_text.then(|| f.display().to_string()),
                    });
                    Read::Passed(passed.len() as u32 - 1)
                }
            };
            lift_time += t.elapsed();
            let t = Instant::now();
            let src = Sources {
                files,
                module: &module,
                file_of: &file_of,
                passed: &passed,
            };
            sigs.record(f, read, &src);
            verify_time += t.elapsed();
        }
        stats.add_time("parse", parse_time);
    }
    let t = Instant::now();
    sigs.finish(&Sources {
        files,
        module: &module,
        file_of: &file_of,
        passed: &passed,
    })?;
    verify_time += t.elapsed();
    mark_taken(&mut module, &ctx.taken);
    stats.add_time("lift", lift_time);
    let t = Instant::now();
    for (id, f) in module.functions.iter() {
        verifier::verify_function(&module, f, true).map_err(|e| {
            anyhow!(
                "{}: invalid input (as lifted to LIR): {e}",
                files[file_of[id.as_u32() as usize]].display()
            )
        })?;
    }
    stats.add_time("verify_input", verify_time + t.elapsed());
    Ok((module, passed))
}

/// A `.clif` function that passed Cranelift's verifier but that LIR cannot represent (an
/// instruction, type, calling convention or construct the lifter does not take): `opt` passes
/// it through unmerged, as it came in.
pub(super) struct PassedThrough {
    /// The number of functions lifted before it: its place among them.
    pub(super) before: usize,
    /// Its name as Cranelift prints it (`%f`, `u0:3`).
    pub(super) name: String,
    /// Its name as the module's symbols and errors spell it (`f`, `u0:3`:
    /// `opmap::func_name`).
    pub(super) key: String,
    /// Its file, by index in the inputs.
    pub(super) file: usize,
    /// Why the lifter refused it.
    pub(super) reason: String,
    /// The function as Cranelift prints it (kept for `--emit clif` only).
    pub(super) text: Option<String>,
}

/// Is `e` the lifter refusing a function LIR cannot represent (passed through by `opt`),
/// rather than a fault of the input that Cranelift's verifier let through (`stack_limit`
/// naming a global value that does not exist, a branch out of the layout, ...) or a name
/// defined twice, which stay errors? The lifter says which by its words: every limit of LIR
/// is "unsupported ...", "... not supported" or "LIR supports at most ...".
pub(super) fn unrepresentable(e: &jit_driver::Error) -> Option<&str> {
    match e {
        jit_driver::Error::Lift { msg, .. }
            if msg.contains("unsupported")
                || msg.contains("not supported")
                || msg.contains("LIR supports at most") =>
        {
            Some(msg)
        }
        _ => None,
    }
}

/// A function read from `.clif` input: lifted into the module, or passed through (its index
/// in the list of those).
#[derive(Clone, Copy)]
pub(super) enum Read {
    Lifted(lir::FuncId),
    Passed(u32),
}

/// A callee as a reference names it: the module's symbol of that name, or (when the module
/// has none: only a function that was passed through, or a reference no instruction uses,
/// names it) the name itself, by its index in `SignatureCheck::names`.
#[derive(Clone, Copy)]
pub(super) enum Callee {
    Symbol(lir::Symbol),
    Name(u32),
}

/// A reference to a function the module had not defined when it was read.
pub(super) struct PendingRef {
    /// The referring function and its place in reading order.
    caller: Read,
    seq: u32,
    /// Its `fnN`, the callee, and the signature it declares (by index in `sigs`).
    fref: u32,
    callee: Callee,
    sig: u32,
}

/// The module-level check that `run` and `size` get from cranelift-module, which refuses
/// (`IncompatibleSignature`) a reference `fnN = name sigN` to a function of the module whose
/// declared signature is not the function's own (parameters, returns and calling convention,
/// compared whole). `opt` reads `.clif` input one function at a time, so it records each
/// definition's signature and checks each reference against it as it goes; references to
/// functions defined later wait for the end of the input. References to names no function
/// defines (imports), libcalls and known symbols are not checked. Names are looked up in the
/// LIR module's symbols, which the lifter makes for every function and callee: the check
/// keeps no name of its own but for functions passed through.
#[derive(Default)]
pub(super) struct SignatureCheck {
    /// Each distinct signature once, and its index.
    sigs: Vec<ir::Signature>,
    sig_index: HashMap<ir::Signature, u32>,
    /// The signature of each lifted function, by id.
    lifted: Vec<u32>,
    /// Functions passed through, by name (`PassedThrough::key`): their signature and index
    /// among those.
    passed: HashMap<String, (u32, u32)>,
    /// Callee names the module has no symbol for (see `Callee::Name`).
    names: Vec<String>,
    pending: Vec<PendingRef>,
    /// The first mismatch found, by the referring function's place in reading order and its
    /// `fnN`, and its message.
    first: Option<((u32, u32), String)>,
    /// Functions read so far.
    seq: u32,
    /// Scratch: a callee's name.
    name: String,
}

/// Where a function read stands, for messages: its file, name and place.
pub(super) struct Sources<'a> {
    files: &'a [PathBuf],
    module: &'a lir::Module,
    file_of: &'a [usize],
    passed: &'a [PassedThrough],
}

impl Sources<'_> {
    fn file(&self, r: Read) -> &Path {
        match r {
            Read::Lifted(id) => &self.files[self.file_of[id.as_u32() as usize]],
            Read::Passed(k) => &self.files[self.passed[k as usize].file],
        }
    }
    /// The name as errors write it (`f` for `%f`, as `opmap::func_name`).
    fn name(&self, r: Read) -> String {
        match r {
            Read::Lifted(id) => self.module.functions[id].name.to_string(),
            Read::Passed(k) => self.passed[k as usize].key.clone(),
        }
    }
}

impl SignatureCheck {
    fn intern(&mut self, s: &ir::Signature) -> u32 {
        if let Some(&k) = self.sig_index.get(s) {
            return k;
        }
        let k = self.sigs.len() as u32;
        self.sigs.push(s.clone());
        self.sig_index.insert(s.clone(), k);
        k
    }

    /// Is a function named `name` defined already (lifted or passed through)?
    fn defined(&self, module: &lir::Module, name: &str) -> Option<Read> {
        if let Some(id) = module.lookup_symbol(name).and_then(|s| module.defined(s)) {
            return Some(Read::Lifted(id));
        }
        self.passed.get(name).map(|&(_, k)| Read::Passed(k))
    }

    /// The signature a function read is defined with.
    fn sig_of(&self, r: Read, passed: &[PassedThrough]) -> u32 {
        match r {
            Read::Lifted(id) => self.lifted[id.as_u32() as usize],
            Read::Passed(k) => self.passed[&passed[k as usize].key].0,
        }
    }

    /// Record function `f`, just read as `r` (lifted, or the last passed through), and check
    /// its references to functions defined already.
    fn record(&mut self, f: &ir::Function, r: Read, src: &Sources) {
        let module = src.module;
        let sig = self.intern(&f.signature);
        match r {
            Read::Lifted(id) => {
                debug_assert_eq!(self.lifted.len(), id.as_u32() as usize);
                self.lifted.push(sig);
            }
            Read::Passed(k) => {
                self.passed
                    .insert(src.passed[k as usize].key.clone(), (sig, k));
            }
        }
        let seq = self.seq;
        self.seq += 1;
        for (fr, ext) in f.dfg.ext_funcs.iter() {
            // (libcalls and known symbols name no function of the module; neither does a
            // user name the function does not declare, which cranelift-reader takes)
            let named = match &ext.name {
                ir::ExternalName::User(r) => f.params.user_named_funcs().get(*r).is_some(),
                ir::ExternalName::TestCase(_) => true,
                ir::ExternalName::LibCall(_) | ir::ExternalName::KnownSymbol(_) => false,
            };
            if !named {
                continue;
            }
            // (cranelift-reader fills a gap in the numbering of `fnN` with an entry that has
            // no signature; Cranelift neither prints nor checks it)
            let Some(declared) = f.dfg.signatures.get(ext.signature) else {
                continue;
            };
            jit_driver::opmap::write_symbol_name(&mut self.name, f, &ext.name);
            let sym = module.lookup_symbol(&self.name);
            let def = match sym.and_then(|s| module.defined(s)) {
                Some(id) => Some(Read::Lifted(id)),
                None => self.passed.get(&self.name).map(|&(_, k)| Read::Passed(k)),
            };
            let fref = fr.as_u32();
            match def {
                Some(d) => {
                    let defined = self.sig_of(d, src.passed);
                    if self.sigs[defined as usize] != *declared {
                        let msg = mismatch(
                            src,
                            r,
                            fref,
                            &self.name,
                            declared,
                            d,
                            &self.sigs[defined as usize],
                        );
                        self.note((seq, fref), msg);
                    }
                }
                None => {
                    let callee = match sym {
                        Some(s) => Callee::Symbol(s),
                        None => {
                            self.names.push(self.name.clone());
                            Callee::Name(self.names.len() as u32 - 1)
                        }
                    };
                    let sig = self.intern(declared);
                    self.pending.push(PendingRef {
                        caller: r,
                        seq,
                        fref,
                        callee,
                        sig,
                    });
                }
            }
        }
    }

    fn note(&mut self, at: (u32, u32), msg: String) {
        if self.first.as_ref().is_none_or(|(k, _)| at < *k) {
            self.first = Some((at, msg));
        }
    }

    /// Check the references to functions defined after them; the first mismatch in reading
    /// order is the error.
    fn finish(mut self, src: &Sources) -> Result<()> {
        let module = src.module;
        let pending = std::mem::take(&mut self.pending);
        for p in &pending {
            if self
                .first
                .as_ref()
                .is_some_and(|(k, _)| *k < (p.seq, p.fref))
            {
                break;
            }
            let name = match p.callee {
                Callee::Symbol(s) => module.symbol_name(s),
                Callee::Name(k) => &self.names[k as usize],
            };
            let Some(d) = self.defined(module, name) else {
                continue; // an import
            };
            let defined = self.sig_of(d, src.passed);
            if defined != p.sig {
                let msg = mismatch(
                    src,
                    p.caller,
                    p.fref,
                    name,
                    &self.sigs[p.sig as usize],
                    d,
                    &self.sigs[defined as usize],
                );
                self.note((p.seq, p.fref), msg);
                break;
            }
        }
        match self.first {
            Some((_, msg)) => Err(anyhow!(msg)),
            None => Ok(()),
        }
    }
}

/// The error of a reference whose signature is not its callee's.
pub(super) fn mismatch(
    src: &Sources,
    caller: Read,
    fref: u32,
    callee: &str,
    declared: &ir::Signature,
    def: Read,
    defined: &ir::Signature,
) -> String {
    let (file, def_file) = (src.file(caller), src.file(def));
    let elsewhere = if def_file != file {
        format!(" in {}", def_file.display())
    } else {
        String::new()
    };
    format!(
        "{}: function {} refers to function {callee} (fn{fref}) with signature {declared}, but \
         {callee} is defined{elsewhere} with signature {defined}",
        file.display(),
        src.name(caller),
    )
}
