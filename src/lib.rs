//! Mergelift: a mid-end optimizer for Cranelift. It merges functions that are equal (LLVM's
//! MergeFunctions design) or equal up to their constants and callees (one shared body with
//! extra parameters), so that a template-heavy program compiles less code, in less time.
//!
//! # The door: [`MergeModule`]
//!
//! A program that already speaks `cranelift_module::Module` changes one line:
//!
//! ```
//! use cranelift_codegen::ir::{types, AbiParam, InstBuilder};
//! use cranelift_codegen::settings;
//! use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
//! use cranelift_jit::{JITBuilder, JITModule};
//! use cranelift_module::{default_libcall_names, Linkage, Module};
//!
//! let isa = cranelift_native::builder()
//!     .unwrap()
//!     .finish(settings::Flags::new(settings::builder()))
//!     .unwrap();
//! let jit = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
//! // Before: `let mut m = jit;`
//! let mut m = mergelift::MergeModule::new(jit);
//!
//! // Unchanged cranelift-module code: two identical functions.
//! let mut sig = m.make_signature();
//! sig.params.push(AbiParam::new(types::I64));
//! sig.returns.push(AbiParam::new(types::I64));
//! let mut fctx = FunctionBuilderContext::new();
//! let mut ids = Vec::new();
//! for name in ["add1", "inc"] {
//!     let id = m.declare_function(name, Linkage::Export, &sig).unwrap();
//!     let mut ctx = m.make_context();
//!     ctx.func.signature = sig.clone();
//!     let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
//!     let block = b.create_block();
//!     b.append_block_params_for_function_params(block);
//!     b.switch_to_block(block);
//!     let x = b.block_params(block)[0];
//!     let y = b.ins().iadd_imm_s(x, 1);
//!     b.ins().return_(&[y]);
//!     b.seal_all_blocks();
//!     b.finalize(m.target_config());
//!     m.define_function(id, &mut ctx).unwrap();
//!     m.clear_context(&mut ctx);
//!     ids.push(id);
//! }
//! m.finalize_definitions().unwrap();
//!
//! // `inc` merged into `add1`: no code of its own, and it behaves as its own.
//! assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
//! let inc: extern "C" fn(i64) -> i64 =
//!     unsafe { std::mem::transmute(m.get_finalized_function(ids[1])) };
//! assert_eq!(inc(41), 42);
//! ```
//!
//! # Migrating from `JITModule` or `ObjectModule`
//!
//! - **Wrap the module**: `MergeModule::new(module)` or `MergeModule::with_config(module,
//!   config)`. The ISA, the `JITBuilder` (symbols, `symbol_lookup_fn`, memory provider,
//!   libcall names) and the `ObjectBuilder` stay yours. Ids and `declarations()` are the plain
//!   module's: the functions the passes make are Mergelift's own, out of the host's sight. The
//!   change is one line where the program names the module only through `Module`; a struct
//!   field or function parameter of type `JITModule` becomes `MergeModule<JITModule>`.
//! - **Compiling is deferred.** `define_function` checks the function as the plain module's
//!   compile would reject it (Cranelift's verifier, when the ISA's `enable_verifier` is on,
//!   as by default; the declared signature; a second definition) and keeps it; the passes
//!   run and the code is compiled at `finalize_definitions` (JIT) or `finish` (object file),
//!   or at [`MergeModule::flush`] for another inner module. Use [`MergeModule::on_compiled`]
//!   where you read `ctx.compiled_code()` after `define_function` (disassembly, unwind info).
//! - **Errors**: what the plain module reports at declare and define time, `MergeModule`
//!   reports there too, as the same `ModuleError` variant, and a refused define leaves the
//!   module as if it never happened. A function that fails to compile at the flush (a
//!   Cranelift limit, a Cranelift panic) fails alone: every other function of the batch is
//!   compiled, and the flush returns `ModuleError::Backend` holding a [`FunctionError`] that
//!   names every failed function (id, name, and the error the plain module would have given
//!   at define). The failed functions are undefined again and can be defined anew; the module
//!   goes on. Where a failed function was a merge survivor or a shared body, the functions
//!   merged into it get code of their own.
//! - **Compile time**: with the ISA's `enable_verifier` on, Cranelift's verifier runs at
//!   define, as in the plain module; a function no pass changed is then compiled with it off
//!   and its compiled IR checked once (two runs where the plain compile makes four at opt
//!   level none). With it off nothing is verified. A function is lifted to Mergelift's IR
//!   only when a merge could involve it (its fingerprint or its shape matches another's);
//!   any other is compiled from its own Cranelift IR.
//! - **Batches**: functions defined after a `finalize_definitions` are merged with each other
//!   and against what was compiled before; compiled code never changes. One equal to compiled
//!   code gets that code and is not compiled at all, also where its callees merged in earlier
//!   batches (callees compare by their survivors). One alike a `merge-similar` family whose
//!   shared body is compiled joins it (a thunk passing its constants and callees). One alike a
//!   function an earlier batch compiled on its own may start a family with it: that function
//!   keeps its code, and the family's body is made of the new one, where the cost model says
//!   the family pays once one more member joins (a bet that more alike functions come). What
//!   order costs: the first function of a family compiled alone keeps its code, and a family
//!   started from few members shares only what differed among them (a later function that
//!   differs elsewhere starts another). `mergelift size --batch N --ceiling` measures a module
//!   against the most a batch size allows. Calls from new code into old code work as before,
//!   and a function that compiled code called before it was defined keeps code under its
//!   name when it merges.
//! - **What Mergelift cannot represent** (an instruction, a type or a construct its IR lacks,
//!   such as a patchable call or a dynamic stack slot) is compiled as it came, never merged,
//!   never an error: [`MergeModule::passed_through`] lists such functions with the reason.
//! - **Object files**: `finish` returns a `Result` (the compiles happen there); a merged
//!   function is an alias symbol at its survivor's code. `finish(self)` consumes the module:
//!   read [`MergeModule::merges`] and [`MergeModule::stats`] before it.
//! - **What the host sees**: every function defined and finalized can be fetched, whatever
//!   its linkage, and behaves as its own. By default ([`AddressPolicy::Shared`]) a merged
//!   function the host can see may share its survivor's address; [`AddressPolicy::Distinct`]
//!   keeps a thunk with an address of its own for every function visible outside the module.
//!   Addresses taken in IR always stay distinct, also when a later batch takes the address of
//!   a function an earlier batch merged away: the later flush gives it a thunk to its
//!   survivor (stats counter `late_thunks`), and so does the address stored in data
//!   (`define_data`) of a function merged away before. A local function folded into a shared
//!   body by `merge-similar` keeps a small thunk, for the host to fetch
//!   ([`MergeConfig::fetch_locals`] turns that off for a runtime that never fetches its local
//!   functions).
//! - **Configuration** ([`MergeConfig`]): the passes as values ([`PassKind`]; default
//!   `merge`, `merge-similar`; `merge-aligned` is opt-in), threads ([`Threads`]; by default
//!   a large flush compiles on the machine's cores, and a host that runs its own compile
//!   threads sets `Threads::None`), the address policy, whether local functions stay fetchable, and the hot functions
//!   `merge-aligned` must leave alone ([`MergeConfig::hot`]).
//! - **Reports**: [`MergeModule::merged_into`] (a function the host declared;
//!   [`MergeModule::in_shared_body`] for one merged into a body a pass made),
//!   [`MergeModule::merges`],
//!   [`MergeModule::stats`] (typed counters: [`Counter`]), [`MergeModule::last_flush`] (what
//!   one flush did), [`MergeModule::code_bytes`], [`MergeModule::passed_through`].
//! - **Memory**: besides the inner module's, a compiled function costs about 1.2 KB (its
//!   name, signature and the fingerprint later batches merge by); its LIR body is freed once
//!   it is compiled or merged away.
//! - **Logging**: Mergelift writes `log` events (target `mergelift`): at
//!   `debug`, each merge decision and a summary of each flush; at `warn`, each function
//!   passed through unmerged. [`MergeModule::last_flush`] gives the same as a value
//!   ([`FlushReport`]).
//!
//! # Differences from the plain module
//!
//! Every behaviour in which `MergeModule<M>` differs from `M` itself, and why:
//!
//! | what | `JITModule` / `ObjectModule` | `MergeModule` | why |
//! |---|---|---|---|
//! | when code is compiled | in `define_function` | at `finalize_definitions`, `finish` or `flush` | the passes merge a whole batch |
//! | `ctx` after `define_function` | the function and its compiled code | an empty function, no compiled code ([`MergeModule::on_compiled`] shows the code) | the function is kept until the flush |
//! | an error Cranelift finds only when compiling (an implementation limit, a feature the ISA lacks, a panic) | `Err` from `define_function`, typed | `Err(Backend(FunctionError))` from the flush, holding that typed error; the rest of the batch compiled | compiling is deferred |
//! | a function merged away whose own compile alone would fail (a Cranelift implementation limit its survivor does not reach) | `Err` at define | no error: it uses its survivor's code | a merged function is never compiled; Cranelift's verifier still runs on it at define, and frames too large for Cranelift are passed through, never merged |
//! | finalizing while compiled code calls a function that failed | cranelift-jit panics ("can't resolve symbol") | an error naming it; nothing is finalized until it is defined again | a drop-in never panics where it can say why |
//! | a body whose signature differs from its declaration | `JITModule` compiles it | `IncompatibleSignature` at define | callers would call it with the declared signature |
//! | a `colocated` reference to an imported function or data object | undefined at link time | `Backend(FunctionError)` at define | a JIT places imports anywhere in memory |
//! | a verifier panic (Cranelift's verifier panics on some malformed input) | panics | `Backend(FunctionError)` at define | |
//! | addresses of exported, hidden and preemptible functions | distinct | by default ([`AddressPolicy::Shared`], like a linker's `--icf=all`) the address the host fetches of a merged one (`get_finalized_function`, `get_address`, an object file's symbol) may be its survivor's; one taken in IR or stored in data never is (a thunk, made late if need be); [`AddressPolicy::Distinct`] keeps them all apart | a merged function costs no code |
//! | `get_finalized_function` of a merged function | its own code | its survivor's code, or its own thunk; never code of another signature | same |
//! | object file: a merged function | its own code, its own unwind entry (FDE) | an alias symbol at its survivor's code, with its survivor's size, sharing its unwind entry; with per-function sections its own `.text.<name>` stays, empty | `object` cannot remove a section once made |
//! | `finish` | infallible | returns `ModuleResult`: a function that fails to compile there is an error naming it | the compiles happen in `finish` |
//! | object file: an anonymous function declared after a shared body | local symbol `.LfnN`, N its id | local symbol `.LfnM`, M its id in the inner module | the inner module numbers the shared bodies too; the symbol is local, no linker sees its name |
//! | [`MergeModule::on_compiled`] | — (the plain module has no hook) | sees the host's functions and Cranelift-compiled thunks; not the shared bodies, nor x86-64 thunks written as machine code | shared bodies have no id of the host's; native thunks have no `Context` |
//! | the inner module ([`MergeModule::inner`], [`MergeModule::into_inner`]) | — | ids equal the host's until the first shared body, then [`MergeModule::inner_id`] (`into_inner` returns that map with the module); `into_inner` gives each merged function a thunk, so the inner module resolves it | the inner module holds Mergelift's functions too |
//! | a fault in Mergelift's own passes | — | that flush fails naming every function of the batch, and the module refuses later flushes | its IR can no longer be trusted |
//!
//! # Targets
//!
//! `MergeModule` wraps a module of any Cranelift backend: x86-64, aarch64 (Linux and macOS),
//! riscv64 and s390x. LIR and the passes do not depend on the target; the lift and lower keep
//! calling conventions (`apple_aarch64`, `tail`, `winch`, ...) and argument extensions, i128
//! and vector arguments, stack-slot alignment, the frame pointer and return address, atomics
//! and fences, and `colocated` references as they came. What differs:
//!
//! - **Thunks.** On x86-64 (not PIC) a thunk whose survivor takes every argument in a
//!   register is written as machine code, a few `mov`s and a jump (the
//!   [`MergeModule::on_compiled`] hook does not see these); on every other target, and
//!   otherwise, a thunk is a small function compiled by Cranelift: a call of its survivor, with a frame. On the wasm
//!   corpus a thunk is 45 bytes on aarch64, 32 compiled by Cranelift on x86-64.
//! - **Tail calls.** Merging makes `return_call` thunks where the ISA compiles them: on
//!   x86-64 only with `preserve_frame_pointers`, on the others always.
//!
//! How each target is tested: x86-64 natively (the JIT); aarch64, riscv64 and s390x as
//! object files linked with a C harness by Debian's cross gcc and run under qemu-user
//! (Cranelift's run tests, the differential fuzzer, and the object-file conformance tests),
//! each plainly and through the passes (README: Targets).
//!
//! # What this crate exports, by user
//!
//! Underneath are two crates: `mergelift-midend`, the optimizer (LIR and the passes, with
//! no dependency on Cranelift's code generator), and `mergelift-jit-driver`, the bridge
//! (lift to LIR, lower back, the module wrapper). This crate exports what each kind of user
//! needs of them:
//!
//! - **A JIT host** (this page) wraps its `JITModule`: [`MergeModule`], configured by
//!   [`MergeConfig`] ([`PassKind`] and [`parse_pass_list`] for the passes, [`Threads`],
//!   [`AddressPolicy`], [`HotFunctions`]); it reads [`FunctionError`] and
//!   [`FailedFunction`] from a failed flush, and [`MergeKind`], [`MergedBy`],
//!   [`FlushReport`], [`Stats`] and [`Counter`] from the reports.
//! - **An object-file user** needs the same, with the feature `object` (`MergeModule<ObjectModule>`).
//! - **A pass author** finds what a pass needs in [`passes`]: the [`Pass`](passes::Pass)
//!   trait over [`passes::lir`], the [`PassManager`](passes::PassManager) and the
//!   [`PassState`](passes::PassState) it shares, and the LIR verifier.
//! - **Tools** (tests, benchmarks, the `mergelift` command in the crate `mergelift-cli`)
//!   find in [`tools`] how to compile functions named as in a `.clif` file, the host's ISA,
//!   and lifting and lowering without a module.

