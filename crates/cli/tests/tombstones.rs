//! Tombstones are collected, and a daemon that was dead while they were
//! cannot bring a deleted object back.
//!
//! Two daemons hold every region of a `tolerate 1 failure` space. One is
//! killed with SIGKILL while it holds every object; with it away, half the
//! objects are deleted and others rewritten, and the survivor collects the
//! deletes' tombstones (the coordinator's grace is short here). The dead
//! daemon then returns with its stale data directory, rejoins every chain
//! by state transfer, and the survivor is killed in turn: what the
//! returned daemon serves alone must be exactly the current data — no
//! deleted key readable or found by a search — though nothing on its disk
//! or the survivor's recorded the deletes any more.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{wait_for, Cluster};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tessera_client::{BlockingClient, Outcome, PredOp, Value};
use tessera_types::{Configuration, DaemonId, DaemonState, Epoch};

const SPACE: &str = "space t key int k attributes int a \
                     subspace a create 2 partitions tolerate 1 failure";
const KEYS: i64 = 300;
const A_VALUES: i64 = 7;
const SURVIVOR: usize = 0;
const RETURNING: usize = 1;

/// Keys spread over the int axis, so that they fall into every key region.
fn key_of(i: i64) -> Value {
    Value::Int((i - KEYS / 2) * (i64::MAX / KEYS))
}

fn key_index(value: Option<&Value>) -> i64 {
    match value {
        Some(Value::Int(k)) => *k / (i64::MAX / KEYS) + KEYS / 2,
        other => panic!("key attribute missing: {other:?}"),
    }
}

/// Values of `a` spread over the int axis, so that writes reach every
/// region of subspace `a`.
fn a_of(index: i64) -> i64 {
    (index - A_VALUES / 2) * (i64::MAX / A_VALUES)
}

/// `text` without terminal colour codes (`ESC [ … m`).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// The sum of the `name=N` fields of the log lines that contain `what`.
fn logged_count(log: &Path, what: &str, name: &str) -> u64 {
    let text = plain(&std::fs::read_to_string(log).unwrap_or_default());
    text.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            let at = l.find(&format!("{name}="))? + name.len() + 1;
            let digits: String = l[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse::<u64>().ok()
        })
        .sum()
}

fn daemon_id(config: &Configuration, addr: &str) -> DaemonId {
    config
        .daemons
        .values()
        .find(|d| d.addr == addr)
        .map(|d| d.id)
        .expect("daemon registered")
}

fn put(client: &BlockingClient, key: i64, a: i64) {
    let outcome = client
        .put("t", key_of(key), [("a", Value::Int(a_of(a)))])
        .expect("put");
    assert_eq!(outcome, Outcome::Done, "put of key {key}");
}

#[test]
fn a_daemon_back_after_its_tombstones_were_collected_resurrects_nothing() {
    let log_env = "warn,tessera_daemon=info,tessera_coordinator=info";
    let mut cluster = Cluster::start_with(
        0,
        &["--tombstone-grace-ms", "1500"],
        &["--tombstone-collect-ms", "500"],
    );
    cluster.daemon_ports = vec![common::free_port(), common::free_port()];
    for i in 0..2 {
        cluster.start_daemon_with_env(i, &[("RUST_LOG", log_env.to_string())]);
    }
    let config = cluster.wait_daemons_available(Duration::from_secs(60));
    let returning = daemon_id(&config, &cluster.daemon_addr(RETURNING));
    let admin = cluster.admin();
    admin.add_space(SPACE).expect("add_space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("client");

    // Every object on both daemons.
    let mut model: BTreeMap<i64, i64> = BTreeMap::new();
    for k in 0..KEYS {
        put(&client, k, k % A_VALUES);
        model.insert(k, k % A_VALUES);
    }

    // One daemon dies holding all of them; once it is out of every chain,
    // half the keys are deleted and some others rewritten.
    cluster.procs.kill(&format!("daemon-{RETURNING}"));
    wait_for(
        "the dead daemon to leave every chain",
        Duration::from_secs(30),
        || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let gone = config.daemons.get(&returning)?.state == DaemonState::Offline;
            gone.then_some(())
        },
    );
    for k in (0..KEYS).step_by(2) {
        let outcome = client.del("t", key_of(k)).expect("del");
        assert_eq!(outcome, Outcome::Done, "del of key {k}");
        model.remove(&k);
    }
    for k in (1..KEYS).step_by(6) {
        put(&client, k, (k + 3) % A_VALUES);
        model.insert(k, (k + 3) % A_VALUES);
    }
    let deleted = (KEYS as u64).div_ceil(2);

    // The survivor collects the deletes' tombstones: one in the key
    // subspace and one in subspace `a` per deleted key.
    let survivor_log = cluster.dir.path().join(format!("daemon-{SURVIVOR}.log"));
    let collected = wait_for(
        "the tombstones to be collected",
        Duration::from_secs(60),
        || {
            let n = logged_count(&survivor_log, "collected tombstones", "collected");
            (n >= 2 * deleted).then_some(n)
        },
    );
    eprintln!("the survivor collected {collected} tombstones of {deleted} deleted keys");

    // The dead daemon returns with its stale copy and rejoins every chain.
    cluster.start_daemon_with_env(RETURNING, &[("RUST_LOG", log_env.to_string())]);
    wait_for(
        "the returned daemon in every chain",
        Duration::from_secs(60),
        || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let whole = config.transfers.is_empty()
                && config.space("t")?.subspaces.iter().all(|l| {
                    l.regions
                        .iter()
                        .all(|r| r.chain.len() == 2 && r.chain.contains(&returning))
                });
            whole.then_some(())
        },
    );
    let returning_log = cluster.dir.path().join(format!("daemon-{RETURNING}.log"));
    let dropped = logged_count(&returning_log, "no longer holds", "count");
    eprintln!("the returned daemon deleted {dropped} stale keys while rejoining");
    assert!(
        dropped >= deleted,
        "the returned daemon held every deleted key; it dropped {dropped} of {deleted}"
    );

    // The survivor dies: the returned daemon serves alone.
    cluster.procs.kill(&format!("daemon-{SURVIVOR}"));
    let survivor = daemon_id(
        &admin
            .wait_config(Epoch(0), Duration::ZERO)
            .unwrap()
            .unwrap(),
        &cluster.daemon_addr(SURVIVOR),
    );
    let config = wait_for(
        "the survivor to leave every chain",
        Duration::from_secs(30),
        || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let gone = config.daemons.get(&survivor)?.state == DaemonState::Offline;
            gone.then_some(config)
        },
    );
    client
        .wait_for_epoch(config.epoch, Duration::from_secs(10))
        .expect("client follows");

    // Every key reads back as the model says, deleted ones not at all.
    for k in 0..KEYS {
        let record = client.get("t", key_of(k)).expect("get");
        let got = record.map(|r| match r.get("a") {
            Some(Value::Int(a)) => *a,
            other => panic!("key {k}: attribute a is {other:?}"),
        });
        assert_eq!(got, model.get(&k).map(|&a| a_of(a)), "key {k}");
    }
    // And every search equals a filter over the model.
    for a in 0..A_VALUES {
        let found = client
            .search("t", [("a", PredOp::Eq(Value::Int(a_of(a))))])
            .expect("search");
        let mut got: Vec<i64> = found.iter().map(|r| key_index(r.get("k"))).collect();
        got.sort_unstable();
        let expected: Vec<i64> = model
            .iter()
            .filter(|&(_, &v)| v == a)
            .map(|(&k, _)| k)
            .collect();
        assert_eq!(got, expected, "search a = {a}");
    }
}
