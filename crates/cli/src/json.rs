//! JSON on the command line ↔ typed values, driven by the space's schema
//! (API.md §0.3).
//!
//! The schema decides how a JSON value is read: `1` is an int for an int
//! attribute and the float 1.0 for a float attribute; a key given on the
//! command line as `42` is the int 42 for an int key and the string "42"
//! for a string key.
//!
//! | type | JSON in | JSON out |
//! | --- | --- | --- |
//! | string | string | string (invalid UTF-8 replaced) |
//! | int | integer (a float is rounded by the client) | integer |
//! | float | number | number (`"NaN"`, `"inf"`, `"-inf"` as strings) |
//! | timestamp | integer microseconds since the Unix epoch | the same |
//! | document | any JSON | the same JSON |
//! | list(E), set(E) | array of E | array |
//! | map(K, V) | object; keys read as K from their text | object |

use serde_json::Value as Json;
use tessera_client::{ClientError, DataType, PredOp, SpaceDesc, Status, Value};
use tessera_types::Prim;

fn wrong_type(message: String) -> ClientError {
    ClientError::new(Status::WrongType, message)
}

/// Parses a JSON text given on the command line.
pub fn parse(text: &str) -> Result<Json, ClientError> {
    serde_json::from_str(text).map_err(|e| wrong_type(format!("invalid JSON {text:?}: {e}")))
}

/// The key given on the command line, read as the key attribute's type.
pub fn key_from_arg(desc: &SpaceDesc, text: &str) -> Result<Value, ClientError> {
    let dtype = desc.key().dtype;
    scalar_from_text(dtype, text).ok_or_else(|| {
        wrong_type(format!(
            "key {text:?} is not a valid {dtype} (the key type of {:?})",
            desc.name
        ))
    })
}

/// A hashable value from its text (a key on the command line, a map key in
/// JSON).
fn scalar_from_text(dtype: DataType, text: &str) -> Option<Value> {
    match dtype {
        DataType::String => Some(Value::str(text)),
        DataType::Int => text.trim().parse().ok().map(Value::Int),
        DataType::Float => text.trim().parse().ok().map(Value::Float),
        DataType::Timestamp(_) => text.trim().parse().ok().map(Value::Timestamp),
        _ => None,
    }
}

/// A JSON value as a value of type `dtype`.
pub fn value_from_json(dtype: DataType, json: &Json) -> Result<Value, ClientError> {
    let mismatch = || wrong_type(format!("{json} is not a valid {dtype}"));
    let prim = |p: Prim, j: &Json| value_from_json(p.data_type(), j);
    match dtype {
        DataType::String => json.as_str().map(Value::str).ok_or_else(mismatch),
        DataType::Int => match (json.as_i64(), json.as_f64()) {
            (Some(i), _) => Ok(Value::Int(i)),
            // A float for an int attribute: the client rounds it (API.md §2.2).
            (None, Some(f)) if !json.is_u64() => Ok(Value::Float(f)),
            _ => Err(mismatch()),
        },
        DataType::Float => json.as_f64().map(Value::Float).ok_or_else(mismatch),
        DataType::Timestamp(_) => json.as_i64().map(Value::Timestamp).ok_or_else(mismatch),
        DataType::Document => Ok(Value::Document(json.to_string())),
        DataType::List(p) | DataType::Set(p) => {
            let items = json.as_array().ok_or_else(mismatch)?;
            let values = items
                .iter()
                .map(|j| prim(p, j))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if matches!(dtype, DataType::Set(_)) {
                Value::Set(values)
            } else {
                Value::List(values)
            })
        }
        DataType::Map(k, v) => {
            let entries = json.as_object().ok_or_else(mismatch)?;
            let mut out = Vec::with_capacity(entries.len());
            for (key_text, value) in entries {
                let key = scalar_from_text(k.data_type(), key_text).ok_or_else(|| {
                    wrong_type(format!(
                        "map key {key_text:?} is not a valid {}",
                        k.data_type()
                    ))
                })?;
                out.push((key, prim(v, value)?));
            }
            Ok(Value::Map(out))
        }
    }
}

