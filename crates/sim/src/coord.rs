//! Driving the coordinator: the replicated [`ClusterState`] and the
//! leader's [`CoordinatorNode`], fed the daemons' requests and the time —
//! the simulator's counterpart of the coordinator's tokio shell.

use crate::world::{Msg, Node, World};
use std::sync::Arc;
use std::time::Duration;
use tessera_coordinator::state::{Command, CommandResult};
use tessera_protocol::{CoordRequest, CoordResponse, Reporter};
use tessera_types::DaemonId;

impl World {
    pub(crate) fn apply(&mut self, command: Command) -> CommandResult {
        let before = self.coord.state.epoch;
        let result = self.coord.state.apply(command);
        if let Err(e) = self.coord.state.check_invariants() {
            panic!("coordinator invariant broken: {e}");
        }
        if self.coord.state.epoch != before {
            let config = Arc::new(self.configuration());
            self.trace_epoch(&config);
            let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
            for id in ids {
                self.send(Node::Coord, Node::Daemon(id), Msg::Config(config.clone()));
            }
        }
        result
    }

    pub(crate) fn coordinator_time(&self) -> Duration {
        Duration::from_millis(self.now)
    }

    /// The leader receives `msg`: the coordinator shell's request
    /// handling.
    pub(crate) fn coord_receive(&mut self, from: Node, msg: Msg) {
        match (from, msg) {
            (_, Msg::Coord { request, sent }) => {
                let Some(response) = self.answer(from, &request, sent) else {
                    return;
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

    /// What the leader answers `request` from `from` (None: nothing, or
    /// it answered already).
    fn answer(&mut self, from: Node, request: &CoordRequest, sent: u64) -> Option<CoordResponse> {
        let now = self.coordinator_time();
        match request {
            CoordRequest::Heartbeat { id, epoch } => {
                self.coord.layout.on_request(request);
                let coord = &mut self.coord;
                let leader = &mut coord.members[coord.leader].node;
                let answer = leader.heartbeat(&coord.state, *id, *epoch, now);
                if *epoch < self.coord.state.epoch {
                    // What the daemon's configuration long-poll would
                    // bring it.
                    let config = Arc::new(self.configuration());
                    self.send(Node::Coord, from, Msg::Config(config));
                }
                Some(CoordResponse::Heartbeat(answer))
            }
            CoordRequest::RegisterDaemon {
                id,
                addr,
                metrics,
                installed,
            } => {
                let result = self.apply(Command::RegisterDaemon {
                    id: *id,
                    addr: addr.clone(),
                    metrics: metrics.clone(),
                    installed: *installed,
                });
                let CommandResult::Registered { id } = result else {
                    // A killed daemon's registration is refused (NOTFOUND);
                    // the shell stops with the reason.
                    // (A stale copy of an earlier registration, answered
                    // while the node runs, changes nothing.)
                    if let (Some(d), Node::Daemon(from)) = (id, from) {
                        let waiting = self.daemons.get(d).is_some_and(|x| x.node.is_none());
                        if *d == from && waiting && self.coord.state.killed.contains(d) {
                            self.declared_lost(*d);
                        }
                    }
                    return None;
                };
                let config = Arc::new(self.configuration());
                let msg = Msg::Registered {
                    request: request.clone(),
                    sent,
                    id,
                    config,
                };
                self.send(Node::Coord, from, msg);
                None
            }
            CoordRequest::TransferComplete { transfer } => {
                self.apply(Command::TransferComplete {
                    transfer: *transfer,
                });
                Some(CoordResponse::Done)
            }
            CoordRequest::RebuildComplete { rebuild } => {
                let result = self.apply(Command::RebuildComplete { rebuild: *rebuild });
                if result == CommandResult::Done {
                    self.report.rebuilds_completed += 1;
                    self.trace(|| format!("rebuild {rebuild} completes"));
                }
                Some(CoordResponse::Done)
            }
            CoordRequest::Leave { id, reason } => {
                let command = self.coord.node().leave(*id, *reason);
                self.apply(command);
                Some(CoordResponse::Done)
            }
            CoordRequest::CollectReport {
                id,
                in_flight_since,
                waiting,
            } => {
                self.coord
                    .node()
                    .collect_report(*id, *in_flight_since, *waiting);
                Some(CoordResponse::Done)
            }
            CoordRequest::Unreachable { daemon, reporter } => {
                let coord = &mut self.coord;
                let leader = &mut coord.members[coord.leader].node;
                let mut fenced = leader.unreachable(&coord.state, *daemon, *reporter, now);
                if !fenced && leader.probe_wanted(*daemon, now) {
                    // The shell's probe: a TCP connection to the daemon,
                    // which a cut in either direction breaks.
                    if self.severed(Node::Coord, Node::Daemon(*daemon)) {
                        let coord = &mut self.coord;
                        let leader = &mut coord.members[coord.leader].node;
                        fenced =
                            leader.unreachable(&coord.state, *daemon, Reporter::Coordinator, now);
                    }
                }
                if fenced {
                    self.trace(|| format!("{reporter:?} cannot reach {daemon}: fenced"));
                }
                Some(CoordResponse::Done)
            }
            CoordRequest::BackfillReport { .. }
            | CoordRequest::IndexletReport { .. }
            | CoordRequest::IndexletLoad { .. } => {
                self.coord.layout.on_request(request);
                self.propose_layout();
                Some(CoordResponse::Done)
            }
            _ => None,
        }
    }

    /// Applies what the layout tally proposes (the shell writes the same).
    fn propose_layout(&mut self) {
        let commands = self.coord.layout.proposals(&self.coord.state);
        for command in commands {
            self.trace(|| format!("layout: {command:?}"));
            let split = matches!(command, Command::SplitGlobalIndexAt { .. });
            let result = self.apply(command);
            if split && !matches!(result, CommandResult::Failed { .. }) {
                self.report.index_splits += 1;
            }
        }
    }

    /// The leader's detector timer fires (a frozen leader's fires when it
    /// resumes).
    pub(crate) fn coord_tick(&mut self) {
        if !self.coord.up {
            return;
        }
        let leader = &mut self.coord.members[self.coord.leader];
        if leader.frozen {
            leader.tick_missed = true;
            return;
        }
        let now = self.coordinator_time();
        let coord = &mut self.coord;
        let node = &mut coord.members[coord.leader].node;
        let fences = node.fences_due(&coord.state, now);
        let commands = node.tick(&coord.state, now);
        for command in fences {
            self.trace(|| format!("unreachable, its lease run out: {command:?}"));
            self.report.faults.reported_offline += 1;
            self.apply(command);
        }
        for command in commands {
            self.apply(command);
        }
        self.propose_layout();
    }

    pub(crate) fn coord_up(&mut self) {
        if self.coord.up {
            return;
        }
        self.coord.up = true;
        // A new leader: its detector starts afresh, giving every daemon a
        // full timeout of grace.
        self.coord.term += 1;
        self.coord.layout = crate::world::layout_tally(&self.knobs);
        let term = self.coord.term;
        self.coord.node().lead(term);
    }
}
