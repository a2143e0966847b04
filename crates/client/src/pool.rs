//! One multiplexed TCP connection per daemon.
//!
//! ```text
//!  callers ──request(id)──▶ bounded queue ──▶ writer task ──frames──▶ daemon
//!     ▲                                                               │
//!     └── per-id oneshot ◀── reader task ◀──────────frames────────────┘
//! ```
//!
//! Every request gets a fresh id and a oneshot channel; the reader task
//! routes the response frame to the channel of its id (one response per
//! request: a search is paged by separate requests). When the connection
//! fails, every pending channel is closed, so each waiting caller learns
//! that its answer will never come; the next request to that daemon opens a
//! new connection.
//!
//! Memory stays bounded: at most [`FRAMES_QUEUED_MAX`] frames wait for the
//! writer per connection; a caller that finds the queue full waits for room
//! (back-pressure) up to the pool's connect timeout, then gets
//! [`ConnError::Congested`] and retries like after any unreachable replica.
//!
//! A lock here guards one map whose every change is a single insert or
//! remove, so a thread that panicked while holding it cannot have left it
//! half-changed: a poisoned lock is logged and its guard recovered rather
//! than taking the caller down.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tessera_protocol::frame::encode;
use tessera_protocol::transport::{ConnectError, Stream, Transport};
use tessera_protocol::{read_frame_shared, DaemonRequest, DaemonResponse, Message};
use tessera_types::Epoch;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

/// The most frames waiting for one connection's writer.
pub(crate) const FRAMES_QUEUED_MAX: usize = 256;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<DaemonResponse>>>>;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    /// Nothing was sent: the connection could not be opened.
    #[error("cannot connect to daemon {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: ConnectError,
    },
    /// Nothing was sent: the connection was not opened within the timeout.
    #[error("cannot connect to daemon {addr}: timed out after {after:?}")]
    ConnectTimeout { addr: String, after: Duration },
    /// Nothing was sent: the connection's queue stayed full for the whole
    /// wait (the daemon does not read what it is sent).
    #[error("connection to daemon {addr} is congested: no room to send within {after:?}")]
    Congested { addr: String, after: Duration },
    /// The request may have been sent, but the connection failed before the
    /// whole answer arrived.
    #[error("connection to daemon {addr} failed")]
    Lost { addr: String },
    /// The request does not fit in one frame.
    #[error("request of {len} bytes exceeds the frame maximum of {max} bytes")]
    TooLarge { len: usize, max: usize },
}

/// Locks `mutex`, recovering the guard if a panic poisoned it (see the
/// module doc for why that is safe here).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| {
        tracing::warn!("a client connection lock was poisoned by a panic; recovering it");
        poisoned.into_inner()
    })
}

/// The connections of one client, by daemon address.
#[derive(Debug)]
pub(crate) struct DaemonPool {
    conns: Mutex<HashMap<String, Arc<DaemonConn>>>,
    frame_bytes_max: usize,
    connect_timeout: Duration,
    transport: Transport,
}

impl DaemonPool {
    pub(crate) fn new(
        frame_bytes_max: usize,
        connect_timeout: Duration,
        transport: Transport,
    ) -> DaemonPool {
        DaemonPool {
            conns: Mutex::new(HashMap::new()),
            frame_bytes_max,
            connect_timeout,
            transport,
        }
    }

    /// Sends `request` to the daemon at `addr` and returns the channel its
    /// answer arrives on.
    pub(crate) async fn request(
        &self,
        addr: &str,
        epoch: Epoch,
        request: DaemonRequest,
    ) -> Result<Answer, ConnError> {
        let conn = self.conn(addr).await?;
        conn.send(epoch, request, self.connect_timeout).await
    }

    /// A live connection to `addr`, opening one when there is none.
    async fn conn(&self, addr: &str) -> Result<Arc<DaemonConn>, ConnError> {
        if let Some(conn) = lock(&self.conns).get(addr) {
            if !conn.closed.load(Ordering::Acquire) {
                return Ok(conn.clone());
            }
        }
        let stream = self
            .transport
            .connect(addr, self.connect_timeout)
            .await
            .map_err(|e| match e {
                ConnectError::Timeout { after, .. } => ConnError::ConnectTimeout {
                    addr: addr.to_string(),
                    after,
                },
                source => ConnError::Connect {
                    addr: addr.to_string(),
                    source,
                },
            })?;
        let conn = DaemonConn::start(addr.to_string(), stream, self.frame_bytes_max);
        let mut conns = lock(&self.conns);
        // Another caller may have connected meanwhile; keep the first live one.
        if let Some(existing) = conns.get(addr) {
            if !existing.closed.load(Ordering::Acquire) {
                conn.close();
                return Ok(existing.clone());
            }
        }
        conns.insert(addr.to_string(), conn.clone());
        Ok(conn)
    }

