//! Fault injection for tests, in the spirit of FoundationDB's `buggify`:
//! production code that misbehaves on purpose when a test asks it to.
//!
//! [`Hooked`] wraps an engine in [`Hooks`] that may refuse (or note) each
//! operation first: the simulator's disks that fill or break and tests that
//! watch writes use it. [`FillingEngine`] behaves as if its disk filled up once a budget of
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
    Ok(Arc::new(FillingEngine::filling(engine, bytes_max)))
}

/// What a [`Hooked`] engine checks (or notes) before an operation reaches
/// the engine it wraps. Every hook lets the operation through unless it
/// returns an error; the wrapped engine then never sees the operation.
pub trait Hooks: Send + Sync + 'static {
    /// Before a read: `get`, `scan`, `index_scan`, `regions`, `meta_get`.
    fn read(&self) -> Result<(), StorageError> {
        Ok(())
    }

    /// Before a write of `bytes` bytes: a batch (`writes`, `index`), a
    /// dropped region or a meta record (those two with empty slices; a
    /// dropped region counts 0 bytes, its size being unknown here).
    fn write(
        &self,
        writes: &[Write],
        index: &[IndexWrite],
        bytes: usize,
    ) -> Result<(), StorageError> {
        let _ = (writes, index, bytes);
        Ok(())
    }

    /// Before a sync.
    fn sync(&self) -> Result<(), StorageError> {
        Ok(())
    }

    /// After a read of objects: the records a `scan` visited, or 1 for a
    /// `get` that found its key (0 when it did not).
    fn objects_read(&self, count: u64) {
        let _ = count;
    }
}

/// An engine that runs [`Hooks`] before passing each operation to the
/// engine it wraps: the one decorator behind fault injection (a disk that
/// fills, or breaks), tests that watch what is written, and the daemon's
/// count of the objects a search reads.
pub struct Hooked<H> {
    inner: Arc<dyn Engine>,
    hooks: H,
}

impl<H: Hooks> Hooked<H> {
    pub fn new(inner: Arc<dyn Engine>, hooks: H) -> Hooked<H> {
        Hooked { inner, hooks }
    }

    pub fn hooks(&self) -> &H {
        &self.hooks
    }
}

impl<H: Hooks> Engine for Hooked<H> {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.hooks.read()?;
        let found = self.inner.get(region, key)?;
        self.hooks.objects_read(u64::from(found.is_some()));
        Ok(found)
    }

    fn read(
        &self,
        region: RegionId,
        key: &[u8],
        read: &mut dyn FnMut(Option<&[u8]>),
    ) -> Result<(), StorageError> {
        self.hooks.read()?;
        let mut found = false;
        self.inner.read(region, key, &mut |value| {
            found = value.is_some();
            read(value)
        })?;
        self.hooks.objects_read(u64::from(found));
        Ok(())
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.hooks
            .write(&writes, &index, batch_bytes(&writes, &index))?;
        self.inner.apply_with_index(writes, index)
    }

    fn apply_with_index_unsynced(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.hooks
            .write(&writes, &index, batch_bytes(&writes, &index))?;
        self.inner.apply_with_index_unsynced(writes, index)
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.hooks.read()?;
        let mut visited = 0u64;
        let scanned = self.inner.scan(region, after, &mut |key, value| {
            visited += 1;
            visit(key, value)
        });
        self.hooks.objects_read(visited);
        scanned
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.hooks.read()?;
        self.inner.index_scan(region, range, visit)
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        self.hooks.write(&[], &[], 0)?;
        self.inner.drop_region(region)
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        self.hooks.read()?;
        self.inner.regions()
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.hooks.read()?;
        self.inner.meta_get(name)
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.hooks.write(&[], &[], name.len() + value.len())?;
        self.inner.meta_put(name, value)
    }

    fn snapshot(&self) -> Result<Arc<dyn crate::EngineSnapshot>, StorageError> {
        self.hooks.read()?;
        self.inner.snapshot()
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.hooks.sync()?;
        self.inner.sync()
    }
}

/// An engine whose disk is full after a budget of written bytes.
pub type FillingEngine = Hooked<DiskBudget>;

impl FillingEngine {
    /// `inner`, full once `bytes_max` bytes were written to it.
    pub fn filling(inner: Arc<dyn Engine>, bytes_max: u64) -> FillingEngine {
        Hooked::new(
            inner,
            DiskBudget {
                bytes_max,
                bytes: AtomicU64::new(0),
            },
        )
    }
}

/// The hooks of a disk that is full after `bytes_max` bytes of writes: the
/// batch that would pass the budget fails as a whole, and so does every
/// write after it, as on a disk with no space left. Reads and syncs pass
/// through.
pub struct DiskBudget {
    bytes_max: u64,
    /// Bytes written so far, counting refused batches too, so that once
    /// the budget is spent it stays spent.
    bytes: AtomicU64,
}

impl Hooks for DiskBudget {
    fn write(&self, _: &[Write], _: &[IndexWrite], bytes: usize) -> Result<(), StorageError> {
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
        let engine = FillingEngine::filling(Arc::new(MemoryEngine::new()), u64::MAX / 2);
        crate::conformance::basic(&engine);
    }

    #[test]
    fn refuses_the_batch_that_passes_the_budget_and_every_write_after() {
        // Two batches of 8 + 1 + 41 = 50 bytes fit in 100; a third does not.
        let engine = FillingEngine::filling(Arc::new(MemoryEngine::new()), 100);
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
