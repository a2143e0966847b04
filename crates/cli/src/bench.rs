//! `tessera bench`: YCSB, the HyperDex paper's experiments, and baselines
//! measured side by side. The load generator, stores and scenarios live in
//! `tessera-bench`; this module parses options, starts an in-process
//! cluster for `--local` (as `tessera dev` does, in a temporary
//! directory), starts and stops baseline servers, gives `recovery` (which
//! runs this binary's coordinator and daemons as processes) a temporary
//! directory, and prints results as a table and, with `--json FILE`, as
//! JSON.

use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tessera_bench::baselines::{self, Server};
use tessera_bench::driver::{results_table, PhaseResult, Store};
use tessera_bench::recovery::{self, RecoveryOptions, Rejoin};
use tessera_bench::scenarios::{self, CompareSize};
use tessera_bench::stores::etcd::EtcdStore;
use tessera_bench::stores::postgres::PostgresStore;
use tessera_bench::stores::redis::RedisStore;
use tessera_bench::stores::tessera::{usertable_description, TesseraStore};
use tessera_bench::workload::Workload;
use tessera_client::{Admin, Client, Epoch};
use tessera_daemon::Durability;
use tessera_types::DaemonState;
use tokio::sync::oneshot;

/// What Tessera promises about acknowledged writes in these runs.
const TESSERA_DURABILITY: &str =
    "every replica (tolerate 1 failure: 2 per region) writes to the OS before the ack; fsync every 200 ms";
const TESSERA_F0_DURABILITY: &str =
    "tolerate 0 failures: 1 replica per region, writes to the OS before the ack; fsync every 200 ms";
const TESSERA_FSYNC_DURABILITY: &str =
    "every replica (2 per region) fsyncs each commit before the ack (daemons run with durability always)";

/// The labels of the Tessera runs in the comparison.
const MAIN: &str = "tessera f=1";
const F0: &str = "tessera f=0";
const FSYNC: &str = "tessera f=1 fsync";

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    scenario: Scenario,
}

/// Where the Tessera cluster is.
#[derive(Args, Clone)]
pub struct ClusterArgs {
    /// Start an in-process cluster (a coordinator and `--daemons` daemons on
    /// 127.0.0.1, data in a temporary directory) instead of using one.
    #[arg(long)]
    local: bool,
    /// Daemons of the `--local` cluster.
    #[arg(long, default_value_t = 3)]
    daemons: usize,
    /// Coordinator port of the `--local` cluster (daemons follow it).
    #[arg(long, default_value_t = 19820)]
    local_port: u16,
    /// Host of a coordinator member of a running cluster.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port of that member.
    #[arg(long, default_value_t = 1982)]
    port: u16,
    /// Partitions of each benchmark space.
    #[arg(long, default_value_t = 24)]
    partitions: u32,
    /// The `--local` cluster's daemons fsync every commit before
    /// acknowledging it (default: fsync every 200 ms).
    #[arg(long)]
    fsync_every_commit: bool,
}

