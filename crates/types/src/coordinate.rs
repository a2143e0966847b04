//! Coordinates: where a value lies on its attribute's axis (a `u64`).
//! TODO(types helper): implement and document (docs/PROTOCOL.md).

use crate::value::Value;

/// The fixed 64-bit hash of a byte string used for placement.
pub fn string_hash(bytes: &[u8]) -> u64 {
    let _ = bytes;
    unimplemented!()
}

/// Order-preserving coordinate of an i64.
pub fn int_coordinate(i: i64) -> u64 {
    (i as u64) ^ (1 << 63)
}

/// Order-preserving coordinate of an f64 (IEEE-754 total order).
pub fn float_coordinate(f: f64) -> u64 {
    let bits = f.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The coordinate of a hashable value; `None` for containers and documents.
pub fn coordinate(value: &Value) -> Option<u64> {
    match value {
        Value::String(b) => Some(string_hash(b)),
        Value::Int(i) => Some(int_coordinate(*i)),
        Value::Float(f) => Some(float_coordinate(*f)),
        Value::Timestamp(t) => Some(int_coordinate(*t)),
        _ => None,
    }
}
