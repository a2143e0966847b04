//! A member's metrics URL is in the configuration it publishes, its
//! `/metrics` page answers, and a member restarted on another metrics port
//! replaces the URL the group remembers.

// Tests of real sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tessera_coordinator::{serve_with, CoordinatorError, CoordinatorOptions};
use tessera_protocol::coord_client::CoordClient;
use tessera_types::Epoch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const PATIENCE: Duration = Duration::from_secs(30);

struct Running {
    stop: oneshot::Sender<()>,
    handle: JoinHandle<Result<(), CoordinatorError>>,
}

/// Starts a member listening on `addr` that serves metrics on `metrics`.
async fn start(addr: SocketAddr, dir: &Path, metrics: SocketAddr) -> (String, Running) {
    let listener = TcpListener::bind(addr).await.expect("bind 127.0.0.1");
    let local = listener.local_addr().unwrap();
    let options = CoordinatorOptions {
        metrics: Some(metrics),
        ..CoordinatorOptions::new(local, dir.to_path_buf())
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        serve_with(listener, options, async {
            let _ = stopped.await;
        })
        .await
    });
    (local.to_string(), Running { stop, handle })
}

/// The metrics URL of the only member, once the configuration has one
/// that `accept` takes.
async fn published_url(addr: &str, accept: impl Fn(&str) -> bool) -> String {
    let client = CoordClient::new([addr.to_string()]);
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(Some(config)) = client.wait_config(Epoch(0), Duration::ZERO).await {
            if let Some(url) = config.coordinators.first().and_then(|c| c.metrics.clone()) {
                if accept(&url) {
                    return url;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no acceptable metrics URL published"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(url: &str) -> String {
    let authority = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/metrics"))
        .expect("http://HOST:PORT/metrics");
    let mut stream = TcpStream::connect(authority).await.expect("connect");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).await.unwrap();
    page
}

/// A port on 127.0.0.1 that was free a moment ago and is not `other`.
fn free_port_except(other: u16) -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind 127.0.0.1:0");
        if port != other {
            return port;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_url_is_published_and_follows_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let (addr, running) = start(any, dir.path(), any).await;
    let first = published_url(&addr, |_| true).await;
    let page = get(&first).await;
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(
        page.contains("tessera_coordinator_raft_role{role=\"leader\"} 1"),
        "{page}"
    );
    let _ = running.stop.send(());
    running.handle.await.unwrap().unwrap();

    let first_port: u16 = first
        .trim_end_matches("/metrics")
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port_except(first_port)));
    let (addr, running) = start(addr.parse().unwrap(), dir.path(), metrics).await;
    let expected = format!("http://{metrics}/metrics");
    let second = published_url(&addr, |url| url == expected).await;
    assert!(get(&second).await.starts_with("HTTP/1.1 200 OK"));
    let _ = running.stop.send(());
    running.handle.await.unwrap().unwrap();
}
