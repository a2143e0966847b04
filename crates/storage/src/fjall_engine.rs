//! The default engine: fjall, an embedded log-structured store with a
//! journal.

use crate::group::GroupCommit;
use crate::rows::{Row, RowCache};
use crate::{
    region_key, with_region_key, Engine, EngineSnapshot, IndexRange, IndexWrite, StorageError,
    Write,
};
use fjall::{
    Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch as WriteBatch, PersistMode,
    Readable, Snapshot,
};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tessera_types::RegionId;

/// The block cache a daemon's engine gets unless told otherwise: 512 MiB,
/// filled only as blocks are read. With fjall's own default, 32 MiB, YCSB
/// E in the 100,000-record comparison read 28,000 table blocks a second
/// from the files (one row in ten); with 256 MiB 9,200, with 512 MiB none
/// (`docs/BENCHMARKS.md`).
pub const CACHE_BYTES_DEFAULT: u64 = 512 << 20;

/// The row cache a daemon's engine gets unless told otherwise: 256 MiB of
/// stored values by key (`rows.rs`), enough for the objects a daemon of
/// the 100,000-record comparison serves (about 1.1 KB each, two subspaces,
/// two replicas over three daemons).
pub const ROW_CACHE_BYTES_DEFAULT: u64 = 256 << 20;

/// The memory an engine keeps for reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caches {
    /// fjall's block cache: decoded table blocks.
    pub blocks: u64,
    /// The row cache: whole stored values by key (0: none).
    pub rows: u64,
}

impl Default for Caches {
    fn default() -> Self {
        Caches {
            blocks: CACHE_BYTES_DEFAULT,
            rows: ROW_CACHE_BYTES_DEFAULT,
        }
    }
}

/// Level-0 tables of the objects keyspace that start a compaction.
const OBJECTS_L0_THRESHOLD: u8 = 8;

/// When committed writes reach stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every batch reaches the operating system before `apply` returns (it
    /// survives a crash of the process); the daemon fsyncs on a short
    /// interval (a power loss may lose that interval).
    #[default]
    Interval,
    /// Every batch is fsynced before `apply` returns, but those applied
    /// with `apply_with_index_unsynced` (made durable by the next fsync).
    /// Concurrent writers share fsyncs (group commit, see `group.rs`):
    /// batches that queue while one fsync runs are committed together and
    /// share the next.
    Always,
}

pub struct FjallEngine {
    db: Database,
    /// The database's directory, where fjall keeps its journals
    /// (`N.jnl`, the highest N the active one).
    path: PathBuf,
    objects: Keyspace,
    index: Keyspace,
    meta: Keyspace,
    durability: Durability,
    /// Fsyncs shared by the writers of [`Durability::Always`].
    group: GroupCommit<WriteBatch, fjall::Error>,
    /// Set after a failed write or sync: what reached disk is unknown, so
    /// the engine refuses further writes rather than guess.
    poisoned: AtomicBool,
    /// Objects by storage key, in front of point reads (none: off).
    rows: Option<RowCache>,
}

fn engine_err(e: fjall::Error) -> StorageError {
    StorageError::Engine(e.to_string())
}

/// The meta key holding the storage format a data directory is written
/// in (u32, big-endian).
pub const STORAGE_FORMAT_KEY: &str = "storage_format";
const FORMAT_KEY: &[u8] = STORAGE_FORMAT_KEY.as_bytes();

/// The storage format this build writes: how records, index entries and
/// meta values are laid out (`docs/PROTOCOL.md`). A directory without
/// [`FORMAT_KEY`] predates the key and is in format 1, which is this
/// one; a later format reads the earlier ones or says why it cannot.
pub const STORAGE_FORMAT: u32 = 1;

