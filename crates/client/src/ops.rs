//! The operations of API.md §3.6 as the client names them ([`Op`]), their
//! outcome ([`Outcome`]), and their resolution into wire [`Mutation`]s with
//! every type check of API.md §9 done before anything is sent.

use crate::error::ClientError;
use crate::resolve::{self, target, wrong_type};
use tessera_protocol::{Action, CmpFailKind, Mutation, NumOp, Status};
use tessera_types::coerce::coerce_value;
use tessera_types::value::{parse_doc_path, value_to_json};
use tessera_types::{DataType, Prim, SpaceDesc, Value};

/// One operation on one attribute, or on a field of a document attribute
/// when the name is a path (`doc.a.b`, `doc.list[2]`).
///
/// Operands are values; each is checked against the attribute's type
/// (WRONGTYPE before sending) and converted as API.md §2.2 says (an int
/// attribute takes a float rounded, a float attribute an int).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Replace the value (`put`); on a path, set the document field.
    Put(Value),
    /// `atomic_OP`: int and float attributes, numeric document fields.
    Atomic(NumOp, Value),
    /// `string_prepend`: a string operand.
    StringPrepend(Value),
    /// `string_append`: a string operand.
    StringAppend(Value),
    /// `string_ltrim`: a non-negative int.
    StringLtrim(Value),
    /// `string_rtrim`: a non-negative int.
    StringRtrim(Value),
    /// `list_lpush`: one element (or, on a document array, any JSON value).
    ListLpush(Value),
    /// `list_rpush`.
    ListRpush(Value),
    /// `set_add`: one element.
    SetAdd(Value),
    /// `set_remove`: one element.
    SetRemove(Value),
    /// `set_union`: a set (or list) of elements.
    SetUnion(Value),
    /// `set_intersect`: a set (or list) of elements.
    SetIntersect(Value),
    /// `map_add`: map key, value.
    MapAdd(Value, Value),
    /// `map_remove`: map key.
    MapRemove(Value),
    /// `map_atomic_OP`: map key, operand.
    MapAtomic(NumOp, Value, Value),
    /// `map_string_prepend`: map key, string.
    MapStringPrepend(Value, Value),
    /// `map_string_append`: map key, string.
    MapStringAppend(Value, Value),
    /// `document_rename`: the new path (a string, relative to the root).
    DocumentRename(Value),
    /// `document_unset`.
    DocumentUnset,
}

/// How a single-key write ended (API.md §3.4), with the precise reason of
/// a CMPFAIL. Every status other than these three is a `ClientError`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a write may not have happened: check its Outcome"]
pub enum Outcome {
    /// Applied on every replica (SUCCESS).
    Done,
    /// No object has the key (NOTFOUND).
    NotFound,
    /// Nothing changed (CMPFAIL): a predicate failed, the object exists
    /// (put_if_not_exist), or a mutation could not be applied.
    CmpFail {
        /// Why, as a stable kind (`Overflow`, `DivideByZero`, `BadPath` …).
        kind: CmpFailKind,
        /// The daemon's explanation.
        reason: String,
    },
}

impl Outcome {
    /// API.md §3.4 for status-only operations: `Some(true)` on SUCCESS,
    /// `None` on NOTFOUND, `Some(false)` on CMPFAIL.
    pub fn as_option(&self) -> Option<bool> {
        match self {
            Outcome::Done => Some(true),
            Outcome::NotFound => None,
            Outcome::CmpFail { .. } => Some(false),
        }
    }

    /// `Ok` when the write was applied; NOTFOUND and CMPFAIL (with its
    /// reason) as errors, for callers to whom both mean failure.
    pub fn into_result(self) -> Result<(), ClientError> {
        match self {
            Outcome::Done => Ok(()),
            Outcome::NotFound => Err(ClientError::new(Status::NotFound, "no object has this key")),
            Outcome::CmpFail { reason, .. } => Err(ClientError::new(Status::CmpFail, reason)),
        }
    }

    /// Whether the write was applied (SUCCESS).
    pub fn is_done(&self) -> bool {
        *self == Outcome::Done
    }

