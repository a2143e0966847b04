//! `tessera-storage`: where a daemon keeps its regions' objects.
//!
//! What it is: the [`Engine`] trait — a region-scoped byte map plus a small
//! metadata map, with atomic batches — and two implementations: [`FjallEngine`]
//! (durable, on disk, the default) and [`MemoryEngine`] (for unit tests and the
//! simulator). [`fault`] holds fault injection for tests.
//!
//! What it is not: it knows nothing of values, versions or chains; the daemon
//! decides what the bytes mean. It never interprets keys beyond their region
//! prefix.
//!
//! Layout in fjall: keyspace `objects` holds `region id (u64 BE) ++ key bytes`
//! → value bytes, so one region is one contiguous key range; keyspace `index`
//! holds `region id (u64 BE) ++ entry bytes` → nothing, the region's index
//! entries (opaque here: the daemon composes them, and writes them in the
//! same atomic batch as the objects they describe); keyspace `meta` holds
//! named records (the daemon's instance id, its last configuration).

pub mod fault;
mod fjall_engine;
mod group;
mod memory;
mod rows;

pub use fjall_engine::{
    Caches, Durability, FjallEngine, CACHE_BYTES_DEFAULT, ROW_CACHE_BYTES_DEFAULT, STORAGE_FORMAT,
    STORAGE_FORMAT_KEY,
};
pub use memory::MemoryEngine;
use std::sync::Arc;
use tessera_types::RegionId;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The engine failed; after a failed write or sync the engine refuses
    /// further writes, because what reached disk is unknown.
    #[error("storage engine error: {0}")]
    Engine(String),
    #[error("storage engine refuses writes after an earlier failure")]
    Poisoned,
    /// The fsync that was to make a batch durable failed (with
    /// [`Durability::Always`]); every writer that waited on it gets this
    /// same error, and the engine refuses further writes.
    #[error("fsync of committed writes failed: {0}")]
    Sync(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The data directory was written in a storage format this build does
    /// not read: by a newer Tessera. Nothing was changed in it.
    #[error(
        "the data directory was written by a newer Tessera (storage format {found}; \
         this build reads formats up to {supported}): run that version, or a later one"
    )]
    Format { found: u32, supported: u32 },
}

/// One write of an atomic batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Put {
        region: RegionId,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        region: RegionId,
        key: Vec<u8>,
    },
}

/// One index write of an atomic batch. A region's index is a set of byte
/// strings kept in byte order, separate from its objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexWrite {
    /// Adds the entry (nothing if present).
    Put { region: RegionId, entry: Vec<u8> },
    /// Removes the entry (nothing if absent).
    Delete { region: RegionId, entry: Vec<u8> },
}

/// Which index entries [`Engine::index_scan`] visits, and in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexRange<'a> {
    /// The first entry visited, inclusive (ascending order).
    pub start: &'a [u8],
    /// Entries must be below this; `None`: to the region's last entry.
    pub end: Option<&'a [u8]>,
    /// Largest entry first.
    pub reverse: bool,
}

impl IndexRange<'_> {
    /// Whether `entry` lies in the range.
    pub fn contains(&self, entry: &[u8]) -> bool {
        entry >= self.start && self.end.is_none_or(|e| entry < e)
    }
}

/// A durable, region-scoped byte map. Implementations are internally
/// synchronized; every method may be called from any thread.
pub trait Engine: Send + Sync + 'static {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// Hands the key's value (none: absent) to `read` as the engine holds
    /// it, without copying it out where the engine can avoid that. A read
    /// path that keeps only part of the value (a search page, a get's
    /// answer) uses this instead of [`Engine::get`].
    fn read(
        &self,
        region: RegionId,
        key: &[u8],
        read: &mut dyn FnMut(Option<&[u8]>),
    ) -> Result<(), StorageError> {
        read(self.get(region, key)?.as_deref());
        Ok(())
    }

    /// Applies every write or none.
    fn apply(&self, writes: Vec<Write>) -> Result<(), StorageError> {
        self.apply_with_index(writes, Vec::new())
    }

    /// Applies every object write and every index write, or none.
    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError>;

    /// The same, but where the engine fsyncs every batch it does not wait
    /// for this one: it is durable once a later synced batch, [`Engine::sync`]
    /// or [`Engine::meta_put`] returns (one journal holds them all). A crash
    /// of the process keeps it; a power loss before then may not. A chain
    /// member that is not its region's tail commits this way
    /// (`docs/design/forward-durability.md`, "Durable at each region's tail").
    fn apply_with_index_unsynced(
        &self,
        writes: Vec<Write>,
        index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        self.apply_with_index(writes, index)
    }

    /// Visits the region's entries in key order, starting after `after` when
    /// given, until `visit` returns false.
    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError>;

    /// Visits the region's index entries in `range`, in its order, until
    /// `visit` returns false.
    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError>;

    /// Removes every object and every index entry of the region.
    fn drop_region(&self, region: RegionId) -> Result<(), StorageError>;

    /// Lists the regions that hold at least one object or index entry.
    fn regions(&self) -> Result<Vec<RegionId>, StorageError>;

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError>;
    /// Stores a named value durably: it and every batch applied before it
    /// are on stable storage when this returns.
    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError>;

    /// Forces everything written so far to stable storage.
    fn sync(&self) -> Result<(), StorageError>;

    /// A read-only view of every region's objects as they are now: writes
    /// applied later do not show in it. A backup takes one while writes are
    /// paused and reads it after they resume (docs/design/backup.md).
    fn snapshot(&self) -> Result<Arc<dyn EngineSnapshot>, StorageError>;
}

