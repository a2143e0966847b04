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
//! again after, when it also drops the key's entry. So a value read before
//! a commit cannot be cached once that commit has begun, and an entry
//! cached earlier stays visible only until the commit has returned — the
//! same moment a read of fjall alone could first rely on the new value.
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
    /// Per stripe, how many write marks it has seen.
    generations: Box<[Mutex<u64>]>,
}

fn stripe_of(key: &[u8]) -> usize {
    // A fixed hash: the stripe only spreads keys, and need not resist
    // anyone choosing them (a crowded stripe costs offers, not answers).
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(key);
    (h.finish() % STRIPES as u64) as usize
}

fn lock(m: &Mutex<u64>) -> MutexGuard<'_, u64> {
    // A generation is a counter: a panic elsewhere leaves it usable.
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
            generations: (0..STRIPES).map(|_| Mutex::new(0)).collect(),
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
            generation: *lock(&self.generations[stripe]),
        }
    }

    /// Caches `value`, read from fjall after `ticket` was taken, unless a
    /// write to the key's stripe has begun since.
    pub(crate) fn offer(&self, key: &[u8], ticket: Ticket, value: &[u8]) {
        let generation = lock(&self.generations[ticket.stripe]);
        if *generation == ticket.generation {
            self.rows.insert(key.into(), value.into());
        }
    }

    /// Before committing writes to `keys`: offers of values read before
    /// now are refused from here on.
    pub(crate) fn writing<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        for key in keys {
            *lock(&self.generations[stripe_of(key)]) += 1;
        }
    }

    /// After the commit of writes to `keys` returned (or failed): their
    /// entries go, and offers of values read before now are refused.
    pub(crate) fn written<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        for key in keys {
            let mut generation = lock(&self.generations[stripe_of(key)]);
            *generation += 1;
            self.rows.remove(key);
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
        cache.writing([&b"k"[..]]);
        // Until the commit returns, the old value may still be answered.
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"old"[..]));
        cache.written([&b"k"[..]]);
        assert_eq!(cache.get(b"k"), None);
    }

    #[test]
    fn an_offer_from_before_a_write_is_refused() {
        let cache = RowCache::new(1 << 20).unwrap();
        // Read before the write began, offered while it commits.
        let ticket = cache.ticket(b"k");
        cache.writing([&b"k"[..]]);
        cache.offer(b"k", ticket, b"old");
        assert_eq!(cache.get(b"k"), None);
        // Read while it commits, offered after it returned.
        let ticket = cache.ticket(b"k");
        cache.written([&b"k"[..]]);
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
