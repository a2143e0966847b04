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

/// A `hybrid A, B groups N1, N2` clause: a replex placed by the first
/// attributes of two other replexes at once (`docs/design/replex.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HybridDecl {
    /// The two replexes it shares, as replex numbers: 0 is the key
    /// subspace, `i >= 1` is `ReplexDecl::replexes[i - 1]`. Distinct.
    pub sides: [usize; 2],
    /// Per side, how many groups of contiguous intervals of that replex's
    /// first dimension the hybrid's dimension has; each divides that
    /// replex's interval count ([`SpaceDesc::replex_intervals`]).
    pub groups: [u32; 2],
}

/// The replex clauses of a replex space (API.md §12.1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplexDecl {
    /// The `replex` clauses, in order: each its attributes (indexes into
    /// `attrs`, never 0), hashable, without repeats; no two share their
    /// first attribute, which names the replex in `hybrid` clauses.
    pub replexes: Vec<Vec<usize>>,
    /// The `hybrid` clauses, in order; at most one per pair of replexes.
    pub hybrids: Vec<HybridDecl>,
    /// `with relaxed placement`: place like the paper, letting two copies
    /// of an object share a daemon when daemons are too few.
    pub relaxed: bool,
}

impl ReplexDecl {
    /// The copies of every object: the key subspace, each replex and each
    /// hybrid hold one.
    pub fn copies(&self) -> usize {
        1 + self.replexes.len() + self.hybrids.len()
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
    /// f: each region is held by `fault_tolerance + 1` daemons; in a
    /// replex space by one, and f (at most copies − 1) is how many
    /// failures the copies together survive.
    pub fault_tolerance: u32,
    /// About this many regions per subspace.
    pub partitions: u32,
    /// `with authorization`: objects carry a hidden secret and every access
    /// must be authorized (API.md §10).
    pub authorization: bool,
    /// `replex` and `hybrid` clauses: `Some` makes a replex space, which
    /// has no declared `subspaces` and no global indexes.
    #[serde(default)]
    pub replex: Option<ReplexDecl>,
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
        let replexes = self.replex.iter().flat_map(|r| r.replexes.iter().flatten());
        self.indexable(
            self.subspaces
                .iter()
                .flatten()
                .chain(replexes)
                .chain(&self.indexes),
        )
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

    /// The daemons holding each region: `f + 1`, or one in a replex space
    /// (there the parts are the copies).
    pub fn replicas_per_region(&self) -> usize {
        if self.replex.is_some() {
            1
        } else {
            self.fault_tolerance as usize + 1
        }
    }

    /// The attributes of replex number `side` (0: the key subspace `[0]`;
    /// `i >= 1`: the `i`-th `replex` clause), if it exists.
    pub fn replex_attrs(&self, side: usize) -> Option<&[usize]> {
        match side {
            0 => Some(&[0]),
            i => self.replex.as_ref()?.replexes.get(i - 1).map(Vec::as_slice),
        }
    }

    /// The interval count of the first dimension of replex number `side`
    /// as a new space lays it out: the partitions for the key subspace,
    /// [`crate::region::grid_for_partitions`]'s first count for a replex.
    /// A hybrid's groups coarsen this dimension.
    pub fn replex_intervals(&self, side: usize) -> Option<u32> {
        let attrs = self.replex_attrs(side)?;
        Some(if side == 0 {
            self.partitions.max(1)
        } else {
            crate::region::grid_for_partitions(self.partitions, attrs.len())[0]
        })
    }

    /// Every subspace's attribute indexes: the key subspace `[0]` first, then
    /// the declared subspaces in order (the order of `Space::subspaces`).
    pub fn all_subspaces(&self) -> Vec<Vec<usize>> {
        std::iter::once(vec![0])
            .chain(self.subspaces.iter().cloned())
            .collect()
    }
}
