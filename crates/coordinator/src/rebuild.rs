//! Rebuilds of lost replex regions (`docs/design/replex.md`, "Rebuild").
//!
//! A region of a replex space has one daemon. When that daemon leaves, the
//! region's chain is empty: it is an orphan, and the objects it held still
//! exist in the other replexes. [`ClusterState::repair_rebuilds`] plans,
//! per such region, a [`Rebuild`]: a target daemon that may hold the region
//! under the placement rule, and the region's covering set
//! ([`covering_set`]) as sources. Several lost regions rebuild at once.
//!
//! ```text
//!  K0:[d1] H0:[d2] B0:[d3]  --d1 offline-->  K0:[] (orphan) + Rebuild{K0 -> d4, sources H0@d2, …}
//!                                                                   |
//!                    K0:[d4]  <--RebuildComplete (sent by d4)-------+
//! ```
//!
//! A rebuild is cancelled, and planned again in the same command, when its
//! target or the daemon of one of its sources is no longer where the plan
//! put it. When the lost region's old daemon returns first, it takes the
//! region back as orphans always did (it holds everything the region
//! acknowledged) and the rebuild is cancelled: the returning copy is whole
//! at once, where the rebuild would still be copying.

use crate::placement::replex_move_conflicts;
use crate::state::{ClusterState, CommandResult};
use std::collections::{BTreeMap, BTreeSet};
use tessera_protocol::AdminStatus;
use tessera_types::replex::{can_share, covering_set};
use tessera_types::{DaemonId, DaemonState, Rebuild, RegionId, Space, Transfer};

/// Where region `region` lies in `space`: its part and index.
pub(crate) fn locate(space: &Space, region: RegionId) -> Option<(usize, usize)> {
    space.subspaces.iter().enumerate().find_map(|(k, layout)| {
        layout
            .regions
            .iter()
            .position(|r| r.id == region)
            .map(|i| (k, i))
    })
}

/// Whether daemon `daemon` may hold region `index` of part `part` of
/// `space` beside the chains it is in, the rebuilds in `rebuilds` it is
/// the target of and the transfers in `transfers` bringing it a region:
/// never beside a region able to hold one of its objects (strict replex
/// placement; always allowed in a relaxed space). A rebalancing move
/// planned before the failure may still be on its way to the daemon, and
/// its region joins the daemon's chains when it completes.
pub(crate) fn rebuild_target_conflicts(
    space: &Space,
    part: usize,
    index: usize,
    daemon: DaemonId,
    rebuilds: &[Rebuild],
    transfers: &[Transfer],
) -> bool {
    if replex_move_conflicts(space, part, index, daemon) {
        return true;
    }
    if space.desc.replex.as_ref().is_none_or(|r| r.relaxed) {
        return false;
    }
    let layout = &space.subspaces[part];
    let beside = |q: usize, j: usize| q != part && can_share(layout, index, &space.subspaces[q], j);
    let arriving = rebuilds
        .iter()
        .filter(|b| b.to == daemon)
        .map(|b| b.region)
        .chain(
            transfers
                .iter()
                .filter(|t| t.to == daemon)
                .map(|t| t.region),
        );
    arriving
        .filter_map(|region| locate(space, region))
        .any(|(q, j)| beside(q, j))
}

impl ClusterState {
    /// Moves for the regions of replexes and hybrids being built that sit
    /// beside another copy of their objects (a relayout placed them so when
    /// no daemon could take them, `Placer::place_added_replex_parts`):
    /// each to the least loaded daemon that may hold it, counting what
    /// is on its way there. A region without such a daemon waits for one
    /// (a daemon registering; the part stays building meanwhile). Regions
    /// in `busy` (a transfer runs) and regions being rebuilt or refreshed
    /// (a move would copy a region still being filled, found by
    /// `cli/tests/replex.rs`) are skipped. Deterministic: spaces,
    /// parts and regions in order; targets by load, then id.
    pub(crate) fn plan_building_moves(
        &self,
        load: &mut BTreeMap<DaemonId, u64>,
        busy: &BTreeSet<RegionId>,
    ) -> Vec<(RegionId, DaemonId, DaemonId, Option<DaemonId>)> {
        let mut planned: Vec<Transfer> = Vec::new();
        for space in &self.spaces {
            if space.desc.replex.as_ref().is_none_or(|r| r.relaxed) {
                continue;
            }
            for (k, layout) in space.subspaces.iter().enumerate() {
                if !matches!(layout.state, tessera_types::PartState::Building { .. }) {
                    continue;
                }
                for (i, region) in layout.regions.iter().enumerate() {
                    let [from] = region.chain[..] else {
                        continue; // Lost: rebuilt instead.
                    };
                    // Beside another copy now, or once what is on its way
                    // to its daemon arrives.
                    let beside = rebuild_target_conflicts(
                        space,
                        k,
                        i,
                        from,
                        &self.rebuilds,
                        &self.transfers,
                    );
                    if busy.contains(&region.id) || self.rebuilding(region.id) || !beside {
                        continue;
                    }
                    let arriving: Vec<Transfer> =
                        self.transfers.iter().chain(&planned).cloned().collect();
                    let target = load
                        .iter()
                        .filter(|(d, _)| {
                            **d != from
                                && !rebuild_target_conflicts(
                                    space,
                                    k,
                                    i,
                                    **d,
                                    &self.rebuilds,
                                    &arriving,
                                )
                        })
                        .min_by_key(|(d, l)| (**l, **d))
                        .map(|(d, _)| *d);
                    let Some(to) = target else {
                        continue;
                    };
                    *load.get_mut(&to).expect("a candidate") += 1;
                    planned.push(Transfer {
                        id: 0,
                        region: region.id,
                        from,
                        to,
                        replaces: Some(from),
                    });
                }
            }
        }
        planned
            .into_iter()
            .map(|t| (t.region, t.from, t.to, t.replaces))
            .collect()
    }