/// Reads the directory's storage format, or records [`STORAGE_FORMAT`]
/// in a directory that has none (a new one, or one of format 1 from
/// before the key existed; the two are the same format). A format this
/// build does not know is refused before anything is written.
fn check_format(db: &Database, meta: &Keyspace) -> Result<(), StorageError> {
    match meta.get(FORMAT_KEY).map_err(engine_err)? {
        Some(bytes) => {
            let bytes: [u8; 4] = bytes.as_ref().try_into().map_err(|_| {
                StorageError::Engine(format!(
                    "the stored storage format is {} bytes, not 4: the directory is damaged",
                    bytes.len()
                ))
            })?;
            let found = u32::from_be_bytes(bytes);
            if found > STORAGE_FORMAT {
                return Err(StorageError::Format {
                    found,
                    supported: STORAGE_FORMAT,
                });
            }
            Ok(())
        }
        None => {
            meta.insert(FORMAT_KEY, STORAGE_FORMAT.to_be_bytes())
                .map_err(engine_err)?;
            db.persist(PersistMode::SyncAll).map_err(engine_err)
        }
    }
}

/// What a committed delete leaves in the row cache (`rows.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deleted {
    /// An absent row: the key may be inserted again, and its chain reads
    /// it first.
    Absent,
    /// Nothing: the key's region is being dropped.
    Gone,
}

impl FjallEngine {
    /// Opens (or creates) the database at `path` with the default
    /// [`Caches`].
    pub fn open(path: &Path, durability: Durability) -> Result<Self, StorageError> {
        FjallEngine::open_with_caches(path, durability, Caches::default())
    }

    /// [`FjallEngine::open`] with `caches`: a block cache of decoded table
    /// blocks, so that a point read of a flushed record does not read its
    /// block from the file again, and a row cache of values by key, so that
    /// it does not walk the tree at all.
    pub fn open_with_caches(
        path: &Path,
        durability: Durability,
        caches: Caches,
    ) -> Result<Self, StorageError> {
        let db = Database::builder(path)
            .cache_size(caches.blocks)
            .open()
            .map_err(engine_err)?;
        // Leveled compaction of the objects starts when 8 tables wait in
        // level 0 instead of fjall's 4: half as many rewrites of level 1
        // under updates, whose point reads the row cache and the tables'
        // filters keep cheap (fjall stalls writes only at 20). YCSB A at
        // 100,000 records ran 37 % faster with half the update p99
        // (`docs/BENCHMARKS.md`, "Compactions"). A keyspace keeps the
        // settings it was created with.
        let objects = db
            .keyspace("objects", || {
                KeyspaceCreateOptions::default().compaction_strategy(Arc::new(
                    fjall::compaction::Leveled::default().with_l0_threshold(OBJECTS_L0_THRESHOLD),
                ))
            })
            .map_err(engine_err)?;
        let index = db
            // fjall's 64 MiB memtable: a smaller one bounds how many dead
            // entries a churned index's walks step over, but reads an index
            // that fits in 64 MiB from tables instead (`docs/BENCHMARKS.md`,
            // "Churned indexes and the index memtable").
            .keyspace("index", KeyspaceCreateOptions::default)
            .map_err(engine_err)?;
        let meta = db
            .keyspace("meta", KeyspaceCreateOptions::default)
            .map_err(engine_err)?;
        check_format(&db, &meta)?;
        Ok(FjallEngine {
            db,
            path: path.to_path_buf(),
            objects,
            index,
            meta,
            durability,
            group: GroupCommit::new(),
            poisoned: AtomicBool::new(false),
            rows: RowCache::new(caches.rows),
        })
    }

