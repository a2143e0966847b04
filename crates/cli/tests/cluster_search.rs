//! A real cluster of processes (one coordinator, four daemons) against a
//! model: thousands of puts, relocating updates and deletes through the
//! Rust client, then hundreds of random searches, each compared with a
//! brute-force filter over the model; then every process is killed
//! (SIGKILL) and restarted on the same data, and the check runs again,
//! with a get of every key.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::Cluster;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Duration;
use tessera_client::{Client, Outcome, PredOp, Record, Value};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

const SPACE: &str = "space t key k attributes int a, int b, string c, float d \
                     subspace a, b subspace c, d create 8 partitions tolerate 1 failure";

const OBJECTS: usize = 3000;
const UPDATES: usize = 1200;
const DELETES: usize = 300;
const SEARCHES: usize = 300;
const IN_FLIGHT_MAX: usize = 32;

#[derive(Clone, Debug, PartialEq)]
struct Obj {
    a: i64,
    b: i64,
    c: String,
    d: f64,
}

type Model = BTreeMap<String, Obj>;

const NAMES: [&str; 12] = [
    "ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "ibis", "jay", "koi", "lynx",
];

fn random_obj(rng: &mut StdRng) -> Obj {
    Obj {
        a: rng.gen_range(0..40),
        b: rng.gen_range(-20..20),
        c: NAMES[rng.gen_range(0..NAMES.len())].to_string(),
        // Halves, so that equality on d finds something.
        d: f64::from(rng.gen_range(-200..200)) / 2.0,
    }
}

fn attrs_of(obj: &Obj) -> Vec<(&'static str, Value)> {
    vec![
        ("a", Value::Int(obj.a)),
        ("b", Value::Int(obj.b)),
        ("c", Value::str(&obj.c)),
        ("d", Value::Float(obj.d)),
    ]
}

fn obj_of(record: &Record) -> Obj {
    let int = |name| match record.get(name) {
        Some(Value::Int(i)) => *i,
        other => panic!("{name} is {other:?}"),
    };
    Obj {
        a: int("a"),
        b: int("b"),
        c: match record.get("c") {
            Some(Value::String(s)) => String::from_utf8(s.clone()).expect("utf-8"),
            other => panic!("c is {other:?}"),
        },
        d: match record.get("d") {
            Some(Value::Float(f)) => *f,
            other => panic!("d is {other:?}"),
        },
    }
}

fn key_of(record: &Record) -> String {
    match record.get("k") {
        Some(Value::String(s)) => String::from_utf8(s.clone()).expect("utf-8"),
        other => panic!("k is {other:?}"),
    }
}

/// One predicate of a random search, with its brute-force meaning.
#[derive(Clone, Debug)]
enum Pred {
    KeyEq(String),
    AEq(i64),
    BEq(i64),
    CEq(String),
    DEq(f64),
    /// lo <= a < hi
    ARange(i64, i64),
    /// lo < b <= hi
    BRange(i64, i64),
    /// lo <= d <= hi
    DRange(f64, f64),
    /// c < x
    CLess(String),
}

impl Pred {
    fn holds(&self, key: &str, obj: &Obj) -> bool {
        match self {
            Pred::KeyEq(k) => key == k,
            Pred::AEq(v) => obj.a == *v,
            Pred::BEq(v) => obj.b == *v,
            Pred::CEq(v) => obj.c == *v,
            Pred::DEq(v) => obj.d == *v,
            Pred::ARange(lo, hi) => *lo <= obj.a && obj.a < *hi,
            Pred::BRange(lo, hi) => *lo < obj.b && obj.b <= *hi,
            Pred::DRange(lo, hi) => *lo <= obj.d && obj.d <= *hi,
            Pred::CLess(v) => obj.c.as_bytes() < v.as_bytes(),
        }
    }

    fn ops(&self) -> Vec<(&'static str, PredOp)> {
        match self {
            Pred::KeyEq(k) => vec![("k", PredOp::Eq(Value::str(k)))],
            Pred::AEq(v) => vec![("a", PredOp::Eq(Value::Int(*v)))],
            Pred::BEq(v) => vec![("b", PredOp::Eq(Value::Int(*v)))],
            Pred::CEq(v) => vec![("c", PredOp::Eq(Value::str(v)))],
            Pred::DEq(v) => vec![("d", PredOp::Eq(Value::Float(*v)))],
            Pred::ARange(lo, hi) => vec![
                ("a", PredOp::Ge(Value::Int(*lo))),
                ("a", PredOp::Lt(Value::Int(*hi))),
            ],
            Pred::BRange(lo, hi) => vec![
                ("b", PredOp::Gt(Value::Int(*lo))),
                ("b", PredOp::Le(Value::Int(*hi))),
            ],
            Pred::DRange(lo, hi) => {
                vec![
                    ("d", PredOp::Ge(Value::Float(*lo))),
                    ("d", PredOp::Le(Value::Float(*hi))),
                ]
            }
            Pred::CLess(v) => vec![("c", PredOp::Lt(Value::str(v)))],
        }
    }
}

