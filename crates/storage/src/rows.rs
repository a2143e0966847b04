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

use quick_cache::sync::{Cache, DefaultLifecycle};
use quick_cache::{OptionsBuilder, Weighter};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

/// Stripes of write generations: enough that concurrent writers and
/// readers rarely share one.
const STRIPES: usize = 1024;

/// What an entry costs beyond its bytes (the cache's slot, the `Arc`'s
/// counts, the key's and value's lengths).
const ENTRY_OVERHEAD: u64 = 64;

/// A cached row: a storage key and its value, or the fact that the key
/// holds none, in one allocation, the key first. The cache is keyed by
/// the key's 64-bit hash, held in its slot, so that a lookup compares no
/// bytes behind a pointer until it has found the row, whose key it then
/// checks where its value starts: one cache miss fewer per lookup than a
/// key allocated apart (a search page reads a row per match, from a table
/// of ~100 MB). Two keys of one hash share a slot: one evicts the other,
/// and a lookup of the other misses.
///
/// An absent row saves the reads of a key being inserted: every member of
/// its chain reads the key when the update arrives (finding nothing) and
/// the key region's members and every indexed region read it again when
/// they commit (`docs/BENCHMARKS.md`, "Inserts read what they just
/// found missing").
#[derive(Clone)]
pub(crate) struct Row {
    bytes: Arc<[u8]>,
    key_len: usize,
    present: bool,
}

impl Row {
    /// The row of `key` holding `value`, or none.
    pub(crate) fn new(key: &[u8], value: Option<&[u8]>) -> Row {
        let value_len = value.map_or(0, <[u8]>::len);
        let mut bytes = Vec::with_capacity(key.len() + value_len);
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value.unwrap_or_default());
        Row {
            bytes: bytes.into(),
            key_len: key.len(),
            present: value.is_some(),
        }
    }

    fn key(&self) -> &[u8] {
        &self.bytes[..self.key_len]
    }

    /// The key's value; none if it holds none.
    pub(crate) fn value(&self) -> Option<&[u8]> {
        self.present.then(|| &self.bytes[self.key_len..])
    }

    /// What the row weighs in the cache.
    #[cfg(test)]
    pub(crate) fn weight(&self) -> u64 {
        Bytes.weight(&0, self)
    }
}

/// Weighs an entry by its row's bytes.
#[derive(Clone, Copy)]
struct Bytes;

impl Weighter<u64, Row> for Bytes {
    fn weight(&self, _: &u64, row: &Row) -> u64 {
        row.bytes.len() as u64 + ENTRY_OVERHEAD
    }
}

/// The cache's hasher: its keys are hashes already.
#[derive(Clone, Copy, Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here, through `write_u64`.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Rows = Cache<u64, Row, Bytes, BuildHasherDefault<Hashed>, DefaultLifecycle<u64, Row>>;

/// A key's hash and its stripe's generation, read before a read of fjall
/// (the reader's ticket to offer what it read) or marked by a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    hash: u64,
    generation: u64,
}

pub(crate) struct RowCache {
    rows: Rows,
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

/// A key's hash: its slot in the cache, and its stripe.
fn hash_of(key: &[u8]) -> u64 {
    // A fixed hash: it only spreads keys, and need not resist anyone
    // choosing them (keys of one hash cost each other their caching, and
    // a crowded stripe costs offers, never answers).
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(key);
    h.finish()
}

fn stripe_of(hash: u64) -> usize {
    (hash % STRIPES as u64) as usize
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
        let options = OptionsBuilder::new()
            .estimated_items_capacity(items)
            .weight_capacity(bytes)
            .build()
            .ok()?;
        Some(RowCache {
            rows: Cache::with_options(options, Bytes, Default::default(), Default::default()),
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
        })
    }

