//! Global secondary indexes with real processes (issue 12): a space
//! declared with a global index on a string and one added live on an int
//! (`add-index --global`, built while writes go on), then lookups —
//! equality and ranges on both, string prefixes, sorted searches with a
//! limit in both directions, counts — compared with a brute-force filter
//! over what the test wrote; `search --explain` names the global index;
//! read-your-writes rounds while other writers run (every acknowledged
//! write is found under its new value and not under its old one at once);
//! and every bad request a clear error.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{cli_ok, run_cli, wait_for, Cluster};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_client::{BlockingAdmin, BlockingClient, Outcome, PartId, PredOp, Record, Value};

// 64 indexlets cut the first byte of the names into runs of four values,
// so the names below (a to z, digits, a zero byte) spread over a dozen.
const SPACE: &str = "space g key int k attributes string name, int n, float x \
                     global index name create 64 partitions \
                     create 4 partitions tolerate 1 failure";
const OBJECTS: i64 = 400;
const WORDS: [&str; 12] = [
    "apple", "apricot", "banana", "blue", "cherry", "", "b\0x", "zebra", "kiwi", "mango", "plum",
    "quince",
];

#[derive(Clone, Debug, PartialEq)]
struct Obj {
    name: String,
    n: i64,
}

fn obj(k: i64, round: i64) -> Obj {
    let word = WORDS[((k * 5 + round) % WORDS.len() as i64) as usize];
    Obj {
        name: format!("{word}{}", (k + round) % 7),
        n: (k * 13 + round * 7) % 101 - 50,
    }
}

fn put(client: &BlockingClient, model: &mut BTreeMap<i64, Obj>, k: i64, o: Obj) {
    let attrs = [
        ("name", Value::str(&o.name)),
        ("n", Value::Int(o.n)),
        ("x", Value::Float(o.n as f64 / 3.0)),
    ];
    assert_eq!(
        client.put("g", Value::Int(k), attrs).expect("put"),
        Outcome::Done
    );
    model.insert(k, o);
}

fn key_of(record: &Record) -> i64 {
    match record.get("k") {
        Some(Value::Int(k)) => *k,
        other => panic!("k is {other:?}"),
    }
}