/// Load shape shared by the scenarios.
#[derive(Args, Clone)]
pub struct LoadArgs {
    /// Operations in flight (one task each).
    #[arg(long, default_value_t = 32)]
    workers: usize,
    /// Each phase stops after this many seconds even if operations remain.
    #[arg(long, default_value_t = 120)]
    time_limit: u64,
    /// Write every result as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Scenario {
    /// A YCSB core workload (a–f): load, then the operation mix.
    Ycsb {
        #[arg(long, default_value = "a")]
        workload: char,
        #[arg(long, default_value_t = 100_000)]
        records: u64,
        #[arg(long, default_value_t = 100_000)]
        operations: u64,
        /// Skip the load phase (the records are already there).
        #[arg(long)]
        no_load: bool,
        /// Request distribution instead of the workload's own.
        #[arg(long)]
        distribution: Option<tessera_bench::generator::Distribution>,
        /// The system under test: tessera, or a baseline started for the
        /// run (redis, etcd, postgres; scans only on tessera and postgres).
        #[arg(long, default_value = "tessera")]
        store: String,
        /// Port of a baseline started by `--store`.
        #[arg(long, default_value_t = 19900)]
        baseline_port: u16,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Put latency and throughput vs. the number of non-key subspaces.
    Subspaces {
        /// The largest number of subspaces (runs 0..=MAX).
        #[arg(long, default_value_t = 10)]
        max: usize,
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Equality search with a matching subspace vs. one that contacts
    /// every region.
    SearchVsScan {
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        #[arg(long, default_value_t = 5_000)]
        searches: u64,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Latency of a read/scan mix as the scan share grows (0 to 100%).
    ScanShare {
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        /// Operations per scan share.
        #[arg(long, default_value_t = 5_000)]
        operations: u64,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Get and put latency distributions (1 and `--workers` in flight).
    Latency {
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        #[arg(long, default_value_t = 20_000)]
        operations: u64,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Kill -9 of a region's point leader among real processes (a
    /// coordinator and 3 daemons of this binary, on 127.0.0.1): the time
    /// to the first acknowledged write, and the throughput of the state
    /// transfer that re-replicates the region.
    Recovery {
        /// Objects in the region (one partition, tolerate 1 failure).
        #[arg(long, default_value_t = 100_000)]
        records: u64,
        /// Kills, each followed by re-replication and a restart.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// The coordinator's port; the daemons take the next three.
        #[arg(long, default_value_t = 19700)]
        port: u16,
        /// Puts in flight while loading.
        #[arg(long, default_value_t = 32)]
        workers: usize,
        /// How the killed daemon's place is filled for the next run: `empty`
        /// forgets it and starts a new daemon with an empty data directory
        /// (every transfer copies the whole region); `data` restarts it from
        /// its data directory (a transfer ships only what it lacks).
        #[arg(long, default_value = "empty")]
        rejoin: Rejoin,
        /// Bound of each wait (start, load, recovery, rejoin), in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Tessera and every installed baseline (Redis, etcd, PostgreSQL) with
    /// the same load, and a ratio table (Tessera ÷ baseline).
    Compare {
        /// Small sizes and short time limits: under 5 minutes in total.
        #[arg(long)]
        quick: bool,
        /// Records loaded (default 100000; 5000 with --quick).
        #[arg(long)]
        records: Option<u64>,
        /// Operations per phase (default 50000; 5000 with --quick).
        #[arg(long)]
        operations: Option<u64>,
        /// Operations per YCSB workload A–F (default: as --operations; 0
        /// leaves YCSB out).
        #[arg(long)]
        ycsb_operations: Option<u64>,
        /// Baselines to leave out, e.g. `--skip etcd`.
        #[arg(long, value_delimiter = ',')]
        skip: Vec<String>,
        /// First port of the baseline servers (each takes a few from here).
        #[arg(long, default_value_t = 19900)]
        baseline_port: u16,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Operations in flight (one task each).
        #[arg(long, default_value_t = 16)]
        workers: usize,
        /// Per-phase time limit in seconds (default 60; 12 with --quick).
        #[arg(long)]
        time_limit: Option<u64>,
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

/// An in-process cluster started for `--local`, stopped on `stop`.
struct LocalCluster {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

impl LocalCluster {
    async fn start(
        daemons: usize,
        port: u16,
        durability: Durability,
    ) -> anyhow::Result<(LocalCluster, String)> {
        let dir = tempfile::Builder::new()
            .prefix("tessera-bench-")
            .tempdir()
            .context("creating a temporary directory")?;
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let options = crate::dev::DevOptions {
            daemons,
            port,
            data: dir.path().to_path_buf(),
            durability,
        };
        let task = tokio::spawn(crate::dev::run(options, async move {
            let _ = stop_rx.await;
        }));
        let coordinator = format!("127.0.0.1:{port}");
        let cluster = LocalCluster {
            stop: Some(stop_tx),
            task,
            _dir: dir,
        };
        wait_ready(&coordinator, daemons).await?;
        Ok((cluster, coordinator))
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout(Duration::from_secs(30), &mut self.task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(anyhow::anyhow!("the local cluster task failed: {e}")),
            Err(_) => {
                self.task.abort();
                Err(anyhow::anyhow!(
                    "the local cluster did not stop within 30 s"
                ))
            }
        }
    }
}

/// Waits until `daemons` daemons are available and answer at the epoch.
async fn wait_ready(coordinator: &str, daemons: usize) -> anyhow::Result<()> {
    let admin = Admin::with_members([coordinator], Duration::from_secs(60));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("the local cluster was not ready within 60 s");
        }
        if let Ok(Some(config)) = admin.wait_config(Epoch(0), Duration::ZERO).await {
            let available: Vec<String> = config
                .daemons
                .values()
                .filter(|d| d.state == DaemonState::Available)
                .map(|d| d.addr.clone())
                .collect();
            if available.len() >= daemons {
                let mut all = true;
                for addr in &available {
                    if crate::dev::probe_daemon(addr, config.epoch).await.is_err() {
                        all = false;
                    }
                }
                if all {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The cluster to benchmark: a coordinator address, and the local cluster
/// to stop afterwards if we started one.
async fn cluster(args: &ClusterArgs) -> anyhow::Result<(Option<LocalCluster>, String)> {
    if args.local {
        let durability = if args.fsync_every_commit {
            Durability::Always
        } else {
            Durability::Interval
        };
        let (c, addr) = LocalCluster::start(args.daemons, args.local_port, durability).await?;
        eprintln!(
            "bench: local cluster of {} daemons at {addr} (durability {durability:?})",
            args.daemons
        );
        Ok((Some(c), addr))
    } else {
        Ok((None, format!("{}:{}", args.host, args.port)))
    }
}

/// Runs `body` against the cluster `args` names: a local one started for it
/// and stopped after, whatever `body` returned, or the given coordinator.
async fn with_cluster<T>(
    args: &ClusterArgs,
    body: impl AsyncFnOnce(&str) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (local, coordinator) = cluster(args).await?;
    let outcome = body(&coordinator).await;
    if let Some(local) = local {
        local.stop().await?;
    }
    outcome
}

fn write_json(path: &Option<PathBuf>, value: &serde_json::Value) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("bench: results written to {}", path.display());
    }
    Ok(())
}

/// A Tessera usertable space with a `recno` subspace, made fresh.
async fn tessera_usertable(
    coordinator: &str,
    name: &str,
    partitions: u32,
) -> anyhow::Result<Arc<dyn Store>> {
    tessera_usertable_f(coordinator, name, partitions, 1).await
}

/// The same, tolerating `tolerate` failures (`tolerate + 1` replicas).
async fn tessera_usertable_f(
    coordinator: &str,
    name: &str,
    partitions: u32,
    tolerate: u32,
) -> anyhow::Result<Arc<dyn Store>> {
    let admin = Admin::new(coordinator);
    scenarios::fresh_space(
        &admin,
        name,
        &usertable_description(name, 10, true, partitions, tolerate),
    )
    .await?;
    let client = Client::connect(coordinator).await?;
    scenarios::wait_space(&client, name).await?;
    Ok(Arc::new(TesseraStore::new(client, name, 10)))
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.scenario {
        Scenario::Ycsb {
            workload,
            records,
            operations,
            no_load,
            distribution,
            store,
            baseline_port,
            cluster: c,
            load,
        } => {
            let mut w = Workload::core(workload, records, operations)
                .with_context(|| format!("no YCSB core workload {workload:?} (a–f)"))?;
            if let Some(d) = distribution {
                w.distribution = d;
            }
            if store != "tessera" {
                let dir = tempfile::Builder::new()
                    .prefix(&format!("tessera-bench-{store}-"))
                    .tempdir()?;
                let (mut server, target) =
                    start_baseline(&store, dir.path(), baseline_port).await?;
                eprintln!("bench: {store} ({})", server.durability);
                let results = scenarios::ycsb(
                    target,
                    Arc::new(w.clone()),
                    load.workers,
                    Duration::from_secs(load.time_limit),
                    true,
                )
                .await;
                tokio::task::block_in_place(|| server.stop());
                let results = results?;
                print!("{}", results_table(&results));
                return write_json(
                    &load.json,
                    &serde_json::json!({ "workload": w, "durability": server.durability, "results": results }),
                );
            }
            with_cluster(&c, async |coordinator: &str| {
                let store = if no_load {
                    let client = Client::connect(coordinator).await?;
                    Arc::new(TesseraStore::new(client, "usertable", w.fieldcount)) as Arc<dyn Store>
                } else {
                    tessera_usertable(coordinator, "usertable", c.partitions).await?
                };
                let results = scenarios::ycsb(
                    store,
                    Arc::new(w.clone()),
                    load.workers,
                    Duration::from_secs(load.time_limit),
                    !no_load,
                )
                .await?;
                print!("{}", results_table(&results));
                write_json(
                    &load.json,
                    &serde_json::json!({ "workload": w, "results": results }),
                )
            })
            .await
        }
        Scenario::Subspaces {
            max,
            records,
            cluster: c,
            load,
        } => {
            let counts: Vec<usize> = (0..=max).collect();
            with_cluster(&c, async |coordinator: &str| {
                let results = scenarios::subspaces(
                    coordinator,
                    &counts,
                    records,
                    load.workers,
                    c.partitions,
                    Duration::from_secs(load.time_limit),
                )
                .await?;
                print!("{}", results_table(&results));
                write_json(&load.json, &serde_json::json!({ "results": results }))
            })
            .await
        }
        Scenario::SearchVsScan {
            records,
            searches,
            cluster: c,
            load,
        } => {
            with_cluster(&c, async |coordinator: &str| {
                let r = scenarios::search_vs_scan(
                    coordinator,
                    records,
                    searches,
                    load.workers,
                    c.partitions,
                    Duration::from_secs(load.time_limit),
                )
                .await?;
                print!(
                    "{}",
                    results_table(&[r.with_subspace.clone(), r.without_subspace.clone()])
                );
                println!("plan with the recno subspace:\n{}", r.plan_with_subspace);
                println!("plan without it:\n{}", r.plan_without_subspace);
                println!(
                    "mean latency ratio (all regions ÷ subspace): {:.2}; throughput ratio (subspace ÷ all regions): {:.2}",
                    r.mean_latency_ratio, r.throughput_ratio
                );
                write_json(&load.json, &serde_json::to_value(&r)?)
            })
            .await
        }
        Scenario::ScanShare {
            records,
            operations,
            cluster: c,
            load,
        } => {
            with_cluster(&c, async |coordinator: &str| {
                let store =
                    tessera_usertable(coordinator, "bench_scan_share", c.partitions).await?;
                let results = scenarios::scan_share(
                    store,
                    records,
                    operations,
                    load.workers,
                    Duration::from_secs(load.time_limit),
                )
                .await?;
                print!("{}", results_table(&results));
                let _ = Admin::new(coordinator).rm_space("bench_scan_share").await;
                write_json(&load.json, &serde_json::json!({ "results": results }))
            })
            .await
        }
        Scenario::Latency {
            records,
            operations,
            cluster: c,
            load,
        } => {
            with_cluster(&c, async |coordinator: &str| {
                let results = scenarios::latency(
                    coordinator,
                    records,
                    operations,
                    load.workers,
                    c.partitions,
                    Duration::from_secs(load.time_limit),
                )
                .await?;
                print!("{}", results_table(&results));
                write_json(&load.json, &serde_json::json!({ "results": results }))
            })
            .await
        }
        Scenario::Compare {
            quick,
            records,
            operations,
            ycsb_operations,
            skip,
            baseline_port,
            cluster: c,
            workers,
            time_limit,
            json,
        } => {
            let operations = operations.unwrap_or(if quick { 5_000 } else { 50_000 });
            let size = CompareSize {
                records: records.unwrap_or(if quick { 5_000 } else { 100_000 }),
                operations,
                ycsb_operations: ycsb_operations.unwrap_or(operations),
                workers,
                fieldcount: 10,
                fieldlength: 100,
                time_limit: Duration::from_secs(time_limit.unwrap_or(if quick { 12 } else { 60 })),
            };
            compare(size, &skip, baseline_port, &c, &json).await
        }
        Scenario::Recovery {
            records,
            runs,
            port,
            workers,
            rejoin,
            timeout,
            json,
        } => {
            let dir = tempfile::Builder::new()
                .prefix("tessera-bench-recovery-")
                .tempdir()
                .context("creating a temporary directory")?;
            let options = RecoveryOptions {
                exe: std::env::current_exe().context("finding the tessera binary")?,
                dir: dir.path().to_path_buf(),
                port,
                records,
                runs,
                workers,
                rejoin,
                timeout: Duration::from_secs(timeout),
            };
            let failure_timeout = tessera_coordinator::FAILURE_TIMEOUT_DEFAULT;
            eprintln!(
                "bench: coordinator at 127.0.0.1:{port}, {} daemons on the next ports, data in {}",
                recovery::DAEMONS,
                dir.path().display()
            );
            // Ctrl-C or SIGTERM drops the run, whose guard kills the servers.
            let report = tokio::select! {
                report = recovery::recovery(&options) => report?,
                _ = crate::shutdown_signal() => anyhow::bail!("interrupted; the servers were killed"),
            };
            println!(
                "{} objects of {} × {} bytes in one region (tolerate 1 failure, {} daemons, rejoin {}); failure timeout {} ms; loaded in {:.1} s",
                report.objects,
                report.record_fields,
                report.field_bytes,
                recovery::DAEMONS,
                report.rejoin.name(),
                failure_timeout.as_millis(),
                report.load_seconds
            );
            print!("{}", recovery::recovery_table(&report));
            let mut value = serde_json::to_value(&report)?;
            value["failure_timeout_ms"] = serde_json::json!(failure_timeout.as_millis() as u64);
            write_json(&json, &value)
        }
    }
}

/// Starts the baseline `name` (redis, etcd, postgres) on 127.0.0.1:`port`
/// with its data in `dir`, and its store (PostgreSQL's table created).
async fn start_baseline(
    name: &str,
    dir: &std::path::Path,
    port: u16,
) -> anyhow::Result<(Server, Arc<dyn Store>)> {
    let server = match name {
        "redis" => baselines::start_redis(dir, port).await?,
        "etcd" => baselines::start_etcd(dir, port).await?,
        "postgres" => baselines::start_postgres(dir, port).await?,
        other => anyhow::bail!("unknown store {other:?} (tessera, redis, etcd, postgres)"),
    };
    let store: Arc<dyn Store> = match name {
        "redis" => Arc::new(RedisStore::new(&server.addr)),
        "etcd" => Arc::new(EtcdStore::new(&server.addr)),
        _ => {
            let pg = PostgresStore::new(&baselines::postgres_conninfo(port), 10);
            pg.create_table().await?;
            Arc::new(pg)
        }
    };
    Ok((server, store))
}

/// One Tessera run of the comparison: a fresh cluster (when `--local`)
/// with `durability`, a usertable tolerating `tolerate` failures, the
/// phases (all of them with `full`, else load, read and update) and, with
/// `full`, the YCSB suite. Results are labelled `label`.
#[allow(clippy::too_many_arguments)]
async fn tessera_run(
    c: &ClusterArgs,
    port_offset: u16,
    durability: Durability,
    tolerate: u32,
    full: bool,
    size: CompareSize,
    label: &str,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<PhaseResult>> {
    eprintln!("bench: {label} …");
    let c = ClusterArgs {
        local_port: c.local_port + port_offset,
        fsync_every_commit: durability == Durability::Always,
        ..c.clone()
    };
    let mut results = with_cluster(&c, async |coordinator: &str| {
        let space = "bench_usertable";
        let store = tessera_usertable_f(coordinator, space, c.partitions, tolerate).await?;
        let mut results = scenarios::compare_phase_set(store.clone(), size, full).await?;
        if full {
            let loaded = results
                .first()
                .and_then(|r| r.ops.get("INSERT"))
                .map_or(0, |s| s.count);
            let (ycsb, ycsb_notes) = scenarios::ycsb_suite(store, size, loaded).await?;
            results.extend(ycsb);
            notes.extend(ycsb_notes);
        }
        let _ = Admin::new(coordinator).rm_space(space).await;
        Ok::<_, anyhow::Error>(results)
    })
    .await?;
    for r in &mut results {
        r.store = label.to_string();
    }
    Ok(results)
}

async fn compare(
    size: CompareSize,
    skip: &[String],
    baseline_port: u16,
    c: &ClusterArgs,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut notes = Vec::new();
    let mut durability = vec![(MAIN.to_string(), TESSERA_DURABILITY.to_string())];
    let tessera = tessera_run(c, 0, Durability::Interval, 1, true, size, MAIN, &mut notes).await?;
    let mut all: Vec<PhaseResult> = tessera.clone();
    // Puts with one replica per region, and with an fsync per commit
    // (like etcd's): load, read and update only.
    let f0 = tessera_run(c, 40, Durability::Interval, 0, false, size, F0, &mut notes).await?;
    durability.push((F0.to_string(), TESSERA_F0_DURABILITY.to_string()));
    all.extend(f0.clone());
    let fsync = if c.local {
        let r = tessera_run(c, 80, Durability::Always, 1, false, size, FSYNC, &mut notes).await?;
        durability.push((FSYNC.to_string(), TESSERA_FSYNC_DURABILITY.to_string()));
        all.extend(r.clone());
        r
    } else {
        notes.push(format!(
            "{FSYNC}: not run (needs --local; a running cluster keeps its own durability)"
        ));
        Vec::new()
    };
    let mut baseline_results: Vec<PhaseResult> = Vec::new();
    for (i, name) in ["redis", "etcd", "postgres"].into_iter().enumerate() {
        if skip.iter().any(|s| s == name) {
            notes.push(format!("{name}: skipped (--skip)"));
            continue;
        }
        eprintln!("bench: {name} …");
        let dir = tempfile::Builder::new()
            .prefix(&format!("tessera-bench-{name}-"))
            .tempdir()?;
        let port = baseline_port + 10 * i as u16;
        let (mut server, store) = match start_baseline(name, dir.path(), port).await {
            Ok(started) => started,
            Err(e) => {
                notes.push(format!("{name}: not measured: {e:#}"));
                continue;
            }
        };
        durability.push((name.to_string(), server.durability.to_string()));
        let outcome = async {
            let mut results = scenarios::compare_phases(store.clone(), size).await?;
            let loaded = results
                .first()
                .and_then(|r| r.ops.get("INSERT"))
                .map_or(0, |s| s.count);
            let (ycsb, ycsb_notes) = scenarios::ycsb_suite(store, size, loaded).await?;
            results.extend(ycsb);
            Ok::<_, anyhow::Error>((results, ycsb_notes))
        }
        .await;
        tokio::task::block_in_place(|| server.stop());
        match outcome {
            Ok((results, ycsb_notes)) => {
                all.extend(results.clone());
                baseline_results.extend(results);
                notes.extend(ycsb_notes);
            }
            Err(e) => notes.push(format!("{name}: failed: {e:#}")),
        }
    }
    let mut ratios = scenarios::ratios(&tessera, &baseline_results);
    ratios.extend(scenarios::ratios(&f0, &baseline_results));
    let etcd: Vec<PhaseResult> = baseline_results
        .iter()
        .filter(|r| r.store == "etcd")
        .cloned()
        .collect();
    ratios.extend(scenarios::ratios(&fsync, &etcd));
    println!(
        "records {}, operations per phase {}, per YCSB workload {}, {} in flight, record 10 × 100 bytes",
        size.records, size.operations, size.ycsb_operations, size.workers
    );
    print!("{}", results_table(&all));
    println!();
    println!("Tessera ÷ baseline (throughput ratio above 1: Tessera faster; latency ratios above 1: Tessera slower)");
    print!("{}", scenarios::ratio_table(&ratios));
    println!();
    println!("durability:");
    for (name, d) in &durability {
        println!("  {name:<9} {d}");
    }
    for n in &notes {
        println!("note: {n}");
    }
    println!("total time {:.0} s", started.elapsed().as_secs_f64());
    write_json(
        json,
        &serde_json::json!({
            "size": size,
            "results": all,
            "ratios": ratios,
            "durability": durability,
            "notes": notes,
        }),
    )
}
