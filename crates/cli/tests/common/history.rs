//! The mixed load of the fault tests (`chaos.rs`, `gray_failures.rs`) and
//! the checks on what it recorded.
//!
//! Worker threads, each with its own client, run put, put_if_not_exist,
//! conditional put, atomic add, delete, get and search on a few keys of a
//! few spaces and record every operation (invocation and return times,
//! operation, result; an update without a definite answer is
//! indeterminate). After healing, the history is checked:
//! - linearizable per key, by porcupine (`tests/linearizability`, built
//!   with the Go toolchain; the final reads of every key are part of it);
//! - no acknowledged write lost: for every key whose last write was
//!   acknowledged after every other write of it had returned, the final
//!   read shows exactly that write;
//! - every search after healing equals a brute-force filter over the final
//!   state, and every search under faults returned only matching objects.

use super::ProxiedCluster;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{BlockingClient, ClientOptions, Outcome, PredOp, Record, Value};

/// Values of `a`, spread over the whole int axis so that changing `a`
/// moves an object between regions of subspace `a`.
pub const A_VALUES: [i64; 5] = [-2 << 61, -1 << 61, 0, 1 << 61, 2 << 61];

/// The description of a load space: subspaces on `a` and `b`, tolerating
/// `f` failures.
pub fn space_description(name: &str, f: u32) -> String {
    format!(
        "space {name} key string k attributes int a, int b subspace a subspace b \
         create 4 partitions tolerate {f} failure{}",
        if f == 1 { "" } else { "s" }
    )
}

/// What the workers do: which spaces (name, tolerated failures), how many
/// keys in each, and at most how many operations per worker.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub spaces: &'static [(&'static str, u32)],
    pub keys: usize,
    pub ops_per_worker_max: usize,
}

impl Workload {
    fn key(&self, i: usize) -> String {
        format!("k{i}")
    }

    fn is_key(&self, key: &str) -> bool {
        (0..self.keys).any(|i| key == self.key(i))
    }
}

/// A small seeded generator (xorshift64*), enough for picking operations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo + 1))
    }
}

/// One operation of the history, as the checker reads it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub client: usize,
    pub space: &'static str,
    pub key: String,
    pub op: &'static str,
    pub a: i64,
    pub b: i64,
    pub cmp: i64,
    pub d: i64,
    /// done, cmpfail, notfound, found, absent or unknown.
    pub out: &'static str,
    pub ga: i64,
    pub gb: i64,
    pub call: i64,
    pub ret: i64,
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

    /// A get of `key` by `client` between `call` and `ret` that found
    /// `state`.
    fn read(
        client: usize,
        space: &'static str,
        key: String,
        state: Option<(i64, i64)>,
        call: i64,
        ret: i64,
    ) -> Entry {
        Entry {
            client,
            space,
            key,
            op: "get",
            a: 0,
            b: 0,
            cmp: 0,
            d: 0,
            out: if state.is_some() { "found" } else { "absent" },
            ga: state.map_or(0, |s| s.0),
            gb: state.map_or(0, |s| s.1),
            call,
            ret,
        }
    }
}

#[derive(Default, Debug)]
pub struct Stats {
    pub by_outcome: BTreeMap<String, u64>,
    pub gets_failed: u64,
    pub searches: u64,
    pub searches_failed: u64,
    pub search_objects: u64,
}

