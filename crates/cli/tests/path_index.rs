//! A local index on a document path with real processes (issue 11, point
//! 3: `add-index` on `docattr.a.b`): the index is added through the
//! `tessera` binary while objects of every shape are written, becomes
//! ready, and from then on `search --explain` names it and every search on
//! the path — equality on each kind, ranges, and checks it cannot narrow —
//! returns exactly what a brute-force filter over the objects written
//! returns, written here from the values the test chose.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{cli_ok, wait_for, Cluster};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tessera_client::{BlockingClient, Outcome, PartId, PredOp, Record, Value};

const SPACE: &str = "space t key int k attributes document d, int n \
                     create 4 partitions tolerate 1 failure";
const OBJECTS: i64 = 300;

/// What an object holds at `d.a.b`.
#[derive(Clone, Debug, PartialEq)]
enum AtPath {
    Int(i64),
    Float(f64),
    Str(String),
    /// `[v, [v]]`: an array, which the index leaves out.
    Array(i64),
    /// `a` has no `b`.
    Missing,
    /// `a` is a number, so there is no `a.b`.
    Through,
}

impl AtPath {
    fn of(k: i64, round: i64) -> AtPath {
        let v = (k * 7 + round * 3) % 23 - 11;
        match (k + round) % 6 {
            0 | 1 => AtPath::Int(v),
            2 => AtPath::Float(v as f64 / 4.0),
            3 => AtPath::Str(format!("s{}", v.rem_euclid(5))),
            4 => AtPath::Array(v),
            _ if k % 2 == 0 => AtPath::Missing,
            _ => AtPath::Through,
        }
    }

