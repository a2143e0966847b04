//! The tokio shell around the replica cores: sockets, peers, the
//! configuration long-poll, and search execution over committed data.
//!
//! Keys are spread over [`SHARDS`] cores by their hash, so updates of
//! different keys never wait on one lock; all messages of one key meet in
//! one core.

use crate::core::{Effect, ReplicaCore, ReplyTo};
use crate::index::IndexedEngine;
use crate::record::Record;
use crate::search;
use crate::transfer::{region_digest, scan_region, Action as TransferAction, Transfers};
use crate::{DaemonError, DaemonOptions};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClient, CoordClientOptions};
use tessera_protocol::frame::encode;
use tessera_protocol::{
    read_frame, AdminStatus, ChainMsg, CoordRequest, CoordResponse, DaemonRequest, DaemonResponse,
    FrameError, Message, Status,
};
use tessera_protocol::{TransferEntry, TransferMsg};
use tessera_storage::{Durability, Engine, FjallEngine};
use tessera_types::coordinate::key_bytes;
use tessera_types::{Configuration, DaemonId, Epoch, RegionId, Value};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Number of replica cores per daemon.
pub const SHARDS: usize = 16;

/// Records per state-transfer message.
const TRANSFER_BATCH: usize = 256;

const META_DAEMON_ID: &str = "daemon_id";

pub(crate) struct Daemon {
    pub(crate) me: DaemonId,
    /// The storage engine behind `index`, which keeps every region's index
    /// in step with its objects.
    pub(crate) engine: Arc<dyn Engine>,
    index: Arc<IndexedEngine>,
    shards: Vec<Mutex<ReplicaCore>>,
    config: RwLock<Arc<Configuration>>,
    peers: Mutex<HashMap<DaemonId, mpsc::UnboundedSender<Message>>>,
    conns: Mutex<HashMap<u64, mpsc::UnboundedSender<Message>>>,
    next_conn: AtomicU64,
    frame_bytes_max: usize,
    coord: CoordClient,
    /// State transfers this daemon sends or receives.
    transfers: Mutex<Transfers>,
    lease: Lease,
}

/// Whether this daemon may serve clients: only while the coordinator has
/// heard from it recently. The coordinator declares a daemon failed only
/// after a full failure timeout without heartbeats, and the daemon stops
/// serving after half of it, so a daemon cut off from the coordinator
/// stops answering before a replacement can take its place.
struct Lease {
    started: std::time::Instant,
    /// Milliseconds since `started` at which the last answered heartbeat
    /// was sent; 0 until
    /// the coordinator first answers one (before that no lease is enforced,
    /// for coordinators that do not detect failures).
    last_ok_ms: AtomicU64,
    valid_for: Duration,
}

impl Lease {
    /// Now, in the lease's milliseconds (never 0).
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis().max(1) as u64
    }

    /// Renews the lease from `sent_ms`, when the answered heartbeat left:
    /// the coordinator heard it after that, so the lease cannot outlast
    /// the coordinator's failure timeout however late the answer came.
    fn renew(&self, sent_ms: u64) {
        self.last_ok_ms.fetch_max(sent_ms, Ordering::AcqRel);
    }

    fn valid(&self) -> bool {
        let last = self.last_ok_ms.load(Ordering::Acquire);
        last == 0
            || self.started.elapsed().as_millis() as u64 <= last + self.valid_for.as_millis() as u64
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn shard_of(key: &Value) -> usize {
    shard_of_bytes(&key_bytes(key))
}

fn shard_of_bytes(key: &[u8]) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % SHARDS as u64) as usize
}

impl Daemon {
    pub(crate) fn config(&self) -> Arc<Configuration> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `f` on the key's core and carries out its effects in order,
    /// still under the core's lock so that one key's messages keep their order.
    fn with_core(&self, key: &Value, f: impl FnOnce(&mut ReplicaCore)) {
        let mut core = lock(&self.shards[shard_of(key)]);
        f(&mut core);
        let effects = core.drain_effects();
        self.execute(effects);
    }