/// What the workers share: the history, counters, and when each worker
/// last got a definite answer.
pub struct Shared {
    pub t0: Instant,
    pub history: Mutex<Vec<Entry>>,
    pub stats: Mutex<Stats>,
    pub stop: AtomicBool,
    pub next_client: AtomicUsize,
    /// A description of every search result that did not match its
    /// predicates (must stay empty).
    pub bad_searches: Mutex<Vec<String>>,
    /// (worker, time since `t0` in ns) of every operation that got a
    /// definite answer: progress, as the clients see it.
    pub progress: Mutex<Vec<(usize, i64)>>,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            t0: Instant::now(),
            history: Mutex::new(Vec::new()),
            stats: Mutex::new(Stats::default()),
            stop: AtomicBool::new(false),
            next_client: AtomicUsize::new(0),
            bad_searches: Mutex::new(Vec::new()),
            progress: Mutex::new(Vec::new()),
        }
    }

    /// Nanoseconds since `t0`: the history's clock.
    pub fn now(&self) -> i64 {
        self.t0.elapsed().as_nanos() as i64
    }

    pub fn record(&self, entry: Entry) {
        *self
            .stats
            .lock()
            .unwrap()
            .by_outcome
            .entry(format!("{} {}", entry.op, entry.out))
            .or_default() += 1;
        self.history.lock().unwrap().push(entry);
    }

    fn progressed(&self, worker: usize) {
        let now = self.now();
        self.progress.lock().unwrap().push((worker, now));
    }

    /// The longest time, within [`from`, `to`] (ns since `t0`), in which no
    /// worker got a definite answer (`all`), and in which one worker got
    /// none (`one`). The window's end counts as progress only when an
    /// answer came at or after it; otherwise the gap runs to `to`.
    pub fn stalls(&self, from: i64, to: i64) -> Stalls {
        let progress = self.progress.lock().unwrap();
        let gap_max = |times: &mut Vec<i64>| {
            times.sort_unstable();
            let mut last = from;
            let mut gap = 0;
            for &t in times.iter().filter(|&&t| t > from) {
                gap = gap.max(t.min(to) - last);
                last = t;
                if t >= to {
                    return gap;
                }
            }
            gap.max(to - last)
        };
        let mut all: Vec<i64> = progress.iter().map(|&(_, t)| t).collect();
        let workers: BTreeSet<usize> = progress.iter().map(|&(w, _)| w).collect();
        let one = workers
            .into_iter()
            .map(|w| {
                let mut times: Vec<i64> = progress
                    .iter()
                    .filter(|&&(v, _)| v == w)
                    .map(|&(_, t)| t)
                    .collect();
                gap_max(&mut times)
            })
            .max()
            .unwrap_or(to - from);
        Stalls {
            all: Duration::from_nanos(gap_max(&mut all).max(0) as u64),
            one: Duration::from_nanos(one.max(0) as u64),
        }
    }
}

/// The longest times without progress in a window (see [`Shared::stalls`]).
#[derive(Clone, Copy, Debug)]
pub struct Stalls {
    /// No worker got an answer.
    pub all: Duration,
    /// One worker got no answer (its operation waited, retrying).
    pub one: Duration,
}

fn int(record: &Record, name: &str) -> i64 {
    match record.get(name) {
        Some(Value::Int(v)) => *v,
        other => panic!("attribute {name} is {other:?}"),
    }
}

