//! How often one reporter tells the coordinator that a daemon is
//! unreachable ([`crate::CoordRequest::Unreachable`]): daemons about their
//! peers and clients about daemons use the same limit.

use std::collections::HashMap;
use std::time::Duration;
use tessera_types::DaemonId;

/// One reporter reports one daemon at most this often.
pub const UNREACHABLE_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// When each daemon was last reported; times are the caller's (`now`, from
/// any origin it keeps fixed).
#[derive(Debug, Default)]
pub struct ReportLimit {
    last: HashMap<DaemonId, Duration>,
}

impl ReportLimit {
    /// Whether to report `daemon` at `now`; if so, the report is counted.
    pub fn allow(&mut self, daemon: DaemonId, now: Duration) -> bool {
        if self
            .last
            .get(&daemon)
            .is_some_and(|at| now < *at + UNREACHABLE_REPORT_INTERVAL)
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