#![deny(missing_docs)]

// A JIT host and an object-file user.
pub use jit_driver::{
    AddressPolicy, FailedFunction, FlushReport, FunctionError, MergeConfig, MergeModule, Threads,
};
pub use midend::passes::aligned::HotFunctions;
pub use midend::state::{MergeKind, MergedBy};
pub use midend::{parse_pass_list, Counter, PassKind, Stats};

pub mod passes {
    //! What a pass author needs: the [`Pass`] trait, the LIR it works on ([`lir`]: its names
    //! are LIR's own, apart from Cranelift's types of the same names), the [`PassManager`] that
    //! runs passes, the [`PassState`] they share, and the LIR verifier.
    //!
    //! ```
    //! use mergelift::passes::lir::{parse_module, Module};
    //! use mergelift::passes::{Error, Pass, PassManager, PassState};
    //! use mergelift::Stats;
    //!
    //! /// Counts the instructions of the functions passes may change.
    //! struct CountInsts;
    //!
    //! impl Pass for CountInsts {
    //!     fn name(&self) -> &'static str {
    //!         "count-insts"
    //!     }
    //!     fn run(&mut self, m: &mut Module, state: &mut PassState, stats: &mut Stats) -> Result<(), Error> {
    //!         let n: usize = state.open_functions(m).map(|(_, f)| f.inst_count()).sum();
    //!         stats.add_custom("count-insts.insts", n as u64);
    //!         Ok(())
    //!     }
    //! }
    //!
    //! let text = "function @f(i64) -> i64 system_v export {\nbb0:\n    %vr0 = copy.i64 arg0\n    ret %vr0\n}\n";
    //! let mut m = parse_module(text).unwrap();
    //! let mut pm = PassManager::from_names("merge").unwrap();
    //! pm.add(Box::new(CountInsts));
    //! let (mut state, mut stats) = (PassState::default(), Stats::default());
    //! pm.run(&mut m, &mut state, &mut stats).unwrap();
    //! assert_eq!(stats.custom("count-insts.insts"), Some(2));
    //! ```

    pub use midend::lir;
    pub use midend::verifier::verify_function;
    pub use midend::{Error, Pass, PassManager, PassOptions, PassState};
}

pub mod tools {
    //! What the tools use (tests, benchmarks, the generator, the `mergelift` command): compile
    //! functions named as in a `.clif` file ([`declare_by_name`], [`define_by_name`]) for the
    //! host ([`host_isa`], [`OptLevel`], `jit_builder`), and lift and lower without a module
    //! ([`lift_functions`], [`lower_function`], [`OriginalNames`]). A JIT host needs none of it.

    #[cfg(feature = "jit")]
    pub use jit_driver::jit_builder;
    #[doc(hidden)]
    pub use jit_driver::DebugOptions;
    pub use jit_driver::{
        declare_by_name, define_by_name, host_isa, lift_functions, lower_function, OptLevel,
        OriginalNames,
    };
}
