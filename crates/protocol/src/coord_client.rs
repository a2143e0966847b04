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
//!
//! # Failing over, and how fast
//!
//! A call tries members in rounds, each member at most once per round, in
//! this order: the member that last answered as leader; the member a
//! `NotLeader` answer names (unless it is marked unresponsive, see below:
//! a follower may name a frozen leader until it learns of the election);
//! then the others in ring order, those that answered their last attempt
//! before those that did not. An attempt that
//! times out ([`CoordClientOptions::attempt_timeout`]), cannot connect or
//! loses its connection moves on to the next member at once, and marks the
//! member *unresponsive*: every later call tries it last, until it answers
//! again. A frozen member (a paused process still accepts connections, so
//! only the timeout reveals it) therefore costs one attempt timeout once,
//! not one per call. After a round without an answer the call pauses —
//! 25 ms, doubling, at most the smaller of 200 ms and one attempt timeout —
//! and starts the next round, until [`CoordClientOptions::give_up_after`].
//!
//! The bound: while some member leads and answers, a call reaches it within
//! `k × attempt_timeout + 2 × RTT`, where `k` counts the members that froze
//! since they last answered this client (each is then marked) and the two
//! round trips are a redirect and the leader's answer. Once the leader
//! starts answering, a call still running reaches it within the rest of one
//! attempt and one pause: at most `attempt_timeout + 200 ms + 2 × RTT`.
//!
//! For heartbeats, [`CoordClientOptions::heartbeat`] (attempt 250 ms, give
//! up after 1.2 s) gives, in a group of three whose leader freezes: the
//! first heartbeat after the freeze spends at most 250 ms on the frozen
//! member and then asks the other two (during the election they answer
//! `NotLeader` without a leader, and rounds repeat with the frozen member
//! last). From the moment the new leader answers, a heartbeat reaches it
//! within 250 ms + 200 ms + 2 RTT ≈ 0.45 s, and a heartbeat that starts
//! later within 2 RTT. A heartbeat call never lasts more than 1.2 s, so the
//! daemon's next one (every 500 ms; a late tick fires at once) is never
//! held up longer than that. Against the coordinator's 2 s failure timeout
//! this leaves more than 1.5 s once a leader answers.
//!
//! Requests wait in a bounded queue per connection
//! ([`OUTGOING_MESSAGES_MAX`]): a caller that finds it full waits for room
//! (within its attempt timeout) instead of growing memory behind a member
//! that does not read.

use crate::credential::{coord_message, AdminToken};
use crate::frame::{read_frame, write_frame, FRAME_BYTES_MAX_DEFAULT};
use crate::messages::{CoordRequest, CoordResponse, Message};
use crate::status::AdminStatus;
use crate::transport::{ConnectError, Transport};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_types::{Configuration, Epoch};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The most requests waiting to be written on one connection; a caller
/// beyond it waits for room.
pub const OUTGOING_MESSAGES_MAX: usize = 64;

/// The first pause after a round in which no member answered; it doubles
/// each round.
const ROUND_PAUSE_FIRST: Duration = Duration::from_millis(25);

/// The longest pause between rounds (and never more than one attempt
/// timeout), so that a leader elected during a pause is found soon.
const ROUND_PAUSE_MAX: Duration = Duration::from_millis(200);

/// Why a coordinator call failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordClientError {
    /// The client was given no member addresses.
    #[error("no coordinator addresses given")]
    NoMembers,
    /// The TLS handshake with a member failed, or its address names no
    /// host a certificate could carry: the client's CA or the cluster's
    /// certificates are wrong, which no retry mends, so the call ends.
    #[error("TLS with coordinator {addr} failed: {source}")]
    Tls {
        addr: String,
        #[source]
        source: ConnectError,
    },
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
    /// A member refused the request (a plain client on a TLS port, say).
    #[error("{status}: {reason}")]
    Refused { status: AdminStatus, reason: String },
    /// A member answered with a response that does not fit the request.
    #[error("unexpected answer from the coordinator: {0}")]
    Unexpected(String),
    /// No member gave an answer within the client's give-up time.
    #[error("coordinator unavailable: no member answered within {waited:?} (last error: {last})")]
    Unavailable { waited: Duration, last: String },
}

