//! `mergelift gen` and `mergelift fuzz`: generated template-heavy modules, and the
//! differential fuzzer over them.

use super::*;

/// Write a generated CLIF module to stdout, as it is or (`ll`) as LLVM IR.
pub(super) fn write_generated(
    ll: bool,
    make: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut out = Out::new();
    if ll {
        let mut clif = Vec::new();
        make(&mut clif)?;
        let funcs = cranelift_reader::parse_functions(std::str::from_utf8(&clif)?)
            .map_err(|e| anyhow!("the generated module does not parse: {e}"))?;
        out.put(&mergelift_tools::llvm::module_to_llvm(&funcs)?)?;
    } else {
        make(&mut out.0).map_err(stdout_error)?;
    }
    out.finish()
}

pub(super) fn cmd_gen(functions: u64, ratios: [f64; 3], seed: u64, ll: bool) -> Result<ExitCode> {
    let [dup_ratio, near_ratio, edit_ratio] = ratios;
    if ratios.iter().any(|r| !(0.0..=1.0).contains(r)) || ratios.iter().sum::<f64>() > 1.0 {
        bail!(
            "--dup-ratio, --near-ratio and --edit-ratio must be in [0, 1] and add up to at most 1"
        );
    }
    let mut r = None;
    write_generated(ll, |w| {
        let opts = mergelift_tools::gen::GenOptions {
            functions: functions as usize,
            dup_ratio,
            near_ratio,
            edit_ratio,
            seed,
        };
        r = Some(mergelift_tools::gen::generate_to(&opts, w)?);
        Ok(())
    })?;
    let r = r.expect("generated");
    let _ = writeln!(
        std::io::stderr(),
        "generated {} functions ({} CLIF instructions, {} blocks, {} calls): {} identical duplicates (counting transitive ones), {} near-duplicates, {} edited duplicates",
        r.functions, r.clif_insts, r.blocks, r.calls, r.duplicates, r.near_duplicates, r.edited_duplicates
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn cmd_gen_shape(shape: &str, functions: u64, ll: bool) -> Result<ExitCode> {
    let shape = mergelift_tools::gen::CallShape::parse(shape)
        .ok_or_else(|| anyhow!("unknown shape {shape}"))?;
    let mut calls = 0;
    write_generated(ll, |w| {
        calls = mergelift_tools::gen::generate_shape(shape, functions as usize, w)?;
        Ok(())
    })?;
    let _ = writeln!(
        std::io::stderr(),
        "generated {functions} functions ({calls} calls)"
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn cmd_fuzz(
    iterations: usize,
    seed: u64,
    passes: &str,
    out_dir: PathBuf,
    (batch, late_addresses, threads): (mergelift_tools::fuzz::BatchMode, bool, Option<u64>),
    target: Option<&str>,
) -> Result<ExitCode> {
    inputs::pass_list(passes)?;
    if late_addresses && batch == mergelift_tools::fuzz::BatchMode::One {
        inputs::warn("--late-addresses has no effect without --batch N or --batch random");
    }
    if threads.is_some() && batch == mergelift_tools::fuzz::BatchMode::One {
        inputs::warn("--threads has no effect without --batch N or --batch random");
    }
    let target = target.map(target_triple).transpose()?;
    let opts = mergelift_tools::fuzz::FuzzOptions {
        iterations,
        seed,
        passes: passes.to_string(),
        out_dir,
        batch,
        late_addresses,
        threads: threads.map_or(jit_driver::Threads::default(), |n| {
            jit_driver::Threads::Count(n as usize)
        }),
    };
    let host = mergelift_tools::cross::Arch::of(&target_lexicon::Triple::host());
    let foreign = target.filter(|t| t.arch().is_some() && t.arch() != host);
    let r = match &foreign {
        Some(t) => {
            if threads.is_some() {
                inputs::warn("--threads has no effect with a foreign --target: its object modules compile on the caller's thread");
            }
            let arch = t.arch().expect("foreign");
            let tc = mergelift_tools::cross::Toolchain::find(arch).map_err(|e| anyhow!(e))?;
            mergelift_tools::fuzz_cross::fuzz(&opts, &tc, t)
        }
        None => mergelift_tools::fuzz::fuzz(&opts),
    };
    let mut out = Out::new();
    for f in &r.plain_failures {
        out.line(&format!("plain compile: {f}"))?;
    }
    for f in &r.failures {
        out.line(f)?;
    }
    if let Some(t) = &foreign {
        out.line(&format!(
            "plain compile ({}): {} modules disagree with the interpreter",
            mergelift_tools::cross::arch_name(&t.triple),
            r.plain_failed
        ))?;
    }
    out.line(&r.summary())?;
    out.finish()?;
    let _ = writeln!(
        std::io::stderr(),
        "{} modules ({} with edge cases), {} calls compared ({} trapped on both sides, {} undecided \
         by the interpreter); merged {}, merged_similar {}, merged_aligned {}",
        r.passed + r.failed,
        r.edge_modules,
        r.calls,
        r.traps,
        r.skipped_calls,
        r.stats.get(midend::Counter::Merged),
        r.stats.get(midend::Counter::MergedSimilar),
        r.stats.get(midend::Counter::MergedAligned),
    );
    if batch != mergelift_tools::fuzz::BatchMode::One {
        let _ = writeln!(
            std::io::stderr(),
            "batch mode {batch}: {} modules in {} batches; merge.into_frozen {}, flushes {}, \
             compiled {}; invalid functions mixed in: {} refused at define, {} failed to \
             compile alone",
            r.batched_modules,
            r.batches,
            r.stats.get(midend::Counter::MergeIntoFrozen),
            r.stats.get(midend::Counter::Flushes),
            r.stats.get(midend::Counter::Compiled),
            r.stats.custom("fuzz.invalid_refused").unwrap_or(0),
            r.stats.custom("fuzz.invalid_failed").unwrap_or(0),
        );
    }
    Ok(if r.failed > 0 {
        ExitCode::from(EXIT_FAILURES)
    } else {
        ExitCode::SUCCESS
    })
}
