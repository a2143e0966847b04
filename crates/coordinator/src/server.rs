//! The coordinator member's tokio shell: one TCP port for clients, daemons
//! and the other members; the Raft node; first start, join and restart.
//!
//! ```text
//!  TcpListener ─accept─▶ connection task ─read_frame─▶ request task ─▶ Member::handle
//!                          │ (one per conn)             (one per request)   │
//!                          └◀── writer task ◀── CoordResponse{id} ◀─────────┘
//! ```
//!
//! Many requests may be in flight on one connection; each is answered by its
//! id, in whatever order they finish. A connection that sends a frame that is
//! too large or does not decode is closed (and logged); the member keeps
//! serving everyone else.
//!
//! # Failure detection
//!
//! Daemons send `Heartbeat` to the leader about every 500 ms. The policy —
//! what each heartbeat is answered, who is silent for
//! [`CoordinatorOptions::failure_timeout`] — is [`CoordinatorNode`]'s, the
//! same type the simulator drives; this shell only feeds it the applied
//! state and the time, and proposes through Raft the commands it returns.
//! A member that becomes leader starts with an empty detector, so every
//! daemon gets a full timeout of grace. A member that does not lead
//! answers `NotLeader`, and the daemon's client tries the next member.

use crate::dashboard::{self, Dashboard, MemberView};
use crate::gate::admit;
use crate::layout::LayoutTally;
use crate::metrics::{CoordinatorMetrics, Detection, RaftView};
use crate::node::CoordinatorNode;
use crate::raft::{serve_rpc, MemberNode, Network, NodeId, Raft};
use crate::state::{ClusterState, Command, CommandResult};
use crate::store::{self, OpenStoreError};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{ChangeMembers, SnapshotPolicy};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClient, CoordClientOptions, CoordLink};
use tessera_protocol::transport::{plain_listener_warning, AcceptError, Stream, Transport};
use tessera_protocol::{
    read_frame, write_frame, AdminStatus, AdminToken, CoordRequest, CoordResponse, CoordStatus,
    FrameError, Message, FRAME_BYTES_MAX_DEFAULT,
};
use tessera_types::{Configuration, CoordinatorInfo, DaemonId, Epoch};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The longest a `GetConfig` long-poll waits, whatever it asks for.
pub const CONFIG_WAIT_MAX: Duration = Duration::from_secs(30);
/// The longest a configuration change may take before the member answers COORDFAIL.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `--join` keeps asking before giving up.
const JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to wait for a previous instance in this process to release the store.
const STORE_LOCK_WAIT: Duration = Duration::from_secs(10);
/// How long a daemon may stay silent before the leader declares it failed,
/// unless [`CoordinatorOptions::failure_timeout`] says otherwise.
pub const FAILURE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(2);
/// How long an Offline daemon may stay silent, while replex regions wait
/// for it as their last daemon, before the leader declares it lost and
/// rebuilds them from the other replexes, unless
/// [`CoordinatorOptions::lost_timeout`] says otherwise. Longer than a
/// restart, so that restarting a daemon costs no rebuild.
pub const LOST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// The longest the failure detector waits between two looks.
const DETECTOR_TICK_MAX: Duration = Duration::from_millis(100);

/// How to run one coordinator member.
#[derive(Clone, Debug)]
pub struct CoordinatorOptions {
    /// Where to listen for clients, daemons and the other members. Also the
    /// address this member advertises to the others, so it should not be a
    /// wildcard address in a multi-member group.
    pub listen: SocketAddr,
    /// The member's durable state (Raft log, vote, state machine).
    pub data_dir: PathBuf,
    /// `host:port` of a member of an existing group to join at first start.
    /// Ignored when the data directory already holds state, unless an
    /// earlier join stopped half way (the member is still only a learner);
    /// then the member finishes joining.
    pub join: Option<String>,
    /// How long a daemon may go without a heartbeat before the leader takes
    /// it out of every chain ([`FAILURE_TIMEOUT_DEFAULT`], 2 s). Daemons
    /// heartbeat every 500 ms and hold a lease of half the default.
    pub failure_timeout: Duration,
    /// How long an Offline daemon may stay silent, while regions of replex
    /// spaces wait for it as their last daemon, before the leader declares
    /// it lost and rebuilds them elsewhere ([`LOST_TIMEOUT_DEFAULT`], 30
    /// s); `None`: only an operator's `server-kill` does.
    pub lost_timeout: Option<Duration>,
    /// How long after an epoch ends the tombstones written in it may be
    /// collected ([`crate::tombstones::TOMBSTONE_GRACE`], 60 s): it must
    /// exceed how long a client retries an update.
    pub tombstone_grace: Duration,
    /// The address other members, daemons and clients should dial, when it
    /// is not the listening address (e.g. behind a proxy); it must stay the
    /// same across restarts, since the group remembers it.
    pub advertise: Option<String>,
    /// Where to serve Prometheus metrics over HTTP (`GET /metrics`); none
    /// when `None`. Its URL is recorded in the group's membership, so the
    /// configuration lists it.
    pub metrics: Option<SocketAddr>,
    /// Plain TCP or TLS, for what this member accepts and what it dials
    /// (the other members).
    pub transport: Transport,
    /// The admin credential: when set, configuration changes without it
    /// are refused (`gate.rs`), and this member sends it to the others.
    pub admin_token: Option<AdminToken>,
    /// As leader, split an indexlet of a global index once it holds this
    /// many entries (0: never); see [`LayoutTally`].
    pub indexlet_split_entries: u64,
    /// As leader, split an indexlet whose replicas serve this many lookup
    /// pages per second or more (0: never).
    pub indexlet_split_pages_per_s: u64,
}

