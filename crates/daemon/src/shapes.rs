//! Observed workloads (issue 14, point 3): the *shapes* of what a daemon
//! serves, per space, counted always and cheaply, for the layout advisor
//! (`tessera advise --space NAME`) and for `/metrics`.
//!
//! A shape is what decides a layout's cost, never a value:
//!
//! | kind | counted where | shape |
//! |---|---|---|
//! | `search` | the daemon serving the first page of the search's first lane | the checked attributes, each with its class: `eq`, `range` (lt/le/gt/ge), `regex`, `other` (lengths, contains) |
//! | `get` | the point leader answering it | none |
//! | `insert` | the point leader starting it down its chain (no object before) | none |
//! | `modify` | the same (an object before and after) | the attributes whose value changed |
//! | `delete` | the same (no object after) | none |
//!
//! Each client operation is counted once in the cluster. An update is
//! counted where it starts down its chain, which happens once however
//! often its client retries it (retries are answered before). A search
//! reads a page of every region of its plan, and each region's first page
//! has no `after`; the daemon recomputes the client's plan (it is a pure
//! function of the configuration and the checks, [`opens_search`]) and
//! counts only the first page of the plan's first lane, and only when it
//! answered it (a page refused for its epoch is sent again). A search the
//! layout changed under (a replan with nothing yielded yet) can be counted
//! twice; a search that reads no region is not counted, as it costs
//! nothing.
//!
//! Memory is bounded: at most [`SHAPES_PER_SPACE_MAX`] shapes per space
//! and counting shard; a shape beyond it adds to its kind's overflow,
//! which `/metrics` shows as the shape `*`. Counting costs one uncontended
//! mutex and one hash-map increment: each thread counts into its own shard
//! of [`Shapes`], which a scrape merges.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tessera_types::lookup::order_interval;
use tessera_types::plan::plan_search;
use tessera_types::region::regions_intersecting;
use tessera_types::{Check, Object, PredOp, RegionId, Space, SpaceDesc, SpaceId, SubspaceKind};

/// Distinct shapes counted per space (and per shard of [`Shapes`]).
pub const SHAPES_PER_SPACE_MAX: usize = 256;

/// Counting shards: threads share one only beyond this many.
const SHARDS: usize = 8;

/// The label a shape beyond [`SHAPES_PER_SPACE_MAX`] is counted under.
pub const OVERFLOW_LABEL: &str = "*";

/// How a search checks one attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CheckClass {
    /// Equality.
    Eq,
    /// `lt`, `le`, `gt` or `ge`.
    Range,
    /// A regular expression.
    Regex,
    /// Anything else (lengths, `contains`): it narrows no subspace.
    Other,
}

impl CheckClass {
    /// The class of one check.
    pub fn of(op: &PredOp) -> CheckClass {
        match op {
            PredOp::Eq(_) => CheckClass::Eq,
            PredOp::Lt(_) | PredOp::Le(_) | PredOp::Gt(_) | PredOp::Ge(_) => CheckClass::Range,
            PredOp::Regex(_) => CheckClass::Regex,
            PredOp::LenEq(_) | PredOp::LenLe(_) | PredOp::LenGe(_) | PredOp::Contains(_) => {
                CheckClass::Other
            }
        }
    }

    /// Its name in a shape label.
    pub fn name(self) -> &'static str {
        match self {
            CheckClass::Eq => "eq",
            CheckClass::Range => "range",
            CheckClass::Regex => "regex",
            CheckClass::Other => "other",
        }
    }
}

/// What a counted operation was.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// A search: (attribute, class) by attribute, one class per attribute
    /// (the one that narrows most: eq, then range, then regex).
    Search(Vec<(usize, CheckClass)>),
    /// A read by key.
    Get,
    /// An update that created its object.
    Insert,
    /// An update that changed these attributes (ascending; empty when it
    /// rewrote the same values).
    Modify(Vec<usize>),
    /// An update that deleted its object.
    Delete,
}

/// The kinds of [`Shape`], in the order of [`SpaceShapes::overflow`].
const KINDS: [&str; 5] = ["search", "get", "insert", "modify", "delete"];

impl Shape {
    /// The shape of a search with `checks`.
    pub fn search(checks: &[Check]) -> Shape {
        let mut classes: BTreeMap<usize, CheckClass> = BTreeMap::new();
        for check in checks {
            let class = CheckClass::of(&check.op);
            classes
                .entry(check.attr)
                .and_modify(|c| *c = (*c).min(class))
                .or_insert(class);
        }
        Shape::Search(classes.into_iter().collect())
    }

