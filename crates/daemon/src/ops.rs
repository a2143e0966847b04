//! The pure per-type mutation logic of API.md §3.6 and §9: what one
//! [`Action`] does to one attribute's value (or to one field of a document
//! attribute). No I/O; the point leader runs it once per update and
//! replicates the resulting object.
//!
//! Failures are of two kinds:
//!
//! - the operation does not fit the attribute's type, or the operand does
//!   not fit (a client that validates never sends these): WRONGTYPE;
//! - the operation fits but cannot be applied to *this* value — integer
//!   overflow, division or remainder by zero, a document path through a
//!   non-object, a missing field to rename or unset, a non-numeric field
//!   under an atomic: CMPFAIL, with its [`CmpFailKind`].
//!
//! Both are an [`UpdateRefused`], the one error of evaluating an update.
//!
//! Either way nothing changes: the caller applies every mutation of an
//! update to a copy and keeps it only when all succeed.

use tessera_protocol::{Action, CmpFailKind, DaemonResponse, NumOp, Status};
use tessera_types::coerce::{canonicalize, coerce_value};
use tessera_types::value::json::{Map as JsonMap, Number, Value as Json};
use tessera_types::value::{parse_doc_path, value_to_json, PathStep};
use tessera_types::{DataType, Prim, Value};

/// Why an update was not applied, as the client will hear it. Nothing
/// changed; the point leader answers it and remembers it for retries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpdateRefused {
    /// The update needs an existing object and no object has the key
    /// (NOTFOUND).
    #[error("no object has this key")]
    NotFound,
    /// A predicate failed, the object exists (put_if_not_exist), or a
    /// mutation fits the types but not this value (CMPFAIL).
    #[error("{reason}")]
    CmpFail {
        /// Why, for the client's code.
        kind: CmpFailKind,
        /// Why, for people: names the attribute, path or map key.
        reason: String,
    },
    /// The key, an operation or an operand does not fit the type it
    /// addresses (WRONGTYPE); a client that validates never sends these.
    #[error("{0}")]
    WrongType(String),
    /// A mutation names the key attribute (DONTUSEKEY).
    #[error("an update cannot change the key")]
    ChangesKey,
    /// A mutation names an attribute the space does not have, by index
    /// (UNKNOWNATTR).
    #[error("attribute #{0} does not exist")]
    UnknownAttr(usize),
}

impl UpdateRefused {
    /// The HyperDex status the client hears.
    pub fn status(&self) -> Status {
        match self {
            UpdateRefused::NotFound => Status::NotFound,
            UpdateRefused::CmpFail { .. } => Status::CmpFail,
            UpdateRefused::WrongType(_) => Status::WrongType,
            UpdateRefused::ChangesKey => Status::DontUseKey,
            UpdateRefused::UnknownAttr(_) => Status::UnknownAttr,
        }
    }

    /// The same refusal with its explanation rewritten by `f` (to say which
    /// attribute or map key it concerns); the variants whose text is fixed
    /// stay as they are.
    pub fn reworded(self, f: impl FnOnce(String) -> String) -> UpdateRefused {
        match self {
            UpdateRefused::CmpFail { kind, reason } => UpdateRefused::CmpFail {
                kind,
                reason: f(reason),
            },
            UpdateRefused::WrongType(reason) => UpdateRefused::WrongType(f(reason)),
            fixed => fixed,
        }
    }
}

impl From<UpdateRefused> for DaemonResponse {
    fn from(refused: UpdateRefused) -> DaemonResponse {
        match refused {
            UpdateRefused::CmpFail { kind, reason } => DaemonResponse::CmpFail { kind, reason },
            other => DaemonResponse::Failed {
                status: other.status(),
                reason: other.to_string(),
            },
        }
    }
}

fn cmpfail(kind: CmpFailKind, text: impl Into<String>) -> UpdateRefused {
    UpdateRefused::CmpFail {
        kind,
        reason: text.into(),
    }
}

fn wrong_type(text: impl Into<String>) -> UpdateRefused {
    UpdateRefused::WrongType(text.into())
}