    fn check_writable(&self) -> Result<(), StorageError> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(StorageError::Poisoned)
        } else {
            Ok(())
        }
    }
    /// Writes the batch; with [`Durability::Always`] and `synced`, waits
    /// for its group's fsync. A deleted key's row cache entry becomes an
    /// absent row with [`Deleted::Absent`] (it may be inserted again) and
    /// goes with [`Deleted::Gone`] (its region is being dropped).
    fn apply_batch(
        &self,
        writes: Vec<Write>,
        index_writes: Vec<IndexWrite>,
        synced: bool,
        deleted: Deleted,
    ) -> Result<(), StorageError> {
        self.check_writable()?;
        let mut batch = self.db.batch();
        // The objects' marks and new rows, for the row cache (`rows.rs`).
        let mut written = Vec::new();
        for write in writes {
            let (key, value) = match write {
                Write::Put { region, key, value } => (region_key(region, &key), Some(value)),
                Write::Delete { region, key } => (region_key(region, &key), None),
            };
            if let Some(rows) = &self.rows {
                // The cache's copy of the value, made once here.
                let cached = match (&value, deleted) {
                    (None, Deleted::Gone) => None,
                    _ => Some(Row::new(&key, value.as_deref())),
                };
                written.push((rows.writing(&key), cached));
            }
            match value {
                Some(value) => batch.insert(&self.objects, key, value),
                None => batch.remove(&self.objects, key),
            }
        }
        for write in index_writes {
            match write {
                IndexWrite::Put { region, entry } => {
                    batch.insert(&self.index, region_key(region, &entry), [])
                }
                // Not `remove_weak`: fjall drops a weak tombstone with the
                // put under it and every older version of the key, so an
                // entry put, flushed, removed, put back and removed again
                // would come back from its first table
                // (`index_with_flushes_matches_a_set` finds it).
                IndexWrite::Delete { region, entry } => {
                    batch.remove(&self.index, region_key(region, &entry))
                }
            }
        }
        let Some(rows) = &self.rows else {
            return self.commit(batch, synced);
        };
        let committed = self.commit(batch, synced);
        for (ticket, row) in written {
            rows.written(ticket, row.filter(|_| committed.is_ok()));
        }
        committed
    }

    /// Commits `batch`: with [`Durability::Always`], in a group whose one
    /// fsync covers it (see `group.rs`).
    fn commit(&self, batch: WriteBatch, synced: bool) -> Result<(), StorageError> {
        let result = match self.durability {
            Durability::Interval => batch.commit().map_err(engine_err),
            Durability::Always if !synced => batch.commit().map_err(engine_err),
            Durability::Always => self
                .group
                .commit(batch, WriteBatch::commit, || {
                    self.db.persist(PersistMode::SyncAll)
                })
                // The sync's error, shared by the group: a trait object,
                // so that the error type names no fjall type.
                .map_err(|e| StorageError::Sync(e)),
        };
        if result.is_err() {
            self.poisoned.store(true, Ordering::Release);
        }
        result
    }

    /// The interval's fsync, without fjall's journal lock. fjall's own
    /// `persist` holds the lock through the fsync, so every commit of every
    /// writer waited for it: with [`Durability::Interval`] each 200 ms fsync
    /// stalled the whole daemon (the median put p99.9 at 16 in flight over
    /// 5 runs went from 12.9 and 15.9 ms to 9.4 and 3.9 ms without the
    /// stall; docs/BENCHMARKS.md, "Interval fsyncs"). An fsync covers the
    /// file, not the descriptor: opening the active journal anew and
    /// syncing that makes durable every batch that reached the operating
    /// system (each commit writes its batch out of fjall's buffer) while
    /// commits go on. Sealed journals were fsynced by fjall when it sealed
    /// them; one sealed between the listing and the fsync is synced by
    /// that sealing, and the batches of the journal that replaced it by
    /// the next interval.
    fn sync_unlocked(&self) -> Result<(), StorageError> {
        // What an earlier commit may have left in fjall's buffer (none
        // does today) reaches the operating system first; no fsync.
        self.db.persist(PersistMode::Buffer).map_err(engine_err)?;
        for _ in 0..3 {
            let Some(journal) = active_journal(&self.path)? else {
                break;
            };
            match std::fs::File::open(&journal) {
                Ok(file) => {
                    return file
                        .sync_data()
                        .map_err(|e| StorageError::Sync(Arc::new(e)))
                }
                // Sealed and deleted since the listing: list again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StorageError::Sync(Arc::new(e))),
            }
        }
        // No journal file found where fjall keeps them: its own fsync.
        self.db.persist(PersistMode::SyncAll).map_err(engine_err)
    }
}

/// The active journal in `dir`: the `N.jnl` with the highest N.
fn active_journal(dir: &Path) -> Result<Option<PathBuf>, StorageError> {
    let entries = std::fs::read_dir(dir).map_err(|e| StorageError::Engine(e.to_string()))?;
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::Engine(e.to_string()))?;
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".jnl"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, entry.path()));
        }
    }
    Ok(best.map(|(_, p)| p))
}

