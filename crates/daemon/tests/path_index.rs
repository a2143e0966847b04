//! A local index on a document path, driven through one daemon: the
//! backfill writes an entry for every object holding a string, int or
//! float at the path, writes keep the entries in step, searches read them
//! once the index is ready and return what a brute-force filter returns,
//! and a dropped index loses its entries — also across a restart — while
//! an attribute index beside it keeps its own.
//!
//! The expected entries are built from the values the test put into each
//! document, not by the extraction under test.

mod common;

use common::{one_region, start, tick, REGION};
use std::collections::BTreeSet;
use std::sync::Arc;
use tessera_daemon::index::{
    choose_access, entry, key_order_page, path_slot, place_of, Access, IndexedEngine, PageBounds,
    Slot,
};
use tessera_daemon::node::backfill::{cursor_name, Cursor, BACKFILL_ENTRIES_PER_TICK};
use tessera_daemon::node::DaemonNode;
use tessera_daemon::record::Record;
use tessera_storage::{Engine, IndexRange, MemoryEngine, Write};
use tessera_types::coordinate::{coordinate, key_bytes};
use tessera_types::parse::parse_space;
use tessera_types::{
    Check, Configuration, Epoch, IndexPart, Object, PartId, PartState, PredOp, SpaceId, Value,
    Version,
};

/// The index on attribute `n`, ready throughout.
const N_INDEX: PartId = PartId(1);
/// The index on `d.a.b`.
const PATH_INDEX: PartId = PartId(3);
/// Enough objects for a backfill and a purge of several ticks.
const OBJECTS: i64 = (BACKFILL_ENTRIES_PER_TICK * 3) as i64;

/// What one test object holds at `d.a.b`, chosen by its key.
#[derive(Clone, Debug)]
enum AtPath {
    Int(i64),
    Float(f64),
    Str(String),
    /// An array: not indexed (a check may still step into it).
    Array(i64),
    /// No `b` in `a`.
    Missing,
    /// `a` is a number, so the path goes through a non-object.
    Through,
}