    /// The shape of an update that takes its key from `old` to `new`.
    pub fn update(old: Option<&Object>, new: Option<&Object>) -> Shape {
        match (old, new) {
            (None, Some(_)) => Shape::Insert,
            (Some(old), Some(new)) => Shape::Modify(
                (1..new.values.len())
                    .filter(|&a| old.values.get(a) != new.values.get(a))
                    .collect(),
            ),
            (_, None) => Shape::Delete,
        }
    }

    fn kind_index(&self) -> usize {
        match self {
            Shape::Search(_) => 0,
            Shape::Get => 1,
            Shape::Insert => 2,
            Shape::Modify(_) => 3,
            Shape::Delete => 4,
        }
    }

    /// Its kind, as the `kind` label names it.
    pub fn kind(&self) -> &'static str {
        KINDS[self.kind_index()]
    }

    /// Its `shape` label, with `desc`'s attribute names: `city:eq,price:range`
    /// for a search, `price,stars` for a modify, empty otherwise.
    pub fn label(&self, desc: &SpaceDesc) -> String {
        let name = |a: usize| {
            desc.attrs
                .get(a)
                .map_or_else(|| format!("#{a}"), |attr| attr.name.clone())
        };
        match self {
            Shape::Search(checks) => checks
                .iter()
                .map(|&(a, class)| format!("{}:{}", name(a), class.name()))
                .collect::<Vec<_>>()
                .join(","),
            Shape::Modify(attrs) => attrs.iter().map(|&a| name(a)).collect::<Vec<_>>().join(","),
            Shape::Get | Shape::Insert | Shape::Delete => String::new(),
        }
    }
}

/// One space's counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpaceShapes {
    /// Operations by shape, at most [`SHAPES_PER_SPACE_MAX`] shapes.
    pub shapes: HashMap<Shape, u64>,
    /// Operations whose shape did not fit, by kind (`search`, `get`,
    /// `insert`, `modify`, `delete`).
    pub overflow: [u64; 5],
}

/// Counts by space.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShapeCounts {
    /// The spaces by id (a name can be reused by a new space).
    pub spaces: HashMap<SpaceId, SpaceShapes>,
}

impl ShapeCounts {
    /// Adds `n` operations of `shape` on `space`.
    pub fn add(&mut self, space: SpaceId, shape: &Shape, n: u64) {
        let counts = self.spaces.entry(space).or_default();
        if let Some(count) = counts.shapes.get_mut(shape) {
            *count += n;
        } else if counts.shapes.len() < SHAPES_PER_SPACE_MAX {
            counts.shapes.insert(shape.clone(), n);
        } else {
            counts.overflow[shape.kind_index()] += n;
        }
    }

    /// Adds every count of `other`, shapes in a fixed order so that which
    /// ones overflow does not depend on hashing.
    pub fn merge(&mut self, other: &ShapeCounts) {
        for (&space, theirs) in &other.spaces {
            let mut shapes: Vec<(&Shape, &u64)> = theirs.shapes.iter().collect();
            shapes.sort_unstable();
            for (shape, &n) in shapes {
                self.add(space, shape, n);
            }
            let ours = self.spaces.entry(space).or_default();
            for (mine, theirs) in ours.overflow.iter_mut().zip(theirs.overflow) {
                *mine += theirs;
            }
        }
    }

    /// Every count as `(space, kind, shape label, count)`, named by
    /// `space_of`; spaces it does not know (removed since) are left out.
    pub fn labelled<'a>(
        &'a self,
        space_of: impl Fn(SpaceId) -> Option<&'a SpaceDesc> + 'a,
    ) -> impl Iterator<Item = (&'a str, &'static str, String, u64)> + 'a {
        self.spaces.iter().flat_map(move |(&id, counts)| {
            let desc = space_of(id);
            let shapes = counts.shapes.iter().filter_map(move |(shape, &n)| {
                let desc = desc?;
                Some((desc.name.as_str(), shape.kind(), shape.label(desc), n))
            });
            let overflow = KINDS
                .iter()
                .zip(counts.overflow)
                .filter(|&(_, n)| n > 0)
                .filter_map(move |(&kind, n)| {
                    Some((desc?.name.as_str(), kind, OVERFLOW_LABEL.to_string(), n))
                });
            shapes.chain(overflow)
        })
    }
}

