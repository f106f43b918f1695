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

use super::exact::make_thunk_with;
use super::similar::{fresh_name, rewrite_calls_of_folded, CostModel};
use crate::analysis::cfg::Cfg;
use crate::analysis::domtree::DomTree;
use crate::hash::{finish, HashMap, HashSet};
use crate::lir::*;
use crate::state::*;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::EntityRef;
use smallvec::SmallVec;
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
    /// 8 to 20 give the least code on the wasm corpus and the `templates` example, 20 on
    /// generated modules too; 0 merges groups that make the code larger.
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
    /// average instructions. Below that, merges of functions whose CFGs differ made the
    /// wasm corpus's code larger.
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
    /// Below it, too many constants and operands differ to pay for their selects: 0.6 would
    /// merge the same on the wasm corpus and one function fewer of 1,272 on a generated
    /// 100k module, and a third of a generated module's alignments fall below 0.55. 0 turns
    /// the screen off; 0.65 takes a fifth off the pass on generated modules, for a few
    /// hundred bytes less saved.
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
        let r = merge_aligned(m, ps, &self.opts);
        stats.add("merged_aligned", r.merged as u64);
        stats.add("aligned.folded", r.folded as u64);
        stats.add("aligned.callers_rewritten", r.callers_rewritten as u64);
        stats.add("aligned.groups", r.groups as u64);
        stats.add("aligned.groups_3plus", r.groups_of_three_or_more as u64);
        stats.add("aligned.with_unmatched_runs", r.with_unmatched_runs as u64);
        stats.add("aligned.with_extra_blocks", r.with_extra_blocks as u64);
        stats.add("aligned.diamonds", r.diamonds as u64);
        stats.add("aligned.bytes_saved", r.bytes_saved);
        stats.add("aligned.candidates", r.candidates as u64);
        stats.add("aligned.aligned", r.aligned as u64);
        stats.add("aligned.unprofitable", r.unprofitable as u64);
        stats.add("aligned.not_alignable", r.not_alignable as u64);
        let why = &r.rejected;
        for (reason, n) in [
            ("tables", why.tables),
            ("blocks", why.blocks),
            ("long_block", why.long_block),
            ("codegen", why.codegen),
            ("share", why.share),
            ("estimate", why.estimate),
            ("saving", why.saving),
            ("dissimilar", why.dissimilar),
        ] {
            stats.add(&format!("aligned.rejected.{reason}"), n as u64);
        }
        stats.add("aligned.hot", r.hot as u64);
        stats.add("aligned.ineligible", r.ineligible as u64);
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

/// A group the search has made: its members, in the order of their identifiers, their
/// alignment and merged body.
struct Group {
    members: Vec<FuncId>,
    aligned: Aligned,
}

/// The search: each candidate, in turn, joins the group or the single function among its
/// near neighbours with which it saves most (a pair, or a group one member larger), or waits
/// in the LSH buckets for a later one. Bounded per candidate: `2 × neighbours` bucket
/// entries looked at per band, `tries` groups or functions aligned with.
fn find_groups(
    m: &Module,
    cands: &[Candidate],
    opts: &AlignedOptions,
    report: &mut AlignedReport,
) -> Vec<Group> {
    const NONE: u32 = u32::MAX;
    let mut buckets: HashMap<(u64, usize, u64), Vec<u32>> = HashMap::default();
    // The group of each candidate, or `NONE`.
    let mut group_of = vec![NONE; cands.len()];
    let mut groups: Vec<Group> = Vec::new();
    // Near candidates: (candidate, its group or `NONE`, MinHash values in common).
    let mut near: Vec<(u32, u32, usize)> = Vec::new();
    for c in 0..cands.len() {
        near.clear();
        for band in 0..BANDS {
            let key = (cands[c].skeleton, band, cands[c].minhash[band]);
            let Some(list) = buckets.get(&key) else {
                continue;
            };
            for &o in list.iter().rev().take(2 * opts.neighbours) {
                let g = group_of[o as usize];
                let full = g != NONE && groups[g as usize].members.len() >= opts.max_group;
                let seen = near
                    .iter()
                    .any(|&(x, h, _)| x == o || (g != NONE && h == g));
                if full || seen {
                    continue;
                }
                let common = (0..BANDS)
                    .filter(|&k| cands[o as usize].minhash[k] == cands[c].minhash[k])
                    .count();
                if common >= opts.min_common {
                    near.push((o, g, common));
                }
            }
        }
        near.sort_by_key(|&(o, _, common)| nearness(cands, c, o, common));
        // The best: (near entry, alignment, gain over what its group saves already).
        let mut best: Option<(u32, u32, Aligned, f64)> = None;
        for &(o, g, _) in near.iter().take(opts.tries) {
            let f = cands[c].f;
            let other = cands[o as usize].f;
            if !same_skeleton(m, &cands[o as usize], &cands[c]) {
                continue;
            }
            report.aligned += 1;
            let tried = screen(m, &cands[o as usize], &cands[c], opts).and_then(|()| {
                if g == NONE {
                    merge_group(m, &[other, f], None, 0.0, opts).map(|al| {
                        let s = al.saving;
                        (al, s)
                    })
                } else {
                    let group = &groups[g as usize];
                    let mut members = group.members.clone();
                    members.push(f);
                    let old = group.aligned.saving;
                    merge_group(m, &members, Some(&group.aligned.plan), old, opts).map(|al| {
                        let gain = al.saving - old;
                        (al, gain)
                    })
                }
            });
            match tried {
                Ok((al, gain)) => {
                    if best.as_ref().is_none_or(|b| gain > b.3) {
                        best = Some((o, g, al, gain));
                    }
                }
                Err(why) => {
                    report.reject(why);
                    // Joining this neighbour (or its group) would not pay for the selects
                    // the alignment needs; the neighbours after it share fewer MinHash
                    // values or differ more in size, and rarely do better.
                    if matches!(why, Rejected::Dissimilar | Rejected::Estimate) {
                        break;
                    }
                }
            }
        }
        match best {
            Some((o, NONE, aligned, _)) => {
                let g = groups.len() as u32;
                group_of[o as usize] = g;
                group_of[c] = g;
                groups.push(Group {
                    members: vec![cands[o as usize].f, cands[c].f],
                    aligned,
                });
            }
            Some((_, g, aligned, _)) => {
                group_of[c] = g;
                let group = &mut groups[g as usize];
                group.members.push(cands[c].f);
                group.aligned = aligned;
            }
            None => {
                for band in 0..BANDS {
                    let key = (cands[c].skeleton, band, cands[c].minhash[band]);
                    buckets.entry(key).or_default().push(c as u32);
                }
            }
        }
    }
    if opts.differing_cfgs {
        pair_differing_cfgs(m, cands, opts, report, &mut group_of, &mut groups);
    }
    groups
}

/// The second search: the candidates still alone after the first meet others of their
/// signature, whatever their CFGs, in LSH buckets keyed by the signature and one MinHash
/// value each, and the best pair whose CFGs differ is merged (`merge_pair_cfg`). Pairs
/// only; the same bounds per candidate as the first search.
fn pair_differing_cfgs(
    m: &Module,
    cands: &[Candidate],
    opts: &AlignedOptions,
    report: &mut AlignedReport,
    group_of: &mut [u32],
    groups: &mut Vec<Group>,
) {
    const NONE: u32 = u32::MAX;
    let mut buckets: HashMap<(u64, usize, u64), Vec<u32>> = HashMap::default();
    let mut near: Vec<(u32, usize)> = Vec::new();
    for c in 0..cands.len() {
        if group_of[c] != NONE {
            continue;
        }
        near.clear();
        for band in 0..BANDS {
            let key = (cands[c].sig, band, cands[c].minhash[band]);
            let Some(list) = buckets.get(&key) else {
                continue;
            };
            for &o in list.iter().rev().take(2 * opts.neighbours) {
                let other = &cands[o as usize];
                if group_of[o as usize] != NONE || near.iter().any(|&(x, _)| x == o) {
                    continue;
                }
                let common = (0..BANDS)
                    .filter(|&k| other.minhash[k] == cands[c].minhash[k])
                    .count();
                if common >= opts.min_common {
                    near.push((o, common));
                }
            }
        }
        near.sort_by_key(|&(o, common)| nearness(cands, c, o, common));
        let mut best: Option<(u32, Aligned)> = None;
        for &(o, _) in near.iter().take(opts.tries) {
            // Functions of one skeleton met in the first search (equal hashes confirmed).
            if same_skeleton(m, &cands[o as usize], &cands[c]) {
                continue;
            }
            report.aligned += 1;
            let floor = best.as_ref().map_or(0.0, |b| b.1.saving);
            let members = [cands[o as usize].f, cands[c].f];
            match screen(m, &cands[o as usize], &cands[c], opts)
                .and_then(|()| merge_pair_cfg(m, &members, floor, opts))
            {
                Ok(al) => best = Some((o, al)),
                Err(why) => report.reject(why),
            }
        }
        match best {
            Some((o, aligned)) => {
                let g = groups.len() as u32;
                group_of[o as usize] = g;
                group_of[c] = g;
                groups.push(Group {
                    members: vec![cands[o as usize].f, cands[c].f],
                    aligned,
                });
            }
            None => {
                for band in 0..BANDS {
                    let key = (cands[c].sig, band, cands[c].minhash[band]);
                    buckets.entry(key).or_default().push(c as u32);
                }
            }
        }
    }
}

/// How the open functions use each symbol: which ones they observe (take the address of,
/// name in a global value, or call with `try_call`, whose callee's identity its exception
/// table may depend on), and how many direct calls (`call`, `tail_call`) each has. A symbol
/// used any other way than as a direct callee counts as observed, and so do the bodies other
/// passes made and the functions whose address the callers of a folded member pass
/// (`ExtraArg::FuncAddr`).
#[derive(Default)]
struct SymbolUses {
    observed: HashSet<Symbol>,
    calls: HashMap<Symbol, u32>,
}

