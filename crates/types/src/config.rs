//! The configuration the coordinator publishes: who the daemons are and
//! which daemons hold which region of which subspace, numbered by epoch.

use crate::ids::{DaemonId, Epoch, RegionId, SpaceId};
use crate::schema::SpaceDesc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A member of the coordinator group, as clients and daemons reach it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorInfo {
    pub id: u64,
    pub addr: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DaemonState {
    /// Registered and serving.
    Available,
    /// Declared failed or taken offline; in no replica chain.
    Offline,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub id: DaemonId,
    /// `host:port` where the daemon serves clients and peers.
    pub addr: String,
    pub state: DaemonState,
}

/// One region: a cell of a subspace's grid and the replica chain holding it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
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
    pub regions: Vec<Region>,
}

/// A space as configured: schema plus layout. `subspaces[0]` is the key subspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    pub id: SpaceId,
    pub desc: SpaceDesc,
    pub subspaces: Vec<SubspaceLayout>,
}

/// Everything a daemon or client needs to route, at one epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub epoch: Epoch,
    pub coordinators: Vec<CoordinatorInfo>,
    pub daemons: BTreeMap<DaemonId, DaemonInfo>,
    pub spaces: Vec<Space>,
    pub read_only: bool,
}

impl Configuration {
    pub fn space(&self, name: &str) -> Option<&Space> {
        self.spaces.iter().find(|s| s.desc.name == name)
    }

    pub fn space_by_id(&self, id: SpaceId) -> Option<&Space> {
        self.spaces.iter().find(|s| s.id == id)
    }

    pub fn daemon_addr(&self, id: DaemonId) -> Option<&str> {
        self.daemons.get(&id).map(|d| d.addr.as_str())
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
