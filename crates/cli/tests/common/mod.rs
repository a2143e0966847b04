//! Helpers of the multi-process tests: free ports, server processes of the
//! real `tessera` binary that are always killed, and bounded waits.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tessera_client::{BlockingAdmin, Configuration, Epoch};
use tessera_types::DaemonState;

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// A port on 127.0.0.1 that was free a moment ago, never the same twice
/// in one test process.
///
/// It is taken below the kernel's ephemeral range (32768–60999 by
/// default), where `bind(0)` would pick one: a port from that range can
/// be taken as the local end of some outgoing connection between this
/// check and the server's own bind, and the server then fails with
/// "Address already in use" (seen once in CI's gray-failure test).
/// Outgoing connections never take a port below the range.
pub fn free_port() -> u16 {
    use std::collections::BTreeSet;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::Mutex;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let low = ephemeral_low();
    const FIRST: u16 = 10_000;
    if low > FIRST + 1000 {
        let span = u64::from(low - FIRST);
        // A random start, so that test processes running at once rarely
        // try the same ports.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let start = hasher.finish() % span;
        for i in 0..span {
            let port = FIRST + ((start + i) % span) as u16;
            if !given.contains(&port) && ports_free([port]) {
                given.insert(port);
                return port;
            }
        }
    }
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind 127.0.0.1:0");
        if given.insert(port) {
            return port;
        }
    }
}

/// The first port of the kernel's ephemeral range (Linux's
/// `ip_local_port_range`; 32768 when it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Whether every port of `ports` can be bound on 127.0.0.1 now.
pub fn ports_free(ports: impl IntoIterator<Item = u16>) -> bool {
    ports
        .into_iter()
        .all(|p| TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], p))).is_ok())
}

/// Calls `condition` until it returns `Some`, or panics with `what` after
/// `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut condition: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = condition() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One child process with its log file.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// The last `lines` lines of the process's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut tail: Vec<&str> = text.lines().rev().take(lines).collect();
        tail.reverse();
        tail.join("\n")
    }
}

/// Server processes that are killed (SIGKILL, by PID) when the guard drops,
/// also when a test fails. On failure their logs are printed.
#[derive(Default)]
pub struct Procs {
    pub procs: Vec<Proc>,
}

impl Procs {
    /// Starts `tessera ARGS`, stdout and stderr appended to `log`.
    pub fn spawn(&mut self, name: &str, args: &[String], log: &Path) -> u32 {
        self.spawn_with_env(name, args, log, &[])
    }

    /// [`Procs::spawn`] with extra environment variables for this process
    /// only (fault injection, for instance).
    pub fn spawn_with_env(
        &mut self,
        name: &str,
        args: &[String],
        log: &Path,
        env: &[(&str, String)],
    ) -> u32 {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log");
        let err = out.try_clone().expect("clone log");
        let child = Command::new(TESSERA)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("TESSERA_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn tessera");
        let pid = child.id();
        self.procs.push(Proc {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        });
        pid
    }

    /// Kills every process with SIGKILL and reaps it.
    pub fn kill_all(&mut self) {
        for proc in &mut self.procs {
            let _ = proc.child.kill();
            let _ = proc.child.wait();
        }
        self.procs.clear();
    }

    /// Kills one process by name with SIGKILL and reaps it.
    pub fn kill(&mut self, name: &str) {
        let index = self
            .procs
            .iter()
            .position(|p| p.name == name)
            .expect("no such process");
        let mut proc = self.procs.remove(index);
        let _ = proc.child.kill();
        let _ = proc.child.wait();
    }

    fn print_logs(&self) {
        for proc in &self.procs {
            eprintln!(
                "----- {} ({}) last lines -----",
                proc.name,
                proc.log.display()
            );
            eprintln!("{}", proc.log_tail(40));
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
        self.kill_all();
    }
}

/// Sends SIGTERM to `pid`.
pub fn sigterm(pid: u32) {
    signal(pid, "-TERM");
}

/// Sends `signal` (`-TERM`, `-STOP` …) to `pid` with `kill`.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// Waits for `child` to exit within `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    wait_for("a process to exit", timeout, || {
        child.try_wait().expect("try_wait")
    })
}

