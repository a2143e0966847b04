//! The count of objects a search page reads, for the metrics: hooks on the
//! storage crate's one engine decorator ([`Hooked`]) that add up the
//! records a scan visits and the objects loaded by key (an index walk loads
//! each candidate; its entries are not objects). The node wraps its engine
//! in one per page, so the search code stays unaware of metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use tessera_storage::fault::{Hooked, Hooks};

/// Objects read so far.
#[derive(Default)]
pub(super) struct Examined(AtomicU64);

impl Examined {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Hooks for Examined {
    fn objects_read(&self, count: u64) {
        self.0.fetch_add(count, Ordering::Relaxed);
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
    }
}
