//! Failure detection: which daemons the leader has not heard from in time.
//!
//! Soft state, kept only by the leader and never written to the Raft log:
//! when each daemon last sent a heartbeat and which epoch it reported. Time
//! comes in as a parameter (`now`, the time since an origin the caller
//! chooses: a member's start, or the simulator's zero), so the logic is
//! tested, and simulated, without clocks.
//!
//! ```text
//!   heartbeat(d, epoch, now) ──▶ last[d] = now, epoch[d] = epoch
//!   suspects(now, state)     ──▶ Available d with now - max(last[d], since[d]) >= timeout
//! ```
//!
//! `since[d]` is when the detector started watching `d` as Available: the
//! moment this member became leader, or the moment it first saw `d`
//! Available (a new or returning daemon). Either way every daemon gets one
//! full timeout of grace before it can be suspected, so a new leader does
//! not declare failed the daemons that were heartbeating to its predecessor.
//!
//! The detector counts only silence it was awake to hear. A leader that was
//! itself frozen or starved (a stalled VM, SIGSTOP, a runtime too busy to
//! poll it) for more than half the timeout between two checks has heard
//! nothing meanwhile, though heartbeats may be waiting unread in its
//! sockets; the next check moves every daemon's last heartbeat forward by
//! that gap instead of taking the whole cluster offline.

use crate::state::ClusterState;
use std::collections::BTreeMap;
use std::time::Duration;
use tessera_types::{DaemonId, DaemonState, Epoch};

/// What the detector remembers of one daemon.
#[derive(Clone, Copy, Debug)]
struct Watch {
    /// The last heartbeat, or when watching began, whichever is later.
    heard: Duration,
    /// The epoch of the last heartbeat, if any since watching began.
    epoch: Option<Epoch>,
    /// Whether the daemon was Available when last looked at.
    available: bool,
}

/// The leader's heartbeat bookkeeping. Inactive (suspects nobody) until
/// [`FailureDetector::lead`] is called.
#[derive(Clone, Debug)]
pub struct FailureDetector {
    timeout: Duration,
    /// The Raft term this member leads in, if it leads.
    leading: Option<u64>,
    watches: BTreeMap<DaemonId, Watch>,
    /// When [`Self::suspects`] last ran while leading.
    checked: Option<Duration>,
}

impl FailureDetector {
    /// A detector that suspects a daemon silent for `timeout`.
    pub fn new(timeout: Duration) -> FailureDetector {
        FailureDetector {
            timeout,
            leading: None,
            watches: BTreeMap::new(),
            checked: None,
        }
    }

    /// The failure timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// This member leads in `term`. When that is news (it did not lead, or
    /// led in another term), forget everything heard before: it may be
    /// stale. Watches start afresh on first sight, in [`Self::suspects`] or
    /// [`Self::on_heartbeat`], so every daemon gets a full timeout of grace.
    /// Returns whether leadership began now.
    pub fn lead(&mut self, term: u64) -> bool {
        if self.leading == Some(term) {
            return false;
        }
        self.leading = Some(term);
        self.watches.clear();
        self.checked = None;
        true
    }

    /// This member does not lead: stop suspecting anyone.
    pub fn follow(&mut self) {
        self.leading = None;
        self.watches.clear();
        self.checked = None;
    }

    /// Whether this member acts as leader.
    pub fn is_leading(&self) -> bool {
        self.leading.is_some()
    }

    /// A heartbeat from `id`, which has installed `epoch`.
    pub fn on_heartbeat(&mut self, id: DaemonId, epoch: Epoch, now: Duration) {
        let watch = self.watches.entry(id).or_insert(Watch {
            heard: now,
            epoch: None,
            available: false,
        });
        watch.heard = watch.heard.max(now);
        watch.epoch = Some(epoch);
    }

    /// The Available daemons silent for the timeout, by id. Starts watching
    /// daemons that became Available since the last call (their grace begins
    /// now) and drops daemons the state no longer knows.
    pub fn suspects(&mut self, now: Duration, state: &ClusterState) -> Vec<DaemonId> {
        if self.leading.is_none() {
            return Vec::new();
        }
        self.watches.retain(|id, _| state.daemons.contains_key(id));
        if let Some(last) = self.checked.replace(now) {
            let gap = now.saturating_sub(last);
            if gap > self.timeout / 2 {
                // This detector did not run for `gap`: what it did not
                // hear meanwhile says nothing of the daemons.
                for watch in self.watches.values_mut() {
                    watch.heard = (watch.heard + gap).min(now);
                }
            }
        }
        let mut suspects = Vec::new();
        for (id, info) in &state.daemons {
            let available = info.state == DaemonState::Available;
            let watch = self.watches.entry(*id).or_insert(Watch {
                heard: now,
                epoch: None,
                available,
            });
            if available && !watch.available {
                // Back from Offline (or first seen): a fresh grace period,
                // whatever was heard before it went away.
                watch.heard = watch.heard.max(now);
            }
            watch.available = available;
            if available && now.saturating_sub(watch.heard) >= self.timeout {
                suspects.push(*id);
            }
        }
        suspects
    }

