//! The real-process chaos test (issue 3, point 8).
//!
//! Five daemons and three coordinator members run as processes, each behind
//! a fault-injecting proxy (`common/proxy.rs`). Two spaces, one tolerating
//! one failure and one tolerating two, each with subspaces on `a` and `b`.
//! Worker threads, each with its own client, run put, put_if_not_exist,
//! conditional put, atomic add, delete, get and search on a few keys, while
//! a nemesis kills -9 and restarts daemons (also the target of a running
//! state transfer, right after another daemon died), kills -9 and restarts
//! the coordinator leader, cuts a daemon off the network (both directions,
//! coordinator included; sometimes while the coordinator leader dies too),
//! cuts a daemon off the coordinator only (it still reaches its peers and
//! they it), and pauses a daemon with SIGSTOP; meanwhile answers are
//! dropped on their way back now and then, so clients retry. Between
//! faults it waits until every daemon is available, the cluster is stable
//! and every region has f + 1 replicas again, so that no space loses more
//! than it tolerates.
//!
//! Then everything heals, and the test checks:
//! - the recorded history (invocation and return times, operation, result;
//!   an update without a definite answer is indeterminate) is linearizable
//!   per key, by porcupine (`tests/linearizability`, built with the Go
//!   toolchain; the final reads of every key are part of the history);
//! - no acknowledged write was lost: for every key whose last write was
//!   acknowledged after every other write of it had returned, the final
//!   read shows exactly that write;
//! - every search after healing equals a brute-force filter over the final
//!   state, and every search during the chaos returned only matching
//!   objects;
//! - no server process died on its own.
//!
//! `TESSERA_CHAOS_SECS` sets the length of the fault phase (default 45 s);
//! `TESSERA_CHAOS_SEED` the seed of the workload and the nemesis (printed;
//! timing is real, so a seed does not replay a run exactly).

mod common;

use common::{wait_for, ProxiedCluster};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{
    BlockingAdmin, BlockingClient, ClientOptions, Outcome, PredOp, Record, Value,
};
use tessera_types::DaemonState;

/// (name, tolerated failures).
const SPACES: [(&str, u32); 2] = [("c1", 1), ("c2", 2)];
const KEYS: usize = 6;
const WORKERS: usize = 6;
const DAEMONS: usize = 5;
const COORDINATORS: usize = 3;
/// Values of `a`, spread over the whole int axis so that changing `a`
/// moves an object between regions of subspace `a`.
const A_VALUES: [i64; 5] = [-2 << 61, -1 << 61, 0, 1 << 61, 2 << 61];
/// How long the cluster may take to settle after a fault.
const SETTLE_TIME_MAX: Duration = Duration::from_secs(120);

fn space_description(name: &str, f: u32) -> String {
    format!(
        "space {name} key string k attributes int a, int b subspace a subspace b \
         create 4 partitions tolerate {f} failure{}",
        if f == 1 { "" } else { "s" }
    )
}

/// A small seeded generator (xorshift64*), enough for picking operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo + 1))
    }
}

/// One operation of the history, as the checker reads it.
#[derive(Clone, Debug)]
struct Entry {
    client: usize,
    space: &'static str,
    key: String,
    op: &'static str,
    a: i64,
    b: i64,
    cmp: i64,
    d: i64,
    /// done, cmpfail, notfound, found, absent or unknown.
    out: &'static str,
    ga: i64,
    gb: i64,
    call: i64,
    ret: i64,
}

impl Entry {
    fn json(&self) -> String {
        serde_json::json!({
            "client": self.client, "space": self.space, "key": self.key, "op": self.op,
            "a": self.a, "b": self.b, "cmp": self.cmp, "d": self.d, "out": self.out,
            "ga": self.ga, "gb": self.gb, "call": self.call, "ret": self.ret,
        })
        .to_string()
    }

    fn is_write(&self) -> bool {
        self.op != "get"
    }
}