/// The arguments of `tessera coordinator` or `tessera daemon` listening on
/// 127.0.0.1:`port`, advertising `advertise` when given, keeping its state
/// in `data`.
fn server_args(kind: &str, port: u16, advertise: Option<String>, data: &Path) -> Vec<String> {
    let mut args = vec![
        kind.to_string(),
        "--listen".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--data".into(),
        data.display().to_string(),
    ];
    if let Some(addr) = advertise {
        args.extend(["--advertise".to_string(), addr]);
    }
    if kind == "daemon" {
        // Test data is small: fjall's own default block cache is plenty,
        // and many test daemons run at once.
        args.extend(["--cache-mib".to_string(), "32".to_string()]);
    }
    args
}

/// A coordinator and daemons as separate processes, with their data under
/// one temporary directory.
pub struct Cluster {
    // Declared first: the processes die before their directory goes.
    pub procs: Procs,
    pub dir: tempfile::TempDir,
    pub coordinator_ports: Vec<u16>,
    pub daemon_ports: Vec<u16>,
    /// Flags every coordinator member and every daemon is started with,
    /// besides the usual ones.
    pub coordinator_flags: Vec<String>,
    pub daemon_flags: Vec<String>,
}

impl Cluster {
    /// One coordinator and `daemons` daemons, started and registered.
    pub fn start(daemons: usize) -> Cluster {
        Cluster::start_with(daemons, &[], &[])
    }

    /// [`Cluster::start`], each coordinator member and daemon started with
    /// these extra flags (now and on every restart).
    pub fn start_with(
        daemons: usize,
        coordinator_flags: &[&str],
        daemon_flags: &[&str],
    ) -> Cluster {
        let cluster = Cluster::launch(daemons, coordinator_flags, daemon_flags);
        cluster.wait_daemons_available(Duration::from_secs(60));
        cluster
    }

    /// [`Cluster::start_with`] without waiting for the daemons (a test
    /// that must wait through another admin handle, over TLS say).
    pub fn launch(daemons: usize, coordinator_flags: &[&str], daemon_flags: &[&str]) -> Cluster {
        let owned = |flags: &[&str]| flags.iter().map(|f| f.to_string()).collect();
        let mut cluster = Cluster {
            procs: Procs::default(),
            dir: tempfile::tempdir().expect("tempdir"),
            coordinator_ports: vec![free_port()],
            daemon_ports: (0..daemons).map(|_| free_port()).collect(),
            coordinator_flags: owned(coordinator_flags),
            daemon_flags: owned(daemon_flags),
        };
        cluster.start_coordinator(0, None);
        for i in 0..daemons {
            cluster.start_daemon(i);
        }
        cluster
    }