/// `op` on two ints, checked: overflow (including `i64::MIN / -1`) and a
/// zero divisor fail. `i64::MIN % -1` is 0 (no overflow in the remainder).
pub fn int_op(op: NumOp, a: i64, b: i64) -> Result<i64, UpdateRefused> {
    let overflow = || {
        cmpfail(
            CmpFailKind::Overflow,
            format!("{a} {} {b} overflows int", op.name()),
        )
    };
    let by_zero = || {
        cmpfail(
            CmpFailKind::DivideByZero,
            format!("{a} {} 0 divides by zero", op.name()),
        )
    };
    match op {
        NumOp::Add => a.checked_add(b).ok_or_else(overflow),
        NumOp::Sub => a.checked_sub(b).ok_or_else(overflow),
        NumOp::Mul => a.checked_mul(b).ok_or_else(overflow),
        NumOp::Div if b == 0 => Err(by_zero()),
        NumOp::Div => a.checked_div(b).ok_or_else(overflow),
        NumOp::Mod if b == 0 => Err(by_zero()),
        NumOp::Mod => Ok(a.wrapping_rem(b)),
        NumOp::And => Ok(a & b),
        NumOp::Or => Ok(a | b),
        NumOp::Xor => Ok(a ^ b),
        NumOp::Min => Ok(a.min(b)),
        NumOp::Max => Ok(a.max(b)),
    }
}

/// `op` on two floats, IEEE (÷0 gives ±inf or NaN, no error). `min`/`max`
/// of a NaN and a number give the number. `mod` and bitwise ops are
/// WRONGTYPE.
pub fn float_op(op: NumOp, a: f64, b: f64) -> Result<f64, UpdateRefused> {
    match op {
        NumOp::Add => Ok(a + b),
        NumOp::Sub => Ok(a - b),
        NumOp::Mul => Ok(a * b),
        NumOp::Div => Ok(a / b),
        NumOp::Min => Ok(a.min(b)),
        NumOp::Max => Ok(a.max(b)),
        NumOp::Mod | NumOp::And | NumOp::Or | NumOp::Xor => Err(wrong_type(format!(
            "atomic {} does not apply to floats",
            op.name()
        ))),
    }
}

/// A numeric atomic on a value of the scalar type `dtype` (int or float);
/// the operand is coerced to it (a float rounds for an int).
fn num_value(
    dtype: DataType,
    current: &Value,
    op: NumOp,
    operand: &Value,
) -> Result<Value, UpdateRefused> {
    let operand = coerce_value(dtype, operand.clone())
        .map_err(|e| wrong_type(format!("operand of atomic {}: {e}", op.name())))?;
    match (current, operand) {
        (Value::Int(a), Value::Int(b)) => int_op(op, *a, b).map(Value::Int),
        (Value::Float(a), Value::Float(b)) => float_op(op, *a, b).map(Value::Float),
        (current, _) => Err(wrong_type(format!(
            "atomic {} does not apply to a {} value",
            op.name(),
            current.kind()
        ))),
    }
}

fn string_bytes<'v>(value: &'v Value, what: &str) -> Result<&'v [u8], UpdateRefused> {
    match value {
        Value::String(b) => Ok(b),
        other => Err(wrong_type(format!(
            "{what} needs a string, not a {}",
            other.kind()
        ))),
    }
}

