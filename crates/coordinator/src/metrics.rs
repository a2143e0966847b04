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
        tessera_observe::metrics_response(&self.registry)
    }
}
