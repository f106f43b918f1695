//! The passes: `merge` (MergeFunctions), `merge-similar` (one body for functions equal up to
//! constants and callees), `lvn` (local value numbering), `gvn` (dominator-scoped value
//! numbering), `dce` (dead-code removal).

pub mod dce;
pub mod gvn;
pub mod lvn;
pub mod merge;

use crate::pass::Pass;
use crate::Error;

/// What passes may use besides the module.
#[derive(Clone, Copy, Debug, Default)]
pub struct PassOptions {
    /// Threads a pass may start (0 and 1: none).
    pub threads: usize,
    /// Local functions can be reached by name from outside the module (a JIT host may fetch
    /// any function it defined): `merge-similar` gives a folded local function a thunk.
    pub locals_named: bool,
}

/// A pass, as a value: what `--passes` names and what library users configure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassKind {
    /// MergeFunctions: functions equal under the comparator share one body.
    Merge,
    /// Functions equal up to constants and direct callees share one parameterised body.
    MergeSimilar,
    /// Local value numbering (seed 002), with store-to-load forwarding.
    Lvn,
    /// Value numbering scoped along the dominator tree.
    Gvn,
    /// Dead-code removal.
    Dce,
}

impl PassKind {
    /// Every pass, in the order they are usually run.
    pub const ALL: &'static [PassKind] = &[
        PassKind::Merge,
        PassKind::MergeSimilar,
        PassKind::Lvn,
        PassKind::Gvn,
        PassKind::Dce,
    ];

    /// The name used in `--passes` and in statistics.
    pub fn name(self) -> &'static str {
        match self {
            PassKind::Merge => "merge",
            PassKind::MergeSimilar => "merge-similar",
            PassKind::Lvn => "lvn",
            PassKind::Gvn => "gvn",
            PassKind::Dce => "dce",
        }
    }

    /// The pass named `name`.
    pub fn parse(name: &str) -> Option<PassKind> {
        PassKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// A new instance of the pass.
    pub fn create(self) -> Box<dyn Pass> {
        self.create_with(&PassOptions::default())
    }

    /// A new instance of the pass with `opts`.
    pub fn create_with(self, opts: &PassOptions) -> Box<dyn Pass> {
        match self {
            PassKind::Merge => Box::new(merge::Merge {
                opts: merge::MergeOptions {
                    threads: opts.threads.max(1),
                },
                ..Default::default()
            }),
            PassKind::MergeSimilar => Box::new(merge::MergeSimilar {
                opts: merge::SimilarOptions {
                    locals_named: opts.locals_named,
                    ..Default::default()
                },
            }),
            PassKind::Lvn => Box::<lvn::Lvn>::default(),
            PassKind::Gvn => Box::new(gvn::Gvn),
            PassKind::Dce => Box::new(dce::Dce),
        }
    }
}

/// Create a pass by its `--passes` name.
pub fn create(name: &str) -> Result<Box<dyn Pass>, Error> {
    PassKind::parse(name)
        .map(PassKind::create)
        .ok_or_else(|| Error::UnknownPass(name.to_string()))
}