impl SymbolUses {
    fn of(m: &Module, ps: &PassState) -> Self {
        let mut uses = SymbolUses::default();
        for (_, f) in ps.open_functions(m) {
            for &b in &f.layout {
                for &i in f.block_insts(b) {
                    let direct = matches!(f.insts[i].opcode, Opcode::Call | Opcode::TailCall);
                    for (k, op) in f.operands(i).into_iter().enumerate() {
                        if let Operand::Sym(s, _) = op {
                            let s = m.resolve_alias(s);
                            if direct && k == 0 {
                                *uses.calls.entry(s).or_insert(0) += 1;
                            } else {
                                uses.observed.insert(s);
                            }
                        }
                    }
                }
            }
            for g in f.globals.values() {
                if let GlobalData::Symbol { sym, .. } = g {
                    uses.observed.insert(m.resolve_alias(*sym));
                }
            }
        }
        // Bodies other passes made (the shared bodies of `merge-similar`, and of this pass in
        // an earlier batch): callers compiled from their input call them by name. (A survivor
        // of `merge` may fold: the calls of what was merged into it follow it.)
        for r in ps.merges.iter().filter(|r| r.by != MergedBy::Exact) {
            uses.observed.insert(m.resolve_alias(r.survivor));
        }
        // Addresses that callers of folded members pass as extra arguments (in code to come,
        // or compiled by an earlier batch).
        for (_, rw) in &ps.call_rewrites {
            for e in &rw.extras {
                if let ExtraArg::FuncAddr(s, _) = e {
                    uses.observed.insert(m.resolve_alias(*s));
                }
            }
        }
        uses
    }
}

/// A function this pass may merge.
fn eligible(f: &Function, opts: &AlignedOptions) -> bool {
    let n = f.inst_count();
    // (Only open functions are candidates: a frozen one is never changed.)
    f.linkage != Linkage::Preemptible
        && f.entry().is_some()
        && (6..=opts.max_insts).contains(&n)
        && f.opaques.is_empty()
        && f.exn_tables.is_empty()
        && is_ssa(f)
        && !f.layout.iter().any(|&b| {
            f.block_insts(b).iter().any(|&i| {
                let op = f.insts[i].opcode;
                op.has_aux2() || op == Opcode::ExnHandlerAddr
            })
        })
        && !f.layout.first().is_some_and(|&b| {
            f.block_insts(b)
                .iter()
                .any(|&i| f.insts[i].opcode == Opcode::Phi)
        })
}

/// Every register is defined by at most one instruction, and every read but a phi's comes
/// after the definition in layout order (so that a merged body built in layout order has
/// every value it reads).
fn is_ssa(f: &Function) -> bool {
    let mut defined = vec![false; f.regs.len()];
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            if f.insts[i].opcode != Opcode::Phi {
                let mut ok = true;
                for_each_use(f, i, |r| ok &= defined[r.index()]);
                if !ok {
                    return false;
                }
            }
            for &r in f.results(i) {
                if core::mem::replace(&mut defined[r.index()], true) {
                    return false;
                }
            }
        }
    }
    true
}

/// The layout position of each block (u32::MAX for blocks not in the layout).
fn block_positions(f: &Function) -> Vec<u32> {
    let mut pos = vec![u32::MAX; f.blocks.len()];
    for (k, &b) in f.layout.iter().enumerate() {
        pos[b.index()] = k as u32;
    }
    pos
}

/// The phis at the head of a block, and the rest.
fn split_phis(f: &Function, b: Block) -> (&[Inst], &[Inst]) {
    let insts = f.block_insts(b);
    let k = insts
        .iter()
        .position(|&i| f.insts[i].opcode != Opcode::Phi)
        .unwrap_or(insts.len());
    insts.split_at(k)
}

/// Visit the skeleton of `f`: the signature, then per block its phis' types and sources'
/// positions, and its terminator's opcode and successors' positions. `None` if a block has
/// no terminator.
fn skeleton(f: &Function, mut each: impl FnMut(u64)) -> Option<()> {
    let pos = block_positions(f);
    each(f.sig.call_conv as u64);
    for p in f.sig.params.iter().chain(f.sig.returns.iter()) {
        each(p.ty.raw() as u64);
    }
    each(u64::MAX);
    for &b in f.layout.iter() {
        let (phis, rest) = split_phis(f, b);
        each(phis.len() as u64);
        for &i in phis {
            each(f.insts[i].ty.raw() as u64);
            for op in f.operands(i) {
                if let Operand::Block(s) = op {
                    each(pos[s.index()] as u64);
                }
            }
        }
        let &t = rest.last()?;
        let d = f.insts[t];
        if !d.opcode.is_terminator() {
            return None;
        }
        each(d.opcode as u64 | 1 << 32);
        for op in f.operands(t) {
            if let Operand::Block(s) = op {
                each(pos[s.index()] as u64);
            }
        }
    }
    Some(())
}

/// Candidates `a` and `b` have the same skeleton (confirms what their hashes suggest).
fn same_skeleton(m: &Module, a: &Candidate, b: &Candidate) -> bool {
    a.skeleton == b.skeleton
        && a.skeleton_words == b.skeleton_words
        && m.functions[a.f].sig == m.functions[b.f].sig
}

fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// MinHash of the function's shingles of three (opcode, type) pairs, in layout order.
fn minhash(f: &Function) -> [u64; BANDS] {
    const SEEDS: [u64; BANDS] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x27d4_eb2f_1656_67c5,
    ];
    let mut mh = [u64::MAX; BANDS];
    let mut window = [0u64; 3];
    let mut n = 0usize;
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            let d = f.insts[i];
            window = [
                window[1],
                window[2],
                (d.opcode as u64) << 16 | d.ty.raw() as u64,
            ];
            n += 1;
            if n >= 3 {
                let s = mix(mix(window[0], window[1]), window[2]);
                for k in 0..BANDS {
                    mh[k] = mh[k].min(finish(mix(s, SEEDS[k])));
                }
            }
        }
    }
    mh
}

/// A function's instructions as tokens, counted in `TOKEN_BUCKETS` buckets by their hash. A
/// token hashes an instruction's opcode and type, and per operand the opcode of the
/// instruction that defines a register or a constant's value: two instructions with equal
/// tokens read the same constants and values made the same way, so that aligning them needs
/// no select.
struct Tokens([u16; TOKEN_BUCKETS]);

const TOKEN_BUCKETS: usize = 64;

impl Tokens {
    fn of(f: &Function) -> Self {
        // The opcode defining each register (`Function::def_map` gives the instruction; the
        // opcode alone, read once per register, is cheaper to look up per operand).
        let mut def = vec![u16::MAX; f.regs.len()];
        for &b in f.layout.iter() {
            for &i in f.block_insts(b) {
                for &r in f.results(i) {
                    def[r.index()] = f.insts[i].opcode as u16;
                }
            }
        }
        let mut counts = [0u16; TOKEN_BUCKETS];
        for &b in f.layout.iter() {
            for &i in f.block_insts(b) {
                let d = f.insts[i];
                let h = f.operands(i).into_iter().fold(
                    (d.opcode as u64) << 16 | d.ty.raw() as u64,
                    |h, o| {
                        let w = match o {
                            Operand::Reg(r) => def[r.index()] as u64,
                            Operand::Int(v) => mix(1 << 20, v as u64),
                            Operand::F32(v) => mix(2 << 20, v as u64),
                            Operand::F64(v) => mix(3 << 20, v),
                            _ => 4 << 20,
                        };
                        mix(h, w)
                    },
                );
                let k = (finish(h) >> 58) as usize;
                counts[k] = counts[k].saturating_add(1);
            }
        }
        Tokens(counts)
    }

    /// What two functions' tokens have in common over all they hold (the weighted Jaccard
    /// index of the bucket counts: at least that of the tokens themselves, since tokens
    /// sharing a bucket only add to what is in common).
    fn similarity(&self, o: &Tokens) -> f64 {
        let (mut common, mut all) = (0u32, 0u32);
        for (&x, &y) in self.0.iter().zip(&o.0) {
            common += x.min(y) as u32;
            all += x.max(y) as u32;
        }
        if all == 0 {
            1.0
        } else {
            common as f64 / all as f64
        }
    }
}

/// The checks before two candidates are aligned: their tables must be the same, and their
/// instructions at least `AlignedOptions::min_similarity` similar (`Tokens::similarity`;
/// their tokens are counted only when that is above 0).
fn screen(m: &Module, a: &Candidate, b: &Candidate, opts: &AlignedOptions) -> Result<(), Rejected> {
    fn tokens<'c>(m: &Module, c: &'c Candidate) -> &'c Tokens {
        c.tokens.get_or_init(|| Tokens::of(&m.functions[c.f]))
    }
    if !same_tables(&m.functions[a.f], &m.functions[b.f]) {
        return Err(Rejected::Tables);
    }
    let min = opts.min_similarity;
    if min > 0.0 && tokens(m, a).similarity(tokens(m, b)) < min {
        return Err(Rejected::Dissimilar);
    }
    Ok(())
}

/// How near candidate `o` is to candidate `c` (smaller is nearer): most MinHash values in
/// common (`common`), then closest in size; ties by position.
fn nearness(
    cands: &[Candidate],
    c: usize,
    o: u32,
    common: usize,
) -> (core::cmp::Reverse<usize>, u32, u32) {
    let size = cands[o as usize].size.abs_diff(cands[c].size);
    (core::cmp::Reverse(common), size, o)
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

/// The alignment of one block across the members aligned so far: columns of one instruction
/// or none per member. A full column becomes one instruction of the merged body; the
/// instructions of the other columns are unmatched.
#[derive(Clone)]
struct Columns {
    width: usize,
    cells: Vec<Option<Inst>>,
}

impl Columns {
    /// One member's instructions, a column each.
    fn of(insts: &[Inst]) -> Self {
        Columns {
            width: 1,
            cells: insts.iter().map(|&i| Some(i)).collect(),
        }
    }

    fn len(&self) -> usize {
        self.cells.len() / self.width
    }

    fn col(&self, c: usize) -> &[Option<Inst>] {
        &self.cells[c * self.width..(c + 1) * self.width]
    }

    fn is_full(&self, c: usize) -> bool {
        self.col(c).iter().all(Option::is_some)
    }

    /// The first member present in column `c`, and its instruction.
    fn rep(&self, c: usize) -> (usize, Inst) {
        self.col(c)
            .iter()
            .enumerate()
            .find_map(|(k, i)| Some((k, (*i)?)))
            .expect("a column holds an instruction")
    }

    /// Append column `c` of `from` (or a column of none), with `last` for the new member.
    fn push(&mut self, from: &Columns, c: Option<usize>, last: Option<Inst>) {
        match c {
            Some(c) => self.cells.extend_from_slice(from.col(c)),
            None => self.cells.extend(core::iter::repeat_n(None, from.width)),
        }
        self.cells.push(last);
    }
}

/// What the members of a group share, for matching: their symbols (a call of a member to
/// itself matches another's call to itself) and how each member's stack objects map to the
/// merged body's.
struct GroupCtx<'a> {
    fs: Vec<&'a Function>,
    sym: Vec<Option<Symbol>>,
    /// Member `k`'s stack object `j` is the merged body's object `stack[k][j]`: the first
    /// member's object at the same index when they are alike, else one of its own.
    stack: Vec<Vec<StackObj>>,
}