/// A search, and the brute force that says what it must find.
struct Query {
    predicates: Vec<(&'static str, PredOp)>,
    holds: Box<dyn Fn(&Obj) -> bool>,
}

fn query(predicates: Vec<(&'static str, PredOp)>, holds: impl Fn(&Obj) -> bool + 'static) -> Query {
    Query {
        predicates,
        holds: Box::new(holds),
    }
}

fn queries() -> Vec<Query> {
    let s = |t: &str| Value::str(t);
    vec![
        query(vec![("name", PredOp::Eq(s("apple3")))], |o| {
            o.name == "apple3"
        }),
        query(vec![("name", PredOp::Eq(s("3")))], |o| o.name == "3"),
        // A prefix as a range: every name starting with "ap".
        query(
            vec![("name", PredOp::Ge(s("ap"))), ("name", PredOp::Lt(s("aq")))],
            |o| o.name.starts_with("ap"),
        ),
        // Strings in byte order, a zero byte included.
        query(
            vec![
                ("name", PredOp::Gt(s("b"))),
                ("name", PredOp::Le(s("blue2"))),
            ],
            |o| o.name.as_str() > "b" && o.name.as_str() <= "blue2",
        ),
        // Across many indexlets.
        query(
            vec![
                ("name", PredOp::Gt(s("b"))),
                ("name", PredOp::Le(s("plum2"))),
            ],
            |o| o.name.as_str() > "b" && o.name.as_str() <= "plum2",
        ),
        query(vec![("name", PredOp::Lt(s("apr")))], |o| {
            o.name.as_str() < "apr"
        }),
        // A check the index cannot narrow rides along; it is evaluated on
        // each object.
        query(
            vec![
                ("name", PredOp::Ge(s("c"))),
                ("n", PredOp::Gt(Value::Int(0))),
            ],
            |o| o.name.as_str() >= "c" && o.n > 0,
        ),
        query(
            vec![
                ("name", PredOp::Ge(s("c"))),
                ("name", PredOp::Regex("^z".into())),
            ],
            |o| o.name.starts_with('z'),
        ),
        query(vec![("n", PredOp::Eq(Value::Int(7)))], |o| o.n == 7),
        query(
            vec![
                ("n", PredOp::Ge(Value::Int(-5))),
                ("n", PredOp::Lt(Value::Int(5))),
            ],
            |o| (-5..5).contains(&o.n),
        ),
        query(vec![("name", PredOp::Eq(s("nothing")))], |_| false),
    ]
}

fn check_searches(client: &BlockingClient, model: &BTreeMap<i64, Obj>, when: &str) {
    for q in queries() {
        let records = client.search("g", q.predicates.clone()).expect("search");
        let mut found = BTreeSet::new();
        for record in &records {
            assert!(found.insert(key_of(record)), "{} twice", key_of(record));
        }
        let expected: BTreeSet<i64> = model
            .iter()
            .filter(|(_, o)| (q.holds)(o))
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(found, expected, "{:?} {when}", q.predicates);
        let count = client.count("g", q.predicates.clone()).expect("count");
        assert_eq!(
            count,
            expected.len() as u64,
            "count {:?} {when}",
            q.predicates
        );
    }
    // Sorted by the indexed attribute, with a limit, both ways.
    for descending in [false, true] {
        let records = client
            .sorted_search(
                "g",
                vec![("name", PredOp::Ge(Value::str("b")))],
                "name",
                25,
                descending,
            )
            .expect("sorted search");
        let got: Vec<(String, i64)> = records
            .iter()
            .map(|r| match r.get("name") {
                Some(Value::String(b)) => (String::from_utf8(b.clone()).expect("utf-8"), key_of(r)),
                other => panic!("name is {other:?}"),
            })
            .collect();
        let mut expected: Vec<(String, i64)> = model
            .iter()
            .filter(|(_, o)| o.name.as_str() >= "b")
            .map(|(k, o)| (o.name.clone(), *k))
            .collect();
        // Ties in key order (of the keys' bytes), whatever the direction.
        expected.sort_by(|a, b| {
            let by_name = if descending {
                b.0.cmp(&a.0)
            } else {
                a.0.cmp(&b.0)
            };
            by_name.then_with(|| {
                tessera_types::coordinate::key_bytes(&Value::Int(a.1))
                    .cmp(&tessera_types::coordinate::key_bytes(&Value::Int(b.1)))
            })
        });
        expected.truncate(25);
        assert_eq!(got, expected, "sorted, descending {descending}, {when}");
    }
}

#[test]
fn global_indexes_answer_lookups_exactly_and_are_built_live() {
    let cluster = Cluster::start(3);
    let admin = cluster.admin();
    admin.add_space(SPACE).expect("add space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("client");
    let mut model = BTreeMap::new();
    for k in 0..OBJECTS {
        put(&client, &mut model, k, obj(k, 0));
    }
    check_searches(&client, &model, "declared index");

    let explain = cli_ok(
        &cluster,
        &[
            "search",
            "g",
            r#"{"name": {"ge": "ap", "lt": "aq"}}"#,
            "--explain",
        ],
    );
    let chosen = explain
        .lines()
        .find(|l| l.contains("contacts"))
        .expect("a plan line");
    assert!(
        chosen.contains("global") && chosen.contains("contacts 1 of 64 indexlets"),
        "{explain}"
    );

    // A second global index, added live while writes go on.
    let part = cli_ok(
        &cluster,
        &["add-index", "g", "n", "--global", "--partitions", "3"],
    );
    let part = PartId(part.trim().parse().expect("the new part's id"));
    for k in (0..OBJECTS).filter(|k| k % 3 == 1) {
        put(&client, &mut model, k, obj(k, 1));
    }
    for k in (0..OBJECTS).filter(|k| k % 11 == 4) {
        assert_eq!(client.del("g", Value::Int(k)).expect("del"), Outcome::Done);
        model.remove(&k);
    }
    wait_for(
        "the global index to be ready",
        Duration::from_secs(120),
        || {
            let config = admin.config().ok()?;
            config
                .space("g")?
                .part_state(part)?
                .is_ready()
                .then_some(())
        },
    );
    let listed = cli_ok(&cluster, &["list-indices", "g"]);
    assert!(
        listed.contains(&format!("{}: n global ready, 3 indexlets", part.0)),
        "{listed}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&cli_ok(&cluster, &["show-config", "--json"])).expect("json");
    let globals: Vec<&serde_json::Value> = json["spaces"][0]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter(|p| p["kind"] == "global_index")
        .collect();
    assert_eq!(globals.len(), 2, "{json}");
    for g in &globals {
        for region in g["regions"].as_array().expect("indexlets") {
            assert_eq!(region["chain"].as_array().expect("chain").len(), 2);
            assert_eq!(region["bounds"].as_array().expect("bounds").len(), 1);
        }
    }
    check_searches(&client, &model, "after the live index");

    // Dropping the declared index: searches go back to the subspaces and
    // stay exact.
    cli_ok(&cluster, &["rm-index", "g", "name", "--global"]);
    check_searches(&client, &model, "after rm-index --global");
}

#[test]
fn every_acknowledged_write_is_found_under_its_new_value_at_once() {
    let cluster = Cluster::start(3);
    cluster.admin().add_space(SPACE).expect("add space");
    let addr = cluster.coordinator_addr(0);
    let stop = Arc::new(AtomicBool::new(false));
    // Other writers keep rewriting their own keys meanwhile.
    let noise: Vec<_> = (0..2)
        .map(|w| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let client = BlockingClient::connect(&addr).expect("client");
                let mut rng = StdRng::seed_from_u64(w);
                let mut writes = 0u64;
                while !stop.load(Ordering::Relaxed) && writes < 5_000 {
                    let k = 1_000 + w as i64 * 100 + rng.gen_range(0..100);
                    let name = format!("noise{}", rng.gen_range(0..50));
                    let outcome = client
                        .put("g", Value::Int(k), [("name", Value::str(&name))])
                        .expect("noise put");
                    assert_eq!(outcome, Outcome::Done);
                    writes += 1;
                }
                writes
            })
        })
        .collect();
    let client = BlockingClient::connect(&addr).expect("client");
    let violations = AtomicU64::new(0);
    let rounds = 300;
    let mut rng = StdRng::seed_from_u64(7);
    let mut current: BTreeMap<i64, String> = BTreeMap::new();
    for round in 0..rounds {
        let k = rng.gen_range(0..20);
        let name = format!("rw{round:04}");
        let outcome = client
            .put("g", Value::Int(k), [("name", Value::str(&name))])
            .expect("put");
        assert_eq!(outcome, Outcome::Done);
        let under = |value: &str| -> BTreeSet<i64> {
            client
                .search("g", vec![("name", PredOp::Eq(Value::str(value)))])
                .expect("lookup")
                .iter()
                .map(key_of)
                .collect()
        };
        if under(&name) != BTreeSet::from([k]) {
            violations.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(old) = current.insert(k, name) {
            if under(&old).contains(&k) {
                violations.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let noise_writes: u64 = noise.into_iter().map(|h| h.join().expect("noise")).sum();
    let violations = violations.load(Ordering::Relaxed);
    println!("read-your-writes: {rounds} rounds, {noise_writes} concurrent writes, {violations} violations");
    assert_eq!(violations, 0);
}

#[test]
fn bad_global_index_requests_are_clear_errors() {
    let cluster = Cluster::start(2);
    cluster
        .admin()
        .add_space(
            "space b key k attributes string s, document d, list(int) l \
             global index s create 2 partitions",
        )
        .expect("add space");
    let port = cluster.coordinator_ports[0].to_string();
    let refused = |args: &[&str], expected: &str| {
        let mut all = args.to_vec();
        all.extend(["--port", &port]);
        let (ok, _, err) = run_cli(&all, None, Duration::from_secs(60));
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(expected), "{args:?}: {err}");
    };
    refused(&["add-index", "b", "k", "--global"], "BADSPACE");
    refused(&["add-index", "b", "d", "--global"], "cannot order");
    refused(
        &["add-index", "b", "d.x", "--global"],
        "path inside a document",
    );
    refused(&["add-index", "b", "l", "--global"], "cannot order");
    refused(&["add-index", "b", "nope", "--global"], "NOTFOUND");
    refused(&["add-index", "b", "s", "--global"], "DUPLICATE");
    refused(
        &["add-index", "b", "s", "--global", "--partitions", "0"],
        "indexlets",
    );
    refused(&["rm-index", "b", "nope", "--global"], "NOTFOUND");
    // A lookup range of the wrong type is refused before anything is sent.
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("client");
    for op in [PredOp::Ge(Value::Int(5)), PredOp::Lt(Value::Float(1.5))] {
        let err = client
            .search("b", vec![("s", op.clone())])
            .expect_err("a number range on a string");
        assert_eq!(
            err.status(),
            tessera_client::Status::WrongType,
            "{op:?}: {err}"
        );
    }
    // In a description, the same refusals with a line and column.
    for (description, expected) in [
        (
            "space e key k attributes document d global index d",
            "cannot order",
        ),
        (
            "space e key k attributes s global index k",
            "cannot be indexed",
        ),
        (
            "space e key k attributes s global index s global index s",
            "already has a global index",
        ),
        (
            "space e key k attributes s global index s create 0 partitions",
            "at least 1",
        ),
        (
            "space e key k attributes s global s",
            "`index` after `global`",
        ),
    ] {
        let err = cluster
            .admin()
            .add_space(description)
            .expect_err(description);
        assert!(err.to_string().contains(expected), "{description}: {err}");
    }
}

/// The objects no writer touches after loading: `x == 1.0` marks them, so
/// a lookup that also checks `x == 1.0` has an exact expected answer while
/// other keys are rewritten.
fn static_matches(model: &BTreeMap<i64, i64>, lo: i64, hi: i64) -> BTreeSet<i64> {
    model
        .iter()
        .filter(|(_, n)| (lo..hi).contains(*n))
        .map(|(k, _)| *k)
        .collect()
}

#[test]
fn an_index_split_live_loses_no_entry_and_fails_no_lookup() {
    let cluster = Cluster::start(3);
    let admin = cluster.admin();
    admin
        .add_space(
            "space g key int k attributes int n, float x global index n create 1 partition \
             create 4 partitions tolerate 1 failure",
        )
        .expect("add space");
    let addr = cluster.coordinator_addr(0);
    let client = BlockingClient::connect(&addr).expect("client");
    let mut model = BTreeMap::new();
    for k in 0..300i64 {
        let n = (k * 37) % 101 - 50;
        let attrs = [("n", Value::Int(n)), ("x", Value::Float(1.0))];
        assert_eq!(
            client.put("g", Value::Int(k), attrs).expect("put"),
            Outcome::Done
        );
        model.insert(k, n);
    }
    let model = Arc::new(model);
    let stop = Arc::new(AtomicBool::new(false));
    // Writers rewrite their own keys, moving them across the new cuts.
    let writers: Vec<_> = (0..2i64)
        .map(|w| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let client = BlockingClient::connect(&addr).expect("client");
                let mut rng = StdRng::seed_from_u64(w as u64);
                let mut writes = 0u64;
                while !stop.load(Ordering::Relaxed) && writes < 20_000 {
                    let k = 1_000 + w * 50 + rng.gen_range(0..50);
                    let attrs = [
                        ("n", Value::Int(rng.gen_range(-60..60))),
                        ("x", Value::Float(2.0)),
                    ];
                    let outcome = client.put("g", Value::Int(k), attrs).expect("write");
                    assert_eq!(outcome, Outcome::Done);
                    writes += 1;
                }
                writes
            })
        })
        .collect();
    // Readers compare every lookup with the static objects' brute force.
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (addr, stop, model) = (addr.clone(), stop.clone(), model.clone());
            std::thread::spawn(move || {
                let client = BlockingClient::connect(&addr).expect("client");
                let mut rng = StdRng::seed_from_u64(100 + r);
                let (mut lookups, mut wrong, mut slowest) = (0u64, 0u64, Duration::ZERO);
                while !stop.load(Ordering::Relaxed) && lookups < 20_000 {
                    let lo = rng.gen_range(-55..50);
                    let hi = lo + rng.gen_range(1..40);
                    let started = std::time::Instant::now();
                    let found: BTreeSet<i64> = client
                        .search(
                            "g",
                            vec![
                                ("n", PredOp::Ge(Value::Int(lo))),
                                ("n", PredOp::Lt(Value::Int(hi))),
                                ("x", PredOp::Eq(Value::Float(1.0))),
                            ],
                        )
                        .expect("a lookup never fails")
                        .iter()
                        .map(key_of)
                        .collect();
                    slowest = slowest.max(started.elapsed());
                    if found != static_matches(&model, lo, hi) {
                        wrong += 1;
                    }
                    lookups += 1;
                }
                (lookups, wrong, slowest)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let part = cli_ok(&cluster, &["split-index", "g", "n", "-20", "0", "20"]);
    let part = PartId(part.trim().parse().expect("the new part's id"));
    wait_for("the split to be ready", Duration::from_secs(120), || {
        let config = admin.config().ok()?;
        let space = config.space("g")?;
        // Ready, and the old part gone from the configuration.
        let globals = space
            .subspaces
            .iter()
            .filter(|l| l.kind == tessera_types::SubspaceKind::GlobalIndex)
            .count();
        (space.part_state(part)?.is_ready() && globals == 1).then_some(())
    });
    let handed_over = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|h| h.join().expect("writer")).sum();
    let (mut lookups, mut wrong, mut slowest) = (0, 0, Duration::ZERO);
    for reader in readers {
        let (l, w, s) = reader.join().expect("reader");
        lookups += l;
        wrong += w;
        slowest = slowest.max(s);
    }
    println!(
        "split of a live index: ready and the old one dropped after {handed_over:?}; \
         {lookups} lookups ({wrong} wrong, slowest {slowest:?}), {writes} writes meanwhile"
    );
    assert_eq!(wrong, 0);
    assert!(lookups > 0 && writes > 0);
    let listed = cli_ok(&cluster, &["list-indices", "g"]);
    assert!(
        listed.contains(&format!("{}: n global ready, 4 indexlets", part.0)),
        "{listed}"
    );
    let explain = cli_ok(
        &cluster,
        &["search", "g", r#"{"n": {"ge": 1, "lt": 5}}"#, "--explain"],
    );
    assert!(explain.contains("contacts 1 of 4 indexlets"), "{explain}");
    // Every static object is found through the new cuts.
    assert_eq!(
        client
            .count(
                "g",
                vec![
                    ("x", PredOp::Eq(Value::Float(1.0))),
                    ("n", PredOp::Ge(Value::Int(-100)))
                ]
            )
            .expect("count"),
        model.len() as u64
    );
    // Bad splits are clear errors.
    let port = cluster.coordinator_ports[0].to_string();
    for (args, expected) in [
        (
            vec!["split-index", "g", "n", "0", "-20"],
            "already cut at every value",
        ),
        (
            vec!["split-index", "g", "n", "ten"],
            "not a value of that type",
        ),
        (vec!["split-index", "g", "x", "1"], "NOTFOUND"),
    ] {
        let mut all = args.clone();
        all.extend(["--port", &port]);
        let (ok, _, err) = run_cli(&all, None, Duration::from_secs(60));
        assert!(!ok && err.contains(expected), "{args:?}: {err}");
    }
}

/// The number of indexlets of space `g`'s global index, and whether it is
/// one ready part (no split building).
fn indexlets(admin: &BlockingAdmin) -> Option<(usize, bool)> {
    let config = admin.config().ok()?;
    let space = config.space("g")?;
    let globals: Vec<_> = space
        .subspaces
        .iter()
        .filter(|l| l.kind == tessera_types::SubspaceKind::GlobalIndex)
        .collect();
    Some((
        globals[0].regions.len(),
        globals.len() == 1 && globals[0].state.is_ready(),
    ))
}

/// Runs range lookups on `n` of space `g`, each compared with `model`,
/// `pause` apart, until its global index is one ready part of at least
/// `at_least` indexlets; fails after 150 s. Returns the lookups run.
fn exact_lookups_until_split(
    admin: &BlockingAdmin,
    client: &BlockingClient,
    model: &BTreeMap<i64, i64>,
    at_least: usize,
    pause: Duration,
) -> u64 {
    let started = std::time::Instant::now();
    let mut lookups = 0u64;
    loop {
        // Lookups stay exact while the leader splits.
        let lo = -498 + (lookups as i64 * 97) % 900;
        let found: BTreeSet<i64> = client
            .search(
                "g",
                vec![
                    ("n", PredOp::Ge(Value::Int(lo))),
                    ("n", PredOp::Lt(Value::Int(lo + 150))),
                ],
            )
            .expect("lookup")
            .iter()
            .map(key_of)
            .collect();
        let expected: BTreeSet<i64> = model
            .iter()
            .filter(|(_, n)| (lo..lo + 150).contains(*n))
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(found, expected, "lookup from {lo}");
        lookups += 1;
        if lookups.is_multiple_of(16)
            && matches!(indexlets(admin), Some((n, true)) if n >= at_least)
        {
            println!(
                "automatic splits: {:?} indexlets after {:?}, {lookups} exact lookups meanwhile",
                indexlets(admin),
                started.elapsed()
            );
            return lookups;
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "the index was not split: {:?}",
            indexlets(admin)
        );
        std::thread::sleep(pause);
    }
}

/// Space `g` with a one-indexlet global index on `n`, and `objects`
/// objects in it; returns the client and the model.
fn indexed_space(cluster: &Cluster, objects: i64) -> (BlockingClient, BTreeMap<i64, i64>) {
    cluster
        .admin()
        .add_space(
            "space g key int k attributes int n global index n create 1 partition \
             create 4 partitions tolerate 1 failure",
        )
        .expect("add space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("client");
    let mut model = BTreeMap::new();
    for k in 0..objects {
        let n = (k * 53) % 997 - 498;
        assert_eq!(
            client
                .put("g", Value::Int(k), [("n", Value::Int(n))])
                .expect("put"),
            Outcome::Done
        );
        model.insert(k, n);
    }
    (client, model)
}

#[test]
fn the_leader_splits_an_indexlet_that_grows_while_lookups_stay_exact() {
    // Indexlets of 60 entries or more split at their middle value; the
    // space's 240 objects make the one indexlet split, and split again.
    let cluster = Cluster::start_with(3, &["--indexlet-split-entries", "60"], &[]);
    let (client, model) = indexed_space(&cluster, 240);
    let admin = cluster.admin();
    exact_lookups_until_split(&admin, &client, &model, 4, Duration::from_millis(200));
}

#[test]
fn the_leader_splits_an_indexlet_that_serves_many_lookups() {
    // Never by size; by load once its replicas serve 20 lookup pages a
    // second, which lookups back to back do.
    let cluster = Cluster::start_with(
        3,
        &[
            "--indexlet-split-entries",
            "0",
            "--indexlet-split-lookups",
            "20",
        ],
        &[],
    );
    let (client, model) = indexed_space(&cluster, 100);
    let admin = cluster.admin();
    assert_eq!(indexlets(&admin), Some((1, true)));
    exact_lookups_until_split(&admin, &client, &model, 2, Duration::ZERO);
}
