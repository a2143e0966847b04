//! Predicates over one attribute (API.md §6), their coordinate intervals, and
//! the type checks of predicates and written values.
//!
//! Semantics of [`Check::matches`] (API.md §6.2):
//!
//! - `Eq`: whole-value equality, same kind only (`Int(1)` never equals
//!   `Float(1.0)`); floats compare by IEEE `==` (`-0.0 == 0.0`, NaN equals
//!   nothing). Sets and maps compare as sets and maps: the operand need not be
//!   sorted.
//! - `Lt`/`Le`/`Gt`/`Ge`: strings bytewise, ints, floats (IEEE; NaN compares
//!   false) and timestamps, same kind only; never on containers or documents.
//! - `Regex`: the minimal dialect of API.md §6.3 (see [`regex_matches`]), on
//!   strings only.
//! - `LenEq`/`LenLe`/`LenGe`: bytes of a string, elements of a list or set,
//!   entries of a map.
//! - `Contains`: an element of a list or set, or a key of a map.
//!
//! A check whose operand has the wrong kind simply matches nothing;
//! [`validate_check`] refuses such checks before they are sent.

use crate::coerce::{describe_kind, is_prim, is_scalar_of};
use crate::schema::SpaceDesc;
use crate::value::{DataType, Object, Value};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

// Coercion, intervals and the regex dialect have their own modules now;
// these names stay reachable here for callers that import them from
// `predicate` (such as the client's name resolution).
pub use crate::coerce::{canonicalize, coerce_value, scalar_total_cmp, TypeError};
pub use crate::interval::{
    coordinate_interval, intersect_intervals, interval_is_empty, EMPTY_INTERVAL,
};
pub use crate::regex::regex_matches;

/// One predicate operator with its operand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PredOp {
    /// Equal to the operand (whole-value equality, same kind only).
    Eq(Value),
    /// Less than the operand.
    Lt(Value),
    /// Less than or equal to the operand.
    Le(Value),
    /// Greater than the operand.
    Gt(Value),
    /// Greater than or equal to the operand.
    Ge(Value),
    /// The minimal regex dialect of API.md §6.3, on string attributes.
    Regex(String),
    /// Length (string bytes, elements, map entries) equal to the operand.
    LenEq(u64),
    /// Length at most the operand.
    LenLe(u64),
    /// Length at least the operand.
    LenGe(u64),
    /// List or set element, or map key.
    Contains(Value),
}

impl PredOp {
    /// The operator's name as the command line spells it (`eq`, `lt`, …).
    pub fn name(&self) -> &'static str {
        match self {
            PredOp::Eq(_) => "eq",
            PredOp::Lt(_) => "lt",
            PredOp::Le(_) => "le",
            PredOp::Gt(_) => "gt",
            PredOp::Ge(_) => "ge",
            PredOp::Regex(_) => "regex",
            PredOp::LenEq(_) => "len_eq",
            PredOp::LenLe(_) => "len_le",
            PredOp::LenGe(_) => "len_ge",
            PredOp::Contains(_) => "contains",
        }
    }
}

/// A predicate on one attribute, by index into the space's `attrs`.
/// A search or a conditional operation holds when all its checks hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The attribute, by index into the space's `attrs` (0 = the key).
    pub attr: usize,
    /// What must hold of the attribute's value.
    pub op: PredOp,
    /// A path inside a document attribute (`a.b[3]`, see
    /// [`crate::value::parse_doc_path`]): the check applies to the value
    /// found there. `None`: the whole attribute.
    #[serde(default)]
    pub path: Option<String>,
}

impl Check {
    /// A check on the whole attribute.
    pub fn new(attr: usize, op: PredOp) -> Check {
        Check {
            attr,
            op,
            path: None,
        }
    }

    /// A check on the value at `path` inside a document attribute.
    pub fn at_path(attr: usize, path: impl Into<String>, op: PredOp) -> Check {
        Check {
            attr,
            op,
            path: Some(path.into()),
        }
    }

