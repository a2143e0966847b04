//! The daemon's part in building a new layout part (a subspace or a local
//! index) while the cluster serves: resumable, rate-limited walks of the
//! regions this daemon holds, and reports to the coordinator.
//!
//! Two kinds of walk, each with a cursor on disk (a meta record per walk,
//! so a kill -9 resumes where the last tick stopped):
//!
//! - **keys** (a building subspace or global index, at the point leader of each key
//!   region): every object of the region is sent down its chain again at
//!   the version it has ([`ReplicaCore::backfill_key`]), in key order,
//!   under the key's normal ordering; only regions that lack that version
//!   store it, and no object gets a new version. A key with an update under
//!   way stops the walk until it is idle: that update may have been drawn
//!   before the subspace existed. The walk is done when the cursor reached
//!   the end and no update of the region is under way, so every rewrite it
//!   started has committed on every replica.
//! - **entries** (every region that must index the part's attributes, at
//!   every replica and transfer target): the region's objects get their
//!   index entries written ([`IndexedEngine::index_batch`]). Writes made
//!   meanwhile index themselves: the engine learned the new attributes
//!   when the configuration was installed, before any such write.
//!
//! Rate: [`BACKFILL_KEYS_PER_TICK`] rewrites and [`BACKFILL_ENTRIES_PER_TICK`]
//! indexed objects per tick (250 ms) per daemon, shared by every walk.
//! Every second the daemon reports what it has finished
//! (`CoordRequest::BackfillReport`); the coordinator marks the part ready
//! once every region of the current configuration is covered.
//!
//! [`ReplicaCore::backfill_key`]: crate::core::ReplicaCore::backfill_key
//! [`IndexedEngine::index_batch`]: crate::index::IndexedEngine::index_batch

use super::{lock, shard_of, DaemonNode, Out, Output};
use crate::core::BackfillStep;
use std::sync::atomic::Ordering;
use tessera_protocol::CoordRequest;
use tessera_types::{PartId, PartState, RegionId, Space, SpaceId};

/// Objects rewritten through the chain per tick per daemon (about 1,000
/// per second): each rewrite is an update through every subspace's
/// chain, so this keeps the backfill to a small share of what a daemon
/// serves (the figures in docs/BENCHMARKS.md) and its queues short.
pub const BACKFILL_KEYS_PER_TICK: usize = 256;

/// Objects whose index entries are written per tick per daemon: a local
/// batch write with no network hop, so larger.
pub const BACKFILL_ENTRIES_PER_TICK: usize = 2048;

/// Reports go out every this many ticks (one second).
const REPORT_TICKS: u64 = 4;

/// A cursor as stored: in progress after a key, or finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// Nothing done yet, or every key up to and including this one.
    After(Option<Vec<u8>>),
    /// The walk reached the end of the region.
    Finished,
}

impl Cursor {
    /// The stored form: `0` then the last key, or `1`.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Cursor::After(None) => vec![0],
            Cursor::After(Some(key)) => {
                let mut out = Vec::with_capacity(key.len() + 1);
                out.push(0);
                out.extend_from_slice(key);
                out
            }
            Cursor::Finished => vec![1],
        }
    }

    /// Reads a stored cursor; anything unreadable starts the walk over
    /// (a walk done twice is only slower).
    pub fn decode(bytes: Option<&[u8]>) -> Cursor {
        match bytes {
            Some([1]) => Cursor::Finished,
            Some([0]) | None => Cursor::After(None),
            Some([0, key @ ..]) => Cursor::After(Some(key.to_vec())),
            Some(_) => Cursor::After(None),
        }
    }
}

/// The meta record holding one walk's cursor.
pub fn cursor_name(walk: &str, space: SpaceId, part: PartId, region: RegionId) -> String {
    format!("backfill/{walk}/{}/{}/{}", space.0, part.0, region.0)
}

/// A tick's allowance, spent by the walks in turn.
struct Budget {
    keys: usize,
    entries: usize,
}

