//! Kill -9 of a daemon under writes, with `tolerate 1 failure`: the
//! coordinator notices the silence, takes the daemon out of every chain,
//! re-replicates its regions by state transfer, and no acknowledged write
//! is lost. Afterwards every key reads back as last acknowledged, every
//! search equals a brute-force filter over the model, and every region has
//! two replicas again, none of them the dead daemon. And `tessera bench
//! recovery`, which measures the same on processes of its own, reports
//! the chain's repair as it happens.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{free_port, ports_free, run_cli, wait_for, Cluster};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tessera_client::{BlockingClient, Outcome, PredOp, Value};
use tessera_types::{DaemonState, Epoch};

const SPACE: &str = "space f key int k attributes int a, int b \
                     subspace a subspace b create 4 partitions tolerate 1 failure";
const KEYS: i64 = 200;
const WRITES_AFTER_KILL: usize = 600;

/// Keys are spread over the whole int axis, so that (coordinates being
/// order-preserving) they fall into every key region.
fn key_of(i: i64) -> Value {
    Value::Int((i - KEYS / 2) * (i64::MAX / (KEYS / 2)))
}

/// Puts until acknowledged: a put is idempotent, so retrying one whose
/// answer was lost is safe. Returns when it succeeded.
fn put_acked(client: &BlockingClient, key: i64, a: i64, b: i64, deadline: Instant) -> Instant {
    loop {
        match client.put(
            "f",
            key_of(key),
            [("a", Value::Int(a)), ("b", Value::Int(b))],
        ) {
            Ok(Outcome::Done) => return Instant::now(),
            Ok(other) => panic!("put of key {key}: {other:?}"),
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "put of key {key} never succeeded: {e}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[test]
fn killing_a_daemon_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start(4);
    cluster.admin().add_space(SPACE).expect("add_space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(90);

    let mut model: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for key in 0..KEYS {
        put_acked(&client, key, key, -key, deadline);
        model.insert(key, (key, -key));
    }

    // The victim: daemon 1's instance id, from its address.
    let victim_addr = cluster.daemon_addr(1);
    let config = client.refresh(Duration::ZERO).expect("config");
    let victim = config
        .daemons
        .values()
        .find(|d| d.addr == victim_addr)
        .expect("victim registered")
        .id;
    let victim_keys: Vec<i64> = {
        let space = config.space("f").unwrap();
        (0..KEYS)
            .filter(|k| {
                let c = tessera_types::coordinate::coordinate(&key_of(*k)).unwrap();
                let layout = &space.subspaces[0];
                layout.regions[layout.region_index(&[c])].chain.first() == Some(&victim)
            })
            .collect()
    };
    assert!(
        !victim_keys.is_empty(),
        "the victim leads no key; the test would prove nothing"
    );

    cluster.procs.kill("daemon-1");
    let killed_at = Instant::now();
    let mut first_write_to_victim_keys = None;
    for i in 0..WRITES_AFTER_KILL {
        let key = if i % 3 == 0 {
            victim_keys[i % victim_keys.len()]
        } else {
            (i as i64 * 7) % KEYS
        };
        let (a, b) = ((i as i64 * 31) % 97, i as i64);
        let acked = put_acked(&client, key, a, b, deadline);
        if victim_keys.contains(&key) && first_write_to_victim_keys.is_none() {
            first_write_to_victim_keys = Some(acked - killed_at);
        }
        model.insert(key, (a, b));
    }
    eprintln!(
        "first acknowledged write to a key the killed daemon led: {:?} after the kill",
        first_write_to_victim_keys.unwrap()
    );

    // Re-replication: the victim is offline and in no chain; every region
    // has two replicas again.
    let admin = cluster.admin();
    let config = wait_for(
        "re-replication after the kill",
        Duration::from_secs(60),
        || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let offline = config
                .daemons
                .get(&victim)
                .is_some_and(|d| d.state == DaemonState::Offline);
            let space = config.space("f")?;
            let repaired = config.transfers.is_empty()
                && space.subspaces.iter().all(|l| {
                    l.regions
                        .iter()
                        .all(|r| r.chain.len() == 2 && !r.chain.contains(&victim))
                });
            (offline && repaired).then_some(config)
        },
    );
    client
        .wait_for_epoch(config.epoch, Duration::from_secs(10))
        .expect("client follows");

    for (&key, &(a, b)) in &model {
        let record = client
            .get("f", key_of(key))
            .expect("get")
            .unwrap_or_else(|| panic!("key {key} lost"));
        assert_eq!(record.get("a"), Some(&Value::Int(a)), "key {key}");
        assert_eq!(record.get("b"), Some(&Value::Int(b)), "key {key}");
    }
    for a in [0i64, 5, 31, 96] {
        let mut got: Vec<i64> = client
            .search("f", [("a", PredOp::Eq(Value::Int(a)))])
            .expect("search")
            .iter()
            .map(|r| match r.get("k") {
                Some(Value::Int(k)) => *k / (i64::MAX / (KEYS / 2)) + KEYS / 2,
                other => panic!("key attribute missing: {other:?}"),
            })
            .collect();
        got.sort_unstable();
        let want: Vec<i64> = model
            .iter()
            .filter(|(_, v)| v.0 == a)
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(got, want, "search a = {a}");
    }
    let lo_hi = [
        ("b", PredOp::Ge(Value::Int(100))),
        ("b", PredOp::Lt(Value::Int(300))),
    ];
    let got = client.search("f", lo_hi).expect("range search").len();
    let want = model.values().filter(|v| (100..300).contains(&v.1)).count();
    assert_eq!(got, want, "range search on b");
}

/// `tessera bench recovery --runs 2 --rejoin MODE` on a small region; its
/// JSON report.
fn bench_recovery(rejoin: &str) -> serde_json::Value {
    let port = wait_for("4 consecutive free ports", Duration::from_secs(10), || {
        let port = free_port();
        let ports: Option<Vec<u16>> = (0..4).map(|i| port.checked_add(i)).collect();
        ports
            .filter(|p| ports_free(p.iter().copied()))
            .map(|_| port)
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("recovery.json");
    let (ok, out, err) = run_cli(
        &[
            "bench",
            "recovery",
            "--records",
            "300",
            "--runs",
            "2",
            "--rejoin",
            rejoin,
            "--port",
            &port.to_string(),
            "--timeout",
            "60",
            "--json",
            json.to_str().expect("utf-8 path"),
        ],
        None,
        Duration::from_secs(240),
    );
    assert!(ok, "bench recovery failed:\n{out}\n{err}");
    assert!(out.contains("median: detected"), "no summary in:\n{out}");
    serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report"))
        .expect("valid JSON")
}

/// The benchmark on a small region, filling the killed daemon's place as
/// `rejoin` says: each run kills the chain's head and the transfer goes
/// from the survivor to the one daemon outside the chain, so the second
/// run kills the first run's survivor; its target is the daemon killed
/// first, restarted with its old copy (`data`), or a new daemon with a
/// fresh id (`empty`).
fn check_bench_recovery(rejoin: &str) {
    let report = bench_recovery(rejoin);
    assert_eq!(report["objects"], 300);
    assert_eq!(report["rejoin"], rejoin);
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    let id = |run: &serde_json::Value, field: &str| run[field].as_u64().expect(field);
    for run in runs {
        let (killed, from, to) = (
            id(run, "killed"),
            id(run, "transfer_from"),
            id(run, "transfer_to"),
        );
        assert!(
            killed != from && killed != to && from != to,
            "transfer d{from} -> d{to} after killing d{killed}"
        );
        assert!(run["first_write_ms"].as_f64().expect("first write") > 0.0);
    }
    let (first, second) = (&runs[0], &runs[1]);
    assert_eq!(id(second, "killed"), id(first, "transfer_from"));
    assert_eq!(first["target_held_region"], false);
    if rejoin == "data" {
        assert_eq!(id(second, "transfer_to"), id(first, "killed"));
        assert_eq!(second["target_held_region"], true);
    } else {
        // Ids are never reused: the new daemon's is above every other.
        let seen = ["killed", "transfer_from", "transfer_to"].map(|f| id(first, f));
        assert!(seen.iter().all(|&d| id(second, "transfer_to") > d));
        assert_eq!(second["target_held_region"], false);
    }
}

#[test]
fn bench_recovery_restarting_the_killed_daemon_with_its_data() {
    check_bench_recovery("data");
}

#[test]
fn bench_recovery_replacing_the_killed_daemon_with_an_empty_one() {
    check_bench_recovery("empty");
}