/// Applies `action` to `current`, the value of an attribute of type
/// `dtype`, or — with `path` — to the field at `path` inside the document
/// `current`. Returns the new value of the attribute.
pub fn apply(
    dtype: DataType,
    current: &Value,
    path: Option<&str>,
    action: &Action,
) -> Result<Value, UpdateRefused> {
    if let Some(path) = path {
        return apply_at_path(dtype, current, path, action);
    }
    let elem = |p: Prim, v: &Value| {
        coerce_value(p.data_type(), v.clone())
            .map_err(|e| wrong_type(format!("element of {dtype}: {e}")))
    };
    let unsupported = || {
        wrong_type(format!(
            "{} does not apply to an attribute of type {dtype}",
            action_name(action)
        ))
    };
    match (action, dtype, current) {
        (Action::Set(v), _, _) => {
            coerce_value(dtype, v.clone()).map_err(|e| wrong_type(format!("{dtype}: {e}")))
        }
        (Action::Num(op, operand), DataType::Int | DataType::Float, _) => {
            num_value(dtype, current, *op, operand)
        }
        (Action::StringPrepend(b), DataType::String, Value::String(s)) => {
            Ok(Value::String([b.as_slice(), s].concat()))
        }
        (Action::StringAppend(b), DataType::String, Value::String(s)) => {
            Ok(Value::String([s.as_slice(), b].concat()))
        }
        (Action::StringLtrim(n), DataType::String, Value::String(s)) => {
            let n = clamp(*n, s.len());
            Ok(Value::String(s[n..].to_vec()))
        }
        (Action::StringRtrim(n), DataType::String, Value::String(s)) => {
            let n = clamp(*n, s.len());
            Ok(Value::String(s[..s.len() - n].to_vec()))
        }
        (Action::ListLpush(v), DataType::List(p), Value::List(items)) => {
            let mut out = Vec::with_capacity(items.len() + 1);
            out.push(elem(p, v)?);
            out.extend(items.iter().cloned());
            Ok(Value::List(out))
        }
        (Action::ListRpush(v), DataType::List(p), Value::List(items)) => {
            let mut out = items.clone();
            out.push(elem(p, v)?);
            Ok(Value::List(out))
        }
        (Action::SetAdd(v), DataType::Set(p), Value::Set(items)) => {
            let mut out = items.clone();
            out.push(elem(p, v)?);
            Ok(canonicalize(Value::Set(out)))
        }
        (Action::SetRemove(v), DataType::Set(p), Value::Set(items)) => {
            let v = elem(p, v)?;
            Ok(Value::Set(
                items.iter().filter(|x| **x != v).cloned().collect(),
            ))
        }
        (Action::SetUnion(vs), DataType::Set(p), Value::Set(items)) => {
            let mut out = items.clone();
            for v in vs {
                out.push(elem(p, v)?);
            }
            Ok(canonicalize(Value::Set(out)))
        }
        (Action::SetIntersect(vs), DataType::Set(p), Value::Set(items)) => {
            let others = vs
                .iter()
                .map(|v| elem(p, v))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Set(
                items
                    .iter()
                    .filter(|x| others.contains(x))
                    .cloned()
                    .collect(),
            ))
        }
        (Action::MapAdd(k, v), DataType::Map(kp, vp), Value::Map(entries)) => {
            let mut out = entries.clone();
            out.push((elem(kp, k)?, elem(vp, v)?));
            Ok(canonicalize(Value::Map(out)))
        }
        (Action::MapRemove(k), DataType::Map(kp, _), Value::Map(entries)) => {
            let k = elem(kp, k)?;
            Ok(Value::Map(
                entries.iter().filter(|(x, _)| *x != k).cloned().collect(),
            ))
        }
        (Action::MapNum(k, op, operand), DataType::Map(kp, vp), Value::Map(entries)) => {
            if vp == Prim::String {
                return Err(unsupported());
            }
            let k = elem(kp, k)?;
            let old = entries
                .iter()
                .find(|(x, _)| *x == k)
                .map_or_else(|| vp.data_type().default_value(), |(_, v)| v.clone());
            let new = num_value(vp.data_type(), &old, *op, operand).map_err(|r| in_map(r, &k))?;
            map_put(entries, k, new)
        }
        (
            Action::MapStringPrepend(k, b) | Action::MapStringAppend(k, b),
            DataType::Map(kp, Prim::String),
            Value::Map(entries),
        ) => {
            let k = elem(kp, k)?;
            let old = entries
                .iter()
                .find(|(x, _)| *x == k)
                .map_or(Ok(&[][..]), |(_, v)| string_bytes(v, "a map string op"))?;
            let new = if matches!(action, Action::MapStringPrepend(..)) {
                [b.as_slice(), old].concat()
            } else {
                [old, b.as_slice()].concat()
            };
            map_put(entries, k, Value::String(new))
        }
        (Action::DocRename(_) | Action::DocUnset, DataType::Document, _) => Err(wrong_type(
            format!("{} needs a path inside the document", action_name(action)),
        )),
        _ => Err(unsupported()),
    }
}

fn in_map(refused: UpdateRefused, key: &Value) -> UpdateRefused {
    refused.reworded(|reason| format!("{reason} (map key {key:?})"))
}

fn map_put(entries: &[(Value, Value)], k: Value, v: Value) -> Result<Value, UpdateRefused> {
    let mut out = entries.to_vec();
    out.push((k, v));
    Ok(canonicalize(Value::Map(out)))
}

fn clamp(n: u64, len: usize) -> usize {
    usize::try_from(n).map_or(len, |n| n.min(len))
}

