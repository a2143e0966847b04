//! The simulated network: delay, loss, duplication and reordering of every
//! message, and cuts that isolate a daemon.

use crate::report::Violation;
use crate::world::{Ev, Msg, Node, World};
/// A daemon cut off the network: from whom, and in which direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cut {
    pub(crate) from: Reach,
    pub(crate) direction: Direction,
}

/// Whom a cut daemon cannot reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Peers, clients and the coordinator.
    Everyone,
    /// Only the coordinator (the daemon still talks to peers and clients:
    /// its lease must stop it serving).
    Coordinator,
}

/// Which messages a cut drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Both,
    /// Messages to the daemon are lost; its own go out. Cut so from the
    /// coordinator, or from everyone, it still heartbeats: a gray failure
    /// the coordinator's detector cannot see.
    Inbound,
    /// The daemon's messages are lost; it still hears everyone.
    Outbound,
}

impl Cut {
    /// Whether this cut of daemon `d` drops a message between `d` and
    /// `other`, travelling to `d` when `inbound`.
    fn drops(&self, other: Node, inbound: bool) -> bool {
        let reach = match self.from {
            Reach::Everyone => true,
            Reach::Coordinator => other == Node::Coord,
        };
        let direction = match self.direction {
            Direction::Both => true,
            Direction::Inbound => inbound,
            Direction::Outbound => !inbound,
        };
        reach && direction
    }
}

impl World {
    /// Whether a message from `from` to `to` is lost to a cut or to a
    /// coordinator outage.
    pub(crate) fn blocked(&self, from: Node, to: Node) -> bool {
        let cut = |n: Node, other: Node, inbound: bool| match n {
            Node::Daemon(d) => self
                .cuts
                .get(&d)
                .is_some_and(|cut| cut.drops(other, inbound)),
            _ => false,
        };
        let coord_down = (from == Node::Coord || to == Node::Coord) && !self.coord.up;
        coord_down || cut(from, to, false) || cut(to, from, true)
    }

    /// Whether a cut breaks a connection between `a` and `b`: a cut in
    /// either direction loses the data or its acknowledgements, so the
    /// side that writes notices after a timeout.
    pub(crate) fn severed(&self, a: Node, b: Node) -> bool {
        let cut = |n: Node, other: Node| match n {
            Node::Daemon(d) => self
                .cuts
                .get(&d)
                .is_some_and(|cut| cut.drops(other, true) || cut.drops(other, false)),
            _ => false,
        };
        cut(a, b) || cut(b, a)
    }

    pub(crate) fn send(&mut self, from: Node, to: Node, msg: Msg) {
        self.report.messages += 1;
        if self.blocked(from, to) || self.rng.chance(self.knobs.drop_per_mille) {
            self.report.dropped += 1;
            return;
        }
        let delay = 1 + self.rng.below(self.knobs.delay_max_ms);
        if self.rng.chance(self.knobs.dup_per_mille) {
            let later = delay + 1 + self.rng.below(self.knobs.delay_max_ms * 3);
            self.at(
                later,
                Ev::Deliver {
                    from,
                    to,
                    msg: msg.clone(),
                },
            );
        }
        self.at(delay, Ev::Deliver { from, to, msg });
    }