    /// How long `id` has been silent at `now`: since its last heartbeat,
    /// or since watching began (a new leader's grace). None while this
    /// member does not lead or does not watch `id` yet.
    pub fn silent_for(&self, id: DaemonId, now: Duration) -> Option<Duration> {
        self.leading?;
        let watch = self.watches.get(&id)?;
        Some(now.saturating_sub(watch.heard))
    }

    /// The Available daemons whose last heartbeat did not report `state`'s
    /// epoch (including those not heard from since this member leads).
    pub fn lagging(&self, state: &ClusterState) -> Vec<DaemonId> {
        state
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .filter(|d| self.watches.get(&d.id).and_then(|w| w.epoch) != Some(state.epoch))
            .map(|d| d.id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Command;

    const TIMEOUT: Duration = Duration::from_secs(2);

    fn state_with(n: usize) -> ClusterState {
        let mut state = ClusterState::default();
        for i in 0..n {
            state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("d{i}:1"),
                metrics: None,
                installed: None,
            });
        }
        state
    }

    fn ms(t0: Duration, ms: u64) -> Duration {
        t0 + Duration::from_millis(ms)
    }

    /// Every 200 ms after `from` up to `to`, as the leader's loop runs:
    /// a heartbeat from each daemon of `alive`, then a check. Returns the
    /// last check's suspects.
    fn check_until(
        fd: &mut FailureDetector,
        state: &ClusterState,
        alive: &[DaemonId],
        from: Duration,
        to: Duration,
    ) -> Vec<DaemonId> {
        let step = Duration::from_millis(200);
        let mut at = from;
        loop {
            at = (at + step).min(to);
            for &id in alive {
                fd.on_heartbeat(id, state.epoch, at);
            }
            let suspects = fd.suspects(at, state);
            if at == to {
                return suspects;
            }
        }
    }

    #[test]
    fn a_follower_suspects_nobody() {
        let state = state_with(2);
        let t0 = Duration::from_secs(1_000);
        let mut fd = FailureDetector::new(TIMEOUT);
        assert!(fd.suspects(t0, &state).is_empty());
        assert!(fd.suspects(ms(t0, 60_000), &state).is_empty());
    }

    #[test]
    fn silence_past_the_timeout_is_suspected_heartbeats_are_not() {
        let state = state_with(3);
        let t0 = Duration::from_secs(1_000);
        let mut fd = FailureDetector::new(TIMEOUT);
        fd.lead(1);
        assert!(
            fd.suspects(t0, &state).is_empty(),
            "grace after taking over"
        );
        for t in (500..=3000).step_by(500) {
            fd.on_heartbeat(DaemonId(1), state.epoch, ms(t0, t));
            fd.on_heartbeat(DaemonId(3), state.epoch, ms(t0, t));
            let suspects = fd.suspects(ms(t0, t), &state);
            if t < 2000 {
                assert!(suspects.is_empty(), "t = {t}");
            } else {
                assert_eq!(suspects, vec![DaemonId(2)], "t = {t}");
            }
        }
        // Just under the timeout after the last heartbeat: still fine.
        assert_eq!(
            check_until(&mut fd, &state, &[], ms(t0, 3000), ms(t0, 4999)),
            vec![DaemonId(2)]
        );
        assert_eq!(
            fd.suspects(ms(t0, 5000), &state),
            vec![DaemonId(1), DaemonId(2), DaemonId(3)]
        );
    }

    #[test]
    fn a_new_leader_gives_a_full_timeout_of_grace() {
        let state = state_with(1);
        let t0 = Duration::from_secs(1_000);
        let mut fd = FailureDetector::new(TIMEOUT);
        assert!(fd.lead(1));
        fd.on_heartbeat(DaemonId(1), state.epoch, t0);
        assert!(!fd.lead(1), "same term: nothing new");
        fd.follow();
        // Leads again much later: the old heartbeat does not count against it.
        let t1 = ms(t0, 10_000);
        assert!(fd.lead(3));
        assert!(fd.suspects(t1, &state).is_empty());
        assert!(check_until(&mut fd, &state, &[], t1, ms(t1, 1999)).is_empty());
        assert_eq!(fd.suspects(ms(t1, 2000), &state), vec![DaemonId(1)]);
    }