    fn execute(&self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Send { to, msg } => self.send_peer(to, Message::Chain(msg)),
                Effect::Ship { transfer, entry } => {
                    self.ship(transfer, None, vec![entry]);
                }
                Effect::Reply { to, response } => self.reply(to, response),
            }
        }
    }

    pub(crate) fn reply(&self, to: ReplyTo, response: DaemonResponse) {
        if let Some(conn) = lock(&self.conns).get(&to.conn) {
            let _ = conn.send(Message::DaemonResponse {
                id: to.id,
                response,
            });
        }
    }

    fn send_peer(self: &Daemon, to: DaemonId, msg: Message) {
        if let Some(tx) = self.peer_sender(to) {
            let _ = tx.send(msg);
        }
    }

    /// The queue of messages to a peer, connecting on first use.
    fn peer_sender(self: &Daemon, to: DaemonId) -> Option<mpsc::UnboundedSender<Message>> {
        let mut peers = lock(&self.peers);
        if let Some(tx) = peers.get(&to) {
            if !tx.is_closed() {
                return Some(tx.clone());
            }
        }
        let Some(addr) = self.config().daemon_addr(to).map(str::to_string) else {
            tracing::warn!(%to, "no address for peer");
            return None;
        };
        let (tx, rx) = mpsc::unbounded_channel();
        peers.insert(to, tx.clone());
        tokio::spawn(peer_writer(to, addr, rx));
        Some(tx)
    }

    fn install_config(self: &Arc<Self>, config: Configuration) {
        let config = Arc::new(config);
        {
            let mut current = self.config.write().unwrap_or_else(|p| p.into_inner());
            if config.epoch <= current.epoch {
                return;
            }
            // Before anyone can write to a region this configuration adds.
            self.index.on_config(&config);
            *current = config.clone();
        }
        tracing::info!(epoch = %config.epoch, "installed configuration");
        // A peer's address may have changed: reconnect lazily.
        lock(&self.peers).clear();
        // Transfers first: a core ships the commits of a new transfer from
        // now on, and they must find the transfer known.
        let actions = lock(&self.transfers).on_config(&config);
        for shard in &self.shards {
            let mut core = lock(shard);
            core.on_config(config.clone());
            let effects = core.drain_effects();
            self.execute(effects);
        }
        self.drop_removed_regions(&config);
        self.run_transfer_actions(actions);
    }

    /// Numbers entries of `transfer` and queues them for its target, in
    /// the order numbered. False when the transfer (or this attempt of it,
    /// when given) is no longer being sent.
    fn ship(&self, transfer: u64, attempt: Option<u32>, entries: Vec<TransferEntry>) -> bool {
        let mut transfers = lock(&self.transfers);
        match transfers.stamp(transfer, attempt, entries) {
            Some((to, msg)) => {
                self.send_peer(to, Message::Transfer(msg));
                true
            }
            None => false,
        }
    }

    fn run_transfer_actions(self: &Arc<Self>, actions: Vec<TransferAction>) {
        for action in actions {
            match action {
                TransferAction::Scan {
                    transfer,
                    attempt,
                    region,
                    digest,
                } => self.scan_for_transfer(transfer, attempt, region, digest),
                TransferAction::Digest {
                    transfer,
                    region,
                    to,
                } => {
                    let daemon = self.clone();
                    tokio::task::spawn_blocking(move || {
                        match region_digest(daemon.engine.as_ref(), region) {
                            Ok(buckets) => daemon.send_peer(
                                to,
                                Message::Transfer(TransferMsg::Digest {
                                    transfer,
                                    from: daemon.me,
                                    buckets,
                                }),
                            ),
                            // The source ships everything after a while.
                            Err(e) => tracing::error!(transfer, "region digest failed: {e}"),
                        }
                    });
                }
                TransferAction::Store { region, entries } => {
                    for entry in entries {
                        let mut core = lock(&self.shards[shard_of_bytes(&entry.key)]);
                        core.on_transfer_entry(region, entry);
                        let effects = core.drain_effects();
                        self.execute(effects);
                    }
                }
                TransferAction::Send { to, msg } => self.send_peer(to, Message::Transfer(msg)),
                TransferAction::Hold { transfer, region } => {
                    for shard in &self.shards {
                        lock(shard).hold(region);
                    }
                    let actions = lock(&self.transfers).held(transfer);
                    self.run_transfer_actions(actions);
                }
                TransferAction::CheckDrained { transfer, region } => {
                    // Each core ships its commits before its lock is let
                    // go, so the count `drained` checks covers them.
                    if self.shards.iter().all(|s| lock(s).in_flight(region) == 0) {
                        let actions = lock(&self.transfers).drained(transfer);
                        self.run_transfer_actions(actions);
                    }
                }
                TransferAction::Release { region } => {
                    for shard in &self.shards {
                        let mut core = lock(shard);
                        core.release(region);
                        let effects = core.drain_effects();
                        self.execute(effects);
                    }
                }
                TransferAction::Complete { transfer } => {
                    let daemon = self.clone();
                    tokio::spawn(async move {
                        match daemon
                            .coord
                            .call(CoordRequest::TransferComplete { transfer })
                            .await
                        {
                            Ok(CoordResponse::Done) => {
                                tracing::info!(transfer, "state transfer: caught up")
                            }
                            Ok(other) => tracing::debug!(transfer, "completion: {other:?}"),
                            Err(e) => tracing::debug!(transfer, "completion not reported: {e}"),
                        }
                    });
                }
            }
        }
    }

    /// As the source of a transfer: ship every record of the region. Commits
    /// made meanwhile are shipped by the cores as they happen (they learned
    /// of the transfer before the scan began), and the target keeps the
    /// highest version of each key.
    fn scan_for_transfer(
        self: &Arc<Self>,
        transfer: u64,
        attempt: u32,
        region: RegionId,
        digest: Option<Vec<u64>>,
    ) {
        tracing::info!(transfer, attempt, %region, "state transfer: scanning");
        let daemon = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut sent = 0usize;
            let engine = daemon.engine.as_ref();
            let shipped = scan_region(engine, region, TRANSFER_BATCH, digest.as_deref(), |batch| {
                sent += batch.len();
                daemon.ship(transfer, Some(attempt), batch)
            });
            match shipped {
                Ok(true) => {
                    lock(&daemon.transfers).scanned(transfer, attempt);
                    tracing::info!(transfer, attempt, sent, "state transfer: scan shipped");
                }
                Ok(false) => {} // superseded by a restart
                // The target will ask for a restart.
                Err(e) => tracing::error!(transfer, "state transfer scan failed: {e}"),
            }
        });
    }

    /// A transfer message from a peer.
    fn on_transfer(self: &Arc<Self>, msg: TransferMsg) {
        let actions = lock(&self.transfers).on_message(msg);
        self.run_transfer_actions(actions);
    }

    /// Regions that no configuration names any more (their space was
    /// removed; region ids are never reused) are deleted from disk.
    fn drop_removed_regions(&self, config: &Configuration) {
        let Ok(stored) = self.engine.regions() else {
            return;
        };
        for region in stored {
            if config.region(region).is_none() {
                tracing::info!(%region, "dropping the data of a removed region");
                if let Err(e) = self.engine.drop_region(region) {
                    tracing::error!(%region, "could not drop region: {e}");
                }
            }
        }
    }

    fn handle_request(self: &Arc<Self>, conn: u64, id: u64, epoch: Epoch, request: DaemonRequest) {
        let to = ReplyTo { conn, id };
        if !self.lease.valid() {
            self.reply(
                to,
                DaemonResponse::Failed {
                    status: Status::Reconfigure,
                    reason: "this daemon has lost contact with the coordinator".into(),
                },
            );
            return;
        }
        match request {
            DaemonRequest::Update(update) => {
                let key = update.key.clone();
                self.with_core(&key, |core| core.on_update(to, epoch, update));
            }
            DaemonRequest::Get { space, key } => {
                let response = search::get(self, epoch, space, &key);
                self.reply(to, response);
            }
            DaemonRequest::Search {
                space,
                region,
                checks,
                sort,
                after,
                limit,
            } => {
                let daemon = self.clone();
                tokio::task::spawn_blocking(move || {
                    let response = search::search(
                        &daemon,
                        epoch,
                        space,
                        region,
                        &checks,
                        sort,
                        after.as_ref(),
                        limit,
                    );
                    daemon.reply(to, response);
                });
            }
            DaemonRequest::SearchKeys {
                space,
                region,
                checks,
                after,
            } => {
                let daemon = self.clone();
                tokio::task::spawn_blocking(move || {
                    let response = search::search_keys(
                        &daemon,
                        epoch,
                        space,
                        region,
                        &checks,
                        after.as_deref(),
                    );
                    daemon.reply(to, response);
                });
            }
        }
    }
}

