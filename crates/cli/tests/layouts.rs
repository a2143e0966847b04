//! Layouts that change while the cluster serves (issue 11), with real
//! processes: a space under a bounded mixed load (relocating puts,
//! conditional puts, atomic adds, deletes, searches) gets a subspace
//! (`add-subspace`), an index (`add-index`), loses its first subspace
//! (`rm-subspace`) and is moved to another layout (`relayout`), all
//! through the `tessera` binary. No client call may fail; every search
//! during the changes returns exactly the objects of the searching
//! worker's own keys (each worker owns its keys, so its model is exact);
//! after quiescence every search equals a brute-force filter.
//!
//! It prints the figures the issue asks for: backfill rate, time from
//! `add-subspace` to ready, foreground throughput and p99 before and
//! during the backfill. `TESSERA_LAYOUT_OBJECTS=100000 cargo test
//! --release -p tessera-cli --test layouts -- --nocapture` measures them
//! at scale (the default is small, for CI).

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{cli_ok, wait_for, Cluster, ProxiedCluster};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{
    BlockingAdmin, Client, ClientOptions, Outcome, PartState, PredOp, Record, Value,
};

const SPACE: &str = "space t key int k attributes int a, int b, string c \
                     subspace a create 8 partitions tolerate 1 failure";
const RELAYOUT: &str = "space t key int k attributes int a, int b, string c \
                        subspace b, c index a create 8 partitions tolerate 1 failure";
const WORKERS: i64 = 8;
const NAMES: [&str; 6] = ["ant", "bee", "cat", "dog", "eel", "fox"];
const CHANGE_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Debug, PartialEq)]
struct Obj {
    a: i64,
    b: i64,
    c: String,
}

fn random_obj(rng: &mut StdRng) -> Obj {
    Obj {
        a: rng.gen_range(0..20),
        b: rng.gen_range(0..20),
        c: NAMES[rng.gen_range(0..NAMES.len())].to_string(),
    }
}

fn attrs(obj: &Obj) -> Vec<(&'static str, Value)> {
    vec![
        ("a", Value::Int(obj.a)),
        ("b", Value::Int(obj.b)),
        ("c", Value::str(&obj.c)),
    ]
}

fn decode(record: &Record) -> (i64, Obj) {
    let int = |name| match record.get(name) {
        Some(Value::Int(i)) => *i,
        other => panic!("{name} is {other:?}"),
    };
    let c = match record.get("c") {
        Some(Value::String(s)) => String::from_utf8(s.clone()).expect("utf-8"),
        other => panic!("c is {other:?}"),
    };
    (
        int("k"),
        Obj {
            a: int("a"),
            b: int("b"),
            c,
        },
    )
}

/// A search: on `a`, `b` or `c`, with its brute-force meaning.
#[derive(Clone, Debug)]
enum Query {
    A(i64),
    B(i64),
    C(String),
    BRange(i64, i64),
}

impl Query {
    fn random(rng: &mut StdRng) -> Query {
        match rng.gen_range(0..4) {
            0 => Query::A(rng.gen_range(0..20)),
            1 => Query::B(rng.gen_range(0..20)),
            2 => Query::C(NAMES[rng.gen_range(0..NAMES.len())].to_string()),
            _ => {
                let lo = rng.gen_range(0..20);
                Query::BRange(lo, lo + rng.gen_range(0..5))
            }
        }
    }

    fn holds(&self, obj: &Obj) -> bool {
        match self {
            Query::A(a) => obj.a == *a,
            Query::B(b) => obj.b == *b,
            Query::C(c) => obj.c == *c,
            Query::BRange(lo, hi) => *lo <= obj.b && obj.b <= *hi,
        }
    }

    fn ops(&self) -> Vec<(&'static str, PredOp)> {
        match self {
            Query::A(a) => vec![("a", PredOp::Eq(Value::Int(*a)))],
            Query::B(b) => vec![("b", PredOp::Eq(Value::Int(*b)))],
            Query::C(c) => vec![("c", PredOp::Eq(Value::str(c)))],
            Query::BRange(lo, hi) => vec![
                ("b", PredOp::Ge(Value::Int(*lo))),
                ("b", PredOp::Le(Value::Int(*hi))),
            ],
        }
    }
}

