//! Control-flow graph: predecessors, successors and reverse post-order of a function.

use crate::lir::{Block, Function};
use cranelift_entity::{EntityRef, SecondaryMap};
use smallvec::SmallVec;

/// Predecessors and successors per block (each edge once per distinct pair), and the
/// reverse post-order of the blocks reachable from the entry.
#[derive(Clone, Debug, Default)]
pub struct Cfg {
    pub preds: SecondaryMap<Block, SmallVec<[Block; 4]>>,
    pub succs: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    /// Reachable blocks in reverse post-order; the entry first.
    pub rpo: Vec<Block>,
    /// Position of each block in `rpo` (u32::MAX when unreachable).
    pub rpo_index: SecondaryMap<Block, u32>,
}

impl Cfg {
    pub fn compute(f: &Function) -> Cfg {
        let mut cfg = Cfg {
            preds: SecondaryMap::with_capacity(f.blocks.len()),
            succs: SecondaryMap::with_capacity(f.blocks.len()),
            rpo: Vec::with_capacity(f.layout.len()),
            rpo_index: SecondaryMap::with_default(u32::MAX),
        };
        for &b in &f.layout {
            if let Some(t) = f.terminator(b) {
                for s in f.branch_targets(t) {
                    if !cfg.succs[b].contains(&s) {
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
        let mut visited = vec![false; f.blocks.len()];
        let mut post = Vec::with_capacity(f.layout.len());
        // (block, successors already visited), successors in first-target order, each once.
        let mut stack: Vec<(Block, usize)> = vec![(entry, 0)];
        let mut succs: SmallVec<[Block; 4]> = SmallVec::new();
        visited[entry.index()] = true;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            succs.clear();
            if let Some(t) = f.terminator(b) {
                for s in f.branch_targets(t) {
                    if !succs.contains(&s) {
                        succs.push(s);
                    }
                }
            }
            let mut pushed = false;
            while let Some(&s) = succs.get(*i) {
                *i += 1;
                if !visited[s.index()] {
                    visited[s.index()] = true;
                    stack.push((s, 0));
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

    pub fn is_reachable(&self, b: Block) -> bool {
        self.rpo_index[b] != u32::MAX
    }
}