    pub fn coordinator_addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.coordinator_ports[i])
    }

    pub fn coordinator_addrs(&self) -> Vec<String> {
        (0..self.coordinator_ports.len())
            .map(|i| self.coordinator_addr(i))
            .collect()
    }

    pub fn daemon_addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.daemon_ports[i])
    }

    /// Starts coordinator member `i` (its port must be in
    /// `coordinator_ports`), joining `join` when given.
    pub fn start_coordinator(&mut self, i: usize, join: Option<String>) {
        let data = self.dir.path().join(format!("coordinator-{i}"));
        let mut args = server_args("coordinator", self.coordinator_ports[i], None, &data);
        args.extend(self.coordinator_flags.iter().cloned());
        if let Some(join) = join {
            args.extend(["--join".to_string(), join]);
        }
        let log = self.dir.path().join(format!("coordinator-{i}.log"));
        self.procs.spawn(&format!("coordinator-{i}"), &args, &log);
    }

    /// Starts daemon `i` against coordinator member 0.
    pub fn start_daemon(&mut self, i: usize) {
        self.start_daemon_with_env(i, &[]);
    }

    /// Starts daemon `i` with extra environment variables.
    pub fn start_daemon_with_env(&mut self, i: usize, env: &[(&str, String)]) {
        let data = self.dir.path().join(format!("daemon-{i}"));
        let mut args = server_args("daemon", self.daemon_ports[i], None, &data);
        args.extend(["--coordinator".to_string(), self.coordinator_addr(0)]);
        args.extend(self.daemon_flags.iter().cloned());
        let log = self.dir.path().join(format!("daemon-{i}.log"));
        self.procs
            .spawn_with_env(&format!("daemon-{i}"), &args, &log, env);
    }

    /// An admin handle over every coordinator member.
    pub fn admin(&self) -> BlockingAdmin {
        BlockingAdmin::new(&self.coordinator_addr(0)).expect("admin")
    }

    /// Waits until every daemon of this cluster is available in the
    /// configuration; returns that configuration.
    pub fn wait_daemons_available(&self, timeout: Duration) -> Configuration {
        self.wait_daemons_available_with(&self.admin(), timeout)
    }

    /// [`Cluster::wait_daemons_available`] through `admin` (one over TLS,
    /// say).
    pub fn wait_daemons_available_with(
        &self,
        admin: &BlockingAdmin,
        timeout: Duration,
    ) -> Configuration {
        let addrs: Vec<String> = (0..self.daemon_ports.len())
            .map(|i| self.daemon_addr(i))
            .collect();
        wait_for("every daemon to be available", timeout, || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let all = addrs.iter().all(|addr| {
                config
                    .daemons
                    .values()
                    .any(|d| &d.addr == addr && d.state == DaemonState::Available)
            });
            all.then_some(config)
        })
    }
}

/// `tessera ARGS --host H --port P` against `coordinator` (`H:P`) within
/// 60 s; panics with its stderr when it fails; returns its stdout.
pub fn cli_at(args: &[&str], coordinator: &str) -> String {
    let (host, port) = coordinator.split_once(':').expect("host:port");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--host", host, "--port", port]);
    let (ok, out, err) = run_cli(&all, None, Duration::from_secs(60));
    assert!(ok, "tessera {args:?} failed: {err}");
    out
}

/// Runs `tessera ARGS --port P` against the cluster's first coordinator
/// member and returns its standard output; fails the test if it fails.
pub fn cli_ok(cluster: &Cluster, args: &[&str]) -> String {
    let mut full: Vec<&str> = args.to_vec();
    let port = cluster.coordinator_ports[0].to_string();
    full.extend(["--port", &port]);
    let (ok, out, err) = run_cli(&full, None, Duration::from_secs(60));
    assert!(ok, "tessera {args:?} failed: {err}");
    out
}

/// Runs `tessera ARGS` to completion within `timeout`; returns (exit
/// success, stdout, stderr).
pub fn run_cli(args: &[&str], stdin: Option<&str>, timeout: Duration) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(TESSERA)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tessera");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    // Read the pipes on threads so that a full pipe cannot block the child.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tessera {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.success(),
        out_thread.join().unwrap_or_default(),
        err_thread.join().unwrap_or_default(),
    )
}

pub mod history;
pub mod proxy;

/// One server of a [`ProxiedCluster`]: the port it listens on, the proxy
/// that everyone else dials, and its process id while it runs.
pub struct Server {
    pub name: String,
    pub port: u16,
    pub proxy: proxy::Proxy,
    pub pid: Option<u32>,
}

impl Server {
    /// The advertised address: the proxy's.
    pub fn addr(&self) -> String {
        self.proxy.addr()
    }
}

/// Coordinator members and daemons as processes, each behind a proxy of
/// one [`proxy::Network`], so that tests can cut one off the network,
/// drop answers, and kill -9 and restart any of them on the same ports.
pub struct ProxiedCluster {
    // Declared first: the processes die before their directory goes.
    pub procs: Procs,
    pub dir: tempfile::TempDir,
    pub net: proxy::Network,
    pub coordinators: Vec<Server>,
    pub daemons: Vec<Server>,
}