/// The operation's name as the API spells it, for messages.
pub fn action_name(action: &Action) -> String {
    match action {
        Action::Set(_) => "put".into(),
        Action::Num(op, _) => format!("atomic_{}", op.name()),
        Action::StringPrepend(_) => "string_prepend".into(),
        Action::StringAppend(_) => "string_append".into(),
        Action::StringLtrim(_) => "string_ltrim".into(),
        Action::StringRtrim(_) => "string_rtrim".into(),
        Action::ListLpush(_) => "list_lpush".into(),
        Action::ListRpush(_) => "list_rpush".into(),
        Action::SetAdd(_) => "set_add".into(),
        Action::SetRemove(_) => "set_remove".into(),
        Action::SetUnion(_) => "set_union".into(),
        Action::SetIntersect(_) => "set_intersect".into(),
        Action::MapAdd(..) => "map_add".into(),
        Action::MapRemove(_) => "map_remove".into(),
        Action::MapNum(_, op, _) => format!("map_atomic_{}", op.name()),
        Action::MapStringPrepend(..) => "map_string_prepend".into(),
        Action::MapStringAppend(..) => "map_string_append".into(),
        Action::DocRename(_) => "document_rename".into(),
        Action::DocUnset => "document_unset".into(),
    }
}

// ------------------------------------------------------------ documents

fn bad_path(path: &str, text: impl std::fmt::Display) -> UpdateRefused {
    cmpfail(CmpFailKind::BadPath, format!("path {path:?}: {text}"))
}

/// Whether `action` may address a field inside a document (API.md §9,
/// document row): put, numeric atomics, prepend/append, list pushes,
/// rename and unset.
pub fn applies_at_path(action: &Action) -> bool {
    matches!(
        action,
        Action::Set(_)
            | Action::Num(..)
            | Action::StringPrepend(_)
            | Action::StringAppend(_)
            | Action::ListLpush(_)
            | Action::ListRpush(_)
            | Action::DocRename(_)
            | Action::DocUnset
    )
}

fn apply_at_path(
    dtype: DataType,
    current: &Value,
    path: &str,
    action: &Action,
) -> Result<Value, UpdateRefused> {
    if dtype != DataType::Document {
        return Err(wrong_type(format!(
            "a path ({path:?}) needs a document attribute, not {dtype}"
        )));
    }
    if !applies_at_path(action) {
        return Err(wrong_type(format!(
            "{} does not apply inside a document",
            action_name(action)
        )));
    }
    let steps = parse_doc_path(path).map_err(wrong_type)?;
    let Value::Document(text) = current else {
        return Err(wrong_type(format!(
            "a document attribute holds a {}",
            current.kind()
        )));
    };
    let mut root: Json = tessera_types::value::json::from_str(text).map_err(|e| {
        cmpfail(
            CmpFailKind::Other,
            format!("the stored document is not JSON: {e}"),
        )
    })?;
    let to_json = |v: &Value| {
        value_to_json(v).ok_or_else(|| {
            wrong_type(format!(
                "a {} value cannot be written into a document (strings must be UTF-8, floats finite)",
                v.kind()
            ))
        })
    };
    match action {
        Action::Set(v) => {
            let v = to_json(v)?;
            *slot(&mut root, &steps, path)? = v;
        }
        Action::Num(op, operand) => {
            let operand = match operand {
                Value::Int(_) | Value::Float(_) => operand,
                other => {
                    return Err(wrong_type(format!(
                        "operand of atomic {} must be a number, not a {}",
                        op.name(),
                        other.kind()
                    )))
                }
            };
            let field = slot(&mut root, &steps, path)?;
            let old = match &*field {
                Json::Null => Value::Int(0),
                Json::Number(n) => match n.as_i64() {
                    Some(i) => Value::Int(i),
                    None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
                },
                other => {
                    return Err(cmpfail(
                        CmpFailKind::FieldType,
                        format!("path {path:?} holds {}, not a number", json_kind(other)),
                    ))
                }
            };
            let new = match (old, operand) {
                (Value::Int(a), Value::Int(b)) => Json::from(int_op(*op, a, *b)?),
                (a, b) => {
                    if !op.applies_to_float() {
                        return Err(cmpfail(
                            CmpFailKind::FieldType,
                            format!("atomic {} on path {path:?} needs integers", op.name()),
                        ));
                    }
                    let f = |v: &Value| match v {
                        Value::Int(i) => *i as f64,
                        Value::Float(f) => *f,
                        _ => f64::NAN,
                    };
                    let r = float_op(*op, f(&a), f(b))?;
                    Json::Number(Number::from_f64(r).ok_or_else(|| {
                        cmpfail(
                            CmpFailKind::NotFinite,
                            format!("atomic {} on path {path:?} gives {r}", op.name()),
                        )
                    })?)
                }
            };
            *field = new;
        }
        Action::StringPrepend(b) | Action::StringAppend(b) => {
            let add = std::str::from_utf8(b)
                .map_err(|_| wrong_type("a string written into a document must be UTF-8"))?;
            let field = slot(&mut root, &steps, path)?;
            let old = match &*field {
                Json::Null => String::new(),
                Json::String(s) => s.clone(),
                other => {
                    return Err(cmpfail(
                        CmpFailKind::FieldType,
                        format!("path {path:?} holds {}, not a string", json_kind(other)),
                    ))
                }
            };
            *field = Json::String(if matches!(action, Action::StringPrepend(_)) {
                format!("{add}{old}")
            } else {
                format!("{old}{add}")
            });
        }
        Action::ListLpush(v) | Action::ListRpush(v) => {
            let v = to_json(v)?;
            let field = existing_mut(&mut root, &steps)
                .ok_or_else(|| bad_path(path, "no array there to push onto"))?;
            let Json::Array(items) = field else {
                return Err(cmpfail(
                    CmpFailKind::FieldType,
                    format!("path {path:?} holds {}, not an array", json_kind(field)),
                ));
            };
            if matches!(action, Action::ListLpush(_)) {
                items.insert(0, v);
            } else {
                items.push(v);
            }
        }
        Action::DocRename(to) => {
            let to_steps = parse_doc_path(to).map_err(wrong_type)?;
            let moved = remove(&mut root, &steps)
                .ok_or_else(|| bad_path(path, "nothing there to rename"))?;
            *slot(&mut root, &to_steps, to)? = moved;
        }
        Action::DocUnset => {
            remove(&mut root, &steps).ok_or_else(|| bad_path(path, "nothing there to unset"))?;
        }
        _ => unreachable!("applies_at_path checked the action"),
    }
    Ok(Value::Document(root.to_string()))
}

