//! Search planning: which subspace, which regions.
//!
//! For every subspace (the key subspace included) the checks on its
//! attributes confine each dimension to an inclusive coordinate interval
//! ([`coordinate_interval`]; several checks on one attribute intersect;
//! attributes without a pruning check span the whole axis). The box of those
//! intervals intersects some regions of the subspace's grid; the plan takes
//! the subspace where that number is smallest. So a search that fixes every
//! attribute of a subspace by equality contacts exactly one region, and a
//! search that specifies nothing useful contacts every region of one subspace,
//! never more.
//!
//! Ties go to the subspace with more regions in total (its regions hold fewer
//! objects each, if objects spread evenly), then to the lower subspace index.
//!
//! Only searchable subspaces compete ([`Space::subspace_searchable`]): the
//! key subspace always, another only once it is ready. A building subspace
//! does not hold every object yet and a dropping one is on its way out, so
//! neither ever answers a search.
//!
//! A check that no value can satisfy (an empty interval, e.g. `Lt(i64::MIN)`
//! or an operand of the wrong kind) makes the whole search empty: the plan
//! contacts zero regions, whichever attribute it is on.

use crate::config::{Space, SubspaceKind};
use crate::interval::{coordinate_interval, intersect_intervals, interval_is_empty};
use crate::lookup::LookupPlan;
use crate::predicate::Check;
use crate::region::{count_regions_intersecting, regions_intersecting};
use crate::value::DataType;
use std::fmt::Write as _;

/// Objects a region's search page that leaves a check to test object by
/// object (an index walk whose index does not answer every check) may load
/// on the thread its request arrived on; one that would load more is handed
/// off to a page thread and read there from its start. The daemon enforces
/// it (`tessera_daemon::search::PagePlan`), the advisor's model prices it.
pub const INLINE_LOADS: u64 = 64;

/// Entries a region's walk of one of several indexed equalities reads
/// before it counts the others' entries and moves to the fewest (then
/// twice as many before it counts again): a daemon keeps no statistics of
/// which value is rare, so it finds out by reading. The daemon enforces it
/// (`tessera_daemon::index::Access::Equalities`), the advisor's model
/// prices it.
pub const EQUALITY_SWITCH: u64 = 16;

/// The regions a search contacts: all in one subspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchPlan {
    /// The subspace searched, by index into `Space::subspaces` (0 = key).
    pub subspace: usize,
    /// Indexes into that subspace's `regions`, ascending.
    pub regions: Vec<usize>,
}

/// The inclusive coordinate interval per dimension of subspace `subspace`
/// that `checks` confine a matching object to (`lo > hi` = empty). Checks on
/// other attributes, checks that do not prune and checks naming no attribute
/// of the space are ignored.
pub fn subspace_box(space: &Space, subspace: usize, checks: &[Check]) -> Vec<(u64, u64)> {
    space.subspaces[subspace]
        .attrs
        .iter()
        .map(|&a| {
            let dtype = space.desc.attrs[a].dtype;
            checks
                .iter()
                .filter(|c| c.attr == a)
                .filter_map(|c| coordinate_interval(c, dtype))
                .fold((0, u64::MAX), intersect_intervals)
        })
        .collect()
}

/// Whether some check can never hold (its coordinate interval is empty).
fn unsatisfiable(space: &Space, checks: &[Check]) -> bool {
    checks.iter().any(|c| {
        space
            .desc
            .attrs
            .get(c.attr)
            .and_then(|a| coordinate_interval(c, a.dtype))
            .is_some_and(interval_is_empty)
    })
}

/// The number of regions each subspace would contact, by subspace index.
pub fn region_counts(space: &Space, checks: &[Check]) -> Vec<usize> {
    let none = unsatisfiable(space, checks);
    (0..space.subspaces.len())
        .map(|si| {
            if none {
                0
            } else {
                count_regions_intersecting(&space.subspaces[si], &subspace_box(space, si, checks))
            }
        })
        .collect()
}

