//! The row cache: stored values by storage key, in front of fjall's point
//! reads.
//!
//! A search page reads every match's object by key, and a get or an update
//! reads one record. Each such read walks fjall's memtables and the tables
//! of every level (their filters, block indexes and blocks, even when the
//! blocks are cached): in a YCSB E run at 100,000 records those reads took
//! 41 % of the process's CPU (`docs/BENCHMARKS.md`, "A row cache"). A hit
//! here is one hash lookup.
//!
//! Values are copied in (a value fjall hands out may share its table block,
//! which the cache would otherwise keep alive unweighed) and weighed by
//! their bytes. Only values that exist are cached.
//!
//! **Never stale.** A reader that missed offers what it read from fjall;
//! the offer is taken only if no write to the key's stripe began since the
//! reader looked. A writer marks the key's stripe before it commits and
//! again after, when it replaces the key's entry with the value it
//! committed if no other write marked the stripe meanwhile, and drops it
//! otherwise. So a value read before a commit cannot be cached once that
//! commit has begun, and an entry cached earlier stays visible only until
//! the commit has returned — the same moment a read of fjall alone could
//! first rely on the new value.
//! Nothing read from the cache is ever older than what fjall would answer,
//! except for writes still being committed, whose outcome no caller has
//! been told. Marks and offers of one stripe take its lock; the lock is
//! never held across a commit or a read of fjall.

use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::hash::Hasher;
use std::sync::{Arc, Mutex, MutexGuard};

/// Stripes of write generations: enough that concurrent writers and
/// readers rarely share one.
const STRIPES: usize = 1024;

/// What an entry costs beyond its bytes (the cache's slot, the `Arc`'s
/// counts, the key's and value's lengths).
const ENTRY_OVERHEAD: u64 = 64;

/// Weighs an entry by its key's and value's bytes.
#[derive(Clone, Copy)]
struct Bytes;

impl Weighter<Box<[u8]>, Arc<[u8]>> for Bytes {
    fn weight(&self, key: &Box<[u8]>, value: &Arc<[u8]>) -> u64 {
        key.len() as u64 + value.len() as u64 + ENTRY_OVERHEAD
    }
}

/// A generation read before a read of fjall: the reader's ticket to offer
/// what it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    stripe: usize,
    generation: u64,
}

pub(crate) struct RowCache {
    rows: Cache<Box<[u8]>, Arc<[u8]>, Bytes>,
    stripes: Box<[Mutex<Stripe>]>,
}

/// What a stripe of keys has seen of writes.
#[derive(Default)]
struct Stripe {
    /// Write marks so far: two per write, one before its commit and one
    /// after.
    generation: u64,
    /// Writes between their two marks.
    writing: u32,
}

fn stripe_of(key: &[u8]) -> usize {
    // A fixed hash: the stripe only spreads keys, and need not resist
    // anyone choosing them (a crowded stripe costs offers, not answers).
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(key);
    (h.finish() % STRIPES as u64) as usize
}

