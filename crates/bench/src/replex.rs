//! Replex spaces against the HyperDex layout (issue 13, point 6; Replex,
//! USENIX ATC '16, §5.1): the same YCSB record, the same secondary
//! attribute (`recno`) searchable, the same failures tolerated, on one
//! cluster one layout after the other.
//!
//! - **HyperDex layout:** the key subspace and a `recno` subspace, each
//!   region replicated `f + 1` times: `2 (f + 1)` copies, and an insert
//!   walks them all.
//! - **Replex-2:** the key subspace and `replex recno`, one copy each:
//!   tolerates one failure with two copies.
//! - **Replex-3:** the key subspace, `hybrid k, recno groups n1, n2` and
//!   `replex recno`: tolerates two failures with three copies. The chain
//!   order is key → hybrid → replex, the paper's A → H → B.
//!
//! Each layout gets a fresh space: a YCSB load of `records` records
//! (insert throughput and latency, the paper's Fig. 8), then YCSB A, B, C
//! and F. Storage per object is measured where the daemons serve metrics:
//! the growth of their `disk_bytes` over the load, per record loaded
//! (the journal included, so it is the bytes a load leaves on disk), beside
//! the copies the configuration keeps of each object.

use crate::driver::{PhaseResult, Store};
use crate::generator::{key_name, key_suffix};
use crate::recovery::{bounded, start_cluster, Servers};
use crate::scenarios::{fresh_space, load_records, wait_space, ycsb_letters, CompareSize};
use crate::stores::tessera::TesseraStore;
use crate::workload::{field_name, Workload};
use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{Admin, Client, Configuration, DaemonId, PredOp, Value};
use tessera_types::DaemonState;

/// The YCSB workloads the paper runs beside the load (Fig. 10).
pub const REPLEX_YCSB: [char; 4] = ['a', 'b', 'c', 'f'];

/// How long one daemon's metrics page may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// A layout the benchmark compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ReplexLayout {
    /// The key subspace and a `recno` subspace, `f + 1` replicas each.
    HyperDex { tolerate: u32 },
    /// The key subspace and `replex recno`.
    Replex2,
    /// The key subspace, a hybrid of it and `recno`, and `replex recno`.
    Replex3,
}

impl ReplexLayout {
    /// The layouts of the paper's steady-state comparison, plus Replex-2
    /// and the HyperDex layout with its fault tolerance.
    pub const ALL: [ReplexLayout; 4] = [
        ReplexLayout::HyperDex { tolerate: 2 },
        ReplexLayout::Replex3,
        ReplexLayout::HyperDex { tolerate: 1 },
        ReplexLayout::Replex2,
    ];

    /// Its name in tables: `hyperdex-f2`, `replex-3`, ….
    pub fn name(self) -> String {
        match self {
            ReplexLayout::HyperDex { tolerate } => format!("hyperdex-f{tolerate}"),
            ReplexLayout::Replex2 => "replex-2".to_string(),
            ReplexLayout::Replex3 => "replex-3".to_string(),
        }
    }

    /// Failures tolerated.
    pub fn tolerate(self) -> u32 {
        match self {
            ReplexLayout::HyperDex { tolerate } => tolerate,
            ReplexLayout::Replex2 => 1,
            ReplexLayout::Replex3 => 2,
        }
    }

    /// Copies of every object.
    pub fn copies(self) -> u32 {
        match self {
            ReplexLayout::HyperDex { tolerate } => 2 * (tolerate + 1),
            ReplexLayout::Replex2 => 2,
            ReplexLayout::Replex3 => 3,
        }
    }

    /// The space description: the YCSB record (`k`, `recno`, 10 fields)
    /// with this layout's parts over `partitions` partitions.
    pub fn description(self, name: &str, partitions: u32) -> String {
        self.description_grouped(name, partitions, hybrid_groups(partitions))
    }

