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
//! - every region's chain holds distinct daemons (see [`crate::placement`]);
//! - only Available daemons are in chains or take part in transfers;
//! - in a replex space without relaxed placement, two regions that can
//!   hold the same object never share a daemon (see [`crate::placement`]);
//!   its chains are one daemon long, so repair copies none of its regions
//!   and rebalancing moves none beside another copy of its objects;
//! - after every command that changed something, the state is *repaired*
//!   (see [`ClusterState::repair`]): every region whose chain is shorter than
//!   `f + 1` but not empty has one transfer running to a new daemon when an
//!   Available daemon outside the chain exists;
//! - every region of a replex space without a daemon has one rebuild
//!   running when it has a covering set and a legal target (see
//!   [`crate::rebuild`]); a rebuild's region has an empty chain (a
//!   refresh's, only its target: [`ClusterState::refresh`]), its target
//!   is Available and may hold the region under the placement rule, and
//!   each of its sources is still held by the one Available daemon the
//!   plan named.
//!
//! # Failure handling
//!
//! ```text
//!  chain [d1 d2]  --d2 offline-->  [d1]  --repair-->  [d1] + Transfer{d1 -> d3}
//!                                                        |
//!           [d1 d3]  <--TransferComplete (sent by d3)----+
//! ```
//!
//! A daemon leaving (failure detected, operator offline/kill/forget) is taken
//! out of every chain in one epoch; the chain keeps its order, so the next
//! daemon becomes head or the previous one tail. Transfers to or from it are
//! cancelled. Repair then plans, per short region, one transfer from the
//! chain's tail to the least-loaded Available daemon outside the chain; the
//! target joins at the tail when it reports the transfer complete. A region
//! whose chain became empty is an *orphan*: it is unavailable, and the
//! daemon that left it last (it holds everything the region acknowledged)
//! becomes its chain again as soon as it is Available again; only
//! forgetting that daemon loses the region. In a replex space the other
//! replexes hold its objects too: a rebuild copies them to a new daemon,
//! which becomes the chain (see [`crate::rebuild`]).

use crate::placement::{replex_conflict, replex_move_conflicts, Placer};
use crate::rebuild::{locate, rebuild_target_conflicts};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use tessera_protocol::AdminStatus;
use tessera_types::parse::parse_space;
use tessera_types::replex::{decl_of_layouts, replex_layouts};
use tessera_types::{
    Configuration, CoordinatorInfo, DaemonId, DaemonInfo, DaemonState, Epoch, IndexPart, PartId,
    PartState, Rebuild, Region, RegionId, Space, SpaceDesc, SpaceId, SubspaceKind, SubspaceLayout,
    Transfer,
};

/// A change to the cluster state, as written to the Raft log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A daemon announces itself at `addr`.
    ///
    /// - `id: None` — a new daemon: it gets a fresh id, state Available.
    /// - `id: Some(known)` — a restarted daemon: its address is updated and
    ///   it is Available again, keeping its id. A daemon that was Offline is
    ///   in no chain (going offline removed it); repair may make it a
    ///   transfer target. A daemon still Available (it restarted before its
    ///   failure was detected) keeps its place in chains: its committed data
    ///   is on its disk, and dropping every restarted daemon from every chain
    ///   would empty the chains of a cluster restarted as a whole.
    /// - `id: Some(killed)` — refused with NOTFOUND: a killed daemon may not
    ///   rejoin under its id (forget it to let it register afresh).
    /// - `id: Some(unknown)` — an id this cluster does not know (another
    ///   cluster's, or forgotten): the daemon is treated as new and gets a
    ///   fresh id. Adopting the supplied id could collide with an id the
    ///   counter hands out later; a fresh id cannot.
    ///
    /// Registering a known daemon with the same address while it is already
    /// Available changes nothing (and does not bump the epoch). `metrics`
    /// is the daemon's metrics URL, recorded as given (a new one moves the
    /// epoch, as a new address does).
    RegisterDaemon {
        id: Option<DaemonId>,
        addr: String,
        #[serde(default)]
        metrics: Option<String>,
        /// The newest epoch the daemon had installed, read from its disk
        /// (see [`crate::tails`]).
        #[serde(default)]
        installed: Option<Epoch>,
    },
    /// Adds a space from its description (API.md §8).
    AddSpace { description: String },
    /// Removes a space and its regions.
    RmSpace { name: String },
    /// Sets or clears the cluster-wide read-only flag.
    SetReadOnly { read_only: bool },
    /// Stores the layout advisor's calibrated parameters in the
    /// configuration (`tessera calibrate`), replacing any before; the
    /// epoch moves so that every client reads them. A payload that does not
    /// validate (unknown version, a value out of range) is refused with
    /// BADSPACE and changes nothing.
    SetAdvisorParams {
        params: Box<tessera_types::AdvisorCalibration>,
    },
    /// The coordinator group's membership changed: the configuration's
    /// `coordinators` list differs, so the epoch must move.
    MembershipChanged,
    /// The daemon goes Offline (see [`Command::ServerOffline`]) without an
    /// operator: the leader's failure detector has not heard from it within
    /// the failure timeout, two reporters could not reach it, or it asked
    /// to leave because it cannot persist. Unlike an operator's, this
    /// offline daemon may register again by itself.
    /// A daemon already Offline, or unknown, is left alone (`Done`): the
    /// detector may propose twice, or race with an operator.
    DaemonOffline { id: DaemonId },
    /// The target of transfer `transfer` caught up: it joins the region's
    /// chain at the tail and the transfer ends. NOTFOUND for a transfer that
    /// is unknown, finished or cancelled (harmless for the sender).
    TransferComplete { transfer: u64 },
    /// Operator: the daemon goes Offline, leaves every chain (each keeps its
    /// order; a chain may become shorter or empty), its transfers are
    /// cancelled, and repair re-plans. NOTFOUND for an unknown id.
    ServerOffline { id: DaemonId },
    /// Operator: the daemon becomes Available (in no chain) so that repair
    /// may use it. NOTFOUND for an unknown id, COORDFAIL for a killed one.
    ServerOnline { id: DaemonId },
    /// Operator: the daemon is removed entirely (after leaving every chain).
    /// Its id is never handed out again. NOTFOUND for an unknown id.
    ServerForget { id: DaemonId },
    /// Operator: as `ServerOffline`, and the daemon is told to stop at its
    /// next heartbeat; it may not register again under its id.
    ServerKill { id: DaemonId },
    /// The leader's detector ([`crate::node::CoordinatorNode`]): the daemon,
    /// Offline, stayed silent for the lost timeout while regions of replex
    /// spaces wait for it as their last daemon. As `ServerKill`, so those
    /// regions are rebuilt from the other replexes, and it is remembered
    /// in [`ClusterState::lost`] (told why it must stop). Applied only
    /// while [`ClusterState::may_declare_lost`] still holds (the daemon may
    /// have come back since the leader proposed it); otherwise nothing
    /// changes.
    DaemonLost { id: DaemonId },
    /// The leader's tombstone policy ([`crate::node::CoordinatorNode`]):
    /// tombstones of versions issued before epoch `horizon` may be
    /// collected. The epoch moves, so the daemons learn it and so the
    /// current epoch ends (its own tombstones become collectable one grace
    /// later). A horizon not beyond the current one changes nothing, so a
    /// proposal made twice applies once; one beyond the current epoch is
    /// refused (no such epoch has ended).
    AdvanceTombstoneHorizon { horizon: Epoch },
    /// A new subspace on these attributes (names), built live: it starts
    /// building (see `crate::layout`).
    AddSubspace { space: String, attrs: Vec<String> },
    /// Subspace `part` (never the key subspace, part 0) starts dropping.
    RmSubspace { space: String, part: PartId },
    /// A new local index on `attr` (an attribute name, or `docattr.path`
    /// for a path inside a document attribute), built live.
    AddIndex { space: String, attr: String },
    /// Index `part` of `space` starts dropping; without a space, of the
    /// one space that has an index `part` (HyperDex's `rm_index(idxid)`).
    RmIndex { space: Option<String>, part: PartId },
    /// A new global index on `attr` with `partitions` indexlets (default:
    /// the space's partitions), built live.
    AddGlobalIndex {
        space: String,
        attr: String,
        partitions: Option<u32>,
    },
    /// The global index on `attr` starts dropping.
    RmGlobalIndex { space: String, attr: String },
    /// The global index on `attr` is cut again, also at `at`: a new part
    /// with those cuts builds, then the old one drops.
    SplitGlobalIndex {
        space: String,
        attr: String,
        at: Vec<String>,
    },
    /// Global index `part` of `space` is cut again, also at the order
    /// coordinates `cuts` (the leader's split of indexlets grown too big).
    SplitGlobalIndexAt {
        space: SpaceId,
        part: PartId,
        cuts: Vec<u64>,
    },
    /// The space moves to the subspaces and indexes of `description` (same
    /// name, key and attributes): the new parts build, then the omitted
    /// ones drop.
    Relayout { space: String, description: String },
    /// The daemons' backfill of a building part reached `progress` percent,
    /// or is `done` in every region (the leader proposes it from their
    /// reports). Stale reports change nothing.
    PartProgress {
        space: SpaceId,
        part: PartId,
        progress: u8,
        done: bool,
    },
    /// A dropping part leaves the configuration (the leader proposes it
    /// once every daemon has installed the epoch in which it started
    /// dropping, so nothing still writes to it).
    PartDropped { space: SpaceId, part: PartId },
    /// The target of rebuild `rebuild` holds every object of its lost
    /// replex region: it becomes the region's chain in a new epoch and the
    /// rebuild ends. NOTFOUND for a rebuild that is unknown, finished or
    /// cancelled (harmless for the sender).
    RebuildComplete { rebuild: u64 },
}

/// The outcome of one [`Command`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResult {
    /// `RegisterDaemon`: the daemon's id (fresh or confirmed).
    Registered { id: DaemonId },
    /// `AddSpace`: the new space's id.
    SpaceAdded { id: SpaceId },
    /// `AddSubspace`, `AddIndex`: the new part's id.
    PartAdded { part: PartId },
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
    /// The next transfer id to hand out (ids start at 1, never reused).
    pub transfer_id_next: u64,
    /// Running state transfers, by increasing id. At most one per region;
    /// `from` is the region's tail, `to` an Available daemon outside it.
    pub transfers: Vec<Transfer>,
    /// Daemons killed by an operator: Offline, told to stop at their next
    /// heartbeat, and barred from registering again under their id.
    pub killed: BTreeSet<DaemonId>,
    /// Regions whose chain emptied, with the replica that left last. It
    /// still holds every update the region acknowledged, so when it is
    /// Available again (it registers, or an operator brings it online) it
    /// becomes the region's chain and repair copies the region from it.
    #[serde(default)]
    pub orphans: BTreeMap<RegionId, DaemonId>,
    /// The epoch in which each daemon last left a chain (it went offline,
    /// or registered again). Until it has installed that epoch it may still
    /// believe it holds those places — lead a key, answer its reads — so the
    /// coordinator renews its lease only once it reports that epoch.
    #[serde(default)]
    pub left_chain_at: BTreeMap<DaemonId, Epoch>,
    /// Daemons an operator took offline (`server-offline`, `server-kill`):
    /// unlike those the failure detector took out, they do not ask to come
    /// back by themselves. Registering (a restart) or `server-online`
    /// clears the mark.
    #[serde(default)]
    pub held_offline: BTreeSet<DaemonId>,
    /// See [`Configuration::tombstone_horizon`]; always below `epoch`.
    #[serde(default)]
    pub tombstone_horizon: Epoch,
    /// Per space, the next layout part id to hand out (part 0 is the key
    /// subspace; ids are never reused within the space).
    #[serde(default)]
    pub part_id_next: BTreeMap<SpaceId, u64>,
    /// Per space, the parts a `relayout` omitted: they start dropping in
    /// the epoch in which nothing in the space is building any more.
    #[serde(default)]
    pub pending_drops: BTreeMap<SpaceId, BTreeSet<PartId>>,
    /// See [`Configuration::advisor`].
    #[serde(default)]
    pub advisor: Option<tessera_types::AdvisorCalibration>,
    /// The next rebuild id to hand out (ids start at 1, never reused).
    #[serde(default = "first_id")]
    pub rebuild_id_next: u64,
    /// Running rebuilds of lost replex regions, by increasing id (see
    /// [`crate::rebuild`]).
    #[serde(default)]
    pub rebuilds: Vec<Rebuild>,
    /// The killed daemons that the leader's detector, not an operator,
    /// declared lost (`DaemonLost`); a subset of `killed`.
    #[serde(default)]
    pub lost: BTreeSet<DaemonId>,
    /// Per region, who was its tail from which epoch (the latest last; see
    /// [`crate::tails`]).
    #[serde(default)]
    pub tail_terms: BTreeMap<RegionId, Vec<crate::tails::TailTerm>>,
}

