//! Index slots: what the first four bytes of an entry name.
//!
//! A slot is either a whole attribute — its number is the attribute's
//! position in the space, as entries always had it — or a local index on a
//! path inside a document attribute, numbered [`PATH_SLOT_BASE`]` | part id`.
//! Attribute positions stay far below [`PATH_SLOT_BASE`], so the two kinds
//! never share a number, and a path index keeps its number while other
//! parts come and go (part ids are never reused). A part id that does not
//! fit below the base gets no slot: the index then holds no entries and no
//! search uses it, which costs speed and never correctness.
//!
//! A path slot's value is the one a check on the same path compares
//! ([`doc_value_at`]): a string, an int or a float has the coordinate it
//! would have as a whole attribute; anything else found there (an object,
//! an array, a boolean, null) has none and gets no entry, as does a
//! document where the path leads nowhere. An array is not indexed element
//! by element; a path may step into it by position (`tags[0]`). Values of
//! different kinds at one path share the slot, so a range of ints may also
//! walk floats whose coordinates fall inside it: readers re-check every
//! object, so such entries cost a load, not a wrong answer.

use tessera_types::coordinate::coordinate;
use tessera_types::interval::{coordinate_interval, path_interval};
use tessera_types::value::{doc_value_at, parse_doc_path, PathStep};
use tessera_types::{Check, DataType, Object, PartId, Space, Value};

/// The first slot number of the path indexes; every attribute slot is
/// below it.
pub const PATH_SLOT_BASE: usize = 0x8000_0000;

/// The first slot number of the ordered slots (`ORDERED_SLOT_BASE | attr`):
/// above every attribute position, below every path slot.
pub const ORDERED_SLOT_BASE: usize = 0x4000_0000;

/// The slot number of the path index with id `part`, if its id fits.
pub fn path_slot(part: PartId) -> Option<usize> {
    let id = usize::try_from(part.0).ok()?;
    (id < PATH_SLOT_BASE).then_some(PATH_SLOT_BASE | id)
}

/// What one slot of a region's index holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The coordinates of a whole attribute (by position in the space).
    Attr(usize),
    /// The full value of a whole attribute in its order
    /// ([`tessera_types::sortkey::sort_key`]), not a 64-bit coordinate: the
    /// one slot of a global index's indexlets, walked by lookups in value
    /// order. Its entries are `slot ++ sort key ++ storage key`.
    Ordered(usize),
    /// The coordinates of the value at a path inside a document attribute.
    Path {
        /// The slot number ([`path_slot`] of the index's part id).
        slot: usize,
        /// The document attribute.
        attr: usize,
        /// The parsed path inside it.
        steps: Vec<PathStep>,
    },
}

impl Slot {
    /// The number its entries start with.
    pub fn number(&self) -> usize {
        match self {
            Slot::Attr(attr) => *attr,
            Slot::Ordered(attr) => ORDERED_SLOT_BASE | *attr,
            Slot::Path { slot, .. } => *slot,
        }
    }

    /// The coordinate `object` has in this slot; `None`: no entry (and
    /// always `None` in an ordered slot, whose entries hold sort keys).
    pub fn coordinate(&self, object: &Object) -> Option<u64> {
        self.value_coordinate(object.values.get(self.attr())?)
    }

    /// The attribute whose value the slot's entries are computed from.
    pub fn attr(&self) -> usize {
        match self {
            Slot::Attr(attr) | Slot::Ordered(attr) | Slot::Path { attr, .. } => *attr,
        }
    }

    /// The coordinate an object whose [`Slot::attr`] is `value` has in
    /// this slot: [`Slot::coordinate`] for a reader that decoded only that
    /// attribute.
    pub fn value_coordinate(&self, value: &Value) -> Option<u64> {
        match self {
            Slot::Attr(_) => coordinate(value),
            Slot::Ordered(_) => None,
            Slot::Path { steps, .. } => match value {
                Value::Document(text) => coordinate(&doc_value_at(text, steps)?),
                _ => None,
            },
        }
    }

