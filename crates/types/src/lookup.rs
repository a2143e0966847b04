//! Lookups through a global index (`docs/design/global-indexes.md`): which
//! indexlets a search contacts, which entries it walks there, and when a
//! global index beats the subspaces.
//!
//! A global index on `a` is a one-dimensional subspace cut by `a`'s order
//! coordinate ([`order_coordinate`]), so the checks on `a` that bound its
//! value (`eq`, `lt`, `le`, `gt`, `ge`) confine a match to a run of
//! adjacent indexlets ([`order_interval`]); inside each, the entries are
//! ordered by the value's full sort key ([`sort_key`]) and the checks bound
//! a range of them ([`entry_range`]). Indexlets are disjoint and ordered:
//! every value of one is below every value of the next (a value's order
//! coordinate never decreases as it grows), so a lookup reads them one
//! after the other and a sorted search with a limit stops as soon as it has
//! enough.
//!
//! Cost, as [`plan_lookup`] counts it against the best subspace plan: a
//! lookup costs the indexlets it contacts plus one round of gets at the
//! point leaders — or, for a sorted search on `a` with a limit, one
//! indexlet and the gets, since indexlets are read in order and the limit
//! stops the reads. A subspace plan costs the regions it contacts, twice
//! over when no check narrowed it (every region of the subspace, each read
//! whole). A global index is taken only when it is strictly cheaper, so an
//! equality a subspace answers from one region keeps going there, while a
//! string range (which hashes over every region of a subspace) or a sorted
//! scan goes to the index. Never on a space `with authorization`: index entries
//! reveal keys and values, which only an authorized read of the object may.

use crate::coerce::is_scalar_of;
use crate::config::{Space, SubspaceKind};
use crate::interval::{intersect_intervals, EMPTY_INTERVAL};
use crate::plan::SearchPlan;
use crate::predicate::{Check, PredOp};
use crate::region::regions_intersecting;
use crate::sortkey::{order_coordinate, sort_key};
use crate::value::{DataType, Value};

/// A search planned through a global index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupPlan {
    /// The global index's position in `Space::subspaces`.
    pub subspace: usize,
    /// The indexed attribute.
    pub attr: usize,
    /// The indexlets contacted, as positions in the layout's `regions`,
    /// ascending (in value order).
    pub indexlets: Vec<usize>,
}

/// The operand of a check that bounds a value, if the check is one
/// (`eq`, `lt`, `le`, `gt`, `ge` on the whole attribute).
fn bound_operand(check: &Check) -> Option<&Value> {
    if check.path.is_some() {
        return None;
    }
    match &check.op {
        PredOp::Eq(v) | PredOp::Lt(v) | PredOp::Le(v) | PredOp::Gt(v) | PredOp::Ge(v) => Some(v),
        _ => None,
    }
}

/// Whether no value of type `dtype` can equal or be ordered against `v`.
fn impossible(dtype: DataType, v: &Value) -> bool {
    !is_scalar_of(dtype, v) || matches!(v, Value::Float(f) if f.is_nan())
}

/// The inclusive order-coordinate interval that the checks on `attr` (of
/// type `dtype`) confine it to; `None` when none of them bounds it. An
/// operand of another kind, or NaN, gives the empty interval.
pub fn order_interval(checks: &[Check], attr: usize, dtype: DataType) -> Option<(u64, u64)> {
    let mut bounded = None;
    for check in checks.iter().filter(|c| c.attr == attr) {
        let Some(v) = bound_operand(check) else {
            continue;
        };
        let interval = if impossible(dtype, v) {
            EMPTY_INTERVAL
        } else {
            let c = order_coordinate(v).expect("a scalar operand");
            // Strings sharing their first eight bytes share a coordinate,
            // so strict bounds keep the operand's own coordinate.
            match &check.op {
                PredOp::Eq(_) => (c, c),
                PredOp::Lt(_) | PredOp::Le(_) => (0, c),
                _ => (c, u64::MAX),
            }
        };
        bounded = Some(intersect_intervals(
            bounded.unwrap_or((0, u64::MAX)),
            interval,
        ));
    }
    bounded
}

