//! The on-disk record of one key in one region (see docs/PROTOCOL.md).
//!
//! Value bytes: postcard of [`Record`]. A delete, or an object leaving a
//! region, leaves a tombstone (`object: None`) so the key's version in that
//! region keeps increasing and a late copy of an older update is recognized.

use serde::{Deserialize, Serialize};
use tessera_protocol::ClientRef;
use tessera_types::{Object, Version};

/// How many recent writers of a key the key subspace remembers, so that a
/// retried update is recognized instead of applied twice.
pub const RECENT_WRITERS_MAX: usize = 16;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: Version,
    pub object: Option<Object>,
    /// Key subspace only: the latest updates' `(client id, request number)`
    /// with the version each produced, newest last.
    pub recent: Vec<(ClientRef, Version)>,
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("encoding to a Vec cannot fail")
    }

    pub fn decode(bytes: &[u8]) -> Result<Record, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("corrupt record: {e}"))
    }
}