#[derive(Default, Debug)]
struct Stats {
    by_outcome: BTreeMap<String, u64>,
    gets_failed: u64,
    searches: u64,
    searches_failed: u64,
    search_objects: u64,
}

struct Shared {
    t0: Instant,
    history: Mutex<Vec<Entry>>,
    stats: Mutex<Stats>,
    stop: AtomicBool,
    next_client: AtomicUsize,
    /// A description of every search result that did not match its
    /// predicates (must stay empty).
    bad_searches: Mutex<Vec<String>>,
}

impl Shared {
    fn now(&self) -> i64 {
        self.t0.elapsed().as_nanos() as i64
    }

    fn record(&self, entry: Entry) {
        *self
            .stats
            .lock()
            .unwrap()
            .by_outcome
            .entry(format!("{} {}", entry.op, entry.out))
            .or_default() += 1;
        self.history.lock().unwrap().push(entry);
    }
}

fn int(record: &Record, name: &str) -> i64 {
    match record.get(name) {
        Some(Value::Int(v)) => *v,
        other => panic!("attribute {name} is {other:?}"),
    }
}

fn client_options() -> ClientOptions {
    ClientOptions {
        retry_time_max: Duration::from_secs(15),
        update_timeout: Duration::from_secs(2),
        ..ClientOptions::default()
    }
}

/// The outcome name of an update; an error leaves it unknown.
fn outcome(result: Result<Outcome, tessera_client::ClientError>) -> &'static str {
    match result {
        Ok(Outcome::Done) => "done",
        Ok(Outcome::CmpFail { .. }) => "cmpfail",
        Ok(Outcome::NotFound) => "notfound",
        Err(_) => "unknown",
    }
}

/// A search predicate of the workload and its brute-force meaning.
#[derive(Clone, Debug)]
enum Query {
    All,
    AEq(i64),
    BRange(i64, i64),
}

impl Query {
    fn pick(rng: &mut Rng) -> Query {
        match rng.below(3) {
            0 => Query::All,
            1 => Query::AEq(A_VALUES[rng.below(A_VALUES.len())]),
            _ => {
                let lo = rng.between(-6, 4);
                Query::BRange(lo, lo + rng.between(1, 4))
            }
        }
    }

    fn predicates(&self) -> Vec<(&'static str, PredOp)> {
        match *self {
            Query::All => vec![],
            Query::AEq(a) => vec![("a", PredOp::Eq(Value::Int(a)))],
            Query::BRange(lo, hi) => vec![
                ("b", PredOp::Ge(Value::Int(lo))),
                ("b", PredOp::Lt(Value::Int(hi))),
            ],
        }
    }

    fn matches(&self, a: i64, b: i64) -> bool {
        match *self {
            Query::All => true,
            Query::AEq(v) => a == v,
            Query::BRange(lo, hi) => lo <= b && b < hi,
        }
    }
}

/// (key, a, b) of every object a search returned.
fn search_rows(
    client: &BlockingClient,
    space: &str,
    query: &Query,
) -> Result<BTreeSet<(String, i64, i64)>, tessera_client::ClientError> {
    Ok(client
        .search(space, query.predicates())?
        .iter()
        .map(|r| {
            let key = match r.get("k") {
                Some(Value::String(k)) => String::from_utf8_lossy(k).into_owned(),
                other => panic!("a search result's key is {other:?}"),
            };
            (key, int(r, "a"), int(r, "b"))
        })
        .collect())
}

