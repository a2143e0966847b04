//! An engine that counts the objects a search page reads, over the real
//! one: records visited by a scan and objects loaded by key (an index walk
//! loads each candidate). Reads only; the node wraps its engine in one per
//! page, so the search code stays unaware of metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_storage::{Engine, IndexRange, IndexWrite, StorageError, Write};
use tessera_types::RegionId;

pub(super) struct Counting {
    pub inner: Arc<dyn Engine>,
    /// Objects read so far.
    pub examined: AtomicU64,
}

impl Counting {
    pub fn new(inner: Arc<dyn Engine>) -> Counting {
        Counting {
            inner,
            examined: AtomicU64::new(0),
        }
    }

    fn count(&self, n: u64) {
        self.examined.fetch_add(n, Ordering::Relaxed);
    }
}

impl Engine for Counting {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let found = self.inner.get(region, key)?;
        self.count(u64::from(found.is_some()));
        Ok(found)
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.inner.apply_with_index(writes, index)
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let mut visited = 0u64;
        let result = self.inner.scan(region, after, &mut |key, value| {
            visited += 1;
            visit(key, value)
        });
        self.count(visited);
        result
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        // Entries are not objects: the objects they name are counted as
        // they are loaded.
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_storage::MemoryEngine;

    #[test]
    fn scans_count_visits_and_gets_count_objects_found() {
        let memory: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
        let writes = (0u8..5)
            .map(|i| Write::Put {
                region: RegionId(1),
                key: vec![i],
                value: vec![i],
            })
            .collect();
        memory.apply(writes).unwrap();
        let counting = Counting::new(memory);
        let mut seen = 0;
        counting
            .scan(RegionId(1), None, &mut |_, _| {
                seen += 1;
                seen < 3
            })
            .unwrap();
        assert_eq!(counting.examined.load(Ordering::Relaxed), 3);
        assert!(counting.get(RegionId(1), &[4]).unwrap().is_some());
        assert!(counting.get(RegionId(1), &[9]).unwrap().is_none());
        assert_eq!(counting.examined.load(Ordering::Relaxed), 4);
    }
}