    /// The same, with a Replex-3 hybrid of `groups` (ignored by the other
    /// layouts).
    pub fn description_grouped(self, name: &str, partitions: u32, groups: (u32, u32)) -> String {
        let fields: Vec<String> = (0..10).map(field_name).collect();
        let parts = match self {
            ReplexLayout::HyperDex { .. } => "subspace recno".to_string(),
            ReplexLayout::Replex2 => "replex recno".to_string(),
            ReplexLayout::Replex3 => format!(
                "replex recno hybrid k, recno groups {}, {}",
                groups.0, groups.1
            ),
        };
        let tolerate = self.tolerate();
        format!(
            "space {name} key k attributes int recno, {} {parts} create {partitions} partitions tolerate {tolerate} {}",
            fields.join(", "),
            if tolerate == 1 { "failure" } else { "failures" }
        )
    }
}

/// The hybrid's group counts for `partitions` partitions: `n1 · n2 =
/// partitions` with `n1` the largest divisor not above its square root, so
/// that a lost region of either side is found in about √p regions (the
/// paper's 3 × 4 for 12).
pub fn hybrid_groups(partitions: u32) -> (u32, u32) {
    let p = partitions.max(1);
    let n1 = (1..=p)
        .take_while(|n| n * n <= p)
        .filter(|n| p.is_multiple_of(*n))
        .last()
        .unwrap_or(1);
    (n1, p / n1)
}

/// One layout's run.
#[derive(Clone, Debug, Serialize)]
pub struct LayoutRun {
    pub layout: String,
    pub tolerate: u32,
    pub description: String,
    /// Copies the configuration keeps of each object: the object-holding
    /// parts' chain lengths, added up.
    pub copies: u32,
    /// Disk bytes the load added, per record, over every daemon; `None`
    /// without metrics.
    pub disk_bytes_per_object: Option<f64>,
    /// `load`, then `ycsb-a`, `ycsb-b`, `ycsb-c`, `ycsb-f`.
    pub results: Vec<PhaseResult>,
}

/// Runs every layout of `layouts` against the cluster at `coordinator`,
/// one after the other, on a fresh space each.
pub async fn steady(
    coordinator: &str,
    layouts: &[ReplexLayout],
    size: CompareSize,
    partitions: u32,
) -> anyhow::Result<Vec<LayoutRun>> {
    let admin = Admin::new(coordinator);
    let client = Client::connect(coordinator).await?;
    let mut runs = Vec::new();
    for &layout in layouts {
        let name = format!("bench_{}", layout.name().replace('-', "_"));
        let description = layout.description(&name, partitions);
        eprintln!("bench replex: {}: {description}", layout.name());
        fresh_space(&admin, &name, &description).await?;
        wait_space(&client, &name).await?;
        let store: Arc<dyn Store> =
            Arc::new(TesseraStore::new(client.clone(), &name, size.fieldcount));
        let disk_before = disk_bytes(&admin.config().await?).await;
        let mut results = vec![load(store.clone(), size).await?];
        let config = admin.config().await?;
        let disk_after = disk_bytes(&config).await;
        let loaded = results[0].ops.values().map(|s| s.count).sum::<u64>();
        let (more, _) = ycsb_letters(store, size, size.records, &REPLEX_YCSB).await?;
        results.extend(more);
        for r in &mut results {
            r.store = layout.name();
        }
        runs.push(LayoutRun {
            layout: layout.name(),
            tolerate: layout.tolerate(),
            description,
            copies: copies(&config, &name).unwrap_or(0),
            disk_bytes_per_object: match (disk_before, disk_after) {
                (Some(b), Some(a)) if loaded > 0 => Some((a - b) / loaded as f64),
                _ => None,
            },
            results,
        });
        admin.rm_space(&name).await?;
    }
    Ok(runs)
}

/// The YCSB load of `size.records` records.
async fn load(store: Arc<dyn Store>, size: CompareSize) -> anyhow::Result<PhaseResult> {
    let w = Arc::new(Workload {
        fieldcount: size.fieldcount,
        fieldlength: size.fieldlength,
        ..Workload::core('a', size.records, 0).expect("workload a")
    });
    load_records(store, w, size.workers, size.time_limit, 1000).await
}

/// Copies of each object of space `name`: for every part that holds
/// objects, the length of its first region's chain.
fn copies(config: &Configuration, name: &str) -> Option<u32> {
    let space = config.space(name)?;
    Some(
        space
            .subspaces
            .iter()
            .filter(|l| l.kind.holds_objects())
            .filter_map(|l| l.regions.first())
            .map(|r| r.chain.len() as u32)
            .sum(),
    )
}

