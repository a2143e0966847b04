//! The coordinator's state machine: the cluster state that Raft replicates.
//!
//! Pure: [`ClusterState::apply`] takes a [`Command`] and returns a
//! [`CommandResult`]; it does no I/O and reads no clock, so every member that
//! applies the same commands in the same order holds the same state.
//!
//! Invariants:
//! - the epoch increases by exactly one per command that changes anything,
//!   and never otherwise;
//! - daemon, space and region ids are handed out from counters that only
//!   grow: an id is never reused, even after its space is removed;
//! - every region's chain holds distinct daemons (see [`crate::placement`]).

use crate::placement::Placer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tessera_protocol::AdminStatus;
use tessera_types::parse::parse_space;
use tessera_types::region::{grid_for_partitions, uniform_splits};
use tessera_types::{
    Configuration, CoordinatorInfo, DaemonId, DaemonInfo, DaemonState, Epoch, Region, RegionId,
    Space, SpaceDesc, SpaceId, SubspaceLayout,
};

/// A change to the cluster state, as written to the Raft log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A daemon announces itself at `addr`.
    ///
    /// - `id: None` — a new daemon: it gets a fresh id, state Available.
    /// - `id: Some(known)` — a restarted daemon: its address is updated and
    ///   it is Available again, keeping its id (and its place in chains).
    /// - `id: Some(unknown)` — an id this cluster does not know (another
    ///   cluster's, or forgotten): the daemon is treated as new and gets a
    ///   fresh id. Adopting the supplied id could collide with an id the
    ///   counter hands out later; a fresh id cannot.
    ///
    /// Registering a known daemon with the same address while it is already
    /// Available changes nothing (and does not bump the epoch).
    RegisterDaemon { id: Option<DaemonId>, addr: String },
    /// Adds a space from its description (API.md §8).
    AddSpace { description: String },
    /// Removes a space and its regions.
    RmSpace { name: String },
    /// Sets or clears the cluster-wide read-only flag.
    SetReadOnly { read_only: bool },
    /// The coordinator group's membership changed: the configuration's
    /// `coordinators` list differs, so the epoch must move.
    MembershipChanged,
}

/// The outcome of one [`Command`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResult {
    /// `RegisterDaemon`: the daemon's id (fresh or confirmed).
    Registered { id: DaemonId },
    /// `AddSpace`: the new space's id.
    SpaceAdded { id: SpaceId },
    /// Any other command that succeeded (or changed nothing).
    Done,
    /// The command was refused; nothing changed.
    Failed { status: AdminStatus, reason: String },
}

/// Everything the coordinator knows. Nothing about objects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    pub epoch: Epoch,
    /// The next daemon id to hand out (ids start at 1).
    pub daemon_id_next: u64,
    /// The next space id to hand out (ids start at 1).
    pub space_id_next: u64,
    /// The next region id to hand out (ids start at 1).
    pub region_id_next: u64,
    pub daemons: BTreeMap<DaemonId, DaemonInfo>,
    pub spaces: Vec<Space>,
    pub read_only: bool,
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState {
            epoch: Epoch(0),
            daemon_id_next: 1,
            space_id_next: 1,
            region_id_next: 1,
            daemons: BTreeMap::new(),
            spaces: Vec::new(),
            read_only: false,
        }
    }
}

impl ClusterState {
    /// Applies one command. Refused commands change nothing.
    pub fn apply(&mut self, command: Command) -> CommandResult {
        let epoch_before = self.epoch;
        let result = match command {
            Command::RegisterDaemon { id, addr } => self.register_daemon(id, addr),
            Command::AddSpace { description } => self.add_space(&description),
            Command::RmSpace { name } => self.rm_space(&name),
            Command::SetReadOnly { read_only } => {
                if self.read_only != read_only {
                    self.read_only = read_only;
                    self.bump();
                }
                CommandResult::Done
            }
            Command::MembershipChanged => {
                self.bump();
                CommandResult::Done
            }
        };
        debug_assert!(
            self.epoch.0 - epoch_before.0 <= 1,
            "one command moves the epoch by at most one"
        );
        result
    }

