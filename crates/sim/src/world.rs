//! The simulated world: every process, the event queue and simulated
//! time, and the loop that hands each event to whoever it is for.

use crate::check::Event;
use crate::clients::SimClient;
use crate::disk::Disk;
use crate::knobs::{space_description, Knobs, Rng};
use crate::net::Cut;
use crate::report::{Report, Violation};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tessera_coordinator::node::CoordinatorNode;
use tessera_coordinator::state::{ClusterState, Command, CommandResult};
use tessera_daemon::node::{DaemonNode, Job, HEARTBEAT_INTERVAL, TICK_INTERVAL};
use tessera_protocol::{CoordRequest, CoordResponse, DaemonRequest, DaemonResponse, Message};
use tessera_storage::MemoryEngine;
use tessera_types::{Configuration, DaemonId, Epoch, SpaceId};

pub(crate) const DAEMONS: u64 = 5;
/// At most this many fresh daemons for a seed's relayout of a replex
/// space, whose new regions found no daemon away from the other copies
/// of their objects (a swapped replex and its hybrid need two, and the
/// coordinator may give fresh daemons lost regions to rebuild first).
pub(crate) const LAYOUT_SPARES_MAX: u64 = 8;
pub(crate) const COORD_MEMBERS: usize = 3;
pub(crate) const TICK_MS: u64 = TICK_INTERVAL.as_millis() as u64;
pub(crate) const HEARTBEAT_MS: u64 = HEARTBEAT_INTERVAL.as_millis() as u64;
pub(crate) const FAILURE_TIMEOUT_MS: u64 = 2_000;
pub(crate) const DETECTOR_TICK_MS: u64 = 200;
pub(crate) const CLIENT_TIMEOUT_MS: u64 = 1_500;
pub(crate) const PHASE1_MS: u64 = 20_000;
pub(crate) const SETTLE_MS_MAX: u64 = 180_000;
pub(crate) const TRANSFER_BATCH: usize = 8;
/// How long a disk-bound job (a transfer's scan, a digest, a search page)
/// waits before it runs, at most.
pub(crate) const JOB_DELAY_MS_MAX: u64 = 5;
/// How long a daemon's shell takes to notice that a peer connection broke:
/// between its connect timeout and its acknowledgement timeout.
pub(crate) const PEER_TIMEOUT_MS_MIN: u64 = 1_000;
pub(crate) const PEER_TIMEOUT_MS_MAX: u64 = 2_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Node {
    Coord,
    Daemon(DaemonId),
    Client(usize),
}

#[derive(Clone, Debug)]
pub(crate) enum Msg {
    /// Daemon to daemon: a chain or transfer message.
    Peer(Message),
    /// Daemon to coordinator, sent at `sent` (the daemon's time).
    Coord {
        request: CoordRequest,
        sent: u64,
    },
    /// Coordinator to daemon: the answer to `request`.
    CoordAnswer {
        request: CoordRequest,
        sent: u64,
        response: CoordResponse,
    },
    /// Coordinator to daemon: registered as `id`, with the configuration
    /// to start from (the shell's registration and first long-poll).
    Registered {
        request: CoordRequest,
        sent: u64,
        id: DaemonId,
        config: Arc<Configuration>,
    },
    Config(Arc<Configuration>),
    ConfigRequest,
    Request {
        id: u64,
        epoch: Epoch,
        req: DaemonRequest,
    },
    Response {
        id: u64,
        resp: DaemonResponse,
    },
}

#[derive(Debug)]
pub(crate) enum Ev {
    Deliver {
        from: Node,
        to: Node,
        msg: Msg,
    },
    DaemonTick(DaemonId, u64),
    Heartbeat(DaemonId, u64),
    /// A job a daemon's node handed out, run a little later.
    Job(DaemonId, u64, Job),
    /// The daemon's connection to the peer `.2` broke (the shell's write or
    /// connect timed out).
    PeerUnreachable(DaemonId, u64, DaemonId),
    CoordTick,
    ClientWake(usize),
    Nemesis,
    Restart(DaemonId),
    Heal(DaemonId),
    CoordUp,
    /// A paused process carries on.
    Resume(Process),
    /// The followers' election timeout ran out while `.0` led, frozen.
    Election(usize),
    /// The seed's layout change (see `Knobs::layout_change`).
    Layout,
    /// The operator kills a daemon lost for good (`server-kill`).
    Kill(DaemonId),
    /// The operator starts a fresh daemon after a loss.
    Replace,
}

