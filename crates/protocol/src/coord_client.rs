//! Talking to the coordinator group: [`CoordClient`] for daemons, clients and
//! the CLI, over [`CoordConnection`], one multiplexed framed TCP connection.
//!
//! ```text
//!  caller ──call()──▶ CoordClient ──▶ CoordConnection(member A) ──▶ NotLeader{B}
//!                          │                                            │
//!                          └──────▶ CoordConnection(member B) ◀─────────┘ answer
//! ```
//!
//! `CoordClient` keeps the member list, one cached connection per member,
//! follows `NotLeader` redirects, fails over to other members when one is
//! unreachable, learns new members from every configuration it sees, and
//! gives up after a bounded time with [`CoordClientError::Unavailable`]
//! (COORDFAIL).

use crate::frame::{read_frame, write_frame, FRAME_BYTES_MAX_DEFAULT};
use crate::messages::{CoordRequest, CoordResponse, Message};
use crate::status::AdminStatus;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_types::{Configuration, Epoch};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Why a coordinator call failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordClientError {
    /// The client was given no member addresses.
    #[error("no coordinator addresses given")]
    NoMembers,
    /// Connecting to a member failed.
    #[error("cannot connect to coordinator {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The connection to a member closed before the answer came.
    #[error("connection to coordinator {addr} closed")]
    Closed { addr: String },
    /// A member did not answer within the per-call timeout.
    #[error("coordinator {addr} did not answer within {after:?}")]
    Timeout { addr: String, after: Duration },
    /// A member answered with a response that does not fit the request.
    #[error("unexpected answer from the coordinator: {0}")]
    Unexpected(String),
    /// No member gave an answer within the client's give-up time.
    #[error("coordinator unavailable: no member answered within {waited:?} (last error: {last})")]
    Unavailable { waited: Duration, last: String },
}

