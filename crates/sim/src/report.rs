//! What a run reports: one seed's figures, a failure with its replay
//! line and the violation that caused it, and the sum over many seeds.

use crate::check::{KvOp, KvResult, NotLinearizable};
use std::collections::{BTreeMap, BTreeSet};
use tessera_protocol::DaemonResponse;
use tessera_types::{DaemonId, DaemonState, Epoch, Object, PartId, RegionId, Version};

/// What one run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seed: u64,
    pub knobs: String,
    /// Simulated milliseconds until the checks ran.
    pub sim_ms: u64,
    pub operations: usize,
    pub messages: u64,
    pub dropped: u64,
    pub faults: Faults,
    pub epochs: u64,
    pub transfers: u64,
    /// Tombstones the daemons collected.
    pub tombstones_collected: u64,
    /// Keys transfer targets deleted because the region no longer held
    /// them (what a returning daemon would otherwise bring back).
    pub stale_dropped: u64,
    /// Updates a point leader refused as too old to tell whether they took
    /// effect (their outcome stays unknown to the checker).
    pub unknown_outcomes: u64,
    /// Lookups through a global index the clients began, and the keys
    /// they were checked not to have missed (`crate::lookups`).
    pub lookups: u64,
    pub lookup_misses: u64,
    /// Searches the clients began, the objects they returned and the keys
    /// they were checked not to have missed (each a checked event), and
    /// the plans made again when a layout changed under one
    /// (`crate::searches`).
    pub searches: u64,
    pub search_found: u64,
    pub search_misses: u64,
    pub search_replans: u64,
    /// Completed searches that read a failed region of a replex space
    /// through its covering set.
    pub search_redirected: u64,
    /// Searches given up (the space gone, or planned again too often):
    /// nothing they saw is judged.
    pub search_gave_up: u64,
    /// Gets whose key region had no live daemon, read through the
    /// replexes' covering set as the client library reads them
    /// (`Client::redirected_get`), and completed.
    pub redirected_gets: u64,
    /// Objects pages of lanes standing in for failed regions returned,
    /// and of those the objects the lanes kept.
    pub redirect_shipped: u64,
    pub redirect_kept: u64,
    /// Indexlet splits the leader made on its own (by size or by load).
    pub index_splits: u64,
    /// Whether the seed ran a replex space (`Knobs::replex`), and the
    /// updates whose chain moved an object from one region of a replex or
    /// hybrid to another.
    pub replex: bool,
    pub replex_relocations: u64,
    /// Whether the seed relayouted its replex space, and whether every
    /// part was ready (none building or dropping) when the run ended.
    pub replex_relayout: bool,
    pub replex_relayout_settled: bool,
    /// Rebuilds of lost replex regions the coordinator planned (each id it
    /// handed out), those that completed, and those it cancelled to plan
    /// again; and the replex regions without a daemon at the end (none in
    /// a run that passed: the checks require every region served).
    pub rebuilds_planned: u64,
    pub rebuilds_completed: u64,
    pub rebuilds_cancelled: u64,
    pub regions_orphaned: u64,
}

/// What the nemesis injected, kind by kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    pub crashes: u32,
    /// Of those, crashes of a daemon with updates in flight while the
    /// space had a global index.
    pub crashes_mid_indexed_update: u32,
    /// Cuts both ways.
    pub partitions: u32,
    /// Cuts that dropped messages in one direction only.
    pub one_way_partitions: u32,
    pub coordinator_outages: u32,
    pub disk_faults: u32,
    /// Daemon processes paused, and coordinator members paused.
    pub pauses: u32,
    pub coordinator_pauses: u32,
    /// What the faults caused: daemons the coordinator took offline,
    /// although they heartbeat, on reports that peers or clients could not
    /// reach them.
    pub reported_offline: u32,
    /// Layout changes made mid-run (the seed's `layout_change`); each
    /// finished (its parts ready, its dropped parts gone) before the run
    /// could settle.
    pub layout_changes: u32,
    /// Of the crashes, those of a daemon holding regions of a replex space
    /// (their only replica), and of those, the ones whose regions held
    /// objects.
    pub replex_crashes: u32,
    pub replex_crashes_with_objects: u32,
    /// Daemons lost for good (process and disk; `crate::loss`), each
    /// killed by the operator and replaced by a fresh daemon.
    pub losses: u32,
    /// Daemons the coordinator's leader declared lost (silent for the lost
    /// timeout while replex regions waited for them), each replaced by a
    /// fresh daemon once it learnt so.
    pub declared_lost: u32,
    /// Power losses: every daemon crashed at one instant (`crate::power`).
    pub power_losses: u32,
    /// Writes the power losses took back (applied unsynced, not yet made
    /// durable by a later fsync).
    pub unsynced_lost: u64,
}

