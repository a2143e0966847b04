//! Which daemon an emptied region comes back from.
//!
//! A region's chain empties when every replica leaves it — most often a
//! power loss, where every daemon of the cluster stops at one instant. The
//! region then waits for a daemon that holds it. The one that left last
//! is not always right: the detector takes the replicas out one epoch at a
//! time, and a head that is made the tail in an epoch it never installed
//! (it was already down) never acted as one — the updates the real tail
//! committed before the power went are not in its store (simulator seeds
//! 243008148 and 282000338 of `fault-tolerance.md`).
//!
//! So the coordinator keeps, per region, its *tail terms*: who was the
//! tail from which epoch on ([`TailTerm`], the last [`TAIL_TERMS_KEPT`]),
//! and each daemon, when it registers, reports the newest epoch it had
//! installed, read from its own disk (a daemon writes it durably, with
//! everything it wrote before, before it acts in that epoch). A tail that
//! registers with an installed epoch below the start of its term never
//! acted as that tail, and the term is marked so for good (a later
//! registration, once the daemon runs again, says nothing of the term):
//! nothing was committed in the region during it, and the tail before
//! holds everything the region committed. The region comes back from the
//! latest tail not shown to have never acted
//! ([`ClusterState::settle_orphan`]), waiting while that one is offline.
//! Where the evidence is missing (a daemon brought back by an operator
//! without registering, a data directory from an older build), the tail
//! is taken to have acted, which is what the coordinator always assumed.
//!
//! Replex spaces keep their own rule (the last replica, and refreshes and
//! rebuilds from the other replexes; `crate::rebuild`).

use crate::state::ClusterState;
use serde::{Deserialize, Serialize};
use tessera_types::{DaemonId, DaemonState, Epoch, RegionId};

/// How many tail terms are kept per region: enough for every tail change
/// of a cluster losing its power while failures are being repaired.
pub const TAIL_TERMS_KEPT: usize = 8;

/// One daemon's time as a region's tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailTerm {
    pub daemon: DaemonId,
    /// The epoch from which it is the tail.
    pub since: Epoch,
    /// The daemon registered having installed less than `since`: it never
    /// acted as this tail.
    #[serde(default)]
    pub unacted: bool,
}

impl ClusterState {
    /// Records a new tail term for every region whose tail changed in the
    /// epoch just bumped to, and forgets the terms of removed regions.
    pub(crate) fn note_tails(&mut self) {
        let epoch = self.epoch;
        let mut seen = std::collections::BTreeSet::new();
        for space in &self.spaces {
            for region in space.subspaces.iter().flat_map(|s| &s.regions) {
                seen.insert(region.id);
                let Some(&tail) = region.chain.last() else {
                    continue;
                };
                let terms = self.tail_terms.entry(region.id).or_default();
                if terms.last().is_none_or(|t| t.daemon != tail) {
                    terms.push(TailTerm {
                        daemon: tail,
                        since: epoch,
                        unacted: false,
                    });
                    if terms.len() > TAIL_TERMS_KEPT {
                        terms.remove(0);
                    }
                }
            }
        }
        self.tail_terms.retain(|r, _| seen.contains(r));
    }

    /// Whether `region` belongs to a replex space.
    fn in_replex_space(&self, region: RegionId) -> bool {
        self.space_of(region)
            .is_some_and(|s| s.desc.replex.is_some())
    }

    /// The emptied regions waiting for `id`.
    fn orphans_of(&self, id: DaemonId) -> Vec<RegionId> {
        self.orphans
            .iter()
            .filter(|(_, d)| **d == id)
            .map(|(r, _)| *r)
            .collect()
    }

    /// `id` is forgotten, and its data with it: a region that waited for
    /// it comes back from an earlier tail, or is lost for good (a replex
    /// region is rebuilt from the other replexes, `crate::rebuild`).
    pub(crate) fn forget_holder(&mut self, id: DaemonId) {
        for region in self.orphans_of(id) {
            self.orphans.remove(&region);
            if !self.in_replex_space(region) {
                self.settle_orphan(region);
            }
        }
    }

