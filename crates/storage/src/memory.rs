//! An in-memory engine for unit tests and the simulator.

use crate::{region_key, Engine, StorageError, Write};
use std::collections::BTreeMap;
use std::sync::Mutex;
use tessera_types::RegionId;

#[derive(Default)]
pub struct MemoryEngine {
    objects: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    meta: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryEngine {
    pub fn new() -> Self {
        Self::default()
    }
}

fn region_bounds(region: RegionId) -> (Vec<u8>, Option<Vec<u8>>) {
    let start = region.0.to_be_bytes().to_vec();
    let end = region.0.checked_add(1).map(|n| n.to_be_bytes().to_vec());
    (start, end)
}

impl Engine for MemoryEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self
            .objects
            .lock()
            .expect("poisoned")
            .get(&region_key(region, key))
            .cloned())
    }

    fn apply(&self, writes: Vec<Write>) -> Result<(), StorageError> {
        let mut objects = self.objects.lock().expect("poisoned");
        for write in writes {
            match write {
                Write::Put { region, key, value } => {
                    objects.insert(region_key(region, &key), value);
                }
                Write::Delete { region, key } => {
                    objects.remove(&region_key(region, &key));
                }
            }
        }
        Ok(())
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let objects = self.objects.lock().expect("poisoned");
        let (start, end) = region_bounds(region);
        for (k, v) in objects.range(start..) {
            if end.as_ref().is_some_and(|e| k >= e) {
                break;
            }
            let key = &k[8..];
            if after.is_some_and(|a| key <= a) {
                continue;
            }
            if !visit(key, v) {
                break;
            }
        }
        Ok(())
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        let (start, end) = region_bounds(region);
        self.objects
            .lock()
            .expect("poisoned")
            .retain(|k, _| !(k >= &start && end.as_ref().is_none_or(|e| k < e)));
        Ok(())
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        let objects = self.objects.lock().expect("poisoned");
        let mut out: Vec<RegionId> = Vec::new();
        for k in objects.keys() {
            let id = RegionId(u64::from_be_bytes(k[..8].try_into().expect("8 bytes")));
            if out.last() != Some(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.meta.lock().expect("poisoned").get(name).cloned())
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.meta
            .lock()
            .expect("poisoned")
            .insert(name.to_string(), value.to_vec());
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn conformance() {
        crate::conformance::basic(&MemoryEngine::new());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_model(ops in proptest::collection::vec(any::<(u8, u8, u8, bool)>(), 0..60)) {
            crate::conformance::against_model(&MemoryEngine::new(), &ops);
        }
    }
}