/// A process the nemesis can pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Process {
    Daemon(DaemonId),
    /// A coordinator member, by index.
    Member(usize),
}

pub(crate) struct SimDaemon {
    pub(crate) id: DaemonId,
    /// The data directory: survives crashes.
    pub(crate) data: Arc<MemoryEngine>,
    pub(crate) up: bool,
    /// Paused: the process handles nothing; what arrives for it (messages,
    /// its own timers and jobs) waits in `held`, in order.
    pub(crate) frozen: bool,
    pub(crate) held: Vec<Ev>,
    /// Peers whose broken connection this process will notice.
    pub(crate) severed: BTreeSet<DaemonId>,
    pub(crate) incarnation: u64,
    /// The running process's node, once registered; and its disk, which
    /// the nemesis can make fail.
    pub(crate) node: Option<DaemonNode>,
    pub(crate) disk: Option<Arc<Disk>>,
    /// A disk fault was injected into this incarnation.
    pub(crate) disk_fault: bool,
    pub(crate) last_epoch: Epoch,
}

/// The coordinator: a Raft group of [`COORD_MEMBERS`] members sharing one
/// replicated [`ClusterState`]. Only the leader's [`CoordinatorNode`]
/// answers daemons and proposes commands; the Raft protocol itself is not
/// simulated, only what it looks like from outside: the group can lose its
/// majority for a while (an outage), and a frozen leader is replaced by an
/// election.
pub(crate) struct Coord {
    pub(crate) state: ClusterState,
    pub(crate) members: Vec<Member>,
    /// The member daemons and clients talk to.
    pub(crate) leader: usize,
    /// Whether a majority is reachable (false during an outage).
    pub(crate) up: bool,
    pub(crate) term: u64,
    /// The leader's tally of backfill reports (soft state: a new leader
    /// starts afresh).
    pub(crate) layout: tessera_coordinator::layout::LayoutTally,
}

/// One coordinator member process.
pub(crate) struct Member {
    pub(crate) node: CoordinatorNode,
    /// Paused: it handles nothing; what arrives for it waits in `held`.
    pub(crate) frozen: bool,
    pub(crate) held: Vec<Ev>,
    /// Its detector's timer came due while it was frozen.
    pub(crate) tick_missed: bool,
}

impl Coord {
    /// The leader's node.
    pub(crate) fn node(&mut self) -> &mut CoordinatorNode {
        &mut self.members[self.leader].node
    }
}

pub(crate) struct World {
    pub(crate) trace: bool,
    pub(crate) knobs: Knobs,
    pub(crate) rng: Rng,
    /// Draws lookups: a generator of its own, so that seeds without a
    /// global index run as they did before lookups existed.
    pub(crate) lookup_rng: Rng,
    /// Draws searches, likewise (`Knobs::searches`).
    pub(crate) search_rng: Rng,
    pub(crate) now: u64,
    pub(crate) seq: u64,
    pub(crate) queue: BTreeMap<(u64, u64), Ev>,
    pub(crate) daemons: BTreeMap<DaemonId, SimDaemon>,
    pub(crate) coord: Coord,
    pub(crate) clients: Vec<SimClient>,
    pub(crate) cuts: BTreeMap<DaemonId, Cut>,
    /// With [`Options::within_f`]: daemons faulted since the cluster was
    /// last whole (every region f + 1 replicas, no transfer, all healthy).
    pub(crate) faulted: BTreeSet<DaemonId>,
    pub(crate) within_f: bool,
    /// [`crate::Options::losses`].
    pub(crate) losses: bool,
    /// [`crate::Options::power_loss`].
    pub(crate) power_loss: bool,
    /// Draws power losses: a generator of its own, so that a nemesis turn
    /// without one chooses what it did before power losses existed.
    pub(crate) power_rng: Rng,
    /// Per key, the operations and their outcomes.
    pub(crate) history: BTreeMap<i64, Vec<Event>>,
    pub(crate) next_msg_id: u64,
    pub(crate) phase2: bool,
    pub(crate) finals_started: bool,
    /// The final reads issued: key and index in its history.
    pub(crate) finals: Vec<(i64, usize)>,
    /// Operations that ended without a definite outcome (refused as too
    /// old to tell whether they took effect): key and index in its history.
    pub(crate) abandoned: BTreeSet<(i64, usize)>,
    pub(crate) done: bool,
    pub(crate) report: Report,
    pub(crate) space: SpaceId,
    /// In a replex seed, the updates (key bytes, version) seen relocating
    /// an object inside a replex or hybrid (`crate::replex`).
    pub(crate) relocations: BTreeSet<(Vec<u8>, u64)>,
    /// Daemons lost for good (`crate::loss`): gone from `daemons`, process
    /// and disk.
    pub(crate) lost: BTreeSet<DaemonId>,
    /// Draws losses: a generator of its own, so that a nemesis turn without
    /// a loss chooses what it did before losses existed.
    pub(crate) loss_rng: Rng,
    /// Fresh daemons the operator started, and those it is about to.
    pub(crate) spares: u64,
    /// Fresh daemons the operator started for the seed's relayout of a
    /// replex space, whose new parts found no legal daemon.
    pub(crate) layout_spares: u64,
    /// Coordinator ticks in a row a new replex region had no daemon to
    /// move to (see `operator_watch_layout`).
    pub(crate) layout_stuck_ticks: u64,
    pub(crate) replacing: u32,
}

