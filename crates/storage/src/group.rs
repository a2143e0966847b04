//! Group commit: writers that each need their batch on stable storage
//! before they return share one journal write and one fsync instead of
//! queueing one each.
//!
//! The protocol: a writer queues its batch and takes a ticket, then
//!
//! ```text
//!   loop:
//!     a commit or sync failed   → return its error
//!     synced ≥ ticket           → return: its batch is committed and synced
//!     no group running          → lead one: take every queued batch, commit
//!                                 each (in queue order), sync once, synced = last ticket taken
//!     a group is running        → wait for it to end (its batch may have been queued
//!                                 after the group was taken; the next group has it)
//! ```
//!
//! Why the leader commits the others' batches rather than each writer
//! committing its own: fjall holds its journal's lock through an fsync,
//! and a commit needs that lock. Writers that committed on their own would
//! queue behind every running fsync and then each lead the next, one batch
//! per fsync again. Queued here instead, they wait outside fjall, and the
//! next leader commits them all back to back and syncs once. Each batch
//! stays its own atomic commit, in the order the writers queued them.
//!
//! Leader and followers rather than a dedicated syncer thread: a lone
//! writer commits and syncs on its own thread with no hand-off (at one
//! write in flight it costs what a plain commit and fsync cost), and there
//! is no thread to start, stop or leak.
//!
//! A waiting writer holds nothing but what its caller held; committing and
//! syncing take none of the callers' locks, so a writer that holds a lock
//! (a daemon's replica core, say) while it waits cannot block the group it
//! waits for, and writers under other locks keep joining the next group.
//!
//! A failed commit or sync is final: what reached the disk is unknown, so
//! every writer of that group, and every later one, gets its error.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Commits and fsyncs shared by concurrent writers (see the module docs).
/// `B` is a batch, `E` the error of a commit or a sync; every writer a
/// failure leaves behind gets a shared handle on it.
pub(crate) struct GroupCommit<B, E> {
    state: Mutex<State<B, E>>,
    /// Signalled when a group ends.
    group_ended: Condvar,
}

struct State<B, E> {
    /// Batches waiting for the next group: tickets `synced + 1 ..= issued`
    /// that no running group took.
    queued: Vec<B>,
    /// Tickets handed out, one per batch.
    issued: u64,
    /// Every batch up to this ticket is committed and synced.
    synced: u64,
    /// A writer is leading a group now.
    running: bool,
    /// The error of the commit or sync that failed, once one has.
    failed: Option<Arc<E>>,
}