impl CoordClientError {
    fn from_connect(addr: &str, error: ConnectError) -> CoordClientError {
        match error {
            ConnectError::Tcp { source, .. } => CoordClientError::Connect {
                addr: addr.to_string(),
                source,
            },
            ConnectError::Timeout { after, .. } => CoordClientError::Timeout {
                addr: addr.to_string(),
                after,
            },
            source => CoordClientError::Tls {
                addr: addr.to_string(),
                source,
            },
        }
    }

    /// The admin status this error surfaces as.
    pub fn admin_status(&self) -> AdminStatus {
        match self {
            CoordClientError::Unexpected(_) => AdminStatus::Internal,
            CoordClientError::Refused { status, .. } => *status,
            _ => AdminStatus::CoordFail,
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<CoordResponse>>>>;

/// One framed TCP connection to one coordinator member, with many requests
/// in flight, answered by id. Dropping it closes the connection.
pub struct CoordConnection {
    addr: String,
    admin_token: Option<AdminToken>,
    outgoing: mpsc::Sender<Message>,
    pending: Pending,
    closed: Arc<AtomicBool>,
    request_id_next: AtomicU64,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl CoordConnection {
    /// Connects to `addr` (`host:port`) within `timeout`, in plain TCP and
    /// without a credential.
    pub async fn connect(
        addr: &str,
        timeout: Duration,
    ) -> Result<CoordConnection, CoordClientError> {
        CoordConnection::connect_over(&CoordLink::default(), addr, timeout).await
    }

    /// Connects to `addr` within `timeout` (the TLS handshake included)
    /// over `link`, whose credential every request that needs one carries.
    pub async fn connect_over(
        link: &CoordLink,
        addr: &str,
        timeout: Duration,
    ) -> Result<CoordConnection, CoordClientError> {
        let stream = link
            .transport
            .connect(addr, timeout)
            .await
            .map_err(|e| CoordClientError::from_connect(addr, e))?;
        let (mut read_half, mut write_half) = stream.into_split();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let (outgoing, mut outgoing_rx) = mpsc::channel::<Message>(OUTGOING_MESSAGES_MAX);

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
            admin_token: link.admin_token.clone(),
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

    /// Sends one request and waits up to `timeout` for its answer; the time
    /// spent waiting for room in the outgoing queue counts.
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
        if self.is_closed() {
            lock(&self.pending).remove(&id);
            return Err(closed());
        }
        let exchange = async {
            // A full queue holds the caller here: back-pressure instead of
            // memory growing behind a member that does not read.
            self.outgoing
                .send(coord_message(id, request, self.admin_token.as_ref()))
                .await
                .map_err(|_| closed())?;
            rx.await.map_err(|_| closed())
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(CoordClientError::Timeout {
                addr: self.addr.clone(),
                after: timeout,
            }),
        };
        if result.is_err() {
            lock(&self.pending).remove(&id);
        }
        result
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

/// Timeouts of a [`CoordClient`]; the module doc states the fail-over
/// bound they give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoordClientOptions {
    /// How long one attempt at one member may take (connect, or request and
    /// answer) before the call moves on to the next member. A long-poll's
    /// own wait is added to it.
    pub attempt_timeout: Duration,
    /// How long `call` keeps trying members before giving up (COORDFAIL).
    pub give_up_after: Duration,
}

impl CoordClientOptions {
    /// For a daemon's heartbeats: a frozen member costs at most 250 ms, and
    /// a call gives up after 1.2 s, so that with the coordinator's 2 s
    /// failure timeout a heartbeat reaches a newly elected leader with more
    /// than 1.5 s to spare (the arithmetic is in the module doc).
    pub fn heartbeat() -> CoordClientOptions {
        CoordClientOptions {
            attempt_timeout: Duration::from_millis(250),
            give_up_after: Duration::from_millis(1200),
        }
    }
}

impl Default for CoordClientOptions {
    /// For configuration polls and administration: 2 s per attempt (a Raft
    /// write commits far sooner; a frozen member costs this once), 30 s in
    /// all.
    fn default() -> Self {
        CoordClientOptions {
            attempt_timeout: Duration::from_secs(2),
            give_up_after: Duration::from_secs(30),
        }
    }
}

/// How a [`CoordClient`] reaches the members: over which transport, and
/// with which admin credential (`credential.rs`) for the requests that
/// need one. The default is plain TCP without a credential.
#[derive(Clone, Debug, Default)]
pub struct CoordLink {
    pub transport: Transport,
    pub admin_token: Option<AdminToken>,
}

/// A client of the coordinator group. Cheap to clone; clones share
/// connections and what they learn about the members.
#[derive(Clone)]
pub struct CoordClient {
    inner: Arc<Inner>,
}

struct Inner {
    options: CoordClientOptions,
    link: CoordLink,
    members: Mutex<Members>,
    connections: tokio::sync::Mutex<HashMap<String, Arc<CoordConnection>>>,
}

/// What the client knows about the members, and the order to try them in.
#[derive(Debug, Default)]
struct Members {
    /// Known member addresses, in the order first learned.
    addrs: Vec<String>,
    /// The member that last answered as leader (anything but `NotLeader`).
    leader: Option<String>,
    /// Members whose last attempt timed out, could not connect or lost its
    /// connection; tried after the others until they answer again.
    unresponsive: HashSet<String>,
}

impl Members {
    fn new<I, S>(members: I) -> Members
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut known = Members::default();
        let addrs: Vec<String> = members.into_iter().map(Into::into).collect();
        known.learn(&addrs);
        known
    }

    /// The first member of a round: the leader, unless it stopped
    /// answering; else the next member after it.
    fn first(&self) -> Option<String> {
        match &self.leader {
            Some(leader) if !self.unresponsive.contains(leader) => Some(leader.clone()),
            leader => self.next(&[], leader.as_deref()),
        }
    }

    /// The next member to try in this round: after `after` in ring order,
    /// not yet `tried`, members that answered before those that did not;
    /// `None` when every member was tried.
    fn next(&self, tried: &[String], after: Option<&str>) -> Option<String> {
        let count = self.addrs.len();
        let start = after
            .and_then(|a| self.addrs.iter().position(|m| m == a))
            .map_or(0, |i| i + 1);
        let ring = (0..count).map(|i| &self.addrs[(start + i) % count]);
        let untried: Vec<&String> = ring.filter(|m| !tried.contains(m)).collect();
        untried
            .iter()
            .find(|m| !self.unresponsive.contains(m.as_str()))
            .or(untried.first())
            .map(|m| (*m).clone())
    }

    /// The member to try after `after` answered `NotLeader` naming
    /// `redirect` (or failed, with no redirect): the named member unless
    /// this round tried it or it stopped answering (a stale redirect must
    /// not cost an attempt timeout per call); else [`Members::next`].
    fn after(&self, tried: &[String], after: &str, redirect: Option<&str>) -> Option<String> {
        match redirect {
            Some(leader)
                if !tried.iter().any(|t| t == leader) && !self.unresponsive.contains(leader) =>
            {
                Some(leader.to_string())
            }
            _ => self.next(tried, Some(after)),
        }
    }

    /// Adds addresses not known yet. Addresses are never dropped: a member
    /// missing from one configuration may still be the one that answers.
    fn learn(&mut self, addrs: &[String]) {
        for addr in addrs {
            if !self.addrs.contains(addr) {
                self.addrs.push(addr.clone());
            }
        }
    }

    /// `addr` answered; `as_leader` unless its answer was `NotLeader`.
    fn answered(&mut self, addr: &str, as_leader: bool) {
        self.unresponsive.remove(addr);
        if as_leader {
            self.leader = Some(addr.to_string());
        } else if self.leader.as_deref() == Some(addr) {
            self.leader = None;
        }
    }

    /// `addr` timed out, refused the connection or lost it.
    fn failed(&mut self, addr: &str) {
        self.unresponsive.insert(addr.to_string());
    }
}

impl CoordClient {
    /// A client that starts from these member addresses (`host:port`), with
    /// the default options.
    pub fn new<I, S>(members: I) -> CoordClient
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CoordClient::with_options(members, CoordClientOptions::default())
    }

    /// A client that starts from these member addresses, with `options`
    /// (for a daemon's heartbeats, [`CoordClientOptions::heartbeat`]).
    pub fn with_options<I, S>(members: I, options: CoordClientOptions) -> CoordClient
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CoordClient::with_link(members, options, CoordLink::default())
    }

    /// A client with `options` that reaches the members over `link`.
    pub fn with_link<I, S>(members: I, options: CoordClientOptions, link: CoordLink) -> CoordClient
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CoordClient {
            inner: Arc::new(Inner {
                options,
                link,
                members: Mutex::new(Members::new(members)),
                connections: tokio::sync::Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The member addresses known now.
    pub fn members(&self) -> Vec<String> {
        lock(&self.inner.members).addrs.clone()
    }

    /// Sends `request` to the group, trying members in the order the module
    /// doc describes, and gives up with [`CoordClientError::Unavailable`]
    /// after the configured time. Answers other than `NotLeader` (including
    /// `Failed`) are returned as they are.
    pub async fn call(&self, request: CoordRequest) -> Result<CoordResponse, CoordClientError> {
        let options = self.inner.options;
        let long_poll = match &request {
            CoordRequest::GetConfig { wait_ms, .. } => Duration::from_millis(u64::from(*wait_ms)),
            // The leader fences a daemon before it takes it out.
            CoordRequest::ServerOffline { .. }
            | CoordRequest::ServerKill { .. }
            | CoordRequest::ServerForget { .. } => crate::FENCE,
            _ => Duration::ZERO,
        };
        let started = Instant::now();
        let deadline = started + options.give_up_after + long_poll;
        let mut target = lock(&self.inner.members)
            .first()
            .ok_or(CoordClientError::NoMembers)?;
        let mut tried: Vec<String> = Vec::new();
        let mut last_error = String::from("no attempt made");
        let mut pause = ROUND_PAUSE_FIRST;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(CoordClientError::Unavailable {
                    waited: now - started,
                    last: last_error,
                });
            }
            let attempt_timeout = (options.attempt_timeout + long_poll).min(deadline - now);
            let result = self
                .attempt(&target, request.clone(), attempt_timeout)
                .await;
            let mut redirect = None;
            {
                let mut members = lock(&self.inner.members);
                match result {
                    Ok(CoordResponse::NotLeader { leader_addr }) => {
                        members.answered(&target, false);
                        last_error = match &leader_addr {
                            Some(leader) => {
                                format!("{target} is not the leader; redirected to {leader}")
                            }
                            // An election is running: try another member.
                            None => format!("{target} knows no leader"),
                        };
                        if let Some(leader) = leader_addr {
                            members.learn(std::slice::from_ref(&leader));
                            redirect = Some(leader);
                        }
                    }
                    Ok(response) => {
                        members.answered(&target, true);
                        if let CoordResponse::Config(Some(config)) = &response {
                            let addrs: Vec<String> =
                                config.coordinators.iter().map(|c| c.addr.clone()).collect();
                            members.learn(&addrs);
                        }
                        return Ok(response);
                    }
                    Err(e @ CoordClientError::Tls { .. }) => return Err(e),
                    Err(e) => {
                        members.failed(&target);
                        last_error = e.to_string();
                    }
                }
            }
            tried.push(target.clone());
            let next = lock(&self.inner.members).after(&tried, &target, redirect.as_deref());
            target = match next {
                Some(next) => next,
                None => {
                    // Every member was tried: pause, then start a new round.
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let cap = ROUND_PAUSE_MAX.min(options.attempt_timeout);
                    tokio::time::sleep(pause.min(cap).min(remaining)).await;
                    pause = (pause * 2).min(cap);
                    tried.clear();
                    lock(&self.inner.members)
                        .first()
                        .ok_or(CoordClientError::NoMembers)?
                }
            };
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
            CoordResponse::Failed { status, reason } => {
                Err(CoordClientError::Refused { status, reason })
            }
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
        let connection =
            Arc::new(CoordConnection::connect_over(&self.inner.link, addr, timeout).await?);
        let mut connections = self.inner.connections.lock().await;
        match connections.get(addr) {
            Some(existing) if !existing.is_closed() => Ok(existing.clone()),
            _ => {
                connections.insert(addr.to_string(), connection.clone());
                Ok(connection)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::CoordinatorInfo;
    use tokio::net::{TcpListener, TcpStream};

    /// How a fake member treats a request: `None` never answers (a frozen
    /// process: it accepts and reads, but says nothing).
    type Behaviour = Arc<dyn Fn(&CoordRequest, &str) -> Option<CoordResponse> + Send + Sync>;

    /// The names of the members, in the order requests reached them.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<&'static str>>>);

    impl Seen {
        fn take(&self) -> Vec<&'static str> {
            std::mem::take(&mut *lock(&self.0))
        }

        /// How many requests the frozen member `name` read, and the order
        /// in which the others read theirs. (A frozen member records its
        /// request whenever its task runs, so only its count is certain.)
        fn split(&self, name: &str) -> (usize, Vec<&'static str>) {
            let seen = self.take();
            let frozen = seen.iter().filter(|n| **n == name).count();
            (frozen, seen.into_iter().filter(|n| *n != name).collect())
        }
    }

    /// A fake member named `name` on 127.0.0.1, speaking the frame
    /// protocol; every request it reads is recorded in `seen`.
    async fn member(name: &'static str, seen: &Seen, behaviour: Behaviour) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let me = addr.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (me, seen, behaviour) = (me.clone(), seen.clone(), behaviour.clone());
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.into_split();
                    while let Ok(Message::CoordRequest { id, request }) =
                        read_frame(&mut reader, 1 << 20).await
                    {
                        lock(&seen.0).push(name);
                        let Some(response) = behaviour(&request, &me) else {
                            continue;
                        };
                        let answer = Message::CoordResponse { id, response };
                        if write_frame(&mut writer, &answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn answers(response: CoordResponse) -> Behaviour {
        Arc::new(move |_, _| Some(response.clone()))
    }

    fn frozen() -> Behaviour {
        Arc::new(|_, _| None)
    }

    fn redirects_to(leader: &str) -> Behaviour {
        answers(CoordResponse::NotLeader {
            leader_addr: Some(leader.to_string()),
        })
    }

    /// Short attempts keep the tests quick; nothing asserts on time.
    fn quick() -> CoordClientOptions {
        CoordClientOptions {
            attempt_timeout: Duration::from_millis(150),
            give_up_after: Duration::from_secs(20),
        }
    }

    /// An address where nothing listens.
    async fn dead_addr() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().to_string()
    }

    #[tokio::test]
    async fn a_frozen_member_costs_one_attempt_across_calls() {
        let seen = Seen::default();
        let leader = member("leader", &seen, answers(CoordResponse::Done)).await;
        let follower = member("follower", &seen, redirects_to(&leader)).await;
        let stuck = member("frozen", &seen, frozen()).await;
        let client = CoordClient::with_options([stuck, follower, leader], quick());
        for _ in 0..4 {
            let answer = client.call(CoordRequest::Status).await.unwrap();
            assert_eq!(answer, CoordResponse::Done);
        }
        // The first call times out on the frozen member, is redirected by
        // the follower and answered by the leader; every later call goes
        // straight to the leader.
        let (frozen_count, others) = seen.split("frozen");
        assert_eq!(frozen_count, 1);
        assert_eq!(others, ["follower", "leader", "leader", "leader", "leader"]);
    }

    #[tokio::test]
    async fn a_leader_that_freezes_is_tried_last_from_then_on() {
        let seen = Seen::default();
        let stopped = Arc::new(AtomicBool::new(false));
        let old = {
            let stopped = stopped.clone();
            let behaviour: Behaviour = Arc::new(move |_, _| {
                (!stopped.load(Ordering::Acquire)).then_some(CoordResponse::Done)
            });
            member("old", &seen, behaviour).await
        };
        let new = member("new", &seen, answers(CoordResponse::Done)).await;
        let follower = member("follower", &seen, redirects_to(&new)).await;
        let client = CoordClient::with_options([old, follower, new], quick());
        client.call(CoordRequest::Status).await.unwrap();
        assert_eq!(seen.take(), ["old"]);

        stopped.store(true, Ordering::Release);
        for _ in 0..3 {
            client.call(CoordRequest::Status).await.unwrap();
        }
        let (old_count, others) = seen.split("old");
        assert_eq!(old_count, 1);
        assert_eq!(others, ["follower", "new", "new", "new"]);
    }

    #[tokio::test]
    async fn a_stale_redirect_to_a_frozen_member_is_not_followed_first() {
        let seen = Seen::default();
        let stuck = member("frozen", &seen, frozen()).await;
        // A follower that has not heard of the election names the old leader.
        let follower = member("follower", &seen, redirects_to(&stuck)).await;
        let leader = member("leader", &seen, answers(CoordResponse::Done)).await;
        let client = CoordClient::with_options([stuck, follower, leader], quick());
        for _ in 0..3 {
            client.call(CoordRequest::Status).await.unwrap();
        }
        let (frozen_count, others) = seen.split("frozen");
        assert_eq!(frozen_count, 1);
        assert_eq!(others, ["follower", "leader", "leader", "leader"]);
    }

    #[test]
    fn members_that_answered_come_before_unresponsive_ones() {
        let mut members = Members::new(["a", "b", "c"]);
        assert_eq!(members.first().as_deref(), Some("a"));
        members.answered("b", true);
        assert_eq!(members.first().as_deref(), Some("b"));
        // The leader stops answering: rounds start after it, and reach it
        // only once everyone else was asked.
        members.failed("b");
        assert_eq!(members.first().as_deref(), Some("c"));
        members.failed("c");
        assert_eq!(members.first().as_deref(), Some("a"));
        let tried = vec!["a".to_string()];
        assert_eq!(members.next(&tried, Some("a")).as_deref(), Some("b"));
        let tried = vec!["a".to_string(), "b".to_string()];
        assert_eq!(members.next(&tried, Some("b")).as_deref(), Some("c"));
        let all: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(members.next(&all, Some("c")), None);
        // An answer, even `NotLeader`, makes a member responsive again; a
        // `NotLeader` from the leader forgets it as leader.
        members.answered("b", false);
        assert_eq!(members.leader, None);
        assert_eq!(members.first().as_deref(), Some("a"));
        assert_eq!(members.next(&tried[..1], Some("a")).as_deref(), Some("b"));
        // A redirect is followed unless this round tried the member or it
        // is unresponsive ("c" still is).
        assert_eq!(
            members.after(&tried[..1], "a", Some("b")).as_deref(),
            Some("b")
        );
        assert_eq!(members.after(&tried, "b", Some("a")).as_deref(), Some("c"));
        assert_eq!(
            members.after(&tried[..1], "a", Some("c")).as_deref(),
            Some("b")
        );
        assert_eq!(members.after(&all, "c", Some("b")), None);
    }

    #[tokio::test]
    async fn redirects_do_not_bounce_within_a_round() {
        let seen = Seen::default();
        // Two members that each name a third, dead one, and one frozen.
        let dead = dead_addr().await;
        let one = member("one", &seen, redirects_to(&dead)).await;
        let two = member("two", &seen, redirects_to(&dead)).await;
        let options = CoordClientOptions {
            attempt_timeout: Duration::from_millis(100),
            give_up_after: Duration::from_millis(500),
        };
        let client = CoordClient::with_options([one, two], options);
        let error = client.call(CoordRequest::Status).await.unwrap_err();
        assert!(
            matches!(error, CoordClientError::Unavailable { .. }),
            "{error}"
        );
        // Each round asks each live member once (the dead one in between).
        let seen = seen.take();
        assert!(!seen.is_empty());
        for pair in seen.chunks(2).filter(|pair| pair.len() == 2) {
            assert_eq!(pair, ["one", "two"]);
        }
    }

    #[tokio::test]
    async fn follows_redirects_and_learns_members() {
        let seen = Seen::default();
        let leader = {
            let behaviour: Behaviour = Arc::new(|request, me| {
                Some(match request {
                    CoordRequest::GetConfig { .. } => {
                        CoordResponse::Config(Some(Box::new(Configuration {
                            epoch: Epoch(4),
                            coordinators: vec![
                                CoordinatorInfo {
                                    id: 1,
                                    addr: me.to_string(),
                                    metrics: None,
                                },
                                CoordinatorInfo {
                                    id: 2,
                                    addr: "127.0.0.1:9".into(),
                                    metrics: None,
                                },
                            ],
                            ..Configuration::default()
                        })))
                    }
                    _ => CoordResponse::Done,
                })
            });
            member("leader", &seen, behaviour).await
        };
        let follower = member("follower", &seen, redirects_to(&leader)).await;
        let dead = dead_addr().await;

        let client = CoordClient::with_options([dead, follower], quick());
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
        assert_eq!(seen.take(), ["follower", "leader", "leader"]);
    }

    #[tokio::test]
    async fn gives_up_with_coordfail() {
        let options = CoordClientOptions {
            attempt_timeout: Duration::from_millis(200),
            give_up_after: Duration::from_millis(600),
        };
        let client = CoordClient::with_options([dead_addr().await, dead_addr().await], options);
        let error = client.call(CoordRequest::Status).await.unwrap_err();
        assert!(
            matches!(error, CoordClientError::Unavailable { .. }),
            "{error}"
        );
        assert_eq!(error.admin_status(), AdminStatus::CoordFail);
        // A member that never knows a leader also ends in COORDFAIL.
        let seen = Seen::default();
        let lost = member(
            "lost",
            &seen,
            answers(CoordResponse::NotLeader { leader_addr: None }),
        )
        .await;
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

    /// A connection to a listener on 127.0.0.1, and the listener's side of
    /// it (which reads nothing).
    async fn connected() -> (CoordConnection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accept = tokio::spawn(async move { listener.accept().await.map(|(stream, _)| stream) });
        let connection = CoordConnection::connect(&addr, Duration::from_secs(1))
            .await
            .unwrap();
        (connection, accept.await.unwrap().unwrap())
    }

    #[tokio::test]
    async fn connection_reports_closed_when_the_member_goes_away() {
        let (connection, member_side) = connected().await;
        drop(member_side);
        let error = connection
            .call(CoordRequest::Status, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(error, CoordClientError::Closed { .. }), "{error}");
        assert!(connection.is_closed());
    }

    #[tokio::test]
    async fn a_full_queue_holds_callers_instead_of_growing() {
        // A member that accepts but never reads: once the socket buffers
        // fill, the writer stops, the queue fills to its bound, and callers
        // wait for room until their timeout.
        let (connection, _held) = connected().await;
        assert_eq!(connection.outgoing.max_capacity(), OUTGOING_MESSAGES_MAX);
        let big = "x".repeat(64 << 10);
        // 4096 requests of 64 KiB are 256 MiB, far beyond any socket
        // buffer: the queue must fill long before.
        let mut calls = 0;
        while connection.outgoing.capacity() > 0 && calls < 4096 {
            let request = CoordRequest::AddSpace {
                description: big.clone(),
            };
            let result = connection.call(request, Duration::from_millis(5)).await;
            assert!(
                matches!(result, Err(CoordClientError::Timeout { .. })),
                "a member that never answers gave {result:?}"
            );
            calls += 1;
        }
        assert_eq!(connection.outgoing.capacity(), 0, "after {calls} calls");
        // A caller meeting the full queue times out and leaves nothing behind.
        let result = connection
            .call(CoordRequest::Status, Duration::from_millis(5))
            .await;
        assert!(matches!(result, Err(CoordClientError::Timeout { .. })));
        assert!(lock(&connection.pending).is_empty());
        assert!(!connection.is_closed());
    }
}
