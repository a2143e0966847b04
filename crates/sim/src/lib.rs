//! `tessera-sim`: a deterministic simulation of a Tessera cluster.
//!
//! Everything runs on one thread in simulated time: five daemons (the real
//! [`ReplicaCore`] over an in-memory engine, the real state-transfer
//! bookkeeping, a lease from heartbeats), the coordinator (the real
//! [`ClusterState`] and [`FailureDetector`]; its Raft group is modelled as
//! one state machine that can become unavailable for a while, which is what
//! a leader crash or a lost majority looks like from outside), and clients
//! that retry with the same request id. The network delays, drops,
//! duplicates and reorders messages and can cut a daemon off.
//!
//! A seed fixes everything: the knobs (loss, duplication, delay, which
//! faults) and every random choice. Phase 1 runs the workload while a
//! nemesis injects faults, never taking the last healthy replica of any
//! region. Phase 2 heals everything and requires every operation to finish
//! and the cluster to settle. Then the checkers run: per-key
//! linearizability of the history (which covers acknowledged writes lost),
//! every replica of every region equal, every object in exactly the regions
//! its attributes map to, and epochs only growing at every daemon.

pub mod check;
pub mod disk;

use check::{Event, KvOp, KvResult};
use disk::{Disk, Fault};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tessera_coordinator::node::CoordinatorNode;
use tessera_coordinator::state::{ClusterState, Command, CommandResult};
use tessera_daemon::chain::key_region;
use tessera_daemon::core::ReplyTo;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{
    DaemonNode, Job, NodeOptions, Output, HEARTBEAT_INTERVAL, TICK_INTERVAL,
};
use tessera_daemon::record::Record;
use tessera_protocol::{
    Action, ClientRef, CoordRequest, CoordResponse, DaemonRequest, DaemonResponse, Message,
    Mutation, NumOp, Status, TransferMsg, UpdateFlags, UpdateRequest,
};
use tessera_storage::{Engine, MemoryEngine};
use tessera_types::{
    Check, Configuration, DaemonId, DaemonState, Epoch, Object, PredOp, RegionId, SpaceId, Value,
};

const DAEMONS: u64 = 5;
const TICK_MS: u64 = TICK_INTERVAL.as_millis() as u64;
const HEARTBEAT_MS: u64 = HEARTBEAT_INTERVAL.as_millis() as u64;
const FAILURE_TIMEOUT_MS: u64 = 2_000;
const DETECTOR_TICK_MS: u64 = 200;
const CLIENT_TIMEOUT_MS: u64 = 1_500;
const PHASE1_MS: u64 = 20_000;
const SETTLE_MS_MAX: u64 = 180_000;
const TRANSFER_BATCH: usize = 8;
/// How long a disk-bound job (a transfer's scan, a digest, a search page)
/// waits before it runs, at most.
const JOB_DELAY_MS_MAX: u64 = 5;

/// A small deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// What a seed chose.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Messages lost, per thousand.
    pub drop_per_mille: u64,
    /// Messages delivered twice, per thousand.
    pub dup_per_mille: u64,
    /// Largest one-way delay; delays are uniform from 1 ms.
    pub delay_max_ms: u64,
    /// `tolerate f failures` of the space.
    pub f: usize,
    /// Non-key subspaces (on `a`, then `b`).
    pub subspaces: usize,
    /// Whether the nemesis crashes daemons, cuts them off, and takes the
    /// coordinator away.
    pub crashes: bool,
    pub partitions: bool,
    pub coordinator_outages: bool,
    /// Whether the nemesis makes daemons' disks fill up or fail.
    pub disk_faults: bool,
    pub clients: usize,
    pub ops_per_client: usize,
    pub keys: i64,
}

impl Knobs {
    pub fn from_seed(rng: &mut Rng) -> Knobs {
        Knobs {
            drop_per_mille: rng.pick(&[0, 0, 5, 30, 100]),
            dup_per_mille: rng.pick(&[0, 10, 50]),
            delay_max_ms: rng.pick(&[2, 10, 40, 150]),
            f: rng.pick(&[1, 1, 2]),
            subspaces: rng.pick(&[1, 2]),
            crashes: rng.chance(700),
            partitions: rng.chance(600),
            coordinator_outages: rng.chance(400),
            disk_faults: rng.chance(400),
            clients: rng.pick(&[2, 3, 4]),
            ops_per_client: rng.pick(&[10, 20, 30]),
            keys: rng.pick(&[3, 5, 8]),
        }
    }
}

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
    pub crashes: u32,
    pub partitions: u32,
    pub coordinator_outages: u32,
    pub disk_faults: u32,
    pub epochs: u64,
    pub transfers: u64,
}

/// A failed run: what went wrong, and how to replay it.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub knobs: String,
    pub at_ms: u64,
    pub what: String,
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
    pub crashes: u32,
    pub partitions: u32,
    pub coordinator_outages: u32,
    pub disk_faults: u32,
    pub transfers: u64,
    pub failed: Vec<u64>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} seeds: {:.0} simulated seconds, {} operations, {} daemon crashes, {} partitions, \
             {} coordinator outages, {} disk faults, {} state transfers; {} failed {:?}",
            self.seeds,
            self.sim_ms as f64 / 1000.0,
            self.operations,
            self.crashes,
            self.partitions,
            self.coordinator_outages,
            self.disk_faults,
            self.transfers,
            self.failed.len(),
            self.failed
        )
    }
}