/// Writes queued messages to a peer, connecting on first use. A message
/// that cannot be delivered is dropped: the point leader drives its update
/// again when the configuration changes.
async fn peer_writer(to: DaemonId, addr: String, mut rx: mpsc::UnboundedReceiver<Message>) {
    let mut stream: Option<BufWriter<TcpStream>> = None;
    while let Some(msg) = rx.recv().await {
        if stream.is_none() {
            match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&addr)).await {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    stream = Some(BufWriter::new(s));
                }
                _ => {
                    tracing::warn!(%to, %addr, "cannot reach peer; dropping a chain message");
                    continue;
                }
            }
        }
        let s = stream.as_mut().expect("connected above");
        let mut result = s.write_all(&encode(&msg)).await;
        while result.is_ok() {
            match rx.try_recv() {
                Ok(more) => result = s.write_all(&encode(&more)).await,
                Err(_) => break,
            }
        }
        if result.is_ok() {
            result = s.flush().await;
        }
        if let Err(e) = result {
            tracing::warn!(%to, "peer connection failed: {e}");
            stream = None;
        }
    }
}

async fn serve_connection(daemon: Arc<Daemon>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let conn = daemon.next_conn.fetch_add(1, Ordering::Relaxed);
    let (mut reader, writer) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    lock(&daemon.conns).insert(conn, tx);
    let writer_task = tokio::spawn(async move {
        let mut writer = BufWriter::new(writer);
        while let Some(msg) = rx.recv().await {
            let mut ok = writer.write_all(&encode(&msg)).await.is_ok();
            while ok {
                match rx.try_recv() {
                    Ok(more) => ok = writer.write_all(&encode(&more)).await.is_ok(),
                    Err(_) => break,
                }
            }
            if !ok || writer.flush().await.is_err() {
                break;
            }
        }
    });
    loop {
        match read_frame(&mut reader, daemon.frame_bytes_max).await {
            Ok(Message::DaemonRequest { id, epoch, request }) => {
                daemon.handle_request(conn, id, epoch, request)
            }
            Ok(Message::Transfer(msg)) => daemon.on_transfer(msg),
            Ok(Message::Chain(msg)) => {
                let key = match &msg {
                    ChainMsg::Forward(f) => f.key.clone(),
                    ChainMsg::Ack(a) => a.key.clone(),
                };
                daemon.with_core(&key, |core| core.on_chain(msg));
            }
            Ok(other) => {
                tracing::warn!("unexpected message on a daemon connection: {other:?}");
                break;
            }
            Err(FrameError::Closed) => break,
            Err(e) => {
                tracing::warn!("closing a connection: {e}");
                break;
            }
        }
    }
    lock(&daemon.conns).remove(&conn);
    writer_task.abort();
}

