//! The `.lir` text printer. `parse(print(m))` prints back identically (see `parse.rs`).

use super::entities::*;
use super::function::*;
use super::inst::{effects, Format, Opcode};
use super::module::{Module, SymbolKind};
use super::operand::{Imm, MemRef, Operand};
use super::signature::*;
use super::tables::*;
use super::types::Type;
use core::fmt::{self, Write};

/// Is `s` printable without quotes after `@`?
fn is_bare_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$')
}

/// Write `@name`, quoting names that are not identifiers (`@"u0:12"`).
pub fn write_symbol_name(w: &mut dyn Write, name: &str) -> fmt::Result {
    if is_bare_name(name) {
        write!(w, "@{name}")
    } else {
        w.write_str("@\"")?;
        for c in name.chars() {
            match c {
                '"' => w.write_str("\\\"")?,
                '\\' => w.write_str("\\\\")?,
                '\n' => w.write_str("\\n")?,
                c => w.write_char(c)?,
            }
        }
        w.write_char('"')
    }
}

fn write_quoted(w: &mut dyn Write, s: &str) -> fmt::Result {
    w.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            c => w.write_char(c)?,
        }
    }
    w.write_char('"')
}

pub(crate) fn write_abi_param(w: &mut dyn Write, p: &AbiParam) -> fmt::Result {
    write!(w, "{}", p.ty)?;
    match p.ext {
        Ext::None => {}
        Ext::Uext => w.write_str(" uext")?,
        Ext::Sext => w.write_str(" sext")?,
    }
    match p.purpose {
        Purpose::Normal => {}
        Purpose::VmCtx => w.write_str(" vmctx")?,
        Purpose::StructReturn => w.write_str(" sret")?,
        Purpose::StructArgument(n) => write!(w, " sarg({n})")?,
    }
    Ok(())
}

pub(crate) fn write_signature(w: &mut dyn Write, sig: &Signature) -> fmt::Result {
    w.write_char('(')?;
    for (i, p) in sig.params.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write_abi_param(w, p)?;
    }
    w.write_char(')')?;
    if !sig.returns.is_empty() {
        w.write_str(" -> ")?;
        for (i, p) in sig.returns.iter().enumerate() {
            if i > 0 {
                w.write_str(", ")?;
            }
            write_abi_param(w, p)?;
        }
    }
    write!(w, " {}", sig.call_conv.name())
}

pub(crate) fn write_memflags(w: &mut dyn Write, f: &MemFlags) -> fmt::Result {
    if f.trap == 0 {
        w.write_str(" notrap")?;
    } else if f.trap != MemFlags::HEAP_OOB {
        write!(w, " {}", trap_code_name(f.trap))?;
    }
    for (bit, name) in [
        (MemFlags::ALIGNED, "aligned"),
        (MemFlags::READONLY, "readonly"),
        (MemFlags::LITTLE, "little"),
        (MemFlags::BIG, "big"),
        (MemFlags::CAN_MOVE, "can_move"),
    ] {
        if f.bits & bit != 0 {
            write!(w, " {name}")?;
        }
    }
    if let Some(r) = f.region {
        write!(w, " {r}")?;
    }
    Ok(())
}

pub(crate) fn write_imm(w: &mut dyn Write, imm: Imm) -> fmt::Result {
    match imm {
        Imm::Int(v) => write!(w, "{v}"),
        Imm::F32(b) => write!(w, "f32:{b:#x}"),
        Imm::F64(b) => write!(w, "f64:{b:#x}"),
    }
}

fn write_offset(w: &mut dyn Write, off: i64) -> fmt::Result {
    match off.cmp(&0) {
        core::cmp::Ordering::Equal => Ok(()),
        core::cmp::Ordering::Greater => write!(w, " + {off}"),
        core::cmp::Ordering::Less => write!(w, " - {}", (off as i128).unsigned_abs()),
    }
}

fn write_memref(w: &mut dyn Write, m: &MemRef) -> fmt::Result {
    let mut first = true;
    if let Some(b) = m.base.expand() {
        write!(w, "{b}")?;
        first = false;
    }
    if let Some(i) = m.index.expand() {
        if !first {
            w.write_str(" + ")?;
        }
        write!(w, "{i}*{}", m.scale)?;
        first = false;
    }
    if first {
        write!(w, "{}", m.disp)
    } else {
        write_offset(w, m.disp as i64)
    }
}

