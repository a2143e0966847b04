//! The coordinator's policy toward daemons, without I/O: what a heartbeat
//! is answered, when a silent daemon is taken offline, and when the
//! cluster is stable. The tokio shell ([`crate::server`]) and the
//! simulator (`tessera-sim`) both drive this one type; neither decides any
//! of it by itself.
//!
//! ```text
//!   heartbeat(d, epoch, now) ─▶ CoordinatorNode ─▶ HeartbeatAnswer
//!   tick(now)                ─▶ CoordinatorNode ─▶ [Command::DaemonOffline] to propose
//!   leave(d, reason)         ─▶ CoordinatorNode ─▶ Command::DaemonOffline to propose
//! ```
//!
//! The replicated [`ClusterState`] comes in as a parameter: the shell reads
//! it from its Raft state machine, the simulator holds it directly. Only
//! the leader's node matters; its detector is soft state (see
//! [`FailureDetector`]), so a new leader gives every daemon a full failure
//! timeout of grace before it can suspect one.

use crate::detector::FailureDetector;
use crate::state::{ClusterState, Command};
use crate::tombstones::{TombstonePolicy, TOMBSTONE_GRACE};
use std::collections::BTreeMap;
use std::time::Duration;
use tessera_protocol::report::ReportLimit;
use tessera_protocol::{HeartbeatAnswer, LeaveReason, Reporter, StopReason};
use tessera_types::{DaemonId, DaemonState, Epoch};

/// Reports that a daemon is unreachable count for this long.
pub const UNREACHABLE_WINDOW: Duration = Duration::from_secs(4);
/// How many distinct reporters must agree, within the window, before an
/// Available daemon is taken offline although it heartbeats. One reporter
/// alone may be the one that is cut off.
pub const UNREACHABLE_REPORTERS_MIN: usize = 2;

/// The leader probes one reported daemon at most this often.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);

/// How long the leader refuses a daemon's lease, once reporters agree it
/// is unreachable, before it takes the daemon offline: every lease it
/// granted before runs out meanwhile. Taken offline at once, a daemon
/// that still heartbeats kept its lease for up to a second and answered
/// reads from data the new chain was already changing (simulator seed
/// 260000016: a global index lookup missed an acknowledged put).
pub use tessera_protocol::FENCE;

/// A daemon whose lease the leader refuses until `until`.
#[derive(Clone, Copy, Debug)]
struct Fence {
    until: Duration,
    /// Reporters agreed it is unreachable: the leader takes it offline at
    /// `until` ([`CoordinatorNode::fences_due`]). Else an operator's
    /// command takes it out, and the fence only lapses then
    /// ([`CoordinatorNode::fence_for_operator`]).
    unreachable: bool,
}

/// Whether `id` is an Available daemon of `state`.
fn available(state: &ClusterState, id: DaemonId) -> bool {
    state.daemons.get(&id).map(|d| d.state) == Some(DaemonState::Available)
}

/// The leader's side of the daemon protocol.
#[derive(Clone, Debug)]
pub struct CoordinatorNode {
    /// When the leader last probed each daemon.
    probed: ReportLimit,
    detector: FailureDetector,
    /// Per daemon, who reported it unreachable and when (soft state, like
    /// the detector's).
    unreachable: BTreeMap<DaemonId, BTreeMap<Reporter, Duration>>,
    /// Daemons whose lease the leader refuses because it is about to take
    /// them out of their chains (see [`FENCE`]).
    fenced: BTreeMap<DaemonId, Fence>,
    tombstones: TombstonePolicy,
    /// How long an Offline daemon may stay silent, while replex regions
    /// wait for it, before the leader declares it lost (None: never).
    lost_timeout: Option<Duration>,
}

impl CoordinatorNode {
    /// A node that takes a daemon offline after `failure_timeout` without
    /// a heartbeat (once it leads).
    pub fn new(failure_timeout: Duration) -> CoordinatorNode {
        CoordinatorNode {
            detector: FailureDetector::new(failure_timeout),
            unreachable: BTreeMap::new(),
            fenced: BTreeMap::new(),
            probed: ReportLimit::every(PROBE_INTERVAL),
            tombstones: TombstonePolicy::new(TOMBSTONE_GRACE),
            lost_timeout: None,
        }
    }