    /// A message reaches `to` (see [`World::arrive`] for when it may not).
    pub(crate) fn deliver(&mut self, from: Node, to: Node, msg: Msg) -> Result<(), Violation> {
        match to {
            Node::Coord => self.coord_receive(from, msg),
            Node::Daemon(d) => self.daemon_receive(d, from, msg),
            Node::Client(c) => self.client_receive(c, msg)?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::testing::quiet_world;
    use crate::world::FAILURE_TIMEOUT_MS;
    use std::time::Duration;
    use tessera_daemon::chain::key_region;
    use tessera_types::{DaemonId, DaemonState, Value};

    #[test]
    fn cuts_drop_what_their_reach_and_direction_say() {
        let mut world = quiet_world(8);
        let (d, peer) = (DaemonId(1), Node::Daemon(DaemonId(2)));
        let me = Node::Daemon(d);
        let client = Node::Client(0);
        // Per cut: is (coordinator -> d, d -> coordinator, peer -> d,
        // d -> peer, client -> d, d -> client) dropped?
        let table = [
            (Reach::Everyone, Direction::Both, [true; 6]),
            (
                Reach::Everyone,
                Direction::Inbound,
                [true, false, true, false, true, false],
            ),
            (
                Reach::Everyone,
                Direction::Outbound,
                [false, true, false, true, false, true],
            ),
            (
                Reach::Coordinator,
                Direction::Both,
                [true, true, false, false, false, false],
            ),
            (
                Reach::Coordinator,
                Direction::Inbound,
                [true, false, false, false, false, false],
            ),
            (
                Reach::Coordinator,
                Direction::Outbound,
                [false, true, false, false, false, false],
            ),
        ];
        for (from, direction, expected) in table {
            world.cuts.insert(d, Cut { from, direction });
            let got = [
                world.blocked(Node::Coord, me),
                world.blocked(me, Node::Coord),
                world.blocked(peer, me),
                world.blocked(me, peer),
                world.blocked(client, me),
                world.blocked(me, client),
            ];
            assert_eq!(got, expected, "{from:?} {direction:?}");
            assert!(!world.blocked(peer, client), "others are not cut");
        }
    }

    #[test]
    fn a_daemon_that_cannot_send_is_taken_offline_and_comes_back_after_healing() {
        let mut world = quiet_world(9);
        let d = DaemonId(3);
        world.run_until(2_000);
        world.cuts.insert(
            d,
            Cut {
                from: Reach::Everyone,
                direction: Direction::Outbound,
            },
        );
        world.run_until(5_000);
        assert_eq!(world.daemon_state(d), Some(DaemonState::Offline));
        world.cuts.remove(&d);
        world.run_until(12_000);
        assert_eq!(world.daemon_state(d), Some(DaemonState::Available));
    }

    /// A gray failure: the daemon hears nobody but still heartbeats. It
    /// must not serve without a lease meanwhile; the clients and peers
    /// that cannot reach it report it, and the coordinator takes it
    /// offline although it heartbeats. Once the cut heals it comes back by
    /// itself.
    #[test]
    fn a_point_leader_that_cannot_hear_is_reported_and_comes_back_after_healing() {
        let mut world = quiet_world(10);
        // Once every daemon's first heartbeat was answered (a daemon that
        // never heard an answer counts its lease as valid), while the
        // clients are still busy: the point leader of key 0.
        world.run_until(600);
        let config = world.configuration();
        let space = config.space_by_id(world.space).expect("the space");
        let region = key_region(space, &Value::Int(0)).expect("a region");
        let d = region.chain[0];
        world.cuts.insert(
            d,
            Cut {
                from: Reach::Everyone,
                direction: Direction::Inbound,
            },
        );
        let mut offline_at = None;
        for t in (700..8_000).step_by(100) {
            world.run_until(t);
            let node = world.daemons[&d].node.as_ref().expect("running");
            if t >= 1_600 {
                assert!(
                    !node.serving(Duration::from_millis(t)),
                    "no lease at {t} ms"
                );
            }
            if offline_at.is_none() && world.daemon_state(d) == Some(DaemonState::Offline) {
                offline_at = Some(t);
            }
        }
        assert!(
            offline_at.is_some_and(|t| t < 600 + FAILURE_TIMEOUT_MS + 4_000),
            "taken offline on reports: {offline_at:?}"
        );
        world.cuts.remove(&d);
        world.run_until(16_000);
        assert_eq!(world.daemon_state(d), Some(DaemonState::Available));
        let node = world.daemons[&d].node.as_ref().expect("running");
        assert!(node.serving(Duration::from_millis(world.now)));
        let outcome = world.run().and_then(|()| world.check());
        assert!(outcome.is_ok(), "{outcome:?}");
    }
}
