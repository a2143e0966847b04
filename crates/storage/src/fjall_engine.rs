//! The default engine: fjall, an embedded log-structured store with a
//! journal.

use crate::{region_key, Engine, StorageError, Write};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use tessera_types::RegionId;

/// When committed writes reach stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every batch reaches the operating system before `apply` returns (it
    /// survives a crash of the process); the daemon fsyncs on a short
    /// interval (a power loss may lose that interval).
    #[default]
    Interval,
    /// Every batch is fsynced before `apply` returns.
    Always,
}

pub struct FjallEngine {
    db: Database,
    objects: Keyspace,
    meta: Keyspace,
    durability: Durability,
    /// Set after a failed write or sync: what reached disk is unknown, so
    /// the engine refuses further writes rather than guess.
    poisoned: AtomicBool,
}

fn engine_err(e: fjall::Error) -> StorageError {
    StorageError::Engine(e.to_string())
}

impl FjallEngine {
    pub fn open(path: &Path, durability: Durability) -> Result<Self, StorageError> {
        let db = Database::builder(path).open().map_err(engine_err)?;
        let objects = db
            .keyspace("objects", KeyspaceCreateOptions::default)
            .map_err(engine_err)?;
        let meta = db
            .keyspace("meta", KeyspaceCreateOptions::default)
            .map_err(engine_err)?;
        Ok(FjallEngine {
            db,
            objects,
            meta,
            durability,
            poisoned: AtomicBool::new(false),
        })
    }

    fn check_writable(&self) -> Result<(), StorageError> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(StorageError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn after_write(&self, result: Result<(), fjall::Error>) -> Result<(), StorageError> {
        let result = result.and_then(|()| match self.durability {
            Durability::Always => self.db.persist(PersistMode::SyncAll),
            Durability::Interval => Ok(()),
        });
        result.map_err(|e| {
            self.poisoned.store(true, Ordering::Release);
            engine_err(e)
        })
    }
}

impl Engine for FjallEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self
            .objects
            .get(region_key(region, key))
            .map_err(engine_err)?
            .map(|v| v.to_vec()))
    }

    fn apply(&self, writes: Vec<Write>) -> Result<(), StorageError> {
        self.check_writable()?;
        let mut batch = self.db.batch();
        for write in writes {
            match write {
                Write::Put { region, key, value } => {
                    batch.insert(&self.objects, region_key(region, &key), value)
                }
                Write::Delete { region, key } => {
                    batch.remove(&self.objects, region_key(region, &key))
                }
            }
        }
        self.after_write(batch.commit())
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let start = match after {
            Some(a) => {
                let mut k = region_key(region, a);
                k.push(0); // the smallest key greater than `a`
                k
            }
            None => region.0.to_be_bytes().to_vec(),
        };
        let iter = match region.0.checked_add(1) {
            Some(next) => self.objects.range(start..next.to_be_bytes().to_vec()),
            None => self.objects.range(start..),
        };
        for guard in iter {
            let (k, v) = guard.into_inner().map_err(engine_err)?;
            if !visit(&k[8..], &v) {
                break;
            }
        }
        Ok(())
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        self.check_writable()?;
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
            self.apply(writes)?;
        }
        Ok(())
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        let mut out = Vec::new();
        let mut from: Option<u64> = Some(0);
        // Jump from region to region instead of walking every key.
        while let Some(start) = from {
            let Some(guard) = self.objects.range(start.to_be_bytes().to_vec()..).next() else {
                break;
            };
            let key = guard.key().map_err(engine_err)?;
            let Ok(prefix) = <[u8; 8]>::try_from(&key[..8.min(key.len())]) else {
                return Err(StorageError::Engine(
                    "object key shorter than its region prefix".into(),
                ));
            };
            let id = u64::from_be_bytes(prefix);
            out.push(RegionId(id));
            from = id.checked_add(1);
        }
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

    fn sync(&self) -> Result<(), StorageError> {
        self.db.persist(PersistMode::SyncAll).map_err(|e| {
            self.poisoned.store(true, Ordering::Release);
            engine_err(e)
        })
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
            e.meta_put("id", b"3").unwrap();
        }
        let e = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
        assert_eq!(e.get(RegionId(9), b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(e.meta_get("id").unwrap(), Some(b"3".to_vec()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn matches_model(ops in proptest::collection::vec(any::<(u8, u8, u8, bool)>(), 0..60)) {
            let dir = tempfile::tempdir().unwrap();
            let engine = FjallEngine::open(dir.path(), Durability::Interval).unwrap();
            crate::conformance::against_model(&engine, &ops);
        }
    }
}
