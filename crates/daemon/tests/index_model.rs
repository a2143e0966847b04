//! The per-region indexes against brute force: random puts, relocations,
//! deletes and region drops go through `IndexedEngine` (over the in-memory
//! engine, and over fjall, reopened as after a crash); then every region's
//! index holds exactly the entries of its objects, and random searches —
//! read the way `choose_access` picks, sorted or not — return exactly what
//! filtering every object of the region returns.

use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use tessera_daemon::index::{
    choose_access, key_order_page, place_of, sorted_page, Access, IndexedEngine, Match, PageBounds,
    Slot, Walk,
};
use tessera_daemon::record::Record;
use tessera_protocol::SortBy;
use tessera_storage::fault::{Hooked, Hooks};
use tessera_storage::{
    Durability, Engine, FjallEngine, IndexRange, IndexWrite, MemoryEngine, Write,
};
use tessera_types::coordinate::{coordinate, key_bytes};
use tessera_types::plan::EQUALITY_SWITCH;
use tessera_types::region::default_splits;
use tessera_types::{
    Attribute, Check, Configuration, DataType, Epoch, Object, PredOp, Region, RegionId, Space,
    SpaceDesc, SpaceId, SubspaceLayout, TimeUnit, Value, Version,
};

// Attributes of the space: k (key), a, d, c, t, e.
const A: usize = 1;
const D: usize = 2;
const C: usize = 3;
const T: usize = 4;
const E: usize = 5;

/// `key int k attributes int a, float d, string c, timestamp(second) t,
/// int e subspace a subspace c, d index t` — `e` is not indexed.
fn config() -> Configuration {
    let attr = |name: &str, dtype| Attribute {
        name: name.into(),
        dtype,
    };
    let desc = SpaceDesc {
        name: "ix".into(),
        attrs: vec![
            attr("k", DataType::Int),
            attr("a", DataType::Int),
            attr("d", DataType::Float),
            attr("c", DataType::String),
            attr("t", DataType::Timestamp(TimeUnit::Second)),
            attr("e", DataType::Int),
        ],
        subspaces: vec![vec![A], vec![C, D]],
        indexes: vec![T],
        fault_tolerance: 0,
        partitions: 4,
        authorization: false,
        global_indexes: Vec::new(),
        replex: None,
    };
    let mut next = 100;
    let subspaces = desc
        .all_subspaces()
        .into_iter()
        .map(|attrs| {
            let splits = default_splits(4, attrs.len());
            let count: usize = splits.iter().map(|s| s.len() + 1).product();
            let regions = (0..count)
                .map(|_| {
                    next += 1;
                    Region {
                        id: RegionId(next),
                        chain: vec![],
                    }
                })
                .collect();
            SubspaceLayout {
                attrs,
                splits,
                regions,
                part: tessera_types::PartId::default(),
                state: tessera_types::PartState::Ready,
                kind: Default::default(),
            }
        })
        .collect();
    Configuration {
        epoch: Epoch(1),
        spaces: vec![Space {
            id: SpaceId(1),
            indexes: vec![tessera_types::IndexPart {
                id: tessera_types::PartId(100),
                attr: T,
                path: None,
                state: tessera_types::PartState::Ready,
            }],
            desc,
            subspaces,
        }],
        ..Configuration::default()
    }
}

const FLOATS: [f64; 7] = [-1.5, -0.0, 0.0, 0.5, 2.0, 1e300, f64::NAN];
const NAMES: [&str; 4] = ["ant", "bee", "cat", "dog"];

