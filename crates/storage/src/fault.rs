//! Fault injection for tests, in the spirit of FoundationDB's `buggify`:
//! production code that misbehaves on purpose when a test asks it to.
//!
//! [`FillingEngine`] behaves as if its disk filled up once a budget of
//! written bytes is spent. A multi-process test turns it on for one daemon
//! by setting [`DISK_BYTES_MAX_ENV`] in that process's environment (where
//! it cannot mount a small filesystem that really fills); nothing else
//! enables it.

use crate::{Engine, IndexRange, IndexWrite, StorageError, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_types::RegionId;

/// The environment variable that wraps a daemon's engine in a
/// [`FillingEngine`] with that many bytes of budget.
pub const DISK_BYTES_MAX_ENV: &str = "TESSERA_FAULT_DISK_BYTES_MAX";

/// Why [`from_env`] could not set up fault injection.
#[derive(Debug, thiserror::Error)]
pub enum FaultEnvError {
    /// The variable is set but is not a number of bytes.
    #[error("{DISK_BYTES_MAX_ENV}={value:?} is not a number of bytes")]
    BadBytes {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
}

/// `engine`, wrapped in a [`FillingEngine`] when [`DISK_BYTES_MAX_ENV`] is
/// set, else unchanged.
pub fn from_env(engine: Arc<dyn Engine>) -> Result<Arc<dyn Engine>, FaultEnvError> {
    let Some(value) = std::env::var_os(DISK_BYTES_MAX_ENV) else {
        return Ok(engine);
    };
    let value = value.to_string_lossy().into_owned();
    let bytes_max = value
        .parse()
        .map_err(|source| FaultEnvError::BadBytes { value, source })?;
    Ok(Arc::new(FillingEngine::new(engine, bytes_max)))
}

/// An engine whose disk is full after `bytes_max` bytes of writes: the
/// batch that would pass the budget fails as a whole, and so does every
/// write after it, as on a disk with no space left. Reads and syncs pass
/// through.
pub struct FillingEngine {
    inner: Arc<dyn Engine>,
    bytes_max: u64,
    /// Bytes written so far, counting refused batches too, so that once
    /// the budget is spent it stays spent.
    bytes: AtomicU64,
}

impl FillingEngine {
    pub fn new(inner: Arc<dyn Engine>, bytes_max: u64) -> FillingEngine {
        FillingEngine {
            inner,
            bytes_max,
            bytes: AtomicU64::new(0),
        }
    }

    /// Spends `bytes` of the budget; an error when it runs out.
    fn spend(&self, bytes: usize) -> Result<(), StorageError> {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        let before = self.bytes.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) > self.bytes_max {
            return Err(StorageError::Engine(format!(
                "no space left on device (injected by {DISK_BYTES_MAX_ENV}={})",
                self.bytes_max
            )));
        }
        Ok(())
    }
}

/// Bytes a batch puts on disk: its keys (with their 8-byte region
/// prefixes), values and index entries.
fn batch_bytes(writes: &[Write], index: &[IndexWrite]) -> usize {
    let objects: usize = writes
        .iter()
        .map(|w| match w {
            Write::Put { key, value, .. } => 8 + key.len() + value.len(),
            Write::Delete { key, .. } => 8 + key.len(),
        })
        .sum();
    let entries: usize = index
        .iter()
        .map(|w| match w {
            IndexWrite::Put { entry, .. } | IndexWrite::Delete { entry, .. } => 8 + entry.len(),
        })
        .sum();
    objects + entries
}

impl Engine for FillingEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(region, key)
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.spend(batch_bytes(&writes, &index))?;
        self.inner.apply_with_index(writes, index)
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
        // Deleting writes tombstones: it needs space too, but how much is
        // unknown here; a spent budget refuses it.
        self.spend(0)?;
        self.inner.drop_region(region)
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        self.inner.regions()
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.meta_get(name)
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.spend(name.len() + value.len())?;
        self.inner.meta_put(name, value)
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.inner.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryEngine;

    fn put(key: &[u8], value_bytes: usize) -> Write {
        Write::Put {
            region: RegionId(1),
            key: key.to_vec(),
            value: vec![7; value_bytes],
        }
    }

    #[test]
    fn behaves_as_its_inner_engine_within_budget() {
        let engine = FillingEngine::new(Arc::new(MemoryEngine::new()), u64::MAX / 2);
        crate::conformance::basic(&engine);
    }

    #[test]
    fn refuses_the_batch_that_passes_the_budget_and_every_write_after() {
        // Two batches of 8 + 1 + 41 = 50 bytes fit in 100; a third does not.
        let engine = FillingEngine::new(Arc::new(MemoryEngine::new()), 100);
        engine.apply(vec![put(b"a", 41)]).unwrap();
        engine.apply(vec![put(b"b", 41)]).unwrap();
        assert!(matches!(
            engine.apply(vec![put(b"c", 41)]),
            Err(StorageError::Engine(_))
        ));
        // Nothing of the refused batch was applied.
        assert_eq!(engine.get(RegionId(1), b"c").unwrap(), None);
        // A write that alone would have fit is refused too: the disk is full.
        assert!(engine.apply(vec![put(b"d", 0)]).is_err());
        assert!(engine.meta_put("id", b"1").is_err());
        assert!(engine.drop_region(RegionId(1)).is_err());
        // What was written stays readable, and syncs still work.
        assert_eq!(engine.get(RegionId(1), b"a").unwrap(), Some(vec![7; 41]));
        engine.sync().unwrap();
    }
}
