//! The daemon's backfill of a new local index, driven directly: it writes
//! the entries of every stored object, a bounded number per tick, keeps
//! its cursor on disk so that a restarted daemon resumes from it, and
//! reports a region once it is finished.

mod common;

use common::{one_region, tick, REGION};
use std::sync::Arc;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::backfill::{cursor_name, Cursor, BACKFILL_ENTRIES_PER_TICK};
use tessera_daemon::node::DaemonNode;
use tessera_daemon::record::Record;
use tessera_storage::{Engine, IndexRange, MemoryEngine, Write};
use tessera_types::parse::parse_space;
use tessera_types::{
    Configuration, Epoch, IndexPart, Object, PartId, PartState, Region, RegionId, SpaceId,
    SubspaceLayout, Value, Version,
};

const INDEX: PartId = PartId(1);
/// Enough objects for a walk of three ticks.
const OBJECTS: i64 = (BACKFILL_ENTRIES_PER_TICK * 2 + 100) as i64;

/// One daemon holding the one region of a space whose index on `b` is
/// building.
fn config() -> Configuration {
    let mut desc =
        parse_space("space s key int k attributes int b create 1 partition tolerate 0 failures")
            .expect("valid");
    desc.indexes.push(1);
    let index = IndexPart {
        id: INDEX,
        attr: 1,
        path: None,
        state: PartState::Building { progress: 0 },
    };
    one_region(desc, vec![index])
}

/// The objects, stored before the index existed (no entries).
fn disk() -> Arc<MemoryEngine> {
    disk_of(OBJECTS)
}

/// `objects` objects `k → (k, k % 7)` in [`REGION`], at version 1.
fn disk_of(objects: i64) -> Arc<MemoryEngine> {
    let disk = Arc::new(MemoryEngine::new());
    let writes = (0..objects)
        .map(|k| Write::Put {
            region: REGION,
            key: tessera_types::key_bytes(&Value::Int(k)),
            value: Record {
                version: Version(1),
                object: Some(Object {
                    values: vec![Value::Int(k), Value::Int(k % 7)],
                }),
                recent: Vec::new(),
            }
            .encode(),
        })
        .collect();
    disk.apply(writes).expect("memory");
    // Written by a daemon that knew indexes (else opening the engine would
    // index everything at once), only not this one yet.
    disk.meta_put("index_format", b"2").expect("memory");
    disk
}

fn start(disk: &Arc<MemoryEngine>) -> DaemonNode {
    let config = config();
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    start_with(config, engine)
}

fn start_with(config: Configuration, engine: IndexedEngine) -> DaemonNode {
    common::start(&config, Arc::new(engine))
}

fn cursor(disk: &MemoryEngine) -> Cursor {
    let name = cursor_name("entries", SpaceId(1), INDEX, REGION);
    Cursor::decode(disk.meta_get(&name).expect("memory").as_deref())
}

fn entries(disk: &MemoryEngine) -> usize {
    let mut count = 0;
    let range = IndexRange {
        start: &[],
        end: None,
        reverse: false,
    };
    disk.index_scan(REGION, range, &mut |_| {
        count += 1;
        true
    })
    .expect("memory");
    count
}

#[test]
fn the_walk_is_bounded_per_tick_resumes_after_a_restart_and_reports_when_finished() {
    let disk = disk();
    assert_eq!(entries(&disk), 0);
    let node = start(&disk);
    assert!(tick(&node).is_empty());
    let first = BACKFILL_ENTRIES_PER_TICK;
    assert_eq!(entries(&disk), first, "one tick's worth, no more");
    let expected = |n: usize| {
        let mut keys: Vec<Vec<u8>> = (0..OBJECTS)
            .map(|k| tessera_types::key_bytes(&Value::Int(k)))
            .collect();
        keys.sort();
        Cursor::After(Some(keys[n - 1].clone()))
    };
    assert_eq!(cursor(&disk), expected(first));

    // A kill -9: the node goes, its disk stays. The new one resumes at
    // the cursor instead of starting over.
    drop(node);
    let node = start(&disk);
    tick(&node);
    assert_eq!(entries(&disk), 2 * first);
    assert_eq!(cursor(&disk), expected(2 * first));

    // The last objects, then a report (reports go out every 4 ticks).
    let mut reported = Vec::new();
    for _ in 0..4 {
        reported.extend(tick(&node));
    }
    assert_eq!(cursor(&disk), Cursor::Finished);
    assert_eq!(entries(&disk), OBJECTS as usize, "one entry per object");
    assert_eq!(reported, vec![REGION]);
}

