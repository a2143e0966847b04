//! The benchmark runs behind `tessera bench`: each scenario against its
//! cluster, its results printed as a table (and written as JSON on request),
//! and the comparison of Tessera with the baselines and its ratio table.
//! The binary maps its command line onto these functions.

use crate::baselines::{self, Server};
use crate::cluster::{with_cluster, ClusterSpec};
use crate::driver::{results_table, PhaseResult, Store};
use crate::recovery::{self, RecoveryOptions};
use crate::scenarios::{self, CompareSize};
use crate::stores::etcd::EtcdStore;
use crate::stores::postgres::PostgresStore;
use crate::stores::redis::RedisStore;
use crate::stores::tessera::{usertable_description, TesseraStore};
use crate::workload::Workload;
use anyhow::Context;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tessera_client::{Admin, Client};

/// What Tessera promises about acknowledged writes in these runs.
const TESSERA_DURABILITY: &str =
    "every replica (tolerate 1 failure: 2 per region) writes to the OS before the ack; fsync every 200 ms";
const TESSERA_F0_DURABILITY: &str =
    "tolerate 0 failures: 1 replica per region, writes to the OS before the ack; fsync every 200 ms";
const TESSERA_FSYNC_DURABILITY: &str =
    "each region's tail (of 2 replicas) fsyncs its commit before the ack, the other replica by its next fsync (daemons run with durability always)";
const TESSERA_KV_DURABILITY: &str =
    "every replica (tolerate 1 failure: 2 per region) writes to the OS before the ack; fsync every 200 ms; no subspace";
const TESSERA_F0_FSYNC_DURABILITY: &str =
    "tolerate 0 failures: 1 replica per region, which fsyncs each commit before the ack (durability always)";

/// The labels of the Tessera runs in the comparison.
const MAIN: &str = "tessera f=1";
const F0: &str = "tessera f=0";
const FSYNC: &str = "tessera f=1 fsync";
const F0_FSYNC: &str = "tessera f=0 fsync";
/// The same with a key-value usertable (no `recno` subspace), against etcd.
const KV: &str = "tessera kv f=1";
const KV_FSYNC: &str = "tessera kv f=1 fsync";
const KV_F0_FSYNC: &str = "tessera kv f=0 fsync";

/// The load shape shared by the scenarios.
#[derive(Clone, Debug)]
pub struct Load {
    /// Operations in flight (one task each).
    pub workers: usize,
    /// Each phase stops after this long even if operations remain.
    pub time_limit: Duration,
    /// Where to write every result as JSON.
    pub json: Option<PathBuf>,
}

/// Runs `scenario` against the cluster `c` names, then reports its results.
async fn run_and_report(
    c: &ClusterSpec,
    load: &Load,
    scenario: impl AsyncFnOnce(&str) -> anyhow::Result<Vec<PhaseResult>>,
) -> anyhow::Result<()> {
    let results = with_cluster(c, scenario).await?;
    report(load, &results)
}

/// Prints `results` as a table, and writes them as JSON when asked.
fn report(load: &Load, results: &[PhaseResult]) -> anyhow::Result<()> {
    print!("{}", results_table(results));
    write_json(&load.json, &serde_json::json!({ "results": results }))
}

fn write_json(path: &Option<PathBuf>, value: &serde_json::Value) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("bench: results written to {}", path.display());
    }
    Ok(())
}

/// A Tessera usertable space made fresh, tolerating `tolerate` failures,
/// with its `recno` subspace when `recno_subspace`.
async fn tessera_usertable(
    coordinator: &str,
    name: &str,
    partitions: u32,
    tolerate: u32,
    recno_subspace: bool,
) -> anyhow::Result<Arc<dyn Store>> {
    let admin = Admin::new(coordinator);
    scenarios::fresh_space(
        &admin,
        name,
        &usertable_description(name, 10, recno_subspace, partitions, tolerate),
    )
    .await?;
    let client = Client::connect(coordinator).await?;
    scenarios::wait_space(&client, name).await?;
    Ok(Arc::new(TesseraStore::new(client, name, 10)))
}

/// Replex spaces against the HyperDex layout (`bench replex`): each
/// layout of `layouts`, loaded with `size.records` records and run through
/// YCSB A, B, C and F, one after the other on one cluster.
pub async fn replex(
    layouts: &[crate::replex::ReplexLayout],
    size: CompareSize,
    c: &ClusterSpec,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    let runs = with_cluster(c, async |coordinator: &str| {
        crate::replex::steady(coordinator, layouts, size, c.partitions).await
    })
    .await?;
    print!("{}", crate::replex::table(&runs));
    write_json(
        json,
        &serde_json::json!({ "size": size, "partitions": c.partitions, "runs": runs }),
    )
}