    /// Closes every connection (their tasks end).
    pub(crate) fn close_all(&self) {
        for (_, conn) in lock(&self.conns).drain() {
            conn.close();
        }
    }
}

/// One connection to one daemon, shared by every caller.
#[derive(Debug)]
struct DaemonConn {
    addr: String,
    next_id: AtomicU64,
    pending: Pending,
    frames: mpsc::Sender<Vec<u8>>,
    closed: Arc<AtomicBool>,
    frame_bytes_max: usize,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl DaemonConn {
    fn start(addr: String, stream: Stream, frame_bytes_max: usize) -> Arc<DaemonConn> {
        let (mut read_half, mut write_half) = stream.into_split();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let closed = Arc::new(AtomicBool::new(false));
        let (frames, mut frames_rx) = mpsc::channel::<Vec<u8>>(FRAMES_QUEUED_MAX);

        let fail = {
            let pending = pending.clone();
            let closed = closed.clone();
            move || {
                closed.store(true, Ordering::Release);
                // Dropping the senders tells every waiting caller.
                lock(&pending).clear();
            }
        };

        let writer = {
            let fail = fail.clone();
            let addr = addr.clone();
            tokio::spawn(async move {
                while let Some(frame) = frames_rx.recv().await {
                    // A TLS stream holds written bytes until flushed: flush
                    // once the queue is drained (a no-op in plain TCP).
                    let mut written = write_half.write_all(&frame).await;
                    while let (Ok(()), Ok(more)) = (&written, frames_rx.try_recv()) {
                        written = write_half.write_all(&more).await;
                    }
                    if let Err(e) = written.and(write_half.flush().await) {
                        tracing::debug!(%addr, error = %e, "daemon connection write failed");
                        break;
                    }
                }
                fail();
            })
        };
        let reader = {
            let pending = pending.clone();
            let addr = addr.clone();
            tokio::spawn(async move {
                loop {
                    match read_frame_shared(&mut read_half, frame_bytes_max).await {
                        Ok(Message::DaemonResponse { id, response }) => {
                            // One response per request.
                            let sender = lock(&pending).remove(&id);
                            if let Some(sender) = sender {
                                let _ = sender.send(response);
                            }
                        }
                        Ok(other) => {
                            tracing::warn!(%addr, message = ?other, "unexpected message from daemon; closing");
                            break;
                        }
                        Err(e) => {
                            tracing::debug!(%addr, error = %e, "daemon connection closed");
                            break;
                        }
                    }
                }
                fail();
            })
        };
        Arc::new(DaemonConn {
            addr,
            next_id: AtomicU64::new(1),
            pending,
            frames,
            closed,
            frame_bytes_max,
            tasks: Mutex::new(vec![writer, reader]),
        })
    }

    /// Queues one request, waiting up to `room_wait` for room in the queue.
    async fn send(
        self: &Arc<Self>,
        epoch: Epoch,
        request: DaemonRequest,
        room_wait: Duration,
    ) -> Result<Answer, ConnError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = encode(&Message::DaemonRequest { id, epoch, request });
        let body_len = frame.len().saturating_sub(4);
        if body_len > self.frame_bytes_max {
            return Err(ConnError::TooLarge {
                len: body_len,
                max: self.frame_bytes_max,
            });
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            // Checked under the lock: `fail` sets `closed` before it clears.
            if self.closed.load(Ordering::Acquire) {
                return Err(self.lost());
            }
            pending.insert(id, tx);
        }
        // From here on, dropping the answer forgets the request, whatever
        // happens to the frame.
        let answer = Answer {
            id,
            rx: Some(rx),
            conn: self.clone(),
        };
        match tokio::time::timeout(room_wait, self.frames.send(frame)).await {
            Ok(Ok(())) => Ok(answer),
            Ok(Err(_)) => Err(self.lost()),
            Err(_) => Err(ConnError::Congested {
                addr: self.addr.clone(),
                after: room_wait,
            }),
        }
    }