fn first_id() -> u64 {
    1
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
            transfer_id_next: 1,
            transfers: Vec::new(),
            killed: BTreeSet::new(),
            lost: BTreeSet::new(),
            orphans: BTreeMap::new(),
            left_chain_at: BTreeMap::new(),
            held_offline: BTreeSet::new(),
            tombstone_horizon: Epoch(0),
            part_id_next: BTreeMap::new(),
            pending_drops: BTreeMap::new(),
            advisor: None,
            rebuild_id_next: 1,
            rebuilds: Vec::new(),
            tail_terms: BTreeMap::new(),
        }
    }
}

/// An invariant of the cluster state that does not hold (see the module
/// docs); [`ClusterState::apply`] stops on one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckInvariantsError {
    /// A region's chain names one daemon twice.
    #[error("region {region}'s chain repeats a daemon")]
    ChainRepeats { region: RegionId },
    /// A region's chain holds a daemon that is not Available.
    #[error("region {region}'s chain holds daemon {daemon}, which is not available")]
    UnavailableInChain { region: RegionId, daemon: DaemonId },
    /// Transfer ids are not increasing, or one was not handed out yet.
    #[error("transfer {transfer} is out of order")]
    TransferOutOfOrder { transfer: u64 },
    /// A transfer names a region no space has.
    #[error("transfer {transfer} copies a region that does not exist")]
    TransferOfMissingRegion { transfer: u64 },
    /// Two transfers copy one region.
    #[error("transfer {transfer} copies a region another transfer copies")]
    TransferOfBusyRegion { transfer: u64 },
    /// A transfer's source or target is not Available.
    #[error("transfer {transfer} runs from or to a daemon that is not available")]
    TransferUnavailable { transfer: u64 },
    /// A transfer's source is not its region's tail, or its target is in
    /// the chain already.
    #[error(
        "transfer {transfer} does not run from its region's tail to a daemon outside the chain"
    )]
    TransferEnds { transfer: u64 },
    /// The tombstone horizon names an epoch that has not ended.
    #[error("tombstone horizon {horizon} is not below the epoch {epoch}")]
    HorizonAhead { horizon: Epoch, epoch: Epoch },
    /// A space's layout parts disagree with its description, repeat an id,
    /// hold an id not handed out yet, or its key subspace is not part 0
    /// and ready.
    #[error("space {space}'s layout parts are inconsistent")]
    LayoutMismatch { space: SpaceId },
    /// Two regions of a replex space (without relaxed placement) that can
    /// hold the same object share a daemon.
    #[error("regions {first} and {second} can hold one object but share daemon {daemon}")]
    ReplexCopiesShareDaemon {
        daemon: DaemonId,
        first: RegionId,
        second: RegionId,
    },
    /// Rebuild ids are not increasing, or one was not handed out yet.
    #[error("rebuild {rebuild} is out of order")]
    RebuildOutOfOrder { rebuild: u64 },
    /// Two rebuilds rebuild one region.
    #[error("rebuild {rebuild} rebuilds a region another rebuild rebuilds")]
    RebuildOfBusyRegion { rebuild: u64 },
    /// A rebuild's region is gone or has a daemon, its target is not
    /// Available, or a source is not held by the daemon the plan named.
    #[error("rebuild {rebuild} can no longer complete as planned")]
    RebuildStale { rebuild: u64 },
    /// A rebuild's target holds a region able to hold one of the lost
    /// region's objects (strict replex placement), or is the target of
    /// such a region's rebuild too.
    #[error("rebuild {rebuild}'s target {daemon} would hold two copies of one object")]
    RebuildTargetConflict { rebuild: u64, daemon: DaemonId },
}

impl ClusterState {
    /// Applies one command. Refused commands change nothing.
    pub fn apply(&mut self, command: Command) -> CommandResult {
        let epoch_before = self.epoch;
        let result = match command {
            Command::RegisterDaemon {
                id,
                addr,
                metrics,
                installed,
            } => self.register_daemon(id, addr, metrics, installed),
            Command::AddSpace { description } => self.add_space(&description),
            Command::RmSpace { name } => self.rm_space(&name),
            Command::SetReadOnly { read_only } => {
                if self.read_only != read_only {
                    self.read_only = read_only;
                    self.bump();
                }
                CommandResult::Done
            }
            Command::SetAdvisorParams { params } => {
                if let Err(e) = params.validate() {
                    return CommandResult::Failed {
                        status: AdminStatus::BadSpace,
                        reason: e.to_string(),
                    };
                }
                if self.advisor.as_ref() != Some(&*params) {
                    self.advisor = Some(*params);
                    self.bump();
                }
                CommandResult::Done
            }
            Command::MembershipChanged => {
                self.bump();
                CommandResult::Done
            }
            Command::AdvanceTombstoneHorizon { horizon } => {
                if horizon > self.epoch {
                    return CommandResult::Failed {
                        status: AdminStatus::CoordFail,
                        reason: format!(
                            "tombstone horizon {horizon} is beyond the current epoch {}",
                            self.epoch
                        ),
                    };
                }
                if horizon > self.tombstone_horizon {
                    self.tombstone_horizon = horizon;
                    self.bump();
                }
                CommandResult::Done
            }
            Command::DaemonOffline { id } => {
                if self.daemons.get(&id).map(|d| d.state) == Some(DaemonState::Available) {
                    tracing::warn!(daemon = %id, "daemon taken offline: silent past the failure timeout, unreachable, or it left");
                    self.take_offline(id);
                    self.bump();
                }
                CommandResult::Done
            }
            Command::TransferComplete { transfer } => self.transfer_complete(transfer),
            Command::RebuildComplete { rebuild } => self.rebuild_complete(rebuild),
            Command::ServerOffline { id } => match self.known(id) {
                Err(failed) => failed,
                Ok(DaemonState::Offline) => {
                    // Already out (failed or left): it stays out until an
                    // operator says otherwise. Nothing a daemon sees moves.
                    self.held_offline.insert(id);
                    CommandResult::Done
                }
                Ok(DaemonState::Available) => {
                    self.take_offline(id);
                    self.held_offline.insert(id);
                    self.bump();
                    CommandResult::Done
                }
            },
            Command::ServerOnline { id } => match self.known(id) {
                Err(failed) => failed,
                Ok(_) if self.killed.contains(&id) => CommandResult::Failed {
                    status: AdminStatus::CoordFail,
                    reason: format!("daemon {id} was killed and cannot come back online; forget it and start it afresh"),
                },
                Ok(DaemonState::Available) => CommandResult::Done,
                Ok(DaemonState::Offline) => {
                    self.held_offline.remove(&id);
                    self.daemons.get_mut(&id).expect("known").state = DaemonState::Available;
                    self.adopt_orphans(id);
                    self.bump();
                    CommandResult::Done
                }
            },
            Command::ServerForget { id } => match self.known(id) {
                Err(failed) => failed,
                Ok(_) => {
                    self.take_offline(id);
                    self.left_chain_at.remove(&id);
                    self.daemons.remove(&id);
                    self.forget_holder(id);
                    self.killed.remove(&id);
                    self.lost.remove(&id);
                    self.held_offline.remove(&id);
                    self.bump();
                    CommandResult::Done
                }
            },
            Command::AddSubspace { space, attrs } => match self.add_subspace(&space, &attrs) {
                Ok(part) => CommandResult::PartAdded { part },
                Err(e) => e.into(),
            },
            Command::RmSubspace { space, part } => match self.rm_subspace(&space, part) {
                Ok(()) => CommandResult::Done,
                Err(e) => e.into(),
            },
            Command::AddIndex { space, attr } => match self.add_index(&space, &attr) {
                Ok(part) => CommandResult::PartAdded { part },
                Err(e) => e.into(),
            },
            Command::RmIndex { space, part } => match self.rm_index(space.as_deref(), part) {
                Ok(()) => CommandResult::Done,
                Err(e) => e.into(),
            },
            Command::AddGlobalIndex {
                space,
                attr,
                partitions,
            } => match self.add_global_index(&space, &attr, partitions) {
                Ok(part) => CommandResult::PartAdded { part },
                Err(e) => e.into(),
            },
            Command::SplitGlobalIndexAt { space, part, cuts } => {
                match self.split_global_index_at(space, part, &cuts) {
                    Ok(part) => CommandResult::PartAdded { part },
                    Err(e) => e.into(),
                }
            }
            Command::SplitGlobalIndex { space, attr, at } => {
                match self.split_global_index(&space, &attr, &at) {
                    Ok(part) => CommandResult::PartAdded { part },
                    Err(e) => e.into(),
                }
            }
            Command::RmGlobalIndex { space, attr } => {
                match self.rm_global_index(&space, &attr) {
                    Ok(()) => CommandResult::Done,
                    Err(e) => e.into(),
                }
            }
            Command::Relayout { space, description } => {
                match self.relayout(&space, &description) {
                    Ok(()) => CommandResult::Done,
                    Err(e) => e.into(),
                }
            }
            Command::PartProgress {
                space,
                part,
                progress,
                done,
            } => {
                if self.part_progress(space, part, progress, done) {
                    self.bump();
                }
                CommandResult::Done
            }
            Command::PartDropped { space, part } => {
                if self.part_dropped(space, part) {
                    self.bump();
                }
                CommandResult::Done
            }
            Command::ServerKill { id } => match self.known(id) {
                Err(failed) => failed,
                Ok(_) if self.killed.contains(&id) => CommandResult::Done,
                Ok(_) => {
                    self.kill(id);
                    CommandResult::Done
                }
            },
            Command::DaemonLost { id } => {
                if self.may_declare_lost(id).is_some() {
                    tracing::warn!(daemon = %id, "daemon declared lost: rebuilding its replex regions elsewhere");
                    self.kill(id);
                    self.lost.insert(id);
                }
                CommandResult::Done
            }
        };
        if self.epoch != epoch_before {
            // Repair belongs to the command that made it necessary: the
            // epoch has moved once already, so it does not move again.
            self.repair();
        }
        // In release builds too: a coordinator whose state breaks an
        // invariant must stop applying commands (the panic stops it)
        // rather than publish configurations built on it. The check walks
        // every region once, cheap beside a Raft round.
        if let Err(broken) = self.check_invariants() {
            panic!(
                "a command broke the cluster state's invariants at epoch {}: {broken}",
                self.epoch
            );
        }
        assert!(
            self.epoch.0 - epoch_before.0 <= 1,
            "a command moved the epoch from {epoch_before} to {}, by more than one",
            self.epoch
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
            transfers: self.transfers.clone(),
            tombstone_horizon: self.tombstone_horizon,
            advisor: self.advisor.clone(),
            rebuilds: self.rebuilds.clone(),
            waiting: self.orphans.clone(),
        }
    }

    pub(crate) fn bump(&mut self) {
        self.epoch = Epoch(self.epoch.0 + 1);
        self.note_tails();
    }

    /// The daemon's state, or the NOTFOUND failure to answer with.
    fn known(&self, id: DaemonId) -> Result<DaemonState, CommandResult> {
        self.daemons
            .get(&id)
            .map(|d| d.state)
            .ok_or_else(|| CommandResult::Failed {
                status: AdminStatus::NotFound,
                reason: format!("no daemon {id}"),
            })
    }

    /// Every region, in space, subspace and region order.
    fn regions(&self) -> impl Iterator<Item = (&SpaceDesc, &Region)> {
        self.spaces.iter().flat_map(|space| {
            space
                .subspaces
                .iter()
                .flat_map(move |sub| sub.regions.iter().map(move |r| (&space.desc, r)))
        })
    }

