//! Daemons lost for good (issue 13's rebuild): in a replex seed with
//! [`Knobs::losses`](crate::Knobs), the nemesis now and then crashes a
//! daemon that never restarts and whose disk is gone; an operator then
//! kills it at the coordinator (`server-kill`) and starts a fresh daemon,
//! a new process that registers under a new id. The coordinator rebuilds
//! the lost regions from the other replexes (`coordinator/src/rebuild.rs`)
//! onto a legal target, the fresh daemon or another one.
//!
//! How many may be lost: with `--within-f`, a loss counts as a fault like
//! a crash, so losses and concurrent faults together stay within the
//! space's f (at most `copies - 1`) until every lost region is rebuilt.
//! Without it, any number may be lost, alongside any other fault, as long
//! as every object keeps one copy on a disk that still exists: every
//! region held by no surviving disk keeps a covering set among the regions
//! that are. This is the loss counterpart of "never the last healthy
//! replica" that bounds the other faults outside within-f. A region whose
//! every copy is gone can never be served again (the coordinator has no
//! command to give it up and start it empty, in any kind of space), so a
//! seed that lost one could not settle and be judged; the nemesis does
//! not go there. What still weakens outside within-f is availability: a
//! loss while a covering region's daemon is crashed or cut off leaves the
//! lost region waiting, and writes crossing it waiting, until that daemon
//! returns.

use crate::world::{Ev, SimDaemon, World, DETECTOR_TICK_MS, LAYOUT_SPARES_MAX};
use std::collections::BTreeSet;
use tessera_coordinator::placement::replex_move_conflicts;
use tessera_coordinator::state::{Command, CommandResult};
use tessera_types::replex::covering_set;
use tessera_types::{DaemonId, Region, RegionId, Space};

/// The chance, per nemesis turn of a seed with losses, that the nemesis
/// tries to lose a daemon for good (per thousand): about one and a half
/// tries in a seed's 20 s.
const LOSS_PER_MILLE: u64 = 60;

/// How long the operator takes to notice a lost daemon and kill it, and to
/// start a fresh one, at most. Killing may come before or after the
/// detector took the daemon offline (after 2 s); the fresh daemon may come
/// before or after the rebuilds were planned on the daemons already there.
const KILL_MS_MAX: u64 = 4_000;
const REPLACE_MS_MAX: u64 = 6_000;

impl World {
    /// The nemesis's turn for a loss: true if it lost a daemon (and does
    /// nothing else this turn). Drawn from a generator of its own, so a
    /// turn without a loss makes the same choices as before losses existed.
    pub(crate) fn maybe_lose(&mut self) -> bool {
        if !self.losses || !self.knobs.losses || !self.loss_rng.chance(LOSS_PER_MILLE) {
            return false;
        }
        let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
        let d = self.loss_rng.pick(&ids);
        if !self.may_lose(d) {
            return false;
        }
        self.lose(d);
        true
    }

    /// Whether the nemesis may lose `d` for good: it may fail (healthy;
    /// within f, fewer than f daemons faulted), and every object keeps a
    /// copy on a surviving disk once `d`'s is gone.
    pub(crate) fn may_lose(&self, d: DaemonId) -> bool {
        self.may_fail(d) && self.copies_survive(Some(d))
    }

    /// Whether every region of every replex space that no surviving disk
    /// holds — its daemon lost, or lost with `also` — has a covering set
    /// among the regions some surviving disk holds (a crashed or cut off
    /// daemon's disk survives: it returns).
    pub(crate) fn copies_survive(&self, also: Option<DaemonId>) -> bool {
        self.copies_survive_without(|h| self.lost.contains(&h) || Some(h) == also)
    }

    /// Whether every object keeps a copy if `d` fails and stays away, as
    /// may every daemon not healthy now: the coordinator's leader declares
    /// lost a daemon silent for the lost timeout, after which its disk is
    /// never read again. So the nemesis fails a daemon of a replex seed only
    /// while the other replexes would cover every region of all of them.
    pub(crate) fn copies_survive_failing(&self, d: DaemonId) -> bool {
        if self.knobs.replex.is_none() {
            return true;
        }
        self.copies_survive_without(|h| {
            h == d || self.lost.contains(&h) || !self.daemons.contains_key(&h) || !self.healthy(h)
        })
    }