impl SimDaemon {
    pub(crate) fn new(id: DaemonId) -> SimDaemon {
        SimDaemon {
            id,
            data: Arc::new(MemoryEngine::new()),
            up: true,
            frozen: false,
            held: Vec::new(),
            severed: BTreeSet::new(),
            incarnation: 0,
            node: None,
            disk: None,
            disk_fault: false,
            last_epoch: Epoch(0),
        }
    }
}

/// The leader's layout tally for a seed with these knobs. With a global
/// index, indexlets of three entries split, and those whose replicas serve
/// a lookup page a second: the few keys of a seed make the leader split
/// under the nemesis, and split again.
pub(crate) fn layout_tally(knobs: &Knobs) -> tessera_coordinator::layout::LayoutTally {
    let (entries, pages_per_s) = if knobs.global_index { (3, 1) } else { (0, 0) };
    tessera_coordinator::layout::LayoutTally::with_split_entries(entries)
        .with_split_load(pages_per_s)
}

/// The cluster as an operator sets it up: [`DAEMONS`] registered daemons
/// and the space the knobs describe.
pub(crate) fn found_cluster(
    knobs: &Knobs,
) -> (ClusterState, BTreeMap<DaemonId, SimDaemon>, SpaceId) {
    let mut state = ClusterState::default();
    let mut daemons = BTreeMap::new();
    for i in 0..DAEMONS {
        let id = match state.apply(Command::RegisterDaemon {
            id: None,
            addr: format!("d{i}"),
            metrics: None,
            installed: None,
        }) {
            CommandResult::Registered { id } => id,
            other => panic!("registration refused: {other:?}"),
        };
        daemons.insert(id, SimDaemon::new(id));
    }
    let space = match state.apply(Command::AddSpace {
        description: space_description(knobs),
    }) {
        CommandResult::SpaceAdded { id } => id,
        other => panic!("space refused: {other:?}"),
    };
    (state, daemons, space)
}

impl World {
    pub(crate) fn new(seed: u64, knobs: Knobs, rng: Rng) -> World {
        let (state, daemons, space) = found_cluster(&knobs);
        let layout = layout_tally(&knobs);
        let mut members: Vec<Member> = (0..COORD_MEMBERS)
            .map(|_| Member {
                node: CoordinatorNode::new(Duration::from_millis(FAILURE_TIMEOUT_MS))
                    .with_tombstone_grace(Duration::from_millis(knobs.tombstone_grace_ms))
                    .with_lost_timeout(knobs.lost_timeout_ms.map(Duration::from_millis)),
                frozen: false,
                held: Vec::new(),
                tick_missed: false,
            })
            .collect();
        members[0].node.lead(1);
        let clients = (0..knobs.clients)
            .map(|i| SimClient::new(100 + i as u64, knobs.ops_per_client))
            .collect();
        let report = Report {
            seed,
            knobs: format!("{knobs:?}"),
            replex: knobs.replex.is_some(),
            ..Report::default()
        };
        let mut world = World {
            trace: false,
            knobs,
            rng,
            lookup_rng: Rng::new(seed ^ 0x0100_C0B5),
            search_rng: Rng::new(seed ^ 0x5EA2_C4E5),
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            daemons,
            coord: Coord {
                state,
                members,
                leader: 0,
                up: true,
                term: 1,
                layout,
            },
            clients,
            cuts: BTreeMap::new(),
            faulted: BTreeSet::new(),
            within_f: false,
            losses: false,
            history: BTreeMap::new(),
            next_msg_id: 1,
            phase2: false,
            finals_started: false,
            finals: Vec::new(),
            abandoned: BTreeSet::new(),
            done: false,
            report,
            space,
            relocations: BTreeSet::new(),
            lost: BTreeSet::new(),
            loss_rng: Rng::new(seed ^ 0x10_57D0),
            power_rng: Rng::new(seed ^ 0x0FF_0FF),
            power_loss: false,
            spares: 0,
            layout_spares: 0,
            layout_stuck_ticks: 0,
            replacing: 0,
        };
        world.start();
        world
    }

