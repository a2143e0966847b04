//! Starting and stopping the baseline servers: each on 127.0.0.1 with its
//! data in a directory of ours, each stopped by its process id.
//!
//! Durability, stated next to Tessera's (each daemon writes a committed
//! update to the OS before acknowledging it and fsyncs every 200 ms; an
//! update is acknowledged once every replica of every subspace holds it):
//!
//! - Redis: `appendonly yes`, `appendfsync everysec` (the AOF reaches the
//!   OS per write and is fsynced once a second); one process, no replica.
//! - etcd: its default — every Raft entry is fsynced before the put is
//!   acknowledged; a one-member cluster (`etcd`) and a three-member one
//!   (`etcd-3`, tolerating one failure like Tessera's `f = 1`, where a
//!   majority fsyncs each entry).
//! - PostgreSQL: `synchronous_commit = off` (the WAL is written by the WAL
//!   writer and fsynced within `3 × wal_writer_delay` = 600 ms),
//!   `fsync = on`; one server, no standby.
//! - HyperDex 1.8: a coordinator and 3 daemons, the space tolerating one
//!   failure (2 replicas per region); an update is acknowledged once every
//!   replica of every subspace holds it, written to HyperLevelDB with
//!   `sync = false` (no fsync per write).
//!
//! HyperDex is installed from `../shared/baselines/hyperdex` (or
//! `$TESSERA_HYPERDEX_BASELINE`) when missing, and its cluster is started
//! and stopped by that directory's `start_cluster.sh`.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server we started: one process, or a HyperDex cluster.
pub struct Server {
    pub name: &'static str,
    pub addr: String,
    process: Option<Process>,
    /// What the server promises about acknowledged writes.
    pub durability: &'static str,
}

/// What [`Server::stop`] stops.
enum Process {
    /// One child process of ours.
    Child(Child),
    /// Child processes of ours (an etcd cluster's members).
    Children(Vec<Child>),
    /// The processes `start_cluster.sh` started (coordinator first), which
    /// the same script stops: daemons first, then the coordinator.
    Hyperdex(HyperdexCluster),
}

/// A running HyperDex cluster.
pub struct HyperdexCluster {
    /// The installation's prefix (`bin/`, `lib/`, `env.sh`).
    pub prefix: PathBuf,
    /// `start_cluster.sh`.
    script: PathBuf,
    /// What its READY line said.
    pub ready: Ready,
}

impl Server {
    /// Stops what we started: SIGTERM, up to 20 s, then SIGKILL.
    pub fn stop(&mut self) {
        match self.process.take() {
            Some(Process::Child(child)) => stop_child(child),
            Some(Process::Children(children)) => children.into_iter().for_each(stop_child),
            Some(Process::Hyperdex(cluster)) => cluster.stop(),
            None => {}
        }
    }

    /// The HyperDex cluster this server is, if it is one.
    pub fn hyperdex(&self) -> Option<&HyperdexCluster> {
        match &self.process {
            Some(Process::Hyperdex(cluster)) => Some(cluster),
            _ => None,
        }
    }
}

/// Sends SIGTERM to `child` and waits up to 20 s, then SIGKILL.
fn stop_child(mut child: Child) {
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The path of `name` on PATH, if any.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(dir.join(format!("{name}.log")))
        .with_context(|| format!("creating {name}.log"))
}

async fn wait_port(addr: &str, what: &str, child: &mut Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!("{what} exited at start ({status}); see its log");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{what} did not listen on {addr} within 30 s")
}