/// The bytes on disk of every daemon that serves metrics; `None` when one
/// does not, or its page cannot be read.
async fn disk_bytes(config: &Configuration) -> Option<f64> {
    let mut total = 0.0;
    for daemon in config.daemons.values() {
        let url = daemon.metrics.as_ref()?;
        let page = tessera_observe::scrape::fetch(url, SCRAPE_TIMEOUT)
            .await
            .ok()?;
        total += tessera_observe::scrape::samples(&page)
            .find(|s| s.name == "tessera_daemon_disk_bytes")?
            .value;
    }
    Some(total)
}

/// The table of a run: per phase, each layout's throughput and its main
/// operation's p50 and p99, then Replex ÷ HyperDex at equal fault
/// tolerance.
pub fn table(runs: &[LayoutRun]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>6} {:>16}   {:<8} {:>10} {:>9} {:>9}",
        "layout", "copies", "disk B/object", "phase", "ops/s", "p50 µs", "p99 µs"
    );
    for run in runs {
        for r in &run.results {
            let main = r.ops.iter().max_by_key(|(_, s)| s.count);
            let (p50, p99) = main.map_or((0, 0), |(_, s)| (s.p50_us, s.p99_us));
            let _ = writeln!(
                out,
                "{:<12} {:>6} {:>16}   {:<8} {:>10.0} {:>9} {:>9}",
                run.layout,
                run.copies,
                run.disk_bytes_per_object
                    .map_or("-".to_string(), |b| format!("{b:.0}")),
                r.phase,
                r.throughput,
                p50,
                p99
            );
        }
    }
    for replex in runs.iter().filter(|r| r.layout.starts_with("replex")) {
        let Some(hyperdex) = runs
            .iter()
            .find(|h| h.layout.starts_with("hyperdex") && h.tolerate == replex.tolerate)
        else {
            continue;
        };
        let _ = writeln!(
            out,
            "\n{} ÷ {} (same failures tolerated: {}):",
            replex.layout, hyperdex.layout, replex.tolerate
        );
        for r in &replex.results {
            let Some(h) = hyperdex.results.iter().find(|h| h.phase == r.phase) else {
                continue;
            };
            let p50 = |x: &PhaseResult| {
                x.ops
                    .iter()
                    .max_by_key(|(_, s)| s.count)
                    .map_or(0, |(_, s)| s.p50_us)
            };
            let _ = writeln!(
                out,
                "  {:<8} throughput ×{:.2}, p50 ×{:.2}",
                r.phase,
                r.throughput / h.throughput.max(1e-9),
                p50(r) as f64 / p50(h).max(1) as f64
            );
        }
    }
    out
}

/// Which daemon a recovery run kills first: one holding regions of the
/// key subspace ("a machine in A", the paper's §5.3) or of `replex recno`
/// ("in B"). Under strict placement the two sets are disjoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Victim {
    Key,
    Replex,
}

impl std::str::FromStr for Victim {
    type Err = String;
    fn from_str(s: &str) -> Result<Victim, String> {
        match s {
            "key" => Ok(Victim::Key),
            "replex" => Ok(Victim::Replex),
            other => Err(format!("unknown victim {other:?} (key, replex)")),
        }
    }
}

/// One recovery case: a layout (a Replex-3 with its hybrid's groups), the
/// failures, and which side the first victim is on.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RecoveryCase {
    pub layout: ReplexLayout,
    pub groups: (u32, u32),
    /// 1 or 2 daemons killed, the second [`RecoveryOptions::second_after`]
    /// after the first, on the other side.
    pub failures: usize,
    pub victim: Victim,
}

/// How the recovery runs are sized and where their servers live.
#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// The `tessera` binary the servers are started from.
    pub exe: PathBuf,
    /// A directory for every run's data and logs.
    pub dir: PathBuf,
    /// The coordinator's port; daemon `i` listens on `port + 1 + i`.
    pub port: u16,
    /// Daemons started before the load; one spare per failure joins at
    /// its kill.
    pub daemons: usize,
    pub partitions: u32,
    pub records: u64,
    /// Reads in flight during the run (and puts in flight while loading).
    pub workers: usize,
    /// Reads measured before the first kill.
    pub before: Duration,
    /// The second kill's delay after the first.
    pub second_after: Duration,
    /// Bound of every wait.
    pub timeout: Duration,
}

