//! One daemon as a state machine without I/O: its replica cores, its state
//! transfers, its lease and its side of the heartbeat protocol. Inputs come
//! in as calls (a client request, a peer message, a configuration, a tick,
//! a coordinator's answer, all with the time as a parameter); what must
//! happen as a result goes out, in order, through a sink of [`Output`]s.
//!
//! ```text
//!  tokio shell (shell.rs) ─┐                          ┌─▶ Send (peer), Reply (client)
//!                          ├─▶ DaemonNode ──Output──▶─┼─▶ Job: scan / digest / read, run later
//!  simulator (tessera-sim) ┘   cores, transfers,      ├─▶ Coord: a call to the coordinator
//!                              lease, rejoin, poison  └─▶ Stop
//! ```
//!
//! Both drivers call the same methods; neither holds protocol logic. The
//! shell owns sockets, threads and clocks; the simulator owns a simulated
//! network, clock and disk.
//!
//! Concurrency: keys are spread over [`SHARDS`] cores by their hash, each
//! behind its own lock, so updates of different keys never wait on one
//! another; outputs of a core are handed to the sink while its lock is
//! held, so one key's messages leave in the order the core produced them.
//! Locks are taken in the order core → transfers, never the other way.
//!
//! Invariants:
//! - A daemon serves clients only while its lease holds: the coordinator
//!   answered a heartbeat sent less than [`LEASE`] ago (the coordinator's
//!   failure timeout is twice that), so a daemon cut off from the
//!   coordinator stops answering before anyone can replace it.
//! - A daemon whose storage failed (a write, an fsync, a read) is
//!   *poisoned*: from then on it answers no client, acknowledges nothing,
//!   and instead of heartbeats it asks the coordinator to take it out of
//!   every chain ([`CoordRequest::Leave`]); once that is done it stops.
//!   Its regions are re-replicated exactly as after a crash.
//! - A daemon the coordinator took offline while it was alive (it was
//!   paused, or cut off) registers again by itself, no more often than a
//!   backoff allows, so a flapping daemon cannot churn epochs.

pub mod backfill;

/// The meta entry holding the newest epoch a daemon installed (8 bytes,
/// big-endian).
pub const META_INSTALLED_EPOCH: &str = "installed_epoch";

/// The newest epoch installed by the daemon whose disk `engine` is (`None`
/// on a fresh disk, or one written by a build that kept none).
pub fn installed_epoch(
    engine: &dyn Engine,
) -> Result<Option<Epoch>, tessera_storage::StorageError> {
    Ok(engine
        .meta_get(META_INSTALLED_EPOCH)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(|b| Epoch(u64::from_be_bytes(b))))
}
mod backup;
mod changes;
mod collect;
mod counting;
mod lease;
mod rebuild;
mod sweep;
mod transfers;

use crate::core::{Effect, ReplicaCore, ReplyTo};
use crate::index::IndexedEngine;
use crate::rebuild::Rebuilds;
use crate::search;
use crate::shapes::{self, Shape, Shapes};
use crate::transfer::Transfers;
use lease::{Lease, Rejoin};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;
use tessera_protocol::report::ReportLimit;
use tessera_protocol::{
    ChainMsg, CoordRequest, DaemonRequest, DaemonResponse, Message, Reporter, Status, StopReason,
};
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::{Configuration, DaemonId, Epoch, RegionDirectory, RegionId, SubspaceKind};

/// Number of replica cores per daemon.
pub const SHARDS: usize = 16;

/// How often a daemon sends a heartbeat (its driver keeps the rhythm).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
/// How often the driver calls [`DaemonNode::on_tick`].
pub const TICK_INTERVAL: Duration = Duration::from_millis(250);
/// How long an answered heartbeat lets a daemon serve (see
/// [`tessera_protocol::LEASE`]).
pub const LEASE: Duration = tessera_protocol::LEASE;
/// Every this many ticks (10 s), the head of each region sweeps part of
/// it for anti-entropy (see [`Job::Sweep`]), each region at its own tick
/// of the window.
pub const SWEEP_TICKS: u64 = 40;
/// One sweep in this many reaches every replica of a region, not only
/// its head: replicas that differ are a beyond-f failure (after a power
/// loss), so their repair may take longer, and a sweep per replica on
/// every round would read about twice what the heads' sweeps read.
const EVERY_REPLICA_SWEEPS: u64 = 4;
/// Every this many ticks (10 s) by default, each replica of a region
/// collects the next tombstones the horizon lets go (see [`Job::Collect`]).
pub const COLLECT_TICKS: u64 = 40;

