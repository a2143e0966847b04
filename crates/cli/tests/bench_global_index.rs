//! `tessera bench global-index --quick` end to end (issue 12, point 7):
//! every scenario runs on a local cluster with tiny sizes, prints its
//! section, writes its figures as JSON, and no call fails — lookups of
//! objects that exist find them, the index built live and the split
//! included. No figure is judged: timings are the benchmark's business.

mod common;

use common::{free_port, ports_free, run_cli, wait_for};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(600);

/// The scenarios, as the JSON names them, with their printed headers.
const SCENARIOS: [(&str, &str); 6] = [
    ("lookup", "== lookup:"),
    ("put", "== put:"),
    ("indexlets", "== indexlets:"),
    ("create", "== create:"),
    ("split", "== split:"),
    ("range", "== range:"),
];

fn phases_without_errors(scenario: &str, phases: &[&serde_json::Value]) -> u64 {
    let mut operations = 0;
    for phase in phases {
        let name = phase["phase"].as_str().expect("a phase name");
        let ops = phase["ops"].as_object().expect("operations by kind");
        assert!(!ops.is_empty(), "{scenario} / {name}: no operation ran");
        for (kind, op) in ops {
            assert_eq!(op["errors"], 0, "{scenario} / {name} {kind}: {op}");
            operations += op["count"].as_u64().expect("a count");
        }
    }
    operations
}

#[test]
fn the_quick_run_covers_every_scenario_without_a_failed_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("gi.json");
    // A coordinator port whose daemon ports (30 above it) are free too.
    let port = wait_for("free ports", Duration::from_secs(30), || {
        let port = free_port();
        let daemons = [
            port.checked_add(30)?,
            port.checked_add(31)?,
            port.checked_add(32)?,
        ];
        ports_free([port].into_iter().chain(daemons)).then_some(port)
    });
    let pg_port = free_port();
    let args = [
        "bench".to_string(),
        "global-index".into(),
        "--quick".into(),
        "--local".into(),
        "--local-port".into(),
        port.to_string(),
        "--baseline-port".into(),
        pg_port.to_string(),
        "--workers".into(),
        "4".into(),
        "--json".into(),
        json.display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = run_cli(&args, None, TIMEOUT);
    assert!(ok, "bench failed: {err}");
    for (_, header) in SCENARIOS {
        assert!(out.contains(header), "no {header} section in:\n{out}");
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("results written")).expect("JSON");
    for (name, _) in SCENARIOS {
        let s = &report[name];
        assert!(s.is_object(), "{name} missing from the JSON: {report}");
        assert_eq!(s["failed_calls"], 0, "{name}: failed calls");
        if let Some(missed) = s.get("missed") {
            assert_eq!(
                missed, 0,
                "{name}: a lookup or get of a present object missed"
            );
        }
    }

    // Each scenario measured what it says, in the shape asked for.
    let lookup = &report["lookup"];
    let in_flight: Vec<u64> = lookup["ratios"]
        .as_array()
        .expect("ratios")
        .iter()
        .map(|r| r["in_flight"].as_u64().expect("in flight"))
        .collect();
    assert_eq!(in_flight, [1, 4]);
    assert!(
        lookup["plan"]
            .as_str()
            .expect("a plan")
            .contains("global index"),
        "{lookup}"
    );
    let phases: Vec<&serde_json::Value> = lookup["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .collect();
    // The load and 100 operations per measured phase.
    assert_eq!(phases_without_errors("lookup", &phases), 200 + 4 * 100);

    let indexes: Vec<u64> = report["put"]["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["indexes"].as_u64().expect("indexes"))
        .collect();
    assert_eq!(indexes, [0, 1, 2]);
    let indexlets: Vec<u64> = report["indexlets"]["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| p["indexlets"].as_u64().expect("indexlets"))
        .collect();
    assert_eq!(indexlets, [1, 2]);

    let create = &report["create"];
    assert_eq!(create["missed_after"], 0, "{create}");
    assert!(create["seconds_to_ready"].as_f64().expect("a time") > 0.0);
    let split = &report["split"];
    assert_eq!(split["indexlets_after"], 4, "three cuts make four: {split}");
    for (name, s) in [("create", create), ("split", split)] {
        let fg = &s["foreground"];
        let n = phases_without_errors(name, &[&fg["before"], &fg["during"]]);
        assert!(n > 0, "{name}: no foreground operation");
    }

    // Tessera's range side always runs; PostgreSQL's where it can start.
    let range = &report["range"];
    phases_without_errors("range", &[&range["tessera"]]);
    if range["postgres"].is_object() {
        phases_without_errors("range", &[&range["postgres"]]);
        assert!(range["throughput_ratio"].as_f64().is_some(), "{range}");
    } else {
        let notes = report["notes"].to_string();
        assert!(notes.contains("postgres"), "no word on postgres: {notes}");
    }
}
