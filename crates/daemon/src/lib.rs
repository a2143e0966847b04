//! `tessera-daemon`: the storage server. (In progress: the chain core and
//! tokio shell land next; the entry point below is the stable contract.)

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

/// How to run one daemon.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// Where to listen for clients and peers.
    pub listen: SocketAddr,
    /// The address other daemons and clients should use (defaults to `listen`).
    pub advertise: Option<String>,
    /// Objects, the daemon's instance id and its last configuration live here.
    pub data_dir: PathBuf,
    /// `host:port` of any coordinator member.
    pub coordinator: String,
    /// Largest frame accepted from a socket.
    pub frame_bytes_max: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("storage error: {0}")]
    Storage(String),
    #[error("coordinator unreachable: {0}")]
    Coordinator(String),
}

/// Runs a daemon until `shutdown` completes.
pub async fn run(options: DaemonOptions, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
    let _ = options;
    shutdown.await;
    Ok(())
}
