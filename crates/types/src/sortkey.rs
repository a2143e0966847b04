//! Order-preserving encodings of attribute values, for what must keep a
//! value order on disk or across partitions: the entries of global indexes
//! (`docs/design/global-indexes.md`) and their range partitioning.
//!
//! [`sort_key`] is exact and self-delimiting: for two values of one type,
//! `a < b` exactly when `sort_key(a) < sort_key(b)` byte-wise, and that stays
//! true with anything appended to either (an entry appends the object's
//! key), because no encoding is a prefix of another. Strings keep their
//! bytes, each `0x00` written as `0x00 0xFF`, and end with `0x00 0x01`;
//! ints, floats and timestamps are their 8-byte [`coordinate`]s, which are
//! already order-preserving and of fixed size.
//!
//! [`order_coordinate`] is its 64-bit summary, for split points: never
//! decreasing with the value (strings compare by their first eight bytes, so
//! strings sharing those share a coordinate), unlike [`coordinate`], which
//! hashes strings and so scatters a string range over every region.
//!
//! [`coordinate`]: crate::coordinate::coordinate

use crate::coordinate::{float_coordinate, int_coordinate};
use crate::value::{DataType, Value};

/// The byte that escapes `0x00` inside a string, and the one that ends it.
const ESCAPED_ZERO: u8 = 0xFF;
const END: u8 = 0x01;

/// The order-preserving encoding of `value` (see the module docs); `None`
/// for documents and containers, which have no order.
pub fn sort_key(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(bytes) => {
            let zeros = bytes.iter().filter(|&&b| b == 0).count();
            let mut out = Vec::with_capacity(bytes.len() + zeros + 2);
            for &b in bytes {
                out.push(b);
                if b == 0 {
                    out.push(ESCAPED_ZERO);
                }
            }
            out.extend_from_slice(&[0, END]);
            Some(out)
        }
        Value::Int(_) | Value::Float(_) | Value::Timestamp(_) => {
            order_coordinate(value).map(|c| c.to_be_bytes().to_vec())
        }
        _ => None,
    }
}

/// The length of the sort key at the start of `bytes`, for a value that
/// is a string (`string`) or a number; `None` when `bytes` does not start
/// with a whole one. What follows it in an entry is the object's key.
pub fn sort_key_len(bytes: &[u8], string: bool) -> Option<usize> {
    if !string {
        return (bytes.len() >= 8).then_some(8);
    }
    let mut i = 0;
    loop {
        match (bytes.get(i)?, bytes.get(i + 1)) {
            (0, Some(&END)) => return Some(i + 2),
            (0, Some(&ESCAPED_ZERO)) => i += 2,
            (0, _) => return None,
            _ => i += 1,
        }
    }
}

/// The value of type `dtype` whose sort key starts `bytes` (the inverse
/// of [`sort_key`]); `None` when `bytes` does not start with one.
pub fn value_of(bytes: &[u8], dtype: DataType) -> Option<Value> {
    let len = sort_key_len(bytes, dtype == DataType::String)?;
    let bytes = &bytes[..len];
    let number = || u64::from_be_bytes(bytes.try_into().expect("eight bytes"));
    match dtype {
        DataType::String => {
            let mut out = Vec::with_capacity(len - 2);
            let mut i = 0;
            while i < len - 2 {
                out.push(bytes[i]);
                i += if bytes[i] == 0 { 2 } else { 1 };
            }
            Some(Value::String(out))
        }
        DataType::Int => Some(Value::Int((number() ^ (1 << 63)) as i64)),
        DataType::Timestamp(_) => Some(Value::Timestamp((number() ^ (1 << 63)) as i64)),
        DataType::Float => {
            let c = number();
            let bits = if c >> 63 == 1 { c & !(1 << 63) } else { !c };
            Some(Value::Float(f64::from_bits(bits)))
        }
        _ => None,
    }
}