impl ProxiedCluster {
    /// `coordinators` members (the first starts the group, the others join
    /// it) and `daemons` daemons, all registered and available.
    pub fn start(coordinators: usize, daemons: usize) -> ProxiedCluster {
        let net = proxy::Network::default();
        let server = |name: String| {
            let port = free_port();
            Server {
                name,
                port,
                proxy: net.proxy(port),
                pid: None,
            }
        };
        let mut cluster = ProxiedCluster {
            procs: Procs::default(),
            dir: tempfile::tempdir().expect("tempdir"),
            coordinators: (0..coordinators)
                .map(|i| server(format!("coordinator-{i}")))
                .collect(),
            daemons: (0..daemons)
                .map(|i| server(format!("daemon-{i}")))
                .collect(),
            net,
        };
        cluster.start_coordinator(0);
        let first = BlockingAdmin::new(&cluster.coordinators[0].addr()).expect("admin");
        wait_for(
            "the first coordinator to serve",
            Duration::from_secs(30),
            || first.config().ok(),
        );
        for i in 1..coordinators {
            cluster.start_coordinator(i);
        }
        wait_for(
            "every coordinator member to vote",
            Duration::from_secs(60),
            || {
                let status = first.coordinator_status().ok()?;
                (status.voters.len() == coordinators).then_some(())
            },
        );
        for i in 0..daemons {
            cluster.start_daemon(i);
        }
        cluster.wait_daemons_available(Duration::from_secs(60));
        cluster
    }

    pub fn coordinator_addrs(&self) -> Vec<String> {
        self.coordinators.iter().map(Server::addr).collect()
    }

    /// Starts (or restarts, from its data directory) coordinator member `i`;
    /// members other than the first join the first at their first start.
    pub fn start_coordinator(&mut self, i: usize) {
        let server = &self.coordinators[i];
        let data = self.dir.path().join(&server.name);
        let mut args = server_args("coordinator", server.port, Some(server.addr()), &data);
        if i > 0 {
            args.extend(["--join".to_string(), self.coordinators[0].addr()]);
        }
        let log = self.dir.path().join(format!("{}.log", server.name));
        let name = server.name.clone();
        let pid = self.procs.spawn(&name, &args, &log);
        self.coordinators[i].pid = Some(pid);
    }

    /// Starts (or restarts, from its data directory) daemon `i`.
    pub fn start_daemon(&mut self, i: usize) {
        let server = &self.daemons[i];
        let data = self.dir.path().join(&server.name);
        let mut args = server_args("daemon", server.port, Some(server.addr()), &data);
        args.extend([
            "--coordinator".to_string(),
            self.coordinators[i % self.coordinators.len()].addr(),
        ]);
        let log = self.dir.path().join(format!("{}.log", server.name));
        let name = server.name.clone();
        let pid = self.procs.spawn(&name, &args, &log);
        self.net.track(pid);
        self.daemons[i].pid = Some(pid);
    }

    /// Kills daemon `i` with SIGKILL.
    pub fn kill_daemon(&mut self, i: usize) {
        let name = self.daemons[i].name.clone();
        self.procs.kill(&name);
        if let Some(pid) = self.daemons[i].pid.take() {
            self.net.untrack(pid);
        }
    }

    /// Kills coordinator member `i` with SIGKILL.
    pub fn kill_coordinator(&mut self, i: usize) {
        let name = self.coordinators[i].name.clone();
        self.procs.kill(&name);
        self.coordinators[i].pid = None;
    }

    /// Stops daemon `i` with SIGSTOP (a process pause: it neither sends
    /// nor answers, and wakes up later with a stale view), or resumes it.
    pub fn pause_daemon(&self, i: usize, paused: bool) {
        let pid = self.daemons[i].pid.expect("daemon running");
        signal(pid, if paused { "-STOP" } else { "-CONT" });
    }

    /// Stops coordinator member `i` with SIGSTOP, or resumes it.
    pub fn pause_coordinator(&self, i: usize, paused: bool) {
        let pid = self.coordinators[i].pid.expect("coordinator running");
        signal(pid, if paused { "-STOP" } else { "-CONT" });
    }

