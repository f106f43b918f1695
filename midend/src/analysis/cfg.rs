//! Control-flow graph: predecessors, successors and reverse post-order of a function.

use crate::lir::{Block, Function};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntityRef, SecondaryMap};
use smallvec::SmallVec;

/// Predecessors and successors per block (each edge once per distinct pair), and the
/// reverse post-order of the blocks reachable from the entry.
#[derive(Clone, Debug, Default)]
pub struct Cfg {
    /// Predecessors of each block, each once, in layout order.
    pub preds: SecondaryMap<Block, SmallVec<[Block; 4]>>,
    /// Successors of each block, each once, in the order its terminator first names them.
    pub succs: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    /// Reachable blocks in reverse post-order; the entry first.
    pub rpo: Vec<Block>,
    /// Position of each block in `rpo` (u32::MAX when unreachable).
    pub rpo_index: SecondaryMap<Block, u32>,
}

impl Cfg {
    /// Computes the predecessors, successors and reverse post-order of `f`.
    pub fn compute(f: &Function) -> Cfg {
        let mut cfg = Cfg {
            preds: SecondaryMap::with_capacity(f.blocks.len()),
            succs: SecondaryMap::with_capacity(f.blocks.len()),
            rpo: Vec::with_capacity(f.layout.len()),
            rpo_index: SecondaryMap::with_default(u32::MAX),
        };
        // Each distinct target once per block: `added[s]` is the last block that added `s`
        // (a `br_table` may name one block many times; no search of the list so far).
        let mut added: SecondaryMap<Block, PackedOption<Block>> =
            SecondaryMap::with_capacity(f.blocks.len());
        for &b in &f.layout {
            if let Some(t) = f.terminator(b) {
                for s in f.branch_targets(t) {
                    if added[s].expand() != Some(b) {
                        added[s] = b.into();
                        cfg.succs[b].push(s);
                        cfg.preds[s].push(b);
                    }
                }
            }
        }
        // Iterative DFS for post-order.
        let Some(entry) = f.entry() else { return cfg };
        let mut visited: SecondaryMap<Block, bool> = SecondaryMap::with_capacity(f.blocks.len());
        let mut post = Vec::with_capacity(f.layout.len());
        let mut stack: Vec<(Block, usize)> = vec![(entry, 0)];
        visited[entry] = true;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            if let Some(&s) = cfg.succs[b].get(*i) {
                *i += 1;
                if !visited[s] {
                    visited[s] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(b);
                stack.pop();
            }
        }
        post.reverse();
        for (i, &b) in post.iter().enumerate() {
            cfg.rpo_index[b] = i as u32;
        }
        cfg.rpo = post;
        cfg
    }

    /// Only the reverse post-order of the blocks reachable from the entry (the same order as
    /// `compute(f).rpo`), without building predecessor and successor lists.
    pub fn reverse_post_order(f: &Function) -> Vec<Block> {
        let Some(entry) = f.entry() else {
            return Vec::new();
        };
        let n = f.blocks.len();
        // Each block's successors in first-target order, each once, listed when the search
        // first reaches the block (`added[s]`: the last block that listed `s`).
        let mut succs: Vec<Block> = Vec::new();
        let mut added: Vec<u32> = vec![u32::MAX; n];
        let mut list = |b: Block, succs: &mut Vec<Block>| -> (u32, u32) {
            let a = succs.len() as u32;
            if let Some(t) = f.terminator(b) {
                for s in f.branch_targets(t) {
                    if added[s.index()] != b.as_u32() {
                        added[s.index()] = b.as_u32();
                        succs.push(s);
                    }
                }
            }
            (a, succs.len() as u32 - a)
        };
        let mut visited = vec![false; n];
        let mut post = Vec::with_capacity(f.layout.len());
        // (block, its successors' range, successors already visited).
        let (a, c) = list(entry, &mut succs);
        let mut stack: Vec<(Block, u32, u32, u32)> = vec![(entry, a, c, 0)];
        visited[entry.index()] = true;
        while let Some(&mut (b, a, c, ref mut i)) = stack.last_mut() {
            let mut pushed = false;
            while *i < c {
                let s = succs[(a + *i) as usize];
                *i += 1;
                if !visited[s.index()] {
                    visited[s.index()] = true;
                    let (sa, sc) = list(s, &mut succs);
                    stack.push((s, sa, sc, 0));
                    pushed = true;
                    break;
                }
            }
            if !pushed {
                post.push(b);
                stack.pop();
            }
        }
        post.reverse();
        post
    }

    /// Is `b` reachable from the entry?
    pub fn is_reachable(&self, b: Block) -> bool {
        self.rpo_index[b] != u32::MAX
    }
}