/// A 64-bit coordinate that never decreases as `value` grows (see the
/// module docs); `None` for documents and containers.
pub fn order_coordinate(value: &Value) -> Option<u64> {
    match value {
        Value::String(bytes) => {
            let mut prefix = [0u8; 8];
            let n = bytes.len().min(8);
            prefix[..n].copy_from_slice(&bytes[..n]);
            Some(u64::from_be_bytes(prefix))
        }
        Value::Int(i) | Value::Timestamp(i) => Some(int_coordinate(*i)),
        Value::Float(f) => Some(float_coordinate(*f)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    /// The order of two values of one type, as searches compare them.
    #[test]
    fn a_sort_key_is_found_again_at_the_start_of_an_entry() {
        for text in [&b""[..], b"a", b"\0", b"a\0b", b"\0\0\x01", b"\xff\0"] {
            let key = sort_key(&Value::String(text.to_vec())).expect("a string");
            let mut entry = key.clone();
            entry.extend_from_slice(b"\0\x01key");
            assert_eq!(sort_key_len(&entry, true), Some(key.len()), "{text:?}");
            assert_eq!(sort_key_len(&key[..key.len() - 1], true), None);
        }
        assert_eq!(sort_key_len(&[0, 7], true), None);
        assert_eq!(sort_key_len(&[1; 12], false), Some(8));
        assert_eq!(sort_key_len(&[1; 7], false), None);
    }

    proptest! {
        #[test]
        fn a_value_comes_back_from_its_sort_key(
            text in proptest::collection::vec(any::<u8>(), 0..12),
            i in any::<i64>(),
            f in any::<f64>().prop_filter("no NaN, no -0.0", |f| !(f.is_nan() || *f == 0.0 && f.is_sign_negative())),
        ) {
            for (value, dtype) in [
                (Value::String(text.clone()), DataType::String),
                (Value::Int(i), DataType::Int),
                (Value::Timestamp(i), DataType::Timestamp(crate::value::TimeUnit::Second)),
                (Value::Float(f), DataType::Float),
            ] {
                let mut entry = sort_key(&value).expect("scalar");
                entry.extend_from_slice(b"key");
                prop_assert_eq!(value_of(&entry, dtype), Some(value));
            }
        }
    }

    fn value_order(a: &Value, b: &Value) -> Ordering {
        match (a, b) {
            (Value::String(a), Value::String(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) | (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.partial_cmp(b).expect("no NaN here"),
            _ => unreachable!("one type per pair"),
        }
    }

    /// Pairs of values of one type; strings drawn from a small alphabet
    /// with zeros, so that prefixes, shared bytes and escapes are common.
    fn same_type_pair() -> impl Strategy<Value = (Value, Value)> {
        let bytes =
            || prop::collection::vec(prop::sample::select(vec![0u8, 1, 0xFF, b'a', b'b']), 0..10);
        let float = || {
            prop_oneof![
                any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
                Just(0.0),
                Just(-0.0),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
            ]
        };
        prop_oneof![
            (bytes(), bytes()).prop_map(|(a, b)| (Value::String(a), Value::String(b))),
            (any::<i64>(), any::<i64>()).prop_map(|(a, b)| (Value::Int(a), Value::Int(b))),
            (any::<i64>(), any::<i64>())
                .prop_map(|(a, b)| (Value::Timestamp(a), Value::Timestamp(b))),
            (float(), float()).prop_map(|(a, b)| (Value::Float(a), Value::Float(b))),
        ]
    }

    proptest! {
        /// The encodings order like the values, whatever follows them.
        #[test]
        fn sort_keys_order_like_the_values(
            (a, b) in same_type_pair(),
            tail_a in prop::collection::vec(any::<u8>(), 0..6),
            tail_b in prop::collection::vec(any::<u8>(), 0..6),
        ) {
            let (ka, kb) = (sort_key(&a).unwrap(), sort_key(&b).unwrap());
            let expected = value_order(&a, &b);
            prop_assert_eq!(ka.cmp(&kb), expected);
            if expected != Ordering::Equal {
                let mut ea = ka.clone();
                ea.extend(&tail_a);
                let mut eb = kb.clone();
                eb.extend(&tail_b);
                prop_assert_eq!(ea.cmp(&eb), expected, "with entries' suffixes");
            }
        }

        /// Order coordinates never go the other way.
        #[test]
        fn order_coordinates_never_decrease((a, b) in same_type_pair()) {
            let (ca, cb) = (order_coordinate(&a).unwrap(), order_coordinate(&b).unwrap());
            if value_order(&a, &b) == Ordering::Less {
                prop_assert!(ca <= cb, "{:?} < {:?} but {} > {}", a, b, ca, cb);
            }
        }
    }

    #[test]
    fn strings_escape_zeros_and_end_with_a_terminator() {
        assert_eq!(sort_key(&Value::str("")), Some(vec![0, 1]));
        assert_eq!(
            sort_key(&Value::String(vec![b'a', 0, b'b'])),
            Some(vec![b'a', 0, 0xFF, b'b', 0, 1])
        );
        // A shorter string sorts first even when the longer one continues
        // with a zero byte.
        assert!(sort_key(&Value::str("a")) < sort_key(&Value::String(vec![b'a', 0])));
    }

    #[test]
    fn documents_and_containers_have_no_sort_key() {
        for value in [
            Value::Document("{}".into()),
            Value::List(vec![]),
            Value::Set(vec![]),
            Value::Map(vec![]),
        ] {
            assert_eq!(sort_key(&value), None);
            assert_eq!(order_coordinate(&value), None);
        }
    }
}
