//! `tessera advise` against real processes (issue 14, points 3 and 6):
//! the daemons count the shapes of what they serve and `advise --space`
//! turns a known mix into a workload with exactly its counts; `advise
//! --apply --wait` moves a space without subspaces to the advised layout
//! while a bounded background load runs, and no call of that load fails.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{cli_at, Cluster};
use serde_json::Value as Json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{Client, Outcome, PredOp, Value};

const SPACE: &str = "space hotels key int id attributes string city, string name, int price \
                     create 8 partitions tolerate 1 failure";
const CITIES: [&str; 4] = ["paris", "rome", "oslo", "lima"];

fn cluster() -> (Cluster, tokio::runtime::Runtime, Client) {
    let cluster = Cluster::start_with(2, &[], &["--metrics", "127.0.0.1:0"]);
    cluster.admin().add_space(SPACE).expect("add the space");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let client = runtime
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("a client");
    (cluster, runtime, client)
}

fn hotel(id: i64, price: i64) -> Vec<(&'static str, Value)> {
    vec![
        ("city", Value::str(CITIES[id as usize % CITIES.len()])),
        ("name", Value::str(&format!("hotel {id}"))),
        ("price", Value::Int(price)),
    ]
}

fn advise(cluster: &Cluster, args: &[&str]) -> Json {
    let out = cli_at(args, &cluster.coordinator_addr(0));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("advise printed no JSON ({e}): {out}"))
}

