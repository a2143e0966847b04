//! Objects as bytes: the postcard encoding of an [`Object`] carried as it
//! was stored, and a reader that decodes only the values asked for.
//!
//! A daemon answers a search with the bytes of each matching object cut
//! out of its stored record ([`ObjectBytes`]), so it never re-encodes an
//! object, and it decodes only the attributes a check or the sort reads
//! ([`ObjectView`]). The client decodes each object once from those bytes.
//!
//! The layout is postcard's (docs/PROTOCOL.md): an object is a varint count
//! then its values; a value is a varint kind tag then
//!
//! | tag | kind      | body                                        |
//! | --- | --------- | ------------------------------------------- |
//! | 0   | string    | varint length, the bytes                    |
//! | 1   | int       | zigzag varint (at most 10 bytes)            |
//! | 2   | float     | 8 bytes, little-endian IEEE-754             |
//! | 3   | timestamp | zigzag varint (at most 10 bytes)            |
//! | 4   | document  | varint length, UTF-8 text                   |
//! | 5   | list      | varint count, that many values              |
//! | 6   | set       | varint count, that many values              |
//! | 7   | map       | varint count, that many (key, value) pairs  |
//!
//! [`skip_value`] walks this layout without allocating, so a reader finds
//! where each value lies and hands postcard only the ones it needs.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use tessera_types::{Check, Object, Value};

/// How deep containers may nest in bytes the skipper accepts. The schema
/// allows one level (a list, set or map of scalars); the bound keeps a
/// forged nesting from exhausting the stack, here or in postcard.
pub const NESTING_MAX: usize = 16;

/// Why bytes are not the encoding of a [`Value`] or an [`Object`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeObjectError {
    /// The bytes end inside a value, or a length points past their end.
    #[error("the bytes end inside a value")]
    Truncated,
    /// A varint runs longer than its type allows.
    #[error("a varint is longer than its type allows")]
    BadVarint,
    /// A value's tag names no kind of value.
    #[error("unknown value kind {0}")]
    UnknownKind(u32),
    /// A document's text is not UTF-8.
    #[error("a document is not UTF-8")]
    NotUtf8,
    /// Containers nest deeper than [`NESTING_MAX`].
    #[error("values nest deeper than {NESTING_MAX} levels")]
    TooDeep,
    /// Bytes follow the object's last value.
    #[error("{0} bytes follow the object")]
    TrailingBytes(usize),
    /// postcard refused a value the skipper delimited.
    #[error("a value does not decode: {0}")]
    Value(#[source] postcard::Error),
}

/// Reads a varint of at most `max_bytes` bytes at `*pos`, whose last byte
/// may hold at most `last_max` (postcard's rule), and moves `*pos` past it.
fn take_varint(
    bytes: &[u8],
    pos: &mut usize,
    max_bytes: usize,
    last_max: u8,
) -> Result<u64, DecodeObjectError> {
    // Most varints here (tags, short lengths) are one byte.
    if let Some(&byte) = bytes.get(*pos).filter(|&&b| b < 0x80) {
        *pos += 1;
        return Ok(u64::from(byte));
    }
    let mut out = 0u64;
    for i in 0..max_bytes {
        let byte = *bytes.get(*pos).ok_or(DecodeObjectError::Truncated)?;
        *pos += 1;
        out |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if i == max_bytes - 1 && byte > last_max {
                return Err(DecodeObjectError::BadVarint);
            }
            return Ok(out);
        }
    }
    Err(DecodeObjectError::BadVarint)
}

/// A varint `u64` (also postcard's `usize` and zigzag `i64`).
fn take_u64(bytes: &[u8], pos: &mut usize) -> Result<u64, DecodeObjectError> {
    take_varint(bytes, pos, 10, 0x01)
}

/// Moves `*pos` past `len` bytes, if there are that many.
fn take_bytes<'a>(
    bytes: &'a [u8],
    pos: &mut usize,
    len: u64,
) -> Result<&'a [u8], DecodeObjectError> {
    let rest = &bytes[*pos..];
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= rest.len())
        .ok_or(DecodeObjectError::Truncated)?;
    *pos += len;
    Ok(&rest[..len])
}