    /// The region with id `region`, to change.
    pub(crate) fn region_mut(&mut self, region: RegionId) -> Option<&mut tessera_types::Region> {
        self.spaces
            .iter_mut()
            .flat_map(|s| s.subspaces.iter_mut())
            .flat_map(|l| l.regions.iter_mut())
            .find(|r| r.id == region)
    }

    /// Marks the daemon Offline, takes it out of every chain (keeping each
    /// chain's order) and cancels the transfers to or from it. The caller
    /// bumps the epoch.
    fn take_offline(&mut self, id: DaemonId) {
        if let Some(info) = self.daemons.get_mut(&id) {
            info.state = DaemonState::Offline;
        }
        if self.regions().any(|(_, r)| r.chain.contains(&id)) {
            self.note_left_chain(id);
        }
        for space in &mut self.spaces {
            for sub in &mut space.subspaces {
                for region in &mut sub.regions {
                    let before = region.chain.len();
                    region.chain.retain(|d| *d != id);
                    if before > 0 && region.chain.is_empty() {
                        tracing::warn!(
                            space = %space.desc.name,
                            region = %region.id,
                            daemon = %id,
                            "region lost its last replica; it is unavailable until that daemon returns"
                        );
                        self.orphans.insert(region.id, id);
                    }
                }
            }
        }
        self.transfers.retain(|t| t.from != id && t.to != id);
    }

    /// Records that `id` leaves a chain in the epoch the caller is about to
    /// bump to.
    fn note_left_chain(&mut self, id: DaemonId) {
        self.left_chain_at.insert(id, Epoch(self.epoch.0 + 1));
    }

    /// Plans a refresh (see [`ClusterState::refresh`]) of every region of
    /// a replex space that `id`, registering again, is the one daemon of:
    /// key regions first (their point leaders forgot the updates they had
    /// started), then the others (they forgot the updates they held
    /// pending, which the parts after them may have committed since;
    /// simulator seed 146007266). True when any was planned.
    fn refresh_replex_regions(&mut self, id: DaemonId) -> bool {
        let heads: Vec<RegionId> = self
            .spaces
            .iter()
            .filter(|s| s.desc.replex.is_some())
            .flat_map(|s| s.subspaces.iter())
            .flat_map(|l| &l.regions)
            .filter(|r| r.chain == [id])
            .map(|r| r.id)
            .collect();
        let batch: BTreeSet<RegionId> = heads.iter().copied().collect();
        let mut changed = false;
        for region in heads {
            changed |= self.refresh(region, id, &batch);
        }
        changed
    }

    /// Takes `id` out of every chain that has another member; true when
    /// any chain changed.
    fn leave_shared_chains(&mut self, id: DaemonId) -> bool {
        let mut changed = false;
        for space in &mut self.spaces {
            for sub in &mut space.subspaces {
                for region in &mut sub.regions {
                    if region.chain.len() > 1 && region.chain.contains(&id) {
                        region.chain.retain(|d| *d != id);
                        changed = true;
                    }
                }
            }
        }
        if changed {
            self.note_left_chain(id);
        }
        changed
    }

    fn transfer_complete(&mut self, transfer: u64) -> CommandResult {
        let Some(index) = self.transfers.iter().position(|t| t.id == transfer) else {
            return CommandResult::Failed {
                status: AdminStatus::NotFound,
                reason: format!("no transfer {transfer} is running (finished or cancelled)"),
            };
        };
        let t = self.transfers.remove(index);
        let region = self
            .spaces
            .iter_mut()
            .flat_map(|s| s.subspaces.iter_mut())
            .flat_map(|sub| sub.regions.iter_mut())
            .find(|r| r.id == t.region)
            .expect("repair cancels transfers of removed regions");
        assert_eq!(
            region.chain.last(),
            Some(&t.from),
            "transfer {}: repair keeps its source the tail of region {}",
            t.id,
            t.region
        );
        assert!(
            !region.chain.contains(&t.to),
            "transfer {}: its target {} is in the chain of region {} already",
            t.id,
            t.to,
            t.region
        );
        region.chain.push(t.to);
        // A move: the member it relieves leaves in the same epoch (if it
        // is still there), so the chain keeps its length. It may still act
        // on its old place until it installs this epoch: no lease until then.
        let mut left = false;
        if let Some(old) = t.replaces {
            if old != t.to && region.chain.contains(&old) {
                region.chain.retain(|d| *d != old);
                left = true;
            }
        }
        if let (true, Some(old)) = (left, t.replaces) {
            self.note_left_chain(old);
        }
        self.bump();
        CommandResult::Done
    }

    /// Brings the transfers in line with the chains: cancels every transfer
    /// that can no longer complete, then plans one transfer for each region
    /// that is short of `f + 1` replicas, has none running, and is not empty.
    /// Returns whether anything changed. Deterministic: regions are visited
    /// in space, subspace and region order, targets chosen by load then id.
    pub fn repair(&mut self) -> bool {
        let mut changed = false;
        // Cancel what can no longer complete: the region is gone, `from` is
        // no longer its tail, or either end is not Available.
        let tails: BTreeMap<RegionId, (Option<DaemonId>, Vec<DaemonId>)> = self
            .regions()
            .map(|(_, r)| (r.id, (r.chain.last().copied(), r.chain.clone())))
            .collect();
        let available =
            |d: &DaemonId| self.daemons.get(d).map(|i| i.state) == Some(DaemonState::Available);
        // A region being rebuilt or refreshed is not moved meanwhile: the
        // move would copy a region still being filled, and its completion
        // would end the refresh half done (`plan_building_moves` moves it
        // again once the refresh is over).
        // Nor is a region of a replex space moved beside a region able to
        // hold one of its objects that reached the target after the move
        // was planned (a relayout's new region placed there: the move
        // would end beside it, simulator seed 153016860).
        let rebuilt: BTreeSet<RegionId> = self.rebuilds.iter().map(|b| b.region).collect();
        let lands_beside = |t: &Transfer| {
            self.spaces.iter().any(|space| {
                locate(space, t.region)
                    .is_some_and(|(k, i)| replex_move_conflicts(space, k, i, t.to))
            })
        };
        let keep: Vec<bool> = self
            .transfers
            .iter()
            .map(|t| match tails.get(&t.region) {
                Some((tail, chain)) => {
                    *tail == Some(t.from)
                        && !chain.contains(&t.to)
                        && available(&t.from)
                        && available(&t.to)
                        && !rebuilt.contains(&t.region)
                        && !lands_beside(t)
                }
                None => false,
            })
            .collect();
        if keep.iter().any(|k| !k) {
            let mut keep = keep.into_iter();
            self.transfers
                .retain(|_| keep.next().expect("one flag per transfer"));
            changed = true;
        }

        // Load: replicas held plus transfers being received.
        let mut load: BTreeMap<DaemonId, u64> = self
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .map(|d| (d.id, 0))
            .collect();
        for (_, region) in self.regions() {
            for d in &region.chain {
                if let Some(l) = load.get_mut(d) {
                    *l += 1;
                }
            }
        }
        for t in &self.transfers {
            if let Some(l) = load.get_mut(&t.to) {
                *l += 1;
            }
        }
        let busy: BTreeSet<RegionId> = self.transfers.iter().map(|t| t.region).collect();
        let mut planned: Vec<(RegionId, DaemonId, DaemonId, Option<DaemonId>)> = Vec::new();
        for (desc, region) in self.regions() {
            // One in a replex space: its regions are never copied by
            // transfer (a lost one is rebuilt from the other replexes).
            let replicas = desc.replicas_per_region();
            let Some(&tail) = region.chain.last() else {
                continue; // Every replica lost: nothing to copy from.
            };
            if region.chain.len() >= replicas || busy.contains(&region.id) {
                continue;
            }
            let target = load
                .iter()
                .filter(|(d, _)| !region.chain.contains(d))
                .min_by_key(|(d, l)| (**l, **d))
                .map(|(d, _)| *d);
            if let Some(to) = target {
                *load.get_mut(&to).expect("a candidate") += 1;
                planned.push((region.id, tail, to, None));
            }
        }
        changed |= self.repair_rebuilds(&mut load);
        let moves = self.plan_building_moves(&mut load, &busy);
        planned.extend(moves);
        // No move while a rebuild runs: it could move a rebuild's source.
        if planned.is_empty() && self.transfers.is_empty() && self.rebuilds.is_empty() {
            if let Some(planned_move) = self.plan_move(&load) {
                planned.push(planned_move);
            }
        }
        for (region, from, to, replaces) in planned {
            let id = self.transfer_id_next;
            self.transfer_id_next += 1;
            self.transfers.push(Transfer {
                id,
                region,
                from,
                to,
                replaces,
            });
            changed = true;
        }
        changed
    }

    /// Rebalancing, once nothing needs repair and no transfer runs: when
    /// the most loaded Available daemon holds at least two chain places
    /// more than the least loaded one (a daemon back from a pause or a
    /// partition holds none), one region moves from the former to the
    /// latter — a transfer whose target replaces it in the chain. Each move
    /// narrows the spread, so moves stop; one runs at a time.
    fn plan_move(
        &self,
        load: &BTreeMap<DaemonId, u64>,
    ) -> Option<(RegionId, DaemonId, DaemonId, Option<DaemonId>)> {
        let (&light, &low) = load.iter().min_by_key(|(d, l)| (**l, **d))?;
        let (&heavy, &high) = load
            .iter()
            .max_by_key(|(d, l)| (**l, std::cmp::Reverse(**d)))?;
        if high < low + 2 {
            return None;
        }
        // A move in a replex space never puts two copies of an object on
        // one daemon.
        self.spaces
            .iter()
            .flat_map(|space| {
                space.subspaces.iter().enumerate().flat_map(move |(k, l)| {
                    l.regions
                        .iter()
                        .enumerate()
                        .map(move |(i, r)| (space, k, i, r))
                })
            })
            .find(|(space, k, i, r)| {
                r.chain.contains(&heavy)
                    && !r.chain.contains(&light)
                    && !replex_move_conflicts(space, *k, *i, light)
            })
            .and_then(|(_, _, _, r)| Some((r.id, *r.chain.last()?, light, Some(heavy))))
    }

    fn check_layout(&self, space: &Space) -> Result<(), ()> {
        let key = space.subspaces.first().ok_or(())?;
        let parts = space.parts();
        let ids: BTreeSet<PartId> = parts.iter().map(|p| p.id).collect();
        let of_kind = |kind: SubspaceKind| -> Vec<&Vec<usize>> {
            let layouts = space.subspaces.iter().skip(1);
            layouts
                .filter(|l| l.kind == kind)
                .map(|l| &l.attrs)
                .collect()
        };
        let globals: Vec<Vec<usize>> = space
            .desc
            .global_indexes
            .iter()
            .map(|g| vec![g.attr])
            .collect();
        // A split keeps two parts on one attribute for a while: the
        // description names each indexed attribute once.
        // In any order: a split appends its new part after later ones.
        let global_layouts: BTreeSet<&Vec<usize>> =
            of_kind(SubspaceKind::GlobalIndex).into_iter().collect();
        let indexes: Vec<usize> = space
            .indexes
            .iter()
            .filter(|ix| ix.path.is_none())
            .map(|ix| ix.attr)
            .collect();
        let fine = key.part == PartId(0)
            && key.state == PartState::Ready
            && ids.len() == parts.len()
            && ids.iter().all(|id| {
                id.0 == 0 || id.0 < self.part_id_next.get(&space.id).copied().unwrap_or(0)
            })
            && key.kind == SubspaceKind::Subspace
            && space.desc.subspaces.iter().collect::<Vec<_>>() == of_kind(SubspaceKind::Subspace)
            && globals.len() == global_layouts.len()
            && globals.iter().collect::<BTreeSet<_>>() == global_layouts
            && space.desc.indexes == indexes
            && self.replex_layout_matches(space);
        fine.then_some(()).ok_or(())
    }