/// Picks the subspace whose regions intersecting the checks are fewest (ties:
/// more regions in total, then the lower index) and lists those regions.
///
/// Checks should have passed [`crate::predicate::validate_check`]; a check on
/// an attribute the space does not have is ignored here.
pub fn plan_search(space: &Space, checks: &[Check]) -> SearchPlan {
    let counts = region_counts(space, checks);
    let searchable = (0..counts.len()).filter(|&si| space.subspace_searchable(si));
    let Some(best) = searchable.min_by_key(|&si| {
        (
            counts[si],
            std::cmp::Reverse(space.subspaces[si].regions.len()),
            si,
        )
    }) else {
        return SearchPlan {
            subspace: 0,
            regions: Vec::new(),
        };
    };
    let regions = if counts[best] == 0 {
        Vec::new()
    } else {
        regions_intersecting(&space.subspaces[best], &subspace_box(space, best, checks))
    };
    debug_assert_eq!(regions.len(), counts[best]);
    SearchPlan {
        subspace: best,
        regions,
    }
}

/// The plan's regions in the order of attribute `attr`'s values, when
/// that order is theirs: `attr` is a number or a timestamp (whose
/// coordinates preserve order) and a dimension of the planned subspace,
/// and no two planned regions share an interval on it. Every value in one
/// of them is then below every value in the next, so a sorted search with
/// a limit reads them one after the other and stops once it has enough,
/// instead of asking each for the whole limit. `None` otherwise (strings,
/// whose coordinates are hashes; an attribute the subspace does not cut;
/// regions side by side on it, cut apart by another dimension).
pub fn regions_in_value_order(space: &Space, plan: &SearchPlan, attr: usize) -> Option<Vec<usize>> {
    let layout = space.subspaces.get(plan.subspace)?;
    if !layout.kind.holds_objects() {
        return None;
    }
    let ordered = matches!(
        space.desc.attrs.get(attr)?.dtype,
        DataType::Int | DataType::Float | DataType::Timestamp(_)
    );
    let dim = layout
        .attrs
        .iter()
        .position(|&a| a == attr)
        .filter(|_| ordered)?;
    let mut by_interval: Vec<(u64, usize)> = plan
        .regions
        .iter()
        .map(|&r| (layout.cell_bounds(r)[dim].0, r))
        .collect();
    by_interval.sort_unstable();
    let distinct = by_interval.windows(2).all(|w| w[0].0 != w[1].0);
    distinct.then(|| by_interval.into_iter().map(|(_, r)| r).collect())
}

