//! A daemon spreads its regions' sweeps and tombstone collections over
//! their window instead of starting them all at one tick: all at once,
//! they ran together on the blocking threads and the daemon answered
//! nothing else for up to half a second every 10 s.

mod common;

use common::{one_region, start, ME};
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{Job, Output, COLLECT_TICKS, SWEEP_TICKS};
use tessera_protocol::CoordRequest;
use tessera_storage::MemoryEngine;
use tessera_types::{parse_space, Region, RegionId};

#[test]
fn sweeps_and_collections_are_spread_over_their_window() {
    // 100 key regions, all held by this daemon alone (so it heads them).
    let regions = 100u64;
    let mut config = one_region(parse_space("space s key k attributes a").unwrap(), vec![]);
    let key = &mut config.spaces[0].subspaces[0];
    key.splits = vec![(1..regions).map(|i| i * (u64::MAX / regions)).collect()];
    key.regions = (1..=regions)
        .map(|i| Region {
            id: RegionId(i),
            chain: vec![ME],
        })
        .collect();
    let engine = Arc::new(IndexedEngine::open(Arc::new(MemoryEngine::new()), &config).unwrap());
    let node = start(&config, engine);
    assert_eq!(SWEEP_TICKS, COLLECT_TICKS, "one window for both below");
    let windows = 3;
    let mut swept: BTreeMap<RegionId, u64> = BTreeMap::new();
    let mut collected: BTreeMap<RegionId, u64> = BTreeMap::new();
    let mut reports = 0;
    let (mut busiest_sweeps, mut busiest_collects) = (0, 0);
    for _ in 0..windows * SWEEP_TICKS {
        let (mut sweeps, mut collects) = (0, 0);
        node.on_tick(&mut |o| match o {
            Output::Job(Job::Sweep { region, .. }) => {
                *swept.entry(region).or_default() += 1;
                sweeps += 1;
            }
            Output::Job(Job::Collect { region }) => {
                *collected.entry(region).or_default() += 1;
                collects += 1;
            }
            Output::Coord(CoordRequest::CollectReport { .. }) => reports += 1,
            _ => {}
        });
        busiest_sweeps = busiest_sweeps.max(sweeps);
        busiest_collects = busiest_collects.max(collects);
    }
    // Every region once per window, for both kinds of job.
    for (name, counts) in [("swept", &swept), ("collected", &collected)] {
        assert_eq!(counts.len() as u64, regions, "every region {name}");
        assert!(
            counts.values().all(|&n| n == windows),
            "each region {name} once per window: {counts:?}"
        );
    }
    assert_eq!(reports, windows, "one collection report per window");
    // 100 regions over 40 ticks: 3 at a tick at best; the hash of the ids
    // may put one more on a tick, not a pile (all 100 at one tick before).
    let bound = regions.div_ceil(SWEEP_TICKS) + 1;
    for (kind, busiest) in [
        ("sweeps", busiest_sweeps),
        ("collections", busiest_collects),
    ] {
        assert!(
            busiest <= bound,
            "{busiest} {kind} started at one tick (at most {bound})"
        );
    }
}
