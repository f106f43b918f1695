//! `merge-aligned`: one body for two or more functions whose instructions differ, not only
//! their constants and callees. It runs after `merge` and `merge-similar`, on what they left.
//!
//! What it takes from the research on merging by sequence alignment, and what it leaves:
//! - **Candidates (F3M, CGO 2022).** A fingerprint per function: MinHash over shingles of
//!   three (opcode, type) pairs in layout order, four hash functions. Functions meet in LSH
//!   buckets keyed by the CFG skeleton (below) and one MinHash value each, so only functions
//!   that share a skeleton and a band are ever compared. Each function looks at the last
//!   `2 × AlignedOptions::neighbours` entries of each of its buckets (earlier functions that
//!   found no partner when they came, each standing for the group it has since got) and
//!   aligns with at most `AlignedOptions::tries` of them, nearest first: most MinHash values
//!   in common, then closest in size (in generated code most neighbours share all four
//!   values). Before aligning, a similarity screen (F3M's threshold): the two functions'
//!   instructions as tokens that include constants and the opcodes that define their
//!   operands, counted in 64 buckets, must have `AlignedOptions::min_similarity` in common;
//!   in generated code, where instances of one template differ in their constants, it turns
//!   a third of the alignments away, at the cost of one pass over each function compared.
//!   After a neighbour that is too dissimilar or whose alignment the estimate of the saving
//!   turns away (below), no farther one is tried (the second search tries the next one after
//!   a dissimilar one): on the wasm corpus that changes no merge.
//! - **Alignment by block pairs (HyFM, LCTES 2021).** Two functions are aligned only if their
//!   CFGs are the same in layout order (the *skeleton*: signature, per block the number and
//!   types of phis, the terminator's opcode and successors by position). Block `i` is aligned
//!   with block `i`: Needleman–Wunsch over the instructions between the phis and the
//!   terminator (two instructions match when they could be one instruction with `select`s on
//!   its value operands), or, for blocks whose table would exceed `AlignedOptions::max_cells`,
//!   a walk down the diagonal when both have the same length.
//! - **Functions whose CFGs differ (HyFM's block pairing, SalSSA's SSA repair).** The
//!   candidates still alone after that search meet again in LSH buckets keyed by their
//!   signature instead of their skeleton, and pair (never more than two). Their blocks are
//!   paired in layout order by Needleman–Wunsch (`align_blocks`): two blocks can pair when
//!   their phis' types and their terminators' opcode and number of targets agree, scored by
//!   the opcodes their bodies share; the entries always pair. A paired block's bodies are
//!   aligned as above; an unpaired block stays its member's own block of the merged body.
//!   Unlike SalSSA, no alignment across block boundaries: a block is paired whole or not.
//! - **Groups (multiple function merging, TACO 2025).** A function whose best neighbour is in a
//!   group already is aligned with the group's alignment (progressive alignment: the table's
//!   columns hold one instruction or none per member, and a column matches by its first
//!   instruction) and joins the group when the group then saves more than without it, and more
//!   than the function would with any other neighbour; up to `AlignedOptions::max_group`
//!   members. The greedy choice is one per function, in module order: no regrouping.
//! - **Code generation (SalSSA, PLDI 2020, simplified).** The merged body takes the members'
//!   parameters and a last `i32` parameter, the function identifier (`k` for member `k`).
//!   A full column is emitted once; an operand that differs (register or constant) becomes a
//!   `select` on the identifier (in a group of three or more, one per member that differs from
//!   the first, on `id == k` computed once in the entry block). A maximal run of other columns
//!   becomes a diamond: branches on the identifier to a block of each member's part of the run
//!   (a member with none goes straight on), then a join block where each value the run
//!   defines and that is used after it passes through a phi (with a zero from the other
//!   members, which never read it). Phi sources that differ become `select`s at the end of
//!   the predecessor. Memory operations keep their order on each side: an alignment never
//!   reorders, and each side's run keeps its own order. Where the CFGs differ, a paired
//!   block whose members branch to different blocks of the body ends in a branch on the
//!   identifier to a block of each member's own terminator, and a value read where its
//!   definition no longer dominates the read (a member's own block, or another member's
//!   path around it) is carried through phis at the iterated dominance frontier of its
//!   definition, zero on the paths that never define it (`Codegen::repair`).
//! - **Callers.** A local member whose address nothing observes is folded away, as
//!   `merge-similar` folds its members: its direct calls call the merged body with the
//!   member's identifier as an extra argument (`PassState::call_rewrites`), and it has no code
//!   of its own, when those extra arguments cost no more than a thunk. Every other member
//!   becomes a thunk with its own name and signature that calls the merged body with its
//!   identifier. A recursive call of a member to itself calls the merged body directly,
//!   passing the identifier on. Preemptible, frozen and hot functions
//!   (`AlignedOptions::hot`) are never merged; functions with opaque instructions or
//!   exception handling (`try_call`, `exn_handler_addr`) are left alone, and two functions
//!   merge only if their global values, alias regions and stack limits are the same (the
//!   body keeps the first one's tables).
//! - **Profitability.** The byte cost model of `merge-similar` (`CostModel`): the merged
//!   body's instructions (selects, branches and phis counted) and a thunk with one extra
//!   argument per member (a folded member's call sites cost no more), against the members'
//!   bodies; a select costs `AlignedOptions::select_extra` bytes more than an average
//!   instruction, an edge into a phi of the SSA repair `AlignedOptions::repair_edge`
//!   bytes, and a diamond (or branch to each member's terminator) in a block of a loop
//!   costs `AlignedOptions::loop_branch` bytes more, for the branch run on every iteration.
//!   Most alignments save nothing. In tiers, as HyFM's: the similarity screen turns most
//!   dissimilar pairs away before they are aligned, and an upper bound of the saving,
//!   computed from the alignment without building the body (`estimate`: it counts the
//!   selects the aligned instructions' operands need), most of the rest before their body
//!   is built.
//!
//! **Bounds.** Each search looks at `4 bands × 2 × neighbours` bucket entries and aligns at
//! most `tries` times per function; a function's tokens are counted once, in one pass over
//! its instructions, and comparing two costs 64 steps; an alignment costs at most
//! `max_cells` per block pair (one new member against the group's columns) and, for CFGs
//! that differ, `max_cells` for the pairing of blocks; code generation is linear in the
//! members' instructions (at most `max_group` of them), and the SSA repair costs the body's
//! size per value it carries; only functions of at most `max_insts` instructions take part.
//! The pass is two passes over the functions: no iteration until nothing changes.

