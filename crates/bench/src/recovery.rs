//! Recovery from a daemon crash, measured on real processes: a coordinator
//! and three daemons of the `tessera` binary on 127.0.0.1, one of them
//! killed with SIGKILL per run.
//!
//! The space tolerates one failure and has one partition, so its key
//! subspace is a single region whose chain holds two of the three daemons.
//! Each run kills that chain's head (the point leader of every key), then
//!
//! - puts to the region's keys in a loop, one in flight, retrying every
//!   failure, and takes the time from the kill to the first acknowledged
//!   put;
//! - watches the coordinator's configuration (long polls) for the epoch that
//!   takes the dead daemon out of the chain, the state transfer that copies
//!   the region to the third daemon, and the epoch that ends it (the chain
//!   has two members again and no transfer runs); the transfer's throughput
//!   is the region's objects over the time between the configuration that
//!   started it and the one that ended it;
//! - brings a daemon back in the killed one's place and waits until the
//!   cluster is stable, so the next run starts from two replicas and a
//!   spare again (that daemon is the next run's transfer target). With
//!   [`Rejoin::Empty`] the killed daemon is forgotten and a new one starts
//!   on its port with an empty data directory, so every transfer copies the
//!   whole region; with [`Rejoin::Data`] the killed daemon restarts from
//!   its data directory, and a transfer to it ships only what it lacks.
//!
//! Every child process is stopped by its process id at the end, and killed
//! when the run fails or is dropped; every wait is bounded.

use crate::driver::Store;
use crate::generator::key_name;
use crate::scenarios::{fresh_space, load_records, wait_space};
use crate::stores::tessera::{usertable_description, TesseraStore};
use crate::workload::Workload;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_client::{
    Admin, Client, ClientOptions, Configuration, DaemonId, Epoch, Outcome, PredOp, Value,
};
use tessera_types::{DaemonState, RegionId, Transfer};

/// The benchmark's space.
pub const SPACE: &str = "bench_recovery";
/// Daemons started: two replicas of the region and a spare to copy it to.
pub const DAEMONS: usize = 3;
/// Fields of 100 bytes per record (YCSB's record shape).
const FIELDS: usize = 10;
/// How long one probe put keeps retrying inside the client before the
/// benchmark's own loop tries again: short, so that the client's growing
/// pauses between retries (up to 500 ms) do not blur the measurement.
const PROBE_RETRY: Duration = Duration::from_millis(300);
/// Longest wait of one configuration long poll.
const POLL: Duration = Duration::from_millis(500);
/// Pause after a failed probe put before the next attempt.
const RETRY_PAUSE: Duration = Duration::from_millis(5);
/// Once a put is acknowledged, the probe puts once per this interval while
/// the transfer runs: writes continue, lightly, so that the transfer is
/// measured under writes without a saturating load on the shared cores.
const WRITE_INTERVAL: Duration = Duration::from_millis(10);

/// How the killed daemon's place is filled after each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rejoin {
    /// Forget the killed daemon; start a new one on its port with an empty
    /// data directory (a transfer to it copies every object).
    Empty,
    /// Restart the killed daemon from its data directory (a transfer to it
    /// ships only what its old copy lacks).
    Data,
}

impl Rejoin {
    pub fn name(self) -> &'static str {
        match self {
            Rejoin::Empty => "empty",
            Rejoin::Data => "data",
        }
    }
}

impl std::str::FromStr for Rejoin {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "empty" => Ok(Rejoin::Empty),
            "data" => Ok(Rejoin::Data),
            other => Err(format!("unknown rejoin {other:?} (empty, data)")),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// The `tessera` binary to start the servers from.
    pub exe: PathBuf,
    /// Where the servers keep their data and logs.
    pub dir: PathBuf,
    /// The coordinator's port; daemon `i` listens on `port + 1 + i`.
    pub port: u16,
    /// Objects loaded into the region.
    pub records: u64,
    /// Kill-and-recover rounds.
    pub runs: usize,
    /// Puts in flight while loading.
    pub workers: usize,
    /// How the killed daemon's place is filled for the next run.
    pub rejoin: Rejoin,
    /// Bound of every wait (start, load, detection, transfer, rejoin).
    pub timeout: Duration,
}

