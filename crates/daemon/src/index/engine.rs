//! [`IndexedEngine`]: the storage decorator that writes index entries in
//! the same atomic batch as the objects they describe.

use super::entry::view_entries;
use super::page::{stored_object, ReadPageError};
use super::{region_slots, Slot};
use crate::record::Record;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, RwLock};
use tessera_storage::{Engine, IndexRange, IndexWrite, StorageError, Write};
use tessera_types::{Configuration, RegionId};

/// Number of lock stripes of an [`IndexedEngine`].
const STRIPES: usize = 64;

/// An engine that keeps every region's index in step with its objects (see
/// the module docs). Every method but `apply_with_index` passes through.
pub struct IndexedEngine {
    inner: Arc<dyn Engine>,
    /// The slots (attributes and document paths) each region the
    /// configuration names indexes.
    specs: RwLock<Arc<HashMap<RegionId, Arc<[Slot]>>>>,
    /// Writes of one key read its old record and write the new one under
    /// the key's stripe, so two writers cannot both miss each other's entries.
    stripes: Vec<Mutex<()>>,
    /// Per region, slot numbers it no longer indexes (a dropped local
    /// index, on an attribute or a path) whose entries are still on disk:
    /// [`IndexedEngine::purge_batch`] deletes them. Kept in memory;
    /// [`IndexedEngine::open`] finds them again on disk, so a restart in
    /// the middle forgets nothing.
    purges: Mutex<HashMap<RegionId, std::collections::BTreeSet<usize>>>,
    /// Which regions may hold a tombstone, for tombstone collection.
    tombstones: Mutex<TombstoneWatch>,
}

/// What the engine knows of where tombstones are (see
/// [`IndexedEngine::may_hold_tombstones`]). Nothing at open: a region is
/// known to hold none only once a collection pass over it found none and
/// no tombstone was written to it meanwhile.
#[derive(Default)]
struct TombstoneWatch {
    /// Per region, tombstones written since the engine opened.
    written: HashMap<RegionId, u64>,
    /// Regions known to hold no tombstone.
    clear: std::collections::HashSet<RegionId>,
}

/// Meta record naming the index format the engine's entries follow; absent
/// in data written before indexes existed, which [`IndexedEngine::open`]
/// then indexes. Format 2 added path slots: a path index that format 1
/// held no entries for (and called ready at once) gets them on the first
/// open, as attributes did.
const META_INDEX_FORMAT: &str = "index_format";
const INDEX_FORMAT: &[u8] = b"2";

fn specs_of(config: &Configuration) -> HashMap<RegionId, Arc<[Slot]>> {
    let mut out = HashMap::new();
    for space in &config.spaces {
        for (subspace, layout) in space.subspaces.iter().enumerate() {
            let slots: Arc<[Slot]> = region_slots(space, subspace).into();
            for region in &layout.regions {
                out.insert(region.id, slots.clone());
            }
        }
    }
    out
}

/// The slot numbers of a region's spec (none for a region without one).
fn slot_numbers(slots: Option<&[Slot]>) -> Vec<usize> {
    slots.unwrap_or_default().iter().map(Slot::number).collect()
}

fn stripe_of(region: RegionId, key: &[u8]) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    region.hash(&mut h);
    key.hash(&mut h);
    (h.finish() % STRIPES as u64) as usize
}

/// The index entries of the stored record `bytes`, decoding only the
/// attributes the slots read.
fn record_entries(slots: &[Slot], key: &[u8], bytes: &[u8]) -> Result<Vec<Vec<u8>>, ReadPageError> {
    Ok(match stored_object(bytes)?.1 {
        Some(object) => view_entries(slots, &object, key)?,
        None => Vec::new(),
    })
}

impl IndexedEngine {
    /// Wraps `inner` for the regions of `config`, first indexing every
    /// stored object if the data predates indexes.
    pub fn open(inner: Arc<dyn Engine>, config: &Configuration) -> Result<Self, StorageError> {
        let engine = IndexedEngine {
            inner,
            specs: RwLock::new(Arc::new(specs_of(config))),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            purges: Mutex::new(HashMap::new()),
            tombstones: Mutex::new(TombstoneWatch::default()),
        };
        if engine.inner.meta_get(META_INDEX_FORMAT)?.as_deref() != Some(INDEX_FORMAT) {
            for region in engine.inner.regions()? {
                engine.rebuild_region(region)?;
            }
            engine.inner.meta_put(META_INDEX_FORMAT, INDEX_FORMAT)?;
        }
        engine.find_purges()?;
        Ok(engine)
    }