/// The options of every client of the load.
pub fn client_options() -> ClientOptions {
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
pub enum Query {
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

/// One worker of the load, number `worker`: random operations until
/// `shared.stop`, or until it ran `workload.ops_per_worker_max`.
pub fn worker(
    shared: Arc<Shared>,
    coordinators: Vec<String>,
    workload: Workload,
    worker: usize,
    seed: u64,
) {
    let client = BlockingClient::connect_with(coordinators, client_options()).expect("connect");
    let mut rng = Rng(seed);
    let mut me = shared.next_client.fetch_add(1, Ordering::SeqCst);
    for _ in 0..workload.ops_per_worker_max {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let space = workload.spaces[rng.below(workload.spaces.len())].0;
        let key = workload.key(rng.below(workload.keys));
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
                let answered = found.is_ok();
                {
                    let mut stats = shared.stats.lock().unwrap();
                    stats.searches += 1;
                    match found {
                        Ok(rows) => {
                            stats.search_objects += rows.len() as u64;
                            for (key, a, b) in rows {
                                if !workload.is_key(&key) || !query.matches(a, b) {
                                    shared.bad_searches.lock().unwrap().push(format!(
                                        "{space} {query:?} returned ({key}, {a}, {b})"
                                    ));
                                }
                            }
                        }
                        Err(_) => stats.searches_failed += 1,
                    }
                }
                if answered {
                    shared.progressed(worker);
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
        } else {
            shared.progressed(worker);
        }
    }
}

/// Reads every key of the workload once, recording the reads in the
/// history; panics when a read fails. Returns the state read.
pub fn read_all(
    shared: &Shared,
    client: &BlockingClient,
    workload: &Workload,
) -> HashMap<(&'static str, String), Option<(i64, i64)>> {
    let reader = shared.next_client.fetch_add(1, Ordering::SeqCst);
    let mut state = HashMap::new();
    for &(space, _) in workload.spaces {
        for i in 0..workload.keys {
            let key = workload.key(i);
            let call = shared.now();
            let found = client
                .get(space, Value::str(&key))
                .unwrap_or_else(|e| panic!("read of {space}/{key}: {e}"));
            let value = found.map(|r| (int(&r, "a"), int(&r, "b")));
            shared.record(Entry::read(
                reader,
                space,
                key.clone(),
                value,
                call,
                shared.now(),
            ));
            state.insert((space, key), value);
        }
    }
    state
}

/// Searches of every kind after healing must equal a brute-force filter
/// over `final_state`; searches under faults must have returned only
/// matching objects.
pub fn check_searches(
    shared: &Shared,
    client: &BlockingClient,
    workload: &Workload,
    final_state: &HashMap<(&'static str, String), Option<(i64, i64)>>,
) {
    let mut queries = vec![Query::All];
    queries.extend(A_VALUES.iter().map(|&a| Query::AEq(a)));
    queries.extend((-8..8).map(|lo| Query::BRange(lo, lo + 3)));
    for &(space, _) in workload.spaces {
        for query in &queries {
            let found = search_rows(client, space, query)
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
}

/// No acknowledged write lost: a key whose last write was acknowledged,
/// and began after every other write of the key had returned, must hold
/// exactly what that write left. Returns how many keys that checked.
pub fn check_no_lost_writes(
    history: &[Entry],
    workload: &Workload,
    final_state: &HashMap<(&'static str, String), Option<(i64, i64)>>,
) -> usize {
    let mut keys_checked = 0;
    for &(space, _) in workload.spaces {
        for i in 0..workload.keys {
            let key = workload.key(i);
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
    keys_checked
}

/// Panics with the process's log if any server exited on its own.
pub fn check_processes(cluster: &mut ProxiedCluster) {
    for proc in &mut cluster.procs.procs {
        if let Ok(Some(status)) = proc.child.try_wait() {
            let tail = proc.log_tail(60);
            panic!("{} exited on its own ({status}):\n{tail}", proc.name);
        }
    }
}

/// The porcupine checker (`tests/linearizability`), built with the Go
/// toolchain into `out` and tested on histories whose verdict is known.
pub struct Checker {
    binary: PathBuf,
}

impl Checker {
    pub fn build(out: &Path) -> Checker {
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
        let checker = Checker { binary };
        checker.self_test(out);
        checker
    }

    /// Runs the checker on `history`; (exit code, its output).
    fn run(&self, history: &Path, visualization: &Path) -> (i32, String) {
        let output = Command::new(&self.binary)
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

    /// The checker must reject a lost acknowledged write and a double add,
    /// and accept an indeterminate update that may have happened.
    fn self_test(&self, dir: &Path) {
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
            let (code, text) = self.run(&path, &dir.join("self-test.html"));
            assert_eq!(code, expected, "checker on {what}: {text}");
        }
    }

    /// Checks `history` (written under `dir`); (exit code, output, where
    /// the history is kept when it is not linearizable). `name` names the
    /// kept history and its visualization in the temporary directory.
    pub fn check(&self, dir: &Path, history: &[Entry], name: &str) -> (i32, String, PathBuf) {
        let path = dir.join("history.jsonl");
        write_history(&path, history);
        let visualization = std::env::temp_dir().join(format!("{name}.html"));
        let (code, text) = self.run(&path, &visualization);
        let kept = std::env::temp_dir().join(format!("{name}.jsonl"));
        if code != 0 {
            let _ = std::fs::copy(&path, &kept);
        }
        (code, text, kept)
    }
}

fn write_history(path: &Path, history: &[Entry]) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("history file"));
    for entry in history {
        writeln!(file, "{}", entry.json()).expect("write history");
    }
    file.flush().expect("flush history");
}