impl CoordClientError {
    /// The admin status this error surfaces as.
    pub fn admin_status(&self) -> AdminStatus {
        match self {
            CoordClientError::Unexpected(_) => AdminStatus::Internal,
            _ => AdminStatus::CoordFail,
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<CoordResponse>>>>;

/// One framed TCP connection to one coordinator member, with many requests
/// in flight, answered by id. Dropping it closes the connection.
pub struct CoordConnection {
    addr: String,
    outgoing: mpsc::UnboundedSender<Message>,
    pending: Pending,
    closed: Arc<AtomicBool>,
    request_id_next: AtomicU64,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl CoordConnection {
    /// Connects to `addr` (`host:port`) within `timeout`.
    pub async fn connect(
        addr: &str,
        timeout: Duration,
    ) -> Result<CoordConnection, CoordClientError> {
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => {
                return Err(CoordClientError::Connect {
                    addr: addr.to_string(),
                    source,
                })
            }
            Err(_) => {
                return Err(CoordClientError::Timeout {
                    addr: addr.to_string(),
                    after: timeout,
                })
            }
        };
        let _ = stream.set_nodelay(true);
        let (mut read_half, mut write_half) = stream.into_split();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let (outgoing, mut outgoing_rx) = mpsc::unbounded_channel::<Message>();

        let writer_closed = closed.clone();
        let writer_pending = pending.clone();
        let writer = tokio::spawn(async move {
            while let Some(message) = outgoing_rx.recv().await {
                if write_frame(&mut write_half, &message).await.is_err()
                    || write_half.flush().await.is_err()
                {
                    break;
                }
            }
            fail_all(&writer_closed, &writer_pending);
        });

        let reader_closed = closed.clone();
        let reader_pending = pending.clone();
        let reader = tokio::spawn(async move {
            // Any frame error (closed, malformed, too large) ends the
            // connection; callers see `Closed` and may reconnect.
            while let Ok(message) = read_frame(&mut read_half, FRAME_BYTES_MAX_DEFAULT).await {
                if let Message::CoordResponse { id, response } = message {
                    let waiter = lock(&reader_pending).remove(&id);
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(response);
                    }
                }
            }
            fail_all(&reader_closed, &reader_pending);
        });

        Ok(CoordConnection {
            addr: addr.to_string(),
            outgoing,
            pending,
            closed,
            request_id_next: AtomicU64::new(1),
            reader,
            writer,
        })
    }

    /// The member's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether the connection has failed; a closed connection never recovers.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends one request and waits up to `timeout` for its answer.
    pub async fn call(
        &self,
        request: CoordRequest,
        timeout: Duration,
    ) -> Result<CoordResponse, CoordClientError> {
        let closed = || CoordClientError::Closed {
            addr: self.addr.clone(),
        };
        if self.is_closed() {
            return Err(closed());
        }
        let id = self.request_id_next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        // The reader may have failed between the check above and the insert.
        if self.is_closed()
            || self
                .outgoing
                .send(Message::CoordRequest { id, request })
                .is_err()
        {
            lock(&self.pending).remove(&id);
            return Err(closed());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(closed()),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(CoordClientError::Timeout {
                    addr: self.addr.clone(),
                    after: timeout,
                })
            }
        }
    }
}

impl Drop for CoordConnection {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding this lock cannot leave the map inconsistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn fail_all(closed: &AtomicBool, pending: &Pending) {
    closed.store(true, Ordering::Release);
    // Dropping the senders wakes every waiter with an error.
    lock(pending).clear();
}

/// Timeouts of a [`CoordClient`].
#[derive(Clone, Copy, Debug)]
pub struct CoordClientOptions {
    /// How long one attempt at one member may take (connect, or request and
    /// answer). A long-poll's own wait is added to it.
    pub attempt_timeout: Duration,
    /// How long `call` keeps trying members before giving up (COORDFAIL).
    pub give_up_after: Duration,
}

impl Default for CoordClientOptions {
    fn default() -> Self {
        CoordClientOptions {
            attempt_timeout: Duration::from_secs(5),
            give_up_after: Duration::from_secs(30),
        }
    }
}

/// A client of the coordinator group. Cheap to clone; clones share
/// connections and what they learn about the members.
#[derive(Clone)]
pub struct CoordClient {
    inner: Arc<Inner>,
}

struct Inner {
    options: CoordClientOptions,
    /// Known member addresses; `preferred` indexes the last one that
    /// answered (usually the leader).
    members: Mutex<Members>,
    connections: tokio::sync::Mutex<HashMap<String, Arc<CoordConnection>>>,
}

struct Members {
    addrs: Vec<String>,
    preferred: usize,
}

impl CoordClient {
    /// A client that starts from these member addresses (`host:port`).
    pub fn new<I, S>(members: I) -> CoordClient
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CoordClient::with_options(members, CoordClientOptions::default())
    }