/// The tick, in a window of `every` ticks, at which `region`'s periodic
/// work (its sweep, its tombstone collection) falls: its id hashed
/// (Fibonacci hashing), so that the regions a daemon holds spread evenly
/// over the window even when their ids follow a stride (placement deals
/// heads round-robin: with 8 daemons, `id % 40` put a daemon's regions on
/// 5 ticks of the 40).
pub fn window_phase(region: RegionId, every: u64) -> u64 {
    let hashed = region.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (hashed * every.max(1)) >> 32
}
/// The most live objects one sweep of one region looks at; the next
/// sweep continues after the last one.
const SWEEP_OBJECTS_MAX: usize = 1024;

/// What the driver must do, in the order given.
#[derive(Debug)]
pub enum Output {
    /// A message to a peer daemon ([`Message::Chain`] or
    /// [`Message::Transfer`]); it may be lost, as any network message.
    Send { to: DaemonId, msg: Message },
    /// The answer to a client's request.
    Reply {
        to: ReplyTo,
        response: DaemonResponse,
    },
    /// Work that reads much of the disk: run it with
    /// [`DaemonNode::run_job`] when convenient, off any lock (the shell
    /// uses a blocking thread).
    Job(Job),
    /// A call to the coordinator; its answer (if one comes) goes to
    /// [`DaemonNode::on_coord_answer`] with the time the call was made.
    Coord(CoordRequest),
    /// The daemon must stop serving and exit.
    Stop(Stopping),
}

/// Disk-bound work a node hands its driver.
#[derive(Debug)]
pub enum Job {
    /// A state transfer's scan, digest or prune.
    Transfer(crate::transfer::Work),
    /// Collect the next tombstones of `region` that the configuration's
    /// horizon lets go (see [`collect`]).
    Collect { region: RegionId },
    /// Anti-entropy, at a replica of a non-key region: tell the point
    /// leaders of the next objects it holds which versions it has, so they
    /// repair any the key subspace does not hold there (an orphan of an
    /// update lost beyond f, or a missed write). At the head of a key
    /// region (the point leader), the other direction: tell the replicas
    /// of the regions where its next objects belong which versions to
    /// expect, so that one that lost an object says so — every replica
    /// when `every_replica`, else the heads.
    Sweep {
        region: RegionId,
        every_replica: bool,
    },
    /// A search page for a client.
    Read {
        to: ReplyTo,
        epoch: Epoch,
        request: DaemonRequest,
    },
}

/// Why a daemon stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopping {
    /// The coordinator said so.
    Told(StopReason),
    /// Its storage failed, and the coordinator has taken it out of every
    /// chain (or could not be told: then its silence does the same).
    CannotPersist,
}

impl std::fmt::Display for Stopping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopping::Told(reason) => write!(f, "the coordinator stopped it: {reason}"),
            Stopping::CannotPersist => f.write_str("its storage failed; it left every chain"),
        }
    }
}

/// How a node is run.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The address peers and clients reach this daemon at (registration).
    pub addr: String,
    /// Records per state-transfer message.
    pub transfer_batch: usize,
    /// Ticks between tombstone collection rounds ([`COLLECT_TICKS`] by
    /// default).
    pub collect_ticks: u64,
    /// The URL of the daemon's metrics, given again when it registers anew.
    pub metrics: Option<String>,
}

/// What the node counts as it works, for the shell's metrics: plain
/// counters, read whenever the shell likes.
#[derive(Debug, Default)]
pub struct NodeStats {
    /// Search and keys-only pages read.
    pub search_pages: AtomicU64,
    /// Objects those pages looked at: records scanned, or loaded through
    /// an index.
    pub search_examined: AtomicU64,
    /// Objects (or keys) those pages returned.
    pub search_returned: AtomicU64,
    /// Walks that test a check object by object and passed the loads
    /// read where their request arrived (`search::INLINE_LOADS`): handed
    /// off and read again from their start.
    pub walks_past_inline: AtomicU64,
    /// Tombstones collected below the horizon.
    pub tombstones_collected: AtomicU64,
    /// Keys deleted as a transfer's target because the region no longer
    /// held them.
    pub stale_dropped: AtomicU64,
    /// Keys a point leader sent down their chain to fill a building
    /// subspace.
    pub backfill_keys: AtomicU64,
    /// Objects whose index entries were written for a building part.
    pub backfill_entries: AtomicU64,
    /// The shapes of the searches, gets and updates served, per space
    /// (`crate::shapes`); the cores count their updates into it too.
    pub shapes: Arc<Shapes>,
}

