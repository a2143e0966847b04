//! Typed values and their types (API.md §2).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The unit of a `timestamp(UNIT)` attribute. The unit changes only how the
/// value is placed: values within one interval of the unit land near each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeUnit {
    /// 1 second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3600 seconds.
    Hour,
    /// 86400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 28 days, as in HyperDex.
    Month,
}

impl TimeUnit {
    /// The length of one interval in microseconds.
    pub fn micros(self) -> i64 {
        const S: i64 = 1_000_000;
        match self {
            TimeUnit::Second => S,
            TimeUnit::Minute => 60 * S,
            TimeUnit::Hour => 3_600 * S,
            TimeUnit::Day => 86_400 * S,
            TimeUnit::Week => 7 * 86_400 * S,
            TimeUnit::Month => 28 * 86_400 * S,
        }
    }

    /// The unit's keyword in the space description language.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Second => "second",
            TimeUnit::Minute => "minute",
            TimeUnit::Hour => "hour",
            TimeUnit::Day => "day",
            TimeUnit::Week => "week",
            TimeUnit::Month => "month",
        }
    }
}

/// The element types a container may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Prim {
    /// A byte string.
    String,
    /// A signed 64-bit integer.
    Int,
    /// An IEEE-754 double.
    Float,
}

impl Prim {
    /// The scalar [`DataType`] of this element type.
    pub fn data_type(self) -> DataType {
        match self {
            Prim::String => DataType::String,
            Prim::Int => DataType::Int,
            Prim::Float => DataType::Float,
        }
    }
}

/// The type of an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// `string`: arbitrary bytes.
    String,
    /// `int` / `int64`: a signed 64-bit integer.
    Int,
    /// `float`: an IEEE-754 double.
    Float,
    /// `timestamp(unit)`: microseconds since the Unix epoch.
    Timestamp(TimeUnit),
    /// `document`: JSON text.
    Document,
    /// `list(E)`: ordered, duplicates allowed.
    List(Prim),
    /// `set(E)`: sorted, unique elements.
    Set(Prim),
    /// `map(K, V)`: entries sorted by key, unique keys.
    Map(Prim, Prim),
}

impl DataType {
    /// Hashable types may be a key or a subspace dimension.
    pub fn is_hashable(self) -> bool {
        matches!(
            self,
            DataType::String | DataType::Int | DataType::Float | DataType::Timestamp(_)
        )
    }

    /// Indexable types may appear in an `index` clause.
    pub fn is_indexable(self) -> bool {
        !matches!(self, DataType::Document)
    }

    /// The value an attribute holds before it is ever written.
    pub fn default_value(self) -> Value {
        match self {
            DataType::String => Value::String(Vec::new()),
            DataType::Int => Value::Int(0),
            DataType::Float => Value::Float(0.0),
            DataType::Timestamp(_) => Value::Timestamp(0),
            DataType::Document => Value::Document("{}".to_string()),
            DataType::List(_) => Value::List(Vec::new()),
            DataType::Set(_) => Value::Set(Vec::new()),
            DataType::Map(_, _) => Value::Map(Vec::new()),
        }
    }
}

impl Prim {
    /// The type's name in the space description language.
    pub fn name(self) -> &'static str {
        match self {
            Prim::String => "string",
            Prim::Int => "int",
            Prim::Float => "float",
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Written as in the space description language (`map(string, int)`), so
/// that the text parses back to the same type.
impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn prim(p: Prim) -> &'static str {
            p.name()
        }
        match self {
            DataType::String => write!(f, "string"),
            DataType::Int => write!(f, "int"),
            DataType::Float => write!(f, "float"),
            DataType::Timestamp(u) => write!(f, "timestamp({})", u.name()),
            DataType::Document => write!(f, "document"),
            DataType::List(p) => write!(f, "list({})", prim(*p)),
            DataType::Set(p) => write!(f, "set({})", prim(*p)),
            DataType::Map(k, v) => write!(f, "map({}, {})", prim(*k), prim(*v)),
        }
    }
}

