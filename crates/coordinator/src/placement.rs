//! Placement: which daemons hold each region, head (point leader) first.
//!
//! Pure: no I/O, no clock, no randomness. The same inputs always give the
//! same chains, so every coordinator member computes the same placement.
//!
//! # The scheme
//!
//! A subspace with `R` regions and chains of `r` daemons has `R × r` chain
//! slots. Slot `k` is region `k / r`, chain position `k % r`. Slots are dealt
//! to the daemons in turn, like cards, over a daemon order sorted by current
//! load (least loaded first):
//!
//! ```text
//!  daemons (by load)  d0 d1 d2 d3          n = 4, r = 2, L = lcm(n, r) = 4
//!  block 0, slots 0-3 [d0 d1][d2 d3]       heads d0, d2
//!  block 1, slots 4-7 [d1 d2][d3 d0]       shifted by one: heads d1, d3
//!  block 2 ...        [d2 d3][d0 d1]
//! ```
//!
//! Dealing in turn makes the replica counts differ by at most one; a chain's
//! `r` slots are consecutive, so (with `r <= n`) its daemons are distinct.
//! When `r` shares a factor `g` with `n`, heads within one block of
//! `L = lcm(n, r)` slots only land on one residue class mod `g`; shifting
//! every block by one more daemon rotates the classes, so head counts also
//! differ by at most one. The order is rotated so that the last, partial
//! block starts at the least-loaded daemon: spaces added one after another
//! keep the cluster-wide replica counts within one of each other.
//!
//! # Replex spaces
//!
//! A replex space's regions hold one copy each, and two regions of
//! different parts that can hold the same object
//! ([`tessera_types::replex::can_share`]) must never share a daemon, or
//! one failure takes two copies of that object (`docs/design/replex.md`).
//! [`Placer::place_replex`] gives the key subspace and each replex a
//! disjoint group of daemons (regions of one part hold disjoint objects,
//! so they may share), dealing each part's regions over its group in
//! contiguous runs along the first dimension cut at a hybrid's groups, so
//! that a daemon holds whole groups or part of one. Each hybrid region then goes to the least loaded
//! daemon that holds no region able to share an object with it: in a
//! 2-sharing space, a daemon of A holding no region of the hybrid
//! region's A group, or one of B likewise. Too few daemons is a typed
//! refusal, unless the space asks for `with relaxed placement`: then every
//! part is dealt over all daemons as the paper does, and
//! [`tessera_types::replex::at_risk_fraction`] reports how many objects
//! lost two copies to one failure.

use crate::rebuild::rebuild_target_conflicts;
use std::collections::BTreeMap;
use tessera_types::replex::can_share;
use tessera_types::{
    DaemonId, PartId, PartState, Rebuild, RegionId, Space, SubspaceKind, SubspaceLayout, Transfer,
};

/// Why placement could not proceed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// No daemon is registered and available, so no region can have a replica.
    #[error(
        "no daemons are available to hold the space's regions; start and register a daemon first"
    )]
    NoDaemons,
    /// A replex space's key subspace and replexes need disjoint daemons.
    #[error(
        "a replex space needs at least {needed} available daemons so that no two copies of an \
         object share one (the key subspace and each replex on its own daemons), but {daemons} \
         are available; add daemons or declare `with relaxed placement`"
    )]
    ReplexTooFewDaemons {
        /// The key subspace and the replexes.
        needed: usize,
        /// Available daemons.
        daemons: usize,
    },
    /// No daemon can take a hybrid region without holding two copies of
    /// some object.
    #[error(
        "no daemon of {daemons} can hold hybrid region {region} without also holding another \
         copy of some of its objects; add daemons or declare `with relaxed placement`"
    )]
    ReplexHybridConflict {
        /// The hybrid region (in the space being placed).
        region: RegionId,
        /// Available daemons.
        daemons: usize,
    },
}

/// Assigns replica chains, remembering the load it has handed out so far.
#[derive(Clone, Debug)]
pub struct Placer {
    /// Replica slots held per available daemon (existing spaces included).
    load: BTreeMap<DaemonId, u64>,
}