    /// [`Self::copies_survive`] with the daemons `is_gone` selects gone,
    /// and those the coordinator killed or declared lost (which may not
    /// know it yet: their disks are never read again either).
    fn copies_survive_without(&self, is_gone: impl Fn(DaemonId) -> bool) -> bool {
        let state = &self.coord.state;
        let is_gone = |h: DaemonId| is_gone(h) || state.killed.contains(&h);
        state
            .spaces
            .iter()
            .filter(|s| s.desc.replex.is_some())
            .all(|space| {
                let gone = regions_where(space, |r| {
                    let holder = r.chain.first().or_else(|| state.orphans.get(&r.id));
                    holder.is_none_or(|h| is_gone(*h))
                });
                gone.iter()
                    .all(|&region| covering_set(space, &gone, region).is_ok())
            })
    }

    /// `d` crashes and never returns, its disk gone with it; the operator
    /// will kill it at the coordinator and start a fresh daemon.
    pub(crate) fn lose(&mut self, d: DaemonId) {
        self.faulted.insert(d);
        self.count_replex_crash(d);
        self.stop(d);
        self.daemons.remove(&d);
        self.lost.insert(d);
        self.report.faults.losses += 1;
        self.trace(|| format!("lose {d} for good (process and disk)"));
        let kill = 100 + self.loss_rng.below(KILL_MS_MAX);
        self.at(kill, Ev::Kill(d));
        let replace = 200 + self.loss_rng.below(REPLACE_MS_MAX);
        self.replacing += 1;
        self.at(replace, Ev::Replace);
    }

    /// `d` learnt that the coordinator's leader declared it lost (or an
    /// operator killed it): told to stop at a heartbeat, or refused when
    /// it registered again after a restart. Its process stops and its
    /// data is never used again; as after a loss, the operator starts a
    /// fresh daemon (a daemon declared lost while cut off or paused runs
    /// until it hears so, as a real one would).
    pub(crate) fn declared_lost(&mut self, d: DaemonId) {
        if !self.daemons.contains_key(&d) {
            return;
        }
        if self.daemons[&d].up {
            self.stop(d);
        }
        self.daemons.remove(&d);
        self.cuts.remove(&d);
        self.lost.insert(d);
        self.report.faults.declared_lost += 1;
        self.trace(|| format!("{d} was declared lost: its process stops, its data is dropped"));
        let replace = 200 + self.loss_rng.below(REPLACE_MS_MAX);
        self.replacing += 1;
        self.at(replace, Ev::Replace);
    }

    /// Whether the operator can reach the coordinator now (its commands go
    /// through the leader, as the CLI's do); if not, it tries again soon.
    fn operator_reaches_coordinator(&mut self, ev: Ev) -> bool {
        if self.coord.up && !self.coord.members[self.coord.leader].frozen {
            return true;
        }
        self.at(200, ev);
        false
    }

    /// The operator's `server-kill` of the lost daemon `d`.
    pub(crate) fn operator_kill(&mut self, d: DaemonId) {
        if !self.operator_reaches_coordinator(Ev::Kill(d)) {
            return;
        }
        self.trace(|| format!("operator: server-kill {d}"));
        let result = self.apply(Command::ServerKill { id: d });
        assert!(
            result == CommandResult::Done,
            "server-kill {d} refused: {result:?}"
        );
    }

    /// The operator starts a fresh daemon: a new process with an empty
    /// disk, which registers and gets a new id.
    pub(crate) fn operator_replace(&mut self) {
        if !self.operator_reaches_coordinator(Ev::Replace) {
            return;
        }
        self.replacing -= 1;
        self.register_spare();
    }

    /// A fresh daemon, empty, registers and starts.
    pub(crate) fn register_spare(&mut self) {
        self.spares += 1;
        let addr = format!("spare{}", self.spares);
        let result = self.apply(Command::RegisterDaemon {
            id: None,
            addr,
            metrics: None,
            installed: None,
        });
        let CommandResult::Registered { id } = result else {
            panic!("a fresh daemon's registration was refused: {result:?}");
        };
        assert!(
            !self.daemons.contains_key(&id) && !self.lost.contains(&id),
            "the coordinator reused id {id}"
        );
        self.trace(|| format!("operator: fresh daemon {id} registers"));
        self.daemons.insert(id, SimDaemon::new(id));
        let config = std::sync::Arc::new(self.configuration());
        self.start_daemon(id, config);
    }