    /// The same, declaring lost (`Command::DaemonLost`) a daemon silent for
    /// `timeout` while regions of replex spaces wait for it as their last
    /// daemon and can be rebuilt from the other replexes
    /// ([`ClusterState::may_declare_lost`]); `None`: only an operator's
    /// `server-kill` starts their rebuild.
    pub fn with_lost_timeout(mut self, timeout: Option<Duration>) -> CoordinatorNode {
        self.lost_timeout = timeout;
        self
    }

    pub fn lost_timeout(&self) -> Option<Duration> {
        self.lost_timeout
    }

    /// The same, collecting tombstones `grace` after their epoch ended
    /// (see [`crate::tombstones`]).
    pub fn with_tombstone_grace(mut self, grace: Duration) -> CoordinatorNode {
        self.tombstones = TombstonePolicy::new(grace);
        self
    }

    pub fn failure_timeout(&self) -> Duration {
        self.detector.timeout()
    }

    /// This member leads in `term`; true when that began now (the detector
    /// then starts afresh: every daemon gets a full timeout of grace).
    pub fn lead(&mut self, term: u64) -> bool {
        let began = self.detector.lead(term);
        if began {
            self.unreachable.clear();
            self.fenced.clear();
            self.tombstones.reset();
        }
        began
    }

    /// This member does not lead: it suspects nobody.
    pub fn follow(&mut self) {
        self.detector.follow();
        self.unreachable.clear();
        self.fenced.clear();
        self.tombstones.reset();
    }

    pub fn is_leading(&self) -> bool {
        self.detector.is_leading()
    }

    /// A heartbeat from daemon `id`, which has installed `epoch`, at `now`.
    ///
    /// | the daemon is | answer |
    /// | --- | --- |
    /// | declared lost, killed, or unknown (forgotten) | `Stop` |
    /// | Offline, taken out by an operator | `HeldOffline` |
    /// | Offline, taken out by the detector (or it left) | `Offline`: register again |
    /// | Available, but it left a chain in an epoch it has not installed | `NoLeaseUntil` |
    /// | Available, but fenced: reporters agree it is unreachable ([`FENCE`]) | `NoLeaseUntil` the next epoch |
    /// | Available | `Renewed` |
    pub fn heartbeat(
        &mut self,
        state: &ClusterState,
        id: DaemonId,
        epoch: Epoch,
        now: Duration,
    ) -> HeartbeatAnswer {
        if state.lost.contains(&id) {
            return HeartbeatAnswer::Stop(StopReason::Lost);
        }
        if state.killed.contains(&id) {
            return HeartbeatAnswer::Stop(StopReason::Killed);
        }
        let Some(info) = state.daemons.get(&id) else {
            return HeartbeatAnswer::Stop(StopReason::Unknown);
        };
        self.detector.on_heartbeat(id, epoch, now);
        if info.state == DaemonState::Offline {
            return if state.held_offline.contains(&id) {
                HeartbeatAnswer::HeldOffline
            } else {
                HeartbeatAnswer::Offline
            };
        }
        let fenced = self
            .fenced
            .get(&id)
            .is_some_and(|f| f.unreachable || now < f.until);
        if fenced {
            // About to be taken offline: no new lease, so that the ones it
            // has run out first.
            return HeartbeatAnswer::NoLeaseUntil {
                epoch: Epoch(state.epoch.0 + 1),
            };
        }
        match state.left_chain_at.get(&id) {
            // Alive (so not suspected), but it may still act on chain
            // places it no longer holds: no lease until it catches up.
            Some(&left) if epoch < left => HeartbeatAnswer::NoLeaseUntil { epoch: left },
            _ => HeartbeatAnswer::Renewed,
        }
    }

