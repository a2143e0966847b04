//! Written values against their attribute's type: coercion to the type
//! (API.md §2.2) and the canonical form of sets and maps.

use crate::value::{DataType, Prim, Value};
use std::cmp::Ordering;

/// Why a written value does not fit its attribute's type (status WRONGTYPE).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    /// The value's kind cannot be stored in the attribute's type.
    #[error("a {found} value cannot be stored in a {expected} attribute")]
    Mismatch {
        /// The attribute's type.
        expected: DataType,
        /// The value's kind.
        found: String,
    },
    /// A container element (or map key or value) has the wrong kind.
    #[error(
        "a {found} element cannot be stored in a {expected} attribute (elements must be {element})"
    )]
    Element {
        /// The attribute's type.
        expected: DataType,
        /// The element (or key, or value) type it requires.
        element: Prim,
        /// The offending element's kind.
        found: &'static str,
    },
    /// A float given for an int attribute is NaN or beyond the i64 range.
    #[error("the float {value} cannot be rounded to an int")]
    FloatToInt {
        /// The float, as text.
        value: String,
    },
    /// A document value is not valid JSON.
    #[error("invalid JSON document: {reason}")]
    InvalidDocument {
        /// serde_json's explanation.
        reason: String,
    },
}

/// Checks and normalizes a value written to an attribute of type `dtype`
/// (API.md §2.2):
///
/// - int accepts an int, or a float rounded to the nearest integer (halves
///   away from zero); NaN and floats beyond the i64 range are refused;
/// - float accepts a float or an int (converted);
/// - timestamp accepts a timestamp or an int (microseconds);
/// - string accepts a string; document accepts a document whose text is
///   valid JSON (checked with serde_json, kept as written);
/// - list(E) accepts a list whose elements are all exactly E;
/// - set(E) accepts a set or a list of E, and returns it sorted (floats by
///   IEEE total order) with duplicates (by `==`) removed;
/// - map(K, V) accepts a map of K → V, returned sorted by key with duplicate
///   keys removed — the last one given wins.
///
/// Empty containers fit every container type of their shape.
pub fn coerce_value(dtype: DataType, value: Value) -> Result<Value, TypeError> {
    let mismatch = |v: &Value| TypeError::Mismatch {
        expected: dtype,
        found: describe_kind(v),
    };
    match (dtype, value) {
        (DataType::String, v @ Value::String(_)) => Ok(v),
        (DataType::Int, v @ Value::Int(_)) => Ok(v),
        (DataType::Int, Value::Float(f)) => {
            let r = f.round();
            // The i64 range is [-2^63, 2^63); NaN is in no range.
            const TWO_63: f64 = 9_223_372_036_854_775_808.0;
            if !(-TWO_63..TWO_63).contains(&r) {
                Err(TypeError::FloatToInt {
                    value: f.to_string(),
                })
            } else {
                Ok(Value::Int(r as i64))
            }
        }
        (DataType::Float, v @ Value::Float(_)) => Ok(v),
        (DataType::Float, Value::Int(i)) => Ok(Value::Float(i as f64)),
        (DataType::Timestamp(_), v @ Value::Timestamp(_)) => Ok(v),
        (DataType::Timestamp(_), Value::Int(i)) => Ok(Value::Timestamp(i)),
        (DataType::Document, Value::Document(text)) => {
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(_) => Ok(Value::Document(text)),
                Err(e) => Err(TypeError::InvalidDocument {
                    reason: e.to_string(),
                }),
            }
        }
        (DataType::List(p), Value::List(items)) => {
            check_elements(dtype, p, items.iter())?;
            Ok(Value::List(items))
        }
        (DataType::Set(p), Value::Set(items) | Value::List(items)) => {
            check_elements(dtype, p, items.iter())?;
            Ok(canonicalize(Value::Set(items)))
        }
        (DataType::Map(k, v), Value::Map(entries)) => {
            check_elements(dtype, k, entries.iter().map(|(a, _)| a))?;
            check_elements(dtype, v, entries.iter().map(|(_, b)| b))?;
            Ok(canonicalize(Value::Map(entries)))
        }
        (_, v) => Err(mismatch(&v)),
    }
}

