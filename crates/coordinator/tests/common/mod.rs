//! Test harness: coordinator members on 127.0.0.1 in temporary directories.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_coordinator::{serve_with, CoordinatorError, CoordinatorOptions};
use tessera_protocol::coord_client::CoordConnection;
use tessera_protocol::{CoordRequest, CoordResponse, CoordStatus};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The failure timeout of members started by [`Member::start`]: long, because
/// most tests register daemons that never heartbeat.
pub const FAILURE_TIMEOUT_PATIENT: Duration = Duration::from_secs(3600);

/// One running member; `stop` resolves its shutdown future.
pub struct Member {
    pub addr: String,
    pub dir: PathBuf,
    stop: oneshot::Sender<()>,
    handle: JoinHandle<Result<(), CoordinatorError>>,
}

impl Member {
    /// Starts a member on an ephemeral port.
    pub async fn start(dir: &Path, join: Option<String>) -> Member {
        Member::start_at("127.0.0.1:0".parse().unwrap(), dir, join).await
    }

    /// Starts a member on `addr` (to restart one where the group knows it).
    pub async fn start_at(addr: SocketAddr, dir: &Path, join: Option<String>) -> Member {
        Member::start_with(addr, dir, join, FAILURE_TIMEOUT_PATIENT).await
    }

    /// Starts a member on `addr` that declares daemons failed after
    /// `failure_timeout` without a heartbeat.
    pub async fn start_with(
        addr: SocketAddr,
        dir: &Path,
        join: Option<String>,
        failure_timeout: Duration,
    ) -> Member {
        let listener = TcpListener::bind(addr).await.expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let options = CoordinatorOptions {
            join,
            failure_timeout,
            ..CoordinatorOptions::new(listener.local_addr().unwrap(), dir.to_path_buf())
        };
        let handle = tokio::spawn(async move {
            serve_with(listener, options, async {
                let _ = stopped.await;
            })
            .await
        });
        Member {
            addr,
            dir: dir.to_path_buf(),
            stop,
            handle,
        }
    }

    /// Stops the member and returns how `serve` ended.
    pub async fn stop(self) -> Result<(), CoordinatorError> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .expect("member stops within 10 s")
            .expect("member task did not panic")
    }

    pub fn socket_addr(&self) -> SocketAddr {
        self.addr.parse().unwrap()
    }
}

/// Polls `probe` until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One request to exactly this member (no redirects).
pub async fn ask(addr: &str, request: CoordRequest) -> Option<CoordResponse> {
    let connection = CoordConnection::connect(addr, Duration::from_secs(2))
        .await
        .ok()?;
    connection.call(request, Duration::from_secs(5)).await.ok()
}

/// This member's view of the group, if it answers.
pub async fn status(addr: &str) -> Option<CoordStatus> {
    match ask(addr, CoordRequest::Status).await? {
        CoordResponse::Status(status) => Some(*status),
        other => panic!("unexpected answer to Status: {other:?}"),
    }
}

/// Waits until every member in `addrs` reports the same leader, one of
/// `addrs`, with `voters` voters; returns the leader's address.
pub async fn agreed_leader(addrs: &[String], voters: usize, timeout: Duration) -> String {
    eventually("members to agree on a leader", timeout, || async {
        let mut leader: Option<String> = None;
        for addr in addrs {
            let status = status(addr).await?;
            if status.voters.len() != voters {
                return None;
            }
            let this = status.leader_addr?;
            if leader.as_ref().is_some_and(|l| *l != this) {
                return None;
            }
            leader = Some(this);
        }
        leader.filter(|l| addrs.contains(l))
    })
    .await
}
