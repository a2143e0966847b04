//! `tessera dev`: a whole cluster in one process.
//!
//! One coordinator member and N daemons, each on its own port of 127.0.0.1
//! and with its own data directory; the daemons are tasks of one runtime,
//! the coordinator runs on a runtime and thread of its own (`run_apart`):
//!
//! ```text
//!  DIR/coordinator   coordinator  127.0.0.1:P          (default P = 1982)
//!  DIR/daemon-0      daemon 0     127.0.0.1:P+30       (2012 by default)
//!  DIR/daemon-1      daemon 1     127.0.0.1:P+31       (2013)
//!  ...
//! ```
//!
//! Daemon ports follow the coordinator port so that the HyperDex defaults
//! (1982 and 2012) come out of `--port` alone and two dev clusters with
//! different `--port`s do not collide (as long as they are 30 + N apart).
//! Running again with the same DIR resumes: the coordinator reloads its
//! state and each daemon its instance id and objects.

use anyhow::{bail, Context};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use tessera_bench::cluster::{wait_ready, READY_TIMEOUT};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long the tasks may take to stop after a shutdown signal.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Daemon `i` listens on the coordinator port plus this plus `i`.
pub const DAEMON_PORT_OFFSET: u16 = 30;

pub struct DevOptions {
    pub daemons: usize,
    pub port: u16,
    pub data: PathBuf,
    /// When the daemons' commits reach stable storage.
    pub durability: tessera_daemon::Durability,
    /// Every process serves Prometheus metrics on a free port of
    /// 127.0.0.1, the coordinator its dashboard beside them; the URLs are
    /// printed after `ready`.
    pub metrics: bool,
    /// Plain TCP (what `tessera dev` runs) or TLS (`bench tls-cost`).
    pub transport: tessera_client::Transport,
}

/// Writes one line to stdout and flushes it. A closed stdout (the reader
/// went away, `tessera dev | head -1`) must not take the cluster down, so
/// write errors are ignored here rather than panicking as `println!` does.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out
        .write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// Prints one `metrics: NAME URL` line per process, then the `dashboard:
/// URL` line of the coordinator (it serves the page on its metrics
/// listener), from the configuration.
async fn print_metrics_urls(coordinator: &str, transport: &tessera_client::Transport) {
    let link = tessera_client::CoordLink {
        transport: transport.clone(),
        admin_token: None,
    };
    let admin = tessera_client::Admin::with_link([coordinator], Duration::from_secs(10), link);
    match admin.config().await {
        Ok(config) => {
            for member in &config.coordinators {
                if let Some(url) = &member.metrics {
                    announce(format_args!("metrics: coordinator {} {url}", member.id));
                }
            }
            for daemon in config.daemons.values() {
                if let Some(url) = &daemon.metrics {
                    announce(format_args!("metrics: daemon {} {url}", daemon.id));
                }
            }
            if let Some(url) = crate::show::dashboard_url(&config) {
                announce(format_args!("dashboard: {url}"));
            }
        }
        Err(e) => tracing::warn!("cannot list the metrics URLs: {e}"),
    }
}

/// Runs `server` on a runtime of its own, on a thread of its own, and
/// hands its result back. The coordinator runs so in `tessera dev`: on the
/// daemons' runtime, a load that keeps both worker threads busy delayed its
/// answers to heartbeats past the daemons' lease (every daemon stopped
/// serving for half a second on this 2-core machine), and once for longer
/// than its failure timeout, when it took every daemon offline. Apart, as
/// in a deployment, it gets its share of the CPU from the operating system.
fn run_apart<F, T, E>(
    name: &str,
    server: F,
) -> anyhow::Result<tokio::sync::oneshot::Receiver<Result<T, E>>>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .with_context(|| format!("starting the {name} runtime"))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(runtime.block_on(server));
        })
        .with_context(|| format!("starting the {name} thread"))?;
    Ok(rx)
}

/// A future that completes once `stop` turns true.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

