//! Newtypes for identifiers and counters, so that arguments cannot be swapped.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A daemon's instance id: assigned by the coordinator, never reused.
    DaemonId, "d"
);
id_type!(
    /// A space's id: assigned by the coordinator, never reused.
    SpaceId, "s"
);
id_type!(
    /// A region's id: unique across all spaces and subspaces, never reused.
    RegionId, "r"
);
id_type!(
    /// A layout part's id (a subspace, a local index): the key subspace of
    /// every space is part 0; every other part gets a fresh id from the
    /// coordinator's counter, never reused, so removing one part does not
    /// renumber the others and an index id alone names its index (as
    /// HyperDex's `rm_index(idxid)` expects).
    PartId, "p"
);
id_type!(
    /// The number of a configuration. Strictly increases with every change.
    Epoch, "e"
);
id_type!(
    /// The version of one key's object, assigned by its point leader (see
    /// [`Version::next`]).
    Version, "v"
);

impl Version {
    /// How many versions one key may take within one epoch before its
    /// versions run into the next epoch's floor.
    pub const PER_EPOCH: u64 = 1 << 32;

    /// The version a point leader in `epoch` gives the update that follows
    /// `prev`: one more, and at least the epoch's *floor* (`epoch ×
    /// 2³²`). The floor makes a new point leader's versions exceed every
    /// version an earlier one issued — also one it issued, sent down the
    /// chain and then lost with every key-region replica (beyond f) — so a
    /// region that kept such an orphan can never take it for newer than
    /// what the key subspace writes next, and anti-entropy's repair, a
    /// write at a fresh version, always supersedes it.
    pub fn next(prev: Option<Version>, epoch: Epoch) -> Version {
        Version(
            prev.map_or(1, |v| v.0.saturating_add(1))
                .max(Self::floor(epoch).0),
        )
    }

    /// The least version a point leader in `epoch` issues: every version
    /// below it was issued in an earlier epoch.
    pub fn floor(epoch: Epoch) -> Version {
        Version(epoch.0.saturating_mul(Self::PER_EPOCH))
    }

    /// The epoch whose range this version lies in: the latest epoch in
    /// which it can have been issued.
    pub fn epoch(self) -> Epoch {
        Epoch(self.0 / Self::PER_EPOCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_grow_and_a_later_epoch_exceeds_everything_an_earlier_one_issued() {
        let first = Version::next(None, Epoch(3));
        assert_eq!(first, Version(3 * Version::PER_EPOCH));
        let second = Version::next(Some(first), Epoch(3));
        assert_eq!(second, Version(first.0 + 1));
        // However many versions epoch 3 issued (below its share), the
        // next epoch starts above them all.
        let busy = Version(4 * Version::PER_EPOCH - 1);
        assert!(Version::next(None, Epoch(4)) > busy);
        assert_eq!(Version::next(Some(busy), Epoch(4)), Version(busy.0 + 1));
        // An update that follows a version from a later epoch (a stale
        // point leader's view) still moves forward.
        let later = Version(9 * Version::PER_EPOCH + 5);
        assert_eq!(Version::next(Some(later), Epoch(4)), Version(later.0 + 1));
        assert_eq!(Version::next(None, Epoch(0)), Version(1));
    }
}