impl Faults {
    fn add(&mut self, other: &Faults) {
        self.crashes += other.crashes;
        self.crashes_mid_indexed_update += other.crashes_mid_indexed_update;
        self.partitions += other.partitions;
        self.one_way_partitions += other.one_way_partitions;
        self.coordinator_outages += other.coordinator_outages;
        self.disk_faults += other.disk_faults;
        self.pauses += other.pauses;
        self.coordinator_pauses += other.coordinator_pauses;
        self.reported_offline += other.reported_offline;
        self.layout_changes += other.layout_changes;
        self.replex_crashes += other.replex_crashes;
        self.replex_crashes_with_objects += other.replex_crashes_with_objects;
        self.losses += other.losses;
        self.declared_lost += other.declared_lost;
        self.power_losses += other.power_losses;
        self.unsynced_lost += other.unsynced_lost;
    }
}

impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} daemon crashes ({} with updates in flight and a global index), {} partitions, {} one-way partitions, {} coordinator outages, \
             {} disk faults, {} daemon pauses, {} coordinator pauses, \
             {} daemons taken offline on reports, {} layout changes, \
             {} crashes of daemons holding replex regions ({} with objects there), \
             {} daemons lost for good, {} declared lost, {} power losses ({} unsynced writes lost)",
            self.crashes,
            self.crashes_mid_indexed_update,
            self.partitions,
            self.one_way_partitions,
            self.coordinator_outages,
            self.disk_faults,
            self.pauses,
            self.coordinator_pauses,
            self.reported_offline,
            self.layout_changes,
            self.replex_crashes,
            self.replex_crashes_with_objects,
            self.losses,
            self.declared_lost,
            self.power_losses,
            self.unsynced_lost,
        )
    }
}

/// A failed run: what went wrong, and how to replay it.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub knobs: String,
    /// Whether the seed ran a replex space.
    pub replex: bool,
    pub at_ms: u64,
    pub what: Violation,
}

/// What one replica of a region holds: per key, its version and object
/// (`None` for a tombstone).
pub type Holding = BTreeMap<Vec<u8>, (u64, Option<Object>)>;

