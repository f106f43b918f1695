//! Cranelift IR written as textual LLVM IR, so that LLVM's MergeFunctions can be timed on the
//! very module Mergelift's `merge` is timed on (`mergelift gen --emit ll`,
//! `scripts/llvm_mergefunc.sh`).
//!
//! It covers the scalar integer and float subset the generator writes: constants, arithmetic,
//! shifts, comparisons, `select`, extensions, loads and stores at an offset, direct calls,
//! `jump`, `brif` and `return`. Anything else is an error naming the function and the
//! instruction. The translation keeps the shape of each function (one LLVM instruction or a
//! short fixed sequence per Cranelift instruction, block parameters as phis), so functions
//! that are equal in Cranelift IR are equal in LLVM IR and functions that differ still
//! differ. Where Cranelift defines what LLVM leaves undefined (shift amounts past the width)
//! the shift amount is masked, as Cranelift does; division by zero, which traps in Cranelift,
//! is left to LLVM's semantics: the output is for measuring merging, not for running.

use anyhow::{anyhow, bail, Result};
use cranelift_codegen::ir::{
    self, condcodes::IntCC, types, BlockArg, Function, InstructionData, Opcode, Type, Value,
};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// LLVM IR for `funcs`: one module, every function defined with external linkage, callees
/// that are not among `funcs` declared.
pub fn module_to_llvm(funcs: &[Function]) -> Result<String> {
    let mut out = String::new();
    let defined: HashSet<String> = funcs.iter().map(name_of).collect();
    let mut declared: HashMap<String, String> = HashMap::new();
    for f in funcs {
        let text = function_to_llvm(f, &mut |name, decl| {
            if !defined.contains(name) {
                declared.entry(name.to_string()).or_insert(decl);
            }
        })
        .map_err(|e| anyhow!("function {}: {e}", f.name))?;
        out.push_str(&text);
    }
    let mut decls: Vec<_> = declared.into_values().collect();
    decls.sort();
    for d in decls {
        out.push_str(&d);
    }
    Ok(out)
}

/// The function's name without Cranelift's `%`.
fn name_of(f: &Function) -> String {
    let n = f.name.to_string();
    n.strip_prefix('%').unwrap_or(&n).to_string()
}

/// An LLVM type for a Cranelift scalar type.
fn ty(t: Type) -> Result<&'static str> {
    Ok(match t {
        types::I8 => "i8",
        types::I16 => "i16",
        types::I32 => "i32",
        types::I64 => "i64",
        types::I128 => "i128",
        types::F32 => "float",
        types::F64 => "double",
        _ => bail!("type {t} is not supported"),
    })
}

fn ret_ty(sig: &ir::Signature) -> Result<String> {
    match sig.returns.as_slice() {
        [] => Ok("void".into()),
        [r] => Ok(ty(r.value_type)?.into()),
        _ => bail!("multiple return values are not supported"),
    }
}

fn quote(name: &str) -> String {
    format!("@\"{}\"", name.replace('\\', "\\5C").replace('"', "\\22"))
}

struct Writer<'a> {
    f: &'a Function,
    out: String,
    temps: u32,
}

impl Writer<'_> {
    fn v(&self, v: Value) -> String {
        format!("%v{}", self.f.dfg.resolve_aliases(v).as_u32())
    }

    fn vty(&self, v: Value) -> Result<&'static str> {
        ty(self.f.dfg.value_type(v))
    }

    fn temp(&mut self) -> String {
        self.temps += 1;
        format!("%t{}", self.temps)
    }

    fn line(&mut self, s: impl AsRef<str>) {
        self.out.push_str("  ");
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    /// An `i1` that is true where Cranelift's condition value `c` is not zero.
    fn truth(&mut self, c: Value) -> Result<String> {
        let t = self.temp();
        let s = format!("{t} = icmp ne {} {}, 0", self.vty(c)?, self.v(c));
        self.line(s);
        Ok(t)
    }

    /// `v` as an integer of type `to` (truncated or zero-extended).
    fn int_as(&mut self, v: Value, to: Type) -> Result<String> {
        let from = self.f.dfg.value_type(v);
        if from == to {
            return Ok(self.v(v));
        }
        let op = if from.bits() > to.bits() {
            "trunc"
        } else {
            "zext"
        };
        let t = self.temp();
        let s = format!("{t} = {op} {} {} to {}", ty(from)?, self.v(v), ty(to)?);
        self.line(s);
        Ok(t)
    }

    /// A pointer to a `t` at the address `p + offset`.
    fn address(&mut self, p: Value, offset: i64, t: &str) -> Result<String> {
        let pt = self.vty(p)?;
        let mut a = self.v(p);
        if offset != 0 {
            let s = self.temp();
            self.line(format!("{s} = add {pt} {a}, {offset}"));
            a = s;
        }
        let q = self.temp();
        self.line(format!("{q} = inttoptr {pt} {a} to {t}*"));
        Ok(q)
    }
}

