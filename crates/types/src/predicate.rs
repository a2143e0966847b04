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

use crate::coordinate::{coordinate, float_coordinate, int_coordinate};
use crate::schema::SpaceDesc;
use crate::value::{DataType, Object, Prim, Value};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

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
        match (&self.path, object.values.get(self.attr)) {
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

/// One element of a compiled pattern.
#[derive(Clone, Copy, Debug)]
enum Atom {
    /// `.`: any byte.
    Any,
    Byte(u8),
}

/// Whether `pattern` (API.md §6.3) matches somewhere in `text`.
///
/// The dialect: literal bytes; `.` any byte; `c*` zero or more of the single
/// preceding byte or `.`; `^` as the first byte anchors at the start; `$` as
/// the last byte anchors at the end; `\x` is the byte `x` literally. Without
/// `^` a match may start anywhere; an empty pattern matches everything.
/// Nothing is an error: `^` elsewhere, `$` elsewhere, a `*` with nothing
/// before it, and a trailing lone `\` are literal bytes, and `**` is the same
/// as `*`.
///
/// Runs in `O(len(text) · len(pattern))` by simulating the pattern's
/// automaton on a set of states (no backtracking).
pub fn regex_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (anchored_start, anchored_end, items) = compile_regex(pattern);
    let m = items.len();
    // active[i]: the first i items have matched the text read so far.
    let mut active = vec![false; m + 1];
    let closure = |set: &mut Vec<bool>| {
        // A starred item may match zero times: state i reaches i + 1.
        for i in 0..m {
            if set[i] && items[i].1 {
                set[i + 1] = true;
            }
        }
    };
    active[0] = true;
    closure(&mut active);
    for (pos, &b) in text.iter().enumerate() {
        if active[m] && !anchored_end {
            return true;
        }
        let mut next = vec![false; m + 1];
        for i in 0..m {
            if !active[i] {
                continue;
            }
            let (atom, star) = items[i];
            let hit = match atom {
                Atom::Any => true,
                Atom::Byte(c) => c == b,
            };
            if hit {
                next[if star { i } else { i + 1 }] = true;
            }
        }
        if !anchored_start {
            // An unanchored match may begin after this byte.
            next[0] = true;
        }
        closure(&mut next);
        active = next;
        if pos + 1 == text.len() {
            break;
        }
    }
    active[m]
}

/// Splits a pattern into its anchors and `(atom, starred)` items.
fn compile_regex(pattern: &[u8]) -> (bool, bool, Vec<(Atom, bool)>) {
    let mut body = pattern;
    let anchored_start = body.first() == Some(&b'^');
    if anchored_start {
        body = &body[1..];
    }
    // A final `$` anchors unless it is escaped (an odd run of `\` before it).
    let mut anchored_end = false;
    if body.last() == Some(&b'$') {
        let backslashes = body[..body.len() - 1]
            .iter()
            .rev()
            .take_while(|&&c| c == b'\\')
            .count();
        if backslashes % 2 == 0 {
            anchored_end = true;
            body = &body[..body.len() - 1];
        }
    }
    let mut items: Vec<(Atom, bool)> = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        match c {
            b'\\' if i + 1 < body.len() => {
                items.push((Atom::Byte(body[i + 1]), false));
                i += 2;
                continue;
            }
            b'*' => match items.last_mut() {
                Some(last) => last.1 = true,
                None => items.push((Atom::Byte(b'*'), false)),
            },
            b'.' => items.push((Atom::Any, false)),
            _ => items.push((Atom::Byte(c), false)),
        }
        i += 1;
    }
    (anchored_start, anchored_end, items)
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

