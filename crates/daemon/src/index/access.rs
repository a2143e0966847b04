//! Access-path choice: how a search reads one region (pure).

use super::indexed_attrs;
use super::slot::{path_slots, slot_interval, Slot};
use std::collections::BTreeMap;
use tessera_protocol::SortBy;
use tessera_types::coordinate::key_bytes;
use tessera_types::interval::intersect_intervals;
use tessera_types::plan::EQUALITY_SWITCH;
use tessera_types::{Check, DataType, PredOp, RegionId, Space, SpaceDesc, Value};

/// How a search reads one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// No object can match.
    Nothing,
    /// Every object of the region.
    Scan,
    /// The one object stored under these key bytes
    /// ([`tessera_types::coordinate::key_bytes`]), if the region holds it:
    /// a search with an equality on the key. Every region stores its
    /// objects by key, so this is a point read wherever the key is not a
    /// dimension (a replex's region, or a hybrid's that indexes no key),
    /// such as the reads a client redirects from a lost key region.
    Key(Vec<u8>),
    /// The entries of `slot` with a coordinate in `interval`, walked as
    /// `walk` says.
    Index {
        slot: Slot,
        interval: (u64, u64),
        walk: Walk,
    },
    /// Two or more equalities, each on a slot the region indexes
    /// completely, as (slot, coordinate) by slot number. Each one's
    /// entries hold every match, in key order. The walk reads the first
    /// one's; once it has read `switch_after` entries without reaching
    /// their end, it counts every list's entries from the key it stopped
    /// at (up to as many) and goes on with the fewest, counting again
    /// after twice as many. A list taken up at a key misses no match
    /// below it (the lists walked before held them all) and repeats none,
    /// so the walk costs about the rarest equality's entries, whatever the
    /// attributes' order, without statistics of the values.
    Equalities {
        walks: Vec<(Slot, u64)>,
        switch_after: usize,
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

/// Where a region lies in its space: its subspace and its cell, and which
/// of its indexes a search may walk.
#[derive(Clone, Debug, Default)]
pub struct RegionPlace {
    /// Index into `Space::subspaces` (0: the key subspace).
    pub subspace: usize,
    /// See [`SubspaceLayout::cell_by_attr`].
    pub cell: BTreeMap<usize, (u64, u64)>,
    /// The slots the region indexes whose entries are complete: the
    /// attributes of [`Space::entries_complete`] and the paths of ready
    /// path indexes. A building part's entries are still being
    /// backfilled, so a walk of them could miss objects.
    pub complete: Vec<Slot>,
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
    let complete = indexed_attrs(space, subspace)
        .into_iter()
        .filter(|&a| space.entries_complete(subspace, a))
        .map(Slot::Attr)
        .chain(path_slots(space, |index| index.state.is_ready()))
        .collect();
    RegionPlace {
        subspace,
        cell: layout.cell_by_attr(index),
        complete,
    }
}

fn is_ordered(dtype: DataType) -> bool {
    matches!(
        dtype,
        DataType::Int | DataType::Float | DataType::Timestamp(_)
    )
}

/// The key bytes of an equality on the whole key whose operand is of the
/// key's own kind. Another kind (a float operand on an int key, which a
/// check may compare as equal) is left to the other accesses: its bytes
/// would not be the stored key's.
fn key_equality(desc: &SpaceDesc, checks: &[Check]) -> Option<Vec<u8>> {
    let dtype = desc.attrs.first()?.dtype;
    checks.iter().find_map(|check| match (&check.op, dtype) {
        (PredOp::Eq(v @ Value::String(_)), DataType::String)
        | (PredOp::Eq(v @ Value::Int(_)), DataType::Int)
        | (PredOp::Eq(v @ Value::Timestamp(_)), DataType::Timestamp(_))
            if check.attr == 0 && check.path.is_none() =>
        {
            Some(key_bytes(v))
        }
        _ => None,
    })
}

/// Whether a page read through `access` returns what it walks: nothing,
/// a key read (one object), or an index walk whose slot answers every
/// check with its interval, so that each entry walked is a match but for
/// stale entries and hash collisions. Such a page costs about its object
/// count, like a get; any other walk may read a whole region to fill it.
pub fn walk_is_bounded(desc: &SpaceDesc, access: &Access, checks: &[Check]) -> bool {
    match access {
        Access::Nothing | Access::Key(_) => true,
        // Each slot serves the checks of its own attribute or path only.
        Access::Scan | Access::Equalities { .. } => false,
        Access::Index { slot, .. } => checks.iter().all(|check| {
            slot.serves(check)
                && desc
                    .attrs
                    .get(check.attr)
                    .is_some_and(|a| slot_interval(slot, check, a.dtype).is_some())
        }),
    }
}

/// Picks how a search with `checks` (and `sort`, `limit`) reads a region
/// of `desc`'s space at `place` (see [`place_of`]). A check on a document
/// path counts when a complete path index serves it ([`Slot::serves`]),
/// exactly as a check on an indexed attribute does; on equal footing the
/// attributes come first (their slot numbers are lower). An equality is
/// walked before any range; of several, [`Access::Equalities`] starts
/// with the lowest slot and finds the rarest as it reads.
pub fn choose_access(
    desc: &SpaceDesc,
    place: &RegionPlace,
    checks: &[Check],
    sort: Option<SortBy>,
    limit: Option<u64>,
) -> Access {
    if let Some(key) = key_equality(desc, checks) {
        return Access::Key(key);
    }
    let indexed = &place.complete;
    let cell = &place.cell;
    // By slot number, so the choice below does not depend on check order.
    let mut bounds: BTreeMap<usize, (&Slot, (u64, u64))> = BTreeMap::new();
    for check in checks {
        let Some(slot) = indexed.iter().find(|s| s.serves(check)) else {
            continue;
        };
        let dtype = desc.attrs[check.attr].dtype;
        if let Some(interval) = slot_interval(slot, check, dtype) {
            let b = bounds.entry(slot.number()).or_insert((slot, (0, u64::MAX)));
            b.1 = intersect_intervals(b.1, interval);
        }
    }
    if bounds.values().any(|&(_, (lo, hi))| lo > hi) {
        return Access::Nothing;
    }
    // Bounds that exclude some object this region may hold. Only a whole
    // attribute can be a dimension of the region's cell.
    let narrowing: Vec<(&Slot, (u64, u64))> = bounds
        .values()
        .copied()
        .filter(|&(slot, (lo, hi))| {
            let (cell_lo, cell_hi) = match slot {
                Slot::Attr(a) => cell.get(a).copied().unwrap_or((0, u64::MAX)),
                Slot::Path { .. } | Slot::Ordered(_) => (0, u64::MAX),
            };
            lo > cell_lo || hi < cell_hi
        })
        .collect();
    let walk_of = |slot: &Slot, interval| Access::Index {
        slot: slot.clone(),
        interval,
        walk: Walk::Unordered,
    };
    let mut equalities = narrowing.iter().filter(|(_, (lo, hi))| lo == hi);
    if let Some(&(slot, interval)) = equalities.next() {
        let others: Vec<(Slot, u64)> = equalities.map(|&(s, (c, _))| (s.clone(), c)).collect();
        if others.is_empty() {
            return walk_of(slot, interval);
        }
        let walks = std::iter::once((slot.clone(), interval.0))
            .chain(others)
            .collect();
        return Access::Equalities {
            walks,
            switch_after: EQUALITY_SWITCH as usize,
        };
    }
    let sorted_slot = sort.map(|s| Slot::Attr(s.attr));
    let ordered_walk = match (sort, limit) {
        (Some(sort), Some(_))
            if indexed.contains(&Slot::Attr(sort.attr))
                && is_ordered(desc.attrs[sort.attr].dtype) =>
        {
            Some(Access::Index {
                slot: Slot::Attr(sort.attr),
                interval: bounds.get(&sort.attr).map_or((0, u64::MAX), |b| b.1),
                walk: Walk::following(sort),
            })
        }
        _ => None,
    };
    if let Some(walk) = &ordered_walk {
        if narrowing
            .iter()
            .all(|&(slot, _)| Some(slot) == sorted_slot.as_ref())
        {
            return walk.clone();
        }
    }
    if let Some(&(slot, interval)) = narrowing.iter().min_by_key(|(_, (lo, hi))| hi - lo) {
        return walk_of(slot, interval);
    }
    ordered_walk.unwrap_or(Access::Scan)
}