#[test]
fn a_dropped_index_loses_its_entries_a_batch_per_tick() {
    let disk = disk();
    let mut config = config();
    config.spaces[0].indexes[0].state = PartState::Ready;
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    engine.rebuild_region(REGION).expect("index everything");
    assert_eq!(entries(&disk), OBJECTS as usize);
    let node = start_with(config.clone(), engine);
    // The coordinator removed the dropping index: the next epoch names it
    // no more.
    config.epoch = Epoch(6);
    config.spaces[0].indexes.clear();
    config.spaces[0].desc.indexes.clear();
    assert!(node.on_config(Arc::new(config), &mut |_| {}));
    tick(&node);
    assert_eq!(
        entries(&disk),
        OBJECTS as usize - BACKFILL_ENTRIES_PER_TICK,
        "one batch per tick"
    );
    for _ in 0..2 {
        tick(&node);
    }
    assert_eq!(entries(&disk), 0);
}

/// A restart in the middle of deleting a dropped index's entries forgets
/// nothing: the engine opened under the configuration without the index
/// finds the rest on disk and the purge carries on.
#[test]
fn a_restart_during_the_purge_of_a_dropped_index_finishes_it() {
    let disk = disk();
    let mut config = config();
    config.spaces[0].indexes[0].state = PartState::Ready;
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    engine.rebuild_region(REGION).expect("index everything");
    let node = start_with(config.clone(), engine);
    config.epoch = Epoch(6);
    config.spaces[0].indexes.clear();
    config.spaces[0].desc.indexes.clear();
    assert!(node.on_config(Arc::new(config.clone()), &mut |_| {}));
    tick(&node);
    let left = OBJECTS as usize - BACKFILL_ENTRIES_PER_TICK;
    assert_eq!(entries(&disk), left);

    // kill -9, then a start under the configuration that no longer
    // indexes `b`.
    drop(node);
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    assert_eq!(entries(&disk), left, "opening deletes nothing by itself");
    let node = start_with(config, engine);
    for _ in 0..2 {
        tick(&node);
    }
    assert_eq!(entries(&disk), 0, "the purge resumed after the restart");
}

/// Opening under a configuration that still indexes an attribute leaves
/// its entries alone.
#[test]
fn opening_keeps_the_entries_of_indexed_attributes() {
    let disk = disk();
    let mut config = config();
    config.spaces[0].indexes[0].state = PartState::Ready;
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    engine.rebuild_region(REGION).expect("index everything");
    drop(engine);
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    assert_eq!(engine.purge_batch(usize::MAX).expect("memory"), 0);
    assert_eq!(entries(&disk), OBJECTS as usize);
}

