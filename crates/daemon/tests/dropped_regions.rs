//! What a daemon deletes from disk when regions leave the configuration,
//! driven directly: a new epoch drops the regions the previous one named
//! and it does not, and nothing else (listing what the disk holds seeks
//! past the deletions of every region dropped before, so it is done once,
//! at start); a start drops whatever no configuration names.

mod common;

use common::{one_region, start, REGION};
use std::sync::Arc;
use tessera_daemon::index::IndexedEngine;
use tessera_storage::{Engine, MemoryEngine, Write};
use tessera_types::parse::parse_space;
use tessera_types::{Configuration, Epoch, RegionId};

/// A region no configuration ever named: what a daemon finds on disk when
/// its space was removed while it was down.
const STRAY: RegionId = RegionId(99);

fn config() -> Configuration {
    let desc =
        parse_space("space s key int k attributes int b create 1 partition tolerate 0 failures")
            .expect("valid");
    one_region(desc, Vec::new())
}

fn put(engine: &dyn Engine, region: RegionId, key: &[u8]) {
    engine
        .apply(vec![Write::Put {
            region,
            key: key.to_vec(),
            value: b"v".to_vec(),
        }])
        .unwrap();
}

#[test]
fn an_epoch_drops_the_regions_it_removes_and_a_start_drops_every_stray_one() {
    let disk = Arc::new(MemoryEngine::new());
    let config = config();
    put(&*disk, STRAY, b"before");
    let engine = Arc::new(IndexedEngine::open(disk.clone(), &config).unwrap());
    let node = start(&config, engine.clone());
    assert_eq!(
        disk.regions().unwrap(),
        Vec::<RegionId>::new(),
        "a start drops what no configuration names"
    );

    put(&*disk, REGION, b"k1");
    put(&*disk, REGION, b"k2");
    // Data of a region no configuration names, written after the start.
    put(&*disk, STRAY, b"after");
    assert_eq!(disk.regions().unwrap(), vec![REGION, STRAY]);

    // An epoch that removes nothing deletes nothing.
    let same = Configuration {
        epoch: Epoch(6),
        ..config.clone()
    };
    assert!(node.on_config(Arc::new(same.clone()), &mut |_| {}));
    assert_eq!(disk.regions().unwrap(), vec![REGION, STRAY]);

    // The space is removed: its region goes, the stray one is not looked
    // for.
    let removed = Configuration {
        epoch: Epoch(7),
        spaces: Vec::new(),
        ..same
    };
    assert!(node.on_config(Arc::new(removed.clone()), &mut |_| {}));
    assert_eq!(disk.regions().unwrap(), vec![STRAY]);
    let mut left = 0;
    disk.scan(REGION, None, &mut |_, _| {
        left += 1;
        true
    })
    .unwrap();
    assert_eq!(left, 0, "every object of the removed region deleted");

    // The next start finds it.
    let engine = Arc::new(IndexedEngine::open(disk.clone(), &removed).unwrap());
    let _restarted = start(&removed, engine);
    assert_eq!(disk.regions().unwrap(), Vec::<RegionId>::new());
}