impl<'a> GroupCtx<'a> {
    /// `members` have the same tables (`screen` checked them before they were aligned).
    fn new(m: &'a Module, members: &[FuncId]) -> Self {
        let a = &m.functions[members[0]];
        let mut cx = GroupCtx {
            fs: Vec::with_capacity(members.len()),
            sym: Vec::with_capacity(members.len()),
            stack: Vec::with_capacity(members.len()),
        };
        let mut extra = a.stack_objs.len();
        for &f in members {
            let b = &m.functions[f];
            debug_assert!(same_tables(a, b));
            let map = b
                .stack_objs
                .iter()
                .map(|(k, d)| {
                    if a.stack_objs.get(k) == Some(d) {
                        k
                    } else {
                        extra += 1;
                        StackObj::new(extra - 1)
                    }
                })
                .collect();
            cx.fs.push(b);
            cx.sym.push(m.lookup_symbol(&b.name));
            cx.stack.push(map);
        }
        cx
    }

    fn n(&self) -> usize {
        self.fs.len()
    }

    /// Instruction `x` of member `i` and `y` of member `j` can be one instruction, with
    /// selects on differing values.
    fn matches(&self, (i, x): (usize, Inst), (j, y): (usize, Inst)) -> bool {
        let (a, b) = (self.fs[i], self.fs[j]);
        let (da, db) = (a.insts[x], b.insts[y]);
        if da.opcode != db.opcode
            || da.ty != db.ty
            || da.results().len != db.results().len
            || da.operands().len != db.operands().len
        {
            return false;
        }
        let ok_aux = match da.opcode.format() {
            Format::Load | Format::Store => {
                a.memflags[MemFlagsRef::from_u32(da.aux)]
                    == b.memflags[MemFlagsRef::from_u32(db.aux)]
            }
            Format::Call => a.sigs[SigRef::from_u32(da.aux)] == b.sigs[SigRef::from_u32(db.aux)],
            _ if da.opcode == Opcode::FuncAddr => {
                a.sigs[SigRef::from_u32(da.aux)] == b.sigs[SigRef::from_u32(db.aux)]
            }
            _ => da.aux == db.aux,
        };
        if !ok_aux {
            return false;
        }
        if a.results(x)
            .iter()
            .zip(b.results(y))
            .any(|(&r, &s)| a.reg_type(r) != b.reg_type(s))
        {
            return false;
        }
        let call = da.opcode.is_call();
        a.operands(x)
            .into_iter()
            .zip(b.operands(y))
            .enumerate()
            .all(|(k, (p, q))| self.operands_match(i, p, j, q, call && k == 0))
    }

    /// An unmatched instruction `x` of member `k` that may run in every member: an ALU
    /// operation, copy or compare that cannot trap, or an address computation.
    fn speculable(&self, k: usize, x: Inst) -> bool {
        let f = self.fs[k];
        let op = f.insts[x].opcode;
        (op.is_pure_value() || op.format() == Format::Addr)
            && f.inst_effects(x) & (effects::TRAP | effects::SIDE) == 0
    }

    /// Every operand of `x` of member `i` and `y` of member `j` (matching instructions)
    /// that is not a register in either is the same in both (constants, symbols, stack
    /// slots, conditions): the alignment scores such a match above one that needs a select.
    fn same_constants(&self, (i, x): (usize, Inst), (j, y): (usize, Inst)) -> bool {
        self.fs[i]
            .operands(x)
            .into_iter()
            .zip(self.fs[j].operands(y))
            .all(|(p, q)| matches!(p, Operand::Reg(_)) || matches!(q, Operand::Reg(_)) || p == q)
    }

    /// Operand `x` of member `i` and `y` of member `j` can be one operand (a select where
    /// they differ). `callee`: they are the callees of direct calls, where a member's call to
    /// itself matches another's call to itself (the merged body calls itself).
    fn operands_match(&self, i: usize, x: Operand, j: usize, y: Operand, callee: bool) -> bool {
        use Operand::*;
        let (a, b) = (self.fs[i], self.fs[j]);
        match (x, y) {
            (Reg(r), Reg(s)) => a.reg_type(r) == b.reg_type(s),
            // A constant against a register or another constant: a select, if the kinds agree
            // (an integer constant is as wide as its place).
            (Reg(_) | Int(_) | F32(_) | F64(_), Reg(_) | Int(_) | F32(_) | F64(_)) => {
                value_kind(a, x) == value_kind(b, y)
            }
            (
                Mem {
                    base: b1,
                    index: i1,
                    scale: s1,
                    disp: d1,
                },
                Mem {
                    base: b2,
                    index: i2,
                    scale: s2,
                    disp: d2,
                },
            ) => {
                let same = |x: Option<crate::lir::Reg>, y: Option<crate::lir::Reg>| match (x, y) {
                    (Some(x), Some(y)) => a.reg_type(x) == b.reg_type(y),
                    (None, None) => true,
                    _ => false,
                };
                same(b1.expand(), b2.expand())
                    && same(i1.expand(), i2.expand())
                    && s1 == s2
                    && d1 == d2
            }
            (Sym(s, o), Sym(t, p)) => {
                o == p
                    && (s == t
                        || (callee && o == 0 && Some(s) == self.sym[i] && Some(t) == self.sym[j]))
            }
            (Stack(s, o), Stack(t, p)) => {
                o == p && self.stack[i][s.index()] == self.stack[j][t.index()]
            }
            (Block(_), Block(_)) => true, // terminators only; the skeletons agree
            _ => x == y,
        }
    }
}