/// Why a run failed: a property the simulator checks did not hold.
#[derive(Debug, thiserror::Error)]
pub enum Violation {
    /// Liveness: after healing, the cluster did not settle in time.
    #[error("the cluster did not settle within {settle_ms_max} ms of healing: {why}")]
    Unsettled { settle_ms_max: u64, why: String },
    /// Nothing was left to happen, yet the run had not finished (a bug of
    /// the simulator: the clock and the detector always tick).
    #[error("the event queue ran dry")]
    QueueDry,
    /// A daemon answered a client with something no correct daemon sends
    /// for that operation.
    #[error("client {client}: {op:?} on key {key} answered {answer:?}")]
    UnexpectedAnswer {
        client: usize,
        key: i64,
        op: KvOp,
        answer: Box<DaemonResponse>,
    },
    /// A daemon answered a lookup's page with something no correct daemon
    /// sends.
    #[error("client {client}: a lookup was answered {answer}")]
    UnexpectedLookupAnswer { client: usize, answer: String },
    /// A daemon answered a search's page with something no correct daemon
    /// sends (an object the checks do not match, an empty page with more).
    #[error("client {client}: a search was answered {answer}")]
    UnexpectedSearchAnswer { client: usize, answer: String },
    /// A key saw more operations than the linearizability check handles.
    #[error("key {key}: too many events to check")]
    TooManyEvents { key: i64 },
    /// Liveness: an operation never returned, even after healing.
    #[error("key {key}: {op:?} never finished")]
    NeverFinished { key: i64, op: KvOp },
    /// Safety: one key's history has no linearization.
    #[error("key {key}: {source}")]
    NotLinearizable {
        key: i64,
        #[source]
        source: NotLinearizable,
    },
    /// The space the clients use is missing from the configuration.
    #[error("the space is gone")]
    SpaceGone,
    /// A daemon still stores a region no configuration names any more
    /// (a dropped subspace's): its data should have been deleted.
    #[error("{daemon} still stores region {region}, which the configuration no longer has")]
    LeftoverRegion { daemon: DaemonId, region: RegionId },
    /// Liveness: after healing, something is still paused, cut off or
    /// down (a bug of the simulator's healing).
    #[error("still faulty after healing: {what}")]
    NotHealed { what: String },
    /// Liveness: a daemon is not running at the end.
    #[error("{daemon} is not running after healing")]
    NotRunning { daemon: DaemonId },
    /// Liveness: the coordinator does not count a daemon Available at the
    /// end.
    #[error("{daemon} is {state:?} after healing")]
    NotAvailable {
        daemon: DaemonId,
        state: Option<DaemonState>,
    },
    /// Liveness: a daemon has not installed the current configuration.
    #[error("{daemon} is at epoch {epoch}, the coordinator at {current}")]
    Behind {
        daemon: DaemonId,
        epoch: Epoch,
        current: Epoch,
    },
    /// Liveness: a key was not read after everything settled, or its final
    /// read did not return.
    #[error("key {key}: no final read returned")]
    FinalReadMissing { key: i64 },
    /// Liveness: a region is served by fewer than f + 1 replicas after
    /// healing.
    #[error("region {region} has {replicas} replicas after healing")]
    TooFewReplicas { region: RegionId, replicas: usize },
    /// Safety: two replicas of one region hold different records.
    #[error("region {region} (subspace {subspace}) differs between {first} and {other}:\n  {first}: {reference:?}\n  {other}: {got:?}")]
    ReplicasDiffer {
        region: RegionId,
        subspace: usize,
        first: DaemonId,
        other: DaemonId,
        reference: Box<Holding>,
        got: Box<Holding>,
    },
    /// Safety: an indexlet of a global index holds something other than
    /// its objects' projections, or a lookup there returns other entries
    /// than those objects'.
    #[error("indexlet {region}: {why}")]
    Lookup { region: RegionId, why: String },
    /// Safety: a region holds other objects (or other versions) than the
    /// key subspace's objects place there: an object missing from a part,
    /// in the wrong region of it, in two of its regions, or at an older
    /// version.
    #[error(
        "subspace {subspace} region {region} holds {held:?}, the key subspace says {expected:?}"
    )]
    Misplaced {
        subspace: usize,
        region: RegionId,
        held: Box<BTreeSet<(Vec<u8>, u64)>>,
        expected: Box<BTreeSet<(Vec<u8>, u64)>>,
    },
    /// Safety: when an update was acknowledged, a part (a subspace,
    /// replex, hybrid or global index) did not hold it where its object
    /// belongs, or still held the object elsewhere: `live` lists the
    /// regions holding the key live, with their versions.
    /// `deleted`: whether the key region's record (the update's) is a
    /// tombstone, which is why nothing may be live anywhere.
    #[error(
        "key {key}: acknowledged (the key region holds it {}), but part {part} holds it live in {live:?}, not {expected:?}",
        if *deleted { "deleted" } else { "live" }
    )]
    Unreplicated {
        key: i64,
        part: PartId,
        live: Vec<(RegionId, Version)>,
        expected: Vec<(RegionId, Version)>,
        deleted: bool,
    },
    /// Safety: after settling, the key subspace holds another object for
    /// a key (or none, or one) than the key's final read returned.
    #[error("key {key}: the final read returned {read:?}, the key subspace holds {stored:?}")]
    FinalObject {
        key: i64,
        read: KvResult,
        stored: Box<Option<Object>>,
    },
    /// Safety: the key subspace holds an object under a key no client
    /// wrote.
    #[error("the key subspace holds a key no client wrote: {key:?}")]
    StrayObject { key: Vec<u8> },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at {} ms ({})\n{}\nreplay: cargo run -p tessera-sim -- --seed {} --trace",
            self.seed, self.at_ms, self.knobs, self.what, self.seed
        )
    }
}

