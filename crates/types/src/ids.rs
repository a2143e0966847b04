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
    /// The number of a configuration. Strictly increases with every change.
    Epoch, "e"
);
id_type!(
    /// The version of one key's object, assigned by its point leader; the
    /// first write of a key has version 1.
    Version, "v"
);
