//! The passes: `merge` (MergeFunctions), `lvn` (local value numbering), `gvn` (dominator-scoped
//! value numbering), `dce` (dead-code removal).

pub mod dce;
pub mod gvn;
pub mod lvn;
pub mod merge;

use crate::pass::Pass;
use crate::Error;

/// Create a pass by its `--passes` name.
pub fn create(name: &str) -> Result<Box<dyn Pass>, Error> {
    Ok(match name {
        "dce" => Box::new(dce::Dce),
        "lvn" => Box::new(lvn::Lvn),
        "merge" => Box::new(merge::Merge),
        "gvn" => Box::new(gvn::Gvn),
        _ => return Err(Error::UnknownPass(name.to_string())),
    })
}
