//! The daemon's side of the heartbeat protocol: its lease, asking to come
//! back after being taken offline while alive, and leaving when poisoned.

use super::{lock, DaemonNode, Out, Output, Stopping, LEASE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tessera_protocol::{CoordRequest, CoordResponse, HeartbeatAnswer, LeaveReason, StopReason};

/// The first pause between two requests to come back after being taken
/// offline; it doubles with each one up to [`REJOIN_BACKOFF_MAX`].
const REJOIN_BACKOFF_MIN: Duration = Duration::from_secs(1);
const REJOIN_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Serving this long without being taken offline resets the backoff.
const REJOIN_BACKOFF_RESET: Duration = Duration::from_secs(60);

/// Whether this daemon may serve clients, from the heartbeats the
/// coordinator answered. Times are the driver's (`now`) in milliseconds,
/// plus one, so that 0 means "never". The answer to the heartbeat sent
/// last decides, however the answers are ordered on their way back.
pub(super) struct Lease {
    /// When the newest heartbeat answered `Renewed` was sent.
    pub(super) renewed_ms: AtomicU64,
    /// When the newest heartbeat answered without a lease was sent.
    pub(super) refused_ms: AtomicU64,
}

impl Lease {
    pub(super) fn renew(&self, sent: Duration) {
        self.renewed_ms
            .fetch_max(millis(sent) + 1, Ordering::AcqRel);
    }

    fn refuse(&self, sent: Duration) {
        self.refused_ms
            .fetch_max(millis(sent) + 1, Ordering::AcqRel);
    }

    pub(super) fn valid(&self, now: Duration) -> bool {
        let renewed = self.renewed_ms.load(Ordering::Acquire);
        let refused = self.refused_ms.load(Ordering::Acquire);
        renewed > refused && millis(now) + 1 < renewed + millis(LEASE)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// When this daemon last asked to come back, and how long to wait before
/// asking again.
#[derive(Debug)]
pub(super) struct Rejoin {
    last: Option<Duration>,
    backoff: Duration,
}

impl Rejoin {
    pub(super) fn new() -> Rejoin {
        Rejoin {
            last: None,
            backoff: REJOIN_BACKOFF_MIN,
        }
    }

    /// Taken offline while alive, at `now`: whether to ask to come back
    /// now (then the next ask waits twice as long, up to the maximum).
    fn ask(&mut self, now: Duration) -> bool {
        if let Some(last) = self.last {
            if now < last + self.backoff {
                return false;
            }
            self.backoff = (self.backoff * 2).min(REJOIN_BACKOFF_MAX);
        }
        self.last = Some(now);
        true
    }

    /// A lease renewed at `now`: serving a while since the last ask
    /// forgives the backoff.
    fn renewed(&mut self, now: Duration) {
        if self
            .last
            .is_some_and(|last| now >= last + REJOIN_BACKOFF_RESET)
        {
            self.backoff = REJOIN_BACKOFF_MIN;
        }
    }
}

impl DaemonNode {
    /// The request the driver sends the coordinator every
    /// [`HEARTBEAT_INTERVAL`]: a heartbeat, or, once poisoned, a request to
    /// leave every chain.
    pub fn heartbeat(&self) -> CoordRequest {
        if self.poisoned() {
            CoordRequest::Leave {
                id: self.me,
                reason: LeaveReason::CannotPersist,
            }
        } else {
            CoordRequest::Heartbeat {
                id: self.me,
                epoch: self.config().epoch,
            }
        }
    }

    /// The coordinator answered `request`, which left at `sent`.
    pub fn on_coord_answer(
        &self,
        request: &CoordRequest,
        sent: Duration,
        response: CoordResponse,
        now: Duration,
        out: Out<'_>,
    ) {
        match (request, response) {
            (CoordRequest::Heartbeat { .. }, CoordResponse::Heartbeat(answer)) => {
                self.on_heartbeat_answer(answer, sent, now, out)
            }
            (CoordRequest::Leave { .. }, CoordResponse::Done) => {
                tracing::error!("the coordinator took this daemon out of every chain; stopping");
                out(Output::Stop(Stopping::CannotPersist));
            }
            (CoordRequest::RegisterDaemon { .. }, CoordResponse::Registered { id })
                if id != self.me =>
            {
                // Our id was forgotten meanwhile: this process is no longer
                // the daemon it was.
                out(Output::Stop(Stopping::Told(StopReason::Unknown)));
            }
            (CoordRequest::TransferComplete { transfer }, CoordResponse::Done) => {
                tracing::info!(transfer, "state transfer: caught up");
            }
            (request, response) => {
                tracing::debug!(?request, ?response, "coordinator answer");
            }
        }
    }

    fn on_heartbeat_answer(
        &self,
        answer: HeartbeatAnswer,
        sent: Duration,
        now: Duration,
        out: Out<'_>,
    ) {
        match answer {
            HeartbeatAnswer::Renewed => {
                self.lease.renew(sent);
                lock(&self.rejoin).renewed(now);
            }
            HeartbeatAnswer::NoLeaseUntil { .. } | HeartbeatAnswer::HeldOffline => {
                self.lease.refuse(sent)
            }
            HeartbeatAnswer::Offline => {
                self.lease.refuse(sent);
                if self.poisoned() {
                    return;
                }
                if !lock(&self.rejoin).ask(now) {
                    return;
                }
                tracing::warn!(
                    "the coordinator took this daemon offline while it was alive; asking to rejoin"
                );
                out(Output::Coord(CoordRequest::RegisterDaemon {
                    id: Some(self.me),
                    addr: self.options.addr.clone(),
                    metrics: self.options.metrics.clone(),
                    // Unreadable: unknown, which the coordinator takes as
                    // "may have acted" (the disk's failure poisons the node
                    // where it matters, on a write).
                    installed: super::installed_epoch(self.engine()).ok().flatten(),
                }));
            }
            HeartbeatAnswer::Stop(reason) => {
                self.lease.refuse(sent);
                out(Output::Stop(Stopping::Told(reason)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn lease() -> Lease {
        Lease {
            renewed_ms: AtomicU64::new(0),
            refused_ms: AtomicU64::new(0),
        }
    }

    #[test]
    fn a_lease_lasts_one_lease_from_the_send_of_the_renewing_heartbeat() {
        let l = lease();
        assert!(!l.valid(ms(0)), "never renewed: no lease");
        l.renew(ms(1_000));
        assert!(l.valid(ms(1_000)));
        assert!(l.valid(ms(1_000) + LEASE - ms(1)));
        assert!(!l.valid(ms(1_000) + LEASE));
        // A late answer to an older heartbeat does not move it back.
        l.renew(ms(500));
        assert!(l.valid(ms(1_000) + LEASE - ms(1)));
    }

    #[test]
    fn the_answer_to_the_heartbeat_sent_last_decides() {
        let l = lease();
        l.renew(ms(1_000));
        // The heartbeat sent at 1.5 s was refused: no lease, although the
        // one from 1 s was renewed and has not run out.
        l.refuse(ms(1_500));
        assert!(!l.valid(ms(1_600)));
        // A renewal of an older heartbeat, arriving late, changes nothing.
        l.renew(ms(1_200));
        assert!(!l.valid(ms(1_600)));
        // A newer one restores it.
        l.renew(ms(1_700));
        assert!(l.valid(ms(1_800)));
    }

    #[test]
    fn asking_to_come_back_backs_off_doubling_and_resets_after_serving() {
        let mut r = Rejoin::new();
        assert!(r.ask(ms(10_000)), "the first time at once");
        assert!(!r.ask(ms(10_500)), "not again within the first pause");
        let mut at = ms(10_000);
        let mut pause = REJOIN_BACKOFF_MIN;
        let mut asks = Vec::new();
        for t in (10_001..200_000).step_by(100) {
            if r.ask(ms(t)) {
                asks.push(ms(t) - at);
                at = ms(t);
            }
        }
        // Each pause is at least the one before doubled, capped.
        for gap in &asks {
            assert!(*gap >= pause, "asked after {gap:?}, before {pause:?}");
            assert!(*gap < pause + ms(101));
            pause = (pause * 2).min(REJOIN_BACKOFF_MAX);
        }
        assert!(asks.len() >= 5);
        assert_eq!(r.backoff, REJOIN_BACKOFF_MAX);
        // Serving for a while since the last ask forgives the backoff.
        r.renewed(at + REJOIN_BACKOFF_RESET - ms(1));
        assert_eq!(r.backoff, REJOIN_BACKOFF_MAX);
        r.renewed(at + REJOIN_BACKOFF_RESET);
        assert_eq!(r.backoff, REJOIN_BACKOFF_MIN);
    }
}