fn json_kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// The field at `steps`, creating missing object fields on the way (and
/// the last one, as `null`, which callers treat as "absent"). Fails when
/// the path runs through a non-object, or an index is not an element of an
/// array.
fn slot<'a>(
    root: &'a mut Json,
    steps: &[PathStep],
    path: &str,
) -> Result<&'a mut Json, UpdateRefused> {
    let mut node = root;
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        node = match step {
            PathStep::Field(name) => {
                let Json::Object(map) = node else {
                    return Err(bad_path(
                        path,
                        format!("field {name:?} inside {}, not an object", json_kind(node)),
                    ));
                };
                map.entry(name.clone()).or_insert_with(|| {
                    if last {
                        Json::Null
                    } else {
                        Json::Object(JsonMap::new())
                    }
                })
            }
            PathStep::Index(index) => {
                let Json::Array(items) = node else {
                    return Err(bad_path(
                        path,
                        format!("index [{index}] inside {}, not an array", json_kind(node)),
                    ));
                };
                let len = items.len();
                items.get_mut(*index).ok_or_else(|| {
                    bad_path(path, format!("index [{index}] beyond an array of {len}"))
                })?
            }
        };
    }
    Ok(node)
}

/// The existing field at `steps`, if any.
fn existing_mut<'a>(root: &'a mut Json, steps: &[PathStep]) -> Option<&'a mut Json> {
    steps.iter().try_fold(root, |node, step| match step {
        PathStep::Field(name) => node.as_object_mut()?.get_mut(name),
        PathStep::Index(i) => node.as_array_mut()?.get_mut(*i),
    })
}

/// Removes and returns the field (or array element) at `steps`.
fn remove(root: &mut Json, steps: &[PathStep]) -> Option<Json> {
    let (last, parents) = steps.split_last()?;
    let parent = existing_mut(root, parents)?;
    match last {
        PathStep::Field(name) => parent.as_object_mut()?.remove(name),
        PathStep::Index(i) => {
            let items = parent.as_array_mut()?;
            (*i < items.len()).then(|| items.remove(*i))
        }
    }
}
