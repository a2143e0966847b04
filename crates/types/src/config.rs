//! The configuration the coordinator publishes: who the daemons are and
//! which daemons hold which region of which subspace, numbered by epoch.

use crate::ids::{DaemonId, Epoch, PartId, RegionId, SpaceId};
use crate::layout::{IndexPart, PartState};
use crate::schema::SpaceDesc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A member of the coordinator group, as clients and daemons reach it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorInfo {
    /// The member's id in the coordinator group.
    pub id: u64,
    /// `host:port` where the member serves clients and daemons.
    pub addr: String,
    /// The URL of the member's Prometheus metrics (`http://…/metrics`),
    /// when it serves them.
    #[serde(default)]
    pub metrics: Option<String>,
}

/// Whether a daemon takes part in replica chains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DaemonState {
    /// Registered and serving.
    Available,
    /// Declared failed or taken offline; in no replica chain.
    Offline,
}

/// A daemon as the configuration knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// Its instance id, never reused.
    pub id: DaemonId,
    /// `host:port` where the daemon serves clients and peers.
    pub addr: String,
    /// Available or offline.
    pub state: DaemonState,
    /// The URL of the daemon's Prometheus metrics (`http://…/metrics`),
    /// as it gave it when it last registered; `None` when it serves none.
    #[serde(default)]
    pub metrics: Option<String>,
}

/// One region: a cell of a subspace's grid and the replica chain holding it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// Unique across all spaces and subspaces, never reused.
    pub id: RegionId,
    /// Head first. `f + 1` distinct daemons when the cluster has enough.
    pub chain: Vec<DaemonId>,
}

/// The layout of one subspace: its dimensions, where each is cut, and the
/// regions (the product of the intervals, in mixed-radix order with the last
/// dimension varying fastest).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubspaceLayout {
    /// Attribute indexes into the space's `attrs`; `[0]` for the key subspace.
    pub attrs: Vec<usize>,
    /// Per dimension, the sorted split points. Dimension `d` has
    /// `splits[d].len() + 1` intervals; interval `i` is
    /// `[splits[d][i-1], splits[d][i])` with the missing ends at 0 and `u64::MAX`.
    pub splits: Vec<Vec<u64>>,
    /// The grid's cells, `product(splits[d].len() + 1)` of them, indexed as
    /// [`SubspaceLayout::region_index`] computes.
    pub regions: Vec<Region>,
    /// The subspace's id among its space's layout parts (0: the key
    /// subspace). Stable across epochs, unlike its position.
    #[serde(default)]
    pub part: PartId,
    /// Building (receives writes, never searched), ready, or dropping.
    #[serde(default)]
    pub state: PartState,
    /// Whole objects placed by hashing (a subspace), or projections placed
    /// by value order (a global index's indexlets).
    #[serde(default)]
    pub kind: SubspaceKind,
}

/// What a [`SubspaceLayout`]'s regions hold and how they place it.
///
/// A global index is a subspace in every respect the chain, replication,
/// state transfer and anti-entropy see (`docs/design/global-indexes.md`):
/// its regions — the *indexlets* — are hops of every value-dependent chain
/// and keep one record per object at the object's version. Two things
/// differ: an object's place is the order coordinate of its one attribute
/// ([`crate::sortkey::order_coordinate`]), so a range of values is a run of
/// adjacent indexlets, strings included; and an indexlet stores only the
/// object's *projection* (its key and that attribute), which no search
/// reads as an object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SubspaceKind {
    /// The key subspace or a declared subspace: whole objects, placed by
    /// the hashing coordinates of its attributes.
    #[default]
    Subspace,
    /// A global secondary index on its one attribute.
    GlobalIndex,
    /// A replex of a replex space (`docs/design/replex.md`): whole
    /// objects placed by hashing, like a subspace, but one copy per region
    /// (chains of one daemon); the replexes together are the replicas.
    Replex,
    /// A hybrid replex between two replexes: a 2-D grid over their first
    /// attributes whose cuts are a subset of theirs
    /// ([`crate::replex::hybrid_splits`]); one copy per region too.
    Hybrid,
}

impl SubspaceKind {
    /// Whether its regions hold whole objects placed by the hashing
    /// coordinates of its attributes (everything but a global index).
    pub fn holds_objects(self) -> bool {
        self != SubspaceKind::GlobalIndex
    }
}

/// A space as configured: schema plus layout. `subspaces[0]` is the key subspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    /// Assigned by the coordinator, never reused.
    pub id: SpaceId,
    /// The schema, as parsed from the space's description.
    pub desc: SpaceDesc,
    /// `[0]` is the key subspace, then the declared subspaces
    /// (`desc.subspaces`, in order; in a replex space the replexes, then
    /// the hybrids, `desc.replex`'s clauses in order) and the global indexes
    /// (`desc.global_indexes`, in order), in the order they were added:
    /// the chain visits them in this order.
    pub subspaces: Vec<SubspaceLayout>,
    /// The local indexes, one per entry of `desc.indexes` and in the same
    /// order (plus those on document paths, which `desc.indexes` omits).
    #[serde(default)]
    pub indexes: Vec<IndexPart>,
}