    /// The space holding `region`, if any.
    pub(crate) fn space_of(&self, region: RegionId) -> Option<&Space> {
        self.spaces
            .iter()
            .find(|space| locate(space, region).is_some())
    }

    /// The regions of `space` no rebuild may read: those without a daemon
    /// and key regions being refreshed, whose copy may lack updates their
    /// point leader forgot and the refresh has not driven again yet (a
    /// region rebuilt from one lost an acknowledged object, simulator seed
    /// 118001808). A region of another part being refreshed is read: it
    /// holds every update it committed, and a lost region rebuilt around
    /// it from lagging regions lost an acknowledged object (seed
    /// 142005514).
    pub(crate) fn unreadable(&self, space: &Space) -> BTreeSet<RegionId> {
        space
            .subspaces
            .iter()
            .flat_map(|l| &l.regions)
            .filter(|r| {
                r.chain.is_empty() || (self.rebuilding(r.id) && !self.non_key_refresh(space, r.id))
            })
            .map(|r| r.id)
            .collect()
    }

    /// Whether `region` is a region of a non-key part being refreshed.
    fn non_key_refresh(&self, space: &Space, region: RegionId) -> bool {
        locate(space, region).is_some_and(|(k, _)| k != 0)
            && self
                .rebuilds
                .iter()
                .any(|b| b.region == region && self.sole_member(region) == Some(b.to))
    }

    /// Whether a rebuild (or a refresh) of `region` is running.
    fn rebuilding(&self, region: RegionId) -> bool {
        self.rebuilds.iter().any(|b| b.region == region)
    }

    fn is_available(&self, daemon: DaemonId) -> bool {
        self.daemons.get(&daemon).map(|d| d.state) == Some(DaemonState::Available)
    }

    /// The one daemon of region `region`'s chain, when it has exactly one.
    fn sole_member(&self, region: RegionId) -> Option<DaemonId> {
        let space = self.space_of(region)?;
        let (k, i) = locate(space, region)?;
        match space.subspaces[k].regions[i].chain.as_slice() {
            [only] => Some(*only),
            _ => None,
        }
    }

    /// Whether the region's last daemon is gone for good: killed or
    /// forgotten by an operator (a forgotten daemon leaves no orphan
    /// entry). Only then is the region rebuilt. A daemon that is merely
    /// Offline may return with its disk and take the region back (and
    /// have it refreshed); rebuilding while it might still fails more
    /// simulator seeds (docs/design/replex.md, "What remains").
    pub(crate) fn lost_for_good(&self, region: RegionId) -> bool {
        self.orphans
            .get(&region)
            .is_none_or(|d| self.killed.contains(d))
    }

