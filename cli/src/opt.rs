//! `mergelift opt`: the transformed IR of the inputs, as CLIF or LIR.

use super::*;

pub(super) fn cmd_opt(
    passes: &str,
    hot: &[String],
    emit: &str,
    want_stats: bool,
    (verify, low_memory): (bool, bool),
    target: Option<&mergelift_tools::cross::Target>,
    files: &[PathBuf],
) -> Result<ExitCode> {
    let kinds = inputs::pass_list(passes)?;
    let merging = kinds.iter().any(|k| {
        matches!(
            k,
            PassKind::Merge | PassKind::MergeSimilar | PassKind::MergeAligned
        )
    });
    if low_memory && !merging {
        inputs::warn("--low-memory has no effect: --passes merges no function");
    }
    if !verify && kinds.is_empty() {
        inputs::warn("--no-verify has no effect with --passes none (no pass to verify after)");
    }
    let mut pm = PassManager::from_kinds_with(
        &kinds,
        &midend::passes::PassOptions {
            hot: hot_functions(hot.to_vec()),
            ..Default::default()
        },
    );
    pm.verify = verify;
    let mut stats = Stats::default();
    let inputs = inputs::inputs(files, &inputs::OPT)?;
    let (mut module, passed) = load_module(&inputs, emit == "clif", target, &mut stats)?;
    if module.functions.is_empty() && passed.is_empty() {
        return Err(inputs::no_function(&inputs));
    }
    inputs::check_hot(hot, &kinds, |name| {
        module
            .lookup_symbol(name)
            .and_then(|s| module.defined(s))
            .is_some()
            || passed.iter().any(|p| p.key == name)
    });
    let mut state = PassState::default();
    state.free_removed = low_memory;
    let functions_in = module.live_functions().count() + passed.len();
    let insts_before = module.inst_count();
    // Functions from here on are made by the passes (merge-similar's shared bodies).
    let n_input = module.functions.len();
    // Functions folded by merge-similar are emitted as they came in (they are local, and
    // nothing calls them any more, but the output keeps every input function).
    let input = (emit == "clif" && kinds.contains(&PassKind::MergeSimilar)).then(|| module.clone());
    let peak_after_load = crate::mem::peak_rss_kib();
    pm.run(&mut module, &mut state, &mut stats)?;
    let functions_out = module.live_functions().count() + passed.len();
    let insts_after = module.inst_count();
    let mut out = Out::new();
    match emit {
        "lir" => write_lir(&mut out, &module, &passed)?,
        "clif" => {
            let t = Instant::now();
            midend::passes::merge::thunk_merged(&mut module, &mut state);
            // Functions passed through, each in its place among the lifted ones (before the
            // bodies the passes made, which come after all input functions).
            let mut through = passed.iter().peekable();
            for (id, f) in module.functions.iter() {
                let at = (id.as_u32() as usize).min(n_input);
                while let Some(p) = through.next_if(|p| p.before <= at) {
                    out.put(p.text.as_deref().unwrap_or_default())?;
                    out.put("\n")?;
                }
                let (m, f) = if !module.removed[id] {
                    (&module, f)
                } else if let Some(input) = &input {
                    (input, &input.functions[id])
                } else {
                    continue;
                };
                let func = lower_function(m, f, &mut OriginalNames, frontend_config())?;
                out.put(&func.display().to_string())?;
                out.put("\n")?;
            }
            for p in through {
                out.put(p.text.as_deref().unwrap_or_default())?;
                out.put("\n")?;
            }
            stats.add_time("lower", t.elapsed());
        }
        _ => {}
    }
    out.finish()?;
    if want_stats {
        let count = |k: MergeKind| state.merges.iter().filter(|r| r.kind == k).count();
        let mut time = serde_json::Map::new();
        for (phase, d) in stats.times() {
            time.insert(phase.clone(), serde_json::json!(d.as_secs_f64() * 1e3));
        }
        for phase in ["parse", "lift", "lower"] {
            time.entry(phase.to_string())
                .or_insert(serde_json::json!(0.0));
        }
        let mut obj = serde_json::json!({
            "functions_in": functions_in,
            "functions_out": functions_out,
            "merged": state.merges.len(),
            "replaced": count(MergeKind::Replaced),
            "aliased": count(MergeKind::Aliased),
            "thunked": count(MergeKind::Thunked),
            "folded": count(MergeKind::Folded),
            "passed_through": passed.len(),
            "lir_insts_before": insts_before,
            "lir_insts_after": insts_after,
            "time_ms": time,
        });
        for (k, v) in stats.counters_by_name() {
            // (`merge` counts its own merges as `merged`; above, `merged` counts every pass's,
            // as `size` does)
            let k = if k == "merged" { "merged_exact" } else { k };
            obj[k] = serde_json::json!(v);
        }
        if let (Some(load), Some(end)) = (peak_after_load, crate::mem::peak_rss_kib()) {
            obj["peak_rss_kib"] = serde_json::json!({ "after_load": load, "end": end });
        }
        let _ = writeln!(std::io::stderr(), "{obj}");
    }
    // The process ends here: the system takes back the module's memory at once, where
    // freeing it function by function would take a second on a large module.
    std::mem::forget(module);
    std::mem::forget(input);
    Ok(ExitCode::SUCCESS)
}

/// Print `module` as LIR (`lir::print::write_module`) with a comment line for each function
/// passed through, in its place among the live functions: `; not lifted: %f: reason`.
pub(super) fn write_lir(
    out: &mut Out,
    module: &lir::Module,
    passed: &[PassedThrough],
) -> Result<()> {
    let text = module.to_string();
    let comment = |p: &PassedThrough| format!("; not lifted: {}: {}\n", p.name, p.reason);
    if passed.is_empty() {
        return out.put(&text);
    }
    // The module's text is its declarations, then each live function after an empty line:
    // cut it there, by the length of each function's own text.
    let mut funcs = Vec::new();
    let mut f_text = String::new();
    for (id, f) in module.live_functions() {
        f_text.clear();
        lir::print::write_function(&mut f_text, module, f)?;
        funcs.push((id, 1 + f_text.len()));
    }
    let body: usize = funcs.iter().map(|(_, n)| n).sum();
    let Some(head) = text.len().checked_sub(body).filter(|&h| {
        text.is_char_boundary(h) && (funcs.is_empty() || text[h..].starts_with("\nfunction "))
    }) else {
        // (not the layout expected: the comments first)
        for p in passed {
            out.put(&comment(p))?;
        }
        return out.put(&text);
    };
    out.put(&text[..head])?;
    let mut at = head;
    let mut through = passed.iter().peekable();
    for (id, n) in funcs {
        while let Some(p) = through.next_if(|p| p.before <= (id.as_u32() as usize)) {
            out.put("\n")?;
            out.put(&comment(p))?;
        }
        out.put(&text[at..at + n])?;
        at += n;
    }
    for p in through {
        out.put("\n")?;
        out.put(&comment(p))?;
    }
    Ok(())
}
