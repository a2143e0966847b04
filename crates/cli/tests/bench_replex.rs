//! `tessera bench replex` and `tessera bench replex-recovery` at tiny
//! sizes (issue 13, point 6): the steady-state run describes each layout
//! with the copies its configuration keeps, and the recovery run, on
//! processes it starts itself, brings every layout whole again after one
//! kill with no read failed or wrong.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{free_port, run_cli, Cluster};
use serde_json::Value as Json;
use std::time::Duration;

fn read_json(path: &std::path::Path) -> Json {
    let text = std::fs::read_to_string(path).expect("the JSON file");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn the_steady_run_keeps_each_layouts_copies_and_runs_every_phase() {
    let cluster = Cluster::start(3);
    let (host, port) = cluster
        .coordinator_addr(0)
        .split_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .expect("host:port");
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("steady.json");
    let (ok, out, err) = run_cli(
        &[
            "bench",
            "replex",
            "--records",
            "200",
            "--operations",
            "200",
            "--workers",
            "4",
            "--partitions",
            "4",
            "--json",
            json.to_str().expect("utf-8"),
            "--host",
            &host,
            "--port",
            &port,
        ],
        None,
        Duration::from_secs(240),
    );
    assert!(ok, "bench replex failed: {err}");
    let doc = read_json(&json);
    let runs = doc["runs"].as_array().expect("runs");
    // Copies as the configuration keeps them: 2 parts × (f + 1) replicas
    // for the HyperDex layout, one copy per part for the replexes.
    let copies: Vec<(String, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["layout"].as_str().expect("layout").to_string(),
                r["copies"].as_u64().expect("copies"),
            )
        })
        .collect();
    assert_eq!(
        copies,
        vec![
            ("hyperdex-f2".to_string(), 6),
            ("replex-3".to_string(), 3),
            ("hyperdex-f1".to_string(), 4),
            ("replex-2".to_string(), 2),
        ]
    );
    for run in runs {
        let phases: Vec<&str> = run["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|p| p["phase"].as_str().expect("phase"))
            .collect();
        assert_eq!(phases, ["load", "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-f"]);
        let load = &run["results"][0];
        assert_eq!(load["ops"]["INSERT"]["count"], 200, "{run}");
        assert_eq!(load["ops"]["INSERT"]["errors"], 0, "{run}");
    }
    assert!(out.contains("replex-3 ÷ hyperdex-f2"), "{out}");
    // Each layout's scratch space is removed after its run.
    let spaces = cluster.admin().list_spaces().expect("spaces");
    assert!(
        spaces.iter().all(|s| !s.starts_with("bench_")),
        "{spaces:?}"
    );
}

#[test]
fn every_layout_recovers_from_a_kill_with_no_read_failed_or_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("recovery.json");
    // The coordinator and 4 + 1 daemons take consecutive ports.
    let port = (0..50)
        .map(|_| free_port())
        .find(|p| *p < 60_000 && common::ports_free(*p..*p + 7))
        .expect("a free run of ports");
    let (ok, out, err) = run_cli(
        &[
            "bench",
            "replex-recovery",
            "--records",
            "300",
            "--daemons",
            "4",
            "--workers",
            "4",
            "--failures",
            "1",
            "--before",
            "1",
            "--timeout",
            "90",
            "--port",
            &port.to_string(),
            "--json",
            json.to_str().expect("utf-8"),
        ],
        None,
        Duration::from_secs(600),
    );
    assert!(ok, "bench replex-recovery failed: {err}\n{out}");
    let doc = read_json(&json);
    let runs = doc["runs"].as_array().expect("runs");
    let layouts: Vec<&str> = runs
        .iter()
        .map(|r| r["layout"].as_str().expect("layout"))
        .collect();
    assert_eq!(layouts, ["hyperdex-f2", "replex-3", "replex-2"]);
    for run in runs {
        assert_eq!(run["killed"].as_array().expect("killed").len(), 1);
        assert_eq!(run["failed_reads"], 0, "{run}");
        assert_eq!(run["wrong_reads"], 0, "{run}");
        assert!(run["recovered_s"].as_f64().expect("recovered_s") > 0.0);
        assert!(
            run["reads_during_per_s"].as_f64().expect("reads") > 0.0,
            "{run}"
        );
    }
}