    /// Whether daemon `id` may be declared lost (`Command::DaemonLost`),
    /// and if so the daemons whose regions would be the rebuilds' sources.
    /// It must be Offline, neither killed nor held offline by an operator
    /// (who decides about a daemon taken out for maintenance), and the
    /// last daemon of at least one region, every one of which belongs to a
    /// replex space and has a covering set of regions whose one daemon is
    /// Available. A region of another kind of space has no other copy:
    /// declaring its last daemon lost would lose it, so such a daemon is
    /// waited for as before. So is one whose regions cannot be rebuilt yet
    /// (a covering region's daemon is away too): declaring it lost would
    /// only bar it from bringing back the one copy there is.
    pub fn may_declare_lost(&self, id: DaemonId) -> Option<BTreeSet<DaemonId>> {
        let info = self.daemons.get(&id)?;
        if info.state != DaemonState::Offline
            || self.killed.contains(&id)
            || self.held_offline.contains(&id)
        {
            return None;
        }
        let mut sources = BTreeSet::new();
        let mut waiting = 0;
        for (&region, _) in self.orphans.iter().filter(|(_, d)| **d == id) {
            waiting += 1;
            let space = self.space_of(region)?;
            space.desc.replex.as_ref()?;
            let cover = covering_set(space, &self.unreadable(space), region).ok()?;
            for r in cover {
                let d = self.sole_member(r).filter(|d| self.is_available(*d))?;
                sources.insert(d);
            }
        }
        (waiting > 0 && !sources.is_empty()).then_some(sources)
    }

    /// Whether `rebuild` can still complete as planned: its region is in a
    /// replex space and still has no daemon (or, for a refresh, still only
    /// its target), its target is Available, and each source region is
    /// still held by the daemon the plan named, which is Available.
    pub(crate) fn rebuild_holds(&self, rebuild: &Rebuild) -> bool {
        let Some(space) = self.space_of(rebuild.region) else {
            return false;
        };
        let Some((k, i)) = locate(space, rebuild.region) else {
            return false;
        };
        let chain = &space.subspaces[k].regions[i].chain;
        space.desc.replex.is_some()
            && (chain.is_empty() || *chain == [rebuild.to])
            && self.is_available(rebuild.to)
            && !rebuild.sources.is_empty()
            && rebuild.sources.iter().all(|&(region, daemon)| {
                self.sole_member(region) == Some(daemon)
                    && self.is_available(daemon)
                    && (!self.rebuilding(region) || self.non_key_refresh(space, region))
                    && locate(space, region).is_some_and(|(q, _)| q != k)
            })
    }

    /// Brings the rebuilds in line with the chains: cancels every rebuild
    /// that can no longer complete as planned, then plans one for every
    /// region of a replex space without a daemon that has none running and
    /// has a covering set and a legal target. A region with neither waits
    /// (as an orphan) and is planned by a later command — a daemon
    /// registering, one returning. Returns whether anything changed.
    /// Deterministic: regions in space, part and region order; targets by
    /// load (chain places, transfers and rebuilds received), then id.
    pub(crate) fn repair_rebuilds(&mut self, load: &mut BTreeMap<DaemonId, u64>) -> bool {
        let before = self.rebuilds.len();
        let keep: Vec<bool> = self
            .rebuilds
            .iter()
            .map(|b| self.rebuild_holds(b))
            .collect();
        // A refresh that lost a source is planned again below, from the
        // sources that remain: its region's head must still learn what the
        // other parts hold in flight.
        let refreshes: Vec<(RegionId, DaemonId)> = self
            .rebuilds
            .iter()
            .zip(&keep)
            .filter(|(b, keep)| !**keep && self.sole_member(b.region) == Some(b.to))
            .map(|(b, _)| (b.region, b.to))
            .collect();
        let mut keep = keep.into_iter();
        self.rebuilds
            .retain(|_| keep.next().expect("one flag per rebuild"));
        let mut changed = self.rebuilds.len() != before;
        let batch: BTreeSet<RegionId> = refreshes.iter().map(|(r, _)| *r).collect();
        for (region, daemon) in refreshes {
            self.refresh(region, daemon, &batch);
        }
        for b in &self.rebuilds {
            if let Some(l) = load.get_mut(&b.to) {
                *l += 1;
            }
        }
        let mut planned: Vec<Rebuild> = Vec::new();
        for space in self.spaces.iter().filter(|s| s.desc.replex.is_some()) {
            let failed = self.unreadable(space);
            for (k, layout) in space.subspaces.iter().enumerate() {
                for (i, region) in layout.regions.iter().enumerate() {
                    let busy = self.rebuilds.iter().chain(&planned);
                    if !region.chain.is_empty() || busy.clone().any(|b| b.region == region.id) {
                        continue;
                    }
                    if !self.lost_for_good(region.id) {
                        continue; // Its daemon may return: it waits (an orphan).
                    }
                    let Ok(cover) = covering_set(space, &failed, region.id) else {
                        continue; // Unavailable: wait for a daemon to return.
                    };
                    let sources: Option<Vec<(RegionId, DaemonId)>> = cover
                        .iter()
                        .map(|&r| self.sole_member(r).map(|d| (r, d)))
                        .collect();
                    let Some(sources) = sources.filter(|s| !s.is_empty()) else {
                        continue;
                    };
                    let others: Vec<Rebuild> = busy.cloned().collect();
                    let target = load
                        .iter()
                        .filter(|(d, _)| {
                            !rebuild_target_conflicts(space, k, i, **d, &others, &self.transfers)
                        })
                        .min_by_key(|(d, l)| (**l, **d))
                        .map(|(d, _)| *d);
                    let Some(to) = target else {
                        continue; // No legal target: wait for a daemon.
                    };
                    *load.get_mut(&to).expect("a candidate") += 1;
                    planned.push(Rebuild {
                        id: 0,
                        region: region.id,
                        to,
                        sources,
                    });
                }
            }
        }
        for mut rebuild in planned {
            rebuild.id = self.rebuild_id_next;
            self.rebuild_id_next += 1;
            tracing::warn!(
                region = %rebuild.region,
                to = %rebuild.to,
                sources = rebuild.sources.len(),
                "rebuilding a lost replex region from the other replexes"
            );
            self.rebuilds.push(rebuild);
            changed = true;
        }
        changed
    }