/// What one recovery case measured. Times from the first kill.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryRun {
    pub layout: String,
    pub groups: Option<(u32, u32)>,
    pub failures: usize,
    pub victim: Victim,
    pub killed: Vec<u64>,
    /// Per kill, when the configuration first showed the daemon gone.
    pub detected_s: Vec<f64>,
    /// When every region of the space was whole again: its chain as long
    /// as the layout keeps, no killed daemon in it, no transfer running.
    pub recovered_s: f64,
    /// Successful reads per second before the kill, and from the first
    /// kill to the recovery (the paper's "throughput in recovery").
    pub reads_before_per_s: f64,
    pub reads_during_per_s: f64,
    /// Reads that failed, and reads whose answer was wrong (a loaded
    /// object missing, or a search by `recno` not returning exactly it).
    pub failed_reads: u64,
    pub wrong_reads: u64,
    pub first_failure: Option<String>,
}

/// Runs every case on a fresh cluster of processes each, one after the
/// other.
pub async fn recovery(
    options: &RecoveryOptions,
    cases: &[RecoveryCase],
) -> anyhow::Result<Vec<RecoveryRun>> {
    let mut runs = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let dir = options.dir.join(format!("case-{n}"));
        std::fs::create_dir_all(&dir)?;
        // Room for one spare per failure, started at its kill (the paper's
        // spare machines): placement has used every daemon started before.
        let mut servers = Servers::new(
            options.exe.clone(),
            dir,
            options.port,
            options.daemons + case.failures,
        );
        let outcome = recover_once(options, case, &mut servers).await;
        match outcome {
            Ok(run) => {
                tokio::task::block_in_place(|| servers.stop_all());
                eprintln!(
                    "bench replex: {} {:?} {} failure(s) (first in {:?}): recovered in {:.1} s, reads {:.0}/s before, {:.0}/s during; {} failed, {} wrong",
                    run.layout, run.groups, run.failures, run.victim, run.recovered_s,
                    run.reads_before_per_s, run.reads_during_per_s, run.failed_reads, run.wrong_reads
                );
                runs.push(run);
            }
            Err(e) => {
                let logs = servers.log_tails(20);
                servers.kill_all();
                return Err(e.context(format!("server logs (last lines):\n{logs}")));
            }
        }
        // The next case's servers take the same ports.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(runs)
}

