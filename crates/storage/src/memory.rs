//! An in-memory engine for unit tests and the simulator.

use crate::{region_key, Engine, EngineSnapshot, IndexRange, IndexWrite, StorageError, Write};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tessera_types::RegionId;

#[derive(Default)]
pub struct MemoryEngine {
    objects: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// `region_key(region, entry)` of every index entry.
    index: Mutex<BTreeSet<Vec<u8>>>,
    meta: Mutex<BTreeMap<String, Vec<u8>>>,
    /// How to take back what was applied unsynced since the last synced
    /// write, newest last: what a power loss loses.
    unsynced: Mutex<Vec<Undo>>,
}

/// What an unsynced write replaced.
enum Undo {
    Object(Vec<u8>, Option<Vec<u8>>),
    Index(Vec<u8>, bool),
}

impl MemoryEngine {
    pub fn new() -> Self {
        Self::default()
    }

    /// A power loss: every batch applied unsynced since the last synced
    /// write ([`Engine::apply_with_index_unsynced`]) is taken back, newest
    /// first. Returns how many writes were lost.
    pub fn lose_unsynced(&self) -> usize {
        let mut objects = lock(&self.objects);
        let mut index = lock(&self.index);
        let undo = std::mem::take(&mut *lock(&self.unsynced));
        let lost = undo.len();
        for u in undo.into_iter().rev() {
            match u {
                Undo::Object(key, Some(value)) => {
                    objects.insert(key, value);
                }
                Undo::Object(key, None) => {
                    objects.remove(&key);
                }
                Undo::Index(entry, true) => {
                    index.insert(entry);
                }
                Undo::Index(entry, false) => {
                    index.remove(&entry);
                }
            }
        }
        lost
    }

    /// The key's value as a power loss would leave it (what the oldest
    /// unsynced write of it replaced), without losing anything.
    pub fn get_durable(&self, region: RegionId, key: &[u8]) -> Option<Vec<u8>> {
        let key = region_key(region, key);
        let objects = lock(&self.objects);
        let unsynced = lock(&self.unsynced);
        let first = unsynced.iter().find_map(|u| match u {
            Undo::Object(k, before) if *k == key => Some(before.clone()),
            _ => None,
        });
        first.unwrap_or_else(|| objects.get(&key).cloned())
    }

    /// Applies a batch; `synced` makes it and everything before it
    /// durable (as an fsync of a journal does), else it can be lost.
    fn apply_batch(&self, writes: Vec<Write>, index_writes: Vec<IndexWrite>, synced: bool) {
        // The locks, always in this order, so a batch is seen whole.
        let mut objects = lock(&self.objects);
        let mut index = lock(&self.index);
        let mut unsynced = lock(&self.unsynced);
        for write in writes {
            let (key, value) = match write {
                Write::Put { region, key, value } => (region_key(region, &key), Some(value)),
                Write::Delete { region, key } => (region_key(region, &key), None),
            };
            let before = match value {
                Some(value) => objects.insert(key.clone(), value),
                None => objects.remove(&key),
            };
            if !synced {
                unsynced.push(Undo::Object(key, before));
            }
        }
        for write in index_writes {
            let (entry, put) = match write {
                IndexWrite::Put { region, entry } => (region_key(region, &entry), true),
                IndexWrite::Delete { region, entry } => (region_key(region, &entry), false),
            };
            let before = index.contains(&entry);
            if put {
                index.insert(entry.clone());
            } else {
                index.remove(&entry);
            }
            if !synced {
                unsynced.push(Undo::Index(entry, before));
            }
        }
        if synced {
            unsynced.clear();
        }
    }

    /// Everything applied so far is durable.
    fn synced(&self) {
        lock(&self.unsynced).clear();
    }
}

/// Locks `mutex`, recovering it if poisoned. A lock is poisoned when a
/// caller's visitor panics during a scan, which holds it; the maps change
/// only in code that does not panic, so they are whole, and the engine
/// goes on serving instead of panicking in every later call.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn region_bounds(region: RegionId) -> (Vec<u8>, Option<Vec<u8>>) {
    let start = region.0.to_be_bytes().to_vec();
    let end = region.0.checked_add(1).map(|n| n.to_be_bytes().to_vec());
    (start, end)
}

impl Engine for MemoryEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(lock(&self.objects).get(&region_key(region, key)).cloned())
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index_writes: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_batch(writes, index_writes, true);
        Ok(())
    }

    fn apply_with_index_unsynced(
        &self,
        writes: Vec<Write>,
        index_writes: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_batch(writes, index_writes, false);
        Ok(())
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        // Copied out, so that `visit` may call back into the engine.
        let mut entries: Vec<Vec<u8>> = {
            let index = lock(&self.index);
            let (start, end) = region_bounds(region);
            index
                .range(start..)
                .take_while(|k| end.as_ref().is_none_or(|e| *k < e))
                .map(|k| k[8..].to_vec())
                .filter(|e| range.contains(e))
                .collect()
        };
        if range.reverse {
            entries.reverse();
        }
        for e in &entries {
            if !visit(e) {
                break;
            }
        }
        Ok(())
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        scan_map(&lock(&self.objects), region, after, visit);
        Ok(())
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        let (start, end) = region_bounds(region);
        let outside = |k: &Vec<u8>| !(k >= &start && end.as_ref().is_none_or(|e| k < e));
        let mut objects = lock(&self.objects);
        let mut index = lock(&self.index);
        objects.retain(|k, _| outside(k));
        index.retain(outside);
        // Taken as synced: the undo log does not know what it dropped.
        self.synced();
        Ok(())
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        let objects = lock(&self.objects);
        let index = lock(&self.index);
        let mut out: Vec<RegionId> = objects
            .keys()
            .chain(index.iter())
            .map(|k| RegionId(u64::from_be_bytes(k[..8].try_into().expect("8 bytes"))))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(lock(&self.meta).get(name).cloned())
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        lock(&self.meta).insert(name.to_string(), value.to_vec());
        self.synced();
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.synced();
        Ok(())
    }

    fn snapshot(&self) -> Result<Arc<dyn EngineSnapshot>, StorageError> {
        Ok(Arc::new(MemorySnapshot(lock(&self.objects).clone())))
    }
}