    /// The index of the coordinator member that leads now, waiting up to
    /// `timeout` for one.
    pub fn leader_index(&self, admin: &BlockingAdmin, timeout: Duration) -> usize {
        wait_for("a coordinator leader", timeout, || {
            let addr = admin.coordinator_status().ok()?.leader_addr?;
            self.coordinators.iter().position(|c| c.addr() == addr)
        })
    }

    /// Cuts daemon `i` off the network (both directions, coordinator too).
    pub fn isolate_daemon(&self, i: usize) {
        let server = &self.daemons[i];
        self.net
            .isolate(&server.proxy, server.pid.expect("daemon running"));
    }

    /// Cuts daemon `i` off the coordinator members only, or reconnects it.
    pub fn cut_daemon_from_coordinators(&self, i: usize, cut: bool) {
        let pid = self.daemons[i].pid.expect("daemon running");
        let proxies: Vec<&proxy::Proxy> = self.coordinators.iter().map(|c| &c.proxy).collect();
        if cut {
            self.net.block(pid, &proxies);
        } else {
            self.net.unblock(pid, &proxies);
        }
    }

    pub fn heal_daemon(&self, i: usize) {
        let server = &self.daemons[i];
        self.net
            .heal(&server.proxy, server.pid.expect("daemon running"));
    }

    /// An admin handle over every coordinator member.
    pub fn admin(&self) -> BlockingAdmin {
        BlockingAdmin::with_members(self.coordinator_addrs(), Duration::from_secs(60))
            .expect("admin")
    }

    /// The id daemon `i` registered under, from its advertised address.
    pub fn daemon_id(&self, config: &Configuration, i: usize) -> Option<tessera_types::DaemonId> {
        let addr = self.daemons[i].addr();
        config
            .daemons
            .values()
            .find(|d| d.addr == addr)
            .map(|d| d.id)
    }

    /// Why the cluster is not settled, or `None` when it is: every daemon
    /// available, every available daemon on the newest epoch, no transfer
    /// running, and every region with f + 1 replicas.
    pub fn unsettled(&self, admin: &BlockingAdmin) -> Option<String> {
        let config = match admin.config() {
            Ok(config) => config,
            Err(e) => return Some(format!("no configuration: {e}")),
        };
        for i in 0..self.daemons.len() {
            let Some(id) = self.daemon_id(&config, i) else {
                return Some(format!("daemon {i} is not registered"));
            };
            if config.daemons[&id].state != DaemonState::Available {
                return Some(format!(
                    "daemon {i} ({id}) is {:?}",
                    config.daemons[&id].state
                ));
            }
        }
        match admin.stability() {
            Ok(stability) if stability.stable => {}
            Ok(stability) => return Some(format!("{stability:?}")),
            Err(e) => return Some(format!("no stability answer: {e}")),
        }
        // Read again: the configuration may have changed while stability
        // was asked.
        let config = match admin.config() {
            Ok(config) => config,
            Err(e) => return Some(format!("no configuration: {e}")),
        };
        for space in &config.spaces {
            let replicas = space.desc.fault_tolerance as usize + 1;
            for layout in &space.subspaces {
                for region in &layout.regions {
                    if region.chain.len() != replicas {
                        return Some(format!("region {} has chain {:?}", region.id, region.chain));
                    }
                }
            }
        }
        None
    }

    /// Waits until every daemon is available; returns that configuration.
    pub fn wait_daemons_available(&self, timeout: Duration) -> Configuration {
        let admin = self.admin();
        wait_for("every daemon to be available", timeout, || {
            let config = admin.config().ok()?;
            let all = (0..self.daemons.len()).all(|i| {
                self.daemon_id(&config, i)
                    .is_some_and(|id| config.daemons[&id].state == DaemonState::Available)
            });
            all.then_some(config)
        })
    }
}

impl Drop for ProxiedCluster {
    fn drop(&mut self) {
        self.net.shutdown();
    }
}
