//! The passes: `merge` (MergeFunctions), `merge-similar` (one body for functions equal up to
//! constants and callees), `merge-aligned` (one body for pairs of functions whose blocks
//! align), `lvn` (local value numbering), `gvn` (dominator-scoped value numbering), `dce`
//! (dead-code removal).

pub mod aligned;
pub mod dce;
mod fold;
pub mod gvn;
pub mod lvn;
pub mod merge;
pub mod similar;

pub use fold::CostModel;

use crate::error::Error;
use crate::pass::{Pass, PassManager};

/// What passes may use besides the module.
#[derive(Clone, Debug, Default)]
pub struct PassOptions {
    /// Threads a pass may start (0 and 1: none).
    pub threads: usize,
    /// Local functions can be reached by name from outside the module (a JIT host may fetch
    /// any function it defined): `merge-similar` and `merge-aligned` give a folded local
    /// function a thunk.
    pub locals_named: bool,
    /// Functions the host marks hot (by name): `merge-aligned` never merges them, so that
    /// they run without branches on a function identifier.
    pub hot: Option<aligned::HotFunctions>,
}

/// A pass, as a value: what `--passes` names and what library users configure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassKind {
    /// MergeFunctions: functions equal under the comparator share one body.
    Merge,
    /// Functions equal up to constants and direct callees share one parameterised body.
    MergeSimilar,
    /// Pairs of functions whose instructions align share one body that branches and
    /// selects on a function identifier.
    MergeAligned,
    /// Hash-based local value numbering, with store-to-load forwarding.
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
        PassKind::MergeAligned,
        PassKind::Lvn,
        PassKind::Gvn,
        PassKind::Dce,
    ];

    /// The name used in `--passes` and in statistics.
    pub fn name(self) -> &'static str {
        match self {
            PassKind::Merge => "merge",
            PassKind::MergeSimilar => "merge-similar",
            PassKind::MergeAligned => "merge-aligned",
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
            PassKind::MergeSimilar => Box::new(similar::MergeSimilar {
                opts: similar::SimilarOptions {
                    locals_named: opts.locals_named,
                    ..Default::default()
                },
            }),
            PassKind::MergeAligned => Box::new(aligned::MergeAligned {
                opts: aligned::AlignedOptions {
                    hot: opts.hot.clone(),
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

/// Parse a pass list: pass names separated by commas (`merge,lvn`), or `none` alone for no
/// pass. An empty list or an empty name (`""`, `,`, `merge,,lvn`), an unknown name and `none`
/// beside other names are errors.
pub fn parse_pass_list(list: &str) -> Result<Vec<PassKind>, Error> {
    let list = list.trim();
    if list == "none" {
        return Ok(Vec::new());
    }
    let known = || {
        PassKind::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if list.is_empty() {
        return Err(Error::PassList(format!(
            "empty pass list (give pass names separated by commas, from {}; or `none`)",
            known()
        )));
    }
    let mut out = Vec::new();
    for (k, name) in list.split(',').map(str::trim).enumerate() {
        match name {
            "" => {
                return Err(Error::PassList(format!(
                    "empty pass name at position {} of `{list}`",
                    k + 1
                )))
            }
            "none" => {
                return Err(Error::PassList(format!(
                    "`none` must stand alone, not in `{list}`"
                )))
            }
            _ => out.push(PassKind::parse(name).ok_or_else(|| Error::UnknownPass(name.into()))?),
        }
    }
    Ok(out)
}

/// The pass manager made from pass names or kinds.
impl PassManager {
    /// Build from a pass list (`parse_pass_list`: `merge,lvn`, or `none`).
    pub fn from_names(list: &str) -> Result<Self, Error> {
        Ok(Self::from_kinds(&parse_pass_list(list)?))
    }

    /// Build from passes given as values.
    pub fn from_kinds(kinds: &[PassKind]) -> Self {
        Self::from_kinds_with(kinds, &PassOptions::default())
    }

    /// Build from passes given as values, with `opts`.
    pub fn from_kinds_with(kinds: &[PassKind], opts: &PassOptions) -> Self {
        let mut pm = PassManager::new();
        for k in kinds {
            pm.add(k.create_with(opts));
        }
        pm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of the error `parse_pass_list(list)` gives.
    fn list_error(list: &str) -> String {
        match parse_pass_list(list) {
            Ok(kinds) => panic!("`{list}` parsed as {kinds:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn pass_lists() {
        assert_eq!(parse_pass_list("none").unwrap(), []);
        assert_eq!(parse_pass_list(" none ").unwrap(), []);
        assert_eq!(parse_pass_list("merge").unwrap(), [PassKind::Merge]);
        assert_eq!(
            parse_pass_list("merge, lvn,gvn ,dce,merge-similar").unwrap(),
            [
                PassKind::Merge,
                PassKind::Lvn,
                PassKind::Gvn,
                PassKind::Dce,
                PassKind::MergeSimilar
            ]
        );
        assert_eq!(
            parse_pass_list("lvn,lvn").unwrap(),
            [PassKind::Lvn, PassKind::Lvn]
        );
    }

    /// Issue 13: `--passes ''`, `,` and `merge,,lvn` were accepted silently.
    #[test]
    fn empty_pass_lists_and_names_are_errors() {
        let empty = "empty pass list (give pass names separated by commas, from merge, \
                     merge-similar, merge-aligned, lvn, gvn, dce; or `none`)";
        assert_eq!(list_error(""), empty);
        assert_eq!(list_error("  "), empty);
        assert_eq!(list_error(","), "empty pass name at position 1 of `,`");
        assert_eq!(
            list_error("merge,,lvn"),
            "empty pass name at position 2 of `merge,,lvn`"
        );
        assert_eq!(
            list_error("merge,"),
            "empty pass name at position 2 of `merge,`"
        );
        assert_eq!(
            list_error(",lvn"),
            "empty pass name at position 1 of `,lvn`"
        );
        assert_eq!(
            list_error("merge, ,lvn"),
            "empty pass name at position 2 of `merge, ,lvn`"
        );
    }

    #[test]
    fn none_must_stand_alone() {
        assert_eq!(
            list_error("none,merge"),
            "`none` must stand alone, not in `none,merge`"
        );
        assert_eq!(
            list_error("merge,none"),
            "`none` must stand alone, not in `merge,none`"
        );
        assert_eq!(
            list_error("none,none"),
            "`none` must stand alone, not in `none,none`"
        );
    }

    #[test]
    fn unknown_pass_names() {
        assert!(matches!(
            parse_pass_list("merge,frob"),
            Err(Error::UnknownPass(n)) if n == "frob"
        ));
        assert!(matches!(
            parse_pass_list("Merge"),
            Err(Error::UnknownPass(n)) if n == "Merge"
        ));
        assert!(matches!(
            PassManager::from_names("merge,,lvn"),
            Err(Error::PassList(_))
        ));
        assert_eq!(
            PassManager::from_names("merge,lvn").unwrap().names(),
            ["merge", "lvn"]
        );
    }
}
