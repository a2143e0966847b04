//! `tessera-daemon`: the storage server.
//!
//! What it is: the replica core ([`core::ReplicaCore`]) that runs the
//! value-dependent chain protocol — ordering at the point leader, in-order
//! application with buffering at members, commit on the acknowledgement's way
//! back — plus the pure update evaluation and chain construction
//! ([`chain`]), search and count over committed data through per-region
//! secondary indexes ([`index`]), and the tokio shell
//! that connects them to sockets, peers and the coordinator.
//!
//! What it is not: it never changes the configuration (only the coordinator
//! does) and never acts on a chain message from an epoch other than its own.
//! The core does no network I/O and reads no clock.

pub mod auth;
pub mod auth_macaroon;
pub mod chain;
pub mod core;
pub mod index;
// Latency is measured by the shell's clock.
#[allow(clippy::disallowed_methods)]
mod metrics;
pub mod node;
pub mod ops;
pub mod rebuild;
pub mod record;
pub mod search;
pub mod shapes;
// The shell does the I/O: it reads the clock for timers and leases.
#[allow(clippy::disallowed_methods)]
mod shell;
pub mod transfer;

mod options;

pub use options::{DaemonError, DaemonOptions};
use std::future::Future;
pub use tessera_storage::{Caches, Durability, CACHE_BYTES_DEFAULT, ROW_CACHE_BYTES_DEFAULT};

/// Runs a daemon until `shutdown` completes: registers with the coordinator
/// (keeping the instance id stored in `data_dir`), follows configurations,
/// and serves clients and peers on one port.
pub async fn run(
    options: DaemonOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    shell::run(options, shutdown).await
}
