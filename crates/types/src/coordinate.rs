//! Coordinates: where a value lies on its attribute's axis (a `u64`), and the
//! canonical byte form of a key.
//!
//! The byte-level rules are written down in `docs/PROTOCOL.md` (section
//! "Coordinates"); every client and daemon must compute the same numbers, so
//! nothing here may change without a format change.
//!
//! - Strings hash with [`string_hash`]: equality prunes, ranges do not.
//! - Ints and timestamps map by [`int_coordinate`] and floats by
//!   [`float_coordinate`], both order-preserving, so a range of values is a
//!   range of coordinates and prunes regions.
//!
//! Zero: `-0.0` and `+0.0` are equal under the predicates (IEEE `==`), so they
//! must land in the same region: [`float_coordinate`] maps both to the
//! coordinate of `+0.0`. For all non-NaN floats `a`, `b`:
//! `a < b ⇔ float_coordinate(a) < float_coordinate(b)` and
//! `a == b ⇔ float_coordinate(a) == float_coordinate(b)`.

use crate::value::Value;

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The fixed 64-bit hash of a byte string used for placement.
///
/// FNV-1a 64 over the bytes, then the splitmix64 finalizer. FNV-1a alone
/// mixes poorly into the high bits for short inputs, and regions cut the axis
/// into ranges (by the high bits), so the finalizer spreads every input bit
/// over the whole word.
///
/// ```
/// use tessera_types::coordinate::string_hash;
/// assert_eq!(string_hash(b"tessera"), 0x3c4b_28a1_6b8e_3b43);
/// ```
pub fn string_hash(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    splitmix64_finalize(h)
}

/// The splitmix64 finalizer (a bijection on `u64`).
fn splitmix64_finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Order-preserving coordinate of an i64: the two's-complement bits with the
/// sign bit flipped, so `i64::MIN → 0`, `0 → 2^63`, `i64::MAX → u64::MAX`.
/// A bijection: `a < b ⇔ int_coordinate(a) < int_coordinate(b)`.
pub fn int_coordinate(i: i64) -> u64 {
    (i as u64) ^ (1 << 63)
}

/// Order-preserving coordinate of an f64 (IEEE-754 total order).
///
/// Negative floats (sign bit set) have all bits inverted; non-negative ones
/// have the sign bit set. `-0.0` is first replaced by `+0.0` (see the module
/// docs). NaNs land beyond the infinities: negative NaNs below `-inf`,
/// positive NaNs above `+inf`.
pub fn float_coordinate(f: f64) -> u64 {
    // -0.0 == 0.0, so they must share a coordinate: both take +0.0's bits.
    // Every other value (NaN payloads included) keeps its own bits.
    let bits = if f == 0.0 { 0 } else { f.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The coordinate of a hashable value; `None` for containers and documents.
///
/// Timestamps map like ints (order-preserving over the microsecond count), so
/// ranges over time prune; values within one interval of the attribute's unit
/// are adjacent on the axis anyway, which is what the unit asks for.
pub fn coordinate(value: &Value) -> Option<u64> {
    match value {
        Value::String(b) => Some(string_hash(b)),
        Value::Int(i) => Some(int_coordinate(*i)),
        Value::Float(f) => Some(float_coordinate(*f)),
        Value::Timestamp(t) => Some(int_coordinate(*t)),
        _ => None,
    }
}

/// Tag bytes of [`key_bytes`], one per value kind.
mod tag {
    pub const STRING: u8 = 0x01;
    pub const INT: u8 = 0x02;
    pub const FLOAT: u8 = 0x03;
    pub const TIMESTAMP: u8 = 0x04;
    pub const DOCUMENT: u8 = 0x05;
    pub const LIST: u8 = 0x06;
    pub const SET: u8 = 0x07;
    pub const MAP: u8 = 0x08;
}

/// The canonical byte encoding of a key value: the storage key of an object.
///
/// Layout: one tag byte for the value's kind, then
///
/// | kind | tag | body |
/// | --- | --- | --- |
/// | string | `0x01` | the bytes, as they are |
/// | int | `0x02` | `int_coordinate(i)`, 8 bytes big-endian |
/// | float | `0x03` | `float_coordinate(f)`, 8 bytes big-endian |
/// | timestamp | `0x04` | `int_coordinate(t)`, 8 bytes big-endian |
///
/// Within one kind, byte order equals value order, so an engine's key order is
/// the value order. The encoding is injective on values up to float equality:
/// `-0.0` and `+0.0` are the same key (they are equal), and two NaNs are the
/// same key only when their bits are equal. Keys are hashable by schema, but
/// so that this function is total the other kinds are encoded too (`0x05`
/// document: the JSON text; `0x06` list / `0x07` set: per element a 4-byte
/// big-endian length and that element's `key_bytes`; `0x08` map: the same per
/// key and per value, alternating).
pub fn key_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_key_bytes(value, &mut out);
    out
}

/// The key value whose [`key_bytes`] are `bytes`, for the kinds a key can
/// have (string, int, float, timestamp); `None` for anything else. A
/// tombstone keeps no object, so this is how its key is known again.
pub fn key_value(bytes: &[u8]) -> Option<Value> {
    let (&kind, body) = bytes.split_first()?;
    let word = || body.try_into().ok().map(u64::from_be_bytes);
    match kind {
        tag::STRING => Some(Value::String(body.to_vec())),
        tag::INT => Some(Value::Int((word()? ^ (1 << 63)) as i64)),
        tag::TIMESTAMP => Some(Value::Timestamp((word()? ^ (1 << 63)) as i64)),
        tag::FLOAT => {
            let c = word()?;
            let bits = if c >> 63 == 1 { c & !(1 << 63) } else { !c };
            Some(Value::Float(f64::from_bits(bits)))
        }
        _ => None,
    }
}

fn write_key_bytes(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(b) => {
            out.push(tag::STRING);
            out.extend_from_slice(b);
        }
        Value::Int(i) => {
            out.push(tag::INT);
            out.extend_from_slice(&int_coordinate(*i).to_be_bytes());
        }
        Value::Float(f) => {
            out.push(tag::FLOAT);
            out.extend_from_slice(&float_coordinate(*f).to_be_bytes());
        }
        Value::Timestamp(t) => {
            out.push(tag::TIMESTAMP);
            out.extend_from_slice(&int_coordinate(*t).to_be_bytes());
        }
        Value::Document(text) => {
            out.push(tag::DOCUMENT);
            out.extend_from_slice(text.as_bytes());
        }
        Value::List(items) => {
            out.push(tag::LIST);
            for item in items {
                write_nested(item, out);
            }
        }
        Value::Set(items) => {
            out.push(tag::SET);
            for item in items {
                write_nested(item, out);
            }
        }
        Value::Map(entries) => {
            out.push(tag::MAP);
            for (k, v) in entries {
                write_nested(k, out);
                write_nested(v, out);
            }
        }
    }
}

