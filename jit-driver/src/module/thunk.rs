//! Thunks in machine code. A merged function that must keep code of its own (its address is
//! observed, or `merge-similar` gave it a shared body with extra arguments) is, in LIR, a
//! *thunk*: it calls its survivor with its own arguments, plus constants or function
//! addresses, and returns what the survivor returns. Compiling such a function with Cranelift
//! costs about as much as a small function (some tens of µs: building the context, lowering,
//! register allocation, emission), and on modules with many near-duplicates thunks are a
//! good part of what is compiled.
//!
//! On x86-64, when every argument of the survivor is passed in a register, the thunk is a
//! tail jump: set the registers of the extra arguments, jump to the survivor. The caller's
//! arguments stay where the caller put them, the stack is untouched (the survivor returns
//! straight to the caller), and no frame is made. This module recognises exactly the LIR
//! thunks the merge passes build, checks the calling convention (the register assignment is
//! Cranelift's x64 ABI: `rdi, rsi, rdx, rcx, r8, r9` for integers, `xmm0`–`xmm7` for floats,
//! in the order of each class, for `system_v`, `fast` and `tail`), and writes the bytes.
//! Anything else (stack arguments, a return area, `i128`, vectors, extended extra arguments,
//! PIC code, another architecture) is left to Cranelift: `None`.

use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{ModuleReloc, ModuleRelocTarget};
use midend::lir::{self, CallConv, Ext, Opcode, Operand, Purpose, Type};

/// A thunk's machine code and its relocations (absolute 8-byte addresses, as Cranelift uses
/// for calls to functions that are not `colocated` in non-PIC code).
pub(super) struct NativeThunk {
    pub bytes: Vec<u8>,
    pub relocs: Vec<ModuleReloc>,
}

/// The code alignment of a thunk (Cranelift aligns x64 functions to 16 bytes; a thunk is
/// entered only by jumps and calls, 1 would do, but keep the inner module's usual layout).
pub(super) const ALIGNMENT: u64 = 16;

/// Integer argument registers of `system_v`, `fast` and `tail` on x64, in order (hardware
/// numbers: rdi, rsi, rdx, rcx, r8, r9).
const INT_ARGS: [u8; 6] = [7, 6, 2, 1, 8, 9];
/// The scratch register for the jump and float constants: r11 (no argument, clobbered by
/// every call in these conventions).
const SCRATCH: u8 = 11;

/// What an extra argument is set to.
#[derive(Clone, Copy)]
enum Extra {
    /// An integer or float bit pattern of the given type.
    Bits(Type, u64),
    /// The address of a function.
    Addr(lir::Symbol),
}