/// A typed value.
///
/// Invariants (kept by constructors in the client and checked by daemons):
/// `Set` elements are sorted and unique; `Map` entries are sorted by key and
/// keys are unique; `Document` holds valid JSON text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// Arbitrary bytes (UTF-8 is not required).
    String(#[serde(with = "byte_string")] Vec<u8>),
    /// A signed 64-bit integer.
    Int(i64),
    /// An IEEE-754 double.
    Float(f64),
    /// Microseconds since the Unix epoch.
    Timestamp(i64),
    /// JSON text.
    Document(String),
    /// Elements in order.
    List(Vec<Value>),
    /// Elements, sorted and unique.
    Set(Vec<Value>),
    /// `(key, value)` entries, sorted by key, keys unique.
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// A string value holding the UTF-8 bytes of `s`.
    pub fn str(s: &str) -> Value {
        Value::String(s.as_bytes().to_vec())
    }

    /// A short name of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Timestamp(_) => "timestamp",
            Value::Document(_) => "document",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Map(_) => "map",
        }
    }
}

/// Serde for the bytes of [`Value::String`] as one byte string instead of a
/// sequence of `u8` elements. In postcard both are a varint length and the
/// raw bytes, so the encoding is unchanged; only the per-byte calls go (a
/// 1 KB record decoded byte by byte took ~10 µs). Formats without byte
/// strings (JSON) still see an array of numbers, and both forms decode.
/// Public so that other byte strings on the wire (an object's stored
/// bytes) encode the same way.
pub mod byte_string {
    use serde::de::{Deserializer, SeqAccess, Visitor};
    use serde::Serializer;
    use std::fmt;

    /// Writes `bytes` as one byte string.
    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    /// Reads a byte string (or a sequence of bytes).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }

    /// The visitor behind [`deserialize`], for types that wrap bytes.
    pub struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
            Ok(v.as_bytes().to_vec())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            // The size hint comes from the input: cap it, so a forged length
            // cannot reserve unbounded memory.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

/// One object: a value for every attribute of its space, in schema order.
/// `values[0]` is the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Object {
    /// One value per attribute of the space, `values[0]` the key.
    pub values: Vec<Value>,
}

impl Object {
    /// The key, `values[0]`.
    pub fn key(&self) -> &Value {
        &self.values[0]
    }
}

// ------------------------------------------------------------ document paths

/// The JSON library documents are read and written with, re-exported so
/// that crates working on documents share its exact version.
pub use serde_json as json;

/// One step of a path inside a document (API.md §3.6): a field of an
/// object, or an element of an array.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathStep {
    /// `name` in `a.name`.
    Field(String),
    /// `3` in `a[3]`.
    Index(usize),
}

/// Parses a path inside a document: fields separated by `.`, each
/// optionally followed by `[i]` indexes (`a.b[3].c`, `[0].x`). Field names
/// are any non-empty text without `.`, `[` or `]`. An empty path, an empty
/// field, or a malformed index is an error (with a reason).
pub fn parse_doc_path(path: &str) -> Result<Vec<PathStep>, String> {
    if path.is_empty() {
        return Err("the document path is empty".into());
    }
    let mut steps = Vec::new();
    let bytes = path.as_bytes();
    let mut i = 0;
    let mut expect_field = !path.starts_with('[');
    while i < bytes.len() {
        if expect_field {
            let start = i;
            while i < bytes.len() && !matches!(bytes[i], b'.' | b'[' | b']') {
                i += 1;
            }
            if start == i {
                return Err(format!("empty field name at byte {start} of {path:?}"));
            }
            steps.push(PathStep::Field(path[start..i].to_string()));
            expect_field = false;
            continue;
        }
        match bytes[i] {
            b'.' => {
                i += 1;
                expect_field = true;
                if i == bytes.len() {
                    return Err(format!("{path:?} ends with '.'"));
                }
            }
            b'[' => {
                let start = i + 1;
                let Some(len) = path[start..].find(']') else {
                    return Err(format!("unclosed '[' in {path:?}"));
                };
                let digits = &path[start..start + len];
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("index {digits:?} in {path:?} is not a number"));
                }
                let index = digits
                    .parse()
                    .map_err(|_| format!("index {digits:?} in {path:?} is too large"))?;
                steps.push(PathStep::Index(index));
                i = start + len + 1;
            }
            other => {
                return Err(format!(
                    "unexpected {:?} at byte {i} of {path:?}",
                    other as char
                ))
            }
        }
    }
    Ok(steps)
}

