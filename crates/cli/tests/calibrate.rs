//! `tessera calibrate` against real processes (issue 14, point 2): it
//! measures the cluster on scratch spaces of its own, stores the fitted
//! parameters in the configuration, removes its spaces, and `advise`
//! then reports them as calibrated; a second calibration is averaged
//! with the first unless `--fresh`; it refuses to start when one of its
//! scratch spaces exists and leaves that space alone.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{cli_at, run_cli, Cluster};
use serde_json::Value as Json;
use std::time::Duration;

const WORKLOAD: &str = r#"{"space": "space hotels key id attributes string city, int price create 8 partitions",
 "objects": 10000,
 "classes": [{"p": 0.6, "search": {"city": "eq"}}, {"p": 0.4, "modify": ["price"]}]}"#;

/// `tessera calibrate --json` on small scratch spaces, `--seconds` a
/// step, with `extra` arguments, against the cluster's first coordinator
/// member: its report. A calibration of 47 steps, each with its speed
/// probe, takes most of a minute here even when short.
fn calibrate_json(cluster: &Cluster, seconds: &str, extra: &[&str]) -> Json {
    let coordinator = cluster.coordinator_addr(0);
    let (host, port) = coordinator.split_once(':').expect("host:port");
    let mut all = vec![
        "calibrate",
        "--seconds",
        seconds,
        "--objects",
        "400",
        "--workers",
        "4",
        "--partitions",
        "4",
        "--probe-seconds",
        "0.1",
        "--json",
        "--host",
        host,
        "--port",
        port,
    ];
    all.extend_from_slice(extra);
    let (ok, out, err) = run_cli(&all, None, Duration::from_secs(180));
    assert!(ok, "tessera {all:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("no JSON ({e}): {out}"))
}

fn scratch(cluster: &Cluster) -> Vec<String> {
    cluster
        .admin()
        .list_spaces()
        .expect("list spaces")
        .into_iter()
        .filter(|s| s.starts_with("tessera_calibrate_"))
        .collect()
}

#[test]
fn calibrate_stores_parameters_that_advise_reports_as_calibrated() {
    let cluster = Cluster::start(2);
    cluster
        .admin()
        .add_space("space mine key k attributes string a")
        .expect("a user space");
    let report = calibrate_json(&cluster, "0.4", &["--runs", "2"]);
    assert_eq!(report["stored"], true);
    assert_eq!(report["daemons"], 2);
    // Two daemons: key-only and subspace spaces at f = 0 and f = 1; eight
    // equality searches, four ranges and a range that scans one region
    // on the first, and two mixes of one with puts; two of those searches
    // again on a space of ten times the objects; a modify on each of the
    // four spaces; an insert on each and on a key-only space with one
    // index; three lookups through a global index, and two puts through
    // it at each f; and three of the first space's searches again, right
    // before and then beside a padding space of three times its objects.
    let steps = report["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 53);
    // The speed probe ran, and its space is gone with the others (below).
    let reference = report["probe"]["reference_ops_per_s"]
        .as_f64()
        .expect("a probe reference");
    assert!(reference > 0.0, "{}", report["probe"]);
    let (slowest, fastest) = (
        report["probe"]["slowest"].as_f64().expect("slowest"),
        report["probe"]["fastest"].as_f64().expect("fastest"),
    );
    assert!(slowest <= 1.0 && 1.0 <= fastest, "{}", report["probe"]);
    // Two runs: each step was measured twice and its fitted cost is one
    // of them (the lower, for two).
    for step in steps {
        let runs: Vec<f64> = step["runs_s"]
            .as_array()
            .expect("runs_s")
            .iter()
            .map(|v| v.as_f64().expect("a cost"))
            .collect();
        assert_eq!(runs.len(), 2, "{step}");
        let least = runs[0].min(runs[1]);
        assert_eq!(step["measured_s"].as_f64(), Some(least), "{step}");
        // Each run's cost is what it measured, scaled by the speed probe
        // around it against the probes' median (or as measured where a
        // probe beside it failed).
        let raw = step["raw_runs_s"].as_array().expect("raw_runs_s");
        let probes = step["probe_ops_per_s"].as_array().expect("probe_ops_per_s");
        assert_eq!((raw.len(), probes.len()), (2, 2), "{step}");
        for ((cost, raw), probe) in runs.iter().zip(raw).zip(probes) {
            let raw = raw.as_f64().expect("a raw cost");
            let want = probe.as_f64().map_or(raw, |p| raw * p / reference);
            assert!((cost - want).abs() <= 1e-9 * want, "{step}");
        }
    }
    let groups: Vec<&str> = report["fits"]
        .as_array()
        .expect("fits")
        .iter()
        .map(|f| f["op"].as_str().expect("op"))
        .collect();
    assert_eq!(
        groups,
        [
            "get",
            "put",
            "modify",
            "insert",
            "search",
            "range",
            "global put",
            "lookup",
            "mix",
            "larger",
            "stored"
        ]
    );

    let stored = cluster
        .admin()
        .config()
        .expect("config")
        .advisor
        .expect("calibrate stored its parameters");
    assert_eq!(stored.validate(), Ok(()));
    assert_eq!(stored.daemons, 2);
    // The printed parameters are those `advise` uses: two daemons.
    assert_eq!(report["parameters"]["daemons"], 2);
    assert_eq!(
        stored.version,
        tessera_types::calibration::ADVISOR_CALIBRATION_VERSION
    );
    assert!(stored.range_search_s.is_some() && stored.range_entry_s.is_some());
    // Version 3's per-request costs, measured: a get costs something.
    assert!(stored.get_s.is_some_and(|g| g > 0.0), "{stored:?}");
    assert!(stored.write_s.is_some() && stored.insert_s.is_some());
    assert!(stored.index_create.is_some() && stored.walk_first_s.is_some());
    assert!(stored.unbounded_s.is_some() && stored.search_base_s.is_some());
    assert!(stored.modify_s.is_some());
    // Version 5's, measured through the global index's steps: a lookup
    // costs something per match.
    assert!(stored.global_index_hop.is_some() && stored.global_index_move.is_some());
    assert!(stored.lookup_base_s.is_some());
    let per_match = stored.lookup_match_s.expect("a lookup's cost per match");
    assert!(per_match > 0.0, "{stored:?}");
    // Version 6's: no step hands a page off among pages answered at once
    // (the walk that tests d object by object loads one object, read
    // where it arrives), so it keeps its default, and says so.
    assert_eq!(stored.handoff_mixed_s, Some(0.0), "{stored:?}");
    let kept = report["kept"].as_array().expect("kept");
    assert!(
        kept.iter()
            .any(|k| k.as_str().is_some_and(|k| k.starts_with("handoff_mixed_s"))),
        "{kept:?}"
    );
    // Version 7's, fitted from the mixes of searches and puts.
    assert!(stored.writes_beside_s.is_some(), "{stored:?}");
    // Version 8's, fitted from modifies on chains of one to 2·(1 + |S|)
    // hops.
    assert!(stored.modify_hop_s.is_some(), "{stored:?}");
    // Version 9's, fitted from scans of one region and of every region.
    assert!(stored.handoff_first_s.is_some(), "{stored:?}");
    // And from inserts of one entry a copy beside those of four.
    assert!(stored.indexed_create.is_some(), "{stored:?}");
    // And the two from searches on a space ten times the others'.
    assert!(stored.larger_search_s.is_some() && stored.larger_entry_s.is_some());
    // Its reference: the objects the first space was loaded with.
    assert!(
        stored
            .larger_reference_objects
            .is_some_and(|n| n > 0.0 && n <= 400.0),
        "{stored:?}"
    );
    // Version 13's, from the searches run again beside the padding: the
    // reference rows are the first space's four parts of one copy over
    // the two daemons, and the padded steps ran beside four times them.
    let searched = stored
        .larger_reference_objects
        .expect("the objects searched");
    assert_eq!(stored.stored_reference_rows, Some(searched * 4.0 / 2.0));
    assert!(
        stored.stored_per_fold.is_some_and(|k| k >= 0.0),
        "{stored:?}"
    );
    let padded: Vec<f64> = steps
        .iter()
        .filter(|s| s["group"] == "stored")
        .map(|s| s["stored_rows"].as_f64().expect("rows"))
        .collect();
    assert_eq!(padded.len(), 3);
    for rows in padded {
        assert!((rows - searched * 8.0).abs() < 1e-6, "{rows}");
    }
    let t_max = report["parameters"]["t_max_ops_per_s"]
        .as_f64()
        .expect("T_max");
    assert_eq!(stored.t_max_ops_per_s, t_max);
    assert!(scratch(&cluster).is_empty(), "scratch spaces left behind");
    assert_eq!(
        cluster.admin().list_spaces().expect("list"),
        ["mine"],
        "the user's space is untouched"
    );

    let dir = tempfile::tempdir().expect("a directory");
    let workload = dir.path().join("w.json");
    std::fs::write(&workload, WORKLOAD).expect("write the workload");
    let workload = workload.to_str().expect("a UTF-8 path");
    let advise = |extra: &[&str]| -> Json {
        let mut args = vec!["advise", "--workload", workload, "--json"];
        args.extend_from_slice(extra);
        let out = cli_at(&args, &cluster.coordinator_addr(0));
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("no JSON ({e}): {out}"))
    };
    let doc = advise(&[]);
    assert_eq!(doc["calibrated"], true);
    assert_eq!(doc["parameters_source"], "cluster");
    assert_eq!(doc["parameters"]["t_max_ops_per_s"].as_f64(), Some(t_max));
    assert_eq!(doc["parameters"]["daemons"], 2);
    assert_eq!(doc["calibration"]["epoch"].as_u64(), Some(stored.epoch));
    let doc = advise(&["--params", "defaults"]);
    assert_eq!(doc["calibrated"], false);
    assert_eq!(doc["parameters_source"], "defaults");
    assert_eq!(report["calibrations"], 1);
    assert_eq!(report["started_over"], "none stored");
    assert_eq!(stored.calibrations, Some(1));

    // A second calibration of the same cluster is averaged with the
    // first, as costs in seconds: the hop 1 / T_max, α as α · hop.
    let quick = |extra: &[&str]| calibrate_json(&cluster, "0.2", extra);
    let param = |report: &Json, name: &str| -> f64 {
        report["parameters"][name]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} in {}", report["parameters"]))
    };
    let second = quick(&[]);
    assert_eq!(second["calibrations"], 2);
    assert_eq!(second["started_over"], Json::Null);
    let pooled = cluster
        .admin()
        .config()
        .expect("config")
        .advisor
        .expect("the average stored");
    assert_eq!(pooled.calibrations, Some(2));
    let (h1, h2) = (
        1.0 / param(&report, "t_max_ops_per_s"),
        1.0 / param(&second, "t_max_ops_per_s"),
    );
    let hop = (h1 + h2) / 2.0;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    assert!(close(1.0 / pooled.t_max_ops_per_s, hop), "{pooled:?}");
    let alpha = (param(&report, "alpha") * h1 + param(&second, "alpha") * h2) / 2.0 / hop;
    assert!(close(pooled.alpha, alpha), "{pooled:?}");
    let beta = (param(&report, "beta_s") + param(&second, "beta_s")) / 2.0;
    assert!(close(pooled.beta_s, beta), "{pooled:?}");
    let printed = second["stored_parameters"]["t_max_ops_per_s"]
        .as_f64()
        .expect("the stored T_max printed");
    assert!(close(printed, pooled.t_max_ops_per_s));
    let doc = advise(&[]);
    assert_eq!(doc["calibration"]["calibrations"], 2);

    // --fresh stores the new calibration alone.
    let third = quick(&["--fresh"]);
    assert_eq!(third["calibrations"], 1);
    assert_eq!(third["started_over"], "--fresh");
    let alone = cluster
        .admin()
        .config()
        .expect("config")
        .advisor
        .expect("the new one stored");
    assert_eq!(alone.calibrations, Some(1));
    assert!(close(
        alone.t_max_ops_per_s,
        param(&third, "t_max_ops_per_s")
    ));
    assert!(close(alone.alpha, param(&third, "alpha")));
    assert!(scratch(&cluster).is_empty(), "scratch spaces left behind");
}

#[test]
fn calibrate_refuses_when_a_scratch_space_exists() {
    let cluster = Cluster::start(1);
    let taken = "tessera_calibrate_key_f0";
    cluster
        .admin()
        .add_space(&format!(
            "space {taken} key k attributes string a tolerate 0 failures"
        ))
        .expect("a space with a scratch name");
    let (host, port) = cluster
        .coordinator_addr(0)
        .split_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .expect("host:port");
    let (ok, _, err) = run_cli(
        &[
            "calibrate",
            "--seconds",
            "0.2",
            "--host",
            &host,
            "--port",
            &port,
        ],
        None,
        Duration::from_secs(60),
    );
    assert!(!ok, "calibrate ran over an existing scratch space");
    assert!(err.contains(taken), "the refusal names the space: {err}");
    assert_eq!(
        scratch(&cluster),
        [taken],
        "the existing space is left alone"
    );
    assert!(cluster.admin().config().expect("config").advisor.is_none());
}