pub struct DaemonNode {
    me: DaemonId,
    options: NodeOptions,
    /// Every write goes through the index, which keeps each region's
    /// secondary index in step with its objects.
    engine: Arc<IndexedEngine>,
    shards: Vec<Mutex<ReplicaCore>>,
    /// The installed configuration and its region directory, replaced
    /// together so that a reader never pairs one with the other's epoch.
    config: RwLock<Installed>,
    transfers: Mutex<Transfers>,
    /// The rebuilds of lost replex regions this daemon is the target of.
    rebuilds: Mutex<Rebuilds>,
    lease: Lease,
    poisoned: AtomicBool,
    rejoin: Mutex<Rejoin>,
    /// Ticks so far, and per region where the last sweep stopped.
    ticks: AtomicU64,
    sweeps: Mutex<HashMap<RegionId, Vec<u8>>>,
    /// Per region, where the last tombstone collection stopped.
    collects: Mutex<HashMap<RegionId, Vec<u8>>>,
    /// Per region whose collection pass is under way: the engine's
    /// tombstone mark when it began, and whether it has seen a tombstone.
    collect_passes: Mutex<HashMap<RegionId, (u64, bool)>>,
    /// The newest epoch of tombstones the last collections had to keep
    /// (0: none), reported at the next round.
    tombstones_waiting: AtomicU64,
    /// Backfill walks of key regions, by cursor name: how far each has
    /// sent, ahead of its cursor on disk (see `backfill`).
    walks: Mutex<HashMap<String, backfill::Cursor>>,
    /// Keys a backfill must send again (see `backfill::note_revisits`).
    revisits: Mutex<HashMap<RegionId, std::collections::BTreeSet<Vec<u8>>>>,
    /// The (part, key region) pairs whose building this daemon saw begin
    /// while it led the region, so that its revisits are complete (see
    /// `backfill::note_witnessed`).
    witnessed: Mutex<std::collections::HashSet<(tessera_types::PartId, RegionId)>>,
    /// When each peer was last reported unreachable.
    reported: Mutex<ReportLimit>,
    stats: NodeStats,
    /// Per indexlet, the lookup pages served since the last load report
    /// (every SWEEP_TICKS ticks), which reports them to the coordinator
    /// (`CoordRequest::IndexletLoad`).
    lookup_pages: Mutex<HashMap<RegionId, u64>>,
    /// Objects frozen for backups (see `backup`).
    frozen: Mutex<backup::Frozen>,
}

/// A configuration with its region directory, built once when installed.
#[derive(Clone)]
struct Installed {
    config: Arc<Configuration>,
    directory: Arc<RegionDirectory>,
}

impl Installed {
    fn new(config: Arc<Configuration>) -> Installed {
        Installed {
            directory: Arc::new(RegionDirectory::new(&config)),
            config,
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic under a lock leaves plain bookkeeping; the invariants the
    // cores assert make a broken one crash the daemon instead.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The space and shape of a search whose page `request` asks for, when
/// that page opens the search (`shapes::opens_search`): only such pages
/// are counted, so that a search is counted once however many regions it
/// reads.
fn search_opening(
    config: &Configuration,
    request: &DaemonRequest,
) -> Option<(tessera_types::SpaceId, Shape)> {
    let (space, region, checks, lookup) = match request {
        DaemonRequest::Search {
            space,
            region,
            checks,
            after: None,
            ..
        }
        | DaemonRequest::SearchKeys {
            space,
            region,
            checks,
            after: None,
            ..
        } => (*space, *region, checks, None),
        DaemonRequest::Lookup {
            space,
            region,
            checks,
            descending,
            after: None,
            ..
        } => (*space, *region, checks, Some(*descending)),
        _ => return None,
    };
    let opens = shapes::opens_search(config.space_by_id(space)?, region, checks, lookup);
    opens.then(|| (space, Shape::search(checks)))
}

/// Whether a read answered with a page (not a refusal to send again).
fn returned_page(page: &Result<DaemonResponse, search::ReadFailed>) -> bool {
    matches!(
        page,
        Ok(DaemonResponse::SearchPage { .. }
            | DaemonResponse::KeysPage { .. }
            | DaemonResponse::LookupPage { .. })
    )
}

fn shard_of(key: &[u8]) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % SHARDS as u64) as usize
}

/// A sink the node hands its outputs to.
pub type Out<'a> = &'a mut dyn FnMut(Output);

impl DaemonNode {
    /// A node for daemon `me` starting at `now` from `config`, over
    /// `engine` (its data survives restarts: regions no configuration
    /// names any more are deleted, transfers named by `config` begin). The
    /// coordinator has just registered it and given it `config`, which
    /// counts as a first renewal of its lease: without answered heartbeats
    /// it stops serving one lease later.
    pub fn new(
        me: DaemonId,
        options: NodeOptions,
        config: Arc<Configuration>,
        engine: Arc<IndexedEngine>,
        now: Duration,
        out: Out<'_>,
    ) -> DaemonNode {
        let dyn_engine: Arc<dyn Engine> = engine.clone();
        let stats = NodeStats::default();
        let node = DaemonNode {
            me,
            options,
            shards: (0..SHARDS)
                .map(|_| {
                    let mut core = ReplicaCore::new(me, config.clone(), dyn_engine.clone());
                    core.count_shapes_into(stats.shapes.clone());
                    Mutex::new(core)
                })
                .collect(),
            engine,
            config: RwLock::new(Installed::new(config.clone())),
            transfers: Mutex::new(Transfers::new(me)),
            rebuilds: Mutex::new(Rebuilds::new(me)),
            lease: Lease {
                renewed_ms: AtomicU64::new(0),
                refused_ms: AtomicU64::new(0),
            },
            poisoned: AtomicBool::new(false),
            rejoin: Mutex::new(Rejoin::new()),
            ticks: AtomicU64::new(0),
            sweeps: Mutex::new(HashMap::new()),
            collects: Mutex::new(HashMap::new()),
            collect_passes: Mutex::new(HashMap::new()),
            tombstones_waiting: AtomicU64::new(0),
            walks: Mutex::new(HashMap::new()),
            revisits: Mutex::new(HashMap::new()),
            witnessed: Mutex::new(std::collections::HashSet::new()),
            reported: Mutex::new(ReportLimit::default()),
            stats,
            lookup_pages: Mutex::new(HashMap::new()),
            frozen: Mutex::new(backup::Frozen::default()),
        };
        changes::log(
            &changes::changes(me, &Configuration::default(), &config),
            config.epoch,
        );
        node.lease.renew(now);
        // As `on_config` does, before the node acts in its first epoch.
        if let Err(e) = node.mark_installed(config.epoch) {
            node.poison("recording the installed epoch", &e, out);
        }
        node.drop_removed_regions(&config, out);
        let actions = lock(&node.transfers).on_config(&config);
        node.transfer_actions(actions, out);
        let actions = lock(&node.rebuilds).on_config(&config);
        node.rebuild_actions(actions, out);
        node
    }