#[derive(Clone, Debug)]
enum Op {
    /// Put a whole object; `together`: every subspace's writes in one batch.
    Put {
        key: i64,
        a: i64,
        d: usize,
        c: usize,
        t: i64,
        e: i64,
        together: bool,
    },
    Delete {
        key: i64,
    },
    /// Drops one region (as a transfer target does before receiving it).
    Drop {
        region: usize,
    },
    /// Leaves an entry that names a key under a value it does not have (as
    /// a write racing with a region drop may): readers must ignore it.
    Stale {
        region: usize,
        key: i64,
        a: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0i64..24, -4i64..4, 0..FLOATS.len(), 0..NAMES.len(), 0i64..4, 0i64..3, any::<bool>())
            .prop_map(|(key, a, d, c, t, e, together)| Op::Put { key, a, d, c, t, e, together }),
        2 => (0i64..24).prop_map(|key| Op::Delete { key }),
        1 => (0usize..64).prop_map(|region| Op::Drop { region }),
        1 => (0usize..64, 0i64..24, -4i64..4).prop_map(|(region, key, a)| Op::Stale { region, key, a }),
    ]
}

fn int_op() -> impl Strategy<Value = PredOp> {
    prop_oneof![
        (-5i64..5).prop_map(|v| PredOp::Eq(Value::Int(v))),
        (-5i64..5).prop_map(|v| PredOp::Lt(Value::Int(v))),
        (-5i64..5).prop_map(|v| PredOp::Le(Value::Int(v))),
        (-5i64..5).prop_map(|v| PredOp::Gt(Value::Int(v))),
        (-5i64..5).prop_map(|v| PredOp::Ge(Value::Int(v))),
        Just(PredOp::Eq(Value::Float(1.0))),
    ]
}

fn check() -> impl Strategy<Value = Check> {
    let float = (0..FLOATS.len()).prop_map(|i| Value::Float(FLOATS[i]));
    prop_oneof![
        int_op().prop_map(|op| Check::new(A, op)),
        int_op().prop_map(|op| Check::new(E, op)),
        int_op().prop_map(|op| Check::new(0, op)),
        int_op().prop_map(|op| Check::new(
            T,
            match op {
                PredOp::Eq(Value::Int(v)) => PredOp::Eq(Value::Timestamp(v)),
                PredOp::Lt(Value::Int(v)) => PredOp::Lt(Value::Timestamp(v)),
                PredOp::Ge(Value::Int(v)) => PredOp::Ge(Value::Timestamp(v)),
                other => other,
            }
        )),
        float.clone().prop_map(|v| Check::new(D, PredOp::Eq(v))),
        float.clone().prop_map(|v| Check::new(D, PredOp::Le(v))),
        float.prop_map(|v| Check::new(D, PredOp::Gt(v))),
        (0..NAMES.len()).prop_map(|i| Check::new(C, PredOp::Eq(Value::str(NAMES[i])))),
        (0..NAMES.len()).prop_map(|i| Check::new(C, PredOp::Lt(Value::str(NAMES[i])))),
        Just(Check::new(C, PredOp::Regex("^[bc]".into()))),
    ]
}

#[derive(Clone, Debug)]
struct Query {
    checks: Vec<Check>,
    sort: Option<SortBy>,
    /// How many sorted results the client wants in all (`None`: all).
    limit: Option<u64>,
    /// Objects per page the client asks for.
    page: usize,
    /// Cut every page after its first object by the size bound.
    tiny_pages: bool,
    /// Entries a walk of several equalities reads before it first counts
    /// the others' (`Access::Equalities`): small, so that the walks here,
    /// over a few dozen objects, move from list to list.
    switch_after: usize,
}

/// Two equalities on attributes the key subspace indexes (and the ⟨c, d⟩
/// subspace, for c and d), so that walks of several equalities are common.
fn equalities() -> impl Strategy<Value = Vec<Check>> {
    let equality = prop_oneof![
        (-4i64..4).prop_map(|v| Check::new(A, PredOp::Eq(Value::Int(v)))),
        (0..FLOATS.len()).prop_map(|i| Check::new(D, PredOp::Eq(Value::Float(FLOATS[i])))),
        (0..NAMES.len()).prop_map(|i| Check::new(C, PredOp::Eq(Value::str(NAMES[i])))),
        (0i64..4).prop_map(|v| Check::new(T, PredOp::Eq(Value::Timestamp(v)))),
    ];
    (
        equality.clone(),
        equality,
        proptest::collection::vec(check(), 0..2),
    )
        .prop_map(|(x, y, rest)| [x, y].into_iter().chain(rest).collect())
}

