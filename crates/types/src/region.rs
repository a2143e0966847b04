//! Region math: cutting a subspace into a grid and finding a point's cell.
//!
//! A subspace of `d` attributes is a `d`-dimensional grid over the
//! coordinate axes. Each dimension is cut by sorted split points into
//! intervals; the regions are the cells, numbered in mixed radix with the last
//! dimension varying fastest:
//!
//! ```text
//!   dimension 1 (2 intervals) -->
//!   +--------+--------+
//!   |   0    |   1    |  dimension 0, interval 0
//!   +--------+--------+
//!   |   2    |   3    |  dimension 0, interval 1
//!   +--------+--------+
//!   |   4    |   5    |  dimension 0, interval 2
//!   +--------+--------+
//! ```
//!
//! Coordinate intervals here are inclusive `(lo, hi)` pairs; an interval with
//! `lo > hi` is empty (see [`crate::interval::coordinate_interval`]).

use crate::config::{Region, Space, SubspaceKind, SubspaceLayout};
use crate::coordinate::coordinate;
use crate::schema::SpaceDesc;
use crate::sortkey::order_coordinate;
use crate::value::{Object, Value};

/// Why a key has no key-subspace region.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyRegionError {
    /// The key's type has no coordinate (only hashable types can be keys).
    #[error("the key is not of a hashable type")]
    NotHashable,
    /// The space has no key subspace, or one that is not a one-dimensional
    /// grid with a region for each of its cells (a configuration no
    /// coordinator should produce).
    #[error("space {space:?} has no well-formed key subspace")]
    NoKeySubspace {
        /// The space's name.
        space: String,
    },
}

impl Space {
    /// The key-subspace region holding `key` (its chain's head is the
    /// key's point leader). The one place that maps a key to its region,
    /// for clients and daemons alike; it never panics on an odd
    /// configuration.
    pub fn key_region(&self, key: &Value) -> Result<&Region, KeyRegionError> {
        let coordinate = coordinate(key).ok_or(KeyRegionError::NotHashable)?;
        let malformed = || KeyRegionError::NoKeySubspace {
            space: self.desc.name.clone(),
        };
        let layout = self.subspaces.first().ok_or_else(malformed)?;
        if layout.splits.len() != 1 {
            return Err(malformed());
        }
        layout
            .regions
            .get(layout.region_index(&[coordinate]))
            .ok_or_else(malformed)
    }
}

/// Intervals per dimension for about `partitions` regions over `dims`
/// dimensions: counts as equal as possible, product as close as possible.
///
/// Rule: every count is `k` or `k + 1` (so max − min ≤ 1, and never 0), and
/// among all such vectors the product is the closest to `partitions`; on a tie
/// the smaller product wins (never more regions than asked for without need).
/// The larger counts come last. `dims == 1` gives exactly `[partitions]`;
/// `partitions == 0` is treated as 1; `dims == 0` gives `[]`.
///
/// Examples: `(64, 2) → [8, 8]`, `(64, 3) → [4, 4, 4]`,
/// `(64, 5) → [2, 2, 2, 3, 3]` (72 regions: 48 and 108 are farther from 64;
/// `[2, 2, 2, 2, 4]` would hit 64 exactly but is not "as equal as possible").
///
/// Why only one `k`: with `k = ⌊P^(1/d)⌋`, every vector built on a smaller
/// base has a product ≤ `k^d`, and every vector built on a larger base has a
/// product ≥ `(k+1)^d`; both are among the candidates `k^(d−j)·(k+1)^j`.
pub fn grid_for_partitions(partitions: u32, dims: usize) -> Vec<u32> {
    if dims == 0 {
        return Vec::new();
    }
    let p = u128::from(partitions.max(1));
    let k = integer_root(partitions.max(1), dims);
    let (mut best_j, mut best_dist) = (0usize, u128::MAX);
    for j in 0..=dims {
        let product =
            pow_sat(u128::from(k), dims - j).saturating_mul(pow_sat(u128::from(k) + 1, j));
        let dist = product.abs_diff(p);
        // Products grow with j, so the first of equal distances is the smaller.
        if dist < best_dist {
            best_dist = dist;
            best_j = j;
        }
    }
    let mut counts = vec![k; dims - best_j];
    counts.extend(std::iter::repeat_n(k.saturating_add(1), best_j));
    counts
}

/// `base^exp`, saturating at `u128::MAX`.
fn pow_sat(base: u128, exp: usize) -> u128 {
    (0..exp).fold(1u128, |acc, _| acc.saturating_mul(base))
}

