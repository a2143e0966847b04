//! Pauses: a process frozen while simulated time runs on for everyone
//! else — a long GC pause, a stalled VM, SIGSTOP — then resumed with the
//! state it had.
//!
//! While a process is frozen it handles nothing: messages that reach it
//! wait (as in a socket buffer), and so do its own timers and jobs; when
//! it resumes, it handles them in the order they came, at the time it
//! resumes. It must then recover by itself: a daemon's lease has run out
//! and it may have been taken offline meanwhile (it registers again when
//! a heartbeat is answered `Offline`).
//!
//! A frozen coordinator leader is replaced once the followers' election
//! timeout runs out: the new leader's node leads in a new term, so its
//! detector gives every daemon a full failure timeout of grace. What had
//! reached the old leader is lost with its leadership (it would answer
//! `NotLeader`), and when it resumes it follows until a later election
//! picks it again. A leader that resumes before the election timeout
//! keeps leading, with a detector that last heard anyone before the pause.

use crate::report::Violation;
use crate::world::{Ev, Node, Process, World};
use tessera_types::DaemonId;

/// The followers' election timeout, at least (the random part spreads
/// elections as Raft's randomised timeouts do).
pub(crate) const ELECTION_MS_MIN: u64 = 700;
pub(crate) const ELECTION_MS_SPREAD: u64 = 800;

impl World {
    /// `ev` arrives: a message a cut now blocks is dropped, and anything
    /// for a frozen process waits in its buffer. What remains is handled
    /// now.
    pub(crate) fn arrive(&mut self, ev: Ev) -> Option<Ev> {
        if let Ev::Deliver { from, to, .. } = &ev {
            if self.blocked(*from, *to) {
                self.report.dropped += 1;
                return None;
            }
        }
        let held = match &ev {
            Ev::Deliver {
                to: Node::Daemon(d),
                ..
            }
            | Ev::DaemonTick(d, _)
            | Ev::Heartbeat(d, _)
            | Ev::Job(d, _, _)
            | Ev::PeerUnreachable(d, _, _) => {
                let daemon = self.daemons.get_mut(d)?;
                if !daemon.frozen {
                    return Some(ev);
                }
                &mut daemon.held
            }
            Ev::Deliver {
                to: Node::Coord, ..
            } => {
                let leader = &mut self.coord.members[self.coord.leader];
                if !leader.frozen {
                    return Some(ev);
                }
                &mut leader.held
            }
            _ => return Some(ev),
        };
        held.push(ev);
        None
    }

    /// Freezes daemon `d` for `length_ms`.
    pub(crate) fn pause_daemon(&mut self, d: DaemonId, length_ms: u64) {
        let daemon = self.daemons.get_mut(&d).expect("known daemon");
        daemon.frozen = true;
        self.report.faults.pauses += 1;
        self.trace(|| format!("pause {d} for {length_ms} ms"));
        self.at(length_ms, Ev::Resume(Process::Daemon(d)));
    }

    /// Freezes coordinator member `m` for `length_ms`; if it leads, the
    /// others elect a new leader once their election timeout runs out.
    pub(crate) fn pause_member(&mut self, m: usize, length_ms: u64) {
        self.coord.members[m].frozen = true;
        self.report.faults.coordinator_pauses += 1;
        let leads = m == self.coord.leader;
        self.trace(|| format!("pause coordinator member {m} (leader: {leads}) for {length_ms} ms"));
        if leads {
            let timeout = ELECTION_MS_MIN + self.rng.below(ELECTION_MS_SPREAD);
            self.at(timeout, Ev::Election(m));
        }
        self.at(length_ms, Ev::Resume(Process::Member(m)));
    }

    /// The followers' election timeout ran out: if `old` still leads,
    /// frozen, and a majority is up, another member leads in a new term.
    pub(crate) fn election(&mut self, old: usize) {
        let coord = &mut self.coord;
        if !coord.up || coord.leader != old || !coord.members[old].frozen {
            return;
        }
        let Some(new) = (0..coord.members.len()).find(|&m| !coord.members[m].frozen) else {
            return;
        };
        coord.term += 1;
        coord.leader = new;
        let term = coord.term;
        coord.members[new].node.lead(term);
        self.trace(|| format!("coordinator member {new} leads in term {term}"));
    }