async fn register(
    coord: &CoordClient,
    engine: &dyn Engine,
    addr: &str,
) -> Result<DaemonId, DaemonError> {
    let stored = engine
        .meta_get(META_DAEMON_ID)
        .map_err(|e| DaemonError::Storage(e.to_string()))?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(|b| DaemonId(u64::from_be_bytes(b)));
    let request = CoordRequest::RegisterDaemon {
        id: stored,
        addr: addr.to_string(),
    };
    match coord
        .call(request)
        .await
        .map_err(|e| DaemonError::Coordinator(e.to_string()))?
    {
        CoordResponse::Registered { id } => {
            if stored != Some(id) {
                engine
                    .meta_put(META_DAEMON_ID, &id.0.to_be_bytes())
                    .map_err(|e| DaemonError::Storage(e.to_string()))?;
            }
            Ok(id)
        }
        other => Err(DaemonError::Coordinator(format!(
            "registration refused: {other:?}"
        ))),
    }
}

/// How often a daemon tells the coordinator it is alive.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
/// How long an answered heartbeat lets a daemon serve: half the
/// coordinator's default failure timeout (2 s).
const LEASE: Duration = Duration::from_millis(1000);

/// Sends heartbeats with the installed epoch; renews the lease on each
/// answer; stops the daemon when the coordinator no longer knows it.
async fn heartbeat(daemon: Arc<Daemon>, coordinator: String, stop: Arc<tokio::sync::Notify>) {
    let options = CoordClientOptions {
        attempt_timeout: Duration::from_millis(400),
        give_up_after: Duration::from_millis(400),
    };
    let coord = CoordClient::with_options(
        daemon.coord.members().into_iter().chain([coordinator]),
        options,
    );
    let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Whether the lease held at the last tick: operators want to know why
    // a daemon stopped serving, and when it resumed.
    let mut serving = true;
    loop {
        tick.tick().await;
        if serving != daemon.lease.valid() {
            serving = !serving;
            if serving {
                tracing::warn!("heartbeats answered again; serving clients");
            } else {
                tracing::warn!("no heartbeat answered within the lease; not serving clients");
            }
        }
        let request = CoordRequest::Heartbeat {
            id: daemon.me,
            epoch: daemon.config().epoch,
        };
        let sent_ms = daemon.lease.now_ms();
        match coord.call(request).await {
            Ok(CoordResponse::Done) => daemon.lease.renew(sent_ms),
            Ok(CoordResponse::Failed {
                status: AdminStatus::NotFound,
                reason,
            }) => {
                tracing::error!("the coordinator does not know this daemon ({reason}); stopping");
                stop.notify_one();
                return;
            }
            Ok(CoordResponse::Failed { status, reason }) if reason.contains("stop") => {
                tracing::error!("the coordinator stopped this daemon: {status}: {reason}");
                stop.notify_one();
                return;
            }
            Ok(other) => tracing::debug!("heartbeat answered {other:?}"),
            Err(e) => tracing::debug!("heartbeat failed: {e}"),
        }
    }
}