impl Placer {
    /// A placer over `available` daemons, counting the chain slots they hold
    /// already in `spaces` so that new regions go to the least loaded.
    pub fn new(
        available: impl IntoIterator<Item = DaemonId>,
        spaces: &[Space],
    ) -> Result<Placer, PlacementError> {
        let mut load: BTreeMap<DaemonId, u64> = available.into_iter().map(|d| (d, 0)).collect();
        if load.is_empty() {
            return Err(PlacementError::NoDaemons);
        }
        for space in spaces {
            for subspace in &space.subspaces {
                for region in &subspace.regions {
                    for daemon in &region.chain {
                        if let Some(count) = load.get_mut(daemon) {
                            *count += 1;
                        }
                    }
                }
            }
        }
        Ok(Placer { load })
    }

    /// The number of available daemons.
    pub fn daemon_count(&self) -> usize {
        self.load.len()
    }

    /// Chains for `regions` regions, each of `min(replicas, daemons)`
    /// distinct daemons, head first.
    pub fn place_subspace(&mut self, regions: usize, replicas: usize) -> Vec<Vec<DaemonId>> {
        let mut order: Vec<DaemonId> = self.load.keys().copied().collect();
        // Least loaded first; ties by id, for determinism.
        order.sort_by_key(|d| (self.load[d], *d));
        let chains = deal(&order, regions, replicas);
        for chain in &chains {
            for daemon in chain {
                *self.load.get_mut(daemon).expect("placed on a known daemon") += 1;
            }
        }
        chains
    }
}

