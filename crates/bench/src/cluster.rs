//! The cluster a benchmark runs against: a running one named by address, or
//! a local one started for the run and stopped after it, and the one test
//! of readiness that `tessera dev` and the benchmarks share.
//!
//! This crate does not link the servers: the binary hands it a [`Launch`]
//! that runs a coordinator and daemons in process (`tessera dev`'s code), so
//! the dependency arrows keep pointing from the binary down.

use anyhow::Context;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tessera_client::{Admin, AdminError, Configuration, CoordLink, Epoch, Transport};
use tessera_protocol::{
    read_frame, write_frame, DaemonRequest, DaemonResponse, FrameError, Message,
    FRAME_BYTES_MAX_DEFAULT,
};
use tessera_types::{DaemonState, RegionId, SpaceId};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long a local cluster may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a local cluster may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one daemon may take to answer a readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a local cluster is made of.
#[derive(Clone, Debug)]
pub struct LocalSpec {
    /// Daemons to start.
    pub daemons: usize,
    /// The coordinator's port on 127.0.0.1 (the daemons' follow it).
    pub port: u16,
    /// Where the servers keep their data.
    pub data: PathBuf,
    /// Whether daemons fsync every commit before acknowledging it (else
    /// every 200 ms).
    pub fsync_every_commit: bool,
    /// Whether every server counts and serves Prometheus metrics.
    pub metrics: bool,
    /// Plain TCP or TLS (with a certificate to serve with) for every
    /// server and the benchmark's clients.
    pub transport: Transport,
}

/// A future that runs until it is asked to stop, or fails.
pub type Servers = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

/// Runs the servers of a [`LocalSpec`] until the receiver fires.
pub type Launch = Arc<dyn Fn(LocalSpec, oneshot::Receiver<()>) -> Servers + Send + Sync>;

/// Where the Tessera cluster of a benchmark is.
#[derive(Clone)]
pub struct ClusterSpec {
    /// Start a local cluster with [`ClusterSpec::launch`] instead of using
    /// `host:port`.
    pub local: bool,
    /// Daemons of the local cluster.
    pub daemons: usize,
    /// Coordinator port of the local cluster.
    pub local_port: u16,
    /// A coordinator member of a running cluster.
    pub host: String,
    pub port: u16,
    /// Partitions of each benchmark space.
    pub partitions: u32,
    /// The local cluster's daemons fsync every commit.
    pub fsync_every_commit: bool,
    /// The local cluster's servers count and serve metrics.
    pub metrics: bool,
    /// How the servers accept and dial, and the clients connect: plain
    /// or TLS.
    pub transport: Transport,
    /// How to run a local cluster's servers.
    pub launch: Launch,
}

/// A local cluster started for a run, stopped by [`LocalCluster::stop`].
pub struct LocalCluster {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

impl LocalCluster {
    /// Starts the servers in a temporary directory and waits until they
    /// are ready; returns the coordinator's address.
    pub async fn start(
        launch: &Launch,
        daemons: usize,
        port: u16,
        fsync_every_commit: bool,
        metrics: bool,
        transport: &Transport,
    ) -> anyhow::Result<(LocalCluster, String)> {
        let dir = tempfile::Builder::new()
            .prefix("tessera-bench-")
            .tempdir()
            .context("creating a temporary directory")?;
        // A server already listening on the coordinator's port (another
        // benchmark's cluster, say) would answer the readiness check below
        // for servers of ours that could not bind: the run would measure
        // that cluster. Refuse instead.
        // (tokio's bind allows the address reuse the servers' binds do, so
        // the connections a cluster just stopped left in TIME_WAIT on the
        // port do not count as taken.)
        drop(
            tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .with_context(|| {
                    format!(
                        "the local cluster's coordinator port 127.0.0.1:{port} is taken \
                 (another cluster or benchmark running?); choose another --local-port"
                    )
                })?,
        );
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let spec = LocalSpec {
            daemons,
            port,
            data: dir.path().to_path_buf(),
            fsync_every_commit,
            metrics,
            transport: transport.clone(),
        };
        let task = tokio::spawn(launch(spec, stop_rx));
        let coordinator = format!("127.0.0.1:{port}");
        let mut cluster = LocalCluster {
            stop: Some(stop_tx),
            task,
            _dir: dir,
        };
        // A server that fails (a daemon port taken) ends the launch: that
        // is the answer, not a readiness timeout a minute later.
        tokio::select! {
            ready = wait_ready(&coordinator, transport, daemons, READY_TIMEOUT) => {
                ready?;
            }
            ended = &mut cluster.task => {
                let why = match ended {
                    Ok(Ok(())) => anyhow::anyhow!("its servers stopped"),
                    Ok(Err(e)) => e,
                    Err(e) => anyhow::anyhow!("its task failed: {e}"),
                };
                return Err(why.context("the local cluster stopped before it was ready"));
            }
        }
        Ok((cluster, coordinator))
    }