fn query() -> impl Strategy<Value = Query> {
    (
        prop_oneof![
            3 => proptest::collection::vec(check(), 0..3),
            1 => equalities(),
        ],
        proptest::option::of((
            prop_oneof![Just(A), Just(D), Just(T), Just(C), Just(E)],
            any::<bool>(),
        )),
        proptest::option::of(0u64..6),
        1usize..6,
        proptest::bool::weighted(0.2),
        1usize..4,
    )
        .prop_map(
            |(checks, sort, limit, page, tiny_pages, switch_after)| Query {
                checks,
                sort: sort.map(|(attr, descending)| SortBy { attr, descending }),
                limit,
                page,
                tiny_pages,
                switch_after,
            },
        )
}

/// Every region's objects, by storage key, as the engine should hold them,
/// and the stale entries written into each region.
#[derive(Default)]
struct Model {
    objects: BTreeMap<RegionId, BTreeMap<Vec<u8>, Record>>,
    stale: BTreeMap<RegionId, BTreeSet<Vec<u8>>>,
}

impl Model {
    fn new() -> Self {
        Self::default()
    }
}

fn entry_of(attr: usize, value: &Value, key: &[u8]) -> Vec<u8> {
    let mut e = (attr as u32).to_be_bytes().to_vec();
    e.extend_from_slice(&coordinate(value).unwrap().to_be_bytes());
    e.extend_from_slice(key);
    e
}

fn record(version: u64, object: Option<Object>) -> Record {
    Record {
        version: Version(version),
        object,
        recent: vec![],
    }
}

/// Applies `ops` to the engine as the chain would: in every subspace the
/// object lives in the region its values pick; a relocation deletes it from
/// the old one; a delete leaves a tombstone in the key subspace.
fn apply_ops(engine: &dyn Engine, config: &Configuration, ops: &[Op], model: &mut Model) {
    let space = &config.spaces[0];
    let regions: Vec<RegionId> = space
        .subspaces
        .iter()
        .flat_map(|l| l.regions.iter().map(|r| r.id))
        .collect();
    let mut version = 0;
    for op in ops {
        version += 1;
        match op {
            Op::Put {
                key,
                a,
                d,
                c,
                t,
                e,
                together,
            } => {
                let object = Object {
                    values: vec![
                        Value::Int(*key),
                        Value::Int(*a),
                        Value::Float(FLOATS[*d]),
                        Value::str(NAMES[*c]),
                        Value::Timestamp(*t),
                        Value::Int(*e),
                    ],
                };
                let kb = key_bytes(&Value::Int(*key));
                let mut batch = Vec::new();
                for layout in &space.subspaces {
                    let target = layout.region_of(&object).id;
                    for r in layout.regions.iter().map(|r| r.id).filter(|&r| r != target) {
                        if model
                            .objects
                            .get_mut(&r)
                            .and_then(|m| m.remove(&kb))
                            .is_some()
                        {
                            batch.push(Write::Delete {
                                region: r,
                                key: kb.clone(),
                            });
                        }
                    }
                    let rec = record(version, Some(object.clone()));
                    batch.push(Write::Put {
                        region: target,
                        key: kb.clone(),
                        value: rec.encode(),
                    });
                    model
                        .objects
                        .entry(target)
                        .or_default()
                        .insert(kb.clone(), rec);
                }
                if *together {
                    engine.apply(batch).unwrap();
                } else {
                    for w in batch {
                        engine.apply(vec![w]).unwrap();
                    }
                }
            }
            Op::Delete { key } => {
                let kb = key_bytes(&Value::Int(*key));
                for (si, layout) in space.subspaces.iter().enumerate() {
                    for r in layout.regions.iter().map(|r| r.id) {
                        let Some(m) = model.objects.get_mut(&r) else {
                            continue;
                        };
                        if !m.contains_key(&kb) {
                            continue;
                        }
                        if si == 0 {
                            let rec = record(version, None);
                            engine
                                .apply(vec![Write::Put {
                                    region: r,
                                    key: kb.clone(),
                                    value: rec.encode(),
                                }])
                                .unwrap();
                            m.insert(kb.clone(), rec);
                        } else {
                            engine
                                .apply(vec![Write::Delete {
                                    region: r,
                                    key: kb.clone(),
                                }])
                                .unwrap();
                            m.remove(&kb);
                        }
                    }
                }
            }
            Op::Drop { region } => {
                let r = regions[region % regions.len()];
                engine.drop_region(r).unwrap();
                model.objects.remove(&r);
                model.stale.remove(&r);
            }
            Op::Stale { region, key, a } => {
                let r = regions[region % regions.len()];
                let entry = entry_of(A, &Value::Int(*a), &key_bytes(&Value::Int(*key)));
                engine
                    .apply_with_index(
                        vec![],
                        vec![IndexWrite::Put {
                            region: r,
                            entry: entry.clone(),
                        }],
                    )
                    .unwrap();
                model.stale.entry(r).or_default().insert(entry);
            }
        }
    }
}