/// A copy of a [`MemoryEngine`]'s objects.
struct MemorySnapshot(BTreeMap<Vec<u8>, Vec<u8>>);

impl EngineSnapshot for MemorySnapshot {
    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        scan_map(&self.0, region, after, visit);
        Ok(())
    }
}

/// Visits the entries of `region` in `objects` after `after`, in key
/// order, until `visit` returns false.
fn scan_map(
    objects: &BTreeMap<Vec<u8>, Vec<u8>>,
    region: RegionId,
    after: Option<&[u8]>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) {
    let (start, end) = region_bounds(region);
    for (k, v) in objects.range(start..) {
        if end.as_ref().is_some_and(|e| k >= e) {
            break;
        }
        let key = &k[8..];
        if after.is_some_and(|a| key <= a) {
            continue;
        }
        if !visit(key, v) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn conformance() {
        crate::conformance::basic(&MemoryEngine::new());
    }

    fn put(key: &[u8], value: &[u8]) -> Write {
        Write::Put {
            region: RegionId(1),
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    fn entry(e: &[u8], put: bool) -> IndexWrite {
        let (region, entry) = (RegionId(1), e.to_vec());
        if put {
            IndexWrite::Put { region, entry }
        } else {
            IndexWrite::Delete { region, entry }
        }
    }

    /// Objects and index entries.
    type Picture = (BTreeMap<Vec<u8>, Vec<u8>>, BTreeSet<Vec<u8>>);

    /// The engine's objects and index entries, as a comparable picture.
    fn picture(m: &MemoryEngine) -> Picture {
        (lock(&m.objects).clone(), lock(&m.index).clone())
    }

    #[test]
    fn a_power_loss_takes_back_only_what_no_synced_write_followed() {
        let m = MemoryEngine::new();
        m.apply_with_index(
            vec![put(b"a", b"1"), put(b"b", b"1")],
            vec![entry(b"x", true)],
        )
        .unwrap();
        let synced = picture(&m);
        m.apply_with_index_unsynced(
            vec![
                put(b"a", b"2"),
                put(b"c", b"2"),
                Write::Delete {
                    region: RegionId(1),
                    key: b"b".to_vec(),
                },
            ],
            vec![entry(b"x", false), entry(b"y", true)],
        )
        .unwrap();
        m.apply_with_index_unsynced(vec![put(b"a", b"3")], vec![entry(b"x", true)])
            .unwrap();
        assert_eq!(m.get(RegionId(1), b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(m.get_durable(RegionId(1), b"a"), Some(b"1".to_vec()));
        assert_eq!(m.get_durable(RegionId(1), b"b"), Some(b"1".to_vec()));
        assert_eq!(m.get_durable(RegionId(1), b"c"), None);
        assert_eq!(m.lose_unsynced(), 7);
        assert_eq!(picture(&m), synced);

        // An unsynced write followed by a synced one, a sync or a meta
        // write is durable.
        for make_durable in 0..3 {
            m.apply_with_index_unsynced(vec![put(b"d", b"4")], vec![entry(b"z", true)])
                .unwrap();
            match make_durable {
                0 => m.apply(vec![put(b"e", b"5")]).unwrap(),
                1 => m.sync().unwrap(),
                _ => m.meta_put("epoch", b"1").unwrap(),
            }
            let kept = picture(&m);
            assert_eq!(m.lose_unsynced(), 0);
            assert_eq!(picture(&m), kept);
            assert_eq!(m.get(RegionId(1), b"d").unwrap(), Some(b"4".to_vec()));
        }
    }

    /// A visitor that panics mid-scan poisons the lock the scan holds; the
    /// engine still serves what it held and takes new writes afterwards.
    #[test]
    fn a_panicking_visitor_leaves_the_engine_usable() {
        let engine = MemoryEngine::new();
        let put = |key: &[u8], value: &[u8]| Write::Put {
            region: RegionId(3),
            key: key.to_vec(),
            value: value.to_vec(),
        };
        engine.apply(vec![put(b"a", b"1")]).unwrap();
        let panicked = std::panic::catch_unwind(|| {
            let _ = engine.scan(RegionId(3), None, &mut |_, _| panic!("a visitor bug"));
        });
        assert!(panicked.is_err(), "the visitor ran and panicked");
        assert!(engine.objects.is_poisoned());
        assert_eq!(engine.get(RegionId(3), b"a").unwrap(), Some(b"1".to_vec()));
        engine.apply(vec![put(b"b", b"2")]).unwrap();
        assert_eq!(engine.get(RegionId(3), b"b").unwrap(), Some(b"2".to_vec()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_model(ops in proptest::collection::vec(any::<(u8, u8, u8, bool)>(), 0..60)) {
            crate::conformance::against_model(&MemoryEngine::new(), &ops);
        }

        #[test]
        fn index_matches_model(
            ops in proptest::collection::vec(any::<(u8, u8, u8)>(), 0..80),
            probes in proptest::collection::vec(any::<(u8, u8, u8)>(), 1..20),
        ) {
            crate::conformance::index_against_model(&MemoryEngine::new(), &ops, &probes);
        }
    }
}