/// A short description of a value's kind, with container element kinds
/// (`list(int)`), for error messages.
fn describe_kind(value: &Value) -> String {
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
fn is_scalar_of(dtype: DataType, value: &Value) -> bool {
    matches!(
        (dtype, value),
        (DataType::String, Value::String(_))
            | (DataType::Int, Value::Int(_))
            | (DataType::Float, Value::Float(_))
            | (DataType::Timestamp(_), Value::Timestamp(_))
    )
}

fn is_prim(p: Prim, value: &Value) -> bool {
    is_scalar_of(p.data_type(), value)
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
    use crate::value::TimeUnit;
    use proptest::prelude::*;

    fn obj(v: Value) -> Object {
        Object {
            values: vec![Value::str("key"), v],
        }
    }

    fn holds(op: PredOp, v: Value) -> bool {
        Check::new(1, op).matches(&obj(v))
    }

    #[test]
    fn regex_dialect_table() {
        // (pattern, text, expected) — from the dialect's definition.
        let table: &[(&str, &str, bool)] = &[
            ("", "", true),
            ("", "anything", true),
            ("abc", "abc", true),
            ("abc", "xxabcxx", true),
            ("abc", "ab", false),
            ("abc", "acb", false),
            ("^ab", "abc", true),
            ("^ab", "cab", false),
            ("bc$", "abc", true),
            ("bc$", "abcd", false),
            ("^abc$", "abc", true),
            ("^abc$", "abcc", false),
            ("^$", "", true),
            ("^$", "a", false),
            ("$", "abc", true),
            ("^", "", true),
            ("a.c", "abc", true),
            ("a.c", "ac", false),
            ("a.c", "a\nc", true),
            ("ab*c", "ac", true),
            ("ab*c", "abbbbc", true),
            ("ab*c", "abxc", false),
            ("^a.*z$", "a123z", true),
            ("^a.*z$", "a123zq", false),
            ("^a*$", "", true),
            ("^a*$", "aaab", false),
            ("a\\.c", "a.c", true),
            ("a\\.c", "abc", false),
            ("a\\*", "a*", true),
            ("a\\*", "aaa", false),
            ("\\^a", "b^a", true),
            ("a^", "ba^", true),
            ("a$b", "a$b", true),
            ("a\\$", "a$", true),
            ("a\\$", "a", false),
            ("a\\\\$", "a\\", true),
            ("*a", "*a", true),
            ("*a", "a", false),
            ("x\\", "x\\", true),
            ("a**", "", true),
            ("^.*$", "anything", true),
            ("^.", "", false),
            ("b*", "", true),
            ("^ab*$", "a", true),
            ("a+", "aa", false),
            ("a+", "a+", true),
            ("[a]", "a", false),
            ("[a]", "[a]", true),
            ("aab", "aaab", true),
            (
                "^.*.*.*.*b$",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac",
                false,
            ),
        ];
        for (pattern, text, expected) in table {
            assert_eq!(
                regex_matches(pattern.as_bytes(), text.as_bytes()),
                *expected,
                "pattern {pattern:?} on {text:?}"
            );
        }
        assert!(regex_matches(b"a.b", b"a\x00b"));
        assert!(regex_matches(b"\xff", b"x\xffy"));
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

    /// A brute-force reference for the dialect: backtracking over the
    /// compiled items at every start position.
    fn reference_match(pattern: &[u8], text: &[u8]) -> bool {
        fn here(items: &[(Atom, bool)], text: &[u8], end: bool) -> bool {
            match items.split_first() {
                None => !end || text.is_empty(),
                Some((&(atom, star), rest)) => {
                    let hit = |b: u8| match atom {
                        Atom::Any => true,
                        Atom::Byte(c) => c == b,
                    };
                    if star {
                        let mut i = 0;
                        loop {
                            if here(rest, &text[i..], end) {
                                return true;
                            }
                            if i < text.len() && hit(text[i]) {
                                i += 1;
                            } else {
                                return false;
                            }
                        }
                    } else {
                        !text.is_empty() && hit(text[0]) && here(rest, &text[1..], end)
                    }
                }
            }
        }
        let (start, end, items) = compile_regex(pattern);
        if start {
            return here(&items, text, end);
        }
        (0..=text.len()).any(|i| here(&items, &text[i..], end))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn regex_agrees_with_backtracking_reference(
            pattern in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'.'), Just(b'*'), Just(b'^'), Just(b'$'), Just(b'\\')], 0..7),
            text in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'*'), Just(b'$')], 0..8),
        ) {
            prop_assert_eq!(regex_matches(&pattern, &text), reference_match(&pattern, &text));
        }

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
