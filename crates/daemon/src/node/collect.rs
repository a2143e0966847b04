//! Tombstone collection at every replica of a region (see [`Job::Collect`]
//! and the coordinator's `tombstones` module for when it is safe).

use super::{lock, DaemonNode, Job, Out, Output};
use std::sync::atomic::Ordering;
use tessera_protocol::CoordRequest;
use tessera_types::{Configuration, Epoch, RegionId, Version};

/// The most records one collection round looks at in one region; the next
/// round continues after the last one.
const COLLECT_RECORDS_MAX: usize = 4096;

impl DaemonNode {
    /// A collection round is one [`Job::Collect`] per region this daemon
    /// replicates, and a report to the coordinator of the oldest epoch
    /// this daemon has in flight and of the tombstones the last round had
    /// to keep. Every `every` ticks the report, and each region's job at
    /// the tick of those `every` its id picks (`window_phase`): spread over
    /// the rounds like the sweeps (`sweep_tick`), not all at once.
    pub(super) fn collect_tick(&self, config: &Configuration, tick: u64, every: u64, out: Out<'_>) {
        if tick % every == every - 1 {
            self.collect_report(config, out);
        }
        for space in &config.spaces {
            for layout in &space.subspaces {
                for region in &layout.regions {
                    let turn = tick + super::window_phase(region.id, every);
                    if turn % every == every - 1 && region.chain.contains(&self.me) {
                        out(Output::Job(Job::Collect { region: region.id }));
                    }
                }
            }
        }
    }

    /// The round's report to the coordinator.
    fn collect_report(&self, config: &Configuration, out: Out<'_>) {
        let waiting = self.tombstones_waiting.swap(0, Ordering::AcqRel);
        // Per core, under its lock: an update it starts after this reads
        // its epoch, which is at least the core's epoch now.
        let in_flight_since = self
            .shards
            .iter()
            .map(|shard| {
                let core = lock(shard);
                let epoch = core.epoch();
                core.oldest_in_flight()
                    .map_or(epoch, |v| v.epoch().min(epoch))
            })
            .min()
            .unwrap_or(config.epoch);
        out(Output::Coord(CoordRequest::CollectReport {
            id: self.me,
            in_flight_since,
            waiting: (waiting > 0).then_some(Epoch(waiting)),
        }));
    }

    /// See [`Job::Collect`]: looks at the next records of `region`, deletes
    /// the tombstones below the horizon (each checked again under its
    /// core's lock) and notes the epochs of the others.
    pub(super) fn collect(&self, region: RegionId, out: Out<'_>) {
        if !self.engine.may_hold_tombstones(region) {
            return;
        }
        // A pass begins where a round finds no cursor, and ends with the
        // round that reaches the region's end (and leaves none).
        let mark = {
            let mut passes = lock(&self.collect_passes);
            let begins = !lock(&self.collects).contains_key(&region);
            if begins {
                passes.insert(region, (self.engine.tombstone_mark(region), false));
            }
            passes.get(&region).copied()
        };
        let floor = Version::floor(self.config().tombstone_horizon);
        let mut candidates = Vec::new();
        let mut newest_waiting = 0u64;
        let mut seen = false;
        let scanned = self.scan_round(
            &self.collects,
            region,
            COLLECT_RECORDS_MAX,
            |key, record| {
                if record.object.is_none() {
                    seen = true;
                    if record.version < floor {
                        candidates.push((key.to_vec(), record.version));
                    } else {
                        newest_waiting = newest_waiting.max(record.version.epoch().0);
                    }
                }
                true
            },
        );
        if let Err(e) = scanned {
            lock(&self.collect_passes).remove(&region);
            return self.poison("collecting tombstones", &e, out);
        }
        {
            let mut passes = lock(&self.collect_passes);
            let ended = !lock(&self.collects).contains_key(&region);
            match (ended, mark) {
                // A pass that saw no tombstone, from its first record to
                // its last: the region held none unless one came since.
                (true, Some((mark, false))) if !seen => {
                    passes.remove(&region);
                    self.engine.found_no_tombstones(region, mark);
                }
                (true, _) => {
                    passes.remove(&region);
                }
                (false, Some((mark, earlier))) => {
                    passes.insert(region, (mark, earlier || seen));
                }
                // No pass under way although a round left a cursor (two
                // rounds of the region overlapped, one slower than the
                // interval): nothing is concluded; the next pass decides.
                (false, None) => {}
            }
        }
        self.tombstones_waiting
            .fetch_max(newest_waiting, Ordering::AcqRel);
        let mut collected = 0usize;
        for (key, version) in candidates {
            self.with_core(&key, out, |core| {
                if core.collect_tombstone(region, &key, version) {
                    collected += 1;
                }
            });
        }
        if collected > 0 {
            self.stats
                .tombstones_collected
                .fetch_add(collected as u64, Ordering::Relaxed);
            tracing::info!(%region, collected, "collected tombstones below the horizon");
        }
    }

    /// Tombstones this daemon has collected since it started.
    pub fn tombstones_collected(&self) -> u64 {
        self.stats.tombstones_collected.load(Ordering::Relaxed)
    }

    /// Keys this daemon deleted as a transfer's target, since it started,
    /// because the region no longer held them.
    pub fn stale_dropped(&self) -> u64 {
        self.stats.stale_dropped.load(Ordering::Relaxed)
    }
}
