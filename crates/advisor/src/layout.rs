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
    /// Global indexes (SLIK). None in a replex layout.
    pub global_indexes: Vec<usize>,
    /// Whether the subspaces are replexes (Replex): the key subspace and
    /// each replex hold one copy of every object, and together they are
    /// the replicas (`replex` clauses, API.md §12.1). A space becomes a
    /// replex space, or stops being one, only by being created anew.
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

    /// The layout `space` has: its subspaces, or its replexes (its
    /// hybrids, which a layout does not model, left out; [`Layout::apply`]
    /// keeps them where it can), its local and
    /// global indexes.
    pub fn of_space(space: &SpaceDesc) -> Layout {
        match &space.replex {
            Some(decl) => Layout::new(decl.replexes.clone(), space.indexes.clone(), vec![], true),
            None => Layout::new(
                space.subspaces.clone(),
                space.indexes.clone(),
                space.global_indexes.iter().map(|g| g.attr).collect(),
                false,
            ),
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

    /// Whether `space` can take this layout only by being created anew:
    /// the layout is a replex layout and the space a space of subspaces,
    /// or the other way round (`relayout` keeps that kind, since the two
    /// replicate differently: one daemon per region against f + 1).
    pub fn converts(&self, space: &SpaceDesc) -> bool {
        self.replex != space.replex.is_some()
    }

    /// Whether the layout keeps `f + 1` copies of every object: always,
    /// except a replex layout with fewer replexes than f (the key subspace
    /// and each replex hold one copy).
    pub fn tolerates(&self, f: u32) -> bool {
        !self.replex || self.subspaces.len() >= f as usize
    }

    /// Whether a space of `f` tolerated failures can declare this layout:
    /// a replex layout has at least one replex, enough for f
    /// ([`Layout::tolerates`]), no global index, and no two replexes with
    /// the same first attribute (which names a replex in `hybrid` clauses).
    pub fn declarable(&self, f: u32) -> bool {
        if !self.replex {
            return true;
        }
        let mut firsts: Vec<usize> = self.subspaces.iter().map(|s| s[0]).collect();
        firsts.sort_unstable();
        firsts.dedup();
        !self.subspaces.is_empty()
            && self.tolerates(f)
            && self.global_indexes.is_empty()
            && firsts.len() == self.subspaces.len()
    }

    /// How many dimensions the subspaces have together.
    pub fn dimensions(&self) -> usize {
        self.subspaces.iter().map(Vec::len).sum()
    }

    /// `base` with this layout's parts (name, key, attributes, f and
    /// partitions unchanged; each global index with the space's
    /// partitions): its subspaces as `subspace` clauses, or as `replex`
    /// clauses in a replex layout, with every `hybrid` of `base` whose two
    /// replexes the layout keeps (the model does not price hybrids, but a
    /// relayout must not drop copies the operator declared).
    pub fn apply(&self, base: &SpaceDesc) -> SpaceDesc {
        let (subspaces, replex) = if self.replex {
            let decl = tessera_types::ReplexDecl {
                replexes: self.subspaces.clone(),
                hybrids: self.kept_hybrids(base),
                relaxed: base.replex.as_ref().is_some_and(|r| r.relaxed),
            };
            (Vec::new(), Some(decl))
        } else {
            (self.subspaces.clone(), None)
        };
        SpaceDesc {
            subspaces,
            indexes: self.indexes.clone(),
            global_indexes: self
                .global_indexes
                .iter()
                .map(|&attr| GlobalIndexDecl {
                    attr,
                    partitions: None,
                })
                .collect(),
            replex,
            ..base.clone()
        }
    }

    /// The hybrids of `base` (a replex space) both of whose replexes this
    /// replex layout has, their sides renumbered to its replexes (replex
    /// 0, the key subspace, is always kept).
    fn kept_hybrids(&self, base: &SpaceDesc) -> Vec<tessera_types::HybridDecl> {
        let Some(decl) = &base.replex else {
            return Vec::new();
        };
        let renumber = |side: usize| -> Option<usize> {
            if side == 0 {
                return Some(0);
            }
            let attrs = decl.replexes.get(side - 1)?;
            let mut sorted = attrs.clone();
            sorted.sort_unstable();
            self.subspaces
                .iter()
                .position(|s| *s == sorted)
                .map(|i| i + 1)
        };
        decl.hybrids
            .iter()
            .filter_map(|h| {
                Some(tessera_types::HybridDecl {
                    sides: [renumber(h.sides[0])?, renumber(h.sides[1])?],
                    groups: h.groups,
                })
            })
            .collect()
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
    /// `format_space` writes, which `parse_space` reads back.
    pub fn describe(&self, base: &SpaceDesc) -> String {
        format_space(&self.apply(base))
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
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
        // A replex layout writes `replex` clauses, and reads back as the
        // same layout, a replex space.
        let replex = Layout::new(vec![vec![3], vec![1]], vec![2], vec![], true);
        let text = replex.describe(&base);
        let parsed = parse_space(&text).expect("the description parses");
        assert!(text.contains("replex city"), "{text}");
        let decl = parsed.replex.as_ref().expect("a replex space");
        assert_eq!(decl.replexes, vec![vec![1], vec![3]]);
        assert!(parsed.subspaces.is_empty() && parsed.global_indexes.is_empty());
        assert!(!replex.converts(&parsed) && replex.converts(&base));
        let back = Layout::new(decl.replexes.clone(), parsed.indexes.clone(), vec![], true);
        assert_eq!(back, replex);
    }

    /// Applying a replex layout keeps the space's hybrids whose two
    /// replexes stay, renumbered, and drops those whose replex goes.
    #[test]
    fn hybrids_stay_with_their_replexes() {
        let base = parse_space(
            "space s key k attributes a, b, c replex b replex a hybrid b, a groups 2, 2 \
             hybrid k, a groups 2, 2 create 4 partitions tolerate 1 failure",
        )
        .unwrap();
        let decl = base.replex.as_ref().unwrap();
        assert_eq!(decl.hybrids.len(), 2);
        let same = Layout::of_space(&base);
        let applied = same.apply(&base);
        assert_eq!(applied.replex.as_ref().unwrap().hybrids.len(), 2);
        let text = same.describe(&base);
        let parsed = parse_space(&text).expect("the description parses");
        assert_eq!(parsed.replex.as_ref().unwrap().hybrids.len(), 2, "{text}");
        assert_eq!(Layout::of_space(&parsed), same);
        // The layout's replexes are sorted: a (1) then b (2); `b, a` is
        // now sides 2 and 1, `k, a` sides 0 and 1.
        let kept = &applied.replex.as_ref().unwrap().hybrids;
        assert_eq!(kept[0].sides, [2, 1]);
        assert_eq!(kept[1].sides, [0, 1]);
        // Without replex b, only the hybrid of the key subspace and a stays.
        let without_b = Layout::new(vec![vec![1], vec![3]], vec![], vec![], true);
        let hybrids = without_b.apply(&base).replex.unwrap().hybrids;
        assert_eq!(hybrids.len(), 1);
        assert_eq!(hybrids[0].sides, [0, 1]);
        parse_space(&without_b.describe(&base)).expect("the description parses");
    }

    #[test]
    fn only_declarable_replex_layouts_are_declarable() {
        let replex = |subspaces: Vec<Vec<usize>>, globals: Vec<usize>| {
            Layout::new(subspaces, vec![], globals, true)
        };
        assert!(replex(vec![vec![1], vec![2, 3]], vec![]).declarable(2));
        // Fewer replexes than f: too few copies.
        assert!(!replex(vec![vec![1]], vec![]).declarable(2));
        assert!(replex(vec![vec![1]], vec![]).declarable(1));
        // No replex at all is a space of subspaces, not a replex space.
        assert!(!replex(vec![], vec![]).declarable(0));
        // A replex space has no global index.
        assert!(!replex(vec![vec![1]], vec![2]).declarable(1));
        // Two replexes named by the same first attribute.
        assert!(!replex(vec![vec![1], vec![1, 2]], vec![]).declarable(1));
        // Any layout of subspaces is.
        assert!(Layout::new(vec![vec![1], vec![1, 2]], vec![], vec![2], false).declarable(2));
    }
}
