//! When tombstones may be collected: the leader's policy for the
//! configuration's tombstone horizon.
//!
//! A delete leaves a tombstone so that a region's version of a key only
//! grows. Once the *horizon* is H, daemons may collect every tombstone whose
//! version lies below epoch H's floor. That is safe when
//!
//! - no update issued before H is still in flight: every daemon reports,
//!   each collection round, the oldest epoch among the versions it holds
//!   pending or buffered (or its installed epoch), and H never passes the
//!   oldest report of an available daemon. An update in flight is pending
//!   at its point leader (or, after a failure, at the member that drives it
//!   now) from its creation until every replica acknowledged it, so it is
//!   always counted; one that only crashed daemons held is gone. So no
//!   update older than a collected tombstone can arrive after it — which
//!   a time bound alone cannot promise: an update blocked behind a region
//!   without replicas can wait far longer than any grace;
//! - every such version was issued in an epoch that ended at least the
//!   *grace* ago, so no client still retries an update those tombstones
//!   remember (a client's retries last seconds; updates carry the epoch of
//!   their first attempt, and a point leader refuses a retry from before
//!   the horizon that it cannot recognize);
//! - a point leader's next version of a collected key exceeds the tombstone
//!   anyway: a daemon that knows horizon H is in an epoch above H, whose
//!   floor exceeds every version issued before H;
//! - a daemon that returns with a stale copy of a region never keeps what
//!   the region no longer holds: a state transfer replaces every bucket it
//!   ships wholesale.
//!
//! So the leader remembers when it saw each epoch begin, and proposes as
//! horizon the newest epoch that began at least the grace ago. Daemons say
//! which epochs their uncollectable tombstones come from; when that is the
//! current epoch and it has lasted the grace, the leader moves the epoch so
//! that it can end (a stable cluster otherwise never would). All of this is
//! soft state: a new leader starts afresh, which only delays collection.

use crate::state::{ClusterState, Command};
use std::collections::BTreeMap;
use std::time::Duration;
use tessera_types::{DaemonId, DaemonState, Epoch};

/// How long after an epoch ends its tombstones may be collected, by
/// default: far longer than a client retries an update (10 s by default).
pub const TOMBSTONE_GRACE: Duration = Duration::from_secs(60);

/// Epoch start times remembered at most (older ones are implied by the
/// oldest kept, which only makes the horizon later).
const EPOCHS_REMEMBERED_MAX: usize = 1024;

#[derive(Clone, Debug)]
pub struct TombstonePolicy {
    grace: Duration,
    /// When this leader first saw each epoch (soft state).
    began: BTreeMap<Epoch, Duration>,
    /// The horizon daemons need to collect every tombstone they reported.
    wanted: Epoch,
    /// Per daemon, the oldest epoch it may have in flight, as it last
    /// reported.
    in_flight: BTreeMap<DaemonId, Epoch>,
}

impl TombstonePolicy {
    pub fn new(grace: Duration) -> TombstonePolicy {
        TombstonePolicy {
            grace,
            began: BTreeMap::new(),
            wanted: Epoch(0),
            in_flight: BTreeMap::new(),
        }
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// A new leadership: what the last one saw is unknown here.
    pub fn reset(&mut self) {
        self.began.clear();
        self.wanted = Epoch(0);
        self.in_flight.clear();
    }

    /// Daemon `id`'s collection round: it may have versions of epoch
    /// `in_flight_since` or later in flight, and holds tombstones written
    /// in `waiting` that it may not collect yet.
    pub fn report(&mut self, id: DaemonId, in_flight_since: Epoch, waiting: Option<Epoch>) {
        self.in_flight.insert(id, in_flight_since);
        if let Some(epoch) = waiting {
            self.wanted = self.wanted.max(Epoch(epoch.0.saturating_add(1)));
        }
    }

    /// The oldest epoch any available daemon may have in flight; `None`
    /// until every one has reported since this member began to lead.
    fn in_flight_since(&self, state: &ClusterState) -> Option<Epoch> {
        state
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .map(|d| self.in_flight.get(&d.id).copied())
            .try_fold(state.epoch, |oldest, reported| Some(oldest.min(reported?)))
    }

    /// The command to propose at `now`, if any.
    pub fn tick(&mut self, state: &ClusterState, now: Duration) -> Option<Command> {
        self.began.entry(state.epoch).or_insert(now);
        while self.began.len() > EPOCHS_REMEMBERED_MAX {
            self.began.pop_first();
        }
        if self.wanted <= state.tombstone_horizon {
            return None;
        }
        // Every version issued before an epoch that began `grace` ago was
        // issued at least that long ago.
        let settled = self
            .began
            .iter()
            .rev()
            .find(|(_, &at)| now.saturating_sub(at) >= self.grace)
            .map(|(&epoch, _)| epoch)?
            .min(self.in_flight_since(state)?);
        // Propose only what achieves something: a horizon that lets every
        // reported tombstone go, or the end of a current epoch that lasted
        // the grace (its own tombstones can go only once it ended). In a
        // cluster whose epochs move often anyway, waiting for them to age
        // costs no extra epochs.
        let enough = settled >= self.wanted || settled == state.epoch;
        (enough && settled > state.tombstone_horizon)
            .then_some(Command::AdvanceTombstoneHorizon { horizon: settled })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::CommandResult;

    const GRACE: Duration = Duration::from_secs(60);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Applies what the policy proposes, as the leader would.
    fn step(policy: &mut TombstonePolicy, state: &mut ClusterState, now: Duration) -> bool {
        match policy.tick(state, now) {
            Some(command) => {
                assert_eq!(state.apply(command), CommandResult::Done);
                true
            }
            None => false,
        }
    }

    /// A cluster of two available daemons, d1 and d2, at `epoch`.
    fn state_at(epoch: u64) -> ClusterState {
        let mut state = ClusterState::default();
        for i in 1..=2 {
            state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("d{i}:1"),
                metrics: None,
                installed: None,
            });
        }
        state.epoch = Epoch(epoch);
        state
    }