fn random_pred(rng: &mut StdRng, model: &Model) -> Pred {
    match rng.gen_range(0..9) {
        0 => {
            // A key that exists most of the time.
            let index = rng.gen_range(0..OBJECTS + 10);
            Pred::KeyEq(format!("key-{index}"))
        }
        1 => Pred::AEq(rng.gen_range(-1..41)),
        2 => Pred::BEq(rng.gen_range(-21..21)),
        3 => Pred::CEq(NAMES[rng.gen_range(0..NAMES.len())].to_string()),
        4 => {
            // A d that some object has, or one that none has.
            let d = if rng.gen_bool(0.8) && !model.is_empty() {
                let index = rng.gen_range(0..model.len());
                model.values().nth(index).map_or(0.0, |o| o.d)
            } else {
                0.25
            };
            Pred::DEq(d)
        }
        5 => {
            let lo = rng.gen_range(-5..40);
            Pred::ARange(lo, lo + rng.gen_range(0..15))
        }
        6 => {
            let lo = rng.gen_range(-25..20);
            Pred::BRange(lo, lo + rng.gen_range(0..12))
        }
        7 => {
            let lo = f64::from(rng.gen_range(-220..200)) / 2.0;
            Pred::DRange(lo, lo + f64::from(rng.gen_range(0..80)) / 2.0)
        }
        _ => Pred::CLess(NAMES[rng.gen_range(0..NAMES.len())].to_string()),
    }
}

fn random_query(rng: &mut StdRng, model: &Model) -> Vec<Pred> {
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1..=5 => vec![random_pred(rng, model)],
        _ => (0..rng.gen_range(2..4))
            .map(|_| random_pred(rng, model))
            .collect(),
    }
}

/// Runs `count` random searches and compares each with the model; also
/// counts and sorted searches on some of them.
fn check_searches(
    runtime: &Runtime,
    client: &Client,
    model: &Model,
    rng: &mut StdRng,
    count: usize,
) {
    for round in 0..count {
        let query = random_query(rng, model);
        let ops: Vec<(&str, PredOp)> = query.iter().flat_map(Pred::ops).collect();
        let expected: BTreeMap<String, Obj> = model
            .iter()
            .filter(|(k, o)| query.iter().all(|p| p.holds(k, o)))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        let records = runtime
            .block_on(client.search("t", ops.clone()))
            .unwrap_or_else(|e| panic!("search {query:?} failed: {e}"));
        let mut found = BTreeMap::new();
        for record in &records {
            let previous = found.insert(key_of(record), obj_of(record));
            assert!(
                previous.is_none(),
                "search {query:?} returned key {} twice",
                key_of(record)
            );
        }
        assert_eq!(
            found, expected,
            "search {query:?} (round {round}) differs from the model"
        );

        if round % 10 == 0 {
            let n = runtime
                .block_on(client.count("t", ops.clone()))
                .expect("count");
            assert_eq!(n, expected.len() as u64, "count {query:?}");
        }
        if round % 15 == 0 {
            let limit = rng.gen_range(1..20);
            let sorted = runtime
                .block_on(client.sorted_search("t", ops.clone(), "a", limit, true))
                .expect("sorted");
            let got: Vec<i64> = sorted.iter().map(|r| obj_of(r).a).collect();
            let mut want: Vec<i64> = expected.values().map(|o| o.a).collect();
            want.sort_unstable_by(|x, y| y.cmp(x));
            want.truncate(limit as usize);
            assert_eq!(
                got, want,
                "sorted_search {query:?} by a descending, limit {limit}"
            );
        }
    }
}

/// Runs `writes` with at most `IN_FLIGHT_MAX` in flight.
fn run_concurrently<F>(runtime: &Runtime, writes: Vec<F>)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    runtime.block_on(async {
        let mut set = JoinSet::new();
        for write in writes {
            if set.len() >= IN_FLIGHT_MAX {
                set.join_next().await.expect("a task").expect("write task");
            }
            set.spawn(write);
        }
        while let Some(done) = set.join_next().await {
            done.expect("write task");
        }
    });
}

