//! The byte layout of index entries: `slot (u32 BE) ++ coordinate (u64 BE)
//! ++ storage key`, so that the entries of one slot sort by coordinate. A
//! slot is an attribute's position or a path index's number
//! ([`super::slot`]).

use super::slot::Slot;
use tessera_protocol::{DecodeObjectError, ObjectView};
use tessera_types::sortkey::sort_key;
use tessera_types::{Object, Value};

const SLOT_BYTES: usize = 4;
const COORD_BYTES: usize = 8;
const PREFIX_BYTES: usize = SLOT_BYTES + COORD_BYTES;

/// The index entry of an object with storage key `key` whose value in
/// slot number `slot` has coordinate `coordinate`.
pub fn entry(slot: usize, coordinate: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_BYTES + key.len());
    out.extend_from_slice(&slot_bytes(slot));
    out.extend_from_slice(&coordinate.to_be_bytes());
    out.extend_from_slice(key);
    out
}

fn slot_bytes(slot: usize) -> [u8; SLOT_BYTES] {
    u32::try_from(slot).unwrap_or(u32::MAX).to_be_bytes()
}

/// The slot number, coordinate and storage key of an entry; `None` if it
/// is too short to be one.
pub fn entry_parts(entry: &[u8]) -> Option<(usize, u64, &[u8])> {
    let slot = u32::from_be_bytes(entry.get(..SLOT_BYTES)?.try_into().ok()?);
    let coord = u64::from_be_bytes(entry.get(SLOT_BYTES..PREFIX_BYTES)?.try_into().ok()?);
    Some((slot as usize, coord, &entry[PREFIX_BYTES..]))
}

/// The entry of an object with storage key `key` in ordered slot number
/// `slot`, whose value has sort key `sort_key`: `slot ++ sort key ++
/// storage key`. Sort keys are self-delimiting, so entries order by value
/// first, then by key.
pub fn ordered_entry(slot: usize, sort_key: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SLOT_BYTES + sort_key.len() + key.len());
    out.extend_from_slice(&slot_bytes(slot));
    out.extend_from_slice(sort_key);
    out.extend_from_slice(key);
    out
}

/// The entries of `object` (stored under `key`) for the slots `slots`.
pub fn object_entries(slots: &[Slot], object: &Object, key: &[u8]) -> Vec<Vec<u8>> {
    slots
        .iter()
        .filter_map(|slot| slot_entry(slot, object.values.get(slot.attr())?, key))
        .collect()
}

/// [`object_entries`] of an object read in place: decodes only the
/// attributes the slots read (the write path computes the entries of the
/// old and the new record of every write, and objects are mostly
/// attributes no region indexes).
pub fn view_entries(
    slots: &[Slot],
    object: &ObjectView<'_>,
    key: &[u8],
) -> Result<Vec<Vec<u8>>, DecodeObjectError> {
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        if let Some(value) = object.value(slot.attr())? {
            out.extend(slot_entry(slot, &value, key));
        }
    }
    Ok(out)
}

/// The entry of an object whose value of the slot's attribute is `value`
/// (none: that value has no entry in this slot).
fn slot_entry(slot: &Slot, value: &Value, key: &[u8]) -> Option<Vec<u8>> {
    match slot {
        Slot::Ordered(_) => Some(ordered_entry(slot.number(), &sort_key(value)?, key)),
        _ => Some(entry(slot.number(), slot.value_coordinate(value)?, key)),
    }
}

/// The first entry (inclusive) and the end (exclusive; `None`: the last
/// entry of the index) of the entries of slot number `slot` whose
/// coordinate lies in the inclusive interval.
pub fn entry_bounds(slot: usize, (lo, hi): (u64, u64)) -> (Vec<u8>, Option<Vec<u8>>) {
    let prefix = slot_bytes(slot);
    let mut start = prefix.to_vec();
    start.extend_from_slice(&lo.to_be_bytes());
    let end = match hi.checked_add(1) {
        Some(next) => {
            let mut end = prefix.to_vec();
            end.extend_from_slice(&next.to_be_bytes());
            Some(end)
        }
        None => u32::from_be_bytes(prefix)
            .checked_add(1)
            .map(|n| n.to_be_bytes().to_vec()),
    };
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_protocol::ObjectBytes;
    use tessera_types::value::parse_doc_path;

    fn slots() -> Vec<Slot> {
        vec![
            Slot::Attr(0),
            Slot::Attr(2),
            Slot::Ordered(1),
            Slot::Attr(5), // past the end of most objects: no entry
            Slot::Path {
                slot: super::super::PATH_SLOT_BASE | 7,
                attr: 3,
                steps: parse_doc_path("a.b").expect("a path"),
            },
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::Int),
            "[a-z]{0,12}".prop_map(|s| Value::str(&s)),
            any::<i64>().prop_map(Value::Timestamp),
            proptest::collection::vec(any::<i64>().prop_map(Value::Int), 0..3)
                .prop_map(Value::List),
            (-1e6f64..1e6).prop_map(Value::Float),
            (any::<i64>(), "[a-z]{0,4}").prop_map(|(n, s)| Value::Document(format!(
                "{{\"a\": {{\"b\": {n}}}, \"c\": \"{s}\"}}"
            ))),
            Just(Value::Document("[1, 2]".to_string())),
        ]
    }

    proptest! {
        /// Read in place, an object has exactly the entries its decoded
        /// form has.
        #[test]
        fn entries_read_in_place_are_the_decoded_objects(
            values in proptest::collection::vec(value(), 0..7),
            key in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let object = Object { values };
            let bytes = ObjectBytes::encode(&object);
            let view = bytes.view().expect("an encoded object");
            prop_assert_eq!(
                view_entries(&slots(), &view, &key).expect("well-formed"),
                object_entries(&slots(), &object, &key)
            );
        }
    }
}