/// A YCSB core workload: against the baseline `store` (redis, etcd,
/// postgres, hyperdex) started for the run, or against Tessera (a fresh usertable
/// loaded first unless `no_load`).
pub async fn ycsb(
    w: Workload,
    no_load: bool,
    store: &str,
    baseline_port: u16,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    if store != "tessera" {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tessera-bench-{store}-"))
            .tempdir()?;
        let (mut server, target) =
            start_baseline(store, dir.path(), baseline_port, c.partitions).await?;
        eprintln!("bench: {store} ({})", server.durability);
        let results = scenarios::ycsb(
            target,
            Arc::new(w.clone()),
            load.workers,
            load.time_limit,
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
    with_cluster(c, async |coordinator: &str| {
        let store = if no_load {
            let client = Client::connect(coordinator).await?;
            Arc::new(TesseraStore::new(client, "usertable", w.fieldcount)) as Arc<dyn Store>
        } else {
            tessera_usertable(coordinator, "usertable", c.partitions, 1, true).await?
        };
        let results = scenarios::ycsb(
            store,
            Arc::new(w.clone()),
            load.workers,
            load.time_limit,
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

/// Which of Tessera and HyperDex a scenario's `--store` names: "tessera",
/// "hyperdex" or "both".
fn tessera_and_hyperdex(store: &str) -> anyhow::Result<(bool, bool)> {
    Ok(match store {
        "tessera" => (true, false),
        "hyperdex" => (false, true),
        "both" => (true, true),
        other => anyhow::bail!("unknown store {other:?} (tessera, hyperdex, both)"),
    })
}

/// Runs `body` on a HyperDex cluster (a coordinator and 3 daemons) started
/// on 127.0.0.1:`port` for it, and stops the cluster whatever `body`
/// returns.
async fn with_hyperdex<T>(
    port: u16,
    body: impl AsyncFnOnce(&baselines::HyperdexCluster) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let dir = tempfile::Builder::new()
        .prefix("tessera-bench-hyperdex-")
        .tempdir()?;
    let mut server = baselines::start_hyperdex(dir.path(), port).await?;
    eprintln!("bench: hyperdex ({})", server.durability);
    let result = match server.hyperdex() {
        Some(cluster) => body(cluster).await,
        None => Err(anyhow::anyhow!("not a HyperDex cluster")),
    };
    tokio::task::block_in_place(|| server.stop());
    result
}

/// Put latency and throughput with 0 to `max` non-key subspaces, on
/// Tessera, on HyperDex (`store` "hyperdex", started for the run on
/// `baseline_port`), or on both one after the other ("both"), with each
/// system's latency growth per subspace (HyperDex paper, Fig. 10).
pub async fn subspaces(
    max: usize,
    records: u64,
    store: &str,
    baseline_port: u16,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    let counts: Vec<usize> = (0..=max).collect();
    let (workers, partitions, limit) = (load.workers, c.partitions, load.time_limit);
    let (tessera, hyperdex) = tessera_and_hyperdex(store)?;
    let mut results = Vec::new();
    let mut slopes = Vec::new();
    if tessera {
        let mine = with_cluster(c, async |coordinator: &str| {
            scenarios::subspaces(coordinator, &counts, records, workers, partitions, limit).await
        })
        .await?;
        slopes.push(scenarios::subspace_slope("tessera", &mine));
        results.extend(mine);
    }
    if hyperdex {
        let theirs = with_hyperdex(baseline_port, async |cluster| {
            let mut theirs = Vec::new();
            for &k in &counts {
                let name = format!("bench_sub{k}");
                let description = scenarios::subspaces_description(&name, k, partitions);
                let store: Arc<dyn Store> = Arc::new(cluster.space(&name, &description).await?);
                theirs.push(scenarios::subspaces_phase(store, k, records, workers, limit).await?);
            }
            Ok(theirs)
        })
        .await?;
        slopes.push(scenarios::subspace_slope("hyperdex", &theirs));
        results.extend(theirs);
    }
    print!("{}", results_table(&results));
    let per = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for s in &slopes {
        println!(
            "{}: put latency grows {} µs (mean) and {} µs (p50) per subspace, from a mean of {} µs with none",
            s.store,
            per(s.mean_us_per_subspace),
            per(s.p50_us_per_subspace),
            per(s.mean_us_without)
        );
    }
    if let [ours, theirs] = slopes.as_slice() {
        if let (Some(a), Some(b)) = (ours.mean_us_per_subspace, theirs.mean_us_per_subspace) {
            println!(
                "slope per subspace, Tessera ÷ HyperDex (mean): {:.2}",
                a / b
            );
        }
    }
    write_json(
        &load.json,
        &serde_json::json!({ "results": results, "slopes": slopes }),
    )
}

/// Equality search with a matching subspace vs. one over every region.
pub async fn search_vs_scan(
    records: u64,
    searches: u64,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    with_cluster(c, async |coordinator: &str| {
        let r = scenarios::search_vs_scan(
            coordinator,
            records,
            searches,
            load.workers,
            c.partitions,
            load.time_limit,
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

/// `bench layouts`: the advisor's predictions for the workload file `text`
/// against each sampled layout measured (`crate::layouts`).
pub async fn layouts(
    text: &str,
    options: &crate::layouts::LayoutsOptions,
    c: &ClusterSpec,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    with_cluster(c, async |coordinator: &str| {
        let admin = Admin::new(coordinator);
        let client = Client::connect(coordinator).await?;
        let progress = |what: &str| eprintln!("bench layouts: {what}");
        let report = crate::layouts::run(&admin, &client, text, options, &progress).await?;
        print!("{}", report.text());
        write_json(json, &report.json())
    })
    .await
}

/// Latency of a read/scan mix as the scan share grows.
pub async fn scan_share(
    records: u64,
    operations: u64,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    let (workers, limit) = (load.workers, load.time_limit);
    run_and_report(c, load, async |coordinator: &str| {
        let store =
            tessera_usertable(coordinator, "bench_scan_share", c.partitions, 1, true).await?;
        let results = scenarios::scan_share(store, records, operations, workers, limit).await;
        let _ = Admin::new(coordinator).rm_space("bench_scan_share").await;
        results
    })
    .await
}

/// Get and put latency distributions.
#[allow(clippy::too_many_arguments)]
pub async fn latency(
    records: u64,
    operations: u64,
    runs: usize,
    store: &str,
    baseline_port: u16,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    let (workers, partitions, limit) = (load.workers, c.partitions, load.time_limit);
    let (tessera, hyperdex) = tessera_and_hyperdex(store)?;
    let runs = runs.max(1);
    let number = |run: usize, mut rs: Vec<PhaseResult>| {
        if runs > 1 {
            for r in &mut rs {
                r.phase = format!("{} #{run}", r.phase);
            }
        }
        rs
    };
    // Each system's runs: `runs[i]` holds run i's phases.
    let mut per_store: Vec<Vec<Vec<PhaseResult>>> = Vec::new();
    if tessera {
        let mine = with_cluster(c, async |coordinator: &str| {
            let mut all = Vec::new();
            for run in 1..=runs {
                let rs = scenarios::latency(
                    coordinator,
                    records,
                    operations,
                    workers,
                    partitions,
                    limit,
                )
                .await?;
                all.push(number(run, rs));
            }
            Ok(all)
        })
        .await?;
        per_store.push(mine);
    }
    if hyperdex {
        let theirs = with_hyperdex(baseline_port, async |cluster| {
            let mut all = Vec::new();
            for run in 1..=runs {
                // A fresh space per run, as Tessera's.
                let name = format!("bench_latency{run}");
                let store: Arc<dyn Store> =
                    Arc::new(cluster.usertable(&name, 10, partitions).await?);
                let rs =
                    scenarios::latency_phases(store, records, operations, workers, limit).await?;
                all.push(number(run, rs));
            }
            Ok(all)
        })
        .await?;
        per_store.push(theirs);
    }
    let results: Vec<PhaseResult> = per_store.iter().flatten().flatten().cloned().collect();
    print!("{}", results_table(&results));
    if runs > 1 {
        for store_runs in &per_store {
            print!("\n{}", spread_table(store_runs));
        }
    }
    if let [ours, theirs] = per_store.as_slice() {
        let ours: Vec<PhaseResult> = ours.iter().flatten().cloned().collect();
        let theirs: Vec<PhaseResult> = theirs.iter().flatten().cloned().collect();
        println!("\nTessera ÷ HyperDex, run by run (latency ratios above 1: Tessera slower)");
        print!(
            "{}",
            scenarios::ratio_table(&scenarios::ratios(&ours, &theirs))
        );
    }
    write_json(&load.json, &serde_json::json!({ "results": results }))
}

/// How each phase's throughput and latency quantiles moved over repeated
/// runs (`runs[i]` holds run i's phases, the same phases in each run):
/// minimum, median and maximum of each, and the throughput's max ÷ min.
pub fn spread_table(runs: &[Vec<PhaseResult>]) -> String {
    let mut out = format!(
        "{:<10} {:<10} {:<8} {:>4} {:>20} {:>7} {:>20} {:>20} {:>20}\n",
        "store",
        "phase",
        "op",
        "runs",
        "ops/s min/med/max",
        "max/min",
        "p50 µs min/med/max",
        "p99 µs min/med/max",
        "p999 µs min/med/max"
    );
    let Some(first) = runs.first() else {
        return out;
    };
    for (i, phase) in first.iter().enumerate() {
        // The run's number, appended to every phase's name, is left out.
        let name = phase.phase.split(" #").next().unwrap_or(&phase.phase);
        for kind in phase.ops.keys() {
            let stats: Vec<(&PhaseResult, &crate::driver::OpStats)> = runs
                .iter()
                .filter_map(|run| run.get(i))
                .filter_map(|r| r.ops.get(kind).map(|s| (r, s)))
                .collect();
            let ops_s: Vec<f64> = stats
                .iter()
                .map(|(r, s)| (s.count + s.errors) as f64 / r.seconds.max(1e-9))
                .collect();
            let quantile = |q: fn(&crate::driver::OpStats) -> u64| {
                let (lo, mid, hi) = min_med_max(stats.iter().map(|(_, s)| q(s) as f64).collect());
                format!("{lo:.0}/{mid:.0}/{hi:.0}")
            };
            let (lo, mid, hi) = min_med_max(ops_s);
            out.push_str(&format!(
                "{:<10} {:<10} {:<8} {:>4} {:>20} {:>7.2} {:>20} {:>20} {:>20}\n",
                phase.store,
                name,
                kind,
                stats.len(),
                format!("{lo:.0}/{mid:.0}/{hi:.0}"),
                hi / lo.max(1e-9),
                quantile(|s| s.p50_us),
                quantile(|s| s.p99_us),
                quantile(|s| s.p999_us),
            ));
        }
    }
    out
}

/// The smallest, the median (the lower middle of an even count) and the
/// largest of `values`; zeros when there are none.
fn min_med_max(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    match (values.first(), values.last()) {
        (Some(&lo), Some(&hi)) => (lo, values[(values.len() - 1) / 2], hi),
        _ => (0.0, 0.0, 0.0),
    }
}

/// Get and put throughput on local clusters with metrics off and on, one
/// after the other `rounds` times, and the ratio on ÷ off per phase (the
/// cost of counting every request, message and heartbeat).
pub async fn metrics_cost(
    records: u64,
    operations: u64,
    rounds: usize,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    let configure = |spec: &mut ClusterSpec, on: bool| spec.metrics = on;
    local_on_off("metrics", records, operations, rounds, c, load, configure).await
}

/// Get and put throughput on local clusters in plain TCP and with TLS on
/// every connection (`tls`, a transport with a certificate), one after
/// the other `rounds` times, and the ratio TLS ÷ plain per phase.
pub async fn tls_cost(
    records: u64,
    operations: u64,
    rounds: usize,
    tls: &tessera_client::Transport,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        tls.is_tls() && tls.can_serve(),
        "tls-cost needs --tls-ca, --tls-cert and --tls-key"
    );
    let configure = |spec: &mut ClusterSpec, on: bool| {
        spec.transport = if on {
            tls.clone()
        } else {
            tessera_client::Transport::plain()
        };
    };
    local_on_off("tls", records, operations, rounds, c, load, configure).await
}

/// Get and put throughput on local clusters with `what` off and on
/// (`configure` sets it in a cluster's spec), one after the other
/// `rounds` times — off first in odd rounds, on first in even ones, so
/// neither side always runs on a cold machine — and the ratio on ÷ off
/// per phase.
async fn local_on_off(
    what: &str,
    records: u64,
    operations: u64,
    rounds: usize,
    c: &ClusterSpec,
    load: &Load,
    configure: impl Fn(&mut ClusterSpec, bool),
) -> anyhow::Result<()> {
    anyhow::ensure!(c.local, "{what}-cost starts its own clusters: pass --local");
    let (workers, partitions, limit) = (load.workers, c.partitions, load.time_limit);
    let mut results = Vec::new();
    // Each cluster on ports of its own: the previous one's may linger.
    let stride = u16::try_from(c.daemons)
        .unwrap_or(u16::MAX)
        .saturating_add(40);
    let mut offset = 0u16;
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for on in order {
            let mut spec = ClusterSpec {
                local_port: c.local_port.saturating_add(offset),
                ..c.clone()
            };
            configure(&mut spec, on);
            offset = offset.saturating_add(stride);
            let transport = spec.transport.clone();
            let mut rs = with_cluster(&spec, async |coordinator: &str| {
                scenarios::get_put_over(
                    coordinator,
                    &transport,
                    records,
                    operations,
                    workers,
                    partitions,
                    limit,
                )
                .await
            })
            .await?;
            for r in &mut rs {
                r.store = format!("{what} {}", if on { "on" } else { "off" });
                r.phase = format!("{} #{}", r.phase, round + 1);
            }
            results.extend(rs);
        }
    }
    print!("{}", results_table(&results));
    let ratios = on_off_ratios(&results, what);
    write_json(
        &load.json,
        &serde_json::json!({ "results": results, "ratio_on_over_off": ratios }),
    )
}

/// Per phase (get, put), the mean throughput of the runs whose store is
/// `"{what} on"` over that of `"{what} off"`; printed, and returned for
/// the JSON file.
fn on_off_ratios(
    results: &[PhaseResult],
    what: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let mut ratios = serde_json::Map::new();
    for phase in ["get", "put"] {
        let mean = |store: String| {
            let picked: Vec<f64> = results
                .iter()
                .filter(|r| r.store == store && r.phase.split(' ').next() == Some(phase))
                .map(|r| r.throughput)
                .collect();
            picked.iter().sum::<f64>() / picked.len().max(1) as f64
        };
        let (off, on) = (mean(format!("{what} off")), mean(format!("{what} on")));
        let ratio = if off > 0.0 { on / off } else { f64::NAN };
        println!("{what} cost: {phase} {on:.0} ops/s with {what} on, {off:.0} with it off: ratio {ratio:.3}");
        ratios.insert(phase.to_string(), serde_json::json!(ratio));
    }
    ratios
}

/// The cost of authorization (API.md §10): get and put throughput on a
/// plain usertable and on one `with authorization` whose every call
/// carries a macaroon, side by side on one cluster, alternating the order
/// each round; prints the ratios (with / without). The caller mints the
/// macaroons (this crate verifies nothing).
pub async fn auth_cost(
    records: u64,
    operations: u64,
    rounds: usize,
    auth: &tessera_client::Authorization,
    c: &ClusterSpec,
    load: &Load,
) -> anyhow::Result<()> {
    let (workers, partitions, limit) = (load.workers, c.partitions, load.time_limit);
    let results = with_cluster(c, async |coordinator: &str| {
        let mut results = Vec::new();
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for authorized in order {
                let mut rs = if authorized {
                    scenarios::get_put_authorized(
                        coordinator,
                        records,
                        operations,
                        workers,
                        partitions,
                        limit,
                        auth,
                    )
                    .await?
                } else {
                    scenarios::get_put(coordinator, records, operations, workers, partitions, limit)
                        .await?
                };
                for r in &mut rs {
                    r.store = format!("auth {}", if authorized { "on" } else { "off" });
                    r.phase = format!("{} #{}", r.phase, round + 1);
                }
                results.extend(rs);
            }
        }
        Ok(results)
    })
    .await?;
    print!("{}", results_table(&results));
    let ratios = on_off_ratios(&results, "auth");
    write_json(
        &load.json,
        &serde_json::json!({ "results": results, "ratio_on_over_off": ratios }),
    )
}

/// Kill -9 of a region's point leader among real processes, until
/// `interrupted` completes (the guard of the run kills the servers then).
/// `failure_timeout` is the coordinator's, reported beside the figures.
pub async fn recovery(
    options: &RecoveryOptions,
    failure_timeout: Duration,
    interrupted: impl Future<Output = ()>,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    eprintln!(
        "bench: coordinator at 127.0.0.1:{}, {} daemons on the next ports, data in {}",
        options.port,
        recovery::DAEMONS,
        options.dir.display()
    );
    let report = tokio::select! {
        report = recovery::recovery(options) => report?,
        _ = interrupted => anyhow::bail!("interrupted; the servers were killed"),
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
    write_json(json, &value)
}

/// Recovery of replex spaces and the HyperDex layout after one and two
/// failures, and the hybrid sweep (`bench replex-recovery`; Replex §5.2,
/// §5.3): every case on a fresh cluster of processes.
pub async fn replex_recovery(
    options: &crate::replex::RecoveryOptions,
    cases: &[crate::replex::RecoveryCase],
    interrupted: impl Future<Output = ()>,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    let runs = tokio::select! {
        runs = crate::replex::recovery(options, cases) => runs?,
        _ = interrupted => anyhow::bail!("interrupted; the servers were killed"),
    };
    println!(
        "{} records of 10 × 100 bytes, {} partitions, {} daemons, {} readers (half gets, half searches by recno)",
        options.records, options.partitions, options.daemons, options.workers
    );
    print!("{}", crate::replex::recovery_table(&runs));
    write_json(
        json,
        &serde_json::json!({
            "records": options.records,
            "partitions": options.partitions,
            "daemons": options.daemons,
            "workers": options.workers,
            "runs": runs,
        }),
    )
}

/// The baselines of the comparison, in the order it runs them.
pub const BASELINES: [&str; 5] = ["redis", "etcd", "etcd-3", "postgres", "hyperdex"];

/// The baselines the comparison runs its load, read and update phases
/// on only: the three-member etcd is there for the puts at equal fault
/// tolerance (`f = 1`); its one-member run has the rest.
const PUTS_ONLY: [&str; 1] = ["etcd-3"];

/// Starts the baseline `name` (one of [`BASELINES`]) on 127.0.0.1:`port`
/// with its data in `dir`, and its store: PostgreSQL's table created, and
/// HyperDex's space (with `partitions`, like Tessera's) usable.
async fn start_baseline(
    name: &str,
    dir: &std::path::Path,
    port: u16,
    partitions: u32,
) -> anyhow::Result<(Server, Arc<dyn Store>)> {
    let server = match name {
        "redis" => baselines::start_redis(dir, port).await?,
        "etcd" => baselines::start_etcd(dir, port, 1).await?,
        "etcd-3" => baselines::start_etcd(dir, port, 3).await?,
        "postgres" => baselines::start_postgres(dir, port).await?,
        "hyperdex" => baselines::start_hyperdex(dir, port).await?,
        other => anyhow::bail!(
            "unknown store {other:?} (tessera, {})",
            BASELINES.join(", ")
        ),
    };
    // The server stops when dropped, so an error below stops it too.
    let store: Arc<dyn Store> = match (name, server.hyperdex()) {
        ("redis", _) => Arc::new(RedisStore::new(&server.addr)),
        ("etcd" | "etcd-3", _) => Arc::new(EtcdStore::new(name, &server.addr)),
        (_, Some(cluster)) => Arc::new(cluster.usertable("usertable", 10, partitions).await?),
        _ => {
            let pg = PostgresStore::new(&baselines::postgres_conninfo(port), 10);
            pg.create_table().await?;
            Arc::new(pg)
        }
    };
    Ok((server, store))
}

/// One Tessera configuration of the comparison.
struct TesseraRun {
    /// What its results are labelled.
    label: &'static str,
    /// Added to the cluster's ports, so that runs never share one.
    port_offset: u16,
    /// Daemons fsync every commit (`durability always`).
    fsync_every_commit: bool,
    /// The usertable's `tolerate`.
    tolerate: u32,
    /// The usertable has its `recno` subspace (what scans and HyperDex's
    /// layout need); without it the space is a key-value map, the job
    /// etcd does.
    recno_subspace: bool,
    /// Every phase and the YCSB suite; else load, read and update.
    full: bool,
}

/// One Tessera run of the comparison: a fresh cluster (when local) and a
/// usertable as `run` says, its phases and, when `run.full`, the YCSB
/// suite.
async fn tessera_run(
    c: &ClusterSpec,
    run: &TesseraRun,
    size: CompareSize,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<PhaseResult>> {
    eprintln!("bench: {} …", run.label);
    let (tolerate, recno_subspace, full) = (run.tolerate, run.recno_subspace, run.full);
    let c = ClusterSpec {
        local_port: c.local_port + run.port_offset,
        fsync_every_commit: run.fsync_every_commit,
        ..c.clone()
    };
    let mut results = with_cluster(&c, async |coordinator: &str| {
        let space = "bench_usertable";
        let store =
            tessera_usertable(coordinator, space, c.partitions, tolerate, recno_subspace).await?;
        let mut results = scenarios::compare_phase_set(store.clone(), size, full).await?;
        if full {
            notes.extend(add_ycsb_suite(store, size, &mut results).await?);
        }
        let _ = Admin::new(coordinator).rm_space(space).await;
        Ok::<_, anyhow::Error>(results)
    })
    .await?;
    for r in &mut results {
        r.store = run.label.to_string();
    }
    Ok(results)
}

/// Runs the YCSB suite on `store`, whose records the first phase of
/// `results` loaded, appends its results and returns its notes.
async fn add_ycsb_suite(
    store: Arc<dyn Store>,
    size: CompareSize,
    results: &mut Vec<PhaseResult>,
) -> anyhow::Result<Vec<String>> {
    let loaded = results
        .first()
        .and_then(|r| r.ops.get("INSERT"))
        .map_or(0, |s| s.count);
    let (ycsb, notes) = scenarios::ycsb_suite(store, size, loaded).await?;
    results.extend(ycsb);
    Ok(notes)
}

/// Tessera (tolerating 1 failure, 0 failures, and with an fsync per commit
/// when local) and every installed baseline not in `skip` under the same
/// load, printed as one results table and a ratio table (Tessera ÷
/// baseline), with the durability each run promised.
pub async fn compare(
    size: CompareSize,
    skip: &[String],
    baseline_port: u16,
    c: &ClusterSpec,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut notes = Vec::new();
    let mut durability = vec![(MAIN.to_string(), TESSERA_DURABILITY.to_string())];
    let run = |label, port_offset, fsync_every_commit, tolerate, recno_subspace, full| TesseraRun {
        label,
        port_offset,
        fsync_every_commit,
        tolerate,
        recno_subspace,
        full,
    };
    let tessera = tessera_run(c, &run(MAIN, 0, false, 1, true, true), size, &mut notes).await?;
    let mut all: Vec<PhaseResult> = tessera.clone();
    // Puts with one replica per region, and with an fsync per commit
    // (like etcd's): load, read and update only.
    let f0 = tessera_run(c, &run(F0, 40, false, 0, true, false), size, &mut notes).await?;
    durability.push((F0.to_string(), TESSERA_F0_DURABILITY.to_string()));
    all.extend(f0.clone());
    // Against etcd, also the space an etcd user would declare: keys and
    // values with no subspace to keep (etcd keeps none), at f = 1 and,
    // fsyncing every commit, at both fault tolerances.
    let with_etcd = !skip.iter().any(|s| s == "etcd" || s == "etcd-3");
    // One result set per run: `scenarios::ratios` pairs phases by name.
    let mut kv: Vec<Vec<PhaseResult>> = Vec::new();
    if with_etcd {
        kv.push(tessera_run(c, &run(KV, 200, false, 1, false, false), size, &mut notes).await?);
        durability.push((KV.to_string(), TESSERA_KV_DURABILITY.to_string()));
    }
    // With an fsync per commit at both fault tolerances: f = 0 survives
    // what a one-member etcd survives, f = 1 what a three-member one does.
    let (fsync, f0_fsync) = if c.local {
        let r = tessera_run(c, &run(FSYNC, 80, true, 1, true, false), size, &mut notes).await?;
        durability.push((FSYNC.to_string(), TESSERA_FSYNC_DURABILITY.to_string()));
        all.extend(r.clone());
        let r0 = tessera_run(
            c,
            &run(F0_FSYNC, 160, true, 0, true, false),
            size,
            &mut notes,
        )
        .await?;
        durability.push((
            F0_FSYNC.to_string(),
            TESSERA_F0_FSYNC_DURABILITY.to_string(),
        ));
        all.extend(r0.clone());
        if with_etcd {
            for (label, offset, tolerate, promise) in [
                (KV_FSYNC, 240, 1, TESSERA_FSYNC_DURABILITY),
                (KV_F0_FSYNC, 280, 0, TESSERA_F0_FSYNC_DURABILITY),
            ] {
                let r = run(label, offset, true, tolerate, false, false);
                kv.push(tessera_run(c, &r, size, &mut notes).await?);
                durability.push((label.to_string(), format!("{promise}; no subspace")));
            }
        }
        (r, r0)
    } else {
        notes.push(format!(
            "{FSYNC}, {F0_FSYNC}: not run (needs --local; a running cluster keeps its own durability)"
        ));
        (Vec::new(), Vec::new())
    };
    all.extend(kv.iter().flatten().cloned());
    let string_range = string_range(size, skip, baseline_port, c, &mut notes).await;
    let mut baseline_results: Vec<PhaseResult> = Vec::new();
    for (i, name) in BASELINES.into_iter().enumerate() {
        if skip.iter().any(|s| s == name) {
            notes.push(format!("{name}: skipped (--skip)"));
            continue;
        }
        eprintln!("bench: {name} …");
        let dir = tempfile::Builder::new()
            .prefix(&format!("tessera-bench-{name}-"))
            .tempdir()?;
        let port = baseline_port + 10 * i as u16;
        let (mut server, store) = match start_baseline(name, dir.path(), port, c.partitions).await {
            Ok(started) => started,
            Err(e) => {
                notes.push(format!("{name}: not measured: {e:#}"));
                continue;
            }
        };
        durability.push((name.to_string(), server.durability.to_string()));
        let outcome = async {
            if PUTS_ONLY.contains(&name) {
                let results = scenarios::compare_phase_set(store, size, false).await?;
                return Ok((results, Vec::new()));
            }
            let mut results = scenarios::compare_phases(store.clone(), size).await?;
            let ycsb_notes = add_ycsb_suite(store, size, &mut results).await?;
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
    if let Some((ours, theirs)) = string_range {
        ratios.extend(scenarios::ratios(
            std::slice::from_ref(&ours),
            std::slice::from_ref(&theirs),
        ));
        all.extend([ours, theirs]);
    }
    ratios.extend(scenarios::ratios(&f0, &baseline_results));
    let etcd: Vec<PhaseResult> = baseline_results
        .iter()
        .filter(|r| r.store.starts_with("etcd"))
        .cloned()
        .collect();
    ratios.extend(scenarios::ratios(&fsync, &etcd));
    ratios.extend(scenarios::ratios(&f0_fsync, &etcd));
    for run in &kv {
        ratios.extend(scenarios::ratios(run, &etcd));
    }
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

/// The comparison's secondary range on a string attribute (issue 12):
/// about 10 objects per range through a global index on a fresh Tessera
/// cluster, then through PostgreSQL's B-tree (`bench global-index`'s
/// `range` scenario, one system at a time), as phases `string-range` of
/// [`MAIN`] and `postgres`; `None`, with a note, when PostgreSQL is
/// skipped or either side fails.
async fn string_range(
    size: CompareSize,
    skip: &[String],
    baseline_port: u16,
    c: &ClusterSpec,
    notes: &mut Vec<String>,
) -> Option<(PhaseResult, PhaseResult)> {
    use crate::global_index::{self, GiOptions, GiScenario};
    if skip.iter().any(|s| s == "postgres") {
        return None;
    }
    eprintln!("bench: string range through a global index …");
    let options = GiOptions {
        records: size.records,
        operations: size.operations,
        create_records: 0,
        partitions: c.partitions,
        index_counts: Vec::new(),
        indexlet_counts: Vec::new(),
        workers: size.workers,
        time_limit: size.time_limit,
        scenarios: vec![GiScenario::Range],
        postgres_port: baseline_port + 60,
        daemons: c.daemons,
    };
    let c = ClusterSpec {
        local_port: c.local_port + 120,
        ..c.clone()
    };
    let outcome = async {
        let report = with_cluster(&c, async |coordinator: &str| {
            global_index::run_tessera(coordinator, &options).await
        })
        .await?;
        let mut range = report.range.context("the range scenario ran")?;
        let dir = tempfile::Builder::new()
            .prefix("tessera-bench-postgres-")
            .tempdir()?;
        let mut server = baselines::start_postgres(dir.path(), options.postgres_port).await?;
        let conninfo = baselines::postgres_conninfo(options.postgres_port);
        let measured = global_index::run_postgres(&conninfo, &options, &mut range).await;
        tokio::task::block_in_place(|| server.stop());
        measured?;
        let theirs = range.postgres.context("PostgreSQL's side ran")?;
        anyhow::Ok((range.tessera, theirs))
    }
    .await;
    match outcome {
        Ok((mut ours, mut theirs)) => {
            ours.store = MAIN.to_string();
            ours.phase = "string-range".to_string();
            theirs.store = "postgres".to_string();
            theirs.phase = "string-range".to_string();
            Some((ours, theirs))
        }
        Err(e) => {
            notes.push(format!("string-range: not measured: {e:#}"));
            None
        }
    }
}

/// `bench global-index`: the Tessera side of every scenario on the
/// cluster `c` names, then (for `range`, after that cluster stopped: one
/// system at a time) PostgreSQL's side, started for it; printed as
/// tables and written as JSON on request.
pub async fn global_index(
    options: &crate::global_index::GiOptions,
    c: &ClusterSpec,
    json: &Option<PathBuf>,
) -> anyhow::Result<()> {
    use crate::global_index;
    let mut report = with_cluster(c, async |coordinator: &str| {
        global_index::run_tessera(coordinator, options).await
    })
    .await?;
    if let Some(range) = report.range.as_mut() {
        eprintln!("bench: global-index range (postgres) …");
        let dir = tempfile::Builder::new()
            .prefix("tessera-bench-postgres-")
            .tempdir()?;
        match baselines::start_postgres(dir.path(), options.postgres_port).await {
            Ok(mut server) => {
                let conninfo = baselines::postgres_conninfo(options.postgres_port);
                let outcome = global_index::run_postgres(&conninfo, options, range).await;
                tokio::task::block_in_place(|| server.stop());
                if let Err(e) = outcome {
                    report.notes.push(format!("postgres: failed: {e:#}"));
                }
            }
            Err(e) => report.notes.push(format!("postgres: not measured: {e:#}")),
        }
    }
    print!("{}", global_index::report_text(&report));
    write_json(json, &serde_json::to_value(&report)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::OpStats;
    use std::collections::BTreeMap;

    fn phase(name: &str, count: u64, seconds: f64, p99_us: u64) -> PhaseResult {
        let stats = OpStats {
            count,
            errors: 0,
            not_found: 0,
            mean_us: 1.0,
            p50_us: 10,
            p95_us: 20,
            p99_us,
            p999_us: 2 * p99_us,
            max_us: 4 * p99_us,
            cdf: Vec::new(),
        };
        PhaseResult {
            store: "tessera".into(),
            phase: name.into(),
            workers: 1,
            operations: count,
            seconds,
            throughput: count as f64 / seconds,
            timed_out: false,
            ops: BTreeMap::from([("UPDATE".to_string(), stats)]),
            first_error: None,
        }
    }

    #[test]
    fn spread_table_gives_min_median_max_per_phase() {
        // Three runs of 1000 puts taking 1 s, 4 s and 2 s.
        let runs = vec![
            vec![phase("put x1 #1", 1000, 1.0, 300)],
            vec![phase("put x1 #2", 1000, 4.0, 900)],
            vec![phase("put x1 #3", 1000, 2.0, 500)],
        ];
        let table = spread_table(&runs);
        let row = table.lines().nth(1).expect("one row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[..4], ["tessera", "put", "x1", "UPDATE"]);
        assert_eq!(cells[4], "3");
        assert_eq!(cells[5], "250/500/1000");
        assert_eq!(cells[6], "4.00");
        assert_eq!(cells[8], "300/500/900");
        assert_eq!(cells[9], "600/1000/1800");
    }

    #[test]
    fn median_of_an_even_count_is_the_lower_middle() {
        assert_eq!(min_med_max(vec![4.0, 1.0, 3.0, 2.0]), (1.0, 2.0, 4.0));
        assert_eq!(min_med_max(Vec::new()), (0.0, 0.0, 0.0));
    }
}