fn check_elements<'a>(
    dtype: DataType,
    element: Prim,
    mut items: impl Iterator<Item = &'a Value>,
) -> Result<(), TypeError> {
    match items.find(|v| !is_prim(element, v)) {
        Some(bad) => Err(TypeError::Element {
            expected: dtype,
            element,
            found: bad.kind(),
        }),
        None => Ok(()),
    }
}

/// A total order on scalar values: by kind, then strings bytewise, ints and
/// timestamps numerically, floats by IEEE total order. Containers and
/// documents compare by kind only (they are never set elements or map keys).
pub fn scalar_total_cmp(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::String(_) => 0,
            Value::Int(_) => 1,
            Value::Float(_) => 2,
            Value::Timestamp(_) => 3,
            Value::Document(_) => 4,
            Value::List(_) => 5,
            Value::Set(_) => 6,
            Value::Map(_) => 7,
        }
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Puts sets and maps in their canonical form (the invariant of
/// [`Value`]): set elements sorted by [`scalar_total_cmp`] with `==`
/// duplicates removed (the first kept); map entries sorted by key with
/// duplicate keys removed (the last given kept). Other values are returned
/// unchanged.
pub fn canonicalize(value: Value) -> Value {
    match value {
        Value::Set(mut items) => {
            items.sort_by(scalar_total_cmp);
            items.dedup_by(|later, earlier| later == earlier);
            Value::Set(items)
        }
        Value::Map(mut entries) => {
            // Stable sort keeps entries with equal keys in the order given;
            // keep the last of each run.
            entries.sort_by(|a, b| scalar_total_cmp(&a.0, &b.0));
            let mut out: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
            for entry in entries {
                match out.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => out.push(entry),
                }
            }
            Value::Map(out)
        }
        other => other,
    }
}

/// A short description of a value's kind, with container element kinds
/// (`list(int)`), for error messages.
pub(crate) fn describe_kind(value: &Value) -> String {
    let elems = |items: &[Value]| match items.first() {
        Some(v) => v.kind().to_string(),
        None => "empty".to_string(),
    };
    match value {
        Value::List(items) => format!("list({})", elems(items)),
        Value::Set(items) => format!("set({})", elems(items)),
        Value::Map(entries) => match entries.first() {
            Some((k, v)) => format!("map({}, {})", k.kind(), v.kind()),
            None => "map(empty)".to_string(),
        },
        other => other.kind().to_string(),
    }
}

/// Whether `value` is a scalar of exactly the kind `dtype` (hashable types).
pub(crate) fn is_scalar_of(dtype: DataType, value: &Value) -> bool {
    matches!(
        (dtype, value),
        (DataType::String, Value::String(_))
            | (DataType::Int, Value::Int(_))
            | (DataType::Float, Value::Float(_))
            | (DataType::Timestamp(_), Value::Timestamp(_))
    )
}