    pub fn with_options<I, S>(members: I, options: CoordClientOptions) -> CoordClient
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut addrs: Vec<String> = Vec::new();
        for addr in members.into_iter().map(Into::into) {
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
        CoordClient {
            inner: Arc::new(Inner {
                options,
                members: Mutex::new(Members {
                    addrs,
                    preferred: 0,
                }),
                connections: tokio::sync::Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The member addresses known now.
    pub fn members(&self) -> Vec<String> {
        lock(&self.inner.members).addrs.clone()
    }

    /// Sends `request` to the group: to the member that answered last, then
    /// wherever `NotLeader` redirects point, then to the other members in
    /// turn. Gives up with [`CoordClientError::Unavailable`] after the
    /// configured time. Answers other than `NotLeader` (including `Failed`)
    /// are returned as they are.
    pub async fn call(&self, request: CoordRequest) -> Result<CoordResponse, CoordClientError> {
        let options = self.inner.options;
        let long_poll = match &request {
            CoordRequest::GetConfig { wait_ms, .. } => Duration::from_millis(u64::from(*wait_ms)),
            _ => Duration::ZERO,
        };
        let started = Instant::now();
        let deadline = started + options.give_up_after + long_poll;
        let mut target = self.preferred()?;
        let mut last_error = String::from("no attempt made");
        // Failed attempts since the last answer; after a full round of the
        // members we pause before the next round, growing the pause.
        let mut failures: u32 = 0;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(CoordClientError::Unavailable {
                    waited: now - started,
                    last: last_error,
                });
            }
            let attempt_timeout = (options.attempt_timeout + long_poll).min(deadline - now);
            match self
                .attempt(&target, request.clone(), attempt_timeout)
                .await
            {
                Ok(CoordResponse::NotLeader {
                    leader_addr: Some(leader),
                }) if leader != target => {
                    last_error = format!("{target} is not the leader; redirected to {leader}");
                    self.learn(std::slice::from_ref(&leader));
                    target = leader;
                    failures += 1;
                }
                Ok(CoordResponse::NotLeader { .. }) => {
                    // No leader known (an election is running): try another.
                    last_error = format!("{target} knows no leader");
                    target = self.next_after(&target);
                    failures += 1;
                }
                Ok(response) => {
                    if let CoordResponse::Config(Some(config)) = &response {
                        let addrs: Vec<String> =
                            config.coordinators.iter().map(|c| c.addr.clone()).collect();
                        self.learn(&addrs);
                    }
                    self.prefer(&target);
                    return Ok(response);
                }
                Err(e) => {
                    last_error = e.to_string();
                    target = self.next_after(&target);
                    failures += 1;
                }
            }
            let member_count = lock(&self.inner.members).addrs.len().max(1) as u32;
            if failures.is_multiple_of(member_count) {
                let rounds = failures / member_count;
                let pause = Duration::from_millis(50u64 << rounds.min(4)); // 100 ms .. 800 ms
                let remaining = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(pause.min(remaining)).await;
            }
        }
    }

    /// Long-polls for a configuration newer than `known`, waiting up to
    /// `wait` on the member; `None` when none arrived in that time.
    pub async fn wait_config(
        &self,
        known: Epoch,
        wait: Duration,
    ) -> Result<Option<Configuration>, CoordClientError> {
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
        match self
            .call(CoordRequest::GetConfig { known, wait_ms })
            .await?
        {
            CoordResponse::Config(config) => Ok(config.map(|c| *c)),
            other => Err(CoordClientError::Unexpected(format!(
                "{other:?} to GetConfig"
            ))),
        }
    }

    /// One request to one member, over its cached connection.
    async fn attempt(
        &self,
        addr: &str,
        request: CoordRequest,
        timeout: Duration,
    ) -> Result<CoordResponse, CoordClientError> {
        let connection = self.connection(addr, timeout).await?;
        let result = connection.call(request, timeout).await;
        if result.is_err() {
            // Whatever went wrong, the next attempt starts on a fresh connection.
            let mut connections = self.inner.connections.lock().await;
            if connections
                .get(addr)
                .is_some_and(|c| Arc::ptr_eq(c, &connection))
            {
                connections.remove(addr);
            }
        }
        result
    }

    async fn connection(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> Result<Arc<CoordConnection>, CoordClientError> {
        {
            let connections = self.inner.connections.lock().await;
            if let Some(connection) = connections.get(addr) {
                if !connection.is_closed() {
                    return Ok(connection.clone());
                }
            }
        }
        // Connect without holding the lock, so one slow member does not
        // block calls to the others.
        let connection = Arc::new(CoordConnection::connect(addr, timeout).await?);
        let mut connections = self.inner.connections.lock().await;
        match connections.get(addr) {
            Some(existing) if !existing.is_closed() => Ok(existing.clone()),
            _ => {
                connections.insert(addr.to_string(), connection.clone());
                Ok(connection)
            }
        }
    }

    fn preferred(&self) -> Result<String, CoordClientError> {
        let members = lock(&self.inner.members);
        members
            .addrs
            .get(members.preferred)
            .or(members.addrs.first())
            .cloned()
            .ok_or(CoordClientError::NoMembers)
    }

    fn prefer(&self, addr: &str) {
        let mut members = lock(&self.inner.members);
        if let Some(index) = members.addrs.iter().position(|a| a == addr) {
            members.preferred = index;
        }
    }

    fn next_after(&self, addr: &str) -> String {
        let members = lock(&self.inner.members);
        let index = members
            .addrs
            .iter()
            .position(|a| a == addr)
            .map_or(0, |i| (i + 1) % members.addrs.len());
        members.addrs[index].clone()
    }

    /// Adds addresses not known yet. Addresses are never dropped: a member
    /// missing from one configuration may still be the one that answers.
    fn learn(&self, addrs: &[String]) {
        let mut members = lock(&self.inner.members);
        for addr in addrs {
            if !members.addrs.contains(addr) {
                members.addrs.push(addr.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::CoordinatorInfo;
    use tokio::net::TcpListener;

    /// A fake member that answers every request with `answer(request)`.
    async fn fake_member(answer: fn(&CoordRequest, &str) -> CoordResponse) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let me = addr.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let me = me.clone();
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.into_split();
                    while let Ok(Message::CoordRequest { id, request }) =
                        read_frame(&mut reader, 1 << 20).await
                    {
                        let response = answer(&request, &me);
                        if write_frame(&mut writer, &Message::CoordResponse { id, response })
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    /// An address where nothing listens.
    async fn dead_addr() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().to_string()
    }

    #[tokio::test]
    async fn follows_redirects_and_fails_over() {
        let leader = fake_member(|request, me| match request {
            CoordRequest::GetConfig { .. } => {
                CoordResponse::Config(Some(Box::new(Configuration {
                    epoch: Epoch(4),
                    coordinators: vec![
                        CoordinatorInfo {
                            id: 1,
                            addr: me.to_string(),
                        },
                        CoordinatorInfo {
                            id: 2,
                            addr: "127.0.0.1:9".into(),
                        },
                    ],
                    ..Configuration::default()
                })))
            }
            _ => CoordResponse::Done,
        })
        .await;
        // The follower redirects to the leader, whose address is in the answer.
        static LEADER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        LEADER.set(leader.clone()).unwrap();
        let follower = fake_member(|_, _| CoordResponse::NotLeader {
            leader_addr: Some(LEADER.get().unwrap().clone()),
        })
        .await;
        let dead = dead_addr().await;

        let client = CoordClient::new([dead.clone(), follower.clone()]);
        let answer = client
            .call(CoordRequest::RmSpace { name: "x".into() })
            .await
            .unwrap();
        assert_eq!(answer, CoordResponse::Done);
        assert!(
            client.members().contains(&leader),
            "learned the leader from the redirect"
        );
        // The next call goes straight to the leader; a Config teaches members.
        let config = client
            .wait_config(Epoch(0), Duration::from_millis(10))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(config.epoch, Epoch(4));
        assert!(client.members().contains(&"127.0.0.1:9".to_string()));
    }

    #[tokio::test]
    async fn gives_up_after_a_bounded_time_with_coordfail() {
        let options = CoordClientOptions {
            attempt_timeout: Duration::from_millis(200),
            give_up_after: Duration::from_millis(600),
        };
        let client = CoordClient::with_options([dead_addr().await, dead_addr().await], options);
        let started = std::time::Instant::now();
        let error = client.call(CoordRequest::Status).await.unwrap_err();
        assert!(
            matches!(error, CoordClientError::Unavailable { .. }),
            "{error}"
        );
        assert_eq!(error.admin_status(), AdminStatus::CoordFail);
        assert!(started.elapsed() < Duration::from_secs(3));
        // A member that never knows a leader also ends in COORDFAIL.
        let lost = fake_member(|_, _| CoordResponse::NotLeader { leader_addr: None }).await;
        let client = CoordClient::with_options([lost], options);
        let error = client
            .call(CoordRequest::AddSpace {
                description: "space a key k".into(),
            })
            .await
            .unwrap_err();
        assert!(error.to_string().contains("knows no leader"), "{error}");
    }

    #[tokio::test]
    async fn no_members_is_an_error() {
        let client = CoordClient::new(Vec::<String>::new());
        assert!(matches!(
            client.call(CoordRequest::Status).await,
            Err(CoordClientError::NoMembers)
        ));
    }

    #[tokio::test]
    async fn connection_reports_closed_when_the_member_goes_away() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accept = tokio::spawn(async move { listener.accept().await.map(|(stream, _)| stream) });
        let connection = CoordConnection::connect(&addr, Duration::from_secs(1))
            .await
            .unwrap();
        drop(accept.await.unwrap().unwrap());
        let error = connection
            .call(CoordRequest::Status, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(error, CoordClientError::Closed { .. }), "{error}");
        assert!(connection.is_closed());
    }
}
