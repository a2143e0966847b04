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
//!   acknowledged; a one-member cluster.
//! - PostgreSQL: `synchronous_commit = off` (the WAL is written by the WAL
//!   writer and fsynced within `3 × wal_writer_delay` = 600 ms),
//!   `fsync = on`; one server, no standby.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process we started.
pub struct Server {
    pub name: &'static str,
    pub addr: String,
    child: Option<Child>,
    /// What the server promises about acknowledged writes.
    pub durability: &'static str,
}

impl Server {
    /// Sends SIGTERM to our process and waits up to 20 s, then SIGKILL.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
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
        child: Some(child),
        durability: "appendonly yes, appendfsync everysec (fsync once a second), 1 copy",
    })
}

/// Starts a one-member etcd with clients on 127.0.0.1:`port` and peers on
/// `port + 1`, data in `dir`.
pub async fn start_etcd(dir: &Path, port: u16) -> anyhow::Result<Server> {
    let bin = which("etcd").context("etcd is not installed (scripts/bench-install-baselines)")?;
    std::fs::create_dir_all(dir)?;
    let log = log_file(dir, "etcd")?;
    let client_url = format!("http://127.0.0.1:{port}");
    let peer_url = format!("http://127.0.0.1:{}", port + 1);
    let mut child = Command::new(bin)
        .arg("--name")
        .arg("bench")
        .arg("--data-dir")
        .arg(dir.join("etcd"))
        .arg("--listen-client-urls")
        .arg(&client_url)
        .arg("--advertise-client-urls")
        .arg(&client_url)
        .arg("--listen-peer-urls")
        .arg(&peer_url)
        .arg("--initial-advertise-peer-urls")
        .arg(&peer_url)
        .arg("--initial-cluster")
        .arg(format!("bench={peer_url}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting etcd")?;
    let addr = format!("127.0.0.1:{port}");
    wait_port(&addr, "etcd", &mut child).await?;
    // The port opens before the member has elected itself; wait for a put.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut conn = crate::stores::etcd::HttpConn::connect(&addr).await?;
        if let Ok((200, _)) = conn
            .post_json("/v3/kv/put", "{\"key\":\"cmVhZHk=\",\"value\":\"MQ==\"}")
            .await
        {
            break;
        }
        if Instant::now() > deadline {
            bail!("etcd did not accept a put within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Server {
        name: "etcd",
        addr,
        child: Some(child),
        durability: "default: every Raft entry fsynced before the ack, 1 member",
    })
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
        child: Some(child),
        durability: "synchronous_commit=off, fsync=on (WAL fsynced within 600 ms), 1 copy",
    })
}

/// How to reach a server started by [`start_postgres`].
pub fn postgres_conninfo(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=postgres dbname=postgres")
}