impl DaemonNode {
    /// One tick of every backfill this daemon has a share in.
    pub(super) fn backfill_tick(&self, tick: u64, out: Out<'_>) {
        // The entries of a dropped index go first, at the same rate.
        if let Err(e) = self.engine.purge_batch(BACKFILL_ENTRIES_PER_TICK) {
            return self.poison("deleting a dropped index's entries", &e, out);
        }
        let config = self.config();
        let mut budget = Budget {
            keys: BACKFILL_KEYS_PER_TICK,
            entries: BACKFILL_ENTRIES_PER_TICK,
        };
        for space in &config.spaces {
            for part in space.parts() {
                if !matches!(part.state, PartState::Building { .. }) {
                    continue;
                }
                let mut keys_done = Vec::new();
                // A global index, a replex and a hybrid fill like a
                // subspace: their regions are on the objects' chains.
                if part.kind.built_by_key_walk() {
                    for region in space.subspaces.first().map_or(&[][..], |l| &l.regions) {
                        // A key region being refreshed waits: its restarted
                        // point leader may lack updates the other parts
                        // hold, and a backfill it started would stand for
                        // an update it knows of, so the refresh would not
                        // learn the ones it forgot (simulator seed
                        // 151003666, a replex being built).
                        if region.chain.first() != Some(&self.me) || config.rebuilding(region.id) {
                            continue;
                        }
                        match self.walk_keys(space, part.id, region.id, &mut budget, out) {
                            Some(true) => keys_done.push(region.id),
                            Some(false) => {}
                            None => return,
                        }
                    }
                }
                let mut entries_done = Vec::new();
                for (_, region) in space.entry_regions(part.id) {
                    let receiving = config
                        .transfers
                        .iter()
                        .any(|t| t.region == region.id && t.to == self.me);
                    if !region.chain.contains(&self.me) && !receiving {
                        continue;
                    }
                    match self.walk_entries(space.id, part.id, region.id, &mut budget, out) {
                        Some(true) => entries_done.push(region.id),
                        Some(false) => {}
                        None => return,
                    }
                }
                let due = tick.is_multiple_of(REPORT_TICKS);
                if due && !(keys_done.is_empty() && entries_done.is_empty()) {
                    out(Output::Coord(CoordRequest::BackfillReport {
                        daemon: self.me,
                        space: space.id,
                        part: part.id,
                        keys_done,
                        entries_done,
                    }));
                }
            }
        }
    }

    fn load_cursor(&self, name: &str, out: Out<'_>) -> Option<Cursor> {
        match self.engine().meta_get(name) {
            Ok(bytes) => Some(Cursor::decode(bytes.as_deref())),
            Err(e) => {
                self.poison("reading a backfill cursor", &e, out);
                None
            }
        }
    }

    fn save_cursor(&self, name: &str, cursor: &Cursor, out: Out<'_>) -> Option<()> {
        match self.engine().meta_put(name, &cursor.encode()) {
            Ok(()) => Some(()),
            Err(e) => {
                self.poison("saving a backfill cursor", &e, out);
                None
            }
        }
    }

    /// Walks key region `region` for subspace `part`: `Some(true)` once
    /// finished and settled, `None` when the node poisoned itself.
    ///
    /// The walk runs ahead in memory; the cursor on disk moves up to it
    /// only when no update of the region is under way, so every rewrite
    /// before the stored cursor has committed on every replica. A crash,
    /// or losing the lead, loses only rewrites after it: the walk resumes
    /// from the stored cursor and does them again.
    fn walk_keys(
        &self,
        space: &Space,
        part: PartId,
        region: RegionId,
        budget: &mut Budget,
        out: Out<'_>,
    ) -> Option<bool> {
        let name = cursor_name("keys", space.id, part, region);
        let stored = self.load_cursor(&name, out)?;
        if stored == Cursor::Finished {
            return Some(true);
        }
        // Outside a replex space nothing is rebuilt, so nothing stale can
        // wait in a building region (see `note_witnessed`).
        let witnessed =
            space.desc.replex.is_none() || lock(&self.witnessed).contains(&(part, region));
        let ahead = lock(&self.walks).get(&name).cloned();
        // A walk this process did not begin itself, under a leader that
        // did not see the part begin, starts over: the keys before the
        // stored cursor were sent without clearing, and the revisits noted
        // for them are gone.
        let position = match ahead {
            Some(ahead) => ahead,
            None if !witnessed => Cursor::After(None),
            None => stored,
        };
        let mut last = match position {
            Cursor::After(after) => after,
            Cursor::Finished => {
                // Every key was sent; done once the keys whose updates were
                // drawn before the subspace existed are sent again and
                // everything has committed.
                if !self.revisit(space.id, region, budget, out) || !self.region_idle(region) {
                    return Some(false);
                }
                self.save_cursor(&name, &Cursor::Finished, out)?;
                lock(&self.walks).remove(&name);
                return Some(true);
            }
        };
        let wanted = budget.keys;
        let mut keys = Vec::with_capacity(wanted);
        if wanted > 0 {
            let scanned = self.engine().scan(region, last.as_deref(), &mut |key, _| {
                keys.push(key.to_vec());
                keys.len() < wanted
            });
            if let Err(e) = scanned {
                self.poison("a backfill walk", &e, out);
                return None;
            }
        }
        let reached_end = wanted > 0 && keys.len() < wanted;
        let mut stopped = false;
        for key in keys {
            let step = {
                let mut core = lock(&self.shards[shard_of(&key)]);
                let step = core.backfill_key(space.id, region, &key, !witnessed);
                let effects = core.drain_effects();
                drop(core);
                self.core_effects(effects, out);
                step
            };
            budget.keys -= 1;
            if step == BackfillStep::Busy {
                stopped = true;
                break;
            }
            self.stats.backfill_keys.fetch_add(1, Ordering::Relaxed);
            last = Some(key);
        }
        let position = if reached_end && !stopped {
            Cursor::Finished
        } else {
            Cursor::After(last)
        };
        lock(&self.walks).insert(name.clone(), position.clone());
        let revisited = position != Cursor::Finished || self.revisit(space.id, region, budget, out);
        if revisited && self.region_idle(region) {
            self.save_cursor(&name, &position, out)?;
            if position == Cursor::Finished {
                lock(&self.walks).remove(&name);
                return Some(true);
            }
        }
        Some(false)
    }