    /// Stops the servers and reports how they ended.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout(STOP_TIMEOUT, &mut self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(anyhow::anyhow!("the local cluster task failed: {e}")),
            Err(_) => {
                self.task.abort();
                Err(anyhow::anyhow!(
                    "the local cluster did not stop within {STOP_TIMEOUT:?}"
                ))
            }
        }
    }
}

/// The durability a local cluster runs with, as the benchmarks print it.
fn durability_name(fsync_every_commit: bool) -> &'static str {
    if fsync_every_commit {
        "Always"
    } else {
        "Interval"
    }
}

/// Runs `body` against the cluster `spec` names: a local one started for it
/// and stopped after, whatever `body` returned, or the given coordinator.
pub async fn with_cluster<T>(
    spec: &ClusterSpec,
    body: impl AsyncFnOnce(&str) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if !spec.local {
        return body(&format!("{}:{}", spec.host, spec.port)).await;
    }
    let (local, coordinator) = LocalCluster::start(
        &spec.launch,
        spec.daemons,
        spec.local_port,
        spec.fsync_every_commit,
        spec.metrics,
        &spec.transport,
    )
    .await?;
    eprintln!(
        "bench: local cluster of {} daemons at {coordinator} (durability {}, metrics {}, tls {})",
        spec.daemons,
        durability_name(spec.fsync_every_commit),
        if spec.metrics { "on" } else { "off" },
        if spec.transport.is_tls() { "on" } else { "off" }
    );
    let outcome = body(&coordinator).await;
    local.stop().await?;
    outcome
}

/// Why a cluster did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The coordinator could not be asked for the configuration.
    #[error("the coordinator did not answer: {0}")]
    Coordinator(#[source] AdminError),
    /// Fewer daemons than expected are available.
    #[error("{available} of {expected} daemons available at epoch {epoch}")]
    TooFew {
        available: usize,
        expected: usize,
        epoch: u64,
    },
    /// A connection to a daemon could not be opened (or its TLS
    /// handshake failed).
    #[error("{source}")]
    Connect {
        #[source]
        source: tessera_protocol::transport::ConnectError,
    },
    /// A daemon could not be reached.
    #[error("daemon {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// A daemon's connection failed mid-frame.
    #[error("daemon {addr}: {source}")]
    Frame {
        addr: String,
        #[source]
        source: FrameError,
    },
    /// A daemon does not act on the configuration's epoch yet.
    #[error("daemon {addr} is at epoch {theirs}, not {ours}")]
    Behind {
        addr: String,
        theirs: u64,
        ours: u64,
    },
    /// A daemon answered something other than a daemon response.
    #[error("daemon {addr} answered {answer}")]
    Unexpected { addr: String, answer: String },
    /// A daemon did not answer the probe in time.
    #[error("daemon {addr} did not answer within {PROBE_TIMEOUT:?}")]
    Silent { addr: String },
    /// The cluster was not ready in time; `last` says why at the last look.
    #[error("not ready after {waited:?}: {last}")]
    Timeout {
        waited: Duration,
        #[source]
        last: Box<ReadyError>,
    },
}

