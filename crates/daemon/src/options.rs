//! How to run a daemon, and why running one fails (kept apart from the
//! crate root so that the shell depends on them without depending on the
//! root that calls it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tessera_storage::Durability;

/// How to run one daemon.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// Where to listen for clients and peers.
    pub listen: SocketAddr,
    /// The address other daemons and clients should use (defaults to the
    /// bound address).
    pub advertise: Option<String>,
    /// Objects, their indexes and the daemon's instance id live here.
    pub data_dir: PathBuf,
    /// `host:port` of any coordinator member.
    pub coordinator: String,
    /// Largest frame accepted from a socket.
    pub frame_bytes_max: usize,
    /// When commits reach stable storage.
    pub durability: Durability,
    /// Bytes of the storage engine's block and row caches.
    pub caches: tessera_storage::Caches,
    /// Time between tombstone collection rounds (10 s by default).
    pub collect_every: Duration,
    /// Where to serve Prometheus metrics over HTTP (`GET /metrics`); none
    /// when `None`. Its URL goes to the coordinator with the registration.
    pub metrics: Option<SocketAddr>,
    /// Plain TCP or TLS, for clients and peers that connect and for what
    /// the daemon dials (peers, the coordinator).
    pub transport: tessera_protocol::Transport,
    /// The admin credential a coordinator that requires one expects on a
    /// daemon's registration, heartbeats and reports.
    pub admin_token: Option<tessera_protocol::AdminToken>,
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
            caches: tessera_storage::Caches::default(),
            collect_every: Duration::from_secs(10),
            metrics: None,
            transport: tessera_protocol::Transport::plain(),
            admin_token: None,
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
    /// TLS was asked for without a certificate to serve with.
    #[error("a daemon with TLS needs --tls-cert and --tls-key")]
    TlsWithoutCertificate,
    /// The daemon's storage failed; it left every chain and stopped.
    #[error("the daemon's storage failed (a write or fsync failed, or the disk is full); it left every chain and stopped")]
    CannotPersist,
}