impl CoordinatorOptions {
    /// Options for a member listening on `listen` with its state in
    /// `data_dir`: no join, the default failure timeout.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> CoordinatorOptions {
        CoordinatorOptions {
            listen,
            data_dir,
            join: None,
            failure_timeout: FAILURE_TIMEOUT_DEFAULT,
            lost_timeout: Some(LOST_TIMEOUT_DEFAULT),
            tombstone_grace: crate::tombstones::TOMBSTONE_GRACE,
            advertise: None,
            metrics: None,
            transport: Transport::plain(),
            admin_token: None,
            indexlet_split_entries: crate::layout::DEFAULT_INDEXLET_SPLIT_ENTRIES,
            indexlet_split_pages_per_s: 0,
        }
    }
}

/// Why a coordinator member stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The data directory could not be created.
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The durable store could not be opened.
    #[error(transparent)]
    Store(#[from] OpenStoreError),
    /// openraft refused to start or stopped with a fatal error.
    #[error("raft: {0}")]
    Raft(String),
    /// TLS was asked for without a certificate to serve with.
    #[error("a coordinator with TLS needs --tls-cert and --tls-key")]
    TlsWithoutCertificate,
    /// `--join` did not succeed in time.
    #[error("cannot join the coordinator group through {via}: {reason}")]
    Join { via: String, reason: String },
    /// The metrics listener could not be bound.
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Runs one coordinator member until `shutdown` completes.
///
/// First start without `join` forms a single-member group; with `join` the
/// member asks that group to add it. A member whose data directory holds
/// state resumes it and neither initializes nor joins again.
pub async fn run(
    opts: CoordinatorOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), CoordinatorError> {
    let listener =
        TcpListener::bind(opts.listen)
            .await
            .map_err(|source| CoordinatorError::Listen {
                addr: opts.listen,
                source,
            })?;
    serve_with(listener, opts, shutdown).await
}

/// [`run`] on a listener bound by the caller (tests bind port 0 this way),
/// with the default failure timeout. The member advertises the listener's
/// local address.
pub async fn serve(
    listener: TcpListener,
    data_dir: PathBuf,
    join: Option<String>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), CoordinatorError> {
    let listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let opts = CoordinatorOptions {
        join,
        ..CoordinatorOptions::new(listen, data_dir)
    };
    serve_with(listener, opts, shutdown).await
}

/// [`serve`] with every option; `opts.listen` is ignored in favour of the
/// listener's address, which the member advertises unless `opts.advertise`
/// names another.
pub async fn serve_with(
    listener: TcpListener,
    opts: CoordinatorOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), CoordinatorError> {
    let CoordinatorOptions {
        data_dir,
        join,
        failure_timeout,
        lost_timeout,
        tombstone_grace,
        advertise,
        metrics,
        transport,
        admin_token,
        indexlet_split_entries,
        indexlet_split_pages_per_s,
        ..
    } = opts;
    if !transport.can_serve() {
        return Err(CoordinatorError::TlsWithoutCertificate);
    }
    let link = CoordLink {
        transport,
        admin_token,
    };
    let local = listener
        .local_addr()
        .map_err(|source| CoordinatorError::Listen {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            source,
        })?;
    if local.ip().is_unspecified() {
        tracing::warn!(%local, "listening on a wildcard address; other members will be told to dial it as is");
    }
    if let Some(warning) = plain_listener_warning(&local, &link.transport) {
        tracing::warn!("{warning}");
    }
    let addr = advertise.unwrap_or_else(|| local.to_string());
    std::fs::create_dir_all(&data_dir).map_err(|source| CoordinatorError::DataDir {
        path: data_dir.clone(),
        source,
    })?;
    let opened = open_store(&data_dir).await?;
    let node_id = opened.node_id;
    // Bound before Raft starts, so the URL in the membership is the real
    // one (a port 0 becomes a free port).
    let metrics_listener = match metrics {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|source| CoordinatorError::Metrics { addr, source })?,
        ),
        None => None,
    };
    let metrics_url = match &metrics_listener {
        Some(listener) => Some(tessera_observe::metrics_url(
            listener
                .local_addr()
                .map_err(|source| CoordinatorError::Metrics {
                    addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                    source,
                })?,
        )),
        None => None,
    };
    let me = MemberNode {
        addr: addr.clone(),
        metrics: metrics_url.clone(),
    };

    let config = openraft::Config {
        cluster_name: "tessera-coordinator".to_string(),
        heartbeat_interval: 100,
        election_timeout_min: 400,
        election_timeout_max: 800,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(1000),
        // A chunk travels as JSON (up to 4 bytes per byte) inside one frame.
        snapshot_max_chunk_size: 1 << 20,
        ..Default::default()
    }
    .validate()
    .map_err(|e| CoordinatorError::Raft(e.to_string()))?;
    let raft = Raft::new(
        node_id,
        Arc::new(config),
        Network { link: link.clone() },
        opened.log,
        opened.state_machine,
    )
    .await
    .map_err(|e| CoordinatorError::Raft(e.to_string()))?;
    let start_epoch = opened.state.borrow().epoch;
    let member = Arc::new(Member {
        node_id,
        addr: addr.clone(),
        raft: raft.clone(),
        config: opened.config,
        state: opened.state,
        node: Mutex::new(
            CoordinatorNode::new(failure_timeout)
                .with_tombstone_grace(tombstone_grace)
                .with_lost_timeout(lost_timeout),
        ),
        layout: Mutex::new(
            LayoutTally::with_split_entries(indexlet_split_entries)
                .with_split_load(indexlet_split_pages_per_s),
        ),
        started: std::time::Instant::now(),
        metrics: CoordinatorMetrics::new(start_epoch),
        link,
    });
    let metrics_task = metrics_listener.map(|listener| {
        if let Some(url) = &metrics_url {
            tracing::info!(node_id, %url, "serving metrics");
        }
        let dashboard = Arc::new(Dashboard::new());
        let scraper = tokio::spawn(dashboard.clone().scrape(member.config.clone()));
        let for_metrics = member.clone();
        let for_api = member.clone();
        let routes = tessera_observe::http::Routes::new()
            .get(tessera_observe::METRICS_PATH, move || {
                for_metrics.render_metrics()
            })
            .get(tessera_observe::DASHBOARD_PATH, Dashboard::page)
            .get("/dashboard", Dashboard::page)
            .get(dashboard::API_PATH, move || {
                let config = for_api.config.borrow().clone();
                dashboard.api(&config, for_api.member_view())
            });
        let server = tokio::spawn(tessera_observe::http::serve(listener, routes));
        (server, scraper)
    });

    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| CoordinatorError::Raft(e.to_string()))?;
    let mut join_via = None;
    if initialized {
        tracing::info!(node_id, %addr, "resuming coordinator member from {}", data_dir.display());
        let is_voter = raft
            .with_raft_state(move |st| {
                st.membership_state
                    .effective()
                    .voter_ids()
                    .any(|id| id == node_id)
            })
            .await
            .map_err(|e| CoordinatorError::Raft(e.to_string()))?;
        match join {
            // A member that stopped after being added as a learner but
            // before becoming a voter finishes joining.
            Some(via) if !is_voter => join_via = Some(via),
            Some(_) => tracing::info!("the data directory holds state; --join is ignored"),
            None => {}
        }
        if let Some(known) = member.membership_node(node_id) {
            if known.addr != addr {
                tracing::warn!(known = %known.addr, %addr, "this member is known to the group at another address");
            } else if known.metrics != me.metrics && join_via.is_none() {
                // Restarted with another metrics address: asking to join
                // again (through itself, redirected to the leader) updates
                // its entry in the membership.
                tracing::info!(
                    node_id,
                    "updating this member's metrics URL in the membership"
                );
                join_via = Some(addr.clone());
            }
        }
    } else if let Some(via) = join {
        tracing::info!(node_id, %addr, %via, "joining coordinator group");
        join_via = Some(via);
    } else {
        tracing::info!(node_id, %addr, "initializing a single-member coordinator group");
        let members = BTreeMap::from([(node_id, me.clone())]);
        if let Err(e) = raft.initialize(members).await {
            // NotAllowed means it is initialized already, which is the goal.
            tracing::warn!("initialize: {e}");
        }
    }

    let joining = async {
        if let Some(via) = join_via {
            join_group(&via, node_id, &me, &member.link).await?;
            tracing::info!(node_id, %addr, "joined coordinator group");
        }
        std::future::pending::<Result<(), CoordinatorError>>().await
    };
    let result = tokio::select! {
        () = shutdown => Ok(()),
        result = joining => result,
        () = accept_loop(listener, member.clone()) => Ok(()),
        () = detect_failures(member.clone()) => Ok(()),
    };
    // Leaving the select dropped the accept loop: every connection and
    // request task is aborted, so peers see this member go away at once.
    tracing::info!(node_id, %addr, "coordinator member stopping");
    if let Some((server, scraper)) = metrics_task {
        server.abort();
        scraper.abort();
    }
    if let Err(e) = raft.shutdown().await {
        tracing::warn!("raft shutdown: {e}");
    }
    drop(member);
    result
}

