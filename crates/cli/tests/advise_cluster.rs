//! `tessera advise` against real processes (issue 14, points 3 and 6):
//! the daemons count the shapes of what they serve and `advise --space`
//! turns a known mix into a workload with exactly its counts; `advise
//! --apply --wait` moves a space without subspaces to the advised layout
//! while a bounded background load runs, and no call of that load fails;
//! a recovery budget adds a hybrid to a replex space live.

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
    cluster_of(2, &["--metrics", "127.0.0.1:0"], SPACE)
}

/// `daemons` daemons started with `flags`, holding `space`, and a client.
fn cluster_of(
    daemons: usize,
    flags: &[&str],
    space: &str,
) -> (Cluster, tokio::runtime::Runtime, Client) {
    let cluster = Cluster::start_with(daemons, &[], flags);
    cluster.admin().add_space(space).expect("add the space");
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

/// Counts one call of a load loop, keeping its error when it failed.
fn count(
    failures: &Mutex<Vec<String>>,
    done: &AtomicU64,
    call: std::fmt::Arguments<'_>,
    failed: Option<impl std::fmt::Display>,
) {
    if let Some(e) = failed {
        failures
            .lock()
            .expect("failures")
            .push(format!("{call}: {e}"));
    }
    done.fetch_add(1, Ordering::Relaxed);
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
    let default_priced = doc.clone();
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
    assert_eq!(doc["object_bytes_source"], "default");

    // Without --objects: the objects the space holds, counted, and the
    // size of a stored copy measured: at least the strings they hold,
    // and not much more (the ints, lengths, version and region).
    let doc = advise(&cluster, &["advise", "--space", "hotels", "--json"]);
    let workload = &doc["observed"]["workload"];
    assert_eq!(workload["objects"], inserts, "{workload}");
    assert_eq!(doc["objects"], inserts);
    assert_eq!(doc["object_bytes_source"], "measured");
    let strings = (0..inserts)
        .map(|id| {
            let h = hotel(id, 100);
            let text = |v: &Value| match v {
                Value::String(s) => s.len(),
                _ => 0,
            };
            text(&h[0].1) + text(&h[1].1)
        })
        .sum::<usize>() as f64
        / inserts as f64;
    let bytes = workload["object_bytes"].as_f64().expect("object_bytes");
    assert_eq!(doc["object_bytes"].as_f64(), Some(bytes));
    assert!(
        bytes >= strings && bytes <= strings + 64.0,
        "{bytes} bytes a copy for {strings} bytes of strings"
    );
    // A local index entry measured too: the region, slot and coordinate
    // (20 bytes) and an int key's few bytes, whatever the values.
    let entry = workload["index_entry_bytes"]
        .as_f64()
        .expect("index_entry_bytes");
    assert_eq!(doc["index_entry_bytes"].as_f64(), Some(entry));
    assert!(
        entry > 20.0 && entry <= 20.0 + 16.0,
        "{entry} bytes an entry"
    );
    // A global index on each attribute: the indexlet's projection record
    // (at least the key again and a record's overhead beyond a local
    // entry) and its ordered entry, and never more than the whole object
    // and an entry.
    let global = workload["global_entry_bytes"]
        .as_object()
        .expect("global_entry_bytes");
    assert_eq!(doc["global_entry_bytes"], workload["global_entry_bytes"]);
    eprintln!("measured: a copy {bytes} bytes, a local entry {entry}, global entries {global:?}");
    for attr in ["city", "name", "price"] {
        let g = global[attr]
            .as_f64()
            .unwrap_or_else(|| panic!("{attr}: {global:?}"));
        assert!(g > entry && g < bytes + 64.0, "{attr}: {g} bytes");
    }
    // The observed workload, with its measured sizes, is a workload file
    // that advises on this space.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("observed.json");
    std::fs::write(&file, workload.to_string()).expect("write the workload");
    let again = advise(
        &cluster,
        &[
            "advise",
            "--workload",
            file.to_str().expect("a path"),
            "--json",
        ],
    );
    assert_eq!(again["object_bytes_source"], "workload", "{again}");
    assert_eq!(again["index_entry_bytes"].as_f64(), Some(entry));
    assert_eq!(again["global_entry_bytes"], workload["global_entry_bytes"]);
    // Storage is priced with it: the same layout (the key subspace alone)
    // takes fewer bytes per object than at the default size, which is
    // larger.
    let default_size = doc["parameters"]["object_bytes"]
        .as_f64()
        .expect("a default");
    assert!(bytes < default_size);
    let stored = |doc: &Json| {
        doc["heuristics"]
            .as_array()
            .expect("heuristics")
            .iter()
            .find(|h| h["name"] == "no-subspace")
            .and_then(|h| h["bytes_per_object"].as_f64())
            .expect("the key subspace alone is priced")
    };
    assert!(stored(&doc) < stored(&default_priced), "{doc}");
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
                count(&failures, &done, format_args!("op {id}"), failed);
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
    assert_eq!(best["new_space_only"], false);
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

/// Issue 14 with Replex's hybrids: on a replex space, a recovery budget
/// the space misses brings advice with a hybrid (its rebuild reads a
/// group of the hybrid instead of a whole replex), and `--apply --wait`
/// adds it live: the part is ready and searches still find every object.
#[test]
fn a_recovery_budget_adds_a_hybrid_to_a_replex_space_live() {
    let (cluster, runtime, client) = cluster_of(
        3,
        &[],
        "space orders key int id attributes string customer, int quantity \
         replex customer create 8 partitions tolerate 1 failure",
    );
    let customer = |id: i64| format!("c{}", id % 7);
    runtime.block_on(async {
        for id in 0..60 {
            let object = vec![
                ("customer", Value::str(&customer(id))),
                ("quantity", Value::Int(id)),
            ];
            let done = client.put("orders", Value::Int(id), object).await;
            assert_eq!(done.expect("load"), Outcome::Done);
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("workload.json");
    std::fs::write(
        &file,
        r#"{"space": "orders", "objects": 1000000,
            "classes": [{"p": 0.5, "search": {"customer": "eq"}}, {"p": 0.5, "get": true}]}"#,
    )
    .expect("write the workload");
    let file = file.to_str().expect("utf-8 path");
    let free = advise(
        &cluster,
        &["advise", "--workload", file, "--top", "1", "--json"],
    );
    let plain = &free["layouts"][0];
    assert_eq!(
        plain["hybrids"].as_array().map(Vec::len),
        Some(0),
        "{plain}"
    );
    let recovery = plain["recovery_s"].as_f64().expect("recovery_s");
    let budget = format!("{}", recovery * 0.6);
    let doc = advise(
        &cluster,
        &[
            "advise",
            "--workload",
            file,
            "--top",
            "1",
            "--json",
            "--recovery-budget",
            &budget,
            "--apply",
            "--wait",
        ],
    );
    let best = &doc["layouts"][0];
    let hybrids = best["hybrids"].as_array().expect("hybrids");
    assert_eq!(hybrids.len(), 1, "{best}");
    assert!(best["recovery_s"].as_f64().expect("recovery_s") <= recovery * 0.6);
    assert!(
        best["description"]
            .as_str()
            .unwrap_or("")
            .contains("hybrid"),
        "{best}"
    );
    let shown = cli_at(&["show-config"], &cluster.coordinator_addr(0));
    assert!(
        shown
            .lines()
            .any(|l| l.trim_start().starts_with("hybrid") && l.contains("ready")),
        "{shown}"
    );
    // Every object is found by customer, as a filter over what was put.
    for c in 0..7 {
        let name = format!("c{c}");
        let found = runtime
            .block_on(client.search("orders", [("customer", PredOp::Eq(Value::str(&name)))]))
            .expect("search");
        let want = (0..60).filter(|id| customer(*id) == name).count();
        assert_eq!(found.len(), want, "customer {name}");
    }
}

/// A background load of one kind at a time, switched by the test: each
/// call's failure is kept, and each kind's calls and time are counted.
struct Load {
    /// 0: puts of new keys and gets; 1: searches by city and gets.
    phase: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Load {
    fn start(
        runtime: &tokio::runtime::Runtime,
        client: &Client,
    ) -> (Load, tokio::task::JoinHandle<()>) {
        let load = Load {
            phase: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicU64::new(0)),
            failures: Arc::new(Mutex::new(Vec::new())),
        };
        let (client, phase, stop, done, failures) = (
            client.clone(),
            load.phase.clone(),
            load.stop.clone(),
            load.done.clone(),
            load.failures.clone(),
        );
        let task = runtime.spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(300);
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) && n < 200_000 && Instant::now() < deadline {
                let failed = match (phase.load(Ordering::Relaxed), n % 10) {
                    (_, 0) => client.get("hotels", Value::Int(n % 40)).await.err(),
                    (0, _) => client
                        .put("hotels", Value::Int(10_000 + n), hotel(n, 1))
                        .await
                        .err(),
                    _ => client
                        .search(
                            "hotels",
                            [("city", PredOp::Eq(Value::str(CITIES[n as usize % 4])))],
                        )
                        .await
                        .err(),
                };
                count(&failures, &done, format_args!("call {n}"), failed);
                n += 1;
            }
        });
        (load, task)
    }
}

#[test]
fn the_autopilot_applies_a_relayout_when_the_mix_drifts_and_then_holds() {
    let (cluster, runtime, client) = cluster();
    runtime.block_on(async {
        for id in 0..40 {
            let done = client.put("hotels", Value::Int(id), hotel(id, 100)).await;
            assert_eq!(done.expect("load"), Outcome::Done);
        }
    });
    let (load, task) = Load::start(&runtime, &client);
    common::wait_for("the load to start", Duration::from_secs(60), || {
        (load.done.load(Ordering::Relaxed) >= 50).then_some(())
    });
    let (host, port) = cluster
        .coordinator_addr(0)
        .split_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .expect("host:port");
    let mut pilot = std::process::Command::new(common::TESSERA)
        .args([
            "autopilot",
            "--space",
            "hotels",
            "--every",
            "3",
            "--rounds",
            "7",
            "--min-ops",
            "60",
            "--apply",
            "--json",
            "--host",
            &host,
            "--port",
            &port,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the autopilot");
    let pid = pilot.id();
    let lines = std::io::BufRead::lines(std::io::BufReader::new(
        pilot.stdout.take().expect("its stdout"),
    ));
    let mut rounds: Vec<Json> = Vec::new();
    let mut switched_at = None;
    let mut applied_at = None;
    for line in lines {
        let line = line.expect("a line");
        let round: Json = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        eprintln!("autopilot: {round}");
        let verdict = round["verdict"].as_str().expect("a verdict").to_string();
        if matches!(verdict.as_str(), "keep" | "propose") {
            // Priced on the objects the space holds, counted this round:
            // the 40 loaded, and at most one more per call made since.
            let objects = round["objects"].as_u64().expect("objects counted");
            let most = 40 + load.done.load(Ordering::Relaxed);
            assert!(
                (40..=most).contains(&objects),
                "{objects} of at most {most}: {round}"
            );
            let bytes = round["object_bytes"].as_f64().expect("a size measured");
            assert!(bytes > 0.0, "{round}");
        }
        if switched_at.is_none() && verdict != "too_few" {
            // The first decision, on puts and gets: nothing to gain.
            assert_eq!(verdict, "keep", "{round}");
            assert_eq!(round["gain"], 0.0, "{round}");
            load.phase.store(1, Ordering::Relaxed);
            switched_at = Some((Instant::now(), load.done.load(Ordering::Relaxed)));
        } else if verdict == "propose" {
            assert!(applied_at.is_none(), "a second proposal: {round}");
            assert_eq!(round["applied"], true, "{round}");
            assert!(round["gain"].as_f64().expect("gain") >= 0.2, "{round}");
            applied_at = Some((Instant::now(), load.done.load(Ordering::Relaxed)));
        } else if applied_at.is_some() {
            // The mix it applied a layout for goes on: it holds.
            assert!(matches!(verdict.as_str(), "steady" | "too_few"), "{round}");
        }
        rounds.push(round);
    }
    let status = pilot.wait().expect("the autopilot ends");
    assert!(status.success(), "autopilot {pid} failed: {status}");
    let ((t1, n1), (t2, n2)) = (
        switched_at.expect("the autopilot decided on the first mix"),
        applied_at.expect("the autopilot applied a layout for the searches"),
    );
    // The searches' throughput before (while the key subspace served them)
    // and after the relayout.
    let before = (n2 - n1) as f64 / (t2 - t1).as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));
    let after = (load.done.load(Ordering::Relaxed) - n2) as f64 / t2.elapsed().as_secs_f64();
    load.stop.store(true, Ordering::Relaxed);
    runtime.block_on(task).expect("the load task");
    eprintln!(
        "load calls/s: {before:.0} before the relayout (including its build), {after:.0} after; {} rounds",
        rounds.len()
    );
    let failures = load.failures.lock().expect("failures").clone();
    assert!(failures.is_empty(), "calls failed: {failures:?}");
    // The applied layout serves city searches.
    let addr = cluster.coordinator_addr(0);
    let parts = format!(
        "{}{}",
        cli_at(&["list-subspaces", "hotels"], &addr),
        cli_at(&["list-indices", "hotels"], &addr)
    );
    assert!(parts.contains("city"), "{parts}");
}

/// A workload naming a space of the cluster prices its global index with
/// the indexlets the cluster has (here its declared 3, not the space's 8
/// partitions), and says so in the JSON.
#[test]
fn advise_prices_a_global_index_with_the_indexlets_the_cluster_has() {
    let declared = "space hotels key int id attributes string city, string name, int price \
                    global index price create 3 partitions create 8 partitions tolerate 0 failures";
    let (cluster, _runtime, _client) = cluster_of(1, &[], declared);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write a file");
        path.to_str().expect("a UTF-8 path").to_string()
    };
    let classes = r#"[{"p": 0.5, "search": {"price": "range"}, "range_fraction": 0.5},
                      {"p": 0.5, "modify": ["price"]}]"#;
    let workload = write(
        "w.json",
        &format!(r#"{{"space": "hotels", "objects": 10000, "classes": {classes}}}"#),
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["advise", "--workload", &workload, "--json", "--top", "50"];
        args.extend_from_slice(extra);
        advise(&cluster, &args)
    };
    let read = run(&[]);
    assert_eq!(
        read["global_indexlets"],
        serde_json::json!({"price": 3}),
        "{read}"
    );
    // The same space described in a file is not read from the cluster:
    // its declared count prices it alike; without one, the space's 8
    // partitions price every layout with price's index differently.
    let three = run(&["--description", &write("3.txt", declared)]);
    assert_eq!(three["global_indexlets"], serde_json::json!({}), "{three}");
    let default = declared.replace(
        "global index price create 3 partitions",
        "global index price",
    );
    let eight = run(&["--description", &write("8.txt", &default)]);
    let predictions = |doc: &Json| -> std::collections::BTreeMap<String, f64> {
        doc["layouts"]
            .as_array()
            .expect("layouts")
            .iter()
            .chain(doc["heuristics"].as_array().expect("heuristics"))
            .map(|l| {
                let parts = [
                    &l["subspaces"],
                    &l["indexes"],
                    &l["global_indexes"],
                    &l["replex"],
                ];
                let key = serde_json::to_string(&parts).expect("JSON");
                (
                    key,
                    l["predicted_ops_per_s"].as_f64().expect("a prediction"),
                )
            })
            .collect()
    };
    let (read, three, eight) = (predictions(&read), predictions(&three), predictions(&eight));
    assert_eq!(read, three);
    let differ = three
        .iter()
        .filter(|(key, _)| key.contains("price"))
        .filter(|(key, a)| eight.get(*key).is_some_and(|b| (*a - b).abs() > 1e-6 * *a))
        .count();
    assert!(differ > 0, "3 indexlets priced as 8: {three:?} {eight:?}");
}