    pub fn me(&self) -> DaemonId {
        self.me
    }

    /// The installed configuration.
    pub fn config(&self) -> Arc<Configuration> {
        self.installed().config
    }

    fn installed(&self) -> Installed {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// What the node counted so far.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// Records on disk, synced with everything written before, that this
    /// daemon installed `epoch` (see [`installed_epoch`]).
    fn mark_installed(&self, epoch: Epoch) -> Result<(), tessera_storage::StorageError> {
        self.engine
            .meta_put(META_INSTALLED_EPOCH, &epoch.0.to_be_bytes())
    }

    /// The engine reads and writes go through.
    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }

    /// Whether the node answers clients at `now`: its lease holds and its
    /// storage has not failed.
    pub fn serving(&self, now: Duration) -> bool {
        !self.poisoned() && self.lease.valid(now)
    }

    /// Whether the storage failed.
    pub fn poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    // ------------------------------------------------------------ inputs

    /// A client's request on connection `to.conn`.
    pub fn on_request(
        &self,
        to: ReplyTo,
        epoch: Epoch,
        request: DaemonRequest,
        now: Duration,
        out: Out<'_>,
    ) {
        if !self.serving(now) {
            let reason = if self.poisoned() {
                "this daemon's storage failed; it is leaving every chain"
            } else {
                "this daemon has lost contact with the coordinator"
            };
            let response = DaemonResponse::Failed {
                status: Status::Reconfigure,
                reason: reason.into(),
            };
            out(Output::Reply { to, response });
            return;
        }
        match request {
            DaemonRequest::Update(update) => {
                let key = key_bytes(&update.key);
                self.with_core(&key, out, |core| core.on_update(to, epoch, update));
            }
            DaemonRequest::Get { space, key, auth } => {
                let response = search::get_committed(
                    &self.config(),
                    self.me,
                    self.engine(),
                    epoch,
                    space,
                    &key,
                    &auth,
                );
                if matches!(
                    response,
                    Ok(DaemonResponse::Found { .. }
                        | DaemonResponse::Failed {
                            status: Status::NotFound,
                            ..
                        })
                ) {
                    self.stats.shapes.count(space, &Shape::Get);
                }
                let response = self.vouch(response, out);
                out(Output::Reply { to, response });
            }
            // A page that returns what it walks is as short as a get and
            // is answered here; a job's hand-off to another thread (two
            // thread wake-ups) cost such searches half a get's throughput.
            // A walk that tests a check object by object is answered here
            // too while it loads few objects (`search::INLINE_LOADS`).
            request @ DaemonRequest::Search { .. } => {
                let budget = match self.search_plan(&request) {
                    search::PagePlan::AtOnce => None,
                    // Its index scan, then a read per object it loads.
                    search::PagePlan::Walk => Some(search::INLINE_LOADS + 1),
                    search::PagePlan::Apart => {
                        out(Output::Job(Job::Read { to, epoch, request }));
                        return;
                    }
                };
                match self.read(epoch, &request, budget) {
                    Some(response) => {
                        let response = self.vouch(response, out);
                        out(Output::Reply { to, response });
                    }
                    None => {
                        self.stats.walks_past_inline.fetch_add(1, Ordering::Relaxed);
                        out(Output::Job(Job::Read { to, epoch, request }))
                    }
                }
            }
            request @ (DaemonRequest::SearchKeys { .. }
            | DaemonRequest::Lookup { .. }
            | DaemonRequest::BackupRead { .. }) => {
                out(Output::Job(Job::Read { to, epoch, request }))
            }
            DaemonRequest::BackupDrain => {
                let response = self.backup_drain();
                out(Output::Reply { to, response });
            }
            DaemonRequest::BackupTake { backup } => {
                let response = self.backup_take(epoch, backup);
                out(Output::Reply { to, response });
            }
            DaemonRequest::BackupRelease { backup } => {
                let response = self.backup_release(backup);
                out(Output::Reply { to, response });
            }
        }
    }

