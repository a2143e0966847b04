//! A fault-injecting TCP proxy on 127.0.0.1, for cutting a server off the
//! network without touching its code.
//!
//! Every server of a test cluster listens on a private port and advertises
//! (`--advertise`) the port of its proxy, so every connection to it — from
//! clients, peers, coordinator members — passes a [`Proxy`]. The proxies
//! of one [`Network`] share what is cut:
//!
//! ```text
//!   client ──▶ proxy(d1) ──▶ d1          isolate(d1):
//!   d2 ──────▶ proxy(d1) ──▶ d1            proxy(d1) holds new connections
//!   d1 ──────▶ proxy(d2) ──▶ d2            without forwarding (a black hole)
//!   d1 ──────▶ proxy(c0) ──▶ c0            and closes live ones; every other
//!                                          proxy does the same to connections
//!                                          that d1's process opened
//! ```
//!
//! Outgoing connections are told apart by the process that owns their
//! source socket (found in `/proc/net/tcp` and `/proc/PID/fd`), so a cut is
//! a real partition in both directions: the daemon neither hears from nor
//! reaches anyone, including the coordinator. Linux only.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A set of proxies that share which processes are cut off.
#[derive(Clone, Default)]
pub struct Network {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Processes whose outgoing connections the proxies attribute.
    tracked: Mutex<HashSet<u32>>,
    /// Processes cut off the network.
    isolated: Mutex<HashSet<u32>>,
    /// Live forwarded connections.
    links: Mutex<Vec<Link>>,
    /// Connections accepted and deliberately never forwarded.
    held: Mutex<Vec<TcpStream>>,
    stop: AtomicBool,
    /// Connections closed by a cut, and connections held.
    links_cut: AtomicU64,
    connections_held: AtomicU64,
}

struct Link {
    proxy: u16,
    source: Option<u32>,
    inbound: TcpStream,
    outbound: TcpStream,
}

impl Link {
    fn close(&self) {
        let _ = self.inbound.shutdown(Shutdown::Both);
        let _ = self.outbound.shutdown(Shutdown::Both);
    }
}

/// One proxy: connections to `port` go on to the target port. Clones
/// control the same proxy.
#[derive(Clone)]
pub struct Proxy {
    pub port: u16,
    state: Arc<ProxyState>,
}

struct ProxyState {
    target: u16,
    /// Cut off: new connections are held, none are forwarded.
    cut: AtomicBool,
    /// Processes whose connections through this proxy alone are cut.
    blocked: Mutex<HashSet<u32>>,
    /// While positive, the next answer bytes from the target are dropped
    /// and their connection closed, one connection per unit.
    drop_replies: AtomicU64,
    replies_dropped: AtomicU64,
}

impl Network {
    /// Attributes connections opened by process `pid` (a daemon), so that
    /// [`Network::isolate`] can cut them.
    pub fn track(&self, pid: u32) {
        self.shared.tracked.lock().unwrap().insert(pid);
    }

    /// Forgets a process that exited.
    pub fn untrack(&self, pid: u32) {
        self.shared.tracked.lock().unwrap().remove(&pid);
        self.shared.isolated.lock().unwrap().remove(&pid);
    }

