//! A space's validated schema.

use crate::value::DataType;
use serde::{Deserialize, Serialize};

/// One attribute of a space.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    /// A valid name (API.md §8.1), unique within the space.
    pub name: String,
    /// The attribute's type.
    pub dtype: DataType,
}

/// A `global index ATTR [create N partitions]` clause (API.md §12.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalIndexDecl {
    /// The indexed attribute, an index into `attrs` (never 0): a string,
    /// int, float or timestamp.
    pub attr: usize,
    /// Its initial number of indexlets; `None`: the space's `partitions`.
    pub partitions: Option<u32>,
}

impl GlobalIndexDecl {
    /// Its initial number of indexlets in a space of `desc`.
    pub fn indexlets(&self, desc: &SpaceDesc) -> u32 {
        self.partitions.unwrap_or(desc.partitions).max(1)
    }
}

/// A validated space description (API.md §8).
///
/// Invariants: `attrs[0]` is the key and is hashable; names are unique;
/// every subspace lists hashable non-key attribute indexes without repeats;
/// `partitions >= 1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceDesc {
    /// The space's name (a valid name, API.md §8.1).
    pub name: String,
    /// `attrs[0]` is the key attribute, then the declared attributes in order.
    pub attrs: Vec<Attribute>,
    /// The declared subspaces (not including the key subspace), as indexes
    /// into `attrs` (never 0).
    pub subspaces: Vec<Vec<usize>>,
    /// The `index` clauses, as indexes into `attrs`.
    pub indexes: Vec<usize>,
    /// The `global index` clauses, in order.
    #[serde(default)]
    pub global_indexes: Vec<GlobalIndexDecl>,
    /// f: each region is held by `fault_tolerance + 1` daemons.
    pub fault_tolerance: u32,
    /// About this many regions per subspace.
    pub partitions: u32,
    /// `with authorization`: objects carry a hidden secret and every access
    /// must be authorized (API.md §10).
    pub authorization: bool,
}

impl SpaceDesc {
    /// The key attribute, `attrs[0]`.
    pub fn key(&self) -> &Attribute {
        &self.attrs[0]
    }

    /// The index of the attribute with this name, if any.
    pub fn attr_index(&self, name: &str) -> Option<usize> {
        self.attrs.iter().position(|a| a.name == name)
    }

    /// The attributes every region of the space indexes, ascending: those
    /// named by a subspace or an `index` clause, except the key, whose type
    /// has a coordinate (is hashable).
    pub fn indexed_attrs(&self) -> Vec<usize> {
        self.indexable(self.subspaces.iter().flatten().chain(&self.indexes))
    }

    /// Those of `attrs` an index can hold, ascending and once each: not the
    /// key, and of a type that has a coordinate (is hashable).
    pub fn indexable<'a>(&self, attrs: impl IntoIterator<Item = &'a usize>) -> Vec<usize> {
        let mut out: Vec<usize> = attrs
            .into_iter()
            .copied()
            .filter(|&a| a != 0 && self.attrs.get(a).is_some_and(|x| x.dtype.is_hashable()))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every subspace's attribute indexes: the key subspace `[0]` first, then
    /// the declared subspaces in order (the order of `Space::subspaces`).
    pub fn all_subspaces(&self) -> Vec<Vec<usize>> {
        std::iter::once(vec![0])
            .chain(self.subspaces.iter().cloned())
            .collect()
    }
}
