//! The tokio shell around the replica cores: sockets, peers, the
//! configuration long-poll, and search execution over committed data.
//!
//! Keys are spread over [`SHARDS`] cores by their hash, so updates of
//! different keys never wait on one lock; all messages of one key meet in
//! one core.

use crate::core::{Effect, ReplicaCore, ReplyTo};
use crate::record::Record;
use crate::search;
use crate::{DaemonError, DaemonOptions};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tessera_protocol::coord_client::CoordClient;
use tessera_protocol::frame::encode;
use tessera_protocol::{
    read_frame, ChainMsg, CoordRequest, CoordResponse, DaemonRequest, DaemonResponse, FrameError,
    Message, Status,
};
use tessera_storage::{Durability, Engine, FjallEngine};
use tessera_types::coordinate::key_bytes;
use tessera_types::{Configuration, DaemonId, Epoch, Value};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Number of replica cores per daemon.
pub const SHARDS: usize = 16;

const META_DAEMON_ID: &str = "daemon_id";

pub(crate) struct Daemon {
    pub(crate) me: DaemonId,
    pub(crate) engine: Arc<dyn Engine>,
    shards: Vec<Mutex<ReplicaCore>>,
    config: RwLock<Arc<Configuration>>,
    peers: Mutex<HashMap<DaemonId, mpsc::UnboundedSender<Message>>>,
    conns: Mutex<HashMap<u64, mpsc::UnboundedSender<Message>>>,
    next_conn: AtomicU64,
    frame_bytes_max: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn shard_of(key: &Value) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key_bytes(key).hash(&mut h);
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
        let mut peers = lock(&self.peers);
        if let Some(tx) = peers.get(&to) {
            if tx.send(msg.clone()).is_ok() {
                return;
            }
        }
        let Some(addr) = self.config().daemon_addr(to).map(str::to_string) else {
            tracing::warn!(%to, "no address for peer");
            return;
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(msg);
        peers.insert(to, tx);
        tokio::spawn(peer_writer(to, addr, rx));
    }

    fn install_config(&self, config: Configuration) {
        let config = Arc::new(config);
        {
            let mut current = self.config.write().unwrap_or_else(|p| p.into_inner());
            if config.epoch <= current.epoch {
                return;
            }
            *current = config.clone();
        }
        tracing::info!(epoch = %config.epoch, "installed configuration");
        // A peer's address may have changed: reconnect lazily.
        lock(&self.peers).clear();
        for shard in &self.shards {
            let mut core = lock(shard);
            core.on_config(config.clone());
            let effects = core.drain_effects();
            self.execute(effects);
        }
        self.drop_removed_regions(&config);
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
                limit,
            } => {
                let daemon = self.clone();
                tokio::task::spawn_blocking(move || {
                    search::search(&daemon, to, epoch, space, region, &checks, sort, limit);
                });
            }
            DaemonRequest::Count {
                space,
                region,
                checks,
            } => {
                let daemon = self.clone();
                tokio::task::spawn_blocking(move || {
                    let response = search::count(&daemon, epoch, space, region, &checks);
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
    let engine: Arc<dyn Engine> = Arc::new(
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
    let me = register(&coord, engine.as_ref(), &advertise).await?;
    let config = Arc::new(first_config(&coord, me).await?);
    tracing::info!(%me, addr = %advertise, epoch = %config.epoch, "daemon registered");
    let daemon = Arc::new(Daemon {
        me,
        engine: engine.clone(),
        shards: (0..SHARDS)
            .map(|_| Mutex::new(ReplicaCore::new(me, config.clone(), engine.clone())))
            .collect(),
        config: RwLock::new(config.clone()),
        peers: Mutex::new(HashMap::new()),
        conns: Mutex::new(HashMap::new()),
        next_conn: AtomicU64::new(1),
        frame_bytes_max: options.frame_bytes_max,
    });
    daemon.drop_removed_regions(&config);

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
    shutdown.await;
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
    Record::decode(bytes).map_err(|reason| DaemonResponse::Failed {
        status: Status::ServerError,
        reason,
    })
}