/// Print one operand in the context of module `m` (for symbol names).
pub fn write_operand(w: &mut dyn Write, m: &Module, op: &Operand) -> fmt::Result {
    match *op {
        Operand::Reg(r) => write!(w, "{r}"),
        Operand::Int(v) => write_imm(w, Imm::Int(v)),
        Operand::F32(b) => write_imm(w, Imm::F32(b)),
        Operand::F64(b) => write_imm(w, Imm::F64(b)),
        Operand::Block(b) => write!(w, "{b}"),
        Operand::Mem {
            base,
            index,
            scale,
            disp,
        } => {
            w.write_char('[')?;
            write_memref(
                w,
                &MemRef {
                    base,
                    index,
                    scale,
                    disp,
                },
            )?;
            w.write_char(']')
        }
        Operand::Sym(s, off) => {
            match m.symbols.get(s) {
                Some(sd) => write_symbol_name(w, &sd.name)?,
                None => write!(w, "@{s}")?, // not a symbol of the module (the verifier reports it)
            }
            write_offset(w, off)
        }
        Operand::Stack(s, off) => {
            write!(w, "{s}")?;
            write_offset(w, off as i64)
        }
        Operand::Pred(c) => write!(w, "{c}"),
        Operand::Arg(n) => write!(w, "arg{n}"),
    }
}

/// Memory operands of loads and stores print in brackets (`[stack_obj.1 + 4]`).
fn write_mem_operand(w: &mut dyn Write, m: &Module, op: &Operand) -> fmt::Result {
    match op {
        Operand::Stack(..) | Operand::Sym(..) => {
            w.write_char('[')?;
            write_operand(w, m, op)?;
            w.write_char(']')
        }
        // A memory reference brings its own brackets; anything else is malformed and printed
        // bare, so that it does not read as a memory reference.
        _ => write_operand(w, m, op),
    }
}

fn write_list(w: &mut dyn Write, m: &Module, ops: &[Operand]) -> fmt::Result {
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write_operand(w, m, op)?;
    }
    Ok(())
}

/// The type a result register has unless annotated (`None`: always annotated).
pub fn natural_result_type(
    f: &Function,
    opcode: Opcode,
    ty: Type,
    aux: u32,
    idx: usize,
) -> Option<Type> {
    match opcode.format() {
        Format::Compare => Some(if ty.is_vector() {
            Type::int(ty.lane_bits()).and_then(|t| t.by(ty.lanes()))?
        } else {
            Type::I8
        }),
        Format::Call => {
            let sig = f.sigs.get(SigRef::from_u32(aux))?;
            sig.returns.get(idx).map(|p| p.ty)
        }
        Format::Opaque => None,
        _ if idx == 0 => Some(ty),
        _ => None,
    }
}

fn effects_text(e: u8) -> String {
    if e == 0 {
        return "pure".into();
    }
    let mut parts = Vec::new();
    for (bit, name) in [
        (effects::LOAD, "load"),
        (effects::STORE, "store"),
        (effects::TRAP, "trap"),
        (effects::SIDE, "side"),
    ] {
        if e & bit != 0 {
            parts.push(name);
        }
    }
    parts.join("+")
}

/// Does an instruction have the operands and side-table entries its format's syntax needs?
fn printable(f: &Function, opcode: Opcode, aux: u32, aux2: u32, ops: &[Operand]) -> bool {
    let memflags = |r: u32| f.memflags.get(MemFlagsRef::from_u32(r)).is_some();
    let shape_ok = match opcode.format() {
        Format::Compare | Format::Brif | Format::Addr | Format::CondTrap | Format::Call => {
            !ops.is_empty()
        }
        Format::Load => !ops.is_empty() && memflags(aux),
        Format::Store => ops.len() >= 2 && memflags(aux),
        Format::BrTable => ops.len() >= 2,
        Format::Opaque => {
            f.opaques.get(OpaqueRef::from_u32(aux)).is_some() && (aux2 == 0 || memflags(aux2 - 1))
        }
        _ => true,
    };
    shape_ok
        && (opcode != Opcode::TryCall
            || (f.exn_tables.get(ExnTable::from_u32(aux2)).is_some()
                && ops[1..].iter().any(|o| matches!(o, Operand::Block(_)))))
}

