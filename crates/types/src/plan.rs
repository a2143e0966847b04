//! Search planning: which subspace, which regions.
//! TODO(types helper): implement.

use crate::config::Space;
use crate::predicate::Check;

/// The regions a search contacts: all in one subspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchPlan {
    pub subspace: usize,
    /// Indexes into that subspace's `regions`.
    pub regions: Vec<usize>,
}

/// Picks the subspace whose regions intersecting the checks are fewest.
pub fn plan_search(space: &Space, checks: &[Check]) -> SearchPlan {
    let _ = (space, checks);
    unimplemented!()
}
