//! The on-disk record of one key in one region (see docs/PROTOCOL.md).
//!
//! Value bytes: postcard of [`Record`]. A delete, or an object leaving a
//! region, leaves a tombstone (`object: None`) so the key's version in that
//! region keeps increasing and a late copy of an older update is recognized.

use serde::{Deserialize, Serialize};
use tessera_protocol::{ClientRef, DecodeObjectError, ObjectView};
use tessera_storage::StorageError;
use tessera_types::{Object, Version};

/// Why stored bytes are not a [`Record`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeRecordError {
    /// The bytes are not a postcard-encoded record: damaged, or written by
    /// something else.
    #[error("corrupt record: {0}")]
    Corrupt(#[source] postcard::Error),
    /// The record's object is not a well-formed object.
    #[error("corrupt object in a record: {0}")]
    Object(#[from] DecodeObjectError),
}

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadRecordError {
    /// The engine failed to read.
    #[error("cannot read a record: {0}")]
    Storage(#[from] StorageError),
    /// The engine returned bytes that are not a record.
    #[error(transparent)]
    Decode(#[from] DecodeRecordError),
}

/// How many clients' latest updates of a key the key subspace remembers, so
/// that a retried update is recognized instead of applied twice.
///
/// Remembered per client rather than as the last N updates: a client whose
/// answer was lost retries within seconds, but on a busy key seconds are
/// many updates by others, and a window of the last N updates forgot the
/// original before the retry came (the chaos test saw a put applied twice).
/// A client's entries go only when it wrote the key again several times,
/// or when this many other clients wrote it since; the newest
/// [`RECENT_WRITES_MAX`] updates are kept in any case.
pub const RECENT_CLIENTS_MAX: usize = 16;

/// How many of one client's latest updates of a key are remembered (a
/// client may have several in flight at once).
pub const RECENT_PER_CLIENT_MAX: usize = 4;

/// How many of a key's latest updates are remembered whoever made them
/// (one client may pipeline many updates of one key).
pub const RECENT_WRITES_MAX: usize = 16;

/// Trims `recent` (newest last) to its newest [`RECENT_WRITES_MAX`]
/// entries and the newest [`RECENT_PER_CLIENT_MAX`] updates of each of the
/// [`RECENT_CLIENTS_MAX`] clients that wrote last.
pub fn trim_recent(recent: &mut Vec<(ClientRef, Version)>) {
    let mut kept_per_client: Vec<(u64, usize)> = Vec::new();
    let newest = recent.len().saturating_sub(RECENT_WRITES_MAX);
    let mut keep: Vec<bool> = (0..recent.len()).map(|i| i >= newest).collect();
    for (i, (client, _)) in recent.iter().enumerate().rev() {
        let known = kept_per_client
            .iter()
            .position(|(id, _)| *id == client.client_id);
        match known {
            Some(at) if kept_per_client[at].1 < RECENT_PER_CLIENT_MAX => {
                kept_per_client[at].1 += 1;
                keep[i] = true;
            }
            Some(_) => {}
            None if kept_per_client.len() < RECENT_CLIENTS_MAX => {
                kept_per_client.push((client.client_id, 1));
                keep[i] = true;
            }
            None => {}
        }
    }
    let mut keep = keep.into_iter();
    recent.retain(|_| keep.next().expect("one flag per entry"));
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: Version,
    pub object: Option<Object>,
    /// Key subspace, and every region of a replex space (whose key region
    /// may be rebuilt from the others): the latest updates' `(client id, request number)`
    /// with the version each produced, newest last (see [`trim_recent`]).
    pub recent: Vec<(ClientRef, Version)>,
}

/// What the write path reads of a stored record: its version and recent
/// writers, the object between them delimited but not decoded
/// ([`Record::decode_head`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordHead {
    pub version: Version,
    pub recent: Vec<(ClientRef, Version)>,
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("encoding to a Vec cannot fail")
    }

    /// The encoding of the record these parts make, the object given as
    /// its own encoding (as a chain forward carries it): postcard lays a
    /// record out as its fields one after another, so the object's bytes
    /// go in as they are, neither decoded nor re-encoded. The same bytes
    /// as [`Record::encode`] of the decoded parts.
    pub fn encode_parts(
        version: Version,
        object: Option<&[u8]>,
        recent: &[(ClientRef, Version)],
    ) -> Vec<u8> {
        // A version and a writer are at most 10 and 30 varint bytes.
        let capacity = 11 + object.map_or(0, <[u8]>::len) + 10 + 30 * recent.len();
        let mut out = Vec::with_capacity(capacity);
        let encoded = "encoding to a Vec cannot fail";
        out = postcard::to_extend(&version, out).expect(encoded);
        match object {
            None => out.push(0),
            Some(object) => {
                out.push(1);
                out.extend_from_slice(object);
            }
        }
        postcard::to_extend(recent, out).expect(encoded)
    }

    /// The version and recent writers of the record `bytes` encode, the
    /// object only delimited (checked well-formed, not decoded).
    pub fn decode_head(bytes: &[u8]) -> Result<RecordHead, DecodeRecordError> {
        let (version, _, rest) = Record::split(bytes)?;
        let recent = postcard::from_bytes(rest).map_err(DecodeRecordError::Corrupt)?;
        Ok(RecordHead { version, recent })
    }

    /// The record `bytes` encode, read in place along its postcard layout:
    /// the version, the object (an option: a 0 or 1 byte, then the object,
    /// delimited but not decoded; none for a tombstone), and the bytes
    /// after it, which encode the recent writers.
    pub fn split(
        bytes: &[u8],
    ) -> Result<(Version, Option<ObjectView<'_>>, &[u8]), DecodeRecordError> {
        let corrupt = DecodeRecordError::Corrupt;
        let (version, rest) = postcard::take_from_bytes::<Version>(bytes).map_err(corrupt)?;
        let (present, rest) = postcard::take_from_bytes::<u8>(rest).map_err(corrupt)?;
        match present {
            0 => Ok((version, None, rest)),
            1 => {
                let (object, rest) = ObjectView::take_from(rest)?;
                Ok((version, Some(object), rest))
            }
            _ => Err(corrupt(postcard::Error::DeserializeBadOption)),
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Record, DecodeRecordError> {
        postcard::from_bytes(bytes).map_err(DecodeRecordError::Corrupt)
    }

    /// The version of the record `bytes` encode, read without decoding the
    /// rest (the version is the record's first field). The rest is not
    /// checked: a record damaged after its version is refused by whatever
    /// reads the rest.
    pub fn decode_version(bytes: &[u8]) -> Result<Version, DecodeRecordError> {
        postcard::take_from_bytes::<Version>(bytes)
            .map(|(version, _)| version)
            .map_err(DecodeRecordError::Corrupt)
    }

    /// Whether the record `bytes` encode may be a tombstone, read without
    /// decoding the object (after the version comes the object's presence
    /// tag). Bytes that do not read as far say yes: whoever asks keeps
    /// looking rather than miss one.
    pub fn may_be_tombstone(bytes: &[u8]) -> bool {
        match postcard::take_from_bytes::<Version>(bytes) {
            Ok((_, rest)) => rest.first() != Some(&1),
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(client_id: u64, request_no: u64, version: u64) -> (ClientRef, Version) {
        (
            ClientRef {
                client_id,
                request_no,
            },
            Version(version),
        )
    }

    /// Appends one write and trims, as a commit does.
    fn write(recent: &mut Vec<(ClientRef, Version)>, client_id: u64, request_no: u64) {
        let version = recent.last().map_or(1, |(_, v)| v.0 + 1);
        recent.push(writer(client_id, request_no, version));
        trim_recent(recent);
    }

    fn remembers(recent: &[(ClientRef, Version)], client_id: u64, request_no: u64) -> bool {
        recent.iter().any(|(c, _)| {
            *c == ClientRef {
                client_id,
                request_no,
            }
        })
    }

    /// Every proper prefix of an encoded record is refused with a typed
    /// error (no panic), and the whole encoding reads back.
    #[test]
    fn truncated_records_are_corrupt() {
        let record = Record {
            version: Version(7),
            object: Some(Object {
                values: vec![
                    tessera_types::Value::str("k"),
                    tessera_types::Value::Int(-3),
                ],
            }),
            recent: vec![writer(1, 2, 7)],
        };
        let bytes = record.encode();
        for len in 0..bytes.len() {
            assert!(
                matches!(
                    Record::decode(&bytes[..len]),
                    Err(DecodeRecordError::Corrupt(_))
                ),
                "a prefix of {len} bytes decoded"
            );
        }
        assert_eq!(Record::decode(&bytes).unwrap(), record);
    }

    /// The version read alone is the version the whole record decodes
    /// with, for tombstones, objects and large versions alike.
    #[test]
    fn the_version_alone_is_the_records_version() {
        for (version, object) in [
            (0, None),
            (1, Some(Object { values: vec![] })),
            (u64::MAX, None),
            (
                (7 << 32) | 300,
                Some(Object {
                    values: vec![tessera_types::Value::str(&"x".repeat(300))],
                }),
            ),
        ] {
            let record = Record {
                version: Version(version),
                object,
                recent: vec![writer(1, 2, version)],
            };
            let bytes = record.encode();
            assert_eq!(
                Record::decode_version(&bytes).unwrap(),
                Record::decode(&bytes).unwrap().version
            );
        }
        assert!(Record::decode_version(&[]).is_err());
        assert!(Record::decode_version(&[0x80]).is_err());
    }

    /// A record's head read past its undecoded object is the version and
    /// recent writers the whole record decodes with; cut short, it is an
    /// error, never a panic.
    #[test]
    fn the_head_is_the_records_version_and_writers() {
        let wide = Object {
            values: vec![
                tessera_types::Value::str(&"x".repeat(300)),
                tessera_types::Value::List(vec![tessera_types::Value::Int(-1); 4]),
                tessera_types::Value::Document("{\"a\": 1}".into()),
            ],
        };
        for (version, object, recent) in [
            (0, None, vec![]),
            (1, Some(Object { values: vec![] }), vec![writer(1, 2, 1)]),
            (u64::MAX, None, vec![writer(3, 4, 5), writer(6, 7, 8)]),
            ((7 << 32) | 300, Some(wide), vec![writer(9, 1, 2)]),
        ] {
            let record = Record {
                version: Version(version),
                object,
                recent,
            };
            let bytes = record.encode();
            let whole = Record::decode(&bytes).unwrap();
            assert_eq!(
                Record::decode_head(&bytes).unwrap(),
                RecordHead {
                    version: whole.version,
                    recent: whole.recent
                }
            );
            for len in 0..bytes.len() {
                assert!(
                    Record::decode_head(&bytes[..len]).is_err(),
                    "a prefix of {len} bytes decoded"
                );
            }
        }
    }

    /// A record encoded from its object's bytes is the record encoded
    /// whole, and decodes to its parts.
    #[test]
    fn a_record_from_object_bytes_is_the_record() {
        use tessera_types::Value;
        let wide = Object {
            values: vec![
                Value::str("key"),
                Value::Int(-1),
                Value::Float(0.5),
                Value::List(vec![Value::Int(1), Value::str("x")]),
                Value::Map(vec![(Value::str("k"), Value::Timestamp(9))]),
                Value::Document("{\"a\": [1, 2]}".into()),
                Value::String(vec![0xff; 300]),
            ],
        };
        let writers: Vec<_> = (0..20).map(|n| writer(n, u64::MAX - n, 1 << n)).collect();
        for (version, object, recent) in [
            (0, None, vec![]),
            (1, Some(Object { values: vec![] }), vec![writer(1, 2, 1)]),
            (u64::MAX, None, writers.clone()),
            ((7 << 32) | 300, Some(wide), writers),
        ] {
            let record = Record {
                version: Version(version),
                object,
                recent,
            };
            let object = record
                .object
                .as_ref()
                .map(tessera_protocol::ObjectBytes::encode);
            let bytes = Record::encode_parts(
                record.version,
                object.as_ref().map(tessera_protocol::ObjectBytes::as_bytes),
                &record.recent,
            );
            assert_eq!(bytes, record.encode());
            assert_eq!(Record::decode(&bytes).unwrap(), record);
        }
    }

    /// Tombstones are recognised from their first bytes, objects are not
    /// taken for tombstones, and bytes cut short count as a possible one.
    #[test]
    fn tombstones_are_told_from_their_head() {
        for version in [0, 1, 300, u64::MAX] {
            let mut record = Record {
                version: Version(version),
                object: None,
                recent: vec![writer(1, 2, version)],
            };
            assert!(Record::may_be_tombstone(&record.encode()));
            record.object = Some(Object {
                values: vec![tessera_types::Value::Int(0)],
            });
            let bytes = record.encode();
            assert!(!Record::may_be_tombstone(&bytes));
            assert!(Record::may_be_tombstone(&bytes[..1]));
        }
        assert!(Record::may_be_tombstone(&[]));
    }

    #[test]
    fn a_clients_update_outlives_any_number_of_updates_by_a_few_others() {
        // (The last RECENT_WRITES_MAX updates alone, as before, forgot it.)
        let mut recent = Vec::new();
        write(&mut recent, 1, 7);
        for n in 0..1000 {
            write(&mut recent, 2 + n % 5, n);
        }
        assert!(remembers(&recent, 1, 7));
        // Besides the newest writes, each of the others keeps its newest few.
        assert_eq!(
            recent.len(),
            1 + RECENT_WRITES_MAX.max(5 * RECENT_PER_CLIENT_MAX)
        );
        assert!(remembers(&recent, 2 + 999 % 5, 999));
        assert!(!remembers(&recent, 2, 0));
    }

    #[test]
    fn a_client_keeps_its_newest_updates_and_the_newest_clients_stay() {
        let mut recent = Vec::new();
        let writes = RECENT_WRITES_MAX as u64 + 4;
        for n in 0..writes {
            write(&mut recent, 1, n);
        }
        for n in 0..writes {
            let newest = n >= writes - RECENT_WRITES_MAX as u64;
            assert_eq!(remembers(&recent, 1, n), newest, "request {n}");
        }
        // Once RECENT_CLIENTS_MAX other clients wrote RECENT_WRITES_MAX
        // times since, client 1 is forgotten.
        for n in 0..RECENT_WRITES_MAX.max(RECENT_CLIENTS_MAX) as u64 {
            write(&mut recent, 100 + n % RECENT_CLIENTS_MAX as u64, n);
        }
        assert!(!recent.iter().any(|(c, _)| c.client_id == 1));
        // Order (newest last) and versions are kept.
        assert!(recent.windows(2).all(|w| w[0].1 < w[1].1));
    }
}
