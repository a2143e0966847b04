//! The nemesis: which faults to inject, on whom, and for how long — and
//! the healing that ends phase 1.

use crate::disk::Fault;
use crate::net::{Cut, Direction, Reach};
use crate::report::Violation;
use crate::world::{Ev, World};
use tessera_types::DaemonId;

impl World {
    /// Daemons that are up, registered, running and reachable.
    pub(crate) fn healthy(&self, d: DaemonId) -> bool {
        let daemon = &self.daemons[&d];
        daemon.up
            && !daemon.frozen
            && daemon.node.is_some()
            && !daemon.disk_fault
            && !self.cuts.contains_key(&d)
    }

    /// Within f: forgets past faults once the cluster is whole again
    /// (every daemon healthy, every region its full chain of running
    /// daemons — f + 1 replicas, one in a replex space — no transfer, no
    /// rebuild).
    pub(crate) fn forget_faults_when_whole(&mut self) {
        let whole = self.daemons.keys().all(|&m| self.healthy(m))
            && self.coord.state.transfers.is_empty()
            && self.coord.state.rebuilds.is_empty()
            && self.coord.state.spaces.iter().all(|space| {
                let replicas = space.desc.replicas_per_region();
                space.subspaces.iter().all(|layout| {
                    layout.regions.iter().all(|r| {
                        // A daemon lost for good stays in its chains until
                        // it is killed or found offline: not whole yet.
                        r.chain.len() >= replicas
                            && r.chain.iter().all(|m| self.daemons.contains_key(m))
                    })
                })
            });
        if whole {
            self.faulted.clear();
        }
    }

    /// Whether taking `d` away leaves every region a healthy replica (and,
    /// within f, whether fewer than f daemons are faulted).
    ///
    /// A replex space is the exception: its regions have one replica each,
    /// the other copies of their objects being the other replexes, so any
    /// daemon may fail. Its regions become orphans that wait for it (writes
    /// crossing them wait too) while it returns with its disk, or, when it
    /// was lost for good (`crate::loss`, bounded there), are rebuilt from
    /// the other replexes.
    pub(crate) fn may_fail(&self, d: DaemonId) -> bool {
        if !self.healthy(d)
            || (self.within_f && self.faulted.len() >= self.knobs.f)
            || !self.copies_survive_failing(d)
        {
            return false;
        }
        self.coord.state.spaces.iter().all(|space| {
            space.desc.replex.is_some()
                || space.subspaces.iter().all(|layout| {
                    layout.regions.iter().all(|r| {
                        r.chain
                            .iter()
                            .filter(|&&m| m != d && self.healthy(m))
                            .count()
                            >= 1
                    })
                })
        })
    }

    /// Injects at most one fault, chosen by the seed.
    pub(crate) fn nemesis(&mut self) {
        if self.within_f {
            self.forget_faults_when_whole();
        }
        if self.maybe_lose() || self.maybe_power_loss() {
            return;
        }
        let roll = self.rng.below(10);
        let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
        let d = ids[self.rng.below(ids.len() as u64) as usize];
        let coord_whole = self.coord.up && self.coord.members.iter().all(|m| !m.frozen);
        match roll {
            0..=2 if self.knobs.crashes && self.may_fail(d) => {
                self.faulted.insert(d);
                self.crash(d);
                // Now and then long enough for tombstones of deletes made
                // meanwhile to be collected before it returns.
                let down = if self.rng.chance(200) {
                    3 * self.knobs.tombstone_grace_ms.min(5_000) + self.rng.below(6_000)
                } else {
                    200 + self.rng.below(4_000)
                };
                self.at(down, Ev::Restart(d));
            }
            3..=4 if self.knobs.partitions && self.may_fail(d) => {
                self.faulted.insert(d);
                self.cut(d);
            }
            5 if self.knobs.coordinator_outages && coord_whole => {
                self.coord.up = false;
                self.report.faults.coordinator_outages += 1;
                let length = 300 + self.rng.below(3_000);
                self.at(length, Ev::CoordUp);
            }
            6 if self.knobs.disk_faults && self.may_fail(d) => {
                self.faulted.insert(d);
                self.fail_disk(d);
            }
            7 if self.knobs.pauses && self.may_fail(d) => {
                self.faulted.insert(d);
                let length = 100 + self.rng.below(5_000);
                self.pause_daemon(d, length);
            }
            8 if self.knobs.coordinator_pauses && coord_whole => {
                // The leader twice as often as either follower.
                let members = self.coord.members.len() as u64;
                let m = match self.rng.below(members + 1) {
                    0 | 1 => self.coord.leader,
                    other => (self.coord.leader + other as usize - 1) % members as usize,
                };
                let length = 200 + self.rng.below(5_000);
                self.pause_member(m, length);
            }
            _ => {}
        }
    }

    /// Cuts `d` off the network for a while, both ways or (with the
    /// knob) one way only.
    fn cut(&mut self, d: DaemonId) {
        let from = if self.rng.chance(500) {
            Reach::Everyone
        } else {
            Reach::Coordinator
        };
        let direction = if self.knobs.one_way_partitions && self.rng.chance(500) {
            // Inbound only is a gray failure: the daemon still heartbeats,
            // so the coordinator keeps it in its chains while it cannot
            // serve (its lease lapses).
            match self.rng.below(2) {
                0 => Direction::Inbound,
                _ => Direction::Outbound,
            }
        } else {
            Direction::Both
        };
        let cut = Cut { from, direction };
        self.cuts.insert(d, cut);
        self.trace(|| format!("cut {d} {cut:?}"));
        if direction == Direction::Both {
            self.report.faults.partitions += 1;
        } else {
            self.report.faults.one_way_partitions += 1;
        }
        let length = 200 + self.rng.below(5_000);
        self.at(length, Ev::Heal(d));
    }

    /// `d`'s disk fills up or breaks. The daemon finds out at its next
    /// write or sync, leaves every chain and stops; it is restarted with
    /// the disk repaired.
    fn fail_disk(&mut self, d: DaemonId) {
        let fault = if self.rng.chance(500) {
            Fault::Full
        } else {
            Fault::Broken
        };
        let daemon = self.daemons.get_mut(&d).expect("known daemon");
        daemon.disk_fault = true;
        if let Some(disk) = &daemon.disk {
            disk.hooks().fail(fault);
        }
        self.trace(|| format!("disk of {d}: {fault:?}"));
        self.report.faults.disk_faults += 1;
    }

    /// The end of phase 1: every cut heals, every paused process resumes,
    /// the coordinator regains its majority and every stopped daemon
    /// starts again.
    pub(crate) fn heal_all(&mut self) -> Result<(), Violation> {
        self.phase2 = true;
        self.cuts.clear();
        self.resume_all()?;
        self.coord_up();
        let down: Vec<DaemonId> = self
            .daemons
            .values()
            .filter(|d| !d.up)
            .map(|d| d.id)
            .collect();
        for d in down {
            self.restart(d);
        }
        Ok(())
    }
}
