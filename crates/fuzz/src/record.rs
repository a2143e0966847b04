//! Target `record`: bytes as they lie on disk under a region — a stored
//! record value (`Record::decode`, also what state transfer ships) and an
//! index entry key (`index::entry_parts`).
//!
//! Checks: no panic, no oversized allocation; an accepted record encodes
//! to bytes that decode and encode the same again; an entry's parts put
//! back together are the entry.

use crate::runner::{outcome_of, Outcome, Target};
use crate::samples;
use tessera_daemon::index::{entry, entry_parts};
use tessera_daemon::record::Record;

pub const TARGET: Target = Target {
    name: "record",
    about: "Record::decode and index entry_parts; accepted input re-encodes stably",
    seeds,
    dictionary: &[],
    input_bytes_max: 4096,
    run,
};

fn run(data: &[u8]) -> Outcome {
    let decoded = Record::decode(data);
    if let Ok(record) = &decoded {
        let bytes = record.encode();
        let again = Record::decode(&bytes).expect("an encoded record decodes");
        // Compared as bytes: a float NaN is not equal to itself as a value.
        assert_eq!(again.encode(), bytes, "re-encoding changed {record:?}");
    }
    if let Some((attr, coordinate, key)) = entry_parts(data) {
        assert_eq!(entry(attr, coordinate, key), data, "entry parts lost bytes");
    }
    outcome_of(&decoded)
}

fn seeds() -> Vec<Vec<u8>> {
    samples::records().iter().map(Record::encode).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode_to_the_records_they_encode() {
        for record in samples::records() {
            let decoded = Record::decode(&record.encode()).expect("a seed decodes");
            // The sample object holds a NaN: compare the encodings.
            assert_eq!(decoded.encode(), record.encode());
            assert_eq!(decoded.version, record.version);
        }
    }

    #[test]
    fn entries_split_at_their_documented_offsets() {
        // attr (u32 BE) ++ coordinate (u64 BE) ++ key bytes.
        let bytes = [0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 0, b'k', b'y'];
        assert_eq!(entry_parts(&bytes), Some((3, 256, &b"ky"[..])));
        assert_eq!(entry_parts(&bytes[..11]), None);
    }
}