    /// A message from a peer daemon.
    pub fn on_peer(&self, msg: Message, out: Out<'_>) {
        if self.poisoned() {
            // Nothing it stores can be trusted to last: it must not
            // acknowledge, nor take part in a transfer.
            return;
        }
        match msg {
            Message::Chain(msg) => {
                let key = match &msg {
                    ChainMsg::Forward(f) => key_bytes(&f.key),
                    ChainMsg::Ack(a) => key_bytes(&a.key),
                };
                self.with_core(&key, out, |core| core.on_chain(msg));
            }
            Message::Transfer(msg) => {
                let actions = lock(&self.transfers).on_message(msg);
                self.transfer_actions(actions, out);
            }
            Message::Expected(expected) => self.on_expected(expected, out),
            Message::Rebuild(msg) => self.on_rebuild_msg(msg, out),
            Message::Held(held) => {
                use crate::core::HeldKind;
                let live = held.objects.into_iter().map(|o| (o, HeldKind::Live));
                let removed = held.removed.into_iter().map(|o| (o, HeldKind::Tombstone));
                let absent = held.absent.into_iter().map(|o| (o, HeldKind::Absent));
                for ((key, version), kind) in live.chain(removed).chain(absent) {
                    let bytes = key_bytes(&key);
                    let report = crate::core::Held {
                        epoch: held.epoch,
                        space: held.space,
                        region: held.region,
                        key,
                        version,
                        kind,
                        from: held.from,
                    };
                    self.with_core(&bytes, out, |core| core.on_held(report));
                }
            }
            other => tracing::warn!("not a peer message: {other:?}"),
        }
    }

    /// The driver could not deliver to `peer` (a connection refused or
    /// timed out, a write that failed): report it to the coordinator, at
    /// most once per [`tessera_protocol::report::UNREACHABLE_REPORT_INTERVAL`] per peer. Reports from
    /// more than one source make the coordinator take a peer offline that
    /// still heartbeats (a one-way partition).
    pub fn on_peer_unreachable(&self, peer: DaemonId, now: Duration, out: Out<'_>) {
        if peer == self.me || self.poisoned() {
            return;
        }
        if !lock(&self.reported).allow(peer, now) {
            return;
        }
        out(Output::Coord(CoordRequest::Unreachable {
            daemon: peer,
            reporter: Reporter::Daemon(self.me),
        }));
    }

    /// A configuration from the coordinator; true when it was news and is
    /// now installed.
    pub fn on_config(&self, config: Arc<Configuration>, out: Out<'_>) -> bool {
        let old = {
            let mut current = self.config.write().unwrap_or_else(|p| p.into_inner());
            if config.epoch <= current.config.epoch {
                return false;
            }
            // Before anyone can write to a region this configuration adds.
            self.engine.on_config(&config);
            std::mem::replace(&mut *current, Installed::new(config.clone()))
        };
        tracing::info!(epoch = %config.epoch, "installed configuration");
        changes::log(
            &changes::changes(self.me, &old.config, &config),
            config.epoch,
        );
        self.forget_walks_not_led();
        // Transfers first: a core ships the commits of a new transfer from
        // now on, and they must find the transfer known.
        let actions = lock(&self.transfers).on_config(&config);
        self.note_witnessed(&old.config, &config);
        let revisit = self.revisit_regions(&config);
        // Every core held while the epoch is recorded on disk (synced, with
        // every commit made before it) and before any core acts in it: the
        // coordinator's evidence, after a restart, of whether this daemon
        // may have acted as a region's tail (`tessera_coordinator::tails`);
        // a member commits unsynced except as its region's tail, so what
        // it committed unsynced as another member must be durable by then.
        let mut cores: Vec<MutexGuard<'_, ReplicaCore>> = self.shards.iter().map(lock).collect();
        if let Err(e) = self.mark_installed(config.epoch) {
            drop(cores);
            self.poison("recording the installed epoch", &e, out);
            return true;
        }
        for core in &mut cores {
            for &region in &revisit {
                self.note_revisits(region, core.busy_keys_of(region));
            }
            core.on_config(config.clone());
            let effects = core.drain_effects();
            self.core_effects(effects, out);
        }
        drop(cores);
        self.drop_regions_gone(&old.config, &config, out);
        self.stats
            .shapes
            .retain_spaces(|id| config.space_by_id(id).is_some());
        self.transfer_actions(actions, out);
        // After the cores: a rebuild's partial copy is cleared only once
        // no core acts on the epoch that named the rebuild any more.
        let actions = lock(&self.rebuilds).on_config(&config);
        self.rebuild_actions(actions, out);
        true
    }