fn skip_at(bytes: &[u8], pos: &mut usize, depth: usize) -> Result<(), DecodeObjectError> {
    // The tag is a varint `u32`: at most 5 bytes, the last below 0x10.
    let tag = take_varint(bytes, pos, 5, 0x0f)?;
    match tag {
        0 => {
            let len = take_u64(bytes, pos)?;
            take_bytes(bytes, pos, len)?;
        }
        1 | 3 => {
            take_u64(bytes, pos)?;
        }
        2 => {
            take_bytes(bytes, pos, 8)?;
        }
        4 => {
            let len = take_u64(bytes, pos)?;
            let text = take_bytes(bytes, pos, len)?;
            std::str::from_utf8(text).map_err(|_| DecodeObjectError::NotUtf8)?;
        }
        5..=7 => {
            if depth >= NESTING_MAX {
                return Err(DecodeObjectError::TooDeep);
            }
            let count = take_u64(bytes, pos)?;
            let per_entry = if tag == 7 { 2 } else { 1 };
            // Each value takes at least one byte, so a forged count ends
            // at the end of the bytes, not after `count` iterations.
            for _ in 0..count {
                for _ in 0..per_entry {
                    skip_at(bytes, pos, depth + 1)?;
                }
            }
        }
        // The tag was read as at most 5 varint bytes, so it fits a u32.
        other => return Err(DecodeObjectError::UnknownKind(other as u32)),
    }
    Ok(())
}

/// Reads one byte of every 64-byte cache line of `bytes`, each load
/// independent of the others, so that the processor fetches the lines
/// together. Walking an object follows its lengths (each value's tag is
/// read only once the value before it has been skipped), so over a stored
/// record that is not in cache (the row cache's and the memtables'
/// records mostly are not) every line was a miss of its own, one after
/// the other; fetched together they cost about one.
#[inline]
pub fn touch_lines(bytes: &[u8]) {
    let mut seen = 0u8;
    for byte in bytes.iter().step_by(64) {
        seen ^= *byte;
    }
    std::hint::black_box(seen);
}

/// The number of bytes the encoded [`Value`] at the start of `bytes`
/// takes, found without decoding or allocating; an error for bytes that
/// postcard would refuse as a value (or that nest too deep).
pub fn skip_value(bytes: &[u8]) -> Result<usize, DecodeObjectError> {
    let mut pos = 0;
    skip_at(bytes, &mut pos, 0)?;
    Ok(pos)
}

/// An encoded object whose values have been delimited (so every one is
/// known to be well-formed) but not decoded.
#[derive(Clone, Copy, Debug)]
pub struct ObjectView<'a> {
    /// The whole encoding: the count, then the values.
    bytes: &'a [u8],
    /// Where the first value starts.
    values_at: usize,
    count: usize,
}

impl<'a> ObjectView<'a> {
    /// The object encoded at the start of `bytes`, and the bytes after it.
    pub fn take_from(bytes: &'a [u8]) -> Result<(ObjectView<'a>, &'a [u8]), DecodeObjectError> {
        touch_lines(bytes);
        let mut pos = 0;
        let count = take_u64(bytes, &mut pos)?;
        let values_at = pos;
        let mut seen = 0usize;
        // Each value takes at least one byte: a forged count fails at the
        // end of the bytes.
        while (seen as u64) < count {
            skip_at(bytes, &mut pos, 0)?;
            seen += 1;
        }
        let view = ObjectView {
            bytes: &bytes[..pos],
            values_at,
            count: seen,
        };
        Ok((view, &bytes[pos..]))
    }

    /// The object `bytes` encode, with nothing after it.
    pub fn parse(bytes: &'a [u8]) -> Result<ObjectView<'a>, DecodeObjectError> {
        match ObjectView::take_from(bytes)? {
            (view, []) => Ok(view),
            (_, rest) => Err(DecodeObjectError::TrailingBytes(rest.len())),
        }
    }

    /// The object's encoding.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// How many values the object has.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the object has no values.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The value of attribute `attr` (`None`: the object has fewer
    /// values), decoding that value only.
    pub fn value(&self, attr: usize) -> Result<Option<Value>, DecodeObjectError> {
        self.values().nth(attr).transpose()
    }

    /// The values in order, each decoded when the iterator reaches it
    /// (those passed over with `nth` are only skipped).
    pub fn values(&self) -> Values<'a> {
        Values {
            rest: &self.bytes[self.values_at..],
            left: self.count,
        }
    }