/// The largest `k ≥ 1` with `k^dims ≤ p` (for `p ≥ 1`, `dims ≥ 1`).
fn integer_root(p: u32, dims: usize) -> u32 {
    let (mut lo, mut hi) = (1u32, p);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if pow_sat(u128::from(mid), dims) <= u128::from(p) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Split points cutting the whole `u64` axis into `intervals` equal intervals.
///
/// Split `i` (for `i` in `1..intervals`) is `⌊i · 2^64 / intervals⌋`, so
/// interval lengths differ by at most one. `intervals` of 0 or 1 gives no
/// split points (one interval covering the whole axis).
pub fn uniform_splits(intervals: u32) -> Vec<u64> {
    let n = u128::from(intervals.max(1));
    (1..n).map(|i| ((i << 64) / n) as u64).collect()
}

/// The default split points of a subspace of `dims` dimensions asked to have
/// about `partitions` regions: [`grid_for_partitions`] then
/// [`uniform_splits`] per dimension.
pub fn default_splits(partitions: u32, dims: usize) -> Vec<Vec<u64>> {
    grid_for_partitions(partitions, dims)
        .into_iter()
        .map(uniform_splits)
        .collect()
}

/// Space `id` of `desc` laid out as a new space is: every subspace (the
/// key subspace first) cut by [`default_splits`] (a replex space's parts
/// as [`crate::replex::replex_shapes`] gives them), ready, its regions
/// numbered from 1 with no replicas yet. For planning and tests that need
/// a layout without a coordinator.
pub fn default_layout(id: crate::ids::SpaceId, desc: crate::schema::SpaceDesc) -> Space {
    let mut next = 0u64;
    let shapes: Vec<crate::replex::PartShape> = if desc.replex.is_some() {
        crate::replex::replex_shapes(&desc)
    } else {
        desc.all_subspaces()
            .into_iter()
            .map(|attrs| crate::replex::PartShape {
                splits: default_splits(desc.partitions, attrs.len()),
                attrs,
                kind: SubspaceKind::Subspace,
            })
            .collect()
    };
    let subspaces = shapes
        .into_iter()
        .enumerate()
        .map(|(part, shape)| {
            let crate::replex::PartShape {
                attrs,
                splits,
                kind,
            } = shape;
            let cells: usize = splits.iter().map(|s| s.len() + 1).product();
            let regions = (0..cells)
                .map(|_| {
                    next += 1;
                    Region {
                        id: crate::ids::RegionId(next),
                        chain: vec![],
                    }
                })
                .collect();
            SubspaceLayout {
                attrs,
                splits,
                regions,
                part: crate::ids::PartId(part as u64),
                state: crate::layout::PartState::Ready,
                kind,
            }
        })
        .collect();
    Space {
        id,
        desc,
        subspaces,
        indexes: Vec::new(),
    }
}

/// The interval of `coordinate` given sorted split points.
pub fn interval_index(splits: &[u64], coordinate: u64) -> usize {
    splits.partition_point(|s| *s <= coordinate)
}

/// The per-dimension ranges of interval indexes that a box of inclusive
/// coordinate intervals touches; `None` when the box is empty.
fn interval_ranges(
    layout: &SubspaceLayout,
    intervals: &[(u64, u64)],
) -> Option<Vec<(usize, usize)>> {
    assert_eq!(
        intervals.len(),
        layout.splits.len(),
        "one coordinate interval per dimension"
    );
    layout
        .splits
        .iter()
        .zip(intervals)
        .map(|(splits, &(lo, hi))| {
            (lo <= hi).then(|| (interval_index(splits, lo), interval_index(splits, hi)))
        })
        .collect()
}

/// How many regions of `layout` intersect the box given by one inclusive
/// coordinate interval per dimension (`lo > hi` = empty). Panics if the
/// number of intervals differs from the number of dimensions.
pub fn count_regions_intersecting(layout: &SubspaceLayout, intervals: &[(u64, u64)]) -> usize {
    match interval_ranges(layout, intervals) {
        None => 0,
        Some(ranges) => ranges.iter().map(|(a, b)| b - a + 1).product(),
    }
}

/// The indexes (into `layout.regions`, ascending) of the regions that
/// intersect the box given by one inclusive coordinate interval per dimension
/// (`lo > hi` = empty, giving no regions). Panics if the number of intervals
/// differs from the number of dimensions.
pub fn regions_intersecting(layout: &SubspaceLayout, intervals: &[(u64, u64)]) -> Vec<usize> {
    let Some(ranges) = interval_ranges(layout, intervals) else {
        return Vec::new();
    };
    let radix: Vec<usize> = layout.splits.iter().map(|s| s.len() + 1).collect();
    // Mixed-radix enumeration, last dimension fastest: ascending indexes.
    let mut out = Vec::new();
    let mut current: Vec<usize> = ranges.iter().map(|r| r.0).collect();
    loop {
        out.push(
            current
                .iter()
                .zip(&radix)
                .fold(0, |acc, (i, r)| acc * r + i),
        );
        let mut d = current.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            if current[d] < ranges[d].1 {
                current[d] += 1;
                break;
            }
            current[d] = ranges[d].0;
        }
    }
}

