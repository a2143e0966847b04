//! Phase 2: waiting for the healed cluster to settle, the final reads, and
//! the checks that run at the end.

use crate::check;
use crate::report::{Holding, Violation};
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use tessera_daemon::record::Record;
use tessera_storage::Engine;
use tessera_types::{DaemonId, DaemonState, Object, Region, RegionId};

impl World {
    /// Why the cluster has not settled yet (empty once it has).
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

    /// Once everything settled, every key is read once more; the run is
    /// done when those reads have returned.
    pub(crate) fn try_finish(&mut self) {
        let idle = self.clients.iter().all(|c| c.current.is_none());
        if !idle || !self.unsettled().is_empty() {
            return;
        }
        if !self.finals_started {
            self.finals_started = true;
            let keys: Vec<i64> = (0..self.knobs.keys).collect();
            self.clients[0].final_reads = keys;
            self.start_next(0);
            return;
        }
        if self.clients[0].final_reads.is_empty() {
            self.done = true;
        }
    }

    /// The checks at the end of a run: every operation returned, every
    /// key's history is linearizable, and the replicas agree.
    pub(crate) fn check(&self) -> Result<(), Violation> {
        for (&key, events) in &self.history {
            if events.len() > check::EVENTS_PER_KEY_MAX {
                return Err(Violation::TooManyEvents { key });
            }
            if let Some(e) = events.iter().find(|e| e.ret.is_none()) {
                return Err(Violation::NeverFinished { key, op: e.op });
            }
            check::check_key(events)
                .map_err(|source| Violation::NotLinearizable { key, source })?;
        }
        self.check_replicas()
    }

    /// What daemon `d` stores of `region`.
    fn holding(&self, d: DaemonId, region: RegionId) -> Holding {
        let mut out = Holding::new();
        self.daemons[&d]
            .data
            .scan(region, None, &mut |k, v| {
                let r = Record::decode(v).expect("valid record");
                out.insert(k.to_vec(), (r.version.0, r.object));
                true
            })
            .expect("memory scan");
        out
    }

    /// Every region has f + 1 replicas, every replica of a region holds the
    /// same records, and every object lies in exactly the regions its
    /// attributes map to.
    fn check_replicas(&self) -> Result<(), Violation> {
        let config = self.configuration();
        let space = config.space_by_id(self.space).ok_or(Violation::SpaceGone)?;
        // The objects, from the key subspace.
        let mut objects: BTreeMap<Vec<u8>, (u64, Object)> = BTreeMap::new();
        for (subspace, layout) in space.subspaces.iter().enumerate() {
            for region in &layout.regions {
                let reference = self.check_chain(subspace, region)?;
                if subspace == 0 {
                    for (k, (v, o)) in reference {
                        if let Some(o) = o {
                            objects.insert(k, (v, o));
                        }
                    }
                }
            }
        }
        for (subspace, layout) in space.subspaces.iter().enumerate().skip(1) {
            for region in &layout.regions {
                let held: BTreeSet<(Vec<u8>, u64)> = self
                    .holding(region.chain[0], region.id)
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
                    return Err(Violation::Misplaced {
                        subspace,
                        region: region.id,
                        held: Box::new(held),
                        expected: Box::new(expected),
                    });
                }
            }
        }
        Ok(())
    }

    /// `region` has f + 1 replicas that hold the same records: what they
    /// hold.
    fn check_chain(&self, subspace: usize, region: &Region) -> Result<Holding, Violation> {
        if region.chain.len() < self.knobs.f + 1 {
            return Err(Violation::TooFewReplicas {
                region: region.id,
                replicas: region.chain.len(),
            });
        }
        let first = region.chain[0];
        let reference = self.holding(first, region.id);
        for &other in &region.chain[1..] {
            let got = self.holding(other, region.id);
            if got != reference {
                return Err(Violation::ReplicasDiffer {
                    region: region.id,
                    subspace,
                    first,
                    other,
                    reference: Box::new(reference),
                    got: Box::new(got),
                });
            }
        }
        Ok(reference)
    }
}
