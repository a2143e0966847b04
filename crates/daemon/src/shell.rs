//! The tokio shell around a [`DaemonNode`]: sockets, peer connections,
//! the configuration long-poll, timers, the heartbeat thread, and blocking
//! threads for disk-bound jobs. It carries out the node's outputs and
//! decides nothing of the protocol (see `node/`).

use crate::core::ReplyTo;
use crate::index::IndexedEngine;
use crate::metrics::{DaemonMetrics, Direction, Op};
use crate::node::{
    lock, DaemonNode, Job, NodeOptions, Output, Stopping, HEARTBEAT_INTERVAL, TICK_INTERVAL,
};
use crate::options::{DaemonError, DaemonOptions};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_protocol::coord_client::{CoordClient, CoordClientOptions, CoordLink};
use tessera_protocol::frame::encode_into;
use tessera_protocol::transport::{plain_listener_warning, ReadHalf, Transport, WriteHalf};
use tessera_protocol::{
    read_frame, ChainMsg, CoordRequest, CoordResponse, DaemonRequest, DaemonResponse, FrameError,
    Message,
};
use tessera_storage::{Durability, Engine, FjallEngine};
use tessera_types::coordinate::key_bytes;
use tessera_types::{Configuration, DaemonId, Epoch};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedRwLockReadGuard, RwLock};

/// How long a peer may leave sent data unacknowledged (TCP) before its
/// connection is broken and it is reported unreachable.
const PEER_ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long connecting to a peer may take (the TLS handshake included).
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long an accepted connection may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Records per state-transfer message.
const TRANSFER_BATCH: usize = 256;
/// Messages queued for one peer or one client connection before senders
/// wait (back-pressure instead of unbounded memory for a slow reader).
const QUEUE_MESSAGES_MAX: usize = 4096;
/// Frames a connection's writer gathers into one write, at most (a single
/// larger frame is written alone).
const WRITE_BATCH_BYTES_MAX: usize = 256 * 1024;
/// A connection's read buffer: one read system call takes in every frame
/// that has arrived, up to this much.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Lanes per connection (see [`Lanes`]).
const LANES: usize = 16;
/// Messages waiting in one lane before the connection's reader waits.
const LANE_MESSAGES_MAX: usize = 256;

const META_DAEMON_ID: &str = "daemon_id";
/// How long a connection's task handles frames one after another before
/// it lets the runtime's other tasks run. Frames already in its read
/// buffer are handled without an await that could yield: a client with
/// many requests in flight could otherwise keep a worker on its search
/// pages while an insert's chain message waited at another connection
/// (YCSB E's inserts waited behind the scans of every daemon they passed).
const CONNECTION_TURN: Duration = Duration::from_micros(250);

struct Shell {
    node: DaemonNode,
    /// The runtime the shell's tasks run on (the heartbeat thread has its
    /// own, and spawns here).
    runtime: tokio::runtime::Handle,
    peers: Mutex<HashMap<DaemonId, mpsc::Sender<Message>>>,
    conns: Mutex<HashMap<u64, mpsc::Sender<Message>>>,
    next_conn: AtomicU64,
    frame_bytes_max: usize,
    coord: CoordClient,
    /// The origin of the node's time.
    started: Instant,
    stopping: Mutex<Option<Stopping>>,
    stop: tokio::sync::Notify,
    /// How peers are dialed and connections accepted: plain or TLS.
    transport: Transport,
    /// `None` without `--metrics`: nothing is counted then, so a daemon
    /// serving no metrics pays nothing for them.
    metrics: Option<DaemonMetrics>,
    data_dir: PathBuf,
    /// Whether connections hand updates and chain messages to [`Lanes`]:
    /// only when every commit waits for an fsync.
    lanes: bool,
    /// Updates and chain messages being handled, on a lane or on a reader,
    /// across every connection (see [`Lanes::dispatch`]).
    handling: InFlight,
    /// The connection and peer-writer tasks, ended when the daemon stops.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Set when the daemon stops: no peer writer starts after it.
    closed: AtomicBool,
}

