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
//! | timestamp | RFC 3339 text (`2024-05-01T12:00:00.5Z`, any offset) or integer microseconds since the Unix epoch | RFC 3339 in UTC, microseconds when not whole seconds |
//! | document | any JSON | the same JSON |
//! | list(E), set(E) | array of E | array (sets sorted) |
//! | map(K, V) | object; keys read as K from their text | object |

use serde_json::Value as Json;
use tessera_client::{ClientError, DataType, PredOp, SpaceDesc, Status, Value};
use tessera_types::value::json_to_value;
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
        DataType::Timestamp(_) => {
            let text = text.trim();
            text.parse()
                .ok()
                .or_else(|| parse_rfc3339(text))
                .map(Value::Timestamp)
        }
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
        DataType::Timestamp(_) => match json {
            Json::String(text) => parse_rfc3339(text)
                .map(Value::Timestamp)
                .ok_or_else(mismatch),
            _ => json.as_i64().map(Value::Timestamp).ok_or_else(mismatch),
        },
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
        Value::Int(i) => Json::from(*i),
        Value::Timestamp(micros) => Json::String(format_rfc3339(*micros)),
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
        match target_type(desc, name)? {
            Some(dtype) => out.push((name.clone(), value_from_json(dtype, value)?)),
            None => out.push((name.clone(), json_to_value(value))),
        }
    }
    Ok(out)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A timestamp (microseconds since the epoch) as RFC 3339 text in UTC:
/// `1970-01-01T00:00:00Z`, with `.ffffff` when not a whole second.
pub fn format_rfc3339(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let tod = secs.rem_euclid(86_400);
    let (hh, mm, ss) = (tod / 3600, tod % 3600 / 60, tod % 60);
    let mut out = format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}");
    if frac != 0 {
        out.push_str(&format!(".{frac:06}"));
    }
    out.push('Z');
    out
}

/// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM)`, `t`/space
/// allowed for `T`) to microseconds since the epoch; digits past the
/// sixth of the fraction are dropped. `None` when malformed or out of range.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let days_in_month = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => return None,
    };
    if d < 1 || d > days_in_month || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &text[start..i];
        if digits.is_empty() {
            return None;
        }
        let six: String = digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(6)
            .collect();
        micros = six.parse().ok()?;
    }
    let offset = match &text[i..] {
        "Z" | "z" => 0,
        rest if rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':' =>
        {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset;
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

/// The type of the value a name addresses: an attribute's type, or — for
/// a path inside a document (`doc.a.b`) — `None`, meaning "whatever JSON
/// value is there".
fn target_type(desc: &SpaceDesc, name: &str) -> Result<Option<DataType>, ClientError> {
    if desc.attr_index(name).is_some() {
        return attr_type(desc, name).map(Some);
    }
    match tessera_types::value::split_attr_path(name) {
        Some((attr, _)) if attr_type(desc, attr)? == DataType::Document => Ok(None),
        Some((attr, _)) => Err(wrong_type(format!(
            "{name:?} addresses inside {attr:?}, which is not a document"
        ))),
        None => attr_type(desc, name).map(Some),
    }
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
        let dtype = target_type(desc, name)?;
        let operand = |json: &Json| match dtype {
            Some(dtype) => value_from_json(dtype, json),
            None => Ok(json_to_value(json)),
        };
        match spec.as_object() {
            Some(ops) if !ops.is_empty() && ops.keys().all(|k| OPERATORS.contains(&k.as_str())) => {
                for (op, json) in ops {
                    let pred = match dtype {
                        Some(dtype) => predicate(dtype, op, json)?,
                        None => path_predicate(op, json)?,
                    };
                    out.push((name.clone(), pred));
                }
            }
            _ => out.push((name.clone(), PredOp::Eq(operand(spec)?))),
        }
    }
    Ok(out)
}

/// A predicate on a document field: the operand is the JSON value itself.
fn path_predicate(op: &str, operand: &Json) -> Result<PredOp, ClientError> {
    match op {
        "regex" | "len_eq" | "len_le" | "len_ge" => predicate(DataType::String, op, operand),
        "contains" => Ok(PredOp::Contains(json_to_value(operand))),
        "eq" => Ok(PredOp::Eq(json_to_value(operand))),
        "lt" => Ok(PredOp::Lt(json_to_value(operand))),
        "le" => Ok(PredOp::Le(json_to_value(operand))),
        "gt" => Ok(PredOp::Gt(json_to_value(operand))),
        "ge" => Ok(PredOp::Ge(json_to_value(operand))),
        other => Err(wrong_type(format!("unknown predicate operator {other:?}"))),
    }
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

    /// `space t key int k attributes s, float f, set(int) ns, map(int, string) m, document d`
    fn desc() -> SpaceDesc {
        tessera_types::parse::parse_space("space t key int k attributes s, float f, set(int) ns, map(int, string) m, document d create 4 partitions").expect("a valid description")
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
    fn rfc3339_round_trips() {
        let cases: &[(i64, &str)] = &[
            (0, "1970-01-01T00:00:00Z"),
            (1, "1970-01-01T00:00:00.000001Z"),
            (-1, "1969-12-31T23:59:59.999999Z"),
            (951_782_400_000_000, "2000-02-29T00:00:00Z"),
            (1_714_564_800_500_000, "2024-05-01T12:00:00.500000Z"),
            (-62_135_596_800_000_000, "0001-01-01T00:00:00Z"),
        ];
        for (micros, text) in cases {
            assert_eq!(format_rfc3339(*micros), *text);
            assert_eq!(parse_rfc3339(text), Some(*micros), "{text}");
        }
        assert_eq!(
            parse_rfc3339("2024-05-01T14:00:00.5+02:00"),
            Some(1_714_564_800_500_000)
        );
        assert_eq!(
            parse_rfc3339("2024-05-01 12:00:00.5z"),
            Some(1_714_564_800_500_000)
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00.1234569Z"), Some(123_456));
        for bad in [
            "",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-05-01T24:00:00Z",
            "2024-05-01T12:00:00",
            "2024-05-01T12:00:00.Z",
            "2024-05-01T12:00:00+2:00",
            "20x4-05-01T12:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn document_paths_in_puts_and_predicates() {
        let json = parse(r#"{"d.profile.name": "Jo", "d.n": 2, "d.x": {"a": [1]}}"#).unwrap();
        let attrs = attrs_from_json(&desc(), &json).unwrap();
        assert!(attrs.contains(&("d.profile.name".into(), Value::str("Jo"))));
        assert!(attrs.contains(&("d.n".into(), Value::Int(2))));
        assert!(attrs.contains(&("d.x".into(), Value::Document(r#"{"a":[1]}"#.into()))));
        let json = parse(r#"{"d.profile.name": "Jo", "d.age": {"ge": 18, "lt": 65.5}}"#).unwrap();
        let preds = predicates_from_json(&desc(), &json).unwrap();
        assert!(preds.contains(&("d.profile.name".into(), PredOp::Eq(Value::str("Jo")))));
        assert!(preds.contains(&("d.age".into(), PredOp::Ge(Value::Int(18)))));
        assert!(preds.contains(&("d.age".into(), PredOp::Lt(Value::Float(65.5)))));
        let json = parse(r#"{"s.x": 1}"#).unwrap();
        assert_eq!(
            predicates_from_json(&desc(), &json).unwrap_err().status(),
            Status::WrongType
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
