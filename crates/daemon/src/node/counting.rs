//! The count of objects a search page reads, for the metrics, and the
//! budget of a page read where its request arrived: hooks on the storage
//! crate's one engine decorator ([`Hooked`]) that add up the records a scan
//! visits and the objects loaded by key (an index walk loads each
//! candidate; its entries are not objects), and refuse the reads past a
//! budget. The node wraps its engine in one per page, so the search code
//! stays unaware of metrics and of where it runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tessera_storage::fault::{Hooked, Hooks};
use tessera_storage::StorageError;

/// Objects read so far, and the reads left to the page if it has a budget.
#[derive(Default)]
pub(super) struct Examined {
    objects: AtomicU64,
    /// Reads (an index scan, a load by key, a scan) the page may still
    /// start; `None` without a budget.
    left: Option<AtomicU64>,
    /// Set when a read was refused for the budget: the page's error is
    /// the budget's, not the storage's.
    over: AtomicBool,
}

impl Examined {
    /// Counts, and refuses every read past the first `reads`.
    pub fn within(reads: u64) -> Examined {
        Examined {
            left: Some(AtomicU64::new(reads)),
            ..Examined::default()
        }
    }

    pub fn get(&self) -> u64 {
        self.objects.load(Ordering::Relaxed)
    }

    /// Whether a read was refused for the budget.
    pub fn over_budget(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }
}

impl Hooks for Examined {
    fn read(&self) -> Result<(), StorageError> {
        let Some(left) = &self.left else {
            return Ok(());
        };
        // One page's reads run on one thread, one after another.
        match left.load(Ordering::Relaxed) {
            0 => {
                self.over.store(true, Ordering::Relaxed);
                Err(StorageError::Engine(
                    "the page's reads passed its budget".into(),
                ))
            }
            n => {
                left.store(n - 1, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    fn objects_read(&self, count: u64) {
        self.objects.fetch_add(count, Ordering::Relaxed);
    }
}

/// An engine over `inner` that counts the objects read through it.
pub(super) type Counting = Hooked<Examined>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tessera_storage::{Engine, MemoryEngine, Write};
    use tessera_types::RegionId;

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
        let counting = Counting::new(memory, Examined::default());
        let mut seen = 0;
        counting
            .scan(RegionId(1), None, &mut |_, _| {
                seen += 1;
                seen < 3
            })
            .unwrap();
        assert_eq!(counting.hooks().get(), 3);
        assert!(counting.get(RegionId(1), &[4]).unwrap().is_some());
        assert!(counting.get(RegionId(1), &[9]).unwrap().is_none());
        assert_eq!(counting.hooks().get(), 4);
        assert!(!counting.hooks().over_budget());
    }

    #[test]
    fn a_budget_refuses_the_reads_past_it_and_says_so() {
        let memory: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
        let counting = Counting::new(memory, Examined::within(2));
        assert!(counting.get(RegionId(1), &[1]).is_ok());
        assert!(counting.get(RegionId(1), &[2]).is_ok());
        assert!(!counting.hooks().over_budget());
        assert!(counting.get(RegionId(1), &[3]).is_err());
        assert!(counting.hooks().over_budget());
        // Every later read is refused too.
        assert!(counting.scan(RegionId(1), None, &mut |_, _| true).is_err());
    }
}