    /// The kind of a CMPFAIL; `None` for the other outcomes.
    pub fn cmp_fail_kind(&self) -> Option<CmpFailKind> {
        match self {
            Outcome::CmpFail { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// The mutations of a list of named operations, every check of API.md §9
/// done. `refuse_dupes`: naming one attribute twice is DUPEATTR (a `put`
/// of a dict); microtransactions and map operations may repeat names.
pub(crate) fn mutations(
    desc: &SpaceDesc,
    ops: &[(String, Op)],
    refuse_dupes: bool,
) -> Result<Vec<Mutation>, ClientError> {
    let mut out = Vec::with_capacity(ops.len());
    let mut names: Vec<&str> = Vec::new();
    for (name, op) in ops {
        if refuse_dupes {
            if names.contains(&name.as_str()) {
                return Err(ClientError::new(
                    Status::DupeAttr,
                    format!("attribute {name:?} is named twice"),
                ));
            }
            names.push(name);
        }
        out.push(mutation(desc, name, op)?);
    }
    Ok(out)
}

/// One operation as a mutation.
pub(crate) fn mutation(desc: &SpaceDesc, name: &str, op: &Op) -> Result<Mutation, ClientError> {
    let (attr, path) = target(desc, name)?;
    if attr == 0 {
        return Err(ClientError::new(
            Status::DontUseKey,
            format!(
                "{name:?} is the key of space {:?} and cannot be written",
                desc.name
            ),
        ));
    }
    let dtype = desc.attrs[attr].dtype;
    let action = match &path {
        None => whole_action(dtype, name, op)?,
        Some(_) => path_action(name, op)?,
    };
    Ok(Mutation { attr, action, path })
}

fn op_name(op: &Op) -> String {
    match op {
        Op::Put(_) => "put".into(),
        Op::Atomic(n, _) => format!("atomic_{}", n.name()),
        Op::StringPrepend(_) => "string_prepend".into(),
        Op::StringAppend(_) => "string_append".into(),
        Op::StringLtrim(_) => "string_ltrim".into(),
        Op::StringRtrim(_) => "string_rtrim".into(),
        Op::ListLpush(_) => "list_lpush".into(),
        Op::ListRpush(_) => "list_rpush".into(),
        Op::SetAdd(_) => "set_add".into(),
        Op::SetRemove(_) => "set_remove".into(),
        Op::SetUnion(_) => "set_union".into(),
        Op::SetIntersect(_) => "set_intersect".into(),
        Op::MapAdd(..) => "map_add".into(),
        Op::MapRemove(_) => "map_remove".into(),
        Op::MapAtomic(n, ..) => format!("map_atomic_{}", n.name()),
        Op::MapStringPrepend(..) => "map_string_prepend".into(),
        Op::MapStringAppend(..) => "map_string_append".into(),
        Op::DocumentRename(_) => "document_rename".into(),
        Op::DocumentUnset => "document_unset".into(),
    }
}

fn coerce(dtype: DataType, name: &str, what: &str, v: &Value) -> Result<Value, ClientError> {
    coerce_value(dtype, v.clone())
        .map_err(|e| wrong_type(format!("{what} of {name:?} ({dtype}): {e}")))
}

fn bytes(name: &str, what: &str, v: &Value) -> Result<Vec<u8>, ClientError> {
    match v {
        Value::String(b) => Ok(b.clone()),
        other => Err(wrong_type(format!(
            "{what} on {name:?} needs a string operand, not a {}",
            other.kind()
        ))),
    }
}

fn trim(name: &str, v: &Value) -> Result<u64, ClientError> {
    match v {
        Value::Int(n) if *n >= 0 => Ok(*n as u64),
        other => Err(wrong_type(format!(
            "a trim of {name:?} needs a non-negative int, not {other:?}"
        ))),
    }
}

fn numeric(dtype: DataType, name: &str, n: NumOp, v: &Value) -> Result<Value, ClientError> {
    match dtype {
        DataType::Int => coerce(dtype, name, "the operand", v),
        DataType::Float if n.applies_to_float() => coerce(dtype, name, "the operand", v),
        DataType::Float => Err(wrong_type(format!(
            "atomic {} does not apply to the float attribute {name:?}",
            n.name()
        ))),
        _ => Err(wrong_type(format!(
            "atomic {} does not apply to {name:?} of type {dtype}",
            n.name()
        ))),
    }
}

/// The action of an operation on a whole attribute of type `dtype`.
fn whole_action(dtype: DataType, name: &str, op: &Op) -> Result<Action, ClientError> {
    let unsupported = || {
        wrong_type(format!(
            "{} does not apply to {name:?} of type {dtype}",
            op_name(op)
        ))
    };
    let elem = |p: Prim, v: &Value| coerce(p.data_type(), name, "an element", v);
    Ok(match (op, dtype) {
        (Op::Put(v), _) => Action::Set(coerce(dtype, name, "the value", v)?),
        (Op::Atomic(n, v), _) => Action::Num(*n, numeric(dtype, name, *n, v)?),
        (Op::StringPrepend(v), DataType::String) => {
            Action::StringPrepend(bytes(name, "string_prepend", v)?)
        }
        (Op::StringAppend(v), DataType::String) => {
            Action::StringAppend(bytes(name, "string_append", v)?)
        }
        (Op::StringLtrim(v), DataType::String) => Action::StringLtrim(trim(name, v)?),
        (Op::StringRtrim(v), DataType::String) => Action::StringRtrim(trim(name, v)?),
        (Op::ListLpush(v), DataType::List(p)) => Action::ListLpush(elem(p, v)?),
        (Op::ListRpush(v), DataType::List(p)) => Action::ListRpush(elem(p, v)?),
        (Op::SetAdd(v), DataType::Set(p)) => Action::SetAdd(elem(p, v)?),
        (Op::SetRemove(v), DataType::Set(p)) => Action::SetRemove(elem(p, v)?),
        (Op::SetUnion(v) | Op::SetIntersect(v), DataType::Set(_)) => {
            let Value::Set(items) = coerce(dtype, name, "the operand", v)? else {
                unreachable!("a set attribute coerces to a set")
            };
            if matches!(op, Op::SetUnion(_)) {
                Action::SetUnion(items)
            } else {
                Action::SetIntersect(items)
            }
        }
        (Op::MapAdd(k, v), DataType::Map(kp, vp)) => Action::MapAdd(elem(kp, k)?, elem(vp, v)?),
        (Op::MapRemove(k), DataType::Map(kp, _)) => Action::MapRemove(elem(kp, k)?),
        (Op::MapAtomic(n, k, v), DataType::Map(kp, vp)) if vp != Prim::String => {
            Action::MapNum(elem(kp, k)?, *n, numeric(vp.data_type(), name, *n, v)?)
        }
        (Op::MapStringPrepend(k, v), DataType::Map(kp, Prim::String)) => {
            Action::MapStringPrepend(elem(kp, k)?, bytes(name, "map_string_prepend", v)?)
        }
        (Op::MapStringAppend(k, v), DataType::Map(kp, Prim::String)) => {
            Action::MapStringAppend(elem(kp, k)?, bytes(name, "map_string_append", v)?)
        }
        (Op::DocumentRename(_) | Op::DocumentUnset, DataType::Document) => {
            return Err(wrong_type(format!(
                "{} needs a path inside {name:?} (e.g. \"{name}.field\")",
                op_name(op)
            )))
        }
        _ => return Err(unsupported()),
    })
}

/// The action of an operation on a field inside a document.
fn path_action(name: &str, op: &Op) -> Result<Action, ClientError> {
    let json_value = |v: &Value| {
        value_to_json(v).map(|_| v.clone()).ok_or_else(|| {
            wrong_type(format!(
                "{:?} cannot be written into the document at {name:?} (a UTF-8 string, an int, a finite float or a document)",
                v
            ))
        })
    };
    let utf8 = |what: &str, v: &Value| {
        let b = bytes(name, what, v)?;
        std::str::from_utf8(&b)
            .map_err(|_| wrong_type(format!("{what} into the document at {name:?} needs UTF-8")))?;
        Ok::<_, ClientError>(b)
    };
    Ok(match op {
        Op::Put(v) => Action::Set(json_value(v)?),
        Op::Atomic(n, v) => match v {
            Value::Int(_) => Action::Num(*n, v.clone()),
            Value::Float(_) if n.applies_to_float() => Action::Num(*n, v.clone()),
            other => {
                return Err(wrong_type(format!(
                    "atomic {} on the document field {name:?} needs {}, not {other:?}",
                    n.name(),
                    if n.applies_to_float() {
                        "a number"
                    } else {
                        "an int"
                    }
                )))
            }
        },
        Op::StringPrepend(v) => Action::StringPrepend(utf8("string_prepend", v)?),
        Op::StringAppend(v) => Action::StringAppend(utf8("string_append", v)?),
        Op::ListLpush(v) => Action::ListLpush(json_value(v)?),
        Op::ListRpush(v) => Action::ListRpush(json_value(v)?),
        Op::DocumentRename(v) => {
            let to = match v {
                Value::String(b) => String::from_utf8(b.clone()).ok(),
                _ => None,
            }
            .ok_or_else(|| {
                wrong_type(format!(
                    "document_rename of {name:?} needs the new path as a string"
                ))
            })?;
            parse_doc_path(&to).map_err(|e| wrong_type(format!("new path {to:?}: {e}")))?;
            Action::DocRename(to)
        }
        Op::DocumentUnset => Action::DocUnset,
        _ => {
            return Err(wrong_type(format!(
                "{} does not apply inside a document ({name:?})",
                op_name(op)
            )))
        }
    })
}

/// The names of a `get_partial`: plain attributes, never the key.
pub(crate) fn partial_attrs(desc: &SpaceDesc, names: &[String]) -> Result<Vec<usize>, ClientError> {
    names
        .iter()
        .map(|name| {
            let index = resolve::attr(desc, name)?;
            if index == 0 {
                return Err(ClientError::new(
                    Status::DontUseKey,
                    format!("{name:?} is the key; get_partial returns attributes only"),
                ));
            }
            Ok(index)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> SpaceDesc {
        tessera_types::parse::parse_space("space t key k attributes s, int i, float f, list(string) l, set(int) st, map(string, float) m, map(int, string) ms, document d, timestamp(day) ts create 4 partitions").expect("a valid description")
    }

    fn status(name: &str, op: Op) -> Status {
        mutation(&desc(), name, &op).unwrap_err().status()
    }

    fn action(name: &str, op: Op) -> (Action, Option<String>) {
        let m = mutation(&desc(), name, &op).unwrap();
        (m.action, m.path)
    }

    #[test]
    fn the_type_operation_matrix() {
        use NumOp::*;
        let s = Value::str;
        // Numeric atomics.
        assert_eq!(
            action("i", Op::Atomic(Add, Value::Float(2.6))).0,
            Action::Num(Add, Value::Int(3))
        );
        assert_eq!(
            action("f", Op::Atomic(Div, Value::Int(2))).0,
            Action::Num(Div, Value::Float(2.0))
        );
        for n in [Mod, And, Or, Xor] {
            assert_eq!(
                status("f", Op::Atomic(n, Value::Float(1.0))),
                Status::WrongType
            );
            assert!(mutation(&desc(), "i", &Op::Atomic(n, Value::Int(1))).is_ok());
        }
        assert_eq!(status("i", Op::Atomic(Add, s("1"))), Status::WrongType);
        assert_eq!(
            status("s", Op::Atomic(Add, Value::Int(1))),
            Status::WrongType
        );
        assert_eq!(
            status("ts", Op::Atomic(Add, Value::Int(1))),
            Status::WrongType
        );
        // Strings.
        assert_eq!(
            action("s", Op::StringLtrim(Value::Int(3))).0,
            Action::StringLtrim(3)
        );
        assert_eq!(
            status("s", Op::StringLtrim(Value::Int(-1))),
            Status::WrongType
        );
        assert_eq!(
            status("s", Op::StringAppend(Value::Int(1))),
            Status::WrongType
        );
        assert_eq!(status("i", Op::StringAppend(s("x"))), Status::WrongType);
        // Lists, sets, maps.
        assert_eq!(
            action("l", Op::ListRpush(s("x"))).0,
            Action::ListRpush(s("x"))
        );
        assert_eq!(status("l", Op::ListRpush(Value::Int(1))), Status::WrongType);
        assert_eq!(
            status("st", Op::ListRpush(Value::Int(1))),
            Status::WrongType
        );
        assert_eq!(
            action(
                "st",
                Op::SetUnion(Value::List(vec![Value::Int(2), Value::Int(1)]))
            )
            .0,
            Action::SetUnion(vec![Value::Int(1), Value::Int(2)])
        );
        assert_eq!(
            action("st", Op::SetIntersect(Value::Set(vec![]))).0,
            Action::SetIntersect(vec![])
        );
        assert_eq!(status("st", Op::SetAdd(s("x"))), Status::WrongType);
        assert_eq!(status("l", Op::SetAdd(s("x"))), Status::WrongType);
        assert_eq!(
            action("m", Op::MapAdd(s("a"), Value::Int(1))).0,
            Action::MapAdd(s("a"), Value::Float(1.0))
        );
        assert_eq!(
            status("m", Op::MapAtomic(Mod, s("a"), Value::Int(1))),
            Status::WrongType
        );
        assert!(mutation(&desc(), "m", &Op::MapAtomic(Max, s("a"), Value::Int(1))).is_ok());
        assert_eq!(
            status("ms", Op::MapAtomic(Add, Value::Int(1), Value::Int(1))),
            Status::WrongType
        );
        assert!(mutation(&desc(), "ms", &Op::MapStringAppend(Value::Int(1), s("x"))).is_ok());
        assert_eq!(
            status("m", Op::MapStringAppend(s("a"), s("x"))),
            Status::WrongType
        );
        assert_eq!(status("m", Op::MapRemove(Value::Int(1))), Status::WrongType);
        // Documents.
        assert_eq!(
            action("d.a.b", Op::Atomic(Add, Value::Int(1))),
            (Action::Num(Add, Value::Int(1)), Some("a.b".into()))
        );
        assert_eq!(action("d[2]", Op::Put(s("x"))).1, Some("[2]".into()));
        assert_eq!(
            status("d.a", Op::Atomic(Mod, Value::Float(1.0))),
            Status::WrongType
        );
        // Decided (docs/API-NOTES.md): trims do not apply inside a
        // document (API.md §9 lists prepend and append only), min and max
        // do (§3.6 lists them for no document field).
        assert_eq!(
            status("d.a", Op::StringLtrim(Value::Int(1))),
            Status::WrongType
        );
        assert_eq!(
            status("d.a", Op::StringRtrim(Value::Int(1))),
            Status::WrongType
        );
        for n in [Min, Max] {
            assert_eq!(
                action("d.a", Op::Atomic(n, Value::Float(0.5))).0,
                Action::Num(n, Value::Float(0.5))
            );
            assert_eq!(
                action("d.a", Op::Atomic(n, Value::Int(2))).0,
                Action::Num(n, Value::Int(2))
            );
        }
        assert_eq!(status("d.a", Op::SetAdd(Value::Int(1))), Status::WrongType);
        assert_eq!(
            status("d.a", Op::Put(Value::List(vec![]))),
            Status::WrongType
        );
        assert_eq!(
            status("d.a", Op::Put(Value::String(vec![0xff]))),
            Status::WrongType
        );
        assert_eq!(status("d", Op::DocumentUnset), Status::WrongType);
        assert_eq!(
            action("d.a", Op::DocumentRename(s("b.c"))).0,
            Action::DocRename("b.c".into())
        );
        assert_eq!(
            status("d.a", Op::DocumentRename(s("b..c"))),
            Status::WrongType
        );
        assert_eq!(status("d..a", Op::Put(Value::Int(1))), Status::WrongType);
        assert_eq!(status("s.a", Op::Put(Value::Int(1))), Status::WrongType);
        assert_eq!(status("zz.a", Op::Put(Value::Int(1))), Status::UnknownAttr);
        assert_eq!(status("k", Op::Put(s("x"))), Status::DontUseKey);
        // Timestamps take only puts.
        assert!(mutation(&desc(), "ts", &Op::Put(Value::Timestamp(5))).is_ok());
        assert_eq!(status("ts", Op::StringAppend(s("x"))), Status::WrongType);
    }

    #[test]
    fn dupes_only_where_refused() {
        let ops = vec![
            ("i".to_string(), Op::Put(Value::Int(1))),
            ("i".to_string(), Op::Put(Value::Int(2))),
        ];
        assert_eq!(
            mutations(&desc(), &ops, true).unwrap_err().status(),
            Status::DupeAttr
        );
        assert_eq!(mutations(&desc(), &ops, false).unwrap().len(), 2);
    }

    #[test]
    fn outcomes_map_to_results() {
        assert_eq!(Outcome::Done.as_option(), Some(true));
        assert_eq!(Outcome::NotFound.as_option(), None);
        let cmp = Outcome::CmpFail {
            kind: CmpFailKind::Overflow,
            reason: String::new(),
        };
        assert_eq!(cmp.as_option(), Some(false));
        assert_eq!(cmp.cmp_fail_kind(), Some(CmpFailKind::Overflow));
        assert_eq!(cmp.into_result().unwrap_err().status(), Status::CmpFail);
        assert_eq!(
            Outcome::NotFound.into_result().unwrap_err().status(),
            Status::NotFound
        );
        assert!(Outcome::Done.into_result().is_ok());
        assert!(Outcome::Done.is_done() && !Outcome::NotFound.is_done());
    }

    /// `space t key int k attributes string s, int n, float f, list(int) l`
    fn put_desc() -> SpaceDesc {
        tessera_types::parse::parse_space("space t key int k attributes string s, int n, float f, list(int) l subspace n create 4 partitions").expect("a valid description")
    }

    /// One `Set` mutation per named attribute (the resolution of a `put`).
    fn put_mutations<K: AsRef<str>>(
        desc: &SpaceDesc,
        attrs: impl IntoIterator<Item = (K, Value)>,
    ) -> Result<Vec<Mutation>, ClientError> {
        let ops: Vec<(String, Op)> = attrs
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), Op::Put(v)))
            .collect();
        mutations(desc, &ops, true)
    }

    #[test]
    fn mutations_resolve_names_to_indexes() {
        let desc = put_desc();
        let m = put_mutations(&desc, [("n", Value::Int(3)), ("s", Value::str("x"))]).unwrap();
        assert_eq!(
            m,
            vec![
                Mutation::new(2, Action::Set(Value::Int(3))),
                Mutation::new(1, Action::Set(Value::str("x"))),
            ]
        );
    }

    #[test]
    fn mutations_refuse_key_unknown_duplicate_and_wrong_type() {
        let desc = put_desc();
        let status = |r: Result<Vec<Mutation>, ClientError>| r.unwrap_err().status();
        assert_eq!(
            status(put_mutations(&desc, [("k", Value::Int(1))])),
            Status::DontUseKey
        );
        assert_eq!(
            status(put_mutations(&desc, [("zz", Value::Int(1))])),
            Status::UnknownAttr
        );
        assert_eq!(
            status(put_mutations(
                &desc,
                [("n", Value::Int(1)), ("n", Value::Int(2))]
            )),
            Status::DupeAttr
        );
        assert_eq!(
            status(put_mutations(&desc, [("n", Value::str("x"))])),
            Status::WrongType
        );
        assert_eq!(
            status(put_mutations(&desc, [("l", Value::str("x"))])),
            Status::WrongType
        );
        // A heterogeneous container, refused before sending.
        assert_eq!(
            status(put_mutations(
                &desc,
                [("l", Value::List(vec![Value::Int(1), Value::str("x")]))]
            )),
            Status::WrongType
        );
    }

    #[test]
    fn numbers_mix_on_put() {
        // API.md §2.2: an int attribute takes a float (rounded), a float
        // attribute takes an int.
        let desc = put_desc();
        let m = put_mutations(&desc, [("n", Value::Float(3.7)), ("f", Value::Int(2))]).unwrap();
        assert_eq!(m[0].action, Action::Set(Value::Int(4)));
        assert_eq!(m[1].action, Action::Set(Value::Float(2.0)));
    }
}
