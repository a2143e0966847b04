//! A replex region being rebuilt (see `crate::rebuild`): a source reports
//! the updates it holds pending in a region; the target stores entries,
//! keeping per key the newest version and every remembered writer.

use super::ReplicaCore;
use crate::rebuild::{merge_record, PendingWrite};
use crate::record::Record;
use std::collections::BTreeMap;
use tessera_protocol::TransferEntry;
use tessera_storage::Write;
use tessera_types::RegionId;

impl ReplicaCore {
    /// The updates of `region` this daemon holds pending (in flight,
    /// blocked or held), by key.
    pub fn pending_writes(&self, region: RegionId) -> BTreeMap<Vec<u8>, Vec<PendingWrite>> {
        self.region_keys(region)
            .filter(|(_, s)| !s.pending.is_empty())
            .map(|((_, key), s)| {
                let writes = s
                    .pending
                    .iter()
                    .map(|(version, p)| PendingWrite {
                        version: *version,
                        object: p.forward.object.clone(),
                        client: p.forward.client,
                    })
                    .collect();
                (key.clone(), writes)
            })
            .collect()
    }

    /// An entry of a region this daemon rebuilds: stored with
    /// [`merge_record`] over what it holds of the key.
    pub fn on_rebuild_entry(&mut self, region: RegionId, entry: TransferEntry) {
        let state_key = (region, entry.key.clone());
        let incoming = match Record::decode(&entry.record) {
            Ok(record) => record,
            Err(e) => {
                // Bytes from a peer: not ours to trust, and not a reason
                // to stop. The key is left out; the rebuild reports it.
                tracing::warn!(%region, "a rebuild entry does not decode: {e}");
                return;
            }
        };
        let stored = match self.load(&state_key) {
            Ok(r) => r,
            Err(e) => return self.fatal("reading a key a rebuild brings", e),
        };
        let Some(record) = merge_record(stored.as_ref(), incoming) else {
            return;
        };
        let write = Write::Put {
            region,
            key: entry.key,
            value: record.encode(),
        };
        if let Err(e) = self.engine.apply(vec![write]) {
            self.fatal("storing a rebuilt record", e);
        }
    }
}