impl Shell {
    /// Keeps `task` to end when the daemon stops, forgetting those that
    /// ended by themselves.
    fn track(&self, task: tokio::task::AbortHandle) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// Carries out one output of the node.
    fn execute(self: &Arc<Self>, output: Output) {
        match output {
            Output::Send { to, msg } => self.send_peer(to, msg),
            Output::Reply { to, response } => self.reply(to, response),
            Output::Job(job) => {
                let pages = matches!(job, Job::Read { .. }).then(page_threads).flatten();
                let shell = self.clone();
                let run = move || {
                    // A page thread is not one of the runtime's.
                    let _entered = shell.runtime.enter();
                    let sink = shell.clone();
                    shell.node.run_job(job, &mut |o| sink.execute(o));
                };
                match pages {
                    Some(pages) => {
                        // Its threads live as long as the process; were
                        // they gone, the page would run on tokio's pool.
                        if let Err(std::sync::mpsc::SendError(run)) = pages.send(Box::new(run)) {
                            self.runtime.spawn_blocking(run);
                        }
                    }
                    None => {
                        self.runtime.spawn_blocking(run);
                    }
                }
            }
            Output::Coord(request) => {
                let shell = self.clone();
                self.runtime.spawn(async move {
                    let sent = shell.now();
                    match shell.coord.call(request.clone()).await {
                        Ok(response) => {
                            let now = shell.now();
                            let sink = shell.clone();
                            shell
                                .node
                                .on_coord_answer(&request, sent, response, now, &mut |o| {
                                    sink.execute(o)
                                });
                        }
                        Err(e) => tracing::debug!(?request, "coordinator call failed: {e}"),
                    }
                });
            }
            Output::Stop(why) => {
                lock(&self.stopping).get_or_insert(why);
                self.stop.notify_one();
            }
        }
    }

    fn reply(&self, to: ReplyTo, response: DaemonResponse) {
        if let Some(metrics) = &self.metrics {
            metrics.request_answered(to, &response);
        }
        let conn = lock(&self.conns).get(&to.conn).cloned();
        if let Some(conn) = conn {
            // A client that reads nothing for long fills its queue; its
            // answers are dropped (it times out and retries) rather than
            // blocking the core that answers.
            let _ = conn.try_send(Message::DaemonResponse {
                id: to.id,
                response,
            });
        }
    }

    /// Queues a message to a peer, connecting on first use. A message that
    /// cannot be queued or delivered is dropped: the chain and transfer
    /// protocols send again what is not acknowledged.
    fn send_peer(self: &Arc<Self>, to: DaemonId, msg: Message) {
        if let Some(metrics) = &self.metrics {
            metrics.peer_message(Direction::Sent, &msg);
        }
        if let Some(tx) = self.peer_sender(to) {
            if tx.try_send(msg).is_err() {
                tracing::debug!(%to, "peer queue full; dropping a message");
            }
        }
    }

    fn peer_sender(self: &Arc<Self>, to: DaemonId) -> Option<mpsc::Sender<Message>> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let mut peers = lock(&self.peers);
        if let Some(tx) = peers.get(&to) {
            if !tx.is_closed() {
                return Some(tx.clone());
            }
        }
        let Some(addr) = self.node.config().daemon_addr(to).map(str::to_string) else {
            tracing::warn!(%to, "no address for peer");
            return None;
        };
        let (tx, rx) = mpsc::channel(QUEUE_MESSAGES_MAX);
        peers.insert(to, tx.clone());
        let writer = self.runtime.spawn(peer_writer(self.clone(), to, addr, rx));
        self.track(writer.abort_handle());
        Some(tx)
    }

    /// The `/metrics` page (served only when there are metrics).
    fn render_metrics(&self, metrics: &DaemonMetrics) -> tessera_observe::http::Response {
        let now = self.now();
        metrics.render(
            self.node.me(),
            &self.node.config(),
            self.node.stats(),
            self.node.serving(now),
            self.node.poisoned(),
            &self.data_dir,
        )
    }

    fn install_config(self: &Arc<Self>, config: Configuration) {
        let sink = self.clone();
        if self
            .node
            .on_config(Arc::new(config), &mut |o| sink.execute(o))
        {
            // A peer's address may have changed: reconnect lazily.
            lock(&self.peers).clear();
        }
    }

    fn handle_request(
        self: &Arc<Self>,
        conn: u64,
        id: u64,
        epoch: Epoch,
        mut request: tessera_protocol::DaemonRequest,
    ) {
        // The arrival time judges `time < N` caveats; only this I/O layer
        // reads the wall clock (a clock before 1970 judges every such
        // caveat unmet).
        #[allow(clippy::disallowed_methods)]
        let wall = std::time::SystemTime::now();
        if let Some(auth) = request.auth_mut() {
            auth.received_unix_s = wall
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs());
        }
        if let Some(metrics) = &self.metrics {
            metrics.request_started(ReplyTo { conn, id }, Op::of(&request));
        }
        let sink = self.clone();
        let now = self.now();
        self.node
            .on_request(ReplyTo { conn, id }, epoch, request, now, &mut |o| {
                sink.execute(o)
            });
    }

    fn on_peer(self: &Arc<Self>, msg: Message) {
        if let Some(metrics) = &self.metrics {
            metrics.peer_message(Direction::Received, &msg);
        }
        let sink = self.clone();
        self.node.on_peer(msg, &mut |o| sink.execute(o));
    }
}