    /// Logical time passes ([`TICK_INTERVAL`]): cores re-send what waits
    /// too long, transfers follow up.
    pub fn on_tick(&self, out: Out<'_>) {
        if self.poisoned() {
            return;
        }
        for shard in &self.shards {
            let mut core = lock(shard);
            core.on_tick();
            let effects = core.drain_effects();
            self.core_effects(effects, out);
        }
        let actions = lock(&self.transfers).on_tick();
        self.transfer_actions(actions, out);
        let actions = lock(&self.rebuilds).on_tick();
        self.rebuild_actions(actions, out);
        let tick = self.ticks.fetch_add(1, Ordering::Relaxed);
        let every = self.options.collect_ticks.max(1);
        // One read of the configuration for every round this tick starts.
        let config = self.config();
        self.collect_tick(&config, tick, every, out);
        self.backfill_tick(tick, out);
        if tick % SWEEP_TICKS == SWEEP_TICKS - 1 {
            self.report_lookup_load(&config, out);
        }
        self.sweep_tick(&config, tick, out);
    }

    /// Starts the sweeps of the regions whose turn `tick` is. Each region
    /// is swept once every SWEEP_TICKS ticks, at the tick of the window
    /// its id picks ([`window_phase`]), so that a daemon's sweeps are
    /// spread over the window:
    /// started at one tick, every region's sweep ran at once on the
    /// blocking threads and the daemon answered nothing else for up to
    /// half a second every 10 s (docs/BENCHMARKS.md, "A stall every ten
    /// seconds").
    ///
    /// A non-key region's head sweeps, reporting what it holds; a key
    /// region's head (the point leader) reports what the others should
    /// hold, to their heads. Both directions cost about the same per
    /// round (at most SWEEP_OBJECTS_MAX records read, one list per region;
    /// an expected key is one point read per replica, answered only if
    /// absent), so both run every sweep (a lost key is repaired after two
    /// passes over its region). Every replica, not only the head, one
    /// round in EVERY_REPLICA_SWEEPS: after a power loss the replicas of
    /// one region can differ (simulator seeds 241002066 and 243000018),
    /// and nothing else compares them.
    fn sweep_tick(&self, config: &Configuration, tick: u64, out: Out<'_>) {
        for space in &config.spaces {
            for (subspace, layout) in space.subspaces.iter().enumerate() {
                for region in &layout.regions {
                    let turn = tick + window_phase(region.id, SWEEP_TICKS);
                    if turn % SWEEP_TICKS != SWEEP_TICKS - 1 {
                        continue;
                    }
                    let every_replica = (turn / SWEEP_TICKS).is_multiple_of(EVERY_REPLICA_SWEEPS);
                    let sweeps = if subspace == 0 || !every_replica {
                        region.chain.first() == Some(&self.me)
                    } else {
                        region.chain.contains(&self.me)
                    };
                    if sweeps {
                        out(Output::Job(Job::Sweep {
                            region: region.id,
                            every_replica,
                        }));
                    }
                }
            }
        }
    }

    /// Tells the coordinator, for every indexlet this daemon replicates,
    /// how many lookup pages it served since the last report, every
    /// SWEEP_TICKS ticks (zero too, so that a load that stopped is
    /// forgotten).
    fn report_lookup_load(&self, config: &Configuration, out: Out<'_>) {
        let mut served = std::mem::take(&mut *lock(&self.lookup_pages));
        let window_ms = (TICK_INTERVAL * SWEEP_TICKS as u32).as_millis() as u64;
        for space in &config.spaces {
            for layout in &space.subspaces {
                if layout.kind != SubspaceKind::GlobalIndex {
                    continue;
                }
                for region in layout.regions.iter().filter(|r| r.chain.contains(&self.me)) {
                    out(Output::Coord(CoordRequest::IndexletLoad {
                        daemon: self.me,
                        space: space.id,
                        part: layout.part,
                        region: region.id,
                        pages: served.remove(&region.id).unwrap_or(0),
                        window_ms,
                    }));
                }
            }
        }
    }