impl SubspaceLayout {
    /// The number of intervals per dimension.
    pub fn grid(&self) -> Vec<usize> {
        self.splits.iter().map(|s| s.len() + 1).collect()
    }

    /// The index into `regions` of the cell holding this point (one
    /// coordinate per dimension): mixed radix, last dimension fastest.
    pub fn region_index(&self, coordinates: &[u64]) -> usize {
        assert_eq!(
            coordinates.len(),
            self.splits.len(),
            "one coordinate per dimension"
        );
        self.splits
            .iter()
            .zip(coordinates)
            .fold(0, |acc, (splits, &c)| {
                acc * (splits.len() + 1) + interval_index(splits, c)
            })
    }

    /// The inclusive coordinate interval of each dimension of the cell at
    /// `index` in `regions` (the inverse of [`Self::region_index`]).
    pub fn cell_bounds(&self, index: usize) -> Vec<(u64, u64)> {
        let mut rest = index;
        let mut bounds = vec![(0, u64::MAX); self.splits.len()];
        for (d, splits) in self.splits.iter().enumerate().rev() {
            let i = rest % (splits.len() + 1);
            rest /= splits.len() + 1;
            let lo = if i == 0 { 0 } else { splits[i - 1] };
            let hi = splits.get(i).map_or(u64::MAX, |s| s.saturating_sub(1));
            bounds[d] = (lo, hi);
        }
        bounds
    }

    /// [`Self::cell_bounds`] by attribute: the inclusive coordinate
    /// interval of the cell at `index` on each of the subspace's
    /// attributes.
    pub fn cell_by_attr(&self, index: usize) -> std::collections::BTreeMap<usize, (u64, u64)> {
        self.attrs
            .iter()
            .copied()
            .zip(self.cell_bounds(index))
            .collect()
    }

    /// The coordinates of `object` in this subspace, one per dimension.
    ///
    /// Panics if a subspace attribute is missing from the object or holds a
    /// non-hashable value: objects are type-checked before they are placed.
    /// A global index's one dimension is the attribute's order coordinate
    /// ([`order_coordinate`]), a subspace's the hashing [`coordinate`]s.
    pub fn coordinates_of(&self, object: &Object) -> Vec<u64> {
        let place = match self.kind {
            SubspaceKind::Subspace | SubspaceKind::Replex | SubspaceKind::Hybrid => coordinate,
            SubspaceKind::GlobalIndex => order_coordinate,
        };
        self.attrs
            .iter()
            .map(|&a| {
                let value = object.values.get(a).expect("object has every attribute");
                place(value).expect("subspace attributes are hashable")
            })
            .collect()
    }

    /// What a region of this subspace stores of `object`, a whole object
    /// of `desc`'s space: the object itself, or in a global index its
    /// projection — the key and the indexed attribute, every other
    /// attribute at its type's default — so that indexlets stay small
    /// whatever the objects hold, yet remain ordinary records.
    pub fn stored_form(&self, desc: &SpaceDesc, object: &Object) -> Object {
        match self.kind {
            SubspaceKind::Subspace | SubspaceKind::Replex | SubspaceKind::Hybrid => object.clone(),
            SubspaceKind::GlobalIndex => projection(desc, &self.attrs, object),
        }
    }

    /// The region holding `object` in this subspace.
    pub fn region_of(&self, object: &Object) -> &Region {
        &self.regions[self.region_index(&self.coordinates_of(object))]
    }
}