impl Space {
    /// Per global index (by its attribute), the indexlets it has in this
    /// configuration: its declared count, or the space's partitions, and
    /// every split its leader made since.
    pub fn global_indexlets(&self) -> std::collections::BTreeMap<usize, u32> {
        self.subspaces
            .iter()
            .filter(|s| s.kind == SubspaceKind::GlobalIndex)
            .filter_map(|s| {
                let attr = *s.attrs.first()?;
                Some((attr, u32::try_from(s.regions.len()).unwrap_or(u32::MAX)))
            })
            .collect()
    }
}

/// A daemon receiving a region's data by state transfer, before it joins
/// the region's chain at the tail. `from` (the chain's tail when the
/// transfer began) ships every committed record, then every later commit,
/// until a configuration without this transfer arrives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// Unique, never reused.
    pub id: u64,
    /// The region being copied.
    pub region: RegionId,
    /// The daemon that ships the region (its chain's tail at the start).
    pub from: DaemonId,
    /// The daemon that receives it and then joins the chain's tail.
    pub to: DaemonId,
    /// A rebalancing move: this member leaves the chain in the epoch the
    /// target joins it, so the chain keeps its length. `None` for a repair
    /// of a chain short of replicas.
    #[serde(default)]
    pub replaces: Option<DaemonId>,
}

/// A lost region of a replex space being rebuilt on a new daemon from the
/// other replexes (`docs/design/replex.md`, "Rebuild"). The region's chain
/// is empty meanwhile; `to` asks each source region's daemon for the
/// objects the lost region places there, keeps per key the highest version
/// (pending included), and joins as the region's one member when the
/// coordinator hears that it has them all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebuild {
    /// Unique, never reused (a re-planned rebuild gets a new id).
    pub id: u64,
    /// The lost region: its chain is empty while the rebuild runs.
    pub region: RegionId,
    /// The daemon that rebuilds the region and then becomes its chain.
    pub to: DaemonId,
    /// The covering set the objects come from, each region with the one
    /// daemon that holds it when the rebuild was planned; a change of
    /// either re-plans the rebuild.
    pub sources: Vec<(RegionId, DaemonId)>,
}

/// Everything a daemon or client needs to route, at one epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    /// This configuration's number.
    pub epoch: Epoch,
    /// The coordinator group's members.
    pub coordinators: Vec<CoordinatorInfo>,
    /// Every daemon ever registered and not forgotten, by id.
    pub daemons: BTreeMap<DaemonId, DaemonInfo>,
    /// Every space, in creation order.
    pub spaces: Vec<Space>,
    /// When set, writes fail with READONLY; reads keep working.
    pub read_only: bool,
    /// State transfers in progress.
    #[serde(default)]
    pub transfers: Vec<Transfer>,
    /// Tombstones of versions below [`Version::floor`] of this epoch may
    /// be collected: they were all written at least the coordinator's
    /// tombstone grace ago, in an epoch that has ended (see
    /// docs/design/fault-tolerance.md, "Tombstones"). Epoch 0 (the
    /// default) collects nothing.
    ///
    /// [`Version::floor`]: crate::Version::floor
    #[serde(default)]
    pub tombstone_horizon: Epoch,
    /// The layout advisor's parameters as `tessera calibrate` measured
    /// them on this cluster; `None` until it has.
    #[serde(default)]
    pub advisor: Option<crate::AdvisorCalibration>,
    /// Rebuilds of lost replex regions in progress, by increasing id.
    #[serde(default)]
    pub rebuilds: Vec<Rebuild>,
    /// Regions whose chain emptied, with the daemon each waits for: the
    /// one it comes back from (its latest acting tail; see the
    /// coordinator's `tails`). Last: postcard's field order is the wire
    /// format.
    #[serde(default)]
    pub waiting: BTreeMap<RegionId, DaemonId>,
}

impl Configuration {
    /// The space with this name, if any.
    pub fn space(&self, name: &str) -> Option<&Space> {
        self.spaces.iter().find(|s| s.desc.name == name)
    }

    /// The space with this id, if any.
    pub fn space_by_id(&self, id: SpaceId) -> Option<&Space> {
        self.spaces.iter().find(|s| s.id == id)
    }

    /// How many daemons are available (serving).
    pub fn available_daemons(&self) -> usize {
        self.daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .count()
    }

    /// The address of the daemon with this id, if known.
    pub fn daemon_addr(&self, id: DaemonId) -> Option<&str> {
        self.daemons.get(&id).map(|d| d.addr.as_str())
    }

    /// Whether a rebuild (or a refresh, a rebuild to the region's own
    /// daemon) of region `id` is running.
    pub fn rebuilding(&self, id: RegionId) -> bool {
        self.rebuilds.iter().any(|b| b.region == id)
    }

    /// The id of every region of every space, the ones [`Self::region`]
    /// finds.
    pub fn region_ids(&self) -> impl Iterator<Item = RegionId> + '_ {
        self.spaces
            .iter()
            .flat_map(|space| space.subspaces.iter())
            .flat_map(|sub| sub.regions.iter().map(|r| r.id))
    }

    /// Finds a region by id: its space, subspace index and region.
    pub fn region(&self, id: RegionId) -> Option<(&Space, usize, &Region)> {
        self.spaces.iter().find_map(|space| {
            space.subspaces.iter().enumerate().find_map(|(si, sub)| {
                sub.regions
                    .iter()
                    .find(|r| r.id == id)
                    .map(|r| (space, si, r))
            })
        })
    }
}
