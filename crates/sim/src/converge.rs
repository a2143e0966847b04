//! Phase 2: waiting for the healed cluster to settle, the final reads, and
//! the checks that run at the end.

use crate::check::{self, KvResult};
use crate::report::{Holding, Violation};
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use tessera_daemon::record::Record;
use tessera_daemon::search::{lookup, ReadView};
use tessera_protocol::DaemonResponse;
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::sortkey::sort_key;
use tessera_types::{
    Configuration, DaemonId, DaemonState, Object, Region, RegionDirectory, RegionId, Space,
    SubspaceLayout, Value,
};

/// The objects of the space, by key bytes: version and object.
type Objects = BTreeMap<Vec<u8>, (u64, Object)>;

impl World {
    /// Why the cluster has not settled yet (empty once it has).
    pub(crate) fn unsettled(&self) -> String {
        let mut why = Vec::new();
        let frozen = self.frozen_daemons();
        if !frozen.is_empty() {
            why.push(format!("{frozen:?} paused"));
        }
        let busy: usize = self.clients.iter().filter(|c| c.busy()).count();
        if busy > 0 {
            why.push(format!("{busy} clients wait for an answer"));
        }
        if !self.coord.state.transfers.is_empty() {
            why.push(format!("transfers {:?}", self.coord.state.transfers));
        }
        for space in &self.coord.state.spaces {
            if !space.layout_settled() {
                let parts: Vec<String> = space
                    .parts()
                    .iter()
                    .filter(|p| !p.state.is_ready())
                    .map(|p| format!("{} {}", p.id, p.state))
                    .collect();
                why.push(format!("layout of {} changing: {parts:?}", space.desc.name));
            }
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
        // A region whose last replica left waits for that daemon: in a
        // replex space (one replica per region) every failed daemon leaves
        // such orphans, and its return ends them, or once it was killed,
        // a rebuild.
        if !self.coord.state.rebuilds.is_empty() {
            let running: Vec<String> = self
                .coord
                .state
                .rebuilds
                .iter()
                .map(|b| format!("{} {} -> {}", b.id, b.region, b.to))
                .collect();
            why.push(format!("rebuilds running: {running:?}"));
        }
        let config = self.configuration();
        for (&region, daemon) in &self.coord.state.orphans {
            if config
                .region(region)
                .is_some_and(|(_, _, r)| r.chain.is_empty())
            {
                why.push(format!("region {region} waits for {daemon}"));
            }
        }
        if why.is_empty() {
            // Quiet, but not yet whole: anti-entropy has orphans to repair,
            // or a region still lacks replicas.
            if let Err(e) = self.check_replicas() {
                why.push(e.to_string());
            }
        }
        why.join("; ")
    }

    /// Once everything settled, every key is read once more; the run is
    /// done when those reads have returned.
    pub(crate) fn try_finish(&mut self) {
        let idle = self.clients.iter().all(|c| !c.busy());
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

    /// The checks at the end of a run: the healed cluster is whole again,
    /// every operation returned, every key's history is linearizable, and
    /// the replicas agree.
    pub(crate) fn check(&self) -> Result<(), Violation> {
        self.check_liveness()?;
        for (&key, events) in &self.history {
            if events.len() > check::EVENTS_PER_KEY_MAX {
                return Err(Violation::TooManyEvents { key });
            }
            let unfinished = events
                .iter()
                .enumerate()
                .find(|&(i, e)| e.ret.is_none() && !self.abandoned.contains(&(key, i)));
            if let Some((_, e)) = unfinished {
                return Err(Violation::NeverFinished { key, op: e.op });
            }
            check::check_key(events)
                .map_err(|source| Violation::NotLinearizable { key, source })?;
        }
        let objects = self.check_replicas()?;
        self.check_final_objects(&objects)
    }

    /// The objects the cluster settled on are those the final reads
    /// returned: each key's object (or its absence) as its last read saw
    /// it, and no other key. Nothing writes once the final reads begin, so
    /// a region that kept a write the point leader lost, or lost one it
    /// acknowledged, shows here even when the replicas agree.
    fn check_final_objects(&self, objects: &Objects) -> Result<(), Violation> {
        for &(key, i) in &self.finals {
            let Some((_, read)) = self.history[&key][i].ret else {
                return Err(Violation::FinalReadMissing { key });
            };
            let stored = objects.get(&key_bytes(&self.knobs.key_value(key)));
            let values = stored.map(|(_, o)| (&o.values[1], &o.values[2]));
            let agrees = match (read, values) {
                (KvResult::NotFound, None) => true,
                (KvResult::Value(a, b), Some((&Value::Int(x), &Value::Int(y)))) => (a, b) == (x, y),
                _ => false,
            };
            if !agrees {
                return Err(Violation::FinalObject {
                    key,
                    read,
                    stored: Box::new(stored.map(|(_, o)| o.clone())),
                });
            }
        }
        let written: BTreeSet<Vec<u8>> = (0..self.knobs.keys)
            .map(|key| key_bytes(&self.knobs.key_value(key)))
            .collect();
        match objects.keys().find(|k| !written.contains(*k)) {
            Some(stray) => Err(Violation::StrayObject { key: stray.clone() }),
            None => Ok(()),
        }
    }

    /// After healing, however the nemesis left it, the cluster recovered
    /// by itself: every daemon runs, Available at the current epoch, and
    /// every key's final read returned. (Every region's f + 1 replicas are
    /// checked with their contents, in [`World::check_chain`].)
    fn check_liveness(&self) -> Result<(), Violation> {
        let frozen = self.daemons.values().filter(|d| d.frozen).count()
            + self.coord.members.iter().filter(|m| m.frozen).count();
        if frozen > 0 || !self.cuts.is_empty() || !self.coord.up {
            return Err(Violation::NotHealed {
                what: format!(
                    "{frozen} processes paused, cuts {:?}, coordinator up: {}",
                    self.cuts, self.coord.up
                ),
            });
        }
        let current = self.coord.state.epoch;
        for (&daemon, d) in &self.daemons {
            let Some(node) = d.node.as_ref().filter(|_| d.up) else {
                return Err(Violation::NotRunning { daemon });
            };
            let state = self.coord.state.daemons.get(&daemon).map(|i| i.state);
            if state != Some(DaemonState::Available) {
                return Err(Violation::NotAvailable { daemon, state });
            }
            let epoch = node.config().epoch;
            if epoch != current {
                return Err(Violation::Behind {
                    daemon,
                    epoch,
                    current,
                });
            }
        }
        for key in 0..self.knobs.keys {
            let returned = self
                .finals
                .iter()
                .filter(|&&(k, _)| k == key)
                .any(|&(k, i)| self.history[&k][i].ret.is_some());
            if !returned {
                return Err(Violation::FinalReadMissing { key });
            }
        }
        Ok(())
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

    /// Every region has its replicas (f + 1, or one in a replex space),
    /// every replica of a region holds the same records, and every object
    /// lies in exactly the regions its attributes map to, once in each
    /// part (the key subspace, each subspace, each replex and hybrid, each
    /// global index), at the key subspace's version. Returns the objects,
    /// by key.
    fn check_replicas(&self) -> Result<Objects, Violation> {
        let config = self.configuration();
        let space = config.space_by_id(self.space).ok_or(Violation::SpaceGone)?;
        // A dropped part's regions are deleted from every disk.
        for (&daemon, d) in &self.daemons {
            for region in d.data.regions().expect("memory regions") {
                if config.region(region).is_none() {
                    return Err(Violation::LeftoverRegion { daemon, region });
                }
            }
        }
        // The objects, from the key subspace (whose regions are checked
        // below like every part's: each key in its own region only).
        let replicas = space.desc.replicas_per_region();
        let mut objects = Objects::new();
        for (subspace, layout) in space.subspaces.iter().enumerate() {
            for region in &layout.regions {
                let reference = self.check_chain(subspace, region, replicas)?;
                if subspace == 0 {
                    for (k, (v, o)) in reference {
                        if let Some(o) = o {
                            objects.insert(k, (v, o));
                        }
                    }
                }
            }
        }
        for (subspace, layout) in space.subspaces.iter().enumerate() {
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
                if !layout.kind.holds_objects() {
                    self.check_indexlet(&config, space, layout, region, &objects)?;
                }
            }
        }
        Ok(objects)
    }

    /// An indexlet holds each of its objects' projection (not the object),
    /// and a lookup of its whole range at its tail, read in small pages,
    /// returns exactly `(value, key)` of those objects in value order.
    fn check_indexlet(
        &self,
        config: &Configuration,
        space: &Space,
        layout: &SubspaceLayout,
        region: &Region,
        objects: &Objects,
    ) -> Result<(), Violation> {
        let attr = layout.attrs[0];
        let mine: Vec<&Object> = objects
            .values()
            .map(|(_, o)| o)
            .filter(|o| layout.region_of(o).id == region.id)
            .collect();
        let tail = *region.chain.last().expect("replicas were checked");
        for (key, (_, stored)) in self.holding(tail, region.id) {
            let Some(stored) = stored else { continue };
            let object = &objects[&key].1;
            if stored != layout.stored_form(&space.desc, object) {
                return Err(Violation::Lookup {
                    region: region.id,
                    why: format!("holds {stored:?} for {object:?}"),
                });
            }
        }
        let mut expected: Vec<(Value, Value)> = mine
            .iter()
            .map(|o| (o.values[attr].clone(), o.values[0].clone()))
            .collect();
        expected.sort_by_key(|(value, key)| (sort_key(value), key_bytes(key)));
        let directory = RegionDirectory::new(config);
        let view = ReadView {
            config,
            directory: &directory,
            me: tail,
            engine: &*self.daemons[&tail].data,
        };
        let mut got = Vec::new();
        let mut after = None;
        loop {
            let page = lookup(
                &view,
                config.epoch,
                space.id,
                region.id,
                &[],
                false,
                after.as_ref(),
                Some(3),
            );
            match page {
                Ok(DaemonResponse::LookupPage {
                    entries,
                    more,
                    last,
                }) => {
                    got.extend(entries);
                    if !more {
                        break;
                    }
                    after = last;
                }
                other => {
                    return Err(Violation::Lookup {
                        region: region.id,
                        why: format!("answered {other:?}"),
                    })
                }
            }
        }
        if got != expected {
            return Err(Violation::Lookup {
                region: region.id,
                why: format!("returned {got:?}, expected {expected:?}"),
            });
        }
        Ok(())
    }

    /// `region` has `replicas` replicas that hold the same objects, each at
    /// the same version: what they hold. (Tombstones may differ: each
    /// replica collects its own once the horizon lets it.)
    fn check_chain(
        &self,
        subspace: usize,
        region: &Region,
        replicas: usize,
    ) -> Result<Holding, Violation> {
        if region.chain.len() < replicas {
            return Err(Violation::TooFewReplicas {
                region: region.id,
                replicas: region.chain.len(),
            });
        }
        // A daemon lost for good may stay in chains until it is killed or
        // found offline; the settled cluster must not name it.
        if let Some(&daemon) = region.chain.iter().find(|d| self.lost.contains(d)) {
            return Err(Violation::NotRunning { daemon });
        }
        let live = |d: DaemonId| {
            let mut holding = self.holding(d, region.id);
            holding.retain(|_, (_, object)| object.is_some());
            holding
        };
        let first = region.chain[0];
        let reference = live(first);
        for &other in &region.chain[1..] {
            let got = live(other);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::testing::quiet_world;
    use tessera_coordinator::state::Command;

    fn finished(seed: u64) -> World {
        let mut world = quiet_world(seed);
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        world
    }

    #[test]
    fn a_process_left_paused_fails_the_liveness_check() {
        let mut world = finished(4);
        world.coord.members[1].frozen = true;
        assert!(matches!(world.check(), Err(Violation::NotHealed { .. })));
    }

    #[test]
    fn a_daemon_left_offline_fails_the_liveness_check() {
        let mut world = finished(5);
        let first = *world.daemons.keys().next().expect("daemons");
        world
            .coord
            .state
            .apply(Command::DaemonOffline { id: first });
        let outcome = world.check();
        assert!(
            matches!(outcome, Err(Violation::NotAvailable { daemon, .. }) if daemon == first),
            "{outcome:?}"
        );
    }

    #[test]
    fn a_daemon_behind_the_current_epoch_fails_the_liveness_check() {
        let mut world = finished(6);
        let last = *world.daemons.keys().last().expect("daemons");
        // Any configuration change the daemons have not heard of.
        world.coord.state.apply(Command::DaemonOffline { id: last });
        let outcome = world.check();
        assert!(
            matches!(outcome, Err(Violation::Behind { .. })),
            "{outcome:?}"
        );
    }

    #[test]
    fn a_missing_final_read_fails_the_liveness_check() {
        let mut world = finished(7);
        world.finals.retain(|&(key, _)| key != 1);
        assert!(matches!(
            world.check(),
            Err(Violation::FinalReadMissing { key: 1 })
        ));
    }
}