/// One kill of the region's point leader. Times in milliseconds from the
/// kill.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecoveryRun {
    pub run: usize,
    /// The killed daemon (the region's head before the kill).
    pub killed: u64,
    /// The first configuration without the killed daemon in the chain.
    pub detected_ms: f64,
    /// The first acknowledged put to the region.
    pub first_write_ms: f64,
    /// Put attempts that failed before it.
    pub failed_attempts: u64,

    /// The transfer's source (the surviving replica) and target.
    pub transfer_from: u64,
    pub transfer_to: u64,
    /// Whether the target held the region before (a daemon killed in an
    /// earlier run and restarted with its data): the transfer then ships
    /// only what that old copy lacks, and `objects_per_s` counts every
    /// object of the region all the same.
    pub target_held_region: bool,
    /// The first configuration naming the transfer.
    pub transfer_started_ms: f64,
    /// The first configuration with the target in the chain and the
    /// transfer gone.
    pub transfer_done_ms: f64,
    pub transfer_seconds: f64,
    /// Objects of the region ÷ `transfer_seconds`.
    pub objects_per_s: f64,
    /// Puts acknowledged and failed while the transfer ran (one in flight,
    /// one per 10 ms), and the slowest acknowledged.
    pub writes_during_transfer: u64,
    pub failed_writes_during_transfer: u64,
    pub slowest_write_during_transfer_ms: f64,
    /// From starting a daemon in the killed one's place to a stable
    /// cluster.
    pub rejoin_seconds: f64,
}

/// Every run and the medians.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecoveryReport {
    pub records: u64,
    pub rejoin: Rejoin,
    /// Objects in the region (counted after the load).
    pub objects: u64,
    pub record_fields: usize,
    pub field_bytes: usize,
    pub load_seconds: f64,
    pub runs: Vec<RecoveryRun>,
    pub median_detected_ms: f64,
    pub median_first_write_ms: f64,
    pub median_transfer_seconds: f64,
    pub median_objects_per_s: f64,
}

/// The median of `values` (the mean of the middle two for an even count);
/// 0 for none.
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Each run as a row, then the medians.
pub fn recovery_table(report: &RecoveryReport) -> String {
    let mut out = format!(
        "{:>3} {:>6} {:>11} {:>14} {:>7} {:>9} {:>9} {:>10} {:>10} {:>15} {:>10} {:>8}\n",
        "run",
        "killed",
        "detected ms",
        "first write ms",
        "retries",
        "transfer",
        "target",
        "transfer s",
        "objects/s",
        "puts ok/failed",
        "slowest ms",
        "rejoin s",
    );
    for r in &report.runs {
        out.push_str(&format!(
            "{:>3} {:>6} {:>11.0} {:>14.0} {:>7} {:>9} {:>9} {:>10.2} {:>10.0} {:>15} {:>10.0} {:>8.2}\n",
            r.run,
            format!("d{}", r.killed),
            r.detected_ms,
            r.first_write_ms,
            r.failed_attempts,
            format!("d{}→d{}", r.transfer_from, r.transfer_to),
            if r.target_held_region { "old copy" } else { "empty" },
            r.transfer_seconds,
            r.objects_per_s,
            format!(
                "{}/{}",
                r.writes_during_transfer, r.failed_writes_during_transfer
            ),
            r.slowest_write_during_transfer_ms,
            r.rejoin_seconds,
        ));
    }
    out.push_str(&format!(
        "median: detected {:.0} ms, first write {:.0} ms after the kill; transfer of {} objects {:.2} s, {:.0} objects/s\n",
        report.median_detected_ms,
        report.median_first_write_ms,
        report.objects,
        report.median_transfer_seconds,
        report.median_objects_per_s,
    ));
    for (held, label) in [
        (false, "an empty daemon"),
        (true, "a restarted daemon with an old copy"),
    ] {
        let rates: Vec<f64> = report
            .runs
            .iter()
            .filter(|r| r.target_held_region == held)
            .map(|r| r.objects_per_s)
            .collect();
        if !rates.is_empty() {
            out.push_str(&format!(
                "  transfers into {label}: median {:.0} objects/s over {} run(s)\n",
                median(rates.iter().copied()),
                rates.len()
            ));
        }
    }
    out
}

