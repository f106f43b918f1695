//! The typed configuration of a [`MergeModule`](super::MergeModule).

use midend::PassKind;

/// How Mergelift treats the addresses of functions the host can see.
///
/// Addresses taken in the IR (`func_addr`, a function symbol's `symbol_value`) or stored in
/// data objects (`DataDescription::write_function_addr`) always stay distinct: a merged
/// function whose address is observed that way keeps a thunk of its own.
///
/// ```
/// use mergelift::{AddressPolicy, MergeConfig};
/// // A host that compares the pointers of exported functions (as a C program may).
/// let config = MergeConfig { address_policy: AddressPolicy::Distinct, ..Default::default() };
/// # let _ = config;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Functions visible outside the module (exported, hidden, preemptible) may share an
    /// address with an equal function, as with a linker's `--icf=all`:
    /// `get_finalized_function` of a merged function gives the survivor's code, and an object
    /// file gets an alias symbol. No merged function costs code. The default: a JIT runtime
    /// calls functions, it rarely compares their pointers.
    #[default]
    Shared,
    /// Every function visible outside the module keeps an address of its own, as with
    /// `--icf=safe`: a merged exported function becomes a thunk (a jump to the survivor); only
    /// local functions lose their code.
    Distinct,
}

/// How many threads a flush may use: for the merge walk of a large module, and for compiling
/// into a `JITModule` (an inner module that takes code as bytes exactly as it would compile
/// it; any other module compiles on the caller's thread). The code, the merges and the errors
/// are the same whatever the number.
///
/// ```
/// use mergelift::{MergeConfig, Threads};
/// // A host with compile threads of its own: Mergelift starts none.
/// let config = MergeConfig { threads: Threads::None, ..Default::default() };
/// assert_eq!(config.threads.get(), 1);
/// assert!(Threads::Count(4).get() == 4);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// Never start a thread: everything runs on the caller's thread. What a host that runs
    /// its own compile threads (one `MergeModule` each, say) should set.
    None,
    /// At most this many threads (0 and 1 mean none), for every flush of two functions or more.
    Count(usize),
    /// The machine's available parallelism (at most 8 threads), for flushes of 1,000
    /// Cranelift instructions or more; a smaller flush (a REPL's one function) compiles on the
    /// caller's thread. The default.
    #[default]
    Available,
}

impl Threads {
    /// The number of threads this setting allows (1 = the caller's only).
    pub fn get(self) -> usize {
        match self {
            Threads::None => 1,
            Threads::Count(n) => n.max(1),
            Threads::Available => {
                std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
            }
        }
    }
}

/// What a [`MergeModule`](super::MergeModule) does with the functions defined in it.
///
/// ```
/// use mergelift::{parse_pass_list, MergeConfig, PassKind, Threads};
/// // The default: `merge` and `merge-similar`, on the machine's cores for large flushes.
/// let default = MergeConfig::default();
/// assert_eq!(default.passes, [PassKind::Merge, PassKind::MergeSimilar]);
/// // Only exact merges, on the caller's thread, passes read from a setting's text.
/// let config = MergeConfig {
///     passes: parse_pass_list("merge").unwrap(),
///     threads: Threads::None,
///     ..Default::default()
/// };
/// # let _ = config;
/// ```
#[derive(Clone, Debug)]
pub struct MergeConfig {
    /// The passes, in order (default: `merge`, `merge-similar`; `lvn` changes many functions,
    /// which must then be lowered, for a few bytes at opt level none: BENCHMARKS.md).
    pub passes: Vec<PassKind>,
    /// Threads for the merge walk and for compiling (default: the machine's, for large
    /// flushes: [`Threads::Available`]). Code is defined in the inner module in the same
    /// order, so the result does not depend on the thread count.
    pub threads: Threads,
    /// Whether functions the host can see may share an address (default: they may).
    pub address_policy: AddressPolicy,
    /// Verify every defined function with Cranelift's verifier at `define_function`, even
    /// when the ISA's `enable_verifier` is off (default: off). With `enable_verifier` on, as
    /// Cranelift's default flags have it, every function is verified at define anyway, as
    /// the plain module's compile at define would: an invalid function is an error there,
    /// and never reaches a flush.
    pub verify_input: bool,
    /// The host may fetch any function it defined, local ones included, as with the plain
    /// module (`get_finalized_function`; default: on). A local function folded into a shared
    /// body by `merge-similar` or `merge-aligned` then keeps a small thunk passing its
    /// constants (or its identifier); the passes' cost models count it. A runtime that never
    /// fetches its `Linkage::Local` functions (only calls them from other functions of the
    /// module) can turn this off: such a
    /// function then has no code at all, and fetching it panics. An object file's `finish`
    /// never needs the thunks (a local symbol cannot be fetched): it folds without them
    /// and gives the member an alias symbol at the shared body.
    pub fetch_locals: bool,
    /// Functions the host marks hot (default: none). `merge-aligned` never merges them: a
    /// merged body branches and selects on which function it runs as, which a hot loop
    /// should not pay. The other passes ignore this. The predicate sees each function's
    /// name as it was declared (`Module::declare_function`).
    pub hot: Option<midend::passes::aligned::HotFunctions>,
    /// Switches for tests and tools ([`DebugOptions`]).
    #[doc(hidden)]
    pub debug: DebugOptions,
}