    /// A replex space's description names exactly the parts it has
    /// ([`decl_of_layouts`]), each cut as its description cuts it (in
    /// any order: a relayout appends the parts it adds); another space has
    /// no replex or hybrid part.
    fn replex_layout_matches(&self, space: &Space) -> bool {
        let Some(decl) = &space.desc.replex else {
            return space
                .subspaces
                .iter()
                .all(|l| !matches!(l.kind, SubspaceKind::Replex | SubspaceKind::Hybrid));
        };
        let shapes = tessera_types::replex::replex_shapes(&space.desc);
        let mut described: Vec<_> = shapes
            .iter()
            .map(|s| (s.kind as u8, &s.attrs, &s.splits))
            .collect();
        let mut laid_out: Vec<_> = space
            .subspaces
            .iter()
            .map(|l| (l.kind as u8, &l.attrs, &l.splits))
            .collect();
        described.sort();
        laid_out.sort();
        space.desc.subspaces.is_empty()
            && space.desc.global_indexes.is_empty()
            && decl_of_layouts(&space.subspaces, decl.relaxed).as_ref() == Some(decl)
            && described == laid_out
    }

    /// Checks the invariants on chains and transfers (see the module docs).
    pub fn check_invariants(&self) -> Result<(), CheckInvariantsError> {
        let available =
            |d: &DaemonId| self.daemons.get(d).map(|i| i.state) == Some(DaemonState::Available);
        // Runs after every command: no allocation per region (chains are
        // f + 1 long, so the pairwise test is the cheap one), and only the
        // chains of regions under transfer are kept.
        for space in &self.spaces {
            self.check_layout(space)
                .map_err(|()| CheckInvariantsError::LayoutMismatch { space: space.id })?;
        }
        for space in &self.spaces {
            if space.desc.replex.as_ref().is_some_and(|r| !r.relaxed) {
                if let Some((daemon, first, second)) = replex_conflict(space) {
                    return Err(CheckInvariantsError::ReplexCopiesShareDaemon {
                        daemon,
                        first,
                        second,
                    });
                }
            }
        }
        let copied: BTreeSet<RegionId> = self.transfers.iter().map(|t| t.region).collect();
        let mut chains = BTreeMap::new();
        for (_, region) in self.regions() {
            let chain = &region.chain;
            if (1..chain.len()).any(|i| chain[..i].contains(&chain[i])) {
                return Err(CheckInvariantsError::ChainRepeats { region: region.id });
            }
            if let Some(&daemon) = region.chain.iter().find(|d| !available(d)) {
                return Err(CheckInvariantsError::UnavailableInChain {
                    region: region.id,
                    daemon,
                });
            }
            if copied.contains(&region.id) {
                chains.insert(region.id, chain);
            }
        }
        if self.tombstone_horizon > Epoch(0) && self.tombstone_horizon >= self.epoch {
            return Err(CheckInvariantsError::HorizonAhead {
                horizon: self.tombstone_horizon,
                epoch: self.epoch,
            });
        }
        self.check_rebuilds()?;
        let mut busy = BTreeSet::new();
        let mut last_id = 0;
        for t in &self.transfers {
            if t.id <= last_id || t.id >= self.transfer_id_next {
                return Err(CheckInvariantsError::TransferOutOfOrder { transfer: t.id });
            }
            last_id = t.id;
            let Some(chain) = chains.get(&t.region) else {
                return Err(CheckInvariantsError::TransferOfMissingRegion { transfer: t.id });
            };
            if !busy.insert(t.region) {
                return Err(CheckInvariantsError::TransferOfBusyRegion { transfer: t.id });
            }
            if !available(&t.from) || !available(&t.to) {
                return Err(CheckInvariantsError::TransferUnavailable { transfer: t.id });
            }
            if chain.last() != Some(&t.from) || chain.contains(&t.to) {
                return Err(CheckInvariantsError::TransferEnds { transfer: t.id });
            }
        }
        Ok(())
    }

    /// The rebuild invariants (see the module docs).
    fn check_rebuilds(&self) -> Result<(), CheckInvariantsError> {
        let mut busy = BTreeSet::new();
        let mut last_id = 0;
        for (n, b) in self.rebuilds.iter().enumerate() {
            if b.id <= last_id || b.id >= self.rebuild_id_next {
                return Err(CheckInvariantsError::RebuildOutOfOrder { rebuild: b.id });
            }
            last_id = b.id;
            if !busy.insert(b.region) {
                return Err(CheckInvariantsError::RebuildOfBusyRegion { rebuild: b.id });
            }
            if !self.rebuild_holds(b) {
                return Err(CheckInvariantsError::RebuildStale { rebuild: b.id });
            }
            let space = self
                .spaces
                .iter()
                .find(|s| locate(s, b.region).is_some())
                .expect("rebuild_holds found the region");
            let (k, i) = locate(space, b.region).expect("found above");
            // Parts being built are no copies yet: their regions may sit
            // beside others until moved (`Placer::place_added_replex_parts`).
            let building = |l: &SubspaceLayout| matches!(l.state, PartState::Building { .. });
            if building(&space.subspaces[k]) {
                continue;
            }
            // Judged without them (a copy of the space only while a
            // relayout builds: this check runs after every command).
            let settled_copy;
            let settled = if space.subspaces.iter().any(building) {
                let mut copy = space.clone();
                for l in copy.subspaces.iter_mut().filter(|l| building(l)) {
                    for r in &mut l.regions {
                        r.chain.clear();
                    }
                }
                settled_copy = copy;
                &settled_copy
            } else {
                space
            };
            let in_building = |region: RegionId| {
                locate(space, region).is_some_and(|(q, _)| building(&space.subspaces[q]))
            };
            let others: Vec<Rebuild> = self
                .rebuilds
                .iter()
                .enumerate()
                .filter(|(m, o)| *m != n && !in_building(o.region))
                .map(|(_, o)| o.clone())
                .collect();
            let transfers: Vec<Transfer> = self
                .transfers
                .iter()
                .filter(|t| !in_building(t.region))
                .cloned()
                .collect();
            if rebuild_target_conflicts(settled, k, i, b.to, &others, &transfers) {
                return Err(CheckInvariantsError::RebuildTargetConflict {
                    rebuild: b.id,
                    daemon: b.to,
                });
            }
        }
        Ok(())
    }

    /// `id` goes Offline for good: told to stop, barred from registering.
    fn kill(&mut self, id: DaemonId) {
        self.take_offline(id);
        self.killed.insert(id);
        self.held_offline.insert(id);
        self.bump();
    }

