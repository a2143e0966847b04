//! Replex spaces (`docs/design/replex.md`): the parts of a replex space,
//! the aligned hybrid grid, which regions can hold the same object, and
//! covering sets.
//!
//! In a replex space the key subspace, every replex and every hybrid hold
//! one copy of each object, one daemon per region. A hybrid between
//! replexes A and B with groups `(n1, n2)` is an ordinary 2-D grid over
//! the first attributes of A and B whose cuts are a subset of theirs:
//! every `(m_A / n1)`-th split of A (with `m_A` intervals) and every
//! `(m_B / n2)`-th split of B. Hybrid region `(x, y)` therefore holds
//! exactly the objects of A's intervals in group `x` that lie in B's
//! intervals of group `y`; a lost A region is found in the `n2` hybrid
//! regions `(x, *)`, a lost B region in the `n1` regions `(*, y)`. With
//! `n1 · n2 = p` that is the paper's `mod` construction, coarsened by
//! contiguous groups so that a hybrid still prunes ranges.
//!
//! Two regions of different parts *can hold the same object* when their
//! cells overlap on every attribute both parts place by: attributes are
//! independent, and one attribute has one coordinate in every part
//! (hashing). Regions of one part never share an object.

use crate::config::{Configuration, DaemonState, Region, Space, SubspaceKind, SubspaceLayout};
use crate::coordinate::coordinate;
use crate::ids::{DaemonId, PartId, RegionId};
use crate::layout::PartState;
use crate::region::{regions_intersecting, uniform_splits};
use crate::schema::{HybridDecl, ReplexDecl, SpaceDesc};
use std::collections::{BTreeMap, BTreeSet};

/// The split points of a hybrid dimension that coarsens a parent
/// dimension (its sorted `parent` splits, `parent.len() + 1` intervals)
/// into `groups` groups of contiguous intervals: every
/// `((parent.len() + 1) / groups)`-th split. `None` when `groups` is 0 or
/// does not divide the parent's interval count.
pub fn hybrid_splits(parent: &[u64], groups: u32) -> Option<Vec<u64>> {
    let intervals = parent.len() + 1;
    let groups = usize::try_from(groups).ok().filter(|g| *g > 0)?;
    if !intervals.is_multiple_of(groups) {
        return None;
    }
    let per = intervals / groups;
    Some((1..groups).map(|k| parent[k * per - 1]).collect())
}

/// The shape of one part of a new replex space: its attributes, its
/// splits per dimension and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartShape {
    /// Attribute indexes, as [`SubspaceLayout::attrs`].
    pub attrs: Vec<usize>,
    /// Split points per dimension, as [`SubspaceLayout::splits`].
    pub splits: Vec<Vec<u64>>,
    /// [`SubspaceKind::Subspace`] for the key subspace, else `Replex` or
    /// `Hybrid`.
    pub kind: SubspaceKind,
}

/// The parts of a new replex space, in chain order (C.4 #1: the key
/// subspace, then the hybrids, then the replexes — so a hybrid between
/// the key subspace and a replex sits between them, as in the paper's
/// A → H → B): every replex cut like a subspace of its dimensions, every
/// hybrid by [`hybrid_splits`] of its sides' first dimensions. Empty when
/// `desc` is not a replex space. The parser has checked the group counts;
/// a count that does not divide gives the hybrid one interval there.
pub fn replex_shapes(desc: &SpaceDesc) -> Vec<PartShape> {
    let Some(decl) = &desc.replex else {
        return Vec::new();
    };
    let side_shape = |side: usize| -> PartShape {
        if side == 0 {
            PartShape {
                attrs: vec![0],
                splits: vec![uniform_splits(desc.partitions)],
                kind: SubspaceKind::Subspace,
            }
        } else {
            let attrs = decl.replexes[side - 1].clone();
            PartShape {
                splits: crate::region::default_splits(desc.partitions, attrs.len()),
                attrs,
                kind: SubspaceKind::Replex,
            }
        }
    };
    let mut out = vec![side_shape(0)];
    for h in &decl.hybrids {
        let [a, b] = h.sides.map(side_shape);
        out.push(PartShape {
            attrs: vec![a.attrs[0], b.attrs[0]],
            splits: vec![
                hybrid_splits(&a.splits[0], h.groups[0]).unwrap_or_default(),
                hybrid_splits(&b.splits[0], h.groups[1]).unwrap_or_default(),
            ],
            kind: SubspaceKind::Hybrid,
        });
    }
    out.extend((1..=decl.replexes.len()).map(side_shape));
    out
}

/// The intervals a box confines `layout`'s dimensions to (the whole axis
/// where the box says nothing).
fn box_on(layout: &SubspaceLayout, cell: &BTreeMap<usize, (u64, u64)>) -> Vec<(u64, u64)> {
    layout
        .attrs
        .iter()
        .map(|a| cell.get(a).copied().unwrap_or((0, u64::MAX)))
        .collect()
}

/// The box of objects in both `cell` and region `index` of `layout`.
fn intersect(
    cell: &BTreeMap<usize, (u64, u64)>,
    layout: &SubspaceLayout,
    index: usize,
) -> BTreeMap<usize, (u64, u64)> {
    let mut out = cell.clone();
    for (a, (lo, hi)) in layout.cell_by_attr(index) {
        let e = out.entry(a).or_insert((0, u64::MAX));
        *e = (e.0.max(lo), e.1.min(hi));
    }
    out
}

/// The layouts of a new replex space's parts ([`replex_shapes`]), ready,
/// with part ids `0, 1, …` in chain order and region ids from `first` on,
/// every chain empty (placement fills them). Returns the next free
/// region id too.
pub fn replex_layouts(desc: &SpaceDesc, first: RegionId) -> (Vec<SubspaceLayout>, RegionId) {
    let mut next = first;
    let layouts = replex_shapes(desc)
        .into_iter()
        .enumerate()
        .map(|(k, shape)| shape.into_layout(PartId(k as u64), PartState::Ready, &mut next))
        .collect();
    (layouts, next)
}