    /// Time passes: the commands the leader should propose now, one
    /// `DaemonOffline` per Available daemon silent for the failure timeout,
    /// one `DaemonLost` per Offline daemon silent for the lost timeout
    /// (see [`Self::lost`]), and the tombstone horizon's advance when it is
    /// due.
    pub fn tick(&mut self, state: &ClusterState, now: Duration) -> Vec<Command> {
        let mut commands: Vec<Command> = self
            .detector
            .suspects(now, state)
            .into_iter()
            .map(|id| Command::DaemonOffline { id })
            .collect();
        if self.is_leading() {
            commands.extend(
                self.lost(state, now)
                    .into_iter()
                    .map(|id| Command::DaemonLost { id }),
            );
            commands.extend(self.tombstones.tick(state, now));
        }
        commands
    }

    /// The daemons to declare lost now: Offline and silent for the lost
    /// timeout (since its last heartbeat to this leader, or since it began
    /// to lead), regions of replex spaces waiting for them that the other
    /// replexes cover ([`ClusterState::may_declare_lost`]), and every
    /// daemon those rebuilds would read from heard within half the failure
    /// timeout: one that fell silent just now may be gone with its disk,
    /// and the lost daemon's copy may then be the only one left.
    fn lost(&self, state: &ClusterState, now: Duration) -> Vec<DaemonId> {
        let Some(timeout) = self.lost_timeout else {
            return Vec::new();
        };
        let fresh = self.detector.timeout() / 2;
        let silent = |id: DaemonId| self.detector.silent_for(id, now);
        state
            .daemons
            .keys()
            .copied()
            .filter(|&id| silent(id).is_some_and(|s| s >= timeout))
            .filter(|&id| {
                state.may_declare_lost(id).is_some_and(|sources| {
                    sources
                        .iter()
                        .all(|&s| silent(s).is_some_and(|s| s < fresh))
                })
            })
            .collect()
    }

    /// A daemon's report of a tombstone collection round (see
    /// [`tessera_protocol::CoordRequest::CollectReport`]).
    pub fn collect_report(&mut self, id: DaemonId, in_flight_since: Epoch, waiting: Option<Epoch>) {
        if self.is_leading() {
            self.tombstones.report(id, in_flight_since, waiting);
        }
    }

    /// `reporter` could not reach `daemon` at `now`. When reports from
    /// [`UNREACHABLE_REPORTERS_MIN`] reporters agree within
    /// [`UNREACHABLE_WINDOW`] (a gray failure: the daemon heartbeats, but
    /// clients or peers cannot reach it), the daemon is *fenced*: its
    /// lease is refused from now on, and [`Self::fences_due`] proposes it
    /// offline [`FENCE`] later, once every lease granted before has run
    /// out; true when that began now. The daemon, alive, then asks to come
    /// back, with its backoff; while it stays unreachable it is reported
    /// again.
    pub fn unreachable(
        &mut self,
        state: &ClusterState,
        daemon: DaemonId,
        reporter: Reporter,
        now: Duration,
    ) -> bool {
        if !self.is_leading() || !available(state, daemon) || reporter == Reporter::Daemon(daemon) {
            return false;
        }
        let reports = self.unreachable.entry(daemon).or_default();
        reports.insert(reporter, now);
        reports.retain(|_, at| now.saturating_sub(*at) < UNREACHABLE_WINDOW);
        if reports.len() < UNREACHABLE_REPORTERS_MIN {
            return false;
        }
        let reporters: Vec<Reporter> = reports.keys().copied().collect();
        self.unreachable.remove(&daemon);
        tracing::warn!(%daemon, ?reporters, "daemon heartbeats but others cannot reach it: refusing its lease, then taking it offline");
        // An operator's fence already refusing its lease runs on, now to
        // end with the daemon offline.
        self.fenced
            .entry(daemon)
            .and_modify(|f| f.unreachable = true)
            .or_insert(Fence {
                until: now + FENCE,
                unreachable: true,
            });
        true
    }