    /// Sends again the keys of `region` that had an update under way when
    /// this daemon installed a configuration with a building subspace
    /// (see [`DaemonNode::note_revisits`]); true once none is left.
    fn revisit(&self, space: SpaceId, region: RegionId, budget: &mut Budget, out: Out<'_>) -> bool {
        let keys: Vec<Vec<u8>> = lock(&self.revisits)
            .get(&region)
            .map(|keys| keys.iter().take(budget.keys).cloned().collect())
            .unwrap_or_default();
        for key in keys {
            let step = {
                let mut core = lock(&self.shards[shard_of(&key)]);
                let step = core.backfill_key(space, region, &key, true);
                let effects = core.drain_effects();
                drop(core);
                self.core_effects(effects, out);
                step
            };
            budget.keys = budget.keys.saturating_sub(1);
            if step == BackfillStep::Done {
                if let Some(keys) = lock(&self.revisits).get_mut(&region) {
                    keys.remove(&key);
                }
            }
        }
        let mut revisits = lock(&self.revisits);
        let left = revisits.get(&region).is_some_and(|keys| !keys.is_empty());
        if !left {
            revisits.remove(&region);
        }
        !left
    }

    /// The key regions whose updates under way must be sent again under
    /// `config` (see [`DaemonNode::note_revisits`]): those this daemon
    /// leads in a space with a building subspace.
    pub(super) fn revisit_regions(&self, config: &tessera_types::Configuration) -> Vec<RegionId> {
        config
            .spaces
            .iter()
            .filter(|space| {
                space
                    .subspaces
                    .iter()
                    .any(|l| matches!(l.state, PartState::Building { .. }))
            })
            .filter_map(|space| space.subspaces.first())
            .flat_map(|key_subspace| key_subspace.regions.iter())
            .filter(|region| region.chain.first() == Some(&self.me))
            .map(|region| region.id)
            .collect()
    }

    /// An update under way at a point leader may have been drawn before a
    /// subspace now building existed, so its chain does not reach it, and
    /// the walk may already have passed its key (a new key is absent from
    /// the walk's scan). The node notes every such key (taken from each
    /// core just before it installs the configuration, so none commits
    /// unseen); the walk sends them again before it counts as done.
    pub(super) fn note_revisits(&self, region: RegionId, keys: Vec<Vec<u8>>) {
        if !keys.is_empty() {
            lock(&self.revisits).entry(region).or_default().extend(keys);
        }
    }

    /// Notes the parts whose building begins with `new` in key regions
    /// this daemon led under `old` and leads under `new`: it has seen every
    /// update of those regions under way when the part appeared, so its
    /// revisits are complete. A walk of any other pair — a daemon that
    /// restarted, or that took a region over while the part was building —
    /// cannot know which of its keys had an update drawn without the part,
    /// so in a replex space every key it sends clears the building parts'
    /// other regions ([`crate::chain::revisit_hops`]): one of them may hold
    /// an older version a rebuild copied there meanwhile (simulator seed
    /// 160002240: the revisits died with the old leader).
    pub(super) fn note_witnessed(
        &self,
        old: &tessera_types::Configuration,
        new: &tessera_types::Configuration,
    ) {
        for space in &new.spaces {
            let building = space.parts().into_iter().filter(|p| {
                matches!(p.state, PartState::Building { .. })
                    && old
                        .space_by_id(space.id)
                        .is_none_or(|s| s.part_state(p.id).is_none())
            });
            let began: Vec<PartId> = building.map(|p| p.id).collect();
            if began.is_empty() {
                continue;
            }
            // Key regions this daemon leads now and led before.
            let led_before: std::collections::HashSet<RegionId> = old
                .space_by_id(space.id)
                .and_then(|s| s.subspaces.first())
                .map(|key| {
                    key.regions
                        .iter()
                        .filter(|r| r.chain.first() == Some(&self.me))
                        .map(|r| r.id)
                        .collect()
                })
                .unwrap_or_default();
            let mut witnessed = lock(&self.witnessed);
            for region in space.subspaces.first().map_or(&[][..], |k| &k.regions) {
                if region.chain.first() == Some(&self.me) && led_before.contains(&region.id) {
                    witnessed.extend(began.iter().map(|&part| (part, region.id)));
                }
            }
        }
    }