/// Print one instruction (no indentation, no newline).
pub fn write_inst(w: &mut dyn Write, m: &Module, f: &Function, inst: Inst) -> fmt::Result {
    let d = &f.insts[inst];
    let results = f.results(inst);
    let ops = f.operands(inst).unpacked();
    let ops = &ops[..];
    for (i, &r) in results.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write!(w, "{r}")?;
        match f.regs.get(r) {
            Some(rd) if natural_result_type(f, d.opcode, d.ty, d.aux, i) != Some(rd.ty) => {
                write!(w, ": {}", rd.ty)?
            }
            _ => {}
        }
    }
    if !results.is_empty() {
        w.write_str(" = ")?;
    }
    w.write_str(d.opcode.name())?;
    if !d.ty.is_void() {
        write!(w, ".{}", d.ty)?;
    }
    if !printable(f, d.opcode, d.aux, f.aux2(inst), ops) {
        // Malformed (the verifier prints what it rejects): a generic form that cannot panic.
        if !ops.is_empty() {
            w.write_char(' ')?;
            write_list(w, m, ops)?;
        }
        return Ok(());
    }
    match d.opcode.format() {
        Format::Unary
        | Format::Binary
        | Format::Ternary
        | Format::Copy
        | Format::Return
        | Format::Jump => {
            if !ops.is_empty() {
                w.write_char(' ')?;
                write_list(w, m, ops)?;
            }
        }
        Format::Compare | Format::Brif => {
            w.write_char(' ')?;
            write_operand(w, m, &ops[0])?;
            w.write_char(' ')?;
            write_list(w, m, &ops[1..])?;
        }
        Format::Load => {
            write_memflags(w, &f.memflags[MemFlagsRef::from_u32(d.aux)])?;
            w.write_char(' ')?;
            write_mem_operand(w, m, &ops[0])?;
        }
        Format::Store => {
            write_memflags(w, &f.memflags[MemFlagsRef::from_u32(d.aux)])?;
            w.write_char(' ')?;
            write_mem_operand(w, m, &ops[0])?;
            w.write_str(", ")?;
            write_operand(w, m, &ops[1])?;
        }
        Format::Addr => {
            w.write_char(' ')?;
            write_operand(w, m, &ops[0])?;
            if d.opcode == Opcode::FuncAddr {
                write!(w, ", {}", SigRef::from_u32(d.aux))?;
            }
        }
        Format::GlobalValue => write!(w, " {}", GlobalRef::from_u32(d.aux))?,
        Format::Call => {
            w.write_char(' ')?;
            write_operand(w, m, &ops[0])?;
            let nargs = ops[1..]
                .iter()
                .take_while(|o| !matches!(o, Operand::Block(_)))
                .count();
            w.write_char('(')?;
            write_list(w, m, &ops[1..1 + nargs])?;
            write!(w, "), {}", SigRef::from_u32(d.aux))?;
            if d.opcode == Opcode::TryCall {
                let rest = &ops[1 + nargs..];
                write!(w, ", {}, [", rest[0].as_block().unwrap())?;
                let table = &f.exn_tables[ExnTable::from_u32(f.aux2(inst))];
                for (i, (item, op)) in table.iter().zip(&rest[1..]).enumerate() {
                    if i > 0 {
                        w.write_str(", ")?;
                    }
                    match item {
                        ExnItem::Tag(t) => write!(w, "tag{t}: ")?,
                        ExnItem::Default => w.write_str("default: ")?,
                        ExnItem::Context => w.write_str("context ")?,
                    }
                    write_operand(w, m, op)?;
                }
                w.write_char(']')?;
            }
        }
        Format::Phi => {
            for (i, pair) in ops.chunks(2).enumerate() {
                w.write_str(if i == 0 { " [" } else { ", [" })?;
                write_list(w, m, pair)?;
                w.write_char(']')?;
            }
        }
        Format::BrTable => {
            w.write_char(' ')?;
            write_list(w, m, &ops[..2])?;
            w.write_str(", [")?;
            write_list(w, m, &ops[2..])?;
            w.write_char(']')?;
        }
        Format::Trap => write!(w, " {}", trap_code_name(d.aux as u8))?,
        Format::CondTrap => {
            w.write_char(' ')?;
            write_operand(w, m, &ops[0])?;
            write!(w, ", {}", trap_code_name(d.aux as u8))?;
        }
        Format::ExnHandlerAddr => {
            w.write_char(' ')?;
            write_list(w, m, ops)?;
        }
        Format::Opaque => {
            let o = &f.opaques[OpaqueRef::from_u32(d.aux)];
            w.write_char(' ')?;
            write_quoted(w, &o.name)?;
            if !o.imms.is_empty() {
                w.write_str(" [")?;
                for (i, v) in o.imms.iter().enumerate() {
                    if i > 0 {
                        w.write_str(", ")?;
                    }
                    write!(w, "{v:#x}")?;
                }
                w.write_char(']')?;
            }
            write!(w, " {}", effects_text(o.effects))?;
            if f.aux2(inst) != 0 {
                w.write_str(" mem(")?;
                let mut s = String::new();
                write_memflags(&mut s, &f.memflags[MemFlagsRef::from_u32(f.aux2(inst) - 1)])?;
                w.write_str(s.trim_start())?;
                w.write_char(')')?;
            }
            if !ops.is_empty() {
                w.write_char(' ')?;
                write_list(w, m, ops)?;
            }
        }
    }
    Ok(())
}