    /// Whether `object` satisfies this check (false when the object has no
    /// value at `attr`). With a path, the value at the path inside the
    /// document is checked; a missing path, a non-document attribute or a
    /// value of another kind than the operand matches nothing.
    pub fn matches(&self, object: &Object) -> bool {
        self.matches_value(object.values.get(self.attr))
    }

    /// Whether `value`, an object's value at `attr` (`None`: it has none),
    /// satisfies this check: [`Check::matches`] for a reader that decoded
    /// only this attribute of the object.
    pub fn matches_value(&self, value: Option<&Value>) -> bool {
        match (&self.path, value) {
            (None, Some(value)) => op_matches(&self.op, value),
            (Some(path), Some(Value::Document(text))) => doc_path_matches(&self.op, text, path),
            _ => false,
        }
    }
}

/// Whether the value at `path` inside the JSON `text` satisfies `op`
/// (API.md §6.2, document row): strings, ints and floats compare as their
/// own kind; objects, arrays, booleans and null compare by equality of
/// their canonical text with a document operand; `Contains` and `Len*` also
/// apply to arrays (elements), and `Len*` to strings.
pub fn doc_path_matches(op: &PredOp, text: &str, path: &str) -> bool {
    let Ok(steps) = crate::value::parse_doc_path(path) else {
        return false;
    };
    let Ok(root) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    let Some(found) = crate::value::json_at(&root, &steps) else {
        return false;
    };
    if let serde_json::Value::Array(items) = found {
        if matches!(
            op,
            PredOp::Contains(_) | PredOp::LenEq(_) | PredOp::LenLe(_) | PredOp::LenGe(_)
        ) {
            let list = Value::List(items.iter().map(crate::value::json_to_value).collect());
            return op_matches(op, &list);
        }
    }
    let value = crate::value::json_to_value(found);
    match (op, &value) {
        (PredOp::Eq(Value::Document(operand)), Value::Document(canonical)) => {
            serde_json::from_str::<serde_json::Value>(operand)
                .is_ok_and(|o| &o.to_string() == canonical)
        }
        _ => op_matches(op, &value),
    }
}

/// Whether `value` satisfies `op` (the semantics of [`Check::matches`]).
pub fn op_matches(op: &PredOp, value: &Value) -> bool {
    match op {
        PredOp::Eq(operand) => values_equal(value, operand),
        PredOp::Lt(operand) => compare(value, operand) == Some(Ordering::Less),
        PredOp::Le(operand) => matches!(
            compare(value, operand),
            Some(Ordering::Less | Ordering::Equal)
        ),
        PredOp::Gt(operand) => compare(value, operand) == Some(Ordering::Greater),
        PredOp::Ge(operand) => matches!(
            compare(value, operand),
            Some(Ordering::Greater | Ordering::Equal)
        ),
        PredOp::Regex(pattern) => match value {
            Value::String(bytes) => regex_matches(pattern.as_bytes(), bytes),
            _ => false,
        },
        PredOp::LenEq(n) => length(value) == Some(*n),
        PredOp::LenLe(n) => length(value).is_some_and(|l| l <= *n),
        PredOp::LenGe(n) => length(value).is_some_and(|l| l >= *n),
        PredOp::Contains(operand) => match value {
            Value::List(items) | Value::Set(items) => items.iter().any(|v| v == operand),
            Value::Map(entries) => entries.iter().any(|(k, _)| k == operand),
            _ => false,
        },
    }
}

/// Equality as `Eq` checks it: `==` on values, except that sets and maps are
/// compared regardless of the operand's order and duplicates, and
/// documents as JSON values (a document is stored as written, or compact
/// after a path update, so its text's spacing and key order mean nothing).
fn values_equal(value: &Value, operand: &Value) -> bool {
    match (value, operand) {
        (Value::Set(_), Value::Set(_)) | (Value::Map(_), Value::Map(_)) => {
            canonicalize(value.clone()) == canonicalize(operand.clone())
        }
        (Value::Document(a), Value::Document(b)) => {
            match (
                serde_json::from_str::<serde_json::Value>(a),
                serde_json::from_str::<serde_json::Value>(b),
            ) {
                (Ok(x), Ok(y)) => x == y,
                _ => a == b,
            }
        }
        _ => value == operand,
    }
}

