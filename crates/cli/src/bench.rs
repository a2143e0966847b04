//! `tessera bench`: YCSB, the HyperDex paper's experiments, and baselines
//! measured side by side. Everything runs in `tessera-bench`
//! (`tessera_bench::runs`); this module maps the command line onto it and
//! hands it what only the binary has: the in-process servers of a
//! `--local` cluster (`tessera dev`'s), this executable for `recovery`'s
//! processes, the shutdown signal, and the phases' progress on stderr.

use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tessera_bench::cluster::{ClusterSpec, Launch, LocalSpec};
use tessera_bench::recovery::{RecoveryOptions, Rejoin};
use tessera_bench::runs::{self, Load};
use tessera_bench::scenarios::CompareSize;
use tessera_bench::workload::Workload;
use tessera_daemon::Durability;

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
    /// The `--local` cluster's daemons run with durability always: each
    /// region's tail fsyncs a commit before acknowledging it, the other
    /// replicas' commits are durable by their next fsync (default: fsync
    /// every 200 ms).
    #[arg(long)]
    fsync_every_commit: bool,
    /// The `--local` cluster's servers count and serve Prometheus metrics.
    #[arg(long)]
    metrics: bool,
}

/// The shape of the side-by-side cost runs (`auth-cost`, `metrics-cost`,
/// `tls-cost`).
#[derive(Args, Clone)]
pub struct CostArgs {
    /// Records loaded before each side's run.
    #[arg(long, default_value_t = 20_000)]
    records: u64,
    /// Gets, then puts, of each side's run.
    #[arg(long, default_value_t = 50_000)]
    operations: u64,
    /// Pairs of runs (the order alternates).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
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
        /// run (redis, etcd, etcd-3, postgres, hyperdex; scans only on
        /// tessera, postgres and hyperdex).
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
        /// tessera, hyperdex (started for the run), or both, one after the
        /// other, with each one's latency growth per subspace.
        #[arg(long, default_value = "tessera")]
        store: String,
        /// Port of the HyperDex cluster `--store` starts.
        #[arg(long, default_value_t = 19900)]
        baseline_port: u16,
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
    /// The layout advisor against real runs: for a workload file (API.md
    /// §12.4), the optimizer's top layouts and each heuristic's, each
    /// created as a scratch space `tessera_layouts_N`, loaded and run with
    /// the workload's mix; predicted vs measured throughput, the mean
    /// absolute relative error, Kendall tau-b and the measured rank of the
    /// predicted best. The model's parameters are the cluster's calibrated
    /// ones (`tessera calibrate`), else the defaults. The space's
    /// partitions and f are the workload's (`--partitions` is not used).
    Layouts {
        /// The workload file.
        #[arg(long)]
        workload: PathBuf,
        /// How many of the optimizer's top layouts to measure, one per
        /// group of equal predictions (each heuristic's layout is
        /// measured too).
        #[arg(long, default_value_t = 5)]
        layouts: usize,
        /// How many layouts to draw at random from the rest of the
        /// ranking, one per group of equal predictions, as the thesis
        /// measured five beside its best five.
        #[arg(long, default_value_t = 5)]
        random: usize,
        /// Seeds the random draw: one ranking and one seed draw the same
        /// layouts.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Measure only the layout the workload's space description
        /// declares (its subspaces and indexes), against its prediction,
        /// instead of the optimizer's and the heuristics' layouts.
        #[arg(long)]
        declared: bool,
        /// Seconds the mix runs on each layout.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Objects loaded into each layout, instead of the workload's count
        /// (the model is told the same number).
        #[arg(long)]
        objects: Option<u64>,
        /// Operations in flight: as many as `calibrate` measures with, so
        /// that the cluster is as saturated as the model's costs assume.
        #[arg(long, default_value_t = tessera_bench::calibrate::SATURATING_WORKERS)]
        workers: usize,
        /// Times each layout is measured, interleaved (every layout once,
        /// then again); the comparison uses each layout's median.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Also run each class of the mix alone for `--seconds` on the
        /// same space: the model's error per class kind. Classes that only
        /// read run before the mix, on the space as loaded; those that
        /// write, after it.
        #[arg(long)]
        classes: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
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
        /// Repeat the whole run this many times on the same cluster and
        /// report each phase's spread over the runs.
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// tessera, hyperdex (started for the run), or both, one after the
        /// other, with the ratios of their throughput and latencies.
        #[arg(long, default_value = "tessera")]
        store: String,
        /// Port of the HyperDex cluster `--store` starts.
        #[arg(long, default_value_t = 19900)]
        baseline_port: u16,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Get and put throughput on a plain space and on one `with
    /// authorization` whose calls carry a macaroon, side by side on one
    /// cluster, and the ratio (the cost of authorization).
    AuthCost {
        #[command(flatten)]
        cost: CostArgs,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Get and put throughput with metrics off and on, side by side on
    /// `--local` clusters, and the ratio (the cost of metrics).
    MetricsCost {
        #[command(flatten)]
        cost: CostArgs,
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Get and put throughput in plain TCP and with TLS on every
    /// connection, side by side on `--local` clusters, and the ratio (the
    /// cost of TLS). Needs a certificate for 127.0.0.1 and its CA.
    TlsCost {
        #[command(flatten)]
        cost: CostArgs,
        #[command(flatten)]
        security: crate::security::ServerSecurity,
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
    /// Global secondary indexes beside SLIK's figures: lookup vs get,
    /// overwrites vs number of indexes, lookups vs indexlets beside a
    /// local-index fan-out, live creation and split under load, and a
    /// string range vs PostgreSQL's B-tree.
    GlobalIndex {
        /// Tiny sizes and short time limits: a few seconds per scenario.
        #[arg(long)]
        quick: bool,
        /// Objects per space (default 20000; 200 with --quick).
        #[arg(long)]
        records: Option<u64>,
        /// Operations per measured phase (default 10000; 100 with --quick).
        #[arg(long)]
        operations: Option<u64>,
        /// Objects indexed live by `create` (default 100000, e.g. 1000000;
        /// 500 with --quick).
        #[arg(long)]
        create_records: Option<u64>,
        /// Global indexes of the `put` spaces (default 0,1,2,4,10; 0,1,2
        /// with --quick).
        #[arg(long, value_delimiter = ',')]
        index_counts: Option<Vec<usize>>,
        /// Indexlets of the `indexlets` scenario (default 1,2,4,8; 1,2 with
        /// --quick).
        #[arg(long, value_delimiter = ',')]
        indexlet_counts: Option<Vec<u32>>,
        /// Scenarios to run (default all): lookup, put, indexlets, create,
        /// split, range.
        #[arg(long, value_delimiter = ',')]
        only: Option<Vec<tessera_bench::global_index::GiScenario>>,
        /// Port of the PostgreSQL server `range` starts.
        #[arg(long, default_value_t = 19960)]
        baseline_port: u16,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Operations in flight of the concurrent phases.
        #[arg(long, default_value_t = 16)]
        workers: usize,
        /// Per-phase time limit in seconds (default 60; 20 with --quick).
        #[arg(long)]
        time_limit: Option<u64>,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Replex spaces against the HyperDex layout with the same failures
    /// tolerated (Replex §5.1): YCSB load (insert throughput and latency),
    /// A, B, C and F, copies and disk bytes per object, one layout after
    /// the other on one cluster (`--partitions 12` gives the paper's 3 × 4
    /// hybrid).
    Replex {
        /// Records loaded into each layout's space.
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        /// Operations of each YCSB workload.
        #[arg(long, default_value_t = 20_000)]
        operations: u64,
        /// Layouts to run (default all): hyperdex-f2, replex-3,
        /// hyperdex-f1, replex-2.
        #[arg(long, value_delimiter = ',')]
        layouts: Option<Vec<String>>,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Operations in flight.
        #[arg(long, default_value_t = 16)]
        workers: usize,
        /// Per-phase time limit in seconds.
        #[arg(long, default_value_t = 120)]
        time_limit: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Recovery after one and two daemon kills (Replex §5.2): the time until
    /// every region is whole again and the read throughput meanwhile (half
    /// gets, half searches by `recno`, each answer checked), for Replex-2,
    /// Replex-3 and the HyperDex layout; with `--sweep`, Replex-3 over every
    /// hybrid grouping, killing a daemon of the key subspace and one of the
    /// replex (§5.3). Every case runs on a fresh cluster of processes.
    ReplexRecovery {
        /// Records loaded.
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        /// Daemons started before the load (one spare per failure joins at
        /// its kill, as the paper's spare machines).
        #[arg(long, default_value_t = 5)]
        daemons: usize,
        /// Partitions of the space.
        #[arg(long, default_value_t = 12)]
        partitions: u32,
        /// Layouts (default hyperdex-f2, replex-3, replex-2).
        #[arg(long, value_delimiter = ',')]
        layouts: Option<Vec<String>>,
        /// Failures per case: 1, 2 or both (default 1,2).
        #[arg(long, value_delimiter = ',')]
        failures: Option<Vec<usize>>,
        /// The side of the first victim: key or replex.
        #[arg(long, default_value = "key")]
        victim: tessera_bench::replex::Victim,
        /// Replex-3 over every hybrid grouping of the partitions, one
        /// failure, a victim on each side (instead of the cases above).
        #[arg(long)]
        sweep: bool,
        /// The coordinator's port; the daemons take the next ones.
        #[arg(long, default_value_t = 19760)]
        port: u16,
        /// Readers in flight (and puts in flight while loading).
        #[arg(long, default_value_t = 16)]
        workers: usize,
        /// Seconds of reads measured before the first kill.
        #[arg(long, default_value_t = 5)]
        before: u64,
        /// Seconds between the first and the second kill.
        #[arg(long, default_value_t = 5)]
        second_after: u64,
        /// Bound of each wait, in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Tessera and every baseline (Redis, etcd with 1 and 3 members,
    /// PostgreSQL, HyperDex) that is installed or can be, with the same
    /// load, and a ratio table (Tessera ÷ baseline).
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

impl ClusterArgs {
    fn spec(&self) -> ClusterSpec {
        ClusterSpec {
            local: self.local,
            daemons: self.daemons,
            local_port: self.local_port,
            host: self.host.clone(),
            port: self.port,
            partitions: self.partitions,
            fsync_every_commit: self.fsync_every_commit,
            metrics: self.metrics,
            transport: tessera_client::Transport::plain(),
            launch: launch_dev(),
        }
    }
}

impl LoadArgs {
    fn load(&self) -> Load {
        Load {
            workers: self.workers,
            time_limit: Duration::from_secs(self.time_limit),
            json: self.json.clone(),
        }
    }
}

/// The secret and macaroon of `bench auth-cost`: a root macaroon with one
/// `time < N` caveat a day ahead, so that each operation decodes a token
/// and checks a caveat as a real one would.
fn bench_authorization() -> anyhow::Result<tessera_client::Authorization> {
    use tessera_daemon::auth_macaroon::mint;
    const SECRET: &[u8] = b"bench secret";
    let mut macaroon = mint::new(b"bench", b"usertable", SECRET);
    // The benchmark's wall clock.
    #[allow(clippy::disallowed_methods)]
    let now = std::time::SystemTime::now();
    let day_ahead = now.duration_since(std::time::UNIX_EPOCH)?.as_secs() + 86_400;
    mint::first_party(&mut macaroon, format!("time < {day_ahead}").as_bytes());
    Ok(tessera_client::Authorization {
        macaroons: vec![mint::serialize_v2(&macaroon)],
        secret: Some(SECRET.to_vec()),
    })
}

/// A local cluster runs as `tessera dev` does, in this process.
fn launch_dev() -> Launch {
    Arc::new(|spec: LocalSpec, stop| {
        let durability = if spec.fsync_every_commit {
            Durability::Always
        } else {
            Durability::Interval
        };
        let options = crate::dev::DevOptions {
            daemons: spec.daemons,
            port: spec.port,
            data: spec.data,
            durability,
            metrics: spec.metrics,
            transport: spec.transport,
        };
        Box::pin(crate::dev::run(options, async move {
            let _ = stop.await;
        }))
    })
}

/// Shows each benchmark phase's progress on stderr: the larger of the
/// operations done and the time used, against the budget and the limit.
/// Plain lines come at each tenth, so a minute-long phase writes about ten.
fn report_phases() {
    let state = std::sync::Mutex::new((crate::progress::Progress::new("bench"), None));
    tessera_bench::driver::observe_phases(Box::new(move |p| {
        let by_ops = p.done.saturating_mul(100) / p.budget.max(1);
        let by_time =
            (p.elapsed.as_secs_f64() * 100.0 / p.time_limit.as_secs_f64().max(1e-9)) as u64;
        let percent = if p.finished {
            100
        } else {
            u8::try_from(by_ops.max(by_time).min(99)).unwrap_or(99)
        };
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        let (progress, tenth) = &mut *state;
        if !progress.is_terminal() && *tenth == Some(percent / 10) && !p.finished {
            return;
        }
        *tenth = Some(percent / 10);
        progress.update(
            percent,
            &format!(
                "{} {}: {} of {} operations, {:.0} s of {:.0} s",
                p.store,
                p.phase,
                p.done,
                p.budget,
                p.elapsed.as_secs_f64(),
                p.time_limit.as_secs_f64()
            ),
        );
        if p.finished {
            progress.finish();
            *tenth = None;
        }
    }));
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    report_phases();
    match args.scenario {
        Scenario::Ycsb {
            workload,
            records,
            operations,
            no_load,
            distribution,
            store,
            baseline_port,
            cluster,
            load,
        } => {
            let mut w = Workload::core(workload, records, operations)
                .with_context(|| format!("no YCSB core workload {workload:?} (a–f)"))?;
            if let Some(d) = distribution {
                w.distribution = d;
            }
            let (cluster, load) = (cluster.spec(), load.load());
            runs::ycsb(w, no_load, &store, baseline_port, &cluster, &load).await
        }
        Scenario::Subspaces {
            max,
            records,
            store,
            baseline_port,
            cluster,
            load,
        } => {
            let (cluster, load) = (cluster.spec(), load.load());
            runs::subspaces(max, records, &store, baseline_port, &cluster, &load).await
        }
        Scenario::SearchVsScan {
            records,
            searches,
            cluster,
            load,
        } => runs::search_vs_scan(records, searches, &cluster.spec(), &load.load()).await,
        Scenario::Layouts {
            workload,
            layouts,
            random,
            seed,
            declared,
            seconds,
            objects,
            workers,
            runs,
            classes,
            cluster,
            json,
        } => {
            let text = std::fs::read_to_string(&workload)
                .with_context(|| format!("reading the workload {}", workload.display()))?;
            let options = tessera_bench::layouts::LayoutsOptions {
                sampling: tessera_advisor::Sampling {
                    top: layouts,
                    random,
                    seed,
                },
                declared,
                seconds,
                objects,
                workers: workers.max(1),
                runs,
                classes,
            };
            runs::layouts(&text, &options, &cluster.spec(), &json).await
        }
        Scenario::ScanShare {
            records,
            operations,
            cluster,
            load,
        } => runs::scan_share(records, operations, &cluster.spec(), &load.load()).await,
        Scenario::Latency {
            records,
            operations,
            runs: repeat,
            store,
            baseline_port,
            cluster,
            load,
        } => {
            let (cluster, load) = (cluster.spec(), load.load());
            runs::latency(
                records,
                operations,
                repeat,
                &store,
                baseline_port,
                &cluster,
                &load,
            )
            .await
        }
        Scenario::AuthCost {
            cost,
            cluster,
            load,
        } => {
            let auth = bench_authorization()?;
            runs::auth_cost(
                cost.records,
                cost.operations,
                cost.rounds,
                &auth,
                &cluster.spec(),
                &load.load(),
            )
            .await
        }
        Scenario::MetricsCost {
            cost,
            cluster,
            load,
        } => {
            let (records, operations, rounds) = (cost.records, cost.operations, cost.rounds);
            runs::metrics_cost(records, operations, rounds, &cluster.spec(), &load.load()).await
        }
        Scenario::TlsCost {
            cost,
            security,
            cluster,
            load,
        } => {
            let tls = security.link()?.transport;
            runs::tls_cost(
                cost.records,
                cost.operations,
                cost.rounds,
                &tls,
                &cluster.spec(),
                &load.load(),
            )
            .await
        }
        Scenario::Compare {
            quick,
            records,
            operations,
            ycsb_operations,
            skip,
            baseline_port,
            cluster,
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
            runs::compare(size, &skip, baseline_port, &cluster.spec(), &json).await
        }
        Scenario::GlobalIndex {
            quick,
            records,
            operations,
            create_records,
            index_counts,
            indexlet_counts,
            only,
            baseline_port,
            cluster,
            workers,
            time_limit,
            json,
        } => {
            use tessera_bench::global_index::{GiOptions, GiScenario};
            let pick = |full: u64, small: u64| if quick { small } else { full };
            let options = GiOptions {
                records: records.unwrap_or(pick(20_000, 200)),
                operations: operations.unwrap_or(pick(10_000, 100)),
                create_records: create_records.unwrap_or(pick(100_000, 500)),
                // Quick runs keep the layouts small: 4 regions per part at most.
                partitions: if quick {
                    cluster.partitions.min(4)
                } else {
                    cluster.partitions
                },
                index_counts: index_counts.unwrap_or_else(|| {
                    if quick {
                        vec![0, 1, 2]
                    } else {
                        vec![0, 1, 2, 4, 10]
                    }
                }),
                indexlet_counts: indexlet_counts.unwrap_or_else(|| {
                    if quick {
                        vec![1, 2]
                    } else {
                        vec![1, 2, 4, 8]
                    }
                }),
                workers,
                time_limit: Duration::from_secs(time_limit.unwrap_or(pick(60, 20))),
                scenarios: only.unwrap_or_else(|| GiScenario::ALL.to_vec()),
                postgres_port: baseline_port,
                daemons: cluster.daemons,
            };
            runs::global_index(&options, &cluster.spec(), &json).await
        }
        Scenario::Replex {
            records,
            operations,
            layouts,
            cluster,
            workers,
            time_limit,
            json,
        } => {
            use tessera_bench::replex::ReplexLayout;
            let layouts = match layouts {
                None => ReplexLayout::ALL.to_vec(),
                Some(names) => names
                    .iter()
                    .map(|n| {
                        ReplexLayout::ALL
                            .into_iter()
                            .find(|l| l.name() == *n)
                            .ok_or_else(|| {
                                anyhow::anyhow!(
                                    "unknown layout {n:?} (hyperdex-f2, replex-3, hyperdex-f1, replex-2)"
                                )
                            })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?,
            };
            let size = CompareSize {
                records,
                operations: 0,
                ycsb_operations: operations,
                workers,
                fieldcount: 10,
                fieldlength: 100,
                time_limit: Duration::from_secs(time_limit),
            };
            runs::replex(&layouts, size, &cluster.spec(), &json).await
        }
        Scenario::ReplexRecovery {
            records,
            daemons,
            partitions,
            layouts,
            failures,
            victim,
            sweep,
            port,
            workers,
            before,
            second_after,
            timeout,
            json,
        } => {
            use tessera_bench::replex::{
                hybrid_groups, RecoveryCase, RecoveryOptions as ReplexRecoveryOptions,
                ReplexLayout, Victim,
            };
            let cases: Vec<RecoveryCase> = if sweep {
                let mut cases = Vec::new();
                for n1 in (1..=partitions).filter(|n| partitions.is_multiple_of(*n)) {
                    for victim in [Victim::Key, Victim::Replex] {
                        cases.push(RecoveryCase {
                            layout: ReplexLayout::Replex3,
                            groups: (n1, partitions / n1),
                            failures: 1,
                            victim,
                        });
                    }
                }
                cases
            } else {
                let names = layouts.unwrap_or_else(|| {
                    ["hyperdex-f2", "replex-3", "replex-2"]
                        .map(String::from)
                        .to_vec()
                });
                let mut cases = Vec::new();
                for failures in failures.unwrap_or_else(|| vec![1, 2]) {
                    for name in &names {
                        let layout = ReplexLayout::ALL
                            .into_iter()
                            .find(|l| l.name() == *name)
                            .ok_or_else(|| anyhow::anyhow!("unknown layout {name:?}"))?;
                        if failures > layout.tolerate() as usize {
                            continue;
                        }
                        cases.push(RecoveryCase {
                            layout,
                            groups: hybrid_groups(partitions),
                            failures,
                            victim,
                        });
                    }
                }
                cases
            };
            let dir = tempfile::Builder::new()
                .prefix("tessera-bench-replex-")
                .tempdir()
                .context("creating a temporary directory")?;
            let options = ReplexRecoveryOptions {
                exe: std::env::current_exe().context("finding the tessera binary")?,
                dir: dir.path().to_path_buf(),
                port,
                daemons,
                partitions,
                records,
                workers,
                before: Duration::from_secs(before),
                second_after: Duration::from_secs(second_after),
                timeout: Duration::from_secs(timeout),
            };
            runs::replex_recovery(&options, &cases, crate::shutdown_signal(), &json).await
        }
        Scenario::Recovery {
            records,
            runs: rounds,
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
                runs: rounds,
                workers,
                rejoin,
                timeout: Duration::from_secs(timeout),
            };
            // Ctrl-C or SIGTERM drops the run, whose guard kills the servers.
            let failure_timeout = tessera_coordinator::FAILURE_TIMEOUT_DEFAULT;
            runs::recovery(&options, failure_timeout, crate::shutdown_signal(), &json).await
        }
    }
}
