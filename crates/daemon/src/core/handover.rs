//! Transfers of a region: the source holds the region while it hands
//! over and ships every commit to the target; the target stores the
//! entries it receives.

use super::{Effect, KeyState, Phase, ReplicaCore, StateKey};
use crate::rebuild::supersedes;
use crate::record::Record;
use tessera_protocol::TransferEntry;
use tessera_storage::Write;
use tessera_types::{RegionId, Version};

impl ReplicaCore {
    /// Committed entries of a region this daemon receives by transfer. Per
    /// key the highest version wins, whether it came from the source's scan,
    /// from a commit the source shipped later, or from the chain itself; at
    /// one version an object wins over a tombstone.
    pub fn on_transfer_entry(&mut self, region: RegionId, entry: TransferEntry) {
        let state_key = (region, entry.key.clone());
        let stored = match self.load(&state_key) {
            Ok(r) => r,
            Err(e) => {
                self.fatal("reading a key a transfer brings", e);
                return;
            }
        };
        // Removals arrive as tombstone records, so the stored version
        // mostly tells whether this entry is news. A tombstone at the
        // entry's version may be one a rebuild left, from a region the
        // update moved the object out of: the source's object replaces it.
        let news = stored.is_none_or(|s| {
            supersedes(s.version, s.object.is_some(), entry.version, || {
                Record::decode(&entry.record).is_ok_and(|r| r.object.is_some())
            })
        });
        if !news {
            return;
        }
        let write = Write::Put {
            region,
            key: entry.key.clone(),
            value: entry.record.clone(),
        };
        if let Err(e) = self.write(vec![write]) {
            self.fatal("storing a transferred record", e);
            return;
        }
        // This daemon may itself be the source of a transfer of the region
        // whose scan has passed the key already (a late entry of the
        // transfer that made it a member): pass the entry on like a commit.
        self.ship(region, &entry.key, entry.version, &entry.record);
        self.release_buffered(&state_key);
        self.run_local();
    }

    /// Holds `region` for a transfer's hand-over: updates that arrive from
    /// now on wait here, neither sent on nor committed, until
    /// [`Self::release`]. Those already sent on complete as usual (their
    /// commits are shipped to the target); [`Self::in_flight`] counts them.
    pub fn hold(&mut self, region: RegionId) {
        self.held.insert(region);
    }

    /// Updates of `region` this daemon sent on (or was sending) before the
    /// hold and has not committed yet. When none is left and the target has
    /// every shipped commit, it holds all the region holds downstream.
    pub fn in_flight(&self, region: RegionId) -> usize {
        self.region_keys(region)
            .map(|(_, s)| {
                s.pending
                    .values()
                    .filter(|p| !matches!(p.phase, Phase::Held { .. }))
                    .count()
            })
            .sum()
    }

    pub(super) fn region_keys(
        &self,
        region: RegionId,
    ) -> impl Iterator<Item = (&StateKey, &KeyState)> {
        self.keys
            .range((region, Vec::new())..)
            .take_while(move |(k, _)| k.0 == region)
    }

    /// Ends the hold of `region`: the updates that waited go on along their
    /// chains as the current configuration draws them (to the target, once
    /// it is the region's tail).
    pub fn release(&mut self, region: RegionId) {
        if !self.held.remove(&region) {
            return;
        }
        let waiting: Vec<(StateKey, Version)> = self
            .region_keys(region)
            .flat_map(|(k, s)| {
                s.pending
                    .iter()
                    .filter(|(_, p)| matches!(p.phase, Phase::Held { .. }))
                    .map(move |(v, _)| (k.clone(), *v))
            })
            .collect();
        for (state_key, version) in waiting {
            let tick = self.tick;
            if let Some(p) = self.pending_mut(&state_key, version) {
                p.phase = match p.phase {
                    Phase::Held { blocked: true } => Phase::Blocked,
                    Phase::Held { blocked: false } => Phase::Sending { sent_tick: tick },
                    other @ (Phase::Sending { .. } | Phase::Acked | Phase::Blocked) => other,
                };
            }
            self.continue_pending(&state_key, version);
        }
        self.run_local();
    }

    /// Hands a record just stored in `region` to every transfer this
    /// daemon sends of that region.
    pub(super) fn ship(&mut self, region: RegionId, key: &[u8], version: Version, record: &[u8]) {
        for transfer in self.outgoing.get(&region).into_iter().flatten() {
            let entry = TransferEntry {
                key: key.to_vec(),
                version,
                record: record.to_vec(),
            };
            self.effects.push(Effect::Ship {
                transfer: *transfer,
                entry,
            });
        }
    }
}
