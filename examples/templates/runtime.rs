//! A small template-heavy JIT runtime: generic collection routines (`get`, `sum`, `max`,
//! `sort`, `binary_search`, ...) monomorphised over element types, the way a language runtime
//! instantiates generics, built with cranelift-frontend and declared through
//! `cranelift_module::Module` only. Many instances come out identical (`sum<i32>` and
//! `sum<u32>` add the same bits; `len<T>` never looks at T; every pointer type is an `i64`):
//! about 57% of the instances duplicate another. The program comes in two crates, loaded in
//! turn: the second calls instances of the first.
//!
//! Used by `examples/templates` and by `benches/module.rs`.

#![allow(dead_code)]
// `ModuleResult` is cranelift-module's own (large) error type.
#![allow(clippy::result_large_err)]

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Function, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module, ModuleResult};

/// An element type: its machine representation and how it compares. A struct field as an
/// element is read at `offset` within records of `stride` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elem {
    pub name: &'static str,
    pub ty: Type,
    pub signed: bool,
    pub stride: i64,
    pub offset: i64,
}

impl Elem {
    const fn new(name: &'static str, ty: Type, signed: bool, bytes: i64) -> Self {
        Elem {
            name,
            ty,
            signed,
            stride: bytes,
            offset: 0,
        }
    }
    const fn field(name: &'static str, ty: Type, signed: bool, stride: i64, offset: i64) -> Self {
        Elem {
            name,
            ty,
            signed,
            stride,
            offset,
        }
    }
    fn is_float(self) -> bool {
        self.ty.is_float()
    }
}

/// The element types the program instantiates its templates with: several share a
/// representation (pointers, `usize`, ids, `char`), as real programs' types do.
pub const ELEMS: &[Elem] = &[
    Elem::new("i8", types::I8, true, 1),
    Elem::new("u8", types::I8, false, 1),
    Elem::new("bool", types::I8, false, 1),
    Elem::new("i16", types::I16, true, 2),
    Elem::new("u16", types::I16, false, 2),
    Elem::new("i32", types::I32, true, 4),
    Elem::new("u32", types::I32, false, 4),
    Elem::new("char", types::I32, false, 4),
    Elem::new("NodeId", types::I32, false, 4),
    Elem::new("i64", types::I64, true, 8),
    Elem::new("u64", types::I64, false, 8),
    Elem::new("usize", types::I64, false, 8),
    Elem::new("&str", types::I64, false, 8),
    Elem::new("*const Node", types::I64, false, 8),
    Elem::new("Box<Expr>", types::I64, false, 8),
    Elem::new("Rc<Type>", types::I64, false, 8),
    Elem::new("&[u8]", types::I64, false, 8),
    Elem::new("Option<NonNull<T>>", types::I64, false, 8),
    Elem::new("f32", types::F32, true, 4),
    Elem::new("f64", types::F64, true, 8),
    Elem::field("Point.x", types::F64, true, 16, 0),
    Elem::field("Point.y", types::F64, true, 16, 8),
    Elem::field("Edge.weight", types::I32, true, 12, 8),
    Elem::field("Token.kind", types::I8, false, 4, 0),
];

/// The generic routines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    Len,
    ByteLen,
    Get,
    Set,
    Swap,
    Fill,
    Sum,
    Max,
    Contains,
    IndexOf,
    CountGreater,
    Reverse,
    Sort,
    Clamp,
    Dot,
    BinarySearch,
}

pub const TEMPLATES: &[Template] = &[
    Template::Len,
    Template::ByteLen,
    Template::Get,
    Template::Set,
    Template::Swap,
    Template::Fill,
    Template::Sum,
    Template::Max,
    Template::Contains,
    Template::IndexOf,
    Template::CountGreater,
    Template::Reverse,
    Template::Sort,
    Template::Clamp,
    Template::Dot,
    Template::BinarySearch,
];

/// One instance: a template at an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instance {
    pub template: Template,
    pub elem: Elem,
}