/// Writes queued messages to a peer, connecting on first use. A message
/// that cannot be delivered is dropped: the point leader drives its update
/// again when the configuration changes.
async fn peer_writer(
    shell: Arc<Shell>,
    to: DaemonId,
    addr: String,
    mut rx: mpsc::Receiver<Message>,
) {
    let unreachable = |shell: &Arc<Shell>| {
        let sink = shell.clone();
        shell
            .node
            .on_peer_unreachable(to, shell.now(), &mut |o| sink.execute(o));
    };
    // Peer connections carry messages one way; the read half is kept only
    // so that the connection stays whole.
    let mut stream: Option<(ReadHalf, WriteHalf)> = None;
    let mut buf = Vec::new();
    while let Some(msg) = rx.recv().await {
        let s = match stream.as_mut() {
            Some((_, s)) => s,
            None => match shell.transport.connect(&addr, PEER_CONNECT_TIMEOUT).await {
                Ok(s) => {
                    // Data the peer does not acknowledge within this time
                    // breaks the connection (the kernel keeps retrying
                    // otherwise, for many minutes).
                    let _ = socket2::SockRef::from(s.tcp())
                        .set_tcp_user_timeout(Some(PEER_ACK_TIMEOUT));
                    &mut stream.insert(s.into_split()).1
                }
                Err(e) => {
                    tracing::warn!(%to, %addr, "cannot reach peer ({e}); dropping a chain message");
                    unreachable(&shell);
                    continue;
                }
            },
        };
        if let Err(e) = write_batch(s, &mut buf, msg, &mut rx).await {
            tracing::warn!(%to, "peer connection failed: {e}");
            unreachable(&shell);
            stream = None;
        }
    }
}

/// Writes `first` and whatever else is queued already with one write:
/// their frames end to end in `buf`, up to [`WRITE_BATCH_BYTES_MAX`]. A
/// lone message goes out at once, as before; a burst (the acknowledgements
/// and forwards of many keys committed together) costs one system call
/// instead of one each.
async fn write_batch(
    writer: &mut (impl AsyncWrite + Unpin),
    buf: &mut Vec<u8>,
    first: Message,
    rx: &mut mpsc::Receiver<Message>,
) -> std::io::Result<()> {
    buf.clear();
    encode_into(&first, buf);
    while buf.len() < WRITE_BATCH_BYTES_MAX {
        let Ok(more) = rx.try_recv() else { break };
        encode_into(&more, buf);
    }
    writer.write_all(buf).await?;
    writer.flush().await?;
    // A large transfer batch must not keep its buffer for the life of the
    // connection.
    buf.shrink_to(WRITE_BATCH_BYTES_MAX);
    Ok(())
}

/// Scan pages that may return more than this many objects are served
/// through [`page_gate`]; shorter ones, as cheap as a get, at once.
const SHORT_PAGE_OBJECTS: u64 = 16;

/// The most scan pages of one connection waiting for [`page_gate`].
const PAGES_WAITING_MAX: usize = 64;

/// Bounds the scan pages being served at once, across every daemon of the
/// process, to its CPUs. A connection hands such a page to a task that
/// waits for a permit (first come, first served) and reads on, so that a
/// chain message or a get read meanwhile, on any connection, waits behind
/// at most a page per CPU rather than behind every page of every scan in
/// flight (YCSB E's inserts: `docs/BENCHMARKS.md`, "Scan pages through a
/// gate"). Only without [`Lanes`]: with them, every message that is not an
/// update waits for the lanes to be idle, and keeps doing so.
fn page_gate() -> &'static Arc<tokio::sync::Semaphore> {
    static GATE: std::sync::OnceLock<Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    GATE.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Arc::new(tokio::sync::Semaphore::new(cpus))
    })
}

/// Threads per CPU of the process that run handed-off search pages (see
/// [`page_threads`]).
const PAGE_THREADS_PER_CPU: usize = 2;

/// A handed-off search page, ready to run.
type PageJob = Box<dyn FnOnce() + Send>;

/// The threads that run the search pages the daemons of the process hand
/// off (pages their indexes do not bound: `Job::Read`), a fixed number
/// ([`PAGE_THREADS_PER_CPU`] per CPU) taking pages in the order they come.
///
/// On tokio's blocking pool, a thread was started for each page in
/// flight: a burst of scans (16 in flight over 16 regions) took the pool
/// past 500 threads, and since work kept waking its idle threads in turn
/// none idled out. Every thread the runtime's work passes through stays
/// registered with the memory tables' epoch collector (which walks them
/// all to advance) and keeps an allocator heap of its own, so every later
/// operation cost 8–15 % more CPU until the process restarted. A
/// semaphore in front of the pool bounded the threads but cost scans 13 %
/// (a wake-up of a waiting task and then of a pool thread per page); here
/// a thread that ends a page takes the next one without sleeping
/// (`docs/BENCHMARKS.md`, "A blocking pool that never shrank"). A page is
/// CPU work: more at once than CPUs serve no more of them. `None` when
/// no thread could be started: pages then go to tokio's pool as before.
fn page_threads() -> Option<&'static std::sync::mpsc::Sender<PageJob>> {
    static THREADS: std::sync::OnceLock<Option<std::sync::mpsc::Sender<PageJob>>> =
        std::sync::OnceLock::new();
    THREADS
        .get_or_init(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let (tx, rx) = std::sync::mpsc::channel::<PageJob>();
            let rx = Arc::new(Mutex::new(rx));
            let mut started = 0;
            for i in 0..PAGE_THREADS_PER_CPU * cpus {
                let rx = rx.clone();
                let thread = std::thread::Builder::new()
                    .name(format!("tessera-page-{i}"))
                    .spawn(move || loop {
                        let next = lock(&rx).recv();
                        let Ok(page) = next else { return };
                        // A page that panics ends itself, not the thread
                        // (as a task of tokio's pool would).
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(page));
                    });
                match thread {
                    Ok(_) => started += 1,
                    Err(e) => tracing::warn!("cannot start a page thread: {e}"),
                }
            }
            (started > 0).then_some(tx)
        })
        .as_ref()
}