    /// Whether this slot holds the values `check` tests: the whole
    /// attribute, or the same path inside the same document attribute.
    pub fn serves(&self, check: &Check) -> bool {
        match (self, &check.path) {
            (Slot::Attr(attr), None) => *attr == check.attr,
            // Searches never read an indexlet; lookups walk it themselves.
            (Slot::Ordered(_), _) => false,
            (Slot::Path { attr, steps, .. }, Some(path)) => {
                *attr == check.attr && parse_doc_path(path).is_ok_and(|p| p == *steps)
            }
            _ => false,
        }
    }
}

/// The slots of the path indexes of `space` that `filter` keeps, by part
/// id order. An index whose path does not parse or whose part id has no
/// slot is left out (the coordinator never records the first).
pub fn path_slots(space: &Space, filter: impl Fn(&tessera_types::IndexPart) -> bool) -> Vec<Slot> {
    space
        .indexes
        .iter()
        .filter(|index| filter(index))
        .filter_map(|index| {
            let steps = parse_doc_path(index.path.as_deref()?).ok()?;
            Some(Slot::Path {
                slot: path_slot(index.id)?,
                attr: index.attr,
                steps,
            })
        })
        .collect()
}

/// The interval `check` confines `slot` to: [`coordinate_interval`] for
/// a whole attribute of type `dtype`, [`path_interval`] for a path.
pub fn slot_interval(slot: &Slot, check: &Check, dtype: DataType) -> Option<(u64, u64)> {
    match slot {
        Slot::Attr(_) => coordinate_interval(check, dtype),
        Slot::Ordered(_) => None,
        Slot::Path { .. } => path_interval(check),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::access::{choose_access, Access, RegionPlace, Walk};
    use crate::index::entry::{entry, entry_bounds, entry_parts};
    use tessera_types::coordinate::{float_coordinate, int_coordinate, string_hash};
    use tessera_types::parse::parse_space;
    use tessera_types::PredOp;

    fn doc(text: &str) -> Object {
        Object {
            values: vec![Value::Int(1), Value::Document(text.into()), Value::Int(9)],
        }
    }

    fn at(path: &str) -> Slot {
        Slot::Path {
            slot: path_slot(PartId(3)).expect("fits"),
            attr: 1,
            steps: parse_doc_path(path).expect("a path"),
        }
    }

    #[test]
    fn path_slots_sit_above_every_attribute_and_round_trip_through_entries() {
        assert_eq!(path_slot(PartId(0)), Some(0x8000_0000));
        assert_eq!(path_slot(PartId(7)), Some(0x8000_0007));
        assert_eq!(path_slot(PartId(0x7fff_ffff)), Some(0xffff_ffff));
        assert_eq!(path_slot(PartId(0x8000_0000)), None);
        assert_eq!(path_slot(PartId(u64::MAX)), None);
        let slot = path_slot(PartId(7)).expect("fits");
        let bytes = entry(slot, 42, b"key");
        assert_eq!(&bytes[..4], &[0x80, 0, 0, 7]);
        assert_eq!(entry_parts(&bytes), Some((slot, 42, &b"key"[..])));
        // The whole range of the last attribute an entry can name ends
        // before the first path slot's entries begin.
        let (_, end) = entry_bounds(PATH_SLOT_BASE - 1, (0, u64::MAX));
        assert_eq!(end, Some(PATH_SLOT_BASE.to_be_bytes()[4..].to_vec()));
        assert!(end.expect("an end").as_slice() <= bytes.as_slice());
        // The last slot's range is open-ended rather than wrapping to 0.
        assert_eq!(entry_bounds(0xffff_ffff, (0, u64::MAX)).1, None);
    }

    #[test]
    fn a_path_yields_the_scalar_a_check_sees_and_nothing_else() {
        let d = r#"{"a": {"b": 5, "f": 1.5, "s": "x", "big": 18446744073709551615,
                    "arr": [10, "y", [1]], "o": {"z": 1}, "t": true, "n": null}}"#;
        let c = |path: &str| at(path).coordinate(&doc(d));
        assert_eq!(c("a.b"), Some(int_coordinate(5)));
        assert_eq!(c("a.f"), Some(float_coordinate(1.5)));
        assert_eq!(c("a.s"), Some(string_hash(b"x")));
        // Beyond i64, JSON numbers compare as floats.
        assert_eq!(c("a.big"), Some(float_coordinate(18446744073709551615.0)));
        // Into arrays by position, never the array itself.
        assert_eq!(c("a.arr[0]"), Some(int_coordinate(10)));
        assert_eq!(c("a.arr[1]"), Some(string_hash(b"y")));
        assert_eq!(c("a.arr[2][0]"), Some(int_coordinate(1)));
        for none in [
            "a.arr", "a.arr[2]", "a.arr[3]", "a.o", "a.t", "a.n", "a.x", "a.b.c", "a",
        ] {
            assert_eq!(c(none), None, "{none}");
        }
        assert_eq!(at("a.b").coordinate(&doc("not json")), None);
        let not_a_document = Object {
            values: vec![Value::Int(1), Value::Int(5)],
        };
        assert_eq!(at("a.b").coordinate(&not_a_document), None);
        assert_eq!(Slot::Attr(2).coordinate(&doc(d)), Some(int_coordinate(9)));
    }

    /// The property readers rely on: every object a check on the path
    /// matches has an entry whose coordinate lies in the interval the check
    /// confines the slot to, for every kind of value and operand.
    #[test]
    fn every_match_of_a_path_check_lies_in_its_interval() {
        let values = [
            "5",
            "-3",
            "0",
            "-0.0",
            "0.0",
            "1.5",
            "2.5",
            "-7.25",
            "1e300",
            "\"x\"",
            "\"y\"",
            "\"\"",
            "[5]",
            "{\"c\": 5}",
            "true",
            "null",
        ];
        let operands = [
            Value::Int(5),
            Value::Int(-3),
            Value::Int(0),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Float(0.0),
            Value::Float(1.5),
            Value::Float(2.0),
            Value::Float(f64::NAN),
            Value::Float(f64::INFINITY),
            Value::str("x"),
            Value::str("z"),
            Value::Document("[5]".into()),
        ];
        let ops: [fn(Value) -> PredOp; 5] =
            [PredOp::Eq, PredOp::Lt, PredOp::Le, PredOp::Gt, PredOp::Ge];
        let slot = at("a.b");
        let mut narrowed = 0;
        for v in values {
            let object = doc(&format!(r#"{{"a": {{"b": {v}}}}}"#));
            for operand in &operands {
                for op in ops {
                    let check = Check::at_path(1, "a.b", op(operand.clone()));
                    let Some((lo, hi)) = path_interval(&check) else {
                        continue;
                    };
                    narrowed += 1;
                    if check.matches(&object) {
                        let c = slot.coordinate(&object);
                        assert!(
                            c.is_some_and(|c| lo <= c && c <= hi),
                            "{v} matches {check:?} but has coordinate {c:?} outside {lo}..={hi}"
                        );
                    }
                }
            }
        }
        // Strings narrow only by equality, documents never.
        assert_eq!(narrowed, 16 * (10 * 5 + 2));
    }

    #[test]
    fn a_slot_serves_checks_on_its_own_attribute_and_path_only() {
        let slot = at("a.b[1]");
        let eq = |attr: usize, path: Option<&str>| Check {
            attr,
            op: PredOp::Eq(Value::Int(1)),
            path: path.map(str::to_string),
        };
        assert!(slot.serves(&eq(1, Some("a.b[1]"))));
        assert!(!slot.serves(&eq(1, Some("a.b"))));
        assert!(!slot.serves(&eq(1, Some("a.b[1].c"))));
        assert!(!slot.serves(&eq(2, Some("a.b[1]"))));
        assert!(!slot.serves(&eq(1, None)));
        assert!(!slot.serves(&eq(1, Some("a..b"))));
        assert!(Slot::Attr(2).serves(&eq(2, None)));
        assert!(!Slot::Attr(1).serves(&eq(1, Some("a.b[1]"))));
    }

    /// A page is bounded when its walk returns what it walks: a key read,
    /// nothing, or an index that answers every check; a scan, or a walk
    /// whose other checks may drop what it reads, is not.
    #[test]
    fn only_walks_that_return_what_they_read_are_bounded() {
        use crate::index::access::walk_is_bounded;
        let desc = parse_space("space s key int k attributes string a, int n").expect("valid");
        let place = RegionPlace {
            subspace: 0,
            cell: Default::default(),
            complete: vec![Slot::Attr(1), Slot::Attr(2)],
        };
        let bounded = |checks: &[Check]| {
            let access = choose_access(&desc, &place, checks, None, None);
            walk_is_bounded(&desc, &access, checks)
        };
        let n = |op| Check::new(2, op);
        assert!(bounded(&[Check::new(0, PredOp::Eq(Value::Int(3)))]));
        assert!(bounded(&[n(PredOp::Eq(Value::Int(3)))]));
        assert!(bounded(&[
            n(PredOp::Ge(Value::Int(3))),
            n(PredOp::Lt(Value::Int(9)))
        ]));
        assert!(bounded(&[Check::new(1, PredOp::Eq(Value::str("x")))]));
        // Contradicting checks: nothing is read.
        assert!(bounded(&[
            n(PredOp::Gt(Value::Int(5))),
            n(PredOp::Lt(Value::Int(5)))
        ]));
        // The walk on n returns objects the check on a may drop.
        assert!(!bounded(&[
            n(PredOp::Eq(Value::Int(3))),
            Check::new(1, PredOp::Regex("^x".into()))
        ]));
        // No check: every object of the region.
        assert!(!bounded(&[]));
        assert!(!walk_is_bounded(&desc, &Access::Scan, &[]));
        // A region without the index scans.
        let bare = RegionPlace {
            subspace: 0,
            cell: Default::default(),
            complete: vec![],
        };
        let checks = [n(PredOp::Eq(Value::Int(3)))];
        let access = choose_access(&desc, &bare, &checks, None, None);
        assert!(!walk_is_bounded(&desc, &access, &checks));
    }

    #[test]
    fn searches_walk_a_complete_path_index_equality_first() {
        let desc = parse_space("space s key int k attributes document d, int n").expect("valid");
        let path = at("a.b");
        let place = |complete: Vec<Slot>| RegionPlace {
            subspace: 0,
            cell: Default::default(),
            complete,
        };
        let ready = place(vec![Slot::Attr(2), path.clone()]);
        let on_path = |op| Check::at_path(1, "a.b", op);
        let choose =
            |place: &RegionPlace, checks: &[Check]| choose_access(&desc, place, checks, None, None);
        let c5 = int_coordinate(5);
        assert_eq!(
            choose(&ready, &[on_path(PredOp::Eq(Value::Int(5)))]),
            Access::Index {
                slot: path.clone(),
                interval: (c5, c5),
                walk: Walk::Unordered
            }
        );
        assert_eq!(
            choose(
                &ready,
                &[
                    on_path(PredOp::Ge(Value::Int(5))),
                    on_path(PredOp::Lt(Value::Int(9)))
                ]
            ),
            Access::Index {
                slot: path.clone(),
                interval: (c5, int_coordinate(8)),
                walk: Walk::Unordered
            }
        );
        // Contradicting checks on the path: nothing can match.
        assert_eq!(
            choose(
                &ready,
                &[
                    on_path(PredOp::Gt(Value::Int(5))),
                    on_path(PredOp::Lt(Value::Int(5)))
                ]
            ),
            Access::Nothing
        );
        // An equality on an attribute beats a range on the path; an
        // equality on the path beats a range on an attribute.
        let n_eq = Check::new(2, PredOp::Eq(Value::Int(1)));
        let n_range = Check::new(2, PredOp::Ge(Value::Int(1)));
        assert!(matches!(
            choose(&ready, &[on_path(PredOp::Ge(Value::Int(5))), n_eq]),
            Access::Index {
                slot: Slot::Attr(2),
                ..
            }
        ));
        assert!(matches!(
            choose(&ready, &[n_range, on_path(PredOp::Eq(Value::str("x")))]),
            Access::Index {
                slot: Slot::Path { .. },
                ..
            }
        ));
        // Checks the index cannot narrow, and an index not yet complete.
        assert_eq!(
            choose(&ready, &[on_path(PredOp::Regex("x".into()))]),
            Access::Scan
        );
        assert_eq!(
            choose(&ready, &[on_path(PredOp::Gt(Value::str("x")))]),
            Access::Scan
        );
        assert_eq!(
            choose(
                &ready,
                &[Check::at_path(1, "a.c", PredOp::Eq(Value::Int(5)))]
            ),
            Access::Scan
        );
        let building = place(vec![Slot::Attr(2)]);
        assert_eq!(
            choose(&building, &[on_path(PredOp::Eq(Value::Int(5)))]),
            Access::Scan
        );
    }
}