/// A value as JSON (see the module table).
pub fn value_to_json(value: &Value) -> Json {
    match value {
        Value::String(bytes) => Json::String(String::from_utf8_lossy(bytes).into_owned()),
        Value::Int(i) | Value::Timestamp(i) => Json::from(*i),
        Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => Json::Number(n),
            None if f.is_nan() => Json::String("NaN".into()),
            None if *f > 0.0 => Json::String("inf".into()),
            None => Json::String("-inf".into()),
        },
        Value::Document(text) => {
            serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.clone()))
        }
        Value::List(items) | Value::Set(items) => {
            Json::Array(items.iter().map(value_to_json).collect())
        }
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = match value_to_json(k) {
                        Json::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, value_to_json(v))
                })
                .collect(),
        ),
    }
}

/// Attributes as one JSON object, in the order given (schema order).
pub fn record_to_json<'a>(attrs: impl IntoIterator<Item = (&'a str, &'a Value)>) -> String {
    let fields: Vec<String> = attrs
        .into_iter()
        .map(|(name, value)| {
            format!(
                "{}:{}",
                Json::String(name.to_string()),
                value_to_json(value)
            )
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// The attributes of a `put`: a JSON object of attribute name → value.
pub fn attrs_from_json(desc: &SpaceDesc, json: &Json) -> Result<Vec<(String, Value)>, ClientError> {
    let object = json
        .as_object()
        .ok_or_else(|| wrong_type(format!("attributes must be a JSON object, not {json}")))?;
    let mut out = Vec::with_capacity(object.len());
    for (name, value) in object {
        let dtype = attr_type(desc, name)?;
        out.push((name.clone(), value_from_json(dtype, value)?));
    }
    Ok(out)
}

fn attr_type(desc: &SpaceDesc, name: &str) -> Result<DataType, ClientError> {
    desc.attr_index(name)
        .map(|i| desc.attrs[i].dtype)
        .ok_or_else(|| {
            ClientError::new(
                Status::UnknownAttr,
                format!("space {:?} has no attribute {name:?}", desc.name),
            )
        })
}

/// The operator names of a JSON predicate.
const OPERATORS: [&str; 10] = [
    "eq", "lt", "le", "gt", "ge", "regex", "contains", "len_eq", "len_le", "len_ge",
];

/// Predicates from JSON (API.md §0.3): `{"a": "x"}` is equality; an object
/// whose keys are all operator names (`eq lt le gt ge regex contains len_eq
/// len_le len_ge`) is one predicate per operator, all of which must hold.
/// Any other object is an equality with that object (a map or document).
pub fn predicates_from_json(
    desc: &SpaceDesc,
    json: &Json,
) -> Result<Vec<(String, PredOp)>, ClientError> {
    let object = json
        .as_object()
        .ok_or_else(|| wrong_type(format!("predicates must be a JSON object, not {json}")))?;
    let mut out = Vec::new();
    for (name, spec) in object {
        let dtype = attr_type(desc, name)?;
        match spec.as_object() {
            Some(ops) if !ops.is_empty() && ops.keys().all(|k| OPERATORS.contains(&k.as_str())) => {
                for (op, operand) in ops {
                    out.push((name.clone(), predicate(dtype, op, operand)?));
                }
            }
            _ => out.push((name.clone(), PredOp::Eq(value_from_json(dtype, spec)?))),
        }
    }
    Ok(out)
}

fn predicate(dtype: DataType, op: &str, operand: &Json) -> Result<PredOp, ClientError> {
    let length = || {
        operand
            .as_u64()
            .ok_or_else(|| wrong_type(format!("{op} needs a non-negative integer, not {operand}")))
    };
    Ok(match op {
        "eq" => PredOp::Eq(value_from_json(dtype, operand)?),
        "lt" => PredOp::Lt(value_from_json(dtype, operand)?),
        "le" => PredOp::Le(value_from_json(dtype, operand)?),
        "gt" => PredOp::Gt(value_from_json(dtype, operand)?),
        "ge" => PredOp::Ge(value_from_json(dtype, operand)?),
        "regex" => PredOp::Regex(
            operand
                .as_str()
                .ok_or_else(|| wrong_type(format!("regex needs a string, not {operand}")))?
                .to_string(),
        ),
        "contains" => {
            let element = match dtype {
                DataType::List(p) | DataType::Set(p) | DataType::Map(p, _) => p.data_type(),
                _ => return Err(wrong_type(format!("contains does not apply to {dtype}"))),
            };
            PredOp::Contains(value_from_json(element, operand)?)
        }
        "len_eq" => PredOp::LenEq(length()?),
        "len_le" => PredOp::LenLe(length()?),
        "len_ge" => PredOp::LenGe(length()?),
        other => return Err(wrong_type(format!("unknown predicate operator {other:?}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::Attribute;

    /// `space t key int k attributes s, float f, set(int) ns, map(int, string) m, document d`
    fn desc() -> SpaceDesc {
        let attr = |name: &str, dtype| Attribute {
            name: name.to_string(),
            dtype,
        };
        SpaceDesc {
            name: "t".into(),
            attrs: vec![
                attr("k", DataType::Int),
                attr("s", DataType::String),
                attr("f", DataType::Float),
                attr("ns", DataType::Set(Prim::Int)),
                attr("m", DataType::Map(Prim::Int, Prim::String)),
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
    fn key_follows_the_key_type() {
        assert_eq!(key_from_arg(&desc(), "42").unwrap(), Value::Int(42));
        assert_eq!(key_from_arg(&desc(), "-7").unwrap(), Value::Int(-7));
        assert_eq!(
            key_from_arg(&desc(), "x").unwrap_err().status(),
            Status::WrongType
        );
    }

    #[test]
    fn attributes_follow_the_schema() {
        let json =
            parse(r#"{"s": "hi", "f": 1, "ns": [3, 1], "m": {"5": "five"}, "d": {"a": [1]}}"#)
                .unwrap();
        let attrs = attrs_from_json(&desc(), &json).unwrap();
        let get = |n: &str| attrs.iter().find(|(a, _)| a == n).unwrap().1.clone();
        assert_eq!(get("s"), Value::str("hi"));
        assert_eq!(get("f"), Value::Float(1.0));
        assert_eq!(get("ns"), Value::Set(vec![Value::Int(3), Value::Int(1)]));
        assert_eq!(
            get("m"),
            Value::Map(vec![(Value::Int(5), Value::str("five"))])
        );
        assert_eq!(get("d"), Value::Document(r#"{"a":[1]}"#.into()));
        let bad = parse(r#"{"s": 3}"#).unwrap();
        assert_eq!(
            attrs_from_json(&desc(), &bad).unwrap_err().status(),
            Status::WrongType
        );
        let unknown = parse(r#"{"zz": 3}"#).unwrap();
        assert_eq!(
            attrs_from_json(&desc(), &unknown).unwrap_err().status(),
            Status::UnknownAttr
        );
    }

    #[test]
    fn predicates_equality_ranges_and_operators() {
        let json = parse(
            r#"{"s": "x", "f": {"ge": 1, "lt": 10.5}, "ns": {"contains": 3}, "m": {"len_ge": 2}}"#,
        )
        .unwrap();
        let mut preds = predicates_from_json(&desc(), &json).unwrap();
        preds.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        assert!(preds.contains(&("s".into(), PredOp::Eq(Value::str("x")))));
        assert!(preds.contains(&("f".into(), PredOp::Ge(Value::Float(1.0)))));
        assert!(preds.contains(&("f".into(), PredOp::Lt(Value::Float(10.5)))));
        assert!(preds.contains(&("ns".into(), PredOp::Contains(Value::Int(3)))));
        assert!(preds.contains(&("m".into(), PredOp::LenGe(2))));
        assert_eq!(preds.len(), 5);
        // An object that is not all operators is an equality with a value.
        let json = parse(r#"{"m": {"1": "one"}}"#).unwrap();
        assert_eq!(
            predicates_from_json(&desc(), &json).unwrap(),
            vec![(
                "m".into(),
                PredOp::Eq(Value::Map(vec![(Value::Int(1), Value::str("one"))]))
            )]
        );
        let json = parse(r#"{"s": {"regex": "^a"}}"#).unwrap();
        assert_eq!(
            predicates_from_json(&desc(), &json).unwrap(),
            vec![("s".into(), PredOp::Regex("^a".into()))]
        );
    }

    #[test]
    fn values_print_as_json() {
        let attrs = [
            ("k", Value::Int(1)),
            ("s", Value::str("a\"b")),
            ("f", Value::Float(f64::NAN)),
            ("d", Value::Document(r#"{"x": 1}"#.into())),
            ("m", Value::Map(vec![(Value::Int(2), Value::str("two"))])),
        ];
        let line = record_to_json(attrs.iter().map(|(n, v)| (*n, v)));
        assert_eq!(
            line,
            r#"{"k":1,"s":"a\"b","f":"NaN","d":{"x":1},"m":{"2":"two"}}"#
        );
    }
}
