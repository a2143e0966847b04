//! Access-path choice: how a search reads one region (pure).

use super::indexed_attrs;
use std::collections::BTreeMap;
use tessera_protocol::SortBy;
use tessera_types::interval::intersect_intervals;
use tessera_types::{
    coordinate_interval, Check, DataType, RegionId, Space, SpaceDesc, SubspaceLayout,
};

/// How a search reads one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// No object can match.
    Nothing,
    /// Every object of the region.
    Scan,
    /// The entries of `attr` with a coordinate in `interval`, walked as
    /// `walk` says.
    Index {
        attr: usize,
        interval: (u64, u64),
        walk: Walk,
    },
}

/// How an index walk relates to the order of the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// The walk reads every entry of the interval; the page orders what it
    /// finds itself.
    Unordered,
    /// The walk follows an ascending sorted search on the walked attribute,
    /// so it may stop once the page is full.
    Ascending,
    /// The same, largest coordinate first, for a descending sorted search.
    Descending,
}

impl Walk {
    /// The walk that follows `sort`'s order on its attribute.
    pub fn following(sort: SortBy) -> Walk {
        if sort.descending {
            Walk::Descending
        } else {
            Walk::Ascending
        }
    }
}

/// The inclusive coordinate interval of each dimension of the cell at
/// `index` in `layout` ([`SubspaceLayout::cell_bounds`]), by attribute.
pub fn region_cell(layout: &SubspaceLayout, index: usize) -> BTreeMap<usize, (u64, u64)> {
    layout
        .attrs
        .iter()
        .copied()
        .zip(layout.cell_bounds(index))
        .collect()
}

/// Where a region lies in its space: its subspace and its cell, and which
/// of its indexes a search may walk.
#[derive(Clone, Debug, Default)]
pub struct RegionPlace {
    /// Index into `Space::subspaces` (0: the key subspace).
    pub subspace: usize,
    /// See [`region_cell`].
    pub cell: BTreeMap<usize, (u64, u64)>,
    /// The attributes the region indexes whose entries are complete
    /// ([`Space::entries_complete`]): a building part's entries are
    /// still being backfilled, so a walk of them could miss objects.
    pub complete: Vec<usize>,
}

/// The place of `region` in its space (the key subspace and no cell if the
/// space does not hold it).
pub fn place_of(space: &Space, region: RegionId) -> RegionPlace {
    space
        .subspaces
        .iter()
        .enumerate()
        .find_map(|(subspace, layout)| {
            let index = layout.regions.iter().position(|r| r.id == region)?;
            Some(place_in(space, subspace, index))
        })
        .unwrap_or_default()
}

/// The place of the region at position `index` of subspace `subspace`
/// (positions as a [`tessera_types::RegionDirectory`] gives them).
pub fn place_in(space: &Space, subspace: usize, index: usize) -> RegionPlace {
    let Some(layout) = space.subspaces.get(subspace) else {
        return RegionPlace::default();
    };
    let complete = indexed_attrs(&space.desc, subspace)
        .into_iter()
        .filter(|&a| space.entries_complete(subspace, a))
        .collect();
    RegionPlace {
        subspace,
        cell: region_cell(layout, index),
        complete,
    }
}

fn is_ordered(dtype: DataType) -> bool {
    matches!(
        dtype,
        DataType::Int | DataType::Float | DataType::Timestamp(_)
    )
}

/// Picks how a search with `checks` (and `sort`, `limit`) reads a region
/// of `desc`'s space at `place` (see [`place_of`]).
pub fn choose_access(
    desc: &SpaceDesc,
    place: &RegionPlace,
    checks: &[Check],
    sort: Option<SortBy>,
    limit: Option<u64>,
) -> Access {
    let indexed = &place.complete;
    let cell = &place.cell;
    let mut bounds: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for check in checks.iter().filter(|c| indexed.contains(&c.attr)) {
        let dtype = desc.attrs[check.attr].dtype;
        if let Some(interval) = coordinate_interval(check, dtype) {
            let b = bounds.entry(check.attr).or_insert((0, u64::MAX));
            *b = intersect_intervals(*b, interval);
        }
    }
    if bounds.values().any(|&(lo, hi)| lo > hi) {
        return Access::Nothing;
    }
    // Bounds that exclude some object this region may hold.
    let narrowing: Vec<(usize, (u64, u64))> = bounds
        .iter()
        .map(|(&a, &b)| (a, b))
        .filter(|&(a, (lo, hi))| {
            let (cell_lo, cell_hi) = cell.get(&a).copied().unwrap_or((0, u64::MAX));
            lo > cell_lo || hi < cell_hi
        })
        .collect();
    if let Some(&(attr, interval)) = narrowing.iter().find(|(_, (lo, hi))| lo == hi) {
        return Access::Index {
            attr,
            interval,
            walk: Walk::Unordered,
        };
    }
    let ordered_walk = match (sort, limit) {
        (Some(sort), Some(_))
            if indexed.contains(&sort.attr) && is_ordered(desc.attrs[sort.attr].dtype) =>
        {
            Some(Access::Index {
                attr: sort.attr,
                interval: bounds.get(&sort.attr).copied().unwrap_or((0, u64::MAX)),
                walk: Walk::following(sort),
            })
        }
        _ => None,
    };
    if let Some(walk) = &ordered_walk {
        if narrowing
            .iter()
            .all(|&(a, _)| Some(a) == sort.map(|s| s.attr))
        {
            return walk.clone();
        }
    }
    if let Some(&(attr, interval)) = narrowing.iter().min_by_key(|(_, (lo, hi))| hi - lo) {
        return Access::Index {
            attr,
            interval,
            walk: Walk::Unordered,
        };
    }
    ordered_walk.unwrap_or(Access::Scan)
}