/// The smallest byte string greater than every string that starts with
/// `prefix`; `None` when there is none (the prefix is all `0xFF`).
pub fn after_prefix(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

/// The entries of one ordered slot a lookup walks: those whose
/// `sort key ++ storage key` (the entry after its slot number) lies in
/// `[start, end)`; `end: None` runs to the slot's last entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryRange {
    /// The first position visited, inclusive.
    pub start: Vec<u8>,
    /// Positions must be below this.
    pub end: Option<Vec<u8>>,
}

impl EntryRange {
    /// Whether no entry can lie in the range.
    pub fn is_empty(&self) -> bool {
        self.end.as_ref().is_some_and(|end| *end <= self.start)
    }
}

/// The range of entries (sort key then storage key) holding every value of
/// `attr` (of type `dtype`) that the bounding checks on it admit. Exact for
/// the bounds: sort keys are self-delimiting, so a value's entries are
/// exactly those starting with its sort key. Checks that do not bound
/// (regex, length …) leave the range whole; readers evaluate them.
pub fn entry_range(checks: &[Check], attr: usize, dtype: DataType) -> EntryRange {
    let mut range = EntryRange {
        start: Vec::new(),
        end: None,
    };
    let lower = |range: &mut EntryRange, start: Vec<u8>| {
        if start > range.start {
            range.start = start;
        }
    };
    let upper = |range: &mut EntryRange, end: Option<Vec<u8>>| {
        if let Some(end) = end {
            if range.end.as_ref().is_none_or(|e| end < *e) {
                range.end = Some(end);
            }
        }
    };
    for check in checks.iter().filter(|c| c.attr == attr) {
        let Some(v) = bound_operand(check) else {
            continue;
        };
        if impossible(dtype, v) {
            return EntryRange {
                start: vec![0],
                end: Some(vec![0]),
            };
        }
        let key = sort_key(v).expect("a scalar operand");
        match &check.op {
            PredOp::Eq(_) => {
                upper(&mut range, after_prefix(&key));
                lower(&mut range, key);
            }
            PredOp::Lt(_) => upper(&mut range, Some(key)),
            PredOp::Le(_) => upper(&mut range, after_prefix(&key)),
            PredOp::Gt(_) => match after_prefix(&key) {
                Some(start) => lower(&mut range, start),
                None => upper(&mut range, Some(Vec::new())),
            },
            _ => lower(&mut range, key),
        }
    }
    range
}