impl Placer {
    /// Fills the chains (one daemon each) of a replex space's `parts`
    /// (laid out, regions numbered, chains empty) as the module docs say.
    /// `relaxed`: when the strict rule cannot be met, deal every part over
    /// all daemons instead of refusing. Nothing changes on a refusal.
    pub fn place_replex(
        &mut self,
        parts: &mut [SubspaceLayout],
        relaxed: bool,
    ) -> Result<(), PlacementError> {
        match self.place_replex_strict(parts) {
            Ok(()) => Ok(()),
            Err(_) if relaxed => {
                for part in parts.iter_mut() {
                    let chains = self.place_subspace(part.regions.len(), 1);
                    for (region, chain) in part.regions.iter_mut().zip(chains) {
                        region.chain = chain;
                    }
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn place_replex_strict(&mut self, parts: &mut [SubspaceLayout]) -> Result<(), PlacementError> {
        let mut order: Vec<DaemonId> = self.load.keys().copied().collect();
        order.sort_by_key(|d| (self.load[d], *d));
        // The key subspace and the replexes; those a hybrid shares first,
        // so that they get the larger groups (a hybrid region lives
        // beside its sides' regions of other groups).
        let mut independent: Vec<usize> = (0..parts.len())
            .filter(|&k| parts[k].kind != SubspaceKind::Hybrid)
            .collect();
        let sides = |k: usize| {
            parts
                .iter()
                .filter(|h| h.kind == SubspaceKind::Hybrid)
                .filter(|h| {
                    h.attrs.first() == parts[k].attrs.first()
                        || h.attrs.get(1) == parts[k].attrs.first()
                })
                .count()
        };
        independent.sort_by_key(|&k| std::cmp::Reverse(sides(k)));
        if order.len() < independent.len() {
            return Err(PlacementError::ReplexTooFewDaemons {
                needed: independent.len(),
                daemons: order.len(),
            });
        }
        let mut load = self.load.clone();
        // (part, region index) per daemon, to test hybrid regions against.
        let mut held: BTreeMap<DaemonId, Vec<(usize, usize)>> = BTreeMap::new();
        let mut chains: Vec<Vec<Option<DaemonId>>> =
            parts.iter().map(|p| vec![None; p.regions.len()]).collect();
        let groups = independent.len();
        for (g, &k) in independent.iter().enumerate() {
            let group: Vec<DaemonId> = order.iter().skip(g).step_by(groups).copied().collect();
            let (regions, m) = (parts[k].regions.len().max(1), group.len());
            // The groups the first hybrid on this part coarsens its first
            // dimension into (1: none), so that a daemon's run holds whole
            // groups, or lies within one.
            let coarse = parts
                .iter()
                .filter(|h| h.kind == SubspaceKind::Hybrid)
                .find_map(|h| {
                    let d = h
                        .attrs
                        .iter()
                        .position(|a| parts[k].attrs.first() == Some(a))?;
                    Some(h.splits[d].len() + 1)
                })
                .filter(|c| regions % c == 0)
                .unwrap_or(1);
            let per_group = regions / coarse;
            for (i, chain) in chains[k].iter_mut().enumerate() {
                // Contiguous runs (first dimension slowest): group x of
                // the part goes to daemons [x·m/c, (x+1)·m/c) of its
                // daemon group, at least one, its regions in turn.
                let (x, j) = (i / per_group, i % per_group);
                let lo = x * m / coarse;
                let hi = ((x + 1) * m / coarse).max(lo + 1);
                let daemon = group[lo + j * (hi - lo) / per_group];
                *chain = Some(daemon);
                *load.get_mut(&daemon).expect("a known daemon") += 1;
                held.entry(daemon).or_default().push((k, i));
            }
        }
        for k in (0..parts.len()).filter(|k| !independent.contains(k)) {
            for (i, region) in parts[k].regions.iter().enumerate() {
                let daemon = load
                    .iter()
                    .filter(|(d, _)| {
                        held.get(d).is_none_or(|list| {
                            list.iter()
                                .all(|&(q, j)| q == k || !can_share(&parts[k], i, &parts[q], j))
                        })
                    })
                    .min_by_key(|(d, l)| (**l, **d))
                    .map(|(d, _)| *d)
                    .ok_or(PlacementError::ReplexHybridConflict {
                        region: region.id,
                        daemons: order.len(),
                    })?;
                chains[k][i] = Some(daemon);
                *load.get_mut(&daemon).expect("a known daemon") += 1;
                held.entry(daemon).or_default().push((k, i));
            }
        }
        for (part, chains) in parts.iter_mut().zip(chains) {
            for (region, daemon) in part.regions.iter_mut().zip(chains) {
                region.chain = daemon.into_iter().collect();
            }
        }
        self.load = load;
        Ok(())
    }
}

impl Placer {
    /// One daemon for each region of `added`, new replexes or hybrids of
    /// replex space `space` (their chains empty, in the order they will
    /// be appended): the least loaded daemon that may hold the region
    /// beside every region of the space, of the parts placed before it,
    /// and of the rebuilds and transfers on their way to that daemon
    /// ([`rebuild_target_conflicts`]). When no daemon may, the least
    /// loaded one: a part being built is no copy anyone reads or rebuilds
    /// from, so it may sit beside other copies of its objects for a while;
    /// the coordinator moves such regions to daemons that may hold them
    /// ([`ClusterState::repair`](crate::state::ClusterState::repair)), and
    /// the part becomes ready only once none is left ([`part_unsettled`]).
    /// Returns how many regions it placed beside another copy.
    pub fn place_added_replex_parts(
        &mut self,
        space: &Space,
        added: &mut [SubspaceLayout],
        rebuilds: &[Rebuild],
        transfers: &[Transfer],
    ) -> usize {
        let mut beside = 0;
        let mut grown = space.clone();
        let first = grown.subspaces.len();
        grown.subspaces.extend(added.iter().cloned());
        for k in first..grown.subspaces.len() {
            for i in 0..grown.subspaces[k].regions.len() {
                let pick = self
                    .load
                    .iter()
                    .map(|(d, l)| {
                        let conflicts =
                            rebuild_target_conflicts(&grown, k, i, *d, rebuilds, transfers);
                        ((conflicts, *l, *d), *d)
                    })
                    .min();
                let Some(((conflicts, _, _), daemon)) = pick else {
                    continue; // No daemon at all: `Placer::new` refused that.
                };
                beside += usize::from(conflicts);
                grown.subspaces[k].regions[i].chain = vec![daemon];
                *self.load.get_mut(&daemon).expect("a known daemon") += 1;
            }
        }
        for (part, placed) in added.iter_mut().zip(&grown.subspaces[first..]) {
            part.regions.clone_from(&placed.regions);
        }
        beside
    }
}

/// Whether part `part` of replex space `space` has a region that is no
/// copy to count on yet: one without a daemon, or one beside a region of
/// another part able to hold one of its objects (never under relaxed
/// placement). Only a part being built may have the latter (see
/// [`Placer::place_added_replex_parts`]); it stays building until it has
/// neither: a region without a daemon would come back to its old daemon,
/// beside whatever sits there.
///
/// Regions on their way to a daemon count as already there: a rebuild or a
/// move planned before the part's region was placed beside its target
/// would otherwise land there once the part is ready.
pub fn part_unsettled(
    space: &Space,
    part: PartId,
    rebuilds: &[Rebuild],
    transfers: &[Transfer],
) -> bool {
    space.desc.replex.is_some()
        && space
            .subspaces
            .iter()
            .enumerate()
            .filter(|(_, l)| l.part == part)
            .any(|(k, l)| {
                l.regions.iter().enumerate().any(|(i, r)| {
                    r.chain.is_empty()
                        || r.chain
                            .iter()
                            .any(|d| rebuild_target_conflicts(space, k, i, *d, rebuilds, transfers))
                })
            })
}

/// The first pair of regions of `space` (a replex space) that can hold the
/// same object and share a daemon, with that daemon; `None` when the
/// strict placement rule holds. Parts being built do not count: they are
/// no copies yet ([`part_unsettled`]).
pub fn replex_conflict(space: &Space) -> Option<(DaemonId, RegionId, RegionId)> {
    space.desc.replex.as_ref()?;
    let mut held: BTreeMap<DaemonId, Vec<(usize, usize)>> = BTreeMap::new();
    // A part being built is no copy yet (see `part_unsettled`).
    let settled = space
        .subspaces
        .iter()
        .enumerate()
        .filter(|(_, l)| !matches!(l.state, PartState::Building { .. }));
    for (k, part) in settled {
        for (i, region) in part.regions.iter().enumerate() {
            for d in &region.chain {
                held.entry(*d).or_default().push((k, i));
            }
        }
    }
    let parts = &space.subspaces;
    held.into_iter().find_map(|(d, list)| {
        list.iter().enumerate().find_map(|(n, &(k, i))| {
            list[..n].iter().find_map(|&(q, j)| {
                (q != k && can_share(&parts[k], i, &parts[q], j))
                    .then(|| (d, parts[q].regions[j].id, parts[k].regions[i].id))
            })
        })
    })
}

/// Whether moving region `index` of part `part` of `space` onto `daemon`
/// would put it beside a region able to hold one of its objects (in a
/// replex space without relaxed placement; never elsewhere).
pub use tessera_types::replex::beside_other_copies as replex_move_conflicts;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Deals `regions × r` chain slots over `order` (see the module docs).
fn deal(order: &[DaemonId], regions: usize, replicas: usize) -> Vec<Vec<DaemonId>> {
    let n = order.len();
    assert!(n > 0, "deal needs at least one daemon");
    let r = replicas.clamp(1, n);
    let block_len = n / gcd(n, r) * r;
    let blocks_full = regions * r / block_len;
    // Rotate so that the partial last block starts at order[0].
    let rotation = n - blocks_full % n;
    (0..regions)
        .map(|region| {
            (0..r)
                .map(|position| {
                    let slot = region * r + position;
                    let block = slot / block_len;
                    order[(slot % n + block % n + rotation) % n]
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{Region, SpaceDesc, SpaceId, SubspaceLayout};

    fn daemons(n: u64) -> Vec<DaemonId> {
        (1..=n).map(DaemonId).collect()
    }

    fn spread(counts: &BTreeMap<DaemonId, u64>) -> u64 {
        counts.values().max().unwrap() - counts.values().min().unwrap()
    }

    /// Checks one subspace's chains: lengths, distinctness, head and replica
    /// balance. Returns the replica counts.
    fn check_subspace(
        ds: &[DaemonId],
        chains: &[Vec<DaemonId>],
        regions: usize,
        replicas: usize,
    ) -> BTreeMap<DaemonId, u64> {
        let n = ds.len();
        let r = replicas.min(n).max(1);
        assert_eq!(chains.len(), regions);
        let mut heads: BTreeMap<DaemonId, u64> = ds.iter().map(|d| (*d, 0)).collect();
        let mut total = heads.clone();
        for chain in chains {
            assert_eq!(
                chain.len(),
                r,
                "n={n} replicas={replicas} regions={regions}"
            );
            let mut sorted = chain.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                chain.len(),
                "replicas of one region on one daemon: {chain:?}"
            );
            *heads.get_mut(&chain[0]).unwrap() += 1;
            for d in chain {
                *total.get_mut(d).unwrap() += 1;
            }
        }
        assert!(
            spread(&heads) <= 1,
            "heads unbalanced n={n} replicas={replicas} regions={regions}: {heads:?}"
        );
        assert!(
            spread(&total) <= 1,
            "replicas unbalanced n={n} replicas={replicas} regions={regions}: {total:?}"
        );
        total
    }

    #[test]
    fn chains_are_distinct_and_balanced_for_many_shapes() {
        for n in 1..=9u64 {
            let ds = daemons(n);
            for f in 0..=4usize {
                for regions in 1..=70usize {
                    let mut placer = Placer::new(ds.iter().copied(), &[]).unwrap();
                    let chains = placer.place_subspace(regions, f + 1);
                    check_subspace(&ds, &chains, regions, f + 1);
                }
            }
        }
    }

    #[test]
    fn successive_subspaces_keep_cluster_load_balanced() {
        for n in 1..=7u64 {
            let ds = daemons(n);
            for f in 0..=3usize {
                let mut placer = Placer::new(ds.iter().copied(), &[]).unwrap();
                let mut cumulative: BTreeMap<DaemonId, u64> = ds.iter().map(|d| (*d, 0)).collect();
                for regions in [1usize, 3, 7, 64, 5, 81, 2, 9] {
                    let chains = placer.place_subspace(regions, f + 1);
                    let counts = check_subspace(&ds, &chains, regions, f + 1);
                    for (d, c) in counts {
                        *cumulative.get_mut(&d).unwrap() += c;
                    }
                    assert!(spread(&cumulative) <= 1, "n={n} f={f}: {cumulative:?}");
                }
            }
        }
    }

    #[test]
    fn existing_spaces_count_towards_load() {
        // d1 already holds four replicas: new regions go to d2 and d3 first.
        let region = |id: u64, chain: Vec<u64>| Region {
            id: tessera_types::RegionId(id),
            chain: chain.into_iter().map(DaemonId).collect(),
        };
        let space = Space {
            id: SpaceId(1),
            desc: SpaceDesc {
                name: "s".into(),
                attrs: vec![],
                subspaces: vec![],
                indexes: vec![],
                fault_tolerance: 0,
                partitions: 4,
                authorization: false,
                global_indexes: Vec::new(),
                replex: None,
            },
            subspaces: vec![SubspaceLayout {
                attrs: vec![0],
                splits: vec![vec![]],
                regions: (1..=4).map(|i| region(i, vec![1])).collect(),
                part: tessera_types::PartId(0),
                state: tessera_types::PartState::Ready,
                kind: Default::default(),
            }],
            indexes: vec![],
        };
        let mut placer = Placer::new(daemons(3), &[space]).unwrap();
        let chains = placer.place_subspace(2, 1);
        assert_eq!(chains, vec![vec![DaemonId(2)], vec![DaemonId(3)]]);
    }

    #[test]
    fn fewer_daemons_than_replicas_gives_shorter_chains() {
        let mut placer = Placer::new(daemons(2), &[]).unwrap();
        let chains = placer.place_subspace(4, 3);
        assert!(chains.iter().all(|c| c.len() == 2 && c[0] != c[1]));
    }

    #[test]
    fn no_daemons_is_an_error() {
        assert_eq!(
            Placer::new(Vec::new(), &[]).unwrap_err(),
            PlacementError::NoDaemons
        );
        assert!(PlacementError::NoDaemons
            .to_string()
            .contains("no daemons are available"));
    }

    fn replex_space(text: &str) -> Space {
        let desc = tessera_types::parse_space(text).expect(text);
        tessera_types::region::default_layout(SpaceId(1), desc)
    }

    /// Every pair of regions of different parts that can hold one object,
    /// by brute force over the pairs.
    fn shared_daemons(space: &Space) -> usize {
        let parts = &space.subspaces;
        let mut bad = 0;
        for (k, p) in parts.iter().enumerate() {
            for (q, o) in parts.iter().enumerate().skip(k + 1) {
                for (i, r) in p.regions.iter().enumerate() {
                    for (j, s) in o.regions.iter().enumerate() {
                        if can_share(&parts[k], i, &parts[q], j)
                            && r.chain.iter().any(|d| s.chain.contains(d))
                        {
                            bad += 1;
                        }
                    }
                }
            }
        }
        bad
    }

    const REPLEX_SHAPES: &[(&str, usize)] = &[
        // (description, the fewest daemons this placement manages with;
        // the key subspace and each replex need one each, a hybrid more)
        (
            "space s key k attributes a replex a create 12 partitions",
            2,
        ),
        (
            "space s key k attributes a replex a hybrid k, a groups 3, 4 create 12 partitions",
            3,
        ),
        (
            "space s key k attributes a, b replex a replex b hybrid a, b groups 3, 4 \
             create 12 partitions",
            4,
        ),
        (
            "space s key k attributes a, b replex a replex b create 12 partitions",
            3,
        ),
        (
            "space s key k attributes a, b replex a, b hybrid k, a groups 2, 2 \
             create 16 partitions",
            3,
        ),
    ];

    #[test]
    fn replex_placement_never_puts_two_copies_of_an_object_on_one_daemon() {
        for &(text, fewest) in REPLEX_SHAPES {
            for n in 1..=14u64 {
                let mut space = replex_space(text);
                let mut placer = Placer::new(daemons(n), &[]).unwrap();
                let placed = placer.place_replex(&mut space.subspaces, false);
                match placed {
                    Ok(()) => {
                        assert!(n as usize >= fewest, "{text}: placed on {n}");
                        assert!(space
                            .subspaces
                            .iter()
                            .all(|l| l.regions.iter().all(|r| r.chain.len() == 1)));
                        assert_eq!(shared_daemons(&space), 0, "{text} on {n}");
                        assert_eq!(replex_conflict(&space), None);
                        assert_eq!(tessera_types::replex::at_risk_fraction(&space), 0.0);
                        // The placer's load counts every region once.
                        let regions: usize = space.subspaces.iter().map(|l| l.regions.len()).sum();
                        assert_eq!(placer.load.values().sum::<u64>(), regions as u64);
                    }
                    Err(e) => {
                        assert!((n as usize) < fewest, "{text}: refused on {n}: {e}");
                        assert!(space
                            .subspaces
                            .iter()
                            .all(|l| l.regions.iter().all(|r| r.chain.is_empty())));
                        assert!(e.to_string().contains("with relaxed placement"), "{e}");
                        assert!(placer.load.values().all(|l| *l == 0));
                    }
                }
            }
        }
        let mut space = replex_space(REPLEX_SHAPES[2].0);
        let mut placer = Placer::new(daemons(2), &[]).unwrap();
        assert_eq!(
            placer.place_replex(&mut space.subspaces, false),
            Err(PlacementError::ReplexTooFewDaemons {
                needed: 3,
                daemons: 2
            })
        );
        let mut placer = Placer::new(daemons(3), &[]).unwrap();
        assert!(matches!(
            placer.place_replex(&mut space.subspaces, false),
            Err(PlacementError::ReplexHybridConflict { daemons: 3, .. })
        ));
    }

    /// Relaxed placement on too few daemons deals every part over all of
    /// them; the at-risk fraction it reports matches a count over random
    /// objects.
    #[test]
    fn relaxed_placement_reports_the_fraction_at_risk() {
        use tessera_types::replex::at_risk_fraction;
        for &(text, fewest) in REPLEX_SHAPES {
            for n in 1..fewest as u64 {
                let mut space = replex_space(text);
                let mut placer = Placer::new(daemons(n), &[]).unwrap();
                placer.place_replex(&mut space.subspaces, true).unwrap();
                let reported = at_risk_fraction(&space);
                // A count over objects at pseudo-random coordinates.
                let mut state = 0x1234_5678_u64 + n;
                let mut next = || {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let mut z = state;
                    z = (z ^ (z >> 33)).wrapping_mul(0xff51afd7ed558ccd);
                    z ^ (z >> 33)
                };
                let objects = 20_000;
                let mut risky = 0;
                for _ in 0..objects {
                    let coords: Vec<u64> = (0..3).map(|_| next()).collect();
                    let mut seen = std::collections::BTreeSet::new();
                    let twice = space.subspaces.iter().any(|l| {
                        let c: Vec<u64> = l.attrs.iter().map(|&a| coords[a]).collect();
                        l.regions[l.region_index(&c)]
                            .chain
                            .iter()
                            .any(|d| !seen.insert(*d))
                    });
                    risky += usize::from(twice);
                }
                let counted = risky as f64 / objects as f64;
                assert!(
                    (counted - reported).abs() < 0.015,
                    "{text} on {n}: reported {reported}, counted {counted}"
                );
                if n == 1 {
                    assert!((reported - 1.0).abs() < 1e-9, "{reported}");
                }
            }
        }
    }

    #[test]
    fn placement_is_deterministic() {
        let a = Placer::new(daemons(5), &[]).unwrap().place_subspace(64, 3);
        let b = Placer::new(daemons(5), &[]).unwrap().place_subspace(64, 3);
        assert_eq!(a, b);
    }
}