impl PartShape {
    /// A layout of this shape: part `part` in `state`, its regions numbered
    /// from `next` on (which moves past them), every chain empty
    /// (placement fills them).
    pub fn into_layout(
        self,
        part: PartId,
        state: PartState,
        next: &mut RegionId,
    ) -> SubspaceLayout {
        let cells: usize = self.splits.iter().map(|s| s.len() + 1).product();
        let regions = (0..cells)
            .map(|_| {
                next.0 += 1;
                Region {
                    id: RegionId(next.0 - 1),
                    chain: Vec::new(),
                }
            })
            .collect();
        SubspaceLayout {
            attrs: self.attrs,
            splits: self.splits,
            regions,
            part,
            state,
            kind: self.kind,
        }
    }
}

/// Whether region `i` of `p` and region `j` of `q` (two different parts)
/// can hold the same object: their cells overlap on every attribute both
/// place by.
pub fn can_share(p: &SubspaceLayout, i: usize, q: &SubspaceLayout, j: usize) -> bool {
    let a = p.cell_by_attr(i);
    q.cell_by_attr(j).into_iter().all(|(attr, (lo, hi))| {
        a.get(&attr)
            .is_none_or(|&(alo, ahi)| alo.max(lo) <= ahi.min(hi))
    })
}

/// Whether `daemon` holds a region of another part of `space` able to
/// hold one of the objects of region `index` of part `part` (its position
/// in `subspaces`): the strict placement rule's test. Never under relaxed
/// placement, nor outside a replex space.
pub fn beside_other_copies(space: &Space, part: usize, index: usize, daemon: DaemonId) -> bool {
    if space.desc.replex.as_ref().is_none_or(|r| r.relaxed) {
        return false;
    }
    let Some(layout) = space.subspaces.get(part) else {
        return false;
    };
    space.subspaces.iter().enumerate().any(|(q, other)| {
        q != part
            && other
                .regions
                .iter()
                .enumerate()
                .any(|(j, r)| r.chain.contains(&daemon) && can_share(layout, index, other, j))
    })
}

/// How many regions of part `part` (its position) of `space` sit beside
/// a region of another part able to hold one of their objects: a replex or
/// hybrid being built waits so until a daemon that may hold them is found
/// (`docs/design/replex.md`, "Layout changes").
pub fn regions_beside_other_copies(space: &Space, part: usize) -> usize {
    space.subspaces.get(part).map_or(0, |layout| {
        (0..layout.regions.len())
            .filter(|&i| {
                layout.regions[i]
                    .chain
                    .iter()
                    .any(|d| beside_other_copies(space, part, i, *d))
            })
            .count()
    })
}

/// The parts of `space` that hold whole objects and every one of them,
/// with their positions: parts that are not global indexes, ready or
/// dropping. A replex space drops only parts that were ready, and a
/// dropping part stays on every chain until it leaves, which waits until
/// no region of the space needs a rebuild (it may hold the one copy left
/// of some objects).
fn object_parts(space: &Space) -> Vec<(usize, &SubspaceLayout)> {
    space
        .subspaces
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.kind.holds_objects() && (l.state.is_ready() || l.state == PartState::Dropping)
        })
        .collect()
}

/// Why no covering set exists.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoverError {
    /// The space has no region with this id, or not in a ready part that
    /// holds objects.
    #[error("region {0} is not a region of a part that holds objects")]
    NoRegion(RegionId),
    /// Every way to find the region's objects crosses a failed region.
    #[error("the objects of region {0} are unavailable: every covering set meets a failure")]
    Unavailable(RegionId),
}

/// The smallest set of live regions of parts other than `region`'s that
/// together hold every object of `region` (ascending ids), given the
/// regions in `failed` (whether or not `region` itself is one).
///
/// For each other part it takes that part's regions that can hold an
/// object of `region`; a failed one among them is replaced by a covering
/// set, computed the same way, of just the objects it shares with
/// `region`, from the parts not tried yet on that path. The smallest
/// result wins (ties: the earlier part). A read is unavailable only when
/// every such expansion meets a failure. For a single failure this is the
/// minimum over all sets of regions (the property tests check it by
/// exhaustive search); with a hybrid between A and B of groups
/// `(n1, n2)` it is `n2` regions for an A region and `n1` for a B region.
pub fn covering_set(
    space: &Space,
    failed: &BTreeSet<RegionId>,
    region: RegionId,
) -> Result<Vec<RegionId>, CoverError> {
    // The region itself may be in any part that holds objects: a part
    // being built (or dropped) by a relayout is in every chain and is
    // rebuilt like any other when its daemon is lost. Only ready parts
    // hold every object, so only they are read.
    let (home, index) = space
        .subspaces
        .iter()
        .filter(|l| l.kind.holds_objects())
        .find_map(|l| {
            l.regions
                .iter()
                .position(|r| r.id == region)
                .map(|i| (l, i))
        })
        .ok_or(CoverError::NoRegion(region))?;
    let layouts: Vec<&SubspaceLayout> = object_parts(space)
        .into_iter()
        .map(|(_, l)| l)
        .filter(|l| l.part != home.part)
        .collect();
    let cell = home.cell_by_attr(index);
    let exclude = vec![false; layouts.len()];
    cover(&layouts, &cell, &exclude, failed)
        .map(|set| set.into_iter().collect())
        .ok_or(CoverError::Unavailable(region))
}