/// Opens the store, waiting a little if a previous instance in this process
/// is still releasing its lock.
async fn open_store(data_dir: &std::path::Path) -> Result<store::Opened, CoordinatorError> {
    let deadline = Instant::now() + STORE_LOCK_WAIT;
    loop {
        match store::open(data_dir) {
            Err(OpenStoreError::Fjall {
                source: fjall::Error::Locked,
                ..
            }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            result => return Ok(result?),
        }
    }
}

/// Asks the group at `via` (following redirects) to add this member, or to
/// update its entry.
async fn join_group(
    via: &str,
    node_id: NodeId,
    me: &MemberNode,
    link: &CoordLink,
) -> Result<(), CoordinatorError> {
    let options = CoordClientOptions {
        attempt_timeout: Duration::from_secs(15),
        give_up_after: Duration::from_secs(20),
    };
    let client = CoordClient::with_link([via], options, link.clone());
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        let reason = match client
            .call(CoordRequest::Join {
                node_id,
                addr: me.addr.clone(),
                metrics: me.metrics.clone(),
            })
            .await
        {
            Ok(CoordResponse::Done) => return Ok(()),
            Ok(CoordResponse::Failed { reason, .. }) => reason,
            Ok(other) => format!("unexpected answer {other:?}"),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(CoordinatorError::Join {
                via: via.to_string(),
                reason,
            });
        }
        tracing::info!(%reason, "join not done yet; retrying");
        // Pacing between attempts (another membership change may be running).
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The leader's failure detector loop: follows leadership, and proposes
/// every Available daemon silent for the failure timeout as offline.
async fn detect_failures(member: Arc<Member>) {
    let tick = (member.failure_timeout() / 10).clamp(Duration::from_millis(10), DETECTOR_TICK_MAX);
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if !member.sync_leadership() {
            continue;
        }
        let state = member.state.borrow().clone();
        let now = member.now();
        // Fenced daemons whose lease ran out: reporters agreed they are
        // unreachable (`CoordinatorNode::unreachable`).
        let fences = member.node().fences_due(&state, now);
        for command in fences {
            tracing::warn!(?command, epoch = %state.epoch, "unreachable, its lease run out: taking the daemon offline");
            match member.write(command).await {
                CoordResponse::Done => member.metrics.detected(Detection::Unreachable),
                other => tracing::warn!("the leader's proposal failed: {other:?}"),
            }
        }
        let commands = member.node().tick(&state, now);
        for command in commands {
            match &command {
                Command::DaemonOffline { .. } => {
                    tracing::warn!(?command, timeout = ?member.failure_timeout(), epoch = %state.epoch, "no heartbeat: taking the daemon offline")
                }
                Command::DaemonLost { .. } => {
                    tracing::warn!(?command, timeout = ?member.node().lost_timeout(), epoch = %state.epoch, "silent for the lost timeout: declaring the daemon lost")
                }
                _ => {
                    tracing::info!(?command, epoch = %state.epoch, "tombstones: moving the horizon")
                }
            }
            let offline = matches!(command, Command::DaemonOffline { .. });
            match member.write(command).await {
                CoordResponse::Done if offline => member.metrics.detected(Detection::Silent),
                CoordResponse::Done => {}
                other => tracing::warn!("the leader's proposal failed: {other:?}"),
            }
        }
        // Dropped parts leave once every daemon knows them dropping,
        // which heartbeats tell, not reports.
        member.propose_layout().await;
    }
}

/// How long the leader's probe of a reported daemon may take to connect.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether a TCP connection to `addr` opens within [`PROBE_TIMEOUT`].
async fn probe(addr: &str) -> bool {
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

async fn accept_loop(listener: TcpListener, member: Arc<Member>) {
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((tcp, peer)) => {
                let member = member.clone();
                connections.spawn(async move {
                    match member.link.transport.accept(tcp, HANDSHAKE_TIMEOUT).await {
                        Ok(stream) => serve_connection(stream, peer, member).await,
                        Err(AcceptError::Plain { tcp }) => refuse_plain(tcp, peer).await,
                        Err(e) => tracing::warn!(%peer, "{e}"),
                    }
                });
            }
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
}

/// Requests of one connection being handled or answered but not yet
/// written; beyond it the connection is not read until one is written.
const CONNECTION_REQUESTS_MAX: usize = 1024;

/// How long an accepted connection may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers the first request of a plain client on a TLS port with why it
/// is refused, instead of a bare close that its client would retry until
/// it gives up. Reads at most one small frame, briefly.
async fn refuse_plain(tcp: TcpStream, peer: SocketAddr) {
    const PLAIN_FRAME_BYTES_MAX: usize = 64 * 1024;
    tracing::warn!(%peer, "refused a plain TCP connection: this member accepts only TLS");
    let (mut reader, mut writer) = tcp.into_split();
    let first = tokio::time::timeout(
        Duration::from_secs(2),
        read_frame(&mut reader, PLAIN_FRAME_BYTES_MAX),
    )
    .await;
    let id = match first {
        Ok(Ok(Message::CoordRequest { id, .. } | Message::CredentialedRequest { id, .. })) => id,
        _ => return,
    };
    let response = CoordResponse::Failed {
        status: AdminStatus::CoordFail,
        reason: "this coordinator accepts only TLS connections; pass --tls-ca (docs/design/tls.md)"
            .to_string(),
    };
    let _ = write_frame(&mut writer, &Message::CoordResponse { id, response }).await;
    let _ = writer.flush().await;
}

async fn serve_connection(stream: Stream, peer: SocketAddr, member: Arc<Member>) {
    let (mut reader, writer) = stream.into_split();
    // Each request takes a slot before its task starts and fills it with
    // the response: a client that sends faster than it reads stops being
    // read once the slots are taken (TCP pushes back) instead of growing
    // this member's memory.
    let (responses, mut responses_rx) = mpsc::channel::<Message>(CONNECTION_REQUESTS_MAX);
    // The writer and every request task live in this set: when the
    // connection ends, dropping the set aborts them all.
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut writer = BufWriter::new(writer);
        while let Some(message) = responses_rx.recv().await {
            if write_frame(&mut writer, &message).await.is_err() {
                return;
            }
            while let Ok(message) = responses_rx.try_recv() {
                if write_frame(&mut writer, &message).await.is_err() {
                    return;
                }
            }
            if writer.flush().await.is_err() {
                return;
            }
        }
    });
    loop {
        let (id, token, request) = match read_frame(&mut reader, FRAME_BYTES_MAX_DEFAULT).await {
            Ok(Message::CoordRequest { id, request }) => (id, None, request),
            Ok(Message::CredentialedRequest { id, token, request }) => (id, Some(token), request),
            Ok(other) => {
                tracing::warn!(%peer, "closing connection: not a coordinator request: {}", message_kind(&other));
                break;
            }
            Err(FrameError::Closed) => break,
            Err(e) => {
                tracing::warn!(%peer, "closing connection: {e}");
                break;
            }
        };
        let Ok(slot) = responses.clone().reserve_owned().await else {
            break; // the writer is gone: so is the connection
        };
        match admit(member.link.admin_token.as_ref(), token.as_deref(), &request) {
            Ok(()) => {
                let member = member.clone();
                tasks.spawn(async move {
                    let response = member.handle(request).await;
                    slot.send(Message::CoordResponse { id, response });
                });
            }
            Err(refusal) => {
                tracing::warn!(%peer, ?refusal, "refused a configuration change");
                slot.send(Message::CoordResponse {
                    id,
                    response: refusal,
                });
            }
        }
        while tasks.try_join_next().is_some() {}
    }
}