/// Starts `redis-server` on 127.0.0.1:`port` with its data in `dir`.
pub async fn start_redis(dir: &Path, port: u16) -> anyhow::Result<Server> {
    let bin = which("redis-server")
        .context("redis-server is not installed (scripts/bench-install-baselines)")?;
    std::fs::create_dir_all(dir)?;
    let log = log_file(dir, "redis")?;
    let mut child = Command::new(bin)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--dir"])
        .arg(dir)
        .args([
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting redis-server")?;
    let addr = format!("127.0.0.1:{port}");
    wait_port(&addr, "redis-server", &mut child).await?;
    Ok(Server {
        name: "redis",
        addr,
        process: Some(Process::Child(child)),
        durability: "appendonly yes, appendfsync everysec (fsync once a second), 1 copy",
    })
}

/// Starts an etcd cluster of `members` (1 or 3) on 127.0.0.1, member `i`
/// with clients on `port + 2i` and peers on `port + 2i + 1`, data in `dir`.
/// Three members tolerate one failure, as Tessera's `f = 1` spaces do; one
/// member is etcd's smallest (and fastest) deployment.
pub async fn start_etcd(dir: &Path, port: u16, members: u16) -> anyhow::Result<Server> {
    let bin = which("etcd").context("etcd is not installed (scripts/bench-install-baselines)")?;
    std::fs::create_dir_all(dir)?;
    let client_url = |i: u16| format!("http://127.0.0.1:{}", port + 2 * i);
    let peer_url = |i: u16| format!("http://127.0.0.1:{}", port + 2 * i + 1);
    let initial_cluster = (0..members)
        .map(|i| format!("m{i}={}", peer_url(i)))
        .collect::<Vec<_>>()
        .join(",");
    let addrs: Vec<String> = (0..members)
        .map(|i| format!("127.0.0.1:{}", port + 2 * i))
        .collect();
    // The server owns each member as it starts, so that an error below
    // stops the ones already running.
    let mut server = Server {
        name: if members == 1 { "etcd" } else { "etcd-3" },
        addr: addrs.join(","),
        process: Some(Process::Children(Vec::new())),
        durability: if members == 1 {
            "default: every Raft entry fsynced before the ack, 1 member"
        } else {
            "default: every Raft entry fsynced by a majority before the ack, 3 members (tolerates 1 failure)"
        },
    };
    let Some(Process::Children(children)) = server.process.as_mut() else {
        unreachable!("made just above")
    };
    for i in 0..members {
        let log = log_file(dir, &format!("etcd-m{i}"))?;
        children.push(
            Command::new(&bin)
                .arg("--name")
                .arg(format!("m{i}"))
                .arg("--data-dir")
                .arg(dir.join(format!("etcd-m{i}")))
                .arg("--listen-client-urls")
                .arg(client_url(i))
                .arg("--advertise-client-urls")
                .arg(client_url(i))
                .arg("--listen-peer-urls")
                .arg(peer_url(i))
                .arg("--initial-advertise-peer-urls")
                .arg(peer_url(i))
                .arg("--initial-cluster")
                .arg(&initial_cluster)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("starting etcd")?,
        );
    }
    for (child, addr) in children.iter_mut().zip(&addrs) {
        wait_port(addr, "etcd", child).await?;
    }
    // The ports open before the members have elected a leader; wait for a
    // put through every member.
    let deadline = Instant::now() + Duration::from_secs(30);
    for addr in &addrs {
        loop {
            let mut conn = crate::stores::etcd::HttpConn::connect(addr).await?;
            if let Ok((200, _)) = conn
                .post_json("/v3/kv/put", "{\"key\":\"cmVhZHk=\",\"value\":\"MQ==\"}")
                .await
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("etcd did not accept a put through {addr} within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(server)
}

/// The newest installed PostgreSQL server binaries directory.
fn postgres_bin_dir() -> anyhow::Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL is not installed (scripts/bench-install-baselines)")?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, p)| p.join("postgres").is_file())
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, p)| p)
        .context("no PostgreSQL server binaries under /usr/lib/postgresql")
}

fn id_of(flag: &str, user: &str) -> anyhow::Result<u32> {
    let out = Command::new("id").args([flag, user]).output()?;
    if !out.status.success() {
        bail!("no user {user}");
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

/// Starts PostgreSQL on 127.0.0.1:`port` with a fresh cluster in `dir`.
/// PostgreSQL refuses to run as root, so when we are root the server runs
/// as the `postgres` user.
pub async fn start_postgres(dir: &Path, port: u16) -> anyhow::Result<Server> {
    use std::os::unix::process::CommandExt;
    let bin = postgres_bin_dir()?;
    let data = dir.join("pgdata");
    std::fs::create_dir_all(dir)?;
    let running_as_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let ids = if running_as_root {
        let uid = id_of("-u", "postgres")?;
        let gid = id_of("-g", "postgres")?;
        let ok = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(dir)
            .status()?
            .success();
        if !ok {
            bail!("cannot hand {} to the postgres user", dir.display());
        }
        Some((uid, gid))
    } else {
        None
    };
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .current_dir(dir);
    if let Some((uid, gid)) = ids {
        initdb.uid(uid).gid(gid);
    }
    let out = initdb.output().context("running initdb")?;
    if !out.status.success() {
        bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let log = log_file(dir, "postgres")?;
    let mut server = Command::new(bin.join("postgres"));
    server
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()))
        .args([
            "-c",
            "synchronous_commit=off",
            "-c",
            "fsync=on",
            "-c",
            "shared_buffers=512MB",
            "-c",
            "max_connections=300",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .current_dir(dir);
    if let Some((uid, gid)) = ids {
        server.uid(uid).gid(gid);
    }
    let mut child = server.spawn().context("starting postgres")?;
    let addr = format!("127.0.0.1:{port}");
    wait_port(&addr, "postgres", &mut child).await?;
    let conninfo = postgres_conninfo(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("postgres did not accept connections within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Server {
        name: "postgres",
        addr,
        process: Some(Process::Child(child)),
        durability: "synchronous_commit=off, fsync=on (WAL fsynced within 600 ms), 1 copy",
    })
}

/// How to reach a server started by [`start_postgres`].
pub fn postgres_conninfo(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=postgres dbname=postgres")
}

/// The environment variable naming the HyperDex baseline directory (the
/// one with `install.sh`, `start_cluster.sh` and the packed prefix).
pub const HYPERDEX_BASELINE_ENV: &str = "TESSERA_HYPERDEX_BASELINE";

/// The environment variable naming HyperDex's prefix; `install.sh` and
/// `start_cluster.sh` read the same one.
pub const HYPERDEX_PREFIX_ENV: &str = "HYPERDEX_PREFIX";

/// Where HyperDex is installed: `$HYPERDEX_PREFIX`, else `/opt/hyperdex`
/// (the prefix its binaries were linked for).
pub fn hyperdex_prefix() -> PathBuf {
    std::env::var_os(HYPERDEX_PREFIX_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/hyperdex"))
}

/// HyperDex's client library in `prefix`.
pub fn hyperdex_client_library(prefix: &Path) -> PathBuf {
    prefix.join("lib/libhyperdex-client.so")
}

/// Why HyperDex could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallHyperdexError {
    /// The packed prefix was built for Debian 12 on x86_64 Linux only.
    #[error("the HyperDex baseline runs on x86_64 Linux only, not {arch} {os}")]
    Platform {
        os: &'static str,
        arch: &'static str,
    },
    /// No baseline directory was found where it was looked for.
    #[error("no HyperDex baseline directory (set ${HYPERDEX_BASELINE_ENV}); looked in {}", .tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NoBaseline { tried: Vec<PathBuf> },
    /// `install.sh` could not be run.
    #[error("cannot run {script}")]
    Run {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `install.sh` failed (it needs root for apt when libraries are missing).
    #[error("{script} failed ({status}): {stderr}")]
    Script {
        script: PathBuf,
        status: std::process::ExitStatus,
        stderr: String,
    },
    /// `install.sh` succeeded but left no client library behind.
    #[error("{script} left no {library}")]
    NoLibrary { script: PathBuf, library: PathBuf },
}

/// The HyperDex baseline directory: `$TESSERA_HYPERDEX_BASELINE`, else
/// `shared/baselines/hyperdex` beside the repository this crate was built
/// from, else `../shared/baselines/hyperdex` from the working directory
/// (the repository root when run through `scripts/bench-compare`).
pub fn hyperdex_baseline_dir() -> Result<PathBuf, InstallHyperdexError> {
    let candidates: Vec<PathBuf> = match std::env::var_os(HYPERDEX_BASELINE_ENV) {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/baselines/hyperdex"),
            PathBuf::from("../shared/baselines/hyperdex"),
        ],
    };
    candidates
        .iter()
        .find(|dir| dir.join("start_cluster.sh").is_file())
        .cloned()
        .ok_or(InstallHyperdexError::NoBaseline { tried: candidates })
}

/// Installs HyperDex into [`hyperdex_prefix`] with the baseline's
/// `install.sh` unless its client library is already there; returns the
/// prefix. Blocks (apt may run).
pub fn install_hyperdex() -> Result<PathBuf, InstallHyperdexError> {
    let prefix = hyperdex_prefix();
    let library = hyperdex_client_library(&prefix);
    if library.is_file() && prefix.join("bin/hyperdex").is_file() {
        return Ok(prefix);
    }
    if std::env::consts::OS != "linux" || std::env::consts::ARCH != "x86_64" {
        return Err(InstallHyperdexError::Platform {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
        });
    }
    let script = hyperdex_baseline_dir()?.join("install.sh");
    let out = Command::new(&script)
        .arg(&prefix)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| InstallHyperdexError::Run {
            script: script.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(InstallHyperdexError::Script {
            script,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    if !library.is_file() {
        return Err(InstallHyperdexError::NoLibrary { script, library });
    }
    Ok(prefix)
}

/// What `start_cluster.sh start` printed once its cluster was up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ready {
    pub host: String,
    pub port: u16,
    /// The cluster's data directory (`start_cluster.sh stop DIR` works too).
    pub data: PathBuf,
    /// The coordinator's pid, then the daemons'.
    pub pids: Vec<u32>,
}

/// Why `start_cluster.sh`'s output held no usable READY line.
#[derive(Debug, thiserror::Error)]
pub enum ParseReadyError {
    /// No line starts with `READY `.
    #[error("no READY line in {output:?}")]
    NoReadyLine { output: String },
    /// The READY line lacks `field=`.
    #[error("the READY line has no {field}=")]
    Missing { field: &'static str },
    /// `coordinator=` is not `HOST:PORT`.
    #[error("coordinator={value} is not HOST:PORT")]
    Coordinator { value: String },
    /// The coordinator's port is not a port number.
    #[error("coordinator port {value:?}")]
    Port {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// One of `pids=` is not a process id.
    #[error("pid {value:?}")]
    Pid {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
}

/// Parses `start_cluster.sh start`'s output, whose last line is
/// `READY coordinator=HOST:PORT data=DIR pids=P1,P2,...`.
pub fn parse_ready(output: &str) -> Result<Ready, ParseReadyError> {
    let line = output
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("READY "))
        .ok_or_else(|| ParseReadyError::NoReadyLine {
            output: output.to_string(),
        })?;
    let field = |name: &'static str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
            .ok_or(ParseReadyError::Missing { field: name })
    };
    let coordinator = field("coordinator")?;
    let (host, port) = coordinator
        .rsplit_once(':')
        .filter(|(host, _)| !host.is_empty())
        .ok_or_else(|| ParseReadyError::Coordinator {
            value: coordinator.to_string(),
        })?;
    let port = port.parse().map_err(|source| ParseReadyError::Port {
        value: port.to_string(),
        source,
    })?;
    let pids = field("pids")?
        .split(',')
        .map(|p| {
            p.parse().map_err(|source| ParseReadyError::Pid {
                value: p.to_string(),
                source,
            })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    Ok(Ready {
        host: host.to_string(),
        port,
        data: PathBuf::from(field("data")?),
        pids,
    })
}

/// Daemons of the HyperDex cluster, as many as Tessera's bench cluster.
pub const HYPERDEX_DAEMONS: usize = 3;

/// Installs HyperDex if it is missing and starts a coordinator on
/// 127.0.0.1:`port` and [`HYPERDEX_DAEMONS`] daemons on `port + 30…`, with
/// their data under `dir`.
pub async fn start_hyperdex(dir: &Path, port: u16) -> anyhow::Result<Server> {
    let prefix = tokio::task::spawn_blocking(install_hyperdex)
        .await?
        .context("installing HyperDex")?;
    let script = hyperdex_baseline_dir()?.join("start_cluster.sh");
    let data = dir.join("hyperdex");
    let out = tokio::process::Command::new(&script)
        .args(["start", "-n", &HYPERDEX_DAEMONS.to_string()])
        .args(["-p", &port.to_string(), "-d"])
        .arg(&data)
        .env(HYPERDEX_PREFIX_ENV, &prefix)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        // The script stops what it started when it fails.
        bail!(
            "{} start failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let ready = match parse_ready(&String::from_utf8_lossy(&out.stdout)) {
        Ok(ready) => ready,
        Err(e) => {
            // Stop the cluster by its data directory, which holds its pids.
            HyperdexCluster::stop_with(&script, &prefix, &data.to_string_lossy());
            return Err(e).context("reading start_cluster.sh's READY line");
        }
    };
    Ok(Server {
        name: "hyperdex",
        addr: format!("{}:{}", ready.host, ready.port),
        process: Some(Process::Hyperdex(HyperdexCluster {
            prefix,
            script,
            ready,
        })),
        durability: "tolerate 1 failure: 2 replicas per region, every replica before the ack; HyperLevelDB sync=false (no fsync per write)",
    })
}

impl HyperdexCluster {
    fn stop(self) {
        let pids: Vec<String> = self.ready.pids.iter().map(u32::to_string).collect();
        Self::stop_with(&self.script, &self.prefix, &pids.join(","));
    }

    /// `start_cluster.sh stop WHAT` (a data directory or pids), which
    /// SIGTERMs exactly those processes and SIGKILLs them after 20 s.
    fn stop_with(script: &Path, prefix: &Path, what: &str) {
        let status = Command::new(script)
            .args(["stop", what])
            .env(HYPERDEX_PREFIX_ENV, prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            tracing::warn!(?status, what, "stopping the HyperDex cluster failed");
        }
    }

    /// Creates `space` from `description` with the prefix's `hyperdex
    /// add-space`.
    pub async fn add_space(&self, description: &str) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt;
        // env.sh sets PATH and the library and exec paths for any prefix.
        let mut child = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(r#". "$0/env.sh" && exec hyperdex add-space -h "$1" -p "$2""#)
            .arg(&self.prefix)
            .arg(&self.ready.host)
            .arg(self.ready.port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running hyperdex add-space")?;
        let mut stdin = child.stdin.take().context("add-space's stdin")?;
        stdin.write_all(description.as_bytes()).await?;
        drop(stdin);
        let out = child.wait_with_output().await?;
        if !out.status.success() {
            bail!(
                "hyperdex add-space failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// A fresh YCSB table `space` (see
    /// [`hyperdex::usertable_description`](crate::stores::hyperdex::usertable_description))
    /// and a store on it, once clients can use it.
    pub async fn usertable(
        &self,
        space: &str,
        fieldcount: usize,
        partitions: u32,
    ) -> anyhow::Result<crate::stores::hyperdex::HyperdexStore> {
        use crate::stores::hyperdex::usertable_description;
        self.space(space, &usertable_description(space, fieldcount, partitions))
            .await
    }

    /// A fresh space `space` from `description` (whose attributes are the
    /// usertable's: `recno` and the fields) and a store on it, once
    /// clients can use it.
    pub async fn space(
        &self,
        space: &str,
        description: &str,
    ) -> anyhow::Result<crate::stores::hyperdex::HyperdexStore> {
        use crate::stores::hyperdex::{Api, HyperdexStore};
        self.add_space(description).await?;
        let api = Api::load(&hyperdex_client_library(&self.prefix))?;
        HyperdexStore::open(api, &self.ready.host, self.ready.port, space).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_is_parsed() {
        let out = "some chatter\nREADY coordinator=127.0.0.1:19930 data=/tmp/x/hyperdex pids=11,12,13,14\n";
        assert_eq!(
            parse_ready(out).unwrap(),
            Ready {
                host: "127.0.0.1".to_string(),
                port: 19930,
                data: PathBuf::from("/tmp/x/hyperdex"),
                pids: vec![11, 12, 13, 14],
            }
        );
    }

    #[test]
    fn bad_ready_lines_are_typed_errors() {
        type Expect = fn(&ParseReadyError) -> bool;
        let cases: [(&str, Expect); 6] = [
            ("started\n", |e| {
                matches!(e, ParseReadyError::NoReadyLine { .. })
            }),
            ("READY data=/d pids=1", |e| {
                matches!(
                    e,
                    ParseReadyError::Missing {
                        field: "coordinator"
                    }
                )
            }),
            ("READY coordinator=127.0.0.1:1 data=/d", |e| {
                matches!(e, ParseReadyError::Missing { field: "pids" })
            }),
            ("READY coordinator=localhost data=/d pids=1", |e| {
                matches!(e, ParseReadyError::Coordinator { .. })
            }),
            (
                "READY coordinator=127.0.0.1:70000 data=/d pids=1",
                |e| matches!(e, ParseReadyError::Port { value, .. } if value == "70000"),
            ),
            (
                "READY coordinator=127.0.0.1:1 data=/d pids=1,x",
                |e| matches!(e, ParseReadyError::Pid { value, .. } if value == "x"),
            ),
        ];
        for (out, expected) in cases {
            let e = parse_ready(out).expect_err(out);
            assert!(expected(&e), "{out:?} gave {e:?}");
        }
    }
}