impl AtPath {
    fn of(k: i64, round: i64) -> AtPath {
        let v = (k * 7 + round) % 23 - 11;
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

    /// The value a check on `d.a.b` sees, if it is one the index holds.
    fn indexed(&self) -> Option<Value> {
        match self {
            AtPath::Int(i) => Some(Value::Int(*i)),
            AtPath::Float(f) => Some(Value::Float(*f)),
            AtPath::Str(s) => Some(Value::str(s)),
            _ => None,
        }
    }
}

fn object(k: i64, at: &AtPath) -> Object {
    Object {
        values: vec![Value::Int(k), Value::Document(at.json()), Value::Int(k % 5)],
    }
}

fn config(path_state: Option<PartState>) -> Configuration {
    let mut desc = parse_space(
        "space s key int k attributes document d, int n create 1 partition tolerate 0 failures",
    )
    .expect("valid");
    desc.indexes.push(2);
    let mut indexes = vec![IndexPart {
        id: N_INDEX,
        attr: 2,
        path: None,
        state: PartState::Ready,
    }];
    if let Some(state) = path_state {
        indexes.push(IndexPart {
            id: PATH_INDEX,
            attr: 1,
            path: Some("a.b".into()),
            state,
        });
    }
    one_region(desc, indexes)
}

fn put(engine: &dyn Engine, k: i64, at: &AtPath) {
    let record = Record {
        version: Version(1),
        object: Some(object(k, at)),
        recent: Vec::new(),
    };
    engine
        .apply(vec![Write::Put {
            region: REGION,
            key: key_bytes(&Value::Int(k)),
            value: record.encode(),
        }])
        .expect("memory");
}

/// Every index entry on disk, split into the path slot's and the others.
fn entries(disk: &MemoryEngine) -> (BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>) {
    let slot = path_slot(PATH_INDEX).expect("fits");
    let mut all = BTreeSet::new();
    let range = IndexRange {
        start: &[],
        end: None,
        reverse: false,
    };
    disk.index_scan(REGION, range, &mut |e| {
        all.insert(e.to_vec());
        true
    })
    .expect("memory");
    all.into_iter()
        .partition(|e| e[..4] == (slot as u32).to_be_bytes())
}

/// The path entries `model` implies.
fn expected(model: &[(i64, Option<AtPath>)]) -> BTreeSet<Vec<u8>> {
    let slot = path_slot(PATH_INDEX).expect("fits");
    model
        .iter()
        .filter_map(|(k, at)| {
            let value = at.as_ref()?.indexed()?;
            let c = coordinate(&value).expect("a scalar");
            Some(entry(slot, c, &key_bytes(&Value::Int(*k))))
        })
        .collect()
}

/// The objects of `model` (deleted ones are `None`) a search with `checks`
/// finds when it reads the region as the daemon would, and how it read it.
fn search(
    engine: &dyn Engine,
    config: &Configuration,
    checks: &[Check],
) -> (BTreeSet<i64>, Access) {
    let space = &config.spaces[0];
    let access = choose_access(&space.desc, &place_of(space, REGION), checks, None, None);
    let bounds = PageBounds {
        objects: 7,
        size: |_| 1,
        size_max: usize::MAX,
    };
    let mut found = BTreeSet::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let (page, more) = key_order_page(
            engine,
            REGION,
            &access,
            checks,
            after.as_deref(),
            bounds,
            None,
        )
        .expect("read");
        for m in &page {
            let key = m.object.view().unwrap().value(0).unwrap();
            let Some(Value::Int(k)) = key else {
                panic!("key {key:?}");
            };
            assert!(found.insert(k), "{k} twice for {checks:?}");
        }
        match page.last() {
            Some(last) if more => after = Some(last.key.clone()),
            _ if more => panic!("an empty page with more to come"),
            _ => break,
        }
    }
    (found, access)
}

fn brute_force(model: &[(i64, Option<AtPath>)], checks: &[Check]) -> BTreeSet<i64> {
    model
        .iter()
        .filter_map(|(k, at)| {
            let object = object(*k, at.as_ref()?);
            checks.iter().all(|c| c.matches(&object)).then_some(*k)
        })
        .collect()
}

fn queries() -> Vec<Vec<Check>> {
    let on = |op| Check::at_path(1, "a.b", op);
    vec![
        vec![on(PredOp::Eq(Value::Int(3)))],
        vec![on(PredOp::Eq(Value::Int(-11)))],
        vec![on(PredOp::Eq(Value::Float(0.75)))],
        vec![on(PredOp::Eq(Value::str("s2")))],
        vec![on(PredOp::Ge(Value::Int(4)))],
        vec![
            on(PredOp::Gt(Value::Int(-2))),
            on(PredOp::Le(Value::Int(2))),
        ],
        vec![on(PredOp::Lt(Value::Float(-1.0)))],
        vec![
            on(PredOp::Ge(Value::Int(0))),
            Check::new(2, PredOp::Ge(Value::Int(3))),
        ],
        vec![on(PredOp::Eq(Value::Int(99)))],
        // Checks the index cannot narrow: the region is scanned.
        vec![on(PredOp::Regex("^s[12]".into()))],
        vec![on(PredOp::Eq(Value::Document("[1, [1]]".into())))],
        vec![Check::at_path(1, "a.b[1][0]", PredOp::Eq(Value::Int(2)))],
    ]
}