/// What the workers share with the test.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Client calls that returned an error.
    failed: AtomicU64,
    /// Answers that contradict the worker's exact model.
    wrong: Mutex<Vec<String>>,
    /// (when it finished, how long it took, whether it was a search) per
    /// call.
    latencies: Mutex<Vec<(Instant, Duration, bool)>>,
}

impl Shared {
    fn fail(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.wrong.lock().expect("lock").push(what);
    }

    fn timed(&self, started: Instant, search: bool) {
        let now = Instant::now();
        self.latencies
            .lock()
            .expect("lock")
            .push((now, now - started, search));
    }
}

/// Worker `w`: owns the keys `k` with `k % WORKERS == w` below `objects`;
/// loads them, then runs the mixed load until told to stop. Returns its
/// model.
async fn worker(client: Client, w: i64, objects: i64, shared: Arc<Shared>) -> BTreeMap<i64, Obj> {
    let mut rng = StdRng::seed_from_u64(w as u64);
    let mut model = BTreeMap::new();
    let keys: Vec<i64> = (0..objects).filter(|k| k % WORKERS == w).collect();
    for &k in &keys {
        let obj = random_obj(&mut rng);
        match client.put("t", Value::Int(k), attrs(&obj)).await {
            Ok(Outcome::Done) => {
                model.insert(k, obj);
            }
            other => shared.fail(format!("load put {k}: {other:?}")),
        }
    }
    while !shared.stop.load(Ordering::Relaxed) {
        let k = keys[rng.gen_range(0..keys.len())];
        let started = Instant::now();
        let op = rng.gen_range(0..10);
        match op {
            0..=3 => {
                // A put that usually moves the object in every subspace.
                let obj = random_obj(&mut rng);
                match client.put("t", Value::Int(k), attrs(&obj)).await {
                    Ok(Outcome::Done) => {
                        model.insert(k, obj);
                    }
                    other => shared.fail(format!("put {k}: {other:?}")),
                }
            }
            4 => {
                let guess = rng.gen_range(0..20);
                let obj = random_obj(&mut rng);
                let result = client
                    .cond_put(
                        "t",
                        Value::Int(k),
                        [("a", PredOp::Eq(Value::Int(guess)))],
                        attrs(&obj),
                    )
                    .await;
                // None: NOTFOUND; Some(holds): DONE or a failed predicate.
                let expected = model.get(&k).map(|o| o.a == guess);
                match (result, expected) {
                    (Ok(Outcome::Done), Some(true)) => {
                        model.insert(k, obj);
                    }
                    (Ok(Outcome::NotFound), None) => {}
                    (
                        Ok(Outcome::CmpFail {
                            kind: tessera_client::CmpFailKind::Predicate,
                            ..
                        }),
                        Some(false),
                    ) => {}
                    (other, _) => {
                        shared.fail(format!("cond_put {k}: {other:?}, expected {expected:?}"))
                    }
                }
            }
            5 => {
                let result = client
                    .atomic_add("t", Value::Int(k), [("b", Value::Int(1))])
                    .await;
                match (result, model.get_mut(&k)) {
                    (Ok(Outcome::Done), Some(o)) => o.b += 1,
                    (Ok(Outcome::NotFound), None) => {}
                    (other, _) => shared.fail(format!("atomic_add {k}: {other:?}")),
                }
            }
            6 => {
                let result = client.del("t", Value::Int(k)).await;
                match (result, model.remove(&k)) {
                    (Ok(Outcome::Done), Some(_)) | (Ok(Outcome::NotFound), None) => {}
                    (other, _) => shared.fail(format!("del {k}: {other:?}")),
                }
            }
            _ => {
                let query = Query::random(&mut rng);
                match client.search("t", query.ops()).await {
                    Ok(records) => {
                        // This worker's keys are exactly its model: every
                        // update of them completed before the search began.
                        let mut mine: BTreeMap<i64, Obj> = BTreeMap::new();
                        for record in &records {
                            let (key, obj) = decode(record);
                            if key % WORKERS == w && mine.insert(key, obj).is_some() {
                                shared.fail(format!("search {query:?} returned {key} twice"));
                            }
                        }
                        let expected: BTreeMap<i64, Obj> = model
                            .iter()
                            .filter(|(_, o)| query.holds(o))
                            .map(|(k, o)| (*k, o.clone()))
                            .collect();
                        if mine != expected {
                            shared.fail(format!(
                                "search {query:?} by worker {w}: got {mine:?}, expected {expected:?}"
                            ));
                        }
                    }
                    Err(e) => shared.fail(format!("search {query:?}: {e}")),
                }
            }
        }
        shared.timed(started, op >= 7);
    }
    model
}