    /// The operator watches the configuration (`show-config`): a lost
    /// region that waits although its covering set is whole waits for a
    /// legal target — every daemon sits beside a region that can share an
    /// object with it, the fresh daemons having taken other regions — so
    /// the operator starts one more fresh daemon, unless one is on its way.
    pub(crate) fn operator_watch(&mut self) {
        if self.replacing > 0 || self.lost.is_empty() {
            return;
        }
        let state = &self.coord.state;
        let waits = state
            .spaces
            .iter()
            .filter(|s| s.desc.replex.is_some())
            .any(|space| {
                let failed = regions_where(space, |r| r.chain.is_empty());
                failed.iter().any(|&region| {
                    let gone_for_good = state
                        .orphans
                        .get(&region)
                        .is_none_or(|d| state.killed.contains(d));
                    gone_for_good
                        && !state.rebuilds.iter().any(|b| b.region == region)
                        && covering_set(space, &failed, region).is_ok()
                })
            });
        if waits {
            self.trace(|| "operator: a lost region has no legal target".to_string());
            self.replacing += 1;
            let replace = 200 + self.loss_rng.below(REPLACE_MS_MAX);
            self.at(replace, Ev::Replace);
        }
    }

    /// The operator watches a relayout of a replex space: a new region
    /// that sits beside another copy of its objects and is not moving
    /// (no daemon may take it) keeps its part building, so after a second
    /// of that the operator starts a fresh daemon, a bounded number of
    /// times per seed.
    pub(crate) fn operator_watch_layout(&mut self) {
        let coord_whole = self.coord.up && !self.coord.members[self.coord.leader].frozen;
        if self.layout_spares >= LAYOUT_SPARES_MAX || !coord_whole {
            return;
        }
        let state = &self.coord.state;
        let stuck = state.spaces.iter().any(|space| {
            space.subspaces.iter().enumerate().any(|(k, l)| {
                matches!(l.state, tessera_types::PartState::Building { .. })
                    && l.regions.iter().enumerate().any(|(i, r)| {
                        !state.transfers.iter().any(|t| t.region == r.id)
                            && r.chain
                                .first()
                                .is_some_and(|d| replex_move_conflicts(space, k, i, *d))
                    })
            })
        });
        self.layout_stuck_ticks = if stuck {
            self.layout_stuck_ticks + 1
        } else {
            0
        };
        if self.layout_stuck_ticks * DETECTOR_TICK_MS >= 1_000 {
            self.layout_stuck_ticks = 0;
            self.layout_spares += 1;
            self.trace(|| "operator: a new replex region has no daemon to move to".to_string());
            self.register_spare();
        }
    }

    /// Counts what the coordinator did about losses once the run ends:
    /// rebuilds planned (every id handed out), completed, cancelled
    /// (planned again with a new id), and replex regions without a daemon.
    pub(crate) fn count_rebuilds(&mut self) {
        let state = &self.coord.state;
        self.report.replex_relayout_settled = self.report.replex_relayout
            && state
                .spaces
                .iter()
                .all(|s| s.parts().iter().all(|p| p.state.is_ready()));
        let planned = state.rebuild_id_next - 1;
        let running = state.rebuilds.len() as u64;
        self.report.rebuilds_planned = planned;
        self.report.rebuilds_cancelled = planned - self.report.rebuilds_completed - running;
        self.report.regions_orphaned = state
            .spaces
            .iter()
            .filter(|s| s.desc.replex.is_some())
            .flat_map(|s| s.subspaces.iter())
            .flat_map(|l| &l.regions)
            .filter(|r| r.chain.is_empty())
            .count() as u64;
    }
}

