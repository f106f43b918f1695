//! Dominator tree (Cooper, Harvey and Kennedy's iterative algorithm over reverse post-order),
//! with pre/post numbers for O(1) dominance queries.

use super::cfg::Cfg;
use crate::lir::Block;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;

/// The dominator tree of the blocks reachable from the entry, with each block's pre- and
/// post-order number in the tree for O(1) dominance queries.
#[derive(Clone, Debug, Default)]
pub struct DomTree {
    /// Immediate dominator (none for the entry and unreachable blocks).
    pub idom: SecondaryMap<Block, PackedOption<Block>>,
    /// Children in the dominator tree, in RPO order.
    pub children: SecondaryMap<Block, Vec<Block>>,
    pre: SecondaryMap<Block, u32>,
    post: SecondaryMap<Block, u32>,
}

impl DomTree {
    /// Computes the dominator tree of the blocks in `cfg.rpo`.
    pub fn compute(cfg: &Cfg) -> DomTree {
        let mut dt = DomTree::default();
        let Some(&entry) = cfg.rpo.first() else {
            return dt;
        };
        let n = cfg.rpo.len();
        // idom by RPO index; u32::MAX = undefined.
        let mut idom = vec![u32::MAX; n];
        idom[0] = 0;
        let mut changed = true;
        while changed {
            changed = false;
            for i in 1..n {
                let b = cfg.rpo[i];
                let mut new = u32::MAX;
                for &p in &cfg.preds[b] {
                    let pi = cfg.rpo_index[p];
                    if pi == u32::MAX || idom[pi as usize] == u32::MAX {
                        continue;
                    }
                    new = if new == u32::MAX {
                        pi
                    } else {
                        intersect(&idom, pi, new)
                    };
                }
                if new != idom[i] {
                    idom[i] = new;
                    changed = true;
                }
            }
        }
        for (i, &b) in cfg.rpo.iter().enumerate().skip(1) {
            let d = cfg.rpo[idom[i] as usize];
            dt.idom[b] = d.into();
            dt.children[d].push(b);
        }
        // Pre/post numbering by DFS over the tree.
        let mut counter = 0u32;
        let mut stack = vec![(entry, 0usize)];
        dt.pre[entry] = counter;
        counter += 1;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            if let Some(&c) = dt.children[b].get(*i) {
                *i += 1;
                dt.pre[c] = counter;
                counter += 1;
                stack.push((c, 0));
            } else {
                dt.post[b] = counter;
                counter += 1;
                stack.pop();
            }
        }
        dt
    }

    /// Does `a` dominate `b`? Both must be reachable.
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
    }
}

fn intersect(idom: &[u32], mut a: u32, mut b: u32) -> u32 {
    while a != b {
        while a > b {
            a = idom[a as usize];
        }
        while b > a {
            b = idom[b as usize];
        }
    }
    a
}