    fn json(&self) -> String {
        match self {
            AtPath::Int(i) => format!(r#"{{"a": {{"b": {i}, "c": 1}}}}"#),
            AtPath::Float(f) => format!(r#"{{"a": {{"b": {f:?}}}}}"#),
            AtPath::Str(s) => format!(r#"{{"a": {{"b": "{s}"}}}}"#),
            AtPath::Array(i) => format!(r#"{{"a": {{"b": [{i}, [{i}]]}}}}"#),
            AtPath::Missing => r#"{"a": {"c": 2}}"#.to_string(),
            AtPath::Through => r#"{"a": 5}"#.to_string(),
        }
    }
}

fn put(client: &BlockingClient, model: &mut BTreeMap<i64, AtPath>, k: i64, at: AtPath) {
    let outcome = client
        .put(
            "t",
            Value::Int(k),
            [("d", Value::Document(at.json())), ("n", Value::Int(k % 5))],
        )
        .expect("put");
    assert_eq!(outcome, Outcome::Done, "put {k}");
    model.insert(k, at);
}

fn del(client: &BlockingClient, model: &mut BTreeMap<i64, AtPath>, k: i64) {
    let outcome = client.del("t", Value::Int(k)).expect("del");
    let expected = if model.remove(&k).is_some() {
        Outcome::Done
    } else {
        Outcome::NotFound
    };
    assert_eq!(outcome, expected, "del {k}");
}

fn key_of(record: &Record) -> i64 {
    match record.get("k") {
        Some(Value::Int(k)) => *k,
        other => panic!("k is {other:?}"),
    }
}

/// A search on the path, and which objects it must find.
struct Query {
    predicates: Vec<(&'static str, PredOp)>,
    /// The brute force over what the test wrote.
    holds: fn(&AtPath) -> bool,
}

fn queries() -> Vec<Query> {
    let on = |op| ("d.a.b", op);
    vec![
        Query {
            predicates: vec![on(PredOp::Eq(Value::Int(3)))],
            holds: |at| *at == AtPath::Int(3),
        },
        Query {
            predicates: vec![on(PredOp::Eq(Value::str("s2")))],
            holds: |at| *at == AtPath::Str("s2".into()),
        },
        Query {
            predicates: vec![on(PredOp::Eq(Value::Float(0.75)))],
            holds: |at| *at == AtPath::Float(0.75),
        },
        Query {
            predicates: vec![on(PredOp::Ge(Value::Int(4)))],
            holds: |at| matches!(at, AtPath::Int(i) if *i >= 4),
        },
        Query {
            predicates: vec![
                on(PredOp::Gt(Value::Int(-2))),
                on(PredOp::Le(Value::Int(2))),
            ],
            holds: |at| matches!(at, AtPath::Int(i) if -2 < *i && *i <= 2),
        },
        Query {
            predicates: vec![on(PredOp::Lt(Value::Float(-1.0)))],
            holds: |at| matches!(at, AtPath::Float(f) if *f < -1.0),
        },
        Query {
            predicates: vec![on(PredOp::Eq(Value::Int(99)))],
            holds: |_| false,
        },
        // Checks the index cannot narrow; the regions are scanned.
        Query {
            predicates: vec![on(PredOp::Regex("^s1$".into()))],
            holds: |at| *at == AtPath::Str("s1".into()),
        },
        Query {
            predicates: vec![("d.a.b[1][0]", PredOp::Eq(Value::Int(-4)))],
            holds: |at| *at == AtPath::Array(-4),
        },
    ]
}

fn check_searches(client: &BlockingClient, model: &BTreeMap<i64, AtPath>, when: &str) {
    for query in queries() {
        let records = client
            .search("t", query.predicates.clone())
            .expect("search");
        let mut found = BTreeSet::new();
        for record in &records {
            assert!(found.insert(key_of(record)), "{} twice", key_of(record));
        }
        let expected: BTreeSet<i64> = model
            .iter()
            .filter(|(_, at)| (query.holds)(at))
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(found, expected, "{:?} {when}", query.predicates);
    }
}

#[test]
fn a_path_index_is_built_and_then_answers_searches_exactly() {
    let cluster = Cluster::start(2);
    let admin = cluster.admin();
    admin.add_space(SPACE).expect("add space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("client");
    let mut model = BTreeMap::new();
    for k in 0..OBJECTS {
        put(&client, &mut model, k, AtPath::of(k, 0));
    }

    let part = cli_ok(&cluster, &["add-index", "t", "d.a.b"]);
    let part = PartId(part.trim().parse().expect("the new part's id"));
    // Writes and deletes while the index is being built.
    for k in (0..OBJECTS).filter(|k| k % 4 == 1) {
        put(&client, &mut model, k, AtPath::of(k, 1));
    }
    for k in (0..OBJECTS).filter(|k| k % 10 == 7) {
        del(&client, &mut model, k);
    }
    wait_for(
        "the path index to be ready",
        Duration::from_secs(120),
        || {
            let config = admin.config().ok()?;
            config
                .space("t")?
                .part_state(part)?
                .is_ready()
                .then_some(())
        },
    );
    let listed = cli_ok(&cluster, &["list-indices", "t"]);
    assert!(
        listed.lines().any(|l| l.ends_with(": d.a.b ready")),
        "{listed}"
    );
    check_searches(&client, &model, "once ready");

    let explain = cli_ok(&cluster, &["search", "t", r#"{"d.a.b": 3}"#, "--explain"]);
    assert!(
        explain.contains(&format!(
            "local index {} (d.a.b, ready): regions read the check's entries from it",
            part.0
        )),
        "{explain}"
    );

    // Writes that change the kind at the path, remove it or bring it back.
    for k in (0..OBJECTS).filter(|k| k % 3 == 0) {
        put(&client, &mut model, k, AtPath::of(k, 2));
    }
    for k in (0..OBJECTS).filter(|k| k % 10 == 3) {
        del(&client, &mut model, k);
    }
    check_searches(&client, &model, "after more writes");

    // The same through the binary.
    let out = cli_ok(&cluster, &["search", "t", r#"{"d.a.b": {"ge": 4}}"#]);
    let found: BTreeSet<i64> = out
        .lines()
        .map(|line| {
            let json: serde_json::Value = serde_json::from_str(line).expect("a JSON record");
            json["k"].as_i64().expect("an int key")
        })
        .collect();
    let expected: BTreeSet<i64> = model
        .iter()
        .filter(|(_, at)| matches!(at, AtPath::Int(i) if *i >= 4))
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(found, expected);
}