impl Default for MergeConfig {
    fn default() -> Self {
        MergeConfig {
            passes: vec![PassKind::Merge, PassKind::MergeSimilar],
            threads: Threads::Available,
            address_policy: AddressPolicy::Shared,
            verify_input: false,
            fetch_locals: true,
            hot: None,
            debug: DebugOptions::default(),
        }
    }
}

impl MergeConfig {
    /// The default configuration with these passes.
    pub fn with_passes(passes: &[PassKind]) -> Self {
        MergeConfig {
            passes: passes.to_vec(),
            ..Default::default()
        }
    }

    /// This configuration with the switches for tests and tools `debug`.
    #[doc(hidden)]
    pub fn with_debug(self, debug: DebugOptions) -> Self {
        MergeConfig { debug, ..self }
    }
}

/// Switches that exist to test Mergelift's own rules and to inspect its work (tests, the
/// fuzzer, the tools, the CLI's hidden flags), not for hosts: set them through
/// [`MergeConfig::with_debug`]. The program never depends on them, only what is compiled
/// from what, and what is kept; the code behaves the same whatever they are.
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct DebugOptions {
    /// Compile every function from its lowered LIR. By default a function that no pass
    /// changed is compiled from the Cranelift IR it was defined with (exact, and it costs no
    /// lowering); this switch exists to test that rule.
    pub lower_all: bool,
    /// Lift every function of a flush. By default, when the passes are merging passes only
    /// (`merge`, `merge-similar`) and the flush is the module's first and last (an object
    /// file's `finish`, or a JIT's one `finalize_definitions`), a function whose shape no
    /// other function shares (signature, blocks and opcodes: no pass could merge it)
    /// is compiled from its input without being lifted; on real modules that is most of
    /// the code. The output is the same either way; this switch exists to test that.
    pub lift_all: bool,
    /// Run the LIR verifier after every pass (default: in debug builds).
    pub verify_lir: bool,
    /// Write thunks as machine code (x86-64, non-PIC; default: on). A merged function that
    /// keeps code of its own calls its survivor with its arguments (and, after
    /// `merge-similar`, a few constants); when the survivor takes every argument in a
    /// register, that is a few `mov`s and a jump, written directly instead of compiled by
    /// Cranelift (which costs about as much as a small function). Such thunks are defined
    /// with `define_function_bytes`: they have no `Context`, so
    /// [`MergeModule::on_compiled`](super::MergeModule::on_compiled) does not see them, and
    /// no unwind information (they are never on the stack: the survivor returns to the
    /// thunk's caller). Off, or with `lower_all`: every thunk is compiled by Cranelift.
    pub native_thunks: bool,
    /// Keep the LIR body of every function after it is compiled, for
    /// [`MergeModule::lir`](super::MergeModule::lir) to show (default: off). Compiled code
    /// never changes, and later batches merge into it by a fingerprint kept apart, so by
    /// default a function's LIR body (about 3 KB for a 30-instruction function) is freed
    /// once it is compiled or merged away, and a long-running JIT keeps only the name and
    /// signature of each function besides its fingerprint. (A last batch, `flush_last` or
    /// an object file's `finish`, keeps its bodies until the module is dropped: nothing
    /// merges into it later.)
    pub keep_lir: bool,
    /// Told the name of each stage of a flush as it starts (default: none): `passes` (lift
    /// and the passes), then `compile` (lower, thunks and the compile). For a tool's
    /// progress display; it changes nothing.
    pub on_stage: Option<StageHook>,
}

/// A function [`DebugOptions::on_stage`] calls with a stage's name.
#[doc(hidden)]
#[derive(Clone)]
pub struct StageHook(pub std::sync::Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for StageHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StageHook")
    }
}

impl Default for DebugOptions {
    fn default() -> Self {
        DebugOptions {
            lower_all: false,
            lift_all: false,
            verify_lir: cfg!(debug_assertions),
            native_thunks: true,
            keep_lir: false,
            on_stage: None,
        }
    }
}