/// The index entries the objects of a region imply, built here from the
/// documented layout: attr (u32 BE) ++ coordinate (u64 BE) ++ key.
/// The indexed attributes of subspace `subspace` of this test's space: the
/// key subspace indexes every subspace attribute and `t` (the index
/// clause); `a`'s subspace indexes `a` and `t`; `c, d`'s indexes `c`, `d`, `t`.
fn indexed_in(subspace: usize) -> &'static [usize] {
    match subspace {
        0 => &[A, D, C, T],
        1 => &[A, T],
        _ => &[D, C, T],
    }
}

fn expected_entries(objects: &BTreeMap<Vec<u8>, Record>, subspace: usize) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    for (key, rec) in objects {
        let Some(object) = &rec.object else { continue };
        for &attr in indexed_in(subspace) {
            out.insert(entry_of(attr, &object.values[attr], key));
        }
    }
    out
}

fn stored_entries(engine: &dyn Engine, region: RegionId) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    let all = IndexRange {
        start: &[],
        end: None,
        reverse: false,
    };
    engine
        .index_scan(region, all, &mut |e| {
            out.insert(e.to_vec());
            true
        })
        .unwrap();
    out
}

/// Orders values as a sorted search must (ints and timestamps by value,
/// floats by IEEE total order, strings by bytes).
fn brute_cmp(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => panic!("values of different kinds"),
    }
}

/// `access`, a walk of several equalities counting the others' entries
/// after `switch_after` of its own.
fn switching_after(access: Access, switch_after: usize) -> Access {
    match access {
        Access::Equalities { walks, .. } => Access::Equalities {
            walks,
            switch_after,
        },
        other => other,
    }
}