    /// The configuration to publish, with the coordinator group's members.
    pub fn configuration(&self, coordinators: Vec<CoordinatorInfo>) -> Configuration {
        Configuration {
            epoch: self.epoch,
            coordinators,
            daemons: self.daemons.clone(),
            spaces: self.spaces.clone(),
            read_only: self.read_only,
            transfers: Vec::new(),
        }
    }

    fn bump(&mut self) {
        self.epoch = Epoch(self.epoch.0 + 1);
    }

    fn register_daemon(&mut self, id: Option<DaemonId>, addr: String) -> CommandResult {
        if let Some(id) = id {
            if let Some(info) = self.daemons.get_mut(&id) {
                if info.addr != addr || info.state != DaemonState::Available {
                    info.addr = addr;
                    info.state = DaemonState::Available;
                    self.bump();
                }
                return CommandResult::Registered { id };
            }
        }
        let id = DaemonId(self.daemon_id_next);
        self.daemon_id_next += 1;
        self.daemons.insert(
            id,
            DaemonInfo {
                id,
                addr,
                state: DaemonState::Available,
            },
        );
        self.bump();
        CommandResult::Registered { id }
    }

    fn add_space(&mut self, description: &str) -> CommandResult {
        let desc = match parse_space(description) {
            Ok(desc) => desc,
            Err(e) => {
                return CommandResult::Failed {
                    status: AdminStatus::BadSpace,
                    reason: e.to_string(),
                }
            }
        };
        if self.spaces.iter().any(|s| s.desc.name == desc.name) {
            return CommandResult::Failed {
                status: AdminStatus::Duplicate,
                reason: format!("a space named {:?} already exists", desc.name),
            };
        }
        let available = self
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .map(|d| d.id);
        let mut placer = match Placer::new(available, &self.spaces) {
            Ok(placer) => placer,
            Err(e) => {
                return CommandResult::Failed {
                    status: AdminStatus::CoordFail,
                    reason: e.to_string(),
                }
            }
        };
        let id = SpaceId(self.space_id_next);
        self.space_id_next += 1;
        let subspaces = self.layouts(&desc, &mut placer);
        self.spaces.push(Space {
            id,
            desc,
            subspaces,
        });
        self.bump();
        CommandResult::SpaceAdded { id }
    }

    /// Subspace 0 (the key, exactly `partitions` regions), then one layout
    /// per declared subspace, regions numbered from the region counter.
    fn layouts(&mut self, desc: &SpaceDesc, placer: &mut Placer) -> Vec<SubspaceLayout> {
        let replicas = desc.fault_tolerance as usize + 1;
        let mut dimensions: Vec<(Vec<usize>, Vec<Vec<u64>>)> =
            vec![(vec![0], vec![uniform_splits(desc.partitions)])];
        for attrs in &desc.subspaces {
            let grid = grid_for_partitions(desc.partitions, attrs.len());
            dimensions.push((
                attrs.clone(),
                grid.into_iter().map(uniform_splits).collect(),
            ));
        }
        dimensions
            .into_iter()
            .map(|(attrs, splits)| {
                // The grid's cells: the product of each dimension's intervals.
                let cells: usize = splits.iter().map(|s| s.len() + 1).product();
                let regions = placer
                    .place_subspace(cells, replicas)
                    .into_iter()
                    .map(|chain| {
                        let id = RegionId(self.region_id_next);
                        self.region_id_next += 1;
                        Region { id, chain }
                    })
                    .collect();
                SubspaceLayout {
                    attrs,
                    splits,
                    regions,
                }
            })
            .collect()
    }