/// Runs the scenario: starts the servers, loads, kills and recovers
/// `runs` times, stops the servers.
pub async fn recovery(options: &RecoveryOptions) -> anyhow::Result<RecoveryReport> {
    if options.runs == 0 || options.records == 0 {
        bail!("--runs and --records must be at least 1");
    }
    let ports: Vec<u16> = (0..=DAEMONS as u16)
        .map(|i| options.port.checked_add(i))
        .collect::<Option<_>>()
        .context("--port leaves no room for the daemons' ports above it")?;
    for &port in &ports {
        if TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).is_err() {
            bail!("port {port} on 127.0.0.1 is in use; choose another --port");
        }
    }
    let mut servers = Servers::new(
        options.exe.clone(),
        options.dir.clone(),
        options.port,
        DAEMONS,
    );
    let outcome = measure(options, &mut servers).await;
    match outcome {
        Ok(report) => {
            tokio::task::block_in_place(|| servers.stop_all());
            Ok(report)
        }
        Err(e) => {
            let logs = servers.log_tails(30);
            servers.kill_all();
            Err(e.context(format!("server logs (last lines):\n{logs}")))
        }
    }
}

async fn measure(
    options: &RecoveryOptions,
    servers: &mut Servers,
) -> anyhow::Result<RecoveryReport> {
    let timeout = options.timeout;
    let coordinator = servers.coordinator_addr();
    let admin = start_cluster(servers, DAEMONS, timeout).await?;

    fresh_space(
        &admin,
        SPACE,
        &usertable_description(SPACE, FIELDS, false, 1, 1),
    )
    .await?;
    let client = Client::connect(&coordinator).await?;
    wait_space(&client, SPACE).await?;
    let region = single_region(&admin.config().await?)?;

    eprintln!(
        "bench: loading {} records of {FIELDS} × 100 bytes …",
        options.records
    );
    let store: Arc<dyn Store> = Arc::new(TesseraStore::new(client.clone(), SPACE, FIELDS));
    let workload = Arc::new(Workload::core('a', options.records, 0).expect("workload a"));
    let loaded = load_records(store, workload, options.workers.max(1), timeout, 500).await?;
    let inserted = loaded.ops.get("INSERT").map_or(0, |s| s.count);
    if inserted != options.records {
        bail!(
            "the load acknowledged {inserted} of {} records (first error: {:?}, timed out: {})",
            options.records,
            loaded.first_error,
            loaded.timed_out
        );
    }
    let objects = client
        .count(SPACE, Vec::<(&str, PredOp)>::new())
        .await
        .context("counting the region's objects")?;
    if objects != options.records {
        bail!(
            "the space holds {objects} objects after {} acknowledged inserts",
            options.records
        );
    }
    eprintln!(
        "bench: loaded {objects} objects in {:.1} s ({:.0}/s)",
        loaded.seconds, loaded.throughput
    );

    let probe = connect_probe(&coordinator, timeout).await?;
    // Daemons that have held the region, for `target_held_region`.
    let mut held: BTreeSet<DaemonId> = chain(&admin.config().await?, region).into_iter().collect();
    let mut runs = Vec::new();
    for run in 1..=options.runs {
        let mut r = one_run(
            options, servers, &admin, &client, &probe, region, objects, run,
        )
        .await
        .with_context(|| format!("run {run}"))?;
        r.target_held_region = !held.insert(DaemonId(r.transfer_to));
        eprintln!(
            "bench: run {run}: first write {:.0} ms after the kill; {objects} objects transferred in {:.2} s",
            r.first_write_ms, r.transfer_seconds
        );
        runs.push(r);
    }
    let _ = admin.rm_space(SPACE).await;
    Ok(RecoveryReport {
        records: options.records,
        rejoin: options.rejoin,
        objects,
        record_fields: FIELDS,
        field_bytes: 100,
        load_seconds: loaded.seconds,
        median_detected_ms: median(runs.iter().map(|r| r.detected_ms)),
        median_first_write_ms: median(runs.iter().map(|r| r.first_write_ms)),
        median_transfer_seconds: median(runs.iter().map(|r| r.transfer_seconds)),
        median_objects_per_s: median(runs.iter().map(|r| r.objects_per_s)),
        runs,
    })
}