fn check_model(engine: &dyn Engine, config: &Configuration, model: &Model, queries: &[Query]) {
    let space = &config.spaces[0];
    for (subspace, layout) in space.subspaces.iter().enumerate() {
        for region in layout.regions.iter().map(|r| r.id) {
            let empty = BTreeMap::new();
            let objects = model.objects.get(&region).unwrap_or(&empty);
            // Every object's entries are there; nothing else but injected
            // stale entries (which a later write of the key may remove).
            let stored = stored_entries(engine, region);
            let expected = expected_entries(objects, subspace);
            let no_stale = BTreeSet::new();
            let stale = model.stale.get(&region).unwrap_or(&no_stale);
            assert!(
                expected.is_subset(&stored),
                "index of {region} misses entries"
            );
            assert!(
                stored
                    .iter()
                    .all(|e| expected.contains(e) || stale.contains(e)),
                "index of {region} has entries of no object"
            );
            let cell = place_of(space, region);
            for q in queries {
                let matching: BTreeMap<&Vec<u8>, &Object> = objects
                    .iter()
                    .filter_map(|(k, r)| r.object.as_ref().map(|o| (k, o)))
                    .filter(|(_, o)| q.checks.iter().all(|c| c.matches(o)))
                    .collect();
                let bounds = |objects| PageBounds {
                    objects,
                    size: |m: &Match| m.bytes,
                    size_max: if q.tiny_pages { 1 } else { usize::MAX },
                };
                // Key order, page by page as a client asks for them.
                let mut got: Vec<(Vec<u8>, Object)> = Vec::new();
                let mut after: Option<Vec<u8>> = None;
                for round in 0.. {
                    assert!(round < 1000, "paging does not end");
                    let access = switching_after(
                        choose_access(&space.desc, &cell, &q.checks, None, Some(q.page as u64)),
                        q.switch_after,
                    );
                    let (page, more) = key_order_page(
                        engine,
                        region,
                        &access,
                        &q.checks,
                        after.as_deref(),
                        bounds(q.page),
                        None,
                    )
                    .unwrap();
                    assert!(page.len() <= q.page, "page too large");
                    assert!(
                        !more || !page.is_empty(),
                        "{access:?}: more, but an empty page"
                    );
                    got.extend(
                        page.into_iter()
                            .map(|m| (m.key, m.object.decode().unwrap())),
                    );
                    if !more {
                        break;
                    }
                    after = got.last().map(|(k, _)| k.clone());
                }
                let want: Vec<(Vec<u8>, Object)> = matching
                    .iter()
                    .map(|(k, o)| ((*k).clone(), (*o).clone()))
                    .collect();
                // Compared as text: NaN != NaN, and objects may hold NaN.
                assert_eq!(
                    format!("{got:?}"),
                    format!("{want:?}"),
                    "{region} {q:?} in key order"
                );
                let Some(sort) = q.sort else { continue };
                let limit = q.limit.map_or(usize::MAX, |l| l as usize);
                let mut got: Vec<(Vec<u8>, Object)> = Vec::new();
                let mut after: Option<(Value, Vec<u8>)> = None;
                for round in 0.. {
                    assert!(round < 1000, "paging does not end");
                    let wanted = q.page.min(limit - got.len());
                    if wanted == 0 {
                        break;
                    }
                    let access = switching_after(
                        choose_access(
                            &space.desc,
                            &cell,
                            &q.checks,
                            Some(sort),
                            Some(wanted as u64),
                        ),
                        q.switch_after,
                    );
                    let position = after.as_ref().map(|(v, k)| (Some(v), k.as_slice()));
                    let (page, more) = sorted_page(
                        engine,
                        region,
                        &access,
                        &q.checks,
                        sort,
                        position,
                        bounds(wanted),
                        None,
                    )
                    .unwrap();
                    assert!(page.len() <= wanted, "page too large");
                    assert!(
                        !more || !page.is_empty(),
                        "{access:?}: more, but an empty page"
                    );
                    for m in page {
                        let object = m.object.decode().unwrap();
                        // The sort value read alone is the object's own.
                        assert_eq!(
                            format!("{:?}", m.sort_value),
                            format!("{:?}", object.values.get(sort.attr))
                        );
                        got.push((m.key, object));
                    }
                    if !more {
                        break;
                    }
                    after = got
                        .last()
                        .map(|(k, o)| (o.values[sort.attr].clone(), k.clone()));
                }
                let mut want: Vec<(&Vec<u8>, &Object)> = matching.into_iter().collect();
                // Stable: ties stay in key order.
                want.sort_by(|(_, x), (_, y)| {
                    let o = brute_cmp(&x.values[sort.attr], &y.values[sort.attr]);
                    if sort.descending {
                        o.reverse()
                    } else {
                        o
                    }
                });
                want.truncate(limit);
                let want: Vec<(Vec<u8>, Object)> = want
                    .into_iter()
                    .map(|(k, o)| (k.clone(), o.clone()))
                    .collect();
                assert_eq!(
                    format!("{got:?}"),
                    format!("{want:?}"),
                    "{region} {q:?} sorted"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn index_equals_brute_force_in_memory(
        ops in proptest::collection::vec(op(), 0..120),
        queries in proptest::collection::vec(query(), 1..12),
    ) {
        let config = config();
        let engine = IndexedEngine::open(Arc::new(MemoryEngine::new()), &config).unwrap();
        let mut model = Model::new();
        apply_ops(&engine, &config, &ops, &mut model);
        check_model(&engine, &config, &model, &queries);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// Over fjall, and again after the engine is closed and reopened (the
    /// objects and their entries were written in the same batches).
    #[test]
    fn index_equals_brute_force_on_fjall_and_after_reopen(
        ops in proptest::collection::vec(op(), 0..120),
        queries in proptest::collection::vec(query(), 1..12),
    ) {
        let config = config();
        let dir = tempfile::tempdir().unwrap();
        let mut model = Model::new();
        {
            let fjall = Arc::new(FjallEngine::open(dir.path(), Durability::Interval).unwrap());
            let engine = IndexedEngine::open(fjall, &config).unwrap();
            apply_ops(&engine, &config, &ops, &mut model);
            check_model(&engine, &config, &model, &queries);
        }
        let fjall = Arc::new(FjallEngine::open(dir.path(), Durability::Interval).unwrap());
        let engine = IndexedEngine::open(fjall, &config).unwrap();
        check_model(&engine, &config, &model, &queries);
    }
}

/// One batch writing a key of a region several times: each write's old
/// entries are the previous write's, so only the last value's entries stay
/// (and a delete in the batch leaves none).
#[test]
fn a_batch_writing_one_key_twice_keeps_the_last_entries() {
    let config = config();
    let engine = IndexedEngine::open(Arc::new(MemoryEngine::new()), &config).unwrap();
    let region = config.spaces[0].subspaces[0].regions[0].id;
    let key = key_bytes(&Value::Int(7));
    let object = |a: i64, c: usize, t: i64| Object {
        values: vec![
            Value::Int(7),
            Value::Int(a),
            Value::Float(FLOATS[0]),
            Value::str(NAMES[c]),
            Value::Timestamp(t),
            Value::Int(0),
        ],
    };
    let put = |version: u64, o: &Object| Write::Put {
        region,
        key: key.clone(),
        value: record(version, Some(o.clone())).encode(),
    };
    let entries = |o: &Object| -> BTreeSet<Vec<u8>> {
        indexed_in(0)
            .iter()
            .map(|&attr| entry_of(attr, &o.values[attr], &key))
            .collect()
    };
    let (first, second, third) = (object(1, 0, 5), object(2, 1, 5), object(1, 2, 6));
    engine.apply(vec![put(1, &first)]).unwrap();
    engine
        .apply(vec![put(2, &second), put(3, &third), put(4, &first)])
        .unwrap();
    assert_eq!(stored_entries(&engine, region), entries(&first));
    engine
        .apply(vec![
            put(5, &second),
            Write::Delete {
                region,
                key: key.clone(),
            },
            put(6, &third),
        ])
        .unwrap();
    assert_eq!(stored_entries(&engine, region), entries(&third));
    engine
        .apply(vec![
            put(7, &first),
            Write::Delete {
                region,
                key: key.clone(),
            },
        ])
        .unwrap();
    assert!(stored_entries(&engine, region).is_empty());
}

/// Objects written before indexes existed (straight to the engine) are
/// indexed when the engine is first opened with an index.
#[test]
fn data_without_an_index_is_indexed_on_open() {
    let config = config();
    let raw = Arc::new(MemoryEngine::new());
    let mut model = Model::new();
    let ops: Vec<Op> = (0..40)
        .map(|i| Op::Put {
            key: i,
            a: i % 7 - 3,
            d: (i % 7) as usize,
            c: (i % 4) as usize,
            t: i % 3,
            e: i % 2,
            together: true,
        })
        .collect();
    apply_ops(raw.as_ref(), &config, &ops, &mut model);
    let region = config.spaces[0].subspaces[1].regions[0].id;
    assert!(stored_entries(raw.as_ref(), region).is_empty());
    let engine = IndexedEngine::open(raw, &config).unwrap();
    let queries = vec![
        Query {
            checks: vec![Check::new(A, PredOp::Eq(Value::Int(2)))],
            sort: None,
            limit: None,
            page: 2,
            tiny_pages: false,
            switch_after: 1,
        },
        Query {
            checks: vec![Check::new(T, PredOp::Ge(Value::Timestamp(1)))],
            sort: Some(SortBy {
                attr: A,
                descending: true,
            }),
            limit: Some(3),
            page: 2,
            tiny_pages: false,
            switch_after: 1,
        },
    ];
    check_model(&engine, &config, &model, &queries);
}

/// Objects loaded through a [`Hooked`] engine.
#[derive(Default)]
struct Loads(AtomicU64);

impl Hooks for Loads {
    fn objects_read(&self, count: u64) {
        self.0.fetch_add(count, AtomicOrdering::Relaxed);
    }
}

/// Of several indexed equalities the walk ends on the rarest, whatever
/// the attributes' order: d = 0.5 holds for every object and c =
/// "needle" for one, yet d's slot (2) comes before c's (3). A walk of d
/// alone loads every object of the region; the walk of both loads
/// `EQUALITY_SWITCH` of them, counts, and reads c's one entry.
#[test]
fn a_walk_of_several_equalities_ends_on_the_rarest() {
    let config = config();
    let space = &config.spaces[0];
    let engine = Arc::new(IndexedEngine::open(Arc::new(MemoryEngine::new()), &config).unwrap());
    let object = |key: i64, c: &str| Object {
        values: vec![
            Value::Int(key),
            Value::Int(0),
            Value::Float(0.5),
            Value::str(c),
            Value::Timestamp(0),
            Value::Int(0),
        ],
    };
    let needle = object(7, "needle");
    let objects: Vec<Object> = (0..400)
        .map(|k| {
            if k == 7 {
                needle.clone()
            } else {
                object(k, &format!("x{k}"))
            }
        })
        .collect();
    let mut batch = Vec::new();
    for o in &objects {
        for layout in &space.subspaces {
            batch.push(Write::Put {
                region: layout.region_of(o).id,
                key: key_bytes(&o.values[0]),
                value: record(1, Some(o.clone())).encode(),
            });
        }
    }
    engine.apply(batch).unwrap();
    let key_subspace = &space.subspaces[0];
    let region = key_subspace.region_of(&needle).id;
    let in_region = objects
        .iter()
        .filter(|o| key_subspace.region_of(o).id == region)
        .count() as u64;
    let checks = [
        Check::new(D, PredOp::Eq(Value::Float(0.5))),
        Check::new(C, PredOp::Eq(Value::str("needle"))),
    ];
    let access = choose_access(&space.desc, &place_of(space, region), &checks, None, None);
    let Access::Equalities { walks, .. } = &access else {
        panic!("two indexed equalities: {access:?}");
    };
    assert_eq!(
        walks
            .iter()
            .map(|(slot, _)| slot.clone())
            .collect::<Vec<_>>(),
        vec![Slot::Attr(D), Slot::Attr(C)]
    );
    let loads = |access: &Access| {
        let counting = Hooked::new(engine.clone(), Loads::default());
        let bounds = PageBounds {
            objects: 100,
            size: |m: &Match| m.bytes,
            size_max: usize::MAX,
        };
        let (page, more) =
            key_order_page(&counting, region, access, &checks, None, bounds, None).unwrap();
        assert!(!more);
        let keys: Vec<Vec<u8>> = page.into_iter().map(|m| m.key).collect();
        assert_eq!(keys, vec![key_bytes(&Value::Int(7))]);
        counting.hooks().0.load(AtomicOrdering::Relaxed)
    };
    let d_alone = Access::Index {
        slot: Slot::Attr(D),
        interval: (walks[0].1, walks[0].1),
        walk: Walk::Unordered,
    };
    assert_eq!(loads(&d_alone), in_region);
    let both = loads(&access);
    assert!(
        in_region > 2 * EQUALITY_SWITCH,
        "{in_region} objects in the region"
    );
    assert!(both <= EQUALITY_SWITCH + 1, "{both} loads");
}

/// The choices that make searches cheap: equality uses its index, a range
/// inside the region's cell uses its index, a sorted search with a limit
/// walks its attribute in order, and a check no value meets reads nothing.
#[test]
fn access_choices() {
    let config = config();
    let space = &config.spaces[0];
    let key_region = space.subspaces[0].regions[0].id;
    let cell = place_of(space, key_region);
    let eq_a = Check::new(A, PredOp::Eq(Value::Int(3)));
    match choose_access(&space.desc, &cell, std::slice::from_ref(&eq_a), None, None) {
        Access::Index {
            slot: Slot::Attr(A),
            interval: (lo, hi),
            walk: Walk::Unordered,
        } => assert_eq!(lo, hi),
        other => panic!("equality on a: {other:?}"),
    }
    // An equality on the key reads its one object, even beside an indexed
    // equality; a float operand on the int key is not the stored key.
    let on_key = Check::new(0, PredOp::Eq(Value::Int(7)));
    assert_eq!(
        choose_access(&space.desc, &cell, &[eq_a.clone(), on_key], None, None),
        Access::Key(key_bytes(&Value::Int(7)))
    );
    let float_key = Check::new(0, PredOp::Eq(Value::Float(7.0)));
    assert!(!matches!(
        choose_access(&space.desc, &cell, &[float_key], None, None),
        Access::Key(_)
    ));
    let e_only = Check::new(E, PredOp::Eq(Value::Int(1)));
    assert_eq!(
        choose_access(&space.desc, &cell, &[e_only], None, None),
        Access::Scan
    );
    let range = Check::new(A, PredOp::Ge(Value::Int(2)));
    let sort = SortBy {
        attr: A,
        descending: false,
    };
    assert!(matches!(
        choose_access(
            &space.desc,
            &cell,
            std::slice::from_ref(&range),
            Some(sort),
            Some(10)
        ),
        Access::Index {
            slot: Slot::Attr(A),
            walk: Walk::Ascending,
            ..
        }
    ));
    assert!(matches!(
        choose_access(&space.desc, &cell, &[range], None, None),
        Access::Index {
            slot: Slot::Attr(A),
            walk: Walk::Unordered,
            ..
        }
    ));
    let never = Check::new(A, PredOp::Eq(Value::str("x")));
    assert_eq!(
        choose_access(&space.desc, &cell, &[never], None, None),
        Access::Nothing
    );
    // In a region of the `a` subspace, a range covering the region's whole
    // cell narrows nothing there.
    let a_layout = &space.subspaces[1];
    let a_region = a_layout.regions[a_layout.regions.len() - 1].id;
    let cell = place_of(space, a_region);
    let everything_above = Check::new(A, PredOp::Ge(Value::Int(-10)));
    assert_eq!(
        choose_access(&space.desc, &cell, &[everything_above], None, None),
        Access::Scan
    );
    // A region of the `c, d` subspace indexes c, d and t, not a.
    let cd_region = space.subspaces[2].regions[0].id;
    let place = place_of(space, cd_region);
    let eq_a = Check::new(A, PredOp::Eq(Value::Int(3)));
    assert_eq!(
        choose_access(&space.desc, &place, &[eq_a], None, None),
        Access::Scan
    );
    let eq_t = Check::new(T, PredOp::Eq(Value::Timestamp(2)));
    assert!(matches!(
        choose_access(&space.desc, &place, &[eq_t], None, None),
        Access::Index {
            slot: Slot::Attr(T),
            ..
        }
    ));
}
