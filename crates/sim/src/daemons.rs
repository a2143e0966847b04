//! Driving the daemons: each process's [`DaemonNode`] gets its inputs here,
//! and what it outputs is carried out on the simulated network and disk —
//! the simulator's counterpart of the daemon's tokio shell.

use crate::disk;
use crate::world::{
    Ev, Msg, Node, World, HEARTBEAT_MS, JOB_DELAY_MS_MAX, PEER_TIMEOUT_MS_MAX, PEER_TIMEOUT_MS_MIN,
    TICK_MS, TRANSFER_BATCH,
};
use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::core::ReplyTo;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{DaemonNode, Job, NodeOptions, Output, Stopping};
use tessera_protocol::{CoordRequest, CoordResponse, StopReason};
use tessera_types::{Configuration, DaemonId};
impl World {
    /// The daemon's tick timer fires.
    pub(crate) fn daemon_tick(&mut self, d: DaemonId, inc: u64) {
        if !self.incarnation_up(d, inc) {
            return;
        }
        // The shell's interval fsync (a full disk shows here even when
        // nothing is written). Power-loss seeds run the daemons of
        // `--fsync-every-commit`, whose shells run none: what a member
        // commits unsynced stays so until its next synced write.
        let interval_fsync = !self.power_loss;
        self.with_node(d, |node, out| {
            node.on_tick(out);
            if interval_fsync {
                node.sync(out);
            }
        });
        self.at(TICK_MS, Ev::DaemonTick(d, inc));
    }

    /// The daemon's heartbeat timer fires.
    pub(crate) fn heartbeat_timer(&mut self, d: DaemonId, inc: u64) {
        if !self.incarnation_up(d, inc) {
            return;
        }
        let request = match &self.daemons[&d].node {
            Some(node) => node.heartbeat(),
            // Restarted, not registered yet: ask again.
            None => self.register_request(d),
        };
        let sent = self.now;
        self.send(Node::Daemon(d), Node::Coord, Msg::Coord { request, sent });
        self.at(HEARTBEAT_MS, Ev::Heartbeat(d, inc));
    }

    /// If a cut breaks `d`'s connection to `peer`, `d`'s shell notices
    /// after its timeout.
    fn notice_severed(&mut self, d: DaemonId, peer: DaemonId) {
        if !self.severed(Node::Daemon(d), Node::Daemon(peer)) {
            return;
        }
        let daemon = self.daemons.get_mut(&d).expect("known daemon");
        if daemon.severed.insert(peer) {
            let inc = daemon.incarnation;
            let spread = PEER_TIMEOUT_MS_MAX - PEER_TIMEOUT_MS_MIN;
            let delay = PEER_TIMEOUT_MS_MIN + self.rng.below(spread + 1);
            self.at(delay, Ev::PeerUnreachable(d, inc, peer));
        }
    }

    /// `d`'s shell noticed its connection to `peer` broke.
    pub(crate) fn peer_unreachable(&mut self, d: DaemonId, inc: u64, peer: DaemonId) {
        if !self.incarnation_up(d, inc) {
            return;
        }
        self.daemons
            .get_mut(&d)
            .expect("known daemon")
            .severed
            .remove(&peer);
        let now = self.daemon_time();
        self.with_node(d, |node, out| node.on_peer_unreachable(peer, now, out));
    }

    /// A job the daemon's node handed out runs (unless that process ended).
    pub(crate) fn daemon_job(&mut self, d: DaemonId, inc: u64, job: Job) {
        if self.incarnation_up(d, inc) {
            self.with_node(d, |node, out| node.run_job(job, out));
        }
    }

    pub(crate) fn incarnation_up(&self, d: DaemonId, inc: u64) -> bool {
        self.daemons
            .get(&d)
            .is_some_and(|daemon| daemon.up && daemon.incarnation == inc)
    }

    pub(crate) fn daemon_time(&self) -> Duration {
        Duration::from_millis(self.now)
    }

    /// Calls into daemon `d`'s node, then carries out what it output, in
    /// order: the simulator's counterpart of the shell's `execute`.
    pub(crate) fn with_node(
        &mut self,
        d: DaemonId,
        f: impl FnOnce(&DaemonNode, &mut dyn FnMut(Output)),
    ) {
        let Some(node) = self.daemons.get(&d).and_then(|x| x.node.as_ref()) else {
            return;
        };
        let mut outputs = Vec::new();
        f(node, &mut |o| outputs.push(o));
        for output in outputs {
            self.execute(d, output);
        }
    }

