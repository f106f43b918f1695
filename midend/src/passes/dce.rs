//! Dead-code removal: deletes instructions without side effects whose results are unused,
//! iterating over a use-count worklist so chains of dead instructions go in one pass.

use crate::error::Error;
use crate::lir::{Function, Inst, Module, Reg};
use crate::pass::{Pass, Stats};
use crate::state::{Edit, PassState};
use cranelift_entity::SecondaryMap;

pub(crate) struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }
    fn run(
        &mut self,
        module: &mut Module,
        state: &mut PassState,
        stats: &mut Stats,
    ) -> Result<(), Error> {
        let mut removed = 0;
        for id in state.open_function_ids(module) {
            let n = dce_function(&mut module.functions[id]);
            if n > 0 {
                state.record_edit(id, Edit::Modified);
            }
            removed += n;
        }
        stats.add(crate::Counter::DceRemoved, removed as u64);
        Ok(())
    }
}

/// Remove dead instructions from `f`; returns how many were removed.
pub fn dce_function(f: &mut Function) -> usize {
    let mut uses: SecondaryMap<Reg, u32> = SecondaryMap::with_capacity(f.regs.len());
    let mut def: SecondaryMap<Reg, Option<Inst>> = SecondaryMap::with_capacity(f.regs.len());
    for &b in &f.layout {
        for &i in f.block_insts(b) {
            for op in f.operands(i) {
                for r in op.regs() {
                    uses[r] += 1;
                }
            }
            for &r in f.results(i) {
                def[r] = Some(i);
            }
        }
    }
    let mut dead: SecondaryMap<Inst, bool> = SecondaryMap::with_capacity(f.insts.len());
    let mut work: Vec<Inst> = Vec::new();
    let is_dead = |f: &Function, uses: &SecondaryMap<Reg, u32>, i: Inst| {
        f.is_removable(i) && f.results(i).iter().all(|&r| uses[r] == 0)
    };
    for &b in &f.layout {
        for &i in f.block_insts(b) {
            if is_dead(f, &uses, i) {
                dead[i] = true;
                work.push(i);
            }
        }
    }
    let mut count = 0;
    while let Some(i) = work.pop() {
        count += 1;
        let ops: Vec<Reg> = f.operands(i).iter().flat_map(|o| o.regs()).collect();
        for r in ops {
            uses[r] -= 1;
            if uses[r] == 0 {
                if let Some(d) = def[r] {
                    if !dead[d] && is_dead(f, &uses, d) {
                        dead[d] = true;
                        work.push(d);
                    }
                }
            }
        }
    }
    if count > 0 {
        f.retain_all_insts(|i| !dead[i]);
    }
    count
}