    /// The cached row of `key`, or on a miss the ticket to offer what
    /// fjall then answers.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Row, Ticket> {
        let hash = hash_of(key);
        match self.rows.get(&hash) {
            Some(row) if row.key() == key => Ok(row),
            _ => Err(Ticket {
                hash,
                generation: lock(&self.stripes[stripe_of(hash)]).generation,
            }),
        }
    }

    /// Caches `value` (none: the key holds none), read from fjall after
    /// the miss that gave `ticket`, unless a write to the key's stripe has
    /// begun since.
    pub(crate) fn offer(&self, key: &[u8], ticket: Ticket, value: Option<&[u8]>) {
        if lock(&self.stripes[stripe_of(ticket.hash)]).generation == ticket.generation {
            self.rows.insert(ticket.hash, Row::new(key, value));
        }
    }

    /// Before committing a write to `key`: offers of values read before
    /// now are refused from here on. The ticket says what the stripe's
    /// generation is once this write has marked it.
    pub(crate) fn writing(&self, key: &[u8]) -> Ticket {
        let hash = hash_of(key);
        let mut marks = lock(&self.stripes[stripe_of(hash)]);
        marks.generation += 1;
        marks.writing += 1;
        Ticket {
            hash,
            generation: marks.generation,
        }
    }

    /// After the commit of the write that took `ticket` returned (`row`:
    /// the key's new row, absent for a delete) or failed (`row` none):
    /// offers of values read before now are refused. The key's entry
    /// becomes the new row if no other write of the stripe ran at any time
    /// between this one's marks (none marked it since `ticket`, and none is
    /// between its marks now), so that no other commit can have come
    /// before or after this one's, and goes otherwise — a key updated
    /// again and again stays cached. (The slot goes whichever key of its
    /// hash it holds: what it held is then a miss, never a stale answer.)
    pub(crate) fn written(&self, ticket: Ticket, row: Option<Row>) {
        let mut marks = lock(&self.stripes[stripe_of(ticket.hash)]);
        let alone = marks.generation == ticket.generation && marks.writing == 1;
        marks.generation += 1;
        marks.writing -= 1;
        match row {
            Some(row) if alone => {
                debug_assert_eq!(hash_of(row.key()), ticket.hash, "a row of another key");
                self.rows.insert(ticket.hash, row);
            }
            _ => {
                self.rows.remove(&ticket.hash);
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

    /// What the cache answers for `key`: nothing cached, an absent row,
    /// or a value.
    fn cached(cache: &RowCache, key: &[u8]) -> Option<Option<Vec<u8>>> {
        cache
            .get(key)
            .ok()
            .map(|row| row.value().map(<[u8]>::to_vec))
    }

    /// The ticket of a read of `key` that missed.
    fn miss(cache: &RowCache, key: &[u8]) -> Ticket {
        cache.get(key).err().expect("a miss")
    }

    #[test]
    fn a_key_found_missing_is_cached_absent_until_a_write() {
        let cache = RowCache::new(1 << 20).unwrap();
        let ticket = miss(&cache, b"k");
        cache.offer(b"k", ticket, None);
        assert_eq!(cached(&cache, b"k"), Some(None));
        // Its insert leaves the value; its delete leaves it absent again.
        let write = cache.writing(b"k");
        cache.written(write, Some(Row::new(b"k", Some(b"v"))));
        assert_eq!(cached(&cache, b"k"), Some(Some(b"v".to_vec())));
        let write = cache.writing(b"k");
        cache.written(write, Some(Row::new(b"k", None)));
        assert_eq!(cached(&cache, b"k"), Some(None));
        // An absence read before an insert began is not taken after it.
        let ticket = miss(&cache, b"j");
        let write = cache.writing(b"j");
        cache.offer(b"j", ticket, None);
        assert_eq!(cached(&cache, b"j"), None);
        cache.written(write, Some(Row::new(b"j", Some(b"w"))));
        assert_eq!(cached(&cache, b"j"), Some(Some(b"w".to_vec())));
    }

    #[test]
    fn a_value_read_before_a_write_began_is_cached_and_dropped_by_it() {
        let cache = RowCache::new(1 << 20).unwrap();
        let ticket = miss(&cache, b"k");
        cache.offer(b"k", ticket, Some(b"old"));
        assert_eq!(cached(&cache, b"k"), Some(Some(b"old".to_vec())));
        let write = cache.writing(b"k");
        // Until the commit returns, the old value may still be answered.
        assert_eq!(cached(&cache, b"k"), Some(Some(b"old".to_vec())));
        cache.written(write, None);
        assert_eq!(cached(&cache, b"k"), None);
    }

    #[test]
    fn a_lone_write_leaves_its_value_and_overlapping_ones_leave_none() {
        let cache = RowCache::new(1 << 20).unwrap();
        let write = cache.writing(b"k");
        cache.written(write, Some(Row::new(b"k", Some(b"one"))));
        assert_eq!(cached(&cache, b"k"), Some(Some(b"one".to_vec())));
        // Two writes of one key overlap: whichever returns first, neither
        // leaves its value (the other may have committed after it).
        let first = cache.writing(b"k");
        let second = cache.writing(b"k");
        cache.written(second, Some(Row::new(b"k", Some(b"three"))));
        assert_eq!(cached(&cache, b"k"), None);
        cache.written(first, Some(Row::new(b"k", Some(b"two"))));
        assert_eq!(cached(&cache, b"k"), None);
        // A failed commit leaves nothing either.
        let write = cache.writing(b"k");
        cache.written(write, None);
        assert_eq!(cached(&cache, b"k"), None);
    }

    #[test]
    fn an_offer_from_before_a_write_is_refused() {
        let cache = RowCache::new(1 << 20).unwrap();
        // Read before the write began, offered while it commits.
        let ticket = miss(&cache, b"k");
        let write = cache.writing(b"k");
        cache.offer(b"k", ticket, Some(b"old"));
        assert_eq!(cached(&cache, b"k"), None);
        // Read while it commits, offered after it returned (and failed).
        let ticket = miss(&cache, b"k");
        cache.written(write, None);
        cache.offer(b"k", ticket, Some(b"new or old"));
        assert_eq!(cached(&cache, b"k"), None);
        // Read after it returned: taken.
        let ticket = miss(&cache, b"k");
        cache.offer(b"k", ticket, Some(b"new"));
        assert_eq!(cached(&cache, b"k"), Some(Some(b"new".to_vec())));
    }

    #[test]
    fn a_slot_answers_only_the_key_its_row_holds() {
        let cache = RowCache::new(1 << 20).unwrap();
        // A row of another key in `a`'s slot, as a key of the same hash
        // would leave it: `a` misses, and the other key is not found
        // under its own hash either.
        cache
            .rows
            .insert(hash_of(b"a"), Row::new(b"b", Some(b"b's value")));
        assert_eq!(cached(&cache, b"a"), None);
        assert_eq!(cached(&cache, b"b"), None);
        let ticket = miss(&cache, b"a");
        cache.offer(b"a", ticket, Some(b"a's value"));
        assert_eq!(cached(&cache, b"a"), Some(Some(b"a's value".to_vec())));
        // A write of `a` clears the slot whatever key its row holds.
        cache
            .rows
            .insert(hash_of(b"a"), Row::new(b"b", Some(b"b's value")));
        let write = cache.writing(b"a");
        cache.written(write, None);
        assert!(cache.rows.get(&hash_of(b"a")).is_none());
    }

    #[test]
    fn the_cache_keeps_to_its_size() {
        let cache = RowCache::new(64 << 10).unwrap();
        for i in 0..1000u32 {
            let key = i.to_be_bytes();
            let ticket = miss(&cache, &key);
            cache.offer(&key, ticket, Some(&[7u8; 1000]));
        }
        assert!(cache.weight() <= 64 << 10, "{} bytes", cache.weight());
        assert!(RowCache::new(0).is_none());
    }
}