    /// An operator takes `id` out (`server-offline`, `-kill`, `-forget`):
    /// how long the caller must wait before proposing it, the daemon's
    /// lease refused meanwhile — [`FENCE`] for an Available daemon while
    /// this member leads, so that a daemon still serving stops before a
    /// chain without it takes writes (as [`Self::unreachable`] does for a
    /// gray failure); nothing otherwise. The refusal outlasts the wait by
    /// another [`FENCE`], for the proposal's way through Raft; the daemon
    /// is Offline by then, or the proposal failed.
    pub fn fence_for_operator(
        &mut self,
        state: &ClusterState,
        id: DaemonId,
        now: Duration,
    ) -> Duration {
        if !self.is_leading() || !available(state, id) {
            return Duration::ZERO;
        }
        let fence = self.fenced.entry(id).or_insert(Fence {
            until: now + FENCE + FENCE,
            unreachable: false,
        });
        fence.until.saturating_sub(now).min(FENCE)
    }

    /// The operator's command that [`Self::fence_for_operator`] held back
    /// was proposed: the daemon's state decides its heartbeats' answers
    /// again.
    pub fn operator_fence_done(&mut self, id: DaemonId) {
        if self.fenced.get(&id).is_some_and(|f| !f.unreachable) {
            self.fenced.remove(&id);
        }
    }

    /// Time passes: `DaemonOffline` for each fenced daemon whose fence
    /// ran out and that is still Available (see [`Self::unreachable`]).
    pub fn fences_due(&mut self, state: &ClusterState, now: Duration) -> Vec<Command> {
        if !self.is_leading() {
            return Vec::new();
        }
        let mut due = Vec::new();
        self.fenced.retain(|&id, fence| {
            let ended = fence.until <= now;
            if ended && fence.unreachable && available(state, id) {
                due.push(Command::DaemonOffline { id });
            }
            !ended
        });
        due
    }

    /// Whether the driver should probe `daemon` now — connect to its
    /// address, and report [`Reporter::Coordinator`] to [`Self::unreachable`]
    /// if that fails: when a report about it is outstanding and it was not
    /// probed within [`PROBE_INTERVAL`]. A daemon only one other process
    /// talks to (the tail of a short chain that cannot receive: only its
    /// predecessor writes to it) would otherwise never reach two reporters.
    pub fn probe_wanted(&mut self, daemon: DaemonId, now: Duration) -> bool {
        let reported = self
            .unreachable
            .get(&daemon)
            .is_some_and(|r| r.keys().any(|who| *who != Reporter::Coordinator));
        if !self.is_leading() || !reported {
            return false;
        }
        self.probed.allow(daemon, now)
    }

    /// A daemon asks to leave every chain (it cannot persist): the command
    /// to propose. Like a detected failure, so repair re-replicates its
    /// regions exactly as after a crash.
    pub fn leave(&self, id: DaemonId, reason: LeaveReason) -> Command {
        tracing::warn!(daemon = %id, %reason, "daemon leaves every chain");
        Command::DaemonOffline { id }
    }

    /// The Available daemons that have not reported `state`'s epoch.
    pub fn lagging(&self, state: &ClusterState) -> Vec<DaemonId> {
        self.detector.lagging(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::CommandResult;

    fn state_with(n: usize) -> ClusterState {
        let mut state = ClusterState::default();
        for i in 0..n {
            let result = state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("d{i}:1"),
                metrics: None,
                installed: None,
            });
            assert!(matches!(result, CommandResult::Registered { .. }));
        }
        state
    }

    const TIMEOUT: Duration = Duration::from_secs(2);

