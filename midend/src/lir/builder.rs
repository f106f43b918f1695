//! A builder for LIR functions, so tests, examples and the lifter write little boilerplate.
//!
//! ```
//! use midend::lir::*;
//! use midend::verifier::verify_function;
//! let mut m = Module::new();
//! let mut sig = Signature::new(CallConv::SystemV);
//! sig.params.push(AbiParam::new(Type::I32));
//! sig.returns.push(AbiParam::new(Type::I32));
//! let mut b = Builder::new(&mut m, "inc", sig, Linkage::Export);
//! let entry = b.create_block();
//! b.switch_to_block(entry);
//! let x = b.arg(0);
//! let y = b.binary(Opcode::Add, x, Operand::Int(1));
//! b.ret(&[y]);
//! let id = b.finish().unwrap();
//! assert!(verify_function(&m, &m.functions[id], true).is_ok());
//! ```

use super::entities::*;
use super::function::*;
use super::inst::Opcode;
use super::module::{Module, SymbolKind};
use super::operand::{Cond, MemRef, Operand};
use super::signature::*;
use super::tables::*;
use super::types::Type;

/// Builds one function of `module`, appending instructions to the current block; `finish`
/// adds it to the module.
pub struct Builder<'m> {
    /// The module the function will join (its symbols are created here).
    pub module: &'m mut Module,
    /// The function being built.
    pub func: Function,
    current: Option<Block>,
}

impl<'m> Builder<'m> {
    /// Start a function `name` with signature `sig` and linkage `linkage`; no blocks yet.
    pub fn new(module: &'m mut Module, name: &str, sig: Signature, linkage: Linkage) -> Self {
        Builder {
            module,
            func: Function::new(name, sig, linkage),
            current: None,
        }
    }

    /// Create a block in the function.
    pub fn create_block(&mut self) -> Block {
        self.func.new_block()
    }
    /// Make `b` the block that `ins` and the other instruction methods append to.
    pub fn switch_to_block(&mut self, b: Block) {
        self.current = Some(b);
    }
    /// The block instructions are appended to, if any.
    pub fn current_block(&self) -> Option<Block> {
        self.current
    }

    /// Append an instruction to the current block.
    pub fn ins(&mut self, opcode: Opcode, ty: Type, results: &[Reg], operands: &[Operand]) -> Inst {
        let i = self.func.make_inst(opcode, ty, results, operands);
        let b = self
            .current
            .expect("Builder: no current block (call switch_to_block first)");
        self.func.append_inst(b, i);
        i
    }

    fn type_of(&self, op: Operand) -> Type {
        match op {
            Operand::Reg(r) => self.func.reg_type(r),
            Operand::F32(_) => Type::F32,
            Operand::F64(_) => Type::F64,
            _ => Type::I64,
        }
    }

