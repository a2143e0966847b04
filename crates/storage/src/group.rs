//! Group commit: writers that each need their batch on stable storage
//! before they return share fsyncs instead of queueing one each.
//!
//! The protocol, for a writer whose batch is already in the journal:
//!
//! ```text
//!   take a ticket (the number of batches committed so far, its own included)
//!   loop:
//!     a sync failed             → return its error
//!     synced ≥ ticket           → return: a sync that began after the batch has finished
//!     no sync running           → lead one: covers = tickets issued now; sync; synced = covers
//!     a sync is running         → wait for it to end (it may have begun before this
//!                                 batch, so check again; the next one may be needed)
//! ```
//!
//! A sync covers exactly the tickets issued before it began: a ticket is
//! taken only after its batch is in the journal, so the sync writes that
//! batch out. A batch that reached the journal after the sync began, or
//! whose writer had not taken its ticket yet, waits for the next sync.
//!
//! Leader and followers rather than a dedicated syncer thread: a lone
//! writer syncs on its own thread with no hand-off (the latency at one
//! write in flight is a plain fsync's), and there is no thread to start,
//! stop or leak. The sync runs without the group's lock held, so writers
//! keep committing and queueing behind it meanwhile — those are the
//! batches the next sync covers at once.
//!
//! A waiting writer holds nothing but what its caller held; the sync
//! itself takes none of the callers' locks, so a writer that holds a lock
//! (a daemon's replica core, say) while it waits cannot block the sync it
//! waits for, and writers under other locks keep joining the group.
//!
//! A failed sync is final: what reached the disk is unknown, so every
//! writer it was to cover, and every later one, gets its error.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Fsyncs shared by concurrent writers (see the module docs). `E` is the
/// sync's error; every writer a failed sync leaves behind gets a shared
/// handle on it.
pub(crate) struct GroupCommit<E> {
    state: Mutex<State<E>>,
    /// Signalled when a sync ends.
    sync_ended: Condvar,
}

struct State<E> {
    /// Tickets handed out: batches committed to the journal whose writers
    /// wait for a sync.
    issued: u64,
    /// Every ticket up to this one is on stable storage.
    synced: u64,
    /// A writer is running a sync now.
    syncing: bool,
    /// The error of the sync that failed, once one has.
    failed: Option<Arc<E>>,
}