    /// Forgets the in-memory walks of key regions this daemon no longer
    /// leads: what they sent ahead of the stored cursor may be lost, so a
    /// later walk starts from the stored cursor.
    pub(super) fn forget_walks_not_led(&self) {
        let config = self.config();
        let led: std::collections::HashSet<RegionId> = config
            .spaces
            .iter()
            .filter_map(|s| s.subspaces.first())
            .flat_map(|l| l.regions.iter())
            .filter(|r| r.chain.first() == Some(&self.me))
            .map(|r| r.id)
            .collect();
        lock(&self.walks).retain(|name, _| {
            name.rsplit('/')
                .next()
                .and_then(|r| r.parse().ok())
                .is_some_and(|r| led.contains(&RegionId(r)))
        });
    }

    /// As the target of a transfer of `region`, before it says it has
    /// everything (or of a refresh, before it serves): finishes at once
    /// the entries walk of every part the region indexes that this daemon
    /// has not finished for `region`; `None` when the node poisoned
    /// itself.
    ///
    /// A daemon that held the region, left its chain, and comes back
    /// keeps every object the source finds current (only what changed is
    /// sent again). If a part was built while it was away, those objects
    /// were never indexed for it here, and once the part is ready a
    /// search walking its entries at this daemon would miss them
    /// (simulator seed 11470: a local index added while a daemon was cut
    /// off; a sorted search at that daemon, its new tail, skipped a key).
    /// The transfer's prune has just read the whole region; this reads it
    /// again only for such a part.
    pub(super) fn index_received(&self, region: RegionId, out: Out<'_>) -> Option<()> {
        let config = self.config();
        let Some((space, _, _)) = config.region(region) else {
            return Some(());
        };
        for part in space.parts() {
            if !matches!(part.state, PartState::Building { .. } | PartState::Ready)
                || !space
                    .entry_regions(part.id)
                    .iter()
                    .any(|(_, r)| r.id == region)
            {
                continue;
            }
            // The backfill's own walk, run to its end at once.
            loop {
                let mut budget = Budget {
                    keys: 0,
                    entries: BACKFILL_ENTRIES_PER_TICK,
                };
                if self.walk_entries(space.id, part.id, region, &mut budget, out)? {
                    break;
                }
            }
        }
        Some(())
    }

    /// Writes the index entries of region `region` for part `part`:
    /// `Some(true)` once finished, `None` when the node poisoned itself.
    fn walk_entries(
        &self,
        space: SpaceId,
        part: PartId,
        region: RegionId,
        budget: &mut Budget,
        out: Out<'_>,
    ) -> Option<bool> {
        let name = cursor_name("entries", space, part, region);
        let after = match self.load_cursor(&name, out)? {
            Cursor::Finished => return Some(true),
            Cursor::After(after) => after,
        };
        if budget.entries == 0 {
            return Some(false);
        }
        let (last, seen) = match self
            .engine
            .index_batch(region, after.as_deref(), budget.entries)
        {
            Ok(batch) => batch,
            Err(e) => {
                self.poison("a backfill of index entries", &e, out);
                return None;
            }
        };
        let cursor = if seen < budget.entries {
            Cursor::Finished
        } else {
            Cursor::After(last.or(after))
        };
        budget.entries -= seen;
        self.stats
            .backfill_entries
            .fetch_add(seen as u64, Ordering::Relaxed);
        self.save_cursor(&name, &cursor, out)?;
        Some(cursor == Cursor::Finished)
    }

    /// Whether no update of key region `region` is under way here.
    fn region_idle(&self, region: RegionId) -> bool {
        self.shards
            .iter()
            .all(|shard| lock(shard).region_idle(region))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_starts_over() {
        for cursor in [
            Cursor::After(None),
            Cursor::After(Some(b"k".to_vec())),
            Cursor::After(Some(vec![1])),
            Cursor::Finished,
        ] {
            assert_eq!(Cursor::decode(Some(&cursor.encode())), cursor);
        }
        assert_eq!(Cursor::decode(None), Cursor::After(None));
        assert_eq!(Cursor::decode(Some(&[7, 1])), Cursor::After(None));
        assert_eq!(Cursor::decode(Some(&[])), Cursor::After(None));
    }
}
