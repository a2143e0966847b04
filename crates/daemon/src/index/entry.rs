//! The byte layout of index entries: `slot (u32 BE) ++ coordinate (u64 BE)
//! ++ storage key`, so that the entries of one slot sort by coordinate. A
//! slot is an attribute's position or a path index's number
//! ([`super::slot`]).

use super::slot::Slot;
use tessera_types::sortkey::sort_key;
use tessera_types::Object;

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
        .filter_map(|slot| match slot {
            Slot::Ordered(attr) => {
                let value = object.values.get(*attr)?;
                Some(ordered_entry(slot.number(), &sort_key(value)?, key))
            }
            _ => Some(entry(slot.number(), slot.coordinate(object)?, key)),
        })
        .collect()
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
