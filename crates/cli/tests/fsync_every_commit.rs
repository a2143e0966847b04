//! A cluster whose daemons fsync every commit (`Durability::Always`):
//! their connections hand updates and chain messages to lanes, and
//! concurrent commits share fsyncs (group commit). YCSB A at 16 in
//! flight over 3 daemons must lose nothing: every load and update is
//! acknowledged without error, and every read finds its record.

mod common;

use common::run_cli;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn ycsb_a_at_16_in_flight_loses_nothing_with_an_fsync_per_commit() {
    // A coordinator port whose daemon ports (30 above it) are free too.
    let port = common::wait_for("free ports", Duration::from_secs(30), || {
        let port = common::free_port();
        let daemons = [
            port.checked_add(30)?,
            port.checked_add(31)?,
            port.checked_add(32)?,
        ];
        common::ports_free([port].into_iter().chain(daemons)).then_some(port)
    });
    let dir = tempfile::tempdir().expect("temporary directory");
    let json = dir.path().join("results.json");
    let (records, operations) = (400u64, 800u64);
    let args = [
        "bench".to_string(),
        "ycsb".into(),
        "--workload".into(),
        "a".into(),
        "--local".into(),
        "--fsync-every-commit".into(),
        "--local-port".into(),
        port.to_string(),
        "--records".into(),
        records.to_string(),
        "--operations".into(),
        operations.to_string(),
        "--workers".into(),
        "16".into(),
        "--time-limit".into(),
        "120".into(),
        "--json".into(),
        json.display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = run_cli(&args, None, TIMEOUT);
    assert!(ok, "bench failed: {err}");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("results written")).expect("JSON");
    let phases = results["results"].as_array().expect("a list of phases");
    let mut operations_by_phase = Vec::new();
    for phase in phases {
        let name = phase["phase"].as_str().expect("a phase name");
        let ops = phase["ops"].as_object().expect("operations by kind");
        let mut count = 0;
        for (kind, op) in ops {
            assert_eq!(op["errors"], 0, "{name} {kind}: {op}\n{out}\n{err}");
            assert_eq!(op["not_found"], 0, "{name} {kind}: a record went missing");
            count += op["count"].as_u64().expect("a count");
        }
        operations_by_phase.push((name.to_string(), count));
    }
    assert_eq!(
        operations_by_phase,
        [
            ("load".to_string(), records),
            ("workloada".to_string(), operations)
        ],
        "every phase ran to its end"
    );
}