/// One function as an LLVM `define`; `callee(name, declaration)` is told of each direct callee.
fn function_to_llvm(f: &Function, callee: &mut dyn FnMut(&str, String)) -> Result<String> {
    let mut w = Writer {
        f,
        out: String::new(),
        temps: 0,
    };
    let entry = f
        .layout
        .entry_block()
        .ok_or_else(|| anyhow!("no entry block"))?;

    // Block parameters become phis: every edge into a block, as (predecessor label, args).
    // A `brif` whose two edges reach one block sends its second edge through a block of its
    // own, since an LLVM phi names each predecessor once.
    let mut incoming: HashMap<ir::Block, Vec<(String, Vec<Value>)>> = HashMap::new();
    let mut edge_blocks: HashMap<ir::Inst, String> = HashMap::new();
    for b in f.layout.blocks() {
        let Some(term) = f.layout.last_inst(b) else {
            bail!("block {b} is empty");
        };
        let dests =
            f.dfg.insts[term].branch_destination(&f.dfg.jump_tables, &f.dfg.exception_tables);
        for (k, d) in dests.iter().enumerate() {
            let target = d.block(&f.dfg.value_lists);
            if target == entry {
                bail!("a branch to the entry block is not supported");
            }
            let mut args = Vec::new();
            for a in d.args(&f.dfg.value_lists) {
                match a {
                    BlockArg::Value(v) => args.push(v),
                    _ => bail!("{term}: only value arguments are supported on branches"),
                }
            }
            let mut label = format!("b{}", b.as_u32());
            if k == 1 && dests[0].block(&f.dfg.value_lists) == target {
                label = format!("e{}", term.as_u32());
                edge_blocks.insert(term, label.clone());
            }
            incoming.entry(target).or_default().push((label, args));
        }
    }

    let params: Vec<String> = f
        .dfg
        .block_params(entry)
        .iter()
        .map(|&v| Ok(format!("{} {}", w.vty(v)?, w.v(v))))
        .collect::<Result<_>>()?;
    writeln!(
        w.out,
        "define {} {}({}) {{",
        ret_ty(&f.signature)?,
        quote(&name_of(f)),
        params.join(", ")
    )?;

    for b in f.layout.blocks() {
        writeln!(w.out, "b{}:", b.as_u32())?;
        if b != entry {
            for (k, &p) in f.dfg.block_params(b).iter().enumerate() {
                let edges = incoming.get(&b).map(Vec::as_slice).unwrap_or(&[]);
                let sources: Vec<String> = edges
                    .iter()
                    .map(|(label, args)| format!("[ {}, %{label} ]", w.v(args[k])))
                    .collect();
                let s = format!("{} = phi {} {}", w.v(p), w.vty(p)?, sources.join(", "));
                w.line(s);
            }
        }
        for inst in f.layout.block_insts(b) {
            instruction(&mut w, inst, &edge_blocks, callee)
                .map_err(|e| anyhow!("{}: {e}", f.dfg.display_inst(inst)))?;
        }
    }
    w.out.push_str("}\n\n");
    Ok(w.out)
}

fn int_cond(cc: IntCC) -> &'static str {
    match cc {
        IntCC::Equal => "eq",
        IntCC::NotEqual => "ne",
        IntCC::SignedLessThan => "slt",
        IntCC::SignedGreaterThanOrEqual => "sge",
        IntCC::SignedGreaterThan => "sgt",
        IntCC::SignedLessThanOrEqual => "sle",
        IntCC::UnsignedLessThan => "ult",
        IntCC::UnsignedGreaterThanOrEqual => "uge",
        IntCC::UnsignedGreaterThan => "ugt",
        IntCC::UnsignedLessThanOrEqual => "ule",
    }
}

