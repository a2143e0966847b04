//! One multiplexed TCP connection per daemon.
//!
//! ```text
//!  callers ──request(id)──▶ writer task ──frames──▶ daemon
//!     ▲                                              │
//!     └── per-id channel ◀── reader task ◀──frames───┘
//! ```
//!
//! Every request gets a fresh id and a channel; the reader task routes the
//! response frame to the channel of its id (one response per request: a
//! search is paged by separate requests). When the connection fails, every pending channel is
//! closed, so each waiting caller learns that its answer will never come;
//! the next request to that daemon opens a new connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_protocol::frame::encode;
use tessera_protocol::{read_frame, DaemonRequest, DaemonResponse, Message};
use tessera_types::Epoch;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

type Pending = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<DaemonResponse>>>>;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    /// Nothing was sent: the connection could not be opened.
    #[error("cannot connect to daemon {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The request may have been sent, but the connection failed before the
    /// whole answer arrived.
    #[error("connection to daemon {addr} failed")]
    Lost { addr: String },
    /// The request does not fit in one frame.
    #[error("request of {len} bytes exceeds the frame maximum of {max} bytes")]
    TooLarge { len: usize, max: usize },
}

/// The connections of one client, by daemon address.
#[derive(Debug)]
pub(crate) struct DaemonPool {
    conns: Mutex<HashMap<String, Arc<DaemonConn>>>,
    frame_bytes_max: usize,
    connect_timeout: Duration,
}

impl DaemonPool {
    pub(crate) fn new(frame_bytes_max: usize, connect_timeout: Duration) -> DaemonPool {
        DaemonPool {
            conns: Mutex::new(HashMap::new()),
            frame_bytes_max,
            connect_timeout,
        }
    }

    /// Sends `request` to the daemon at `addr` and returns the channel its
    /// answer frames arrive on.
    pub(crate) async fn request(
        &self,
        addr: &str,
        epoch: Epoch,
        request: DaemonRequest,
    ) -> Result<Answer, ConnError> {
        let conn = self.conn(addr).await?;
        conn.send(epoch, request)
    }

    /// A live connection to `addr`, opening one when there is none.
    async fn conn(&self, addr: &str) -> Result<Arc<DaemonConn>, ConnError> {
        if let Some(conn) = self.conns.lock().expect("pool lock").get(addr) {
            if !conn.closed.load(Ordering::Acquire) {
                return Ok(conn.clone());
            }
        }
        let connect_error = |reason: String| ConnError::Connect {
            addr: addr.to_string(),
            reason,
        };
        let stream = tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| connect_error("timed out".to_string()))?
            .map_err(|e| connect_error(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let conn = DaemonConn::start(addr.to_string(), stream, self.frame_bytes_max);
        let mut conns = self.conns.lock().expect("pool lock");
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
        for (_, conn) in self.conns.lock().expect("pool lock").drain() {
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
    frames: mpsc::UnboundedSender<Vec<u8>>,
    closed: Arc<AtomicBool>,
    frame_bytes_max: usize,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl DaemonConn {
    fn start(addr: String, stream: TcpStream, frame_bytes_max: usize) -> Arc<DaemonConn> {
        let (mut read_half, mut write_half) = stream.into_split();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let closed = Arc::new(AtomicBool::new(false));
        let (frames, mut frames_rx) = mpsc::unbounded_channel::<Vec<u8>>();

        let fail = {
            let pending = pending.clone();
            let closed = closed.clone();
            move || {
                closed.store(true, Ordering::Release);
                // Dropping the senders tells every waiting caller.
                pending.lock().expect("pending lock").clear();
            }
        };

        let writer = {
            let fail = fail.clone();
            let addr = addr.clone();
            tokio::spawn(async move {
                while let Some(frame) = frames_rx.recv().await {
                    if let Err(e) = write_half.write_all(&frame).await {
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
                    match read_frame(&mut read_half, frame_bytes_max).await {
                        Ok(Message::DaemonResponse { id, response }) => {
                            // One response per request.
                            let sender = pending.lock().expect("pending lock").remove(&id);
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

    fn send(self: &Arc<Self>, epoch: Epoch, request: DaemonRequest) -> Result<Answer, ConnError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = encode(&Message::DaemonRequest { id, epoch, request });
        if frame.len() - 4 > self.frame_bytes_max {
            return Err(ConnError::TooLarge {
                len: frame.len() - 4,
                max: self.frame_bytes_max,
            });
        }
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            // Checked under the lock: `fail` sets `closed` before it clears.
            if self.closed.load(Ordering::Acquire) {
                return Err(ConnError::Lost {
                    addr: self.addr.clone(),
                });
            }
            pending.insert(id, tx);
        }
        if self.frames.send(frame).is_err() {
            self.pending.lock().expect("pending lock").remove(&id);
            return Err(ConnError::Lost {
                addr: self.addr.clone(),
            });
        }
        Ok(Answer {
            id,
            rx,
            conn: self.clone(),
        })
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for task in self.tasks.lock().expect("tasks lock").drain(..) {
            task.abort();
        }
        self.pending.lock().expect("pending lock").clear();
    }
}

/// The answer frames of one request. Dropping it forgets the request.
#[derive(Debug)]
pub(crate) struct Answer {
    id: u64,
    rx: mpsc::UnboundedReceiver<DaemonResponse>,
    conn: Arc<DaemonConn>,
}

impl Answer {
    /// The next answer frame, or `Lost` when the connection failed first.
    pub(crate) async fn next(&mut self) -> Result<DaemonResponse, ConnError> {
        self.rx.recv().await.ok_or_else(|| ConnError::Lost {
            addr: self.conn.addr.clone(),
        })
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.conn
            .pending
            .lock()
            .expect("pending lock")
            .remove(&self.id);
    }
}