    /// Makes what was written durable (interval durability); a failure
    /// poisons the node.
    pub fn sync(&self, out: Out<'_>) {
        if let Err(e) = self.engine.sync() {
            self.poison("fsync", &e, out);
        }
    }

    /// Runs a job the node handed out.
    pub fn run_job(&self, job: Job, out: Out<'_>) {
        match job {
            Job::Transfer(work) => self.transfer_work(work, out),
            Job::Collect { region } => self.collect(region, out),
            Job::Sweep {
                region,
                every_replica,
            } => self.sweep(region, every_replica, out),
            Job::Read { to, epoch, request } => {
                let response = self
                    .read(epoch, &request, None)
                    .expect("a read without a budget is never over it");
                let response = self.vouch(response, out);
                out(Output::Reply { to, response });
            }
        }
    }

    // ------------------------------------------------------------ inner

    /// A read whose storage failed poisons the node: nothing it holds can
    /// be trusted, and the client is sent elsewhere (RECONFIGURE makes it
    /// fetch a configuration without this daemon and retry).
    fn vouch(
        &self,
        read: Result<DaemonResponse, search::ReadFailed>,
        out: Out<'_>,
    ) -> DaemonResponse {
        read.unwrap_or_else(|e| {
            self.poison("a read", &e, out);
            DaemonResponse::Failed {
                status: Status::Reconfigure,
                reason: "this daemon's storage failed; it is leaving every chain".into(),
            }
        })
    }

    /// Where the page `request` asks for is read ([`search::search_plan`]).
    fn search_plan(&self, request: &DaemonRequest) -> search::PagePlan {
        let installed = self.installed();
        let view = search::ReadView {
            config: &installed.config,
            directory: &installed.directory,
            me: self.me,
            engine: self.engine.as_ref(),
        };
        search::search_plan(&view, request)
    }

    /// Reads the page `request` asks for; with a `budget`, `None` once
    /// the page would start more reads than it (the page is then read
    /// again from its start, without one, on a page thread).
    fn read(
        &self,
        epoch: Epoch,
        request: &DaemonRequest,
        budget: Option<u64>,
    ) -> Option<Result<DaemonResponse, search::ReadFailed>> {
        let installed = self.installed();
        let config = &installed.config;
        let examined = budget.map_or_else(counting::Examined::default, counting::Examined::within);
        let counting = counting::Counting::new(self.engine.clone(), examined);
        let view = search::ReadView {
            config,
            directory: &installed.directory,
            me: self.me,
            engine: &counting,
        };
        let opening = search_opening(config, request);
        let indexlet = match request {
            DaemonRequest::Lookup { region, .. } => Some(*region),
            _ => None,
        };
        let page = match request {
            DaemonRequest::Search {
                space,
                region,
                checks,
                sort,
                after,
                limit,
                auth,
                within,
            } => search::search(
                &view,
                epoch,
                *space,
                *region,
                checks,
                *sort,
                after.as_ref(),
                *limit,
                auth,
                within.as_ref(),
            ),
            DaemonRequest::SearchKeys {
                space,
                region,
                checks,
                after,
                auth,
                op,
            } => search::search_keys(
                &view,
                epoch,
                *space,
                *region,
                checks,
                after.as_deref(),
                (auth, *op),
            ),
            DaemonRequest::Lookup {
                space,
                region,
                checks,
                descending,
                after,
                limit,
            } => search::lookup(
                &view,
                epoch,
                *space,
                *region,
                checks,
                *descending,
                after.as_ref(),
                *limit,
            ),
            DaemonRequest::Get { space, key, auth } => {
                return Some(search::get_committed(
                    config,
                    self.me,
                    self.engine(),
                    epoch,
                    *space,
                    key,
                    auth,
                ))
            }
            DaemonRequest::BackupRead {
                backup,
                region,
                after,
            } => return Some(Ok(self.backup_read(*backup, *region, after.as_deref()))),
            DaemonRequest::Update(_)
            | DaemonRequest::BackupDrain
            | DaemonRequest::BackupTake { .. }
            | DaemonRequest::BackupRelease { .. } => {
                return Some(Ok(DaemonResponse::Failed {
                    status: Status::Internal,
                    reason: "not a read".into(),
                }))
            }
        };
        if counting.hooks().over_budget() {
            // Counted when it is read in full.
            return None;
        }
        let returned = match &page {
            Ok(DaemonResponse::SearchPage { objects, .. }) => objects.len(),
            Ok(DaemonResponse::KeysPage { keys, .. }) => keys.len(),
            Ok(DaemonResponse::LookupPage { entries, .. }) => entries.len(),
            _ => 0,
        };
        let stats = &self.stats;
        if let (Some((space, shape)), true) = (opening, returned_page(&page)) {
            stats.shapes.count(space, &shape);
        }
        if let (Some(region), true) = (indexlet, returned_page(&page)) {
            *lock(&self.lookup_pages).entry(region).or_default() += 1;
        }
        stats.search_pages.fetch_add(1, Ordering::Relaxed);
        let examined = counting.hooks().get();
        stats.search_examined.fetch_add(examined, Ordering::Relaxed);
        stats
            .search_returned
            .fetch_add(returned as u64, Ordering::Relaxed);
        Some(page)
    }