impl<E> GroupCommit<E> {
    pub(crate) fn new() -> Self {
        GroupCommit {
            state: Mutex::new(State {
                issued: 0,
                synced: 0,
                syncing: false,
                failed: None,
            }),
            sync_ended: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<E>> {
        // The state is four plain fields, each left consistent between
        // statements: a panic elsewhere under the lock does not break it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Call once the writer's batch is in the journal: returns once a
    /// `sync` that began after that has succeeded — run by this writer if
    /// no sync is running, else by another one — or with the error of the
    /// failed sync that was to cover it (or of any earlier one).
    pub(crate) fn wait_synced(&self, sync: impl Fn() -> Result<(), E>) -> Result<(), Arc<E>> {
        let mut state = self.lock();
        state.issued += 1;
        let ticket = state.issued;
        loop {
            if let Some(error) = &state.failed {
                return Err(error.clone());
            }
            if state.synced >= ticket {
                return Ok(());
            }
            if state.syncing {
                state = self
                    .sync_ended
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
                continue;
            }
            state.syncing = true;
            let covers = state.issued;
            drop(state);
            let result = sync();
            state = self.lock();
            state.syncing = false;
            match result {
                Ok(()) => {
                    debug_assert!(covers >= state.synced, "syncs end in the order they began");
                    state.synced = covers;
                }
                Err(error) => state.failed = Some(Arc::new(error)),
            }
            self.sync_ended.notify_all();
        }
    }

    /// Tickets handed out so far.
    #[cfg(test)]
    fn issued(&self) -> u64 {
        self.lock().issued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;

    /// A fake journal and disk: writers append (a counter), a sync makes
    /// durable everything appended before it began, and counts itself.
    #[derive(Default)]
    struct FakeDisk {
        appended: AtomicU64,
        durable: AtomicU64,
        syncs: AtomicU64,
    }

    impl FakeDisk {
        /// Appends one batch; its position in the journal.
        fn append(&self) -> u64 {
            self.appended.fetch_add(1, Ordering::SeqCst) + 1
        }

        fn sync(&self) -> Result<(), &'static str> {
            let begun_at = self.appended.load(Ordering::SeqCst);
            self.syncs.fetch_add(1, Ordering::SeqCst);
            // Give writers the chance to append while the sync runs: what
            // they append now is not covered by it.
            for _ in 0..50 {
                std::thread::yield_now();
            }
            self.durable.fetch_max(begun_at, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn every_writer_returns_after_a_sync_that_began_after_its_batch() {
        let disk = FakeDisk::default();
        let group = GroupCommit::new();
        let threads = 16;
        let writes_per_thread = 200;
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..writes_per_thread {
                        let position = disk.append();
                        group.wait_synced(|| disk.sync()).unwrap();
                        let durable = disk.durable.load(Ordering::SeqCst);
                        assert!(
                            durable >= position,
                            "returned with batch {position} appended but only {durable} durable"
                        );
                    }
                });
            }
        });
        let writes = threads * writes_per_thread;
        assert_eq!(disk.appended.load(Ordering::SeqCst), writes);
        assert_eq!(disk.durable.load(Ordering::SeqCst), writes);
        let syncs = disk.syncs.load(Ordering::SeqCst);
        assert!((1..=writes).contains(&syncs), "{syncs} syncs");
    }

    /// One writer's sync is held open while two more commit: both wait,
    /// and one further sync covers the two of them.
    #[test]
    fn writers_that_commit_during_a_sync_share_the_next_one() {
        let group = Arc::new(GroupCommit::<&'static str>::new());
        let syncs = Arc::new(AtomicU64::new(0));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let entered_tx = Mutex::new(entered_tx);
        let sync = || {
            let n = syncs.fetch_add(1, Ordering::SeqCst);
            if n == 0 {
                // The first sync tells the test it runs, then holds.
                entered_tx.lock().unwrap().send(()).unwrap();
                release_rx.lock().unwrap().recv().unwrap();
            }
            Ok(())
        };
        std::thread::scope(|s| {
            let first = s.spawn(|| group.wait_synced(sync));
            entered_rx.recv().unwrap();
            let second = s.spawn(|| group.wait_synced(sync));
            let third = s.spawn(|| group.wait_synced(sync));
            // Both have taken their tickets, after the first sync began.
            while group.issued() < 3 {
                std::thread::yield_now();
            }
            assert_eq!(syncs.load(Ordering::SeqCst), 1);
            release_tx.send(()).unwrap();
            for writer in [first, second, third] {
                writer.join().unwrap().unwrap();
            }
        });
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failed_sync_fails_every_waiter_and_every_later_writer() {
        let group = GroupCommit::<&'static str>::new();
        let syncs = AtomicU64::new(0);
        let failing = || {
            syncs.fetch_add(1, Ordering::SeqCst);
            for _ in 0..50 {
                std::thread::yield_now();
            }
            Err("disk gone")
        };
        let results: Vec<_> = std::thread::scope(|s| {
            let writers: Vec<_> = (0..8)
                .map(|_| s.spawn(|| group.wait_synced(failing)))
                .collect();
            writers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for result in results {
            assert_eq!(result.map_err(|e| *e), Err("disk gone"));
        }
        // Exactly one sync ran: every other writer found it failed.
        assert_eq!(syncs.load(Ordering::SeqCst), 1);
        assert_eq!(group.wait_synced(|| Ok(())).map_err(|e| *e), Err("disk gone"));
        assert_eq!(syncs.load(Ordering::SeqCst), 1);
    }
}