/// The projection of `object`, a whole object of `desc`'s space, on the
/// attributes `attrs`: its key and those attributes, every other
/// attribute at its type's default (what a global index's indexlet stores
/// of an object, [`SubspaceLayout::stored_form`]).
pub fn projection(desc: &SpaceDesc, attrs: &[usize], object: &Object) -> Object {
    Object {
        values: desc
            .attrs
            .iter()
            .enumerate()
            .map(|(i, attr)| match object.values.get(i) {
                Some(value) if i == 0 || attrs.contains(&i) => value.clone(),
                _ => attr.dtype.default_value(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RegionId;
    use crate::value::Value;

    fn layout(attrs: Vec<usize>, splits: Vec<Vec<u64>>) -> SubspaceLayout {
        let n: usize = splits.iter().map(|s| s.len() + 1).product();
        SubspaceLayout {
            attrs,
            splits,
            regions: (0..n)
                .map(|i| Region {
                    id: RegionId(100 + i as u64),
                    chain: vec![],
                })
                .collect(),
            part: crate::PartId::default(),
            state: crate::PartState::Ready,
            kind: SubspaceKind::Subspace,
        }
    }

    #[test]
    fn grid_examples() {
        assert_eq!(grid_for_partitions(64, 1), vec![64]);
        assert_eq!(grid_for_partitions(7, 1), vec![7]);
        assert_eq!(grid_for_partitions(64, 2), vec![8, 8]);
        assert_eq!(grid_for_partitions(64, 3), vec![4, 4, 4]);
        assert_eq!(grid_for_partitions(8, 3), vec![2, 2, 2]);
        // 2·2·2·3·3 = 72 is 8 away from 64; 2^4·3 = 48 is 16 away.
        assert_eq!(grid_for_partitions(64, 5), vec![2, 2, 2, 3, 3]);
        // 3·3 = 9 (1 away) beats 3·4 = 12 (2 away).
        assert_eq!(grid_for_partitions(10, 2), vec![3, 3]);
        // 2·2 = 4 and 2·3 = 6 are both 1 away from 5: the smaller wins.
        assert_eq!(grid_for_partitions(5, 2), vec![2, 2]);
        assert_eq!(grid_for_partitions(6, 2), vec![2, 3]);
        assert_eq!(grid_for_partitions(1, 3), vec![1, 1, 1]);
        assert_eq!(grid_for_partitions(0, 2), vec![1, 1]);
        assert_eq!(grid_for_partitions(2, 3), vec![1, 1, 2]);
        assert_eq!(grid_for_partitions(9, 0), Vec::<u32>::new());
        assert_eq!(grid_for_partitions(u32::MAX, 1), vec![u32::MAX]);
        // 65536² = 2^32 is 1 away from u32::MAX; 65535·65536 is 65535 away.
        assert_eq!(grid_for_partitions(u32::MAX, 2), vec![65536, 65536]);
    }

    /// Brute force: over every vector of counts in 1..=P+1 with max − min ≤ 1,
    /// none is closer to P than the chosen one, and ties go to the smaller.
    #[test]
    fn grid_is_closest_among_balanced_vectors() {
        fn all_vectors(d: usize, max: u64) -> Vec<Vec<u64>> {
            if d == 0 {
                return vec![vec![]];
            }
            let mut out = Vec::new();
            for rest in all_vectors(d - 1, max) {
                for c in 1..=max {
                    let mut v = rest.clone();
                    v.push(c);
                    out.push(v);
                }
            }
            out
        }
        for d in 1..=4usize {
            let max_p = if d <= 2 { 40 } else { 16 };
            for p in 1..=max_p as u32 {
                let grid = grid_for_partitions(p, d);
                assert_eq!(grid.len(), d);
                let (gmin, gmax) = (*grid.iter().min().unwrap(), *grid.iter().max().unwrap());
                assert!(gmin >= 1 && gmax - gmin <= 1, "{p} {d} {grid:?}");
                let product: u64 = grid.iter().map(|&c| u64::from(c)).product();
                let dist = product.abs_diff(u64::from(p));
                for v in all_vectors(d, u64::from(p) + 1) {
                    let (vmin, vmax) = (*v.iter().min().unwrap(), *v.iter().max().unwrap());
                    if vmax - vmin > 1 {
                        continue;
                    }
                    let vp: u64 = v.iter().product();
                    let vd = vp.abs_diff(u64::from(p));
                    assert!(
                        vd > dist || (vd == dist && vp >= product),
                        "P={p} d={d}: {v:?} beats {grid:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn uniform_splits_cut_equal_intervals() {
        assert_eq!(uniform_splits(0), Vec::<u64>::new());
        assert_eq!(uniform_splits(1), Vec::<u64>::new());
        assert_eq!(uniform_splits(2), vec![1 << 63]);
        assert_eq!(uniform_splits(4), vec![1 << 62, 1 << 63, 3 << 62]);
        for n in [3u32, 5, 7, 64, 1000] {
            let s = uniform_splits(n);
            assert_eq!(s.len(), n as usize - 1);
            // Interval lengths (in u128, whole axis = 2^64) differ by ≤ 1.
            let mut bounds = vec![0u128];
            bounds.extend(s.iter().map(|&x| u128::from(x)));
            bounds.push(1u128 << 64);
            let lens: Vec<u128> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
            let (mn, mx) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
            assert!(mx - mn <= 1, "n={n}");
            assert!(lens.iter().sum::<u128>() == 1u128 << 64);
        }
    }

    #[test]
    fn default_splits_shape() {
        let s = default_splits(64, 2);
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|d| d.len() == 7));
        assert_eq!(default_splits(64, 1)[0].len(), 63);
    }

    #[test]
    fn interval_index_edges() {
        let s = [10, 20];
        assert_eq!(interval_index(&s, 0), 0);
        assert_eq!(interval_index(&s, 9), 0);
        assert_eq!(interval_index(&s, 10), 1);
        assert_eq!(interval_index(&s, 19), 1);
        assert_eq!(interval_index(&s, 20), 2);
        assert_eq!(interval_index(&s, u64::MAX), 2);
        assert_eq!(interval_index(&[], 5), 0);
    }

    #[test]
    fn region_index_is_mixed_radix_last_fastest() {
        // 3 intervals × 2 intervals, as drawn in the module docs.
        let l = layout(vec![1, 2], vec![vec![10, 20], vec![100]]);
        assert_eq!(l.region_index(&[0, 0]), 0);
        assert_eq!(l.region_index(&[0, 100]), 1);
        assert_eq!(l.region_index(&[10, 0]), 2);
        assert_eq!(l.region_index(&[15, 200]), 3);
        assert_eq!(l.region_index(&[25, 5]), 4);
        assert_eq!(l.region_index(&[u64::MAX, u64::MAX]), 5);
        assert_eq!(l.grid(), vec![3, 2]);
    }

    #[test]
    fn cell_bounds_follow_mixed_radix_order() {
        let l = layout(vec![1, 2], vec![vec![100], vec![10, 20]]);
        assert_eq!(l.cell_bounds(0), vec![(0, 99), (0, 9)]);
        assert_eq!(l.cell_bounds(2), vec![(0, 99), (20, u64::MAX)]);
        assert_eq!(l.cell_bounds(4), vec![(100, u64::MAX), (10, 19)]);
        // Every point of a cell's bounds, and no point just outside them,
        // lies in that cell.
        let l = layout(vec![1, 2], vec![vec![3, 6], vec![2, 4, 5]]);
        for index in 0..l.regions.len() {
            let b = l.cell_bounds(index);
            for x in 0..8u64 {
                for y in 0..8u64 {
                    let inside = (b[0].0..=b[0].1).contains(&x) && (b[1].0..=b[1].1).contains(&y);
                    assert_eq!(l.region_index(&[x, y]) == index, inside, "{index} {x} {y}");
                }
            }
        }
    }

    fn space_with(subspaces: Vec<SubspaceLayout>) -> Space {
        let desc = crate::parse::parse_space("space t key int k attributes v create 8 partitions")
            .expect("a valid description");
        Space {
            id: crate::ids::SpaceId(1),
            desc,
            subspaces,
            indexes: vec![],
        }
    }

    #[test]
    fn key_region_is_the_cell_holding_the_key_coordinate() {
        let space = space_with(vec![layout(vec![0], vec![uniform_splits(8)])]);
        let cells: Vec<Vec<(u64, u64)>> =
            (0..8).map(|i| space.subspaces[0].cell_bounds(i)).collect();
        for key in (-50..50)
            .map(|i| i * 987_654_321_987)
            .chain([i64::MIN, i64::MAX])
        {
            let key = Value::Int(key);
            let c = coordinate(&key).unwrap();
            // Brute force: the one cell whose bounds contain the coordinate.
            let holding: Vec<usize> = (0..8)
                .filter(|&i| cells[i][0].0 <= c && c <= cells[i][0].1)
                .collect();
            assert_eq!(holding.len(), 1, "{key:?}");
            let region = space.key_region(&key).unwrap();
            assert_eq!(region.id, RegionId(100 + holding[0] as u64), "{key:?}");
        }
    }

    #[test]
    fn key_region_refuses_odd_configurations_without_panicking() {
        let key = Value::Int(7);
        let no_key_subspace = KeyRegionError::NoKeySubspace { space: "t".into() };
        assert_eq!(
            space_with(vec![]).key_region(&key),
            Err(no_key_subspace.clone())
        );
        let two_dimensions = layout(vec![0, 1], vec![uniform_splits(2), uniform_splits(2)]);
        assert_eq!(
            space_with(vec![two_dimensions]).key_region(&key),
            Err(no_key_subspace.clone())
        );
        let mut missing_regions = layout(vec![0], vec![uniform_splits(8)]);
        missing_regions.regions.truncate(1);
        // Int(7)'s coordinate lies above the middle, past the one region left.
        assert_eq!(
            space_with(vec![missing_regions]).key_region(&key),
            Err(no_key_subspace)
        );
        let space = space_with(vec![layout(vec![0], vec![uniform_splits(8)])]);
        assert_eq!(
            space.key_region(&Value::List(vec![])),
            Err(KeyRegionError::NotHashable)
        );
    }

    #[test]
    fn region_of_uses_attribute_coordinates() {
        let l = layout(vec![2, 1], vec![uniform_splits(2), uniform_splits(4)]);
        // attr 2 = Int(-1) → coordinate < 2^63 → interval 0;
        // attr 1 = Int(i64::MAX) → coordinate u64::MAX → interval 3.
        let obj = Object {
            values: vec![Value::str("k"), Value::Int(i64::MAX), Value::Int(-1)],
        };
        assert_eq!(l.region_of(&obj).id, RegionId(100 + 3));
        let obj = Object {
            values: vec![Value::str("k"), Value::Int(0), Value::Int(0)],
        };
        // attr 2: 2^63 → interval 1; attr 1: 2^63 → interval 2 → 1·4 + 2.
        assert_eq!(l.region_of(&obj).id, RegionId(100 + 6));
    }

    #[test]
    fn regions_intersecting_boxes() {
        let l = layout(vec![1, 2], vec![vec![10, 20], vec![100]]);
        let all = (0, u64::MAX);
        assert_eq!(
            regions_intersecting(&l, &[all, all]),
            vec![0, 1, 2, 3, 4, 5]
        );
        assert_eq!(regions_intersecting(&l, &[(10, 19), all]), vec![2, 3]);
        assert_eq!(regions_intersecting(&l, &[(5, 10), (100, 100)]), vec![1, 3]);
        assert_eq!(regions_intersecting(&l, &[(25, 25), (0, 99)]), vec![4]);
        assert_eq!(
            regions_intersecting(&l, &[(1, 0), all]),
            Vec::<usize>::new()
        );
        assert_eq!(count_regions_intersecting(&l, &[(5, 10), all]), 4);
        assert_eq!(count_regions_intersecting(&l, &[all, (7, 3)]), 0);
        let key = layout(vec![0], vec![uniform_splits(4)]);
        assert_eq!(regions_intersecting(&key, &[(1 << 62, 1 << 62)]), vec![1]);
    }

    /// Brute force: a region is listed exactly when some point of the box
    /// falls in it (checked on a small grid with small coordinates).
    #[test]
    fn regions_intersecting_matches_brute_force() {
        let l = layout(vec![1, 2], vec![vec![3, 6], vec![2, 4, 5]]);
        for lo0 in 0..8u64 {
            for hi0 in 0..8u64 {
                for (lo1, hi1) in [(0u64, 7u64), (2, 2), (3, 5), (6, 1), (4, 7)] {
                    let mut expected: Vec<usize> = Vec::new();
                    for x in lo0..=hi0 {
                        for y in lo1..=hi1 {
                            expected.push(l.region_index(&[x, y]));
                        }
                    }
                    expected.sort_unstable();
                    expected.dedup();
                    let got = regions_intersecting(&l, &[(lo0, hi0), (lo1, hi1)]);
                    assert_eq!(got, expected, "{lo0}..{hi0} × {lo1}..{hi1}");
                    assert_eq!(
                        count_regions_intersecting(&l, &[(lo0, hi0), (lo1, hi1)]),
                        expected.len()
                    );
                }
            }
        }
    }
}
