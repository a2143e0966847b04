//! How often one reporter tells the coordinator that a daemon is
//! unreachable ([`crate::CoordRequest::Unreachable`]): daemons about their
//! peers and clients about daemons use the same limit, and the coordinator
//! leader limits its own probes of a reported daemon the same way.

use std::collections::HashMap;
use std::time::Duration;
use tessera_types::DaemonId;

/// One reporter reports one daemon at most this often.
pub const UNREACHABLE_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// When each daemon was last reported; times are the caller's (`now`, from
/// any origin it keeps fixed). By default, at most once per
/// [`UNREACHABLE_REPORT_INTERVAL`].
#[derive(Clone, Debug)]
pub struct ReportLimit {
    interval: Duration,
    last: HashMap<DaemonId, Duration>,
}

impl Default for ReportLimit {
    fn default() -> Self {
        ReportLimit::every(UNREACHABLE_REPORT_INTERVAL)
    }
}

impl ReportLimit {
    /// Each daemon at most once per `interval`.
    pub fn every(interval: Duration) -> ReportLimit {
        ReportLimit {
            interval,
            last: HashMap::new(),
        }
    }

    /// Whether to report `daemon` at `now`; if so, the report is counted.
    pub fn allow(&mut self, daemon: DaemonId, now: Duration) -> bool {
        if self
            .last
            .get(&daemon)
            .is_some_and(|at| now < *at + self.interval)
        {
            return false;
        }
        self.last.insert(daemon, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_daemon_at_most_once_per_interval() {
        let mut limit = ReportLimit::default();
        let t = Duration::from_secs(5);
        assert!(limit.allow(DaemonId(1), t));
        assert!(!limit.allow(DaemonId(1), t + UNREACHABLE_REPORT_INTERVAL / 2));
        assert!(limit.allow(DaemonId(2), t), "another daemon is its own");
        assert!(limit.allow(DaemonId(1), t + UNREACHABLE_REPORT_INTERVAL));
    }
}