fn instruction(
    w: &mut Writer,
    inst: ir::Inst,
    edge_blocks: &HashMap<ir::Inst, String>,
    callee: &mut dyn FnMut(&str, String),
) -> Result<()> {
    let f = w.f;
    let data = &f.dfg.insts[inst];
    let args = f.dfg.inst_args(inst);
    let res = f.dfg.inst_results(inst).first().copied();
    let out = |w: &Writer| -> Result<(String, Type)> {
        let r = res.ok_or_else(|| anyhow!("no result"))?;
        Ok((w.v(r), f.dfg.value_type(r)))
    };
    let op = data.opcode();
    let binary = match op {
        Opcode::Iadd => Some("add"),
        Opcode::Isub => Some("sub"),
        Opcode::Imul => Some("mul"),
        Opcode::Band => Some("and"),
        Opcode::Bor => Some("or"),
        Opcode::Bxor => Some("xor"),
        Opcode::Udiv => Some("udiv"),
        Opcode::Sdiv => Some("sdiv"),
        Opcode::Urem => Some("urem"),
        Opcode::Srem => Some("srem"),
        Opcode::Fadd => Some("fadd"),
        Opcode::Fsub => Some("fsub"),
        Opcode::Fmul => Some("fmul"),
        Opcode::Fdiv => Some("fdiv"),
        _ => None,
    };
    if let Some(name) = binary {
        let (r, t) = out(w)?;
        let s = format!("{r} = {name} {} {}, {}", ty(t)?, w.v(args[0]), w.v(args[1]));
        w.line(s);
        return Ok(());
    }
    match (op, data) {
        (Opcode::Iconst, InstructionData::UnaryImm { imm, .. }) => {
            let (r, t) = out(w)?;
            // The immediate's low `t.bits()` bits, as a signed number of that width.
            let shift = 64 - t.bits().min(64);
            let k = (imm.bits() << shift) >> shift;
            w.line(format!("{r} = add {} {k}, 0", ty(t)?));
        }
        (Opcode::F32const, InstructionData::UnaryIeee32 { imm, .. }) => {
            let (r, _) = out(w)?;
            let bits = (f32::from_bits(imm.bits()) as f64).to_bits();
            w.line(format!("{r} = fadd float 0x{bits:016X}, -0.0"));
        }
        (Opcode::F64const, InstructionData::UnaryIeee64 { imm, .. }) => {
            let (r, _) = out(w)?;
            w.line(format!("{r} = fadd double 0x{:016X}, -0.0", imm.bits()));
        }
        (Opcode::Ishl | Opcode::Ushr | Opcode::Sshr, _) => {
            let (r, t) = out(w)?;
            let amount = w.int_as(args[1], t)?;
            let masked = w.temp();
            let tt = ty(t)?;
            w.line(format!("{masked} = and {tt} {amount}, {}", t.bits() - 1));
            let name = match op {
                Opcode::Ishl => "shl",
                Opcode::Ushr => "lshr",
                _ => "ashr",
            };
            let s = format!("{r} = {name} {tt} {}, {masked}", w.v(args[0]));
            w.line(s);
        }
        (Opcode::Icmp, InstructionData::IntCompare { cond, .. }) => {
            let (r, t) = out(w)?;
            let c = w.temp();
            let s = format!(
                "{c} = icmp {} {} {}, {}",
                int_cond(*cond),
                w.vty(args[0])?,
                w.v(args[0]),
                w.v(args[1])
            );
            w.line(s);
            w.line(format!("{r} = zext i1 {c} to {}", ty(t)?));
        }
        (Opcode::Select, _) => {
            let (r, t) = out(w)?;
            let c = w.truth(args[0])?;
            let tt = ty(t)?;
            let s = format!(
                "{r} = select i1 {c}, {tt} {}, {tt} {}",
                w.v(args[1]),
                w.v(args[2])
            );
            w.line(s);
        }
        (Opcode::Uextend | Opcode::Sextend | Opcode::Ireduce, _) => {
            let (r, t) = out(w)?;
            let name = match op {
                Opcode::Uextend => "zext",
                Opcode::Sextend => "sext",
                _ => "trunc",
            };
            let s = format!(
                "{r} = {name} {} {} to {}",
                w.vty(args[0])?,
                w.v(args[0]),
                ty(t)?
            );
            w.line(s);
        }
        (Opcode::Load, InstructionData::Load { offset, .. }) => {
            let (r, t) = out(w)?;
            let tt = ty(t)?;
            let p = w.address(args[0], i64::from(*offset), tt)?;
            w.line(format!("{r} = load {tt}, {tt}* {p}"));
        }
        (Opcode::Store, InstructionData::Store { offset, .. }) => {
            let tt = w.vty(args[0])?;
            let p = w.address(args[1], i64::from(*offset), tt)?;
            let s = format!("store {tt} {}, {tt}* {p}", w.v(args[0]));
            w.line(s);
        }
        (Opcode::Call, InstructionData::Call { func_ref, .. }) => {
            let ext = &f.dfg.ext_funcs[*func_ref];
            let name = ext.name.display(Some(&f.params)).to_string();
            let name = name.strip_prefix('%').unwrap_or(&name).to_string();
            let sig = &f.dfg.signatures[ext.signature];
            let rt = ret_ty(sig)?;
            let params: Vec<&str> = sig
                .params
                .iter()
                .map(|p| ty(p.value_type))
                .collect::<Result<_>>()?;
            callee(
                &name,
                format!("declare {rt} {}({})\n", quote(&name), params.join(", ")),
            );
            let list: Vec<String> = args
                .iter()
                .map(|&a| Ok(format!("{} {}", w.vty(a)?, w.v(a))))
                .collect::<Result<_>>()?;
            let call = format!("call {rt} {}({})", quote(&name), list.join(", "));
            match res {
                Some(_) => {
                    let (r, _) = out(w)?;
                    w.line(format!("{r} = {call}"));
                }
                None => w.line(call),
            }
        }
        (Opcode::Jump, InstructionData::Jump { destination, .. }) => {
            let b = destination.block(&f.dfg.value_lists);
            w.line(format!("br label %b{}", b.as_u32()));
        }
        (Opcode::Brif, InstructionData::Brif { blocks, .. }) => {
            let c = w.truth(args[0])?;
            let then = blocks[0].block(&f.dfg.value_lists);
            let other = blocks[1].block(&f.dfg.value_lists);
            match edge_blocks.get(&inst) {
                Some(e) => {
                    w.line(format!("br i1 {c}, label %b{}, label %{e}", then.as_u32()));
                    writeln!(w.out, "{e}:")?;
                    w.line(format!("br label %b{}", other.as_u32()));
                }
                None => w.line(format!(
                    "br i1 {c}, label %b{}, label %b{}",
                    then.as_u32(),
                    other.as_u32()
                )),
            }
        }
        (Opcode::Return, _) => match args {
            [] => w.line("ret void"),
            [v] => {
                let s = format!("ret {} {}", w.vty(*v)?, w.v(*v));
                w.line(s);
            }
            _ => bail!("multiple return values are not supported"),
        },
        _ => bail!("opcode {op} is not supported"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Function> {
        cranelift_reader::parse_functions(text).unwrap()
    }

    #[test]
    fn block_parameters_become_phis_and_conditions_become_i1() {
        let funcs = parse(
            "function %f(i64, i32) -> i32 {
                fn0 = %g(i32) -> i32
             block0(v0: i64, v1: i32):
                v2 = iconst.i32 -1
                v3 = icmp slt v1, v2
                brif v3, block1(v1), block1(v2)
             block1(v4: i32):
                v5 = load.i32 v0+8
                v6 = call fn0(v5)
                v7 = ishl v6, v4
                store v7, v0+16
                return v7
             }",
        );
        let ll = module_to_llvm(&funcs).unwrap();
        assert!(ll.contains("define i32 @\"f\"(i64 %v0, i32 %v1) {"), "{ll}");
        assert!(ll.contains("%v2 = add i32 -1, 0"), "{ll}");
        // Both edges of the `brif` reach block1: the second goes through its own block.
        assert!(ll.contains("%v4 = phi i32 [ %v1, %b0 ], [ %v2, %e"), "{ll}");
        assert!(ll.contains("declare i32 @\"g\"(i32)"), "{ll}");
        assert!(ll.contains("= and i32 %v4, 31"), "{ll}");
        assert!(ll.contains("= add i64 %v0, 16"), "{ll}");
    }

    #[test]
    fn unsupported_instructions_are_named() {
        let funcs = parse(
            "function %f(i64) -> i64 {
             block0(v0: i64):
                v1 = popcnt v0
                return v1
             }",
        );
        let e = module_to_llvm(&funcs).unwrap_err().to_string();
        assert!(e.contains("function %f") && e.contains("popcnt"), "{e}");
    }

    /// LLVM's own parser accepts the output, where `llvm-as` or `opt` is installed.
    #[test]
    fn llvm_accepts_a_generated_module() {
        let Ok(opt) = which_opt() else {
            eprintln!("llvm_accepts_a_generated_module: no LLVM `opt` found, not checked");
            return;
        };
        let mut clif = Vec::new();
        crate::gen::generate_to(
            &crate::gen::GenOptions {
                functions: 200,
                edit_ratio: 0.2,
                ..Default::default()
            },
            &mut clif,
        )
        .unwrap();
        let funcs = parse(std::str::from_utf8(&clif).unwrap());
        let ll = module_to_llvm(&funcs).unwrap();
        let dir = std::env::temp_dir().join(format!("mergelift-ll-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gen.ll");
        std::fs::write(&path, ll).unwrap();
        let out = std::process::Command::new(opt)
            .args(["-passes=verify", "-disable-output"])
            .arg(&path)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn which_opt() -> Result<String> {
        for name in ["opt", "opt-14", "opt-15", "opt-16", "opt-17", "opt-18"] {
            if std::process::Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
            {
                return Ok(name.to_string());
            }
        }
        bail!("no opt")
    }
}