/// The replex clauses that describe `layouts`, a replex space's parts in
/// any order (the key subspace first): its replexes in the order they
/// appear, then its hybrids, each side named by the replex (or the key
/// subspace) whose first attribute it places by, its groups counted from
/// its cuts. `None` when a hybrid places by an attribute no replex starts
/// with. A space's description is kept equal to this as parts come and
/// go (`relayout`), so that it always names the parts the space has.
pub fn decl_of_layouts(layouts: &[SubspaceLayout], relaxed: bool) -> Option<ReplexDecl> {
    let replexes: Vec<Vec<usize>> = layouts
        .iter()
        .filter(|l| l.kind == SubspaceKind::Replex)
        .map(|l| l.attrs.clone())
        .collect();
    let side = |attr: usize| -> Option<usize> {
        if attr == 0 {
            return Some(0);
        }
        replexes
            .iter()
            .position(|r| r.first() == Some(&attr))
            .map(|i| i + 1)
    };
    let hybrids = layouts
        .iter()
        .filter(|l| l.kind == SubspaceKind::Hybrid)
        .map(|l| {
            let [a, b] = [l.attrs.first()?, l.attrs.get(1)?];
            let groups = |d: usize| u32::try_from(l.splits.get(d)?.len() + 1).ok();
            Some(HybridDecl {
                sides: [side(*a)?, side(*b)?],
                groups: [groups(0)?, groups(1)?],
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(ReplexDecl {
        replexes,
        hybrids,
        relaxed,
    })
}

fn cover(
    parts: &[&SubspaceLayout],
    cell: &BTreeMap<usize, (u64, u64)>,
    exclude: &[bool],
    failed: &BTreeSet<RegionId>,
) -> Option<BTreeSet<RegionId>> {
    let mut best: Option<BTreeSet<RegionId>> = None;
    for (k, part) in parts.iter().enumerate() {
        if exclude[k] {
            continue;
        }
        let mut set = BTreeSet::new();
        let mut whole = true;
        for i in regions_intersecting(part, &box_on(part, cell)) {
            let id = part.regions[i].id;
            if !failed.contains(&id) {
                set.insert(id);
                continue;
            }
            let mut deeper = exclude.to_vec();
            deeper[k] = true;
            match cover(parts, &intersect(cell, part, i), &deeper, failed) {
                Some(more) => set.extend(more),
                None => {
                    whole = false;
                    break;
                }
            }
        }
        if whole && best.as_ref().is_none_or(|b| set.len() < b.len()) {
            best = Some(set);
        }
    }
    best
}

/// The regions of `space`'s parts that hold objects whose chain names no
/// available daemon in `config`: an emptied chain (an orphan, or a region
/// being rebuilt) or one of daemons all taken offline — and the regions
/// being refreshed, whose daemon came back with a copy that may be stale
/// until the refresh completes (its daemon refuses their reads). Only a
/// replex space has other copies to read them from, so in any other
/// space the set is empty and reads keep waiting for the region's
/// replicas.
pub fn failed_regions(config: &Configuration, space: &Space) -> BTreeSet<RegionId> {
    if space.desc.replex.is_none() {
        return BTreeSet::new();
    }
    space
        .subspaces
        .iter()
        .filter(|l| l.kind.holds_objects())
        .flat_map(|l| &l.regions)
        .filter(|r| no_live_daemon(config, r) || config.rebuilding(r.id))
        .map(|r| r.id)
        .collect()
}

/// Whether `region`'s chain names no available daemon in `config`.
pub fn no_live_daemon(config: &Configuration, region: &Region) -> bool {
    !region.chain.iter().any(|d| {
        config
            .daemons
            .get(d)
            .is_some_and(|info| info.state == DaemonState::Available)
    })
}

/// A region a read of a replex space asks, in place of or as one of the
/// regions its plan named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadLane {
    /// The region asked.
    pub region: RegionId,
    /// `None` when the region is one the plan named; otherwise the lost
    /// region this lane stands in for, whose objects alone it keeps.
    pub lost: Option<LostRegion>,
}

/// A planned region without a live daemon, read through its covering set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRegion {
    /// Its part, by position in `Space::subspaces`.
    pub part: usize,
    /// Its id.
    pub region: RegionId,
    /// Its covering set, ascending, each region with its part's position.
    /// After a second failure the set may hold regions of several parts
    /// that share objects; such an object is kept by the first region of
    /// the set holding it.
    pub cover: Vec<(usize, RegionId)>,
}

/// The lanes of a read whose plan names `planned` (regions of one part of
/// `space`), given the `failed` regions: a planned region that has not
/// failed is one lane; a failed one is replaced by one lane per region of
/// its [`covering_set`], each keeping only the objects the lost region
/// places and the first region of the set holds ([`LostRegion::keeps`]).
/// So every object is kept by exactly one lane of the one planned region
/// that places it, and by no other: redirected lanes of two lost regions
/// may ask one region, but keep disjoint objects.
pub fn redirect_reads(
    space: &Space,
    failed: &BTreeSet<RegionId>,
    planned: &[RegionId],
) -> Result<Vec<ReadLane>, CoverError> {
    let part_of = |region: RegionId| {
        space
            .subspaces
            .iter()
            .position(|l| l.regions.iter().any(|r| r.id == region))
            .ok_or(CoverError::NoRegion(region))
    };
    let mut lanes = Vec::with_capacity(planned.len());
    for &region in planned {
        if !failed.contains(&region) {
            lanes.push(ReadLane { region, lost: None });
            continue;
        }
        let cover = covering_set(space, failed, region)?
            .into_iter()
            .map(|r| Ok((part_of(r)?, r)))
            .collect::<Result<Vec<_>, CoverError>>()?;
        let lost = LostRegion {
            part: part_of(region)?,
            region,
            cover,
        };
        lanes.extend(lost.cover.iter().map(|&(_, r)| ReadLane {
            region: r,
            lost: Some(lost.clone()),
        }));
    }
    Ok(lanes)
}

impl LostRegion {
    /// Whether the lane reading region `lane` of the covering set keeps
    /// `object` (a whole object of the space, found in `lane`): the lost
    /// region places it and no earlier region of the set holds it. `None`
    /// when a part is gone from `space`, or the object lacks an attribute
    /// a part places by or holds one without a coordinate (a daemon's
    /// answer that does not fit the schema).
    pub fn keeps(&self, space: &Space, lane: RegionId, object: &crate::Object) -> Option<bool> {
        if !holds(space, self.part, self.region, object)? {
            return Some(false);
        }
        for &(part, region) in &self.cover {
            if holds(space, part, region, object)? {
                return Some(region == lane);
            }
        }
        Some(false)
    }
}

/// What a daemon keeps of a page it reads in place of a failed region
/// (`DaemonRequest::Search::within`): the objects [`LostRegion::keeps`]
/// keeps for that lane, the lost region's parts named by their stable
/// ids rather than positions, so that the daemon finds them in its own
/// configuration. Filtering where the objects lie ships only those the
/// client keeps (a covering region of another replex holds every key
/// region's objects); the client still checks what it receives.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Within {
    /// The lost region's part.
    pub part: PartId,
    /// The lost region.
    pub region: RegionId,
    /// Its covering set, as [`LostRegion::cover`].
    pub cover: Vec<(PartId, RegionId)>,
}

impl LostRegion {
    /// The lost region as a daemon is told it, with the parts' ids in
    /// `space` (the space the lanes were planned on); `None` when a part
    /// position is not in it.
    pub fn within(&self, space: &Space) -> Option<Within> {
        let id = |part: usize| space.subspaces.get(part).map(|l| l.part);
        Some(Within {
            part: id(self.part)?,
            region: self.region,
            cover: self
                .cover
                .iter()
                .map(|&(part, region)| Some((id(part)?, region)))
                .collect::<Option<_>>()?,
        })
    }
}

impl Within {
    /// The lost region in `space`'s positions; `None` when one of its
    /// parts, or a region of a part, is not in `space` (the layout changed
    /// since the lanes were planned: the daemon then ships what it reads
    /// and leaves the choice to the client).
    /// A covering set longer than the space's regions (a malformed
    /// request) names nothing either.
    pub fn lost_region(&self, space: &Space) -> Option<LostRegion> {
        let places: BTreeMap<RegionId, (usize, PartId)> = space
            .subspaces
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.regions.iter().map(move |r| (r.id, (i, l.part))))
            .collect();
        if self.cover.len() > places.len() {
            return None;
        }
        let position = |part: PartId, region: RegionId| {
            places
                .get(&region)
                .filter(|&&(_, p)| p == part)
                .map(|&(i, _)| i)
        };
        Some(LostRegion {
            part: position(self.part, self.region)?,
            region: self.region,
            cover: self
                .cover
                .iter()
                .map(|&(part, region)| Some((position(part, region)?, region)))
                .collect::<Option<_>>()?,
        })
    }
}