impl Engine for FjallEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let mut found = None;
        self.read(region, key, &mut |v| found = v.map(<[u8]>::to_vec))?;
        Ok(found)
    }

    fn read(
        &self,
        region: RegionId,
        key: &[u8],
        read: &mut dyn FnMut(Option<&[u8]>),
    ) -> Result<(), StorageError> {
        with_region_key(region, key, |k| {
            let Some(rows) = &self.rows else {
                // fjall hands out a shared slice of its block or memtable
                // entry: borrowed here, never copied.
                read(self.objects.get(k).map_err(engine_err)?.as_deref());
                return Ok(());
            };
            let ticket = match rows.get(k) {
                Ok(row) => {
                    read(row.value());
                    return Ok(());
                }
                Err(ticket) => ticket,
            };
            let found = self.objects.get(k).map_err(engine_err)?;
            rows.offer(k, ticket, found.as_deref());
            read(found.as_deref());
            Ok(())
        })
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index_writes: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_batch(writes, index_writes, true, Deleted::Absent)
    }

    fn apply_with_index_unsynced(
        &self,
        writes: Vec<Write>,
        index_writes: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_batch(writes, index_writes, false, Deleted::Absent)
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        visit_all(self.objects.range(scan_bounds(region, after)), visit)
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let start = region_key(region, range.start);
        let end = match range.end {
            Some(e) => Some(region_key(region, e)),
            None => region.0.checked_add(1).map(|n| n.to_be_bytes().to_vec()),
        };
        let mut iter = match end {
            Some(end) => self.index.range(start..end),
            None => self.index.range(start..),
        };
        loop {
            let guard = if range.reverse {
                iter.next_back()
            } else {
                iter.next()
            };
            let Some(guard) = guard else { break };
            let key = guard.key().map_err(engine_err)?;
            if !visit(&key[8..]) {
                break;
            }
        }
        Ok(())
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        self.check_writable()?;
        // Index entries first: a write racing with the drop then leaves at
        // worst an entry without its object (readers check the object), never
        // an object without its entries.
        let mut entries = Vec::new();
        self.index_scan(
            region,
            IndexRange {
                start: &[],
                end: None,
                reverse: false,
            },
            &mut |e| {
                entries.push(e.to_vec());
                true
            },
        )?;
        for chunk in entries.chunks(1024) {
            let writes = chunk
                .iter()
                .map(|e| IndexWrite::Delete {
                    region,
                    entry: e.clone(),
                })
                .collect();
            self.apply_with_index(Vec::new(), writes)?;
        }
        let mut keys = Vec::new();
        self.scan(region, None, &mut |k, _| {
            keys.push(k.to_vec());
            true
        })?;
        for chunk in keys.chunks(1024) {
            let writes = chunk
                .iter()
                .map(|k| Write::Delete {
                    region,
                    key: k.clone(),
                })
                .collect();
            // The region's ids are never used again: its rows leave the
            // row cache rather than stay as absent rows that nothing
            // reads and that take live rows' room (`docs/BENCHMARKS.md`,
            // "Dropped regions' rows in the row cache").
            self.apply_batch(writes, Vec::new(), true, Deleted::Gone)?;
        }
        Ok(())
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        let mut out = Vec::new();
        for keyspace in [&self.objects, &self.index] {
            let mut from: Option<u64> = Some(0);
            // Jump from region to region instead of walking every key.
            while let Some(start) = from {
                let Some(guard) = keyspace.range(start.to_be_bytes().to_vec()..).next() else {
                    break;
                };
                let key = guard.key().map_err(engine_err)?;
                let Ok(prefix) = <[u8; 8]>::try_from(&key[..8.min(key.len())]) else {
                    return Err(StorageError::Engine(
                        "stored key shorter than its region prefix".into(),
                    ));
                };
                let id = u64::from_be_bytes(prefix);
                out.push(RegionId(id));
                from = id.checked_add(1);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self
            .meta
            .get(name.as_bytes())
            .map_err(engine_err)?
            .map(|v| v.to_vec()))
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.check_writable()?;
        let result = self
            .meta
            .insert(name.as_bytes(), value)
            .and_then(|()| self.db.persist(PersistMode::SyncAll));
        result.map_err(|e| {
            self.poisoned.store(true, Ordering::Release);
            engine_err(e)
        })
    }

    fn snapshot(&self) -> Result<Arc<dyn EngineSnapshot>, StorageError> {
        Ok(Arc::new(FjallSnapshot {
            snapshot: self.db.snapshot(),
            objects: self.objects.clone(),
        }))
    }

    fn sync(&self) -> Result<(), StorageError> {
        let result = match self.durability {
            Durability::Interval => self.sync_unlocked(),
            Durability::Always => self.db.persist(PersistMode::SyncAll).map_err(engine_err),
        };
        result.inspect_err(|_| self.poisoned.store(true, Ordering::Release))
    }
}