    /// Notes, for every stored region, the slots that have entries on
    /// disk but that the region does not index under the configuration it
    /// was opened with: a local index dropped before a restart, whose
    /// entries the purge had not finished deleting. That configuration is
    /// the cluster's current one, at least as new as any the daemon wrote
    /// entries under, so such entries are stale. One short seek per
    /// slot present (attributes and paths alike), not a walk of the index.
    fn find_purges(&self) -> Result<(), StorageError> {
        let mut purges = self.purges.lock().unwrap_or_else(|p| p.into_inner());
        for region in self.inner.regions()? {
            let indexed = slot_numbers(self.spec(region).as_deref());
            let mut from = 0usize;
            loop {
                let (start, _) = super::entry_bounds(from, (0, 0));
                let range = IndexRange {
                    start: &start,
                    end: None,
                    reverse: false,
                };
                let mut found = None;
                self.inner.index_scan(region, range, &mut |entry| {
                    found = super::entry_parts(entry).map(|(slot, ..)| slot);
                    false
                })?;
                let Some(slot) = found else { break };
                if !indexed.contains(&slot) {
                    purges.entry(region).or_default().insert(slot);
                }
                match slot.checked_add(1) {
                    Some(next) if u32::try_from(next).is_ok() => from = next,
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// Learns the regions of a new configuration. Call it before anything
    /// writes to a region the configuration adds.
    pub fn on_config(&self, config: &Configuration) {
        let specs = Arc::new(specs_of(config));
        let old = std::mem::replace(
            &mut *self.specs.write().unwrap_or_else(|p| p.into_inner()),
            specs.clone(),
        );
        // A region that stays but indexes fewer slots: a local index was
        // dropped. (A region that goes is dropped whole.)
        let mut purges = self.purges.lock().unwrap_or_else(|p| p.into_inner());
        for (region, slots) in old.iter() {
            let Some(now) = specs.get(region) else {
                continue;
            };
            let now = slot_numbers(Some(now));
            let gone: Vec<usize> = slot_numbers(Some(slots))
                .into_iter()
                .filter(|s| !now.contains(s))
                .collect();
            if !gone.is_empty() {
                purges.entry(*region).or_default().extend(gone);
            }
        }
    }

    /// Deletes up to `limit` entries of slots that regions no longer index
    /// (see `purges`); returns how many it deleted (fewer than `limit`:
    /// nothing is left). A slot indexed again meanwhile is left alone.
    pub fn purge_batch(&self, limit: usize) -> Result<usize, StorageError> {
        // Held throughout (taken before `purges`, as `on_config` never holds
        // both), so that a configuration indexing a slot again cannot
        // be installed between the check below and the deletes: its writes
        // and its backfill come after the purge. Nothing below may call
        // `spec`: a second read while `on_config` waits would deadlock.
        let specs = self.specs.read().unwrap_or_else(|p| p.into_inner());
        let mut purges = self.purges.lock().unwrap_or_else(|p| p.into_inner());
        if purges.is_empty() {
            return Ok(0);
        }
        let mut deleted = 0;
        for (region, slots) in purges.iter_mut() {
            let indexed = slot_numbers(specs.get(region).map(|s| &s[..]));
            slots.retain(|s| !indexed.contains(s));
            let mut finished = Vec::new();
            for &slot in slots.iter() {
                let (start, end) = super::entry_bounds(slot, (0, u64::MAX));
                let range = IndexRange {
                    start: &start,
                    end: end.as_deref(),
                    reverse: false,
                };
                let mut doomed = Vec::new();
                self.inner.index_scan(*region, range, &mut |entry| {
                    doomed.push(IndexWrite::Delete {
                        region: *region,
                        entry: entry.to_vec(),
                    });
                    deleted + doomed.len() < limit
                })?;
                let found = doomed.len();
                if found > 0 {
                    self.inner.apply_with_index(Vec::new(), doomed)?;
                }
                deleted += found;
                if deleted >= limit {
                    return Ok(deleted);
                }
                finished.push(slot);
            }
            slots.retain(|s| !finished.contains(s));
        }
        purges.retain(|_, slots| !slots.is_empty());
        Ok(deleted)
    }

    /// Whether `region` may hold a tombstone: false only once a pass that
    /// began at [`IndexedEngine::tombstone_mark`] found none (see
    /// [`IndexedEngine::found_no_tombstones`]) and none was written since.
    /// Tombstone collection skips the regions that hold none, which is
    /// every region of a space that never deletes or moves an object: it
    /// read every record every round before (`docs/BENCHMARKS.md`,
    /// "Collection rounds that read nothing").
    pub fn may_hold_tombstones(&self, region: RegionId) -> bool {
        !self.watch().clear.contains(&region)
    }

    /// Taken when a pass over `region` begins.
    pub fn tombstone_mark(&self, region: RegionId) -> u64 {
        self.watch().written.get(&region).copied().unwrap_or(0)
    }

    /// A pass over `region` that began at `mark` read every record and
    /// found no tombstone: unless one was written since the mark, the
    /// region holds none.
    pub fn found_no_tombstones(&self, region: RegionId, mark: u64) {
        let mut watch = self.watch();
        if watch.written.get(&region).copied().unwrap_or(0) == mark {
            watch.clear.insert(region);
        }
    }

    fn watch(&self) -> std::sync::MutexGuard<'_, TombstoneWatch> {
        self.tombstones.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes the tombstones among `writes` before they are committed, so
    /// that a pass ending meanwhile cannot call their regions clear.
    fn note_tombstones(&self, writes: &[Write]) {
        let mut watch = None;
        for write in writes {
            if let Write::Put { region, value, .. } = write {
                if Record::may_be_tombstone(value) {
                    let watch = watch.get_or_insert_with(|| self.watch());
                    *watch.written.entry(*region).or_insert(0) += 1;
                    watch.clear.remove(region);
                }
            }
        }
    }

    fn spec(&self, region: RegionId) -> Option<Arc<[Slot]>> {
        self.specs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&region)
            .filter(|slots| !slots.is_empty())
            .cloned()
    }

    /// Writes the entries of every object of the region (entries already
    /// there stay; they are a set).
    pub fn rebuild_region(&self, region: RegionId) -> Result<(), StorageError> {
        let Some(slots) = self.spec(region) else {
            return Ok(());
        };
        let mut puts = Vec::new();
        self.inner.scan(region, None, &mut |key, bytes| {
            if let Ok(entries) = record_entries(&slots, key, bytes) {
                puts.extend(
                    entries
                        .into_iter()
                        .map(|entry| IndexWrite::Put { region, entry }),
                );
            }
            true
        })?;
        for chunk in puts.chunks(4096) {
            self.inner.apply_with_index(Vec::new(), chunk.to_vec())?;
        }
        Ok(())
    }
}

impl IndexedEngine {
    /// Writes the index entries of up to `limit` objects of `region`
    /// after key `after` (entries already there stay: they are a set),
    /// for the slots the region indexes now. Returns the last key
    /// visited and how many records it visited; fewer than `limit` means
    /// the region's end was reached. The resumable form of
    /// [`IndexedEngine::rebuild_region`], for a backfill that must not
    /// hold the disk for long.
    pub fn index_batch(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Option<Vec<u8>>, usize), StorageError> {
        let slots = self.spec(region);
        let mut puts = Vec::new();
        let mut seen = 0;
        let mut last = None;
        self.inner.scan(region, after, &mut |key, bytes| {
            if let Some(slots) = &slots {
                // A record that does not decode has no entries to write;
                // the write path reports it when it is next written.
                if let Ok(entries) = record_entries(slots, key, bytes) {
                    puts.extend(
                        entries
                            .into_iter()
                            .map(|entry| IndexWrite::Put { region, entry }),
                    );
                }
            }
            seen += 1;
            last = Some(key.to_vec());
            seen < limit
        })?;
        if !puts.is_empty() {
            self.inner.apply_with_index(Vec::new(), puts)?;
        }
        Ok((last, seen))
    }
}

/// A write to an indexed region: its region, key, new record (none: a
/// delete) and the slots the region indexes.
type IndexedWrite<'a> = (RegionId, &'a [u8], Option<&'a [u8]>, Arc<[Slot]>);

impl IndexedEngine {
    /// Applies `writes` with the index entries they add and remove, and
    /// `index`; `synced` as [`Engine::apply_with_index`], else as
    /// [`Engine::apply_with_index_unsynced`].
    fn apply_indexed(
        &self,
        writes: Vec<Write>,
        mut index: Vec<IndexWrite>,
        synced: bool,
    ) -> Result<(), StorageError> {
        self.note_tombstones(&writes);
        let indexed: Vec<IndexedWrite> = writes
            .iter()
            .filter_map(|w| {
                let (region, key, value) = match w {
                    Write::Put { region, key, value } => (*region, key, Some(value.as_slice())),
                    Write::Delete { region, key } => (*region, key, None),
                };
                Some((region, key.as_slice(), value, self.spec(region)?))
            })
            .collect();
        if indexed.is_empty() {
            return self.inner_apply(writes, index, synced);
        }
        let mut stripes: Vec<usize> = indexed
            .iter()
            .map(|&(region, key, ..)| stripe_of(region, key))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let _guards: Vec<_> = stripes
            .iter()
            .map(|&s| self.stripes[s].lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        // The entries each key has so far, counting earlier writes of this batch.
        let mut current: HashMap<(RegionId, &[u8]), Vec<Vec<u8>>> = HashMap::new();
        for (region, key, value, slots) in indexed {
            let old = match current.remove(&(region, key)) {
                Some(old) => old,
                None => {
                    // An old record that does not decode has unknown entries;
                    // any it left are stale, which readers tolerate.
                    let mut old = Vec::new();
                    self.inner.read(region, key, &mut |bytes| {
                        if let Some(bytes) = bytes {
                            old = record_entries(&slots, key, bytes).unwrap_or_default();
                        }
                    })?;
                    old
                }
            };
            let new = match value {
                Some(bytes) => record_entries(&slots, key, bytes).map_err(|e| {
                    StorageError::Engine(format!("cannot index a write to {region}: {e}"))
                })?,
                None => Vec::new(),
            };
            for entry in new.iter().filter(|e| !old.contains(e)) {
                index.push(IndexWrite::Put {
                    region,
                    entry: entry.clone(),
                });
            }
            // Disjoint from the puts just made, so their order is free.
            for entry in old.into_iter().filter(|e| !new.contains(e)) {
                index.push(IndexWrite::Delete { region, entry });
            }
            current.insert((region, key), new);
        }
        self.inner_apply(writes, index, synced)
    }

    fn inner_apply(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
        synced: bool,
    ) -> Result<(), StorageError> {
        if synced {
            self.inner.apply_with_index(writes, index)
        } else {
            self.inner.apply_with_index_unsynced(writes, index)
        }
    }
}

impl Engine for IndexedEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(region, key)
    }

    fn read(
        &self,
        region: RegionId,
        key: &[u8],
        read: &mut dyn FnMut(Option<&[u8]>),
    ) -> Result<(), StorageError> {
        self.inner.read(region, key, read)
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_indexed(writes, index, true)
    }

    fn apply_with_index_unsynced(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_indexed(writes, index, false)
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.inner.scan(region, after, visit)
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.inner.index_scan(region, range, visit)
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        self.inner.drop_region(region)
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        self.inner.regions()
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.meta_get(name)
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.inner.meta_put(name, value)
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.inner.sync()
    }

    fn snapshot(&self) -> Result<Arc<dyn tessera_storage::EngineSnapshot>, StorageError> {
        self.inner.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_storage::MemoryEngine;
    use tessera_types::{Object, Value, Version};

    fn put(engine: &IndexedEngine, region: u64, key: &[u8], object: Option<Object>) {
        let record = Record {
            version: Version(1),
            object,
            recent: Vec::new(),
        };
        engine
            .apply(vec![Write::Put {
                region: RegionId(region),
                key: key.to_vec(),
                value: record.encode(),
            }])
            .unwrap();
    }

    /// A region is clear of tombstones only after a pass that found none,
    /// and only while none is written to it; objects and other regions'
    /// tombstones leave it clear.
    #[test]
    fn a_region_is_clear_of_tombstones_only_after_a_pass_found_none() {
        let engine =
            IndexedEngine::open(Arc::new(MemoryEngine::new()), &Configuration::default()).unwrap();
        let (a, b) = (RegionId(1), RegionId(2));
        // Nothing is known at open.
        assert!(engine.may_hold_tombstones(a));
        let mark = engine.tombstone_mark(a);
        engine.found_no_tombstones(a, mark);
        assert!(!engine.may_hold_tombstones(a));
        put(
            &engine,
            1,
            b"k",
            Some(Object {
                values: vec![Value::Int(1)],
            }),
        );
        put(&engine, 2, b"k", None);
        assert!(!engine.may_hold_tombstones(a), "an object is no tombstone");
        assert!(engine.may_hold_tombstones(b));
        // A tombstone written during a pass keeps the region unclear.
        let mark = engine.tombstone_mark(a);
        put(&engine, 1, b"j", None);
        assert!(engine.may_hold_tombstones(a));
        engine.found_no_tombstones(a, mark);
        assert!(
            engine.may_hold_tombstones(a),
            "a pass older than a tombstone cannot clear it"
        );
        let mark = engine.tombstone_mark(a);
        engine.found_no_tombstones(a, mark);
        assert!(!engine.may_hold_tombstones(a));
    }
}
