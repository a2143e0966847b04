//! A space's layout as parts with a lifecycle, and the region directory.
//!
//! A space's layout is a list of *parts*: the key subspace, each declared
//! subspace, each local index, each global index, and in a replex space
//! each replex and hybrid ([`PartKind`]). Each part has an id that is stable
//! within its space ([`PartId`], never reused) and a [`PartState`] that
//! only the coordinator changes, one epoch per change:
//!
//! ```text
//!   add ──▶ Building{progress} ──(every region reports done)──▶ Ready
//!                                                                 │
//!   removed from the configuration ◀──(next epoch)── Dropping ◀──rm
//! ```
//!
//! A building part receives every write (the value-dependent chain
//! includes it) but never answers a search; a dropping part is no longer
//! searched and leaves the configuration in a later epoch, after which
//! each daemon deletes its data. Messages between daemons name regions by
//! [`RegionId`] (global, never reused), never by a part's position.

use crate::config::{Configuration, Region, Space, SubspaceKind, SubspaceLayout};
use crate::ids::{PartId, RegionId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What a layout part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PartKind {
    /// The key subspace: places each object by its key alone. Always ready.
    Key,
    /// A declared subspace: places each object by some attributes.
    Subspace,
    /// A local index inside every region of the space.
    Index,
    /// A global secondary index (SLIK): a subspace of
    /// [`SubspaceKind::GlobalIndex`] whose regions are its indexlets.
    GlobalIndex,
    /// A replex of a replex space: a subspace of [`SubspaceKind::Replex`],
    /// one copy per region.
    Replex,
    /// A hybrid replex between two replexes ([`SubspaceKind::Hybrid`]).
    Hybrid,
}

impl PartKind {
    /// The name `show-config --json` uses (API.md §12.5).
    pub fn name(self) -> &'static str {
        match self {
            PartKind::Key => "key",
            PartKind::Subspace => "subspace",
            PartKind::Index => "index",
            PartKind::GlobalIndex => "global_index",
            PartKind::Replex => "replex",
            PartKind::Hybrid => "hybrid",
        }
    }

    /// Whether a building part of this kind is filled by the key regions'
    /// point leaders walking their keys (its regions are on the objects'
    /// chains); a local index is filled where its entries live instead.
    pub fn built_by_key_walk(self) -> bool {
        matches!(
            self,
            PartKind::Subspace | PartKind::GlobalIndex | PartKind::Replex | PartKind::Hybrid
        )
    }
}

/// Where a part is in its lifecycle (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PartState {
    /// Being filled: it receives writes but no search uses it.
    Building {
        /// How much of the space it holds, in percent (0..=100), as the
        /// daemons last reported.
        progress: u8,
    },
    /// Holds every object; searches may use it.
    #[default]
    Ready,
    /// On its way out: no search uses it; it leaves the configuration in
    /// a later epoch.
    Dropping,
}

impl PartState {
    /// Whether a search may use the part.
    pub fn is_ready(self) -> bool {
        self == PartState::Ready
    }

    /// The word `show-config --json` uses.
    pub fn name(self) -> &'static str {
        match self {
            PartState::Building { .. } => "building",
            PartState::Ready => "ready",
            PartState::Dropping => "dropping",
        }
    }
}

impl std::fmt::Display for PartState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartState::Building { progress } => write!(f, "building {progress}%"),
            other => f.write_str(other.name()),
        }
    }
}

/// A local index of a space, as the configuration holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPart {
    /// Its id within the space (what `rm_index` takes).
    pub id: PartId,
    /// The indexed attribute, an index into the space's `attrs`.
    pub attr: usize,
    /// For a document attribute, the path inside the document
    /// (`docattr.path` names it); `None` for any other attribute.
    pub path: Option<String>,
    /// Its lifecycle state.
    pub state: PartState,
}

