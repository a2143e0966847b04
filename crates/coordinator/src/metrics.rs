//! What a coordinator member serves at `/metrics`: its Raft state, the
//! configuration's epoch, how often the epoch moved, the daemons by state
//! and the leader's failure detections.
//!
//! Most values are read when scraped (from openraft's metrics and the
//! applied [`ClusterState`]); only failure detections are counted as they
//! happen, by the shell that proposes them. Nothing here is replicated:
//! each member reports what it sees.

use crate::state::ClusterState;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use tessera_observe::set_gauge;
use tessera_types::DaemonState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// A layout part that is being built, named by its space and part id.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartLabel {
    space: String,
    part: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Why the leader took a daemon offline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Detection {
    /// No heartbeat within the failure timeout.
    Silent,
    /// Reported unreachable by enough sources.
    Unreachable,
    /// It asked to leave (its storage failed).
    Leave,
}

impl Detection {
    fn name(self) -> &'static str {
        match self {
            Detection::Silent => "silent",
            Detection::Unreachable => "unreachable",
            Detection::Leave => "leave",
        }
    }
}

/// Raft roles, in the order openraft's `ServerState` lists them.
const ROLES: [&str; 5] = ["learner", "follower", "candidate", "leader", "shutdown"];

/// One member's metrics.
pub(crate) struct CoordinatorMetrics {
    registry: Registry,
    raft_role: Family<RoleLabel, Gauge>,
    raft_term: Gauge,
    raft_last_log_index: Gauge,
    raft_applied_index: Gauge,
    raft_members: Gauge,
    epoch: Gauge,
    epoch_changes: Counter,
    /// The epoch at the last scrape (at start before the first), to count
    /// changes since.
    epoch_seen: AtomicU64,
    daemons: Family<StateLabel, Gauge>,
    transfers: Gauge,
    spaces: Gauge,
    /// Percent done of each part being built (a backfill), as the
    /// configuration records it; parts that are not building are absent.
    building: Family<PartLabel, Gauge>,
    detections: Family<ReasonLabel, Counter>,
}

/// What a scrape reads of openraft's metrics.
pub(crate) struct RaftView {
    /// openraft's `ServerState`, as `Debug` prints it.
    pub role: String,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub members: usize,
}

impl CoordinatorMetrics {
    /// Metrics of a member that starts at `epoch`.
    pub fn new(epoch: tessera_types::Epoch) -> CoordinatorMetrics {
        let mut m = CoordinatorMetrics {
            registry: Registry::with_prefix("tessera_coordinator"),
            raft_role: Family::default(),
            raft_term: Gauge::default(),
            raft_last_log_index: Gauge::default(),
            raft_applied_index: Gauge::default(),
            raft_members: Gauge::default(),
            epoch: Gauge::default(),
            epoch_changes: Counter::default(),
            epoch_seen: AtomicU64::new(epoch.0),
            daemons: Family::default(),
            transfers: Gauge::default(),
            spaces: Gauge::default(),
            building: Family::default(),
            detections: Family::default(),
        };
        let r = &mut m.registry;
        r.register(
            "raft_role",
            "1 for this member's Raft role (learner, follower, candidate, leader, shutdown), 0 for the others",
            m.raft_role.clone(),
        );
        r.register(
            "raft_term",
            "This member's current Raft term",
            m.raft_term.clone(),
        );
        r.register(
            "raft_last_log_index",
            "Index of the last entry in this member's Raft log",
            m.raft_last_log_index.clone(),
        );
        r.register(
            "raft_applied_index",
            "Index of the last committed entry this member applied (it trails the commit index only while applying)",
            m.raft_applied_index.clone(),
        );
        r.register(
            "raft_members",
            "Members of the coordinator group (voters and learners)",
            m.raft_members.clone(),
        );
        r.register(
            "epoch",
            "The configuration's epoch as this member applied it",
            m.epoch.clone(),
        );
        r.register(
            "epoch_changes",
            "Epochs this member applied since it started",
            m.epoch_changes.clone(),
        );
        r.register(
            "daemons",
            "Daemons in the configuration, by state",
            m.daemons.clone(),
        );
        r.register(
            "transfers",
            "State transfers in progress",
            m.transfers.clone(),
        );
        r.register("spaces", "Spaces in the configuration", m.spaces.clone());
        r.register(
            "part_building_percent",
            "Progress of each layout part being built (backfilled), by space and part",
            m.building.clone(),
        );
        r.register(
            "failure_detections",
            "Daemons this member, as leader, took offline, by reason (silent, unreachable, leave)",
            m.detections.clone(),
        );
        for role in ROLES {
            m.raft_role.get_or_create(&RoleLabel { role }).set(0);
        }
        m
    }