    /// Time zero: every daemon starts from the first configuration, the
    /// clients, the detector and the nemesis begin.
    fn start(&mut self) {
        self.trace(|| format!("space: {}", space_description(&self.knobs)));
        let config = Arc::new(self.configuration());
        let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
        for id in ids {
            self.start_daemon(id, config.clone());
        }
        for i in 0..self.clients.len() {
            let at = self.rng.below(50);
            self.at(at, Ev::ClientWake(i));
        }
        self.at(DETECTOR_TICK_MS, Ev::CoordTick);
        self.at(700, Ev::Nemesis);
        if self.knobs.layout_change != crate::knobs::LayoutChange::None {
            let at = 300 + self.rng.below(PHASE1_MS / 2);
            self.at(at, Ev::Layout);
        }
    }

    pub(crate) fn configuration(&self) -> Configuration {
        self.coord.state.configuration(Vec::new())
    }

    pub(crate) fn at(&mut self, delay: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((self.now + delay, self.seq), ev);
    }

    pub(crate) fn run(&mut self) -> Result<(), Violation> {
        while let Some(((t, _), ev)) = self.queue.pop_first() {
            self.now = t;
            if !self.phase2 && self.now >= PHASE1_MS {
                self.heal_all()?;
            }
            if self.now > PHASE1_MS + SETTLE_MS_MAX {
                return Err(Violation::Unsettled {
                    settle_ms_max: SETTLE_MS_MAX,
                    why: self.unsettled(),
                });
            }
            self.handle(ev)?;
            if self.done {
                return Ok(());
            }
        }
        Err(Violation::QueueDry)
    }

    fn handle(&mut self, ev: Ev) -> Result<(), Violation> {
        match self.arrive(ev) {
            Some(ev) => self.dispatch(ev),
            None => Ok(()),
        }
    }

