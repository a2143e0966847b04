//! Stable status codes, with HyperDex's names and numbers (API.md §5).

use serde::{Deserialize, Serialize};

/// Client status codes (`enum hyperdex_client_returncode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u16)]
pub enum Status {
    Success = 8448,
    NotFound = 8449,
    SearchDone = 8450,
    CmpFail = 8451,
    ReadOnly = 8452,
    UnknownSpace = 8512,
    CoordFail = 8513,
    ServerError = 8514,
    PollFailed = 8515,
    Overflow = 8516,
    Reconfigure = 8517,
    Timeout = 8519,
    UnknownAttr = 8520,
    DupeAttr = 8521,
    NonePending = 8523,
    DontUseKey = 8524,
    WrongType = 8525,
    NoMem = 8526,
    Interrupted = 8530,
    ClusterJump = 8531,
    Offline = 8533,
    Unauthorized = 8534,
    Internal = 8573,
    Exception = 8574,
    Garbage = 8575,
}

impl Status {
    pub fn code(self) -> u16 {
        self as u16
    }

    /// The HyperDex symbol, e.g. `HYPERDEX_CLIENT_NOTFOUND`.
    pub fn symbol(self) -> &'static str {
        match self {
            Status::Success => "HYPERDEX_CLIENT_SUCCESS",
            Status::NotFound => "HYPERDEX_CLIENT_NOTFOUND",
            Status::SearchDone => "HYPERDEX_CLIENT_SEARCHDONE",
            Status::CmpFail => "HYPERDEX_CLIENT_CMPFAIL",
            Status::ReadOnly => "HYPERDEX_CLIENT_READONLY",
            Status::UnknownSpace => "HYPERDEX_CLIENT_UNKNOWNSPACE",
            Status::CoordFail => "HYPERDEX_CLIENT_COORDFAIL",
            Status::ServerError => "HYPERDEX_CLIENT_SERVERERROR",
            Status::PollFailed => "HYPERDEX_CLIENT_POLLFAILED",
            Status::Overflow => "HYPERDEX_CLIENT_OVERFLOW",
            Status::Reconfigure => "HYPERDEX_CLIENT_RECONFIGURE",
            Status::Timeout => "HYPERDEX_CLIENT_TIMEOUT",
            Status::UnknownAttr => "HYPERDEX_CLIENT_UNKNOWNATTR",
            Status::DupeAttr => "HYPERDEX_CLIENT_DUPEATTR",
            Status::NonePending => "HYPERDEX_CLIENT_NONEPENDING",
            Status::DontUseKey => "HYPERDEX_CLIENT_DONTUSEKEY",
            Status::WrongType => "HYPERDEX_CLIENT_WRONGTYPE",
            Status::NoMem => "HYPERDEX_CLIENT_NOMEM",
            Status::Interrupted => "HYPERDEX_CLIENT_INTERRUPTED",
            Status::ClusterJump => "HYPERDEX_CLIENT_CLUSTER_JUMP",
            Status::Offline => "HYPERDEX_CLIENT_OFFLINE",
            Status::Unauthorized => "HYPERDEX_CLIENT_UNAUTHORIZED",
            Status::Internal => "HYPERDEX_CLIENT_INTERNAL",
            Status::Exception => "HYPERDEX_CLIENT_EXCEPTION",
            Status::Garbage => "HYPERDEX_CLIENT_GARBAGE",
        }
    }

    /// The short name, e.g. `NOTFOUND`.
    pub fn name(self) -> &'static str {
        &self.symbol()["HYPERDEX_CLIENT_".len()..]
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Admin status codes (`enum hyperdex_admin_returncode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u16)]
pub enum AdminStatus {
    Success = 8704,
    NoMem = 8768,
    NonePending = 8769,
    PollFailed = 8770,
    Timeout = 8771,
    Interrupted = 8772,
    ServerError = 8773,
    CoordFail = 8774,
    BadSpace = 8775,
    Duplicate = 8776,
    NotFound = 8777,
    LocalError = 8778,
    Internal = 8829,
    Exception = 8830,
    Garbage = 8831,
    /// Tessera's own: a configuration change without the admin credential
    /// the coordinator requires, or with a wrong one. HyperDex had no admin
    /// credential; the number follows its last admin error (LOCALERROR).
    Unauthorized = 8779,
}

impl AdminStatus {
    pub fn code(self) -> u16 {
        self as u16
    }

    pub fn symbol(self) -> &'static str {
        match self {
            AdminStatus::Success => "HYPERDEX_ADMIN_SUCCESS",
            AdminStatus::NoMem => "HYPERDEX_ADMIN_NOMEM",
            AdminStatus::NonePending => "HYPERDEX_ADMIN_NONEPENDING",
            AdminStatus::PollFailed => "HYPERDEX_ADMIN_POLLFAILED",
            AdminStatus::Timeout => "HYPERDEX_ADMIN_TIMEOUT",
            AdminStatus::Interrupted => "HYPERDEX_ADMIN_INTERRUPTED",
            AdminStatus::ServerError => "HYPERDEX_ADMIN_SERVERERROR",
            AdminStatus::CoordFail => "HYPERDEX_ADMIN_COORDFAIL",
            AdminStatus::BadSpace => "HYPERDEX_ADMIN_BADSPACE",
            AdminStatus::Duplicate => "HYPERDEX_ADMIN_DUPLICATE",
            AdminStatus::NotFound => "HYPERDEX_ADMIN_NOTFOUND",
            AdminStatus::LocalError => "HYPERDEX_ADMIN_LOCALERROR",
            AdminStatus::Internal => "HYPERDEX_ADMIN_INTERNAL",
            AdminStatus::Exception => "HYPERDEX_ADMIN_EXCEPTION",
            AdminStatus::Garbage => "HYPERDEX_ADMIN_GARBAGE",
            AdminStatus::Unauthorized => "HYPERDEX_ADMIN_UNAUTHORIZED",
        }
    }

    pub fn name(self) -> &'static str {
        &self.symbol()["HYPERDEX_ADMIN_".len()..]
    }
}

impl std::fmt::Display for AdminStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