/// The global index a search should read, if one beats `subspace_plan`,
/// the best subspace plan (see the module docs).
/// `sort` is a sorted search's attribute and whether it has a limit; only
/// an index on that attribute can serve a sorted search.
pub fn plan_lookup(
    space: &Space,
    checks: &[Check],
    sort: Option<(usize, bool)>,
    subspace_plan: &SearchPlan,
) -> Option<LookupPlan> {
    let contacted = subspace_plan.regions.len();
    let fan_out = space
        .subspaces
        .get(subspace_plan.subspace)
        .is_some_and(|layout| contacted == layout.regions.len());
    let subspace_cost = if fan_out { contacted * 2 } else { contacted };
    if space.desc.authorization {
        return None;
    }
    let mut best: Option<(usize, LookupPlan)> = None;
    for (position, layout) in space.subspaces.iter().enumerate() {
        let &[attr] = layout.attrs.as_slice() else {
            continue;
        };
        if layout.kind != SubspaceKind::GlobalIndex || !layout.state.is_ready() {
            continue;
        }
        let Some(dtype) = space.desc.attrs.get(attr).map(|a| a.dtype) else {
            continue;
        };
        // A lookup streams in the index's order: a search sorted by another
        // attribute cannot read through it.
        if sort.is_some_and(|(a, _)| a != attr) {
            continue;
        }
        let interval = order_interval(checks, attr, dtype);
        let sorted_here = sort.is_some_and(|(_, limited)| limited);
        let indexlets = regions_intersecting(layout, &[interval.unwrap_or((0, u64::MAX))]);
        let cost = match interval {
            _ if sorted_here => 2.min(indexlets.len() + 1),
            Some(_) => indexlets.len() + 1,
            None => continue,
        };
        if best.as_ref().is_none_or(|(c, _)| cost < *c) {
            best = Some((
                cost,
                LookupPlan {
                    subspace: position,
                    attr,
                    indexlets,
                },
            ));
        }
    }
    best.filter(|(cost, _)| *cost < subspace_cost)
        .map(|(_, plan)| plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Region, SubspaceLayout};
    use crate::ids::{PartId, RegionId, SpaceId};
    use crate::layout::PartState;
    use crate::parse::parse_space;
    use crate::region::uniform_splits;
    use crate::sortkey::sort_key;
    use proptest::prelude::*;

    fn space(description: &str, indexlets: u32, state: PartState) -> Space {
        let desc = parse_space(description).expect("valid");
        let region = |i: usize| Region {
            id: RegionId(100 + i as u64),
            chain: vec![],
        };
        let key = SubspaceLayout {
            attrs: vec![0],
            splits: vec![uniform_splits(8)],
            regions: (0..8).map(region).collect(),
            part: PartId(0),
            state: PartState::Ready,
            kind: SubspaceKind::Subspace,
        };
        let global = SubspaceLayout {
            attrs: vec![1],
            splits: vec![uniform_splits(indexlets)],
            regions: (0..indexlets as usize).map(|i| region(10 + i)).collect(),
            part: PartId(1),
            state,
            kind: SubspaceKind::GlobalIndex,
        };
        Space {
            id: SpaceId(1),
            desc,
            subspaces: vec![key, global],
            indexes: vec![],
        }
    }

    /// A plan over `n` of the key subspace's 8 regions.
    fn over(n: usize) -> SearchPlan {
        SearchPlan {
            subspace: 0,
            regions: (0..n).collect(),
        }
    }

    fn check(op: PredOp) -> Check {
        Check::new(1, op)
    }

    /// Whether the entry of `value` (with some key after it) lies in `range`.
    fn admits(range: &EntryRange, value: &Value) -> bool {
        let mut position = sort_key(value).expect("scalar");
        position.extend_from_slice(b"some key");
        position >= range.start && range.end.as_ref().is_none_or(|e| position < *e)
    }

    #[test]
    fn a_string_range_contacts_the_indexlets_of_its_prefixes_and_beats_a_hashed_subspace() {
        let s = space("space s key k attributes name", 16, PartState::Ready);
        // Names from "b" to "c": first bytes 0x62..=0x63 of 256, one of the
        // 16 indexlets (each covers 16 first-byte values).
        let checks = [
            check(PredOp::Ge(Value::str("b"))),
            check(PredOp::Lt(Value::str("c"))),
        ];
        let plan = plan_lookup(&s, &checks, None, &over(8)).expect("cheaper than 8 regions");
        assert_eq!(plan.subspace, 1);
        assert_eq!(plan.indexlets, vec![6]);
        // No narrowing check and no sorted limit: the index is no help.
        assert_eq!(plan_lookup(&s, &[], None, &over(8)), None);
        // A sorted search with a limit on the attribute reads one indexlet.
        let sorted = plan_lookup(&s, &[], Some((1, true)), &over(8)).expect("a sorted scan");
        assert_eq!(sorted.indexlets.len(), 16);
        // Sorted by another attribute (the key), the index cannot serve.
        assert_eq!(plan_lookup(&s, &checks, Some((0, true)), &over(8)), None);
        // A subspace that answers from one region keeps the search.
        assert_eq!(plan_lookup(&s, &checks, None, &over(1)), None);
        // A range over three indexlets (cost 4) wins against a fan-out
        // over all eight regions (each read whole), and loses to three or
        // four regions a check narrowed to.
        let wide = [
            check(PredOp::Ge(Value::str("\x10"))),
            check(PredOp::Lt(Value::str("\x3f"))),
        ];
        assert_eq!(
            plan_lookup(&s, &wide, None, &over(8)).map(|p| p.indexlets),
            Some(vec![1, 2, 3])
        );
        assert_eq!(plan_lookup(&s, &wide, None, &over(3)), None);
        assert_eq!(plan_lookup(&s, &wide, None, &over(4)), None);
        // Only a ready index, and never with authorization.
        let building = space(
            "space s key k attributes name",
            16,
            PartState::Building { progress: 50 },
        );
        assert_eq!(plan_lookup(&building, &checks, None, &over(8)), None);
        let secret = space(
            "space s key k attributes name with authorization",
            16,
            PartState::Ready,
        );
        assert_eq!(plan_lookup(&secret, &checks, None, &over(8)), None);
    }

    #[test]
    fn impossible_operands_give_empty_intervals_and_ranges() {
        let wrong_kind = [check(PredOp::Eq(Value::Int(3)))];
        assert_eq!(
            order_interval(&wrong_kind, 1, DataType::String),
            Some(EMPTY_INTERVAL)
        );
        assert!(entry_range(&wrong_kind, 1, DataType::String).is_empty());
        let nan = [check(PredOp::Gt(Value::Float(f64::NAN)))];
        assert!(entry_range(&nan, 1, DataType::Float).is_empty());
        // Nothing is above the largest int.
        let above_max = [check(PredOp::Gt(Value::Int(i64::MAX)))];
        assert!(entry_range(&above_max, 1, DataType::Int).is_empty());
        assert_eq!(order_interval(&[], 1, DataType::Int), None);
    }

    fn op_of(kind: u8, v: Value) -> PredOp {
        match kind % 5 {
            0 => PredOp::Eq(v),
            1 => PredOp::Lt(v),
            2 => PredOp::Le(v),
            3 => PredOp::Gt(v),
            _ => PredOp::Ge(v),
        }
    }

    proptest! {
        /// The property lookups rely on: a value matches every check
        /// exactly when its entries lie in the entry range, and a match's
        /// order coordinate lies in the order interval — for strings
        /// (with zero bytes and shared prefixes), ints and floats.
        #[test]
        fn the_range_holds_exactly_the_matches(
            strings in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), Just(0xFF), any::<u8>()], 0..10), 2..8),
            ints in proptest::collection::vec(prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), -5i64..5, any::<i64>()], 2..8),
            floats in proptest::collection::vec(prop_oneof![Just(0.0f64), Just(-0.0), Just(f64::INFINITY), Just(f64::NEG_INFINITY), -3.0f64..3.0], 2..8),
            kinds in proptest::collection::vec(any::<u8>(), 1..3),
        ) {
            let families: [(DataType, Vec<Value>); 3] = [
                (DataType::String, strings.into_iter().map(Value::String).collect()),
                (DataType::Int, ints.into_iter().map(Value::Int).collect()),
                (DataType::Float, floats.into_iter().map(Value::Float).collect()),
            ];
            for (dtype, values) in families {
                let checks: Vec<Check> = kinds
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| check(op_of(k, values[i % values.len()].clone())))
                    .collect();
                let range = entry_range(&checks, 1, dtype);
                let interval = order_interval(&checks, 1, dtype).expect("bounding checks");
                for value in &values {
                    let object = crate::value::Object { values: vec![Value::Int(0), value.clone()] };
                    let matches = checks.iter().all(|c| c.matches(&object));
                    prop_assert_eq!(admits(&range, value), matches, "{:?} {:?}", value, checks);
                    if matches {
                        let c = order_coordinate(value).expect("scalar");
                        prop_assert!(interval.0 <= c && c <= interval.1);
                    }
                }
            }
        }
    }
}