/// A message a connection delivers to the node.
enum Inbound {
    Request {
        id: u64,
        epoch: Epoch,
        request: DaemonRequest,
    },
    Peer(Message),
}

impl Inbound {
    fn handle(self, shell: &Arc<Shell>, conn: u64) {
        match self {
            Inbound::Request { id, epoch, request } => {
                shell.handle_request(conn, id, epoch, request)
            }
            Inbound::Peer(msg) => shell.on_peer(msg),
        }
    }

    /// A page of a scan: a search whose limit asks for more than
    /// [`SHORT_PAGE_OBJECTS`]. A search without a limit is left alone: its
    /// walk is either bounded by its predicates (an equality, answered at
    /// once like a get) or handed to a blocking thread by the node.
    fn is_long_page(&self) -> bool {
        matches!(
            self,
            Inbound::Request {
                request: DaemonRequest::Search { limit, .. },
                ..
            } if limit.is_some_and(|n| n > SHORT_PAGE_OBJECTS)
        )
    }

    /// The key of an update or a chain message: what [`Lanes`] keep in
    /// order. `None` for every other message.
    fn lane_key(&self) -> Option<Vec<u8>> {
        match self {
            Inbound::Request {
                request: DaemonRequest::Update(update),
                ..
            } => Some(key_bytes(&update.key)),
            Inbound::Peer(Message::Chain(ChainMsg::Forward(f))) => Some(key_bytes(&f.key)),
            Inbound::Peer(Message::Chain(ChainMsg::Ack(a))) => Some(key_bytes(&a.key)),
            Inbound::Request { .. } | Inbound::Peer(_) => None,
        }
    }
}

/// What a lane carries: a message, its place in the connection's order
/// and its count in [`Shell::handling`] (both held until it is handled).
type LaneItem = (Inbound, OwnedRwLockReadGuard<()>, Handling);

/// Dispatches in a row that must find no other message being handled
/// before one is handled on its reader: a single quiet moment amid many
/// writes in flight is no reason to give up sharing their fsyncs.
const QUIET_DISPATCHES: u64 = 64;

/// Counts the updates and chain messages a daemon is handling, on lanes
/// or readers, and remembers when one last found company.
#[derive(Default)]
struct InFlight {
    count: Arc<AtomicUsize>,
    /// Messages counted in so far.
    started: AtomicU64,
    /// The number (in `started`) of the last message that found another
    /// one being handled.
    crowded_at: AtomicU64,
}

impl InFlight {
    /// Counts a message in; the flag says whether it is alone and the
    /// last [`QUIET_DISPATCHES`] were too (it may then skip the lanes).
    fn start(&self) -> (Handling, bool) {
        let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let before = self.count.fetch_add(1, Ordering::AcqRel);
        if before > 0 {
            self.crowded_at.fetch_max(number, Ordering::Relaxed);
        }
        // Another message, counted in after this one, may have found
        // company and raised `crowded_at` past `number` meanwhile: that
        // is company too, not an overflow.
        let quiet =
            number.saturating_sub(self.crowded_at.load(Ordering::Relaxed)) > QUIET_DISPATCHES;
        (Handling(self.count.clone()), before == 0 && quiet)
    }
}