mod align;
mod codegen;
mod estimate;
mod install;
mod repair;
mod search;

use super::fold::{rewrite_calls_of_folded, CostModel};
use crate::hash::finish;
use crate::lir::*;
use crate::state::*;
use install::install;
use search::{eligible, find_groups, minhash, mix, skeleton, SymbolUses, Tokens};
use std::sync::Arc;

/// The functions a host marks hot, by name: `merge-aligned` never merges them, so that they
/// run without branches or selects on a function identifier.
#[derive(Clone)]
pub struct HotFunctions(Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl HotFunctions {
    /// The functions for which `is_hot` holds.
    pub fn new(is_hot: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        HotFunctions(Arc::new(is_hot))
    }
    /// The functions named in `names`.
    pub fn named<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        let set: std::collections::HashSet<String> = names.into_iter().map(Into::into).collect();
        HotFunctions::new(move |n| set.contains(n))
    }
    /// Whether the function named `name` is hot.
    pub fn contains(&self, name: &str) -> bool {
        (self.0)(name)
    }
}

impl core::fmt::Debug for HotFunctions {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HotFunctions(..)")
    }
}

/// Options of the pass.
#[derive(Clone, Debug)]
pub struct AlignedOptions {
    /// The byte costs the pass weighs a merge's saving against.
    pub cost: CostModel,
    /// Bytes charged for each branch on the identifier inside a loop.
    pub loop_branch: f64,
    /// Bytes a `select` on the identifier costs beyond an average instruction: it keeps the
    /// identifier (or a flag of it) alive across the body, and at opt level none reloads it.
    /// Default 20; lower values merge groups whose selects make the code larger.
    pub select_extra: f64,
    /// Functions larger than this (in instructions) are left alone.
    pub max_insts: usize,
    /// The largest alignment table for one block (cells): longer blocks are aligned
    /// position by position when their lengths are equal, else the function does not join.
    pub max_cells: usize,
    /// Bucket entries looked at per bucket: twice this many (earlier functions, each for its
    /// group, if it has one).
    pub neighbours: usize,
    /// Alignments tried per function, nearest neighbour first; in the first search, none
    /// after a neighbour the similarity screen or the saving's estimate turns away.
    pub tries: usize,
    /// The most members a group may have.
    pub max_group: usize,
    /// Bytes charged for each edge into a phi that carries a member's value around blocks
    /// of the other member (a move on the edge, and at opt level none a spill): two
    /// average instructions. Default 9; lower values merge functions whose CFGs differ
    /// where the carried values make the code larger.
    pub repair_edge: f64,
    /// Also merge pairs of functions whose CFGs differ (a block one has and the other
    /// lacks, a branch elsewhere): functions the search for equal CFGs left alone.
    pub differing_cfgs: bool,
    /// MinHash values (of four) two functions must share to be aligned: an estimate of the
    /// share of their instruction shingles they have in common.
    pub min_common: usize,
    /// The least similarity of two functions' instructions for them to be aligned: the
    /// share of their instructions' tokens (opcode and type, and per operand the opcode that
    /// defines a register or a constant's value) they have in common, counted by bucket.
    /// Below it, too many constants and operands differ to pay for their selects, so the
    /// pair is not aligned at all. Default 0.55. A higher value makes the pass faster and
    /// saves a little less; 0 turns the screen off.
    pub min_similarity: f64,
    /// Functions the host marks hot: never merged by this pass.
    pub hot: Option<HotFunctions>,
    /// Local functions can be reached by name (`PassOptions::locals_named`): a member keeps
    /// its thunk, as an exported one does.
    pub locals_named: bool,
}