/// Align member `k`'s body instructions `xb` of one block with the columns of the members
/// before it (Needleman–Wunsch against each column's first instruction, a match scoring 3
/// when the constants agree too, 2 when they need a select, and a gap nothing; ties prefer
/// matches). `None` if the table would be too large and the lengths differ.
fn align_block(
    cx: &GroupCtx,
    cols: &Columns,
    k: usize,
    xb: &[Inst],
    max_cells: usize,
) -> Option<Columns> {
    let (n, l) = (cols.len(), xb.len());
    let mut out = Columns {
        width: cols.width + 1,
        cells: Vec::with_capacity(n.max(l) * (cols.width + 1)),
    };
    if (n + 1) * (l + 1) > max_cells {
        if n != l {
            return None;
        }
        for (c, &y) in xb.iter().enumerate() {
            if cx.matches(cols.rep(c), (k, y)) {
                out.push(cols, Some(c), Some(y));
            } else {
                out.push(cols, Some(c), None);
                out.push(cols, None, Some(y));
            }
        }
        return Some(out);
    }
    let w = l + 1;
    let mut t = vec![0u16; (n + 1) * w];
    let mut hit = vec![0u16; n * l];
    // Keys once per instruction, so that most cells compare two words.
    let keys: SmallVec<[u64; 32]> = xb.iter().map(|&y| match_key(cx.fs[k], y)).collect();
    for i in (0..n).rev() {
        let rep = cols.rep(i);
        let key = match_key(cx.fs[rep.0], rep.1);
        for j in (0..l).rev() {
            debug_assert!(key == keys[j] || !cx.matches(rep, (k, xb[j])));
            let m = if key == keys[j] && cx.matches(rep, (k, xb[j])) {
                2 + cx.same_constants(rep, (k, xb[j])) as u16
            } else {
                0
            };
            hit[i * l + j] = m;
            let diag = if m > 0 { t[(i + 1) * w + j + 1] + m } else { 0 };
            t[i * w + j] = diag.max(t[(i + 1) * w + j]).max(t[i * w + j + 1]);
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < l {
        if i < n
            && j < l
            && hit[i * l + j] > 0
            && t[i * w + j] == t[(i + 1) * w + j + 1] + hit[i * l + j]
        {
            out.push(cols, Some(i), Some(xb[j]));
            i += 1;
            j += 1;
        } else if i < n && (j == l || t[i * w + j] == t[(i + 1) * w + j]) {
            out.push(cols, Some(i), None);
            i += 1;
        } else {
            out.push(cols, None, Some(xb[j]));
            j += 1;
        }
    }
    Some(out)
}

/// A hash of what `GroupCtx::matches` requires to be equal in two instructions, apart from
/// the tables it looks up (memory flags, signatures, symbols, stack objects): two
/// instructions that match have equal keys.
fn match_key(f: &Function, x: Inst) -> u64 {
    let d = f.insts[x];
    let mut h = mix(
        (d.opcode as u64) << 32 | d.ty.raw() as u64,
        (d.results().len as u64) << 32 | d.operands().len as u64,
    );
    let tables = matches!(
        d.opcode.format(),
        Format::Load | Format::Store | Format::Call
    ) || d.opcode == Opcode::FuncAddr;
    if !tables {
        h = mix(h, d.aux as u64);
    }
    for &r in f.results(x) {
        h = mix(h, f.reg_type(r).raw() as u64);
    }
    for o in f.operands(x) {
        let w = match o {
            // A register and a constant can share a select: only their kind must agree.
            Operand::Reg(_) | Operand::Int(_) | Operand::F32(_) | Operand::F64(_) => {
                value_kind(f, o)
            }
            Operand::Block(_) => 3,
            Operand::Mem {
                base,
                index,
                scale,
                disp,
            } => mix(
                4 | (base.is_some() as u64) << 8 | (index.is_some() as u64) << 9,
                (scale as u64) << 32 | disp as u32 as u64,
            ),
            Operand::Sym(_, o) => mix(5, o as u64),
            Operand::Stack(_, o) => mix(6, o as u64),
            Operand::Pred(c) => mix(7, c as u64),
            Operand::Arg(n) => mix(8, n as u64),
        };
        h = mix(h, w);
    }
    h
}

/// Whether a value operand (register or constant) is an integer (0), an `f32` (1) or an
/// `f64` (2).
fn value_kind(f: &Function, o: Operand) -> u64 {
    match o {
        Operand::Reg(r) => match f.reg_type(r) {
            Type::F32 => 1,
            Type::F64 => 2,
            _ => 0,
        },
        Operand::F32(_) => 1,
        Operand::F64(_) => 2,
        _ => 0,
    }
}

/// The blocks that are in a loop, approximately: those between a block and a later block
/// that branches back to it, in layout order.
fn loop_blocks(f: &Function, pos: &[u32]) -> Vec<bool> {
    let n = f.layout.len();
    let mut in_loop = vec![false; n];
    for (k, &b) in f.layout.iter().enumerate() {
        for s in f.branch_targets(f.block_insts(b)[f.block_insts(b).len() - 1]) {
            let p = pos[s.index()] as usize;
            if p <= k {
                in_loop[p..=k].iter_mut().for_each(|x| *x = true);
            }
        }
    }
    in_loop
}

/// The instructions of block `b` between its phis and its terminator.
fn block_body(f: &Function, b: Block) -> &[Inst] {
    let (_, rest) = split_phis(f, b);
    &rest[..rest.len() - 1]
}

/// A group's alignment and merged body, and the bytes it saves.
struct Aligned {
    /// The blocks of the merged body.
    plan: Vec<PlanBlock>,
    merged: Merged,
    saving: f64,
}

/// Align `members` (functions of `m` with one skeleton) and build their merged body, if it
/// saves more than `floor` bytes. `base`: the alignment of all members but the last, when
/// they are a group already (else there are two members).
fn merge_group(
    m: &Module,
    members: &[FuncId],
    base: Option<&[PlanBlock]>,
    floor: f64,
    opts: &AlignedOptions,
) -> Result<Aligned, Rejected> {
    let cx = GroupCtx::new(m, members);
    let n = cx.n();
    let last = n - 1;
    let (a, z) = (cx.fs[0], cx.fs[last]);
    let mut columns = Vec::with_capacity(a.layout.len());
    for (k, (&ba, &bz)) in a.layout.iter().zip(z.layout.iter()).enumerate() {
        let first;
        let cols = match base {
            // (Groups of more than two are all of one skeleton: every block is aligned.)
            Some(base) => base[k].columns.as_ref().ok_or(Rejected::Blocks)?,
            None => {
                debug_assert_eq!(n, 2);
                first = Columns::of(block_body(a, ba));
                &first
            }
        };
        let al = align_block(&cx, cols, last, block_body(z, bz), opts.max_cells)
            .ok_or(Rejected::LongBlock)?;
        columns.push(al);
    }
    let plan: Vec<PlanBlock> = columns
        .into_iter()
        .enumerate()
        .map(|(k, cols)| PlanBlock {
            blocks: cx.fs.iter().map(|g| Some(g.layout[k])).collect(),
            columns: Some(cols),
        })
        .collect();
    build(&cx, plan, floor, opts)
}

/// What must agree for two blocks of functions with differing CFGs to be one block of the
/// merged body (their phis' types, their terminators' opcode and number of targets), and a
/// histogram of their bodies' opcodes for scoring the pairing.
struct BlockKey {
    /// A hash of `phis` and `term`, compared first.
    shape: u64,
    phis: SmallVec<[Type; 4]>,
    term: Option<(Opcode, usize)>,
    hist: [u8; 16],
}

impl BlockKey {
    fn of(f: &Function, b: Block) -> Self {
        let (phis, _) = split_phis(f, b);
        let mut hist = [0u8; 16];
        for &i in block_body(f, b) {
            let h = &mut hist[(f.insts[i].opcode as usize * 7) % 16];
            *h = h.saturating_add(1);
        }
        let phis: SmallVec<[Type; 4]> = phis.iter().map(|&i| f.insts[i].ty).collect();
        let term = f
            .terminator(b)
            .map(|t| (f.insts[t].opcode, f.branch_targets(t).count()));
        let shape = phis.iter().fold(
            term.map_or(0, |(op, n)| (op as u64) << 32 | n as u64),
            |h, ty| mix(h, ty.raw() as u64),
        );
        BlockKey {
            shape,
            phis,
            term,
            hist,
        }
    }

    /// The score of pairing two blocks: 0 if they cannot be one block, else one more than
    /// the opcodes their bodies have in common (as far as the histograms tell).
    fn score(&self, o: &BlockKey) -> u32 {
        if self.shape != o.shape
            || self.term.is_none()
            || self.term != o.term
            || self.phis != o.phis
        {
            return 0;
        }
        1 + self
            .hist
            .iter()
            .zip(&o.hist)
            .map(|(&x, &y)| x.min(y) as u32)
            .sum::<u32>()
    }
}

/// Pair the blocks of `a` and `b` in layout order (Needleman–Wunsch, a gap scoring
/// nothing): a pair becomes one block of the merged body, an unpaired block stays one
/// member's. The entry blocks are always paired. `None` if they cannot be, or the table
/// would exceed `max_cells`.
fn align_blocks(
    a: &Function,
    b: &Function,
    max_cells: usize,
) -> Option<Vec<(Option<Block>, Option<Block>)>> {
    let (n, l) = (a.layout.len(), b.layout.len());
    if n == 0 || l == 0 || (n + 1) * (l + 1) > max_cells {
        return None;
    }
    let ka: Vec<BlockKey> = a.layout.iter().map(|&x| BlockKey::of(a, x)).collect();
    let kb: Vec<BlockKey> = b.layout.iter().map(|&y| BlockKey::of(b, y)).collect();
    if ka[0].score(&kb[0]) == 0 {
        return None;
    }
    // `t[i][j]`: the best score of blocks `i..` of `a` against `j..` of `b` (from 1 on).
    let w = l + 1;
    let mut t = vec![0u32; (n + 1) * w];
    let mut hit = vec![0u32; n * l];
    for i in (1..n).rev() {
        for j in (1..l).rev() {
            let s = ka[i].score(&kb[j]);
            hit[i * l + j] = s;
            let diag = if s > 0 { t[(i + 1) * w + j + 1] + s } else { 0 };
            t[i * w + j] = diag.max(t[(i + 1) * w + j]).max(t[i * w + j + 1]);
        }
    }
    let mut out = vec![(Some(a.layout[0]), Some(b.layout[0]))];
    let (mut i, mut j) = (1, 1);
    while i < n || j < l {
        if i < n
            && j < l
            && hit[i * l + j] > 0
            && t[i * w + j] == t[(i + 1) * w + j + 1] + hit[i * l + j]
        {
            out.push((Some(a.layout[i]), Some(b.layout[j])));
            i += 1;
            j += 1;
        } else if i < n && (j == l || t[i * w + j] == t[(i + 1) * w + j]) {
            out.push((Some(a.layout[i]), None));
            i += 1;
        } else {
            out.push((None, Some(b.layout[j])));
            j += 1;
        }
    }
    Some(out)
}

/// The share of the larger function's instructions that two functions whose CFGs differ
/// must have in common (by the alignment, before code generation) to be merged. Below it,
/// the branches on the identifier and the phis that carry values around the other member's
/// blocks cost about what the pair saves: on the wasm corpus, the pairs below 60% saved
/// under 0.1% of any module's bytes, and took two thirds of the pass's time or more.
const MIN_SHARED_DIFFERING_CFGS: f64 = 0.6;

/// Align two functions whose CFGs differ (`members`: a pair) and build their merged body,
/// if it saves more than `floor` bytes: their blocks paired by `align_blocks`, each pair's
/// bodies aligned as in `merge_group`, the unpaired blocks kept for their own member.
fn merge_pair_cfg(
    m: &Module,
    members: &[FuncId],
    floor: f64,
    opts: &AlignedOptions,
) -> Result<Aligned, Rejected> {
    let cx = GroupCtx::new(m, members);
    let (a, b) = (cx.fs[0], cx.fs[1]);
    if a.sig != b.sig {
        return Err(Rejected::Tables);
    }
    // A pair must share `MIN_SHARED_DIFFERING_CFGS` of the larger function's instructions,
    // and can share no more than the smaller one has.
    let larger = a.inst_count().max(b.inst_count());
    let enough = |shared: usize| shared as f64 >= MIN_SHARED_DIFFERING_CFGS * larger as f64;
    if !enough(a.inst_count().min(b.inst_count())) {
        return Err(Rejected::Share);
    }
    let pairs = align_blocks(a, b, opts.max_cells).ok_or(Rejected::Blocks)?;
    // What the merge could save at most, from the instructions that could be shared: first
    // the paired blocks' phis, terminators and shorter bodies, then what their bodies'
    // alignments share.
    let c = &opts.cost;
    let bound = |shared: usize| c.bytes_per_inst * shared as f64 + frames_less_thunks(2, c);
    let paired: usize = pairs
        .iter()
        .filter_map(|&(x, y)| {
            let (x, y) = (x?, y?);
            let body = block_body(a, x).len().min(block_body(b, y).len());
            Some(body + split_phis(a, x).0.len() + 1)
        })
        .sum();
    if !enough(paired) {
        return Err(Rejected::Share);
    }
    if bound(paired) <= floor {
        return Err(Rejected::Estimate);
    }
    let mut plan = Vec::with_capacity(pairs.len());
    let mut shared = 0;
    for (x, y) in pairs {
        let columns = match (x, y) {
            (Some(x), Some(y)) => {
                let first = Columns::of(block_body(a, x));
                let cols = align_block(&cx, &first, 1, block_body(b, y), opts.max_cells)
                    .ok_or(Rejected::LongBlock)?;
                shared += (0..cols.len()).filter(|&c| cols.is_full(c)).count();
                shared += split_phis(a, x).0.len() + 1;
                Some(cols)
            }
            _ => None,
        };
        plan.push(PlanBlock {
            blocks: [x, y].into_iter().collect(),
            columns,
        });
    }
    if !enough(shared) {
        return Err(Rejected::Share);
    }
    if bound(shared) <= floor {
        return Err(Rejected::Estimate);
    }
    build(&cx, plan, floor, opts)
}

/// What the merged body of `plan` could save at most, without building it: an upper bound
/// of `saving_of`, from a lower bound of what code generation makes. Each block's phis and
/// a terminator once, the identifier's copy, a full column once and a select for each
/// member whose operand differs from the first's (a constant, or a register that is not the
/// result of the same column or phi: `Codegen` gives a member's register the merged
/// register of another member's only there), every other instruction as it is, and a
/// branch and a jump for each run of unmatched instructions that cannot run in every
/// member (a diamond). Leaving out the selects of phi sources and terminators, and the
/// charges for loops and repair phis, only raises the bound (the cost model's charges are
/// not negative).
fn estimate(cx: &GroupCtx, plan: &[PlanBlock], opts: &AlignedOptions) -> f64 {
    use Operand::*;
    let n = cx.n();
    let fs = &cx.fs;
    // Per member and register: the column or phi of the merged body it is a result of,
    // numbered from 1; 0 for a value of that member only.
    let mut ids: Vec<Vec<u32>> = fs.iter().map(|f| vec![0; f.regs.len()]).collect();
    let mut next = 0;
    // Whether member `k`'s operand `y` needs a select against the first member's `x`:
    // the number of selects (a memory operand's base and index are selected apart).
    let selects_for = |ids: &[Vec<u32>], k: usize, x: Operand, y: Operand| -> usize {
        let reg = |r: Option<crate::lir::Reg>, s: Option<crate::lir::Reg>| match (r, s) {
            (Some(r), Some(s)) => {
                let id = ids[0][r.index()];
                (id == 0 || ids[k][s.index()] != id) as usize
            }
            _ => 0,
        };
        match (x, y) {
            (Reg(r), Reg(s)) => reg(Some(r), Some(s)),
            (Reg(_) | Int(_) | F32(_) | F64(_), _) => (x != y) as usize,
            (
                Mem { base, index, .. },
                Mem {
                    base: b2,
                    index: i2,
                    ..
                },
            ) => reg(base.expand(), b2.expand()) + reg(index.expand(), i2.expand()),
            _ => 0,
        }
    };
    let (mut insts, mut selects) = (1, 0);
    for p in plan {
        let k0 = p.first();
        let Some(b0) = p.blocks[k0] else { continue };
        let phis = split_phis(fs[k0], b0).0.len();
        for q in 0..phis {
            next += 1;
            for (k, b) in p.members() {
                ids[k][fs[k].results(split_phis(fs[k], b).0[q])[0].index()] = next;
            }
        }
        insts += phis + 1;
        let Some(cols) = &p.columns else {
            insts += block_body(fs[k0], b0).len();
            continue;
        };
        let (mut in_run, mut diamond) = (false, false);
        for c in 0..cols.len() {
            if !cols.is_full(c) {
                for (j, x) in cols.col(c).iter().enumerate() {
                    if let Some(x) = *x {
                        insts += 1;
                        diamond |= !cx.speculable(j, x);
                    }
                }
                in_run = true;
                continue;
            }
            insts += 1 + 2 * (in_run && diamond) as usize;
            (in_run, diamond) = (false, false);
            let xs = cols.col(c);
            let x0 = xs[0].unwrap();
            for (at, o) in fs[0].operands(x0).into_iter().enumerate() {
                for (k, x) in xs.iter().enumerate().skip(1) {
                    selects += selects_for(&ids, k, o, fs[k].operand(x.unwrap(), at));
                }
            }
            for j in 0..fs[0].results(x0).len() {
                next += 1;
                for (k, x) in xs.iter().enumerate() {
                    ids[k][fs[k].results(x.unwrap())[j].index()] = next;
                }
            }
        }
        insts += 2 * (in_run && diamond) as usize;
    }
    let c = &opts.cost;
    let members_insts: usize = fs.iter().map(|f| f.inst_count()).sum();
    c.bytes_per_inst * (members_insts as f64 - (insts + selects) as f64) + frames_less_thunks(n, c)
        - opts.select_extra * selects as f64
}

/// The merged body of `plan`, if it saves more than `floor` bytes. Most alignments save
/// nothing: `estimate` rejects them before the body is built.
fn build(
    cx: &GroupCtx,
    plan: Vec<PlanBlock>,
    floor: f64,
    opts: &AlignedOptions,
) -> Result<Aligned, Rejected> {
    let most = estimate(cx, &plan, opts);
    // Debug builds also build the plans the estimate turns away, to check the bound where
    // it decides.
    if most <= floor && !cfg!(debug_assertions) {
        return Err(Rejected::Estimate);
    }
    let merged = Codegen::new(cx).run(&plan);
    let saving = merged.as_ref().map(|b| saving_of(cx, b, opts));
    if let Some(saving) = saving {
        debug_assert!(
            saving <= most + 1e-6,
            "estimate {most} below the saving {saving}"
        );
    }
    if most <= floor {
        return Err(Rejected::Estimate);
    }
    let (Some(merged), Some(saving)) = (merged, saving) else {
        return Err(Rejected::Codegen);
    };
    if saving <= floor {
        return Err(Rejected::Saving);
    }
    Ok(Aligned {
        plan,
        merged,
        saving,
    })
}

/// The frames of `n` members the merge saves, less the thunks (with their identifier
/// argument) and the merged body's frame it adds.
fn frames_less_thunks(n: usize, c: &CostModel) -> f64 {
    let n = n as f64;
    n * c.frame - (n * (c.thunk + c.per_extra_arg) + c.frame)
}

/// The bytes a merged body saves against its members, as the cost model estimates them.
fn saving_of(cx: &GroupCtx, merged: &Merged, opts: &AlignedOptions) -> f64 {
    let c = &opts.cost;
    let members_insts: usize = cx.fs.iter().map(|f| f.inst_count()).sum();
    c.bytes_per_inst * (members_insts as f64 - merged.body.inst_count() as f64)
        + frames_less_thunks(cx.n(), c)
        - opts.loop_branch * merged.diamonds_in_loops as f64
        - opts.select_extra * merged.selects as f64
        - merged.speculated_in_loops as f64
        - opts.repair_edge * merged.repair_edges as f64
}

/// A merged body, before it has a name.
struct Merged {
    body: Function,
    /// Calls of the body to itself (their callee is set when the body gets its name).
    self_calls: Vec<Inst>,
    /// Diamonds in blocks of loops.
    diamonds_in_loops: usize,
    /// Diamonds in all.
    diamonds: usize,
    /// Unmatched instructions run by every member, in blocks of loops.
    speculated_in_loops: usize,
    /// Unmatched instructions (in diamonds or run by every member).
    unmatched: usize,
    /// Selects on the identifier.
    selects: usize,
    /// Blocks of one member only.
    own_blocks: usize,
    /// Edges into the phis that carry values to the reads their definitions do not
    /// dominate (`Codegen::repair`).
    repair_edges: usize,
}

/// A block of the merged body: the members' blocks it stands for (every member's, or one
/// member's only) and, when every member's, the alignment of their bodies.
struct PlanBlock {
    blocks: SmallVec<[Option<Block>; 4]>,
    columns: Option<Columns>,
}

impl PlanBlock {
    /// The members present, and their blocks.
    fn members(&self) -> impl Iterator<Item = (usize, Block)> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter_map(|(k, b)| Some((k, (*b)?)))
    }

    /// The first member present.
    fn first(&self) -> usize {
        self.members().next().map_or(0, |(k, _)| k)
    }
}

/// Whether two functions' alias regions, global values and stack limits are the same: tables
/// whose entries refer to one another by index are shared only when equal (a merged body
/// keeps the first member's).
fn same_tables(a: &Function, b: &Function) -> bool {
    a.regions == b.regions && same_globals(a, b) && a.stack_limit == b.stack_limit
}

/// The global values of `a` and `b` are the same, entry by entry (their memory flags by
/// content: each function has its own table of them). The merged body keeps `a`'s.
fn same_globals(a: &Function, b: &Function) -> bool {
    a.globals.len() == b.globals.len()
        && a.globals
            .values()
            .zip(b.globals.values())
            .all(|(x, y)| match (x, y) {
                (
                    GlobalData::Load {
                        base,
                        offset,
                        ty,
                        flags,
                    },
                    GlobalData::Load {
                        base: base2,
                        offset: offset2,
                        ty: ty2,
                        flags: flags2,
                    },
                ) => {
                    base == base2
                        && offset == offset2
                        && ty == ty2
                        && a.memflags[*flags] == b.memflags[*flags2]
                }
                _ => x == y,
            })
}

/// Builds the merged body of an aligned group.
struct Codegen<'a, 'c> {
    cx: &'c GroupCtx<'a>,
    f: Function,
    /// The identifier: `k` in member `k`.
    id: Reg,
    /// Each member's registers, as the merged body holds them.
    map: Vec<Vec<PackedOption<Reg>>>,
    /// Calls of a member to itself (their callee is set when the body gets its name).
    self_calls: Vec<Inst>,
    /// The merged body's own signature, for those calls.
    self_sig: SigRef,
    /// Uses of each register, per member.
    uses: Vec<Vec<u32>>,
    /// A register holding zero, per type, at the top of the entry block.
    zeros: HashMap<Type, Reg>,
    /// `id == k`, per member `k`, at the top of the entry block (for groups of three or
    /// more; in a pair the identifier itself tells the second member).
    flags: HashMap<usize, Reg>,
    /// A member's register was read before the body had it, or a column's callees disagree
    /// (the group is not merged).
    missing: core::cell::Cell<bool>,
    /// The entry block.
    entry: Block,
    /// Selects made.
    selects: usize,
    /// Edges into the phis `repair` made.
    repair_edges: usize,
}

impl<'a, 'c> Codegen<'a, 'c> {
    fn new(cx: &'c GroupCtx<'a>) -> Self {
        let a = cx.fs[0];
        let mut sig = a.sig.clone();
        sig.params.push(AbiParam::new(Type::I32));
        let mut f = Function::new(a.name.clone(), sig.clone(), Linkage::Local);
        f.stack_objs = a.stack_objs.clone();
        f.sigs = a.sigs.clone();
        f.regions = a.regions.clone();
        f.globals = a.globals.clone();
        f.stack_limit = a.stack_limit;
        f.memflags = a.memflags.clone();
        let self_sig = f.sigs.push(sig);
        let id = f.new_reg(Type::I32);
        let entry = f.new_block();
        Codegen {
            cx,
            f,
            id,
            map: cx
                .fs
                .iter()
                .map(|f| vec![None.into(); f.regs.len()])
                .collect(),
            self_calls: Vec::new(),
            self_sig,
            uses: cx.fs.iter().map(|f| use_counts(f)).collect(),
            zeros: HashMap::default(),
            flags: HashMap::default(),
            missing: core::cell::Cell::new(false),
            entry,
            selects: 0,
            repair_edges: 0,
        }
    }

    fn n(&self) -> usize {
        self.cx.n()
    }

    /// The merged body of `plan`. `None` if some value cannot be carried around a diamond or
    /// to a block of one member only, or an aligned column does not match after all.
    fn run(mut self, plan: &[PlanBlock]) -> Option<Merged> {
        let n = self.n();
        let cx = self.cx;
        let fs = &cx.fs;
        let a = fs[0];
        // The other members' stack objects of their own, after the first's.
        let mut own: Vec<(usize, StackObjData)> = Vec::new();
        for (k, g) in fs.iter().enumerate().skip(1) {
            for (j, d) in g.stack_objs.iter() {
                let to = self.cx.stack[k][j.index()].index();
                if to >= a.stack_objs.len() {
                    own.push((to, *d));
                }
            }
        }
        own.sort_by_key(|x| x.0);
        for (_, d) in own {
            self.f.stack_objs.push(d);
        }
        let nb = plan.len();
        let firsts: Vec<Block> = core::iter::once(self.entry)
            .chain((1..nb).map(|_| self.f.new_block()))
            .collect();
        // The plan entry of each member's blocks.
        let mut at: Vec<Vec<u32>> = fs.iter().map(|g| vec![u32::MAX; g.blocks.len()]).collect();
        for (e, p) in plan.iter().enumerate() {
            for (k, b) in p.blocks.iter().enumerate() {
                if let Some(b) = b {
                    at[k][b.index()] = e as u32;
                }
            }
        }
        let pos: Vec<Vec<u32>> = fs.iter().map(|g| block_positions(g)).collect();
        let loops: Vec<Vec<bool>> = fs
            .iter()
            .zip(&pos)
            .map(|(g, p)| loop_blocks(g, p))
            .collect();
        let in_loop = |p: &PlanBlock| {
            p.blocks
                .iter()
                .enumerate()
                .any(|(k, b)| b.is_some_and(|b| loops[k][pos[k][b.index()] as usize]))
        };
        let np = a.sig.params.len() as u32;
        let i = self
            .f
            .make_inst(Opcode::Copy, Type::I32, &[self.id], &[Operand::Arg(np)]);
        self.f.append_inst(self.entry, i);
        let mut lasts = Vec::with_capacity(nb);
        // Each phi of the body: (its instruction, its plan entry, its position there).
        let mut phis: Vec<(Inst, usize, usize)> = Vec::new();
        let (mut diamonds_in_loops, mut diamonds, mut speculated_in_loops) = (0, 0, 0);
        let mut unmatched = 0;
        let mut xs: Vec<Inst> = Vec::with_capacity(n);
        for (e, p) in plan.iter().enumerate() {
            let mut cur = firsts[e];
            let k0 = p.first();
            let (pa, _) = split_phis(fs[k0], p.blocks[k0]?);
            for (q, &x) in pa.iter().enumerate() {
                let ty = fs[k0].insts[x].ty;
                let r = self.f.new_reg(ty);
                let i = self.f.make_inst(Opcode::Phi, ty, &[r], &[]);
                self.f.append_inst(cur, i);
                for (k, b) in p.members() {
                    let y = split_phis(fs[k], b).0[q];
                    self.map[k][fs[k].results(y)[0].index()] = r.into();
                }
                phis.push((i, e, q));
            }
            let Some(cols) = &p.columns else {
                // A block of one member only.
                for &x in block_body(fs[k0], p.blocks[k0]?) {
                    self.emit_one(cur, k0, x);
                }
                lasts.push(cur);
                continue;
            };
            let looped = in_loop(p) as usize;
            let mut c = 0;
            while c < cols.len() {
                if cols.is_full(c) {
                    xs.clear();
                    xs.extend(cols.col(c).iter().map(|x| x.unwrap()));
                    self.emit_column(cur, &xs, |o| o)?;
                    c += 1;
                    continue;
                }
                let e = (c..cols.len())
                    .find(|&e| cols.is_full(e))
                    .unwrap_or(cols.len());
                let run: Vec<(usize, Inst)> = (c..e)
                    .flat_map(|col| {
                        cols.col(col)
                            .iter()
                            .enumerate()
                            .filter_map(|(j, x)| Some((j, (*x)?)))
                    })
                    .collect();
                unmatched += run.len();
                if run.iter().all(|&(j, x)| self.cx.speculable(j, x)) {
                    // Pure operations that cannot trap: every member's run in line, each
                    // member reading only its own results.
                    for &(j, x) in &run {
                        self.emit_one(cur, j, x);
                    }
                    speculated_in_loops += looped * run.len();
                } else {
                    cur = self.diamond(cur, &run)?;
                    diamonds_in_loops += looped;
                    diamonds += 1;
                }
                c = e;
            }
            lasts.push(cur);
        }
        // Where each member's terminator goes, per plan entry: one instruction for all
        // members when they branch alike (to the same merged blocks), else a branch on the
        // identifier to a block of each member's own terminator (pairs only).
        let terms: Vec<Option<Vec<Inst>>> = plan
            .iter()
            .map(|p| {
                let ts: Vec<Inst> = p
                    .members()
                    .map(|(k, b)| fs[k].terminator(b))
                    .collect::<Option<_>>()?;
                (ts.len() == n).then_some(ts)
            })
            .collect();
        let mut dispatched = 0;
        let mut term_at: Vec<SmallVec<[Block; 4]>> = Vec::with_capacity(nb);
        let mut shared: Vec<bool> = Vec::with_capacity(nb);
        for (e, ts) in terms.iter().enumerate() {
            let alike = ts.as_ref().is_some_and(|ts| {
                (1..n).all(|k| {
                    self.cx.matches((0, ts[0]), (k, ts[k]))
                        && fs[0]
                            .branch_targets(ts[0])
                            .zip(fs[k].branch_targets(ts[k]))
                            .all(|(s, t)| at[0][s.index()] == at[k][t.index()])
                })
            });
            shared.push(alike);
            if alike || ts.is_none() {
                term_at.push(core::iter::repeat_n(lasts[e], n).collect());
            } else {
                if n != 2 {
                    return None;
                }
                dispatched += 1;
                term_at.push((0..n).map(|_| self.f.new_block()).collect());
            }
        }
        // Phi sources: per predecessor in the body, the members' values (a select at the end
        // of the predecessor where they differ).
        for (i, e, q) in phis {
            let p = &plan[e];
            let k0 = p.first();
            let x = split_phis(fs[k0], p.blocks[k0]?).0[q];
            let ty = fs[k0].insts[x].ty;
            // (predecessor in the body, the members' values on that edge), in the order of
            // the first member's sources; an edge of one member only has that member's value.
            let mut srcs: Vec<(Block, SmallVec<[Option<Operand>; 4]>)> = Vec::new();
            for (k, b) in p.members() {
                let y = split_phis(fs[k], b).0[q];
                let ops = fs[k].operands(y).to_vec();
                for (t, pair) in ops.chunks(2).enumerate() {
                    let (v, Operand::Block(pred)) = (pair[0], pair[1]) else {
                        return None;
                    };
                    let e = at[k][pred.index()];
                    let mp = *term_at.get(e as usize)?.get(k)?;
                    let slot = match srcs.get(t) {
                        Some(s) if s.0 == mp && s.1[k].is_none() => t,
                        _ => match srcs.iter().position(|s| s.0 == mp && s.1[k].is_none()) {
                            Some(s) => s,
                            None => {
                                srcs.push((mp, core::iter::repeat_n(None, n).collect()));
                                srcs.len() - 1
                            }
                        },
                    };
                    srcs[slot].1[k] = Some(v);
                }
            }
            let mut ops = Vec::with_capacity(2 * srcs.len());
            let mut vals: Vec<Operand> = Vec::with_capacity(n);
            for (mp, vs) in srcs {
                let v = if vs.iter().all(Option::is_some) {
                    vals.clear();
                    vals.extend(vs.iter().map(|v| v.unwrap()));
                    self.value(mp, ty, &vals)
                } else {
                    let mut own = vs.iter().enumerate().filter_map(|(k, v)| Some((k, (*v)?)));
                    let (k, v) = own.next()?;
                    if own.next().is_some() {
                        return None;
                    }
                    self.translate(k, v)
                };
                ops.extend([v, Operand::Block(mp)]);
            }
            self.f.set_operands(i, &ops);
        }
        // Terminators, their targets the blocks' first merged blocks.
        for (e, ts) in terms.iter().enumerate() {
            let last = lasts[e];
            match ts {
                Some(ts) if shared[e] => {
                    let targets = |o: Operand| match o {
                        Operand::Block(t) => Operand::Block(firsts[at[0][t.index()] as usize]),
                        o => o,
                    };
                    self.emit_column(last, ts, targets)?;
                }
                Some(ts) => {
                    self.branch_on(last, 1, term_at[e][1], term_at[e][0]);
                    diamonds += 1;
                    diamonds_in_loops += in_loop(&plan[e]) as usize;
                    for (k, &t) in ts.iter().enumerate() {
                        self.emit_own(term_at[e][k], k, t, |b| firsts[at[k][b.index()] as usize]);
                    }
                }
                None => {
                    let k = plan[e].first();
                    let t = fs[k].terminator(plan[e].blocks[k]?)?;
                    self.emit_own(last, k, t, |b| firsts[at[k][b.index()] as usize]);
                }
            }
        }
        if self.missing.get() {
            return None;
        }
        let own_blocks = plan.iter().filter(|p| p.columns.is_none()).count();
        if own_blocks + dispatched > 0 {
            self.repair()?;
        }
        Some(Merged {
            body: self.f,
            self_calls: self.self_calls,
            diamonds_in_loops,
            diamonds,
            speculated_in_loops,
            unmatched,
            selects: self.selects,
            own_blocks,
            repair_edges: self.repair_edges,
        })
    }

    /// The members' instructions `xs` (one each) as one instruction at the end of `cur`;
    /// `blocks` maps the first member's block operands.
    fn emit_column(
        &mut self,
        cur: Block,
        xs: &[Inst],
        blocks: impl Fn(Operand) -> Operand,
    ) -> Option<()> {
        let n = self.n();
        let fs = &self.cx.fs;
        let (a, x) = (fs[0], xs[0]);
        if (1..n).any(|k| !self.cx.matches((0, x), (k, xs[k]))) {
            return None;
        }
        let d = a.insts[x];
        let nops = d.operands().len as usize;
        let mut ops: Vec<Operand> = Vec::with_capacity(nops + 1);
        let mut self_call = false;
        let mut vals: SmallVec<[Operand; 4]> = SmallVec::new();
        for p in 0..nops {
            use Operand::*;
            vals.clear();
            vals.extend(fs.iter().zip(xs).map(|(g, &y)| g.operand(y, p)));
            let o = match vals[0] {
                Reg(_) | Int(_) | F32(_) | F64(_) => {
                    let ty = fs
                        .iter()
                        .zip(&vals)
                        .find_map(|(g, v)| match v {
                            Reg(r) => Some(g.reg_type(*r)),
                            _ => None,
                        })
                        .unwrap_or_else(|| a.constant_type(x, p));
                    self.value(cur, ty, &vals)
                }
                Mem { scale, disp, .. } => {
                    let part = |o: &Operand, base: bool| match *o {
                        Mem { base: b, index, .. } => if base { b } else { index }.expand(),
                        _ => None,
                    };
                    let base = self.mem_part(cur, vals.iter().map(|o| part(o, true)))?;
                    let index = self.mem_part(cur, vals.iter().map(|o| part(o, false)))?;
                    Mem {
                        base: base.into(),
                        index: index.into(),
                        scale,
                        disp,
                    }
                }
                Sym(s, off) if vals.iter().any(|v| *v != vals[0]) => {
                    // Only a call of each member to itself differs: the body calls itself.
                    let selfs = d.opcode.is_call()
                        && p == 0
                        && off == 0
                        && vals
                            .iter()
                            .zip(&self.cx.sym)
                            .all(|(v, s)| matches!((v, s), (Sym(v, 0), Some(s)) if v == s));
                    if !selfs {
                        self.missing.set(true);
                        return None;
                    }
                    self_call = true;
                    Sym(s, 0)
                }
                o => blocks(o),
            };
            ops.push(o);
        }
        self.finish_inst(cur, 0, x, ops, self_call, &xs[1..]);
        Some(())
    }

    /// A base or index register of a memory operand, one per member (all present or all
    /// absent, as `matches` made sure): the merged register.
    fn mem_part(
        &mut self,
        cur: Block,
        parts: impl Iterator<Item = Option<Reg>>,
    ) -> Option<Option<Reg>> {
        let parts: SmallVec<[Option<Reg>; 4]> = parts.collect();
        let Some(first) = parts[0] else {
            return Some(None);
        };
        let ops: SmallVec<[Operand; 4]> = parts
            .iter()
            .map(|r| r.map(Operand::Reg))
            .collect::<Option<_>>()?;
        let ty = self.cx.fs[0].reg_type(first);
        match self.value(cur, ty, &ops) {
            Operand::Reg(v) => Some(Some(v)),
            _ => None,
        }
    }

    /// The merged value of the members' operands `ops` (of type `ty`): the same one, or
    /// selects on the identifier added at the end of `cur`.
    fn value(&mut self, cur: Block, ty: Type, ops: &[Operand]) -> Operand {
        let vs: SmallVec<[Operand; 4]> = ops
            .iter()
            .enumerate()
            .map(|(k, &o)| self.translate(k, o))
            .collect();
        if vs.iter().all(|v| *v == vs[0]) {
            return vs[0];
        }
        let mut acc = vs[0];
        for (k, &v) in vs.iter().enumerate().skip(1) {
            if v == vs[0] {
                continue;
            }
            let flag = self.flag(k);
            let r = self.f.new_reg(ty);
            let i = self
                .f
                .make_inst(Opcode::Select, ty, &[r], &[Operand::Reg(flag), v, acc]);
            self.f.append_inst(cur, i);
            self.selects += 1;
            acc = Operand::Reg(r);
        }
        acc
    }

    /// End `cur` with a branch to `yes` in member `k`, else to `no`.
    fn branch_on(&mut self, cur: Block, k: usize, yes: Block, no: Block) {
        let flag = self.flag(k);
        let ty = self.f.reg_type(flag);
        let br = self.f.make_inst(
            Opcode::Brif,
            ty,
            &[],
            &[
                Operand::Pred(Cond::Ne),
                Operand::Reg(flag),
                Operand::Block(yes),
                Operand::Block(no),
            ],
        );
        self.f.append_inst(cur, br);
    }

    /// A register that is nonzero exactly in member `k`: the identifier itself for the
    /// second of a pair, else `icmp eq id, k` at the top of the entry block.
    fn flag(&mut self, k: usize) -> Reg {
        if self.n() == 2 && k == 1 {
            return self.id;
        }
        if let Some(&r) = self.flags.get(&k) {
            return r;
        }
        let r = self.f.new_reg(Type::I8);
        let i = self.f.make_inst(
            Opcode::Icmp,
            Type::I32,
            &[r],
            &[
                Operand::Pred(Cond::Eq),
                Operand::Reg(self.id),
                Operand::Int(k as i64),
            ],
        );
        // After the copy of the identifier.
        self.f.insert_inst(self.entry, 1, i);
        self.flags.insert(k, r);
        r
    }

    /// The merged body's register for `r` of member `k` (`None`, and the group is given up,
    /// if the body does not have it yet: `is_ssa` rules that out).
    fn reg(&self, k: usize, r: Reg) -> Option<Reg> {
        let v = self.map[k][r.index()].expand();
        if v.is_none() {
            self.missing.set(true);
        }
        v
    }

    /// Member `k`'s operand in the merged body (registers and stack objects mapped).
    fn translate(&self, k: usize, o: Operand) -> Operand {
        match o {
            Operand::Stack(s, d) => Operand::Stack(self.cx.stack[k][s.index()], d),
            mut o => {
                o.map_regs(|r| self.reg(k, r).unwrap_or(r));
                o
            }
        }
    }

    /// Add instruction `x` of member `k` with operands `ops` (translated) at the end of
    /// `cur`: fresh results (to which `others`, the instructions of members `1..` aligned
    /// with it, map too), its aux translated, a self-call made one.
    fn finish_inst(
        &mut self,
        cur: Block,
        k: usize,
        x: Inst,
        mut ops: Vec<Operand>,
        self_call: bool,
        others: &[Inst],
    ) {
        let src = self.cx.fs[k];
        let d = src.insts[x];
        let results: Vec<Reg> = src
            .results(x)
            .iter()
            .map(|&r| self.f.new_reg(src.reg_type(r)))
            .collect();
        if self_call {
            ops.push(Operand::Reg(self.id));
        }
        let i = self.f.make_inst(d.opcode, d.ty, &results, &ops);
        self.f.insts[i].aux = match d.opcode.format() {
            _ if self_call => self.self_sig.as_u32(),
            _ if k == 0 => d.aux,
            Format::Load | Format::Store => {
                let flags = src.memflags[MemFlagsRef::from_u32(d.aux)];
                self.f.intern_memflags(flags).as_u32()
            }
            Format::Call => {
                let sig = src.sigs[SigRef::from_u32(d.aux)].clone();
                self.f.sigs.push(sig).as_u32()
            }
            _ if d.opcode == Opcode::FuncAddr => {
                let sig = src.sigs[SigRef::from_u32(d.aux)].clone();
                self.f.sigs.push(sig).as_u32()
            }
            _ => d.aux,
        };
        if self_call {
            self.self_calls.push(i);
        }
        self.f.append_inst(cur, i);
        for (j, &r) in src.results(x).iter().enumerate() {
            self.map[k][r.index()] = results[j].into();
        }
        for (j, &y) in others.iter().enumerate() {
            let g = self.cx.fs[j + 1];
            for (q, &r) in g.results(y).iter().enumerate() {
                self.map[j + 1][r.index()] = results[q].into();
            }
        }
    }

    /// A run of unmatched instructions (member, instruction) after `cur`: branches on the
    /// identifier to each member's part, then a join block where the values used later pass
    /// through phis. Returns the join block.
    fn diamond(&mut self, cur: Block, run: &[(usize, Inst)]) -> Option<Block> {
        let n = self.n();
        let mut sides: Vec<Vec<Inst>> = vec![Vec::new(); n];
        for &(k, x) in run {
            sides[k].push(x);
        }
        let join = self.f.new_block();
        // Member `k` goes to its part, or straight to the join when it has none. The first
        // member is where the last test falls through; each other member whose target
        // differs from the first's is tested in turn, from the last.
        let tests: Vec<usize> = (1..n)
            .rev()
            .filter(|&k| !sides[k].is_empty() || !sides[0].is_empty())
            .collect();
        let dispatch: Vec<Block> = core::iter::once(cur)
            .chain((1..tests.len()).map(|_| self.f.new_block()))
            .collect();
        let targets: Vec<Block> = sides
            .iter()
            .map(|s| {
                if s.is_empty() {
                    join
                } else {
                    self.f.new_block()
                }
            })
            .collect();
        // The join's predecessors, and the member whose part each is (`None`: a branch
        // straight to it).
        let mut preds: Vec<(Block, Option<usize>)> = Vec::new();
        for (t, &k) in tests.iter().enumerate() {
            let next = dispatch.get(t + 1).copied().unwrap_or(targets[0]);
            self.branch_on(dispatch[t], k, targets[k], next);
            if targets[k] == join || next == join {
                preds.push((dispatch[t], None));
            }
        }
        let mut crossing: Vec<(usize, Reg)> = Vec::new();
        for (k, side) in sides.iter().enumerate() {
            if side.is_empty() {
                continue;
            }
            let src = self.cx.fs[k];
            let blk = targets[k];
            // Uses inside the run, to find the values used after it.
            let mut inside: HashMap<Reg, u32> = HashMap::default();
            for &x in side {
                for_each_use(src, x, |r| *inside.entry(r).or_default() += 1);
            }
            for &x in side {
                self.emit_one(blk, k, x);
                for &r in src.results(x) {
                    let all = self.uses[k][r.index()];
                    if all > inside.get(&r).copied().unwrap_or(0) {
                        crossing.push((k, r));
                    }
                }
            }
            let j = self
                .f
                .make_inst(Opcode::Jump, Type::VOID, &[], &[Operand::Block(join)]);
            self.f.append_inst(blk, j);
            preds.push((blk, Some(k)));
        }
        for (k, r) in crossing {
            let ty = self.cx.fs[k].reg_type(r);
            let zero = self.zero(ty)?;
            let v = self.translate(k, Operand::Reg(r));
            let ops: Vec<Operand> = preds
                .iter()
                .flat_map(|&(p, side)| [if side == Some(k) { v } else { zero }, Operand::Block(p)])
                .collect();
            let p = self.f.new_reg(ty);
            let i = self.f.make_inst(Opcode::Phi, ty, &[p], &ops);
            self.f.append_inst(join, i);
            self.map[k][r.index()] = p.into();
        }
        Some(join)
    }

    /// Make every read of a register see its definition in the body's CFG. Blocks of one
    /// member only, and branches to each member's own terminator, let a member reach a read
    /// of another member's value without passing its definition. Such a register is carried
    /// through phis at the iterated dominance frontier of its definition (Cytron et al.),
    /// with zero on the paths that do not define it: paths of the other members, which
    /// never read it there. Each read then sees the nearest definition above it in the
    /// dominator tree. `None` for a type with no zero (vectors).
    fn repair(&mut self) -> Option<()> {
        let cfg = Cfg::compute(&self.f);
        let dt = DomTree::compute(&cfg);
        let reachable = |b: Block| cfg.rpo_index[b] != u32::MAX;
        let mut def: Vec<Option<Block>> = vec![None; self.f.regs.len()];
        for &b in &cfg.rpo {
            for &i in self.f.block_insts(b) {
                for &r in self.f.results(i) {
                    def[r.index()] = Some(b);
                }
            }
        }
        // The reads of registers where their definition does not dominate the read (a phi
        // reads at the end of its predecessor): (register, block, instruction).
        let mut broken: Vec<(Reg, Block, Inst)> = Vec::new();
        for &b in &cfg.rpo {
            for &i in self.f.block_insts(b) {
                let ops = self.f.operands(i).unpacked();
                let phi = self.f.insts[i].opcode == Opcode::Phi;
                for (q, o) in ops.iter().enumerate() {
                    let at = match (phi, ops.get(q + 1)) {
                        (true, Some(Operand::Block(p))) if reachable(*p) => *p,
                        (true, _) => continue,
                        (false, _) => b,
                    };
                    for r in o.regs() {
                        if !def[r.index()].is_some_and(|d| dt.dominates(d, at)) {
                            broken.push((r, b, i));
                        }
                    }
                }
            }
        }
        if broken.is_empty() {
            return Some(());
        }
        broken.sort_unstable_by_key(|&(r, _, i)| (r, i));
        broken.dedup();
        // Dominance frontiers (Cooper, Harvey and Kennedy).
        let mut df: HashMap<Block, SmallVec<[Block; 4]>> = HashMap::default();
        for &b in &cfg.rpo {
            let preds = &cfg.preds[b];
            if preds.len() < 2 {
                continue;
            }
            let idom = dt.idom[b].expand();
            for &p in preds.iter().filter(|&&p| reachable(p)) {
                let mut x = Some(p);
                while let Some(y) = x.filter(|&y| Some(y) != idom) {
                    let f = df.entry(y).or_default();
                    if !f.contains(&b) {
                        f.push(b);
                    }
                    x = dt.idom[y].expand();
                }
            }
        }
        let mut new_phis: Vec<(Block, Inst)> = Vec::new();
        for reads in broken.chunk_by(|x, y| x.0 == y.0) {
            let r = reads[0].0;
            let ty = self.f.reg_type(r);
            let zero = self.zero(ty)?;
            let d = def[r.index()];
            // Phi blocks: the iterated dominance frontier of the definition.
            let mut phi_of: HashMap<Block, Reg> = HashMap::default();
            let mut work: Vec<Block> = d.into_iter().collect();
            while let Some(x) = work.pop() {
                for &y in df.get(&x).map(|v| v.as_slice()).unwrap_or(&[]) {
                    if let std::collections::hash_map::Entry::Vacant(v) = phi_of.entry(y) {
                        v.insert(self.f.new_reg(ty));
                        work.push(y);
                    }
                }
            }
            // The value at the end of block `x`.
            let at_end = |mut x: Block| loop {
                if Some(x) == d {
                    return Operand::Reg(r);
                }
                if let Some(&p) = phi_of.get(&x) {
                    return Operand::Reg(p);
                }
                match dt.idom[x].expand() {
                    Some(up) => x = up,
                    None => return zero,
                }
            };
            // The reads the definition does not dominate: in a block with a phi of `r`,
            // that phi; elsewhere the value at the end of the block's immediate dominator
            // (a phi reads at the end of its predecessor).
            for &(_, b, i) in reads {
                let here = match phi_of.get(&b) {
                    Some(&p) => Operand::Reg(p),
                    None => dt.idom[b].expand().map_or(zero, &at_end),
                };
                let mut ops = self.f.operands(i).to_vec();
                let phi = self.f.insts[i].opcode == Opcode::Phi;
                for q in 0..ops.len() {
                    let v = match (phi, ops.get(q + 1)) {
                        (true, Some(Operand::Block(p))) if reachable(*p) => at_end(*p),
                        (true, _) => continue,
                        (false, _) => here,
                    };
                    let Operand::Reg(v) = v else {
                        return None;
                    };
                    ops[q].map_regs(|s| if s == r { v } else { s });
                }
                self.f.set_operands(i, &ops);
            }
            for (&y, &p) in &phi_of {
                let ops: Vec<Operand> = cfg.preds[y]
                    .iter()
                    .filter(|&&q| reachable(q))
                    .flat_map(|&q| [at_end(q), Operand::Block(q)])
                    .collect();
                let i = self.f.make_inst(Opcode::Phi, ty, &[p], &ops);
                new_phis.push((y, i));
            }
        }
        // The new phis that something reads (a phi read only by phis that nothing reads is
        // dropped too).
        let mut uses: HashMap<Reg, u32> = HashMap::default();
        let count = |f: &Function, i: Inst, uses: &mut HashMap<Reg, u32>, by: i32| {
            for o in f.operands(i) {
                for r in o.regs() {
                    let u = uses.entry(r).or_default();
                    *u = u.wrapping_add_signed(by);
                }
            }
        };
        for &b in &self.f.layout {
            for &i in self.f.block_insts(b) {
                count(&self.f, i, &mut uses, 1);
            }
        }
        for &(_, i) in &new_phis {
            count(&self.f, i, &mut uses, 1);
        }
        let mut live = vec![true; new_phis.len()];
        loop {
            let mut changed = false;
            for (k, &(_, i)) in new_phis.iter().enumerate() {
                let r = self.f.results(i)[0];
                let read_by_self = self
                    .f
                    .operands(i)
                    .iter()
                    .filter(|o| matches!(o, Operand::Reg(s) if *s == r))
                    .count() as u32;
                if live[k] && uses.get(&r).copied().unwrap_or(0) == read_by_self {
                    live[k] = false;
                    changed = true;
                    count(&self.f, i, &mut uses, -1);
                }
            }
            if !changed {
                break;
            }
        }
        for (k, &(y, i)) in new_phis.iter().enumerate() {
            if live[k] {
                self.f.insert_inst(y, 0, i);
                self.repair_edges += self.f.operands(i).len() / 2;
            }
        }
        Some(())
    }

    /// The unmatched instruction `x` of member `k` at the end of `cur` (a call of the member
    /// to itself calls the body, passing the identifier on).
    fn emit_one(&mut self, cur: Block, k: usize, x: Inst) {
        self.emit_own(cur, k, x, |t| t);
    }

    /// Instruction `x` of member `k` alone at the end of `cur`, its block operands mapped by
    /// `target`.
    fn emit_own(&mut self, cur: Block, k: usize, x: Inst, target: impl Fn(Block) -> Block) {
        let src = self.cx.fs[k];
        let ops: Vec<Operand> = src
            .operands(x)
            .into_iter()
            .map(|o| match o {
                Operand::Block(t) => Operand::Block(target(t)),
                o => self.translate(k, o),
            })
            .collect();
        let self_call = src.insts[x].opcode.is_call()
            && matches!(ops.first(), Some(Operand::Sym(c, 0)) if Some(*c) == self.cx.sym[k]);
        self.finish_inst(cur, k, x, ops, self_call, &[]);
    }

    /// A register holding zero of type `ty`, defined at the top of the entry block (it
    /// dominates every block), for the sides of a diamond's phi that never read it. `None`
    /// for a type with no zero constant in LIR (vectors).
    fn zero(&mut self, ty: Type) -> Option<Operand> {
        if let Some(&r) = self.zeros.get(&ty) {
            return Some(Operand::Reg(r));
        }
        let c = match ty {
            Type::F32 => Operand::F32(0),
            Type::F64 => Operand::F64(0),
            t if t.class() == RegClass::Int && t.bytes() <= 8 => Operand::Int(0),
            _ => return None,
        };
        let r = self.f.new_reg(ty);
        let i = self.f.make_inst(Opcode::Copy, ty, &[r], &[c]);
        // After the copy of the identifier.
        self.f.insert_inst(self.entry, 1, i);
        self.zeros.insert(ty, r);
        Some(Operand::Reg(r))
    }
}

/// Call `each` with every register instruction `i` of `f` reads.
fn for_each_use(f: &Function, i: Inst, mut each: impl FnMut(Reg)) {
    for o in f.operands(i) {
        o.regs().for_each(&mut each);
    }
}

/// The number of reads of each register of `f`.
fn use_counts(f: &Function) -> Vec<u32> {
    let mut n = vec![0u32; f.regs.len()];
    for &b in f.layout.iter() {
        for &i in f.block_insts(b) {
            for_each_use(f, i, |r| n[r.index()] += 1);
        }
    }
    n
}

/// Add the merged body of `members` to `m`. Each member is folded away (its calls rewritten
/// to call the body with its identifier) when it is local, nothing observes its address and
/// those calls, an extra argument each, cost no more than a thunk; otherwise it becomes a
/// thunk that calls the body with its identifier. Returns the members folded, or `None` if
/// the body is not installed.
fn install(
    m: &mut Module,
    ps: &mut PassState,
    opts: &AlignedOptions,
    uses: &SymbolUses,
    members: &[FuncId],
    merged: Merged,
) -> Option<usize> {
    let name = fresh_name(m, "aligned", &m.functions[members[0]].name);
    let sym = m.symbol(&name, SymbolKind::Function);
    let mut body = merged.body;
    body.name = name.into();
    for &i in &merged.self_calls {
        body.set_operand(i, 0, Operand::Sym(sym, 0));
    }
    let sig = body.sig.clone();
    let id = m.add_function(body).expect("a fresh name");
    ps.record_edit(id, Edit::Modified);
    // A merged body is checked before any member gives its body up: one the verifier
    // rejects is a bug of this pass, and the members stay as they were.
    if let Err(e) = crate::verifier::verify_function(m, &m.functions[id], true) {
        debug_assert!(false, "merge-aligned made an invalid body:\n{e}");
        ps.remove_function(m, id);
        return None;
    }
    let c = &opts.cost;
    let mut folded = 0;
    for (k, &f) in members.iter().enumerate() {
        let member = m
            .lookup_symbol(&m.functions[f].name)
            .expect("a defined function has a symbol");
        let func = &m.functions[f];
        let sites = uses.calls.get(&member).copied().unwrap_or(0)
            + ps.external_calls.get(member).copied().unwrap_or(0);
        let fold = func.linkage == Linkage::Local
            && !func.address_significant
            && !opts.locals_named
            && !uses.observed.contains(&member)
            && c.per_extra_arg * sites as f64 <= c.thunk + c.per_extra_arg;
        let id_arg = Operand::Int(k as i64);
        let kind = if fold {
            ps.remove_function(m, f);
            m.symbols[member].def = None.into();
            ps.add_call_rewrite(
                member,
                CallRewrite {
                    shared: sym,
                    sig: sig.clone(),
                    extras: vec![ExtraArg::Const(Type::I32, id_arg)],
                },
            );
            folded += 1;
            MergeKind::Folded
        } else {
            make_thunk_with(m, ps, f, (sym, sig.clone()), 1, false, |t, b, ops| {
                let r = t.new_reg(Type::I32);
                let i = t.make_inst(Opcode::Copy, Type::I32, &[r], &[id_arg]);
                t.append_inst(b, i);
                ops.push(Operand::Reg(r));
            });
            MergeKind::Thunked
        };
        ps.merges.push(MergeRecord {
            merged: member,
            survivor: sym,
            kind,
            by: MergedBy::Aligned,
            callers_redirected: false,
        });
    }
    Some(folded)
}
