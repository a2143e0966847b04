//! Phase 2: waiting for the healed cluster to settle, the final reads, and
//! the checks that run at the end.

use crate::check;
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use tessera_daemon::record::Record;
use tessera_storage::Engine;
use tessera_types::{DaemonId, DaemonState, Object, RegionId};
impl World {
    pub(crate) fn unsettled(&self) -> String {
        let mut why = Vec::new();
        let busy: usize = self.clients.iter().filter(|c| c.current.is_some()).count();
        if busy > 0 {
            why.push(format!("{busy} clients wait for an answer"));
        }
        if !self.coord.state.transfers.is_empty() {
            why.push(format!("transfers {:?}", self.coord.state.transfers));
        }
        for d in self.daemons.values() {
            match &d.node {
                None => why.push(format!("{} not running", d.id)),
                Some(node) => {
                    let epoch = node.config().epoch;
                    if epoch != self.coord.state.epoch {
                        why.push(format!("{} at epoch {epoch}", d.id));
                    }
                    if node.busy_keys() > 0 {
                        why.push(format!("{} busy: {}", d.id, node.describe_busy()));
                    }
                }
            }
            let state = self.coord.state.daemons.get(&d.id).map(|i| i.state);
            if state != Some(DaemonState::Available) {
                why.push(format!("{} is {state:?}", d.id));
            }
        }
        why.join("; ")
    }

    pub(crate) fn try_finish(&mut self) -> Result<(), String> {
        let idle = self.clients.iter().all(|c| c.current.is_none());
        if !idle || !self.unsettled().is_empty() {
            return Ok(());
        }
        if !self.finals_started {
            // Everything settled: read every key once more.
            self.finals_started = true;
            let keys: Vec<i64> = (0..self.knobs.keys).collect();
            self.clients[0].final_reads = keys;
            self.start_next(0);
            return Ok(());
        }
        if self.clients[0].final_reads.is_empty() {
            self.done = true;
        }
        Ok(())
    }

    // ------------------------------------------------------------ checks

    pub(crate) fn check(&self) -> Result<(), String> {
        for (key, events) in &self.history {
            if events.len() > check::EVENTS_PER_KEY_MAX {
                return Err(format!("key {key}: too many events to check"));
            }
            if let Some(e) = events.iter().find(|e| e.ret.is_none()) {
                return Err(format!("key {key}: {:?} never finished", e.op));
            }
            check::check_key(events).map_err(|e| format!("key {key}: {e}"))?;
        }
        self.check_replicas()
    }

    /// Every replica of every region holds the same records, and every
    /// object lies in exactly the regions its attributes map to.
    pub(crate) fn check_replicas(&self) -> Result<(), String> {
        let config = self.configuration();
        let space = config.space_by_id(self.space).ok_or("the space is gone")?;
        let read = |d: DaemonId, region: RegionId| {
            let mut out: BTreeMap<Vec<u8>, (u64, Option<Object>)> = BTreeMap::new();
            self.daemons[&d]
                .data
                .scan(region, None, &mut |k, v| {
                    let r = Record::decode(v).expect("valid record");
                    out.insert(k.to_vec(), (r.version.0, r.object));
                    true
                })
                .expect("memory scan");
            out
        };
        // The objects, from the key subspace.
        let mut objects: BTreeMap<Vec<u8>, (u64, Object)> = BTreeMap::new();
        for (si, layout) in space.subspaces.iter().enumerate() {
            for region in &layout.regions {
                let Some(&first) = region.chain.first() else {
                    return Err(format!("region {} has no replica", region.id));
                };
                if region.chain.len() < self.knobs.f + 1 {
                    return Err(format!(
                        "region {} has {} replicas after healing",
                        region.id,
                        region.chain.len()
                    ));
                }
                let reference = read(first, region.id);
                for &d in &region.chain[1..] {
                    let got = read(d, region.id);
                    if got != reference {
                        return Err(format!(
                            "region {} (subspace {si}) differs between {first} and {d}:\n  {first}: {reference:?}\n  {d}: {got:?}",
                            region.id
                        ));
                    }
                }
                if si == 0 {
                    for (k, (v, o)) in reference {
                        if let Some(o) = o {
                            objects.insert(k, (v, o));
                        }
                    }
                }
            }
        }
        for (si, layout) in space.subspaces.iter().enumerate().skip(1) {
            for region in &layout.regions {
                let held: BTreeSet<(Vec<u8>, u64)> = read(region.chain[0], region.id)
                    .into_iter()
                    .filter(|(_, (_, o))| o.is_some())
                    .map(|(k, (v, _))| (k, v))
                    .collect();
                let expected: BTreeSet<(Vec<u8>, u64)> = objects
                    .iter()
                    .filter(|(_, (_, o))| layout.region_of(o).id == region.id)
                    .map(|(k, (v, _))| (k.clone(), *v))
                    .collect();
                if held != expected {
                    return Err(format!(
                        "subspace {si} region {} holds {held:?}, the key subspace says {expected:?}",
                        region.id
                    ));
                }
            }
        }
        Ok(())
    }
}