#[test]
fn advise_space_reports_the_mix_the_daemons_counted() {
    let (cluster, runtime, client) = cluster();
    let (inserts, searches, modifies) = (20i64, 70usize, 10i64);
    runtime.block_on(async {
        for id in 0..inserts {
            let done = client.put("hotels", Value::Int(id), hotel(id, 100)).await;
            assert_eq!(done.expect("insert"), Outcome::Done);
        }
        for i in 0..searches {
            let city = CITIES[i % CITIES.len()];
            let found = client
                .search("hotels", [("city", PredOp::Eq(Value::str(city)))])
                .await
                .expect("search");
            assert_eq!(found.len(), 5, "hotels in {city}");
        }
        // The same objects with only the price changed: modifies of price.
        for id in 0..modifies {
            let done = client.put("hotels", Value::Int(id), hotel(id, 200)).await;
            assert_eq!(done.expect("modify"), Outcome::Done);
        }
    });
    let doc = advise(
        &cluster,
        &["advise", "--space", "hotels", "--json", "--objects", "1000"],
    );
    let observed = &doc["observed"];
    let workload = &observed["workload"];
    assert_eq!(workload["space"], "hotels");
    assert_eq!(workload["objects"], 1000);
    let classes = workload["classes"].as_array().expect("classes");
    let counts: Vec<u64> = observed["counts"]
        .as_array()
        .expect("counts")
        .iter()
        .map(|c| c.as_u64().expect("a count"))
        .collect();
    let mut got: Vec<(String, u64)> = classes
        .iter()
        .zip(&counts)
        .map(|(class, &n)| {
            let mut shape = class.clone();
            shape.as_object_mut().expect("a class").remove("p");
            (shape.to_string(), n)
        })
        .collect();
    got.sort();
    let mut want = vec![
        (r#"{"search":{"city":"eq"}}"#.to_string(), searches as u64),
        (r#"{"insert":true}"#.to_string(), inserts as u64),
        (r#"{"modify":["price"]}"#.to_string(), modifies as u64),
    ];
    want.sort();
    assert_eq!(got, want, "{observed}");
    assert_eq!(observed["unmodelled"], serde_json::json!([]));
    // Each probability is its count over the total, as counted.
    let total: u64 = counts.iter().sum();
    for (class, &n) in classes.iter().zip(&counts) {
        let p = class["p"].as_f64().expect("p");
        assert!(
            (p - n as f64 / total as f64).abs() <= f64::EPSILON,
            "{class}"
        );
    }
    // The advice is on that workload: a layout that serves the city
    // searches, through a subspace or an index.
    let best = &doc["layouts"][0];
    let parts = format!("{} {}", best["subspaces"], best["indexes"]);
    assert!(parts.contains("city"), "{best}");
}

#[test]
fn advise_apply_relayouts_under_load_without_a_failed_call() {
    let (cluster, runtime, client) = cluster();
    runtime.block_on(async {
        for id in 0..40 {
            let done = client.put("hotels", Value::Int(id), hotel(id, 100)).await;
            assert_eq!(done.expect("load"), Outcome::Done);
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("workload.json");
    std::fs::write(
        &file,
        r#"{"space": "hotels", "objects": 100000, "distinct": {"city": 1000},
            "classes": [{"p": 0.9, "search": {"city": "eq"}}, {"p": 0.1, "get": true}]}"#,
    )
    .expect("write the workload");

    // A bounded background load: puts of new keys, gets, searches.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let load = {
        let (client, stop, done, failures) =
            (client.clone(), stop.clone(), done.clone(), failures.clone());
        runtime.spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(300);
            let mut id = 1000i64;
            while !stop.load(Ordering::Relaxed) && id < 30_000 && Instant::now() < deadline {
                let failed = match id % 3 {
                    0 => client
                        .put("hotels", Value::Int(id), hotel(id, 1))
                        .await
                        .err(),
                    1 => client.get("hotels", Value::Int(id - 1)).await.err(),
                    _ => client
                        .search("hotels", [("city", PredOp::Eq(Value::str("oslo")))])
                        .await
                        .err(),
                };
                if let Some(e) = failed {
                    failures
                        .lock()
                        .expect("failures")
                        .push(format!("op {id}: {e}"));
                }
                done.fetch_add(1, Ordering::Relaxed);
                id += 1;
            }
            id
        })
    };
    common::wait_for("the load to start", Duration::from_secs(60), || {
        (done.load(Ordering::Relaxed) >= 10).then_some(())
    });
    let before = done.load(Ordering::Relaxed);
    let file = file.to_str().expect("utf-8 path");
    let doc = advise(
        &cluster,
        &[
            "advise",
            "--workload",
            file,
            "--space",
            "hotels",
            "--top",
            "1",
            "--json",
            "--apply",
            "--wait",
        ],
    );
    let after = done.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let last_id = runtime.block_on(load).expect("the load task");
    eprintln!(
        "load: {before} calls before advise --apply, {after} when it returned, {} in all; advised {}",
        last_id - 1000,
        doc["layouts"][0]["description"]
    );
    let failures = failures.lock().expect("failures").clone();
    assert!(failures.is_empty(), "calls failed: {failures:?}");
    assert!(after > before, "the load ran while advise applied");

    // The space now has the advised parts, ready.
    let best = &doc["layouts"][0];
    assert_eq!(best["ahead_of_features"], false);
    let addr = cluster.coordinator_addr(0);
    let subspaces = cli_at(&["list-subspaces", "hotels"], &addr);
    let indices = cli_at(&["list-indices", "hotels"], &addr);
    let names = |key: &str| -> Vec<String> {
        best[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|v| v.to_string().replace(['[', ']', '"'], ""))
            .collect()
    };
    let (advised_subspaces, advised_indexes) = (names("subspaces"), names("indexes"));
    assert!(
        !advised_subspaces.is_empty() || !advised_indexes.is_empty(),
        "the advice adds a part: {best}"
    );
    for s in &advised_subspaces {
        let attrs = s.replace(',', ", ");
        assert!(
            subspaces
                .lines()
                .any(|l| l.ends_with(&format!(": {attrs}"))),
            "{s} in {subspaces}"
        );
    }
    for a in &advised_indexes {
        assert!(
            indices.lines().any(|l| l.contains(&format!(": {a} "))),
            "{a} in {indices}"
        );
    }
    // Every object written is found by the searches the layout now serves.
    let oslo = runtime
        .block_on(client.search("hotels", [("city", PredOp::Eq(Value::str("oslo")))]))
        .expect("search");
    let written = (0..40)
        .chain((1000..last_id).filter(|id| id % 3 == 0))
        .filter(|id| CITIES[*id as usize % CITIES.len()] == "oslo")
        .count();
    assert_eq!(oslo.len(), written);
}