fn message_kind(message: &Message) -> &'static str {
    match message {
        Message::DaemonRequest { .. } => "DaemonRequest",
        Message::DaemonResponse { .. } => "DaemonResponse",
        Message::Chain(_) => "Chain",
        Message::Transfer(_) => "Transfer",
        Message::Held(_) => "Held",
        Message::Expected(_) => "Expected",
        Message::Rebuild(_) => "Rebuild",
        Message::CoordRequest { .. } => "CoordRequest",
        Message::CoordResponse { .. } => "CoordResponse",
        Message::CredentialedRequest { .. } => "CredentialedRequest",
    }
}

/// What the request tasks share.
struct Member {
    node_id: NodeId,
    addr: String,
    raft: Raft,
    /// The configuration as of the last applied entry.
    config: watch::Receiver<Arc<Configuration>>,
    /// The cluster state as of the last applied entry.
    state: watch::Receiver<Arc<ClusterState>>,
    /// The policy toward daemons (heartbeats, failure detection), which
    /// acts when this member leads. Held briefly, never across awaits.
    node: Mutex<CoordinatorNode>,
    /// The leader's tally of backfill reports (see [`LayoutTally`]).
    /// Held briefly, never across awaits.
    layout: Mutex<LayoutTally>,
    /// The origin of the node's time.
    started: std::time::Instant,
    /// What `/metrics` serves.
    metrics: CoordinatorMetrics,
    /// How this member accepts and dials, and the credential it requires
    /// and sends.
    link: CoordLink,
}

