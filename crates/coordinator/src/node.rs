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
use std::time::Duration;
use tessera_protocol::{HeartbeatAnswer, LeaveReason, StopReason};
use tessera_types::{DaemonId, DaemonState, Epoch};

/// The leader's side of the daemon protocol.
#[derive(Clone, Debug)]
pub struct CoordinatorNode {
    detector: FailureDetector,
}

impl CoordinatorNode {
    /// A node that takes a daemon offline after `failure_timeout` without
    /// a heartbeat (once it leads).
    pub fn new(failure_timeout: Duration) -> CoordinatorNode {
        CoordinatorNode {
            detector: FailureDetector::new(failure_timeout),
        }
    }

    pub fn failure_timeout(&self) -> Duration {
        self.detector.timeout()
    }

    /// This member leads in `term`; true when that began now (the detector
    /// then starts afresh: every daemon gets a full timeout of grace).
    pub fn lead(&mut self, term: u64) -> bool {
        self.detector.lead(term)
    }

    /// This member does not lead: it suspects nobody.
    pub fn follow(&mut self) {
        self.detector.follow();
    }

    pub fn is_leading(&self) -> bool {
        self.detector.is_leading()
    }

    /// A heartbeat from daemon `id`, which has installed `epoch`, at `now`.
    ///
    /// | the daemon is | answer |
    /// | --- | --- |
    /// | killed, or unknown (forgotten) | `Stop` |
    /// | Offline, taken out by an operator | `HeldOffline` |
    /// | Offline, taken out by the detector (or it left) | `Offline`: register again |
    /// | Available, but it left a chain in an epoch it has not installed | `NoLeaseUntil` |
    /// | Available | `Renewed` |
    pub fn heartbeat(
        &mut self,
        state: &ClusterState,
        id: DaemonId,
        epoch: Epoch,
        now: Duration,
    ) -> HeartbeatAnswer {
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
        match state.left_chain_at.get(&id) {
            // Alive (so not suspected), but it may still act on chain
            // places it no longer holds: no lease until it catches up.
            Some(&left) if epoch < left => HeartbeatAnswer::NoLeaseUntil { epoch: left },
            _ => HeartbeatAnswer::Renewed,
        }
    }

    /// Time passes: the commands the leader should propose now, one
    /// `DaemonOffline` per Available daemon silent for the failure timeout.
    pub fn tick(&mut self, state: &ClusterState, now: Duration) -> Vec<Command> {
        self.detector
            .suspects(now, state)
            .into_iter()
            .map(|id| Command::DaemonOffline { id })
            .collect()
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
