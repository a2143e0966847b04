//! A replex region being rebuilt (see `crate::rebuild`): a source reports
//! what it holds of a region's keys, committed and pending; the target
//! stores the newest committed record per key, remembers the keys some
//! source holds an update of pending, and settles them when the region
//! joins: the base committed, the updates above it driven down the chain
//! by a rebuilt point leader.

use super::{Pending, Phase, ReplicaCore, StateKey};
use crate::chain::sketch_hops;
use crate::rebuild::{merge_record, settle, PendingWrite, Settled};
use crate::record::Record;
use std::collections::BTreeMap;
use tessera_protocol::{ChainForward, DecodeObjectError, ObjectBytes, RebuildEntry};
use tessera_storage::Write;
use tessera_types::coordinate::key_value;
use tessera_types::RegionId;

impl ReplicaCore {
    /// The updates of `region` this daemon holds pending (in flight,
    /// blocked or held), by key.
    pub fn pending_writes(&self, region: RegionId) -> BTreeMap<Vec<u8>, Vec<PendingWrite>> {
        self.region_keys(region)
            .filter(|(_, s)| !s.pending.is_empty())
            .filter_map(|((_, key), s)| {
                let writes = s.pending.values().map(|p| {
                    // Encoded here or checked on arrival (`fits_space`),
                    // so it decodes.
                    let object = p.forward.object.as_ref().map(ObjectBytes::decode);
                    Ok(PendingWrite {
                        version: p.forward.version,
                        object: object.transpose()?,
                        client: p.forward.client,
                        follows: p.forward.hops[p.forward.position as usize].after,
                    })
                });
                match writes.collect::<Result<Vec<_>, DecodeObjectError>>() {
                    Ok(writes) => Some((key.clone(), writes)),
                    Err(e) => {
                        tracing::error!(%region, ?key, "a pending update's object does not decode: {e}");
                        None
                    }
                }
            })
            .collect()
    }

    /// An entry of a region this daemon rebuilds: its committed record is
    /// stored with [`merge_record`] over what the daemon holds of the key;
    /// its pending updates wait for the region to join.
    pub fn on_rebuild_entry(&mut self, region: RegionId, entry: RebuildEntry) {
        let state_key = (region, entry.key);
        if self
            .keys
            .get(&state_key)
            .is_some_and(|s| !s.pending.is_empty())
        {
            // Only a refresh's target, heading the region, holds updates of
            // it pending: a daemon that did not restart, which knows every
            // update of the key it started and drives them itself.
            return;
        }
        let committed = match entry.committed.as_deref().map(Record::decode).transpose() {
            Ok(record) => record,
            Err(e) => {
                // Bytes from a peer: not ours to trust, and not a reason
                // to stop. The key is left out; the rebuild reports it.
                tracing::warn!(%region, "a rebuild entry does not decode: {e}");
                return;
            }
        };
        let (refreshed, key_part) = self
            .config
            .region(region)
            .map_or((false, false), |(_, part, r)| {
                (r.chain.contains(&self.me), part == 0)
            });
        if refreshed && !key_part {
            // A region of another part whose daemon restarted: it forgot
            // the updates it held pending, which the parts after it may
            // have committed since (and a key region rebuilt meanwhile may
            // count as committed, so that nobody drives them through this
            // region again: the next update would wait here for ever,
            // simulator seed 146007266). A version a source committed was
            // applied here first (the chain runs in part order, and commits
            // run back from its tail), so it is stored as committed if newer
            // than the copy kept. The sources' pending updates are not
            // taken: a member before this region drives them again.
            let Some(incoming) = committed else {
                return;
            };
            let stored = match self.load(&state_key) {
                Ok(r) => r,
                Err(e) => return self.fatal("reading a key a refresh brings", e),
            };
            if let Some(record) = merge_record(stored.as_ref(), incoming) {
                self.store(&state_key, Some(&record));
            }
            return;
        }
        if refreshed {
            let own = match self.load(&state_key) {
                Ok(r) => r,
                Err(e) => return self.fatal("reading a key a refresh brings", e),
            };
            self.rebuilt.entry(state_key).or_default().add_refreshed(
                own.as_ref(),
                committed.as_ref(),
                entry.pending,
            );
            return;
        }
        if let Some(incoming) = committed.clone() {
            let stored = match self.load(&state_key) {
                Ok(r) => r,
                Err(e) => return self.fatal("reading a key a rebuild brings", e),
            };
            // A live copy older than another source's committed version is
            // lagging: every source of a key region follows it in the
            // chain, and each part has one region that holds the object
            // live and sees every update of it, so that copy missed an
            // update a member held pending and lost (a restart, or a
            // region rebuilt meanwhile from the parts before it). The point
            // leader that would have driven it again is the region being
            // rebuilt, so the update is in flight (`Unsettled::lagging`;
            // simulator seed 115001894). The incoming copy is cloned only
            // when it is the one lagging.
            let incoming_lags = key_part
                && incoming.object.is_some()
                && stored
                    .as_ref()
                    .is_some_and(|s| incoming.version < s.version);
            let incoming_copy = incoming_lags.then(|| incoming.clone());
            let merged = merge_record(stored.as_ref(), incoming);
            // The incoming copy lags whether or not the merge kept
            // something of it (its writers, which the newer record may not
            // remember: simulator seed 142008075 lost the lag that way, and
            // a replex region kept a stale copy).
            let lagging = match (key_part, stored, &merged) {
                _ if incoming_lags => incoming_copy,
                (true, Some(old), Some(new))
                    if old.object.is_some() && old.version < new.version =>
                {
                    Some(old)
                }
                _ => None,
            };
            if let Some(record) = merged {
                if !self.store(&state_key, Some(&record)) {
                    return;
                }
            }
            if let Some(live) = lagging {
                self.rebuilt
                    .entry(state_key.clone())
                    .or_default()
                    .lagging(live);
            }
        }
        // A write pending at the version the source committed is a
        // backfill sending the committed object to a part being built:
        // no update in flight above the record. Counted as one, it made
        // the key look new, and the rebuilt key region dropped the object
        // until the backfill came back (simulator seed 152001614). The
        // region's new point leader walks its keys again for the part.
        let mut pending = entry.pending;
        if let Some(c) = &committed {
            pending.retain(|w| w.version > c.version);
        }
        if !pending.is_empty() {
            self.rebuilt
                .entry(state_key)
                .or_default()
                .add(committed.as_ref(), pending);
        }
    }