    /// Runs `f` on the key's core and hands its effects on in order, still
    /// under the core's lock so that one key's messages keep their order.
    fn with_core(&self, key: &[u8], out: Out<'_>, f: impl FnOnce(&mut ReplicaCore)) {
        let mut core = lock(&self.shards[shard_of(key)]);
        f(&mut core);
        let effects = core.drain_effects();
        self.core_effects(effects, out);
    }

    fn core_effects(&self, effects: Vec<Effect>, out: Out<'_>) {
        for effect in effects {
            match effect {
                Effect::Send { to, msg } => out(Output::Send {
                    to,
                    msg: Message::Chain(msg),
                }),
                Effect::Ship { transfer, entry } => {
                    self.ship(transfer, None, vec![entry], out);
                }
                Effect::Reply { to, response } => out(Output::Reply { to, response }),
                Effect::Fatal { during, error } => self.poison(during, &error, out),
            }
        }
    }

    /// The storage failed: nothing this daemon acknowledges from now on
    /// could be trusted to last. See the module docs.
    fn poison(&self, during: &str, error: &dyn std::fmt::Display, out: Out<'_>) {
        if self.poisoned.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(
            epoch = self.config().epoch.0,
            "daemon poisoned: storage failed during {during}: {error}; it stops serving and leaves every chain"
        );
        out(Output::Coord(self.heartbeat()));
    }

    /// The regions `old` names and `new` does not (a removed space, a part
    /// a relayout dropped; region ids are never reused) are deleted from
    /// disk. Only those: listing the regions the disk holds, as
    /// [`Self::drop_removed_regions`] does once at start, seeks past every
    /// deletion of every region dropped before until compaction purges
    /// them — at every epoch: 5 % of the daemons' CPU while a workload ran
    /// after some seventy spaces had been created and removed
    /// (`docs/design/advisor.md`, "Dropped regions listed at every epoch").
    /// A region `new` drops that this daemon never stored costs two seeks
    /// into an empty range.
    fn drop_regions_gone(&self, old: &Configuration, new: &Configuration, out: Out<'_>) {
        let kept: HashSet<RegionId> = new.region_ids().collect();
        for region in old.region_ids().filter(|r| !kept.contains(r)) {
            tracing::info!(%region, "dropping the data of a removed region");
            if let Err(e) = self.engine.drop_region(region) {
                return self.poison("dropping a region", &e, out);
            }
        }
    }

    /// Regions that no configuration names any more (their space was
    /// removed while this daemon was down) are deleted from disk: at
    /// start, before the first epoch; afterwards each new configuration
    /// drops what it removes ([`Self::drop_regions_gone`]).
    fn drop_removed_regions(&self, config: &Configuration, out: Out<'_>) {
        let stored = match self.engine.regions() {
            Ok(stored) => stored,
            Err(e) => return self.poison("listing regions", &e, out),
        };
        for region in stored {
            if config.region(region).is_none() {
                tracing::info!(%region, "dropping the data of a removed region");
                if let Err(e) = self.engine.drop_region(region) {
                    return self.poison("dropping a region", &e, out);
                }
            }
        }
    }

    /// What the busy keys of every core wait for, for diagnostics.
    pub fn describe_busy(&self) -> String {
        self.shards
            .iter()
            .map(|s| lock(s).describe_busy())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Keys with work in flight, over every core.
    pub fn busy_keys(&self) -> usize {
        self.shards.iter().map(|s| lock(s).busy_keys()).sum()
    }

    /// The updates of `region` the cores hold pending, by key: what a
    /// rebuild source reports beside its disk, and what the simulator
    /// counts as held when a rebuilt point leader acknowledged an update
    /// the parts after it have not committed yet.
    pub fn pending_writes(
        &self,
        region: RegionId,
    ) -> std::collections::BTreeMap<Vec<u8>, Vec<crate::rebuild::PendingWrite>> {
        let mut out = std::collections::BTreeMap::new();
        for shard in &self.shards {
            out.extend(lock(shard).pending_writes(region));
        }
        out
    }
}