impl Member {
    async fn handle(&self, request: CoordRequest) -> CoordResponse {
        match request {
            CoordRequest::GetConfig { known, wait_ms } => self.get_config(known, wait_ms).await,
            CoordRequest::RegisterDaemon {
                id,
                addr,
                metrics,
                installed,
            } => {
                self.write(Command::RegisterDaemon {
                    id,
                    addr,
                    metrics,
                    installed,
                })
                .await
            }
            CoordRequest::AddSpace { description } => {
                // Refuse bad descriptions before they take a log entry; the
                // state machine checks again when it applies the command.
                if let Err(e) = tessera_types::parse::parse_space(&description) {
                    return CoordResponse::Failed {
                        status: AdminStatus::BadSpace,
                        reason: e.to_string(),
                    };
                }
                self.write(Command::AddSpace { description }).await
            }
            CoordRequest::RmSpace { name } => self.write(Command::RmSpace { name }).await,
            CoordRequest::SetReadOnly { read_only } => {
                self.write(Command::SetReadOnly { read_only }).await
            }
            CoordRequest::SetAdvisorParams { params } => {
                // Refused before it takes a log entry (a NaN would not
                // even encode); the state machine checks again.
                if let Err(e) = params.validate() {
                    return CoordResponse::Failed {
                        status: AdminStatus::BadSpace,
                        reason: e.to_string(),
                    };
                }
                self.write(Command::SetAdvisorParams { params }).await
            }
            CoordRequest::Join {
                node_id,
                addr,
                metrics,
            } => self.add_member(node_id, MemberNode { addr, metrics }).await,
            CoordRequest::Raft { payload } => match serve_rpc(&self.raft, &payload).await {
                Ok(payload) => CoordResponse::Raft { payload },
                Err(e) => {
                    tracing::warn!("undecodable Raft RPC: {e}");
                    CoordResponse::Failed {
                        status: AdminStatus::Garbage,
                        reason: format!("undecodable Raft RPC: {e}"),
                    }
                }
            },
            CoordRequest::Status => CoordResponse::Status(Box::new(self.status())),
            CoordRequest::Heartbeat { id, epoch } => self.heartbeat(id, epoch),
            CoordRequest::Unreachable { daemon, reporter } => {
                if let Some(not_leader) = self.not_leader() {
                    return not_leader;
                }
                let state = self.state.borrow().clone();
                let now = self.now();
                // Agreeing reporters fence the daemon; the detector's loop
                // takes it offline once its lease has run out.
                if self.node().unreachable(&state, daemon, reporter, now) {
                    return CoordResponse::Done;
                }
                if self.node().probe_wanted(daemon, now) {
                    if let Some(addr) = state.daemons.get(&daemon).map(|d| d.addr.clone()) {
                        if !probe(&addr).await {
                            let state = self.state.borrow().clone();
                            let now = self.now();
                            self.node().unreachable(
                                &state,
                                daemon,
                                tessera_protocol::Reporter::Coordinator,
                                now,
                            );
                        }
                    }
                }
                CoordResponse::Done
            }
            CoordRequest::Leave { id, reason } => {
                if let Some(not_leader) = self.not_leader() {
                    return not_leader;
                }
                let command = self.node().leave(id, reason);
                self.write_detection(command, Detection::Leave).await
            }
            CoordRequest::TransferComplete { transfer } => {
                self.write(Command::TransferComplete { transfer }).await
            }
            CoordRequest::RebuildComplete { rebuild } => {
                self.write(Command::RebuildComplete { rebuild }).await
            }
            CoordRequest::CollectReport {
                id,
                in_flight_since,
                waiting,
            } => {
                if let Some(not_leader) = self.not_leader() {
                    return not_leader;
                }
                self.node().collect_report(id, in_flight_since, waiting);
                CoordResponse::Done
            }
            CoordRequest::ServerOffline { id } => {
                self.fenced_write(id, Command::ServerOffline { id }).await
            }
            CoordRequest::ServerOnline { id } => self.write(Command::ServerOnline { id }).await,
            CoordRequest::ServerForget { id } => {
                self.fenced_write(id, Command::ServerForget { id }).await
            }
            CoordRequest::ServerKill { id } => {
                self.fenced_write(id, Command::ServerKill { id }).await
            }
            CoordRequest::Stability => self.stability(),
            CoordRequest::AddSubspace { space, attrs } => {
                self.write(Command::AddSubspace { space, attrs }).await
            }
            CoordRequest::RmSubspace { space, part } => {
                self.write(Command::RmSubspace { space, part }).await
            }
            CoordRequest::AddIndex { space, attr } => {
                self.write(Command::AddIndex { space, attr }).await
            }
            CoordRequest::RmIndex { space, part } => {
                self.write(Command::RmIndex { space, part }).await
            }
            CoordRequest::AddGlobalIndex {
                space,
                attr,
                partitions,
            } => {
                self.write(Command::AddGlobalIndex {
                    space,
                    attr,
                    partitions,
                })
                .await
            }
            CoordRequest::RmGlobalIndex { space, attr } => {
                self.write(Command::RmGlobalIndex { space, attr }).await
            }
            CoordRequest::SplitGlobalIndex { space, attr, at } => {
                self.write(Command::SplitGlobalIndex { space, attr, at })
                    .await
            }
            CoordRequest::Relayout { space, description } => {
                self.write(Command::Relayout { space, description }).await
            }
            report @ (CoordRequest::BackfillReport { .. }
            | CoordRequest::IndexletReport { .. }
            | CoordRequest::IndexletLoad { .. }) => {
                if let Some(not_leader) = self.not_leader() {
                    return not_leader;
                }
                self.layout().on_request(&report);
                self.propose_layout().await;
                CoordResponse::Done
            }
        }
    }

