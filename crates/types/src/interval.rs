//! Coordinate intervals: the range of coordinates a check confines an
//! attribute to, which lets a search skip regions and read an index range.

use crate::coerce::is_scalar_of;
use crate::coordinate::{coordinate, float_coordinate, int_coordinate};
use crate::predicate::{Check, PredOp};
use crate::value::{DataType, Value};

/// The empty coordinate interval as [`coordinate_interval`] returns it.
pub const EMPTY_INTERVAL: (u64, u64) = (1, 0);

/// Whether an inclusive coordinate interval is empty (`lo > hi`).
pub fn interval_is_empty(interval: (u64, u64)) -> bool {
    interval.0 > interval.1
}

/// The intersection of two inclusive coordinate intervals (empty when
/// `lo > hi`).
pub fn intersect_intervals(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    let (lo, hi) = (a.0.max(b.0), a.1.min(b.1));
    if lo > hi {
        EMPTY_INTERVAL
    } else {
        (lo, hi)
    }
}

/// The inclusive coordinate interval `(lo, hi)` that `check` confines an
/// attribute of type `dtype` to: every value satisfying the check has its
/// coordinate inside it.
///
/// - `Eq` on a hashable type: the single point `(c, c)`.
/// - `Lt`/`Le`/`Gt`/`Ge` on int, float and timestamp: the order-preserving
///   interval, strict bounds exact (`Lt(5)` ends at `int_coordinate(4)`).
/// - A check no value can satisfy — an operand of another kind, a NaN operand,
///   `Lt(i64::MIN)`, `Gt(+inf)` … — gives the empty interval
///   [`EMPTY_INTERVAL`] `= (1, 0)`. Empty is any `lo > hi`; test it with
///   [`interval_is_empty`].
/// - Everything else (string ranges, regex, length, contains, containers):
///   `None`, meaning the check does not prune.
pub fn coordinate_interval(check: &Check, dtype: DataType) -> Option<(u64, u64)> {
    if !dtype.is_hashable() || check.path.is_some() {
        return None;
    }
    match &check.op {
        PredOp::Eq(v) => {
            if !is_scalar_of(dtype, v) || matches!(v, Value::Float(f) if f.is_nan()) {
                return Some(EMPTY_INTERVAL);
            }
            let c = coordinate(v).expect("hashable operand");
            Some((c, c))
        }
        PredOp::Lt(v) | PredOp::Le(v) | PredOp::Gt(v) | PredOp::Ge(v) => {
            if matches!(dtype, DataType::String) {
                // Strings hash: ranges do not prune.
                return None;
            }
            if !is_scalar_of(dtype, v) {
                return Some(EMPTY_INTERVAL);
            }
            let c = match v {
                Value::Int(i) | Value::Timestamp(i) => int_coordinate(*i),
                Value::Float(f) if f.is_nan() => return Some(EMPTY_INTERVAL),
                Value::Float(f) => float_coordinate(*f),
                _ => unreachable!("is_scalar_of checked a numeric kind"),
            };
            // Ints and non-NaN floats: a < b ⇔ coord(a) < coord(b) and
            // a == b ⇔ coord(a) == coord(b) (coordinate.rs), so these bounds
            // are exact for the values that can satisfy the check.
            let interval = match &check.op {
                PredOp::Lt(_) => match c.checked_sub(1) {
                    Some(hi) => (0, hi),
                    None => EMPTY_INTERVAL,
                },
                PredOp::Le(_) => (0, c),
                PredOp::Gt(_) => match c.checked_add(1) {
                    Some(lo) => (lo, u64::MAX),
                    None => EMPTY_INTERVAL,
                },
                _ => (c, u64::MAX),
            };
            Some(interval)
        }
        _ => None,
    }
}