fn lock(m: &Mutex<Stripe>) -> MutexGuard<'_, Stripe> {
    // Counters: a panic elsewhere leaves them usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RowCache {
    /// A cache of about `bytes` (none when `bytes` is 0).
    pub(crate) fn new(bytes: u64) -> Option<RowCache> {
        if bytes == 0 {
            return None;
        }
        // quick_cache sizes its table by an estimate of the item count;
        // records of about a kilobyte are the common case.
        let items = usize::try_from(bytes / 1024).unwrap_or(usize::MAX).max(16);
        Some(RowCache {
            rows: Cache::with_weighter(items, bytes, Bytes),
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
        })
    }

    /// The cached value of `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<[u8]>> {
        self.rows.get(key)
    }

    /// Taken before reading `key` from fjall after a miss.
    pub(crate) fn ticket(&self, key: &[u8]) -> Ticket {
        let stripe = stripe_of(key);
        Ticket {
            stripe,
            generation: lock(&self.stripes[stripe]).generation,
        }
    }

    /// Caches `value`, read from fjall after `ticket` was taken, unless a
    /// write to the key's stripe has begun since.
    pub(crate) fn offer(&self, key: &[u8], ticket: Ticket, value: &[u8]) {
        if lock(&self.stripes[ticket.stripe]).generation == ticket.generation {
            self.rows.insert(key.into(), value.into());
        }
    }

    /// Before committing a write to `key`: offers of values read before
    /// now are refused from here on. The ticket says what the stripe's
    /// generation is once this write has marked it.
    pub(crate) fn writing(&self, key: &[u8]) -> Ticket {
        let stripe = stripe_of(key);
        let mut marks = lock(&self.stripes[stripe]);
        marks.generation += 1;
        marks.writing += 1;
        Ticket {
            stripe,
            generation: marks.generation,
        }
    }

    /// After the commit of a write to `key` (its new value; none for a
    /// delete) returned, or failed (`value` none): offers of values read
    /// before now are refused. The key's entry becomes the new value if no
    /// other write of the stripe ran at any time between this one's marks
    /// (none marked it since `ticket`, and none is between its marks now),
    /// so that no other commit can have come before or after this one's,
    /// and goes otherwise — a key updated again and again stays cached.
    pub(crate) fn written(&self, key: &[u8], ticket: Ticket, value: Option<Arc<[u8]>>) {
        let mut marks = lock(&self.stripes[ticket.stripe]);
        let alone = marks.generation == ticket.generation && marks.writing == 1;
        marks.generation += 1;
        marks.writing -= 1;
        match value {
            Some(value) if alone => self.rows.insert(key.into(), value),
            _ => {
                self.rows.remove(key);
            }
        }
    }

    /// Bytes the entries weigh now.
    #[cfg(test)]
    pub(crate) fn weight(&self) -> u64 {
        self.rows.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_read_before_a_write_began_is_cached_and_dropped_by_it() {
        let cache = RowCache::new(1 << 20).unwrap();
        let ticket = cache.ticket(b"k");
        cache.offer(b"k", ticket, b"old");
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"old"[..]));
        let write = cache.writing(b"k");
        // Until the commit returns, the old value may still be answered.
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"old"[..]));
        cache.written(b"k", write, None);
        assert_eq!(cache.get(b"k"), None);
    }

    #[test]
    fn a_lone_write_leaves_its_value_and_overlapping_ones_leave_none() {
        let cache = RowCache::new(1 << 20).unwrap();
        let write = cache.writing(b"k");
        cache.written(b"k", write, Some(Arc::from(&b"one"[..])));
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"one"[..]));
        // Two writes of one key overlap: whichever returns first, neither
        // leaves its value (the other may have committed after it).
        let first = cache.writing(b"k");
        let second = cache.writing(b"k");
        cache.written(b"k", second, Some(Arc::from(&b"three"[..])));
        assert_eq!(cache.get(b"k"), None);
        cache.written(b"k", first, Some(Arc::from(&b"two"[..])));
        assert_eq!(cache.get(b"k"), None);
        // A failed commit leaves nothing either.
        let write = cache.writing(b"k");
        cache.written(b"k", write, None);
        assert_eq!(cache.get(b"k"), None);
    }

    #[test]
    fn an_offer_from_before_a_write_is_refused() {
        let cache = RowCache::new(1 << 20).unwrap();
        // Read before the write began, offered while it commits.
        let ticket = cache.ticket(b"k");
        let write = cache.writing(b"k");
        cache.offer(b"k", ticket, b"old");
        assert_eq!(cache.get(b"k"), None);
        // Read while it commits, offered after it returned (and failed).
        let ticket = cache.ticket(b"k");
        cache.written(b"k", write, None);
        cache.offer(b"k", ticket, b"new or old");
        assert_eq!(cache.get(b"k"), None);
        // Read after it returned: taken.
        let ticket = cache.ticket(b"k");
        cache.offer(b"k", ticket, b"new");
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"new"[..]));
    }

    #[test]
    fn the_cache_keeps_to_its_size() {
        let cache = RowCache::new(64 << 10).unwrap();
        for i in 0..1000u32 {
            let key = i.to_be_bytes();
            let ticket = cache.ticket(&key);
            cache.offer(&key, ticket, &[7u8; 1000]);
        }
        assert!(cache.weight() <= 64 << 10, "{} bytes", cache.weight());
        assert!(RowCache::new(0).is_none());
    }
}