pub async fn run(options: DevOptions, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    if options.daemons == 0 {
        bail!("--daemons must be at least 1");
    }
    let localhost = Ipv4Addr::LOCALHOST;
    let coordinator_addr = SocketAddr::from((localhost, options.port));
    let daemon_addrs: Vec<SocketAddr> = (0..options.daemons)
        .map(|i| {
            let port =
                u16::try_from(usize::from(options.port) + usize::from(DAEMON_PORT_OFFSET) + i)
                    .context("daemon port beyond 65535; choose a lower --port")?;
            Ok(SocketAddr::from((localhost, port)))
        })
        .collect::<anyhow::Result<_>>()?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks: JoinSet<anyhow::Result<()>> = JoinSet::new();

    let coordinator_dir = options.data.join("coordinator");
    std::fs::create_dir_all(&coordinator_dir)
        .with_context(|| format!("creating {}", coordinator_dir.display()))?;
    // Port 0: each server binds a free port and reports the URL in the
    // configuration, which is where the `metrics:` lines come from.
    let metrics_addr = options.metrics.then_some(SocketAddr::from((localhost, 0)));
    let coordinator_options = tessera_coordinator::server::CoordinatorOptions {
        metrics: metrics_addr,
        transport: options.transport.clone(),
        ..tessera_coordinator::server::CoordinatorOptions::new(coordinator_addr, coordinator_dir)
    };
    let coordinator = run_apart("tessera-coordinator", {
        let shutdown = stopped(stop_rx.clone());
        async move { tessera_coordinator::server::run(coordinator_options, shutdown).await }
    })?;
    tasks.spawn(async move {
        match coordinator.await {
            Ok(result) => result.context("coordinator"),
            Err(_) => Err(anyhow::anyhow!(
                "the coordinator's thread ended without a result"
            )),
        }
    });

    for (i, addr) in daemon_addrs.iter().enumerate() {
        let data_dir = options.data.join(format!("daemon-{i}"));
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        let mut daemon_options =
            tessera_daemon::DaemonOptions::new(*addr, data_dir, coordinator_addr.to_string());
        daemon_options.durability = options.durability;
        daemon_options.metrics = metrics_addr;
        daemon_options.transport = options.transport.clone();
        let shutdown = stopped(stop_rx.clone());
        tasks.spawn(async move {
            tessera_daemon::run(daemon_options, shutdown)
                .await
                .with_context(|| format!("daemon {i}"))
        });
    }

    let daemon_addr_texts: Vec<String> = daemon_addrs.iter().map(|a| a.to_string()).collect();
    let coordinator_text = coordinator_addr.to_string();
    let ready = wait_ready(
        &coordinator_text,
        &options.transport,
        options.daemons,
        READY_TIMEOUT,
    );
    tokio::pin!(ready);
    tokio::pin!(signal);
    let mut outcome: anyhow::Result<()> = Ok(());
    let mut announced = false;
    loop {
        tokio::select! {
            result = &mut ready, if !announced => {
                match result {
                    Ok(epoch) => {
                        announced = true;
                        announce(format_args!(
                            "ready: coordinator {coordinator_addr}, daemons {} (epoch {}, data {})",
                            daemon_addr_texts.join(" "),
                            epoch.0,
                            options.data.display()
                        ));
                        if options.metrics {
                            print_metrics_urls(&coordinator_text, &options.transport).await;
                        }
                    }
                    Err(e) => {
                        outcome = Err(anyhow::Error::new(e).context("the dev cluster did not become ready"));
                        break;
                    }
                }
            }
            finished = tasks.join_next() => {
                // A server ended on its own: stop the others.
                outcome = match finished {
                    Some(Ok(Ok(()))) => Err(anyhow::anyhow!("a server stopped unexpectedly")),
                    Some(Ok(Err(e))) => Err(e),
                    Some(Err(e)) => Err(anyhow::anyhow!("a server task failed: {e}")),
                    None => Err(anyhow::anyhow!("no servers running")),
                };
                break;
            }
            _ = &mut signal => {
                tracing::info!("stopping");
                break;
            }
        }
    }

    let _ = stop_tx.send(true);
    let stop_deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        match tokio::time::timeout_at(stop_deadline, tasks.join_next()).await {
            Ok(Some(Ok(Ok(())))) => {}
            Ok(Some(Ok(Err(e)))) => {
                tracing::warn!(error = %format!("{e:#}"), "server stopped with an error");
                if outcome.is_ok() {
                    outcome = Err(e);
                }
            }
            Ok(Some(Err(e))) => tracing::warn!(error = %e, "server task failed"),
            Ok(None) => break,
            Err(_) => {
                tasks.abort_all();
                if outcome.is_ok() {
                    outcome = Err(anyhow::anyhow!(
                        "servers did not stop within {STOP_TIMEOUT:?}"
                    ));
                }
                break;
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_client::{Admin, Client, Transport, Value};

    /// A coordinator port with its two daemons' ports free.
    fn free_ports() -> u16 {
        for _ in 0..50 {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            let port = probe.local_addr().expect("an address").port();
            drop(probe);
            let offset = usize::from(DAEMON_PORT_OFFSET);
            let all_free = [0, offset, offset + 1].iter().all(|d| {
                u16::try_from(usize::from(port) + d)
                    .is_ok_and(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
            });
            if all_free {
                return port;
            }
        }
        panic!("no free ports");
    }

    /// Once an in-process cluster has stopped, every daemon's engine is
    /// closed: a new engine opens on its data directory (fjall locks a
    /// directory while a database is open on it). The daemons must first
    /// have talked as peers, whose writers held each daemon alive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopped_cluster_leaves_no_engine_open() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_ports();
        let options = DevOptions {
            daemons: 2,
            port,
            data: dir.path().to_path_buf(),
            durability: tessera_daemon::Durability::Interval,
            metrics: false,
            transport: Transport::plain(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let cluster = tokio::spawn(run(options, async move {
            let _ = stopped.await;
        }));
        let coordinator = format!("127.0.0.1:{port}");
        wait_ready(&coordinator, &Transport::plain(), 2, READY_TIMEOUT)
            .await
            .expect("the cluster is ready");
        Admin::new(&coordinator)
            .add_space("space kv key k attributes int v tolerate 1 failure create 2 partitions")
            .await
            .expect("the space is created");
        let client = Client::connect(&coordinator).await.expect("a client");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut stored = 0;
        while stored < 20 {
            match client
                .put(
                    "kv",
                    Value::str(&format!("k{stored}")),
                    [("v", Value::Int(stored))],
                )
                .await
            {
                Ok(_) => stored += 1,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("put not yet: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("puts fail: {e}"),
            }
        }
        drop(client);
        let _ = stop.send(());
        cluster
            .await
            .expect("the cluster task ends")
            .expect("the cluster stops cleanly");
        for i in 0..2 {
            let data = dir.path().join(format!("daemon-{i}"));
            if let Err(e) =
                tessera_storage::FjallEngine::open(&data, tessera_storage::Durability::Interval)
            {
                panic!("daemon {i}'s engine is still open after the cluster stopped: {e}");
            }
        }
    }
}