/// Starts the coordinator and daemons `0..daemons`, and waits until every
/// daemon is Available and the cluster is stable.
pub(crate) async fn start_cluster(
    servers: &mut Servers,
    daemons: usize,
    timeout: Duration,
) -> anyhow::Result<Admin> {
    let coordinator = servers.coordinator_addr();
    servers.start_coordinator()?;
    let admin = Admin::new(&coordinator);
    bounded("the coordinator to serve", timeout, async || {
        Ok(admin.config().await.ok())
    })
    .await?;
    for i in 0..daemons {
        servers.start_daemon(i)?;
    }
    bounded("every daemon to be available", timeout, async || {
        servers.check_running()?;
        let config = admin.config().await?;
        Ok((0..daemons)
            .all(|i| {
                servers
                    .daemon_id(&config, i)
                    .is_some_and(|id| config.daemons[&id].state == DaemonState::Available)
            })
            .then_some(()))
    })
    .await?;
    admin.wait_until_stable(timeout, POLL).await?;
    Ok(admin)
}

/// The id of the space's one region; an error when the space has other
/// subspaces or regions (the transfer measured must be the only one).
fn single_region(config: &Configuration) -> anyhow::Result<RegionId> {
    let space = config
        .space(SPACE)
        .with_context(|| format!("space {SPACE} is not in the configuration"))?;
    let regions: Vec<RegionId> = space
        .subspaces
        .iter()
        .flat_map(|s| s.regions.iter().map(|r| r.id))
        .collect();
    match regions[..] {
        [region] => Ok(region),
        _ => bail!("space {SPACE} has {} regions, not 1", regions.len()),
    }
}

/// The chain of `region` in `config` (empty when it is gone).
fn chain(config: &Configuration, region: RegionId) -> Vec<DaemonId> {
    config
        .region(region)
        .map(|(_, _, r)| r.chain.clone())
        .unwrap_or_default()
}

/// A client whose operations give up after [`PROBE_RETRY`], so the probe
/// loop notices the first moment a put can succeed.
async fn connect_probe(coordinator: &str, timeout: Duration) -> anyhow::Result<Client> {
    let options = ClientOptions {
        retry_time_max: PROBE_RETRY,
        ..ClientOptions::default()
    };
    bounded("the probe client to connect", timeout, async || {
        Ok(Client::connect_with([coordinator], options.clone())
            .await
            .ok())
    })
    .await
}

/// One probe put of record `i`'s first field.
async fn probe_put(probe: &Client, i: u64, value: &str) -> bool {
    let put = probe.put(
        SPACE,
        Value::str(&key_name(i)),
        [("field0", Value::str(value))],
    );
    matches!(
        tokio::time::timeout(Duration::from_secs(5), put).await,
        Ok(Ok(Outcome::Done))
    )
}

/// What the configuration showed after a kill, each with the time it was
/// first seen.
#[derive(Default)]
struct Timeline {
    detected: Option<Instant>,
    started: Option<(Instant, Transfer)>,
    done: Option<Instant>,
}