/// Checks every query against the brute force, and whether it read the
/// path index.
fn check_searches(engine: &dyn Engine, config: &Configuration, model: &[(i64, Option<AtPath>)]) {
    let ready = config.spaces[0]
        .indexes
        .iter()
        .any(|ix| ix.id == PATH_INDEX && ix.state.is_ready());
    let mut walked = 0;
    for checks in queries() {
        let (found, access) = search(engine, config, &checks);
        assert_eq!(
            found,
            brute_force(model, &checks),
            "{checks:?} by {access:?}"
        );
        if let Access::Index {
            slot: Slot::Path { .. },
            ..
        } = access
        {
            assert!(ready, "a building index was read for {checks:?}");
            walked += 1;
        }
    }
    // The first nine queries narrow on the path (the eighth by a range on
    // `n` as well: the path is narrower or `n` is; either is right).
    if ready {
        assert!(walked >= 8, "the path index was read {walked} times");
    }
}

#[test]
fn a_path_index_is_backfilled_kept_in_step_and_used_once_ready() {
    let disk = Arc::new(MemoryEngine::new());
    // The objects, written before the path index existed.
    let before = config(None);
    let engine = Arc::new(IndexedEngine::open(disk.clone(), &before).expect("open"));
    let mut model: Vec<(i64, Option<AtPath>)> =
        (0..OBJECTS).map(|k| (k, Some(AtPath::of(k, 0)))).collect();
    for (k, at) in &model {
        put(engine.as_ref(), *k, at.as_ref().expect("present"));
    }
    let (path, others) = entries(&disk);
    assert!(path.is_empty());
    assert_eq!(others.len(), OBJECTS as usize, "one entry of n per object");

    // add-index d.a.b: the index is building, so searches scan.
    let node = start(&before, engine.clone());
    let mut config = config(Some(PartState::Building { progress: 0 }));
    config.epoch = Epoch(6);
    assert!(node.on_config(Arc::new(config.clone()), &mut |_| {}));
    check_searches(engine.as_ref(), &config, &model);

    // A write during the backfill indexes itself, ahead of the walk.
    let last = OBJECTS - 1;
    model[last as usize].1 = Some(AtPath::Int(1000));
    put(engine.as_ref(), last, &AtPath::Int(1000));
    assert!(entries(&disk).0.contains(&entry(
        path_slot(PATH_INDEX).expect("fits"),
        coordinate(&Value::Int(1000)).expect("int"),
        &key_bytes(&Value::Int(last))
    )));

    let mut reported = Vec::new();
    let mut ticks = 0;
    while reported.is_empty() {
        reported.extend(tick(&node));
        ticks += 1;
        assert!(ticks < 40, "the backfill never finished");
    }
    assert_eq!(reported, vec![REGION]);
    let name = cursor_name("entries", SpaceId(1), PATH_INDEX, REGION);
    assert_eq!(
        Cursor::decode(disk.meta_get(&name).expect("memory").as_deref()),
        Cursor::Finished
    );
    assert_eq!(entries(&disk).0, expected(&model));
    check_searches(engine.as_ref(), &config, &model);

    // Ready: searches on the path read its entries.
    config.epoch = Epoch(7);
    config.spaces[0].indexes[1].state = PartState::Ready;
    assert!(node.on_config(Arc::new(config.clone()), &mut |_| {}));
    check_searches(engine.as_ref(), &config, &model);

    // Puts that change the kind at the path, remove it, or bring it back,
    // and deletes: the entries follow.
    for round in 1..4 {
        for k in (0..OBJECTS).filter(|k| (k + round) % 3 == 0) {
            if (k + round) % 4 == 0 {
                engine
                    .apply(vec![Write::Delete {
                        region: REGION,
                        key: key_bytes(&Value::Int(k)),
                    }])
                    .expect("memory");
                model[k as usize].1 = None;
            } else {
                let at = AtPath::of(k, round);
                put(engine.as_ref(), k, &at);
                model[k as usize].1 = Some(at);
            }
        }
        assert_eq!(entries(&disk).0, expected(&model), "round {round}");
        check_searches(engine.as_ref(), &config, &model);
    }
}

/// The configuration after `rm-index` of the path index has run its
/// course: the index is gone from the space.
fn dropped(mut config: Configuration) -> Configuration {
    config.epoch = Epoch(config.epoch.0 + 1);
    config.spaces[0].indexes.retain(|ix| ix.id != PATH_INDEX);
    config
}

