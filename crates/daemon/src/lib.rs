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

pub mod chain;
pub mod core;
pub mod index;
pub mod node;
pub mod ops;
pub mod record;
pub mod search;
// The shell does the I/O: it reads the clock for timers and leases.
#[allow(clippy::disallowed_methods)]
mod shell;
pub mod transfer;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
pub use tessera_storage::Durability;

/// How to run one daemon.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// Where to listen for clients and peers.
    pub listen: SocketAddr,
    /// The address other daemons and clients should use (defaults to the
    /// bound address).
    pub advertise: Option<String>,
    /// Objects, the daemon's instance id and its last configuration live here.
    pub data_dir: PathBuf,
    /// `host:port` of any coordinator member.
    pub coordinator: String,
    /// Largest frame accepted from a socket.
    pub frame_bytes_max: usize,
    /// When commits reach stable storage.
    pub durability: Durability,
}

impl DaemonOptions {
    pub fn new(listen: SocketAddr, data_dir: PathBuf, coordinator: String) -> Self {
        DaemonOptions {
            listen,
            advertise: None,
            data_dir,
            coordinator,
            frame_bytes_max: tessera_protocol::FRAME_BYTES_MAX_DEFAULT,
            durability: Durability::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("storage error: {0}")]
    Storage(String),
    #[error("coordinator unreachable: {0}")]
    Coordinator(String),
    /// The daemon's storage failed; it left every chain and stopped.
    #[error("the daemon's storage failed (a write or fsync failed, or the disk is full); it left every chain and stopped")]
    CannotPersist,
}

/// Runs a daemon until `shutdown` completes: registers with the coordinator
/// (keeping the instance id stored in `data_dir`), follows configurations,
/// and serves clients and peers on one port.
pub async fn run(
    options: DaemonOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    shell::run(options, shutdown).await
}
