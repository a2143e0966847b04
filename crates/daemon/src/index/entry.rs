//! The byte layout of index entries: `attr (u32 BE) ++ coordinate (u64 BE)
//! ++ storage key`, so that the entries of one attribute sort by coordinate.

use tessera_types::coordinate::coordinate;
use tessera_types::Object;

const ATTR_BYTES: usize = 4;
const COORD_BYTES: usize = 8;
const PREFIX_BYTES: usize = ATTR_BYTES + COORD_BYTES;

/// The index entry of an object with storage key `key` whose attribute
/// `attr` has coordinate `coordinate`.
pub fn entry(attr: usize, coordinate: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_BYTES + key.len());
    out.extend_from_slice(&attr_bytes(attr));
    out.extend_from_slice(&coordinate.to_be_bytes());
    out.extend_from_slice(key);
    out
}

fn attr_bytes(attr: usize) -> [u8; ATTR_BYTES] {
    u32::try_from(attr).unwrap_or(u32::MAX).to_be_bytes()
}

/// The attribute, coordinate and storage key of an entry; `None` if it is
/// too short to be one.
pub fn entry_parts(entry: &[u8]) -> Option<(usize, u64, &[u8])> {
    let attr = u32::from_be_bytes(entry.get(..ATTR_BYTES)?.try_into().ok()?);
    let coord = u64::from_be_bytes(entry.get(ATTR_BYTES..PREFIX_BYTES)?.try_into().ok()?);
    Some((attr as usize, coord, &entry[PREFIX_BYTES..]))
}

/// The entries of `object` (stored under `key`) for the attributes `attrs`.
pub fn object_entries(attrs: &[usize], object: &Object, key: &[u8]) -> Vec<Vec<u8>> {
    attrs
        .iter()
        .filter_map(|&a| {
            let c = coordinate(object.values.get(a)?)?;
            Some(entry(a, c, key))
        })
        .collect()
}

/// The first entry (inclusive) and the end (exclusive; `None`: the last
/// entry of the index) of the entries of `attr` whose coordinate lies in the
/// inclusive interval.
pub fn entry_bounds(attr: usize, (lo, hi): (u64, u64)) -> (Vec<u8>, Option<Vec<u8>>) {
    let prefix = attr_bytes(attr);
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