    fn register_daemon(
        &mut self,
        id: Option<DaemonId>,
        addr: String,
        metrics: Option<String>,
        installed: Option<Epoch>,
    ) -> CommandResult {
        if let Some(id) = id {
            if self.killed.contains(&id) {
                let why = if self.lost.contains(&id) {
                    "was declared lost (silent for the lost timeout; its replex regions \
                     were rebuilt elsewhere)"
                } else {
                    "was killed"
                };
                return CommandResult::Failed {
                    status: AdminStatus::NotFound,
                    reason: format!(
                        "daemon {id} {why} and may not rejoin; forget it (server-forget) \
                         and start it with a fresh data directory"
                    ),
                };
            }
            if let Some(info) = self.daemons.get_mut(&id) {
                self.held_offline.remove(&id);
                let mut changed = info.addr != addr
                    || info.state != DaemonState::Available
                    || info.metrics != metrics;
                info.addr = addr;
                info.state = DaemonState::Available;
                info.metrics = metrics;
                // A daemon registering again has restarted (perhaps faster
                // than the failure timeout) and lost the updates it held in
                // flight, so it must not keep its chain places: it leaves
                // every chain where another replica remains, and repair
                // brings it back by state transfer. It stays where it is
                // the only replica, so restarting a whole cluster never
                // empties a chain. Its transfers restart from scratch.
                changed |= self.leave_shared_chains(id);
                changed |= self.note_restart(id, installed);
                changed |= self.adopt_orphans(id);
                changed |= self.refresh_replex_regions(id);
                let transfers = self.transfers.len();
                self.transfers.retain(|t| t.from != id && t.to != id);
                changed |= self.transfers.len() != transfers;
                if changed {
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
                metrics,
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
        if let Some(replex) = &desc.replex {
            // A replex space: its parts are its copies, placed so that no
            // two copies of an object share a daemon (or relaxed).
            // Region ids from the counter, committed once placement took.
            let (mut parts, next) = replex_layouts(&desc, RegionId(self.region_id_next));
            if let Err(e) = placer.place_replex(&mut parts, replex.relaxed) {
                return CommandResult::Failed {
                    status: AdminStatus::CoordFail,
                    reason: e.to_string(),
                };
            }
            // Nothing can fail from here on.
            let id = SpaceId(self.space_id_next);
            self.space_id_next += 1;
            self.region_id_next = next.0;
            for part in &mut parts {
                if part.part != PartId(0) {
                    part.part = self.fresh_part(id);
                }
            }
            return self.push_new_space(id, desc, parts);
        }
        let id = SpaceId(self.space_id_next);
        self.space_id_next += 1;
        // The declared layout is ready from the start: the space is empty.
        let mut subspaces = Vec::with_capacity(desc.subspaces.len() + 1);
        for attrs in desc.all_subspaces() {
            let part = if subspaces.is_empty() {
                PartId(0)
            } else {
                self.fresh_part(id)
            };
            subspaces.push(self.new_layout(&desc, attrs, part, PartState::Ready, &mut placer));
        }
        for &decl in &desc.global_indexes {
            let part = self.fresh_part(id);
            let layout = self.new_global_layout(&desc, decl, part, PartState::Ready, &mut placer);
            subspaces.push(layout);
        }
        self.push_new_space(id, desc, subspaces)
    }

    /// Adds space `id` with its placed `subspaces` and its declared local
    /// indexes, all ready (a new space is empty).
    fn push_new_space(
        &mut self,
        id: SpaceId,
        desc: SpaceDesc,
        subspaces: Vec<SubspaceLayout>,
    ) -> CommandResult {
        let indexes = desc
            .indexes
            .iter()
            .map(|&attr| IndexPart {
                id: self.fresh_part(id),
                attr,
                path: None,
                state: PartState::Ready,
            })
            .collect();
        self.spaces.push(Space {
            id,
            desc,
            subspaces,
            indexes,
        });
        self.bump();
        CommandResult::SpaceAdded { id }
    }

    fn rm_space(&mut self, name: &str) -> CommandResult {
        match self.spaces.iter().position(|s| s.desc.name == name) {
            Some(index) => {
                let space = self.spaces.remove(index);
                // A relayout of the space is abandoned with it.
                self.pending_drops.remove(&space.id);
                self.part_id_next.remove(&space.id);
                for region in space.subspaces.iter().flat_map(|s| &s.regions) {
                    self.orphans.remove(&region.id);
                }
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
    use crate::layout::LayoutChangeError;
    use tessera_types::region::{grid_for_partitions, uniform_splits};

    fn register(state: &mut ClusterState, n: usize) {
        for i in 0..n {
            let result = state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("127.0.0.1:{}", 2012 + i),
                metrics: None,
                installed: None,
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
            metrics: None,
            installed: None,
        });
        let b = state.apply(Command::RegisterDaemon {
            id: None,
            addr: "b:1".into(),
            metrics: None,
            installed: None,
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
            metrics: None,
            installed: None,
        });
        assert_eq!(again, CommandResult::Registered { id: DaemonId(1) });
        assert_eq!(state.epoch, epoch);
        // New address: updated, one epoch.
        let moved = state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "127.0.0.1:3000".into(),
            metrics: None,
            installed: None,
        });
        assert_eq!(moved, CommandResult::Registered { id: DaemonId(1) });
        assert_eq!(state.epoch, Epoch(epoch.0 + 1));
        assert_eq!(state.daemons[&DaemonId(1)].addr, "127.0.0.1:3000");
        // Offline daemon coming back becomes available.
        state.daemons.get_mut(&DaemonId(1)).unwrap().state = DaemonState::Offline;
        state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "127.0.0.1:3000".into(),
            metrics: None,
            installed: None,
        });
        assert_eq!(state.daemons[&DaemonId(1)].state, DaemonState::Available);
        assert_eq!(state.daemon_id_next, 2);
    }

    #[test]
    fn a_restarted_daemon_leaves_shared_chains_and_keeps_sole_ones() {
        let mut state = ClusterState::default();
        for i in 1..=3 {
            register(&mut state, i);
        }
        let added = state.apply(Command::AddSpace {
            description: "space s key k create 6 partitions tolerate 1 failure".into(),
        });
        assert!(
            matches!(added, CommandResult::SpaceAdded { .. }),
            "{added:?}"
        );
        let me = DaemonId(1);
        // Make one region's chain [me] alone, as if its partner had failed.
        let solo = {
            let region = &mut state.spaces[0].subspaces[0].regions[0];
            region.chain = vec![me];
            region.id
        };
        state.transfers.clear();
        let held_before = state
            .regions()
            .filter(|(_, r)| r.chain.contains(&me))
            .count();
        assert!(held_before > 1);
        let addr = state.daemons[&me].addr.clone();
        let epoch = state.epoch;
        let again = state.apply(Command::RegisterDaemon {
            id: Some(me),
            addr,
            metrics: None,
            installed: None,
        });
        assert_eq!(again, CommandResult::Registered { id: me });
        assert_eq!(
            state.epoch,
            Epoch(epoch.0 + 1),
            "a restart is one new epoch"
        );
        for (_, region) in state.regions() {
            if region.id == solo {
                assert_eq!(region.chain, vec![me], "the sole replica keeps its region");
            } else {
                assert!(
                    !region.chain.contains(&me),
                    "region {} still lists the restarted daemon",
                    region.id
                );
            }
        }
        // Repair plans transfers for the regions it left.
        assert!(state.transfers.iter().any(|t| t.to == me || t.from != me));
        assert!(!state.transfers.is_empty());
    }

    #[test]
    fn register_unknown_id_gets_a_fresh_id() {
        let mut state = ClusterState::default();
        let r = state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(77)),
            addr: "x:1".into(),
            metrics: None,
            installed: None,
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

    const REPLEX_3: &str = "space r key k attributes a, b replex a hybrid k, a groups 3, 4 \
                            index b create 12 partitions";

    #[test]
    fn a_replex_space_is_refused_on_too_few_daemons_and_created_on_enough() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        let epoch = state.epoch;
        match add(&mut state, REPLEX_3) {
            CommandResult::Failed { status, reason } => {
                assert_eq!(status, AdminStatus::CoordFail);
                assert!(reason.contains("with relaxed placement"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!((state.epoch, state.space_id_next), (epoch, 1));
        assert!(state.spaces.is_empty());

        register(&mut state, 1);
        let regions_before = state.region_id_next;
        assert!(matches!(
            add(&mut state, REPLEX_3),
            CommandResult::SpaceAdded { .. }
        ));
        state.check_invariants().unwrap();
        let space = &state.spaces[0];
        assert_eq!(space.desc.fault_tolerance, 2);
        let kinds: Vec<(PartId, SubspaceKind, usize)> = space
            .subspaces
            .iter()
            .map(|l| (l.part, l.kind, l.regions.len()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (PartId(0), SubspaceKind::Subspace, 12),
                (PartId(1), SubspaceKind::Hybrid, 12),
                (PartId(2), SubspaceKind::Replex, 12),
            ]
        );
        assert_eq!(space.indexes[0].id, PartId(3));
        assert_eq!(state.region_id_next, regions_before + 36);
        let ids: BTreeSet<RegionId> = space
            .subspaces
            .iter()
            .flat_map(|l| l.regions.iter().map(|r| r.id))
            .collect();
        assert_eq!(ids.len(), 36);
        assert!(space
            .subspaces
            .iter()
            .all(|l| l.regions.iter().all(|r| r.chain.len() == 1)));
        // No two copies of an object share a daemon, yet the three
        // daemons hold twelve regions each: the key subspace's groups 0
        // and 1 and the hybrid's group 2 on one, the key's group 2 and
        // the hybrid's groups 0 and 1 on another, the replex on the third.
        assert_eq!(replex_conflict(space), None);
        for d in state.daemons.keys() {
            assert_eq!(replica_count(&state, *d), 12);
        }
        // The configuration carries it; a new space needs no repair.
        let config = state.configuration(Vec::new());
        assert_eq!(config.spaces[0].subspaces.len(), 3);
        assert!(!state.clone().repair());
        // Subspaces are refused; a relayout to the same parts changes
        // nothing (replex_relayout_tests.rs changes them).
        assert!(matches!(
            state.add_subspace("r", &["b".to_string()]),
            Err(LayoutChangeError::ReplexSpace { .. })
        ));
        let epoch = state.epoch;
        state.relayout("r", REPLEX_3).unwrap();
        assert_eq!(state.epoch, epoch);
        state.check_invariants().unwrap();
    }

    #[test]
    fn relaxed_placement_accepts_too_few_daemons() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        let relaxed = format!("{REPLEX_3} with relaxed placement");
        assert!(matches!(
            add(&mut state, &relaxed),
            CommandResult::SpaceAdded { .. }
        ));
        state.check_invariants().unwrap();
        let at_risk = tessera_types::replex::at_risk_fraction(&state.spaces[0]);
        assert!(at_risk > 0.0 && at_risk < 1.0, "{at_risk}");
        // With enough daemons, relaxed placement is the strict one.
        let mut state = ClusterState::default();
        register(&mut state, 4);
        assert!(matches!(
            add(&mut state, &relaxed),
            CommandResult::SpaceAdded { .. }
        ));
        assert_eq!(
            tessera_types::replex::at_risk_fraction(&state.spaces[0]),
            0.0
        );
    }

    #[test]
    fn check_invariants_catches_two_copies_of_an_object_on_one_daemon() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        assert!(matches!(
            add(&mut state, REPLEX_3),
            CommandResult::SpaceAdded { .. }
        ));
        // The replex's first region onto the daemon of the key's first.
        let key_daemon = state.spaces[0].subspaces[0].regions[0].chain[0];
        state.spaces[0].subspaces[2].regions[0].chain = vec![key_daemon];
        assert!(matches!(
            state.check_invariants(),
            Err(CheckInvariantsError::ReplexCopiesShareDaemon { daemon, .. }) if daemon == key_daemon
        ));
    }

    #[test]
    fn rebalancing_keeps_replex_copies_apart() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        assert!(matches!(
            add(&mut state, REPLEX_3),
            CommandResult::SpaceAdded { .. }
        ));
        // A fifth daemon arrives: moves bring regions to it, never beside
        // another copy of their objects.
        register(&mut state, 1);
        let fifth = *state.daemons.keys().last().unwrap();
        for _ in 0..200 {
            let Some(t) = state.transfers.first().cloned() else {
                break;
            };
            assert_eq!(
                state.apply(Command::TransferComplete { transfer: t.id }),
                CommandResult::Done
            );
            state.check_invariants().unwrap();
        }
        assert!(state.transfers.is_empty());
        assert!(replica_count(&state, fifth) > 0);
        assert_eq!(replex_conflict(&state.spaces[0]), None);
    }

    /// A Replex-3 space on three daemons, then `spares` more daemons, with
    /// the rebalancing moves they start completed.
    fn replex_with_spares(spares: usize) -> ClusterState {
        let mut state = ClusterState::default();
        register(&mut state, 3);
        assert!(matches!(
            add(&mut state, REPLEX_3),
            CommandResult::SpaceAdded { .. }
        ));
        register(&mut state, spares);
        while let Some(t) = state.transfers.first().cloned() {
            state.apply(Command::TransferComplete { transfer: t.id });
        }
        state.check_invariants().unwrap();
        state
    }

    fn regions_of(state: &ClusterState, d: DaemonId) -> BTreeSet<RegionId> {
        state
            .regions()
            .filter(|(_, r)| r.chain.contains(&d))
            .map(|(_, r)| r.id)
            .collect()
    }

    /// Objects of the lost region must each lie in a source region of
    /// their part: checked on pseudo-random objects, independently of how
    /// the covering set was found.
    fn assert_sources_cover(space: &Space, rebuild: &Rebuild) {
        let (k, i) = locate(space, rebuild.region).unwrap();
        let sources: BTreeSet<RegionId> = rebuild.sources.iter().map(|(r, _)| *r).collect();
        let mut seen = 0;
        for n in 0..4000u32 {
            let text = |tag: &str| {
                Value::String(format!("{tag}{}", n.wrapping_mul(2654435761)).into_bytes())
            };
            let object = Object {
                values: vec![text("k"), text("a"), text("b")],
            };
            if space.subspaces[k].region_of(&object).id != space.subspaces[k].regions[i].id {
                continue;
            }
            seen += 1;
            assert!(
                space
                    .subspaces
                    .iter()
                    .enumerate()
                    .any(|(q, l)| q != k && sources.contains(&l.region_of(&object).id)),
                "an object of region {} is in no source of rebuild {}",
                rebuild.region,
                rebuild.id
            );
        }
        assert!(
            seen > 0,
            "no sample object fell in region {}",
            rebuild.region
        );
    }

    #[test]
    fn a_lost_replex_region_is_rebuilt_from_its_covering_set_on_a_legal_target() {
        let mut state = replex_with_spares(2);
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        let lost = regions_of(&state, victim);
        assert!(!lost.is_empty());
        let epoch = state.epoch;
        state.apply(Command::ServerKill { id: victim });
        assert_eq!(
            state.epoch,
            Epoch(epoch.0 + 1),
            "one epoch for the failure and the plan"
        );
        state.check_invariants().unwrap();
        // Every lost region rebuilds at once, each from its covering set.
        let rebuilt: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        assert_eq!(rebuilt, lost);
        let space = state.spaces[0].clone();
        for b in &state.rebuilds {
            assert_ne!(b.to, victim);
            assert_eq!(state.daemons[&b.to].state, DaemonState::Available);
            let cover = covering_set(&space, &lost, b.region).unwrap();
            let sources: Vec<RegionId> = b.sources.iter().map(|(r, _)| *r).collect();
            assert_eq!(sources, cover);
            for (r, d) in &b.sources {
                let (_, _, region) = state
                    .configuration(Vec::new())
                    .region(*r)
                    .map(|(s, k, r)| (s.id, k, r.clone()))
                    .unwrap();
                assert_eq!(region.chain, vec![*d]);
                assert!(!lost.contains(r));
            }
            assert_sources_cover(&space, b);
        }
        let config = state.configuration(Vec::new());
        assert_eq!(config.rebuilds, state.rebuilds);
        // Completing them all puts every region back, the placement rule
        // kept (no target beside another copy of its objects).
        for b in state.rebuilds.clone() {
            let before = state.epoch;
            assert_eq!(
                state.apply(Command::RebuildComplete { rebuild: b.id }),
                CommandResult::Done
            );
            assert_eq!(state.epoch, Epoch(before.0 + 1));
            let config = state.configuration(Vec::new());
            assert_eq!(config.region(b.region).unwrap().2.chain, vec![b.to]);
            assert!(!state.orphans.contains_key(&b.region));
            assert!(matches!(
                state.apply(Command::RebuildComplete { rebuild: b.id }),
                CommandResult::Failed {
                    status: AdminStatus::NotFound,
                    ..
                }
            ));
        }
        assert!(state.rebuilds.is_empty() && state.orphans.is_empty());
        assert!(state.regions().all(|(_, r)| r.chain.len() == 1));
        assert_eq!(replex_conflict(&state.spaces[0]), None);
    }

    use crate::rebuild::locate;
    use tessera_types::replex::covering_set;
    use tessera_types::{Object, Value};

    #[test]
    fn a_rebuild_is_planned_again_when_its_target_or_a_source_fails() {
        let mut state = replex_with_spares(5);
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        state.apply(Command::ServerKill { id: victim });
        let first = state.rebuilds[0].clone();
        // The target dies: the rebuild gets a new id and another target.
        state.apply(Command::DaemonOffline { id: first.to });
        state.check_invariants().unwrap();
        let again = state
            .rebuilds
            .iter()
            .find(|b| b.region == first.region)
            .expect("planned again")
            .clone();
        assert!(again.id > first.id);
        assert_ne!(again.to, first.to);
        // A source's daemon dies: planned again without it.
        let (_, source_daemon) = again.sources[0];
        state.apply(Command::DaemonOffline { id: source_daemon });
        state.check_invariants().unwrap();
        let third = state
            .rebuilds
            .iter()
            .find(|b| b.region == first.region)
            .expect("planned again");
        assert!(third.id > again.id);
        assert!(third.sources.iter().all(|(_, d)| *d != source_daemon));
        assert_sources_cover(&state.spaces[0], third);
        // The old id no longer completes anything.
        assert!(matches!(
            state.apply(Command::RebuildComplete { rebuild: again.id }),
            CommandResult::Failed {
                status: AdminStatus::NotFound,
                ..
            }
        ));
    }

    #[test]
    fn without_a_legal_target_a_lost_region_waits_until_a_daemon_registers() {
        let mut state = replex_with_spares(0);
        // The daemon holding the replex: every other daemon holds key
        // regions, which can share an object with any replex region.
        let victim = state.spaces[0].subspaces[2].regions[0].chain[0];
        let lost = regions_of(&state, victim);
        state.apply(Command::ServerKill { id: victim });
        state.check_invariants().unwrap();
        assert!(state.rebuilds.is_empty());
        assert_eq!(state.orphans.keys().copied().collect::<BTreeSet<_>>(), lost);
        register(&mut state, 1);
        state.check_invariants().unwrap();
        let spare = *state.daemons.keys().last().unwrap();
        let rebuilt: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        assert_eq!(rebuilt, lost);
        assert!(state.rebuilds.iter().all(|b| b.to == spare));
    }

    #[test]
    fn an_offline_daemon_is_waited_for_and_refreshed_and_a_killed_one_rebuilt() {
        let mut state = replex_with_spares(1);
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        let lost = regions_of(&state, victim);
        // Offline (failure detected): it may come back with its disk, so
        // its regions wait for it and nothing is rebuilt.
        state.apply(Command::DaemonOffline { id: victim });
        assert!(state.rebuilds.is_empty(), "{:?}", state.rebuilds);
        assert!(lost.iter().all(|r| state.orphans.get(r) == Some(&victim)));
        // It returns and takes its regions back. It may have restarted,
        // forgetting the updates it had started, so each key region it
        // heads is refreshed: rebuilt to itself from its covering set
        // while it keeps its place.
        state.apply(Command::RegisterDaemon {
            id: Some(victim),
            addr: "127.0.0.1:2012".into(),
            metrics: None,
            installed: None,
        });
        state.check_invariants().unwrap();
        assert_eq!(regions_of(&state, victim), lost);
        let heads: BTreeSet<RegionId> = state.spaces[0].subspaces[0]
            .regions
            .iter()
            .filter(|r| r.chain == [victim])
            .map(|r| r.id)
            .collect();
        assert!(!heads.is_empty());
        let refreshed: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        assert_eq!(refreshed, heads, "{:?}", state.rebuilds);
        for b in &state.rebuilds {
            assert_eq!(b.to, victim);
            assert_sources_cover(&state.spaces[0], b);
        }
        // A refresh completes without changing the chain.
        let refresh = state.rebuilds[0].clone();
        assert_eq!(
            state.apply(Command::RebuildComplete {
                rebuild: refresh.id
            }),
            CommandResult::Done
        );
        state.check_invariants().unwrap();
        assert_eq!(regions_of(&state, victim), lost);
        assert!(state.rebuilds.iter().all(|b| b.id != refresh.id));
        // Offline again, then killed by an operator: gone for good, so its
        // regions are rebuilt elsewhere (its refreshes are dropped).
        state.apply(Command::DaemonOffline { id: victim });
        state.apply(Command::ServerKill { id: victim });
        state.check_invariants().unwrap();
        let rebuilt: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        assert_eq!(rebuilt, lost);
        assert!(state.rebuilds.iter().all(|b| b.to != victim));
    }

    #[test]
    fn a_daemon_registering_again_has_every_replex_region_it_holds_refreshed() {
        let mut state = replex_with_spares(1);
        // The daemon of a replex region (not a key region): it forgot the
        // updates it held pending, which the parts after it may have
        // committed since.
        let victim = state.spaces[0].subspaces[2].regions[0].chain[0];
        let lost = regions_of(&state, victim);
        assert!(lost.iter().all(|r| !state.spaces[0].subspaces[0]
            .regions
            .iter()
            .any(|k| k.id == *r)));
        state.apply(Command::DaemonOffline { id: victim });
        state.apply(Command::RegisterDaemon {
            id: Some(victim),
            addr: "127.0.0.1:2013".into(),
            metrics: None,
            installed: None,
        });
        state.check_invariants().unwrap();
        assert_eq!(regions_of(&state, victim), lost);
        let refreshed: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        assert_eq!(refreshed, lost, "{:?}", state.rebuilds);
        for b in &state.rebuilds {
            assert_eq!(b.to, victim);
            assert_sources_cover(&state.spaces[0], b);
        }
    }

    #[test]
    fn a_refreshing_region_of_another_part_stays_a_source_and_a_key_region_does_not() {
        let mut state = replex_with_spares(1);
        let key_daemon = state.spaces[0].subspaces[0].regions[0].chain[0];
        let replex_daemon = state.spaces[0].subspaces[2].regions[0].chain[0];
        for (n, d) in [key_daemon, replex_daemon].into_iter().enumerate() {
            state.apply(Command::DaemonOffline { id: d });
            state.apply(Command::RegisterDaemon {
                id: Some(d),
                addr: format!("127.0.0.1:{}", 2100 + n),
                metrics: None,
                installed: None,
            });
        }
        state.check_invariants().unwrap();
        let space = state.spaces[0].clone();
        let unreadable = state.unreadable(&space);
        let refreshing: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        let key_regions: BTreeSet<RegionId> =
            space.subspaces[0].regions.iter().map(|r| r.id).collect();
        assert!(refreshing.iter().any(|r| key_regions.contains(r)));
        assert!(refreshing.iter().any(|r| !key_regions.contains(r)));
        for r in &refreshing {
            // A key region being refreshed may lack updates its point
            // leader forgot; a region of another part holds every update
            // it committed.
            assert_eq!(unreadable.contains(r), key_regions.contains(r), "{r}");
        }
    }

    #[test]
    fn a_silent_daemon_is_declared_lost_only_when_its_regions_can_be_rebuilt() {
        let mut state = replex_with_spares(1);
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        let lost = regions_of(&state, victim);
        // Available: a proposal that its return overtook changes nothing.
        assert!(state.may_declare_lost(victim).is_none());
        let epoch = state.epoch;
        assert_eq!(
            state.apply(Command::DaemonLost { id: victim }),
            CommandResult::Done
        );
        assert_eq!(state.epoch, epoch);
        assert!(!state.killed.contains(&victim));

        state.apply(Command::DaemonOffline { id: victim });
        let sources = state.may_declare_lost(victim).expect("a candidate");
        assert!(!sources.contains(&victim));
        for d in &sources {
            assert_eq!(state.daemons[d].state, DaemonState::Available);
        }
        // An operator took it out (maintenance): the operator decides.
        let mut held = state.clone();
        held.apply(Command::ServerOffline { id: victim });
        assert!(held.may_declare_lost(victim).is_none());
        // Every other daemon away too: nothing could rebuild its regions,
        // and its disk may hold the only copy of some object.
        let mut alone = state.clone();
        let others: Vec<DaemonId> = alone
            .daemons
            .keys()
            .copied()
            .filter(|d| *d != victim)
            .collect();
        for d in others {
            alone.apply(Command::DaemonOffline { id: d });
        }
        assert!(alone.may_declare_lost(victim).is_none());
        let epoch = alone.epoch;
        alone.apply(Command::DaemonLost { id: victim });
        assert_eq!(alone.epoch, epoch);
        assert!(alone.killed.is_empty());

        // Declared lost: killed, remembered as lost, its regions rebuilt
        // elsewhere, and it may not register again under its id.
        state.apply(Command::DaemonLost { id: victim });
        state.check_invariants().unwrap();
        assert!(state.killed.contains(&victim) && state.lost.contains(&victim));
        let rebuilt: BTreeSet<RegionId> = state.rebuilds.iter().map(|b| b.region).collect();
        assert_eq!(rebuilt, lost);
        assert!(state.rebuilds.iter().all(|b| b.to != victim));
        for b in &state.rebuilds {
            assert_sources_cover(&state.spaces[0], b);
        }
        match state.apply(Command::RegisterDaemon {
            id: Some(victim),
            addr: "127.0.0.1:2012".into(),
            metrics: None,
            installed: None,
        }) {
            CommandResult::Failed { status, reason } => {
                assert_eq!(status, AdminStatus::NotFound);
                assert!(reason.contains("declared lost"), "{reason}");
            }
            other => panic!("a lost daemon registered again: {other:?}"),
        }
        assert!(state.may_declare_lost(victim).is_none(), "once is enough");
        state.apply(Command::ServerForget { id: victim });
        assert!(!state.lost.contains(&victim) && !state.killed.contains(&victim));
    }

    #[test]
    fn the_last_daemon_of_a_region_without_other_copies_is_never_declared_lost() {
        let mut state = ClusterState::default();
        register(&mut state, 3);
        assert!(matches!(
            add(
                &mut state,
                "space kv key k create 2 partitions tolerate 0 failures"
            ),
            CommandResult::SpaceAdded { .. }
        ));
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        state.apply(Command::DaemonOffline { id: victim });
        assert!(state.orphans.values().any(|d| *d == victim));
        assert!(state.may_declare_lost(victim).is_none());
        state.apply(Command::DaemonLost { id: victim });
        assert!(state.killed.is_empty() && state.lost.is_empty());
        assert!(state.orphans.values().any(|d| *d == victim));
    }

    #[test]
    fn check_invariants_catches_a_rebuild_beside_another_copy() {
        let mut state = replex_with_spares(2);
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        state.apply(Command::ServerKill { id: victim });
        // The daemon of a replex region: it shares objects with every
        // key region.
        let replex_daemon = state.spaces[0].subspaces[2].regions[0].chain[0];
        state.rebuilds[0].to = replex_daemon;
        assert!(matches!(
            state.check_invariants(),
            Err(CheckInvariantsError::RebuildTargetConflict { daemon, .. }) if daemon == replex_daemon
        ));
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
                metrics: None,
                installed: None,
            },
            Command::MembershipChanged,
            Command::RegisterDaemon {
                id: None,
                addr: "b:1".into(),
                metrics: None,
                installed: None,
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
            metrics: None,
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

    fn calibration() -> tessera_types::AdvisorCalibration {
        tessera_types::AdvisorCalibration {
            version: tessera_types::calibration::ADVISOR_CALIBRATION_VERSION,
            beta_s: 1.5e-7,
            t_max_ops_per_s: 12_000.0,
            alpha: 1.7,
            alpha_create: 1.1,
            request_s: 6e-5,
            result_s: 8e-7,
            index_write: 0.2,
            range_search_s: Some(3e-5),
            range_entry_s: Some(6e-7),
            get_s: Some(9e-6),
            write_s: Some(7e-6),
            insert_s: Some(2e-6),
            index_create: Some(0.1),
            walk_first_s: Some(4e-6),
            unbounded_s: Some(1.1e-5),
            search_base_s: Some(3e-6),
            modify_s: Some(4e-6),
            global_index_hop: Some(0.9),
            global_index_move: Some(0.3),
            lookup_base_s: Some(2e-5),
            lookup_match_s: Some(3e-5),
            handoff_mixed_s: Some(2e-5),
            writes_beside_s: Some(3e-5),
            modify_hop_s: Some(2e-6),
            larger_search_s: Some(1e-6),
            larger_entry_s: Some(3e-7),
            larger_reference_objects: Some(4000.0),
            handoff_first_s: Some(1.5e-5),
            indexed_create: Some(0.3),
            stored_per_fold: Some(0.07),
            stored_reference_rows: Some(8000.0),
            calibrations: Some(2),
            daemons: 2,
            epoch: 3,
            fits: vec![tessera_types::FitQuality {
                op: "search".into(),
                points: 6,
                r2: 0.99,
                rel_rms: 0.05,
            }],
        }
    }

    #[test]
    fn advisor_params_are_stored_published_and_survive_encoding() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        let epoch = state.epoch;
        let params = calibration();
        let result = state.apply(Command::SetAdvisorParams {
            params: Box::new(params.clone()),
        });
        assert_eq!(result, CommandResult::Done);
        assert_eq!(state.epoch, Epoch(epoch.0 + 1), "clients learn it by epoch");
        assert_eq!(state.configuration(vec![]).advisor, Some(params.clone()));
        // The same payload again changes nothing.
        state.apply(Command::SetAdvisorParams {
            params: Box::new(params.clone()),
        });
        assert_eq!(state.epoch, Epoch(epoch.0 + 1));
        // The Raft log holds commands as JSON, snapshots the state as postcard.
        let command = Command::SetAdvisorParams {
            params: Box::new(params.clone()),
        };
        let json = serde_json::to_vec(&command).unwrap();
        assert_eq!(serde_json::from_slice::<Command>(&json).unwrap(), command);
        let bytes = postcard::to_allocvec(&state).unwrap();
        let back: ClusterState = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.advisor, Some(params));
    }