/// One message counted in [`InFlight`] until it is dropped (handled, or
/// lost with a lane that panicked, which must not leave it counted).
struct Handling(Arc<AtomicUsize>);

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Takes a connection's updates and chain messages off its reader when
/// commits wait for fsyncs (`Durability::Always`: a region's tail syncs
/// each of its commits). Handled on the
/// reader, one connection's commits — a peer's acknowledgements, all of a
/// client's puts — would wait for their fsyncs one after another; handled
/// on [`LANES`] blocking threads, they wait together and share them
/// (group commit, `tessera_storage`).
///
/// Order: one key's messages always take the same lane, in the order they
/// were read, and a lane handles its messages one at a time. Every other
/// message waits until the lanes have handled everything read before it.
/// So a connection's order changes only between updates and chain
/// messages of different keys, which the replica cores handle
/// independently (each key's chain state is its own).
///
/// A lane's thread may block on a replica core's lock while another lane
/// holds it waiting for an fsync; the fsync needs no core lock, so that
/// wait ends.
///
/// Alone, a message skips the lanes: when it is the only update or chain
/// message the daemon is handling (and has been for a while, see
/// [`InFlight`]) and its connection has nothing more read, there is no
/// fsync to share, and the hand-off to a lane's thread and back (two
/// thread wake-ups, eight messages per put) would be most of its cost at
/// one put in flight.
struct Lanes {
    senders: Vec<mpsc::Sender<LaneItem>>,
    /// Read-locked by every message in a lane until it is handled;
    /// write-locked to wait until the lanes are idle.
    order: Arc<RwLock<()>>,
    /// Whether a message may be handled on the reader's thread: only on a
    /// runtime with worker threads to take over its other tasks.
    inline: bool,
}

impl Lanes {
    fn start(shell: &Arc<Shell>, conn: u64) -> Lanes {
        let senders = (0..LANES)
            .map(|_| {
                let (tx, rx) = mpsc::channel(LANE_MESSAGES_MAX);
                tokio::spawn(run_lane(shell.clone(), conn, rx));
                tx
            })
            .collect();
        Lanes {
            senders,
            order: Arc::new(RwLock::new(())),
            inline: tokio::runtime::Handle::current().runtime_flavor()
                == tokio::runtime::RuntimeFlavor::MultiThread,
        }
    }

    /// Hands `inbound` to its key's lane, or handles it here once every
    /// message read before it has been handled. `more_read` says whether
    /// the connection's reader holds more of what it read.
    async fn dispatch(&self, shell: &Arc<Shell>, conn: u64, inbound: Inbound, more_read: bool) {
        match inbound.lane_key() {
            Some(key) => {
                let (handling, alone) = shell.handling.start();
                if alone && !more_read && self.inline {
                    // Nothing is in any lane (each lane message is
                    // counted until handled), so everything this
                    // connection read before is handled, and the reader
                    // reads on only once this one is: the order holds.
                    // The runtime's other tasks move to another thread
                    // meanwhile: the replies and forwards this message
                    // sends must not wait for its fsync to end.
                    tokio::task::block_in_place(|| inbound.handle(shell, conn));
                    drop(handling);
                    return;
                }
                let place = self.order.clone().read_owned().await;
                let mut h = std::collections::hash_map::DefaultHasher::new();
                key.hash(&mut h);
                let lane = &self.senders[(h.finish() % LANES as u64) as usize];
                // A lane's receiver lives as long as its sender unless its
                // task panicked; the message is then lost, as a network
                // message may be.
                let _ = lane.send((inbound, place, handling)).await;
            }
            None => {
                let _idle = self.order.write().await;
                inbound.handle(shell, conn);
            }
        }
    }
}

/// One lane: handles its messages in order on a blocking thread, taking
/// whatever has queued meanwhile in one go.
async fn run_lane(shell: Arc<Shell>, conn: u64, mut rx: mpsc::Receiver<LaneItem>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < LANE_MESSAGES_MAX {
            let Ok(more) = rx.try_recv() else { break };
            batch.push(more);
        }
        let shell = shell.clone();
        let handled = tokio::task::spawn_blocking(move || {
            for (inbound, _place, _handling) in batch {
                inbound.handle(&shell, conn);
            }
        })
        .await;
        if handled.is_err() {
            return;
        }
    }
}

