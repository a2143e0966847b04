//! A benchmark's `--local` cluster whose ports are taken must fail the run
//! at once, naming the port, rather than measure whatever answers there
//! (another benchmark's cluster) or wait out the readiness timeout.

mod common;

use common::run_cli;
use std::net::TcpListener;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(120);

fn bench_latency(port: u16) -> (bool, String, String) {
    let port = port.to_string();
    run_cli(
        &[
            "bench",
            "latency",
            "--local",
            "--daemons",
            "1",
            "--local-port",
            &port,
            "--records",
            "100",
            "--operations",
            "100",
            "--workers",
            "2",
        ],
        None,
        TIMEOUT,
    )
}

#[test]
fn a_taken_coordinator_port_fails_the_run_and_names_the_port() {
    let holder = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = holder.local_addr().unwrap().port();
    let (ok, _out, err) = bench_latency(port);
    assert!(
        !ok,
        "the run went on against whatever holds the port: {err}"
    );
    assert!(
        err.contains(&format!("127.0.0.1:{port} is taken")),
        "the error names the port: {err}"
    );
}

#[test]
fn a_taken_daemon_port_fails_the_run_before_the_readiness_timeout() {
    // A coordinator port free, with its daemon's port (30 above) ours.
    let (port, holder) = common::wait_for("a free pair of ports", TIMEOUT, || {
        let port = common::free_port();
        let daemon = port.checked_add(30)?;
        if !common::ports_free([port]) {
            return None;
        }
        let holder = TcpListener::bind(("127.0.0.1", daemon)).ok()?;
        Some((port, holder))
    });
    let (ok, _out, err) = bench_latency(port);
    drop(holder);
    assert!(!ok, "the run succeeded with its daemon's port taken: {err}");
    assert!(
        err.contains("stopped before it was ready") && err.contains("Address already in use"),
        "the error says why (not a readiness timeout): {err}"
    );
}