fn write_global(w: &mut dyn Write, m: &Module, f: &Function, g: &GlobalData) -> fmt::Result {
    match *g {
        GlobalData::VmCtx => w.write_str("vmctx"),
        GlobalData::Load {
            base,
            offset,
            ty,
            flags,
        } => {
            write!(w, "load.{ty}")?;
            write_memflags(w, &f.memflags[flags])?;
            write!(w, " {base}")?;
            write_offset(w, offset as i64)
        }
        GlobalData::IAddImm { base, offset, ty } => write!(w, "iadd_imm.{ty} {base}, {offset}"),
        GlobalData::Symbol {
            sym,
            offset,
            colocated,
            tls,
        } => {
            w.write_str("symbol")?;
            if colocated {
                w.write_str(" colocated")?;
            }
            if tls {
                w.write_str(" tls")?;
            }
            w.write_char(' ')?;
            write_symbol_name(w, &m.symbols[sym].name)?;
            write_offset(w, offset)
        }
    }
}

/// Print a function.
pub fn write_function(w: &mut dyn Write, m: &Module, f: &Function) -> fmt::Result {
    w.write_str("function ")?;
    write_symbol_name(w, &f.name)?;
    let mut sig = String::new();
    write_signature(&mut sig, &f.sig)?;
    write!(w, "{sig} {}", f.linkage.name())?;
    if f.address_significant {
        w.write_str(" address_significant")?;
    }
    w.write_str(" {\n")?;
    for (s, d) in &f.stack_objs {
        writeln!(
            w,
            "    {s} = size {}, align {}",
            d.size,
            1u64 << d.align_shift
        )?;
    }
    for (s, d) in &f.sigs {
        write!(w, "    {s} = ")?;
        write_signature(w, d)?;
        w.write_char('\n')?;
    }
    for (r, d) in &f.regions {
        write!(w, "    {r} = {} ", d.id)?;
        write_quoted(w, &d.name)?;
        w.write_char('\n')?;
    }
    for (g, d) in &f.globals {
        write!(w, "    {g} = ")?;
        write_global(w, m, f, d)?;
        w.write_char('\n')?;
    }
    if let Some(g) = f.stack_limit {
        writeln!(w, "    stack_limit = {g}")?;
    }
    for &b in &f.layout {
        writeln!(w, "{b}:")?;
        for &i in f.block_insts(b) {
            w.write_str("    ")?;
            write_inst(w, m, f, i)?;
            w.write_char('\n')?;
        }
    }
    w.write_str("}\n")
}

/// Print a whole module: symbol declarations, then functions.
pub fn write_module(w: &mut dyn Write, m: &Module) -> fmt::Result {
    for (_, s) in &m.symbols {
        w.write_str("declare ")?;
        w.write_str(match s.kind {
            SymbolKind::Function => "function ",
            SymbolKind::Data => "data ",
        })?;
        write_symbol_name(w, &s.name)?;
        if s.colocated {
            w.write_str(" colocated")?;
        }
        w.write_char('\n')?;
    }
    // Names merged into another function resolve to the survivor.
    let mut aliases: Vec<(Symbol, Symbol)> = m.aliases.iter().map(|(a, b)| (*a, *b)).collect();
    aliases.sort();
    for (a, b) in aliases {
        w.write_str("alias ")?;
        write_symbol_name(w, &m.symbols[a].name)?;
        w.write_str(" = ")?;
        write_symbol_name(w, &m.symbols[b].name)?;
        w.write_char('\n')?;
    }
    for (_, f) in m.live_functions() {
        w.write_char('\n')?;
        write_function(w, m, f)?;
    }
    Ok(())
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write_module(f, self)
    }
}

/// A module printed to a string.
pub fn module_to_string(m: &Module) -> String {
    m.to_string()
}