impl Instance {
    pub fn name(&self) -> String {
        format!("{:?}<{}>", self.template, self.elem.name)
    }
}

/// The instances crate `k` of the program uses: half of the templates (crate 0 the first
/// eight, crate 1 the other eight, and so on in turn) at every element type.
pub fn instances(krate: u32) -> Vec<Instance> {
    let start = (krate as usize % 2) * 8;
    let mut v = Vec::new();
    for &template in &TEMPLATES[start..start + 8] {
        for &elem in ELEMS {
            v.push(Instance { template, elem });
        }
    }
    v
}

fn signature(m: &dyn Module, inst: &Instance) -> Signature {
    let mut s = m.make_signature();
    let (i64t, t) = (types::I64, inst.elem.ty);
    let p = |s: &mut Signature, ts: &[Type]| s.params.extend(ts.iter().map(|&t| AbiParam::new(t)));
    let r = |s: &mut Signature, t: Type| s.returns.push(AbiParam::new(t));
    match inst.template {
        Template::Len | Template::ByteLen => {
            p(&mut s, &[i64t]);
            r(&mut s, i64t);
        }
        Template::Get => {
            p(&mut s, &[i64t, i64t]);
            r(&mut s, t);
        }
        Template::Set => p(&mut s, &[i64t, i64t, t]),
        Template::Swap => p(&mut s, &[i64t, i64t, i64t]),
        Template::Fill => p(&mut s, &[i64t, i64t, t]),
        Template::Sum | Template::Max => {
            p(&mut s, &[i64t, i64t]);
            r(&mut s, t);
        }
        Template::Contains => {
            p(&mut s, &[i64t, i64t, t]);
            r(&mut s, types::I8);
        }
        Template::IndexOf | Template::CountGreater => {
            p(&mut s, &[i64t, i64t, t]);
            r(&mut s, i64t);
        }
        Template::Reverse | Template::Sort => p(&mut s, &[i64t, i64t]),
        Template::Clamp => {
            p(&mut s, &[t, t, t]);
            r(&mut s, t);
        }
        Template::Dot => {
            p(&mut s, &[i64t, i64t, i64t]);
            r(&mut s, t);
        }
        Template::BinarySearch => {
            p(&mut s, &[i64t, i64t, i64t, t]);
            r(&mut s, i64t);
        }
    }
    s
}

/// The instances compiled so far, by name, across batches (a generic is instantiated once
/// per program, whichever crate asks first).
#[derive(Default)]
pub struct Program {
    ids: std::collections::HashMap<String, FuncId>,
}

impl Program {
    /// The id of an instance, if it was instantiated.
    pub fn id(&self, template: Template, elem: &str) -> Option<FuncId> {
        self.ids.get(&format!("{template:?}<{elem}>")).copied()
    }

    /// Instantiate `insts` (and the instances they call that are not there yet): declare and
    /// define each new one. Returns the machine-code bytes the module reported (0 for a
    /// module that compiles later, as `MergeModule` does).
    pub fn instantiate(
        &mut self,
        m: &mut dyn Module,
        insts: &[Instance],
        fctx: &mut FunctionBuilderContext,
    ) -> ModuleResult<usize> {
        let mut bytes = 0;
        for inst in insts {
            bytes += self.instance(m, *inst, fctx)?.1;
        }
        Ok(bytes)
    }