/// One part of a space's layout, borrowed from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct PartView<'a> {
    /// Its id within the space.
    pub id: PartId,
    /// What it is.
    pub kind: PartKind,
    /// Its attributes (indexes into the space's `attrs`): the subspace's
    /// dimensions, or the one attribute an index holds.
    pub attrs: &'a [usize],
    /// The document path of an index on a document attribute.
    pub path: Option<&'a str>,
    /// Its lifecycle state.
    pub state: PartState,
    /// The subspace's layout; `None` for a local index (it lives inside
    /// the regions of the other parts).
    pub layout: Option<&'a SubspaceLayout>,
}

impl Space {
    /// Every part of the layout: the subspaces in order (the key subspace
    /// first), then the local indexes.
    pub fn parts(&self) -> Vec<PartView<'_>> {
        let subspaces = self
            .subspaces
            .iter()
            .enumerate()
            .map(|(i, layout)| PartView {
                id: layout.part,
                kind: match (i, layout.kind) {
                    (0, _) => PartKind::Key,
                    (_, SubspaceKind::Subspace) => PartKind::Subspace,
                    (_, SubspaceKind::GlobalIndex) => PartKind::GlobalIndex,
                    (_, SubspaceKind::Replex) => PartKind::Replex,
                    (_, SubspaceKind::Hybrid) => PartKind::Hybrid,
                },
                attrs: &layout.attrs,
                path: None,
                state: layout.state,
                layout: Some(layout),
            });
        let indexes = self.indexes.iter().map(|index| PartView {
            id: index.id,
            kind: PartKind::Index,
            attrs: std::slice::from_ref(&index.attr),
            path: index.path.as_deref(),
            state: index.state,
            layout: None,
        });
        subspaces.chain(indexes).collect()
    }

    /// The state of the part with this id, if the space has it.
    pub fn part_state(&self, id: PartId) -> Option<PartState> {
        self.parts().iter().find(|p| p.id == id).map(|p| p.state)
    }

    /// The state of the part with this id, to change it (the coordinator's
    /// business alone).
    pub fn part_state_mut(&mut self, id: PartId) -> Option<&mut PartState> {
        let subspaces = self
            .subspaces
            .iter_mut()
            .map(|layout| (layout.part, &mut layout.state));
        let indexes = self
            .indexes
            .iter_mut()
            .map(|index| (index.id, &mut index.state));
        subspaces
            .chain(indexes)
            .find(|(part, _)| *part == id)
            .map(|(_, state)| state)
    }

    /// Whether a search may use subspace `subspace` (its position in
    /// `subspaces`): the key subspace always, another only when ready, and
    /// never a global index (its regions hold projections, not objects).
    pub fn subspace_searchable(&self, subspace: usize) -> bool {
        subspace == 0
            || self
                .subspaces
                .get(subspace)
                .is_some_and(|layout| layout.state.is_ready() && layout.kind.holds_objects())
    }

    /// The global index on `attr` that lookups may use: ready, and not on
    /// its way out.
    pub fn ready_global_index(&self, attr: usize) -> Option<(usize, &SubspaceLayout)> {
        self.subspaces.iter().enumerate().find(|(_, layout)| {
            layout.kind == SubspaceKind::GlobalIndex
                && layout.state.is_ready()
                && layout.attrs == [attr]
        })
    }

    /// Whether the local index entries of `attr` are complete in the
    /// regions of subspace `subspace` (its position), so a search there may
    /// walk them. The key subspace's regions index every attribute a part
    /// names, so there an attribute counts once some ready part names it; a
    /// subspace's regions index its own attributes (complete once it is
    /// ready) and the local indexes' (complete once the index is ready). A
    /// building part's entries are still being backfilled; a dropping
    /// part's may already be going.
    pub fn entries_complete(&self, subspace: usize, attr: usize) -> bool {
        let ready_index = self
            .indexes
            .iter()
            .any(|index| index.state.is_ready() && index.path.is_none() && index.attr == attr);
        let names = |layout: &SubspaceLayout| {
            layout.kind.holds_objects() && layout.state.is_ready() && layout.attrs.contains(&attr)
        };
        if subspace == 0 {
            ready_index || self.subspaces.iter().skip(1).any(names)
        } else {
            ready_index || self.subspaces.get(subspace).is_some_and(names)
        }
    }

    /// The regions (with their subspace's position) whose index entries
    /// must be filled in before part `part` is complete: for a subspace,
    /// the key subspace's regions (they index every attribute a part
    /// names; the subspace's own regions are filled through the chain,
    /// which indexes what it writes); for a local index, on an attribute
    /// or on a document path, every region of the space (each indexes the
    /// `index` attributes and every path index).
    pub fn entry_regions(&self, part: PartId) -> Vec<(usize, &Region)> {
        let parts = self.parts();
        let Some(view) = parts.iter().find(|p| p.id == part) else {
            return Vec::new();
        };
        match view.kind {
            // A global index's own regions index what the chain writes
            // there, as a subspace's do; the rest of the space keeps no
            // entries for it.
            PartKind::Subspace | PartKind::Replex | PartKind::Hybrid => self
                .subspaces
                .first()
                .map(|key| key.regions.iter().map(|r| (0, r)).collect())
                .unwrap_or_default(),
            PartKind::Index => self
                .subspaces
                .iter()
                .enumerate()
                .flat_map(|(position, layout)| layout.regions.iter().map(move |r| (position, r)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether every part of the space is ready (nothing is building or
    /// dropping).
    pub fn layout_settled(&self) -> bool {
        self.parts().iter().all(|p| p.state.is_ready())
    }
}

/// Where one region lies: positions into the configuration it was built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionPlace {
    /// Position of the space in `Configuration::spaces`.
    pub space: usize,
    /// Position of the subspace in `Space::subspaces` (0: the key subspace).
    /// Positions change between epochs; only the [`PartId`] is stable.
    pub subspace: usize,
    /// The subspace's part id.
    pub part: PartId,
    /// Position of the region in `SubspaceLayout::regions`.
    pub region: usize,
}

/// Every region of one configuration by id, built once per configuration
/// so that hot paths look a region up in a hash map instead of scanning
/// every space, subspace and region.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionDirectory {
    places: HashMap<RegionId, RegionPlace>,
}

impl RegionDirectory {
    /// The directory of `config`'s regions.
    pub fn new(config: &Configuration) -> RegionDirectory {
        let mut places = HashMap::new();
        for (si, space) in config.spaces.iter().enumerate() {
            for (sub, layout) in space.subspaces.iter().enumerate() {
                for (ri, region) in layout.regions.iter().enumerate() {
                    places.insert(
                        region.id,
                        RegionPlace {
                            space: si,
                            subspace: sub,
                            part: layout.part,
                            region: ri,
                        },
                    );
                }
            }
        }
        RegionDirectory { places }
    }

    /// Where `region` lies, if the configuration has it.
    pub fn place(&self, region: RegionId) -> Option<RegionPlace> {
        self.places.get(&region).copied()
    }

    /// `region`'s space, subspace position and region in `config` (the
    /// configuration this directory was built from), as
    /// [`Configuration::region`] answers but without a scan.
    pub fn region<'c>(
        &self,
        config: &'c Configuration,
        region: RegionId,
    ) -> Option<(&'c Space, usize, &'c Region)> {
        let place = self.place(region)?;
        let space = config.spaces.get(place.space)?;
        let found = space
            .subspaces
            .get(place.subspace)?
            .regions
            .get(place.region)?;
        (found.id == region).then_some((space, place.subspace, found))
    }

    /// How many regions the directory knows.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether the directory knows no region.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Region;
    use crate::ids::{DaemonId, SpaceId};
    use crate::parse::parse_space;

    fn layout(part: u64, state: PartState, attrs: Vec<usize>, first: u64) -> SubspaceLayout {
        SubspaceLayout {
            attrs,
            splits: vec![vec![1 << 63]],
            regions: (0..2)
                .map(|i| Region {
                    id: RegionId(first + i),
                    chain: vec![DaemonId(1)],
                })
                .collect(),
            part: PartId(part),
            state,
            kind: SubspaceKind::Subspace,
        }
    }

    fn config() -> Configuration {
        let desc = parse_space("space s key k attributes a, b, int c subspace a subspace b")
            .expect("valid");
        let space = Space {
            id: SpaceId(1),
            desc,
            subspaces: vec![
                layout(0, PartState::Ready, vec![0], 1),
                layout(1, PartState::Building { progress: 37 }, vec![1], 3),
                layout(4, PartState::Ready, vec![2], 5),
            ],
            indexes: vec![IndexPart {
                id: PartId(5),
                attr: 3,
                path: None,
                state: PartState::Dropping,
            }],
        };
        Configuration {
            spaces: vec![space],
            ..Configuration::default()
        }
    }

    #[test]
    fn the_directory_answers_as_the_scan_does_for_every_region_and_a_missing_one() {
        let config = config();
        let directory = RegionDirectory::new(&config);
        assert_eq!(directory.len(), 6);
        for id in 0..=8 {
            let scanned = config.region(RegionId(id)).map(|(s, i, r)| (s.id, i, r.id));
            let looked_up = directory
                .region(&config, RegionId(id))
                .map(|(s, i, r)| (s.id, i, r.id));
            assert_eq!(scanned, looked_up, "region {id}");
        }
        assert_eq!(
            directory.place(RegionId(5)).map(|p| p.part),
            Some(PartId(4))
        );
    }

    #[test]
    fn every_region_of_the_space_fills_a_local_index_on_a_path_or_an_attribute() {
        let mut config = config();
        let space = &mut config.spaces[0];
        space.indexes.push(IndexPart {
            id: PartId(6),
            attr: 1,
            path: Some("x.y".into()),
            state: PartState::Building { progress: 0 },
        });
        let every: Vec<(usize, RegionId)> = vec![
            (0, RegionId(1)),
            (0, RegionId(2)),
            (1, RegionId(3)),
            (1, RegionId(4)),
            (2, RegionId(5)),
            (2, RegionId(6)),
        ];
        let regions = |part| -> Vec<(usize, RegionId)> {
            space
                .entry_regions(PartId(part))
                .into_iter()
                .map(|(s, r)| (s, r.id))
                .collect()
        };
        assert_eq!(regions(6), every);
        assert_eq!(regions(5), every);
        // A subspace needs only the key subspace's regions; nothing else
        // needs any.
        assert_eq!(regions(1), every[..2].to_vec());
        assert_eq!(regions(0), Vec::new());
        assert_eq!(regions(9), Vec::new());
    }

    #[test]
    fn parts_list_kinds_ids_and_states_and_only_ready_ones_are_searchable() {
        let config = config();
        let space = &config.spaces[0];
        let parts: Vec<(PartId, PartKind, String)> = space
            .parts()
            .iter()
            .map(|p| (p.id, p.kind, p.state.to_string()))
            .collect();
        assert_eq!(
            parts,
            vec![
                (PartId(0), PartKind::Key, "ready".to_string()),
                (PartId(1), PartKind::Subspace, "building 37%".to_string()),
                (PartId(4), PartKind::Subspace, "ready".to_string()),
                (PartId(5), PartKind::Index, "dropping".to_string()),
            ]
        );
        assert!(space.subspace_searchable(0));
        assert!(!space.subspace_searchable(1));
        assert!(space.subspace_searchable(2));
        assert!(!space.subspace_searchable(3));
        // a: only a building subspace; b: a ready one; c: a dropping index.
        assert!(!space.entries_complete(0, 1));
        assert!(space.entries_complete(0, 2));
        assert!(!space.entries_complete(0, 3));
        // In subspace b's regions, b's entries are complete; in subspace
        // a's, a's are not (it is building), nor is b indexed there.
        assert!(space.entries_complete(2, 2));
        assert!(!space.entries_complete(1, 1));
        assert!(!space.entries_complete(1, 2));
        assert!(!space.layout_settled());
        assert_eq!(space.part_state(PartId(5)), Some(PartState::Dropping));
        assert_eq!(space.part_state(PartId(2)), None);
    }
}