/// Human-readable text saying how a search runs: the chosen part (a
/// subspace, by its part id), its attributes, the regions contacted out of
/// its total, and every subspace's count and state for comparison. The
/// chosen plan's line is the only one with the word `contacts` (API.md
/// §12.5).
pub fn describe_plan(
    space: &Space,
    checks: &[Check],
    plan: &SearchPlan,
    lookup: Option<&LookupPlan>,
) -> String {
    let attr_names = |si: usize| {
        space.subspaces[si]
            .attrs
            .iter()
            .map(|&a| space.desc.attrs[a].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let kind = |si: usize| match (si, space.subspaces[si].kind) {
        (0, _) => "key subspace",
        (_, SubspaceKind::Replex) => "replex",
        (_, SubspaceKind::Hybrid) => "hybrid",
        _ => "subspace",
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "space {}: search with {} check(s)",
        space.desc.name,
        checks.len()
    );
    for c in checks {
        let name = space
            .desc
            .attrs
            .get(c.attr)
            .map_or("?", |a| a.name.as_str());
        let path = c.path.as_ref().map_or(String::new(), |p| format!(".{p}"));
        let _ = writeln!(
            out,
            "  check: {name}{path} {} {}",
            c.op.name(),
            operand_text(c)
        );
        if let Some(line) = path_index_text(space, c) {
            let _ = writeln!(out, "    {line}");
        }
    }
    if space.subspaces.is_empty() {
        let _ = writeln!(out, "no subspaces: nothing to contact");
        return out;
    }
    if let Some(lookup) = lookup {
        let layout = &space.subspaces[lookup.subspace];
        let _ = writeln!(
            out,
            "uses global index {} ({}): contacts {} of {} indexlets, then the point leader of each entry's key",
            layout.part.0,
            attr_names(lookup.subspace),
            lookup.indexlets.len(),
            layout.regions.len()
        );
        if lookup.indexlets.is_empty() {
            let _ = writeln!(out, "no indexlet can hold a match: the search is empty");
        }
    } else {
        let _ = writeln!(
            out,
            "uses {} {} ({}): contacts {} of {} regions",
            kind(plan.subspace),
            space.subspaces[plan.subspace].part.0,
            attr_names(plan.subspace),
            plan.regions.len(),
            space.subspaces[plan.subspace].regions.len()
        );
        if plan.regions.is_empty() {
            let _ = writeln!(out, "no region can hold a match: the search is empty");
        }
    }
    let _ = writeln!(out, "alternatives:");
    for (si, count) in region_counts(space, checks).into_iter().enumerate() {
        let layout = &space.subspaces[si];
        if layout.kind == SubspaceKind::GlobalIndex {
            if lookup.is_none_or(|l| l.subspace != si) {
                let _ = writeln!(
                    out,
                    "  global index {} ({}): {}, {} indexlets{}",
                    layout.part.0,
                    attr_names(si),
                    layout.state,
                    layout.regions.len(),
                    if layout.state.is_ready() {
                        ""
                    } else {
                        " (not used until ready)"
                    }
                );
            }
            continue;
        }
        let state = layout.state;
        let mark = if si == plan.subspace && lookup.is_none() {
            "  <- chosen".to_string()
        } else if !space.subspace_searchable(si) {
            format!("  ({state}: not searched)")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {} {} ({}): {} of {} regions{mark}",
            kind(si),
            space.subspaces[si].part.0,
            attr_names(si),
            count,
            space.subspaces[si].regions.len()
        );
    }
    out
}

/// What a local index on a check's document path does for the check:
/// daemons read the regions through it (in place of a scan) once it is
/// ready, if the check narrows it ([`crate::interval::path_interval`]),
/// unless another complete index narrows the same search better. `None`
/// when the check has no path or no index holds its path.
fn path_index_text(space: &Space, check: &Check) -> Option<String> {
    let path = check.path.as_deref()?;
    let steps = crate::value::parse_doc_path(path).ok()?;
    let index = space.indexes.iter().find(|index| {
        index.attr == check.attr
            && index
                .path
                .as_deref()
                .is_some_and(|p| crate::value::parse_doc_path(p).is_ok_and(|s| s == steps))
    })?;
    let name = space
        .desc
        .attrs
        .get(index.attr)
        .map_or("?", |a| a.name.as_str());
    let what = if !index.state.is_ready() {
        "not used until it is ready"
    } else if crate::interval::path_interval(check).is_some() {
        "regions read the check's entries from it"
    } else {
        "this check cannot narrow it"
    };
    Some(format!(
        "local index {} ({name}.{path}, {}): {what}",
        index.id.0, index.state
    ))
}

fn operand_text(check: &Check) -> String {
    use crate::predicate::PredOp;
    use crate::value::Value;
    let value = |v: &Value| match v {
        Value::String(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Timestamp(t) => format!("timestamp {t}"),
        other => format!("{other:?}"),
    };
    match &check.op {
        PredOp::Eq(v)
        | PredOp::Lt(v)
        | PredOp::Le(v)
        | PredOp::Gt(v)
        | PredOp::Ge(v)
        | PredOp::Contains(v) => value(v),
        PredOp::Regex(p) => format!("{p:?}"),
        PredOp::LenEq(n) | PredOp::LenLe(n) | PredOp::LenGe(n) => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SubspaceLayout;
    use crate::coordinate::{coordinate, int_coordinate};
    use crate::ids::{PartId, SpaceId};
    use crate::layout::PartState;
    use crate::parse::parse_space;
    use crate::predicate::PredOp;
    use crate::schema::{Attribute, SpaceDesc};
    use crate::value::{DataType, Object, Value};
    use proptest::prelude::*;

    /// A space laid out with the default grid and uniform splits.
    fn space_of(desc: SpaceDesc) -> Space {
        crate::region::default_layout(SpaceId(1), desc)
    }

    fn check(attr: usize, op: PredOp) -> Check {
        Check::new(attr, op)
    }

    #[test]
    fn regions_cut_only_by_a_number_are_read_in_its_order() {
        let s = space_of(
            parse_space(
                "space s key k attributes int a, int b, name subspace a subspace a, b \
                 subspace name create 16 partitions",
            )
            .unwrap(),
        );
        let value_of = |attr: usize, region: usize, subspace: usize| {
            s.subspaces[subspace].cell_bounds(region)[s.subspaces[subspace]
                .attrs
                .iter()
                .position(|&x| x == attr)
                .unwrap()]
        };
        // Subspace a: a range meets several regions, in a's order; the
        // plan lists them by index, which is a's order here too, so check
        // it against the regions' bounds rather than the plan.
        let range = [
            check(1, PredOp::Ge(Value::Int(-(1 << 62)))),
            check(1, PredOp::Lt(Value::Int(1 << 62))),
        ];
        let plan = SearchPlan {
            subspace: 1,
            regions: regions_intersecting(&s.subspaces[1], &subspace_box(&s, 1, &range))
                .into_iter()
                .rev()
                .collect(),
        };
        assert!(plan.regions.len() > 2);
        let ordered = regions_in_value_order(&s, &plan, 1).expect("a orders subspace a");
        let mut want = plan.regions.clone();
        want.sort_by_key(|&r| value_of(1, r, 1).0);
        assert_eq!(ordered, want);
        for pair in ordered.windows(2) {
            assert!(value_of(1, pair[0], 1).1 < value_of(1, pair[1], 1).0);
        }
        // A subspace that does not cut by the sort attribute; one that
        // cuts by it and by another, with two regions on one interval of a;
        // a string's hashed axis.
        assert_eq!(regions_in_value_order(&s, &plan, 2), None);
        let grid = &s.subspaces[2];
        assert_eq!(grid.attrs, vec![1, 2]);
        let side_by_side = SearchPlan {
            subspace: 2,
            regions: vec![0, 1],
        };
        assert_eq!(value_of(1, 0, 2), value_of(1, 1, 2));
        assert_eq!(regions_in_value_order(&s, &side_by_side, 1), None);
        let one_per_interval = SearchPlan {
            subspace: 2,
            regions: vec![grid.splits[1].len() + 1, 0],
        };
        assert_eq!(
            regions_in_value_order(&s, &one_per_interval, 1),
            Some(vec![0, grid.splits[1].len() + 1])
        );
        let names = SearchPlan {
            subspace: 3,
            regions: vec![3, 1],
        };
        assert_eq!(regions_in_value_order(&s, &names, 3), None);
    }

    #[test]
    fn no_checks_contact_one_whole_subspace() {
        // Key subspace: 16 regions; subspace (a, b): 4 × 4 = 16 too; tie →
        // equal totals → lower index.
        let s = space_of(
            parse_space("space s key k attributes int a, int b subspace a, b create 16 partitions")
                .unwrap(),
        );
        let plan = plan_search(&s, &[]);
        assert_eq!(
            plan,
            SearchPlan {
                subspace: 0,
                regions: (0..16).collect()
            }
        );
    }

    #[test]
    fn equality_on_every_attribute_of_a_subspace_contacts_one_region() {
        let s = space_of(
            parse_space("space s key k attributes first, last, int phone subspace first, last create 64 partitions")
                .unwrap(),
        );
        let checks = [
            check(1, PredOp::Eq(Value::str("Ada"))),
            check(2, PredOp::Eq(Value::str("Lovelace"))),
        ];
        let plan = plan_search(&s, &checks);
        assert_eq!(plan.subspace, 1);
        assert_eq!(plan.regions.len(), 1);
        // The one region is where such an object lives.
        let obj = Object {
            values: vec![
                Value::str("x"),
                Value::str("Ada"),
                Value::str("Lovelace"),
                Value::Int(0),
            ],
        };
        let layout = &s.subspaces[1];
        assert_eq!(
            plan.regions[0],
            layout.region_index(&layout.coordinates_of(&obj))
        );
        // Equality on the key: one region of the key subspace.
        let plan = plan_search(&s, &[check(0, PredOp::Eq(Value::str("x")))]);
        assert_eq!(plan.subspace, 0);
        assert_eq!(
            plan.regions,
            vec![s.subspaces[0].region_index(&[coordinate(&Value::str("x")).unwrap()])]
        );
    }

    #[test]
    fn equality_on_part_of_a_subspace_contacts_a_slice() {
        let s = space_of(
            parse_space("space s key k attributes a, b subspace a, b create 64 partitions")
                .unwrap(),
        );
        let plan = plan_search(&s, &[check(1, PredOp::Eq(Value::str("v")))]);
        // 8 × 8 grid, first dimension fixed: 8 regions, vs 64 in the key subspace.
        assert_eq!(plan.subspace, 1);
        assert_eq!(plan.regions.len(), 8);
        let row = s.subspaces[1].region_index(&[coordinate(&Value::str("v")).unwrap(), 0]);
        assert_eq!(plan.regions, (row..row + 8).collect::<Vec<_>>());
    }

    #[test]
    fn int_ranges_prune_and_intersect() {
        // Key subspace 4 regions, subspace (n) 4 intervals: the axis quarters.
        let s = space_of(
            parse_space("space s key k attributes int n subspace n create 4 partitions").unwrap(),
        );
        // n >= 0 covers coordinates [2^63, MAX]: quarters 2 and 3.
        let plan = plan_search(&s, &[check(1, PredOp::Ge(Value::Int(0)))]);
        assert_eq!(
            plan,
            SearchPlan {
                subspace: 1,
                regions: vec![2, 3]
            }
        );
        // n >= 0 and n < 2^62 (coordinate 3·2^62 is the third split): quarter 2 only.
        let plan = plan_search(
            &s,
            &[
                check(1, PredOp::Ge(Value::Int(0))),
                check(1, PredOp::Lt(Value::Int(1 << 62))),
            ],
        );
        assert_eq!(
            plan,
            SearchPlan {
                subspace: 1,
                regions: vec![2]
            }
        );
        // <= 2^62 reaches the split point itself: quarter 3 too.
        let plan = plan_search(
            &s,
            &[
                check(1, PredOp::Ge(Value::Int(0))),
                check(1, PredOp::Le(Value::Int(1 << 62))),
            ],
        );
        assert_eq!(plan.regions, vec![2, 3]);
        assert_eq!(int_coordinate(1 << 62), 3 << 62);
        // Contradictory bounds: nothing to contact.
        let plan = plan_search(
            &s,
            &[
                check(1, PredOp::Gt(Value::Int(5))),
                check(1, PredOp::Lt(Value::Int(5))),
            ],
        );
        assert_eq!(plan.regions, Vec::<usize>::new());
        // An unsatisfiable check anywhere empties the search.
        let plan = plan_search(&s, &[check(0, PredOp::Eq(Value::Int(5)))]);
        assert_eq!(plan.regions, Vec::<usize>::new());
        // String ranges, regexes and lengths do not prune.
        let plan = plan_search(
            &s,
            &[
                check(0, PredOp::Lt(Value::str("m"))),
                check(0, PredOp::Regex("^a".into())),
            ],
        );
        assert_eq!(
            plan,
            SearchPlan {
                subspace: 0,
                regions: vec![0, 1, 2, 3]
            }
        );
    }

    #[test]
    fn ties_prefer_more_regions_then_lower_index() {
        // 10 partitions: key subspace 10 regions; (a, b) 3 × 3 = 9.
        let s = space_of(
            parse_space("space s key k attributes a, b subspace a, b create 10 partitions")
                .unwrap(),
        );
        assert_eq!(plan_search(&s, &[]).subspace, 1);
        // 6 partitions: key 6, (a, b) 2 × 3 = 6: equal totals, lower index.
        let s = space_of(
            parse_space("space s key k attributes a, b subspace a, b create 6 partitions").unwrap(),
        );
        assert_eq!(plan_search(&s, &[]).subspace, 0);
        // Two single-attribute subspaces, equality on the second: it wins.
        let s = space_of(
            parse_space("space s key k attributes a, b subspace a subspace b create 6 partitions")
                .unwrap(),
        );
        let plan = plan_search(&s, &[check(2, PredOp::Eq(Value::str("z")))]);
        assert_eq!((plan.subspace, plan.regions.len()), (2, 1));
    }

    #[test]
    fn describe_plan_text() {
        let s = space_of(
            parse_space(
                "space pb key user attributes first, int age subspace first create 4 partitions",
            )
            .unwrap(),
        );
        let checks = [
            check(1, PredOp::Eq(Value::str("Ada"))),
            check(2, PredOp::Ge(Value::Int(3))),
        ];
        let plan = plan_search(&s, &checks);
        let text = describe_plan(&s, &checks, &plan, None);
        assert!(text.contains("space pb: search with 2 check(s)"), "{text}");
        assert!(text.contains("check: first eq \"Ada\""), "{text}");
        assert!(text.contains("check: age ge 3"), "{text}");
        assert!(
            text.contains("uses subspace 1 (first): contacts 1 of 4 regions"),
            "{text}"
        );
        assert!(
            text.contains("key subspace 0 (user): 4 of 4 regions"),
            "{text}"
        );
        assert!(
            text.contains("subspace 1 (first): 1 of 4 regions  <- chosen"),
            "{text}"
        );
    }

    #[test]
    fn describe_plan_names_the_local_index_on_a_checked_path() {
        let mut s =
            space_of(parse_space("space p key k attributes document d, int n").expect("valid"));
        s.indexes.push(crate::layout::IndexPart {
            id: PartId(4),
            attr: 1,
            path: Some("a.b".into()),
            state: PartState::Building { progress: 37 },
        });
        let eq = Check::at_path(1, "a.b", PredOp::Eq(Value::Int(5)));
        let regex = Check::at_path(1, "a.b", PredOp::Regex("x".into()));
        let other = Check::at_path(1, "a.c", PredOp::Eq(Value::Int(5)));
        let text = |checks: &[Check]| describe_plan(&s, checks, &plan_search(&s, checks), None);
        let building = text(std::slice::from_ref(&eq));
        assert!(building.contains("check: d.a.b eq 5\n"), "{building}");
        assert!(
            building.contains("local index 4 (d.a.b, building 37%): not used until it is ready"),
            "{building}"
        );
        s.indexes[0].state = PartState::Ready;
        let text = |checks: &[Check]| describe_plan(&s, checks, &plan_search(&s, checks), None);
        let ready = text(&[eq, regex, other]);
        assert!(
            ready.contains("local index 4 (d.a.b, ready): regions read the check's entries"),
            "{ready}"
        );
        assert!(
            ready.contains("local index 4 (d.a.b, ready): this check cannot narrow it"),
            "{ready}"
        );
        assert_eq!(ready.matches("local index").count(), 2, "{ready}");
    }

    #[test]
    fn the_planner_skips_building_and_dropping_subspaces_but_never_the_key_subspace() {
        let mut s = space_of(
            parse_space("space s key k attributes a, b subspace a subspace b create 6 partitions")
                .unwrap(),
        );
        let on_b = [check(2, PredOp::Eq(Value::str("z")))];
        assert_eq!(plan_search(&s, &on_b).subspace, 2);
        for state in [PartState::Building { progress: 99 }, PartState::Dropping] {
            s.subspaces[2].state = state;
            let plan = plan_search(&s, &on_b);
            // Subspace a narrows nothing: its 6 regions tie with the key
            // subspace's 6, and the lower index wins.
            assert_eq!((plan.subspace, plan.regions.len()), (0, 6), "{state}");
            let text = describe_plan(&s, &on_b, &plan, None);
            assert!(text.contains(&format!("({state}: not searched)")), "{text}");
            assert_eq!(text.matches("contacts").count(), 1, "{text}");
        }
        // Even a key subspace marked otherwise (no coordinator does that)
        // still answers: it is the one part every object is in.
        s.subspaces[0].state = PartState::Dropping;
        s.subspaces[1].state = PartState::Dropping;
        assert_eq!(plan_search(&s, &on_b).subspace, 0);
    }

    // ---- property: plans never miss a match and are minimal ----

    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Int,
        Float,
        Str,
    }

    fn arb_value(kind: Kind) -> BoxedStrategy<Value> {
        match kind {
            Kind::Int => prop_oneof![(-4i64..4), any::<i64>(), Just(i64::MIN), Just(i64::MAX)]
                .prop_map(Value::Int)
                .boxed(),
            Kind::Float => prop_oneof![
                (-4i32..4).prop_map(f64::from),
                any::<f64>(),
                Just(-0.0),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY)
            ]
            .prop_map(Value::Float)
            .boxed(),
            Kind::Str => "[ab]{0,2}".prop_map(|s| Value::str(&s)).boxed(),
        }
    }

    fn dtype(kind: Kind) -> DataType {
        match kind {
            Kind::Int => DataType::Int,
            Kind::Float => DataType::Float,
            Kind::Str => DataType::String,
        }
    }

    #[derive(Debug, Clone)]
    struct Case {
        space: Space,
        objects: Vec<Object>,
        checks: Vec<Check>,
    }

    fn arb_case() -> impl Strategy<Value = Case> {
        let kinds = proptest::collection::vec(
            prop_oneof![Just(Kind::Int), Just(Kind::Float), Just(Kind::Str)],
            2..5,
        );
        (
            kinds,
            1u32..10,
            proptest::collection::vec(
                proptest::collection::vec(any::<prop::sample::Index>(), 1..3),
                0..3,
            ),
        )
            .prop_flat_map(|(kinds, partitions, subspace_picks)| {
                let attrs: Vec<Attribute> = kinds
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| Attribute {
                        name: format!("a{i}"),
                        dtype: dtype(k),
                    })
                    .collect();
                let n = attrs.len();
                let subspaces: Vec<Vec<usize>> = subspace_picks
                    .iter()
                    .map(|picks| {
                        let mut dims: Vec<usize> = Vec::new();
                        for p in picks {
                            let i = 1 + p.index(n - 1);
                            if !dims.contains(&i) {
                                dims.push(i);
                            }
                        }
                        dims
                    })
                    .collect();
                let desc = SpaceDesc {
                    name: "p".into(),
                    attrs,
                    subspaces,
                    indexes: vec![],
                    fault_tolerance: 0,
                    partitions,
                    authorization: false,
                    global_indexes: Vec::new(),
                    replex: None,
                };
                let object = kinds.iter().map(|&k| arb_value(k)).collect::<Vec<_>>();
                let objects =
                    proptest::collection::vec(object.prop_map(|values| Object { values }), 1..24);
                let one_check = (0..n, 0..5u8, any::<prop::sample::Index>(), any::<bool>());
                (
                    Just(desc),
                    Just(kinds),
                    objects,
                    proptest::collection::vec(one_check, 0..4),
                )
            })
            .prop_flat_map(|(desc, kinds, objects, raw_checks)| {
                // Operands: half taken from the objects (so matches happen),
                // half fresh.
                let operands: Vec<BoxedStrategy<Value>> = raw_checks
                    .iter()
                    .map(|&(attr, _, pick, from_object)| {
                        if from_object {
                            Just(objects[pick.index(objects.len())].values[attr].clone()).boxed()
                        } else {
                            arb_value(kinds[attr])
                        }
                    })
                    .collect();
                (Just(desc), Just(objects), Just(raw_checks), operands)
            })
            .prop_map(|(desc, objects, raw_checks, operands)| {
                let checks = raw_checks
                    .iter()
                    .zip(operands)
                    .map(|(&(attr, op, _, _), v)| {
                        let op = match op {
                            0 => PredOp::Eq(v),
                            1 => PredOp::Lt(v),
                            2 => PredOp::Le(v),
                            3 => PredOp::Gt(v),
                            _ => PredOp::Ge(v),
                        };
                        Check::new(attr, op)
                    })
                    .collect();
                Case {
                    space: space_of(desc),
                    objects,
                    checks,
                }
            })
    }

    /// The coordinate bounds `[lo, hi]` of region `r` of `layout`, per
    /// dimension, by decoding its mixed-radix index.
    fn region_bounds(layout: &SubspaceLayout, mut r: usize) -> Vec<(u64, u64)> {
        let mut bounds = vec![(0, 0); layout.splits.len()];
        for d in (0..layout.splits.len()).rev() {
            let splits = &layout.splits[d];
            let i = r % (splits.len() + 1);
            r /= splits.len() + 1;
            let lo = if i == 0 { 0 } else { splits[i - 1] };
            let hi = if i == splits.len() {
                u64::MAX
            } else {
                splits[i] - 1
            };
            bounds[d] = (lo, hi);
        }
        bounds
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn plan_contains_every_match_and_is_minimal(case in arb_case()) {
            let Case { space, objects, checks } = case;
            let plan = plan_search(&space, &checks);
            let layout = &space.subspaces[plan.subspace];
            prop_assert!(plan.regions.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(plan.regions.iter().all(|&r| r < layout.regions.len()));
            for object in &objects {
                if checks.iter().all(|c| c.matches(object)) {
                    let r = layout.region_index(&layout.coordinates_of(object));
                    prop_assert!(plan.regions.contains(&r), "object {:?} in region {} not in {:?}", object, r, plan);
                }
            }
            // Brute force: per subspace, the regions whose cell meets the box
            // of intervals. An unsatisfiable check allows zero.
            let unsat = checks
                .iter()
                .any(|c| coordinate_interval(c, space.desc.attrs[c.attr].dtype).is_some_and(|(lo, hi)| lo > hi));
            let best = (0..space.subspaces.len())
                .map(|si| {
                    let boxed = subspace_box(&space, si, &checks);
                    let l = &space.subspaces[si];
                    (0..l.regions.len())
                        .filter(|&r| {
                            region_bounds(l, r).iter().zip(&boxed).all(|(&(rlo, rhi), &(blo, bhi))| blo <= bhi && rlo.max(blo) <= rhi.min(bhi))
                        })
                        .count()
                })
                .min()
                .unwrap();
            prop_assert_eq!(plan.regions.len(), if unsat { 0 } else { best });
        }
    }
}
