//! Progress of long CLI work when stderr is not a terminal: plain
//! `what: detail ... N%` lines on stderr, stdout left to the result.
//! `wait-until-stable` runs while a daemon that just joined receives
//! regions, so there is work to report; a small `bench` reports each of
//! its phases.

mod common;

use common::{cli_at, run_cli, Cluster};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn wait_until_stable_prints_plain_progress_lines_on_a_pipe() {
    let mut cluster = Cluster::start(2);
    let coordinator = cluster.coordinator_addr(0);
    let (host, port) = coordinator.split_once(':').expect("host:port");
    let target = ["--host", host, "--port", port];
    cli_at(
        &[
            "add-space",
            "space p key k attributes string a subspace a create 8 partitions",
        ],
        &coordinator,
    );
    // A third daemon: the coordinator moves regions to it.
    cluster.daemon_ports.push(common::free_port());
    cluster.start_daemon(2);

    let mut wait = vec!["wait-until-stable", "--timeout", "60"];
    wait.extend(target);
    let (ok, out, err) = run_cli(&wait, None, TIMEOUT);
    assert!(ok, "wait-until-stable failed: {err}");
    let epoch: u64 = out
        .trim()
        .strip_prefix("stable at epoch ")
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("stdout holds only the result: {out:?}"));

    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("wait-until-stable: "))
        .collect();
    assert!(!lines.is_empty(), "no progress lines on stderr: {err:?}");
    assert!(!err.contains('\r'), "a pipe gets no bar redrawn in place");
    for line in &lines {
        let (_, percent) = line
            .rsplit_once(" ... ")
            .unwrap_or_else(|| panic!("no ` ... N%` in {line:?}"));
        let percent: u8 = percent
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no percentage in {line:?}"));
        assert!(percent <= 100, "{line}");
    }
    // Consecutive lines differ: an unchanged state is not repeated.
    assert!(lines.windows(2).all(|w| w[0] != w[1]), "{lines:?}");
    assert_eq!(
        *lines.last().unwrap(),
        format!("wait-until-stable: epoch {epoch}: 0 transfers running, 0 daemons behind ... 100%")
    );
    println!("{} progress lines:\n{}", lines.len(), lines.join("\n"));
}

#[test]
fn bench_phases_print_plain_progress_lines_on_a_pipe() {
    // A coordinator port whose daemon port (30 above it) is free as well.
    let port = common::wait_for("two free ports", TIMEOUT, || {
        let port = common::free_port();
        let daemon = port.checked_add(30)?;
        common::ports_free([port, daemon]).then_some(port)
    });
    let port = port.to_string();
    let (ok, out, err) = run_cli(
        &[
            "bench",
            "latency",
            "--local",
            "--daemons",
            "1",
            "--local-port",
            &port,
            "--records",
            "300",
            "--operations",
            "300",
            "--workers",
            "4",
            "--time-limit",
            "60",
        ],
        None,
        TIMEOUT,
    );
    assert!(ok, "bench failed: {err}");
    assert!(out.contains("p99"), "the results stay on stdout: {out}");
    // Every phase ends with its own 100% line: load, then get and put at
    // one and at four in flight.
    let finished: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("bench: tessera ") && l.ends_with(" ... 100%"))
        .collect();
    let phases: Vec<&str> = finished
        .iter()
        .map(|l| l["bench: tessera ".len()..].split(':').next().unwrap())
        .collect();
    assert_eq!(phases, ["load", "get", "put", "get", "put"], "{err}");
    assert!(
        finished
            .iter()
            .skip(1)
            .all(|l| l.contains(": 300 of 300 operations")),
        "{finished:?}"
    );
}

/// A layout change with `--wait` exits only once every part is ready,
/// with plain progress lines on stderr and the new part's id alone on
/// stdout; without it the command returns at once (API.md §12.5).
#[test]
fn a_layout_change_with_wait_reports_progress_until_ready() {
    let cluster = Cluster::start(2);
    let coordinator = cluster.coordinator_addr(0);
    let (host, port) = coordinator.split_once(':').expect("host:port");
    cli_at(
        &[
            "add-space",
            "space w key int k attributes int a create 4 partitions",
        ],
        &coordinator,
    );
    for k in 0..300 {
        cli_at(
            &[
                "put",
                "w",
                &k.to_string(),
                &format!(r#"{{"a": {}}}"#, k % 17),
            ],
            &coordinator,
        );
    }
    let (ok, out, err) = run_cli(
        &[
            "add-subspace",
            "w",
            "a",
            "--wait",
            "--host",
            host,
            "--port",
            port,
        ],
        None,
        TIMEOUT,
    );
    assert!(ok, "add-subspace --wait failed: {err}");
    let part: u64 = out
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("stdout: {out:?}"));
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("layout: ")).collect();
    assert!(!lines.is_empty(), "no progress lines: {err:?}");
    assert!(
        lines.last().unwrap().ends_with("every part ready ... 100%"),
        "{lines:?}"
    );
    let config = cluster.admin().config().expect("config");
    let state = config
        .space("w")
        .and_then(|s| s.part_state(tessera_types::PartId(part)));
    assert_eq!(
        state,
        Some(tessera_types::PartState::Ready),
        "ready on exit"
    );
}