    pub(crate) fn execute(&mut self, d: DaemonId, output: Output) {
        if !self.daemons.contains_key(&d) {
            return; // An earlier output of the batch: it was declared lost.
        }
        match output {
            Output::Send { to, msg } => {
                if self.trace {
                    self.trace_peer(d, to, &msg);
                }
                self.notice_severed(d, to);
                self.note_relocation(&msg);
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
            Output::Stop(Stopping::Told(StopReason::Killed | StopReason::Lost)) => {
                self.declared_lost(d);
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

    /// A registered process starts its node: the shell's `run` after
    /// registration and the first configuration.
    pub(crate) fn start_daemon(&mut self, id: DaemonId, config: Arc<Configuration>) {
        let daemon = self.daemons.get_mut(&id).expect("known daemon");
        let disk = Arc::new(disk::open(daemon.data.clone()));
        let index = IndexedEngine::open(disk.clone(), &config).expect("a healthy disk opens");
        let options = NodeOptions {
            addr: format!("d{}", id.0),
            transfer_batch: TRANSFER_BATCH,
            collect_ticks: self.knobs.collect_ticks,
            metrics: None,
        };
        assert!(
            config.epoch >= daemon.last_epoch,
            "daemon {id} started at epoch {} after {}",
            config.epoch,
            daemon.last_epoch
        );
        daemon.last_epoch = config.epoch;
        let mut outputs = Vec::new();
        let now = Duration::from_millis(self.now);
        let node = DaemonNode::new(id, options, config, Arc::new(index), now, &mut |o| {
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

    pub(crate) fn install(&mut self, d: DaemonId, config: Arc<Configuration>) {
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

    pub(crate) fn daemon_receive(&mut self, d: DaemonId, from: Node, msg: Msg) {
        if !self.daemons.get(&d).is_some_and(|daemon| daemon.up) {
            return; // Stopped, or declared lost and gone.
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
    pub(crate) fn stop(&mut self, d: DaemonId) {
        let daemon = self.daemons.get_mut(&d).expect("known daemon");
        daemon.up = false;
        if let Some(node) = daemon.node.take() {
            self.report.tombstones_collected += node.tombstones_collected();
            self.report.stale_dropped += node.stale_dropped();
        }
        daemon.disk = None;
        daemon.severed.clear();
        daemon.incarnation += 1;
    }

    pub(crate) fn crash(&mut self, d: DaemonId) {
        // Counted: crashes with updates in flight while the space has a
        // global index, between an entry's write and the object's commit
        // or between the commit and the old entry's removal.
        let in_flight = self.daemons[&d]
            .node
            .as_ref()
            .is_some_and(|node| node.busy_keys() > 0);
        let indexed = self.coord.state.spaces.iter().any(|space| {
            space
                .subspaces
                .iter()
                .any(|l| l.kind == tessera_types::SubspaceKind::GlobalIndex)
        });
        if in_flight && indexed {
            self.report.faults.crashes_mid_indexed_update += 1;
        }
        self.count_replex_crash(d);
        self.stop(d);
        self.report.faults.crashes += 1;
        self.trace(|| format!("crash {d}"));
    }

    /// What a restarted daemon's process sends before it serves: its id and
    /// the newest epoch it installed (its disk kept both), and its address.
    fn register_request(&self, d: DaemonId) -> CoordRequest {
        let installed = tessera_daemon::node::installed_epoch(self.daemons[&d].data.as_ref())
            .expect("a memory disk reads");
        CoordRequest::RegisterDaemon {
            id: Some(d),
            addr: format!("d{}", d.0),
            metrics: None,
            installed,
        }
    }

    pub(crate) fn restart(&mut self, d: DaemonId) {
        // A daemon lost for good never restarts.
        let Some(daemon) = self.daemons.get_mut(&d) else {
            return;
        };
        if daemon.up {
            return;
        }
        daemon.up = true;
        daemon.disk_fault = false;
        let inc = daemon.incarnation;
        self.trace(|| format!("restart {d}"));
        // Its disk survived (the engine); it registers again before serving.
        let request = self.register_request(d);
        let sent = self.now;
        self.send(Node::Daemon(d), Node::Coord, Msg::Coord { request, sent });
        // Registration may be lost: the heartbeat timer retries it.
        self.at(HEARTBEAT_MS, Ev::Heartbeat(d, inc));
    }
}
