//! `tessera bench layouts` against real processes (issue 14, point 5): on
//! a tiny workload it measures each sampled layout on a scratch space of
//! its own, writes the JSON scripts rely on (API.md §12.5), and leaves no
//! scratch space behind; it refuses to start over an existing one.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{run_cli, Cluster};
use serde_json::Value as Json;
use std::time::Duration;

/// One searched attribute: the advice, one layout drawn from the rest of
/// the ranking, the key subspace only and a subspace of city (what every
/// other heuristic picks) — 2 to 4 layouts.
const WORKLOAD: &str = r#"{"space": "space hotels key id attributes string city, int price create 4 partitions tolerate 0 failures",
 "objects": 100000, "distinct": {"city": 20},
 "classes": [{"p": 0.5, "search": {"city": "eq"}}, {"p": 0.3, "modify": ["price"]},
             {"p": 0.1, "get": true}, {"p": 0.1, "insert": true}]}"#;

fn scratch(cluster: &Cluster) -> Vec<String> {
    cluster
        .admin()
        .list_spaces()
        .expect("list spaces")
        .into_iter()
        .filter(|s| s.starts_with("tessera_layouts_"))
        .collect()
}

fn bench_layouts(
    cluster: &Cluster,
    workload: &str,
    json: &str,
    extra: &[&str],
) -> (bool, String, String) {
    let (host, port) = cluster
        .coordinator_addr(0)
        .split_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .expect("host:port");
    run_cli(
        &[
            "bench",
            "layouts",
            "--workload",
            workload,
            "--layouts",
            "1",
            "--random",
            "1",
            "--seconds",
            "1",
            "--objects",
            "300",
            "--workers",
            "4",
            "--runs",
            "2",
            "--json",
            json,
            "--host",
            &host,
            "--port",
            &port,
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
        None,
        Duration::from_secs(60),
    )
}

#[test]
fn bench_layouts_measures_each_layout_and_removes_its_spaces() {
    let cluster = Cluster::start(1);
    let dir = tempfile::tempdir().expect("a directory");
    let workload = dir.path().join("w.json");
    std::fs::write(&workload, WORKLOAD).expect("write the workload");
    let out = dir.path().join("out.json");
    let (workload, out) = (workload.to_str().unwrap(), out.to_str().unwrap());
    let (ok, stdout, err) = bench_layouts(&cluster, workload, out, &[]);
    assert!(ok, "bench layouts failed: {err}");
    assert!(stdout.contains("mean absolute relative error"), "{stdout}");
    let text = std::fs::read_to_string(out).expect("the JSON file");
    let doc: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("no JSON ({e}): {text}"));
    let layouts = doc["layouts"].as_array().expect("layouts");
    assert!((2..=4).contains(&layouts.len()), "{doc:#}");
    assert_eq!(
        doc["sampling"],
        serde_json::json!({"top": 1, "random": 1, "seed": 1}),
        "{doc:#}"
    );
    // One layout drawn from below the advice's group of equal predictions:
    // predicted strictly slower than the advice, and not a top layout.
    let drawn: Vec<&Json> = layouts.iter().filter(|l| l["drawn"] == true).collect();
    assert_eq!(drawn.len(), 1, "{doc:#}");
    assert!(drawn[0]["top_rank"].is_null(), "{doc:#}");
    let predicted = |l: &Json| l["predicted_ops_per_s"].as_f64().expect("predicted");
    assert!(
        predicted(drawn[0]) < predicted(&layouts[0]) * (1.0 - 1e-9),
        "{doc:#}"
    );
    assert!(stdout.contains("drawn at random"), "{stdout}");
    let mut descriptions = Vec::new();
    for l in layouts {
        let description = l["description"].as_str().expect("description");
        assert!(description.starts_with("space hotels "), "{description}");
        descriptions.push(description);
        assert!(l["predicted_ops_per_s"].as_f64().expect("predicted") > 0.0);
        let median = l["measured_ops_per_s"].as_f64().expect("measured");
        assert!(median > 0.0);
        assert_eq!(l["objects"], 300);
        // Two interleaved runs: the median of two is their mean, between
        // the minimum and the maximum, which are the runs themselves.
        let runs: Vec<f64> = l["runs_ops_per_s"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r.as_f64().expect("a rate"))
            .collect();
        assert_eq!(runs.len(), 2, "{l:#}");
        let (min, max) = (runs[0].min(runs[1]), runs[0].max(runs[1]));
        assert!((median - (runs[0] + runs[1]) / 2.0).abs() <= 1e-9 * median);
        assert_eq!(l["measured_min_ops_per_s"].as_f64(), Some(min));
        assert_eq!(l["measured_max_ops_per_s"].as_f64(), Some(max));
        let spread = l["measured_spread"].as_f64().expect("spread");
        assert!((spread - (max - min) / median).abs() <= 1e-9, "{l:#}");
    }
    descriptions.sort_unstable();
    descriptions.dedup();
    assert_eq!(descriptions.len(), layouts.len(), "layouts are distinct");
    assert_eq!(layouts[0]["top_rank"], 1);
    assert!(
        layouts.iter().any(|l| l["summary"] == "key subspace only"),
        "no-subspace is measured: {doc:#}"
    );
    assert!(doc["mean_abs_relative_error"].as_f64().expect("error") >= 0.0);
    let rank = doc["predicted_best_measured_rank"].as_u64().expect("rank");
    assert!((1..=layouts.len() as u64).contains(&rank));
    // Whether the predicted best's runs reach the fastest layout's, from
    // the layouts' own min and max.
    let num = |l: &Json, k: &str| l[k].as_f64().expect(k);
    let chosen = layouts
        .iter()
        .find(|l| l["description"] == doc["predicted_best"])
        .expect("the predicted best is a measured layout");
    let fastest = layouts.iter().fold(&layouts[0], |best, l| {
        if num(l, "measured_ops_per_s") > num(best, "measured_ops_per_s") {
            l
        } else {
            best
        }
    });
    let overlaps = num(chosen, "measured_min_ops_per_s") <= num(fastest, "measured_max_ops_per_s")
        && num(fastest, "measured_min_ops_per_s") <= num(chosen, "measured_max_ops_per_s");
    assert_eq!(
        doc["predicted_best_overlaps_measured_best"].as_bool(),
        Some(overlaps),
        "{doc:#}"
    );
    // The level is the geometric mean of predicted / measured, the error
    // about it each prediction divided by it, and the mean spread each
    // layout's (max - min) / median, all from the layouts' own figures.
    let n = layouts.len() as f64;
    let ratios: Vec<f64> = layouts
        .iter()
        .map(|l| num(l, "predicted_ops_per_s") / num(l, "measured_ops_per_s"))
        .collect();
    let level = (ratios.iter().map(|r| r.ln()).sum::<f64>() / n).exp();
    assert!(
        (num(&doc, "level") - level).abs() <= 1e-9 * level,
        "{doc:#}"
    );
    let around = ratios.iter().map(|r| (r / level - 1.0).abs()).sum::<f64>() / n;
    let got = num(&doc, "mean_abs_relative_error_around_level");
    assert!((got - around).abs() <= 1e-9, "{got} against {around}");
    let spread = layouts
        .iter()
        .map(|l| num(l, "measured_spread"))
        .sum::<f64>()
        / n;
    assert!((num(&doc, "mean_measured_spread") - spread).abs() <= 1e-9);
    assert!(stdout.contains("the predictions' level"), "{stdout}");
    // The runs against themselves: with two runs each, every layout's
    // first run against its second.
    let run = |l: &Json, i: usize| l["runs_ops_per_s"][i].as_f64().expect("a rate");
    let apart = layouts
        .iter()
        .map(|l| (run(l, 0) / run(l, 1) - 1.0).abs())
        .sum::<f64>()
        / n;
    let halves = &doc["halves"];
    assert!(
        (num(halves, "mean_abs_relative_error") - apart).abs() <= 1e-9,
        "{halves:#} against {apart}"
    );
    let fastest_in = |i: usize| {
        (0..layouts.len())
            .max_by(|&a, &b| run(&layouts[a], i).total_cmp(&run(&layouts[b], i)))
            .expect("layouts")
    };
    assert_eq!(
        halves["same_best"].as_bool(),
        Some(run(&layouts[fastest_in(0)], 1) >= run(&layouts[fastest_in(1)], 1)),
        "{halves:#}"
    );
    assert!(stdout.contains("the runs against themselves"), "{stdout}");
    // Paired by round: each layout ran in rounds 1 and 2, and two rounds
    // can never tell two layouts apart at 5 % (the smallest two-sided
    // p-value of two paired runs is 2 · 1/4), so every pair is a tie.
    for l in layouts {
        assert_eq!(l["runs_rounds"], serde_json::json!([1, 2]), "{l:#}");
    }
    let paired = &doc["paired"];
    let pairs = layouts.len() * (layouts.len() - 1) / 2;
    assert_eq!(paired["pairs"].as_u64(), Some(pairs as u64), "{paired:#}");
    for k in [
        "apart",
        "ordered_alike",
        "ordered_against",
        "faster_than_predicted_best",
    ] {
        assert_eq!(paired[k].as_u64(), Some(0), "{k}: {paired:#}");
    }
    assert!(stdout.contains("what the runs tell apart"), "{stdout}");
    // Each round ran every layout once, the second starting elsewhere
    // than the first: the predicted best ran first in round 1 only.
    let positions: Vec<Vec<u64>> = layouts
        .iter()
        .map(|l| {
            l["runs_positions"]
                .as_array()
                .expect("positions")
                .iter()
                .map(|p| p.as_u64().expect("a position"))
                .collect()
        })
        .collect();
    for round in 0..2 {
        let mut places: Vec<u64> = positions.iter().map(|p| p[round]).collect();
        places.sort_unstable();
        assert_eq!(places, (0..layouts.len() as u64).collect::<Vec<_>>());
    }
    assert_eq!(
        positions[0],
        [0, layouts.len() as u64 - layouts.len() as u64 / 2]
    );
    assert!(doc["kendall_tau_b"].is_number() || doc["kendall_tau_b"].is_null());
    assert_eq!(doc["runs"], 2);
    assert_eq!(doc["calibrated"], false);
    assert_eq!(doc["parameters_source"], "defaults");
    assert!(
        doc["greedy"]["measured_ops_per_s"].as_f64().is_some(),
        "{doc:#}"
    );
    // The probe ran once per round, and its speed is its median round
    // over the prediction.
    let probe = &doc["probe"];
    let rounds: Vec<f64> = probe["rounds_ops_per_s"]
        .as_array()
        .expect("probe rounds")
        .iter()
        .map(|r| r.as_f64().expect("a rate"))
        .collect();
    assert_eq!(rounds.len(), 2, "{probe:#}");
    let predicted = probe["predicted_ops_per_s"].as_f64().expect("predicted");
    let speed = probe["speed"].as_f64().expect("speed");
    let want = (rounds[0] + rounds[1]) / 2.0 / predicted;
    assert!((speed - want).abs() <= 1e-9 * want, "{probe:#}");
    assert!(
        doc["mean_abs_relative_error_scaled"]
            .as_f64()
            .expect("scaled")
            >= 0.0
    );
    assert!(
        stdout.contains("machine speed against the calibration"),
        "{stdout}"
    );
    assert!(scratch(&cluster).is_empty(), "scratch spaces left behind");

    // Only the layout the workload's space declares, when asked.
    let declared = dir.path().join("declared.json");
    std::fs::write(
        &declared,
        WORKLOAD.replace("int price create", "int price index price create"),
    )
    .expect("write the workload");
    // With each class alone beside the mix, and the machine's CPU.
    let (ok, stdout, err) = bench_layouts(
        &cluster,
        declared.to_str().unwrap(),
        out,
        &["--declared", "--classes"],
    );
    assert!(ok, "bench layouts --declared --classes failed: {err}");
    let doc: Json =
        serde_json::from_str(&std::fs::read_to_string(out).expect("JSON")).expect("JSON");
    let layouts = doc["layouts"].as_array().expect("layouts");
    assert_eq!(layouts.len(), 1, "{doc:#}");
    assert_eq!(layouts[0]["summary"], "index price", "{doc:#}");
    assert!(layouts[0]["measured_ops_per_s"].as_f64().expect("measured") > 0.0);
    let classes = layouts[0]["classes"].as_array().expect("classes");
    let kinds: Vec<&str> = classes
        .iter()
        .map(|c| c["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["search", "modify", "get", "insert"], "{doc:#}");
    // The classes that only read run alone before the mix, on the space
    // as loaded (the dead versions a mix's writes leave would slow them,
    // and the model prices a class alone without any); those that write
    // run after it. Each is predicted for the objects it started with:
    // those loaded and every insert before it (the mix's, then the
    // classes').
    let loaded = layouts[0]["objects"].as_u64().expect("objects loaded");
    let held: Vec<u64> = classes
        .iter()
        .map(|c| c["objects"].as_u64().expect("objects"))
        .collect();
    assert_eq!(
        (held[0], held[2]),
        (loaded, loaded),
        "the search and the get ran before the mix: {doc:#}"
    );
    assert!(
        held[1] > loaded,
        "the modify ran after the mix's inserts: {doc:#}"
    );
    assert_eq!(held[3], held[1], "the modify inserts nothing: {doc:#}");
    for c in classes {
        assert!(c["predicted_ops_per_s"].as_f64().expect("predicted") > 0.0);
        let measured = c["measured_ops_per_s"].as_f64().expect("measured");
        let error = c["relative_error"].as_f64().expect("error");
        let predicted = c["predicted_ops_per_s"].as_f64().unwrap();
        assert!(
            (error - (predicted - measured) / measured).abs() < 1e-9,
            "{c:#}"
        );
    }
    let all = doc["class_errors"]
        .as_array()
        .expect("class errors")
        .iter()
        .find(|e| e["kind"] == "all")
        .expect("an error over every class");
    assert_eq!(all["classes"], 4, "{doc:#}");
    assert!(stdout.contains("each class alone"), "{stdout}");
    for run in layouts[0]["runs_busy"].as_array().expect("busy") {
        let busy = run.as_f64().expect("/proc/stat is read on Linux");
        assert!((0.0..=1.0).contains(&busy), "{busy}");
    }
    for run in layouts[0]["runs_cpu_s_per_op"].as_array().expect("cpu") {
        assert!(run.as_f64().expect("CPU per operation") > 0.0);
    }
    assert!(scratch(&cluster).is_empty(), "scratch spaces left behind");

    // A space with the scratch prefix: refused, named, left alone.
    let taken = "tessera_layouts_0";
    cluster
        .admin()
        .add_space(&format!(
            "space {taken} key k attributes string a tolerate 0 failures"
        ))
        .expect("a space with a scratch name");
    let (ok, _, err) = bench_layouts(&cluster, workload, out, &[]);
    assert!(!ok, "bench layouts ran over an existing scratch space");
    assert!(err.contains(taken), "the refusal names the space: {err}");
    assert_eq!(
        scratch(&cluster),
        [taken],
        "the existing space is left alone"
    );
}