/// A ready path index over every object, and the node serving it.
fn indexed(disk: &Arc<MemoryEngine>) -> (Configuration, Arc<IndexedEngine>, DaemonNode) {
    let config = config(Some(PartState::Ready));
    let engine = Arc::new(IndexedEngine::open(disk.clone(), &config).expect("open"));
    for k in 0..OBJECTS {
        put(engine.as_ref(), k, &AtPath::of(k, 0));
    }
    let model: Vec<(i64, Option<AtPath>)> =
        (0..OBJECTS).map(|k| (k, Some(AtPath::of(k, 0)))).collect();
    assert_eq!(entries(disk).0, expected(&model));
    assert!(
        expected(&model).len() > BACKFILL_ENTRIES_PER_TICK,
        "more entries than one purge batch"
    );
    let node = start(&config, engine.clone());
    (config, engine, node)
}

#[test]
fn a_dropped_path_index_loses_its_entries_and_only_its_own() {
    let disk = Arc::new(MemoryEngine::new());
    let (config, _engine, node) = indexed(&disk);
    let (path, others) = entries(&disk);
    assert!(node.on_config(Arc::new(dropped(config)), &mut |_| {}));
    tick(&node);
    assert_eq!(
        entries(&disk).0.len(),
        path.len() - BACKFILL_ENTRIES_PER_TICK,
        "one batch per tick"
    );
    tick(&node);
    assert_eq!(entries(&disk), (BTreeSet::new(), others));
}

#[test]
fn a_restart_during_the_purge_of_a_dropped_path_index_finishes_it() {
    let disk = Arc::new(MemoryEngine::new());
    let (config, engine, node) = indexed(&disk);
    let (path, others) = entries(&disk);
    let config = dropped(config);
    assert!(node.on_config(Arc::new(config.clone()), &mut |_| {}));
    tick(&node);
    let left = path.len() - BACKFILL_ENTRIES_PER_TICK;
    assert_eq!(entries(&disk).0.len(), left);

    // kill -9, then a start under the configuration without the index.
    drop(node);
    drop(engine);
    let engine = Arc::new(IndexedEngine::open(disk.clone(), &config).expect("open"));
    assert_eq!(entries(&disk).0.len(), left, "opening deletes nothing");
    let node = start(&config, engine);
    tick(&node);
    assert_eq!(entries(&disk), (BTreeSet::new(), others));
}

/// Opening under a configuration that still holds the path index leaves
/// its entries alone.
#[test]
fn opening_keeps_the_entries_of_a_path_index_still_held() {
    let disk = Arc::new(MemoryEngine::new());
    let (config, engine, node) = indexed(&disk);
    let before = entries(&disk);
    drop(node);
    drop(engine);
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    assert_eq!(engine.purge_batch(usize::MAX).expect("memory"), 0);
    assert_eq!(entries(&disk), before);
}

/// Data written before path indexes held entries (index format 1, when a
/// path index was ready at once and empty) gets them on the first open.
#[test]
fn opening_data_of_the_format_before_paths_indexes_them() {
    let disk = Arc::new(MemoryEngine::new());
    let config = config(Some(PartState::Ready));
    let mut model = Vec::new();
    for k in 0..100 {
        let at = AtPath::of(k, 0);
        let record = Record {
            version: Version(1),
            object: Some(object(k, &at)),
            recent: Vec::new(),
        };
        disk.apply(vec![Write::Put {
            region: REGION,
            key: key_bytes(&Value::Int(k)),
            value: record.encode(),
        }])
        .expect("memory");
        model.push((k, Some(at)));
    }
    disk.meta_put("index_format", b"1").expect("memory");
    let _engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    let (path, others) = entries(&disk);
    assert_eq!(path, expected(&model));
    assert_eq!(others.len(), 100, "one entry of n per object");
}