/// The key walk of a building subspace, at its point leader: a bounded
/// number of keys per tick, each sent down the chain at the version it
/// already has, and a kill -9 resumes from the cursor on disk instead of
/// sending the region again from the start.
#[test]
fn the_key_walk_resumes_from_its_cursor_and_writes_no_new_version() {
    use tessera_daemon::node::backfill::BACKFILL_KEYS_PER_TICK;
    let objects = (BACKFILL_KEYS_PER_TICK * 2 + 50) as i64;
    let building = RegionId(2);
    let mut desc =
        parse_space("space s key int k attributes int b create 1 partition tolerate 0 failures")
            .expect("valid");
    desc.subspaces.push(vec![1]);
    let mut config = common::one_region(desc, Vec::new());
    config.spaces[0].subspaces.push(SubspaceLayout {
        attrs: vec![1],
        splits: vec![vec![]],
        regions: vec![Region {
            id: building,
            chain: vec![common::ME],
        }],
        part: PartId(1),
        state: PartState::Building { progress: 0 },
        kind: Default::default(),
    });
    let disk = disk_of(objects);
    let held = |disk: &MemoryEngine| {
        let mut versions = Vec::new();
        disk.scan(building, None, &mut |_, bytes| {
            versions.push(Record::decode(bytes).expect("a record").version);
            true
        })
        .expect("memory");
        versions
    };
    let open = || {
        let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
        common::start(&config, Arc::new(engine))
    };

    let node = open();
    common::tick(&node);
    assert_eq!(
        held(&disk).len(),
        BACKFILL_KEYS_PER_TICK,
        "one tick's worth"
    );
    // kill -9: the node goes, the disk stays.
    drop(node);
    let node = open();
    common::tick(&node);
    assert_eq!(
        node.stats()
            .backfill_keys
            .load(std::sync::atomic::Ordering::Relaxed),
        BACKFILL_KEYS_PER_TICK as u64,
        "the restarted walk sends only keys after its cursor"
    );
    assert_eq!(held(&disk).len(), 2 * BACKFILL_KEYS_PER_TICK);
    for _ in 0..4 {
        common::tick(&node);
    }
    let versions = held(&disk);
    assert_eq!(versions.len(), objects as usize, "every object placed once");
    assert!(
        versions.iter().all(|v| *v == Version(1)),
        "no object got a new version"
    );
    assert_eq!(
        Cursor::decode(
            disk.meta_get(&cursor_name("keys", SpaceId(1), PartId(1), common::REGION))
                .expect("memory")
                .as_deref()
        ),
        Cursor::Finished
    );
}

/// A daemon that comes back to a region it held, as the target of a
/// transfer, keeps the objects the source finds current (the source sends
/// only what changed). An index built while it was away never indexed
/// them here: before it says it has everything, it writes their entries,
/// or a search walking the ready index at its new tail would miss them
/// (simulator seed 11470).
#[test]
fn a_transfer_target_indexes_what_it_kept_for_an_index_built_while_it_was_away() {
    use tessera_daemon::node::{Job, Output};
    use tessera_daemon::transfer::DIGEST_BUCKETS;
    use tessera_protocol::{Message, TransferMsg};
    use tessera_types::{DaemonId, DaemonInfo, DaemonState, Transfer};

    const SOURCE: DaemonId = DaemonId(2);
    const TRANSFER: u64 = 7;
    let objects = 100;
    // The stale copy: every object, no entry for the index, now ready.
    let disk = disk_of(objects);
    let mut config = config();
    config.spaces[0].indexes[0].state = PartState::Ready;
    config.spaces[0].subspaces[0].regions[0].chain = vec![SOURCE];
    config.daemons.insert(
        SOURCE,
        DaemonInfo {
            id: SOURCE,
            addr: "d2:1".into(),
            state: DaemonState::Available,
            metrics: None,
        },
    );
    config.transfers.push(Transfer {
        id: TRANSFER,
        region: REGION,
        from: SOURCE,
        to: common::ME,
        replaces: None,
    });
    let engine = IndexedEngine::open(disk.clone(), &config).expect("open");
    let node = start_with(config, engine);
    assert_eq!(entries(&disk), 0);

    // The source's scan is done and skipped every bucket: the target
    // held all of it already.
    let mut jobs = Vec::new();
    let mut collect = |o: Output| {
        if let Output::Job(job) = o {
            jobs.push(job)
        }
    };
    let progress = TransferMsg::Progress {
        transfer: TRANSFER,
        attempt: 0,
        from: SOURCE,
        region: REGION,
        sent: 0,
        scanned: true,
        skipped: vec![u64::MAX; DIGEST_BUCKETS / 64],
    };
    node.on_peer(Message::Transfer(progress.clone()), &mut collect);
    let prune = jobs
        .into_iter()
        .find(|j| matches!(j, Job::Transfer(_)))
        .expect("the target prunes before it says it has everything");
    node.run_job(prune, &mut |_| {});
    assert_eq!(
        entries(&disk),
        objects as usize,
        "one entry per kept object"
    );
    assert_eq!(cursor(&disk), Cursor::Finished);

    // Only then does it say it has everything.
    let mut sent = Vec::new();
    node.on_peer(Message::Transfer(progress), &mut |o| {
        if let Output::Send { msg, .. } = o {
            sent.push(msg)
        }
    });
    assert!(
        sent.iter()
            .any(|m| matches!(m, Message::Transfer(TransferMsg::Have { .. }))),
        "{sent:?}"
    );
}