    /// Brings the emptied `region` back, or names the daemon it waits for:
    /// the latest tail term whose daemon may have acted (see the module
    /// docs). A daemon forgotten since holds nothing; when no term is left
    /// that may have acted, the latest available tail, which holds as much
    /// as any; when no tail is left at all, the region is given up. True
    /// when its chain changed.
    pub(crate) fn settle_orphan(&mut self, region: RegionId) -> bool {
        let terms = self.tail_terms.get(&region).cloned().unwrap_or_default();
        let mut fallback = None;
        let mut chosen = None;
        for term in terms.iter().rev() {
            match self.daemons.get(&term.daemon).map(|d| d.state) {
                None => continue,
                Some(DaemonState::Offline) => {
                    self.orphans.insert(region, term.daemon);
                    return false;
                }
                Some(DaemonState::Available) if term.unacted => {
                    fallback.get_or_insert(term.daemon);
                }
                Some(DaemonState::Available) => {
                    chosen = Some(term.daemon);
                    break;
                }
            }
        }
        self.orphans.remove(&region);
        let Some(daemon) = chosen.or(fallback) else {
            tracing::error!(%region, "every daemon that held the region is gone; it is lost");
            return false;
        };
        let Some(r) = self.region_mut(region) else {
            return false;
        };
        if !r.chain.is_empty() {
            return false;
        }
        tracing::warn!(%region, %daemon, "an emptied region comes back from its latest acting tail");
        r.chain.push(daemon);
        true
    }

    /// The orphans `id` (Available again) may bring back, settled; true
    /// when any chain changed. A replex region goes back to `id` when it
    /// waits for it.
    pub(crate) fn adopt_orphans(&mut self, id: DaemonId) -> bool {
        let mut changed = false;
        for region in self.orphans_of(id) {
            if self.in_replex_space(region) {
                self.orphans.remove(&region);
                if let Some(r) = self.region_mut(region).filter(|r| r.chain.is_empty()) {
                    tracing::warn!(%region, daemon = %id, "a region's last replica returned");
                    r.chain.push(id);
                    changed = true;
                }
            } else {
                changed |= self.settle_orphan(region);
            }
        }
        changed
    }

