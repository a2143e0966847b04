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

use std::collections::BTreeMap;
use tessera_types::{DaemonId, Space};

/// Why placement could not proceed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// No daemon is registered and available, so no region can have a replica.
    #[error(
        "no daemons are available to hold the space's regions; start and register a daemon first"
    )]
    NoDaemons,
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

    #[test]
    fn placement_is_deterministic() {
        let a = Placer::new(daemons(5), &[]).unwrap().place_subspace(64, 3);
        let b = Placer::new(daemons(5), &[]).unwrap().place_subspace(64, 3);
        assert_eq!(a, b);
    }
}
