//! The errors the client reports: a stable status (API.md §5) and a message.

use tessera_protocol::{AdminStatus, Status};

/// Why a client operation failed.
///
/// `status` is the HyperDex-compatible code (e.g. `UNKNOWNSPACE`,
/// `WRONGTYPE`, `RECONFIGURE`); `message` says what exactly went wrong.
/// Outcomes that API.md §3.4 maps to values (NOTFOUND → `None`, CMPFAIL →
/// `false`) are not errors: the operations return them as values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} [{}]", status.symbol())]
pub struct ClientError {
    /// The stable status code.
    pub status: Status,
    /// A human-readable explanation.
    pub message: String,
}

impl ClientError {
    /// An error with this status and message.
    pub fn new(status: Status, message: impl Into<String>) -> ClientError {
        ClientError {
            status,
            message: message.into(),
        }
    }

    /// The status code.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The HyperDex symbol, e.g. `HYPERDEX_CLIENT_UNKNOWNSPACE`.
    pub fn symbol(&self) -> &'static str {
        self.status.symbol()
    }

    /// The human-readable explanation.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Why an administrative operation (spaces, configuration) failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} [{}]", status.symbol())]
pub struct AdminError {
    /// The stable status code, e.g. `BADSPACE`, `DUPLICATE`, `NOTFOUND`.
    pub status: AdminStatus,
    /// A human-readable explanation; for BADSPACE it names the line and
    /// column of the problem.
    pub message: String,
}

impl AdminError {
    /// An error with this status and message.
    pub fn new(status: AdminStatus, message: impl Into<String>) -> AdminError {
        AdminError {
            status,
            message: message.into(),
        }
    }

    /// The status code.
    pub fn status(&self) -> AdminStatus {
        self.status
    }

    /// The HyperDex symbol, e.g. `HYPERDEX_ADMIN_BADSPACE`.
    pub fn symbol(&self) -> &'static str {
        self.status.symbol()
    }

    /// The human-readable explanation.
    pub fn message(&self) -> &str {
        &self.message
    }
}