    fn layout(&self) -> std::sync::MutexGuard<'_, LayoutTally> {
        // Plain bookkeeping, as the node's: safe to carry on after a panic.
        self.layout.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes what the layout tally proposes (readiness, progress, the
    /// removal of dropped parts). A refused or lost write is proposed
    /// again at the next report or tick.
    async fn propose_layout(&self) {
        let state = self.state.borrow().clone();
        let commands = self.layout().proposals(&state);
        for command in commands {
            match self.write(command).await {
                CoordResponse::Done => {}
                other => tracing::warn!("a layout step was not committed: {other:?}"),
            }
        }
    }

    /// Proposes a command that takes a daemon offline, and counts it once
    /// it is committed.
    async fn write_detection(&self, command: Command, why: Detection) -> CoordResponse {
        let response = self.write(command).await;
        if response == CoordResponse::Done {
            self.metrics.detected(why);
        }
        response
    }

    /// Who serves the dashboard's snapshot, and in which Raft role.
    fn member_view(&self) -> MemberView {
        let role = format!("{:?}", self.raft.metrics().borrow().state);
        MemberView {
            node_id: self.node_id,
            role: role.to_ascii_lowercase(),
        }
    }

    /// The `/metrics` page: Raft's view and the applied state, read now.
    fn render_metrics(&self) -> tessera_observe::http::Response {
        let raft = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow();
            RaftView {
                role: format!("{:?}", metrics.state),
                term: metrics.current_term,
                last_log_index: metrics.last_log_index,
                applied_index: metrics.last_applied.map(|l| l.index),
                members: metrics.membership_config.membership().nodes().count(),
            }
        };
        let state = self.state.borrow().clone();
        self.metrics.render(&raft, &state)
    }

