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
        within: None,
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
            None,
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

/// A page read in place of a failed region (`within`) holds only the
/// objects that region places, of those the lane holds first in the
/// covering set; a `within` whose parts the daemon cannot find returns
/// every match, for the client to judge.
#[test]
fn a_page_read_in_place_of_a_failed_region_holds_only_its_objects() {
    use tessera_daemon::search::{search, ReadView};
    use tessera_types::replex::Within;
    use tessera_types::{
        DaemonId, DaemonInfo, DaemonState, Region, RegionDirectory, RegionId, SubspaceLayout,
    };

    // Two parts of two regions each, cut at the middle of the axis: the
    // key subspace on `k` and a subspace on `b`. This daemon holds the
    // lower region of `b`, where every object lies (b = -1); objects with
    // a negative key belong to the lower key region, the failed one.
    const OTHER: DaemonId = DaemonId(2);
    let (key_low, key_high, b_low, b_high) = (RegionId(1), RegionId(2), RegionId(10), RegionId(11));
    let half = vec![vec![1u64 << 63]];
    let part = |id, attr, regions: [(RegionId, DaemonId); 2]| SubspaceLayout {
        attrs: vec![attr],
        splits: half.clone(),
        regions: regions
            .iter()
            .map(|&(id, d)| Region { id, chain: vec![d] })
            .collect(),
        part: PartId(id),
        state: PartState::Ready,
        kind: Default::default(),
    };
    let desc =
        parse_space("space s key int k attributes int b create 2 partitions").expect("valid");
    let mut config = common::one_region(desc, Vec::new());
    config.spaces[0].subspaces = vec![
        part(0, 0, [(key_low, OTHER), (key_high, OTHER)]),
        part(1, 1, [(b_low, common::ME), (b_high, OTHER)]),
    ];
    config.daemons.insert(
        OTHER,
        DaemonInfo {
            id: OTHER,
            addr: "d2:1".into(),
            state: DaemonState::Offline,
            metrics: None,
        },
    );
    let disk = Arc::new(MemoryEngine::new());
    let writes = (-20..20)
        .map(|k| Write::Put {
            region: b_low,
            key: tessera_types::key_bytes(&Value::Int(k)),
            value: Record {
                version: Version(1),
                object: Some(Object {
                    values: vec![Value::Int(k), Value::Int(-1)],
                }),
                recent: Vec::new(),
            }
            .encode(),
        })
        .collect();
    disk.apply(writes).expect("memory");
    // Opened on objects without entries, the engine indexes `b` in the
    // region of `b` (a sorted page on `b` walks them).
    let engine = IndexedEngine::open(disk, &config).expect("open");
    let directory = RegionDirectory::new(&config);
    let view = ReadView {
        config: &config,
        directory: &directory,
        me: common::ME,
        engine: &engine,
    };
    // Pages of at most four objects, read to the end, in key order and
    // sorted on `b` (all equal: then by key).
    let sorted = tessera_protocol::SortBy {
        attr: 1,
        descending: false,
    };
    let read = |within: &Option<Within>, sort: Option<tessera_protocol::SortBy>| {
        let mut keys = Vec::new();
        let mut after = None;
        loop {
            let page = search(
                &view,
                Epoch(5),
                SpaceId(1),
                b_low,
                &[],
                sort,
                after.as_ref(),
                Some(4),
                &Default::default(),
                within.as_ref(),
            )
            .expect("a read");
            let DaemonResponse::SearchPage { objects, more } = page else {
                panic!("not a page: {page:?}");
            };
            assert!(
                !objects.is_empty() || !more,
                "an empty page with more to come"
            );
            assert!(objects.len() <= 4);
            for (_, bytes) in &objects {
                let object = bytes.decode().expect("an object");
                after = Some(tessera_protocol::SearchAfter {
                    key: tessera_types::key_bytes(&object.values[0]),
                    sort_value: sort.map(|s| object.values[s.attr].clone()),
                });
                match object.values[0] {
                    Value::Int(k) => keys.push(k),
                    ref other => panic!("key {other:?}"),
                }
            }
            if !more {
                return keys;
            }
        }
    };
    let keys = |within: Option<Within>| {
        let in_key_order = read(&within, None);
        assert_eq!(read(&within, Some(sorted)), in_key_order, "sorted on b");
        in_key_order
    };
    let cover = vec![(PartId(1), b_low), (PartId(1), b_high)];
    let lost_low = Within {
        part: PartId(0),
        region: key_low,
        cover: cover.clone(),
    };
    assert_eq!(keys(Some(lost_low)), (-20..0).collect::<Vec<_>>());
    let lost_high = Within {
        part: PartId(0),
        region: key_high,
        cover: cover.clone(),
    };
    assert_eq!(keys(Some(lost_high)), (0..20).collect::<Vec<_>>());
    // A region earlier in the covering set that holds the same objects
    // keeps them: this lane ships none.
    let earlier = Within {
        part: PartId(0),
        region: key_low,
        cover: vec![
            (PartId(1), b_high),
            (PartId(0), key_low),
            (PartId(1), b_low),
        ],
    };
    assert_eq!(keys(Some(earlier)), Vec::<i64>::new());
    // Without `within`, or with parts this configuration lacks: all.
    assert_eq!(keys(None), (-20..20).collect::<Vec<_>>());
    let unknown = Within {
        part: PartId(7),
        region: key_low,
        cover,
    };
    assert_eq!(keys(Some(unknown)), (-20..20).collect::<Vec<_>>());
}