/// Runs `count` seeds from `first` with `options`, calling `on_failure`
/// for each failure.
pub fn run_many(
    first: u64,
    count: u64,
    options: Options,
    mut on_failure: impl FnMut(&Failure),
) -> Summary {
    let mut summary = Summary {
        seeds: count,
        ..Summary::default()
    };
    for seed in first..first + count {
        match run_opts(seed, options) {
            Ok(r) => {
                summary.sim_ms += r.sim_ms;
                summary.operations += r.operations;
                summary.crashes += r.crashes;
                summary.partitions += r.partitions;
                summary.coordinator_outages += r.coordinator_outages;
                summary.disk_faults += r.disk_faults;
                summary.transfers += r.transfers;
            }
            Err(f) => {
                on_failure(&f);
                summary.failed.push(seed);
            }
        }
    }
    summary
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Coord,
    Daemon(DaemonId),
    Client(usize),
}

#[derive(Clone, Debug)]
enum Msg {
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
enum Ev {
    Deliver {
        from: Node,
        to: Node,
        msg: Msg,
    },
    DaemonTick(DaemonId, u64),
    Heartbeat(DaemonId, u64),
    /// A job a daemon's node handed out, run a little later.
    Job(DaemonId, u64, Job),
    CoordTick,
    ClientWake(usize),
    Nemesis,
    Restart(DaemonId),
    Heal(DaemonId),
    CoordUp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// No message to or from anyone.
    Full,
    /// Only the coordinator is unreachable (the daemon still talks to
    /// peers and clients: its lease must stop it serving).
    Coordinator,
}

struct SimDaemon {
    id: DaemonId,
    /// The data directory: survives crashes.
    data: Arc<MemoryEngine>,
    up: bool,
    incarnation: u64,
    /// The running process's node, once registered; and its disk, which
    /// the nemesis can make fail.
    node: Option<DaemonNode>,
    disk: Option<Arc<Disk>>,
    /// A disk fault was injected into this incarnation.
    disk_fault: bool,
    last_epoch: Epoch,
}

struct Coord {
    state: ClusterState,
    node: CoordinatorNode,
    up: bool,
    term: u64,
}

struct Current {
    key: i64,
    op: KvOp,
    request_no: u64,
    event: usize,
    msg_id: u64,
    deadline: u64,
}

struct SimClient {
    id: u64,
    config: Option<Arc<Configuration>>,
    ops_left: usize,
    request_no: u64,
    current: Option<Current>,
    /// Final reads: keys still to read after everything settled.
    final_reads: Vec<i64>,
}

struct World {
    trace: bool,
    knobs: Knobs,
    rng: Rng,
    now: u64,
    seq: u64,
    queue: BTreeMap<(u64, u64), Ev>,
    daemons: BTreeMap<DaemonId, SimDaemon>,
    coord: Coord,
    clients: Vec<SimClient>,
    cuts: BTreeMap<DaemonId, Cut>,
    /// With [`Options::within_f`]: daemons faulted since the cluster was
    /// last whole (every region f + 1 replicas, no transfer, all healthy).
    faulted: BTreeSet<DaemonId>,
    within_f: bool,
    /// Per key, the operations and their outcomes.
    history: BTreeMap<i64, Vec<Event>>,
    next_msg_id: u64,
    phase2: bool,
    finals_started: bool,
    done: bool,
    report: Report,
    space: SpaceId,
}

fn space_description(knobs: &Knobs) -> String {
    let subspaces = ["subspace a", "subspace b"][..knobs.subspaces].join(" ");
    let failures = if knobs.f == 1 { "failure" } else { "failures" };
    format!(
        "space kv key int k attributes int a, int b {subspaces} create 4 partitions tolerate {} {failures}",
        knobs.f
    )
}

/// Runs one seed to completion (tracing to stderr when the environment
/// sets `TESSERA_SIM_TRACE`).
pub fn run(seed: u64) -> Result<Report, Failure> {
    let trace = std::env::var_os("TESSERA_SIM_TRACE").is_some();
    run_opts(
        seed,
        Options {
            trace,
            within_f: false,
        },
    )
}

/// How to run a seed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Trace every fault, epoch, chain message and client operation to
    /// stderr.
    pub trace: bool,
    /// Keep the nemesis within the guarantee: at most f daemons faulted
    /// (crashed or cut off) between two moments when the cluster is whole
    /// again. Without it the nemesis only spares each region's last
    /// healthy replica, which can take more than f replicas of a region
    /// before re-replication ends.
    pub within_f: bool,
}

/// Runs one seed with `options`.
pub fn run_opts(seed: u64, options: Options) -> Result<Report, Failure> {
    let mut rng = Rng::new(seed);
    let knobs = Knobs::from_seed(&mut rng);
    let mut world = World::new(seed, knobs, rng);
    world.trace = options.trace;
    world.within_f = options.within_f;
    let outcome = world.run();
    let failure = |what: String, w: &World| Failure {
        seed,
        knobs: w.report.knobs.clone(),
        at_ms: w.now,
        what,
    };
    match outcome {
        Ok(()) => match world.check() {
            Ok(()) => {
                world.report.sim_ms = world.now;
                world.report.epochs = world.coord.state.epoch.0;
                world.report.transfers = world.coord.state.transfer_id_next - 1;
                Ok(world.report)
            }
            Err(what) => Err(failure(what, &world)),
        },
        Err(what) => Err(failure(what, &world)),
    }
}

