//! A candidate layout: the parts the advisor may give a space.

use serde::{Deserialize, Serialize};
use tessera_types::{format_space, GlobalIndexDecl, HybridDecl, SpaceDesc};

/// A hybrid of a replex layout (API.md §12.1, `docs/design/replex.md`):
/// one more copy of every object, placed by the first attributes of two
/// of the layout's sides, each coarsened to a number of groups of that
/// side's intervals. A side is the key subspace, `[0]`, or one of the
/// layout's replexes, named by its attributes as the layout keeps them.
/// The order of the sides is the order of the hybrid's dimensions, as
/// declared. Invariants (kept by [`Layout::with_hybrids`]): two different
/// sides, both in the layout, and at most one hybrid per pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Hybrid {
    /// Its two sides: `[0]` the key subspace, else a replex's attributes.
    pub sides: [Vec<usize>; 2],
    /// Per side, the groups of that side's intervals its dimension has.
    pub groups: [u32; 2],
}

/// The parts of a space beside its key subspace, as the advisor proposes
/// them. Attributes are indexes into the space's `attrs`.
///
/// Invariants (kept by [`Layout::new`]): every list is sorted and without
/// repeats, each subspace is sorted (a replex keeps its declared order,
/// since its first attribute places it) and non-empty, and no local index
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
    /// The hybrids of a replex layout (`hybrid` clauses); none otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hybrids: Vec<Hybrid>,
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
                if replex {
                    // A replex's first attribute places it (and names it in
                    // `hybrid` clauses): its order is kept, repeats dropped.
                    let mut seen = Vec::with_capacity(s.len());
                    s.retain(|a| {
                        let new = !seen.contains(a);
                        seen.push(*a);
                        new
                    });
                } else {
                    s.sort_unstable();
                    s.dedup();
                }
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
            hybrids: Vec::new(),
        }
    }

    /// The layout with `hybrids` added to its own, in canonical form
    /// (sorted): only hybrids of a replex layout both of whose sides it
    /// has, the first of each pair kept.
    #[must_use]
    pub fn with_hybrids(mut self, hybrids: impl IntoIterator<Item = Hybrid>) -> Layout {
        if !self.replex {
            self.hybrids.clear();
            return self;
        }
        let all: Vec<Hybrid> = std::mem::take(&mut self.hybrids)
            .into_iter()
            .chain(hybrids)
            .collect();
        for h in all {
            let has = |side: &Vec<usize>| *side == [0] || self.subspaces.contains(side);
            let [a, b] = &h.sides;
            if a != b && has(a) && has(b) && !self.has_hybrid(a, b) {
                self.hybrids.push(h);
            }
        }
        self.hybrids.sort();
        self
    }

    /// Whether a hybrid of the layout joins sides `a` and `b`, in either
    /// order.
    pub fn has_hybrid(&self, a: &[usize], b: &[usize]) -> bool {
        self.hybrids.iter().any(|h| {
            let [x, y] = &h.sides;
            (x == a && y == b) || (x == b && y == a)
        })
    }

    /// The hybrids `decl` declares, named by their sides' attributes
    /// (in declared order, as a layout keeps its replexes).
    fn hybrids_of(decl: &tessera_types::ReplexDecl) -> Vec<Hybrid> {
        let side = |i: usize| -> Option<Vec<usize>> {
            if i == 0 {
                return Some(vec![0]);
            }
            decl.replexes.get(i - 1).cloned()
        };
        decl.hybrids
            .iter()
            .filter_map(|h| {
                Some(Hybrid {
                    sides: [side(h.sides[0])?, side(h.sides[1])?],
                    groups: h.groups,
                })
            })
            .collect()
    }

    /// The layout with every hybrid of `base` (a replex space) whose two
    /// sides it has: what [`Layout::apply`] gives `base`, since a relayout
    /// must not drop copies the operator declared for recovery.
    #[must_use]
    pub fn keeping(&self, base: &SpaceDesc) -> Layout {
        match &base.replex {
            Some(decl) => self.clone().with_hybrids(Layout::hybrids_of(decl)),
            None => self.clone(),
        }
    }

    /// The layout `space` has: its subspaces, or its replexes and
    /// hybrids, its local and global indexes.
    pub fn of_space(space: &SpaceDesc) -> Layout {
        match &space.replex {
            Some(decl) => Layout::new(decl.replexes.clone(), space.indexes.clone(), vec![], true)
                .with_hybrids(Layout::hybrids_of(decl)),
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
    /// except a replex layout with fewer replexes and hybrids than f (the
    /// key subspace, each replex and each hybrid hold one copy).
    pub fn tolerates(&self, f: u32) -> bool {
        !self.replex || self.subspaces.len() + self.hybrids.len() >= f as usize
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
    /// partitions unchanged; a global index `base` declares keeps its
    /// declaration, a new one has the space's partitions): its subspaces
    /// as `subspace` clauses, or as `replex`
    /// clauses in a replex layout with its hybrids and every `hybrid` of
    /// `base` whose two replexes the layout keeps ([`Layout::keeping`]: a
    /// relayout must not drop copies the operator declared).
    pub fn apply(&self, base: &SpaceDesc) -> SpaceDesc {
        let (subspaces, replex) = if self.replex {
            let decl = tessera_types::ReplexDecl {
                replexes: self.subspaces.clone(),
                hybrids: self.keeping(base).hybrid_decls(),
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
                .map(|&attr| {
                    base.global_indexes
                        .iter()
                        .find(|g| g.attr == attr)
                        .copied()
                        .unwrap_or(GlobalIndexDecl {
                            attr,
                            partitions: None,
                        })
                })
                .collect(),
            replex,
            ..base.clone()
        }
    }

    /// Its hybrids as `hybrid` clauses, sides numbered as its replexes
    /// (0 the key subspace, `i` the `i`-th replex).
    fn hybrid_decls(&self) -> Vec<HybridDecl> {
        let number = |side: &Vec<usize>| -> Option<usize> {
            if *side == [0] {
                return Some(0);
            }
            self.subspaces.iter().position(|s| s == side).map(|i| i + 1)
        };
        self.hybrids
            .iter()
            .filter_map(|h| {
                Some(HybridDecl {
                    sides: [number(&h.sides[0])?, number(&h.sides[1])?],
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
            .chain(self.hybrids.iter().map(|h| {
                format!(
                    "hybrid {}, {} groups {}, {}",
                    name(&h.sides[0][0]),
                    name(&h.sides[1][0]),
                    h.groups[0],
                    h.groups[1]
                )
            }))
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
        assert_eq!(parsed.global_indexes[0].partitions, None);
        // A global index the space declares with its own count keeps it;
        // one the layout adds has the space's partitions.
        let declared = parse_space(
            "space h key id attributes string city, int price, string addr \
             global index addr create 4 partitions create 16 partitions",
        )
        .unwrap();
        let both = Layout::new(vec![], vec![], vec![2, 3], false);
        let parsed = parse_space(&both.describe(&declared)).expect("the description parses");
        let counts: Vec<(usize, Option<u32>)> = parsed
            .global_indexes
            .iter()
            .map(|g| (g.attr, g.partitions))
            .collect();
        assert_eq!(counts, vec![(2, None), (3, Some(4))]);
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
        // The layout's replexes are sorted: a (1) then b (2); `k, a` is
        // sides 0 and 1, `b, a` (its dimensions in the declared order)
        // now sides 2 and 1; the layout keeps its hybrids sorted.
        let kept = &applied.replex.as_ref().unwrap().hybrids;
        assert_eq!(kept[0].sides, [0, 1]);
        assert_eq!(kept[1].sides, [2, 1]);
        assert_eq!(same.hybrids.len(), 2);
        assert_eq!(same.hybrids[1].sides, [vec![2], vec![1]]);
        // Without replex b, only the hybrid of the key subspace and a stays.
        let without_b = Layout::new(vec![vec![1], vec![3]], vec![], vec![], true);
        let hybrids = without_b.apply(&base).replex.unwrap().hybrids;
        assert_eq!(hybrids.len(), 1);
        assert_eq!(hybrids[0].sides, [0, 1]);
        parse_space(&without_b.describe(&base)).expect("the description parses");
    }

    /// A layout keeps only hybrids of its own sides, one per pair, and
    /// one it adds is declared, described and read back.
    #[test]
    fn hybrids_of_a_layout_name_its_sides() {
        let base = parse_space(
            "space s key k attributes a, b, c replex a create 8 partitions tolerate 1 failure",
        )
        .unwrap();
        let hybrid = |a: usize, b: usize, groups: [u32; 2]| Hybrid {
            sides: [vec![a], vec![b]],
            groups,
        };
        let replex = Layout::new(vec![vec![1], vec![2]], vec![], vec![], true);
        let layout = replex.clone().with_hybrids([
            hybrid(2, 1, [2, 4]),
            // The same pair again, a side the layout lacks, one side twice.
            hybrid(1, 2, [4, 2]),
            hybrid(0, 3, [2, 4]),
            hybrid(1, 1, [2, 4]),
            hybrid(0, 1, [4, 2]),
        ]);
        assert_eq!(
            layout.hybrids,
            vec![hybrid(0, 1, [4, 2]), hybrid(2, 1, [2, 4])]
        );
        assert!(Layout::new(vec![vec![1]], vec![], vec![], false)
            .with_hybrids([hybrid(0, 1, [4, 2])])
            .hybrids
            .is_empty());
        let text = layout.describe(&base);
        assert!(text.contains("hybrid b, a groups 2, 4"), "{text}");
        assert!(text.contains("hybrid k, a groups 4, 2"), "{text}");
        let parsed = parse_space(&text).expect("the description parses");
        assert_eq!(Layout::of_space(&parsed), layout);
        assert_eq!(
            layout.summary(&base),
            "replex a; replex b; hybrid k, a groups 4, 2; hybrid b, a groups 2, 4"
        );
        // Applying the plain layout to the parsed space keeps both.
        assert_eq!(replex.keeping(&parsed), layout);
    }

    /// A replex keeps its declared order: its first attribute places it
    /// and names it in `hybrid` clauses.
    #[test]
    fn a_replex_keeps_its_first_attribute() {
        let base = parse_space(
            "space s key k attributes a, b replex b, a hybrid k, b groups 2, 2 \
             create 4 partitions tolerate 1 failure",
        )
        .unwrap();
        let own = Layout::of_space(&base);
        assert_eq!(own.subspaces, vec![vec![2, 1]]);
        assert_eq!(own.hybrids[0].sides, [vec![0], vec![2, 1]]);
        let text = own.describe(&base);
        assert!(text.contains("replex b, a"), "{text}");
        assert!(text.contains("hybrid k, b groups 2, 2"), "{text}");
        assert_eq!(Layout::of_space(&parse_space(&text).unwrap()), own);
        // Repeats go, the order stays; subspaces are still sorted.
        let r = Layout::new(vec![vec![2, 1, 2]], vec![], vec![], true);
        assert_eq!(r.subspaces, vec![vec![2, 1]]);
        let s = Layout::new(vec![vec![2, 1, 2]], vec![], vec![], false);
        assert_eq!(s.subspaces, vec![vec![1, 2]]);
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