/// Whether region `region` of the part at `part` places `object` (see
/// [`LostRegion::keeps`] for `None`).
fn holds(space: &Space, part: usize, region: RegionId, object: &crate::Object) -> Option<bool> {
    let layout = space.subspaces.get(part)?;
    let coordinates = layout
        .attrs
        .iter()
        .map(|&a| coordinate(object.values.get(a)?))
        .collect::<Option<Vec<u64>>>()
        .filter(|c| c.len() == layout.splits.len())?;
    Some(layout.regions.get(layout.region_index(&coordinates))?.id == region)
}

/// The fraction of objects of `space` (uniform over the coordinate axes,
/// as hashing places them) of which two copies share a daemon, so that
/// one failure takes two copies: 0 under the strict placement rule,
/// positive under `with relaxed placement` when daemons are few.
///
/// Exact (a sum over the cells of the joint grid of every part) when that
/// grid has at most [`AT_RISK_EXACT_CELLS`] cells; otherwise an estimate
/// over a fixed sequence of [`AT_RISK_SAMPLES`] points, the same on every
/// call.
pub fn at_risk_fraction(space: &Space) -> f64 {
    let parts: Vec<&SubspaceLayout> = object_parts(space).into_iter().map(|(_, l)| l).collect();
    // Per attribute, the union of every part's cuts on it.
    let mut cuts: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
    for part in &parts {
        for (a, splits) in part.attrs.iter().zip(&part.splits) {
            cuts.entry(*a).or_default().extend(splits.iter().copied());
        }
    }
    let attrs: Vec<usize> = cuts.keys().copied().collect();
    let axes: Vec<Vec<u64>> = cuts
        .into_values()
        .map(|s| s.into_iter().collect())
        .collect();
    let cells = axes
        .iter()
        .try_fold(1usize, |acc, s| acc.checked_mul(s.len() + 1));
    let at_risk = |point: &BTreeMap<usize, u64>| -> bool {
        let mut seen: BTreeSet<DaemonId> = BTreeSet::new();
        parts.iter().any(|part| {
            let coords: Vec<u64> = part.attrs.iter().map(|a| point[a]).collect();
            let region: &Region = &part.regions[part.region_index(&coords)];
            region.chain.iter().any(|d| !seen.insert(*d))
        })
    };
    match cells {
        Some(cells) if cells <= AT_RISK_EXACT_CELLS => {
            let mut risky = 0f64;
            for cell in 0..cells {
                let (mut rest, mut weight) = (cell, 1f64);
                let mut point = BTreeMap::new();
                for (a, splits) in attrs.iter().zip(&axes).rev() {
                    let i = rest % (splits.len() + 1);
                    rest /= splits.len() + 1;
                    let lo = if i == 0 { 0 } else { splits[i - 1] };
                    let len = splits
                        .get(i)
                        .map_or(2f64.powi(64) - lo as f64, |hi| (*hi - lo) as f64);
                    weight *= len / 2f64.powi(64);
                    point.insert(*a, lo);
                }
                if at_risk(&point) {
                    risky += weight;
                }
            }
            risky
        }
        _ => {
            let mut state = 0x5eed_u64;
            let risky = (0..AT_RISK_SAMPLES)
                .filter(|_| {
                    let point = attrs.iter().map(|&a| (a, splitmix(&mut state))).collect();
                    at_risk(&point)
                })
                .count();
            risky as f64 / AT_RISK_SAMPLES as f64
        }
    }
}

/// [`at_risk_fraction`] sums exactly up to this many joint cells.
pub const AT_RISK_EXACT_CELLS: usize = 1 << 20;
/// [`at_risk_fraction`]'s sample size beyond [`AT_RISK_EXACT_CELLS`].
pub const AT_RISK_SAMPLES: usize = 1 << 18;

