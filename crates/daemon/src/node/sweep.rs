//! Anti-entropy at the head of a non-key region (see [`super::Job::Sweep`]).

use super::{lock, DaemonNode, Out, Output, SWEEP_OBJECTS_MAX};
use crate::chain::key_region;
use crate::record::Record;
use std::collections::HashMap;
use std::sync::Mutex;
use tessera_protocol::{HeldObjects, Message};
use tessera_types::coordinate::key_value;
use tessera_types::{DaemonId, RegionId, Value, Version};

/// Why a round over part of a region stopped short.
#[derive(Debug, thiserror::Error)]
pub(super) enum RoundFailed {
    #[error(transparent)]
    Storage(#[from] tessera_storage::StorageError),
    #[error(transparent)]
    Record(#[from] crate::record::DecodeRecordError),
}

impl DaemonNode {
    /// One round of a job that walks `region` a part at a time: decodes
    /// the records after the cursor `cursors` keeps for the region and
    /// hands each to `visit`, which says whether it counts toward `max`;
    /// at `max` the cursor stays at the last record, else the next round
    /// starts over.
    pub(super) fn scan_round(
        &self,
        cursors: &Mutex<HashMap<RegionId, Vec<u8>>>,
        region: RegionId,
        max: usize,
        mut visit: impl FnMut(&[u8], Record) -> bool,
    ) -> Result<(), RoundFailed> {
        let after = lock(cursors).remove(&region);
        let mut counted = 0;
        let mut last = None;
        let mut undecodable = None;
        self.engine()
            .scan(region, after.as_deref(), &mut |key, value| {
                match Record::decode(value) {
                    Ok(record) => {
                        if visit(key, record) {
                            counted += 1;
                        }
                    }
                    Err(e) => {
                        undecodable = Some(e);
                        return false;
                    }
                }
                last = Some(key.to_vec());
                counted < max
            })?;
        if let Some(e) = undecodable {
            return Err(e.into());
        }
        if counted >= max {
            if let Some(last) = last {
                lock(cursors).insert(region, last);
            }
        }
        Ok(())
    }

    /// See [`Job::Sweep`].
    pub(super) fn sweep(&self, region: RegionId, out: Out<'_>) {
        let config = self.config();
        let Some((space, _, _)) = config.region(region) else {
            return;
        };
        // Per point leader: the live objects, and the tombstones.
        type Reports = (Vec<(Value, Version)>, Vec<(Value, Version)>);
        let mut held: HashMap<DaemonId, Reports> = HashMap::new();
        let scanned = self.scan_round(&self.sweeps, region, SWEEP_OBJECTS_MAX, |key, record| {
            let (key_value, live) = match &record.object {
                Some(object) => (object.values[0].clone(), true),
                None => match key_value(key) {
                    Some(value) => (value, false),
                    None => return false,
                },
            };
            if let Some(&leader) = key_region(space, &key_value).and_then(|r| r.chain.first()) {
                let reports = held.entry(leader).or_default();
                let list = if live { &mut reports.0 } else { &mut reports.1 };
                list.push((key_value, record.version));
            }
            true
        });
        if let Err(e) = scanned {
            return self.poison("an anti-entropy sweep", &e, out);
        }
        for (leader, (objects, removed)) in held {
            let msg = Message::Held(HeldObjects {
                epoch: config.epoch,
                space: space.id,
                region,
                objects,
                removed,
            });
            out(Output::Send { to: leader, msg });
        }
    }
}
