//! `tessera-storage`: where a daemon keeps its regions' objects.
//!
//! What it is: the [`Engine`] trait — a region-scoped byte map plus a small
//! metadata map, with atomic batches — and two implementations: [`FjallEngine`]
//! (durable, on disk, the default) and [`MemoryEngine`] (for unit tests and the
//! simulator).
//!
//! What it is not: it knows nothing of values, versions or chains; the daemon
//! decides what the bytes mean. It never interprets keys beyond their region
//! prefix.
//!
//! Layout in fjall: keyspace `objects` holds `region id (u64 BE) ++ key bytes`
//! → value bytes, so one region is one contiguous key range; keyspace `meta`
//! holds named records (the daemon's instance id, its last configuration).

mod fjall_engine;
mod memory;

pub use fjall_engine::{Durability, FjallEngine};
pub use memory::MemoryEngine;
use tessera_types::RegionId;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The engine failed; after a failed write or sync the engine refuses
    /// further writes, because what reached disk is unknown.
    #[error("storage engine error: {0}")]
    Engine(String),
    #[error("storage engine refuses writes after an earlier failure")]
    Poisoned,
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

/// A durable, region-scoped byte map. Implementations are internally
/// synchronized; every method may be called from any thread.
pub trait Engine: Send + Sync + 'static {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// Applies every write or none.
    fn apply(&self, writes: Vec<Write>) -> Result<(), StorageError>;

    /// Visits the region's entries in key order, starting after `after` when
    /// given, until `visit` returns false.
    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError>;

    /// Removes every entry of the region.
    fn drop_region(&self, region: RegionId) -> Result<(), StorageError>;

    /// Lists the regions that hold at least one entry.
    fn regions(&self) -> Result<Vec<RegionId>, StorageError>;

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError>;
    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError>;

    /// Forces everything written so far to stable storage.
    fn sync(&self) -> Result<(), StorageError>;
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
    }

    /// Applies random batches to the engine and to a model and compares
    /// every region's scan.
    pub fn against_model(engine: &dyn Engine, ops: &[(u8, u8, u8, bool)]) {
        let mut model: BTreeMap<(u64, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for chunk in ops.chunks(3) {
            let mut batch = Vec::new();
            for &(region, key, value, delete) in chunk {
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
        }
        for region in 0..4u64 {
            let mut got = Vec::new();
            engine
                .scan(RegionId(region), None, &mut |k, v| {
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
        }
    }
}