/// SplitMix64: a fixed, well-spread sequence (not randomness: the same
/// points on every call).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{DaemonId, SpaceId};
    use crate::parse::parse_space;
    use crate::region::default_layout;
    use proptest::prelude::*;

    fn space(text: &str) -> Space {
        default_layout(SpaceId(1), parse_space(text).expect(text))
    }

    #[test]
    fn a_part_being_built_is_covered_by_the_others_and_covers_nothing() {
        let mut s = space("space s key k attributes a, b replex a replex b create 4 partitions");
        s.subspaces[2].state = PartState::Building { progress: 40 };
        let none = BTreeSet::new();
        let building = s.subspaces[2].regions[0].id;
        let key: Vec<RegionId> = s.subspaces[0].regions.iter().map(|r| r.id).collect();
        let a: Vec<RegionId> = s.subspaces[1].regions.iter().map(|r| r.id).collect();
        // Its objects are everywhere in the ready parts: one whole part.
        let cover = covering_set(&s, &none, building).unwrap();
        assert!(cover == key || cover == a, "{cover:?}");
        // A key region is found in replex a, never in the part being built,
        // and with a failed too there is no cover.
        assert_eq!(covering_set(&s, &none, key[0]).unwrap(), a);
        let failed: BTreeSet<RegionId> = a.iter().copied().chain([key[0]]).collect();
        assert_eq!(
            covering_set(&s, &failed, key[0]),
            Err(CoverError::Unavailable(key[0]))
        );
        // A dropping part still holds every object: it covers.
        s.subspaces[1].state = PartState::Dropping;
        assert_eq!(covering_set(&s, &none, key[0]).unwrap(), a);
    }

    #[test]
    fn hybrid_splits_take_every_group_boundary() {
        let parent = uniform_splits(12);
        assert_eq!(hybrid_splits(&parent, 3), Some(vec![parent[3], parent[7]]));
        assert_eq!(hybrid_splits(&parent, 12), Some(parent.clone()));
        assert_eq!(hybrid_splits(&parent, 1), Some(vec![]));
        assert_eq!(hybrid_splits(&parent, 5), None);
        assert_eq!(hybrid_splits(&parent, 0), None);
    }

    #[test]
    fn a_replex_space_lays_out_key_hybrids_then_replexes() {
        let s = space(
            "space s key k attributes a, b replex a replex b hybrid a, b groups 3, 4 \
             create 12 partitions",
        );
        let kinds: Vec<SubspaceKind> = s.subspaces.iter().map(|l| l.kind).collect();
        use SubspaceKind::*;
        assert_eq!(kinds, vec![Subspace, Hybrid, Replex, Replex]);
        let hybrid = &s.subspaces[1];
        assert_eq!(hybrid.attrs, vec![1, 2]);
        assert_eq!(hybrid.grid(), vec![3, 4]);
        // Every hybrid cut is a cut of its parent.
        assert!(hybrid.splits[0]
            .iter()
            .all(|c| s.subspaces[2].splits[0].contains(c)));
        assert!(hybrid.splits[1]
            .iter()
            .all(|c| s.subspaces[3].splits[0].contains(c)));
        assert_eq!(s.desc.fault_tolerance, 3);
    }

    /// Exhaustive minimum: the fewest live regions of other parts whose
    /// union holds every object of `region`, by a search over the cells
    /// of the joint grid (each lies in exactly one region per part, so a
    /// cell offers one candidate per part). `None`: no cover exists.
    fn brute_force_minimum(
        space: &Space,
        failed: &BTreeSet<RegionId>,
        region: RegionId,
        bound: usize,
    ) -> Option<usize> {
        let parts: Vec<&SubspaceLayout> = space.subspaces.iter().collect();
        let (home, index) = parts
            .iter()
            .enumerate()
            .find_map(|(k, l)| {
                l.regions
                    .iter()
                    .position(|r| r.id == region)
                    .map(|i| (k, i))
            })
            .unwrap();
        let target = parts[home].cell_by_attr(index);
        let mut cuts: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
        for part in &parts {
            for (a, splits) in part.attrs.iter().zip(&part.splits) {
                let (lo, hi) = target.get(a).copied().unwrap_or((0, u64::MAX));
                cuts.entry(*a)
                    .or_default()
                    .extend(splits.iter().copied().filter(|c| *c > lo && *c <= hi));
            }
        }
        // Each joint cell by one point inside it (its low corner).
        let axes: Vec<(usize, Vec<u64>)> = cuts
            .into_iter()
            .map(|(a, c)| {
                let lo = target.get(&a).map_or(0, |t| t.0);
                (a, std::iter::once(lo).chain(c).collect())
            })
            .collect();
        let mut points: Vec<BTreeMap<usize, u64>> = vec![BTreeMap::new()];
        for (a, starts) in &axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    starts.iter().map(move |s| {
                        let mut q = p.clone();
                        q.insert(*a, *s);
                        q
                    })
                })
                .collect();
        }
        // Per cell, the live regions of other parts holding it.
        let options: Vec<Vec<RegionId>> = points
            .iter()
            .map(|p| {
                parts
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k != home)
                    .map(|(_, l)| {
                        let c: Vec<u64> = l.attrs.iter().map(|a| p[a]).collect();
                        l.regions[l.region_index(&c)].id
                    })
                    .filter(|id| !failed.contains(id))
                    .collect()
            })
            .collect();
        fn search(
            options: &[Vec<RegionId>],
            chosen: &mut BTreeSet<RegionId>,
            best: &mut Option<usize>,
            bound: usize,
        ) {
            let limit = best.unwrap_or(bound + 1);
            if chosen.len() >= limit {
                return;
            }
            let Some(open) = options
                .iter()
                .find(|o| !o.iter().any(|r| chosen.contains(r)))
            else {
                *best = Some(chosen.len());
                return;
            };
            for r in open {
                chosen.insert(*r);
                search(options, chosen, best, bound);
                chosen.remove(r);
            }
        }
        let mut best = None;
        search(&options, &mut BTreeSet::new(), &mut best, bound);
        best
    }

    fn layouts() -> impl Strategy<Value = String> {
        let p = prop_oneof![Just(4u32), Just(6), Just(8), Just(9), Just(12)];
        (
            p,
            0usize..4,
            any::<proptest::sample::Index>(),
            any::<proptest::sample::Index>(),
        )
            .prop_map(|(p, shape, i, j)| {
                let divisors = |m: u32| {
                    (1..=m)
                        .filter(|d| m.is_multiple_of(*d))
                        .collect::<Vec<u32>>()
                };
                let first2 = crate::region::grid_for_partitions(p, 2)[0];
                let (n1, n2) = match shape {
                    3 => (*i.get(&divisors(p)), *j.get(&divisors(first2))),
                    _ => (*i.get(&divisors(p)), *j.get(&divisors(p))),
                };
                let clauses = match shape {
                    0 => format!("replex b hybrid k, b groups {n1}, {n2}"),
                    1 => format!("replex a replex b hybrid a, b groups {n1}, {n2}"),
                    2 => "replex a replex b".to_string(),
                    _ => format!("replex a, b hybrid k, a groups {n1}, {n2}"),
                };
                format!("space s key k attributes a, b {clauses} create {p} partitions")
            })
    }

    fn draw(state: &mut u64, (lo, hi): (u64, u64)) -> u64 {
        let r = splitmix(state);
        match (hi - lo).checked_add(1) {
            Some(width) => lo + r % width,
            None => r,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The clauses read back from a space's parts are the ones it was
        /// declared with, in whatever order the parts come (a relayout
        /// appends what it adds).
        #[test]
        fn the_clauses_of_a_spaces_parts_are_its_description(
            text in layouts(),
            relaxed in any::<bool>(),
            rotate in 0usize..4,
        ) {
            let desc = parse_space(&text).unwrap();
            let (mut parts, _) = replex_layouts(&desc, RegionId(1));
            let decl = desc.replex.clone().map(|r| ReplexDecl { relaxed, ..r });
            prop_assert_eq!(decl_of_layouts(&parts, relaxed), decl.clone());
            // In another order: the same replexes (in the parts' order) and
            // the same hybrids.
            let n = parts.len();
            parts[1..].rotate_left(rotate % (n - 1).max(1));
            let replexes_in_order: Vec<Vec<usize>> = parts
                .iter()
                .filter(|l| l.kind == SubspaceKind::Replex)
                .map(|l| l.attrs.clone())
                .collect();
            let read = decl_of_layouts(&parts, relaxed).unwrap();
            prop_assert_eq!(&read.replexes, &replexes_in_order);
            // Sides are numbered by the replexes' order: compare by the
            // attributes each side places by.
            let side_attrs = |d: &ReplexDecl| -> Vec<(usize, usize, [u32; 2])> {
                let first = |side: usize| if side == 0 { 0 } else { d.replexes[side - 1][0] };
                let mut v: Vec<_> = d.hybrids.iter().map(|h| (first(h.sides[0]), first(h.sides[1]), h.groups)).collect();
                v.sort();
                v
            };
            prop_assert_eq!(side_attrs(&read), side_attrs(decl.as_ref().unwrap()));
        }

        /// Every object of the region lies in the covering set (which
        /// holds live regions of other parts only), and no smaller set
        /// of live regions holds them all.
        #[test]
        fn covering_sets_hold_every_object_and_are_minimal(
            text in layouts(),
            target in any::<proptest::sample::Index>(),
            others in proptest::collection::vec(any::<proptest::sample::Index>(), 0..3),
            seed in any::<u64>(),
        ) {
            let s = space(&text);
            let all: Vec<RegionId> = s.subspaces.iter().flat_map(|l| l.regions.iter().map(|r| r.id)).collect();
            let region = *target.get(&all);
            let mut failed: BTreeSet<RegionId> = others.iter().map(|i| *i.get(&all)).collect();
            failed.insert(region);
            let result = covering_set(&s, &failed, region);
            let single = failed.len() == 1;
            match result {
                Ok(set) => {
                    let home = s.subspaces.iter().position(|l| l.regions.iter().any(|r| r.id == region)).unwrap();
                    let index = s.subspaces[home].regions.iter().position(|r| r.id == region).unwrap();
                    prop_assert!(set.iter().all(|r| !failed.contains(r)));
                    prop_assert!(!set.iter().any(|r| s.subspaces[home].regions.iter().any(|x| x.id == *r)));
                    let cell = s.subspaces[home].cell_by_attr(index);
                    let mut state = seed;
                    for _ in 0..200 {
                        let point: BTreeMap<usize, u64> = (0..3)
                            .map(|a| (a, draw(&mut state, cell.get(&a).copied().unwrap_or((0, u64::MAX)))))
                            .collect();
                        let held = s.subspaces.iter().enumerate().filter(|(k, _)| *k != home).any(|(_, l)| {
                            let c: Vec<u64> = l.attrs.iter().map(|a| point[a]).collect();
                            set.contains(&l.regions[l.region_index(&c)].id)
                        });
                        prop_assert!(held, "{text}: object {point:?} of {region} not covered by {set:?}");
                    }
                    let best = brute_force_minimum(&s, &failed, region, set.len());
                    if single {
                        prop_assert_eq!(best, Some(set.len()), "{}", text);
                    } else {
                        prop_assert!(best.is_some_and(|b| b <= set.len()));
                    }
                }
                Err(e) => {
                    prop_assert_eq!(e, CoverError::Unavailable(region));
                    prop_assert_eq!(brute_force_minimum(&s, &failed, region, usize::MAX - 1), None, "{}", text);
                }
            }
        }

        /// The lanes of a read with failed regions, against a brute-force
        /// model: an object is kept by exactly one lane when a planned
        /// region places it and by none otherwise (so nothing is lost or
        /// counted twice), no lane asks a failed region, and the planned
        /// regions that did not fail are asked as they are.
        #[test]
        fn redirected_lanes_keep_each_planned_object_exactly_once(
            text in layouts(),
            part in any::<proptest::sample::Index>(),
            planned in proptest::collection::vec(any::<proptest::sample::Index>(), 1..6),
            failed in proptest::collection::vec(any::<proptest::sample::Index>(), 1..3),
            seed in any::<u64>(),
        ) {
            let s = space(&text);
            let all: Vec<RegionId> = s.subspaces.iter().flat_map(|l| l.regions.iter().map(|r| r.id)).collect();
            let home = part.index(s.subspaces.len());
            let layout = &s.subspaces[home];
            let planned: BTreeSet<RegionId> = planned.iter().map(|i| i.get(&layout.regions).id).collect();
            let planned: Vec<RegionId> = planned.into_iter().collect();
            // At least one planned region fails, besides random others.
            let mut failed: BTreeSet<RegionId> = failed.iter().map(|i| *i.get(&all)).collect();
            failed.insert(planned[0]);
            let lanes = match redirect_reads(&s, &failed, &planned) {
                Ok(lanes) => lanes,
                Err(e) => {
                    let lost = planned.iter().copied().filter(|r| failed.contains(r));
                    prop_assert!(lost.into_iter().any(|r| covering_set(&s, &failed, r) == Err(e.clone())));
                    return Ok(());
                }
            };
            prop_assert!(lanes.iter().all(|l| !failed.contains(&l.region)));
            // What a daemon is told of each lost region names the same
            // regions in the same parts.
            for lost in lanes.iter().filter_map(|l| l.lost.as_ref()) {
                let told = lost.within(&s).and_then(|w| w.lost_region(&s));
                prop_assert_eq!(told.as_ref(), Some(lost));
            }
            let direct: Vec<RegionId> = lanes.iter().filter(|l| l.lost.is_none()).map(|l| l.region).collect();
            let alive: Vec<RegionId> = planned.iter().copied().filter(|r| !failed.contains(r)).collect();
            prop_assert_eq!(direct, alive);
            let mut state = seed;
            for _ in 0..300 {
                let object = random_object(&mut state);
                let kept = lanes
                    .iter()
                    .filter(|lane| {
                        s.subspaces[part_of(&s, lane.region)].region_of(&object).id == lane.region
                            && lane.lost.as_ref().is_none_or(|lost| lost.keeps(&s, lane.region, &object) == Some(true))
                    })
                    .count();
                let expected = usize::from(planned.contains(&layout.region_of(&object).id));
                prop_assert_eq!(kept, expected, "{}: {:?} lanes {:?}", text, object, lanes);
            }
        }
    }

    /// A string object of the test spaces (`k`, `a`, `b` are strings)
    /// drawn from `state`.
    fn random_object(state: &mut u64) -> crate::Object {
        crate::Object {
            values: (0..3)
                .map(|_| crate::Value::str(&format!("v{}", splitmix(state) % 1000)))
                .collect(),
        }
    }

    /// The position of the part holding region `id` of `space`.
    fn part_of(space: &Space, id: RegionId) -> usize {
        space
            .subspaces
            .iter()
            .position(|l| l.regions.iter().any(|r| r.id == id))
            .expect("a region of the space")
    }

    #[test]
    fn failed_regions_are_those_without_an_available_daemon_or_being_refreshed() {
        use crate::config::{DaemonInfo, DaemonState};
        let mut s = space("space s key k attributes a replex a create 4 partitions");
        for layout in &mut s.subspaces {
            for (i, r) in layout.regions.iter_mut().enumerate() {
                r.chain = vec![DaemonId(i as u64 % 2 + 1)];
            }
        }
        let key = s.subspaces[0].regions.clone();
        s.subspaces[0].regions[3].chain.clear();
        let daemon = |id: u64, state| {
            (
                DaemonId(id),
                DaemonInfo {
                    id: DaemonId(id),
                    addr: String::new(),
                    state,
                    metrics: None,
                },
            )
        };
        let mut config = Configuration {
            daemons: [
                daemon(1, DaemonState::Available),
                daemon(2, DaemonState::Offline),
            ]
            .into(),
            ..Configuration::default()
        };
        // Daemon 2 (odd indexes) is offline; key region 3 has no chain.
        let replex = &s.subspaces[1].regions;
        let expected = BTreeSet::from([key[1].id, key[3].id, replex[1].id, replex[3].id]);
        assert_eq!(failed_regions(&config, &s), expected);
        config
            .daemons
            .insert(DaemonId(2), daemon(2, DaemonState::Available).1);
        assert_eq!(failed_regions(&config, &s), BTreeSet::from([key[3].id]));
        // A region being refreshed keeps its live daemon as its chain, but
        // that daemon's copy may be stale until the refresh completes.
        config.rebuilds.push(crate::config::Rebuild {
            id: 1,
            region: replex[0].id,
            to: DaemonId(1),
            sources: vec![(key[0].id, DaemonId(1))],
        });
        assert_eq!(
            failed_regions(&config, &s),
            BTreeSet::from([key[3].id, replex[0].id])
        );
        // A space without replexes has no other copy to read: nothing is
        // redirected there.
        let mut plain = space("space p key k attributes a create 4 partitions");
        plain.subspaces[0].regions[0].chain.clear();
        assert!(failed_regions(&config, &plain).is_empty());
    }

    #[test]
    fn a_lost_region_keeps_its_objects_once_through_its_cover() {
        let s = space(
            "space s key k attributes a, b replex a replex b hybrid a, b groups 2, 2 \
             create 12 partitions",
        );
        let (key, hybrid) = (&s.subspaces[0], &s.subspaces[1]);
        // Key region 0 and hybrid (0, 0) fail: the cover is the other
        // three hybrid regions and A's six regions of group 0, which share
        // objects with hybrid (0, 1).
        let failed = BTreeSet::from([key.regions[0].id, hybrid.regions[0].id]);
        let lanes = redirect_reads(&s, &failed, &[key.regions[0].id]).unwrap();
        let lost = lanes[0].lost.clone().unwrap();
        assert_eq!((lost.part, lost.region), (0, key.regions[0].id));
        let parts: Vec<usize> = lost.cover.iter().map(|(p, _)| *p).collect();
        assert_eq!(parts, vec![1, 1, 1, 2, 2, 2, 2, 2, 2]);
        let a = &s.subspaces[0];
        let mut state = 7;
        let mut shared = 0;
        for _ in 0..500 {
            let object = random_object(&mut state);
            let in_lost = a.region_of(&object).id == lost.region;
            let holding: Vec<RegionId> = lost
                .cover
                .iter()
                .filter(|(p, r)| s.subspaces[*p].region_of(&object).id == *r)
                .map(|(_, r)| *r)
                .collect();
            if in_lost && holding.len() > 1 {
                shared += 1;
            }
            let keeping: Vec<RegionId> = holding
                .iter()
                .copied()
                .filter(|r| lost.keeps(&s, *r, &object) == Some(true))
                .collect();
            let expected = if in_lost {
                holding[..1].to_vec()
            } else {
                vec![]
            };
            assert_eq!(keeping, expected, "{object:?}");
        }
        assert!(shared > 0, "no object of two cover regions was drawn");
        // An object of the lost region short of a placing attribute of
        // the cover is not decided.
        let short = (0..)
            .map(|_| random_object(&mut state))
            .find(|o| a.region_of(o).id == lost.region)
            .map(|mut o| {
                o.values.truncate(1);
                o
            })
            .unwrap();
        assert_eq!(lost.keeps(&s, lost.cover[0].1, &short), None);
    }

    #[test]
    fn amplification_is_n2_for_an_a_region_and_n1_for_a_b_region() {
        for p in [4u32, 6, 8, 12, 30] {
            for n1 in (1..=p).filter(|d| p.is_multiple_of(*d)) {
                for n2 in (1..=p).filter(|d| p.is_multiple_of(*d)) {
                    let s = space(&format!(
                        "space s key k attributes a, b replex a replex b \
                         hybrid a, b groups {n1}, {n2} create {p} partitions"
                    ));
                    // Parts: key, hybrid, a, b. The key subspace offers p.
                    let (a, b) = (&s.subspaces[2], &s.subspaces[3]);
                    for (layout, expected) in [(a, n2), (b, n1)] {
                        for r in &layout.regions {
                            let failed = BTreeSet::from([r.id]);
                            let set = covering_set(&s, &failed, r.id).unwrap();
                            assert_eq!(set.len(), expected as usize, "p={p} ({n1}, {n2})");
                        }
                    }
                }
            }
        }
    }

    /// A daemon finds a lost region's parts by their ids in its own
    /// configuration, where a part added before them shifts their
    /// positions, and finds nothing when a region is gone or the covering
    /// set is longer than the space's regions.
    #[test]
    fn a_lost_region_is_told_by_part_ids() {
        let s = space("space s key k attributes a, b replex a replex b create 4 partitions");
        let failed = BTreeSet::from([s.subspaces[0].regions[1].id]);
        let lanes = redirect_reads(&s, &failed, &[s.subspaces[0].regions[1].id]).expect("covered");
        let lost = lanes[0]
            .lost
            .clone()
            .expect("a lane standing in for the key region");
        let within = lost.within(&s).expect("its parts are in the space");
        // A part added before the others (a new replex, its own id and
        // regions) moves them one place down.
        let mut later = s.clone();
        let mut added = s.subspaces[1].clone();
        added.part = PartId(99);
        for r in &mut added.regions {
            r.id = RegionId(r.id.0 + 1000);
        }
        later.subspaces.insert(1, added);
        let covering = lost.cover[0].0;
        let moved = within
            .lost_region(&later)
            .expect("its parts are still there");
        assert_eq!(moved.region, lost.region);
        assert_eq!(moved.part, 0);
        assert_eq!(
            moved.cover.iter().map(|c| c.1).collect::<Vec<_>>(),
            lost.cover.iter().map(|c| c.1).collect::<Vec<_>>()
        );
        assert!(moved.cover.iter().all(|c| c.0 == covering + 1), "{moved:?}");
        let mut state = 7;
        for _ in 0..200 {
            let object = random_object(&mut state);
            for lane in &lanes {
                assert_eq!(
                    moved.keeps(&later, lane.region, &object),
                    lost.keeps(&s, lane.region, &object)
                );
            }
        }
        // The covering part gone: nothing to tell.
        let mut gone = s.clone();
        gone.subspaces.remove(covering);
        assert_eq!(within.lost_region(&gone), None);
        let regions: usize = s.subspaces.iter().map(|l| l.regions.len()).sum();
        let long = Within {
            cover: vec![within.cover[0]; regions + 1],
            ..within.clone()
        };
        assert_eq!(long.lost_region(&s), None);
    }

    #[test]
    fn a_second_failure_expands_recursively_or_is_unavailable() {
        let s = space(
            "space s key k attributes a, b replex a replex b hybrid a, b groups 2, 2 \
             create 4 partitions",
        );
        let (hybrid, a, b) = (&s.subspaces[1], &s.subspaces[2], &s.subspaces[3]);
        // A region 0 (group 0) and hybrid (0, 0) fail: (0, 1) plus B's
        // two regions of group 0.
        let failed = BTreeSet::from([a.regions[0].id, hybrid.regions[0].id]);
        let set = covering_set(&s, &failed, a.regions[0].id).unwrap();
        let expected: Vec<RegionId> = vec![hybrid.regions[1].id, b.regions[0].id, b.regions[1].id];
        assert_eq!(set, expected);
        // With every part holding a failed copy of some object of it, a
        // region is unavailable.
        let key = &s.subspaces[0];
        let mut failed: BTreeSet<RegionId> = key.regions.iter().map(|r| r.id).collect();
        failed.extend([a.regions[0].id, hybrid.regions[0].id, b.regions[0].id]);
        assert_eq!(
            covering_set(&s, &failed, a.regions[0].id),
            Err(CoverError::Unavailable(a.regions[0].id))
        );
        assert_eq!(
            covering_set(&s, &failed, RegionId(999)),
            Err(CoverError::NoRegion(RegionId(999)))
        );
    }

    #[test]
    fn can_share_follows_the_hybrid_groups() {
        let s = space(
            "space s key k attributes a, b replex a replex b hybrid a, b groups 2, 3 \
             create 6 partitions",
        );
        let (key, hybrid, a, b) = (
            &s.subspaces[0],
            &s.subspaces[1],
            &s.subspaces[2],
            &s.subspaces[3],
        );
        for x in 0..2 {
            for y in 0..3 {
                let h = x * 3 + y;
                for i in 0..6 {
                    assert_eq!(can_share(hybrid, h, a, i), i / 3 == x);
                    assert_eq!(can_share(hybrid, h, b, i), i / 2 == y);
                    assert!(can_share(hybrid, h, key, i));
                    assert!(can_share(a, i, b, h % 6));
                }
            }
        }
    }

    #[test]
    fn at_risk_counts_objects_with_two_copies_on_one_daemon() {
        let mut s = space("space s key k attributes a replex a create 4 partitions");
        // Key regions on daemons 1..=4, replex regions too: an object is
        // at risk when its key interval and its a interval are equal.
        for layout in &mut s.subspaces {
            for (i, r) in layout.regions.iter_mut().enumerate() {
                r.chain = vec![DaemonId(i as u64 + 1)];
            }
        }
        assert!((at_risk_fraction(&s) - 0.25).abs() < 1e-9);
        // Disjoint daemons: none at risk.
        for r in &mut s.subspaces[1].regions {
            r.chain[0].0 += 10;
        }
        assert_eq!(at_risk_fraction(&s), 0.0);
    }
}