    /// `%d = copy.T argN`: move a function argument into a register.
    pub fn arg(&mut self, n: u32) -> Operand {
        let ty = self.func.sig.params[n as usize].ty;
        let r = self.func.new_reg(ty);
        self.ins(Opcode::Copy, ty, &[r], &[Operand::Arg(n)]);
        Operand::Reg(r)
    }
    /// `%d = copy.T imm`: materialise a constant.
    pub fn iconst(&mut self, ty: Type, v: i64) -> Operand {
        let r = self.func.new_reg(ty);
        self.ins(Opcode::Copy, ty, &[r], &[Operand::Int(v)]);
        Operand::Reg(r)
    }
    /// A one-result instruction whose type is the first operand's.
    pub fn unary(&mut self, op: Opcode, a: Operand) -> Operand {
        let ty = self.type_of(a);
        self.unary_typed(op, ty, a)
    }
    /// A one-result instruction on `a` whose result has type `ty` (conversions: `uextend`,
    /// `ireduce`, `fcvt_*`).
    pub fn unary_typed(&mut self, op: Opcode, ty: Type, a: Operand) -> Operand {
        let r = self.func.new_reg(ty);
        self.ins(op, ty, &[r], &[a]);
        Operand::Reg(r)
    }
    /// A one-result instruction on `a, b`, of the type of the first register among them
    /// (`b`'s type if neither is a register).
    pub fn binary(&mut self, op: Opcode, a: Operand, b: Operand) -> Operand {
        let ty = if matches!(a, Operand::Reg(_)) {
            self.type_of(a)
        } else {
            self.type_of(b)
        };
        let r = self.func.new_reg(ty);
        self.ins(op, ty, &[r], &[a, b]);
        Operand::Reg(r)
    }
    /// `%d = icmp.T cond a, b` (`fcmp` for a float condition): an `i8` that is 1 when
    /// `cond` holds.
    pub fn icmp(&mut self, cond: Cond, a: Operand, b: Operand) -> Operand {
        let ty = if matches!(a, Operand::Reg(_)) {
            self.type_of(a)
        } else {
            self.type_of(b)
        };
        let r = self.func.new_reg(Type::I8);
        self.ins(
            if cond.is_float() {
                Opcode::Fcmp
            } else {
                Opcode::Icmp
            },
            ty,
            &[r],
            &[Operand::Pred(cond), a, b],
        );
        Operand::Reg(r)
    }
    /// `%d = select.T c, a, b`: `a` if `c` is nonzero, else `b`.
    pub fn select(&mut self, c: Operand, a: Operand, b: Operand) -> Operand {
        let ty = self.type_of(a);
        let r = self.func.new_reg(ty);
        self.ins(Opcode::Select, ty, &[r], &[c, a, b]);
        Operand::Reg(r)
    }
    /// `%d = load.T flags mem`.
    pub fn load(&mut self, ty: Type, flags: MemFlags, mem: Operand) -> Operand {
        let r = self.func.new_reg(ty);
        let i = self.ins(Opcode::Load, ty, &[r], &[mem]);
        self.func.insts[i].aux = self.func.intern_memflags(flags).as_u32();
        Operand::Reg(r)
    }
    /// `store.T flags mem, value`, of the type of `value`.
    pub fn store(&mut self, flags: MemFlags, mem: Operand, value: Operand) -> Inst {
        let ty = self.type_of(value);
        let i = self.ins(Opcode::Store, ty, &[], &[mem, value]);
        self.func.insts[i].aux = self.func.intern_memflags(flags).as_u32();
        i
    }
    /// `[base + disp]`.
    pub fn mem(base: Operand, disp: i32) -> Operand {
        Operand::from(MemRef::base(
            base.as_reg().expect("memory base must be a register"),
            disp,
        ))
    }
    /// A new stack object of `size` bytes, aligned to `1 << align_shift`.
    pub fn stack_obj(&mut self, size: u32, align_shift: u8) -> StackObj {
        self.func
            .stack_objs
            .push(StackObjData { size, align_shift })
    }
    /// The function's reference to `sig` (added unless an equal signature is already there).
    pub fn import_signature(&mut self, sig: Signature) -> SigRef {
        if let Some((r, _)) = self.func.sigs.iter().find(|(_, s)| **s == sig) {
            return r;
        }
        self.func.sigs.push(sig)
    }
    /// A symbol of the module (created if needed).
    pub fn symbol(&mut self, name: &str, kind: SymbolKind) -> Symbol {
        self.module.symbol(name, kind)
    }
    /// Direct call of `callee` with signature `sig`; returns the result registers.
    pub fn call(&mut self, callee: &str, sig: Signature, args: &[Operand]) -> Vec<Reg> {
        let s = self.symbol(callee, SymbolKind::Function);
        self.call_op(Operand::Sym(s, 0), sig, args)
    }
    /// Call through a symbol or register callee.
    pub fn call_op(&mut self, callee: Operand, sig: Signature, args: &[Operand]) -> Vec<Reg> {
        let results: Vec<Reg> = sig
            .returns
            .iter()
            .map(|p| self.func.new_reg(p.ty))
            .collect();
        let sr = self.import_signature(sig);
        let mut ops = vec![callee];
        ops.extend_from_slice(args);
        let i = self.ins(Opcode::Call, Type::VOID, &results, &ops);
        self.func.insts[i].aux = sr.as_u32();
        results
    }
    /// `%d = phi.T [v, bb], ..`. Phis may be created before their sources exist and
    /// completed with `set_phi_sources`.
    pub fn phi(&mut self, ty: Type, sources: &[(Operand, Block)]) -> (Inst, Operand) {
        let r = self.func.new_reg(ty);
        let ops: Vec<Operand> = sources
            .iter()
            .flat_map(|&(v, b)| [v, Operand::Block(b)])
            .collect();
        let i = self.ins(Opcode::Phi, ty, &[r], &ops);
        (i, Operand::Reg(r))
    }
    /// Replace the sources of `phi` (made by `phi`) with `sources`.
    pub fn set_phi_sources(&mut self, phi: Inst, sources: &[(Operand, Block)]) {
        let ops: Vec<Operand> = sources
            .iter()
            .flat_map(|&(v, b)| [v, Operand::Block(b)])
            .collect();
        self.func.set_operands(phi, &ops);
    }
    /// `jump target`.
    pub fn jump(&mut self, target: Block) {
        self.ins(Opcode::Jump, Type::VOID, &[], &[Operand::Block(target)]);
    }
    /// Branch to `then_` if `cond` holds for `a` (against zero) or for `a, b`.
    pub fn brif(&mut self, cond: Cond, a: Operand, b: Option<Operand>, then_: Block, else_: Block) {
        let ty = self.type_of(a);
        let mut ops = vec![Operand::Pred(cond), a];
        ops.extend(b);
        ops.extend([Operand::Block(then_), Operand::Block(else_)]);
        self.ins(Opcode::Brif, ty, &[], &ops);
    }
    /// `ret values..`.
    pub fn ret(&mut self, values: &[Operand]) {
        self.ins(Opcode::Ret, Type::VOID, &[], values);
    }
    /// `trap code`.
    pub fn trap(&mut self, code: u8) {
        let i = self.ins(Opcode::Trap, Type::VOID, &[], &[]);
        self.func.insts[i].aux = code as u32;
    }

    /// Add the function to the module.
    pub fn finish(self) -> Result<FuncId, String> {
        self.module.add_function(self.func)
    }
}