fn worker(shared: Arc<Shared>, coordinators: Vec<String>, seed: u64) {
    let client = BlockingClient::connect_with(coordinators, client_options()).expect("connect");
    let mut rng = Rng(seed);
    let mut me = shared.next_client.fetch_add(1, Ordering::SeqCst);
    while !shared.stop.load(Ordering::SeqCst) {
        let space = SPACES[rng.below(SPACES.len())].0;
        let key = format!("k{}", rng.below(KEYS));
        let a = A_VALUES[rng.below(A_VALUES.len())];
        let b = rng.between(-4, 4);
        let mut entry = Entry {
            client: me,
            space,
            key: key.clone(),
            op: "get",
            a,
            b,
            cmp: A_VALUES[rng.below(A_VALUES.len())],
            d: [-2, -1, 1, 2][rng.below(4)],
            out: "unknown",
            ga: 0,
            gb: 0,
            call: 0,
            ret: 0,
        };
        let k = Value::str(&key);
        let attrs = [("a", Value::Int(a)), ("b", Value::Int(b))];
        let roll = rng.below(100);
        entry.call = shared.now();
        match roll {
            0..=19 => match client.get(space, k) {
                Ok(Some(record)) => {
                    entry.out = "found";
                    entry.ga = int(&record, "a");
                    entry.gb = int(&record, "b");
                }
                Ok(None) => entry.out = "absent",
                Err(_) => {
                    // A read without an answer had no effect: leave it out.
                    shared.stats.lock().unwrap().gets_failed += 1;
                    continue;
                }
            },
            20..=34 => {
                entry.op = "put";
                entry.out = outcome(client.put(space, k, attrs));
            }
            35..=44 => {
                entry.op = "create";
                entry.out = outcome(client.put_if_not_exist(space, k, attrs));
            }
            45..=59 => {
                entry.op = "cput";
                let predicate = [("a", PredOp::Eq(Value::Int(entry.cmp)))];
                entry.out = outcome(client.cond_put(space, k, predicate, attrs));
            }
            60..=79 => {
                entry.op = "add";
                let add = client
                    .client()
                    .atomic_add(space, k, [("b", Value::Int(entry.d))]);
                entry.out = outcome(client.block_on(add));
            }
            80..=89 => {
                entry.op = "del";
                entry.out = outcome(client.del(space, k));
            }
            _ => {
                let query = Query::pick(&mut rng);
                let found = search_rows(&client, space, &query);
                let mut stats = shared.stats.lock().unwrap();
                stats.searches += 1;
                match found {
                    Ok(rows) => {
                        stats.search_objects += rows.len() as u64;
                        for (key, a, b) in rows {
                            let known = (0..KEYS).any(|i| key == format!("k{i}"));
                            if !known || !query.matches(a, b) {
                                shared
                                    .bad_searches
                                    .lock()
                                    .unwrap()
                                    .push(format!("{space} {query:?} returned ({key}, {a}, {b})"));
                            }
                        }
                    }
                    Err(_) => stats.searches_failed += 1,
                }
                continue;
            }
        }
        entry.ret = shared.now();
        let unknown = entry.out == "unknown";
        shared.record(entry);
        if unknown {
            // The indeterminate operation stays open forever in the
            // history; later operations come from a new checker client so
            // that no client has two operations open at once.
            me = shared.next_client.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// What the nemesis did.
#[derive(Default, Debug)]
struct Faults {
    daemon_kills: u64,
    coordinator_leader_kills: u64,
    daemon_isolations: u64,
    daemon_pauses: u64,
    coordinator_cuts: u64,
    transfer_target_kills: u64,
    brought_back_online: u64,
}

/// One fault (or two at once), then healing; the kinds take turns.
fn nemesis(
    cluster: &mut ProxiedCluster,
    admin: &BlockingAdmin,
    rng: &mut Rng,
    faults: &mut Faults,
    round: usize,
) {
    let i = rng.below(DAEMONS);
    match round % 7 {
        0 => {
            eprintln!("chaos: kill -9 daemon {i}");
            cluster.kill_daemon(i);
            faults.daemon_kills += 1;
            std::thread::sleep(rng.millis(300, 3500));
            cluster.start_daemon(i);
        }
        1 => {
            let leader = leader_index(cluster, admin);
            eprintln!("chaos: kill -9 coordinator leader {leader}");
            cluster.kill_coordinator(leader);
            faults.coordinator_leader_kills += 1;
            std::thread::sleep(rng.millis(500, 3000));
            cluster.start_coordinator(leader);
        }
        2 => {
            eprintln!("chaos: cut daemon {i} off the network");
            cluster.isolate_daemon(i);
            faults.daemon_isolations += 1;
            std::thread::sleep(rng.millis(2500, 5000));
            cluster.heal_daemon(i);
        }
        3 => {
            eprintln!("chaos: pause daemon {i} (SIGSTOP)");
            cluster.pause_daemon(i, true);
            faults.daemon_pauses += 1;
            std::thread::sleep(rng.millis(1500, 4500));
            cluster.pause_daemon(i, false);
        }
        4 => {
            // A second failure that the spaces tolerate: the daemon that
            // receives a region by state transfer dies mid-transfer.
            eprintln!("chaos: kill -9 daemon {i}, then a state transfer's target");
            cluster.kill_daemon(i);
            faults.daemon_kills += 1;
            let target = (0..60).find_map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                let config = admin.config().ok()?;
                let dead = cluster.daemon_id(&config, i)?;
                config.transfers.iter().find_map(|transfer| {
                    let j = (0..DAEMONS)
                        .find(|&j| j != i && cluster.daemon_id(&config, j) == Some(transfer.to))?;
                    // Only if every region keeps a live replica without
                    // both: that is all a space tolerating one failure has.
                    let survives = config.spaces.iter().all(|space| {
                        space.subspaces.iter().flat_map(|l| &l.regions).all(|r| {
                            !r.chain.contains(&transfer.to)
                                || r.chain.iter().any(|&d| d != dead && d != transfer.to)
                        })
                    });
                    survives.then_some(j)
                })
            });
            if let Some(j) = target {
                eprintln!("chaos: kill -9 daemon {j}, a transfer target");
                cluster.kill_daemon(j);
                faults.transfer_target_kills += 1;
                std::thread::sleep(rng.millis(300, 2000));
                cluster.start_daemon(j);
            }
            cluster.start_daemon(i);
        }
        5 => {
            // A partial partition: peers and clients still reach the
            // daemon, but it loses its lease and is replaced.
            eprintln!("chaos: cut daemon {i} off the coordinator only");
            cluster.cut_daemon_from_coordinators(i, true);
            faults.coordinator_cuts += 1;
            std::thread::sleep(rng.millis(2500, 5000));
            cluster.cut_daemon_from_coordinators(i, false);
        }
        _ => {
            // Both fault domains at once.
            eprintln!("chaos: cut daemon {i} off the network and kill -9 the coordinator leader");
            cluster.isolate_daemon(i);
            faults.daemon_isolations += 1;
            std::thread::sleep(rng.millis(500, 2000));
            let leader = leader_index(cluster, admin);
            cluster.kill_coordinator(leader);
            faults.coordinator_leader_kills += 1;
            std::thread::sleep(rng.millis(1000, 3000));
            cluster.start_coordinator(leader);
            std::thread::sleep(rng.millis(500, 2000));
            cluster.heal_daemon(i);
        }
    }
}

/// The index of the coordinator member that leads now.
fn leader_index(cluster: &ProxiedCluster, admin: &BlockingAdmin) -> usize {
    wait_for("a coordinator leader", SETTLE_TIME_MAX, || {
        let addr = admin.coordinator_status().ok()?.leader_addr?;
        cluster.coordinators.iter().position(|c| c.addr() == addr)
    })
}

/// Waits until every daemon is available (taking offline ones back), the
/// cluster is stable, and every region has f + 1 replicas.
fn settle(cluster: &ProxiedCluster, admin: &BlockingAdmin, faults: &mut Faults) {
    let mut last = String::new();
    let deadline = Instant::now() + SETTLE_TIME_MAX;
    loop {
        let settled = (|| {
            let config = admin.config().ok()?;
            let mut offline = false;
            for i in 0..cluster.daemons.len() {
                let id = cluster.daemon_id(&config, i)?;
                if config.daemons[&id].state == DaemonState::Offline {
                    offline = true;
                    if admin.server_online(id).is_ok() {
                        faults.brought_back_online += 1;
                    }
                }
            }
            if offline {
                return None;
            }
            let stability = admin.stability().ok()?;
            last = format!("{stability:?}");
            if !stability.stable {
                return None;
            }
            let config = admin.config().ok()?;
            for space in &config.spaces {
                let replicas = space.desc.fault_tolerance as usize + 1;
                for layout in &space.subspaces {
                    for region in &layout.regions {
                        if region.chain.len() != replicas {
                            last = format!("region {} has chain {:?}", region.id, region.chain);
                            return None;
                        }
                    }
                }
            }
            Some(())
        })();
        if settled.is_some() {
            return;
        }
        if Instant::now() > deadline {
            let config = admin
                .config()
                .map(|c| format!("{c:#?}"))
                .unwrap_or_default();
            panic!(
                "the cluster did not settle within {SETTLE_TIME_MAX:?}: {last}\n{}",
                &config[..config.len().min(20_000)]
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Panics with the process's log if any server exited on its own.
fn check_processes(cluster: &mut ProxiedCluster) {
    for proc in &mut cluster.procs.procs {
        if let Ok(Some(status)) = proc.child.try_wait() {
            let tail = proc.log_tail(60);
            panic!("{} exited on its own ({status}):\n{tail}", proc.name);
        }
    }
}

/// Builds the porcupine checker with the Go toolchain.
fn build_checker(out: &Path) -> PathBuf {
    let go = std::env::var("GO").unwrap_or_else(|_| {
        let on_path = Command::new("go").arg("version").output().is_ok();
        if on_path {
            "go".into()
        } else {
            "/usr/local/go/bin/go".into()
        }
    });
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/linearizability");
    let binary = out.join("linearizability");
    let mut build = Command::new(&go);
    build
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly");
    if std::env::var_os("HOME").is_none() {
        // Go keeps its caches under $HOME; without one, under target/.
        let caches = Path::new(env!("CARGO_TARGET_TMPDIR"));
        build
            .env("GOCACHE", caches.join("go-build"))
            .env("GOMODCACHE", caches.join("go-mod"));
    }
    let status = build
        .status()
        .unwrap_or_else(|e| panic!("cannot run the Go toolchain ({go}): {e}"));
    assert!(status.success(), "go build of the checker failed");
    binary
}

/// Runs the checker on `history`; (exit code, its output).
fn run_checker(checker: &Path, history: &Path, visualization: &Path) -> (i32, String) {
    let output = Command::new(checker)
        .arg(history)
        .arg(visualization)
        .output()
        .expect("run the checker");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

fn write_history(path: &Path, history: &[Entry]) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("history file"));
    for entry in history {
        writeln!(file, "{}", entry.json()).expect("write history");
    }
    file.flush().expect("flush history");
}

/// The checker must reject a lost acknowledged write and a double add, and
/// accept an indeterminate update that may have happened.
fn checker_self_test(checker: &Path, dir: &Path) {
    let op = |client, op, a, d, out, ga, gb, call, ret| Entry {
        client,
        space: "s",
        key: "k".into(),
        op,
        a,
        b: 0,
        cmp: 0,
        d,
        out,
        ga,
        gb,
        call,
        ret,
    };
    let cases = [
        (
            "a lost write",
            vec![
                op(0, "put", 1, 0, "done", 0, 0, 1, 2),
                op(1, "get", 0, 0, "absent", 0, 0, 3, 4),
            ],
            1,
        ),
        (
            "an add applied twice",
            vec![
                op(0, "put", 1, 0, "done", 0, 0, 1, 2),
                op(0, "add", 0, 1, "done", 0, 0, 3, 4),
                op(1, "get", 0, 0, "found", 1, 2, 5, 6),
            ],
            1,
        ),
        (
            "an indeterminate put seen later",
            vec![
                op(0, "put", 1, 0, "unknown", 0, 0, 1, 0),
                op(1, "get", 0, 0, "absent", 0, 0, 3, 4),
                op(1, "get", 0, 0, "found", 1, 0, 5, 6),
            ],
            0,
        ),
    ];
    for (what, history, expected) in cases {
        let path = dir.join("self-test.jsonl");
        write_history(&path, &history);
        let (code, text) = run_checker(checker, &path, &dir.join("self-test.html"));
        assert_eq!(code, expected, "checker on {what}: {text}");
    }
}

#[test]
fn chaos_history_is_linearizable() {
    let chaos_time = Duration::from_secs(
        std::env::var("TESSERA_CHAOS_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(45),
    );
    let seed: u64 = std::env::var("TESSERA_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::random::<u64>() | 1);
    eprintln!("chaos: seed {seed}, fault phase {chaos_time:?}");

    let mut cluster = ProxiedCluster::start(COORDINATORS, DAEMONS);
    let checker = build_checker(cluster.dir.path());
    checker_self_test(&checker, cluster.dir.path());

    let admin = cluster.admin();
    for (name, f) in SPACES {
        admin
            .add_space(&space_description(name, f))
            .expect("add_space");
    }
    let mut faults = Faults::default();
    settle(&cluster, &admin, &mut faults);

    let shared = Arc::new(Shared {
        t0: Instant::now(),
        history: Mutex::new(Vec::new()),
        stats: Mutex::new(Stats::default()),
        stop: AtomicBool::new(false),
        next_client: AtomicUsize::new(0),
        bad_searches: Mutex::new(Vec::new()),
    });
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (shared, coordinators) = (shared.clone(), cluster.coordinator_addrs());
            let worker_seed = seed.wrapping_mul(i as u64 + 7) | 1;
            std::thread::spawn(move || worker(shared, coordinators, worker_seed))
        })
        .collect();

    // Answers lost on their way back, now and then at a random daemon: the
    // client retries at once, and the point leader must recognise the
    // retry (pending, or among the key's recent writers).
    let dropper = {
        let (shared, proxies) = (
            shared.clone(),
            cluster
                .daemons
                .iter()
                .map(|d| d.proxy.clone())
                .collect::<Vec<_>>(),
        );
        let mut rng = Rng(seed ^ 0x2545_f491_4f6c_dd1d);
        std::thread::spawn(move || {
            while !shared.stop.load(Ordering::SeqCst) {
                std::thread::sleep(rng.millis(100, 400));
                proxies[rng.below(proxies.len())].drop_next_replies(1);
            }
            proxies.iter().map(|p| p.replies_dropped()).sum::<u64>()
        })
    };

    // The nemesis: one fault at a time, then wait until the cluster has
    // repaired itself, until the time is up.
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let deadline = Instant::now() + chaos_time;
    let mut round = 0usize;
    while Instant::now() < deadline {
        std::thread::sleep(rng.millis(200, 1000));
        nemesis(&mut cluster, &admin, &mut rng, &mut faults, round);
        check_processes(&mut cluster);
        settle(&cluster, &admin, &mut faults);
        round += 1;
    }
    shared.stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().expect("a worker panicked");
    }
    let replies_dropped = dropper.join().expect("the reply dropper panicked");
    for daemon in &cluster.daemons {
        daemon.proxy.drop_next_replies(0);
    }
    settle(&cluster, &admin, &mut faults);
    check_processes(&mut cluster);

    // The final state, read key by key (part of the history).
    let client = BlockingClient::connect_with(cluster.coordinator_addrs(), client_options())
        .expect("connect");
    let reader = shared.next_client.fetch_add(1, Ordering::SeqCst);
    let mut final_state: HashMap<(&str, String), Option<(i64, i64)>> = HashMap::new();
    for (space, _) in SPACES {
        for i in 0..KEYS {
            let key = format!("k{i}");
            let call = shared.now();
            let found = client
                .get(space, Value::str(&key))
                .unwrap_or_else(|e| panic!("final read of {space}/{key}: {e}"));
            let state = found.map(|r| (int(&r, "a"), int(&r, "b")));
            shared.record(Entry {
                client: reader,
                space,
                key: key.clone(),
                op: "get",
                a: 0,
                b: 0,
                cmp: 0,
                d: 0,
                out: if state.is_some() { "found" } else { "absent" },
                ga: state.map_or(0, |s| s.0),
                gb: state.map_or(0, |s| s.1),
                call,
                ret: shared.now(),
            });
            final_state.insert((space, key), state);
        }
    }

    // Searches after healing equal a brute-force filter over the final state.
    let mut queries = vec![Query::All];
    queries.extend(A_VALUES.iter().map(|&a| Query::AEq(a)));
    queries.extend((-8..8).map(|lo| Query::BRange(lo, lo + 3)));
    for (space, _) in SPACES {
        for query in &queries {
            let found = search_rows(&client, space, query)
                .unwrap_or_else(|e| panic!("search {query:?} in {space} after healing: {e}"));
            let expected: BTreeSet<(String, i64, i64)> = final_state
                .iter()
                .filter(|((s, _), _)| *s == space)
                .filter_map(|((_, key), state)| state.map(|(a, b)| (key.clone(), a, b)))
                .filter(|(_, a, b)| query.matches(*a, *b))
                .collect();
            assert_eq!(found, expected, "search {query:?} in {space} after healing");
        }
    }
    let bad_searches = shared.bad_searches.lock().unwrap().clone();
    assert!(
        bad_searches.is_empty(),
        "searches returned objects that do not match: {bad_searches:#?}"
    );

    // No acknowledged write lost: a key whose last write was acknowledged,
    // and began after every other write of the key had returned, must hold
    // exactly what that write left.
    let history = shared.history.lock().unwrap().clone();
    let mut keys_checked = 0;
    for (space, _) in SPACES {
        for i in 0..KEYS {
            let key = format!("k{i}");
            let writes: Vec<&Entry> = history
                .iter()
                .filter(|e| e.space == space && e.key == key && e.is_write())
                .collect();
            let Some(last) = writes.iter().max_by_key(|e| e.call) else {
                continue;
            };
            let isolated = writes
                .iter()
                .all(|e| std::ptr::eq(*e, *last) || (e.out != "unknown" && e.ret < last.call));
            if !isolated || last.out != "done" {
                continue;
            }
            let expected = match last.op {
                "put" | "create" | "cput" => Some((last.a, last.b)),
                "del" => None,
                _ => continue, // an add's result depends on what came before
            };
            keys_checked += 1;
            assert_eq!(
                final_state[&(space, key.clone())],
                expected,
                "{space}/{key}: the last acknowledged write {last:?} is lost"
            );
        }
    }

    // Linearizability of the whole history, per key.
    let history_path = cluster.dir.path().join("history.jsonl");
    write_history(&history_path, &history);
    let visualization = std::env::temp_dir().join(format!("tessera-chaos-{seed}.html"));
    let (code, text) = run_checker(&checker, &history_path, &visualization);
    let kept = std::env::temp_dir().join(format!("tessera-chaos-{seed}.jsonl"));
    if code != 0 {
        let _ = std::fs::copy(&history_path, &kept);
    }
    let stats = shared.stats.lock().unwrap();
    let (links_cut, connections_held) = cluster.net.counts();
    eprintln!(
        "chaos summary: seed {seed}; {} operations recorded {:?}; gets without answer {}; \
         searches {} ({} failed, {} objects); faults {faults:?}; proxy: {links_cut} connections \
         cut, {connections_held} held, {replies_dropped} answers dropped; final-state keys checked for lost writes: {keys_checked}\n{text}",
        history.len(),
        stats.by_outcome,
        stats.gets_failed,
        stats.searches,
        stats.searches_failed,
        stats.search_objects,
    );
    assert_eq!(
        code,
        0,
        "the history is not linearizable (kept at {}): {text}",
        kept.display()
    );
}