    /// A rebuild of `region` to this daemon ended or starts over (its
    /// partial copy is cleared): what it learned of pending updates goes.
    pub fn forget_rebuild(&mut self, region: RegionId) {
        self.rebuilt.retain(|(r, _), _| *r != region);
    }

    /// After a new configuration: settles the keys of every rebuilt region
    /// this daemon is now a member of ([`settle`]). The base is stored; a
    /// rebuilt key region's head starts the updates above it down their
    /// chains as its own pending updates (blocked while a region on the
    /// way has no daemon).
    pub(super) fn settle_rebuilt(&mut self) {
        let config = self.config.clone();
        let joined: Vec<StateKey> = self
            .rebuilt
            .keys()
            .filter(|(region, _)| {
                // A refresh's target heads the region while it runs.
                config
                    .region(*region)
                    .is_some_and(|(_, _, r)| r.chain.contains(&self.me))
                    && !config.rebuilding(*region)
            })
            .cloned()
            .collect();
        for state_key in joined {
            let unsettled = self.rebuilt.remove(&state_key).expect("listed above");
            let Some((space, part, region)) = config.region(state_key.0) else {
                continue;
            };
            let stored = match self.load(&state_key) {
                Ok(r) => r,
                Err(e) => return self.fatal("reading a rebuilt key", e),
            };
            let Settled {
                base,
                drive,
                mut folded,
            } = settle(part == 0, stored.as_ref(), unsettled);
            if !self.store(&state_key, base.as_ref()) {
                return;
            }
            let leads = region.chain.first() == Some(&self.me);
            let Some(key) = key_value(&state_key.1)
                .filter(|k| leads && !drive.is_empty() && space.key_region(k).ok() == Some(region))
            else {
                continue;
            };
            let base_version = base.as_ref().map(|r| r.version);
            let mut prev = base.map(|r| (r.version, r.object));
            for write in drive {
                // The base's own version driven again (`settle`): what the
                // key held before it is unknown, so its hops are drawn as
                // for a key new to every part, as when nothing is committed.
                let again = Some(write.version) == base_version;
                let (prev_version, old) = match &prev {
                    Some((v, o)) if !again => (Some(*v), o.as_ref()),
                    _ => (None, None),
                };
                let (hops, blocked) = sketch_hops(
                    space,
                    &key,
                    old,
                    write.object.as_ref(),
                    prev_version,
                    self.me,
                );
                let forward = ChainForward {
                    epoch: config.epoch,
                    from: self.me,
                    space: space.id,
                    key: key.clone(),
                    version: write.version,
                    hops,
                    position: 0,
                    object: write.object.as_ref().map(ObjectBytes::encode),
                    client: write.client,
                };
                prev = Some((write.version, write.object));
                let writers = folded.remove(&write.version).unwrap_or_default();
                if blocked || again {
                    // Blocked: rechained by the configuration that gives
                    // the region on its way a daemon again (see
                    // `reconfig`). Driven again: pending here although
                    // committed here (which `apply_forward` would take for
                    // done), sent down the chain and committed again when
                    // acknowledged.
                    let version = forward.version;
                    let phase = if blocked {
                        Phase::Blocked
                    } else if self.held.contains(&state_key.0) {
                        Phase::Held { blocked: false }
                    } else {
                        Phase::Sending {
                            sent_tick: self.tick,
                        }
                    };
                    self.keys
                        .entry(state_key.clone())
                        .or_default()
                        .pending
                        .insert(
                            version,
                            Pending {
                                forward,
                                replies: Vec::new(),
                                phase,
                                folded: writers,
                            },
                        );
                    if !blocked {
                        self.continue_pending(&state_key, version);
                    }
                } else {
                    self.apply_forward_folding(forward, Vec::new(), writers);
                }
            }
        }
    }

    /// Writes `record` as the key's record, or deletes the key when
    /// `None`; false when storage failed (the daemon is poisoned).
    fn store(&mut self, state_key: &StateKey, record: Option<&Record>) -> bool {
        let write = match record {
            Some(record) => Write::Put {
                region: state_key.0,
                key: state_key.1.clone(),
                value: record.encode(),
            },
            None => Write::Delete {
                region: state_key.0,
                key: state_key.1.clone(),
            },
        };
        match self.write(vec![write]) {
            Ok(()) => true,
            Err(e) => {
                self.fatal("storing a rebuilt record", e);
                false
            }
        }
    }
}