/// The objects of an engine frozen at one instant (see [`Engine::snapshot`]).
pub trait EngineSnapshot: Send + Sync + 'static {
    /// Visits the region's entries as they were when the snapshot was
    /// taken, in key order, starting after `after` when given, until
    /// `visit` returns false.
    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError>;
}

/// Calls `f` with the storage key of `key` in `region`, built on the stack
/// when it is short (a point read's key, read many times per search page,
/// then costs no allocation).
pub fn with_region_key<R>(region: RegionId, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    const SHORT: usize = 120;
    if key.len() <= SHORT {
        let mut buf = [0u8; 8 + SHORT];
        buf[..8].copy_from_slice(&region.0.to_be_bytes());
        buf[8..8 + key.len()].copy_from_slice(key);
        f(&buf[..8 + key.len()])
    } else {
        f(&region_key(region, key))
    }
}

/// The storage key of `key` in `region`.
pub fn region_key(region: RegionId, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + key.len());
    out.extend_from_slice(&region.0.to_be_bytes());
    out.extend_from_slice(key);
    out
}

#[cfg(test)]
pub(crate) mod conformance {
    //! The behaviour every engine must have, checked against a BTreeMap model.
    use super::*;
    use std::collections::BTreeMap;

    pub fn basic(engine: &dyn Engine) {
        let r1 = RegionId(1);
        let r2 = RegionId(2);
        assert_eq!(engine.get(r1, b"a").unwrap(), None);
        // Keys longer than a storage key built on the stack, and one just
        // short enough, read back whole through `get` and `read`.
        for len in [120, 121, 300] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let value = vec![len as u8; 3];
            engine
                .apply(vec![Write::Put {
                    region: r2,
                    key: key.clone(),
                    value: value.clone(),
                }])
                .unwrap();
            assert_eq!(engine.get(r2, &key).unwrap(), Some(value.clone()));
            let mut read = None;
            engine
                .read(r2, &key, &mut |v| read = v.map(<[u8]>::to_vec))
                .unwrap();
            assert_eq!(read, Some(value));
            assert_eq!(engine.get(r2, &key[..len - 1]).unwrap(), None);
            engine
                .apply(vec![Write::Delete { region: r2, key }])
                .unwrap();
        }
        engine
            .apply(vec![
                Write::Put {
                    region: r1,
                    key: b"a".to_vec(),
                    value: b"1".to_vec(),
                },
                Write::Put {
                    region: r1,
                    key: b"b".to_vec(),
                    value: b"2".to_vec(),
                },
                Write::Put {
                    region: r2,
                    key: b"a".to_vec(),
                    value: b"3".to_vec(),
                },
            ])
            .unwrap();
        assert_eq!(engine.get(r1, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(engine.get(r2, b"a").unwrap(), Some(b"3".to_vec()));
        let mut seen = Vec::new();
        engine
            .scan(r1, None, &mut |k, v| {
                seen.push((k.to_vec(), v.to_vec()));
                true
            })
            .unwrap();
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
        let mut after = Vec::new();
        engine
            .scan(r1, Some(b"a"), &mut |k, _| {
                after.push(k.to_vec());
                true
            })
            .unwrap();
        assert_eq!(after, vec![b"b".to_vec()]);
        engine
            .apply(vec![Write::Delete {
                region: r1,
                key: b"a".to_vec(),
            }])
            .unwrap();
        assert_eq!(engine.get(r1, b"a").unwrap(), None);
        assert_eq!(engine.regions().unwrap(), vec![r1, r2]);
        engine.drop_region(r1).unwrap();
        assert_eq!(engine.get(r1, b"b").unwrap(), None);
        assert_eq!(engine.regions().unwrap(), vec![r2]);
        engine.meta_put("id", b"7").unwrap();
        assert_eq!(engine.meta_get("id").unwrap(), Some(b"7".to_vec()));
        assert_eq!(engine.meta_get("other").unwrap(), None);

        // Index entries live beside the objects, in the same batches.
        let r3 = RegionId(3);
        engine
            .apply_with_index(
                vec![Write::Put {
                    region: r3,
                    key: b"x".to_vec(),
                    value: b"9".to_vec(),
                }],
                vec![
                    IndexWrite::Put {
                        region: r3,
                        entry: b"ix".to_vec(),
                    },
                    IndexWrite::Put {
                        region: r3,
                        entry: b"iy".to_vec(),
                    },
                ],
            )
            .unwrap();
        assert_eq!(index_entries(engine, r3, b"", None, false), [b"ix", b"iy"]);
        assert_eq!(index_entries(engine, r3, b"", None, true), [b"iy", b"ix"]);
        assert_eq!(index_entries(engine, r3, b"iy", None, false), [b"iy"]);
        assert_eq!(index_entries(engine, r3, b"", Some(b"iy"), true), [b"ix"]);
        // Objects and index entries are separate: a scan sees no entry.
        let mut keys = Vec::new();
        engine
            .scan(r3, None, &mut |k, _| {
                keys.push(k.to_vec());
                true
            })
            .unwrap();
        assert_eq!(keys, vec![b"x".to_vec()]);
        engine
            .apply_with_index(
                vec![],
                vec![IndexWrite::Delete {
                    region: r3,
                    entry: b"ix".to_vec(),
                }],
            )
            .unwrap();
        assert_eq!(index_entries(engine, r3, b"", None, false), [b"iy"]);
        assert_eq!(engine.regions().unwrap(), vec![r2, r3]);
        engine.drop_region(r3).unwrap();
        assert!(index_entries(engine, r3, b"", None, false).is_empty());
        assert_eq!(engine.regions().unwrap(), vec![r2]);
    }

    fn index_entries(
        engine: &dyn Engine,
        region: RegionId,
        start: &[u8],
        end: Option<&[u8]>,
        reverse: bool,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        engine
            .index_scan(
                region,
                IndexRange {
                    start,
                    end,
                    reverse,
                },
                &mut |e| {
                    out.push(e.to_vec());
                    true
                },
            )
            .unwrap();
        out
    }

    /// Applies random batches of index writes, object writes and region
    /// drops to the engine and to a model, and compares every index range
    /// scan (both directions, with early stops) and the region list.
    pub fn index_against_model(engine: &dyn Engine, ops: &[(u8, u8, u8)], probes: &[(u8, u8, u8)]) {
        use std::collections::BTreeSet;
        let mut index: BTreeSet<(u64, Vec<u8>)> = BTreeSet::new();
        let mut objects: BTreeSet<(u64, Vec<u8>)> = BTreeSet::new();
        for chunk in ops.chunks(4) {
            let mut batch = Vec::new();
            let mut index_batch = Vec::new();
            for &(region, entry, kind) in chunk {
                let r = u64::from(region % 4);
                let region = RegionId(r);
                // Entries of one or two bytes, so prefixes occur.
                let entry = if entry % 3 == 0 {
                    vec![entry % 8]
                } else {
                    vec![entry % 8, entry / 8 % 4]
                };
                match kind % 8 {
                    0..=3 => {
                        index.insert((r, entry.clone()));
                        index_batch.push(IndexWrite::Put { region, entry });
                    }
                    4 | 5 => {
                        index.remove(&(r, entry.clone()));
                        index_batch.push(IndexWrite::Delete { region, entry });
                    }
                    6 => {
                        objects.insert((r, entry.clone()));
                        batch.push(Write::Put {
                            region,
                            key: entry,
                            value: vec![1],
                        });
                    }
                    _ => {
                        engine
                            .apply_with_index(
                                std::mem::take(&mut batch),
                                std::mem::take(&mut index_batch),
                            )
                            .unwrap();
                        index.retain(|(x, _)| *x != r);
                        objects.retain(|(x, _)| *x != r);
                        engine.drop_region(region).unwrap();
                    }
                }
            }
            engine.apply_with_index(batch, index_batch).unwrap();
        }
        let mut regions: Vec<RegionId> = index
            .iter()
            .chain(objects.iter())
            .map(|(r, _)| RegionId(*r))
            .collect();
        regions.sort();
        regions.dedup();
        assert_eq!(engine.regions().unwrap(), regions);
        for &(region, bounds, stop) in probes {
            let r = u64::from(region % 4);
            let start = vec![bounds % 8];
            let end = (bounds / 8 % 2 == 1).then(|| vec![(bounds % 8) + bounds / 16 % 4]);
            let range = IndexRange {
                start: &start,
                end: end.as_deref(),
                reverse: stop % 2 == 1,
            };
            let stop_after = usize::from(stop / 2 % 6);
            let mut want: Vec<Vec<u8>> = index
                .iter()
                .filter(|(x, e)| *x == r && range.contains(e))
                .map(|(_, e)| e.clone())
                .collect();
            if range.reverse {
                want.reverse();
            }
            if stop_after > 0 {
                want.truncate(stop_after);
            }
            let mut got = Vec::new();
            engine
                .index_scan(RegionId(r), range, &mut |e| {
                    got.push(e.to_vec());
                    stop_after == 0 || got.len() < stop_after
                })
                .unwrap();
            assert_eq!(
                got, want,
                "region {r} range {range:?} stop after {stop_after}"
            );
        }
    }

    /// Applies random batches to the engine and to a model and compares
    /// every region's scan; a snapshot taken halfway must go on showing
    /// the model as it was then.
    pub fn against_model(engine: &dyn Engine, ops: &[(u8, u8, u8, bool)]) {
        type Model = BTreeMap<(u64, Vec<u8>), Vec<u8>>;
        let mut model: Model = BTreeMap::new();
        let mut frozen: Option<(Arc<dyn EngineSnapshot>, Model)> = None;
        let chunks: Vec<_> = ops.chunks(3).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            if i == chunks.len() / 2 {
                frozen = Some((engine.snapshot().unwrap(), model.clone()));
            }
            let mut batch = Vec::new();
            for &(region, key, value, delete) in chunk.iter() {
                let region = RegionId(u64::from(region % 4));
                let key = vec![key % 16];
                if delete {
                    model.remove(&(region.0, key.clone()));
                    batch.push(Write::Delete { region, key });
                } else {
                    model.insert((region.0, key.clone()), vec![value]);
                    batch.push(Write::Put {
                        region,
                        key,
                        value: vec![value],
                    });
                }
            }
            engine.apply(batch).unwrap();
            // Read back what the batch wrote at once: an engine that caches
            // what it reads must forget it at the next write.
            for &(region, key, ..) in chunk.iter() {
                let (region, key) = (u64::from(region % 4), vec![key % 16]);
                assert_eq!(
                    engine.get(RegionId(region), &key).unwrap().as_ref(),
                    model.get(&(region, key.clone())),
                    "read after batch {i}"
                );
            }
        }
        for region in 0..4u64 {
            for key in 0..16u8 {
                let want = model.get(&(region, vec![key]));
                let (region, key) = (RegionId(region), [key]);
                assert_eq!(engine.get(region, &key).unwrap().as_ref(), want);
                let mut read = None;
                engine
                    .read(region, &key, &mut |v| read = Some(v.map(<[u8]>::to_vec)))
                    .unwrap();
                assert_eq!(read.expect("read calls back once").as_ref(), want);
            }
        }
        let live = |region, after: Option<&[u8]>, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool| {
            engine.scan(region, after, visit)
        };
        compare_scans(&live, &model);
        if let Some((snapshot, then)) = frozen {
            let old =
                |region, after: Option<&[u8]>, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool| {
                    snapshot.scan(region, after, visit)
                };
            compare_scans(&old, &then);
        }
    }

    type Scan<'a> = dyn Fn(
            RegionId,
            Option<&[u8]>,
            &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<(), StorageError>
        + 'a;

    /// Every region's scan, whole and from after its first key, against
    /// the model.
    fn compare_scans(scan: &Scan<'_>, model: &BTreeMap<(u64, Vec<u8>), Vec<u8>>) {
        for region in 0..4u64 {
            let mut got = Vec::new();
            scan(RegionId(region), None, &mut |k, v| {
                got.push((k.to_vec(), v.to_vec()));
                true
            })
            .unwrap();
            let want: Vec<_> = model
                .iter()
                .filter(|((r, _), _)| *r == region)
                .map(|((_, k), v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(got, want, "region {region}");
            if let Some((first, _)) = want.first() {
                let mut rest = Vec::new();
                scan(RegionId(region), Some(first), &mut |k, _| {
                    rest.push(k.to_vec());
                    true
                })
                .unwrap();
                let want_rest: Vec<_> = want.iter().skip(1).map(|(k, _)| k.clone()).collect();
                assert_eq!(rest, want_rest, "region {region} after its first key");
            }
        }
    }
}