/// Counters the readers share.
#[derive(Default)]
struct Reads {
    ok: AtomicU64,
    failed: AtomicU64,
    wrong: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl Reads {
    fn failure(&self, what: String, wrong: bool) {
        if wrong { &self.wrong } else { &self.failed }.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_failure.lock().expect("first failure");
        first.get_or_insert(what);
    }
}

async fn recover_once(
    options: &RecoveryOptions,
    case: &RecoveryCase,
    servers: &mut Servers,
) -> anyhow::Result<RecoveryRun> {
    let timeout = options.timeout;
    let admin = start_cluster(servers, options.daemons, timeout).await?;
    let coordinator = servers.coordinator_addr();
    let name = "bench_replex_recovery";
    let description = case
        .layout
        .description_grouped(name, options.partitions, case.groups);
    eprintln!("bench replex: recovery of {description}");
    fresh_space(&admin, name, &description).await?;
    let client = Client::connect(&coordinator).await?;
    wait_space(&client, name).await?;
    let store: Arc<dyn Store> = Arc::new(TesseraStore::new(client.clone(), name, 10));
    let size = CompareSize {
        records: options.records,
        operations: 0,
        ycsb_operations: 0,
        workers: options.workers,
        fieldcount: 10,
        fieldlength: 100,
        time_limit: timeout,
    };
    let loaded = load(store, size).await?;
    let inserted = loaded.ops.get("INSERT").map_or(0, |s| s.count);
    anyhow::ensure!(
        inserted == options.records,
        "the load acknowledged {inserted} of {} records (first error: {:?})",
        options.records,
        loaded.first_error
    );

    // Readers: half gets by key, half searches by recno, each checked.
    let reads = Arc::new(Reads::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for w in 0..options.workers.max(1) {
        let (client, reads, stop) = (client.clone(), reads.clone(), stop.clone());
        let records = options.records;
        readers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(9000 + w as u64);
            let deadline = Instant::now() + Duration::from_secs(3600);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let n = rng.gen_range(0..records);
                let key = key_name(n);
                if rng.gen_bool(0.5) {
                    match client.get(name, Value::str(&key)).await {
                        Ok(Some(_)) => reads.ok.fetch_add(1, Ordering::Relaxed),
                        Ok(None) => {
                            reads.failure(format!("get {key}: not found"), true);
                            continue;
                        }
                        Err(e) => {
                            reads.failure(format!("get {key}: {e}"), false);
                            continue;
                        }
                    };
                } else {
                    let recno = key_suffix(n);
                    match client
                        .search(name, [("recno", PredOp::Eq(Value::Int(recno)))])
                        .await
                    {
                        Ok(found)
                            if found.len() == 1 && found[0].get("k") == Some(&Value::str(&key)) =>
                        {
                            reads.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(found) => reads.failure(
                            format!("search recno {recno}: {} objects", found.len()),
                            true,
                        ),
                        Err(e) => reads.failure(format!("search recno {recno}: {e}"), false),
                    }
                }
            }
        }));
    }
    let ok_at = |reads: &Reads| reads.ok.load(Ordering::Relaxed);
    let started = Instant::now();
    let before_ok = ok_at(&reads);
    tokio::time::sleep(options.before).await;
    let reads_before_per_s = (ok_at(&reads) - before_ok) as f64 / started.elapsed().as_secs_f64();

    let config = admin.config().await?;
    let space = config.space(name).context("the space")?;
    let side_part = |victim: Victim| match victim {
        Victim::Key => 0,
        Victim::Replex => space.subspaces.len() - 1,
    };
    let first = busiest(space, side_part(case.victim), &[]).context("a daemon to kill")?;
    let mut victims = vec![first];
    if case.failures >= 2 {
        let other = match case.victim {
            Victim::Key => Victim::Replex,
            Victim::Replex => Victim::Key,
        };
        victims.push(busiest(space, side_part(other), &victims).context("a second daemon")?);
    }
    let indexes = victims
        .iter()
        .map(|&id| {
            servers
                .daemon_index(&config, id)
                .with_context(|| format!("daemon {id} is not one of ours"))
        })
        .collect::<anyhow::Result<Vec<usize>>>()?;
    // kill -9, then the operator's `server-kill`: a replex region is
    // rebuilt only once its daemon is gone for good (declared lost after
    // the lost timeout, or killed); the HyperDex layout gets the same
    // command, so neither waits for failure detection.
    let kill_at = servers.kill_daemon(indexes[0])?;
    // Reads are counted from the kill, as the recovery is timed: the
    // command and the new daemon's start below take time of their own.
    let ok_at_kill = ok_at(&reads);
    admin.server_kill(victims[0]).await?;
    servers.start_daemon(options.daemons)?;
    for (n, (&i, &id)) in indexes[1..].iter().zip(&victims[1..]).enumerate() {
        tokio::time::sleep(options.second_after).await;
        servers.kill_daemon(i)?;
        admin.server_kill(id).await?;
        servers.start_daemon(options.daemons + 1 + n)?;
    }
    let killed = victims;
    let mut detected: Vec<Option<f64>> = vec![None; killed.len()];
    let replicas = config
        .space(name)
        .map_or(1, |s| s.desc.replicas_per_region());
    let recovered_s = bounded("the space to be whole again", timeout, async || {
        let config = admin.config().await?;
        let now = kill_at.elapsed().as_secs_f64();
        for (k, id) in killed.iter().enumerate() {
            let gone = config
                .daemons
                .get(id)
                .is_none_or(|d| d.state != DaemonState::Available);
            if gone && detected[k].is_none() {
                detected[k] = Some(now);
            }
        }
        Ok(whole(&config, name, &killed, replicas).then_some(now))
    })
    .await?;
    let reads_during_per_s = (ok_at(&reads) - ok_at_kill) as f64 / recovered_s.max(1e-9);
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let _ = r.await;
    }
    let first_failure = reads.first_failure.lock().expect("first failure").clone();
    Ok(RecoveryRun {
        layout: case.layout.name(),
        groups: (case.layout == ReplexLayout::Replex3).then_some(case.groups),
        failures: case.failures,
        victim: case.victim,
        killed: killed.iter().map(|d| d.0).collect(),
        detected_s: detected
            .into_iter()
            .map(|d| d.unwrap_or(f64::NAN))
            .collect(),
        recovered_s,
        reads_before_per_s,
        reads_during_per_s,
        failed_reads: reads.failed.load(Ordering::Relaxed),
        wrong_reads: reads.wrong.load(Ordering::Relaxed),
        first_failure,
    })
}