    #[test]
    fn offline_daemons_are_not_suspected_and_get_grace_when_back() {
        let mut state = state_with(2);
        let t0 = Duration::from_secs(1_000);
        let d1 = [DaemonId(1)];
        let mut fd = FailureDetector::new(TIMEOUT);
        fd.lead(1);
        fd.suspects(t0, &state);
        state.apply(Command::DaemonOffline { id: DaemonId(2) });
        assert!(check_until(&mut fd, &state, &d1, t0, ms(t0, 4800)).is_empty());
        // d2 comes back at 5 s: grace from when the detector sees it.
        state.apply(Command::RegisterDaemon {
            id: Some(DaemonId(2)),
            addr: "d1:1".into(),
            metrics: None,
            installed: None,
        });
        assert!(check_until(&mut fd, &state, &d1, ms(t0, 4800), ms(t0, 6800)).is_empty());
        assert_eq!(
            check_until(&mut fd, &state, &d1, ms(t0, 6800), ms(t0, 7000)),
            vec![DaemonId(2)]
        );
    }

    #[test]
    fn a_detector_that_did_not_run_counts_only_the_silence_it_heard() {
        let state = state_with(2);
        let t0 = Duration::from_secs(1_000);
        let (both, d1) = ([DaemonId(1), DaemonId(2)], [DaemonId(1)]);
        let mut fd = FailureDetector::new(TIMEOUT);
        fd.lead(1);
        assert!(fd.suspects(t0, &state).is_empty());
        // Both heartbeat until 1 s; then d2 stops for good, and the
        // detector hears its silence for 1 s.
        assert!(check_until(&mut fd, &state, &both, t0, ms(t0, 1000)).is_empty());
        assert!(check_until(&mut fd, &state, &d1, ms(t0, 1000), ms(t0, 2000)).is_empty());
        // The leader stalls for 5 s: on waking, nobody is suspected,
        // though both were last heard 5 s or more ago.
        assert!(fd.suspects(ms(t0, 7000), &state).is_empty());
        // d1's heartbeats (queued meanwhile) are read; d2 sends none, and
        // is suspected after one more second of silence heard.
        assert!(check_until(&mut fd, &state, &d1, ms(t0, 7000), ms(t0, 7999)).is_empty());
        assert_eq!(
            check_until(&mut fd, &state, &d1, ms(t0, 7999), ms(t0, 8000)),
            vec![DaemonId(2)]
        );
        // A gap of under half the timeout is ordinary scheduling: counted.
        let mut fd = FailureDetector::new(TIMEOUT);
        fd.lead(2);
        assert!(fd.suspects(t0, &state).is_empty());
        fd.on_heartbeat(DaemonId(1), state.epoch, ms(t0, 900));
        assert!(fd.suspects(ms(t0, 900), &state).is_empty());
        assert!(fd.suspects(ms(t0, 1800), &state).is_empty());
        assert_eq!(fd.suspects(ms(t0, 2700), &state), vec![DaemonId(2)]);
    }

    #[test]
    fn forgotten_daemons_are_dropped() {
        let mut state = state_with(2);
        let t0 = Duration::from_secs(1_000);
        let mut fd = FailureDetector::new(TIMEOUT);
        fd.lead(1);
        assert!(fd.suspects(t0, &state).is_empty());
        fd.on_heartbeat(DaemonId(2), state.epoch, t0);
        state.apply(Command::ServerForget { id: DaemonId(2) });
        assert_eq!(
            check_until(&mut fd, &state, &[], t0, ms(t0, 3000)),
            vec![DaemonId(1)]
        );
        assert!(!fd.watches.contains_key(&DaemonId(2)));
    }

    #[test]
    fn lagging_lists_available_daemons_behind_the_epoch() {
        let mut state = state_with(3);
        let t0 = Duration::from_secs(1_000);
        let mut fd = FailureDetector::new(TIMEOUT);
        fd.lead(1);
        assert_eq!(fd.lagging(&state).len(), 3, "nobody heard yet");
        fd.on_heartbeat(DaemonId(1), state.epoch, t0);
        fd.on_heartbeat(DaemonId(2), Epoch(state.epoch.0 - 1), t0);
        assert_eq!(fd.lagging(&state), vec![DaemonId(2), DaemonId(3)]);
        state.apply(Command::ServerOffline { id: DaemonId(3) });
        // The epoch moved: d1 lags now too; d3 is offline and not counted.
        assert_eq!(fd.lagging(&state), vec![DaemonId(1), DaemonId(2)]);
        fd.on_heartbeat(DaemonId(1), state.epoch, t0);
        fd.on_heartbeat(DaemonId(2), state.epoch, t0);
        assert!(fd.lagging(&state).is_empty());
    }
}