/// Waits for the first configuration that names this daemon.
async fn first_config(coord: &CoordClient, me: DaemonId) -> Result<Configuration, DaemonError> {
    let mut known = Epoch(0);
    for _ in 0..100 {
        match coord.wait_config(known, Duration::from_secs(5)).await {
            Ok(Some(config)) if config.daemons.contains_key(&me) => return Ok(config),
            Ok(Some(config)) => known = config.epoch,
            Ok(None) => {}
            Err(e) => return Err(DaemonError::Coordinator(e.to_string())),
        }
    }
    Err(DaemonError::Coordinator(
        "no configuration names this daemon".into(),
    ))
}

pub(crate) async fn run(
    options: DaemonOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DaemonError> {
    std::fs::create_dir_all(&options.data_dir)?;
    let storage: Arc<dyn Engine> = Arc::new(
        FjallEngine::open(&options.data_dir, options.durability)
            .map_err(|e| DaemonError::Storage(e.to_string()))?,
    );
    let listener = TcpListener::bind(options.listen).await?;
    let advertise = options.advertise.clone().unwrap_or_else(|| {
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| options.listen.to_string())
    });
    let coord = CoordClient::new([options.coordinator.clone()]);
    let me = register(&coord, storage.as_ref(), &advertise).await?;
    let config = Arc::new(first_config(&coord, me).await?);
    tracing::info!(%me, addr = %advertise, epoch = %config.epoch, "daemon registered");
    let index = Arc::new(
        IndexedEngine::open(storage, &config).map_err(|e| DaemonError::Storage(e.to_string()))?,
    );
    let engine: Arc<dyn Engine> = index.clone();
    let daemon = Arc::new(Daemon {
        me,
        engine: engine.clone(),
        index,
        shards: (0..SHARDS)
            .map(|_| Mutex::new(ReplicaCore::new(me, config.clone(), engine.clone())))
            .collect(),
        config: RwLock::new(config.clone()),
        peers: Mutex::new(HashMap::new()),
        conns: Mutex::new(HashMap::new()),
        next_conn: AtomicU64::new(1),
        frame_bytes_max: options.frame_bytes_max,
        coord: coord.clone(),
        transfers: Mutex::new(Transfers::new(me)),
        lease: Lease {
            started: std::time::Instant::now(),
            last_ok_ms: AtomicU64::new(0),
            valid_for: LEASE,
        },
    });
    daemon.drop_removed_regions(&config);
    let actions = lock(&daemon.transfers).on_config(&config);
    daemon.run_transfer_actions(actions);
    let stop = Arc::new(tokio::sync::Notify::new());
    // Heartbeats run on a thread of their own: cores write through the
    // engine on the runtime's workers (a state transfer can keep them busy
    // for seconds on a loaded machine), and a daemon that is alive but
    // busy must not be declared failed — it would leave every chain.
    let (heartbeat_stop, heartbeat_stopped) = tokio::sync::oneshot::channel::<()>();
    let heartbeat_thread = {
        let (daemon, coordinator, stop) =
            (daemon.clone(), options.coordinator.clone(), stop.clone());
        std::thread::Builder::new()
            .name("tessera-heartbeat".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        tracing::error!("cannot start the heartbeat runtime: {e}");
                        stop.notify_one();
                        return;
                    }
                };
                runtime.block_on(async move {
                    tokio::select! {
                        () = heartbeat(daemon, coordinator, stop) => {}
                        _ = heartbeat_stopped => {}
                    }
                });
            })?
    };

    let config_task = {
        let daemon = daemon.clone();
        tokio::spawn(async move {
            loop {
                let known = daemon.config().epoch;
                match coord.wait_config(known, Duration::from_secs(10)).await {
                    Ok(Some(config)) => daemon.install_config(config),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!("configuration poll failed: {e}");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        })
    };
    let accept_task = {
        let daemon = daemon.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(serve_connection(daemon.clone(), stream));
                    }
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        })
    };
    let tick_task = {
        let daemon = daemon.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                for shard in &daemon.shards {
                    let mut core = lock(shard);
                    core.on_tick();
                    let effects = core.drain_effects();
                    daemon.execute(effects);
                }
                let actions = lock(&daemon.transfers).on_tick();
                daemon.run_transfer_actions(actions);
            }
        })
    };
    let sync_task = {
        let engine = engine.clone();
        let interval = options.durability == Durability::Interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                if interval {
                    let engine = engine.clone();
                    let _ = tokio::task::spawn_blocking(move || engine.sync()).await;
                }
            }
        })
    };
    tokio::select! {
        () = shutdown => {}
        () = stop.notified() => tracing::warn!(%me, "the coordinator told this daemon to stop"),
    }
    let _ = heartbeat_stop.send(());
    let _ = heartbeat_thread.join();
    tick_task.abort();
    config_task.abort();
    accept_task.abort();
    sync_task.abort();
    engine
        .sync()
        .map_err(|e| DaemonError::Storage(e.to_string()))?;
    tracing::info!(%me, "daemon stopped");
    Ok(())
}

/// Decodes a stored record, treating corruption as a server error.
pub(crate) fn decode_record(bytes: &[u8]) -> Result<Record, DaemonResponse> {
    Record::decode(bytes).map_err(|e| DaemonResponse::Failed {
        status: Status::ServerError,
        reason: e.to_string(),
    })
}