/// A length-prefixed nested encoding, so that concatenations stay injective.
fn write_nested(value: &Value, out: &mut Vec<u8>) {
    let inner = key_bytes(value);
    let len = u32::try_from(inner.len()).expect("a container element is smaller than 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Vectors computed independently (a short Python script implementing
    /// FNV-1a 64 + splitmix64 finalizer); also listed in docs/PROTOCOL.md.
    #[test]
    fn string_hash_vectors() {
        let vectors: &[(&[u8], u64)] = &[
            (b"", 0xf52a_15e9_a9b5_e89b),
            (b"a", 0x02c0_bdbf_4814_20f8),
            (b"hello", 0x16fe_05a1_c75b_cd0f),
            (b"tessera", 0x3c4b_28a1_6b8e_3b43),
            (b"\x00", 0x25fc_6dd3_6ce0_4b20),
            (b"foobar", 0x404d_a9e3_b740_78c2),
        ];
        for (input, expected) in vectors {
            assert_eq!(string_hash(input), *expected, "input {input:?}");
        }
    }

    #[test]
    fn fnv_core_matches_published_vectors() {
        // The published FNV-1a 64 test vectors, checked on the state before
        // the finalizer.
        fn fnv1a(bytes: &[u8]) -> u64 {
            let mut h = FNV_OFFSET;
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(FNV_PRIME);
            }
            h
        }
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(
            string_hash(b"foobar"),
            splitmix64_finalize(0x8594_4171_f739_67e8)
        );
    }

    #[test]
    fn int_coordinate_endpoints() {
        assert_eq!(int_coordinate(i64::MIN), 0);
        assert_eq!(int_coordinate(-1), (1 << 63) - 1);
        assert_eq!(int_coordinate(0), 1 << 63);
        assert_eq!(int_coordinate(i64::MAX), u64::MAX);
    }

    #[test]
    fn float_coordinate_landmarks() {
        assert_eq!(float_coordinate(0.0), 1 << 63);
        assert_eq!(float_coordinate(-0.0), 1 << 63);
        assert_eq!(float_coordinate(1.0), 0x3ff0_0000_0000_0000 | (1 << 63));
        assert_eq!(float_coordinate(-1.0), !0xbff0_0000_0000_0000u64);
        assert!(float_coordinate(f64::NEG_INFINITY) < float_coordinate(f64::MIN));
        assert!(float_coordinate(f64::MAX) < float_coordinate(f64::INFINITY));
        assert!(float_coordinate(f64::INFINITY) < float_coordinate(f64::NAN));
        assert!(float_coordinate(-f64::NAN) < float_coordinate(f64::NEG_INFINITY));
        // The smallest subnormals sit right next to zero.
        assert_eq!(float_coordinate(f64::from_bits(1)), (1 << 63) + 1);
        // (2^63 - 1 would be -0.0, which shares +0.0's coordinate.)
        assert_eq!(float_coordinate(-f64::from_bits(1)), (1 << 63) - 2);
    }

    /// The encoding vectors of docs/PROTOCOL.md (computed with Python's
    /// `struct` module).
    #[test]
    fn protocol_doc_vectors() {
        assert_eq!(int_coordinate(0), 0x8000_0000_0000_0000);
        assert_eq!(int_coordinate(-1), 0x7fff_ffff_ffff_ffff);
        assert_eq!(int_coordinate(5), 0x8000_0000_0000_0005);
        assert_eq!(float_coordinate(1.0), 0xbff0_0000_0000_0000);
        assert_eq!(float_coordinate(-1.0), 0x400f_ffff_ffff_ffff);
        assert_eq!(float_coordinate(2.5), 0xc004_0000_0000_0000);
        assert_eq!(float_coordinate(f64::INFINITY), 0xfff0_0000_0000_0000);
        assert_eq!(float_coordinate(f64::NEG_INFINITY), 0x000f_ffff_ffff_ffff);
        assert_eq!(float_coordinate(-0.0), 0x8000_0000_0000_0000);
        assert_eq!(
            crate::region::uniform_splits(3),
            vec![0x5555_5555_5555_5555, 0xaaaa_aaaa_aaaa_aaaa]
        );
    }

    #[test]
    fn coordinate_of_each_kind() {
        assert_eq!(coordinate(&Value::str("a")), Some(string_hash(b"a")));
        assert_eq!(coordinate(&Value::Int(5)), Some(int_coordinate(5)));
        assert_eq!(coordinate(&Value::Timestamp(-5)), Some(int_coordinate(-5)));
        assert_eq!(coordinate(&Value::Float(2.5)), Some(float_coordinate(2.5)));
        assert_eq!(coordinate(&Value::List(vec![])), None);
        assert_eq!(coordinate(&Value::Document("{}".into())), None);
    }

    #[test]
    fn key_bytes_layout() {
        assert_eq!(key_bytes(&Value::str("ab")), vec![0x01, b'a', b'b']);
        assert_eq!(
            key_bytes(&Value::Int(0)),
            vec![0x02, 0x80, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            key_bytes(&Value::Int(-1)),
            vec![0x02, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            key_bytes(&Value::Timestamp(1)),
            vec![0x04, 0x80, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            key_bytes(&Value::Float(1.0)),
            vec![0x03, 0xbf, 0xf0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            key_bytes(&Value::Float(-0.0)),
            key_bytes(&Value::Float(0.0))
        );
        assert_ne!(key_bytes(&Value::Int(0)), key_bytes(&Value::Timestamp(0)));
        assert_eq!(
            key_bytes(&Value::List(vec![Value::str("a")])),
            vec![0x06, 0, 0, 0, 2, 0x01, b'a']
        );
        // Length prefixes keep nested concatenations apart.
        assert_ne!(
            key_bytes(&Value::List(vec![Value::str("ab"), Value::str("")])),
            key_bytes(&Value::List(vec![Value::str("a"), Value::str("b")]))
        );
    }

    fn finite_or_inf() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::MIN_POSITIVE),
            (-1000i32..1000).prop_map(f64::from),
        ]
    }

    proptest! {
        /// Keys of every kind a key can have come back from their bytes.
        #[test]
        fn key_values_come_back_from_their_bytes(
            i in any::<i64>(),
            f in any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
            s in prop::collection::vec(any::<u8>(), 0..12),
        ) {
            for value in [Value::Int(i), Value::Timestamp(i), Value::String(s.clone())] {
                prop_assert_eq!(key_value(&key_bytes(&value)), Some(value));
            }
            // -0.0 and +0.0 are one key, which comes back as +0.0.
            let back = key_value(&key_bytes(&Value::Float(f)));
            prop_assert_eq!(back, Some(Value::Float(if f == 0.0 { 0.0 } else { f })));
            prop_assert_eq!(key_value(&key_bytes(&Value::Document("{}".into()))), None);
            prop_assert_eq!(key_value(&[tag::INT, 1, 2]), None);
            prop_assert_eq!(key_value(&[]), None);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn int_order_preserved(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a < b, int_coordinate(a) < int_coordinate(b));
            prop_assert_eq!(a == b, int_coordinate(a) == int_coordinate(b));
        }

        #[test]
        fn float_order_preserved(a in finite_or_inf(), b in finite_or_inf()) {
            prop_assert_eq!(a < b, float_coordinate(a) < float_coordinate(b));
            prop_assert_eq!(a == b, float_coordinate(a) == float_coordinate(b));
        }

        #[test]
        fn key_bytes_order_and_injectivity_for_ints(a in any::<i64>(), b in any::<i64>()) {
            let (ka, kb) = (key_bytes(&Value::Int(a)), key_bytes(&Value::Int(b)));
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn key_bytes_order_for_floats(a in finite_or_inf(), b in finite_or_inf()) {
            let (ka, kb) = (key_bytes(&Value::Float(a)), key_bytes(&Value::Float(b)));
            prop_assert_eq!(a.partial_cmp(&b), Some(ka.cmp(&kb)));
        }

        #[test]
        fn key_bytes_injective_for_strings(
            a in proptest::collection::vec(any::<u8>(), 0..8),
            b in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let (ka, kb) = (key_bytes(&Value::String(a.clone())), key_bytes(&Value::String(b.clone())));
            prop_assert_eq!(a == b, ka == kb);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }
    }
}