    #[test]
    fn answers_follow_the_daemons_state() {
        let mut state = state_with(3);
        let mut node = CoordinatorNode::new(TIMEOUT);
        node.lead(1);
        let now = Duration::from_secs(1);
        let epoch = state.epoch;
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), epoch, now),
            HeartbeatAnswer::Renewed
        );
        assert_eq!(
            node.heartbeat(&state, DaemonId(9), epoch, now),
            HeartbeatAnswer::Stop(StopReason::Unknown)
        );
        state.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), state.epoch, now),
            HeartbeatAnswer::Offline,
            "taken offline by the detector: it may ask to come back"
        );
        state.apply(Command::ServerOffline { id: DaemonId(2) });
        assert_eq!(
            node.heartbeat(&state, DaemonId(2), state.epoch, now),
            HeartbeatAnswer::HeldOffline,
            "taken offline by an operator: it waits"
        );
        state.apply(Command::ServerKill { id: DaemonId(3) });
        assert_eq!(
            node.heartbeat(&state, DaemonId(3), state.epoch, now),
            HeartbeatAnswer::Stop(StopReason::Killed)
        );
        // Registering again brings the detector's offline daemon back.
        state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "d0:1".into(),
            metrics: None,
            installed: None,
        });
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), state.epoch, now),
            HeartbeatAnswer::Renewed
        );
    }

    #[test]
    fn a_daemon_that_left_a_chain_gets_no_lease_until_it_installs_that_epoch() {
        let mut state = state_with(3);
        state.apply(Command::AddSpace {
            description: "space kv key int k attributes int a subspace a create 2 partitions tolerate 1 failure"
                .into(),
        });
        let before = state.epoch;
        state.apply(Command::DaemonOffline { id: DaemonId(1) });
        state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(1)),
            addr: "d0:1".into(),
            metrics: None,
            installed: None,
        });
        let left = state.left_chain_at[&DaemonId(1)];
        assert!(left > before);
        let mut node = CoordinatorNode::new(TIMEOUT);
        node.lead(1);
        let now = Duration::from_secs(1);
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), before, now),
            HeartbeatAnswer::NoLeaseUntil { epoch: left }
        );
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), left, now),
            HeartbeatAnswer::Renewed
        );
    }

    #[test]
    fn a_daemon_that_heartbeats_is_taken_offline_when_two_reporters_cannot_reach_it() {
        let state = state_with(4);
        let mut node = CoordinatorNode::new(TIMEOUT);
        let at = |s: u64| Duration::from_secs(s);
        // Not leading: nothing.
        assert!(!node.unreachable(&state, DaemonId(1), Reporter::Daemon(DaemonId(2)), at(1)));
        node.lead(1);
        let one = Reporter::Daemon(DaemonId(2));
        // One reporter, however often, may be the one cut off.
        for s in 1..5 {
            assert!(!node.unreachable(&state, DaemonId(1), one, at(s)));
            assert_eq!(
                node.heartbeat(&state, DaemonId(1), state.epoch, at(s)),
                HeartbeatAnswer::Renewed
            );
        }
        // A daemon reporting itself does not count.
        assert!(!node.unreachable(&state, DaemonId(1), Reporter::Daemon(DaemonId(1)), at(5)));
        // A second reporter after the first one's report expired: no.
        assert!(!node.unreachable(
            &state,
            DaemonId(1),
            Reporter::Client(7),
            at(4) + UNREACHABLE_WINDOW
        ));
        // A report makes the leader want to probe, once per interval.
        assert!(node.probe_wanted(DaemonId(1), at(9)));
        assert!(!node.probe_wanted(DaemonId(1), at(9)));
        assert!(!node.probe_wanted(DaemonId(3), at(9)), "nobody reported d3");
        // Two within the window: fenced. Its lease is refused at once, and
        // it goes offline only once every lease granted before ran out.
        assert!(node.unreachable(&state, DaemonId(1), one, at(9)));
        assert!(matches!(
            node.heartbeat(&state, DaemonId(1), state.epoch, at(9)),
            HeartbeatAnswer::NoLeaseUntil { epoch } if epoch > state.epoch
        ));
        assert_eq!(
            node.heartbeat(&state, DaemonId(2), state.epoch, at(9)),
            HeartbeatAnswer::Renewed,
            "only the reported daemon is fenced"
        );
        let last_lease_ends = at(9) + tessera_protocol::LEASE;
        assert_eq!(node.fences_due(&state, last_lease_ends), vec![]);
        assert_eq!(
            node.fences_due(&state, at(9) + FENCE),
            vec![Command::DaemonOffline { id: DaemonId(1) }]
        );
        assert_eq!(node.fences_due(&state, at(20)), vec![], "proposed once");
        // The evidence is spent; an Offline daemon is not fenced again.
        let mut offline = state.clone();
        offline.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert!(!node.unreachable(&offline, DaemonId(1), one, at(10)));
        assert!(!node.unreachable(&offline, DaemonId(1), Reporter::Client(8), at(10)));
        assert_eq!(node.fences_due(&offline, at(30)), vec![]);
    }

    /// An operator taking a daemon out waits for its lease to run out:
    /// the daemon is refused a lease from the start of the wait until its
    /// command has had time to apply; a daemon already out costs no wait.
    #[test]
    fn an_operator_takes_a_daemon_out_only_once_its_lease_ran_out() {
        let state = state_with(4);
        let mut node = CoordinatorNode::new(TIMEOUT);
        let at = |ms: u64| Duration::from_millis(ms);
        assert_eq!(
            node.fence_for_operator(&state, DaemonId(1), at(0)),
            Duration::ZERO,
            "a follower does not wait"
        );
        node.lead(1);
        assert_eq!(
            node.fence_for_operator(&state, DaemonId(1), at(1_000)),
            FENCE
        );
        assert!(FENCE > tessera_protocol::LEASE);
        for t in [1_000, 1_000 + FENCE.as_millis() as u64] {
            assert!(
                matches!(
                    node.heartbeat(&state, DaemonId(1), state.epoch, at(t)),
                    HeartbeatAnswer::NoLeaseUntil { .. }
                ),
                "no lease at {t} ms"
            );
        }
        assert_eq!(
            node.heartbeat(&state, DaemonId(2), state.epoch, at(1_100)),
            HeartbeatAnswer::Renewed
        );
        // The command failed: the refusal lapses.
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), state.epoch, at(1_000) + FENCE + FENCE),
            HeartbeatAnswer::Renewed
        );
        assert_eq!(
            node.fences_due(&state, at(60_000)),
            vec![],
            "no proposal of its own"
        );
        // Once the command was proposed, the daemon's state answers.
        assert_eq!(
            node.fence_for_operator(&state, DaemonId(1), at(61_000)),
            FENCE
        );
        node.operator_fence_done(DaemonId(1));
        assert_eq!(
            node.heartbeat(&state, DaemonId(1), state.epoch, at(61_100)),
            HeartbeatAnswer::Renewed
        );
        let mut offline = state.clone();
        offline.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert_eq!(
            node.fence_for_operator(&offline, DaemonId(1), at(70_000)),
            Duration::ZERO
        );
    }

    /// A fence whose daemon went offline meanwhile (its heartbeats also
    /// stopped) proposes nothing more; a new leader forgets fences.
    #[test]
    fn a_fence_ends_with_its_daemon_or_its_leader() {
        let state = state_with(4);
        let mut node = CoordinatorNode::new(TIMEOUT);
        let at = |s: u64| Duration::from_secs(s);
        node.lead(1);
        node.unreachable(&state, DaemonId(1), Reporter::Client(1), at(1));
        assert!(node.unreachable(&state, DaemonId(1), Reporter::Client(2), at(1)));
        let mut offline = state.clone();
        offline.apply(Command::DaemonOffline { id: DaemonId(1) });
        assert_eq!(node.fences_due(&offline, at(5)), vec![]);

        node.unreachable(&state, DaemonId(2), Reporter::Client(1), at(6));
        assert!(node.unreachable(&state, DaemonId(2), Reporter::Client(2), at(6)));
        node.follow();
        node.lead(2);
        assert_eq!(node.fences_due(&state, at(10)), vec![]);
        assert_eq!(
            node.heartbeat(&state, DaemonId(2), state.epoch, at(10)),
            HeartbeatAnswer::Renewed
        );
    }

    /// Runs a leader over `state` from `t0` to `t0 + secs`, every daemon
    /// but `victim` heartbeating each 500 ms until `quiet` (if any) stops
    /// hearing from it at `quiet.1`; applies what each tick proposes, and
    /// returns the DaemonLost proposals with their times.
    fn run_leader(
        state: &mut ClusterState,
        node: &mut CoordinatorNode,
        victim: DaemonId,
        quiet: Option<(DaemonId, Duration)>,
        secs: u64,
    ) -> Vec<(Duration, DaemonId)> {
        let t0 = Duration::from_secs(100);
        node.lead(1);
        let mut lost = Vec::new();
        for step in 0..=(secs * 10) {
            let now = t0 + Duration::from_millis(step * 100);
            if step % 5 == 0 {
                let ids: Vec<DaemonId> = state.daemons.keys().copied().collect();
                for d in ids {
                    let silent = quiet.is_some_and(|(q, at)| q == d && now >= t0 + at);
                    if d != victim && !silent {
                        node.heartbeat(state, d, state.epoch, now);
                    }
                }
            }
            for command in node.tick(state, now) {
                if let Command::DaemonLost { id } = command {
                    lost.push((now - t0, id));
                }
                state.apply(command);
            }
        }
        lost
    }

    fn replex_state() -> (ClusterState, DaemonId) {
        let mut state = state_with(4);
        let added = state.apply(Command::AddSpace {
            description: "space r key k attributes a replex a create 4 partitions".into(),
        });
        assert!(
            matches!(added, CommandResult::SpaceAdded { .. }),
            "{added:?}"
        );
        let victim = state.spaces[0].subspaces[0].regions[0].chain[0];
        (state, victim)
    }

    #[test]
    fn a_daemon_silent_for_the_lost_timeout_is_declared_lost_and_told_so() {
        let lost_timeout = Duration::from_secs(10);
        let (mut state, victim) = replex_state();
        let mut node = CoordinatorNode::new(TIMEOUT).with_lost_timeout(Some(lost_timeout));
        let lost = run_leader(&mut state, &mut node, victim, None, 15);
        // Offline after the failure timeout, lost after the lost timeout
        // (both counted from the new leader's first look), proposed once.
        assert_eq!(lost, vec![(lost_timeout, victim)]);
        assert!(state.lost.contains(&victim));
        assert!(!state.rebuilds.is_empty());
        assert_eq!(
            node.heartbeat(&state, victim, state.epoch, Duration::from_secs(200)),
            HeartbeatAnswer::Stop(StopReason::Lost)
        );

        // Without a lost timeout, only an operator's kill does it.
        let (mut state, victim) = replex_state();
        let mut node = CoordinatorNode::new(TIMEOUT);
        assert!(run_leader(&mut state, &mut node, victim, None, 15).is_empty());
        assert!(state.killed.is_empty());
    }

    #[test]
    fn no_daemon_is_declared_lost_while_a_source_of_its_rebuild_fell_silent() {
        let (mut state, victim) = replex_state();
        // The daemon of a replex region, which the key region's rebuild
        // reads: silent from 9.5 s, so not heard within half the failure
        // timeout when the victim's lost timeout ends at 10 s.
        let source = state.spaces[0].subspaces[1].regions[0].chain[0];
        let mut node =
            CoordinatorNode::new(TIMEOUT).with_lost_timeout(Some(Duration::from_secs(10)));
        let lost = run_leader(
            &mut state,
            &mut node,
            victim,
            Some((source, Duration::from_millis(9_500))),
            11,
        );
        assert!(lost.is_empty(), "{lost:?}");
        assert!(state.killed.is_empty());
    }

    #[test]
    fn a_new_leader_suspects_nobody_for_a_full_timeout() {
        let state = state_with(2);
        let mut node = CoordinatorNode::new(TIMEOUT);
        let start = Duration::from_secs(100);
        assert!(node.lead(7));
        assert!(node.tick(&state, start).is_empty());
        // Daemons heartbeating to the old leader were never heard here.
        assert!(node.tick(&state, start + TIMEOUT / 2).is_empty());
        node.heartbeat(&state, DaemonId(1), state.epoch, start + TIMEOUT / 2);
        let suspected = node.tick(&state, start + TIMEOUT);
        assert_eq!(
            suspected,
            vec![Command::DaemonOffline { id: DaemonId(2) }],
            "only the silent daemon, and only after a full timeout"
        );
    }
}