impl World {
    fn new(seed: u64, knobs: Knobs, rng: Rng) -> World {
        let mut state = ClusterState::default();
        let mut daemons = BTreeMap::new();
        for i in 0..DAEMONS {
            let id = match state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("d{i}"),
            }) {
                CommandResult::Registered { id } => id,
                other => panic!("registration refused: {other:?}"),
            };
            daemons.insert(
                id,
                SimDaemon {
                    id,
                    data: Arc::new(MemoryEngine::new()),
                    up: true,
                    incarnation: 0,
                    node: None,
                    disk: None,
                    disk_fault: false,
                    last_epoch: Epoch(0),
                },
            );
        }
        let space = match state.apply(Command::AddSpace {
            description: space_description(&knobs),
        }) {
            CommandResult::SpaceAdded { id } => id,
            other => panic!("space refused: {other:?}"),
        };
        let mut node = CoordinatorNode::new(Duration::from_millis(FAILURE_TIMEOUT_MS));
        node.lead(1);
        let clients = (0..knobs.clients)
            .map(|i| SimClient {
                id: 100 + i as u64,
                config: None,
                ops_left: knobs.ops_per_client,
                request_no: 0,
                current: None,
                final_reads: Vec::new(),
            })
            .collect();
        let report = Report {
            seed,
            knobs: format!("{knobs:?}"),
            ..Report::default()
        };
        let mut world = World {
            trace: false,
            knobs,
            rng,
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            daemons,
            coord: Coord {
                state,
                node,
                up: true,
                term: 1,
            },
            clients,
            cuts: BTreeMap::new(),
            faulted: BTreeSet::new(),
            within_f: false,
            history: BTreeMap::new(),
            next_msg_id: 1,
            phase2: false,
            finals_started: false,
            done: false,
            report,
            space,
        };
        let config = Arc::new(world.configuration());
        let ids: Vec<DaemonId> = world.daemons.keys().copied().collect();
        for id in ids {
            world.start_daemon(id, config.clone());
        }
        for i in 0..world.clients.len() {
            let at = world.rng.below(50);
            world.at(at, Ev::ClientWake(i));
        }
        world.at(DETECTOR_TICK_MS, Ev::CoordTick);
        world.at(700, Ev::Nemesis);
        world
    }

    fn trace(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("{:>7} {}", self.now, what());
        }
    }

    fn configuration(&self) -> Configuration {
        self.coord.state.configuration(Vec::new())
    }

    fn at(&mut self, delay: u64, ev: Ev) {
        self.seq += 1;
        self.queue.insert((self.now + delay, self.seq), ev);
    }

    fn run(&mut self) -> Result<(), String> {
        while let Some(((t, _), ev)) = self.queue.pop_first() {
            self.now = t;
            if !self.phase2 && self.now >= PHASE1_MS {
                self.heal_all();
            }
            if self.now > PHASE1_MS + SETTLE_MS_MAX {
                return Err(format!(
                    "the cluster did not settle within {} ms of healing: {}",
                    SETTLE_MS_MAX,
                    self.unsettled()
                ));
            }
            self.handle(ev)?;
            if self.done {
                return Ok(());
            }
        }
        Err("the event queue ran dry".into())
    }

    fn handle(&mut self, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Deliver { from, to, msg } => {
                if self.blocked(from, to) {
                    self.report.dropped += 1;
                    return Ok(());
                }
                match to {
                    Node::Coord => self.coord_receive(from, msg),
                    Node::Daemon(d) => self.daemon_receive(d, from, msg),
                    Node::Client(c) => self.client_receive(c, msg)?,
                }
            }
            Ev::DaemonTick(d, inc) => {
                if !self.incarnation_up(d, inc) {
                    return Ok(());
                }
                self.with_node(d, |node, out| {
                    node.on_tick(out);
                    // The shell's interval fsync: a full disk shows here
                    // even when nothing is written.
                    node.sync(out);
                });
                self.at(TICK_MS, Ev::DaemonTick(d, inc));
            }
            Ev::Heartbeat(d, inc) => {
                if !self.incarnation_up(d, inc) {
                    return Ok(());
                }
                let request = match &self.daemons[&d].node {
                    Some(node) => node.heartbeat(),
                    // Restarted, not registered yet: ask again.
                    None => CoordRequest::RegisterDaemon {
                        id: Some(d),
                        addr: format!("d{}", d.0),
                    },
                };
                let sent = self.now;
                self.send(Node::Daemon(d), Node::Coord, Msg::Coord { request, sent });
                self.at(HEARTBEAT_MS, Ev::Heartbeat(d, inc));
            }
            Ev::Job(d, inc, job) => {
                if self.incarnation_up(d, inc) {
                    self.with_node(d, |node, out| node.run_job(job, out));
                }
            }
            Ev::CoordTick => {
                self.coord_tick();
                if self.phase2 {
                    self.try_finish()?;
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
        }
        Ok(())
    }

    // ------------------------------------------------------------ network

    fn blocked(&self, from: Node, to: Node) -> bool {
        let cut = |n: Node, other: Node| match n {
            Node::Daemon(d) => match self.cuts.get(&d) {
                Some(Cut::Full) => true,
                Some(Cut::Coordinator) => other == Node::Coord,
                None => false,
            },
            _ => false,
        };
        let coord_down = (from == Node::Coord || to == Node::Coord) && !self.coord.up;
        coord_down || cut(from, to) || cut(to, from)
    }

    fn send(&mut self, from: Node, to: Node, msg: Msg) {
        self.report.messages += 1;
        if self.blocked(from, to) || self.rng.chance(self.knobs.drop_per_mille) {
            self.report.dropped += 1;
            return;
        }
        let delay = 1 + self.rng.below(self.knobs.delay_max_ms);
        if self.rng.chance(self.knobs.dup_per_mille) {
            let later = delay + 1 + self.rng.below(self.knobs.delay_max_ms * 3);
            self.at(
                later,
                Ev::Deliver {
                    from,
                    to,
                    msg: msg.clone(),
                },
            );
        }
        self.at(delay, Ev::Deliver { from, to, msg });
    }

    // ------------------------------------------------------------ daemons

    fn incarnation_up(&self, d: DaemonId, inc: u64) -> bool {
        self.daemons
            .get(&d)
            .is_some_and(|daemon| daemon.up && daemon.incarnation == inc)
    }

    fn daemon_time(&self) -> Duration {
        Duration::from_millis(self.now)
    }

    /// Calls into daemon `d`'s node, then carries out what it output, in
    /// order: the simulator's counterpart of the shell's `execute`.
    fn with_node(&mut self, d: DaemonId, f: impl FnOnce(&DaemonNode, &mut dyn FnMut(Output))) {
        let Some(node) = self.daemons.get(&d).and_then(|x| x.node.as_ref()) else {
            return;
        };
        let mut outputs = Vec::new();
        f(node, &mut |o| outputs.push(o));
        for output in outputs {
            self.execute(d, output);
        }
    }

    fn execute(&mut self, d: DaemonId, output: Output) {
        match output {
            Output::Send { to, msg } => {
                if self.trace {
                    if let Message::Transfer(m) = &msg {
                        self.trace_transfer(d, m);
                    }
                }
                self.send(Node::Daemon(d), Node::Daemon(to), Msg::Peer(msg))
            }
            Output::Reply { to, response } => self.send(
                Node::Daemon(d),
                Node::Client(to.conn as usize),
                Msg::Response {
                    id: to.id,
                    resp: response,
                },
            ),
            Output::Job(job) => {
                let inc = self.daemons[&d].incarnation;
                let delay = self.rng.below(JOB_DELAY_MS_MAX + 1);
                self.at(delay, Ev::Job(d, inc, job));
            }
            Output::Coord(request) => {
                let sent = self.now;
                self.send(Node::Daemon(d), Node::Coord, Msg::Coord { request, sent });
            }
            Output::Stop(why) => {
                self.trace(|| format!("{d} stops: {why}"));
                self.stop(d);
                // An operator (or a supervisor) starts it again once the
                // disk is repaired.
                let down = 500 + self.rng.below(3_000);
                self.at(down, Ev::Restart(d));
            }
        }
    }

    fn trace_transfer(&self, d: DaemonId, m: &TransferMsg) {
        match m {
            TransferMsg::Entries {
                transfer,
                attempt,
                seq,
                entries,
                ..
            } => eprintln!(
                "{:>7} {d} transfer {transfer}.{attempt} #{seq}: {:?}",
                self.now,
                entries
                    .iter()
                    .map(|e| (e.key.last().copied(), e.version.0))
                    .collect::<Vec<_>>()
            ),
            other => eprintln!("{:>7} {d} {other:?}", self.now),
        }
    }

    /// A registered process starts its node: the shell's `run` after
    /// registration and the first configuration.
    fn start_daemon(&mut self, id: DaemonId, config: Arc<Configuration>) {
        let daemon = self.daemons.get_mut(&id).expect("known daemon");
        let disk = Arc::new(Disk::open(daemon.data.clone()));
        let index = IndexedEngine::open(disk.clone(), &config).expect("a healthy disk opens");
        let options = NodeOptions {
            addr: format!("d{}", id.0),
            transfer_batch: TRANSFER_BATCH,
        };
        assert!(
            config.epoch >= daemon.last_epoch,
            "daemon {id} started at epoch {} after {}",
            config.epoch,
            daemon.last_epoch
        );
        daemon.last_epoch = config.epoch;
        let mut outputs = Vec::new();
        let node = DaemonNode::new(id, options, config, Arc::new(index), &mut |o| {
            outputs.push(o)
        });
        daemon.node = Some(node);
        daemon.disk = Some(disk);
        let inc = daemon.incarnation;
        for output in outputs {
            self.execute(id, output);
        }
        let (t, h) = (self.rng.below(TICK_MS), self.rng.below(HEARTBEAT_MS));
        self.at(t, Ev::DaemonTick(id, inc));
        self.at(h, Ev::Heartbeat(id, inc));
    }

    fn install(&mut self, d: DaemonId, config: Arc<Configuration>) {
        let epoch = config.epoch;
        let mut installed = false;
        self.with_node(d, |node, out| installed = node.on_config(config, out));
        if installed {
            let daemon = self.daemons.get_mut(&d).expect("known daemon");
            assert!(
                epoch > daemon.last_epoch,
                "daemon {d} installed epoch {epoch} after {}",
                daemon.last_epoch
            );
            daemon.last_epoch = epoch;
        }
    }

    fn daemon_receive(&mut self, d: DaemonId, from: Node, msg: Msg) {
        if !self.daemons[&d].up {
            return;
        }
        let now = self.daemon_time();
        match msg {
            Msg::Peer(msg) => self.with_node(d, |node, out| node.on_peer(msg, out)),
            Msg::Config(config) => self.install(d, config),
            Msg::CoordAnswer {
                request,
                sent,
                response,
            } => {
                let sent = Duration::from_millis(sent);
                self.with_node(d, |node, out| {
                    node.on_coord_answer(&request, sent, response, now, out)
                });
            }
            Msg::Registered {
                request,
                sent,
                id,
                config,
            } => {
                if self.daemons[&d].node.is_none() {
                    if id == d {
                        self.start_daemon(d, config);
                    }
                    return;
                }
                let sent = Duration::from_millis(sent);
                let response = CoordResponse::Registered { id };
                self.with_node(d, |node, out| {
                    node.on_coord_answer(&request, sent, response, now, out)
                });
                self.install(d, config);
            }
            Msg::Request { id, epoch, req } => {
                let Node::Client(c) = from else { return };
                let to = ReplyTo { conn: c as u64, id };
                self.with_node(d, |node, out| node.on_request(to, epoch, req, now, out));
            }
            _ => {}
        }
    }

    /// The process ends (a crash, or it stopped itself): its memory is
    /// gone, its data stays.
    fn stop(&mut self, d: DaemonId) {
        let daemon = self.daemons.get_mut(&d).expect("known daemon");
        daemon.up = false;
        daemon.node = None;
        daemon.disk = None;
        daemon.incarnation += 1;
    }

    fn crash(&mut self, d: DaemonId) {
        self.stop(d);
        self.report.crashes += 1;
        self.trace(|| format!("crash {d}"));
    }

    fn restart(&mut self, d: DaemonId) {
        let daemon = self.daemons.get_mut(&d).expect("known daemon");
        if daemon.up {
            return;
        }
        daemon.up = true;
        daemon.disk_fault = false;
        let inc = daemon.incarnation;
        self.trace(|| format!("restart {d}"));
        // Its disk survived (the engine); it registers again before serving.
        let request = CoordRequest::RegisterDaemon {
            id: Some(d),
            addr: format!("d{}", d.0),
        };
        let sent = self.now;
        self.send(Node::Daemon(d), Node::Coord, Msg::Coord { request, sent });
        // Registration may be lost: the heartbeat timer retries it.
        self.at(HEARTBEAT_MS, Ev::Heartbeat(d, inc));
    }

    // ------------------------------------------------------------ coordinator

    fn apply(&mut self, command: Command) -> CommandResult {
        let before = self.coord.state.epoch;
        let result = self.coord.state.apply(command);
        if let Err(e) = self.coord.state.check_invariants() {
            panic!("coordinator invariant broken: {e}");
        }
        if self.coord.state.epoch != before {
            let config = Arc::new(self.configuration());
            self.trace(|| {
                let space = &config.spaces[0];
                let chains: Vec<String> = space.subspaces[0]
                    .regions
                    .iter()
                    .map(|r| format!("{}:{:?}", r.id, r.chain))
                    .collect();
                let others: Vec<String> = space.subspaces[1..]
                    .iter()
                    .flat_map(|l| l.regions.iter())
                    .map(|r| format!("{}:{:?}", r.id, r.chain))
                    .collect();
                format!(
                    "epoch {} transfers {:?} key regions {} others {}",
                    config.epoch,
                    config.transfers,
                    chains.join(" "),
                    others.join(" ")
                )
            });
            let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
            for id in ids {
                self.send(Node::Coord, Node::Daemon(id), Msg::Config(config.clone()));
            }
        }
        result
    }

    fn coordinator_time(&self) -> Duration {
        Duration::from_millis(self.now)
    }

    fn coord_receive(&mut self, from: Node, msg: Msg) {
        let now = self.coordinator_time();
        match (from, msg) {
            (Node::Daemon(_), Msg::Coord { request, sent }) => {
                let response = match &request {
                    CoordRequest::Heartbeat { id, epoch } => {
                        let answer = self
                            .coord
                            .node
                            .heartbeat(&self.coord.state, *id, *epoch, now);
                        if *epoch < self.coord.state.epoch {
                            // What the daemon's configuration long-poll
                            // would bring it.
                            let config = Arc::new(self.configuration());
                            self.send(Node::Coord, from, Msg::Config(config));
                        }
                        CoordResponse::Heartbeat(answer)
                    }
                    CoordRequest::RegisterDaemon { id, addr } => {
                        let result = self.apply(Command::RegisterDaemon {
                            id: *id,
                            addr: addr.clone(),
                        });
                        let CommandResult::Registered { id } = result else {
                            return;
                        };
                        let config = Arc::new(self.configuration());
                        let msg = Msg::Registered {
                            request,
                            sent,
                            id,
                            config,
                        };
                        self.send(Node::Coord, from, msg);
                        return;
                    }
                    CoordRequest::TransferComplete { transfer } => {
                        self.apply(Command::TransferComplete {
                            transfer: *transfer,
                        });
                        CoordResponse::Done
                    }
                    CoordRequest::Leave { id, reason } => {
                        let command = self.coord.node.leave(*id, *reason);
                        self.apply(command);
                        CoordResponse::Done
                    }
                    _ => return,
                };
                let msg = Msg::CoordAnswer {
                    request,
                    sent,
                    response,
                };
                self.send(Node::Coord, from, msg);
            }
            (Node::Client(_), Msg::ConfigRequest) => {
                let config = Arc::new(self.configuration());
                self.send(Node::Coord, from, Msg::Config(config));
            }
            _ => {}
        }
    }

    fn coord_tick(&mut self) {
        if !self.coord.up {
            return;
        }
        let now = self.coordinator_time();
        let commands = self.coord.node.tick(&self.coord.state, now);
        for command in commands {
            self.apply(command);
        }
    }

    fn coord_up(&mut self) {
        if self.coord.up {
            return;
        }
        self.coord.up = true;
        // A new leader: its detector starts afresh, giving every daemon a
        // full timeout of grace.
        self.coord.term += 1;
        self.coord.node.lead(self.coord.term);
    }

    // ------------------------------------------------------------ nemesis

    /// Daemons that are up, registered and reachable.
    fn healthy(&self, d: DaemonId) -> bool {
        let daemon = &self.daemons[&d];
        daemon.up && daemon.node.is_some() && !daemon.disk_fault && !self.cuts.contains_key(&d)
    }

    /// Within f: forgets past faults once the cluster is whole again
    /// (every daemon healthy, every region f + 1 replicas, no transfer).
    fn forget_faults_when_whole(&mut self) {
        let whole = self.daemons.keys().all(|&m| self.healthy(m))
            && self.coord.state.transfers.is_empty()
            && self.coord.state.spaces.iter().all(|space| {
                space
                    .subspaces
                    .iter()
                    .all(|layout| layout.regions.iter().all(|r| r.chain.len() > self.knobs.f))
            });
        if whole {
            self.faulted.clear();
        }
    }

    /// Whether taking `d` away leaves every region a healthy replica (and,
    /// within f, whether fewer than f daemons are faulted).
    fn may_fail(&self, d: DaemonId) -> bool {
        if !self.healthy(d) || (self.within_f && self.faulted.len() >= self.knobs.f) {
            return false;
        }
        self.coord.state.spaces.iter().all(|space| {
            space.subspaces.iter().all(|layout| {
                layout.regions.iter().all(|r| {
                    r.chain
                        .iter()
                        .filter(|&&m| m != d && self.healthy(m))
                        .count()
                        >= 1
                })
            })
        })
    }

    fn nemesis(&mut self) {
        if self.within_f {
            self.forget_faults_when_whole();
        }
        let roll = self.rng.below(10);
        let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
        let d = ids[self.rng.below(ids.len() as u64) as usize];
        match roll {
            0..=2 if self.knobs.crashes && self.may_fail(d) => {
                self.faulted.insert(d);
                self.crash(d);
                let down = 200 + self.rng.below(4_000);
                self.at(down, Ev::Restart(d));
            }
            3..=4 if self.knobs.partitions && self.may_fail(d) => {
                self.faulted.insert(d);
                let cut = if self.rng.chance(500) {
                    Cut::Full
                } else {
                    Cut::Coordinator
                };
                self.cuts.insert(d, cut);
                self.trace(|| format!("cut {d} {cut:?}"));
                self.report.partitions += 1;
                let length = 200 + self.rng.below(5_000);
                self.at(length, Ev::Heal(d));
            }
            6 if self.knobs.disk_faults && self.may_fail(d) => {
                // The daemon finds out at its next write or sync, leaves
                // every chain and stops; it is restarted with the disk
                // repaired.
                self.faulted.insert(d);
                let fault = if self.rng.chance(500) {
                    Fault::Full
                } else {
                    Fault::Broken
                };
                let daemon = self.daemons.get_mut(&d).expect("known daemon");
                daemon.disk_fault = true;
                if let Some(disk) = &daemon.disk {
                    disk.fail(fault);
                }
                self.trace(|| format!("disk of {d}: {fault:?}"));
                self.report.disk_faults += 1;
            }
            5 if self.knobs.coordinator_outages && self.coord.up => {
                self.coord.up = false;
                self.report.coordinator_outages += 1;
                let length = 300 + self.rng.below(3_000);
                self.at(length, Ev::CoordUp);
            }
            _ => {}
        }
    }

    fn heal_all(&mut self) {
        self.phase2 = true;
        self.cuts.clear();
        self.coord_up();
        let down: Vec<DaemonId> = self
            .daemons
            .values()
            .filter(|d| !d.up)
            .map(|d| d.id)
            .collect();
        for d in down {
            self.restart(d);
        }
    }

    // ------------------------------------------------------------ clients

    fn client_wake(&mut self, c: usize) {
        let client = &self.clients[c];
        match &client.current {
            Some(cur) if self.now >= cur.deadline => {
                // No answer in time: fetch the configuration, send again
                // with the same request id.
                self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
                self.send_current(c);
            }
            Some(_) => {}
            None => self.start_next(c),
        }
    }

    fn start_next(&mut self, c: usize) {
        let keys = self.knobs.keys;
        let (key, op) = if self.phase2 {
            if !self.finals_started {
                return;
            }
            let Some(key) = self.clients[c].final_reads.pop() else {
                return;
            };
            (key, KvOp::Get)
        } else {
            if self.clients[c].ops_left == 0 {
                return;
            }
            self.clients[c].ops_left -= 1;
            let key = self.rng.below(keys as u64) as i64;
            let v = |rng: &mut Rng| rng.below(4) as i64;
            let op = match self.rng.below(10) {
                0..=2 => KvOp::Put {
                    a: v(&mut self.rng),
                    b: v(&mut self.rng),
                },
                3 => KvOp::CondPut {
                    a_is: v(&mut self.rng),
                    b: v(&mut self.rng),
                },
                4..=5 => KvOp::Add {
                    n: 1 + v(&mut self.rng),
                },
                6 => KvOp::Del,
                _ => KvOp::Get,
            };
            (key, op)
        };
        let events = self.history.entry(key).or_default();
        events.push(Event {
            op,
            invoke: self.now,
            ret: None,
        });
        let event = events.len() - 1;
        let client = &mut self.clients[c];
        client.request_no += 1;
        client.current = Some(Current {
            key,
            op,
            request_no: client.request_no,
            event,
            msg_id: 0,
            deadline: 0,
        });
        self.report.operations += 1;
        self.send_current(c);
    }

    fn send_current(&mut self, c: usize) {
        let msg_id = self.next_msg_id;
        self.next_msg_id += 1;
        let now = self.now;
        let space = self.space;
        let client = &mut self.clients[c];
        let Some(cur) = client.current.as_mut() else {
            return;
        };
        cur.msg_id = msg_id;
        cur.deadline = now + CLIENT_TIMEOUT_MS;
        let (key, op, request_no) = (cur.key, cur.op, cur.request_no);
        let client_id = client.id;
        let target = client.config.as_ref().and_then(|config| {
            let space = config.space_by_id(space)?;
            let leader = *key_region(space, &Value::Int(key))?.chain.first()?;
            Some((leader, config.epoch))
        });
        self.at(CLIENT_TIMEOUT_MS, Ev::ClientWake(c));
        let Some((leader, epoch)) = target else {
            self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
            return;
        };
        self.trace(|| format!("client {c} key {key} {op:?} #{request_no} -> {leader} at {epoch}"));
        let req = match op {
            KvOp::Get => DaemonRequest::Get {
                space,
                key: Value::Int(key),
            },
            op => DaemonRequest::Update(update_request(space, key, op, client_id, request_no)),
        };
        self.send(
            Node::Client(c),
            Node::Daemon(leader),
            Msg::Request {
                id: msg_id,
                epoch,
                req,
            },
        );
    }

    fn client_receive(&mut self, c: usize, msg: Msg) -> Result<(), String> {
        match msg {
            Msg::Config(config) => {
                let client = &mut self.clients[c];
                let newer = client
                    .config
                    .as_ref()
                    .is_none_or(|old| config.epoch > old.epoch);
                if newer {
                    client.config = Some(config);
                    if client.current.is_some() {
                        self.send_current(c);
                    }
                }
            }
            Msg::Response { id, resp } => {
                let Some(cur) = self.clients[c].current.as_ref() else {
                    return Ok(());
                };
                if cur.msg_id != id {
                    return Ok(()); // an answer to an earlier send
                }
                self.trace(|| format!("client {c} key {} {:?} hears {resp:?}", cur.key, cur.op));
                let result = match (&resp, cur.op) {
                    (DaemonResponse::Done, KvOp::Get) => None,
                    (DaemonResponse::Done, _) => Some(KvResult::Ok),
                    (DaemonResponse::Found { object, .. }, KvOp::Get) => {
                        match (&object.values[1], &object.values[2]) {
                            (Value::Int(a), Value::Int(b)) => Some(KvResult::Value(*a, *b)),
                            _ => return Err(format!("a get returned {object:?}")),
                        }
                    }
                    (DaemonResponse::CmpFail { .. }, _) => Some(KvResult::CmpFail),
                    (DaemonResponse::Failed { status, reason }, _) => match status {
                        Status::NotFound => Some(KvResult::NotFound),
                        Status::CmpFail => Some(KvResult::CmpFail),
                        Status::Reconfigure | Status::Offline => None,
                        other => {
                            return Err(format!(
                                "client {c}: {:?} on key {} answered {other:?}: {reason}",
                                cur.op, cur.key
                            ))
                        }
                    },
                    (DaemonResponse::WrongEpoch { .. }, _) => None,
                    (other, op) => return Err(format!("client {c}: {op:?} answered {other:?}")),
                };
                match result {
                    Some(result) => {
                        let cur = self.clients[c].current.take().expect("checked");
                        self.trace(|| {
                            format!("client {c} key {} {:?} -> {result:?}", cur.key, cur.op)
                        });
                        self.history.get_mut(&cur.key).expect("recorded")[cur.event].ret =
                            Some((self.now, result));
                        let think = self.rng.below(30);
                        self.at(think, Ev::ClientWake(c));
                    }
                    None => {
                        // Stale configuration, or a point leader without a
                        // lease: ask for the configuration, try again soon.
                        self.send(Node::Client(c), Node::Coord, Msg::ConfigRequest);
                        if let Some(cur) = self.clients[c].current.as_mut() {
                            cur.deadline = self.now + 100;
                        }
                        self.at(100, Ev::ClientWake(c));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    // ------------------------------------------------------------ settling

    fn unsettled(&self) -> String {
        let mut why = Vec::new();
        let busy: usize = self.clients.iter().filter(|c| c.current.is_some()).count();
        if busy > 0 {
            why.push(format!("{busy} clients wait for an answer"));
        }
        if !self.coord.state.transfers.is_empty() {
            why.push(format!("transfers {:?}", self.coord.state.transfers));
        }
        for d in self.daemons.values() {
            match &d.node {
                None => why.push(format!("{} not running", d.id)),
                Some(node) => {
                    let epoch = node.config().epoch;
                    if epoch != self.coord.state.epoch {
                        why.push(format!("{} at epoch {epoch}", d.id));
                    }
                    if node.busy_keys() > 0 {
                        why.push(format!("{} busy: {}", d.id, node.describe_busy()));
                    }
                }
            }
            let state = self.coord.state.daemons.get(&d.id).map(|i| i.state);
            if state != Some(DaemonState::Available) {
                why.push(format!("{} is {state:?}", d.id));
            }
        }
        if why.is_empty() {
            // Quiet, but not yet whole: anti-entropy has orphans to repair,
            // or a region still lacks replicas.
            if let Err(e) = self.check_replicas() {
                why.push(e);
            }
        }
        why.join("; ")
    }

    fn try_finish(&mut self) -> Result<(), String> {
        let idle = self.clients.iter().all(|c| c.current.is_none());
        if !idle || !self.unsettled().is_empty() {
            return Ok(());
        }
        if !self.finals_started {
            // Everything settled: read every key once more.
            self.finals_started = true;
            let keys: Vec<i64> = (0..self.knobs.keys).collect();
            self.clients[0].final_reads = keys;
            self.start_next(0);
            return Ok(());
        }
        if self.clients[0].final_reads.is_empty() {
            self.done = true;
        }
        Ok(())
    }

    // ------------------------------------------------------------ checks

    fn check(&self) -> Result<(), String> {
        for (key, events) in &self.history {
            if events.len() > check::EVENTS_PER_KEY_MAX {
                return Err(format!("key {key}: too many events to check"));
            }
            if let Some(e) = events.iter().find(|e| e.ret.is_none()) {
                return Err(format!("key {key}: {:?} never finished", e.op));
            }
            check::check_key(events).map_err(|e| format!("key {key}: {e}"))?;
        }
        self.check_replicas()
    }

    /// Every replica of every region holds the same records, and every
    /// object lies in exactly the regions its attributes map to.
    fn check_replicas(&self) -> Result<(), String> {
        let config = self.configuration();
        let space = config.space_by_id(self.space).ok_or("the space is gone")?;
        let read = |d: DaemonId, region: RegionId| {
            let mut out: BTreeMap<Vec<u8>, (u64, Option<Object>)> = BTreeMap::new();
            self.daemons[&d]
                .data
                .scan(region, None, &mut |k, v| {
                    let r = Record::decode(v).expect("valid record");
                    out.insert(k.to_vec(), (r.version.0, r.object));
                    true
                })
                .expect("memory scan");
            out
        };
        // The objects, from the key subspace.
        let mut objects: BTreeMap<Vec<u8>, (u64, Object)> = BTreeMap::new();
        for (si, layout) in space.subspaces.iter().enumerate() {
            for region in &layout.regions {
                let Some(&first) = region.chain.first() else {
                    return Err(format!("region {} has no replica", region.id));
                };
                if region.chain.len() < self.knobs.f + 1 {
                    return Err(format!(
                        "region {} has {} replicas after healing",
                        region.id,
                        region.chain.len()
                    ));
                }
                let reference = read(first, region.id);
                for &d in &region.chain[1..] {
                    let got = read(d, region.id);
                    if got != reference {
                        return Err(format!(
                            "region {} (subspace {si}) differs between {first} and {d}:\n  {first}: {reference:?}\n  {d}: {got:?}",
                            region.id
                        ));
                    }
                }
                if si == 0 {
                    for (k, (v, o)) in reference {
                        if let Some(o) = o {
                            objects.insert(k, (v, o));
                        }
                    }
                }
            }
        }
        for (si, layout) in space.subspaces.iter().enumerate().skip(1) {
            for region in &layout.regions {
                let held: BTreeSet<(Vec<u8>, u64)> = read(region.chain[0], region.id)
                    .into_iter()
                    .filter(|(_, (_, o))| o.is_some())
                    .map(|(k, (v, _))| (k, v))
                    .collect();
                let expected: BTreeSet<(Vec<u8>, u64)> = objects
                    .iter()
                    .filter(|(_, (_, o))| layout.region_of(o).id == region.id)
                    .map(|(k, (v, _))| (k.clone(), *v))
                    .collect();
                if held != expected {
                    return Err(format!(
                        "subspace {si} region {} holds {held:?}, the key subspace says {expected:?}",
                        region.id
                    ));
                }
            }
        }
        Ok(())
    }
}

fn update_request(
    space: SpaceId,
    key: i64,
    op: KvOp,
    client_id: u64,
    request_no: u64,
) -> UpdateRequest {
    let set = |attr, v| Mutation {
        attr,
        path: None,
        action: Action::Set(Value::Int(v)),
    };
    let exist = UpdateFlags {
        must_exist: true,
        ..UpdateFlags::default()
    };
    let (flags, checks, mutations) = match op {
        KvOp::Put { a, b } => (UpdateFlags::default(), vec![], vec![set(1, a), set(2, b)]),
        KvOp::CondPut { a_is, b } => (
            exist,
            vec![Check {
                attr: 1,
                path: None,
                op: PredOp::Eq(Value::Int(a_is)),
            }],
            vec![set(2, b)],
        ),
        KvOp::Add { n } => (
            exist,
            vec![],
            vec![Mutation {
                attr: 1,
                path: None,
                action: Action::Num(NumOp::Add, Value::Int(n)),
            }],
        ),
        KvOp::Del => (
            UpdateFlags {
                erase: true,
                ..exist
            },
            vec![],
            vec![],
        ),
        KvOp::Get => unreachable!("a get is not an update"),
    };
    UpdateRequest {
        space,
        key: Value::Int(key),
        client: ClientRef {
            client_id,
            request_no,
        },
        flags,
        checks,
        mutations,
    }
}