/// Splits a name that addresses inside a document (`doc.a.b`, `doc[3]`)
/// into the attribute name and the path inside (`a.b`, `[3]`). `None` when
/// the name has no `.` or `[`.
pub fn split_attr_path(name: &str) -> Option<(&str, &str)> {
    let at = name.find(['.', '['])?;
    let (attr, rest) = name.split_at(at);
    Some((attr, rest.strip_prefix('.').unwrap_or(rest)))
}

/// The JSON value at `steps` inside `root`, if there is one.
pub fn json_at<'a>(
    root: &'a serde_json::Value,
    steps: &[PathStep],
) -> Option<&'a serde_json::Value> {
    steps.iter().try_fold(root, |node, step| match step {
        PathStep::Field(name) => node.as_object()?.get(name),
        PathStep::Index(i) => node.as_array()?.get(*i),
    })
}

/// A JSON value as the typed value predicates compare (API.md §6.2): a
/// string as a string, an integer as an int, another number as a float,
/// anything else (object, array, bool, null) as a document of its
/// canonical text.
pub fn json_to_value(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::String(s) => Value::str(s),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        other => Value::Document(other.to_string()),
    }
}

/// The value at `steps` inside the JSON document `text`, as a check on
/// that path compares it ([`json_at`] then [`json_to_value`], the steps
/// [`crate::predicate::doc_path_matches`] takes): `None` when the text is
/// not JSON or the path leads nowhere. A local index on a document path
/// extracts its values here too, so the index and the checks it answers
/// agree on which value a path yields.
pub fn doc_value_at(text: &str, steps: &[PathStep]) -> Option<Value> {
    let root = serde_json::from_str::<serde_json::Value>(text).ok()?;
    json_at(&root, steps).map(json_to_value)
}

/// A scalar or document value as JSON, for writing into a document: a
/// string (must be UTF-8), an int, a finite float, or a document. `None`
/// for anything else.
pub fn value_to_json(value: &Value) -> Option<serde_json::Value> {
    match value {
        Value::String(bytes) => std::str::from_utf8(bytes)
            .ok()
            .map(|s| serde_json::Value::String(s.to_string())),
        Value::Int(i) => Some(serde_json::Value::from(*i)),
        Value::Float(f) => serde_json::Number::from_f64(*f).map(serde_json::Value::Number),
        Value::Document(text) => serde_json::from_str(text).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `Value` as it was derived before strings were byte strings.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum SeqValue {
        String(Vec<u8>),
        Int(i64),
    }

    proptest! {
        #[test]
        fn string_bytes_encode_as_before(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let new = Value::String(bytes.clone());
            let old = SeqValue::String(bytes.clone());
            let encoded = postcard::to_allocvec(&new).unwrap();
            prop_assert_eq!(&encoded, &postcard::to_allocvec(&old).unwrap());
            prop_assert_eq!(postcard::from_bytes::<Value>(&encoded).unwrap(), new.clone());
            let json = serde_json::to_string(&new).unwrap();
            prop_assert_eq!(&json, &serde_json::to_string(&old).unwrap());
            prop_assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), new);
        }
    }

    #[test]
    fn a_forged_string_length_is_an_error() {
        // Variant 0 (string), then a length far beyond the input.
        let forged = [0u8, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3];
        assert!(postcard::from_bytes::<Value>(&forged).is_err());
    }
}