/// The regions of `space`, every part's, that `pick` selects.
fn regions_where(space: &Space, pick: impl Fn(&Region) -> bool) -> BTreeSet<RegionId> {
    let regions = space.subspaces.iter().flat_map(|l| &l.regions);
    regions.filter(|r| pick(r)).map(|r| r.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::ReplexSpace;
    use crate::world::testing::quiet_replex_world;
    use std::time::Duration;
    use tessera_types::{Object, Value};

    /// One value of an int attribute in each quarter of its axis (the
    /// simulator's spaces have 4 partitions; hybrids cut coarser).
    const QUARTERS: [i64; 4] = [-(1 << 62) - 5, -5, 5, (1 << 62) + 5];

    /// Whether some object of a grid covering every cell of every part
    /// would have each of its copies on a daemon in `gone`.
    fn brute_force_loses_an_object(world: &World, gone: &BTreeSet<DaemonId>) -> bool {
        let space = &world.coord.state.spaces[0];
        (0..8).any(|key| {
            QUARTERS.iter().any(|&a| {
                QUARTERS.iter().any(|&b| {
                    let object = Object {
                        values: vec![world.knobs.key_value(key), Value::Int(a), Value::Int(b)],
                    };
                    space
                        .subspaces
                        .iter()
                        .all(|layout| gone.contains(&layout.region_of(&object).chain[0]))
                })
            })
        })
    }

    #[test]
    fn a_loss_is_allowed_exactly_when_every_object_keeps_a_copy() {
        for hybrid in [None, Some((2, 2)), Some((4, 2))] {
            let mut world = quiet_replex_world(21, ReplexSpace { attr: 2, hybrid });
            let ids: Vec<DaemonId> = world.daemons.keys().copied().collect();
            let mut refused = 0;
            // Every set of up to two lost daemons, and every third one.
            for first in &ids {
                for second in ids.iter().filter(|d| d > &first) {
                    world.lost = [*first, *second].into_iter().collect();
                    let before = !brute_force_loses_an_object(&world, &world.lost);
                    assert_eq!(
                        world.copies_survive(None),
                        before,
                        "{hybrid:?} {first} {second}"
                    );
                    for third in ids.iter().filter(|d| !world.lost.contains(d)) {
                        let mut gone = world.lost.clone();
                        gone.insert(*third);
                        let survives = !brute_force_loses_an_object(&world, &gone);
                        refused += usize::from(!survives);
                        assert_eq!(
                            world.copies_survive(Some(*third)),
                            survives,
                            "{hybrid:?}: {first}, {second}, then {third}"
                        );
                    }
                }
            }
            assert!(refused > 0, "{hybrid:?}: some loss must be refused");
        }
    }

    /// The daemon leading key 0, and every region it holds.
    fn key_leader_and_its_regions(world: &World) -> (DaemonId, Vec<RegionId>) {
        let space = &world.coord.state.spaces[0];
        let d = space
            .key_region(&world.knobs.key_value(0))
            .expect("a key region")
            .chain[0];
        let held = space
            .subspaces
            .iter()
            .flat_map(|l| &l.regions)
            .filter(|r| r.chain == [d])
            .map(|r| r.id)
            .collect();
        (d, held)
    }

    #[test]
    fn a_daemon_away_past_the_lost_timeout_is_declared_lost_and_replaced() {
        let replex = ReplexSpace {
            attr: 1,
            hybrid: Some((2, 2)),
        };
        let mut world = quiet_replex_world(17, replex);
        world.knobs.lost_timeout_ms = Some(3_000);
        for member in &mut world.coord.members {
            member.node = member
                .node
                .clone()
                .with_lost_timeout(Some(Duration::from_millis(3_000)));
        }
        world.run_until(2_000);
        let (d, held) = key_leader_and_its_regions(&world);
        // It crashes and stays down until the end of phase 1, far past
        // the lost timeout; restarted then, it is refused and replaced.
        world.crash(d);
        world.run_until(9_000);
        assert!(world.coord.state.lost.contains(&d), "declared lost by 9 s");
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        world.count_rebuilds();
        assert_eq!(world.report.faults.declared_lost, 1);
        assert_eq!(world.report.faults.losses, 0, "no loss by the nemesis");
        assert!(world.report.rebuilds_completed >= held.len() as u64);
        assert_eq!(world.report.regions_orphaned, 0);
        assert!(!world.daemons.contains_key(&d));
        let config = world.configuration();
        for region in held {
            let (_, _, r) = config.region(region).expect("still configured");
            assert_eq!(r.chain.len(), 1, "{region}");
            assert_ne!(r.chain[0], d, "{region} was rebuilt elsewhere");
        }
    }

    #[test]
    fn a_lost_daemons_regions_are_rebuilt_elsewhere_and_the_run_passes() {
        let replex = ReplexSpace {
            attr: 1,
            hybrid: Some((2, 2)),
        };
        let mut world = quiet_replex_world(13, replex);
        world.run_until(2_000);
        let (d, held) = key_leader_and_its_regions(&world);
        assert!(!held.is_empty());
        world.lose(d);
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
        world.count_rebuilds();
        assert_eq!(world.report.faults.losses, 1);
        assert!(world.report.rebuilds_completed >= held.len() as u64);
        assert_eq!(world.report.regions_orphaned, 0);
        assert!(world.coord.state.killed.contains(&d));
        let config = world.configuration();
        for region in held {
            let (_, _, r) = config.region(region).expect("still configured");
            assert_eq!(r.chain.len(), 1, "{region}");
            assert_ne!(r.chain[0], d, "{region} was rebuilt elsewhere");
            assert!(world.daemons[&r.chain[0]].up);
        }
    }
}