    #[test]
    fn invalid_advisor_params_are_refused_and_change_nothing() {
        let mut state = ClusterState::default();
        register(&mut state, 2);
        state.apply(Command::SetAdvisorParams {
            params: Box::new(calibration()),
        });
        let before = state.clone();
        let mut bads = Vec::new();
        let mut bad = calibration();
        bad.version = 99;
        bads.push((bad, "version 99"));
        let mut bad = calibration();
        bad.t_max_ops_per_s = 0.0;
        bads.push((bad, "t_max_ops_per_s"));
        let mut bad = calibration();
        bad.request_s = f64::INFINITY;
        bads.push((bad, "request_s"));
        let mut bad = calibration();
        bad.index_write = -0.5;
        bads.push((bad, "index_write"));
        let mut bad = calibration();
        bad.daemons = 0;
        bads.push((bad, "0 daemons"));
        // Version 1 has no range parameters.
        let mut bad = calibration();
        bad.version = tessera_types::calibration::ADVISOR_CALIBRATION_VERSION_1;
        bads.push((bad, "version 1 has no parameter range_search_s"));
        let mut bad = calibration();
        bad.calibrations = Some(0);
        bads.push((bad, "averages 0 calibrations"));
        for (params, named) in bads {
            match state.apply(Command::SetAdvisorParams {
                params: Box::new(params),
            }) {
                CommandResult::Failed { status, reason } => {
                    assert_eq!(status, AdminStatus::BadSpace);
                    assert!(reason.contains(named), "{reason:?} names {named}");
                }
                other => panic!("accepted a payload with bad {named}: {other:?}"),
            }
            assert_eq!(state, before, "a refused payload changes nothing");
        }
        // A version-1 payload, as an older build stored it, is accepted.
        let mut old = calibration();
        old.version = tessera_types::calibration::ADVISOR_CALIBRATION_VERSION_1;
        old.range_search_s = None;
        old.range_entry_s = None;
        (old.get_s, old.write_s, old.insert_s) = (None, None, None);
        (old.index_create, old.walk_first_s) = (None, None);
        (old.unbounded_s, old.search_base_s, old.modify_s) = (None, None, None);
        (old.global_index_hop, old.global_index_move) = (None, None);
        (old.lookup_base_s, old.lookup_match_s) = (None, None);
        (old.handoff_mixed_s, old.writes_beside_s) = (None, None);
        old.modify_hop_s = None;
        (old.larger_search_s, old.larger_entry_s) = (None, None);
        old.larger_reference_objects = None;
        old.handoff_first_s = None;
        old.indexed_create = None;
        (old.stored_per_fold, old.stored_reference_rows) = (None, None);
        old.calibrations = None;
        let result = state.apply(Command::SetAdvisorParams {
            params: Box::new(old.clone()),
        });
        assert_eq!(result, CommandResult::Done);
        assert_eq!(state.configuration(vec![]).advisor, Some(old));
    }