/// The order of two values of the same orderable kind; `None` otherwise (and
/// for NaN).
fn compare(value: &Value, operand: &Value) -> Option<Ordering> {
    match (value, operand) {
        (Value::String(a), Value::String(b)) => Some(a.as_slice().cmp(b.as_slice())),
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::Timestamp(a), Value::Timestamp(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// The length `Len*` checks measure; `None` for kinds without one.
fn length(value: &Value) -> Option<u64> {
    let n = match value {
        Value::String(b) => b.len(),
        Value::List(items) | Value::Set(items) => items.len(),
        Value::Map(entries) => entries.len(),
        _ => return None,
    };
    Some(n as u64)
}

/// Why a check does not fit the space's schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The attribute index is beyond the schema (status UNKNOWNATTR).
    #[error("unknown attribute (index {attr})")]
    UnknownAttr {
        /// The index the check named.
        attr: usize,
    },
    /// The operator is not allowed on the attribute's type (status WRONGTYPE).
    #[error("operator {op} is not allowed on attribute `{attr}` of type {dtype}")]
    WrongOperator {
        /// The attribute's name.
        attr: String,
        /// The operator's name ([`PredOp::name`]).
        op: &'static str,
        /// The attribute's type.
        dtype: DataType,
    },
    /// The operand's kind does not fit the attribute's type (status WRONGTYPE).
    #[error("operator {op} on attribute `{attr}` of type {dtype} needs {expected}, not {found}")]
    WrongOperand {
        /// The attribute's name.
        attr: String,
        /// The operator's name ([`PredOp::name`]).
        op: &'static str,
        /// The attribute's type.
        dtype: DataType,
        /// What the operand should have been.
        expected: String,
        /// The operand's kind.
        found: String,
    },
    /// A document path on a non-document attribute, or a malformed path
    /// (status WRONGTYPE).
    #[error("path {path:?} of attribute `{attr}`: {reason}")]
    BadPath {
        /// The attribute's name.
        attr: String,
        /// The path as given.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl CheckError {
    /// The HyperDex status name this error maps to: `UNKNOWNATTR` or `WRONGTYPE`.
    pub fn status_name(&self) -> &'static str {
        match self {
            CheckError::UnknownAttr { .. } => "UNKNOWNATTR",
            CheckError::WrongOperator { .. }
            | CheckError::WrongOperand { .. }
            | CheckError::BadPath { .. } => "WRONGTYPE",
        }
    }
}

/// Whether `value` is a well-typed whole value of a container or document
/// type (for `Eq` on containers).
fn is_whole_value_of(dtype: DataType, value: &Value) -> bool {
    match (dtype, value) {
        (DataType::List(p), Value::List(items)) | (DataType::Set(p), Value::Set(items)) => {
            items.iter().all(|v| is_prim(p, v))
        }
        (DataType::Map(k, v), Value::Map(entries)) => {
            entries.iter().all(|(a, b)| is_prim(k, a) && is_prim(v, b))
        }
        (DataType::Document, Value::Document(_)) => true,
        _ => is_scalar_of(dtype, value),
    }
}

/// Checks that `check` names an attribute of `desc` and that its operator and
/// operand fit the attribute's type (API.md §6.2):
///
/// | type | eq | lt le gt ge | regex | len_* | contains |
/// | --- | --- | --- | --- | --- | --- |
/// | string | string | string | yes | yes | no |
/// | int / float / timestamp | same type | same type | no | no | no |
/// | list(E) / set(E) | whole list / set of E | no | no | yes | E |
/// | map(K, V) | whole map of K → V | no | no | yes | K |
/// | document | document | no | no | no | no |
///
/// Operands never mix numeric kinds: an int operand on a float attribute is
/// WRONGTYPE. (Document paths are not checks of this crate yet.)
pub fn validate_check(desc: &SpaceDesc, check: &Check) -> Result<(), CheckError> {
    let attr = desc
        .attrs
        .get(check.attr)
        .ok_or(CheckError::UnknownAttr { attr: check.attr })?;
    let dtype = attr.dtype;
    if let Some(path) = &check.path {
        return validate_path_check(&attr.name, dtype, path, &check.op);
    }
    let op = check.op.name();
    let wrong_operator = || CheckError::WrongOperator {
        attr: attr.name.clone(),
        op,
        dtype,
    };
    let wrong_operand = |expected: String, found: &Value| CheckError::WrongOperand {
        attr: attr.name.clone(),
        op,
        dtype,
        expected,
        found: describe_kind(found),
    };
    match &check.op {
        PredOp::Eq(v) => {
            if is_whole_value_of(dtype, v) {
                Ok(())
            } else {
                Err(wrong_operand(format!("a {dtype}"), v))
            }
        }
        PredOp::Lt(v) | PredOp::Le(v) | PredOp::Gt(v) | PredOp::Ge(v) => {
            if !dtype.is_hashable() {
                Err(wrong_operator())
            } else if is_scalar_of(dtype, v) {
                Ok(())
            } else {
                Err(wrong_operand(format!("a {dtype}"), v))
            }
        }
        PredOp::Regex(_) => match dtype {
            DataType::String => Ok(()),
            _ => Err(wrong_operator()),
        },
        PredOp::LenEq(_) | PredOp::LenLe(_) | PredOp::LenGe(_) => match dtype {
            DataType::String | DataType::List(_) | DataType::Set(_) | DataType::Map(_, _) => Ok(()),
            _ => Err(wrong_operator()),
        },
        PredOp::Contains(v) => {
            let element = match dtype {
                DataType::List(p) | DataType::Set(p) | DataType::Map(p, _) => p,
                _ => return Err(wrong_operator()),
            };
            if is_prim(element, v) {
                Ok(())
            } else {
                Err(wrong_operand(format!("a {}", element.data_type()), v))
            }
        }
    }
}

/// A check at a document path: the attribute must be a document and the
/// path well formed; any operator is accepted (it is evaluated against the
/// value found at the path), with an operand that a document field can be
/// compared with (string, int, float or document).
fn validate_path_check(
    attr: &str,
    dtype: DataType,
    path: &str,
    op: &PredOp,
) -> Result<(), CheckError> {
    if dtype != DataType::Document {
        return Err(CheckError::BadPath {
            attr: attr.to_string(),
            path: path.to_string(),
            reason: format!("a path needs a document attribute, not {dtype}"),
        });
    }
    crate::value::parse_doc_path(path).map_err(|reason| CheckError::BadPath {
        attr: attr.to_string(),
        path: path.to_string(),
        reason,
    })?;
    let operand = match op {
        PredOp::Eq(v) | PredOp::Lt(v) | PredOp::Le(v) | PredOp::Gt(v) | PredOp::Ge(v) => v,
        PredOp::Contains(v) => v,
        _ => return Ok(()),
    };
    match operand {
        Value::String(_) | Value::Int(_) | Value::Float(_) => Ok(()),
        Value::Document(_) if matches!(op, PredOp::Eq(_)) => Ok(()),
        other => Err(CheckError::WrongOperand {
            attr: format!("{attr}.{path}"),
            op: op.name(),
            dtype,
            expected: "a string, int, float (or, for eq, a document)".into(),
            found: describe_kind(other),
        }),
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attr#{}", self.attr)?;
        if let Some(path) = &self.path {
            write!(f, ".{path}")?;
        }
        write!(f, " {} ", self.op.name())?;
        match &self.op {
            PredOp::Eq(v)
            | PredOp::Lt(v)
            | PredOp::Le(v)
            | PredOp::Gt(v)
            | PredOp::Ge(v)
            | PredOp::Contains(v) => {
                write!(f, "{v:?}")
            }
            PredOp::Regex(p) => write!(f, "{p:?}"),
            PredOp::LenEq(n) | PredOp::LenLe(n) | PredOp::LenGe(n) => write!(f, "{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Attribute;
    use crate::value::{Prim, TimeUnit};

    fn obj(v: Value) -> Object {
        Object {
            values: vec![Value::str("key"), v],
        }
    }

    fn holds(op: PredOp, v: Value) -> bool {
        Check::new(1, op).matches(&obj(v))
    }

    #[test]
    fn comparisons_same_kind_only() {
        assert!(holds(PredOp::Eq(Value::Int(3)), Value::Int(3)));
        assert!(!holds(PredOp::Eq(Value::Float(3.0)), Value::Int(3)));
        assert!(!holds(PredOp::Eq(Value::Int(3)), Value::Float(3.0)));
        assert!(holds(PredOp::Eq(Value::Float(-0.0)), Value::Float(0.0)));
        assert!(!holds(
            PredOp::Eq(Value::Float(f64::NAN)),
            Value::Float(f64::NAN)
        ));
        assert!(holds(PredOp::Lt(Value::Int(4)), Value::Int(3)));
        assert!(!holds(PredOp::Lt(Value::Int(3)), Value::Int(3)));
        assert!(holds(PredOp::Le(Value::Int(3)), Value::Int(3)));
        assert!(holds(PredOp::Gt(Value::Int(3)), Value::Int(4)));
        assert!(!holds(PredOp::Gt(Value::Int(3)), Value::Int(3)));
        assert!(holds(PredOp::Ge(Value::Int(3)), Value::Int(3)));
        assert!(!holds(PredOp::Lt(Value::Float(4.0)), Value::Int(3)));
        assert!(!holds(
            PredOp::Lt(Value::Float(f64::NAN)),
            Value::Float(1.0)
        ));
        assert!(!holds(
            PredOp::Ge(Value::Float(1.0)),
            Value::Float(f64::NAN)
        ));
        assert!(holds(PredOp::Le(Value::Float(-0.0)), Value::Float(0.0)));
        assert!(!holds(PredOp::Lt(Value::Float(0.0)), Value::Float(-0.0)));
        assert!(holds(PredOp::Lt(Value::Timestamp(10)), Value::Timestamp(9)));
        assert!(!holds(PredOp::Lt(Value::Int(10)), Value::Timestamp(9)));
        // Strings compare bytewise: "B" < "a", "ab" < "b", "" < anything.
        assert!(holds(PredOp::Lt(Value::str("a")), Value::str("B")));
        assert!(holds(PredOp::Lt(Value::str("b")), Value::str("ab")));
        assert!(holds(PredOp::Gt(Value::str("")), Value::str("\x00")));
        assert!(holds(
            PredOp::Gt(Value::String(vec![0x7f])),
            Value::String(vec![0x80])
        ));
        // No ordering on containers.
        assert!(!holds(
            PredOp::Lt(Value::List(vec![Value::Int(2)])),
            Value::List(vec![Value::Int(1)])
        ));
        // A missing attribute matches nothing.
        assert!(!Check::new(5, PredOp::LenGe(0)).matches(&obj(Value::Int(1))));
    }

    #[test]
    fn document_path_predicates() {
        use crate::value::{parse_doc_path, split_attr_path, PathStep};
        assert_eq!(
            parse_doc_path("a.b[3].c"),
            Ok(vec![
                PathStep::Field("a".into()),
                PathStep::Field("b".into()),
                PathStep::Index(3),
                PathStep::Field("c".into())
            ])
        );
        assert_eq!(
            parse_doc_path("[0][1]"),
            Ok(vec![PathStep::Index(0), PathStep::Index(1)])
        );
        for bad in ["", "a.", ".a", "a..b", "a[", "a[x]", "a[]", "a]b", "a[1]b"] {
            assert!(parse_doc_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(split_attr_path("doc.a.b"), Some(("doc", "a.b")));
        assert_eq!(split_attr_path("doc[2].x"), Some(("doc", "[2].x")));
        assert_eq!(split_attr_path("doc"), None);

        let d = Value::Document(
            r#"{"p": {"name": "Jo", "age": 30, "h": 1.5, "tags": ["a", "b"], "sub": {"y": 1, "x": [1]}}, "t": true}"#
                .into(),
        );
        let at = |path: &str, op: PredOp| Check::at_path(1, path, op).matches(&obj(d.clone()));
        assert!(at("p.name", PredOp::Eq(Value::str("Jo"))));
        assert!(at("p.name", PredOp::Regex("^J".into())));
        assert!(at("p.name", PredOp::LenEq(2)));
        assert!(at("p.age", PredOp::Ge(Value::Int(30))));
        assert!(!at("p.age", PredOp::Ge(Value::Int(31))));
        // Another kind than the operand: no match (int 30 vs float 30.0).
        assert!(!at("p.age", PredOp::Eq(Value::Float(30.0))));
        assert!(at("p.h", PredOp::Lt(Value::Float(2.0))));
        assert!(at("p.tags", PredOp::Contains(Value::str("b"))));
        assert!(at("p.tags", PredOp::LenEq(2)));
        assert!(at("p.tags[1]", PredOp::Eq(Value::str("b"))));
        // A whole sub-document compares by its canonical form.
        assert!(at(
            "p.sub",
            PredOp::Eq(Value::Document(r#"{ "x": [1], "y": 1 }"#.into()))
        ));
        assert!(at("t", PredOp::Eq(Value::Document("true".into()))));
        // A whole document attribute compares as JSON too, whatever its
        // spacing and key order.
        let whole = |op: PredOp| Check::new(1, op).matches(&obj(d.clone()));
        assert!(whole(PredOp::Eq(Value::Document(
            r#"{"t":true,"p":{"sub":{"x":[1],"y":1},"tags":["a","b"],"h":1.5,"age":30,"name":"Jo"}}"#.into()
        ))));
        assert!(!whole(PredOp::Eq(Value::Document(r#"{"t": true}"#.into()))));
        // Missing paths and paths through non-objects match nothing.
        assert!(!at("p.nope", PredOp::Eq(Value::str("Jo"))));
        assert!(!at("p.name.x", PredOp::Eq(Value::str("Jo"))));
        assert!(!at("p.tags[9]", PredOp::Eq(Value::str("a"))));
        // A path on a non-document value matches nothing.
        assert!(!Check::at_path(1, "a", PredOp::Eq(Value::Int(1))).matches(&obj(Value::Int(1))));
        // Paths never prune a search.
        let c = Check::at_path(1, "p.age", PredOp::Eq(Value::Int(1)));
        assert_eq!(coordinate_interval(&c, DataType::Document), None);
    }

    #[test]
    fn container_predicates() {
        let list = Value::List(vec![Value::Int(3), Value::Int(1), Value::Int(3)]);
        assert!(holds(PredOp::LenEq(3), list.clone()));
        assert!(holds(PredOp::LenLe(3), list.clone()));
        assert!(!holds(PredOp::LenLe(2), list.clone()));
        assert!(holds(PredOp::LenGe(3), list.clone()));
        assert!(!holds(PredOp::LenGe(4), list.clone()));
        assert!(holds(PredOp::Contains(Value::Int(1)), list.clone()));
        assert!(!holds(PredOp::Contains(Value::Int(2)), list.clone()));
        assert!(!holds(PredOp::Contains(Value::Float(1.0)), list.clone()));
        assert!(holds(PredOp::Eq(list.clone()), list.clone()));
        // List equality is ordered.
        assert!(!holds(
            PredOp::Eq(Value::List(vec![
                Value::Int(1),
                Value::Int(3),
                Value::Int(3)
            ])),
            list.clone()
        ));

        let set = Value::Set(vec![Value::str("a"), Value::str("b")]);
        assert!(holds(PredOp::Contains(Value::str("b")), set.clone()));
        assert!(holds(PredOp::LenEq(2), set.clone()));
        // Set equality ignores the operand's order and duplicates.
        let shuffled = Value::Set(vec![Value::str("b"), Value::str("a"), Value::str("b")]);
        assert!(holds(PredOp::Eq(shuffled), set.clone()));
        assert!(!holds(
            PredOp::Eq(Value::Set(vec![Value::str("a")])),
            set.clone()
        ));
        assert!(!holds(
            PredOp::Eq(Value::List(vec![Value::str("a"), Value::str("b")])),
            set
        ));

        let map = Value::Map(vec![
            (Value::str("x"), Value::Int(1)),
            (Value::str("y"), Value::Int(2)),
        ]);
        assert!(holds(PredOp::Contains(Value::str("y")), map.clone()));
        assert!(!holds(PredOp::Contains(Value::Int(2)), map.clone()));
        assert!(holds(PredOp::LenEq(2), map.clone()));
        let reordered = Value::Map(vec![
            (Value::str("y"), Value::Int(2)),
            (Value::str("x"), Value::Int(1)),
        ]);
        assert!(holds(PredOp::Eq(reordered), map.clone()));
        let other = Value::Map(vec![
            (Value::str("x"), Value::Int(1)),
            (Value::str("y"), Value::Int(3)),
        ]);
        assert!(!holds(PredOp::Eq(other), map));

        // Strings: length in bytes, regex.
        assert!(holds(
            PredOp::LenEq(3),
            Value::String(vec![0xe2, 0x82, 0xac])
        ));
        assert!(holds(PredOp::Regex("^ab".into()), Value::str("abc")));
        assert!(!holds(PredOp::Regex("^ab".into()), Value::Int(1)));
        assert!(!holds(PredOp::LenEq(8), Value::Int(1)));
        assert!(!holds(PredOp::Contains(Value::str("a")), Value::str("a")));
        let doc = Value::Document("{\"a\":1}".into());
        assert!(holds(PredOp::Eq(doc.clone()), doc));
    }

    fn desc() -> SpaceDesc {
        let attr = |name: &str, dtype| Attribute {
            name: name.into(),
            dtype,
        };
        SpaceDesc {
            name: "t".into(),
            attrs: vec![
                attr("k", DataType::String),
                attr("i", DataType::Int),
                attr("f", DataType::Float),
                attr("t", DataType::Timestamp(TimeUnit::Day)),
                attr("l", DataType::List(Prim::Int)),
                attr("s", DataType::Set(Prim::String)),
                attr("m", DataType::Map(Prim::String, Prim::Float)),
                attr("d", DataType::Document),
            ],
            subspaces: vec![],
            indexes: vec![],
            fault_tolerance: 1,
            partitions: 4,
            authorization: false,
            global_indexes: Vec::new(),
            replex: None,
        }
    }

    #[test]
    fn validate_check_table() {
        let d = desc();
        let ok = |attr: usize, op: PredOp| validate_check(&d, &Check::new(attr, op));
        let status = |attr: usize, op: PredOp| ok(attr, op).unwrap_err().status_name();
        assert_eq!(status(8, PredOp::LenEq(1)), "UNKNOWNATTR");
        assert!(ok(0, PredOp::Eq(Value::str("a"))).is_ok());
        assert!(ok(0, PredOp::Lt(Value::str("a"))).is_ok());
        assert!(ok(0, PredOp::Regex("a".into())).is_ok());
        assert!(ok(0, PredOp::LenGe(1)).is_ok());
        assert_eq!(status(0, PredOp::Contains(Value::str("a"))), "WRONGTYPE");
        assert_eq!(status(0, PredOp::Eq(Value::Int(1))), "WRONGTYPE");
        assert!(ok(1, PredOp::Ge(Value::Int(1))).is_ok());
        assert_eq!(status(1, PredOp::Ge(Value::Float(1.0))), "WRONGTYPE");
        assert_eq!(status(1, PredOp::Regex("1".into())), "WRONGTYPE");
        assert_eq!(status(1, PredOp::LenEq(1)), "WRONGTYPE");
        assert!(ok(2, PredOp::Eq(Value::Float(1.0))).is_ok());
        // An int literal against a float attribute is WRONGTYPE.
        assert_eq!(status(2, PredOp::Eq(Value::Int(1))), "WRONGTYPE");
        assert_eq!(status(2, PredOp::Lt(Value::Int(1))), "WRONGTYPE");
        assert!(ok(3, PredOp::Lt(Value::Timestamp(1))).is_ok());
        assert_eq!(status(3, PredOp::Lt(Value::Int(1))), "WRONGTYPE");
        assert!(ok(4, PredOp::Contains(Value::Int(1))).is_ok());
        assert_eq!(status(4, PredOp::Contains(Value::str("1"))), "WRONGTYPE");
        assert!(ok(4, PredOp::Eq(Value::List(vec![Value::Int(1)]))).is_ok());
        assert!(ok(4, PredOp::Eq(Value::List(vec![]))).is_ok());
        assert_eq!(
            status(4, PredOp::Eq(Value::List(vec![Value::Float(1.0)]))),
            "WRONGTYPE"
        );
        assert_eq!(
            status(4, PredOp::Eq(Value::Set(vec![Value::Int(1)]))),
            "WRONGTYPE"
        );
        assert_eq!(status(4, PredOp::Lt(Value::List(vec![]))), "WRONGTYPE");
        assert!(ok(4, PredOp::LenLe(2)).is_ok());
        assert_eq!(status(4, PredOp::Regex("x".into())), "WRONGTYPE");
        assert!(ok(5, PredOp::Eq(Value::Set(vec![Value::str("a")]))).is_ok());
        assert!(ok(5, PredOp::Contains(Value::str("a"))).is_ok());
        assert!(ok(6, PredOp::Contains(Value::str("a"))).is_ok());
        assert_eq!(status(6, PredOp::Contains(Value::Float(1.0))), "WRONGTYPE");
        assert!(ok(
            6,
            PredOp::Eq(Value::Map(vec![(Value::str("a"), Value::Float(1.0))]))
        )
        .is_ok());
        assert_eq!(
            status(
                6,
                PredOp::Eq(Value::Map(vec![(Value::str("a"), Value::Int(1))]))
            ),
            "WRONGTYPE"
        );
        assert!(ok(7, PredOp::Eq(Value::Document("{}".into()))).is_ok());
        assert_eq!(
            status(7, PredOp::Lt(Value::Document("{}".into()))),
            "WRONGTYPE"
        );
        assert_eq!(status(7, PredOp::LenEq(0)), "WRONGTYPE");
        assert_eq!(status(7, PredOp::Contains(Value::str("a"))), "WRONGTYPE");
        // Document paths: any operator, scalar operands (documents for eq).
        let path = |attr: usize, path: &str, op: PredOp| {
            validate_check(&d, &Check::at_path(attr, path, op))
        };
        assert!(path(7, "a.b", PredOp::Lt(Value::Int(1))).is_ok());
        assert!(path(7, "a[0]", PredOp::Regex("x".into())).is_ok());
        assert!(path(7, "a", PredOp::Contains(Value::str("x"))).is_ok());
        assert!(path(7, "a", PredOp::Eq(Value::Document("{}".into()))).is_ok());
        let status = |r: Result<(), CheckError>| r.unwrap_err().status_name();
        assert_eq!(
            status(path(7, "a", PredOp::Lt(Value::Document("{}".into())))),
            "WRONGTYPE"
        );
        assert_eq!(
            status(path(7, "a", PredOp::Eq(Value::List(vec![])))),
            "WRONGTYPE"
        );
        assert_eq!(
            status(path(7, "a..b", PredOp::Eq(Value::Int(1)))),
            "WRONGTYPE"
        );
        assert_eq!(status(path(1, "a", PredOp::Eq(Value::Int(1)))), "WRONGTYPE");
        let msg = ok(2, PredOp::Lt(Value::Int(1))).unwrap_err().to_string();
        assert!(
            msg.contains("`f`") && msg.contains("float") && msg.contains("int"),
            "{msg}"
        );
    }
}