async fn serve_connection(shell: Arc<Shell>, tcp: TcpStream) {
    let stream = match shell.transport.accept(tcp, HANDSHAKE_TIMEOUT).await {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!("{e}");
            return;
        }
    };
    // With TLS, chain, transfer and anti-entropy messages come only from
    // the cluster's servers, which present a certificate its CA signed;
    // a client may connect without one, for requests only.
    let peers_allowed = !shell.transport.is_tls() || stream.peer_certified();
    let conn = shell.next_conn.fetch_add(1, Ordering::Relaxed);
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let (tx, mut rx) = mpsc::channel::<Message>(QUEUE_MESSAGES_MAX);
    lock(&shell.conns).insert(conn, tx);
    let writer_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        while let Some(msg) = rx.recv().await {
            if write_batch(&mut writer, &mut buf, msg, &mut rx)
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let lanes = shell.lanes.then(|| Lanes::start(&shell, conn));
    let pages_waiting = Arc::new(tokio::sync::Semaphore::new(PAGES_WAITING_MAX));
    // Time spent handling frames since this task last let others run.
    let mut turn = Duration::ZERO;
    loop {
        let inbound = match read_frame(&mut reader, shell.frame_bytes_max).await {
            Ok(Message::DaemonRequest { id, epoch, request }) => {
                Inbound::Request { id, epoch, request }
            }
            Ok(msg) if msg.is_peer() && peers_allowed => Inbound::Peer(msg),
            Ok(msg) if msg.is_peer() => {
                tracing::warn!("closing a connection: a peer message from a client without the cluster's certificate");
                break;
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
        };
        // The shell's own clock: how long this task has kept its worker.
        #[allow(clippy::disallowed_methods)]
        let began = Instant::now();
        match &lanes {
            Some(lanes) => {
                let more_read = !reader.buffer().is_empty();
                lanes.dispatch(&shell, conn, inbound, more_read).await
            }
            None if inbound.is_long_page() => {
                // At most PAGES_WAITING_MAX of this connection's pages
                // wait at once: a client that sends more is read no
                // further until one is served, as when pages were served
                // here.
                let Ok(waiting) = pages_waiting.clone().acquire_owned().await else {
                    break;
                };
                let shell = shell.clone();
                tokio::spawn(async move {
                    let _waiting = waiting;
                    // The gate is never closed.
                    let Ok(_permit) = page_gate().acquire().await else {
                        return;
                    };
                    // The permit's release woke this task ahead of the
                    // runtime's queue (tokio runs a task another woke
                    // next): behind it instead, so that pages do not hand
                    // the permit on among themselves ahead of every chain
                    // message waiting.
                    tokio::task::yield_now().await;
                    if !shell.closed.load(Ordering::Acquire) {
                        inbound.handle(&shell, conn);
                    }
                });
            }
            None => inbound.handle(&shell, conn),
        }
        turn += began.elapsed();
        if turn >= CONNECTION_TURN {
            turn = Duration::ZERO;
            tokio::task::yield_now().await;
        }
    }
    lock(&shell.conns).remove(&conn);
    if let Some(metrics) = &shell.metrics {
        metrics.connection_closed(conn);
    }
    writer_task.abort();
}

async fn register(
    coord: &CoordClient,
    engine: &dyn Engine,
    addr: &str,
    metrics: Option<String>,
) -> Result<DaemonId, DaemonError> {
    let stored = engine
        .meta_get(META_DAEMON_ID)
        .map_err(|e| DaemonError::Storage(e.to_string()))?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(|b| DaemonId(u64::from_be_bytes(b)));
    let request = CoordRequest::RegisterDaemon {
        id: stored,
        addr: addr.to_string(),
        metrics,
        installed: crate::node::installed_epoch(engine)
            .map_err(|e| DaemonError::Storage(e.to_string()))?,
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

/// Sends the node's heartbeat (or, once poisoned, its request to leave)
/// every [`HEARTBEAT_INTERVAL`] and hands the answer back to it.
async fn heartbeat(shell: Arc<Shell>, coordinator: String, link: CoordLink) {
    // Fails over between members fast enough (see the options) that a
    // new leader hears this daemon well within its failure timeout.
    let options = CoordClientOptions::heartbeat();
    let coord = CoordClient::with_link(
        shell.coord.members().into_iter().chain([coordinator]),
        options,
        link,
    );
    let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Whether the node served at the last tick: operators want to know why
    // a daemon stopped serving, and when it resumed.
    let mut serving = true;
    loop {
        tick.tick().await;
        if serving != shell.node.serving(shell.now()) {
            serving = !serving;
            if serving {
                tracing::warn!("heartbeats answered again; serving clients");
            } else {
                tracing::warn!("no lease (heartbeats unanswered or refused); not serving clients");
            }
        }
        let request = shell.node.heartbeat();
        let sent = shell.now();
        match coord.call(request.clone()).await {
            Ok(response) => {
                if let (Some(metrics), CoordRequest::Heartbeat { .. }) = (&shell.metrics, &request)
                {
                    metrics.heartbeat(Some(&response));
                }
                let now = shell.now();
                let sink = shell.clone();
                shell
                    .node
                    .on_coord_answer(&request, sent, response, now, &mut |o| sink.execute(o));
            }
            Err(e) => {
                if let (Some(metrics), CoordRequest::Heartbeat { .. }) = (&shell.metrics, &request)
                {
                    metrics.heartbeat(None);
                }
                tracing::debug!("heartbeat failed: {e}")
            }
        }
    }
}

/// Ends every connection and peer writer, and waits (a bounded while) for
/// the tasks and jobs still holding the shell to let go of it, so that the
/// engine closes when `run` returns. Each of those tasks holds the shell
/// and the shell holds the peer writers' senders: without this a stopped
/// daemon in a process that goes on (a benchmark's or a restore's
/// in-process cluster) kept its engine open, its storage workers running
/// on a data directory about to be deleted.
async fn close(shell: &Arc<Shell>) {
    shell.closed.store(true, Ordering::Release);
    lock(&shell.peers).clear();
    lock(&shell.conns).clear();
    for task in lock(&shell.tasks).drain(..) {
        task.abort();
    }
    // Blocking jobs and lane batches already running finish their step.
    let deadline = Instant::now() + CLOSE_WAIT;
    while Arc::strong_count(shell) > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let holders = Arc::strong_count(shell) - 1;
    if holders > 0 {
        tracing::warn!(
            holders,
            "daemon stopping while tasks still hold it; its engine closes when they end"
        );
    }
}

/// How long a stopping daemon waits for its tasks to end.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

pub(crate) async fn run(
    options: DaemonOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DaemonError> {
    std::fs::create_dir_all(&options.data_dir)?;
    let storage: Arc<dyn Engine> = Arc::new(
        FjallEngine::open_with_caches(&options.data_dir, options.durability, options.caches)
            .map_err(|e| DaemonError::Storage(e.to_string()))?,
    );
    let storage = tessera_storage::fault::from_env(storage)
        .map_err(|e| DaemonError::Storage(e.to_string()))?;
    if !options.transport.can_serve() {
        return Err(DaemonError::TlsWithoutCertificate);
    }
    let listener = TcpListener::bind(options.listen).await?;
    if let Some(warning) = listener
        .local_addr()
        .ok()
        .and_then(|local| plain_listener_warning(&local, &options.transport))
    {
        tracing::warn!("{warning}");
    }
    let advertise = options.advertise.clone().unwrap_or_else(|| {
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| options.listen.to_string())
    });
    // Bound before registering, so the coordinator records the real URL
    // (a port 0 becomes a free port).
    let metrics_listener = match options.metrics {
        Some(addr) => Some(TcpListener::bind(addr).await?),
        None => None,
    };
    let metrics_url = match &metrics_listener {
        Some(listener) => Some(tessera_observe::metrics_url(listener.local_addr()?)),
        None => None,
    };
    let link = CoordLink {
        transport: options.transport.clone(),
        admin_token: options.admin_token.clone(),
    };
    let coord = CoordClient::with_link(
        [options.coordinator.clone()],
        CoordClientOptions::default(),
        link.clone(),
    );
    let me = register(&coord, storage.as_ref(), &advertise, metrics_url.clone()).await?;
    let config = Arc::new(first_config(&coord, me).await?);
    tracing::info!(%me, addr = %advertise, metrics = metrics_url.as_deref().unwrap_or("none"), epoch = config.epoch.0, "daemon registered");
    let index = Arc::new(
        IndexedEngine::open(storage, &config).map_err(|e| DaemonError::Storage(e.to_string()))?,
    );
    let node_options = NodeOptions {
        addr: advertise.clone(),
        transfer_batch: TRANSFER_BATCH,
        collect_ticks: (options.collect_every.as_millis() / TICK_INTERVAL.as_millis()).max(1)
            as u64,
        metrics: metrics_url,
    };
    // Outputs of the node's start wait until the shell exists.
    let mut first = Vec::new();
    let started = Instant::now();
    let node = DaemonNode::new(me, node_options, config, index, Duration::ZERO, &mut |o| {
        first.push(o)
    });
    let shell = Arc::new(Shell {
        node,
        runtime: tokio::runtime::Handle::current(),
        peers: Mutex::new(HashMap::new()),
        conns: Mutex::new(HashMap::new()),
        next_conn: AtomicU64::new(1),
        frame_bytes_max: options.frame_bytes_max,
        coord: coord.clone(),
        started,
        stopping: Mutex::new(None),
        stop: tokio::sync::Notify::new(),
        transport: options.transport.clone(),
        metrics: metrics_listener.is_some().then(DaemonMetrics::new),
        data_dir: options.data_dir.clone(),
        lanes: options.durability == Durability::Always,
        handling: InFlight::default(),
        tasks: Mutex::new(Vec::new()),
        closed: AtomicBool::new(false),
    });
    for output in first {
        shell.execute(output);
    }
    let metrics_task = metrics_listener.map(|listener| {
        let shell = shell.clone();
        let routes =
            tessera_observe::http::Routes::new().get(tessera_observe::METRICS_PATH, move || {
                match &shell.metrics {
                    Some(metrics) => shell.render_metrics(metrics),
                    None => tessera_observe::http::Response::text(
                        tessera_observe::http::StatusCode::NotFound,
                        "no metrics\n",
                    ),
                }
            });
        tokio::spawn(tessera_observe::http::serve(listener, routes))
    });
    // Heartbeats run on a thread of their own: cores write through the
    // engine on the runtime's workers (a state transfer can keep them busy
    // for seconds on a loaded machine), and a daemon that is alive but
    // busy must not be declared failed — it would leave every chain.
    let (heartbeat_stop, heartbeat_stopped) = tokio::sync::oneshot::channel::<()>();
    let heartbeat_thread = {
        let (shell, coordinator) = (shell.clone(), options.coordinator.clone());
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
                        shell.stop.notify_one();
                        return;
                    }
                };
                runtime.block_on(async move {
                    tokio::select! {
                        () = heartbeat(shell, coordinator, link) => {}
                        _ = heartbeat_stopped => {}
                    }
                });
            })?
    };

    let config_task = {
        let shell = shell.clone();
        tokio::spawn(async move {
            loop {
                let known = shell.node.config().epoch;
                match coord.wait_config(known, Duration::from_secs(10)).await {
                    Ok(Some(config)) => shell.install_config(config),
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
        let shell = shell.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let conn = tokio::spawn(serve_connection(shell.clone(), stream));
                        shell.track(conn.abort_handle());
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
        let shell = shell.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK_INTERVAL);
            loop {
                tick.tick().await;
                let sink = shell.clone();
                shell.node.on_tick(&mut |o| sink.execute(o));
            }
        })
    };
    let sync_task = {
        let shell = shell.clone();
        let interval = options.durability == Durability::Interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                if interval {
                    let shell = shell.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        let sink = shell.clone();
                        shell.node.sync(&mut |o| sink.execute(o));
                    })
                    .await;
                }
            }
        })
    };
    tokio::select! {
        () = shutdown => {}
        () = shell.stop.notified() => {}
    }
    let _ = heartbeat_stop.send(());
    let _ = heartbeat_thread.join();
    tick_task.abort();
    config_task.abort();
    accept_task.abort();
    sync_task.abort();
    if let Some(task) = metrics_task {
        task.abort();
    }
    close(&shell).await;
    let stopping = *lock(&shell.stopping);
    let epoch = shell.node.config().epoch.0;
    match stopping {
        Some(Stopping::CannotPersist) => {
            tracing::error!(%me, epoch, "daemon stopped: {}", Stopping::CannotPersist);
            return Err(DaemonError::CannotPersist);
        }
        Some(why) => tracing::warn!(%me, epoch, "daemon stopping: {why}"),
        None => tracing::info!(%me, epoch, "daemon stopping: asked to"),
    }
    shell
        .node
        .engine()
        .sync()
        .map_err(|e| DaemonError::Storage(e.to_string()))?;
    tracing::info!(%me, "daemon stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_scan_pages_asking_for_many_objects_go_through_the_gate() {
        let search = |limit| Inbound::Request {
            id: 1,
            epoch: Epoch(1),
            request: DaemonRequest::Search {
                space: tessera_types::SpaceId(1),
                region: tessera_types::RegionId(1),
                checks: Vec::new(),
                sort: None,
                after: None,
                limit,
                auth: Default::default(),
                within: None,
            },
        };
        assert!(search(Some(100)).is_long_page());
        assert!(search(Some(17)).is_long_page());
        assert!(!search(Some(16)).is_long_page(), "as short as a get");
        assert!(!search(Some(1)).is_long_page());
        assert!(
            !search(None).is_long_page(),
            "no limit: an equality answered at once, or a job"
        );
        let get = Inbound::Request {
            id: 2,
            epoch: Epoch(1),
            request: DaemonRequest::Get {
                space: tessera_types::SpaceId(1),
                key: tessera_types::Value::Int(1),
                auth: Default::default(),
            },
        };
        assert!(!get.is_long_page());
    }

    #[test]
    fn a_message_skips_the_lanes_only_after_a_quiet_run() {
        let in_flight = InFlight::default();
        // The first messages, one at a time, wait for a quiet run.
        for _ in 0..QUIET_DISPATCHES {
            let (_handling, alone) = in_flight.start();
            assert!(!alone);
        }
        let (first, alone) = in_flight.start();
        assert!(alone, "alone after a quiet run");
        // One that arrives while another is handled has company, and so
        // does every one for a quiet run after it.
        let (_second, alone) = in_flight.start();
        assert!(!alone);
        drop(first);
        drop(_second);
        for _ in 0..QUIET_DISPATCHES {
            let (_handling, alone) = in_flight.start();
            assert!(!alone);
        }
        let (_handling, alone) = in_flight.start();
        assert!(alone);
        assert_eq!(in_flight.count.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_later_message_that_found_company_first_is_not_an_overflow() {
        // Two readers count messages in at once: the later one (number
        // 6) finds company and records it before the earlier one (number
        // 5) reads `crowded_at`. The earlier one is then crowded, and its
        // arithmetic must not go below zero (a panic in debug builds
        // killed the connection's reader and its updates with it).
        let in_flight = InFlight::default();
        in_flight.started.store(4, Ordering::Relaxed);
        in_flight.crowded_at.store(6, Ordering::Relaxed);
        let (_handling, alone) = in_flight.start();
        assert!(!alone, "a message amid company must take a lane");
    }
}
