//! Tombstone collection, and a transfer target's deletion of what a
//! region no longer holds (see `crate::transfer` and the coordinator's
//! `tombstones` module for why both are safe).

use super::ReplicaCore;
use tessera_storage::Write;
use tessera_types::{RegionId, Version};

impl ReplicaCore {
    /// Deletes the tombstone of `key` in `region` if it is still the one
    /// at `version`, the configuration's tombstone horizon lets it go, and
    /// no update of the key is under way here. True when it was deleted.
    pub fn collect_tombstone(&mut self, region: RegionId, key: &[u8], version: Version) -> bool {
        if version >= Version::floor(self.config.tombstone_horizon) || self.held.contains(&region) {
            return false;
        }
        let state_key = (region, key.to_vec());
        if self.keys.get(&state_key).is_some_and(|s| !s.is_idle()) {
            return false;
        }
        match self.load(&state_key) {
            Ok(Some(record)) if record.object.is_none() && record.version == version => {}
            Ok(_) => return false, // written again since the scan
            Err(e) => {
                self.fatal("reading a tombstone to collect", e);
                return false;
            }
        }
        let write = Write::Delete {
            region,
            key: key.to_vec(),
        };
        if let Err(e) = self.write(vec![write]) {
            self.fatal("collecting a tombstone", e);
            return false;
        }
        true
    }

    /// The oldest version of an update this core holds in flight (pending
    /// or buffered), if any: the coordinator keeps the tombstone horizon
    /// at or below its epoch.
    pub fn oldest_in_flight(&self) -> Option<Version> {
        self.keys
            .values()
            .flat_map(|s| {
                s.pending
                    .keys()
                    .next()
                    .into_iter()
                    .chain(s.buffered.keys().next())
            })
            .min()
            .copied()
    }

    /// As a transfer's target, before joining the chain: `key` is gone
    /// from the region (the source's scan of its bucket did not bring it).
    pub fn drop_stale(&mut self, region: RegionId, key: &[u8]) {
        let write = Write::Delete {
            region,
            key: key.to_vec(),
        };
        if let Err(e) = self.write(vec![write]) {
            self.fatal("deleting a key a transfer replaced", e);
        }
    }
}