    /// The whole object.
    pub fn to_object(&self) -> Result<Object, DecodeObjectError> {
        Ok(Object {
            values: self.values().collect::<Result<_, _>>()?,
        })
    }

    /// Whether every check holds ([`Check::matches`] on the decoded
    /// object), decoding only the attributes the checks read.
    pub fn matches(&self, checks: &[Check]) -> Result<bool, DecodeObjectError> {
        for check in checks {
            if !check.matches_value(self.value(check.attr)?.as_ref()) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The values of an [`ObjectView`], decoded one at a time.
pub struct Values<'a> {
    rest: &'a [u8],
    left: usize,
}

impl Values<'_> {
    /// Passes over the next value without decoding it.
    fn skip_one(&mut self) -> Result<(), DecodeObjectError> {
        let len = skip_value(self.rest)?;
        self.rest = &self.rest[len..];
        self.left -= 1;
        Ok(())
    }
}

impl Iterator for Values<'_> {
    type Item = Result<Value, DecodeObjectError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The view delimited every value when it was made (so nesting is
        // bounded): postcard decodes straight from the bytes, in one pass.
        Some(match postcard::take_from_bytes(self.rest) {
            Ok((value, rest)) => {
                self.rest = rest;
                Ok(value)
            }
            Err(e) => {
                self.left = 0;
                Err(DecodeObjectError::Value(e))
            }
        })
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        for _ in 0..n.min(self.left) {
            if let Err(e) = self.skip_one() {
                self.left = 0;
                return Some(Err(e));
            }
        }
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// An object's postcard encoding as a daemon stored it, shipped without
/// being decoded and re-encoded. On the wire: one byte string. Bytes from
/// the wire are checked when read ([`ObjectBytes::view`]).
///
/// Decoded from a frame read by [`crate::frame::read_frame_shared`] (the
/// client's reader), the bytes stay where they arrived: the object holds
/// a share of the frame's buffer and its range, so a search page's
/// objects and a get's object are not copied out of the frame. The frame
/// lives while any object of it does (a page's worth of bytes). Anywhere
/// else, an object owns its bytes.
#[derive(Clone)]
pub struct ObjectBytes(Repr);

#[derive(Clone)]
enum Repr {
    Owned(Vec<u8>),
    /// `frame[start..end]`.
    InFrame {
        frame: Arc<Vec<u8>>,
        start: usize,
        end: usize,
    },
}

impl ObjectBytes {
    /// The bytes of an object already delimited in a stored record.
    pub fn from_view(view: ObjectView<'_>) -> ObjectBytes {
        ObjectBytes(Repr::Owned(view.bytes().to_vec()))
    }

    /// Encodes `object`.
    pub fn encode(object: &Object) -> ObjectBytes {
        ObjectBytes(Repr::Owned(
            postcard::to_allocvec(object).expect("encoding to a Vec cannot fail"),
        ))
    }

    /// The object, checked to be exactly one well-formed object.
    pub fn view(&self) -> Result<ObjectView<'_>, DecodeObjectError> {
        ObjectView::parse(self.as_bytes())
    }

    /// The encoding as it is, unchecked: for bytes this process encoded,
    /// or that [`ObjectBytes::view`] has checked.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Owned(bytes) => bytes,
            Repr::InFrame { frame, start, end } => &frame[*start..*end],
        }
    }

    /// The encoding, owned, unchecked (as [`ObjectBytes::as_bytes`]);
    /// copied out when it lies in a frame.
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Owned(bytes) => bytes,
            Repr::InFrame { frame, start, end } => frame[start..end].to_vec(),
        }
    }

    /// Whether the bytes lie in the frame they arrived in (not copied).
    pub fn in_frame(&self) -> bool {
        matches!(self.0, Repr::InFrame { .. })
    }

    /// The whole object, decoded.
    pub fn decode(&self) -> Result<Object, DecodeObjectError> {
        self.view()?.to_object()
    }

    /// The encoding's length in bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether the encoding is empty (which no object's is).
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
}

impl PartialEq for ObjectBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ObjectBytes {}