    /// Starts a proxy on a free port of 127.0.0.1 forwarding to `target`.
    pub fn proxy(&self, target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a proxy port");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ProxyState {
            target,
            cut: AtomicBool::new(false),
            blocked: Mutex::new(HashSet::new()),
            drop_replies: AtomicU64::new(0),
            replies_dropped: AtomicU64::new(0),
        });
        let (shared, proxy_state) = (self.shared.clone(), state.clone());
        std::thread::spawn(move || accept_loop(listener, port, shared, proxy_state));
        Proxy { port, state }
    }

    /// Cuts process `pid`, reached through `proxy`, off the network: its
    /// live connections in both directions close, new ones go nowhere.
    pub fn isolate(&self, proxy: &Proxy, pid: u32) {
        proxy.state.cut.store(true, Ordering::SeqCst);
        self.shared.isolated.lock().unwrap().insert(pid);
        self.cut_links(|link| link.proxy == proxy.port || link.source == Some(pid));
    }

    /// Cuts only the connections process `pid` opens through `proxies`
    /// (e.g. a daemon from the coordinator members, while it still reaches
    /// its peers and they it): a partial partition.
    pub fn block(&self, pid: u32, proxies: &[&Proxy]) {
        for proxy in proxies {
            proxy.state.blocked.lock().unwrap().insert(pid);
        }
        let ports: HashSet<u16> = proxies.iter().map(|p| p.port).collect();
        self.cut_links(|link| link.source == Some(pid) && ports.contains(&link.proxy));
    }

    /// Undoes [`Network::block`]; held connections close.
    pub fn unblock(&self, pid: u32, proxies: &[&Proxy]) {
        for proxy in proxies {
            proxy.state.blocked.lock().unwrap().remove(&pid);
        }
        self.close_held();
    }

    /// Reconnects what [`Network::isolate`] cut; held connections close.
    pub fn heal(&self, proxy: &Proxy, pid: u32) {
        self.shared.isolated.lock().unwrap().remove(&pid);
        proxy.state.cut.store(false, Ordering::SeqCst);
        self.close_held();
    }

    /// Cuts what reaches the server behind `proxy`, not what it sends: its
    /// live inbound connections close and new ones are held. Weaker than
    /// dropping packets (a held connection is accepted and its data
    /// acknowledged), for tests that cannot use a firewall.
    pub fn cut_inbound(&self, proxy: &Proxy) {
        proxy.state.cut.store(true, Ordering::SeqCst);
        self.cut_links(|link| link.proxy == proxy.port);
    }

    /// Undoes [`Network::cut_inbound`]; held connections close.
    pub fn heal_inbound(&self, proxy: &Proxy) {
        proxy.state.cut.store(false, Ordering::SeqCst);
        self.close_held();
    }

    /// Closes and forgets the live connections that `cut` selects.
    fn cut_links(&self, cut: impl Fn(&Link) -> bool) {
        self.shared.links.lock().unwrap().retain(|link| {
            let cut = cut(link);
            if cut {
                link.close();
                self.shared.links_cut.fetch_add(1, Ordering::Relaxed);
            }
            !cut
        });
    }

    /// Closes every connection held by a cut.
    fn close_held(&self) {
        for stream in self.shared.held.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// (connections closed by cuts, connections held by cuts).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.shared.links_cut.load(Ordering::Relaxed),
            self.shared.connections_held.load(Ordering::Relaxed),
        )
    }

    /// Stops every proxy of this network and closes their connections.
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for link in self.shared.links.lock().unwrap().drain(..) {
            link.close();
        }
        self.shared.held.lock().unwrap().clear();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Proxy {
    /// `host:port` of the proxy.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Drops the next `n` answers that come back through this proxy (each
    /// closes its connection): the request arrived, its answer never does.
    pub fn drop_next_replies(&self, n: u64) {
        self.state.drop_replies.store(n, Ordering::SeqCst);
    }

    /// How many answers were dropped so far.
    pub fn replies_dropped(&self) -> u64 {
        self.state.replies_dropped.load(Ordering::SeqCst)
    }
}

fn accept_loop(listener: TcpListener, port: u16, shared: Arc<Shared>, state: Arc<ProxyState>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let (inbound, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(_) => continue,
        };
        let _ = inbound.set_nonblocking(false);
        let source = source_process(&shared, peer, port);
        let isolated = source.is_some_and(|pid| {
            shared.isolated.lock().unwrap().contains(&pid)
                || state.blocked.lock().unwrap().contains(&pid)
        });
        if state.cut.load(Ordering::SeqCst) || isolated {
            shared.connections_held.fetch_add(1, Ordering::Relaxed);
            shared.held.lock().unwrap().push(inbound);
            continue;
        }
        let target = SocketAddr::from(([127, 0, 0, 1], state.target));
        let Ok(outbound) = TcpStream::connect_timeout(&target, Duration::from_secs(1)) else {
            continue; // the server is down: the caller sees the connection close
        };
        let _ = inbound.set_nodelay(true);
        let _ = outbound.set_nodelay(true);
        let (Ok(in_read), Ok(out_write), Ok(out_read), Ok(in_write)) = (
            inbound.try_clone(),
            outbound.try_clone(),
            outbound.try_clone(),
            inbound.try_clone(),
        ) else {
            continue;
        };
        shared.links.lock().unwrap().push(Link {
            proxy: port,
            source,
            inbound,
            outbound,
        });
        std::thread::spawn(move || copy(in_read, out_write, None));
        let state = state.clone();
        std::thread::spawn(move || copy(out_read, in_write, Some(state)));
        // Forget links whose streams both sides closed long ago.
        if shared.links.lock().unwrap().len() > 256 {
            shared
                .links
                .lock()
                .unwrap()
                .retain(|l| l.inbound.peer_addr().is_ok() && l.outbound.peer_addr().is_ok());
        }
    }
}

/// Copies bytes until either side closes. On the answer direction
/// (`replies` given) it honours [`Proxy::drop_next_replies`].
fn copy(mut from: TcpStream, mut to: TcpStream, replies: Option<Arc<ProxyState>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(state) = &replies {
            let armed = state
                .drop_replies
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if armed {
                state.replies_dropped.fetch_add(1, Ordering::SeqCst);
                break;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// The tracked process that owns the socket at `peer` connected to the
/// proxy on `port`, if any.
fn source_process(shared: &Shared, peer: SocketAddr, port: u16) -> Option<u32> {
    let tracked: Vec<u32> = shared.tracked.lock().unwrap().iter().copied().collect();
    if tracked.is_empty() {
        return None;
    }
    let inode = socket_inode(peer.port(), port)?;
    let link = format!("socket:[{inode}]");
    tracked.into_iter().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|dir| {
                dir.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| target.as_os_str() == link.as_str())
                })
            })
            .unwrap_or(false)
    })
}

/// The inode of the IPv4 socket 127.0.0.1:`local` connected to port `remote`.
fn socket_inode(local: u16, remote: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!("0100007F:{local:04X}");
    let remote = format!("0100007F:{remote:04X}");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() > 9 && fields[1] == local && fields[2] == remote)
            .then(|| fields[9].parse().ok())
            .flatten()
    })
}