/// Throughput (calls/s) and p99 latency of the writes, or of the
/// searches, that finished in `[from, to)`, and how many there were.
fn figures(shared: &Shared, from: Instant, to: Instant, searches: bool) -> String {
    let mut window: Vec<Duration> = shared
        .latencies
        .lock()
        .expect("lock")
        .iter()
        .filter(|(at, _, search)| *at >= from && *at < to && *search == searches)
        .map(|(_, d, _)| *d)
        .collect();
    window.sort_unstable();
    let p99 = window
        .get((window.len() * 99 / 100).min(window.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    let seconds = (to - from).as_secs_f64().max(1e-9);
    format!(
        "{:.0}/s, p99 {:.1} ms ({} calls)",
        window.len() as f64 / seconds,
        p99.as_secs_f64() * 1e3,
        window.len()
    )
}

/// Waits until every part of space `t` is ready (nothing building or
/// dropping) and `settled` holds on it.
fn wait_settled(
    admin: &BlockingAdmin,
    what: &str,
    settled: impl Fn(&tessera_client::Configuration) -> bool,
) {
    wait_for(what, CHANGE_TIMEOUT, || {
        let config = admin.config().ok()?;
        let space = config.space("t")?;
        (space.layout_settled() && settled(&config)).then_some(())
    });
}

fn subspace_attrs(config: &tessera_client::Configuration) -> Vec<Vec<usize>> {
    config.space("t").map_or_else(Vec::new, |s| {
        s.subspaces.iter().map(|l| l.attrs.clone()).collect()
    })
}

#[test]
fn layouts_change_under_a_mixed_load_without_a_failed_call() {
    let objects: i64 = std::env::var("TESSERA_LAYOUT_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let cluster = Cluster::start(3);
    let admin = cluster.admin();
    admin.add_space(SPACE).expect("add space");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("client");
    let shared = Arc::new(Shared::default());
    let loading = Instant::now();
    let workers = start_workers(&runtime, &client, objects, &shared);
    let loaded = Instant::now();
    eprintln!(
        "loaded {objects} objects in {:.1} s",
        (loaded - loading).as_secs_f64()
    );
    // A baseline window of the mixed load, then the new subspace.
    let baseline = Duration::from_secs(
        std::env::var("TESSERA_LAYOUT_BASELINE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
    );
    wait_for("a baseline window", baseline * 2, || {
        (loaded.elapsed() >= baseline).then_some(())
    });
    let added = Instant::now();
    let part = cli_ok(&cluster, &["add-subspace", "t", "b"]);
    let part: u64 = part.trim().parse().expect("the new part's id");
    let mut progress_seen = Vec::new();
    wait_for("the subspace to be ready", CHANGE_TIMEOUT, || {
        let config = admin.config().ok()?;
        let state = config
            .space("t")?
            .part_state(tessera_client::PartId(part))?;
        if let PartState::Building { progress } = state {
            if progress_seen.last() != Some(&progress) {
                progress_seen.push(progress);
            }
        }
        state.is_ready().then_some(())
    });
    let ready = Instant::now();
    let building = (ready - added).as_secs_f64();
    eprintln!(
        "add-subspace to ready: {building:.2} s, backfill {:.0} objects/s (progress seen {progress_seen:?})",
        objects as f64 / building
    );
    eprintln!(
        "writes before: {}; during the backfill: {}",
        figures(&shared, loaded, added, false),
        figures(&shared, added, ready, false)
    );
    eprintln!(
        "searches before: {}; during the backfill: {}",
        figures(&shared, loaded, added, true),
        figures(&shared, added, ready, true)
    );
    let explain = cli_ok(&cluster, &["search", "t", r#"{"b": 3}"#, "--explain"]);
    let plan = explain
        .lines()
        .find(|l| l.contains("contacts"))
        .expect("a plan line");
    assert!(
        plan.contains(&format!("subspace {part} (b)")) && plan.contains("contacts 1 of"),
        "{explain}"
    );

    cli_ok(&cluster, &["add-index", "t", "c"]);
    wait_settled(&admin, "the index to be ready", |_| true);
    let listed = cli_ok(&cluster, &["list-indices", "t"]);
    assert!(listed.lines().any(|l| l.ends_with(": c ready")), "{listed}");

    cli_ok(&cluster, &["rm-subspace", "t", "1"]);
    wait_settled(&admin, "subspace 1 to be gone", |config| {
        subspace_attrs(config) == vec![vec![0], vec![2]]
    });
    let listed = cli_ok(&cluster, &["list-subspaces", "t"]);
    assert_eq!(listed, format!("0: k\n{part}: b\n"));

    cli_ok(&cluster, &["relayout", "t", RELAYOUT]);
    wait_settled(&admin, "the relayout to finish", |config| {
        let indexes = config.space("t").map(|s| s.desc.indexes.clone());
        subspace_attrs(config) == vec![vec![0], vec![2, 3]] && indexes == Some(vec![1])
    });

    let model = stop_workers(&runtime, &shared, workers);
    let calls = shared.latencies.lock().expect("lock").len();
    eprintln!("{calls} calls during the changes, 0 failed");
    check_quiescent(&runtime, &client, &model);
}

/// Stops the workers and checks that no call failed or answered wrong;
/// returns the union of their models.
fn stop_workers(
    runtime: &tokio::runtime::Runtime,
    shared: &Shared,
    workers: Vec<tokio::task::JoinHandle<BTreeMap<i64, Obj>>>,
) -> BTreeMap<i64, Obj> {
    shared.stop.store(true, Ordering::Relaxed);
    let mut model = BTreeMap::new();
    for handle in workers {
        model.extend(runtime.block_on(handle).expect("a worker"));
    }
    let wrong = shared.wrong.lock().expect("lock").clone();
    assert_eq!(
        shared.failed.load(Ordering::Relaxed),
        0,
        "failed or wrong calls during the changes: {:?}",
        &wrong[..wrong.len().min(5)]
    );
    model
}

/// Quiescence: every search equals a brute-force filter of the model.
fn check_quiescent(runtime: &tokio::runtime::Runtime, client: &Client, model: &BTreeMap<i64, Obj>) {
    let mut rng = StdRng::seed_from_u64(99);
    for _ in 0..100 {
        let query = Query::random(&mut rng);
        let records = runtime
            .block_on(client.search("t", query.ops()))
            .expect("search");
        let mut found = BTreeMap::new();
        for record in &records {
            let (key, obj) = decode(record);
            assert!(found.insert(key, obj).is_none(), "{query:?} twice");
        }
        let expected: BTreeMap<i64, Obj> = model
            .iter()
            .filter(|(_, o)| query.holds(o))
            .map(|(k, o)| (*k, o.clone()))
            .collect();
        assert_eq!(found, expected, "search {query:?} after quiescence");
    }
}

/// Starts the mixed load of [`worker`] on `objects` keys and waits until
/// every worker has loaded its keys and run a mixed call.
fn start_workers(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    objects: i64,
    shared: &Arc<Shared>,
) -> Vec<tokio::task::JoinHandle<BTreeMap<i64, Obj>>> {
    let workers = (0..WORKERS)
        .map(|w| runtime.spawn(worker(client.clone(), w, objects, shared.clone())))
        .collect();
    wait_for("the workers to load their keys", CHANGE_TIMEOUT, || {
        (shared.latencies.lock().expect("lock").len() >= 4 * WORKERS as usize).then_some(())
    });
    workers
}

/// Faults during layout changes, with real processes behind proxies:
/// a kill -9 of a daemon that is backfilling a new subspace (it restarts
/// from its data directory), a kill -9 of the coordinator leader right
/// after `add-index`, a daemon cut off the network during a `relayout`,
/// and a space removed while its new subspace is building (the change is
/// abandoned with the space, and the name can be used again). Under the
/// mixed load throughout: no client call fails, every search answers
/// what search consistency promises, and after quiescence every search
/// equals a brute-force filter.
#[test]
fn layout_changes_survive_kill_9_coordinator_failover_and_a_partition() {
    let objects: i64 = 3000;
    let mut cluster = ProxiedCluster::start(3, 4);
    let admin = cluster.admin();
    admin.add_space(SPACE).expect("add space");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime
        .block_on(Client::connect_with(
            cluster.coordinator_addrs(),
            ClientOptions::default(),
        ))
        .expect("client");
    let shared = Arc::new(Shared::default());
    let workers = start_workers(&runtime, &client, objects, &shared);

    // A new subspace; the daemon heading the first key region is killed
    // while it backfills, and comes back from its disk a second later.
    let part = admin
        .add_subspace("t", &["b".to_string()])
        .expect("add-subspace");
    let config = admin.config().expect("config");
    let head = config.space("t").expect("space").subspaces[0].regions[0].chain[0];
    let victim = (0..cluster.daemons.len())
        .find(|&i| cluster.daemon_id(&config, i) == Some(head))
        .expect("the head is one of ours");
    let building = matches!(
        config.space("t").and_then(|s| s.part_state(part)),
        Some(PartState::Building { .. })
    );
    cluster.kill_daemon(victim);
    std::thread::sleep(Duration::from_secs(1));
    cluster.start_daemon(victim);
    wait_for("the subspace to be ready", CHANGE_TIMEOUT, || {
        let config = admin.config().ok()?;
        config
            .space("t")?
            .part_state(part)?
            .is_ready()
            .then_some(())
    });
    eprintln!("killed daemon {victim} (building when killed: {building}); subspace ready");

    // A new index; the coordinator leader dies right after accepting it.
    admin.add_index("t", "c").expect("add-index");
    let leader = cluster.leader_index(&admin, Duration::from_secs(30));
    cluster.kill_coordinator(leader);
    wait_settled(
        &admin,
        "the index to be ready without the old leader",
        |_| true,
    );
    cluster.start_coordinator(leader);

    // A relayout with a daemon cut off the network for a while.
    admin.relayout("t", RELAYOUT).expect("relayout");
    let cut = (victim + 1) % cluster.daemons.len();
    cluster.isolate_daemon(cut);
    std::thread::sleep(Duration::from_secs(3));
    cluster.heal_daemon(cut);
    wait_settled(&admin, "the relayout to finish", |config| {
        let indexes = config.space("t").map(|s| s.desc.indexes.clone());
        subspace_attrs(config) == vec![vec![0], vec![2, 3]] && indexes == Some(vec![1])
    });

    // A change that cannot finish: its space goes while it builds.
    let other = "space u key int k attributes int a create 4 partitions tolerate 1 failure";
    admin.add_space(other).expect("add space u");
    for k in 0..500 {
        let put = client.put("u", Value::Int(k), [("a", Value::Int(k % 13))]);
        assert_eq!(runtime.block_on(put).expect("put u"), Outcome::Done);
    }
    let abandoned = admin
        .add_subspace("u", &["a".to_string()])
        .expect("add-subspace u");
    // Readiness needs a report from every key region's point leader,
    // sent once a second: at once, the part is still building.
    let state = admin
        .config()
        .expect("config")
        .space("u")
        .and_then(|s| s.part_state(abandoned));
    assert!(
        matches!(state, Some(PartState::Building { .. })),
        "the subspace of u should still be building: {state:?}"
    );
    admin.rm_space("u").expect("rm-space while building");
    let config = admin.config().expect("config");
    assert!(
        config.space("u").is_none(),
        "the space and its change are gone"
    );
    admin.add_space(other).expect("the name can be used again");
    // The client learns of the new space from whichever coordinator member
    // it asks, which may lag the leader: wait until it knows the epoch in
    // which the space was added, as an application would.
    let added_at = admin.config().expect("config").epoch;
    runtime
        .block_on(client.wait_for_epoch(added_at, CHANGE_TIMEOUT))
        .expect("the client catches up");
    let fresh = runtime
        .block_on(client.search("u", Vec::<(&str, PredOp)>::new()))
        .expect("search the new space");
    assert!(
        fresh.is_empty(),
        "nothing of the old space comes back: {fresh:?}"
    );
    let config = admin.config().expect("config");
    let space = config.space("u").expect("space u again");
    assert!(
        space.subspaces.len() == 1 && space.layout_settled(),
        "the abandoned part (id {}) does not live on in the new space: {:?}",
        abandoned.0,
        space.parts()
    );

    let model = stop_workers(&runtime, &shared, workers);
    let calls = shared.latencies.lock().expect("lock").len();
    eprintln!("{calls} calls during the faults, 0 failed");
    check_quiescent(&runtime, &client, &model);
}