impl Default for AlignedOptions {
    fn default() -> Self {
        AlignedOptions {
            cost: CostModel::default(),
            loop_branch: 8.0,
            select_extra: 20.0,
            max_insts: 2000,
            max_cells: 128 * 128,
            neighbours: 4,
            tries: 2,
            max_group: 4,
            repair_edge: 9.0,
            differing_cfgs: true,
            min_common: 2,
            min_similarity: 0.55,
            hot: None,
            locals_named: false,
        }
    }
}

/// What the pass did.
#[derive(Clone, Debug, Default)]
pub struct AlignedReport {
    /// Functions merged (each now a thunk of a merged body, or folded).
    pub merged: usize,
    /// Of those, members folded away: local functions whose address nothing observes, whose
    /// callers now call the merged body with the member's identifier (no thunk).
    pub folded: usize,
    /// Direct calls rewritten to call a merged body (of members folded by this run or an
    /// earlier batch).
    pub callers_rewritten: usize,
    /// Merged bodies made.
    pub groups: usize,
    /// Of those, bodies of three or more members.
    pub groups_of_three_or_more: usize,
    /// Of those, bodies with at least one unmatched instruction.
    pub with_unmatched_runs: usize,
    /// Of those, bodies of members whose CFGs differ: with blocks of one member only.
    pub with_extra_blocks: usize,
    /// Diamonds made: unmatched runs with a memory access, a call or a possible trap, in
    /// blocks of their own that branch on the identifier.
    pub diamonds: usize,
    /// Bytes saved, as the cost model estimates them.
    pub bytes_saved: u64,
    /// Functions that took part in the search.
    pub candidates: usize,
    /// Alignments tried (a pair, or a group and one function more), counting those turned
    /// away before aligning (tables, similarity).
    pub aligned: usize,
    /// Alignments that would save too little: functions too dissimilar, no more than the
    /// group saves without the function, or, for functions whose CFGs differ, too few
    /// shared instructions (`Rejections`: dissimilar, estimate, saving, share).
    pub unprofitable: usize,
    /// Alignments that could not be turned into one body, and bodies that failed
    /// verification (`Rejections`: tables, blocks, long block, codegen).
    pub not_alignable: usize,
    /// The rejections (`unprofitable` and `not_alignable`) by reason.
    pub rejected: Rejections,
    /// Functions left alone because the host marks them hot.
    pub hot: usize,
    /// Functions left alone for what they hold (opaque instructions, exception tables, a
    /// register defined twice or read before its definition in layout order), or for their
    /// size.
    pub ineligible: usize,
}