impl Serialize for ObjectBytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.as_bytes())
    }
}

impl<'de> Deserialize<'de> for ObjectBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_bytes(ObjectBytesVisitor)
    }
}

struct ObjectBytesVisitor;

impl<'de> serde::de::Visitor<'de> for ObjectBytesVisitor {
    type Value = ObjectBytes;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_borrowed_bytes<E: serde::de::Error>(self, v: &'de [u8]) -> Result<ObjectBytes, E> {
        Ok(ObjectBytes(match crate::frame::shared_range(v) {
            Some((frame, start)) => Repr::InFrame {
                frame,
                start,
                end: start + v.len(),
            },
            None => Repr::Owned(v.to_vec()),
        }))
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ObjectBytes, E> {
        Ok(ObjectBytes(Repr::Owned(v.to_vec())))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ObjectBytes, E> {
        Ok(ObjectBytes(Repr::Owned(v)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<ObjectBytes, A::Error> {
        // Formats without byte strings (JSON) write a sequence of bytes.
        tessera_types::value::byte_string::BytesVisitor
            .visit_seq(seq)
            .map(|v| ObjectBytes(Repr::Owned(v)))
    }
}

/// Shows the decoded object when the bytes hold one, so test failures
/// read as values.
impl fmt::Debug for ObjectBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.decode() {
            Ok(object) => f.debug_tuple("ObjectBytes").field(&object).finish(),
            Err(e) => write!(f, "ObjectBytes({} bytes, {e})", self.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_types::PredOp;

    fn arb_scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Value::String),
            any::<i64>().prop_map(Value::Int),
            any::<f64>().prop_map(Value::Float),
            any::<i64>().prop_map(Value::Timestamp),
            prop_oneof![
                (-5i64..5).prop_map(|n| format!("{{\"a\":{n}}}")),
                "[a-z]{0,3}".prop_map(|s| format!("{{\"a\":\"{s}\"}}")),
                ".{0,20}",
            ]
            .prop_map(Value::Document),
        ]
    }

    /// Values of every kind, containers nested up to three levels (deeper
    /// than the schema allows, to exercise the skipper's recursion).
    fn arb_value() -> impl Strategy<Value = Value> {
        arb_scalar().prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
                proptest::collection::vec((inner.clone(), inner), 0..4).prop_map(Value::Map),
            ]
        })
    }

    /// Operands near the values objects hold, so checks both pass and fail.
    fn arb_operand() -> impl Strategy<Value = Value> {
        prop_oneof![
            (-3i64..3).prop_map(Value::Int),
            (-3i64..3).prop_map(Value::Timestamp),
            (-2.0f64..2.0).prop_map(Value::Float),
            "[ab]{0,2}".prop_map(|s| Value::str(&s)),
        ]
    }

    fn arb_check() -> impl Strategy<Value = Check> {
        let op = prop_oneof![
            arb_operand().prop_map(PredOp::Eq),
            arb_operand().prop_map(PredOp::Lt),
            arb_operand().prop_map(PredOp::Le),
            arb_operand().prop_map(PredOp::Gt),
            arb_operand().prop_map(PredOp::Ge),
            arb_operand().prop_map(PredOp::Contains),
            (0u64..4).prop_map(PredOp::LenEq),
            (0u64..4).prop_map(PredOp::LenGe),
            Just(PredOp::Regex("a.*".into())),
        ];
        (0usize..8, op, proptest::option::of(Just("a".to_string())))
            .prop_map(|(attr, op, path)| Check { attr, op, path })
    }