/// Follows the configuration from `known` until the transfer that
/// re-replicates `region` after `killed` left it has ended, or `timeout`.
async fn watch_recovery(
    admin: Admin,
    known: Epoch,
    region: RegionId,
    killed: DaemonId,
    replicas: usize,
    timeout: Duration,
) -> Timeline {
    let deadline = Instant::now() + timeout;
    let mut known = known;
    let mut timeline = Timeline::default();
    while Instant::now() < deadline {
        let config = match admin.wait_config(known, POLL).await {
            Ok(Some(config)) => config,
            Ok(None) => continue,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let seen = Instant::now();
        known = config.epoch;
        let chain = chain(&config, region);
        if timeline.detected.is_none() && !chain.contains(&killed) {
            timeline.detected = Some(seen);
        }
        let transfer = config.transfers.iter().find(|t| t.region == region);
        if timeline.started.is_none() {
            if let Some(t) = transfer {
                timeline.started = Some((seen, t.clone()));
            }
        }
        if let Some((_, t)) = &timeline.started {
            if transfer.is_none() && chain.len() == replicas && chain.contains(&t.to) {
                timeline.done = Some(seen);
                break;
            }
        }
    }
    timeline
}

#[allow(clippy::too_many_arguments)]
async fn one_run(
    options: &RecoveryOptions,
    servers: &mut Servers,
    admin: &Admin,
    client: &Client,
    probe: &Client,
    region: RegionId,
    objects: u64,
    run: usize,
) -> anyhow::Result<RecoveryRun> {
    let timeout = options.timeout;
    let config = admin.config().await?;
    let before = chain(&config, region);
    let replicas = before.len();
    let killed = match before[..] {
        [head, _] => head,
        _ => bail!("the region's chain is {before:?}, not two daemons"),
    };
    let victim = servers
        .daemon_index(&config, killed)
        .with_context(|| format!("daemon {killed} is not one of ours"))?;
    // The probe must write before the kill: its connection is open and the
    // region takes writes.
    let value = format!("run {run}");
    bounded("a put before the kill", timeout, async || {
        Ok(probe_put(probe, 0, &value).await.then_some(()))
    })
    .await?;

    let watcher = tokio::spawn(watch_recovery(
        admin.clone(),
        config.epoch,
        region,
        killed,
        replicas,
        timeout,
    ));
    let killed_at = servers.kill_daemon(victim)?;

    // Puts, one in flight, until one is acknowledged and the transfer has
    // ended: at once after each failure until the first acknowledgement,
    // then one per WRITE_INTERVAL.
    let deadline = killed_at + timeout;
    let mut first_write = None;
    // Every attempt: when it ended, how long it took, whether acknowledged.
    let mut attempts: Vec<(Instant, Duration, bool)> = Vec::new();
    let mut i = 0u64;
    while first_write.is_none() || !watcher.is_finished() {
        if Instant::now() > deadline {
            watcher.abort();
            bail!("no recovery within {timeout:?} of the kill");
        }
        let started = Instant::now();
        let acked = probe_put(probe, i % objects, &value).await;
        i += 1;
        let now = Instant::now();
        if acked {
            first_write.get_or_insert(now);
        }
        attempts.push((now, now - started, acked));
        let pause = match first_write {
            None => RETRY_PAUSE,
            Some(_) => WRITE_INTERVAL.saturating_sub(now - started),
        };
        tokio::time::sleep(pause).await;
    }
    let timeline = watcher.await.context("the configuration watcher failed")?;
    let first_write = first_write.context("no put was acknowledged")?;
    let (Some(detected), Some((started, transfer)), Some(done)) =
        (timeline.detected, timeline.started, timeline.done)
    else {
        bail!("the configuration showed no complete re-replication within {timeout:?}");
    };
    if transfer.to == killed {
        bail!("the transfer went to the killed daemon");
    }
    let failed_before = attempts.iter().filter(|a| a.0 < first_write).count();
    let during: Vec<(Duration, bool)> = attempts
        .iter()
        .filter(|(at, _, _)| (started..=done).contains(at))
        .map(|(_, latency, acked)| (*latency, *acked))
        .collect();
    let acked_during: Vec<Duration> = during.iter().filter(|a| a.1).map(|a| a.0).collect();
    let ms = |at: Instant| (at - killed_at).as_secs_f64() * 1e3;
    let transfer_seconds = (done - started).as_secs_f64();

    // No acknowledged object is gone (the probe only updates).
    let count = client
        .count(SPACE, Vec::<(&str, PredOp)>::new())
        .await
        .context("counting after the transfer")?;
    if count != objects {
        bail!("{count} objects after the transfer, {objects} before");
    }

    let restarted = Instant::now();
    if options.rejoin == Rejoin::Empty {
        admin.server_forget(killed).await?;
        servers.next_data_dir(victim);
    }
    servers.start_daemon(victim)?;
    let back = bounded("a daemon in the killed one's place", timeout, async || {
        servers.check_running()?;
        let config = admin.config().await?;
        Ok(servers
            .daemon_id(&config, victim)
            .filter(|id| config.daemons[id].state == DaemonState::Available))
    })
    .await?;
    if (back == killed) != (options.rejoin == Rejoin::Data) {
        bail!(
            "daemon {killed} came back as {back} (rejoin {})",
            options.rejoin.name()
        );
    }
    admin.wait_until_stable(timeout, POLL).await?;

    Ok(RecoveryRun {
        run,
        killed: killed.0,
        detected_ms: ms(detected),
        first_write_ms: ms(first_write),
        failed_attempts: failed_before as u64,
        transfer_from: transfer.from.0,
        transfer_to: transfer.to.0,
        target_held_region: false,
        transfer_started_ms: ms(started),
        transfer_done_ms: ms(done),
        transfer_seconds,
        objects_per_s: objects as f64 / transfer_seconds.max(1e-9),
        writes_during_transfer: acked_during.len() as u64,
        failed_writes_during_transfer: (during.len() - acked_during.len()) as u64,
        slowest_write_during_transfer_ms: acked_during
            .iter()
            .map(|d| d.as_secs_f64() * 1e3)
            .fold(0.0, f64::max),
        rejoin_seconds: restarted.elapsed().as_secs_f64(),
    })
}

/// Calls `probe` until it returns `Some`, every 100 ms, failing after
/// `timeout` with the last error seen.
pub(crate) async fn bounded<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match probe().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() > deadline {
            let why = last_error.map_or(String::new(), |e| format!(" (last error: {e:#})"));
            bail!("timed out after {timeout:?} waiting for {what}{why}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The coordinator and daemon processes we started, by name. Dropping it
/// kills every one still running (SIGKILL to its process id).
pub(crate) struct Servers {
    exe: PathBuf,
    dir: PathBuf,
    port: u16,
    /// Per daemon, which data directory it uses: `daemon-{i}` first, then
    /// `daemon-{i}.{n}` after [`Servers::next_data_dir`].
    generations: Vec<u32>,
    children: BTreeMap<String, Child>,
}

impl Servers {
    /// Servers of `daemons` daemons, none started yet.
    pub(crate) fn new(exe: PathBuf, dir: PathBuf, port: u16, daemons: usize) -> Servers {
        Servers {
            exe,
            dir,
            port,
            generations: vec![0; daemons],
            children: BTreeMap::new(),
        }
    }

    pub(crate) fn coordinator_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn daemon_addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.port + 1 + i as u16)
    }

    fn daemon_name(i: usize) -> String {
        format!("daemon-{i}")
    }

    /// The id daemon `i` registered under, by its address.
    pub(crate) fn daemon_id(&self, config: &Configuration, i: usize) -> Option<DaemonId> {
        let addr = self.daemon_addr(i);
        config
            .daemons
            .values()
            .find(|d| d.addr == addr)
            .map(|d| d.id)
    }

    /// Which of our daemons has id `id`.
    pub(crate) fn daemon_index(&self, config: &Configuration, id: DaemonId) -> Option<usize> {
        (0..self.generations.len()).find(|&i| self.daemon_id(config, i) == Some(id))
    }

    pub(crate) fn start_coordinator(&mut self) -> anyhow::Result<()> {
        let data = self.dir.join("coordinator");
        let args = [
            "coordinator".to_string(),
            "--listen".into(),
            "127.0.0.1".into(),
            "--port".into(),
            self.port.to_string(),
            "--data".into(),
            data.display().to_string(),
        ];
        self.spawn("coordinator", &args)
    }

    /// Gives daemon `i` a new, empty data directory for its next start.
    fn next_data_dir(&mut self, i: usize) {
        self.generations[i] += 1;
    }

    /// Starts (or restarts, from its data directory) daemon `i`.
    pub(crate) fn start_daemon(&mut self, i: usize) -> anyhow::Result<()> {
        let data = match self.generations[i] {
            0 => self.dir.join(Self::daemon_name(i)),
            n => self.dir.join(format!("{}.{n}", Self::daemon_name(i))),
        };
        let args = [
            "daemon".to_string(),
            "--listen".into(),
            "127.0.0.1".into(),
            "--port".into(),
            (self.port + 1 + i as u16).to_string(),
            "--coordinator".into(),
            self.coordinator_addr(),
            "--data".into(),
            data.display().to_string(),
        ];
        self.spawn(&Self::daemon_name(i), &args)
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    fn spawn(&mut self, name: &str, args: &[String]) -> anyhow::Result<()> {
        if self.children.contains_key(name) {
            bail!("{name} is running already");
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(name))
            .with_context(|| format!("opening {name}.log"))?;
        let child = Command::new(&self.exe)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("TESSERA_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {name} ({})", self.exe.display()))?;
        self.children.insert(name.to_string(), child);
        Ok(())
    }

    /// SIGKILL to daemon `i`; returns the moment the signal was sent.
    pub(crate) fn kill_daemon(&mut self, i: usize) -> anyhow::Result<Instant> {
        let name = Self::daemon_name(i);
        let mut child = self
            .children
            .remove(&name)
            .with_context(|| format!("{name} is not running"))?;
        let at = Instant::now();
        child.kill().with_context(|| format!("killing {name}"))?;
        let _ = child.wait();
        Ok(at)
    }

    /// An error naming any server that exited by itself.
    pub(crate) fn check_running(&mut self) -> anyhow::Result<()> {
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                bail!("{name} exited ({status})");
            }
        }
        Ok(())
    }

    /// The last `lines` lines of every server's log.
    pub(crate) fn log_tails(&self, lines: usize) -> String {
        let mut names: Vec<String> = vec!["coordinator".into()];
        names.extend((0..self.generations.len()).map(Self::daemon_name));
        let mut out = String::new();
        for name in names {
            let text = std::fs::read_to_string(self.log_path(&name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(lines).collect();
            out.push_str(&format!("----- {name} -----\n"));
            for line in tail.iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Stops the daemons, then the coordinator: SIGTERM to each process
    /// id, SIGKILL to any still running after 10 s.
    pub(crate) fn stop_all(&mut self) {
        let daemons: Vec<String> = (0..self.generations.len()).map(Self::daemon_name).collect();
        self.stop(&daemons);
        self.stop(&["coordinator".to_string()]);
        self.kill_all();
    }

    fn stop(&mut self, names: &[String]) {
        let mut stopping: Vec<(String, Child)> = names
            .iter()
            .filter_map(|n| self.children.remove(n).map(|c| (n.clone(), c)))
            .collect();
        for (_, child) in &stopping {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && stopping
                .iter_mut()
                .any(|(_, c)| !matches!(c.try_wait(), Ok(Some(_))))
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        for (name, mut child) in stopping {
            if !matches!(child.try_wait(), Ok(Some(_))) {
                eprintln!("bench: {name} ignored SIGTERM for 10 s; killing it");
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// SIGKILL to every server still running, and reaps them.
    pub(crate) fn kill_all(&mut self) {
        for (_, mut child) in std::mem::take(&mut self.children) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median([7.5]), 7.5);
        assert_eq!(median(Vec::<f64>::new()), 0.0);
    }
}