/// The range of the objects keyspace holding `region`'s entries after
/// `after` (open at the end for the last possible region).
fn scan_bounds(region: RegionId, after: Option<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let start = match after {
        Some(a) => {
            let mut k = region_key(region, a);
            k.push(0); // the smallest key greater than `a`
            k
        }
        None => region.0.to_be_bytes().to_vec(),
    };
    let end = match region.0.checked_add(1) {
        Some(next) => Bound::Excluded(next.to_be_bytes().to_vec()),
        None => Bound::Unbounded,
    };
    (Bound::Included(start), end)
}

/// Hands each entry of `iter`, its region prefix cut off, to `visit`.
fn visit_all(
    iter: fjall::Iter,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<(), StorageError> {
    for guard in iter {
        let (k, v) = guard.into_inner().map_err(engine_err)?;
        if !visit(&k[8..], &v) {
            break;
        }
    }
    Ok(())
}

/// A fjall snapshot (a sequence number every read is made at) and the
/// keyspace it reads.
struct FjallSnapshot {
    snapshot: Snapshot,
    objects: Keyspace,
}

impl EngineSnapshot for FjallSnapshot {
    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let range = scan_bounds(region, after);
        visit_all(self.snapshot.range(&self.objects, range), visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn conformance() {
        let dir = tempfile::tempdir().unwrap();
        crate::conformance::basic(&FjallEngine::open(dir.path(), Durability::Always).unwrap());
    }

    /// Every index entry of `region`, in order.
    fn index_entries(e: &FjallEngine, region: RegionId) -> Vec<Vec<u8>> {
        let mut entries = Vec::new();
        e.index_scan(
            region,
            IndexRange {
                start: b"",
                end: None,
                reverse: false,
            },
            &mut |x| {
                entries.push(x.to_vec());
                true
            },
        )
        .unwrap();
        entries
    }

    #[test]
    fn survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            e.apply(vec![Write::Put {
                region: RegionId(9),
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            }])
            .unwrap();
            e.apply_with_index(
                vec![],
                vec![IndexWrite::Put {
                    region: RegionId(9),
                    entry: b"e".to_vec(),
                }],
            )
            .unwrap();
            e.meta_put("id", b"3").unwrap();
        }
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        assert_eq!(e.get(RegionId(9), b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(index_entries(&e, RegionId(9)), vec![b"e".to_vec()]);
        assert_eq!(e.meta_get("id").unwrap(), Some(b"3".to_vec()));
    }

    /// A directory records the storage format it is written in; one from
    /// a newer build is refused untouched, one without the key (written
    /// before it existed) is taken as this format and recorded.
    #[test]
    fn a_directory_of_a_newer_storage_format_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let name = std::str::from_utf8(FORMAT_KEY).unwrap();
        {
            let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            assert_eq!(
                e.meta_get(name).unwrap(),
                Some(STORAGE_FORMAT.to_be_bytes().to_vec())
            );
            e.apply(vec![Write::Put {
                region: RegionId(1),
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            }])
            .unwrap();
            // As a directory from before the key: data and no format.
            e.meta.remove(FORMAT_KEY).unwrap();
            e.db.persist(PersistMode::SyncAll).unwrap();
        }
        {
            let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            assert_eq!(e.get(RegionId(1), b"k").unwrap(), Some(b"v".to_vec()));
            assert_eq!(
                e.meta_get(name).unwrap(),
                Some(STORAGE_FORMAT.to_be_bytes().to_vec())
            );
            e.meta_put(name, &(STORAGE_FORMAT + 1).to_be_bytes())
                .unwrap();
        }
        for _ in 0..2 {
            match FjallEngine::open(dir.path(), Durability::Interval) {
                Err(StorageError::Format { found, supported }) => {
                    assert_eq!((found, supported), (STORAGE_FORMAT + 1, STORAGE_FORMAT));
                }
                Err(other) => panic!("refused for another reason: {other}"),
                Ok(_) => panic!("a newer format was opened"),
            }
        }
        let message = StorageError::Format {
            found: STORAGE_FORMAT + 1,
            supported: STORAGE_FORMAT,
        }
        .to_string();
        assert!(message.contains("newer Tessera"), "{message}");
        {
            // Damaged: a value that is not a format.
            let db = Database::builder(dir.path()).open().unwrap();
            let meta = db.keyspace("meta", KeyspaceCreateOptions::default).unwrap();
            meta.insert(FORMAT_KEY, b"abc").unwrap();
            db.persist(PersistMode::SyncAll).unwrap();
        }
        match FjallEngine::open(dir.path(), Durability::Interval) {
            Err(StorageError::Engine(why)) => assert!(why.contains("damaged"), "{why}"),
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("a damaged format was opened"),
        }
    }

    /// A batch applied unsynced with `durability always` is written like
    /// any other, read back at once, and kept after a synced write.
    #[test]
    fn unsynced_batches_are_written_and_kept_by_the_next_synced_one() {
        let dir = tempfile::tempdir().unwrap();
        {
            let e = FjallEngine::open(dir.path(), Durability::Always).unwrap();
            e.apply_with_index_unsynced(
                vec![Write::Put {
                    region: RegionId(4),
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                }],
                vec![IndexWrite::Put {
                    region: RegionId(4),
                    entry: b"e".to_vec(),
                }],
            )
            .unwrap();
            assert_eq!(e.get(RegionId(4), b"k").unwrap(), Some(b"v".to_vec()));
            e.meta_put("installed_epoch", b"7").unwrap();
        }
        let e = FjallEngine::open(dir.path(), Durability::Always).unwrap();
        assert_eq!(e.get(RegionId(4), b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(index_entries(&e, RegionId(4)), vec![b"e".to_vec()]);
    }

    /// Many threads write through group commit at once; once each has
    /// returned, its writes must be there after a reopen.
    #[test]
    fn concurrent_always_writes_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let threads = 8u64;
        let writes_per_thread = 40u64;
        let key = |t: u64, i: u64| format!("t{t}-k{i}").into_bytes();
        {
            let e = FjallEngine::open(dir.path(), Durability::Always).unwrap();
            std::thread::scope(|s| {
                for t in 0..threads {
                    let e = &e;
                    s.spawn(move || {
                        for i in 0..writes_per_thread {
                            e.apply_with_index(
                                vec![Write::Put {
                                    region: RegionId(t),
                                    key: key(t, i),
                                    value: i.to_be_bytes().to_vec(),
                                }],
                                vec![IndexWrite::Put {
                                    region: RegionId(t),
                                    entry: key(t, i),
                                }],
                            )
                            .unwrap();
                        }
                    });
                }
            });
        }
        let e = FjallEngine::open(dir.path(), Durability::Always).unwrap();
        for t in 0..threads {
            for i in 0..writes_per_thread {
                assert_eq!(
                    e.get(RegionId(t), &key(t, i)).unwrap(),
                    Some(i.to_be_bytes().to_vec()),
                    "thread {t} write {i}"
                );
            }
            let mut entries = 0;
            e.index_scan(
                RegionId(t),
                IndexRange {
                    start: b"",
                    end: None,
                    reverse: false,
                },
                &mut |_| {
                    entries += 1;
                    true
                },
            )
            .unwrap();
            assert_eq!(entries, writes_per_thread, "index entries of thread {t}");
        }
    }

    /// The interval's fsync finds fjall's active journal where fjall keeps
    /// it (a change of fjall's layout fails here, not silently in a
    /// daemon, which would fall back to fjall's locked fsync).
    #[test]
    fn the_interval_sync_finds_the_active_journal() {
        let dir = tempfile::tempdir().unwrap();
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        e.apply(vec![Write::Put {
            region: RegionId(1),
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        }])
        .unwrap();
        let journal = active_journal(dir.path()).unwrap().expect("a journal");
        assert!(
            std::fs::metadata(&journal).unwrap().len() > 0,
            "{} holds the write",
            journal.display()
        );
        e.sync().unwrap();
        drop(e);
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        assert_eq!(e.get(RegionId(1), b"k").unwrap(), Some(b"v".to_vec()));
    }

    #[test]
    fn the_active_journal_is_the_highest_numbered() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["2.jnl", "10.jnl", "9.jnl", "11.jnl.tmp", "x.jnl", "lock"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        assert_eq!(
            active_journal(dir.path()).unwrap(),
            Some(dir.path().join("10.jnl"))
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(active_journal(empty.path()).unwrap(), None);
    }

    /// The index entries of region 1, in order.
    fn index_of(e: &FjallEngine) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let all = IndexRange {
            start: &[],
            end: None,
            reverse: false,
        };
        e.index_scan(RegionId(1), all, &mut |entry| {
            out.push(entry.to_vec());
            true
        })
        .unwrap();
        out
    }

    /// An entry put again while present, then removed, stays removed
    /// through flushes and compactions; a batch that removes an entry and
    /// puts it back keeps it.
    #[test]
    fn index_removals_hold_through_flushes_and_compactions() {
        let dir = tempfile::tempdir().unwrap();
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        let put = |entry: &[u8]| IndexWrite::Put {
            region: RegionId(1),
            entry: entry.to_vec(),
        };
        let delete = |entry: &[u8]| IndexWrite::Delete {
            region: RegionId(1),
            entry: entry.to_vec(),
        };
        e.apply_with_index(vec![], vec![put(b"a"), put(b"b")])
            .unwrap();
        e.index.rotate_memtable_and_wait().unwrap();
        e.apply_with_index(vec![], vec![put(b"a")]).unwrap();
        e.apply_with_index(vec![], vec![delete(b"a")]).unwrap();
        e.apply_with_index(
            vec![],
            vec![put(b"c"), delete(b"b"), put(b"b"), delete(b"c")],
        )
        .unwrap();
        e.index.rotate_memtable_and_wait().unwrap();
        e.index.major_compact().unwrap();
        assert_eq!(index_of(&e), vec![b"b".to_vec()]);
    }

    /// A dropped region's rows leave the row cache, where a delete
    /// leaves an absent row: the cache then weighs only the other
    /// region's rows, and the dropped keys read as absent.
    #[test]
    fn a_dropped_regions_rows_leave_the_row_cache() {
        let dir = tempfile::tempdir().unwrap();
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        let rows = e.rows.as_ref().expect("the default engine caches rows");
        let put = |region: u64, k: u32| Write::Put {
            region: RegionId(region),
            key: k.to_be_bytes().to_vec(),
            value: vec![7; 100],
        };
        // One write at a time: each is then cached (writes of one stripe
        // in one batch leave the key uncached).
        for write in (0..200)
            .map(|k| put(1, k))
            .chain((0..10).map(|k| put(2, k)))
        {
            e.apply(vec![write]).unwrap();
        }
        let row = |region: u64, k: u32, value: Option<&[u8]>| {
            Row::new(&region_key(RegionId(region), &k.to_be_bytes()), value).weight()
        };
        let region_2: u64 = (0..10).map(|k| row(2, k, Some(&[7; 100]))).sum();
        let region_1: u64 = (0..200).map(|k| row(1, k, Some(&[7; 100]))).sum();
        assert_eq!(rows.weight(), region_1 + region_2, "every write cached");
        // A delete leaves an absent row (an insert of the key reads it).
        e.apply(vec![Write::Delete {
            region: RegionId(1),
            key: 0u32.to_be_bytes().to_vec(),
        }])
        .unwrap();
        let absent = row(1, 0, None);
        assert_eq!(
            rows.weight(),
            region_1 - row(1, 0, Some(&[7; 100])) + absent + region_2
        );
        e.drop_region(RegionId(1)).unwrap();
        // The deleted key was not in the region's scan, so its absent row
        // stays; every other row of the region is gone.
        assert_eq!(rows.weight(), absent + region_2);
        for k in 1..200u32 {
            assert_eq!(e.get(RegionId(1), &k.to_be_bytes()).unwrap(), None);
        }
        for k in 0..10u32 {
            assert_eq!(
                e.get(RegionId(2), &k.to_be_bytes()).unwrap(),
                Some(vec![7; 100])
            );
        }
    }

    /// Writers store ever larger numbers under a few keys while readers
    /// read them: with the row cache, no reader sees a key's number go
    /// down (a value cached from before a write would), and once the
    /// writers are done every key reads its last number.
    #[test]
    // A deadline of real time: the test runs real threads.
    #[allow(clippy::disallowed_methods)]
    fn cached_reads_never_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        assert!(e.rows.is_some(), "the default engine caches rows");
        const KEYS: u64 = 4;
        const WRITES: u64 = 3000;
        let key = |k: u64| k.to_be_bytes();
        let read = |k: u64| {
            let bytes = e.get(RegionId(1), &key(k)).unwrap();
            bytes.map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap()))
        };
        let done = std::sync::atomic::AtomicBool::new(false);
        // Every loop ends by this time, so that a stale cache fails the
        // test instead of hanging it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        std::thread::scope(|s| {
            for k in 0..KEYS {
                let e = &e;
                s.spawn(move || {
                    for n in 1..=WRITES {
                        let value = n.to_be_bytes().to_vec();
                        let write = Write::Put {
                            region: RegionId(1),
                            key: key(k).to_vec(),
                            value,
                        };
                        e.apply(vec![write]).unwrap();
                    }
                });
            }
            let readers: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let mut seen = [0u64; KEYS as usize];
                        let mut reads = 0u64;
                        while (!done.load(std::sync::atomic::Ordering::Acquire) || reads < 1000)
                            && std::time::Instant::now() < deadline
                        {
                            for k in 0..KEYS {
                                let now = read(k);
                                assert!(
                                    now >= seen[k as usize],
                                    "key {k}: {now} after {}",
                                    seen[k as usize]
                                );
                                seen[k as usize] = now;
                                reads += 1;
                            }
                        }
                        reads
                    })
                })
                .collect();
            // The writers are the first KEYS threads; wait for them by
            // watching their last numbers appear.
            while (0..KEYS).any(|k| read(k) < WRITES) && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            done.store(true, std::sync::atomic::Ordering::Release);
            for r in readers {
                assert!(r.join().unwrap() > 0);
            }
        });
        for k in 0..KEYS {
            assert_eq!(read(k), WRITES);
        }
        assert!(e.rows.as_ref().unwrap().weight() > 0, "reads were cached");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Batches of index puts and removals (entries put while present,
        /// removed while absent, removed and put back in one batch), with
        /// memtable flushes and major compactions between them, against a
        /// set.
        #[test]
        fn index_with_flushes_matches_a_set(
            steps in proptest::collection::vec(
                (proptest::collection::vec((0u8..6, any::<bool>()), 1..5), 0u8..10),
                1..40,
            ),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            let mut model = std::collections::BTreeSet::new();
            for (batch, then) in steps {
                let writes = batch
                    .iter()
                    .map(|&(entry, is_put)| {
                        let entry = vec![entry];
                        if is_put {
                            model.insert(entry.clone());
                            IndexWrite::Put { region: RegionId(1), entry }
                        } else {
                            model.remove(&entry);
                            IndexWrite::Delete { region: RegionId(1), entry }
                        }
                    })
                    .collect();
                e.apply_with_index(vec![], writes).unwrap();
                match then {
                    0..=2 => e.index.rotate_memtable_and_wait().unwrap(),
                    3 => e.index.major_compact().unwrap(),
                    _ => {}
                }
                prop_assert_eq!(index_of(&e), model.iter().cloned().collect::<Vec<_>>());
            }
            e.index.rotate_memtable_and_wait().unwrap();
            e.index.major_compact().unwrap();
            prop_assert_eq!(index_of(&e), model.into_iter().collect::<Vec<_>>());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn matches_model(ops in proptest::collection::vec(any::<(u8, u8, u8, bool)>(), 0..60)) {
            let dir = tempfile::tempdir().unwrap();
            let engine = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            crate::conformance::against_model(&engine, &ops);
        }

        #[test]
        fn index_matches_model(
            ops in proptest::collection::vec(any::<(u8, u8, u8)>(), 0..80),
            probes in proptest::collection::vec(any::<(u8, u8, u8)>(), 1..20),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let engine = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            crate::conformance::index_against_model(&engine, &ops, &probes);
        }
    }
}
