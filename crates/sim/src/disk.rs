//! The simulated disk: a [`MemoryEngine`] that survives crashes (it is
//! the daemon's data directory), seen by one process incarnation through a
//! [`Disk`] that the nemesis can make fail.
//!
//! A fault models what a real engine does when its disk fills or breaks:
//! the failing write changes nothing, and from then on this incarnation's
//! engine refuses every write and sync (fjall poisons itself the same
//! way), so the daemon must leave its chains. A restarted process opens a
//! fresh `Disk` over the same data, with the fault repaired.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use tessera_storage::{Engine, IndexRange, IndexWrite, MemoryEngine, StorageError, Write};
use tessera_types::RegionId;

/// What is wrong with a disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Writes and syncs fail (no space left); reads work.
    Full,
    /// Every operation fails (an I/O error).
    Broken,
}

const HEALTHY: u8 = 0;
const FULL: u8 = 1;
const BROKEN: u8 = 2;
/// A write failed: the engine refuses writes until the process restarts.
const POISONED: u8 = 3;

/// One incarnation's view of a daemon's data.
pub struct Disk {
    data: Arc<MemoryEngine>,
    state: AtomicU8,
}

impl Disk {
    pub fn open(data: Arc<MemoryEngine>) -> Disk {
        Disk {
            data,
            state: AtomicU8::new(HEALTHY),
        }
    }

    /// From now on the disk has `fault`.
    pub fn fail(&self, fault: Fault) {
        let code = match fault {
            Fault::Full => FULL,
            Fault::Broken => BROKEN,
        };
        self.state.store(code, Ordering::Release);
    }

    fn read(&self) -> Result<(), StorageError> {
        match self.state.load(Ordering::Acquire) {
            BROKEN => Err(StorageError::Engine("simulated I/O error".into())),
            _ => Ok(()),
        }
    }

    fn write(&self) -> Result<(), StorageError> {
        match self.state.load(Ordering::Acquire) {
            HEALTHY => Ok(()),
            POISONED => Err(StorageError::Poisoned),
            FULL => {
                self.state.store(POISONED, Ordering::Release);
                Err(StorageError::Engine("simulated disk full".into()))
            }
            _ => {
                self.state.store(POISONED, Ordering::Release);
                Err(StorageError::Engine("simulated I/O error".into()))
            }
        }
    }
}

impl Engine for Disk {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.read()?;
        self.data.get(region, key)
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.write()?;
        self.data.apply_with_index(writes, index)
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.read()?;
        self.data.scan(region, after, visit)
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.read()?;
        self.data.index_scan(region, range, visit)
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        self.write()?;
        self.data.drop_region(region)
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        self.read()?;
        self.data.regions()
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.read()?;
        self.data.meta_get(name)
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.write()?;
        self.data.meta_put(name, value)
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.write()?;
        self.data.sync()
    }
}