/// Is the thunk shape recognised and the ABI simple enough? Returns the machine code of `f`
/// (a thunk), or `None` to compile it with Cranelift. `target` gives the relocation target of
/// a function symbol (`None`: unknown here, so no native thunk).
pub(super) fn native_thunk(
    m: &lir::Module,
    f: &lir::Function,
    isa: &dyn TargetIsa,
    target: &mut dyn FnMut(lir::Symbol) -> Option<ModuleRelocTarget>,
) -> Option<NativeThunk> {
    if isa.triple().architecture != target_lexicon::Architecture::X86_64 || isa.flags().is_pic() {
        return None;
    }
    let (callee, extras) = thunk_shape(f)?;
    // The survivor's own signature must be the call's: the thunk's parameters, then one per
    // extra, the same returns and convention.
    let def = m.symbols[m.resolve_alias(callee)].def.expand()?;
    let sig = &m.functions[def].sig;
    let own = &f.sig;
    let np = own.params.len();
    if sig.call_conv != own.call_conv
        || sig.params.len() != np + extras.len()
        || sig.params[..np] != own.params[..]
        || sig.returns != own.returns
    {
        return None;
    }
    // Return registers: Cranelift's `tail` has eight of each class, `system_v` and `fast` two.
    let (max_int_rets, max_float_rets) = match own.call_conv {
        CallConv::Tail => (8, 8),
        CallConv::SystemV | CallConv::Fast => (2, 2),
        _ => return None,
    };
    let simple = |p: &lir::AbiParam| {
        matches!(p.purpose, Purpose::Normal | Purpose::VmCtx)
            && !p.ty.is_vector()
            && matches!(
                p.ty,
                Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::F32 | Type::F64
            )
    };
    if !sig.params.iter().all(simple) || !sig.returns.iter().all(simple) {
        return None;
    }
    // Every argument in a register; returns in registers (no hidden return-area pointer).
    let ints = |ps: &[lir::AbiParam]| ps.iter().filter(|p| p.ty.is_int()).count();
    let floats = |ps: &[lir::AbiParam]| ps.iter().filter(|p| p.ty.is_float()).count();
    if ints(&sig.params) > INT_ARGS.len()
        || floats(&sig.params) > 8
        || ints(&sig.returns) > max_int_rets
        || floats(&sig.returns) > max_float_rets
    {
        return None;
    }
    let mut code = Vec::with_capacity(16 + 12 * extras.len());
    let mut relocs = Vec::new();
    let (mut next_int, mut next_float) = (ints(&own.params), floats(&own.params));
    for (k, e) in extras.iter().enumerate() {
        let p = &sig.params[np + k];
        if p.ext != Ext::None {
            return None;
        }
        match *e {
            Extra::Bits(ty, bits) if ty.is_int() => {
                if ty != p.ty {
                    return None;
                }
                let r = INT_ARGS[next_int];
                next_int += 1;
                mov_imm(&mut code, r, ty, bits);
            }
            Extra::Bits(ty, bits) => {
                if ty != p.ty {
                    return None;
                }
                let x = next_float as u8;
                next_float += 1;
                // movabs r11, bits; movq/movd xmm, r11
                mov_imm(&mut code, SCRATCH, Type::I64, bits);
                code.push(0x66);
                code.push(if ty == Type::F64 { 0x49 } else { 0x41 });
                code.extend_from_slice(&[0x0f, 0x6e, 0xc0 | (x << 3) | (SCRATCH & 7)]);
            }
            Extra::Addr(s) => {
                if p.ty != Type::I64 {
                    return None;
                }
                let r = INT_ARGS[next_int];
                next_int += 1;
                let t = target(m.resolve_alias(s))?;
                relocs.push(movabs_reloc(&mut code, r, t));
            }
        }
    }
    // movabs r11, survivor; jmp r11
    let t = target(m.resolve_alias(callee))?;
    relocs.push(movabs_reloc(&mut code, SCRATCH, t));
    code.extend_from_slice(&[0x41, 0xff, 0xe0 | (SCRATCH & 7)]);
    Some(NativeThunk {
        bytes: code,
        relocs,
    })
}

/// The shape the merge passes give a thunk: one block of copies of the arguments (in
/// order), one instruction per extra argument (a constant copied, or a `func_addr`), a call
/// of a symbol with exactly those registers, and a return of exactly its results (or a tail
/// call). Returns the callee and the extras.
fn thunk_shape(f: &lir::Function) -> Option<(lir::Symbol, Vec<Extra>)> {
    if f.layout.len() != 1 || f.stack_limit.is_some() {
        return None;
    }
    let insts = f.block_insts(f.layout[0]);
    let np = f.sig.params.len();
    if insts.len() < np + 1 {
        return None;
    }
    let mut regs: Vec<lir::Reg> = Vec::with_capacity(insts.len());
    let mut extras = Vec::new();
    let mut k = 0;
    while k < insts.len() {
        let i = insts[k];
        let d = &f.insts[i];
        let (res, ops) = (f.results(i), f.operands(i).unpacked());
        match (d.opcode, res, &ops[..]) {
            (Opcode::Copy, &[r], &[Operand::Arg(a)]) if k < np && a as usize == k => {
                regs.push(r);
            }
            (Opcode::Copy, &[r], &[c]) if k >= np => {
                let bits = match c {
                    Operand::Int(x) => x as u64,
                    Operand::F32(x) => u64::from(x),
                    Operand::F64(x) => x,
                    _ => return None,
                };
                let ty = f.reg_type(r);
                let ok = match c {
                    Operand::Int(_) => ty.is_scalar_int() && ty.bits() <= 64,
                    Operand::F32(_) => ty == Type::F32,
                    _ => ty == Type::F64,
                };
                if !ok || d.ty != ty {
                    return None;
                }
                regs.push(r);
                extras.push(Extra::Bits(ty, bits));
            }
            (Opcode::FuncAddr, &[r], &[Operand::Sym(s, 0)]) if k >= np => {
                regs.push(r);
                extras.push(Extra::Addr(s));
            }
            (Opcode::Call | Opcode::TailCall, rets, ops) if k >= np => {
                let [Operand::Sym(callee, 0), args @ ..] = ops else {
                    return None;
                };
                // The call's signature is checked against the callee's by the caller.
                if args.len() != regs.len()
                    || !args.iter().zip(&regs).all(|(a, r)| *a == Operand::Reg(*r))
                {
                    return None;
                }
                let sig = f.sigs.get(lir::SigRef::from_u32(d.aux))?;
                if sig.params.len() != args.len() || sig.returns != f.sig.returns {
                    return None;
                }
                let rest = &insts[k + 1..];
                return match (d.opcode, rest) {
                    (Opcode::TailCall, []) if rets.is_empty() => Some((*callee, extras)),
                    (Opcode::Call, &[ret]) => {
                        let rd = &f.insts[ret];
                        let rops = f.operands(ret);
                        let same = rd.opcode == Opcode::Ret
                            && rops.len() == rets.len()
                            && rops.iter().zip(rets).all(|(o, r)| o == Operand::Reg(*r));
                        same.then_some((*callee, extras))
                    }
                    _ => None,
                };
            }
            _ => return None,
        }
        k += 1;
    }
    None
}

