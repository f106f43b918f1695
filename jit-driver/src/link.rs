//! Functions named as their producer named them (`%fib` in a `.clif` file, `u0:12` from
//! wasmtime), defined in a `cranelift_module::Module` by name. cranelift-module links by
//! `FuncId`: every reference of every function (calls, `func_addr`, symbol global values) is
//! rewritten to the module's ids, and names that no function defines are declared as imports.

use crate::opmap::func_name;
use cranelift_codegen::ir;
use cranelift_codegen::Context;
use cranelift_entity::EntitySet;
use cranelift_module::{DataId, FuncId, FuncOrDataId, Linkage, Module, ModuleError, ModuleResult};

/// The name a reference spells: user names as `uN:M`, test-case names as written; `None` for
/// libcalls and known symbols, which keep their Cranelift names.
fn reference_name(func: &ir::Function, name: &ir::ExternalName) -> Option<String> {
    match name {
        ir::ExternalName::User(r) => {
            let u = &func.params.user_named_funcs()[*r];
            Some(format!("u{}:{}", u.namespace, u.index))
        }
        ir::ExternalName::TestCase(t) => Some(String::from_utf8_lossy(t.raw()).into_owned()),
        ir::ExternalName::LibCall(_) | ir::ExternalName::KnownSymbol(_) => None,
    }
}

fn error(function: &str, msg: String) -> ModuleError {
    ModuleError::Backend(anyhow::anyhow!("function {function}: {msg}"))
}

fn in_function(function: &str, e: ModuleError) -> ModuleError {
    ModuleError::Backend(anyhow::Error::from(e).context(format!("function {function}")))
}

/// Declare every function of `funcs` in `module` under its own name with its linkage
/// (`Linkage::Import` is refused: an import has no body), rewrite the references of each to
/// the module's ids (declaring names no function defines as imports, with the signature of
/// their first use), and define them all. Returns each function's name and id, in order.
///
/// Errors name the function: a name defined twice, a call whose signature differs from the
/// callee's, a `colocated` (near) reference to an import, and whatever the module says.
pub fn define_by_name<M: Module + ?Sized>(
    module: &mut M,
    funcs: Vec<(Linkage, ir::Function)>,
) -> ModuleResult<Vec<(String, FuncId)>> {
    let declared = declare_by_name(module, funcs)?;
    let mut ctx = Context::new();
    let mut ids = Vec::with_capacity(declared.len());
    for (name, id, f) in declared {
        ctx.clear();
        ctx.func = f;
        module.define_function(id, &mut ctx)?;
        ids.push((name, id));
    }
    Ok(ids)
}

/// The first half of `define_by_name`: declare the functions and rewrite their references,
/// returning each function's name, id and rewritten body, ready to define.
pub fn declare_by_name<M: Module + ?Sized>(
    module: &mut M,
    funcs: Vec<(Linkage, ir::Function)>,
) -> ModuleResult<Vec<(String, FuncId, ir::Function)>> {
    let mut ids = Vec::with_capacity(funcs.len());
    // The ids declared by this call: a name already in the module (an import an earlier
    // batch referred to) is defined here once, a name met twice is an error.
    let mut seen: EntitySet<FuncId> = EntitySet::new();
    for (linkage, f) in &funcs {
        let name = func_name(&f.name);
        if *linkage == Linkage::Import {
            return Err(ModuleError::InvalidImportDefinition(name));
        }
        if let Some(FuncOrDataId::Func(id)) = module.get_name(&name) {
            if seen.contains(id) {
                return Err(ModuleError::DuplicateDefinition(name));
            }
        }
        let id = module.declare_function(&name, *linkage, &f.signature)?;
        seen.insert(id);
        ids.push((name, id));
    }
    let mut out = Vec::with_capacity(ids.len());
    for ((name, id), (_, mut f)) in ids.into_iter().zip(funcs) {
        rewrite_references(module, &name, &mut f).map_err(|e| {
            ModuleError::from(crate::module::FunctionError::one(
                id,
                name.clone(),
                e,
                Some(&f),
            ))
        })?;
        f.name = ir::UserFuncName::user(0, id.as_u32());
        out.push((name, id, f));
    }
    Ok(out)
}

/// Rewrite the references of `f` (named `fname`) to `module`'s ids.
pub(crate) fn rewrite_references<M: Module + ?Sized>(
    module: &mut M,
    fname: &str,
    f: &mut ir::Function,
) -> ModuleResult<()> {
    let refs: Vec<ir::FuncRef> = f.dfg.ext_funcs.keys().collect();
    for fr in refs {
        let ext = f.dfg.ext_funcs[fr].clone();
        let Some(name) = reference_name(f, &ext.name) else {
            continue;
        };
        let sig = f.dfg.signatures[ext.signature].clone();
        let id = match module.get_name(&name) {
            Some(FuncOrDataId::Data(_)) => {
                return Err(error(
                    fname,
                    format!("calls or takes the address of {name}, which is a data object"),
                ))
            }
            // Declaring again checks the signature (an import merges into the definition).
            _ => module
                .declare_function(&name, Linkage::Import, &sig)
                .map_err(|e| in_function(fname, e))?,
        };
        if ext.colocated && module.declarations().get_function_decl(id).linkage == Linkage::Import {
            return Err(error(
                fname,
                format!(
                    "refers to {name} as `colocated` (a near reference), but no function of the \
                     module defines it: an import may be anywhere in memory; drop `colocated`"
                ),
            ));
        }
        let r = f.declare_imported_user_function(ir::UserExternalName {
            namespace: 0,
            index: id.as_u32(),
        });
        f.dfg.ext_funcs[fr].name = ir::ExternalName::user(r);
    }
    let gvs: Vec<ir::GlobalValue> = f.global_values.keys().collect();
    for gv in gvs {
        let ir::GlobalValueData::Symbol {
            name: ext,
            colocated,
            tls,
            ..
        } = f.global_values[gv].clone()
        else {
            continue;
        };
        let Some(name) = reference_name(f, &ext) else {
            continue;
        };
        let (namespace, index, import) = match module.get_name(&name) {
            Some(FuncOrDataId::Func(id)) => (
                0,
                id.as_u32(),
                module.declarations().get_function_decl(id).linkage == Linkage::Import,
            ),
            Some(FuncOrDataId::Data(id)) => (
                1,
                id.as_u32(),
                module.declarations().get_data_decl(id).linkage == Linkage::Import,
            ),
            None => {
                let id: DataId = module
                    .declare_data(&name, Linkage::Import, true, tls)
                    .map_err(|e| in_function(fname, e))?;
                (1, id.as_u32(), true)
            }
        };
        if colocated && import {
            return Err(error(
                fname,
                format!(
                    "refers to the symbol {name} as `colocated` (a near reference), but the \
                     module does not define it: an import may be anywhere in memory; drop \
                     `colocated`"
                ),
            ));
        }
        let r = f.declare_imported_user_function(ir::UserExternalName { namespace, index });
        if let ir::GlobalValueData::Symbol { name, .. } = &mut f.global_values[gv] {
            *name = ir::ExternalName::user(r);
        }
    }
    Ok(())
}