    // ------------------------------------------------------ failure handling

    /// Three daemons, space `kv` with f = 1 over 6 key regions.
    fn three_daemons_f1() -> ClusterState {
        let mut state = ClusterState::default();
        register(&mut state, 3);
        assert!(matches!(
            add(
                &mut state,
                "space kv key k create 6 partitions tolerate 1 failure"
            ),
            CommandResult::SpaceAdded { .. }
        ));
        state
    }

    /// Completes every running transfer, as targets that caught up would.
    fn complete_all(state: &mut ClusterState) {
        while let Some(t) = state.transfers.first().cloned() {
            assert_eq!(
                state.apply(Command::TransferComplete { transfer: t.id }),
                CommandResult::Done
            );
        }
    }

    #[test]
    fn a_new_space_needs_no_rebalancing() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        for description in [
            "space a key k attributes x, y, z subspace x subspace y subspace z create 8 partitions tolerate 1 failure",
            "space b key k attributes x subspace x create 5 partitions tolerate 2 failures",
        ] {
            assert!(matches!(add(&mut state, description), CommandResult::SpaceAdded { .. }));
        }
        assert!(state.transfers.is_empty(), "{:?}", state.transfers);
    }

    #[test]
    fn a_daemon_back_after_a_failure_gets_regions_moved_to_it_until_balanced() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        add(
            &mut state,
            "space kv key k attributes a subspace a create 8 partitions tolerate 1 failure",
        );
        let regions = state.regions().count();
        // Daemon 2 fails; its places are repaired elsewhere.
        state.apply(Command::DaemonOffline { id: DaemonId(2) });
        complete_all(&mut state);
        assert_eq!(replica_count(&state, DaemonId(2)), 0);
        // It comes back (alive after a pause): Available, in no chain.
        state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(2)),
            addr: "d1:1".into(),
            metrics: None,
            installed: None,
        });
        let mut moves = 0;
        while let Some(t) = state.transfers.first().cloned() {
            assert_eq!(t.to, DaemonId(2), "moves go to the daemon holding least");
            let relieved = t.replaces.expect("a move names the member it relieves");
            let before = replica_count(&state, relieved);
            state.apply(Command::TransferComplete { transfer: t.id });
            assert_eq!(replica_count(&state, relieved), before - 1);
            assert!(state.left_chain_at.get(&relieved) == Some(&state.epoch));
            moves += 1;
            assert!(moves <= regions * 2, "moves must stop");
        }
        assert!(moves > 0);
        let counts: Vec<usize> = (1..=4)
            .map(|d| replica_count(&state, DaemonId(d)))
            .collect();
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(max - min <= 1, "balanced: {counts:?}");
        // Every chain kept f + 1 distinct members throughout.
        for (_, chain) in chains(&state) {
            assert_eq!(chain.len(), 2, "{chain:?}");
        }
        state.check_invariants().unwrap();
    }

    fn chains(state: &ClusterState) -> Vec<(RegionId, Vec<DaemonId>)> {
        state
            .regions()
            .map(|(_, r)| (r.id, r.chain.clone()))
            .collect()
    }

    fn replica_count(state: &ClusterState, d: DaemonId) -> usize {
        state
            .regions()
            .filter(|(_, r)| r.chain.contains(&d))
            .count()
    }

    #[test]
    fn offline_leaves_every_chain_in_one_epoch_keeping_order() {
        let mut state = three_daemons_f1();
        let before = chains(&state);
        let epoch = state.epoch;
        assert_eq!(
            state.apply(Command::DaemonOffline { id: DaemonId(2) }),
            CommandResult::Done
        );
        assert_eq!(
            state.epoch,
            Epoch(epoch.0 + 1),
            "one epoch for offline and repair"
        );
        assert_eq!(state.daemons[&DaemonId(2)].state, DaemonState::Offline);
        for ((id, old), (_, new)) in before.iter().zip(chains(&state)) {
            let expected: Vec<_> = old.iter().copied().filter(|d| *d != DaemonId(2)).collect();
            assert_eq!(new, expected, "region {id}");
        }
        // Proposed again (the detector raced itself): nothing changes.
        let snapshot = state.clone();
        assert_eq!(
            state.apply(Command::DaemonOffline { id: DaemonId(2) }),
            CommandResult::Done
        );
        assert_eq!(state, snapshot);
        state.check_invariants().unwrap();
    }

    /// Each invariant `apply` stops on is told apart: a state broken by
    /// hand in one way is reported as exactly that.
    #[test]
    fn check_invariants_names_what_broke() {
        let mut state = three_daemons_f1();
        state.apply(Command::DaemonOffline { id: DaemonId(2) });
        state.check_invariants().unwrap();
        let transfer = state.transfers[0].clone();
        let mut broken = state.clone();
        let region = &mut broken.spaces[0].subspaces[0].regions[0];
        region.chain = vec![DaemonId(9)];
        let region = region.id;
        assert_eq!(
            broken.check_invariants(),
            Err(CheckInvariantsError::UnavailableInChain {
                region,
                daemon: DaemonId(9)
            })
        );
        let mut broken = state.clone();
        broken.spaces[0].subspaces[0].regions[0].chain = vec![DaemonId(1), DaemonId(1)];
        assert_eq!(
            broken.check_invariants(),
            Err(CheckInvariantsError::ChainRepeats { region })
        );
        let mut broken = state.clone();
        broken.transfers[0].from = transfer.to;
        assert_eq!(
            broken.check_invariants(),
            Err(CheckInvariantsError::TransferEnds {
                transfer: transfer.id
            })
        );
        let mut broken = state.clone();
        broken.transfers[0].to = DaemonId(2);
        assert_eq!(
            broken.check_invariants(),
            Err(CheckInvariantsError::TransferUnavailable {
                transfer: transfer.id
            })
        );
        let mut broken = state.clone();
        broken.transfers.push(transfer.clone());
        assert_eq!(
            broken.check_invariants(),
            Err(CheckInvariantsError::TransferOutOfOrder {
                transfer: transfer.id
            })
        );
    }

    #[test]
    fn repair_plans_one_transfer_from_the_tail_per_short_region() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        add(
            &mut state,
            "space kv key k create 8 partitions tolerate 1 failure",
        );
        state.apply(Command::ServerOffline { id: DaemonId(1) });
        let short: Vec<_> = chains(&state)
            .into_iter()
            .filter(|(_, c)| c.len() < 2)
            .collect();
        assert!(!short.is_empty());
        assert_eq!(state.transfers.len(), short.len());
        for (t, (region, chain)) in state.transfers.iter().zip(&short) {
            assert_eq!(t.region, *region);
            assert_eq!(t.from, *chain.last().unwrap(), "from the tail");
            assert!(!chain.contains(&t.to));
            assert_ne!(t.to, DaemonId(1), "never to an offline daemon");
        }
        // Targets spread over the least loaded: replicas plus incoming
        // transfers differ by at most one among the survivors.
        let loads: Vec<usize> = [2, 3, 4]
            .into_iter()
            .map(|d| {
                let d = DaemonId(d);
                replica_count(&state, d) + state.transfers.iter().filter(|t| t.to == d).count()
            })
            .collect();
        assert!(
            loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1,
            "{loads:?}"
        );
        // Ids are fresh and increasing.
        let ids: Vec<u64> = state.transfers.iter().map(|t| t.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        state.check_invariants().unwrap();
    }

    #[test]
    fn repair_picks_distinct_targets_least_loaded_then_lowest_id() {
        // Chains [d1] and [d2]; d3 and d4 idle. When f becomes 1 both
        // regions are short at once: the first gets d3 (idle, lowest id),
        // the second d4 (d3 now receives a transfer, d1 holds a replica).
        let mut state = ClusterState::default();
        register(&mut state, 2);
        add(
            &mut state,
            "space kv key k create 2 partitions tolerate 0 failures",
        );
        register(&mut state, 2);
        assert!(state.transfers.is_empty(), "f = 0: nothing to repair");
        state.spaces[0].desc.fault_tolerance = 1;
        assert!(state.repair());
        let planned: Vec<(DaemonId, DaemonId)> =
            state.transfers.iter().map(|t| (t.from, t.to)).collect();
        let heads: Vec<DaemonId> = chains(&state).iter().map(|(_, c)| c[0]).collect();
        assert_eq!(
            planned,
            vec![(heads[0], DaemonId(3)), (heads[1], DaemonId(4))]
        );
        assert!(!state.repair(), "repair is idempotent");
    }

    #[test]
    fn transfer_complete_appends_the_target_at_the_tail() {
        let mut state = three_daemons_f1();
        state.apply(Command::DaemonOffline { id: DaemonId(3) });
        let transfers = state.transfers.clone();
        assert!(!transfers.is_empty());
        for t in transfers {
            let epoch = state.epoch;
            let chain_before = state
                .regions()
                .find(|(_, r)| r.id == t.region)
                .unwrap()
                .1
                .chain
                .clone();
            assert_eq!(
                state.apply(Command::TransferComplete { transfer: t.id }),
                CommandResult::Done
            );
            assert_eq!(state.epoch, Epoch(epoch.0 + 1));
            let chain = &state
                .regions()
                .find(|(_, r)| r.id == t.region)
                .unwrap()
                .1
                .chain;
            let mut expected = chain_before;
            expected.push(t.to);
            assert_eq!(*chain, expected);
        }
        assert!(state.transfers.is_empty());
        assert!(chains(&state).iter().all(|(_, c)| c.len() == 2));
        // Completing again: NOTFOUND, nothing changes.
        let epoch = state.epoch;
        match state.apply(Command::TransferComplete { transfer: 1 }) {
            CommandResult::Failed { status, .. } => assert_eq!(status, AdminStatus::NotFound),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(state.epoch, epoch);
    }

    #[test]
    fn transfers_are_cancelled_and_replanned_when_the_source_dies() {
        let mut state = ClusterState::default();
        register(&mut state, 4);
        add(
            &mut state,
            "space kv key k create 4 partitions tolerate 2 failures",
        );
        state.apply(Command::DaemonOffline { id: DaemonId(4) });
        let first = state.transfers.clone();
        assert!(!first.is_empty());
        let victim = first[0].from;
        state.apply(Command::DaemonOffline { id: victim });
        assert!(state
            .transfers
            .iter()
            .all(|t| t.from != victim && t.to != victim));
        // Every surviving region with a tail has a transfer again (d1..d3
        // minus the victim leaves a daemon outside chains of length one).
        let next_id = first.iter().map(|t| t.id).max().unwrap();
        for t in &state.transfers {
            let chain = &state
                .regions()
                .find(|(_, r)| r.id == t.region)
                .unwrap()
                .1
                .chain;
            assert_eq!(chain.last(), Some(&t.from));
            if first
                .iter()
                .any(|old| old.region == t.region && old.from == victim)
            {
                assert!(t.id > next_id, "a re-planned transfer gets a fresh id");
            }
        }
        state.check_invariants().unwrap();
        // A transfer whose target dies is cancelled too.
        let t = state.transfers[0].clone();
        state.apply(Command::ServerKill { id: t.to });
        assert!(state.transfers.iter().all(|x| x.id != t.id));
        state.check_invariants().unwrap();
    }

    #[test]
    fn an_empty_chain_is_left_alone() {
        let mut state = ClusterState::default();
        register(&mut state, 1);
        add(
            &mut state,
            "space kv key k create 2 partitions tolerate 1 failure",
        );
        register(&mut state, 1);
        // d2 registered later: it is a transfer target for both regions.
        assert_eq!(state.transfers.len(), 2);
        state.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert!(chains(&state).iter().all(|(_, c)| c.is_empty()));
        assert!(state.transfers.is_empty(), "nothing to copy from");
        // Even a fresh daemon does not bring an empty region back.
        register(&mut state, 1);
        assert!(state.transfers.is_empty());
        state.check_invariants().unwrap();
    }

    #[test]
    fn a_returning_daemon_is_available_in_no_chain_and_becomes_a_target() {
        let mut state = three_daemons_f1();
        state.apply(Command::DaemonOffline { id: DaemonId(1) });
        // Then lose d2 too: regions shrink to [d3] or to nothing.
        state.apply(Command::ServerOffline { id: DaemonId(2) });
        assert!(
            state.transfers.is_empty(),
            "only d3 is left, in every chain"
        );
        assert_eq!(
            state.apply(Command::RegisterDaemon {
                id: Some(DaemonId(1)),
                addr: "127.0.0.1:2012".into(),
                metrics: None,
                installed: None,
            }),
            CommandResult::Registered { id: DaemonId(1) }
        );
        assert_eq!(state.daemons[&DaemonId(1)].state, DaemonState::Available);
        assert_eq!(replica_count(&state, DaemonId(1)), 0);
        let alive = chains(&state).iter().filter(|(_, c)| !c.is_empty()).count();
        assert!(alive > 0);
        assert_eq!(state.transfers.len(), alive, "every region left with d3");
        assert!(state
            .transfers
            .iter()
            .all(|t| t.to == DaemonId(1) && t.from == DaemonId(3)));
        // ServerOnline works the same way for d2.
        assert_eq!(
            state.apply(Command::ServerOnline { id: DaemonId(2) }),
            CommandResult::Done
        );
        assert_eq!(state.daemons[&DaemonId(2)].state, DaemonState::Available);
        assert_eq!(
            state.apply(Command::ServerOnline { id: DaemonId(2) }),
            CommandResult::Done,
            "already online"
        );
        state.check_invariants().unwrap();
    }

    #[test]
    fn server_operations_on_unknown_ids_are_notfound_and_change_nothing() {
        let mut state = three_daemons_f1();
        let snapshot = state.clone();
        for command in [
            Command::ServerOffline { id: DaemonId(9) },
            Command::ServerOnline { id: DaemonId(9) },
            Command::ServerForget { id: DaemonId(9) },
            Command::ServerKill { id: DaemonId(9) },
        ] {
            match state.apply(command) {
                CommandResult::Failed { status, .. } => assert_eq!(status, AdminStatus::NotFound),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(state, snapshot);
    }

    #[test]
    fn forget_removes_the_daemon_and_its_id_is_never_reused() {
        let mut state = three_daemons_f1();
        let epoch = state.epoch;
        assert_eq!(
            state.apply(Command::ServerForget { id: DaemonId(3) }),
            CommandResult::Done
        );
        assert_eq!(state.epoch, Epoch(epoch.0 + 1));
        assert!(!state.daemons.contains_key(&DaemonId(3)));
        assert_eq!(replica_count(&state, DaemonId(3)), 0);
        // Registering with the forgotten id, or without one: a fresh id.
        assert_eq!(
            state.apply(Command::RegisterDaemon {
                id: Some(DaemonId(3)),
                addr: "x:1".into(),
                metrics: None,
                installed: None,
            }),
            CommandResult::Registered { id: DaemonId(4) }
        );
        state.check_invariants().unwrap();
    }

    #[test]
    fn kill_takes_offline_and_bars_registration_until_forgotten() {
        let mut state = three_daemons_f1();
        assert_eq!(
            state.apply(Command::ServerKill { id: DaemonId(2) }),
            CommandResult::Done
        );
        assert_eq!(state.daemons[&DaemonId(2)].state, DaemonState::Offline);
        assert!(state.killed.contains(&DaemonId(2)));
        assert_eq!(replica_count(&state, DaemonId(2)), 0);
        let register_again = Command::RegisterDaemon {
            id: Some(DaemonId(2)),
            addr: "127.0.0.1:2013".into(),
            metrics: None,
            installed: None,
        };
        match state.apply(register_again.clone()) {
            CommandResult::Failed { status, .. } => assert_eq!(status, AdminStatus::NotFound),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            state.apply(Command::ServerOnline { id: DaemonId(2) }),
            CommandResult::Failed {
                status: AdminStatus::CoordFail,
                ..
            }
        ));
        state.apply(Command::ServerForget { id: DaemonId(2) });
        assert!(state.killed.is_empty());
        assert_eq!(
            state.apply(register_again),
            CommandResult::Registered { id: DaemonId(4) }
        );
    }

    #[test]
    fn rm_space_cancels_its_transfers() {
        let mut state = three_daemons_f1();
        state.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert!(!state.transfers.is_empty());
        state.apply(Command::RmSpace { name: "kv".into() });
        assert!(state.transfers.is_empty());
        state.check_invariants().unwrap();
    }

    #[test]
    fn failure_handling_replays_deterministically() {
        let commands = vec![
            Command::RegisterDaemon { id: None, addr: "a:1".into(), metrics: None, installed: None },
            Command::RegisterDaemon { id: None, addr: "b:1".into(), metrics: None, installed: None },
            Command::RegisterDaemon { id: None, addr: "c:1".into(), metrics: None, installed: None },
            Command::AddSpace {
                description: "space kv key k attributes int v subspace v create 8 partitions tolerate 1 failure".into(),
            },
            Command::RegisterDaemon { id: None, addr: "d:1".into(), metrics: None, installed: None },
            Command::DaemonOffline { id: DaemonId(2) },
            Command::TransferComplete { transfer: 1 },
            Command::TransferComplete { transfer: 2 },
            Command::ServerKill { id: DaemonId(4) },
            Command::RegisterDaemon { id: Some(DaemonId(2)), addr: "b:2".into(), metrics: None, installed: None },
            Command::TransferComplete { transfer: 1 },
            Command::ServerForget { id: DaemonId(4) },
            Command::TransferComplete { transfer: 7 },
        ];
        let mut a = ClusterState::default();
        let mut results_a = Vec::new();
        for command in commands.iter().cloned() {
            let before = a.epoch;
            results_a.push(a.apply(command));
            assert!(a.epoch.0 - before.0 <= 1);
            a.check_invariants().unwrap();
        }
        let mut b = ClusterState::default();
        let results_b: Vec<_> = commands.into_iter().map(|c| b.apply(c)).collect();
        assert_eq!(results_a, results_b);
        assert_eq!(a, b);
        assert_eq!(
            a.configuration(vec![]).transfers,
            a.transfers,
            "transfers are published"
        );
    }

    /// Both replicas of a `tolerate 1 failure` region fail one after the
    /// other: the region is unavailable, not lost. The daemon that left
    /// last holds everything it acknowledged, so it heads the chain again
    /// when it is back — brought online, or registering again — and repair
    /// then copies the region to a second daemon. The one that left first
    /// may be missing updates, so it gets nothing back.
    #[test]
    fn a_region_waits_for_its_last_replica() {
        for back_by_registering in [false, true] {
            let mut state = ClusterState::default();
            register(&mut state, 2);
            add(
                &mut state,
                "space kv key k create 1 partitions tolerate 1 failure",
            );
            let (region, chain) = chains(&state)[0].clone();
            let (first, last) = (chain[0], chain[1]);
            state.apply(Command::DaemonOffline { id: first });
            state.apply(Command::DaemonOffline { id: last });
            assert!(chains(&state).iter().all(|(_, c)| c.is_empty()));
            assert!(state.transfers.is_empty());

            // The first to leave comes back: it may lack updates.
            state.apply(Command::ServerOnline { id: first });
            assert!(chains(&state).iter().all(|(_, c)| c.is_empty()));

            let epoch = state.epoch;
            if back_by_registering {
                state.apply(Command::RegisterDaemon {
                    id: Some(last),
                    addr: "again:1".into(),
                    metrics: None,
                    installed: None,
                });
            } else {
                state.apply(Command::ServerOnline { id: last });
            }
            assert_eq!(state.epoch.0, epoch.0 + 1, "one epoch for the return");
            for (r, c) in chains(&state) {
                assert_eq!(c, vec![last], "region {r}");
            }
            assert!(state
                .transfers
                .iter()
                .any(|t| t.region == region && t.from == last && t.to == first));
            assert!(state.orphans.is_empty());
        }
    }

    /// Forgetting the last replica of a region gives the region up.
    #[test]
    fn forgetting_a_last_replica_gives_its_region_up() {
        let mut state = ClusterState::default();
        register(&mut state, 1);
        add(
            &mut state,
            "space kv key k create 2 partitions tolerate 0 failures",
        );
        state.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert_eq!(state.orphans.len(), 2);
        state.apply(Command::ServerForget { id: DaemonId(1) });
        assert!(state.orphans.is_empty());
        register(&mut state, 1);
        assert!(chains(&state).iter().all(|(_, c)| c.is_empty()));
    }
}