    /// Objects whose values lie near the operands of [`arb_check`].
    fn arb_object() -> impl Strategy<Value = Object> {
        let near = prop_oneof![
            arb_operand(),
            proptest::collection::vec(arb_operand(), 0..4).prop_map(Value::List),
            (-3i64..3).prop_map(|n| Value::Document(format!("{{\"a\":{n}}}"))),
            arb_value(),
        ];
        proptest::collection::vec(near, 0..7).prop_map(|values| Object { values })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The skipper consumes exactly the bytes postcard wrote for a
        /// value, whatever follows them, and every shorter prefix is an
        /// error.
        #[test]
        fn the_skipper_consumes_exactly_one_encoded_value(
            value in arb_value(),
            after in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let encoded = postcard::to_allocvec(&value).unwrap();
            let mut bytes = encoded.clone();
            bytes.extend_from_slice(&after);
            prop_assert_eq!(skip_value(&bytes).unwrap(), encoded.len());
            for len in 0..encoded.len() {
                prop_assert!(skip_value(&encoded[..len]).is_err(), "prefix of {} bytes", len);
            }
        }

        /// On arbitrary bytes the skipper agrees with postcard: it accepts
        /// exactly the prefixes postcard decodes as a value, of the same
        /// length (values nest at most a few levels in so few bytes).
        #[test]
        fn the_skipper_agrees_with_postcard_on_any_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let skipped = skip_value(&bytes).ok();
            let decoded = postcard::take_from_bytes::<Value>(&bytes)
                .ok()
                .map(|(_, rest)| bytes.len() - rest.len());
            prop_assert_eq!(skipped, decoded);
        }

        /// Reading only some attributes gives what the full decode gives:
        /// each value, and the verdict of any checks.
        #[test]
        fn partial_reads_agree_with_the_full_decode(
            object in arb_object(),
            checks in proptest::collection::vec(arb_check(), 0..4),
        ) {
            let bytes = ObjectBytes::encode(&object);
            let view = bytes.view().unwrap();
            prop_assert_eq!(view.len(), object.values.len());
            for attr in 0..8 {
                prop_assert_eq!(view.value(attr).unwrap(), object.values.get(attr).cloned());
            }
            prop_assert_eq!(
                view.matches(&checks).unwrap(),
                checks.iter().all(|c| c.matches(&object))
            );
            prop_assert_eq!(bytes.decode().unwrap(), object);
        }

        /// Damaged object bytes are an error or some object, never a
        /// panic; cut short they are always an error.
        #[test]
        fn damaged_objects_are_refused(
            object in arb_object(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = ObjectBytes::encode(&object).into_vec();
            let i = at.index(bytes.len());
            prop_assert!(ObjectView::parse(&bytes[..i]).is_err());
            bytes[i] = byte;
            let _ = ObjectBytes(Repr::Owned(bytes)).decode();
        }
    }

    #[test]
    fn forged_nesting_and_lengths_are_typed_errors() {
        // A list of one list of one list … deeper than allowed.
        let mut deep = Vec::new();
        for _ in 0..=NESTING_MAX {
            deep.extend_from_slice(&[5, 1]);
        }
        deep.extend_from_slice(&[1, 0]);
        assert!(matches!(skip_value(&deep), Err(DecodeObjectError::TooDeep)));
        // A string claiming far more bytes than follow.
        let forged = [0u8, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3];
        assert!(matches!(
            skip_value(&forged),
            Err(DecodeObjectError::Truncated)
        ));
        // An object claiming 2^60 values.
        let forged = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 2];
        assert!(ObjectView::parse(&forged).is_err());
        // An unknown kind, and a varint of 11 bytes.
        assert!(matches!(
            skip_value(&[9]),
            Err(DecodeObjectError::UnknownKind(9))
        ));
        assert!(matches!(
            skip_value(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]),
            Err(DecodeObjectError::BadVarint)
        ));
        // Bytes after the object.
        let mut bytes = ObjectBytes::encode(&Object {
            values: vec![Value::Int(1)],
        })
        .into_vec();
        bytes.push(0);
        assert!(matches!(
            ObjectView::parse(&bytes),
            Err(DecodeObjectError::TrailingBytes(1))
        ));
    }

    /// On the wire the bytes are one byte string: a varint length, then
    /// the object's encoding unchanged.
    #[test]
    fn object_bytes_travel_as_one_byte_string() {
        let object = Object {
            values: vec![Value::str("k"), Value::Int(-2)],
        };
        let inner = postcard::to_allocvec(&object).unwrap();
        let wire = postcard::to_allocvec(&ObjectBytes::encode(&object)).unwrap();
        let mut expected = vec![inner.len() as u8];
        expected.extend_from_slice(&inner);
        assert_eq!(wire, expected);
        let back: ObjectBytes = postcard::from_bytes(&wire).unwrap();
        assert_eq!(back.decode().unwrap(), object);
    }
}
