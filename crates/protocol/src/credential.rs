//! The admin credential (`docs/design/tls.md`): a shared secret without
//! which a coordinator that has one refuses every request that changes the
//! configuration.
//!
//! Which requests need it is decided here, once, by [`CoordRequest::access`]
//! — an exhaustive match, so a new request (a backup, say) cannot be added
//! without saying whether it changes the configuration. A caller that holds
//! the token sends such requests as [`Message::CredentialedRequest`]
//! ([`coord_message`]; [`CoordConnection`](crate::coord_client::CoordConnection)
//! does it), and the coordinator checks them in one gate. The token travels
//! beside the request rather than around it, so that no message nests.

use crate::messages::{CoordRequest, Message};
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

/// The longest token accepted, in bytes: room for any generated secret,
/// and a bound on what a wrong file or a peer can make us hold.
pub const ADMIN_TOKEN_BYTES_MAX: usize = 1024;

/// The shortest token accepted: a shorter secret is guessable.
pub const ADMIN_TOKEN_BYTES_MIN: usize = 16;

/// The admin credential. Its `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(Vec<u8>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdminToken({} bytes)", self.0.len())
    }
}

/// Why a token could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AdminTokenError {
    /// The token file could not be read.
    #[error("cannot read the admin token file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The token is shorter than [`ADMIN_TOKEN_BYTES_MIN`] (after trimming
    /// surrounding whitespace).
    #[error("the admin token is {len} bytes; at least {min} are needed")]
    TooShort { len: usize, min: usize },
    /// The token is longer than [`ADMIN_TOKEN_BYTES_MAX`].
    #[error("the admin token is longer than {max} bytes")]
    TooLong { max: usize },
}

impl AdminToken {
    /// A token from its bytes; surrounding whitespace (the newline an
    /// editor or `echo` leaves) is not part of it.
    pub fn new(bytes: &[u8]) -> Result<AdminToken, AdminTokenError> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() > ADMIN_TOKEN_BYTES_MAX {
            return Err(AdminTokenError::TooLong {
                max: ADMIN_TOKEN_BYTES_MAX,
            });
        }
        if trimmed.len() < ADMIN_TOKEN_BYTES_MIN {
            return Err(AdminTokenError::TooShort {
                len: trimmed.len(),
                min: ADMIN_TOKEN_BYTES_MIN,
            });
        }
        Ok(AdminToken(trimmed.to_vec()))
    }

    /// Reads the token from a file (`--admin-token-file`), reading no
    /// more than a token can hold.
    pub fn from_file(path: &Path) -> Result<AdminToken, AdminTokenError> {
        use std::io::Read;
        let read = |source| AdminTokenError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read)?;
        let mut bytes = Vec::new();
        // Room for the token and some whitespace; more is too long.
        file.take(2 * ADMIN_TOKEN_BYTES_MAX as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(read)?;
        AdminToken::new(&bytes)
    }

    /// Whether `offered` is this token, in time that does not depend on
    /// where they differ.
    pub fn matches(&self, offered: &[u8]) -> bool {
        bool::from(self.0.as_slice().ct_eq(offered))
    }
}

/// Who may send a coordinator request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone: it reads the configuration or the group's state.
    Open,
    /// An operator: it changes the configuration (spaces, layouts, server
    /// operations, the read-only flag, backups).
    Admin,
    /// A member of the cluster (a daemon or a coordinator member): it
    /// changes the configuration too, as part of running the cluster, so
    /// the servers carry the same credential.
    Cluster,
}

impl CoordRequest {
    /// Who may send this request; everything but [`Access::Open`] needs
    /// the admin credential on a coordinator that has one.
    pub fn access(&self) -> Access {
        match self {
            CoordRequest::GetConfig { .. } | CoordRequest::Status | CoordRequest::Stability => {
                Access::Open
            }
            CoordRequest::AddSpace { .. }
            | CoordRequest::RmSpace { .. }
            | CoordRequest::SetReadOnly { .. }
            | CoordRequest::SetAdvisorParams { .. }
            | CoordRequest::ServerOffline { .. }
            | CoordRequest::ServerOnline { .. }
            | CoordRequest::ServerForget { .. }
            | CoordRequest::ServerKill { .. }
            | CoordRequest::AddSubspace { .. }
            | CoordRequest::RmSubspace { .. }
            | CoordRequest::AddIndex { .. }
            | CoordRequest::RmIndex { .. }
            | CoordRequest::AddGlobalIndex { .. }
            | CoordRequest::RmGlobalIndex { .. }
            | CoordRequest::SplitGlobalIndex { .. }
            | CoordRequest::Relayout { .. } => Access::Admin,
            CoordRequest::RegisterDaemon { .. }
            | CoordRequest::Join { .. }
            | CoordRequest::Raft { .. }
            | CoordRequest::Heartbeat { .. }
            | CoordRequest::Unreachable { .. }
            | CoordRequest::Leave { .. }
            | CoordRequest::CollectReport { .. }
            | CoordRequest::TransferComplete { .. }
            | CoordRequest::RebuildComplete { .. }
            | CoordRequest::BackfillReport { .. }
            | CoordRequest::IndexletReport { .. }
            | CoordRequest::IndexletLoad { .. } => Access::Cluster,
        }
    }
}

/// Request `id` as a caller holding `token` sends it: with the token when
/// the request needs one, without otherwise (an open request never carries
/// the secret).
pub fn coord_message(id: u64, request: CoordRequest, token: Option<&AdminToken>) -> Message {
    match token {
        Some(token) if request.access() != Access::Open => Message::CredentialedRequest {
            id,
            token: token.0.clone(),
            request,
        },
        _ => Message::CoordRequest { id, request },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_trimmed_bounded_and_compared_whole() {
        let token = AdminToken::new(b"  0123456789abcdef\n").unwrap();
        assert!(token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b"0123456789abcdeX"));
        assert!(!token.matches(b"0123456789abcde"));
        assert!(!token.matches(b"0123456789abcdef0"));
        assert!(!token.matches(b""));
        assert!(matches!(
            AdminToken::new(b"short\n"),
            Err(AdminTokenError::TooShort { len: 5, .. })
        ));
        assert!(matches!(
            AdminToken::new(&[b'x'; ADMIN_TOKEN_BYTES_MAX + 1]),
            Err(AdminTokenError::TooLong { .. })
        ));
        assert!(!format!("{token:?}").contains("0123"));
    }

    #[test]
    fn only_requests_that_need_it_carry_the_token() {
        let token = AdminToken::new(b"0123456789abcdef").unwrap();
        assert_eq!(
            coord_message(1, CoordRequest::Status, Some(&token)),
            Message::CoordRequest {
                id: 1,
                request: CoordRequest::Status
            }
        );
        let rm = CoordRequest::RmSpace { name: "s".into() };
        assert_eq!(rm.access(), Access::Admin);
        assert_eq!(
            coord_message(2, rm.clone(), Some(&token)),
            Message::CredentialedRequest {
                id: 2,
                token: b"0123456789abcdef".to_vec(),
                request: rm.clone()
            }
        );
        assert_eq!(
            coord_message(3, rm.clone(), None),
            Message::CoordRequest { id: 3, request: rm }
        );
        let raft = CoordRequest::Raft { payload: vec![1] };
        assert_eq!(raft.access(), Access::Cluster);
    }
}