impl<B, E> GroupCommit<B, E> {
    pub(crate) fn new() -> Self {
        GroupCommit {
            state: Mutex::new(State {
                queued: Vec::new(),
                issued: 0,
                synced: 0,
                running: false,
                failed: None,
            }),
            group_ended: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<B, E>> {
        // The state is plain fields, each left consistent between
        // statements: a panic elsewhere under the lock does not break it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Commits `batch` and returns once it is synced — by this writer as
    /// the leader of a group, or by the leader of a group that took it —
    /// or with the error of the failed commit or sync that was to cover it
    /// (or of any earlier one; the batch is then dropped uncommitted).
    pub(crate) fn commit(
        &self,
        batch: B,
        commit: impl Fn(B) -> Result<(), E>,
        sync: impl Fn() -> Result<(), E>,
    ) -> Result<(), Arc<E>> {
        let mut state = self.lock();
        if let Some(error) = &state.failed {
            return Err(error.clone());
        }
        state.queued.push(batch);
        state.issued += 1;
        let ticket = state.issued;
        loop {
            if let Some(error) = &state.failed {
                return Err(error.clone());
            }
            if state.synced >= ticket {
                return Ok(());
            }
            if state.running {
                state = self
                    .group_ended
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
                continue;
            }
            state.running = true;
            let group = std::mem::take(&mut state.queued);
            let last = state.issued;
            drop(state);
            let result = group
                .into_iter()
                .try_for_each(&commit)
                .and_then(|()| sync());
            state = self.lock();
            state.running = false;
            match result {
                Ok(()) => state.synced = last,
                Err(error) => state.failed = Some(Arc::new(error)),
            }
            self.group_ended.notify_all();
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

    /// A fake journal and disk: a commit appends the batch's id to the
    /// journal, a sync makes durable every entry the journal held when it
    /// began, and each counts itself.
    #[derive(Default)]
    struct FakeDisk {
        journal: Mutex<Vec<u64>>,
        durable: AtomicU64,
        syncs: AtomicU64,
    }

    impl FakeDisk {
        fn commit(&self, id: u64) -> Result<(), &'static str> {
            self.journal.lock().unwrap().push(id);
            Ok(())
        }

        fn sync(&self) -> Result<(), &'static str> {
            let begun_at = self.journal.lock().unwrap().len() as u64;
            self.syncs.fetch_add(1, Ordering::SeqCst);
            // Give writers the chance to queue while the sync runs.
            for _ in 0..50 {
                std::thread::yield_now();
            }
            self.durable.fetch_max(begun_at, Ordering::SeqCst);
            Ok(())
        }

        /// Where `id` stands in the journal (1 = first), if committed.
        fn position(&self, id: u64) -> Option<u64> {
            let journal = self.journal.lock().unwrap();
            journal.iter().position(|&j| j == id).map(|p| p as u64 + 1)
        }
    }

    #[test]
    fn every_writer_returns_once_its_batch_is_committed_and_then_synced() {
        let disk = FakeDisk::default();
        let group = GroupCommit::new();
        let threads = 16u64;
        let writes_per_thread = 100u64;
        std::thread::scope(|s| {
            for t in 0..threads {
                let (disk, group) = (&disk, &group);
                s.spawn(move || {
                    for i in 0..writes_per_thread {
                        let id = t * writes_per_thread + i;
                        group
                            .commit(id, |b| disk.commit(b), || disk.sync())
                            .unwrap();
                        let position = disk.position(id).expect("committed before returning");
                        let durable = disk.durable.load(Ordering::SeqCst);
                        assert!(
                            durable >= position,
                            "batch {id} returned at journal position {position} with {durable} durable"
                        );
                    }
                });
            }
        });
        let mut journal = disk.journal.lock().unwrap().clone();
        let writes = threads * writes_per_thread;
        assert_eq!(disk.durable.load(Ordering::SeqCst), writes);
        // Each thread's batches went in in its own order.
        for t in 0..threads {
            let own: Vec<u64> = journal
                .iter()
                .copied()
                .filter(|id| id / writes_per_thread == t)
                .collect();
            let want: Vec<u64> = (t * writes_per_thread..(t + 1) * writes_per_thread).collect();
            assert_eq!(own, want, "thread {t}");
        }
        journal.sort_unstable();
        assert_eq!(journal, (0..writes).collect::<Vec<_>>(), "each batch once");
        let syncs = disk.syncs.load(Ordering::SeqCst);
        assert!((1..=writes).contains(&syncs), "{syncs} syncs");
    }

    /// One writer's sync is held open while two more queue: both wait, and
    /// one further group commits the two of them and syncs once.
    #[test]
    fn writers_that_queue_during_a_sync_share_the_next_group() {
        let disk = FakeDisk::default();
        let group = GroupCommit::<u64, &'static str>::new();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let entered_tx = Mutex::new(entered_tx);
        let syncs = AtomicU64::new(0);
        let sync = || {
            if syncs.fetch_add(1, Ordering::SeqCst) == 0 {
                // The first sync tells the test it runs, then holds.
                entered_tx.lock().unwrap().send(()).unwrap();
                release_rx.lock().unwrap().recv().unwrap();
            }
            Ok(())
        };
        let commit = |id| disk.commit(id);
        std::thread::scope(|s| {
            let first = s.spawn(|| group.commit(1, commit, sync));
            entered_rx.recv().unwrap();
            let second = s.spawn(|| group.commit(2, commit, sync));
            let third = s.spawn(|| group.commit(3, commit, sync));
            // Both have queued, after the first group was taken.
            while group.issued() < 3 {
                std::thread::yield_now();
            }
            assert_eq!(*disk.journal.lock().unwrap(), [1]);
            release_tx.send(()).unwrap();
            for writer in [first, second, third] {
                writer.join().unwrap().unwrap();
            }
        });
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
        let journal = disk.journal.lock().unwrap().clone();
        assert!(journal == [1, 2, 3] || journal == [1, 3, 2], "{journal:?}");
    }

    #[test]
    fn a_failed_sync_fails_every_waiter_and_every_later_writer() {
        let disk = FakeDisk::default();
        let group = GroupCommit::<u64, &'static str>::new();
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
                .map(|id| {
                    let (disk, group) = (&disk, &group);
                    s.spawn(move || group.commit(id, |b| disk.commit(b), failing))
                })
                .collect();
            writers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for result in results {
            assert_eq!(result.map_err(|e| *e), Err("disk gone"));
        }
        // Exactly one sync ran: every other writer found it failed.
        assert_eq!(syncs.load(Ordering::SeqCst), 1);
        let committed = disk.journal.lock().unwrap().len();
        let later = group.commit(99, |b| disk.commit(b), || Ok(()));
        assert_eq!(later.map_err(|e| *e), Err("disk gone"));
        assert_eq!(
            disk.journal.lock().unwrap().len(),
            committed,
            "nothing committed after"
        );
    }

    #[test]
    fn a_failed_commit_fails_its_group_without_a_sync() {
        let group = GroupCommit::<u64, &'static str>::new();
        let syncs = AtomicU64::new(0);
        let sync = || {
            syncs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        assert_eq!(
            group
                .commit(1, |_| Err("journal full"), sync)
                .map_err(|e| *e),
            Err("journal full")
        );
        assert_eq!(syncs.load(Ordering::SeqCst), 0);
        assert_eq!(
            group.commit(2, |_| Ok(()), sync).map_err(|e| *e),
            Err("journal full")
        );
    }
}
