//! The simulated network: delay, loss, duplication and reordering of every
//! message, and cuts that isolate a daemon.

use crate::report::Violation;
use crate::world::{Ev, Msg, Node, World};
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// No message to or from anyone.
    Full,
    /// Only the coordinator is unreachable (the daemon still talks to
    /// peers and clients: its lease must stop it serving).
    Coordinator,
}

impl World {
    pub(crate) fn blocked(&self, from: Node, to: Node) -> bool {
        let cut = |n: Node, other: Node| match n {
            Node::Daemon(d) => match self.cuts.get(&d) {
                Some(Cut::Full) => true,
                Some(Cut::Coordinator) => other == Node::Coord,
                None => false,
            },
            _ => false,
        };
        let coord_down = (from == Node::Coord || to == Node::Coord) && !self.coord.up;
        coord_down || cut(from, to) || cut(to, from)
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