    fn instance(
        &mut self,
        m: &mut dyn Module,
        inst: Instance,
        fctx: &mut FunctionBuilderContext,
    ) -> ModuleResult<(FuncId, usize)> {
        if let Some(&id) = self.ids.get(&inst.name()) {
            return Ok((id, 0));
        }
        let id = m.declare_function(&inst.name(), Linkage::Export, &signature(m, &inst))?;
        self.ids.insert(inst.name(), id);
        let mut bytes = 0;
        let callee = match inst.template {
            Template::Reverse | Template::Sort => {
                let swap = Instance {
                    template: Template::Swap,
                    elem: inst.elem,
                };
                let (s, b) = self.instance(m, swap, fctx)?;
                bytes += b;
                Some(s)
            }
            Template::BinarySearch => Some(id),
            _ => None,
        };
        let mut ctx = m.make_context();
        ctx.func.signature = signature(m, &inst);
        let callee_ref = callee.map(|c| m.declare_func_in_func(c, &mut ctx.func));
        build(
            &mut ctx.func,
            fctx,
            m.target_config(),
            inst.elem,
            inst.template,
            callee_ref,
        );
        m.define_function(id, &mut ctx)?;
        bytes += ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
        m.clear_context(&mut ctx);
        Ok((id, bytes))
    }
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// `base + i * stride + offset`.
fn addr(b: &mut FunctionBuilder, base: Value, i: Value, e: Elem) -> Value {
    let off = b.ins().imul_imm_s(i, e.stride);
    let p = b.ins().iadd(base, off);
    if e.offset == 0 {
        p
    } else {
        b.ins().iadd_imm_s(p, e.offset)
    }
}

fn greater(b: &mut FunctionBuilder, e: Elem, x: Value, y: Value) -> Value {
    if e.is_float() {
        b.ins().fcmp(FloatCC::GreaterThan, x, y)
    } else if e.signed {
        b.ins().icmp(IntCC::SignedGreaterThan, x, y)
    } else {
        b.ins().icmp(IntCC::UnsignedGreaterThan, x, y)
    }
}

fn equal(b: &mut FunctionBuilder, e: Elem, x: Value, y: Value) -> Value {
    if e.is_float() {
        b.ins().fcmp(FloatCC::Equal, x, y)
    } else {
        b.ins().icmp(IntCC::Equal, x, y)
    }
}

fn zero(b: &mut FunctionBuilder, e: Elem) -> Value {
    match e.ty {
        types::F32 => b.ins().f32const(0.0),
        types::F64 => b.ins().f64const(0.0),
        t => b.ins().iconst(t, 0),
    }
}

/// A counted loop `for i in start..end { body(i) }` over variables the body may update.
fn counted_loop(
    b: &mut FunctionBuilder,
    start: Value,
    end: Value,
    mut body: impl FnMut(&mut FunctionBuilder, Value),
) {
    let i = b.declare_var(types::I64);
    b.def_var(i, start);
    let (head, body_b, exit) = (b.create_block(), b.create_block(), b.create_block());
    b.ins().jump(head, &[]);
    b.switch_to_block(head);
    let iv = b.use_var(i);
    let more = b.ins().icmp(IntCC::SignedLessThan, iv, end);
    b.ins().brif(more, body_b, &[], exit, &[]);
    b.switch_to_block(body_b);
    let iv = b.use_var(i);
    body(b, iv);
    let next = b.ins().iadd_imm_s(iv, 1);
    b.def_var(i, next);
    b.ins().jump(head, &[]);
    b.switch_to_block(exit);
}

fn build(
    func: &mut Function,
    fctx: &mut FunctionBuilderContext,
    config: TargetFrontendConfig,
    e: Elem,
    t: Template,
    callee: Option<cranelift_codegen::ir::FuncRef>,
) {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let a: Vec<Value> = b.block_params(entry).to_vec();
    let ty = e.ty;
    match t {
        Template::Len => {
            b.ins().return_(&[a[0]]);
        }
        Template::ByteLen => {
            let n = b.ins().imul_imm_s(a[0], e.stride);
            b.ins().return_(&[n]);
        }
        Template::Get => {
            let p = addr(&mut b, a[0], a[1], e);
            let v = b.ins().load(ty, flags(), p, 0);
            b.ins().return_(&[v]);
        }
        Template::Set => {
            let p = addr(&mut b, a[0], a[1], e);
            b.ins().store(flags(), a[2], p, 0);
            b.ins().return_(&[]);
        }
        Template::Swap => {
            let (p, q) = (addr(&mut b, a[0], a[1], e), addr(&mut b, a[0], a[2], e));
            let x = b.ins().load(ty, flags(), p, 0);
            let y = b.ins().load(ty, flags(), q, 0);
            b.ins().store(flags(), y, p, 0);
            b.ins().store(flags(), x, q, 0);
            b.ins().return_(&[]);
        }
        Template::Fill => {
            let zero_i = b.ins().iconst(types::I64, 0);
            counted_loop(&mut b, zero_i, a[1], |b, i| {
                let p = addr(b, a[0], i, e);
                b.ins().store(flags(), a[2], p, 0);
            });
            b.ins().return_(&[]);
        }
        Template::Sum | Template::Max | Template::CountGreater => {
            let acc = b.declare_var(if t == Template::CountGreater {
                types::I64
            } else {
                ty
            });
            let init = match t {
                Template::CountGreater => b.ins().iconst(types::I64, 0),
                Template::Max => {
                    let zero_i = b.ins().iconst(types::I64, 0);
                    let p = addr(&mut b, a[0], zero_i, e);
                    b.ins().load(ty, flags(), p, 0)
                }
                _ => zero(&mut b, e),
            };
            b.def_var(acc, init);
            let start = b.ins().iconst(types::I64, (t == Template::Max) as i64);
            counted_loop(&mut b, start, a[1], |b, i| {
                let p = addr(b, a[0], i, e);
                let x = b.ins().load(ty, flags(), p, 0);
                let cur = b.use_var(acc);
                let next = match t {
                    Template::Sum if e.is_float() => b.ins().fadd(cur, x),
                    Template::Sum => b.ins().iadd(cur, x),
                    Template::Max => {
                        let g = greater(b, e, x, cur);
                        b.ins().select(g, x, cur)
                    }
                    _ => {
                        let g = greater(b, e, x, a[2]);
                        let one = b.ins().uextend(types::I64, g);
                        b.ins().iadd(cur, one)
                    }
                };
                b.def_var(acc, next);
            });
            let r = b.use_var(acc);
            b.ins().return_(&[r]);
        }
        Template::Contains | Template::IndexOf => {
            let zero_i = b.ins().iconst(types::I64, 0);
            let found = b.create_block();
            b.append_block_param(found, types::I64);
            counted_loop(&mut b, zero_i, a[1], |b, i| {
                let p = addr(b, a[0], i, e);
                let x = b.ins().load(ty, flags(), p, 0);
                let eq = equal(b, e, x, a[2]);
                let cont = b.create_block();
                b.ins().brif(eq, found, &[i.into()], cont, &[]);
                b.switch_to_block(cont);
            });
            let none = b.ins().iconst(types::I64, -1);
            b.ins().jump(found, &[none.into()]);
            b.switch_to_block(found);
            let idx = b.block_params(found)[0];
            if t == Template::Contains {
                let r = b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, idx, 0);
                b.ins().return_(&[r]);
            } else {
                b.ins().return_(&[idx]);
            }
        }
        Template::Reverse => {
            let swap = callee.expect("swap");
            let zero_i = b.ins().iconst(types::I64, 0);
            let half = b.ins().sshr_imm_s(a[1], 1);
            counted_loop(&mut b, zero_i, half, |b, i| {
                let last = b.ins().iadd_imm_s(a[1], -1);
                let j = b.ins().isub(last, i);
                b.ins().call(swap, &[a[0], i, j]);
            });
            b.ins().return_(&[]);
        }
        Template::Sort => {
            // Insertion sort: swap backwards while the left neighbour is greater.
            let swap = callee.expect("swap");
            let one = b.ins().iconst(types::I64, 1);
            counted_loop(&mut b, one, a[1], |b, i| {
                let j = b.declare_var(types::I64);
                b.def_var(j, i);
                let (head, step, done) = (b.create_block(), b.create_block(), b.create_block());
                b.ins().jump(head, &[]);
                b.switch_to_block(head);
                let jv = b.use_var(j);
                let pos = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, jv, 0);
                let check = b.create_block();
                b.ins().brif(pos, check, &[], done, &[]);
                b.switch_to_block(check);
                let jm1 = b.ins().iadd_imm_s(jv, -1);
                let (p, q) = (addr(b, a[0], jm1, e), addr(b, a[0], jv, e));
                let x = b.ins().load(ty, flags(), p, 0);
                let y = b.ins().load(ty, flags(), q, 0);
                let g = greater(b, e, x, y);
                b.ins().brif(g, step, &[], done, &[]);
                b.switch_to_block(step);
                b.ins().call(swap, &[a[0], jm1, jv]);
                b.def_var(j, jm1);
                b.ins().jump(head, &[]);
                b.switch_to_block(done);
            });
            b.ins().return_(&[]);
        }
        Template::Clamp => {
            let lo = greater(&mut b, e, a[1], a[0]);
            let x = b.ins().select(lo, a[1], a[0]);
            let hi = greater(&mut b, e, x, a[2]);
            let r = b.ins().select(hi, a[2], x);
            b.ins().return_(&[r]);
        }
        Template::Dot => {
            let acc = b.declare_var(ty);
            let z = zero(&mut b, e);
            b.def_var(acc, z);
            let zero_i = b.ins().iconst(types::I64, 0);
            counted_loop(&mut b, zero_i, a[2], |b, i| {
                let (p, q) = (addr(b, a[0], i, e), addr(b, a[1], i, e));
                let x = b.ins().load(ty, flags(), p, 0);
                let y = b.ins().load(ty, flags(), q, 0);
                let cur = b.use_var(acc);
                let next = if e.is_float() {
                    let m = b.ins().fmul(x, y);
                    b.ins().fadd(cur, m)
                } else {
                    let m = b.ins().imul(x, y);
                    b.ins().iadd(cur, m)
                };
                b.def_var(acc, next);
            });
            let r = b.use_var(acc);
            b.ins().return_(&[r]);
        }
        Template::BinarySearch => {
            // bs(ptr, lo, hi, x): the index of x in the sorted [lo, hi), or -1; recursive.
            let me = callee.expect("itself");
            let (empty, test) = (b.create_block(), b.create_block());
            let nonempty = b.ins().icmp(IntCC::SignedLessThan, a[1], a[2]);
            b.ins().brif(nonempty, test, &[], empty, &[]);
            b.switch_to_block(empty);
            let none = b.ins().iconst(types::I64, -1);
            b.ins().return_(&[none]);
            b.switch_to_block(test);
            let sum = b.ins().iadd(a[1], a[2]);
            let mid = b.ins().sshr_imm_s(sum, 1);
            let p = addr(&mut b, a[0], mid, e);
            let v = b.ins().load(ty, flags(), p, 0);
            let (hit, right, left) = (b.create_block(), b.create_block(), b.create_block());
            let eq = equal(&mut b, e, v, a[3]);
            let other = b.create_block();
            b.ins().brif(eq, hit, &[], other, &[]);
            b.switch_to_block(hit);
            b.ins().return_(&[mid]);
            b.switch_to_block(other);
            let lt = greater(&mut b, e, a[3], v);
            b.ins().brif(lt, right, &[], left, &[]);
            b.switch_to_block(right);
            let mid1 = b.ins().iadd_imm_s(mid, 1);
            let c = b.ins().call(me, &[a[0], mid1, a[2], a[3]]);
            let r = b.inst_results(c)[0];
            b.ins().return_(&[r]);
            b.switch_to_block(left);
            let c = b.ins().call(me, &[a[0], a[1], mid, a[3]]);
            let r = b.inst_results(c)[0];
            b.ins().return_(&[r]);
        }
    }
    b.seal_all_blocks();
    b.finalize(config);
}
