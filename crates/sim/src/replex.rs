//! What the simulator counts of a replex space (issue 13): crashes that
//! leave its regions without a replica, and updates that move an object
//! from one region of a replex (or hybrid) to another.
//!
//! A replex seed's space has one replica per region, so the nemesis may
//! fail any daemon (see `World::may_fail`): its regions wait for it as
//! orphans, and writes crossing them wait too. Nothing here decides
//! anything; the chain and the coordinator are the real ones.

use crate::world::World;
use std::collections::BTreeSet;
use tessera_daemon::record::Record;
use tessera_protocol::{ChainForward, ChainMsg, HopWrite, Message};
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::{DaemonId, RegionId, SubspaceKind};

impl World {
    /// Counts a crash of `d` that takes the only replica of regions of a
    /// replex space away, and whether any of them held an object.
    pub(crate) fn count_replex_crash(&mut self, d: DaemonId) {
        let regions: Vec<RegionId> = self
            .coord
            .state
            .spaces
            .iter()
            .filter(|space| space.desc.replex.is_some())
            .flat_map(|space| space.subspaces.iter())
            .flat_map(|layout| layout.regions.iter())
            .filter(|region| region.chain.contains(&d))
            .map(|region| region.id)
            .collect();
        if regions.is_empty() {
            return;
        }
        self.report.faults.replex_crashes += 1;
        let data = &self.daemons[&d].data;
        let holds_object = regions.iter().any(|&region| {
            let mut found = false;
            data.scan(region, None, &mut |_, v| {
                found = Record::decode(v).is_ok_and(|r| r.object.is_some());
                !found
            })
            .expect("memory scan");
            found
        });
        if holds_object {
            self.report.faults.replex_crashes_with_objects += 1;
        }
    }

    /// Notes a chain message a daemon sends: an update whose chain leaves
    /// one region of a replex or hybrid for another of the same part
    /// relocates its object there. Each update (key and version) counts
    /// once, however often it is forwarded or sent again.
    pub(crate) fn note_relocation(&mut self, msg: &Message) {
        let Message::Chain(ChainMsg::Forward(forward)) = msg else {
            return;
        };
        if self.knobs.replex.is_none() || !self.relocates_in_replex(forward) {
            return;
        }
        let update = (key_bytes(&forward.key), forward.version.0);
        self.relocations.insert(update);
        self.report.replex_relocations = self.relocations.len() as u64;
    }

