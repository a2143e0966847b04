//! `tessera-client`: the Rust client of a Tessera cluster.
//!
//! What it is: [`Client`] (async, tokio) and [`BlockingClient`] for the
//! data path — get, put, conditional puts, delete, every operation family,
//! search (streamed: [`SearchStream`]), sorted search, count — and [`Admin`] / [`BlockingAdmin`] for spaces and the
//! configuration. The client bootstraps from one coordinator address, keeps
//! the configuration fresh with a background long-poll, resolves attribute
//! names and checks types before anything is sent, and routes locally:
//!
//! ```text
//!  get/put/del ──▶ point leader (head of the key-subspace region's chain)
//!  search/count ──▶ plan_search ──▶ tail of each planned region's chain
//!                                     └──▶ merge: each key once, newest version
//! ```
//!
//! What it is not: it holds no data and never changes the configuration
//! except through the coordinator's admin requests; it does not retry an
//! update whose outcome it cannot know (that is RECONFIGURE).
//!
//! Results follow API.md §3.4 in Rust form: every single-key write
//! returns an [`Outcome`] — `Done` (SUCCESS), `NotFound` (NOTFOUND) or
//! `CmpFail` with its precise [`CmpFailKind`] (CMPFAIL: a predicate
//! failed, the object exists, or a mutation could not be applied) —
//! whose [`Outcome::as_option`] is HyperDex's `True` / `None` / `False`;
//! `get` returns `Option`; group operations and `count` a number. Every
//! other status is a [`ClientError`] with `status()`, `symbol()` and
//! `message()`.

// The client waits on the network: its deadlines and backoff are real time.
#[allow(clippy::disallowed_methods)]
mod admin;
mod auth;
// A backup's deadlines are real time, and its number must not repeat
// across processes, so it is drawn from the operating system's randomness.
#[allow(clippy::disallowed_methods)]
pub mod backup;
// Deadlines of a request.
#[allow(clippy::disallowed_methods)]
mod attempt;
mod blocking;
// Deadlines of a request.
#[allow(clippy::disallowed_methods)]
mod client;
// Deadlines of a coordinator call.
#[allow(clippy::disallowed_methods)]
mod coord;
mod error;
mod family;
mod merge;
mod ops;
mod pool;
mod record;
mod resolve;
mod stream;

pub use admin::{index_infos, Admin, IndexInfo, Stability};
pub use auth::Authorization;
pub use blocking::{BlockingAdmin, BlockingClient, BlockingSearchStream};
pub use client::{Client, ClientOptions};
pub use error::{AdminError, ClientError};
pub use family::Microtransaction;
pub use ops::{Op, Outcome};
pub use record::{RawRecord, Record};
pub use stream::SearchStream;
pub use tessera_protocol::coord_client::CoordLink;
pub use tessera_protocol::transport::{TlsConfigError, TlsFiles, Transport};
pub use tessera_protocol::{
    AdminStatus, AdminToken, AdminTokenError, CmpFailKind, CoordStatus, NumOp, Status, UpdateFlags,
};
pub use tessera_types::{
    Check, Configuration, DaemonId, DataType, Epoch, PartId, PartKind, PartState, PredOp,
    SpaceDesc, Value, Version,
};