    /// A paused process carries on with what waited for it.
    pub(crate) fn resume(&mut self, process: Process) -> Result<(), Violation> {
        let held = match process {
            Process::Daemon(d) => {
                let Some(daemon) = self.daemons.get_mut(&d) else {
                    return Ok(()); // Declared lost meanwhile.
                };
                if !daemon.frozen {
                    return Ok(());
                }
                daemon.frozen = false;
                std::mem::take(&mut daemon.held)
            }
            Process::Member(m) => match self.resume_member(m) {
                Some(held) => held,
                None => return Ok(()),
            },
        };
        self.trace(|| format!("resume {process:?} with {} waiting events", held.len()));
        for ev in held {
            self.dispatch(ev)?;
        }
        Ok(())
    }

    /// Member `m` carries on: what it must still handle (nothing unless
    /// it still leads; its detector's overdue tick first).
    fn resume_member(&mut self, m: usize) -> Option<Vec<Ev>> {
        let leads = m == self.coord.leader;
        let member = &mut self.coord.members[m];
        if !member.frozen {
            return None;
        }
        member.frozen = false;
        let held = std::mem::take(&mut member.held);
        if !leads {
            // Deposed while frozen: it learns the new term at once and
            // answers everything that waited `NotLeader`.
            member.node.follow();
            member.tick_missed = false;
            return Some(Vec::new());
        }
        if std::mem::take(&mut member.tick_missed) {
            self.coord_tick();
        }
        Some(held)
    }

    /// The daemons paused now.
    pub(crate) fn frozen_daemons(&self) -> Vec<DaemonId> {
        let frozen = self.daemons.values().filter(|d| d.frozen);
        frozen.map(|d| d.id).collect()
    }

    /// Every paused process resumes (the end of phase 1).
    pub(crate) fn resume_all(&mut self) -> Result<(), Violation> {
        for d in self.frozen_daemons() {
            self.resume(Process::Daemon(d))?;
        }
        for m in 0..self.coord.members.len() {
            self.resume(Process::Member(m))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::testing::quiet_world;
    use tessera_types::DaemonState;

    fn finish(mut world: World) {
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
    }

    #[test]
    fn a_daemon_paused_past_the_failure_timeout_comes_back_by_itself() {
        let mut world = quiet_world(1);
        let d = DaemonId(2);
        world.run_until(2_000);
        let incarnation = world.daemons[&d].incarnation;
        world.pause_daemon(d, 5_000);
        world.run_until(6_500);
        assert_eq!(
            world.daemon_state(d),
            Some(DaemonState::Offline),
            "silent for more than the failure timeout"
        );
        world.run_until(15_000);
        assert_eq!(world.daemon_state(d), Some(DaemonState::Available));
        let daemon = &world.daemons[&d];
        assert_eq!(daemon.incarnation, incarnation, "the same process");
        let node = daemon.node.as_ref().expect("running");
        assert_eq!(node.config().epoch, world.coord.state.epoch);
        finish(world);
    }

    #[test]
    fn a_paused_leader_is_replaced_and_costs_no_daemon_its_place() {
        let mut world = quiet_world(2);
        world.run_until(2_000);
        let epoch = world.coord.state.epoch;
        world.pause_member(0, 5_000);
        for t in [2_500, 4_000, 6_000, 7_500, 10_000] {
            world.run_until(t);
            for &d in world.daemons.keys() {
                assert_eq!(
                    world.daemon_state(d),
                    Some(DaemonState::Available),
                    "{d} at {t} ms"
                );
            }
        }
        assert_ne!(world.coord.leader, 0, "a new leader was elected");
        assert_eq!(world.coord.term, 2);
        assert!(
            !world.coord.members[0].node.is_leading(),
            "the old leader follows"
        );
        assert_eq!(world.coord.state.epoch, epoch, "no configuration change");
        finish(world);
    }

    #[test]
    fn a_leader_back_before_the_election_timeout_keeps_leading() {
        let mut world = quiet_world(3);
        world.run_until(2_000);
        world.pause_member(0, ELECTION_MS_MIN / 2);
        world.run_until(5_000);
        assert_eq!(world.coord.leader, 0);
        assert_eq!(world.coord.term, 1);
        assert!(world.coord.members[0].node.is_leading());
        assert!(
            world.coord.members[0].held.is_empty(),
            "it handled what waited"
        );
        finish(world);
    }
}
