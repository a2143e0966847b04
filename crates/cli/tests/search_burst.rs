//! A burst of searches whose pages go to blocking threads, against a real
//! daemon process: every answer equals a filter over every object, and
//! the daemon does not keep a thread per page it was sent at once.
//!
//! Each search checks an attribute no subspace or index serves, so each
//! of the space's regions scans its objects in a page handed to a
//! blocking thread. Before the daemon bounded those pages, tokio started a
//! thread for every page in flight (up to its 512), and the pool never
//! shrank while work kept waking its threads in turn; every later
//! operation paid for the threads (`docs/BENCHMARKS.md`, "A blocking pool
//! that never shrank").

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::Cluster;
use std::collections::BTreeSet;
use tessera_client::{Client, PredOp, Value};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

const PARTITIONS: usize = 32;
const SPACE: &str = "space burst key int k attributes int a, string b \
                     create 32 partitions tolerate 0 failures";
const OBJECTS: i64 = 400;
/// Distinct values of `a`.
const VALUES: i64 = 10;
/// Searches sent at once: each one a page to every region.
const SEARCHES: usize = 64;

/// The threads of process `pid` (from `/proc`).
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads line")
}

#[test]
fn a_burst_of_handed_off_pages_does_not_leave_a_thread_per_page() {
    let cluster = Cluster::start(1);
    cluster.admin().add_space(SPACE).expect("add_space");
    let pid = cluster.procs.procs[1].child.id();
    assert_eq!(cluster.procs.procs[1].name, "daemon-0");
    let runtime = Runtime::new().expect("runtime");
    let client = runtime
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("connect");
    runtime.block_on(async {
        for k in 0..OBJECTS {
            client
                .put(
                    "burst",
                    Value::Int(k),
                    vec![("a", Value::Int(k % VALUES)), ("b", Value::str("x"))],
                )
                .await
                .expect("put")
                .into_result()
                .expect("put");
        }
    });
    let before = threads(pid);

    let answers = runtime.block_on(async {
        let mut searches = JoinSet::new();
        for i in 0..SEARCHES {
            let client = client.clone();
            searches.spawn(async move {
                let a = i as i64 % VALUES;
                let found = client
                    .search("burst", [("a", PredOp::Eq(Value::Int(a)))])
                    .await
                    .expect("search");
                (a, found)
            });
        }
        searches.join_all().await
    });
    let after = threads(pid);

    for (a, found) in answers {
        let keys: BTreeSet<i64> = found
            .iter()
            .map(|r| match r.get("k") {
                Some(Value::Int(k)) => *k,
                other => panic!("key {other:?}"),
            })
            .collect();
        let expected: BTreeSet<i64> = (0..OBJECTS).filter(|k| k % VALUES == a).collect();
        assert_eq!(keys, expected, "a = {a}");
    }
    // SEARCHES × PARTITIONS pages were sent at once; a thread each would
    // have taken tokio's pool to its 512. The daemon runs them on two
    // threads per CPU; the bound leaves room for the runtime's own moves
    // between threads (32), not for a thread per page.
    let pages = SEARCHES * PARTITIONS;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bound = before + 2 * cpus + 32;
    eprintln!("daemon threads: {before} before, {after} after {pages} pages (bound {bound})");
    assert!(
        after <= bound && bound < pages,
        "the daemon went from {before} to {after} threads for {pages} pages"
    );
}