/// The daemon holding the most regions of part `part` of `space`, other
/// than those in `except`.
fn busiest(space: &tessera_types::Space, part: usize, except: &[DaemonId]) -> Option<DaemonId> {
    let mut count: BTreeMap<DaemonId, usize> = BTreeMap::new();
    for region in &space.subspaces.get(part)?.regions {
        for d in region.chain.iter().filter(|d| !except.contains(d)) {
            *count.entry(*d).or_default() += 1;
        }
    }
    count
        .into_iter()
        .max_by_key(|&(d, n)| (n, std::cmp::Reverse(d)))
        .map(|(d, _)| d)
}

/// Whether every object-holding region of space `name` has `replicas`
/// members, none of them killed, and no transfer runs into the space.
fn whole(config: &Configuration, name: &str, killed: &[DaemonId], replicas: usize) -> bool {
    let Some(space) = config.space(name) else {
        return false;
    };
    let regions: Vec<&tessera_types::Region> = space
        .subspaces
        .iter()
        .filter(|l| l.kind.holds_objects())
        .flat_map(|l| &l.regions)
        .collect();
    regions
        .iter()
        .all(|r| r.chain.len() == replicas && !r.chain.iter().any(|d| killed.contains(d)))
        && !config
            .transfers
            .iter()
            .any(|t| regions.iter().any(|r| r.id == t.region))
}

/// The recovery runs as a table, then the paper's comparisons.
pub fn recovery_table(runs: &[RecoveryRun]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>7} {:>8} {:>7} {:>12} {:>12} {:>13} {:>13} {:>7} {:>6}",
        "layout",
        "groups",
        "failures",
        "victim",
        "detected s",
        "recovered s",
        "reads/s before",
        "reads/s during",
        "failed",
        "wrong"
    );
    for r in runs {
        let _ = writeln!(
            out,
            "{:<12} {:>7} {:>8} {:>7} {:>12} {:>12.1} {:>13.0} {:>13.0} {:>7} {:>6}",
            r.layout,
            r.groups
                .map_or("-".to_string(), |(a, b)| format!("{a}x{b}")),
            r.failures,
            format!("{:?}", r.victim).to_lowercase(),
            r.detected_s
                .iter()
                .map(|d| format!("{d:.1}"))
                .collect::<Vec<_>>()
                .join(","),
            r.recovered_s,
            r.reads_before_per_s,
            r.reads_during_per_s,
            r.failed_reads,
            r.wrong_reads
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    #[test]
    fn hybrid_groups_multiply_to_the_partitions_nearest_the_square_root() {
        assert_eq!(hybrid_groups(12), (3, 4));
        assert_eq!(hybrid_groups(24), (4, 6));
        assert_eq!(hybrid_groups(16), (4, 4));
        assert_eq!(hybrid_groups(7), (1, 7));
        assert_eq!(hybrid_groups(1), (1, 1));
    }

    #[test]
    fn every_layout_describes_a_space_with_its_copies_and_tolerance() {
        for layout in ReplexLayout::ALL {
            for partitions in [4, 12, 24] {
                let text = layout.description("t", partitions);
                let space = parse_space(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(space.fault_tolerance, layout.tolerate(), "{text}");
                let copies = match &space.replex {
                    Some(r) => 1 + r.replexes.len() + r.hybrids.len(),
                    None => (1 + space.subspaces.len()) * (space.fault_tolerance as usize + 1),
                };
                assert_eq!(copies as u32, layout.copies(), "{text}");
            }
        }
    }
}