    /// Hands `ev` to whoever it is for.
    pub(crate) fn dispatch(&mut self, ev: Ev) -> Result<(), Violation> {
        match ev {
            Ev::Deliver { from, to, msg } => self.deliver(from, to, msg)?,
            Ev::DaemonTick(d, inc) => self.daemon_tick(d, inc),
            Ev::Heartbeat(d, inc) => self.heartbeat_timer(d, inc),
            Ev::Job(d, inc, job) => self.daemon_job(d, inc, job),
            Ev::PeerUnreachable(d, inc, peer) => self.peer_unreachable(d, inc, peer),
            Ev::CoordTick => {
                self.coord_tick();
                self.operator_watch();
                self.operator_watch_layout();
                if self.phase2 {
                    self.try_finish();
                }
                self.at(DETECTOR_TICK_MS, Ev::CoordTick);
            }
            Ev::ClientWake(c) => self.client_wake(c),
            Ev::Nemesis => {
                if !self.phase2 {
                    self.nemesis();
                    let next = 300 + self.rng.below(1_000);
                    self.at(next, Ev::Nemesis);
                }
            }
            Ev::Restart(d) => self.restart(d),
            Ev::Heal(d) => {
                self.cuts.remove(&d);
                self.trace(|| format!("heal {d}"));
            }
            Ev::CoordUp => self.coord_up(),
            Ev::Resume(process) => self.resume(process)?,
            Ev::Election(old) => self.election(old),
            Ev::Kill(d) => self.operator_kill(d),
            Ev::Replace => self.operator_replace(),
            Ev::Layout => {
                if !self.coord.up || self.coord.members[self.coord.leader].frozen {
                    // The coordinator is away: the operator tries again.
                    self.at(200, Ev::Layout);
                } else if let Some(command) = crate::knobs::layout_command(&self.knobs) {
                    self.trace(|| format!("layout change: {command:?}"));
                    let split = matches!(
                        command,
                        tessera_coordinator::state::Command::SplitGlobalIndex { .. }
                    );
                    let result = self.apply(command);
                    if split
                        && matches!(
                            &result,
                            tessera_coordinator::state::CommandResult::Failed {
                                status: tessera_protocol::AdminStatus::CoordFail,
                                ..
                            }
                        )
                    {
                        // The leader's own split of the index builds: one
                        // at a time, so the operator tries again later.
                        self.at(500, Ev::Layout);
                        return Ok(());
                    }
                    if split
                        && matches!(
                            &result,
                            tessera_coordinator::state::CommandResult::Failed { reason, .. }
                                if reason.contains("already cut at every value")
                        )
                    {
                        // While the operator waited for the leader's own
                        // splits, they cut the index at every value asked
                        // for: nothing is left to do, and refusing is right.
                        self.trace(|| "layout change overtaken by automatic splits".into());
                        return Ok(());
                    }
                    if self.report.faults.power_losses > 0
                        && matches!(
                            &result,
                            tessera_coordinator::state::CommandResult::Failed { reason, .. }
                                if reason.contains("no daemons are available")
                        )
                    {
                        // A power loss took every daemon; until they have
                        // registered again there is nowhere to place the
                        // new part: the operator tries again later.
                        self.at(500, Ev::Layout);
                        return Ok(());
                    }
                    self.report.faults.layout_changes += 1;
                    self.report.replex_relayout |= self.knobs.replex.is_some()
                        && matches!(
                            self.knobs.layout_change,
                            crate::knobs::LayoutChange::ToggleHybrid
                                | crate::knobs::LayoutChange::SwapReplex
                        );
                    assert!(
                        !matches!(
                            result,
                            tessera_coordinator::state::CommandResult::Failed { .. }
                        ),
                        "the seed's layout change was refused: {result:?}"
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A world whose nemesis injects nothing and whose network neither
    /// loses nor duplicates: the faults a test schedules are the only ones.
    pub(crate) fn quiet_world(seed: u64) -> World {
        World::new(seed, quiet_knobs(), Rng::new(seed))
    }

    /// [`quiet_world`] on a replex space, with eight keys (two in each key
    /// region) and the f the space tolerates.
    pub(crate) fn quiet_replex_world(seed: u64, replex: crate::knobs::ReplexSpace) -> World {
        let knobs = Knobs {
            replex: Some(replex),
            f: replex.copies() - 1,
            subspaces: 0,
            keys: 8,
            ..quiet_knobs()
        };
        World::new(seed, knobs, Rng::new(seed))
    }

    pub(crate) fn quiet_knobs() -> Knobs {
        Knobs {
            drop_per_mille: 0,
            dup_per_mille: 0,
            delay_max_ms: 5,
            f: 1,
            subspaces: 1,
            crashes: false,
            partitions: false,
            coordinator_outages: false,
            disk_faults: false,
            clients: 2,
            ops_per_client: 30,
            keys: 3,
            pauses: false,
            coordinator_pauses: false,
            one_way_partitions: false,
            tombstone_grace_ms: 60_000,
            collect_ticks: 8,
            layout_change: crate::knobs::LayoutChange::None,
            global_index: false,
            searches: false,
            replex: None,
            losses: false,
            lost_timeout_ms: None,
        }
    }

    impl World {
        /// Handles every event due by `t` (which must lie in phase 1).
        pub(crate) fn run_until(&mut self, t: u64) {
            assert!(t < PHASE1_MS, "run_until is for phase 1");
            while let Some(entry) = self.queue.first_entry() {
                if entry.key().0 > t {
                    break;
                }
                let ((at, _), ev) = entry.remove_entry();
                self.now = at;
                self.handle(ev).expect("no violation");
            }
            self.now = t;
        }

        /// The coordinator's view of daemon `d`.
        pub(crate) fn daemon_state(&self, d: DaemonId) -> Option<tessera_types::DaemonState> {
            self.coord.state.daemons.get(&d).map(|info| info.state)
        }
    }
}