/// Waits until at least `daemons` daemons are available in the
/// configuration and every available daemon answers a request at that
/// configuration's epoch; returns the epoch.
pub async fn wait_ready(
    coordinator: &str,
    transport: &Transport,
    daemons: usize,
    timeout: Duration,
) -> Result<Epoch, ReadyError> {
    let started = Instant::now();
    let link = CoordLink {
        transport: transport.clone(),
        admin_token: None,
    };
    let admin = Admin::with_link([coordinator], timeout, link);
    let mut known = Epoch(0);
    let mut last = ReadyError::TooFew {
        available: 0,
        expected: daemons,
        epoch: 0,
    };
    loop {
        if started.elapsed() >= timeout {
            return Err(ReadyError::Timeout {
                waited: started.elapsed(),
                last: Box::new(last),
            });
        }
        let config = match admin.wait_config(Epoch(0), Duration::ZERO).await {
            Ok(Some(config)) => config,
            Ok(None) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => {
                last = ReadyError::Coordinator(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match check_ready(&config, transport, daemons).await {
            Ok(()) => return Ok(config.epoch),
            Err(problem) => last = problem,
        }
        // Wait for a newer configuration, or a moment.
        known = known.max(config.epoch);
        let _ = tokio::time::timeout(
            Duration::from_millis(500),
            admin.wait_config(known, Duration::from_millis(400)),
        )
        .await;
    }
}

async fn check_ready(
    config: &Configuration,
    transport: &Transport,
    daemons: usize,
) -> Result<(), ReadyError> {
    let available: Vec<&str> = config
        .daemons
        .values()
        .filter(|d| d.state == DaemonState::Available)
        .map(|d| d.addr.as_str())
        .collect();
    if available.len() < daemons {
        return Err(ReadyError::TooFew {
            available: available.len(),
            expected: daemons,
            epoch: config.epoch.0,
        });
    }
    for addr in available {
        probe_daemon(addr, transport, config.epoch).await?;
    }
    Ok(())
}

/// Sends a request about a space that does not exist at `epoch`: a daemon
/// that acts on that epoch answers it (with UNKNOWNSPACE); one that does
/// not yet answers WrongEpoch.
pub async fn probe_daemon(
    addr: &str,
    transport: &Transport,
    epoch: Epoch,
) -> Result<(), ReadyError> {
    let io = |source| ReadyError::Io {
        addr: addr.to_string(),
        source,
    };
    let frame = |source| ReadyError::Frame {
        addr: addr.to_string(),
        source,
    };
    let attempt = async {
        let (mut reader, mut writer) = transport
            .connect(addr, PROBE_TIMEOUT)
            .await
            .map_err(|source| ReadyError::Connect { source })?
            .into_split();
        let request = DaemonRequest::SearchKeys {
            space: SpaceId(u64::MAX),
            region: RegionId(u64::MAX),
            checks: vec![],
            after: None,
            auth: Default::default(),
            op: Default::default(),
        };
        let message = Message::DaemonRequest {
            id: 1,
            epoch,
            request,
        };
        write_frame(&mut writer, &message).await.map_err(frame)?;
        writer.flush().await.map_err(io)?;
        match read_frame(&mut reader, FRAME_BYTES_MAX_DEFAULT).await {
            Ok(Message::DaemonResponse {
                response: DaemonResponse::WrongEpoch { epoch: theirs },
                ..
            }) => Err(ReadyError::Behind {
                addr: addr.to_string(),
                theirs: theirs.0,
                ours: epoch.0,
            }),
            Ok(Message::DaemonResponse { .. }) => Ok(()),
            Ok(other) => Err(ReadyError::Unexpected {
                addr: addr.to_string(),
                answer: format!("{other:?}"),
            }),
            Err(e) => Err(frame(e)),
        }
    };
    match tokio::time::timeout(PROBE_TIMEOUT, attempt).await {
        Ok(result) => result,
        Err(_) => Err(ReadyError::Silent {
            addr: addr.to_string(),
        }),
    }
}
