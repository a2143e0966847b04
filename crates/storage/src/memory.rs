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
}

impl MemoryEngine {
    pub fn new() -> Self {
        Self::default()
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
        // Both locks, always in this order, so a batch is seen whole.
        let mut objects = lock(&self.objects);
        let mut index = lock(&self.index);
        for write in writes {
            match write {
                Write::Put { region, key, value } => {
                    objects.insert(region_key(region, &key), value);
                }
                Write::Delete { region, key } => {
                    objects.remove(&region_key(region, &key));
                }
            }
        }
        for write in index_writes {
            match write {
                IndexWrite::Put { region, entry } => {
                    index.insert(region_key(region, &entry));
                }
                IndexWrite::Delete { region, entry } => {
                    index.remove(&region_key(region, &entry));
                }
            }
        }
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
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
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