/// `mov` of a constant of type `ty` into integer register `r`, in the shortest form that
/// gives the register's low `ty.bits()` bits (the upper bits of a narrower argument are not
/// read).
fn mov_imm(code: &mut Vec<u8>, r: u8, ty: Type, bits: u64) {
    let low = if ty.bits() >= 64 {
        bits
    } else {
        bits & ((1u64 << ty.bits()) - 1)
    };
    let rex_b = if r >= 8 { 0x01 } else { 0 };
    if ty.bits() < 64 || low <= u64::from(u32::MAX) {
        // mov r32, imm32 (zero-extends to 64 bits)
        if rex_b != 0 {
            code.push(0x40 | rex_b);
        }
        code.push(0xb8 | (r & 7));
        code.extend_from_slice(&(low as u32).to_le_bytes());
    } else if (low as i64) >= i64::from(i32::MIN) && (low as i64) < 0 {
        // mov r64, simm32 (sign-extends)
        code.extend_from_slice(&[0x48 | rex_b, 0xc7, 0xc0 | (r & 7)]);
        code.extend_from_slice(&(low as i64 as i32).to_le_bytes());
    } else {
        // movabs r64, imm64
        code.extend_from_slice(&[0x48 | rex_b, 0xb8 | (r & 7)]);
        code.extend_from_slice(&low.to_le_bytes());
    }
}

/// `movabs r, <target>` with its relocation.
fn movabs_reloc(code: &mut Vec<u8>, r: u8, target: ModuleRelocTarget) -> ModuleReloc {
    let rex_b = if r >= 8 { 0x01 } else { 0 };
    code.extend_from_slice(&[0x48 | rex_b, 0xb8 | (r & 7)]);
    let offset = code.len() as u32;
    code.extend_from_slice(&[0; 8]);
    ModuleReloc {
        offset,
        kind: Reloc::Abs8,
        name: target,
        addend: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: u8, ty: Type, bits: u64) -> Vec<u8> {
        let mut v = Vec::new();
        mov_imm(&mut v, r, ty, bits);
        v
    }

    #[test]
    fn immediate_moves_encode_as_the_assembler_does() {
        // mov edi, 5
        assert_eq!(enc(7, Type::I32, 5), [0xbf, 5, 0, 0, 0]);
        // mov r8d, 0xffffffff (an i32 -1: the low 32 bits)
        assert_eq!(
            enc(8, Type::I32, u64::MAX),
            [0x41, 0xb8, 0xff, 0xff, 0xff, 0xff]
        );
        // mov rdx, -2 (sign-extended imm32)
        assert_eq!(
            enc(2, Type::I64, (-2i64) as u64),
            [0x48, 0xc7, 0xc2, 0xfe, 0xff, 0xff, 0xff]
        );
        // movabs r9, 0x1_0000_0000
        assert_eq!(
            enc(9, Type::I64, 1 << 32),
            [0x49, 0xb9, 0, 0, 0, 0, 1, 0, 0, 0]
        );
        // mov esi, 0x1234 for an i64 that fits in 32 unsigned bits
        assert_eq!(enc(6, Type::I64, 0x1234), [0xbe, 0x34, 0x12, 0, 0]);
        // mov ecx, 0xff for an i8 -1
        assert_eq!(enc(1, Type::I8, u64::MAX), [0xb9, 0xff, 0, 0, 0]);
    }
}