#[test]
fn searches_match_a_model_before_and_after_a_restart() {
    let seed: u64 = std::env::var("TESSERA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (set TESSERA_TEST_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);

    let mut cluster = Cluster::start(4);
    let runtime = Runtime::new().expect("runtime");
    cluster.admin().add_space(SPACE).expect("add_space");
    let client = runtime
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("connect");

    // Puts of fresh keys.
    let mut model = Model::new();
    let mut writes = Vec::new();
    for i in 0..OBJECTS {
        let key = format!("key-{i}");
        let obj = random_obj(&mut rng);
        model.insert(key.clone(), obj.clone());
        let client = client.clone();
        writes.push(async move {
            client
                .put("t", Value::str(&key), attrs_of(&obj))
                .await
                .unwrap_or_else(|e| panic!("put {key}: {e}"))
                .into_result()
                .unwrap_or_else(|e| panic!("put {key}: {e}"));
        });
    }
    run_concurrently(&runtime, writes);

    // Updates of distinct keys, most of which move the object to other
    // regions of both subspaces; some name only some attributes.
    let mut keys: Vec<String> = model.keys().cloned().collect();
    let mut writes = Vec::new();
    for _ in 0..UPDATES {
        let key = keys.swap_remove(rng.gen_range(0..keys.len()));
        let fresh = random_obj(&mut rng);
        let obj = model.get_mut(&key).expect("in model");
        let attrs: Vec<(&'static str, Value)> = match rng.gen_range(0..3) {
            0 => {
                *obj = fresh;
                attrs_of(obj)
            }
            1 => {
                obj.a = fresh.a;
                obj.c = fresh.c.clone();
                vec![("a", Value::Int(fresh.a)), ("c", Value::str(&fresh.c))]
            }
            _ => {
                obj.b = fresh.b;
                obj.d = fresh.d;
                vec![("b", Value::Int(fresh.b)), ("d", Value::Float(fresh.d))]
            }
        };
        let client = client.clone();
        writes.push(async move {
            client
                .put("t", Value::str(&key), attrs)
                .await
                .unwrap_or_else(|e| panic!("update {key}: {e}"))
                .into_result()
                .unwrap_or_else(|e| panic!("update {key}: {e}"));
        });
    }
    run_concurrently(&runtime, writes);

    // Deletes of distinct keys (some were just updated).
    let mut keys: Vec<String> = model.keys().cloned().collect();
    let mut writes = Vec::new();
    for _ in 0..DELETES {
        let key = keys.swap_remove(rng.gen_range(0..keys.len()));
        model.remove(&key);
        let client = client.clone();
        writes.push(async move {
            assert_eq!(
                client
                    .del("t", Value::str(&key))
                    .await
                    .unwrap_or_else(|e| panic!("del {key}: {e}")),
                Outcome::Done,
                "del {key}"
            );
        });
    }
    run_concurrently(&runtime, writes);
    // A second delete of a deleted key finds nothing.
    let gone = (0..OBJECTS)
        .map(|i| format!("key-{i}"))
        .find(|k| !model.contains_key(k))
        .expect("a deleted key");
    assert_eq!(
        runtime
            .block_on(client.del("t", Value::str(&gone)))
            .expect("del again"),
        Outcome::NotFound
    );

    check_searches(&runtime, &client, &model, &mut rng, SEARCHES);
    drop(client);

    // Crash everything, then start it again on the same data.
    cluster.procs.kill_all();
    cluster.start_coordinator(0, None);
    for i in 0..cluster.daemon_ports.len() {
        cluster.start_daemon(i);
    }
    cluster.wait_daemons_available(Duration::from_secs(60));
    let client = runtime
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("connect after restart");

    check_searches(&runtime, &client, &model, &mut rng, SEARCHES / 2);
    for i in 0..OBJECTS + 5 {
        let key = format!("key-{i}");
        let got = runtime
            .block_on(client.get("t", Value::str(&key)))
            .unwrap_or_else(|e| panic!("get {key}: {e}"));
        match (got, model.get(&key)) {
            (None, None) => {}
            (Some(record), Some(obj)) => {
                assert_eq!(record.get("k"), None, "get leaves the key out");
                assert_eq!(&obj_of(&record), obj, "get {key}");
            }
            (got, want) => panic!("get {key}: got {got:?}, want {want:?}"),
        }
    }
    drop(client);
    drop(runtime);
}
