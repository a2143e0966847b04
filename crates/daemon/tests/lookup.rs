//! Lookups in a global index's indexlet (`search::lookup`), read page by
//! page with small pages, in both directions, against a brute force over
//! the projections written: every entry in the checks' range once, in
//! value order with ties in key order whichever the direction, strings
//! with zero bytes and shared prefixes included; a stale entry (its record
//! since changed) is never returned.

mod common;

use common::ME;
use proptest::prelude::*;
use std::sync::Arc;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::record::Record;
use tessera_daemon::search::{lookup, ReadView};
use tessera_protocol::{DaemonResponse, SearchAfter};
use tessera_storage::{Engine, MemoryEngine, Write};
use tessera_types::parse::parse_space;
use tessera_types::{
    key_bytes, Check, Configuration, Epoch, Object, PartId, PartState, PredOp, Region,
    RegionDirectory, RegionId, SpaceId, SubspaceKind, SubspaceLayout, Value, Version,
};

const INDEXLET: RegionId = RegionId(2);

/// Space 1 with its key region and one global index on `name`, a single
/// indexlet [`INDEXLET`], both held by [`ME`].
fn config() -> Configuration {
    let desc = parse_space(
        "space s key int k attributes string name, int n global index name create 1 partition \
         create 1 partition tolerate 0 failures",
    )
    .expect("valid");
    let mut config = common::one_region(desc, Vec::new());
    config.spaces[0].subspaces.push(SubspaceLayout {
        attrs: vec![1],
        splits: vec![vec![]],
        regions: vec![Region {
            id: INDEXLET,
            chain: vec![ME],
        }],
        part: PartId(1),
        state: PartState::Ready,
        kind: SubspaceKind::GlobalIndex,
    });
    config
}

fn projection(k: i64, name: &[u8]) -> Vec<u8> {
    Record {
        version: Version(1),
        object: Some(Object {
            values: vec![Value::Int(k), Value::String(name.to_vec()), Value::Int(0)],
        }),
        recent: Vec::new(),
    }
    .encode()
}

/// Every page of a lookup with `checks`, at most `page` entries each.
fn read_all(
    engine: &IndexedEngine,
    config: &Configuration,
    checks: &[Check],
    descending: bool,
    page: u64,
) -> Vec<(Vec<u8>, i64)> {
    let directory = RegionDirectory::new(config);
    let view = ReadView {
        config,
        directory: &directory,
        me: ME,
        engine,
    };
    let mut out = Vec::new();
    let mut after: Option<SearchAfter> = None;
    for _ in 0..10_000 {
        let answer = lookup(
            &view,
            Epoch(5),
            SpaceId(1),
            INDEXLET,
            checks,
            descending,
            after.as_ref(),
            Some(page),
        )
        .expect("a page");
        let DaemonResponse::LookupPage {
            entries,
            more,
            last,
        } = answer
        else {
            panic!("{answer:?}")
        };
        assert!(entries.len() as u64 <= page);
        assert!(!entries.is_empty() || !more || last.is_some());
        for (value, key) in entries {
            let (Value::String(name), Value::Int(k)) = (value, key) else {
                panic!("a string value and an int key")
            };
            out.push((name, k));
        }
        if !more {
            return out;
        }
        after = Some(last.expect("a position to continue from"));
    }
    panic!("the lookup never ended")
}

fn names() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), Just(0xFF)],
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn pages_hold_every_match_once_in_order(
        objects in proptest::collection::btree_map(-20i64..20, names(), 0..40),
        stale in proptest::collection::btree_set(-20i64..20, 0..5),
        lo in proptest::option::of(names()),
        hi in proptest::option::of(names()),
        page in 1u64..5,
        descending: bool,
    ) {
        let config = config();
        let disk = Arc::new(MemoryEngine::new());
        let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
        let writes = objects
            .iter()
            .map(|(k, name)| Write::Put {
                region: INDEXLET,
                key: key_bytes(&Value::Int(*k)),
                value: projection(*k, name),
            })
            .collect();
        engine.apply(writes).expect("memory");
        // Stale entries: the disk under the engine gets a record whose
        // value no longer has the entry the engine wrote.
        let stale: Vec<i64> = stale.into_iter().filter(|k| objects.contains_key(k)).collect();
        for k in &stale {
            let write = Write::Put {
                region: INDEXLET,
                key: key_bytes(&Value::Int(*k)),
                value: projection(*k, b"\xFF\xFFmoved"),
            };
            disk.apply(vec![write]).expect("memory");
        }
        let mut checks = Vec::new();
        if let Some(lo) = &lo {
            checks.push(Check::new(1, PredOp::Ge(Value::String(lo.clone()))));
        }
        if let Some(hi) = &hi {
            checks.push(Check::new(1, PredOp::Lt(Value::String(hi.clone()))));
        }
        let mut expected: Vec<(Vec<u8>, i64)> = objects
            .iter()
            .filter(|(k, _)| !stale.contains(k))
            .filter(|(_, name)| lo.as_ref().is_none_or(|lo| *name >= lo))
            .filter(|(_, name)| hi.as_ref().is_none_or(|hi| *name < hi))
            .map(|(k, name)| (name.clone(), *k))
            .collect();
        // Value order, then key order (of the keys' bytes) in both directions.
        expected.sort_by(|a, b| {
            let by_value = if descending { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) };
            by_value.then_with(|| key_bytes(&Value::Int(a.1)).cmp(&key_bytes(&Value::Int(b.1))))
        });
        prop_assert_eq!(read_all(&engine, &config, &checks, descending, page), expected);
    }
}

/// Entries whose projections are large fill a page by bytes before its
/// count: the page ends at the last entry it holds, and the next one
/// continues from there, so no entry is skipped.
#[test]
fn pages_cut_by_size_lose_no_entry() {
    let config = config();
    let engine = IndexedEngine::open(Arc::new(MemoryEngine::new()), &config).expect("open");
    let big = tessera_daemon::search::PAGE_BYTES_MAX / 3 + 1;
    let objects: Vec<(i64, Vec<u8>)> = (0..10)
        .map(|k| {
            let mut name = vec![b'a' + k as u8];
            name.resize(big, b'x');
            (k, name)
        })
        .collect();
    let writes = objects
        .iter()
        .map(|(k, name)| Write::Put {
            region: INDEXLET,
            key: key_bytes(&Value::Int(*k)),
            value: projection(*k, name),
        })
        .collect();
    engine.apply(writes).expect("memory");
    let expected: Vec<(Vec<u8>, i64)> = objects.iter().map(|(k, n)| (n.clone(), *k)).collect();
    for descending in [false, true] {
        let mut want = expected.clone();
        if descending {
            want.reverse();
        }
        assert_eq!(read_all(&engine, &config, &[], descending, 100), want);
    }
}