    /// Both daemons' reports of a round: nothing in flight before the
    /// current epoch, d1 keeping tombstones of `waiting`.
    fn round(policy: &mut TombstonePolicy, state: &ClusterState, waiting: Option<Epoch>) {
        policy.report(DaemonId(1), state.epoch, waiting);
        policy.report(DaemonId(2), state.epoch, None);
    }

    #[test]
    fn nothing_moves_while_no_daemon_waits() {
        let mut policy = TombstonePolicy::new(GRACE);
        let mut state = state_at(3);
        for t in 0..1000 {
            round(&mut policy, &state, None);
            assert!(!step(&mut policy, &mut state, secs(t)));
        }
        assert_eq!(state.epoch, Epoch(3));
    }

    /// Tombstones written in a stable epoch: the epoch ends once it lasted
    /// the grace, and they become collectable one grace after that — never
    /// earlier than a grace after the epoch they were written in ended.
    #[test]
    fn a_stable_epoch_is_ended_and_its_tombstones_collected_a_grace_later() {
        let mut policy = TombstonePolicy::new(GRACE);
        let mut state = state_at(5);
        assert!(!step(&mut policy, &mut state, secs(0)));
        let mut ended_at = None;
        for t in 1..=200 {
            // The daemons keep reporting; d1 keeps tombstones of epoch 5
            // until the horizon covers them.
            let waiting = (state.tombstone_horizon <= Epoch(5)).then_some(Epoch(5));
            round(&mut policy, &state, waiting);
            let before = state.epoch;
            step(&mut policy, &mut state, secs(t));
            if before == Epoch(5) && state.epoch == Epoch(6) {
                ended_at = Some(t);
            }
            if state.tombstone_horizon > Epoch(5) {
                let ended = ended_at.expect("epoch 5 ended before its tombstones went");
                assert!(
                    t >= ended + GRACE.as_secs(),
                    "collected {t}s, ended {ended}s"
                );
                assert_eq!(
                    ended,
                    GRACE.as_secs(),
                    "epoch 5 ends once it lasted the grace"
                );
                assert!(state.tombstone_horizon < state.epoch);
                return;
            }
        }
        panic!("tombstones of epoch 5 never became collectable: {state:?}");
    }

    /// Epochs the leader did not see begin count as beginning when it first
    /// looked: a new leader never proposes a horizon before its own grace.
    #[test]
    fn a_new_leader_waits_a_whole_grace() {
        let mut policy = TombstonePolicy::new(GRACE);
        let mut state = state_at(9);
        round(&mut policy, &state, Some(Epoch(2)));
        assert!(!step(&mut policy, &mut state, secs(1000)));
        assert!(!step(&mut policy, &mut state, secs(1000 + 59)));
        assert!(step(&mut policy, &mut state, secs(1000 + 60)));
        assert_eq!(state.tombstone_horizon, Epoch(9));
        policy.reset();
        round(&mut policy, &state, Some(Epoch(10)));
        assert!(!step(&mut policy, &mut state, secs(2000)));
        assert!(!step(&mut policy, &mut state, secs(2059)));
        assert!(step(&mut policy, &mut state, secs(2060)));
    }

    /// An update still in flight from an old epoch holds the horizon below
    /// it, however old it is; so does a daemon that has not reported.
    #[test]
    fn the_horizon_waits_for_updates_in_flight_and_for_every_report() {
        let mut policy = TombstonePolicy::new(GRACE);
        let mut state = state_at(7);
        policy.report(DaemonId(1), Epoch(7), Some(Epoch(6)));
        assert!(!step(&mut policy, &mut state, secs(0)));
        assert!(
            !step(&mut policy, &mut state, secs(500)),
            "d2 never reported: it may hold anything"
        );
        // d2 drives an update from epoch 3 that a region without replicas
        // blocked: no horizon that covers the tombstones of epoch 6 may be
        // set, however long it takes.
        for t in 501..2000 {
            policy.report(DaemonId(2), Epoch(3), None);
            step(&mut policy, &mut state, secs(t));
            assert!(state.tombstone_horizon <= Epoch(3), "at {t}s");
        }
        // It completes: the horizon moves on.
        round(&mut policy, &state, Some(Epoch(6)));
        assert!(step(&mut policy, &mut state, secs(2000)));
        assert!(state.tombstone_horizon >= Epoch(7));
    }

    /// The state machine refuses a horizon beyond the current epoch, and
    /// applies a repeated proposal once.
    #[test]
    fn the_state_machine_keeps_the_horizon_below_the_epoch() {
        let mut state = state_at(4);
        let refused = state.apply(Command::AdvanceTombstoneHorizon { horizon: Epoch(5) });
        assert!(matches!(refused, CommandResult::Failed { .. }));
        assert_eq!(state.epoch, Epoch(4));
        state.apply(Command::AdvanceTombstoneHorizon { horizon: Epoch(4) });
        assert_eq!((state.epoch, state.tombstone_horizon), (Epoch(5), Epoch(4)));
        state.apply(Command::AdvanceTombstoneHorizon { horizon: Epoch(4) });
        assert_eq!(state.epoch, Epoch(5), "a repeated proposal changes nothing");
        assert!(state.check_invariants().is_ok());
    }
}
