//! Which search pages a daemon answers on the request's own task and
//! which it hands out as jobs, driven directly as the shell drives it: a
//! page that returns what it walks (an index that answers every check)
//! is answered at once, a walk that tests a check object by object too
//! while it loads at most `INLINE_LOADS` objects, any other page is a job
//! (a longer walk read again from its start); all answer what a filter
//! over every stored object finds.

mod common;

use common::REGION;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::core::ReplyTo;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{DaemonNode, Output};
use tessera_daemon::record::Record;
use tessera_daemon::search::INLINE_LOADS;
use tessera_protocol::{DaemonRequest, DaemonResponse};
use tessera_storage::{Engine, MemoryEngine, Write};
use tessera_types::parse::parse_space;
use tessera_types::{
    Check, Epoch, IndexPart, Object, PartId, PartState, PredOp, SpaceId, Value, Version,
};

const OBJECTS: i64 = 200;

/// Object `k` is `(k, k % 7, k % 3)`.
fn object(k: i64) -> Object {
    Object {
        values: vec![Value::Int(k), Value::Int(k % 7), Value::Int(k % 3)],
    }
}

/// One daemon holding the one region of a space indexed on `b`, not on `c`.
fn start() -> DaemonNode {
    let mut desc = parse_space(
        "space s key int k attributes int b, int c create 1 partition tolerate 0 failures",
    )
    .expect("valid");
    desc.indexes.push(1);
    let index = IndexPart {
        id: PartId(1),
        attr: 1,
        path: None,
        state: PartState::Ready,
    };
    let config = common::one_region(desc, vec![index]);
    let disk = Arc::new(MemoryEngine::new());
    let writes = (0..OBJECTS)
        .map(|k| Write::Put {
            region: REGION,
            key: tessera_types::key_bytes(&Value::Int(k)),
            value: Record {
                version: Version(1),
                object: Some(object(k)),
                recent: Vec::new(),
            }
            .encode(),
        })
        .collect();
    disk.apply(writes).expect("memory");
    // Opened on objects without entries, the engine indexes them all.
    let engine = IndexedEngine::open(disk, &config).expect("open");
    common::start(&config, Arc::new(engine))
}

/// The keys `checks` find, and whether the page was a job.
fn search(node: &DaemonNode, checks: Vec<Check>) -> (BTreeSet<i64>, bool) {
    let request = DaemonRequest::Search {
        space: SpaceId(1),
        region: REGION,
        checks,
        sort: None,
        after: None,
        limit: None,
        auth: Default::default(),
    };
    let mut outputs = Vec::new();
    let to = ReplyTo { conn: 1, id: 1 };
    node.on_request(to, Epoch(5), request, Duration::ZERO, &mut |o| {
        outputs.push(o)
    });
    let mut answers = Vec::new();
    let mut job = false;
    for output in outputs {
        match output {
            Output::Reply { response, .. } => answers.push(response),
            Output::Job(j) => {
                job = true;
                node.run_job(j, &mut |o| {
                    if let Output::Reply { response, .. } = o {
                        answers.push(response);
                    }
                });
            }
            _ => {}
        }
    }
    assert_eq!(answers.len(), 1, "{answers:?}");
    let DaemonResponse::SearchPage { objects, more } = answers.remove(0) else {
        panic!("not a page: {answers:?}");
    };
    assert!(!more, "every match fits one page");
    let keys = objects
        .iter()
        .map(
            |(_, bytes)| match bytes.decode().expect("an object").values[0] {
                Value::Int(k) => k,
                ref other => panic!("key {other:?}"),
            },
        )
        .collect();
    (keys, job)
}

fn expected(keep: impl Fn(i64) -> bool) -> BTreeSet<i64> {
    (0..OBJECTS).filter(|&k| keep(k)).collect()
}

#[test]
fn pages_the_index_answers_are_read_at_once_and_others_are_jobs() {
    let node = start();
    let b = |op| Check::new(1, op);
    let c = |op| Check::new(2, op);

    let (keys, job) = search(&node, vec![b(PredOp::Eq(Value::Int(3)))]);
    assert_eq!(keys, expected(|k| k % 7 == 3));
    assert!(!job, "an equality the index answers is read at once");

    let (keys, job) = search(
        &node,
        vec![b(PredOp::Ge(Value::Int(2))), b(PredOp::Lt(Value::Int(4)))],
    );
    assert_eq!(keys, expected(|k| (2..4).contains(&(k % 7))));
    assert!(!job, "a range the index answers is read at once");

    // b = 3 has 29 objects, each loaded and tested on c.
    assert!(OBJECTS / 7 < INLINE_LOADS as i64);
    let (keys, job) = search(
        &node,
        vec![b(PredOp::Eq(Value::Int(3))), c(PredOp::Eq(Value::Int(1)))],
    );
    assert_eq!(keys, expected(|k| k % 7 == 3 && k % 3 == 1));
    assert!(
        !job,
        "a walk that tests a check on few objects is read at once"
    );
    let past = || node.stats().walks_past_inline.load(Ordering::Relaxed);
    assert_eq!(past(), 0);

    // b ≥ 1 has 171 objects: past the budget, the page is a job, and it
    // answers every match once (read again from its start).
    assert!(OBJECTS * 6 / 7 > INLINE_LOADS as i64);
    let (keys, job) = search(
        &node,
        vec![b(PredOp::Ge(Value::Int(1))), c(PredOp::Eq(Value::Int(1)))],
    );
    assert_eq!(keys, expected(|k| k % 7 >= 1 && k % 3 == 1));
    assert!(job, "a walk that tests a check on many objects is a job");
    let (keys, job) = search(
        &node,
        vec![b(PredOp::Ge(Value::Int(1))), c(PredOp::Eq(Value::Int(5)))],
    );
    assert_eq!(keys, BTreeSet::new());
    assert!(job, "one that finds nothing after many loads too");
    // Each counted once, as read again past the budget.
    assert_eq!(past(), 2);

    let (keys, job) = search(&node, vec![c(PredOp::Eq(Value::Int(2)))]);
    assert_eq!(keys, expected(|k| k % 3 == 2));
    assert!(job, "a scan");
    assert_eq!(past(), 2, "a scan is handed off at once, not past a budget");
}

/// A region being refreshed (its daemon came back with a copy that may be
/// stale) answers no search page: readers go to its covering set until
/// the refresh completes.
#[test]
fn a_region_being_refreshed_answers_no_page() {
    use tessera_daemon::search::{search, ReadView};
    use tessera_protocol::Status;
    use tessera_types::{Rebuild, RegionDirectory};

    let desc = parse_space("space s key int k attributes int b create 1 partition").expect("valid");
    let mut config = common::one_region(desc, Vec::new());
    let disk = MemoryEngine::new();
    let page = |config: &tessera_types::Configuration| {
        let view = ReadView {
            config,
            directory: &RegionDirectory::new(config),
            me: common::ME,
            engine: &disk,
        };
        search(
            &view,
            Epoch(5),
            SpaceId(1),
            REGION,
            &[],
            None,
            None,
            None,
            &Default::default(),
        )
        .expect("a read")
    };
    assert!(matches!(page(&config), DaemonResponse::SearchPage { .. }));
    config.rebuilds.push(Rebuild {
        id: 1,
        region: REGION,
        to: common::ME,
        sources: Vec::new(),
    });
    assert!(
        matches!(
            page(&config),
            DaemonResponse::Failed {
                status: Status::Offline,
                ..
            }
        ),
        "{:?}",
        page(&config)
    );
}
