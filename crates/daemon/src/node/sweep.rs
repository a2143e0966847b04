//! Anti-entropy at the head of a non-key region (see [`super::Job::Sweep`]).

use super::{lock, DaemonNode, Out, Output, SWEEP_OBJECTS_MAX};
use crate::chain::key_region;
use crate::record::Record;
use std::collections::HashMap;
use tessera_protocol::{HeldObjects, Message};
use tessera_types::{DaemonId, RegionId, Value, Version};

impl DaemonNode {
    /// See [`Job::Sweep`].
    pub(super) fn sweep(&self, region: RegionId, out: Out<'_>) {
        let config = self.config();
        let Some((space, _, _)) = config.region(region) else {
            return;
        };
        let after = lock(&self.sweeps).remove(&region);
        let mut held: HashMap<DaemonId, Vec<(Value, Version)>> = HashMap::new();
        let mut seen = 0;
        let mut last = None;
        let mut undecodable = None;
        let scanned = self
            .engine()
            .scan(region, after.as_deref(), &mut |key, value| {
                match Record::decode(value) {
                    Ok(record) if record.object.is_some() => {
                        if let Some(object) = record.object {
                            let key_value = object.values[0].clone();
                            let leader =
                                key_region(space, &key_value).and_then(|r| r.chain.first());
                            if let Some(&leader) = leader {
                                held.entry(leader)
                                    .or_default()
                                    .push((key_value, record.version));
                            }
                        }
                        seen += 1;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        undecodable = Some(e);
                        return false;
                    }
                }
                last = Some(key.to_vec());
                seen < SWEEP_OBJECTS_MAX
            });
        if let Err(e) = scanned {
            return self.poison("an anti-entropy sweep", &e, out);
        }
        if let Some(e) = undecodable {
            return self.poison("an anti-entropy sweep", &e, out);
        }
        if seen >= SWEEP_OBJECTS_MAX {
            if let Some(last) = last {
                lock(&self.sweeps).insert(region, last);
            }
        }
        for (leader, objects) in held {
            let msg = Message::Held(HeldObjects {
                epoch: config.epoch,
                space: space.id,
                region,
                objects,
            });
            out(Output::Send { to: leader, msg });
        }
    }
}