    /// The leader took a daemon offline for `why`.
    pub fn detected(&self, why: Detection) {
        self.detections
            .get_or_create(&ReasonLabel { reason: why.name() })
            .inc();
    }

    /// Reads the member's state into the gauges and encodes them.
    pub fn render(&self, raft: &RaftView, state: &ClusterState) -> tessera_observe::http::Response {
        let role = raft.role.to_ascii_lowercase();
        for known in ROLES {
            let value = i64::from(role == known);
            self.raft_role
                .get_or_create(&RoleLabel { role: known })
                .set(value);
        }
        set_gauge(&self.raft_term, raft.term);
        set_gauge(&self.raft_last_log_index, raft.last_log_index.unwrap_or(0));
        set_gauge(&self.raft_applied_index, raft.applied_index.unwrap_or(0));
        set_gauge(&self.raft_members, raft.members as u64);
        let epoch = state.epoch.0;
        set_gauge(&self.epoch, epoch);
        let seen = self.epoch_seen.swap(epoch, Ordering::Relaxed);
        // Scrapes race only with each other; the loser of a race counts
        // nothing, and the next scrape counts what it missed.
        if epoch > seen {
            self.epoch_changes.inc_by(epoch - seen);
        }
        let available = state
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .count();
        let offline = state.daemons.len() - available;
        set_gauge(
            &self
                .daemons
                .get_or_create(&StateLabel { state: "available" }),
            available as u64,
        );
        set_gauge(
            &self.daemons.get_or_create(&StateLabel { state: "offline" }),
            offline as u64,
        );
        set_gauge(&self.transfers, state.transfers.len() as u64);
        set_gauge(&self.spaces, state.spaces.len() as u64);
        self.building.clear();
        for space in &state.spaces {
            for part in space.parts() {
                if let tessera_types::PartState::Building { progress } = part.state {
                    let label = PartLabel {
                        space: space.desc.name.clone(),
                        part: part.id.0,
                    };
                    set_gauge(&self.building.get_or_create(&label), u64::from(progress));
                }
            }
        }
        tessera_observe::metrics_response(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Command, CommandResult};

    fn page(metrics: &CoordinatorMetrics, state: &ClusterState) -> String {
        let raft = RaftView {
            role: "Leader".into(),
            term: 1,
            last_log_index: Some(1),
            applied_index: Some(1),
            members: 1,
        };
        metrics.render(&raft, state).body
    }

    /// A part being built shows its progress; once ready it is gone.
    #[test]
    fn building_parts_show_their_progress_until_ready() {
        let mut state = ClusterState::default();
        for i in 0..2 {
            let registered = state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("127.0.0.1:{}", 4000 + i),
                metrics: None,
                installed: None,
            });
            assert!(matches!(registered, CommandResult::Registered { .. }));
        }
        let added = state.apply(Command::AddSpace {
            description: "space s key k attributes int a".into(),
        });
        assert!(
            matches!(added, CommandResult::SpaceAdded { .. }),
            "{added:?}"
        );
        let metrics = CoordinatorMetrics::new(state.epoch);
        assert!(!page(&metrics, &state).contains("part_building_percent{"));
        let subspace = state.apply(Command::AddSubspace {
            space: "s".into(),
            attrs: vec!["a".into()],
        });
        let CommandResult::PartAdded { part } = subspace else {
            panic!("add-subspace refused: {subspace:?}");
        };
        if let Some(tessera_types::PartState::Building { progress }) =
            state.spaces[0].part_state_mut(part)
        {
            *progress = 37;
        }
        let text = page(&metrics, &state);
        let line = format!(
            "tessera_coordinator_part_building_percent{{space=\"s\",part=\"{}\"}} 37",
            part.0
        );
        assert!(text.contains(&line), "{text}");
        *state.spaces[0].part_state_mut(part).expect("part") = tessera_types::PartState::Ready;
        assert!(!page(&metrics, &state).contains("part_building_percent{"));
    }
}