    /// `id` registered with `installed` on its disk: every tail term of
    /// its that began after that epoch is marked as never acted, and every
    /// region whose only replica it is in such a term is emptied and
    /// settled (a power loss after the detector had made it the tail of a
    /// chain the real tail had left). True when any chain changed.
    pub(crate) fn note_restart(&mut self, id: DaemonId, installed: Option<Epoch>) -> bool {
        let Some(installed) = installed else {
            return false;
        };
        let mut unacted = Vec::new();
        for (&region, terms) in &mut self.tail_terms {
            for term in terms
                .iter_mut()
                .filter(|t| t.daemon == id && installed < t.since)
            {
                term.unacted = true;
            }
            if terms.last().is_some_and(|t| t.daemon == id && t.unacted) {
                unacted.push(region);
            }
        }
        let mut changed = false;
        for region in unacted {
            if self.in_replex_space(region) {
                continue;
            }
            let Some(r) = self.region_mut(region) else {
                continue;
            };
            if r.chain != [id] {
                continue;
            }
            tracing::warn!(%region, daemon = %id, "a daemon made the tail of a region it had not installed returns; the region goes back to an earlier tail");
            r.chain.clear();
            changed = true;
            self.settle_orphan(region);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Command, CommandResult};

    /// Two daemons and a one-region space tolerating one failure: the
    /// state, the region, its head and its tail.
    fn pair() -> (ClusterState, RegionId, DaemonId, DaemonId) {
        let mut state = ClusterState::default();
        for i in 0..2 {
            let result = state.apply(Command::RegisterDaemon {
                id: None,
                addr: format!("d{i}"),
                metrics: None,
                installed: None,
            });
            assert!(matches!(result, CommandResult::Registered { .. }));
        }
        let result = state.apply(Command::AddSpace {
            description: "space kv key k create 1 partitions tolerate 1 failure".into(),
        });
        assert!(matches!(result, CommandResult::SpaceAdded { .. }));
        let region = &state.spaces[0].subspaces[0].regions[0];
        let (id, head, tail) = (region.id, region.chain[0], region.chain[1]);
        (state, id, head, tail)
    }

    fn chain(state: &ClusterState, region: RegionId) -> Vec<DaemonId> {
        state
            .spaces
            .iter()
            .flat_map(|s| &s.subspaces)
            .flat_map(|l| &l.regions)
            .find(|r| r.id == region)
            .expect("the region exists")
            .chain
            .clone()
    }

    fn restart(state: &mut ClusterState, id: DaemonId, installed: Epoch) {
        let result = state.apply(Command::RegisterDaemon {
            id: Some(id),
            addr: format!("again-{id}"),
            metrics: None,
            installed: Some(installed),
        });
        assert_eq!(result, CommandResult::Registered { id });
    }

    #[test]
    fn a_tail_term_starts_whenever_the_tail_changes() {
        let (mut state, region, head, tail) = pair();
        let created = state.epoch;
        assert_eq!(
            state.tail_terms[&region],
            vec![TailTerm {
                daemon: tail,
                since: created,
                unacted: false,
            }]
        );
        state.apply(Command::DaemonOffline { id: head });
        assert_eq!(
            state.tail_terms[&region].len(),
            1,
            "a head leaving ends no term"
        );
        state.apply(Command::DaemonOffline { id: tail });
        assert_eq!(
            state.tail_terms[&region].len(),
            1,
            "an emptied chain has no tail"
        );
    }

    /// A power loss the detector saw as the tail failing first: the head
    /// became the tail in an epoch it never installed.
    #[test]
    fn after_a_power_loss_a_region_waits_for_the_tail_that_acted() {
        let (mut state, region, head, tail) = pair();
        let created = state.epoch;
        state.apply(Command::DaemonOffline { id: tail });
        assert_eq!(chain(&state, region), vec![head]);
        let head_since = state.epoch;
        state.apply(Command::DaemonOffline { id: head });
        assert_eq!(state.orphans.get(&region), Some(&head));

        // The head comes back having installed only the epoch the space
        // was created in: it never acted as the tail, the old tail did.
        assert!(created < head_since);
        restart(&mut state, head, created);
        assert!(chain(&state, region).is_empty());
        assert_eq!(state.orphans.get(&region), Some(&tail));
        // Published, for `show-config` and the point leaders' refusals.
        assert_eq!(
            state.configuration(vec![]).waiting.get(&region),
            Some(&tail)
        );
        restart(&mut state, tail, created);
        assert_eq!(chain(&state, region), vec![tail]);
        assert!(state.orphans.is_empty());
        state.check_invariants().expect("invariants hold");
    }

    #[test]
    fn a_head_that_installed_its_tail_term_brings_the_region_back() {
        let (mut state, region, head, tail) = pair();
        state.apply(Command::DaemonOffline { id: tail });
        let head_since = state.epoch;
        state.apply(Command::DaemonOffline { id: head });
        restart(&mut state, head, head_since);
        assert_eq!(chain(&state, region), vec![head]);
        assert!(state.orphans.is_empty());
    }

    /// Both restart before the detector notices: the tail registers first
    /// and leaves the shared chain, making the head the tail; the head then
    /// registers, never having installed that epoch.
    #[test]
    fn a_sole_replica_that_never_acted_as_the_tail_hands_the_region_back() {
        let (mut state, region, head, tail) = pair();
        let created = state.epoch;
        restart(&mut state, tail, created);
        assert_eq!(chain(&state, region), vec![head]);
        restart(&mut state, head, created);
        assert_eq!(chain(&state, region), vec![tail]);
        assert!(state.orphans.is_empty());
        state.check_invariants().expect("invariants hold");

        // Had the head installed its term, it would have kept the region.
        let (mut state, region, head, tail) = pair();
        let created = state.epoch;
        restart(&mut state, tail, created);
        let now = state.epoch;
        restart(&mut state, head, now);
        assert_eq!(chain(&state, region), vec![head]);
    }

    #[test]
    fn forgetting_the_tail_that_acted_brings_the_region_back_from_the_other() {
        let (mut state, region, head, tail) = pair();
        let created = state.epoch;
        state.apply(Command::DaemonOffline { id: tail });
        state.apply(Command::DaemonOffline { id: head });
        restart(&mut state, head, created);
        assert!(chain(&state, region).is_empty());
        state.apply(Command::ServerForget { id: tail });
        assert_eq!(chain(&state, region), vec![head]);
        assert!(state.orphans.is_empty());
    }

    #[test]
    fn a_daemon_back_without_registering_counts_as_having_acted() {
        let (mut state, region, head, tail) = pair();
        state.apply(Command::DaemonOffline { id: tail });
        state.apply(Command::DaemonOffline { id: head });
        assert_eq!(state.orphans.get(&region), Some(&head));
        state.apply(Command::ServerOnline { id: head });
        assert_eq!(chain(&state, region), vec![head]);
    }

    /// A daemon that restarted without having acted as a tail, and then
    /// registers again while running (taken offline, say): its second
    /// registration reports epochs it installed since, outside the term.
    #[test]
    fn a_later_registration_does_not_undo_the_evidence_of_a_restart() {
        let (mut state, region, head, tail) = pair();
        let created = state.epoch;
        state.apply(Command::DaemonOffline { id: tail });
        state.apply(Command::DaemonOffline { id: head });
        restart(&mut state, head, created);
        assert_eq!(state.orphans.get(&region), Some(&tail));
        state.apply(Command::DaemonOffline { id: head });
        let now = state.epoch;
        restart(&mut state, head, now);
        assert!(chain(&state, region).is_empty());
        assert_eq!(state.orphans.get(&region), Some(&tail));
        restart(&mut state, tail, created);
        assert_eq!(chain(&state, region), vec![tail]);
    }
}
