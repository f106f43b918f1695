//! The search for groups: eligible functions, their CFG skeletons and MinHash fingerprints,
//! LSH buckets, the similarity screen, and the greedy grouping in module order (F3M's
//! candidates, HyFM's tiers).

use super::align::{merge_group, merge_pair_cfg, Aligned};
use super::codegen::for_each_use;
use super::{AlignedOptions, AlignedReport, Candidate, Rejected, BANDS};
use crate::hash::{finish, HashMap, HashSet};
use crate::lir::*;
use crate::state::*;
use cranelift_entity::EntityRef;

/// A group the search has made: its members, in the order of their identifiers, their
/// alignment and merged body.
pub(super) struct Group {
    pub(super) members: Vec<FuncId>,
    pub(super) aligned: Aligned,
}

/// The search: each candidate, in turn, joins the group or the single function among its
/// near neighbours with which it saves most (a pair, or a group one member larger), or waits
/// in the LSH buckets for a later one. Bounded per candidate: `2 × neighbours` bucket
/// entries looked at per band, `tries` groups or functions aligned with.
pub(super) fn find_groups(
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
pub(super) fn pair_differing_cfgs(
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
pub(super) struct SymbolUses {
    pub(super) observed: HashSet<Symbol>,
    pub(super) calls: HashMap<Symbol, u32>,
}

impl SymbolUses {
    pub(super) fn of(m: &Module, ps: &PassState) -> Self {
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
pub(super) fn eligible(f: &Function, opts: &AlignedOptions) -> bool {
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
pub(super) fn is_ssa(f: &Function) -> bool {
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
pub(super) fn block_positions(f: &Function) -> Vec<u32> {
    let mut pos = vec![u32::MAX; f.blocks.len()];
    for (k, &b) in f.layout.iter().enumerate() {
        pos[b.index()] = k as u32;
    }
    pos
}

/// The phis at the head of a block, and the rest.
pub(super) fn split_phis(f: &Function, b: Block) -> (&[Inst], &[Inst]) {
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
pub(super) fn skeleton(f: &Function, mut each: impl FnMut(u64)) -> Option<()> {
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
pub(super) fn same_skeleton(m: &Module, a: &Candidate, b: &Candidate) -> bool {
    a.skeleton == b.skeleton
        && a.skeleton_words == b.skeleton_words
        && m.functions[a.f].sig == m.functions[b.f].sig
}

pub(super) fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// MinHash of the function's shingles of three (opcode, type) pairs, in layout order.
pub(super) fn minhash(f: &Function) -> [u64; BANDS] {
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
pub(super) struct Tokens(pub(super) [u16; TOKEN_BUCKETS]);

pub(super) const TOKEN_BUCKETS: usize = 64;

impl Tokens {
    pub(super) fn of(f: &Function) -> Self {
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
    pub(super) fn similarity(&self, o: &Tokens) -> f64 {
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
pub(super) fn screen(
    m: &Module,
    a: &Candidate,
    b: &Candidate,
    opts: &AlignedOptions,
) -> Result<(), Rejected> {
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
pub(super) fn nearness(
    cands: &[Candidate],
    c: usize,
    o: u32,
    common: usize,
) -> (core::cmp::Reverse<usize>, u32, u32) {
    let size = cands[o as usize].size.abs_diff(cands[c].size);
    (core::cmp::Reverse(common), size, o)
}

/// Whether two functions' alias regions, global values and stack limits are the same: tables
/// whose entries refer to one another by index are shared only when equal (a merged body
/// keeps the first member's).
pub(super) fn same_tables(a: &Function, b: &Function) -> bool {
    a.regions == b.regions && same_globals(a, b) && a.stack_limit == b.stack_limit
}

/// The global values of `a` and `b` are the same, entry by entry (their memory flags by
/// content: each function has its own table of them). The merged body keeps `a`'s.
pub(super) fn same_globals(a: &Function, b: &Function) -> bool {
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