    fn node(&self) -> std::sync::MutexGuard<'_, CoordinatorNode> {
        // A panic while holding the lock leaves plain bookkeeping behind;
        // carrying on with it is safe.
        self.node
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Now, in the node's time.
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// An operator's `command` that takes daemon `id` out of its chains:
    /// first refuse its lease and wait until every lease it was granted
    /// has run out (`CoordinatorNode::fence_for_operator`), then propose
    /// it, then lift the refusal (the daemon's state answers from then on).
    async fn fenced_write(&self, id: DaemonId, command: Command) -> CoordResponse {
        let state = self.state.borrow().clone();
        let now = self.now();
        let wait = self.node().fence_for_operator(&state, id, now);
        if !wait.is_zero() {
            tracing::info!(daemon = %id, ?wait, "refusing the daemon's lease before taking it out");
            tokio::time::sleep(wait).await;
        }
        let response = self.write(command).await;
        self.node().operator_fence_done(id);
        response
    }

    fn failure_timeout(&self) -> Duration {
        self.node().failure_timeout()
    }

    /// Tells the detector whether (and in which term) this member leads, as
    /// Raft sees it now; returns whether it leads.
    fn sync_leadership(&self) -> bool {
        let (leader, term) = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow();
            (metrics.current_leader, metrics.current_term)
        };
        let mut node = self.node();
        if leader == Some(self.node_id) {
            if node.lead(term) {
                tracing::info!(term, "leading: watching daemon heartbeats");
            }
            true
        } else {
            node.follow();
            false
        }
    }

    /// `NotLeader` unless this member leads.
    fn not_leader(&self) -> Option<CoordResponse> {
        if self.sync_leadership() {
            return None;
        }
        let leader = self.raft.metrics().borrow().current_leader;
        let leader_addr = leader
            .filter(|id| *id != self.node_id)
            .and_then(|id| self.membership_addr(id));
        Some(CoordResponse::NotLeader { leader_addr })
    }

    /// A daemon is alive at `epoch` (see [`CoordinatorNode::heartbeat`]).
    fn heartbeat(&self, id: DaemonId, epoch: Epoch) -> CoordResponse {
        if let Some(not_leader) = self.not_leader() {
            return not_leader;
        }
        let state = self.state.borrow().clone();
        let now = self.now();
        self.layout()
            .on_request(&CoordRequest::Heartbeat { id, epoch });
        CoordResponse::Heartbeat(self.node().heartbeat(&state, id, epoch, now))
    }

    /// Stable when every Available daemon reported the current epoch and no
    /// transfer is running.
    fn stability(&self) -> CoordResponse {
        if let Some(not_leader) = self.not_leader() {
            return not_leader;
        }
        let state = self.state.borrow().clone();
        let lagging = self.node().lagging(&state);
        let transfers = state.transfers.len();
        CoordResponse::Stability {
            epoch: state.epoch,
            stable: lagging.is_empty() && transfers == 0,
            lagging,
            transfers,
        }
    }

    /// Long-poll: answers once the applied epoch is newer than `known`, or
    /// with `Config(None)` after the (capped) wait.
    async fn get_config(&self, known: Epoch, wait_ms: u32) -> CoordResponse {
        let deadline =
            Instant::now() + Duration::from_millis(u64::from(wait_ms)).min(CONFIG_WAIT_MAX);
        let mut config = self.config.clone();
        loop {
            {
                let current = config.borrow_and_update();
                if current.epoch > known {
                    return CoordResponse::Config(Some(Box::new((**current).clone())));
                }
            }
            match tokio::time::timeout_at(deadline, config.changed()).await {
                Ok(Ok(())) => {}
                // Timed out, or the state machine is gone (shutting down).
                Ok(Err(_)) | Err(_) => return CoordResponse::Config(None),
            }
        }
    }

    async fn write(&self, command: Command) -> CoordResponse {
        let written =
            match tokio::time::timeout(WRITE_TIMEOUT, self.raft.client_write(command)).await {
                Ok(written) => written,
                Err(_) => {
                    return CoordResponse::Failed {
                        status: AdminStatus::CoordFail,
                        reason: format!("the change was not committed within {WRITE_TIMEOUT:?}"),
                    }
                }
            };
        match written {
            Ok(response) => match response.data {
                CommandResult::Registered { id } => CoordResponse::Registered { id },
                CommandResult::PartAdded { part } => CoordResponse::PartAdded { part },
                CommandResult::SpaceAdded { .. } | CommandResult::Done => CoordResponse::Done,
                CommandResult::Failed { status, reason } => {
                    CoordResponse::Failed { status, reason }
                }
            },
            Err(e) => self.write_error(e),
        }
    }

    fn write_error(
        &self,
        error: RaftError<NodeId, ClientWriteError<NodeId, MemberNode>>,
    ) -> CoordResponse {
        match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
                let leader_addr = forward
                    .leader_node
                    .map(|n| n.addr)
                    .or_else(|| forward.leader_id.and_then(|id| self.membership_addr(id)));
                CoordResponse::NotLeader { leader_addr }
            }
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
                CoordResponse::Failed {
                    status: AdminStatus::CoordFail,
                    reason: e.to_string(),
                }
            }
            RaftError::Fatal(e) => CoordResponse::Failed {
                status: AdminStatus::CoordFail,
                reason: format!("coordinator member stopped: {e}"),
            },
        }
    }

    /// Adds a member: as a learner first (it catches up), then as a voter.
    /// A known member at the same address whose metrics URL changed has
    /// its entry replaced.
    async fn add_member(&self, node_id: NodeId, node: MemberNode) -> CoordResponse {
        let (leader, membership) = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow();
            (
                metrics.current_leader,
                metrics.membership_config.membership().clone(),
            )
        };
        if leader != Some(self.node_id) {
            let leader_addr = leader.and_then(|id| self.membership_addr(id));
            return CoordResponse::NotLeader { leader_addr };
        }
        let is_voter = membership.voter_ids().any(|id| id == node_id);
        match membership.get_node(&node_id) {
            Some(known) if known.addr != node.addr => {
                return CoordResponse::Failed {
                    status: AdminStatus::Duplicate,
                    reason: format!("member {node_id} is already known at {}", known.addr),
                }
            }
            Some(known) if known.metrics != node.metrics => {
                // Same address, so no member dials another one: replacing
                // the entry is safe (openraft's warning on SetNodes is
                // about changing where a member is reached).
                let change = ChangeMembers::SetNodes(BTreeMap::from([(node_id, node)]));
                match tokio::time::timeout(
                    WRITE_TIMEOUT,
                    self.raft.change_membership(change, false),
                )
                .await
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return self.write_error(e),
                    Err(_) => {
                        return CoordResponse::Failed {
                            status: AdminStatus::CoordFail,
                            reason: "the membership change was not committed in time".to_string(),
                        }
                    }
                }
                if is_voter {
                    return CoordResponse::Done;
                }
            }
            Some(_) if is_voter => return CoordResponse::Done,
            Some(_) => {}
            None => {
                let added =
                    tokio::time::timeout(WRITE_TIMEOUT, self.raft.add_learner(node_id, node, true))
                        .await;
                match added {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return self.write_error(e),
                    Err(_) => {
                        return CoordResponse::Failed {
                            status: AdminStatus::CoordFail,
                            reason: "the new member did not catch up in time".to_string(),
                        }
                    }
                }
            }
        }
        let change = ChangeMembers::AddVoterIds(BTreeSet::from([node_id]));
        match tokio::time::timeout(WRITE_TIMEOUT, self.raft.change_membership(change, false)).await
        {
            Ok(Ok(_)) => CoordResponse::Done,
            Ok(Err(e)) => self.write_error(e),
            Err(_) => CoordResponse::Failed {
                status: AdminStatus::CoordFail,
                reason: "the membership change was not committed in time".to_string(),
            },
        }
    }

    fn membership_addr(&self, node_id: NodeId) -> Option<String> {
        self.membership_node(node_id).map(|n| n.addr)
    }

    fn membership_node(&self, node_id: NodeId) -> Option<MemberNode> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics
            .membership_config
            .membership()
            .get_node(&node_id)
            .cloned()
    }

    fn status(&self) -> CoordStatus {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        CoordStatus {
            node_id: self.node_id,
            addr: self.addr.clone(),
            leader_id: metrics.current_leader,
            leader_addr: metrics
                .current_leader
                .and_then(|id| membership.get_node(&id).map(|n| n.addr.clone())),
            term: metrics.current_term,
            members: membership
                .nodes()
                .map(|(id, n)| CoordinatorInfo {
                    id: *id,
                    addr: n.addr.clone(),
                    metrics: n.metrics.clone(),
                })
                .collect(),
            voters: membership.voter_ids().collect(),
            epoch: self.config.borrow().epoch,
            applied_index: metrics.last_applied.map(|l| l.index),
        }
    }
}