pub(crate) fn is_prim(p: Prim, value: &Value) -> bool {
    is_scalar_of(p.data_type(), value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::TimeUnit;

    #[test]
    fn coerce_value_rules() {
        use DataType as T;
        assert_eq!(coerce_value(T::Int, Value::Float(3.7)), Ok(Value::Int(4)));
        assert_eq!(coerce_value(T::Int, Value::Float(-2.5)), Ok(Value::Int(-3)));
        assert_eq!(coerce_value(T::Int, Value::Float(2.4)), Ok(Value::Int(2)));
        assert_eq!(
            coerce_value(T::Int, Value::Float(-9_223_372_036_854_775_808.0)),
            Ok(Value::Int(i64::MIN))
        );
        assert!(matches!(
            coerce_value(T::Int, Value::Float(9.3e18)),
            Err(TypeError::FloatToInt { .. })
        ));
        assert!(matches!(
            coerce_value(T::Int, Value::Float(f64::NAN)),
            Err(TypeError::FloatToInt { .. })
        ));
        assert_eq!(coerce_value(T::Float, Value::Int(3)), Ok(Value::Float(3.0)));
        assert_eq!(
            coerce_value(T::Timestamp(TimeUnit::Second), Value::Int(9)),
            Ok(Value::Timestamp(9))
        );
        assert_eq!(
            coerce_value(T::Timestamp(TimeUnit::Second), Value::Timestamp(9)),
            Ok(Value::Timestamp(9))
        );
        assert!(matches!(
            coerce_value(T::Timestamp(TimeUnit::Second), Value::Float(9.0)),
            Err(TypeError::Mismatch { .. })
        ));
        assert!(matches!(
            coerce_value(T::String, Value::Int(1)),
            Err(TypeError::Mismatch { .. })
        ));
        assert!(matches!(
            coerce_value(T::Int, Value::str("1")),
            Err(TypeError::Mismatch { .. })
        ));
        assert_eq!(
            coerce_value(T::Document, Value::Document("[1, {\"a\": null}]".into())),
            Ok(Value::Document("[1, {\"a\": null}]".into()))
        );
        assert!(matches!(
            coerce_value(T::Document, Value::Document("{a:1}".into())),
            Err(TypeError::InvalidDocument { .. })
        ));
        assert!(matches!(
            coerce_value(T::Document, Value::str("{}")),
            Err(TypeError::Mismatch { .. })
        ));

        let l = Value::List(vec![Value::Int(2), Value::Int(1), Value::Int(2)]);
        assert_eq!(coerce_value(T::List(Prim::Int), l.clone()), Ok(l.clone()));
        assert!(matches!(
            coerce_value(
                T::List(Prim::Int),
                Value::List(vec![Value::Int(1), Value::Float(1.0)])
            ),
            Err(TypeError::Element {
                element: Prim::Int,
                found: "float",
                ..
            })
        ));
        assert_eq!(
            coerce_value(T::List(Prim::Float), Value::List(vec![])),
            Ok(Value::List(vec![]))
        );
        assert_eq!(
            coerce_value(T::Set(Prim::Int), l),
            Ok(Value::Set(vec![Value::Int(1), Value::Int(2)]))
        );
        assert_eq!(
            coerce_value(
                T::Set(Prim::String),
                Value::Set(vec![Value::str("b"), Value::str("a"), Value::str("b")])
            ),
            Ok(Value::Set(vec![Value::str("a"), Value::str("b")]))
        );
        assert_eq!(
            coerce_value(
                T::Set(Prim::Float),
                Value::Set(vec![Value::Float(1.0), Value::Float(-2.0)])
            ),
            Ok(Value::Set(vec![Value::Float(-2.0), Value::Float(1.0)]))
        );
        assert!(matches!(
            coerce_value(T::Set(Prim::Int), Value::Map(vec![])),
            Err(TypeError::Mismatch { .. })
        ));
        let m = Value::Map(vec![
            (Value::str("b"), Value::Int(1)),
            (Value::str("a"), Value::Int(2)),
            (Value::str("b"), Value::Int(3)),
        ]);
        assert_eq!(
            coerce_value(T::Map(Prim::String, Prim::Int), m.clone()),
            Ok(Value::Map(vec![
                (Value::str("a"), Value::Int(2)),
                (Value::str("b"), Value::Int(3))
            ]))
        );
        assert!(matches!(
            coerce_value(T::Map(Prim::String, Prim::Float), m),
            Err(TypeError::Element {
                element: Prim::Float,
                ..
            })
        ));
        assert!(matches!(
            coerce_value(T::Map(Prim::Int, Prim::Int), Value::List(vec![])),
            Err(TypeError::Mismatch { .. })
        ));
        assert_eq!(
            coerce_value(T::Map(Prim::Int, Prim::Int), Value::Map(vec![])),
            Ok(Value::Map(vec![]))
        );
    }
}