/// What a run of many seeds did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds: u64,
    pub sim_ms: u64,
    pub operations: usize,
    pub faults: Faults,
    pub transfers: u64,
    pub tombstones_collected: u64,
    pub stale_dropped: u64,
    pub unknown_outcomes: u64,
    pub lookups: u64,
    pub lookup_misses: u64,
    pub searches: u64,
    pub search_found: u64,
    pub search_misses: u64,
    pub search_replans: u64,
    pub search_redirected: u64,
    pub search_gave_up: u64,
    pub redirected_gets: u64,
    pub redirect_shipped: u64,
    pub redirect_kept: u64,
    pub index_splits: u64,
    /// Seeds that ran a replex space (passed or failed), and the passed
    /// ones' relocating updates.
    pub replex_seeds: u64,
    pub replex_relocations: u64,
    /// Passed replex seeds that relayouted their space, and those whose
    /// parts were all ready at the end.
    pub replex_relayouts: u64,
    pub replex_relayouts_settled: u64,
    /// Passed seeds that lost a daemon for good, and their rebuilds
    /// (see [`Report`]).
    pub loss_seeds: u64,
    /// Passed seeds in which the coordinator declared a daemon lost.
    pub declared_lost_seeds: u64,
    pub rebuilds_planned: u64,
    pub rebuilds_completed: u64,
    pub rebuilds_cancelled: u64,
    pub regions_orphaned: u64,
    pub failed: Vec<u64>,
}

impl Summary {
    /// Counts one passed run.
    pub fn add(&mut self, r: &Report) {
        self.sim_ms += r.sim_ms;
        self.operations += r.operations;
        self.faults.add(&r.faults);
        self.transfers += r.transfers;
        self.tombstones_collected += r.tombstones_collected;
        self.stale_dropped += r.stale_dropped;
        self.unknown_outcomes += r.unknown_outcomes;
        self.lookups += r.lookups;
        self.lookup_misses += r.lookup_misses;
        self.searches += r.searches;
        self.search_found += r.search_found;
        self.search_misses += r.search_misses;
        self.search_replans += r.search_replans;
        self.search_redirected += r.search_redirected;
        self.search_gave_up += r.search_gave_up;
        self.redirected_gets += r.redirected_gets;
        self.redirect_shipped += r.redirect_shipped;
        self.redirect_kept += r.redirect_kept;
        self.index_splits += r.index_splits;
        self.replex_relocations += r.replex_relocations;
        self.replex_relayouts += u64::from(r.replex_relayout);
        self.replex_relayouts_settled += u64::from(r.replex_relayout_settled);
        self.loss_seeds += u64::from(r.faults.losses > 0);
        self.declared_lost_seeds += u64::from(r.faults.declared_lost > 0);
        self.rebuilds_planned += r.rebuilds_planned;
        self.rebuilds_completed += r.rebuilds_completed;
        self.rebuilds_cancelled += r.rebuilds_cancelled;
        self.regions_orphaned += r.regions_orphaned;
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} seeds: {:.0} simulated seconds, {} operations ({} of unknown outcome), {}, \
             {} state transfers, {} tombstones collected, {} stale keys dropped, \
             {} lookups ({} misses checked), {} searches ({} objects and {} misses checked, {} planned again, {} completed through covering sets, {} given up), \
             {} gets redirected to covering sets ({} objects shipped to lanes standing in for failed regions, {} kept), \
             {} automatic index splits, \
             {} replex seeds ({} updates relocating inside a replex; {} passed seeds relayouted \
             ({} with every part ready at the end); {} passed seeds with a loss, \
             {} with a daemon declared lost, rebuilds {} planned, {} completed, {} cancelled, {} regions orphaned at the end); \
             {} failed {:?}",
            self.seeds,
            self.sim_ms as f64 / 1000.0,
            self.operations,
            self.unknown_outcomes,
            self.faults,
            self.transfers,
            self.tombstones_collected,
            self.stale_dropped,
            self.lookups,
            self.lookup_misses,
            self.searches,
            self.search_found,
            self.search_misses,
            self.search_replans,
            self.search_redirected,
            self.search_gave_up,
            self.redirected_gets,
            self.redirect_shipped,
            self.redirect_kept,
            self.index_splits,
            self.replex_seeds,
            self.replex_relocations,
            self.replex_relayouts,
            self.replex_relayouts_settled,
            self.loss_seeds,
            self.declared_lost_seeds,
            self.rebuilds_planned,
            self.rebuilds_completed,
            self.rebuilds_cancelled,
            self.regions_orphaned,
            self.failed.len(),
            self.failed
        )
    }
}
