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
use tessera_storage::fault::{Hooked, Hooks};
use tessera_storage::{IndexWrite, MemoryEngine, StorageError, Write};

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
pub type Disk = Hooked<Health>;

/// Opens a healthy view of `data` for a new incarnation.
pub fn open(data: Arc<MemoryEngine>) -> Disk {
    Hooked::new(data, Health(AtomicU8::new(HEALTHY)))
}

/// The state of one incarnation's disk.
pub struct Health(AtomicU8);

impl Health {
    /// From now on the disk has `fault`.
    pub fn fail(&self, fault: Fault) {
        let code = match fault {
            Fault::Full => FULL,
            Fault::Broken => BROKEN,
        };
        self.0.store(code, Ordering::Release);
    }

    fn writable(&self) -> Result<(), StorageError> {
        match self.0.load(Ordering::Acquire) {
            HEALTHY => Ok(()),
            POISONED => Err(StorageError::Poisoned),
            FULL => {
                self.0.store(POISONED, Ordering::Release);
                Err(StorageError::Engine("simulated disk full".into()))
            }
            _ => {
                self.0.store(POISONED, Ordering::Release);
                Err(StorageError::Engine("simulated I/O error".into()))
            }
        }
    }
}

impl Hooks for Health {
    fn read(&self) -> Result<(), StorageError> {
        match self.0.load(Ordering::Acquire) {
            BROKEN => Err(StorageError::Engine("simulated I/O error".into())),
            _ => Ok(()),
        }
    }

    fn write(&self, _: &[Write], _: &[IndexWrite], _: usize) -> Result<(), StorageError> {
        self.writable()
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.writable()
    }
}