/// The inclusive coordinate interval that a check on a document path
/// confines the path's value to, as [`coordinate_interval`] gives it for a
/// whole attribute of the operand's kind (a value found at a path matches
/// only an operand of its own kind): equality on a string, int or float,
/// and ranges on ints and floats. `None` for a check without a path or one
/// that does not narrow (string ranges, document operands, regex, lengths,
/// contains). A local index on the path holds exactly those coordinates.
pub fn path_interval(check: &Check) -> Option<(u64, u64)> {
    check.path.as_ref()?;
    let operand = match &check.op {
        PredOp::Eq(v) | PredOp::Lt(v) | PredOp::Le(v) | PredOp::Gt(v) | PredOp::Ge(v) => v,
        _ => return None,
    };
    let dtype = match operand {
        Value::String(_) => DataType::String,
        Value::Int(_) => DataType::Int,
        Value::Float(_) => DataType::Float,
        _ => return None,
    };
    coordinate_interval(&Check::new(check.attr, check.op.clone()), dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Object, Prim, TimeUnit};
    use proptest::prelude::*;

    fn obj(v: Value) -> Object {
        Object {
            values: vec![Value::str("key"), v],
        }
    }

    #[test]
    fn coordinate_intervals() {
        let ci = |op: PredOp, dtype: DataType| coordinate_interval(&Check::new(1, op), dtype);
        let ic = int_coordinate;
        assert_eq!(
            ci(PredOp::Eq(Value::Int(5)), DataType::Int),
            Some((ic(5), ic(5)))
        );
        assert_eq!(
            ci(PredOp::Lt(Value::Int(5)), DataType::Int),
            Some((0, ic(4)))
        );
        assert_eq!(
            ci(PredOp::Le(Value::Int(5)), DataType::Int),
            Some((0, ic(5)))
        );
        assert_eq!(
            ci(PredOp::Gt(Value::Int(5)), DataType::Int),
            Some((ic(6), u64::MAX))
        );
        assert_eq!(
            ci(PredOp::Ge(Value::Int(5)), DataType::Int),
            Some((ic(5), u64::MAX))
        );
        assert_eq!(
            ci(PredOp::Lt(Value::Int(i64::MIN)), DataType::Int),
            Some(EMPTY_INTERVAL)
        );
        assert_eq!(
            ci(PredOp::Gt(Value::Int(i64::MAX)), DataType::Int),
            Some(EMPTY_INTERVAL)
        );
        assert_eq!(
            ci(PredOp::Le(Value::Int(i64::MIN)), DataType::Int),
            Some((0, 0))
        );
        assert_eq!(
            ci(PredOp::Lt(Value::Float(5.0)), DataType::Int),
            Some(EMPTY_INTERVAL)
        );
        let ts = DataType::Timestamp(TimeUnit::Hour);
        assert_eq!(
            ci(PredOp::Ge(Value::Timestamp(-3)), ts),
            Some((ic(-3), u64::MAX))
        );
        assert_eq!(ci(PredOp::Eq(Value::Int(-3)), ts), Some(EMPTY_INTERVAL));
        let fc = float_coordinate;
        assert_eq!(
            ci(PredOp::Eq(Value::Float(-0.0)), DataType::Float),
            Some((fc(0.0), fc(0.0)))
        );
        assert_eq!(
            ci(PredOp::Lt(Value::Float(1.5)), DataType::Float),
            Some((0, fc(1.5) - 1))
        );
        assert_eq!(
            ci(PredOp::Gt(Value::Float(f64::NAN)), DataType::Float),
            Some(EMPTY_INTERVAL)
        );
        assert_eq!(
            ci(PredOp::Eq(Value::Float(f64::NAN)), DataType::Float),
            Some(EMPTY_INTERVAL)
        );
        let h = crate::coordinate::string_hash(b"x");
        assert_eq!(
            ci(PredOp::Eq(Value::str("x")), DataType::String),
            Some((h, h))
        );
        assert_eq!(ci(PredOp::Lt(Value::str("x")), DataType::String), None);
        assert_eq!(ci(PredOp::Regex("x".into()), DataType::String), None);
        assert_eq!(ci(PredOp::LenEq(1), DataType::String), None);
        assert_eq!(
            ci(PredOp::Contains(Value::Int(1)), DataType::List(Prim::Int)),
            None
        );
        assert_eq!(
            ci(PredOp::Eq(Value::List(vec![])), DataType::List(Prim::Int)),
            None
        );
        assert!(interval_is_empty(EMPTY_INTERVAL));
        assert_eq!(intersect_intervals((0, 10), (5, 20)), (5, 10));
        assert!(interval_is_empty(intersect_intervals((0, 4), (5, 20))));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn int_intervals_are_exact(op in 0..5u8, bound in -4i64..4, x in -6i64..6) {
            let operand = Value::Int(bound);
            let op = match op { 0 => PredOp::Eq(operand), 1 => PredOp::Lt(operand), 2 => PredOp::Le(operand), 3 => PredOp::Gt(operand), _ => PredOp::Ge(operand) };
            let check = Check::new(1, op);
            let (lo, hi) = coordinate_interval(&check, DataType::Int).unwrap();
            let c = int_coordinate(x);
            prop_assert_eq!(check.matches(&obj(Value::Int(x))), lo <= c && c <= hi);
        }

        #[test]
        fn float_intervals_contain_matches(op in 0..5u8, bound in prop_oneof![any::<f64>(), Just(0.0), Just(-0.0), Just(1.0)], x in prop_oneof![any::<f64>(), Just(0.0), Just(-0.0), Just(1.0)]) {
            let operand = Value::Float(bound);
            let op = match op { 0 => PredOp::Eq(operand), 1 => PredOp::Lt(operand), 2 => PredOp::Le(operand), 3 => PredOp::Gt(operand), _ => PredOp::Ge(operand) };
            let check = Check::new(1, op);
            let (lo, hi) = coordinate_interval(&check, DataType::Float).unwrap();
            let c = float_coordinate(x);
            if check.matches(&obj(Value::Float(x))) {
                prop_assert!(lo <= c && c <= hi);
            } else if !x.is_nan() {
                // Exact for every non-NaN value.
                prop_assert!(!(lo <= c && c <= hi));
            }
        }
    }
}