    /// Plans a *refresh* of `region`, a region of a replex space whose
    /// one daemon `daemon` registered again: a rebuild to the daemon that
    /// already holds it, from its covering set, which keeps its copy and
    /// learns what the other parts hold of its keys in flight (the pending
    /// rule). A restarted point leader lost the updates it had in flight,
    /// which the later parts may hold, pending or committed; leading the
    /// region without them it would issue their versions again for other
    /// updates (members took one for the other, simulator seed 118002125)
    /// or start updates after a version those replaced (an acknowledged
    /// update lost, seed 118002306). Registering cannot tell a restart
    /// from a live daemon rejoining, whose refresh changes nothing. A
    /// region of another part forgot the updates it held pending, which
    /// the parts after it may have committed since; it stores what its
    /// sources committed above its copy (seed 146007266). While the
    /// refresh runs a point leader refuses new updates (OFFLINE); the
    /// region stays live for readers but is no source of other rebuilds
    /// (seed 118001808). Nothing is planned when no covering set is live: the
    /// updates in flight then went through a lost region too and are
    /// driven again by its rebuild, if at all. Returns whether a refresh
    /// was planned.
    ///
    /// `batch`: the regions refreshed with it, in the same command, which
    /// are no source of it either (a refresh planned after one that read
    /// from its region would leave that one unable to complete).
    pub(crate) fn refresh(
        &mut self,
        region: RegionId,
        daemon: DaemonId,
        batch: &BTreeSet<RegionId>,
    ) -> bool {
        // A rebuild to another daemon, planned while this one was away,
        // can no longer complete: the region is this daemon's again.
        self.rebuilds
            .retain(|b| b.region != region || b.to == daemon);
        if self.rebuilding(region) {
            return false;
        }
        let Some(space) = self.space_of(region) else {
            return false;
        };
        let mut failed = self.unreadable(space);
        failed.extend(batch.iter().filter(|r| **r != region));
        let Ok(cover) = covering_set(space, &failed, region) else {
            return false;
        };
        let sources: Option<Vec<(RegionId, DaemonId)>> = cover
            .iter()
            .map(|&r| {
                self.sole_member(r)
                    .filter(|d| self.is_available(*d))
                    .map(|d| (r, d))
            })
            .collect();
        let Some(sources) = sources.filter(|s| !s.is_empty()) else {
            return false;
        };
        let id = self.rebuild_id_next;
        self.rebuild_id_next += 1;
        tracing::warn!(%region, %daemon, "refreshing a replex region whose daemon registered again");
        self.rebuilds.push(Rebuild {
            id,
            region,
            to: daemon,
            sources,
        });
        true
    }

    /// `RebuildComplete`: the target holds every object of the region, so
    /// it becomes the region's chain (a refresh's target already is) and
    /// the rebuild ends.
    pub(crate) fn rebuild_complete(&mut self, rebuild: u64) -> CommandResult {
        let Some(index) = self.rebuilds.iter().position(|b| b.id == rebuild) else {
            return CommandResult::Failed {
                status: AdminStatus::NotFound,
                reason: format!("no rebuild {rebuild} is running (finished or cancelled)"),
            };
        };
        let b = self.rebuilds.remove(index);
        assert!(
            self.rebuild_holds(&b),
            "rebuild {}: repair cancels a rebuild that can no longer complete",
            b.id
        );
        let region = self
            .region_mut(b.region)
            .expect("rebuild_holds found the region");
        if region.chain.is_empty() {
            region.chain.push(b.to);
        }
        self.orphans.remove(&b.region);
        tracing::warn!(region = %b.region, daemon = %b.to, "a lost replex region was rebuilt and joins");
        self.bump();
        CommandResult::Done
    }
}