/// Why alignments were rejected, by reason (`AlignedReport::rejected`).
#[derive(Clone, Debug, Default)]
pub struct Rejections {
    /// Not alignable: the functions' signatures, alias regions, global values or stack
    /// limits differ (the merged body would need both tables).
    pub tables: usize,
    /// Not alignable: functions whose CFGs differ and whose blocks cannot be paired (their
    /// entry blocks cannot be one block: other phis or another terminator; or the
    /// pairing's table would exceed `AlignedOptions::max_cells`).
    pub blocks: usize,
    /// Not alignable: a block too long to align (`AlignedOptions::max_cells`) whose length
    /// differs from the other's.
    pub long_block: usize,
    /// Not alignable: code generation gave up (a value that cannot be carried around
    /// another member's instructions, a column that does not match after all), or the
    /// body of a group the search made failed verification.
    pub codegen: usize,
    /// Unprofitable: functions whose CFGs differ that share less than 60% of the larger
    /// one's instructions.
    pub share: usize,
    /// Unprofitable: the most the merge could save, estimated from the alignment before
    /// the body is built (for functions whose CFGs differ, first from what their paired
    /// blocks could share), is no more than what is saved already.
    pub estimate: usize,
    /// Unprofitable: the body built saves no more than what is saved already.
    pub saving: usize,
    /// Unprofitable, before aligning: the functions' instructions have too little in common
    /// (`AlignedOptions::min_similarity`).
    pub dissimilar: usize,
}

impl AlignedReport {
    /// Add the report's counters to `stats`.
    pub(crate) fn record(&self, stats: &mut crate::pass::Stats) {
        stats.add(crate::Counter::MergedAligned, self.merged as u64);
        stats.add(crate::Counter::AlignedFolded, self.folded as u64);
        stats.add(
            crate::Counter::AlignedCallersRewritten,
            self.callers_rewritten as u64,
        );
        stats.add(crate::Counter::AlignedGroups, self.groups as u64);
        stats.add(
            crate::Counter::AlignedGroups3Plus,
            self.groups_of_three_or_more as u64,
        );
        stats.add(
            crate::Counter::AlignedWithUnmatchedRuns,
            self.with_unmatched_runs as u64,
        );
        stats.add(
            crate::Counter::AlignedWithExtraBlocks,
            self.with_extra_blocks as u64,
        );
        stats.add(crate::Counter::AlignedDiamonds, self.diamonds as u64);
        stats.add(crate::Counter::AlignedBytesSaved, self.bytes_saved);
        stats.add(crate::Counter::AlignedCandidates, self.candidates as u64);
        stats.add(crate::Counter::AlignedAligned, self.aligned as u64);
        stats.add(
            crate::Counter::AlignedUnprofitable,
            self.unprofitable as u64,
        );
        stats.add(
            crate::Counter::AlignedNotAlignable,
            self.not_alignable as u64,
        );
        let why = &self.rejected;
        for (counter, n) in [
            (crate::Counter::AlignedRejectedTables, why.tables),
            (crate::Counter::AlignedRejectedBlocks, why.blocks),
            (crate::Counter::AlignedRejectedLongBlock, why.long_block),
            (crate::Counter::AlignedRejectedCodegen, why.codegen),
            (crate::Counter::AlignedRejectedShare, why.share),
            (crate::Counter::AlignedRejectedEstimate, why.estimate),
            (crate::Counter::AlignedRejectedSaving, why.saving),
            (crate::Counter::AlignedRejectedDissimilar, why.dissimilar),
        ] {
            stats.add(counter, n as u64);
        }
        stats.add(crate::Counter::AlignedHot, self.hot as u64);
        stats.add(crate::Counter::AlignedIneligible, self.ineligible as u64);
    }

    fn reject(&mut self, why: Rejected) {
        let r = &mut self.rejected;
        let (count, unprofitable) = match why {
            Rejected::Tables => (&mut r.tables, false),
            Rejected::Blocks => (&mut r.blocks, false),
            Rejected::LongBlock => (&mut r.long_block, false),
            Rejected::Codegen => (&mut r.codegen, false),
            Rejected::Share => (&mut r.share, true),
            Rejected::Estimate => (&mut r.estimate, true),
            Rejected::Saving => (&mut r.saving, true),
            Rejected::Dissimilar => (&mut r.dissimilar, true),
        };
        *count += 1;
        if unprofitable {
            self.unprofitable += 1;
        } else {
            self.not_alignable += 1;
        }
    }
}

/// The `merge-aligned` pass.
#[derive(Default)]
pub struct MergeAligned {
    /// The pass's options.
    pub opts: AlignedOptions,
}

impl crate::pass::Pass for MergeAligned {
    fn name(&self) -> &'static str {
        "merge-aligned"
    }
    fn run(
        &mut self,
        m: &mut Module,
        ps: &mut PassState,
        stats: &mut crate::pass::Stats,
    ) -> Result<(), crate::error::Error> {
        merge_aligned(m, ps, &self.opts).record(stats);
        Ok(())
    }
}

