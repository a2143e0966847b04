//! A candidate layout: the parts the advisor may give a space.

use serde::{Deserialize, Serialize};
use tessera_types::{format_space, GlobalIndexDecl, SpaceDesc};

/// The parts of a space beside its key subspace, as the advisor proposes
/// them. Attributes are indexes into the space's `attrs`.
///
/// Invariants (kept by [`Layout::new`]): every list is sorted and without
/// repeats, each subspace is sorted and non-empty, and no local index
/// names an attribute some subspace has (every region already indexes
/// those, `SpaceDesc::indexed_attrs`). So equal layouts compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Layout {
    /// The declared subspaces (replexes when `replex` is set).
    pub subspaces: Vec<Vec<usize>>,
    /// Local indexes (`index a` clauses).
    pub indexes: Vec<usize>,
    /// Global indexes (SLIK). Modelled ahead of the feature: Tessera does
    /// not build them yet.
    pub global_indexes: Vec<usize>,
    /// Whether the subspaces are replexes (Replex): the key subspace and
    /// each replex hold one copy of every object, and together they are
    /// the replicas. Modelled ahead of the feature.
    pub replex: bool,
}

impl Layout {
    /// A layout in canonical form (see the type's invariants).
    pub fn new(
        subspaces: Vec<Vec<usize>>,
        indexes: Vec<usize>,
        global_indexes: Vec<usize>,
        replex: bool,
    ) -> Layout {
        let mut subspaces: Vec<Vec<usize>> = subspaces
            .into_iter()
            .map(|mut s| {
                s.sort_unstable();
                s.dedup();
                s
            })
            .filter(|s| !s.is_empty())
            .collect();
        subspaces.sort();
        subspaces.dedup();
        let mut indexes: Vec<usize> = indexes
            .into_iter()
            .filter(|a| !subspaces.iter().any(|s| s.contains(a)))
            .collect();
        indexes.sort_unstable();
        indexes.dedup();
        let mut global_indexes = global_indexes;
        global_indexes.sort_unstable();
        global_indexes.dedup();
        Layout {
            subspaces,
            indexes,
            global_indexes,
            replex,
        }
    }

    /// Only subspaces (the thesis's configurations).
    pub fn of_subspaces(subspaces: Vec<Vec<usize>>) -> Layout {
        Layout::new(subspaces, Vec::new(), Vec::new(), false)
    }

    /// The attributes every region indexes: those of a subspace or a local
    /// index (the key excepted), ascending, as `SpaceDesc::indexed_attrs`
    /// finds them.
    pub fn indexed_attrs(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .subspaces
            .iter()
            .flatten()
            .chain(&self.indexes)
            .copied()
            .filter(|&a| a != 0)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether the layout needs a part Tessera does not build yet (a
    /// replex; global indexes exist).
    pub fn ahead_of_features(&self) -> bool {
        self.replex
    }

    /// How many dimensions the subspaces have together.
    pub fn dimensions(&self) -> usize {
        self.subspaces.iter().map(Vec::len).sum()
    }

    /// `base` with this layout's subspaces, local indexes and global
    /// indexes (name, key, attributes, f and partitions unchanged; each
    /// global index with the space's partitions). Replexes have no place in
    /// `SpaceDesc` yet; see [`Layout::describe`].
    pub fn apply(&self, base: &SpaceDesc) -> SpaceDesc {
        SpaceDesc {
            subspaces: self.subspaces.clone(),
            indexes: self.indexes.clone(),
            global_indexes: self
                .global_indexes
                .iter()
                .map(|&attr| GlobalIndexDecl {
                    attr,
                    partitions: None,
                })
                .collect(),
            ..base.clone()
        }
    }

    /// Its parts in short, for tables: `subspace city, addr; index tel`,
    /// or `key subspace only`.
    pub fn summary(&self, space: &SpaceDesc) -> String {
        let name = |a: &usize| space.attrs[*a].name.clone();
        let subspace = if self.replex { "replex" } else { "subspace" };
        let parts: Vec<String> = self
            .subspaces
            .iter()
            .map(|s| {
                format!(
                    "{subspace} {}",
                    s.iter().map(name).collect::<Vec<_>>().join(", ")
                )
            })
            .chain(self.indexes.iter().map(|a| format!("index {}", name(a))))
            .chain(
                self.global_indexes
                    .iter()
                    .map(|a| format!("global index {}", name(a))),
            )
            .collect();
        if parts.is_empty() {
            "key subspace only".to_string()
        } else {
            parts.join("; ")
        }
    }

    /// The layout as a one-line space description of `base`: what
    /// `format_space` writes, which `parse_space` reads back, but that a
    /// replex layout writes its subspaces as the `replex` clauses API.md
    /// §12.1 reserves, which no parser takes yet.
    pub fn describe(&self, base: &SpaceDesc) -> String {
        let text = format_space(&self.apply(base));
        let mut lines: Vec<String> = Vec::new();
        for line in text.lines().map(str::trim) {
            if self.replex {
                if let Some(attrs) = line.strip_prefix("subspace ") {
                    lines.push(format!("replex {attrs}"));
                    continue;
                }
            }
            lines.push(line.to_string());
        }
        lines.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    #[test]
    fn canonical_form_sorts_and_drops_indexes_a_subspace_covers() {
        let a = Layout::new(
            vec![vec![3, 1], vec![2], vec![1, 3]],
            vec![2, 4, 4],
            vec![],
            false,
        );
        assert_eq!(a.subspaces, vec![vec![1, 3], vec![2]]);
        assert_eq!(a.indexes, vec![4]);
        assert_eq!(a.indexed_attrs(), vec![1, 2, 3, 4]);
        assert_eq!(a.dimensions(), 3);
    }

    #[test]
    fn a_description_of_subspaces_and_indexes_parses_back_to_the_layout() {
        let base = parse_space(
            "space h key id attributes string city, int price, string addr subspace addr tolerate 2 failures create 16 partitions",
        )
        .unwrap();
        let layout = Layout::new(vec![vec![1, 2]], vec![3], vec![], false);
        let text = layout.describe(&base);
        assert!(!text.contains('\n'), "{text}");
        let parsed = parse_space(&text).expect("the description parses");
        assert_eq!(parsed.subspaces, vec![vec![1, 2]]);
        assert_eq!(parsed.indexes, vec![3]);
        assert_eq!((parsed.fault_tolerance, parsed.partitions), (2, 16));
        let global = Layout::new(vec![vec![1]], vec![], vec![3], false);
        let parsed = parse_space(&global.describe(&base)).expect("the description parses");
        assert_eq!(parsed.global_indexes.len(), 1);
        assert_eq!(parsed.global_indexes[0].attr, 3);
        let future = Layout::new(vec![vec![1]], vec![], vec![3], true);
        let text = future.describe(&base);
        assert!(text.contains("replex city"), "{text}");
        assert!(text.contains("global index addr"), "{text}");
    }
}