/// The counters of a daemon, in shards by thread.
#[derive(Debug)]
pub struct Shapes {
    shards: Vec<Mutex<ShapeCounts>>,
}

impl Default for Shapes {
    fn default() -> Shapes {
        Shapes {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(ShapeCounts::default()))
                .collect(),
        }
    }
}

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard, handed out round-robin on first use.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

impl Shapes {
    /// Counts one operation of `shape` on `space`.
    pub fn count(&self, space: SpaceId, shape: &Shape) {
        let shard = SHARD.with(|s| *s);
        crate::node::lock(&self.shards[shard]).add(space, shape, 1);
    }

    /// Forgets the counts of the spaces `keep` says are gone (removed
    /// since they were counted): nothing reads them any more, and a
    /// cluster that makes and removes spaces for good (the advisor's
    /// validation, scratch spaces) would otherwise keep them all.
    pub fn retain_spaces(&self, keep: impl Fn(SpaceId) -> bool) {
        for shard in &self.shards {
            crate::node::lock(shard).spaces.retain(|&id, _| keep(id));
        }
    }

    /// Every count so far, merged over the shards.
    pub fn snapshot(&self) -> ShapeCounts {
        let mut all = ShapeCounts::default();
        for shard in &self.shards {
            let counts = crate::node::lock(shard).clone();
            all.merge(&counts);
        }
        all
    }
}