    fn lost(&self) -> ConnError {
        ConnError::Lost {
            addr: self.addr.clone(),
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        lock(&self.pending).clear();
    }
}

/// The answer of one request. Dropping it forgets the request.
#[derive(Debug)]
pub(crate) struct Answer {
    id: u64,
    /// `None` once the answer was taken.
    rx: Option<oneshot::Receiver<DaemonResponse>>,
    conn: Arc<DaemonConn>,
}

impl Answer {
    /// The answer, or `Lost` when the connection failed first (or the
    /// answer was already taken).
    pub(crate) async fn next(&mut self) -> Result<DaemonResponse, ConnError> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(self.conn.lost());
        };
        let result = rx.await.map_err(|_| self.conn.lost());
        self.rx = None;
        result
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        lock(&self.conn.pending).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::{read_frame, write_frame};
    use tessera_types::{SpaceId, Value};
    use tokio::net::TcpListener;

    fn get(key: i64) -> DaemonRequest {
        DaemonRequest::Get {
            space: SpaceId(1),
            key: Value::Int(key),
            auth: Default::default(),
        }
    }

    /// A fake daemon that answers every request with `Done`.
    async fn answering_daemon() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.into_split();
                    while let Ok(Message::DaemonRequest { id, .. }) =
                        read_frame(&mut reader, 1 << 20).await
                    {
                        let response = DaemonResponse::Done;
                        let answer = Message::DaemonResponse { id, response };
                        if write_frame(&mut writer, &answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_daemon_that_does_not_read_makes_callers_wait_then_fail() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accept = tokio::spawn(async move { listener.accept().await.map(|(s, _)| s) });
        let pool = DaemonPool::new(1 << 24, Duration::from_millis(20), Transport::plain());
        let conn = pool.conn(&addr).await.unwrap();
        let _held = accept.await.unwrap().unwrap();
        // Requests of 64 KiB each: 4096 of them (256 MiB) are far beyond
        // any socket buffer, so the queue must fill well before.
        let big = Value::str(&"x".repeat(64 << 10));
        let mut answers = Vec::new();
        let mut congested = None;
        for _ in 0..4096 {
            let request = DaemonRequest::Get {
                space: SpaceId(1),
                key: big.clone(),
                auth: Default::default(),
            };
            match conn
                .send(Epoch(1), request, Duration::from_millis(20))
                .await
            {
                Ok(answer) => answers.push(answer),
                Err(e) => {
                    congested = Some(e);
                    break;
                }
            }
        }
        assert!(
            matches!(congested, Some(ConnError::Congested { .. })),
            "{congested:?} after {} requests",
            answers.len()
        );
        // The full queue holds exactly its bound; the refused request left
        // nothing pending.
        assert_eq!(conn.frames.capacity(), 0);
        assert_eq!(lock(&conn.pending).len(), answers.len());
        drop(answers);
        assert!(lock(&conn.pending).is_empty());
    }

    #[tokio::test]
    async fn a_poisoned_lock_is_recovered() {
        let addr = answering_daemon().await;
        let pool = Arc::new(DaemonPool::new(
            1 << 20,
            Duration::from_secs(5),
            Transport::plain(),
        ));
        let mut answer = pool.request(&addr, Epoch(1), get(1)).await.unwrap();
        assert_eq!(answer.next().await.unwrap(), DaemonResponse::Done);
        // A thread that panics while holding both locks poisons them.
        let conn = pool.conn(&addr).await.unwrap();
        let poisoner = {
            let (pool, conn) = (pool.clone(), conn.clone());
            std::thread::spawn(move || {
                let _conns = pool.conns.lock().unwrap();
                let _pending = conn.pending.lock().unwrap();
                panic!("poisoning the pool's locks on purpose");
            })
        };
        assert!(poisoner.join().is_err());
        assert!(pool.conns.is_poisoned() && conn.pending.is_poisoned());
        let mut answer = pool.request(&addr, Epoch(1), get(2)).await.unwrap();
        assert_eq!(answer.next().await.unwrap(), DaemonResponse::Done);
        // The answer was taken: asking again is an error, not a panic.
        assert!(matches!(answer.next().await, Err(ConnError::Lost { .. })));
        pool.close_all();
    }
}