/// Number of MinHash functions (and LSH bands of one value each).
const BANDS: usize = 4;

/// One function taking part: its skeleton and MinHash values.
struct Candidate {
    f: FuncId,
    /// The signature's hash (functions whose CFGs differ meet by it).
    sig: u64,
    skeleton: u64,
    /// The skeleton's words (`skeleton`), to confirm equal hashes.
    skeleton_words: Box<[u64]>,
    minhash: [u64; BANDS],
    /// Its number of instructions.
    size: u32,
    /// Its instructions' tokens, counted by bucket (`Tokens`), once a search needs them.
    tokens: std::cell::OnceCell<Tokens>,
}

/// Run `merge-aligned` over the open functions of `m`.
pub fn merge_aligned(m: &mut Module, ps: &mut PassState, opts: &AlignedOptions) -> AlignedReport {
    let mut report = AlignedReport::default();
    let mut cands: Vec<Candidate> = Vec::new();
    for id in ps.open_function_ids(m) {
        let f = &m.functions[id];
        if !eligible(f, opts) {
            report.ineligible += (f.inst_count() >= 6) as usize;
            continue;
        }
        if opts.hot.as_ref().is_some_and(|hot| hot.contains(&f.name)) {
            report.hot += 1;
            continue;
        }
        let mut skeleton_words = Vec::new();
        if skeleton(f, |w| skeleton_words.push(w)).is_none() {
            continue;
        }
        let skeleton = finish(skeleton_words.iter().fold(0, |h, &w| mix(h, w)));
        let mut sig = 0;
        for w in core::iter::once(f.sig.call_conv as u64)
            .chain(f.sig.params.iter().map(|p| p.ty.raw() as u64))
            .chain(core::iter::once(u64::MAX))
            .chain(f.sig.returns.iter().map(|p| p.ty.raw() as u64))
        {
            sig = mix(sig, w);
        }
        cands.push(Candidate {
            f: id,
            sig,
            skeleton,
            skeleton_words: skeleton_words.into(),
            minhash: minhash(f),
            size: f.inst_count() as u32,
            tokens: std::cell::OnceCell::new(),
        });
    }
    report.candidates = cands.len();
    let uses = if cands.len() >= 2 {
        SymbolUses::of(m, ps)
    } else {
        SymbolUses::default()
    };
    let groups = find_groups(m, &cands, opts, &mut report);
    for g in groups {
        let (n, unmatched, diamonds, own_blocks) = (
            g.members.len(),
            g.aligned.merged.unmatched,
            g.aligned.merged.diamonds,
            g.aligned.merged.own_blocks,
        );
        let saving = g.aligned.saving;
        let Some(folded) = install(m, ps, opts, &uses, &g.members, g.aligned.merged) else {
            report.reject(Rejected::Codegen);
            continue;
        };
        report.folded += folded;
        report.diamonds += diamonds;
        report.groups += 1;
        report.groups_of_three_or_more += (n >= 3) as usize;
        report.merged += n;
        report.with_unmatched_runs += (unmatched > 0 || own_blocks > 0) as usize;
        report.with_extra_blocks += (own_blocks > 0) as usize;
        report.bytes_saved += saving as u64;
    }
    report.callers_rewritten = rewrite_calls_of_folded(m, ps);
    report
}

/// Why a group was not merged.
#[derive(Clone, Copy)]
enum Rejected {
    /// The members' signatures, alias regions, global values or stack limits differ.
    Tables,
    /// Functions whose CFGs differ: their blocks cannot be paired (the entry blocks cannot
    /// be one block, or the pairing's table would be too large).
    Blocks,
    /// A block too long to align whose lengths differ.
    LongBlock,
    /// Functions whose CFGs differ: they share less than `MIN_SHARED_DIFFERING_CFGS`.
    Share,
    /// The upper bound of the saving (`estimate`, or the shared instructions of functions
    /// whose CFGs differ) is no more than what is saved already.
    Estimate,
    /// The body built saves no more than what is saved already.
    Saving,
    /// The functions' instructions have too little in common (`Tokens::similarity`).
    Dissimilar,
    /// Code generation gave up: a value that cannot be carried around another member's
    /// instructions, or a column that does not match after all; or the body failed
    /// verification.
    Codegen,
}