/// Whether a page of `region` with no `after` opens a client's search:
/// whether `region` is the first lane the client plans for `checks` in
/// this configuration (the client's `plan_lanes`): the first region of
/// [`plan_search`] for a search of a subspace, or for a lookup
/// (`lookup` names its order) the first indexlet of its index in the
/// stream's order.
pub fn opens_search(
    space: &Space,
    region: RegionId,
    checks: &[Check],
    lookup: Option<bool>,
) -> bool {
    match lookup {
        None => {
            let plan = plan_search(space, checks);
            let first = plan.regions.first().and_then(|&i| {
                space
                    .subspaces
                    .get(plan.subspace)
                    .and_then(|layout| layout.regions.get(i))
            });
            first.is_some_and(|r| r.id == region)
        }
        Some(descending) => {
            let Some(layout) = space.subspaces.iter().find(|layout| {
                layout.kind == SubspaceKind::GlobalIndex
                    && layout.regions.iter().any(|r| r.id == region)
            }) else {
                return false;
            };
            let Some(dtype) = layout
                .attrs
                .first()
                .and_then(|&a| space.desc.attrs.get(a).map(|attr| (a, attr.dtype)))
            else {
                return false;
            };
            let interval = order_interval(checks, dtype.0, dtype.1).unwrap_or((0, u64::MAX));
            let indexlets = regions_intersecting(layout, &[interval]);
            let first = if descending {
                indexlets.last()
            } else {
                indexlets.first()
            };
            first.is_some_and(|&i| layout.regions[i].id == region)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{parse_space, Value};

    fn check(attr: usize, op: PredOp) -> Check {
        Check::new(attr, op)
    }

    fn object(values: &[i64]) -> Object {
        Object {
            values: values.iter().map(|&v| Value::Int(v)).collect(),
        }
    }

    /// The counts of a removed space go; the others stay whole.
    #[test]
    fn a_removed_spaces_counts_are_forgotten() {
        let shapes = Shapes::default();
        for _ in 0..3 {
            shapes.count(SpaceId(1), &Shape::Get);
            shapes.count(SpaceId(2), &Shape::Insert);
        }
        shapes.retain_spaces(|id| id != SpaceId(2));
        let counts = shapes.snapshot();
        assert!(!counts.spaces.contains_key(&SpaceId(2)));
        assert_eq!(counts.spaces[&SpaceId(1)].shapes[&Shape::Get], 3);
    }

    #[test]
    fn a_search_shape_keeps_one_class_per_attribute_the_narrowest() {
        let shape = Shape::search(&[
            check(3, PredOp::Le(Value::Int(9))),
            check(1, PredOp::Regex("^a".into())),
            check(3, PredOp::Ge(Value::Int(2))),
            check(1, PredOp::Eq(Value::str("x"))),
            check(2, PredOp::LenEq(3)),
        ]);
        assert_eq!(
            shape,
            Shape::Search(vec![
                (1, CheckClass::Eq),
                (2, CheckClass::Other),
                (3, CheckClass::Range)
            ])
        );
        let desc = parse_space("space s key k attributes string a, string b, int c").unwrap();
        assert_eq!(shape.label(&desc), "a:eq,b:other,c:range");
        assert_eq!(shape.kind(), "search");
    }

    #[test]
    fn an_update_is_an_insert_a_delete_or_a_modify_of_what_changed() {
        let (a, b) = (object(&[1, 5, 6, 7]), object(&[1, 5, 0, 8]));
        assert_eq!(Shape::update(None, Some(&a)), Shape::Insert);
        assert_eq!(Shape::update(Some(&a), None), Shape::Delete);
        assert_eq!(Shape::update(Some(&a), Some(&b)), Shape::Modify(vec![2, 3]));
        assert_eq!(Shape::update(Some(&a), Some(&a)), Shape::Modify(vec![]));
        let desc = parse_space("space s key int k attributes int a, int b, int c").unwrap();
        assert_eq!(Shape::Modify(vec![2, 3]).label(&desc), "b,c");
    }

    #[test]
    fn shapes_beyond_the_bound_are_counted_as_their_kinds_overflow() {
        let mut counts = ShapeCounts::default();
        let space = SpaceId(1);
        for a in 0..SHAPES_PER_SPACE_MAX + 10 {
            counts.add(space, &Shape::Modify(vec![a]), 2);
        }
        // A shape already counted still counts as itself.
        counts.add(space, &Shape::Modify(vec![0]), 1);
        counts.add(space, &Shape::Get, 1);
        let s = &counts.spaces[&space];
        assert_eq!(s.shapes.len(), SHAPES_PER_SPACE_MAX);
        assert_eq!(s.shapes[&Shape::Modify(vec![0])], 3);
        assert_eq!(s.overflow, [0, 1, 0, 20, 0]);
        let total: u64 = s.shapes.values().sum::<u64>() + s.overflow.iter().sum::<u64>();
        assert_eq!(total, 2 * (SHAPES_PER_SPACE_MAX as u64 + 10) + 2);
    }

    /// `desc` laid out with the default grid, region ids from 1.
    fn laid_out(desc: SpaceDesc) -> Space {
        tessera_types::region::default_layout(SpaceId(1), desc)
    }

    #[test]
    fn exactly_one_region_of_a_search_opens_it() {
        let space = laid_out(
            parse_space("space s key k attributes string a, int b subspace a create 8 partitions")
                .unwrap(),
        );
        let all: Vec<RegionId> = space
            .subspaces
            .iter()
            .flat_map(|l| l.regions.iter().map(|r| r.id))
            .collect();
        let searches = [
            vec![check(1, PredOp::Eq(Value::str("x")))],
            vec![check(2, PredOp::Ge(Value::Int(3)))],
            vec![],
        ];
        for checks in searches {
            let opening: Vec<RegionId> = all
                .iter()
                .copied()
                .filter(|&r| opens_search(&space, r, &checks, None))
                .collect();
            assert_eq!(opening.len(), 1, "{checks:?}");
            // The opening region is one the search reads.
            let plan = plan_search(&space, &checks);
            let read: Vec<RegionId> = plan
                .regions
                .iter()
                .map(|&i| space.subspaces[plan.subspace].regions[i].id)
                .collect();
            assert!(read.contains(&opening[0]), "{checks:?}");
        }
        // No region of a subspace opens a lookup.
        assert!(!all
            .iter()
            .any(|&r| opens_search(&space, r, &[], Some(false))));
    }

    #[test]
    fn threads_count_into_shards_that_a_snapshot_adds_up() {
        let shapes = std::sync::Arc::new(Shapes::default());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let shapes = shapes.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let shape = if i % 4 == 0 {
                            Shape::Get
                        } else {
                            Shape::Insert
                        };
                        shapes.count(SpaceId(t % 2), &shape);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a counting thread");
        }
        let all = shapes.snapshot();
        for space in [SpaceId(0), SpaceId(1)] {
            assert_eq!(all.spaces[&space].shapes[&Shape::Get], 50);
            assert_eq!(all.spaces[&space].shapes[&Shape::Insert], 150);
        }
        let desc = parse_space("space s key k").unwrap();
        let named: Vec<_> = all
            .labelled(|id| (id == SpaceId(0)).then_some(&desc))
            .collect();
        assert_eq!(named.len(), 2, "only the space the configuration names");
        assert!(named.contains(&("s", "get", String::new(), 50)));
    }
}