    fn relocates_in_replex(&self, forward: &ChainForward) -> bool {
        let Some(space) = self
            .coord
            .state
            .spaces
            .iter()
            .find(|s| s.id == forward.space)
        else {
            return false;
        };
        space
            .subspaces
            .iter()
            .filter(|layout| matches!(layout.kind, SubspaceKind::Replex | SubspaceKind::Hybrid))
            .any(|layout| {
                let mine: BTreeSet<RegionId> = layout.regions.iter().map(|r| r.id).collect();
                let writes = |write| {
                    forward
                        .hops
                        .iter()
                        .any(|hop| hop.write == write && mine.contains(&hop.region))
                };
                writes(HopWrite::Remove) && writes(HopWrite::Put)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::{Knobs, LayoutChange, ReplexSpace, Rng};
    use crate::report::Violation;
    use crate::world::testing::quiet_replex_world;
    use crate::world::{found_cluster, FAILURE_TIMEOUT_MS};
    use tessera_coordinator::placement::replex_conflict;
    use tessera_protocol::ClientRef;
    use tessera_storage::Write;

    const REPLEX_3: ReplexSpace = ReplexSpace {
        attr: 1,
        hybrid: Some((2, 2)),
    };

    /// Every replex shape a seed can draw, with every f it can draw.
    fn shapes() -> Vec<Knobs> {
        let quiet = quiet_replex_world(1, REPLEX_3).knobs;
        let mut out = Vec::new();
        for attr in [1, 2] {
            for hybrid in [None, Some((2, 2)), Some((4, 2)), Some((2, 4))] {
                let replex = ReplexSpace { attr, hybrid };
                for f in 1..replex.copies() {
                    out.push(Knobs {
                        replex: Some(replex),
                        f,
                        ..quiet.clone()
                    });
                }
            }
        }
        out
    }

    #[test]
    fn about_one_seed_in_five_runs_a_replex_space_with_what_it_allows() {
        let mut replex = 0;
        for seed in 0..2_000 {
            let knobs = Knobs::from_seed(&mut Rng::new(seed));
            let Some(shape) = knobs.replex else { continue };
            replex += 1;
            assert!(!knobs.global_index, "seed {seed}: {knobs:?}");
            assert!(
                matches!(
                    knobs.layout_change,
                    LayoutChange::None
                        | LayoutChange::AddIndex
                        | LayoutChange::ToggleHybrid
                        | LayoutChange::SwapReplex
                ),
                "seed {seed}: {knobs:?}"
            );
            // A space that tolerates two failures keeps three copies.
            if knobs.layout_change == LayoutChange::ToggleHybrid && knobs.f == 2 {
                panic!("seed {seed} drops a copy it needs: {knobs:?}");
            }
            assert!(
                (1..shape.copies()).contains(&knobs.f),
                "seed {seed}: {knobs:?}"
            );
        }
        assert!((300..500).contains(&replex), "{replex} of 2000");
    }

    #[test]
    fn every_replex_shape_is_placed_strictly_on_the_simulated_cluster() {
        for knobs in shapes() {
            let (state, _, _) = found_cluster(&knobs);
            let space = &state.spaces[0];
            let replex = knobs.replex.expect("a replex shape");
            assert_eq!(space.subspaces.len(), replex.copies(), "{knobs:?}");
            assert_eq!(space.desc.fault_tolerance as usize, knobs.f);
            for layout in &space.subspaces {
                assert!(layout.regions.iter().all(|r| r.chain.len() == 1));
            }
            assert_eq!(replex_conflict(space), None, "{knobs:?}");
            assert!(state.check_invariants().is_ok(), "{knobs:?}");
        }
    }

    #[test]
    fn replex_keys_are_distinct_and_fall_into_every_key_region() {
        for (keys, regions) in [(3, 3), (5, 4), (8, 4)] {
            let knobs = Knobs {
                keys,
                ..shapes()[0].clone()
            };
            let (state, _, _) = found_cluster(&knobs);
            let space = &state.spaces[0];
            let values: BTreeSet<Vec<u8>> =
                (0..keys).map(|k| key_bytes(&knobs.key_value(k))).collect();
            assert_eq!(values.len(), keys as usize);
            let used: BTreeSet<RegionId> = (0..keys)
                .map(|k| space.key_region(&knobs.key_value(k)).expect("a region").id)
                .collect();
            assert_eq!(used.len(), regions, "{keys} keys");
        }
    }

    #[test]
    fn a_crashed_daemons_regions_wait_for_it_and_return_with_it() {
        let mut world = quiet_replex_world(11, REPLEX_3);
        world.run_until(2_000);
        let space = &world.coord.state.spaces[0];
        let key_region = space.key_region(&world.knobs.key_value(0)).expect("region");
        let d = key_region.chain[0];
        let held: BTreeSet<RegionId> = space
            .subspaces
            .iter()
            .flat_map(|l| l.regions.iter())
            .filter(|r| r.chain == [d])
            .map(|r| r.id)
            .collect();
        world.crash(d);
        world.run_until(2_000 + 2 * FAILURE_TIMEOUT_MS);
        let orphaned: BTreeSet<RegionId> = world
            .coord
            .state
            .orphans
            .iter()
            .filter(|&(_, &daemon)| daemon == d)
            .map(|(&r, _)| r)
            .collect();
        assert_eq!(orphaned, held, "every region of {d} waits for it");
        world.restart(d);
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        assert!(world.coord.state.orphans.is_empty());
        let config = world.configuration();
        for region in held {
            let (_, _, r) = config.region(region).expect("still configured");
            assert_eq!(r.chain, [d], "{region} came back with {d}");
        }
    }

    /// A finished quiet replex run, and a key whose object lives, with
    /// the at-most-once entry of the update that wrote it last.
    fn finished_with_object() -> (World, i64, ClientRef) {
        let mut world = quiet_replex_world(12, REPLEX_3);
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        let space = world.coord.state.spaces[0].clone();
        for key in 0..world.knobs.keys {
            let value = world.knobs.key_value(key);
            let region = space.key_region(&value).expect("region");
            let Some(record) = world.stored(region, &key_bytes(&value)) else {
                continue;
            };
            let last = record.recent.last().filter(|(_, v)| *v == record.version);
            if let (Some(_), Some(&(client, _))) = (&record.object, last) {
                return (world, key, client);
            }
        }
        panic!("no key ends with an object");
    }

    #[test]
    fn an_update_missing_from_a_copy_fails_the_acknowledgement_check() {
        let (world, key, client) = finished_with_object();
        let nobody = world.clients.len();
        assert!(world.check_acknowledged(nobody, key, client).is_ok());
        // The hybrid's copy goes, as if the chain had skipped it.
        let space = &world.coord.state.spaces[0];
        let hybrid = &space.subspaces[1];
        assert_eq!(hybrid.kind, SubspaceKind::Hybrid);
        let bytes = key_bytes(&world.knobs.key_value(key));
        let home = hybrid
            .regions
            .iter()
            .find(|r| {
                world
                    .stored(r, &bytes)
                    .is_some_and(|rec| rec.object.is_some())
            })
            .expect("the hybrid holds the object");
        world.daemons[&home.chain[0]]
            .data
            .apply(vec![Write::Delete {
                region: home.id,
                key: bytes,
            }])
            .expect("memory delete");
        let outcome = world.check_acknowledged(nobody, key, client);
        assert!(
            matches!(outcome, Err(Violation::Unreplicated { key: k, part, .. }) if k == key && part == hybrid.part),
            "{outcome:?}"
        );
    }

    #[test]
    fn a_write_lost_from_every_copy_fails_the_final_object_check() {
        let (world, key, _) = finished_with_object();
        let bytes = key_bytes(&world.knobs.key_value(key));
        let space = &world.coord.state.spaces[0];
        for region in space.subspaces.iter().flat_map(|l| l.regions.iter()) {
            world.daemons[&region.chain[0]]
                .data
                .apply(vec![Write::Delete {
                    region: region.id,
                    key: bytes.clone(),
                }])
                .expect("memory delete");
        }
        let outcome = world.check();
        assert!(
            matches!(outcome, Err(Violation::FinalObject { key: k, .. }) if k == key),
            "{outcome:?}"
        );
    }
}