    fn rm_space(&mut self, name: &str) -> CommandResult {
        match self.spaces.iter().position(|s| s.desc.name == name) {
            Some(index) => {
                self.spaces.remove(index);
                self.bump();
                CommandResult::Done
            }
            None => CommandResult::Failed {
                status: AdminStatus::NotFound,
                reason: format!("no space named {name:?}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(state: &mut ClusterState, n: usize) {
        for i in 0..n {
            let result = state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("127.0.0.1:{}", 2012 + i),
            });
            assert!(matches!(result, CommandResult::Registered { .. }));
        }
    }

    fn add(state: &mut ClusterState, description: &str) -> CommandResult {
        state.apply(Command::AddSpace {
            description: description.to_string(),
        })
    }

    #[test]
    fn register_daemon_gives_fresh_ids_and_bumps_the_epoch() {
        let mut state = ClusterState::default();
        let a = state.apply(Command::RegisterDaemon {
            id: None,
            addr: "a:1".into(),
        });
        let b = state.apply(Command::RegisterDaemon {
            id: None,
            addr: "b:1".into(),
        });
        assert_eq!(a, CommandResult::Registered { id: DaemonId(1) });
        assert_eq!(b, CommandResult::Registered { id: DaemonId(2) });
        assert_eq!(state.epoch, Epoch(2));
    }

    #[test]
    fn register_known_daemon_updates_address_without_new_id() {
        let mut state = ClusterState::default();
        register(&mut state, 1);
        let epoch = state.epoch;
        // Same address, already available: nothing changes.
        let again = state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "127.0.0.1:2012".into(),
        });
        assert_eq!(again, CommandResult::Registered { id: DaemonId(1) });
        assert_eq!(state.epoch, epoch);
        // New address: updated, one epoch.
        let moved = state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "127.0.0.1:3000".into(),
        });
        assert_eq!(moved, CommandResult::Registered { id: DaemonId(1) });
        assert_eq!(state.epoch, Epoch(epoch.0 + 1));
        assert_eq!(state.daemons[&DaemonId(1)].addr, "127.0.0.1:3000");
        // Offline daemon coming back becomes available.
        state.daemons.get_mut(&DaemonId(1)).unwrap().state = DaemonState::Offline;
        state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "127.0.0.1:3000".into(),
        });
        assert_eq!(state.daemons[&DaemonId(1)].state, DaemonState::Available);
        assert_eq!(state.daemon_id_next, 2);
    }

    #[test]
    fn register_unknown_id_gets_a_fresh_id() {
        let mut state = ClusterState::default();
        let r = state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(77)),
            addr: "x:1".into(),
        });
        assert_eq!(r, CommandResult::Registered { id: DaemonId(1) });
        assert!(!state.daemons.contains_key(&DaemonId(77)));
    }

    #[test]
    fn add_space_without_daemons_fails_with_coordfail() {
        let mut state = ClusterState::default();
        match add(&mut state, "space kv key k attributes v") {
            CommandResult::Failed { status, reason } => {
                assert_eq!(status, AdminStatus::CoordFail);
                assert!(reason.contains("no daemons are available"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(state.epoch, Epoch(0));
        assert_eq!(state.space_id_next, 1);
    }

    #[test]
    fn add_space_bad_description_is_badspace_with_position() {
        let mut state = ClusterState::default();
        register(&mut state, 1);
        let epoch = state.epoch;
        match add(&mut state, "space kv key") {
            CommandResult::Failed { status, reason } => {
                assert_eq!(status, AdminStatus::BadSpace);
                assert!(reason.contains("line 1"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(state.epoch, epoch);
    }

    #[test]
    fn add_space_builds_key_subspace_and_declared_subspaces() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        let result = add(
            &mut state,
            "space phonebook key username attributes first, last, int phone \
             subspace first, last subspace phone create 8 partitions tolerate 2 failures",
        );
        assert_eq!(result, CommandResult::SpaceAdded { id: SpaceId(1) });
        let space = &state.spaces[0];
        assert_eq!(space.subspaces.len(), 3);
        let key = &space.subspaces[0];
        assert_eq!(key.attrs, vec![0]);
        assert_eq!(key.regions.len(), 8);
        assert_eq!(key.splits, vec![uniform_splits(8)]);
        let grid = grid_for_partitions(8, 2);
        assert_eq!(space.subspaces[1].attrs, vec![1, 2]);
        assert_eq!(
            space.subspaces[1].regions.len(),
            grid.iter().map(|c| *c as usize).product::<usize>()
        );
        assert_eq!(space.subspaces[2].attrs, vec![3]);
        assert_eq!(space.subspaces[2].regions.len(), 8);
        // f = 2: three distinct daemons per region.
        let mut ids = Vec::new();
        for sub in &space.subspaces {
            for region in &sub.regions {
                assert_eq!(region.chain.len(), 3);
                let mut c = region.chain.clone();
                c.sort();
                c.dedup();
                assert_eq!(c.len(), 3);
                ids.push(region.id);
            }
        }
        let count = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), count, "region ids unique");
        assert_eq!(state.region_id_next, count as u64 + 1);
    }

    #[test]
    fn duplicate_space_is_refused() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        assert!(matches!(
            add(&mut state, "space kv key k"),
            CommandResult::SpaceAdded { .. }
        ));
        let epoch = state.epoch;
        match add(&mut state, "space kv key k attributes v") {
            CommandResult::Failed { status, .. } => assert_eq!(status, AdminStatus::Duplicate),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(state.epoch, epoch);
    }

    #[test]
    fn rm_space_and_ids_are_never_reused() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        add(&mut state, "space kv key k create 4 partitions");
        let regions_before: Vec<RegionId> = state.spaces[0].subspaces[0]
            .regions
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(
            state.apply(Command::RmSpace { name: "kv".into() }),
            CommandResult::Done
        );
        assert!(state.spaces.is_empty());
        match state.apply(Command::RmSpace { name: "kv".into() }) {
            CommandResult::Failed { status, .. } => assert_eq!(status, AdminStatus::NotFound),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            add(&mut state, "space kv key k create 4 partitions"),
            CommandResult::SpaceAdded { id: SpaceId(2) }
        );
        let regions_after: Vec<RegionId> = state.spaces[0].subspaces[0]
            .regions
            .iter()
            .map(|r| r.id)
            .collect();
        assert!(regions_after.iter().all(|r| !regions_before.contains(r)));
    }

    #[test]
    fn every_change_bumps_the_epoch_by_one_and_replay_is_deterministic() {
        let commands = vec![
            Command::RegisterDaemon {
                id: None,
                addr: "a:1".into(),
            },
            Command::MembershipChanged,
            Command::RegisterDaemon {
                id: None,
                addr: "b:1".into(),
            },
            Command::AddSpace {
                description: "space kv key k attributes v create 16 partitions".into(),
            },
            Command::SetReadOnly { read_only: true },
            Command::SetReadOnly { read_only: true },
            Command::RmSpace { name: "kv".into() },
            Command::RmSpace {
                name: "nope".into(),
            },
        ];
        let changes = [true, true, true, true, true, false, true, false];
        let mut a = ClusterState::default();
        for (command, changes) in commands.iter().cloned().zip(changes) {
            let before = a.epoch;
            a.apply(command);
            assert_eq!(a.epoch.0, before.0 + changes as u64);
        }
        let mut b = ClusterState::default();
        for command in commands {
            b.apply(command);
        }
        assert_eq!(a, b);
    }

    #[test]
    fn configuration_carries_coordinators_and_state() {
        let mut state = ClusterState::default();
        register(&mut state, 1);
        let members = vec![CoordinatorInfo {
            id: 7,
            addr: "127.0.0.1:1982".into(),
        }];
        let config = state.configuration(members.clone());
        assert_eq!(config.epoch, state.epoch);
        assert_eq!(config.coordinators, members);
        assert_eq!(config.daemons.len(), 1);
    }

    #[test]
    fn offline_daemons_get_no_new_regions() {
        let mut state = ClusterState::default();
        register(&mut state, 3);
        state.daemons.get_mut(&DaemonId(2)).unwrap().state = DaemonState::Offline;
        add(
            &mut state,
            "space kv key k create 8 partitions tolerate 1 failure",
        );
        for region in &state.spaces[0].subspaces[0].regions {
            assert!(!region.chain.contains(&DaemonId(2)));
        }
    }

    #[test]
    fn state_round_trips_through_postcard() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        add(
            &mut state,
            "space kv key k attributes int v subspace v create 4 partitions",
        );
        let bytes = postcard::to_allocvec(&state).unwrap();
        let back: ClusterState = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(state, back);
    }
}
