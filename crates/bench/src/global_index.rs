//! Global secondary indexes beside SLIK's figures (issue 12, point 7;
//! RESEARCH.md B.2): the scenarios of `tessera bench global-index`.
//!
//! Every scenario uses one record shape: a string key `k` and ten string
//! attributes `a0..a9` of 30 bytes each (SLIK's objects carry 30-byte
//! secondary keys). Attribute `aJ` of record `i` is [`value`]`(i, J)`, a
//! bijection of `i` for each `J`, so every value is unique (an equality
//! lookup matches exactly one object) and its first bytes are spread
//! evenly. The spread matters: an index's first cuts are uniform over the
//! order coordinate, and a string's coordinate is its first eight bytes,
//! so values that share their first byte share an indexlet.
//!
//! - [`GiScenario::Lookup`]: equality on an indexed attribute vs a get of
//!   the same object, 1 and `workers` in flight (SLIK: about 2×).
//! - [`GiScenario::Put`]: overwrite latency and throughput with 0, 1, 2, 4,
//!   10 global indexes (SLIK Fig. 5: 32 → 50 µs from 1 to 10).
//! - [`GiScenario::Indexlets`]: lookup throughput with 1, 2, 4, 8
//!   indexlets beside the same search through a local index, which fans
//!   out over every region (SLIK Figs. 6–9).
//! - [`GiScenario::Create`]: `add_global_index` over a loaded space while
//!   gets and puts run: time to ready, foreground before vs during.
//! - [`GiScenario::Split`]: `split_global_index` while lookups and puts
//!   run: time to hand-over, lookup latency before vs during.
//! - [`GiScenario::Range`]: a range on a string attribute through a global
//!   index vs PostgreSQL's B-tree ([`run_postgres`], after the cluster
//!   stopped: one system at a time).
//!
//! Puts rewrite a record with the values it already has, so a lookup
//! always has exactly one right answer while writes run: a lookup that
//! finds nothing is counted (`missed`), one that finds anything else is a
//! failed call.

use crate::cluster::{probe_daemon, READY_TIMEOUT};
use crate::driver::{results_table, run_phase_until, BoxFuture, Load, OpStats, Outcome, Store};
use crate::driver::{run_phase, PhaseResult};
use crate::scenarios::{fresh_space, wait_space, FnSource};
use crate::stores::Pool;
use crate::workload::Op;
use anyhow::{bail, Context};
use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_client::{Admin, Client, PredOp, Value};
use tessera_types::SubspaceKind;

/// The attributes of the benchmark's records.
pub const ATTRS: [&str; 10] = ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"];

/// How long an index build or a split may take before the run gives up.
const PART_WAIT_MAX: Duration = Duration::from_secs(600);
/// How often the configuration is polled for a part's state.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The scenarios of `tessera bench global-index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GiScenario {
    Lookup,
    Put,
    Indexlets,
    Create,
    Split,
    Range,
}

impl GiScenario {
    /// Every scenario, in the order a run takes them.
    pub const ALL: [GiScenario; 6] = [
        GiScenario::Lookup,
        GiScenario::Put,
        GiScenario::Indexlets,
        GiScenario::Create,
        GiScenario::Split,
        GiScenario::Range,
    ];

    /// Its name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            GiScenario::Lookup => "lookup",
            GiScenario::Put => "put",
            GiScenario::Indexlets => "indexlets",
            GiScenario::Create => "create",
            GiScenario::Split => "split",
            GiScenario::Range => "range",
        }
    }
}

/// A scenario name that is not one of [`GiScenario::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("no global-index scenario {0:?} (lookup, put, indexlets, create, split, range)")]
pub struct UnknownScenario(pub String);

impl std::str::FromStr for GiScenario {
    type Err = UnknownScenario;

    fn from_str(s: &str) -> Result<GiScenario, UnknownScenario> {
        GiScenario::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| UnknownScenario(s.to_string()))
    }
}

/// The sizes and shape of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GiOptions {
    /// Objects in the spaces of every scenario but `create`.
    pub records: u64,
    /// Operations per measured phase.
    pub operations: u64,
    /// Objects in the space `create` indexes.
    pub create_records: u64,
    /// Key-subspace partitions, and indexlets of the indexes whose count
    /// the scenario does not vary.
    pub partitions: u32,
    /// Global indexes of the `put` scenario's spaces.
    pub index_counts: Vec<usize>,
    /// Indexlets of the `indexlets` scenario's index.
    pub indexlet_counts: Vec<u32>,
    /// Operations in flight of the concurrent phases.
    pub workers: usize,
    /// Each phase stops after this long even if operations remain.
    pub time_limit: Duration,
    /// The scenarios to run.
    pub scenarios: Vec<GiScenario>,
    /// Where PostgreSQL listens for the `range` scenario's other side.
    pub postgres_port: u16,
    /// Daemons the cluster has: each space is made only once that many
    /// serve (a loaded machine can stall a local cluster's heartbeats).
    pub daemons: usize,
}

impl GiOptions {
    fn runs(&self, scenario: GiScenario) -> bool {
        self.scenarios.contains(&scenario)
    }

    fn load(&self, workers: usize, operations: u64) -> Load {
        Load {
            workers,
            operations,
            time_limit: self.time_limit,
        }
    }
}

/// How attribute values are spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Encoding {
    /// 16 lowercase hex digits of the mix, then the record number: text
    /// that PostgreSQL's TEXT takes and a split can name, whose first
    /// byte is one of `0-9a-f` only.
    Hex,
    /// The mix's 8 bytes big-endian, then the record number: the first
    /// byte spreads over all 256 values, so each of N uniform first cuts
    /// gets about 1/N of the values.
    Raw,
}

/// A bijection of `record` for each `attr` (splitmix64's finalizer after a
/// per-attribute xor): unique values, uniformly spread.
pub fn mix(record: u64, attr: usize) -> u64 {
    let mut z = record ^ (attr as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Attribute `attr` of record `record`: 30 bytes, ordered as [`mix`] is.
pub fn value(record: u64, attr: usize, encoding: Encoding) -> Vec<u8> {
    let h = mix(record, attr);
    match encoding {
        Encoding::Hex => format!("{h:016x}{record:014}").into_bytes(),
        Encoding::Raw => {
            let mut v = h.to_be_bytes().to_vec();
            v.extend_from_slice(format!("{record:022}").as_bytes());
            v
        }
    }
}

/// The hex-encoded bound below every value whose mix is at least `h`.
pub fn hex_bound(h: u64) -> String {
    format!("{h:016x}")
}

/// The key of record `record`.
pub fn record_key(record: u64) -> String {
    format!("r{record:012}")
}

/// The description of a benchmark space: `P` key partitions, a local
/// index on `local`, global indexes `(attribute, indexlets)`.
pub fn description(
    space: &str,
    partitions: u32,
    globals: &[(usize, u32)],
    local: Option<usize>,
) -> String {
    let plural = |n: u32| if n == 1 { "partition" } else { "partitions" };
    let attrs: Vec<String> = ATTRS.iter().map(|a| format!("string {a}")).collect();
    let mut d = format!("space {space} key k attributes {}", attrs.join(", "));
    if let Some(a) = local {
        let _ = write!(d, " index {}", ATTRS[a]);
    }
    // Each global index names its indexlets, so the space's `create`
    // that follows is the space's own.
    for &(a, n) in globals {
        let _ = write!(d, " global index {} create {n} {}", ATTRS[a], plural(n));
    }
    let _ = write!(
        d,
        " create {partitions} {} tolerate 1 failure",
        plural(partitions)
    );
    d
}

/// A Tessera space of benchmark records as a [`Store`]: `Insert` and
/// `UpdateIndexed` put record `recno` whole, `Read` gets a key,
/// `SearchEq` looks record `recno` up by its attribute `lookup_attr`, and
/// `Scan` reads the hex range `[start, start + window)` of `a0`.
pub struct GiStore {
    client: Client,
    space: String,
    encoding: Encoding,
    lookup_attr: usize,
    /// Objects the range reads returned.
    objects: AtomicU64,
}

impl GiStore {
    pub fn new(client: Client, space: &str, encoding: Encoding, lookup_attr: usize) -> GiStore {
        GiStore {
            client,
            space: space.to_string(),
            encoding,
            lookup_attr,
            objects: AtomicU64::new(0),
        }
    }

    async fn put(&self, record: u64) -> anyhow::Result<Outcome> {
        let attrs: Vec<(&str, Value)> = ATTRS
            .iter()
            .enumerate()
            .map(|(j, a)| (*a, Value::String(value(record, j, self.encoding))))
            .collect();
        self.client
            .put(&self.space, Value::str(&record_key(record)), attrs)
            .await?
            .into_result()?;
        Ok(Outcome::Ok)
    }

    async fn lookup(&self, record: u64) -> anyhow::Result<Outcome> {
        let wanted = value(record, self.lookup_attr, self.encoding);
        let attr = ATTRS[self.lookup_attr];
        let found = self
            .client
            .search(&self.space, [(attr, PredOp::Eq(Value::String(wanted)))])
            .await?;
        let key = Value::str(&record_key(record));
        match found.as_slice() {
            [] => Ok(Outcome::NotFound),
            [one] if one.get("k") == Some(&key) => Ok(Outcome::Ok),
            other => bail!(
                "the lookup of record {record} returned {} objects, not it alone",
                other.len()
            ),
        }
    }

    async fn range(&self, lo: u64, hi: u64) -> anyhow::Result<Outcome> {
        let (lo, hi) = (hex_bound(lo), hex_bound(hi));
        let found = self
            .client
            .search(
                &self.space,
                [
                    ("a0", PredOp::Ge(Value::str(&lo))),
                    ("a0", PredOp::Lt(Value::str(&hi))),
                ],
            )
            .await?;
        for record in &found {
            match record.get("a0") {
                Some(Value::String(v))
                    if v.as_slice() >= lo.as_bytes() && v.as_slice() < hi.as_bytes() => {}
                other => bail!("a range read returned a0 = {other:?}, outside [{lo}, {hi})"),
            }
        }
        self.objects
            .fetch_add(found.len() as u64, Ordering::Relaxed);
        Ok(if found.is_empty() {
            Outcome::NotFound
        } else {
            Outcome::Ok
        })
    }
}

impl Store for GiStore {
    fn name(&self) -> &str {
        "tessera"
    }

    fn supports(&self, kind: &str) -> bool {
        matches!(
            kind,
            "INSERT" | "UPDATE-INDEXED" | "READ" | "SEARCH-EQ" | "SCAN"
        )
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(async move {
            match op {
                Op::Insert { recno, .. } | Op::UpdateIndexed { recno, .. } => {
                    self.put(*recno as u64).await
                }
                Op::Read { key } => {
                    Ok(match self.client.get(&self.space, Value::str(key)).await? {
                        Some(_) => Outcome::Ok,
                        None => Outcome::NotFound,
                    })
                }
                Op::SearchEq { recno } => self.lookup(*recno as u64).await,
                Op::Scan { start, window, .. } => {
                    let lo = *start as u64;
                    self.range(lo, lo.saturating_add(*window as u64)).await
                }
                other => bail!("not a global-index benchmark operation: {}", other.kind()),
            }
        })
    }
}

/// The `range` scenario's table in PostgreSQL: the same records, `a0`
/// under a B-tree in byte order (`COLLATE "C"`, as Tessera orders
/// strings).
pub struct GiPostgres {
    conninfo: String,
    pool: Pool<PgConn>,
    objects: AtomicU64,
}

struct PgConn {
    client: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    range: tokio_postgres::Statement,
    _task: tokio::task::JoinHandle<()>,
}

impl PgConn {
    async fn connect(conninfo: &str) -> anyhow::Result<PgConn> {
        let (client, task) = crate::stores::postgres::connect(conninfo).await?;
        let placeholders: Vec<String> = (0..=ATTRS.len()).map(|i| format!("${}", i + 1)).collect();
        let insert = client
            .prepare(&format!(
                "INSERT INTO gi_bench (k, {}) VALUES ({})",
                ATTRS.join(", "),
                placeholders.join(", ")
            ))
            .await?;
        let range = client
            .prepare("SELECT * FROM gi_bench WHERE a0 >= $1 AND a0 < $2")
            .await?;
        Ok(PgConn {
            client,
            insert,
            range,
            _task: task,
        })
    }

    /// Runs `op`, adding the rows a range read returned to `objects`.
    async fn run(&self, op: &Op, objects: &AtomicU64) -> anyhow::Result<Outcome> {
        match op {
            Op::Insert { recno, .. } => {
                let record = *recno as u64;
                let texts: Vec<String> = std::iter::once(record_key(record))
                    .chain((0..ATTRS.len()).map(|j| {
                        String::from_utf8_lossy(&value(record, j, Encoding::Hex)).into_owned()
                    }))
                    .collect();
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = texts
                    .iter()
                    .map(|t| t as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                self.client.execute(&self.insert, &params).await?;
                Ok(Outcome::Ok)
            }
            Op::Scan { start, window, .. } => {
                let lo = *start as u64;
                let (lo, hi) = (hex_bound(lo), hex_bound(lo.saturating_add(*window as u64)));
                let rows = self.client.query(&self.range, &[&lo, &hi]).await?;
                objects.fetch_add(rows.len() as u64, Ordering::Relaxed);
                Ok(if rows.is_empty() {
                    Outcome::NotFound
                } else {
                    Outcome::Ok
                })
            }
            other => bail!("not a global-index benchmark operation: {}", other.kind()),
        }
    }
}

impl GiPostgres {
    pub fn new(conninfo: &str) -> GiPostgres {
        GiPostgres {
            conninfo: conninfo.to_string(),
            pool: Pool::default(),
            objects: AtomicU64::new(0),
        }
    }

    /// Drops and creates `gi_bench` with its B-tree on `a0`.
    pub async fn create_table(&self) -> anyhow::Result<()> {
        let rest: String = ATTRS[1..].iter().map(|a| format!(", {a} TEXT")).collect();
        let sql = format!(
            "DROP TABLE IF EXISTS gi_bench;
             CREATE TABLE gi_bench (k TEXT PRIMARY KEY, a0 TEXT COLLATE \"C\" NOT NULL{rest});
             CREATE INDEX gi_bench_a0 ON gi_bench (a0);"
        );
        crate::stores::postgres::batch(&self.conninfo, &sql)
            .await
            .context("creating gi_bench")
    }
}

impl Store for GiPostgres {
    fn name(&self) -> &str {
        "postgres"
    }

    fn supports(&self, kind: &str) -> bool {
        matches!(kind, "INSERT" | "SCAN")
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(async move {
            self.pool
                .with(
                    || PgConn::connect(&self.conninfo),
                    |conn| async move {
                        let r = conn.run(op, &self.objects).await;
                        (conn, r)
                    },
                )
                .await
        })
    }
}

/// Equality lookup latency beside a get's at one in flight.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LatencyRatio {
    pub in_flight: usize,
    pub get_p50_us: u64,
    pub lookup_p50_us: u64,
    /// Lookup p50 ÷ get p50 (SLIK: about 2).
    pub p50_ratio: f64,
    pub get_p99_us: u64,
    pub lookup_p99_us: u64,
    pub p99_ratio: f64,
}

/// What the `lookup` scenario found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LookupReport {
    pub phases: Vec<PhaseResult>,
    /// The first line of `search_describe` for a lookup.
    pub plan: String,
    pub ratios: Vec<LatencyRatio>,
    pub failed_calls: u64,
    /// Lookups and gets of a present object that found nothing.
    pub missed: u64,
}

/// Overwrites with `indexes` global indexes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PutPoint {
    pub indexes: usize,
    /// At one in flight.
    pub p50_us: u64,
    pub p99_us: u64,
    /// At `workers` in flight.
    pub ops_per_s: f64,
    /// p50 ÷ the p50 with no index.
    pub p50_ratio: f64,
    /// (p50 − the p50 with no index) ÷ indexes: what each index adds.
    pub slope_us_per_index: Option<f64>,
    /// Throughput ÷ the throughput with no index.
    pub throughput_ratio: f64,
}

/// What the `put` scenario found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PutReport {
    pub phases: Vec<PhaseResult>,
    pub points: Vec<PutPoint>,
    pub failed_calls: u64,
}

/// Lookups through `indexlets` indexlets and through a local index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalePoint {
    pub indexlets: u32,
    /// The key subspace's regions, which the local index's search fans
    /// out over.
    pub key_partitions: u32,
    pub global_ops_per_s: f64,
    pub local_ops_per_s: f64,
    /// Global ÷ local throughput.
    pub throughput_ratio: f64,
    pub global_p50_us: u64,
    pub local_p50_us: u64,
    pub global_plan: String,
    pub local_plan: String,
}

/// What the `indexlets` scenario found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScaleReport {
    pub phases: Vec<PhaseResult>,
    pub points: Vec<ScalePoint>,
    pub failed_calls: u64,
    pub missed: u64,
}

/// A foreground load before and during a layout change.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Foreground {
    pub before: PhaseResult,
    pub during: PhaseResult,
    /// During ÷ before.
    pub throughput_ratio: f64,
}

/// What the `create` scenario found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateReport {
    pub objects: u64,
    /// From `add_global_index` to the part's state ready.
    pub seconds_to_ready: f64,
    pub foreground: Foreground,
    /// The plan of a lookup once the index is ready.
    pub plan_after: String,
    /// Lookups right after ready (one per sampled object) that missed.
    pub missed_after: u64,
    pub failed_calls: u64,
    pub missed: u64,
}

/// What the `split` scenario found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SplitReport {
    pub objects: u64,
    /// The values the index was cut at.
    pub cuts: Vec<String>,
    /// From `split_global_index` to the new part ready and the old gone.
    pub seconds_to_handover: f64,
    pub foreground: Foreground,
    pub lookup_p99_before_us: u64,
    pub lookup_p99_during_us: u64,
    pub indexlets_after: usize,
    pub failed_calls: u64,
    pub missed: u64,
}

/// What the `range` scenario found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RangeReport {
    pub objects: u64,
    /// Objects a range covers on average (its width).
    pub expected_per_range: f64,
    pub plan: String,
    pub tessera: PhaseResult,
    pub tessera_objects_per_range: f64,
    pub postgres: Option<PhaseResult>,
    pub postgres_objects_per_range: Option<f64>,
    /// Tessera ÷ PostgreSQL throughput (above 1: Tessera faster).
    pub throughput_ratio: Option<f64>,
    /// Tessera ÷ PostgreSQL p50 (above 1: Tessera slower).
    pub p50_ratio: Option<f64>,
    pub p99_ratio: Option<f64>,
    pub failed_calls: u64,
}

/// Everything a run found; a scenario not run is `None`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GiReport {
    pub options: GiOptions,
    pub lookup: Option<LookupReport>,
    pub put: Option<PutReport>,
    pub indexlets: Option<ScaleReport>,
    pub create: Option<CreateReport>,
    pub split: Option<SplitReport>,
    pub range: Option<RangeReport>,
    pub notes: Vec<String>,
}

/// The statistics of operation `kind` in `r`, if any ran.
fn stats<'a>(r: &'a PhaseResult, kind: &str) -> Option<&'a OpStats> {
    r.ops.get(kind)
}

/// Calls that failed, over `phases`.
fn failed(phases: &[&PhaseResult]) -> u64 {
    phases
        .iter()
        .flat_map(|r| r.ops.values())
        .map(|s| s.errors)
        .sum()
}

/// Gets and lookups of a present object that found nothing, over `phases`.
fn missed(phases: &[&PhaseResult]) -> u64 {
    phases
        .iter()
        .flat_map(|r| r.ops.iter())
        .filter(|(kind, _)| matches!(kind.as_str(), "READ" | "SEARCH-EQ"))
        .map(|(_, s)| s.not_found)
        .sum()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// A record number drawn uniformly from `0..records`.
fn any_record(rng: &mut StdRng, records: u64) -> i64 {
    rng.gen_range(0..records.max(1)) as i64
}

fn get_op(rng: &mut StdRng, records: u64) -> Op {
    Op::Read {
        key: record_key(any_record(rng, records) as u64),
    }
}

fn lookup_op(rng: &mut StdRng, records: u64) -> Op {
    Op::SearchEq {
        recno: any_record(rng, records),
    }
}

fn overwrite_op(rng: &mut StdRng, records: u64) -> Op {
    let recno = any_record(rng, records);
    Op::UpdateIndexed {
        key: record_key(recno as u64),
        recno,
    }
}

/// Runs phase `name` of `load` on `store`, each worker drawing operations
/// from `ops` with its own seed, until the budget, the time limit or
/// `stop`.
async fn measure(
    store: &Arc<dyn Store>,
    name: &str,
    load: Load,
    seed: u64,
    stop: Option<Arc<AtomicBool>>,
    ops: impl Fn(&mut StdRng) -> Op + Clone + Send + 'static,
) -> anyhow::Result<PhaseResult> {
    run_phase_until(store.clone(), name, load, stop, move |i| {
        FnSource::boxed(seed + i as u64, ops.clone())
    })
    .await
}

/// Puts records `0..records` with `workers` in flight.
async fn load_records(
    store: &Arc<dyn Store>,
    records: u64,
    workers: usize,
    time_limit: Duration,
) -> anyhow::Result<PhaseResult> {
    let next = Arc::new(AtomicU64::new(0));
    let load = Load {
        workers,
        operations: records,
        time_limit,
    };
    let r = run_phase(store.clone(), "load", load, move |_| {
        let next = next.clone();
        FnSource::boxed(0, move |_| {
            let recno = next.fetch_add(1, Ordering::Relaxed);
            Op::Insert {
                key: record_key(recno),
                recno: recno as i64,
                fields: Arc::default(),
            }
        })
    })
    .await?;
    let loaded = stats(&r, "INSERT").map_or(0, |s| s.count);
    anyhow::ensure!(
        loaded == records,
        "loaded {loaded} of {records} records (first error: {:?})",
        r.first_error
    );
    Ok(r)
}

/// The global-index parts of `space` in `admin`'s configuration: (part,
/// ready, indexlets).
async fn global_parts(
    admin: &Admin,
    space: &str,
) -> anyhow::Result<Vec<(tessera_types::PartId, bool, usize)>> {
    let config = admin.config().await?;
    let space = config
        .space(space)
        .with_context(|| format!("no space {space}"))?;
    Ok(space
        .subspaces
        .iter()
        .filter(|l| l.kind == SubspaceKind::GlobalIndex)
        .map(|l| (l.part, l.state.is_ready(), l.regions.len()))
        .collect())
}

/// Polls until `done` holds of the global parts of `space`; returns how
/// long that took.
pub(crate) async fn wait_parts(
    admin: &Admin,
    space: &str,
    what: &str,
    done: impl Fn(&[(tessera_types::PartId, bool, usize)]) -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        if done(&global_parts(admin, space).await?) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PART_WAIT_MAX {
            bail!("{what} of {space}: not done after {PART_WAIT_MAX:?}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits until `daemons` daemons are available and each answers at the
/// configuration's epoch, as [`crate::cluster::wait_ready`] does.
async fn wait_daemons(admin: &Admin, daemons: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let config = admin.config().await?;
        let available: Vec<&str> = config
            .daemons
            .values()
            .filter(|d| d.state == tessera_types::DaemonState::Available)
            .map(|d| d.addr.as_str())
            .collect();
        if available.len() >= daemons {
            let mut answered = true;
            for addr in &available {
                let transport = tessera_client::Transport::plain();
                answered &= probe_daemon(addr, &transport, config.epoch).await.is_ok();
            }
            if answered {
                return Ok(());
            }
        }
        if started.elapsed() > READY_TIMEOUT {
            bail!(
                "{} of {daemons} daemons available after {READY_TIMEOUT:?}",
                available.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fresh space `name` of `description`, usable, its global indexes
/// ready, with a store on it.
async fn make_space(
    admin: &Admin,
    client: &Client,
    name: &str,
    description: &str,
    encoding: Encoding,
    lookup_attr: usize,
    daemons: usize,
) -> anyhow::Result<Arc<GiStore>> {
    wait_daemons(admin, daemons).await?;
    fresh_space(admin, name, description)
        .await
        .with_context(|| format!("creating {description:?}"))?;
    wait_space(client, name).await?;
    wait_parts(admin, name, "the indexes", |parts| {
        parts.iter().all(|&(_, ready, _)| ready)
    })
    .await?;
    Ok(Arc::new(GiStore::new(
        client.clone(),
        name,
        encoding,
        lookup_attr,
    )))
}

/// The first line of the plan of a lookup of record 0 by `attr`.
async fn plan(
    client: &Client,
    space: &str,
    attr: usize,
    encoding: Encoding,
) -> anyhow::Result<String> {
    let v = Value::String(value(0, attr, encoding));
    let text = client
        .search_describe(space, [(ATTRS[attr], PredOp::Eq(v))])
        .await?;
    Ok(chosen(&text))
}

/// The line of a `search_describe` text that says what the search uses.
fn chosen(describe: &str) -> String {
    describe
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("uses "))
        .unwrap_or("(no plan line)")
        .to_string()
}

/// Notes `plan` when it does not go through a global index although
/// `what` is meant to measure one.
fn check_plan(notes: &mut Vec<String>, what: &str, plan: &str) {
    if !plan.contains("global index") {
        notes.push(format!(
            "{what}: the planner did not choose the global index: {plan}"
        ));
    }
}

/// Runs the Tessera side of every scenario of `options` against the
/// cluster at `coordinator`.
pub async fn run_tessera(coordinator: &str, options: &GiOptions) -> anyhow::Result<GiReport> {
    let admin = Admin::new(coordinator);
    let client = Client::connect(coordinator).await?;
    let mut report = GiReport {
        options: options.clone(),
        lookup: None,
        put: None,
        indexlets: None,
        create: None,
        split: None,
        range: None,
        notes: Vec::new(),
    };
    if options.runs(GiScenario::Lookup) {
        eprintln!("bench: global-index lookup …");
        let r = lookup(&admin, &client, options).await?;
        check_plan(&mut report.notes, "lookup", &r.plan);
        report.lookup = Some(r);
    }
    if options.runs(GiScenario::Put) {
        eprintln!("bench: global-index put …");
        report.put = Some(put(&admin, &client, options).await?);
    }
    if options.runs(GiScenario::Indexlets) {
        eprintln!("bench: global-index indexlets …");
        let r = indexlets(&admin, &client, options).await?;
        for p in &r.points {
            let what = format!("indexlets ({} indexlets)", p.indexlets);
            check_plan(&mut report.notes, &what, &p.global_plan);
        }
        report.indexlets = Some(r);
    }
    if options.runs(GiScenario::Create) {
        eprintln!("bench: global-index create …");
        let r = create(&admin, &client, options).await?;
        check_plan(&mut report.notes, "create (once ready)", &r.plan_after);
        report.create = Some(r);
    }
    if options.runs(GiScenario::Split) {
        eprintln!("bench: global-index split …");
        report.split = Some(split(&admin, &client, options).await?);
    }
    if options.runs(GiScenario::Range) {
        eprintln!("bench: global-index range (tessera) …");
        let r = range(&admin, &client, options).await?;
        check_plan(&mut report.notes, "range", &r.plan);
        report.range = Some(r);
    }
    Ok(report)
}

/// Scenario 1: a get and an equality lookup of the same objects, 1 and
/// `workers` in flight.
async fn lookup(admin: &Admin, client: &Client, o: &GiOptions) -> anyhow::Result<LookupReport> {
    let name = "bench_gi_lookup";
    let d = description(name, o.partitions, &[(0, o.partitions)], None);
    let store: Arc<dyn Store> =
        make_space(admin, client, name, &d, Encoding::Hex, 0, o.daemons).await?;
    let records = o.records;
    let mut phases = vec![load_records(&store, records, o.workers, o.time_limit).await?];
    let plan = plan(client, name, 0, Encoding::Hex).await?;
    let mut ratios = Vec::new();
    for in_flight in [1, o.workers] {
        let load = o.load(in_flight, o.operations);
        let get = measure(
            &store,
            &format!("get x{in_flight}"),
            load,
            100,
            None,
            move |r| get_op(r, records),
        )
        .await?;
        let look = measure(
            &store,
            &format!("lookup x{in_flight}"),
            load,
            100,
            None,
            move |r| lookup_op(r, records),
        )
        .await?;
        if let (Some(g), Some(l)) = (stats(&get, "READ"), stats(&look, "SEARCH-EQ")) {
            ratios.push(LatencyRatio {
                in_flight,
                get_p50_us: g.p50_us,
                lookup_p50_us: l.p50_us,
                p50_ratio: ratio(l.p50_us as f64, g.p50_us as f64),
                get_p99_us: g.p99_us,
                lookup_p99_us: l.p99_us,
                p99_ratio: ratio(l.p99_us as f64, g.p99_us as f64),
            });
        }
        phases.push(get);
        phases.push(look);
    }
    admin.rm_space(name).await?;
    let all: Vec<&PhaseResult> = phases.iter().collect();
    Ok(LookupReport {
        failed_calls: failed(&all),
        missed: missed(&all),
        phases,
        plan,
        ratios,
    })
}

/// Scenario 2: overwrites of whole records with 0, 1, … global indexes,
/// at one in flight (latency) and `workers` (throughput).
async fn put(admin: &Admin, client: &Client, o: &GiOptions) -> anyhow::Result<PutReport> {
    let records = o.records;
    let mut phases = Vec::new();
    let mut measured: Vec<(usize, u64, u64, f64)> = Vec::new();
    for &k in &o.index_counts {
        let name = format!("bench_gi_put{k}");
        let globals: Vec<(usize, u32)> =
            (0..k.min(ATTRS.len())).map(|a| (a, o.partitions)).collect();
        let d = description(&name, o.partitions, &globals, None);
        let store: Arc<dyn Store> =
            make_space(admin, client, &name, &d, Encoding::Hex, 0, o.daemons).await?;
        let mut load = load_records(&store, records, o.workers, o.time_limit).await?;
        load.phase = format!("load, {k} idx");
        let one = measure(
            &store,
            &format!("put x1, {k} idx"),
            o.load(1, o.operations),
            200,
            None,
            move |r| overwrite_op(r, records),
        )
        .await?;
        let many = measure(
            &store,
            &format!("put x{}, {k} idx", o.workers),
            o.load(o.workers, o.operations),
            300,
            None,
            move |r| overwrite_op(r, records),
        )
        .await?;
        if let Some(s) = stats(&one, "UPDATE-INDEXED") {
            measured.push((k, s.p50_us, s.p99_us, many.throughput));
        }
        phases.extend([load, one, many]);
        admin.rm_space(&name).await?;
    }
    let base = measured.iter().find(|m| m.0 == 0).copied();
    let points = measured
        .iter()
        .map(|&(k, p50, p99, tput)| PutPoint {
            indexes: k,
            p50_us: p50,
            p99_us: p99,
            ops_per_s: tput,
            p50_ratio: base.map_or(f64::NAN, |b| ratio(p50 as f64, b.1 as f64)),
            slope_us_per_index: base
                .filter(|_| k > 0)
                .map(|b| (p50 as f64 - b.1 as f64) / k as f64),
            throughput_ratio: base.map_or(f64::NAN, |b| ratio(tput, b.3)),
        })
        .collect();
    let all: Vec<&PhaseResult> = phases.iter().collect();
    Ok(PutReport {
        failed_calls: failed(&all),
        phases,
        points,
    })
}

/// Scenario 3: lookups through N indexlets, and the same equality through
/// a local index that fans out over every region of the key subspace.
/// Values are raw bytes so that N uniform cuts each get 1/N of them.
async fn indexlets(admin: &Admin, client: &Client, o: &GiOptions) -> anyhow::Result<ScaleReport> {
    let records = o.records;
    let mut phases = Vec::new();
    let mut points = Vec::new();
    for &n in &o.indexlet_counts {
        let name = format!("bench_gi_scale{n}");
        // The planner prefers one key region to a lookup (two rounds):
        // at least two, so that a 1-indexlet lookup is measured at all.
        let key_partitions = n.max(2);
        let d = description(&name, key_partitions, &[(0, n)], Some(1));
        let global: Arc<dyn Store> =
            make_space(admin, client, &name, &d, Encoding::Raw, 0, o.daemons).await?;
        let local: Arc<dyn Store> = Arc::new(GiStore::new(client.clone(), &name, Encoding::Raw, 1));
        let mut load = load_records(&global, records, o.workers, o.time_limit).await?;
        load.phase = format!("load, {n} indexlets");
        let load_ = o.load(o.workers, o.operations);
        let g = measure(
            &global,
            &format!("global, {n} idxlets"),
            load_,
            400,
            None,
            move |r| lookup_op(r, records),
        )
        .await?;
        let l = measure(
            &local,
            &format!("local, {key_partitions} regions"),
            load_,
            400,
            None,
            move |r| lookup_op(r, records),
        )
        .await?;
        let p50 = |r: &PhaseResult| stats(r, "SEARCH-EQ").map_or(0, |s| s.p50_us);
        points.push(ScalePoint {
            indexlets: n,
            key_partitions,
            global_ops_per_s: g.throughput,
            local_ops_per_s: l.throughput,
            throughput_ratio: ratio(g.throughput, l.throughput),
            global_p50_us: p50(&g),
            local_p50_us: p50(&l),
            global_plan: plan(client, &name, 0, Encoding::Raw).await?,
            local_plan: plan(client, &name, 1, Encoding::Raw).await?,
        });
        phases.extend([load, g, l]);
        admin.rm_space(&name).await?;
    }
    let all: Vec<&PhaseResult> = phases.iter().collect();
    Ok(ScaleReport {
        failed_calls: failed(&all),
        missed: missed(&all),
        phases,
        points,
    })
}

/// A half-gets, half-overwrites foreground load of `records` records.
fn get_put_op(rng: &mut StdRng, records: u64) -> Op {
    if rng.gen_bool(0.5) {
        get_op(rng, records)
    } else {
        overwrite_op(rng, records)
    }
}

/// A half-lookups, half-overwrites foreground load.
fn lookup_put_op(rng: &mut StdRng, records: u64) -> Op {
    if rng.gen_bool(0.5) {
        lookup_op(rng, records)
    } else {
        overwrite_op(rng, records)
    }
}

/// Runs `ops` on `store` as phase `before`, then again while `change`
/// runs, until it is done; returns both phases and what `change` returned.
async fn under_load<T>(
    store: &Arc<dyn Store>,
    o: &GiOptions,
    ops: impl Fn(&mut StdRng) -> Op + Clone + Send + 'static,
    change: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(Foreground, T)> {
    let before = measure(
        store,
        "before",
        o.load(o.workers, o.operations),
        500,
        None,
        ops.clone(),
    )
    .await?;
    let stop = Arc::new(AtomicBool::new(false));
    // As many operations as the change needs, bounded by a generous count
    // and by PART_WAIT_MAX.
    let load = Load {
        workers: o.workers,
        operations: o.operations.saturating_mul(1000),
        time_limit: PART_WAIT_MAX,
    };
    let during = measure(store, "during", load, 600, Some(stop.clone()), ops);
    let change = async {
        let outcome = change.await;
        stop.store(true, Ordering::Relaxed);
        outcome
    };
    let (during, outcome) = tokio::join!(during, change);
    let (during, outcome) = (during?, outcome?);
    Ok((
        Foreground {
            throughput_ratio: ratio(during.throughput, before.throughput),
            before,
            during,
        },
        outcome,
    ))
}

/// Scenario 4: `add_global_index` over `create_records` objects while
/// gets and overwrites run.
async fn create(admin: &Admin, client: &Client, o: &GiOptions) -> anyhow::Result<CreateReport> {
    let name = "bench_gi_create";
    let records = o.create_records;
    let d = description(name, o.partitions, &[], None);
    let store: Arc<dyn Store> =
        make_space(admin, client, name, &d, Encoding::Hex, 0, o.daemons).await?;
    load_records(&store, records, o.workers, o.time_limit).await?;
    let build = async {
        let started = Instant::now();
        let part = admin
            .add_global_index(name, "a0", Some(o.partitions))
            .await?;
        wait_parts(admin, name, "building the index", |parts| {
            parts.iter().any(|&(p, ready, _)| p == part && ready)
        })
        .await?;
        Ok(started.elapsed())
    };
    let (foreground, took) = under_load(&store, o, move |r| get_put_op(r, records), build).await?;
    let plan_after = plan(client, name, 0, Encoding::Hex).await?;
    // Every sampled object is found through the new index at once.
    let lookups = GiStore::new(client.clone(), name, Encoding::Hex, 0);
    let mut missed_after = 0;
    let sample = records.min(100);
    for i in 0..sample {
        let record = i * (records / sample.max(1)).max(1);
        if lookups.lookup(record).await? == Outcome::NotFound {
            missed_after += 1;
        }
    }
    admin.rm_space(name).await?;
    let all = [&foreground.before, &foreground.during];
    Ok(CreateReport {
        objects: records,
        seconds_to_ready: took.as_secs_f64(),
        failed_calls: failed(&all),
        missed: missed(&all),
        foreground,
        plan_after,
        missed_after,
    })
}

/// Scenario 5: `split_global_index` of a one-indexlet index into four
/// (at the hex digits 4, 8, c: quarters of the values) while lookups and
/// overwrites run.
async fn split(admin: &Admin, client: &Client, o: &GiOptions) -> anyhow::Result<SplitReport> {
    let name = "bench_gi_split";
    let records = o.records;
    let d = description(name, o.partitions, &[(0, 1)], None);
    let store: Arc<dyn Store> =
        make_space(admin, client, name, &d, Encoding::Hex, 0, o.daemons).await?;
    load_records(&store, records, o.workers, o.time_limit).await?;
    let cuts: Vec<String> = ["4", "8", "c"].map(String::from).to_vec();
    let handover = async {
        let started = Instant::now();
        let part = admin.split_global_index(name, "a0", &cuts).await?;
        wait_parts(admin, name, "the split", |parts| {
            parts.len() == 1 && parts[0].0 == part && parts[0].1
        })
        .await?;
        Ok(started.elapsed())
    };
    let (foreground, took) =
        under_load(&store, o, move |r| lookup_put_op(r, records), handover).await?;
    let indexlets_after = global_parts(admin, name).await?.first().map_or(0, |p| p.2);
    admin.rm_space(name).await?;
    let p99 = |r: &PhaseResult| stats(r, "SEARCH-EQ").map_or(0, |s| s.p99_us);
    let all = [&foreground.before, &foreground.during];
    Ok(SplitReport {
        objects: records,
        cuts,
        seconds_to_handover: took.as_secs_f64(),
        lookup_p99_before_us: p99(&foreground.before),
        lookup_p99_during_us: p99(&foreground.during),
        indexlets_after,
        failed_calls: failed(&all),
        missed: missed(&all),
        foreground,
    })
}

/// The width of a range over the mixes that holds `per_range` of
/// `records` uniformly spread values on average.
fn range_window(records: u64, per_range: u64) -> i64 {
    let width = (u64::MAX / records.max(1)).saturating_mul(per_range);
    i64::try_from(width).unwrap_or(i64::MAX)
}

/// Objects a range holds on average in the `range` scenario.
const RANGE_OBJECTS: u64 = 10;

/// Range reads of about [`RANGE_OBJECTS`] objects on `store`, loaded
/// first, `workers` in flight; the same seeds on every system.
async fn range_phase(store: &Arc<dyn Store>, o: &GiOptions) -> anyhow::Result<PhaseResult> {
    let window = range_window(o.records, RANGE_OBJECTS);
    let highest = u64::MAX - window as u64;
    measure(
        store,
        "range",
        o.load(o.workers, o.operations),
        700,
        None,
        move |r| Op::Scan {
            start: r.gen_range(0..=highest) as i64,
            window,
            count: 0,
        },
    )
    .await
}

/// Scenario 6, Tessera's side: ranges on `a0` through its global index.
async fn range(admin: &Admin, client: &Client, o: &GiOptions) -> anyhow::Result<RangeReport> {
    let name = "bench_gi_range";
    let d = description(name, o.partitions, &[(0, o.partitions)], None);
    let gi = make_space(admin, client, name, &d, Encoding::Hex, 0, o.daemons).await?;
    let store: Arc<dyn Store> = gi.clone();
    load_records(&store, o.records, o.workers, o.time_limit).await?;
    let lo = hex_bound(0x4000_0000_0000_0000);
    let hi = hex_bound(0x4000_1000_0000_0000);
    let plan = client
        .search_describe(
            name,
            [
                ("a0", PredOp::Ge(Value::str(&lo))),
                ("a0", PredOp::Lt(Value::str(&hi))),
            ],
        )
        .await?;
    let plan = chosen(&plan);
    let tessera = range_phase(&store, o).await?;
    admin.rm_space(name).await?;
    let count = stats(&tessera, "SCAN").map_or(0, |s| s.count);
    Ok(RangeReport {
        objects: o.records,
        expected_per_range: RANGE_OBJECTS as f64,
        plan,
        tessera_objects_per_range: ratio(gi.objects.load(Ordering::Relaxed) as f64, count as f64),
        failed_calls: failed(&[&tessera]),
        tessera,
        postgres: None,
        postgres_objects_per_range: None,
        throughput_ratio: None,
        p50_ratio: None,
        p99_ratio: None,
    })
}

/// Scenario 6, PostgreSQL's side, with the Tessera cluster stopped: the
/// same records and ranges against `gi_bench`'s B-tree at `conninfo`.
pub async fn run_postgres(
    conninfo: &str,
    o: &GiOptions,
    range: &mut RangeReport,
) -> anyhow::Result<()> {
    let pg = Arc::new(GiPostgres::new(conninfo));
    pg.create_table().await?;
    let store: Arc<dyn Store> = pg.clone();
    load_records(&store, o.records, o.workers, o.time_limit).await?;
    let phase = range_phase(&store, o).await?;
    let count = stats(&phase, "SCAN").map_or(0, |s| s.count);
    range.postgres_objects_per_range = Some(ratio(
        pg.objects.load(Ordering::Relaxed) as f64,
        count as f64,
    ));
    let (t, p) = (stats(&range.tessera, "SCAN"), stats(&phase, "SCAN"));
    if let (Some(t), Some(p)) = (t, p) {
        range.p50_ratio = Some(ratio(t.p50_us as f64, p.p50_us as f64));
        range.p99_ratio = Some(ratio(t.p99_us as f64, p.p99_us as f64));
    }
    range.throughput_ratio = Some(ratio(range.tessera.throughput, phase.throughput));
    range.failed_calls += failed(&[&phase]);
    range.postgres = Some(phase);
    Ok(())
}

/// The report as tables and lines, scenario by scenario.
pub fn report_text(r: &GiReport) -> String {
    let mut out = String::new();
    let o = &r.options;
    let _ = writeln!(
        out,
        "global-index: {} records (create: {}), {} operations per phase, {} in flight, {} key partitions, f=1, records of 10 × 30-byte strings",
        o.records, o.create_records, o.operations, o.workers, o.partitions
    );
    if let Some(l) = &r.lookup {
        let _ = writeln!(
            out,
            "\n== lookup: equality on an indexed string vs a get (SLIK: about 2×)"
        );
        out.push_str(&results_table(&l.phases));
        let _ = writeln!(out, "plan: {}", l.plan);
        for x in &l.ratios {
            let _ = writeln!(
                out,
                "x{}: lookup p50 {} µs ÷ get p50 {} µs = {:.2}; p99 {} ÷ {} = {:.2}",
                x.in_flight,
                x.lookup_p50_us,
                x.get_p50_us,
                x.p50_ratio,
                x.lookup_p99_us,
                x.get_p99_us,
                x.p99_ratio
            );
        }
        let _ = writeln!(
            out,
            "lookup: failed calls {}, missed {}",
            l.failed_calls, l.missed
        );
    }
    if let Some(p) = &r.put {
        let _ = writeln!(
            out,
            "\n== put: overwrite vs number of global indexes (SLIK: 32 → 50 µs from 1 to 10)"
        );
        out.push_str(&results_table(&p.phases));
        let _ = writeln!(
            out,
            "{:>8} {:>10} {:>10} {:>12} {:>10} {:>12} {:>11}",
            "indexes",
            "p50 µs x1",
            "p99 µs x1",
            "ops/s xW",
            "p50 ratio",
            "µs / index",
            "tput ratio"
        );
        for x in &p.points {
            let slope = x
                .slope_us_per_index
                .map_or_else(|| "-".to_string(), |s| format!("{s:.0}"));
            let _ = writeln!(
                out,
                "{:>8} {:>10} {:>10} {:>12.0} {:>10.2} {:>12} {:>11.2}",
                x.indexes, x.p50_us, x.p99_us, x.ops_per_s, x.p50_ratio, slope, x.throughput_ratio
            );
        }
        let _ = writeln!(out, "put: failed calls {}", p.failed_calls);
    }
    if let Some(s) = &r.indexlets {
        let _ = writeln!(
            out,
            "\n== indexlets: lookup throughput vs indexlets, beside a local-index fan-out"
        );
        out.push_str(&results_table(&s.phases));
        let _ = writeln!(
            out,
            "{:>9} {:>12} {:>14} {:>13} {:>11} {:>11} {:>11}",
            "indexlets",
            "key regions",
            "global ops/s",
            "local ops/s",
            "ratio",
            "global p50",
            "local p50"
        );
        for x in &s.points {
            let _ = writeln!(
                out,
                "{:>9} {:>12} {:>14.0} {:>13.0} {:>11.2} {:>11} {:>11}",
                x.indexlets,
                x.key_partitions,
                x.global_ops_per_s,
                x.local_ops_per_s,
                x.throughput_ratio,
                x.global_p50_us,
                x.local_p50_us
            );
            let _ = writeln!(out, "  plans: {} | {}", x.global_plan, x.local_plan);
        }
        let _ = writeln!(
            out,
            "indexlets: failed calls {}, missed {}",
            s.failed_calls, s.missed
        );
    }
    if let Some(c) = &r.create {
        let _ = writeln!(
            out,
            "\n== create: add_global_index over {} objects under a get/put load",
            c.objects
        );
        out.push_str(&results_table(&[
            c.foreground.before.clone(),
            c.foreground.during.clone(),
        ]));
        let _ = writeln!(
            out,
            "ready after {:.2} s; foreground throughput during ÷ before {:.2}; then: {} ({} of the sampled lookups missed)",
            c.seconds_to_ready, c.foreground.throughput_ratio, c.plan_after, c.missed_after
        );
        let _ = writeln!(
            out,
            "create: failed calls {}, missed {}",
            c.failed_calls, c.missed
        );
    }
    if let Some(s) = &r.split {
        let _ = writeln!(
            out,
            "\n== split: split_global_index at {:?} over {} objects under a lookup/put load",
            s.cuts, s.objects
        );
        out.push_str(&results_table(&[
            s.foreground.before.clone(),
            s.foreground.during.clone(),
        ]));
        let _ = writeln!(
            out,
            "handed over after {:.2} s ({} indexlets); lookup p99 {} µs before, {} µs during; throughput during ÷ before {:.2}",
            s.seconds_to_handover,
            s.indexlets_after,
            s.lookup_p99_before_us,
            s.lookup_p99_during_us,
            s.foreground.throughput_ratio
        );
        let _ = writeln!(
            out,
            "split: failed calls {}, missed {}",
            s.failed_calls, s.missed
        );
    }
    if let Some(g) = &r.range {
        let _ = writeln!(
            out,
            "\n== range: a string range (about {} objects) through a global index vs PostgreSQL's B-tree",
            g.expected_per_range
        );
        let mut phases = vec![g.tessera.clone()];
        phases.extend(g.postgres.clone());
        out.push_str(&results_table(&phases));
        let _ = writeln!(out, "plan: {}", g.plan);
        let _ = writeln!(
            out,
            "objects per range: tessera {:.1}, postgres {}",
            g.tessera_objects_per_range,
            g.postgres_objects_per_range
                .map_or_else(|| "-".to_string(), |n| format!("{n:.1}"))
        );
        if let (Some(t), Some(p50), Some(p99)) = (g.throughput_ratio, g.p50_ratio, g.p99_ratio) {
            let _ = writeln!(
                out,
                "tessera ÷ postgres: throughput {t:.2}, p50 {p50:.2}, p99 {p99:.2}"
            );
        }
        let _ = writeln!(out, "range: failed calls {}", g.failed_calls);
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn values_are_unique_30_bytes_and_spread_over_first_bytes() {
        for encoding in [Encoding::Hex, Encoding::Raw] {
            let values: BTreeSet<Vec<u8>> = (0..4096).map(|i| value(i, 3, encoding)).collect();
            assert_eq!(values.len(), 4096, "{encoding:?}");
            assert!(values.iter().all(|v| v.len() == 30), "{encoding:?}");
        }
        // Raw values fill each eighth of the first byte's range about
        // equally, so 8 uniform cuts of the order coordinate share them.
        let mut eighths = [0u32; 8];
        for i in 0..8000 {
            eighths[usize::from(value(i, 0, Encoding::Raw)[0] >> 5)] += 1;
        }
        assert!(
            eighths.iter().all(|&n| (800..1200).contains(&n)),
            "{eighths:?}"
        );
        // Hex values start with a hex digit.
        assert!((0..100).all(|i| value(i, 0, Encoding::Hex)[0].is_ascii_hexdigit()));
    }

    #[test]
    fn hex_bounds_order_as_the_mix() {
        let (a, b) = (5u64, 6u64);
        let (va, vb) = (value(a, 0, Encoding::Hex), value(b, 0, Encoding::Hex));
        let (ma, mb) = (mix(a, 0), mix(b, 0));
        assert_eq!(va < vb, ma < mb);
        assert!(va.as_slice() >= hex_bound(ma).as_bytes());
        assert!(va.as_slice() < hex_bound(ma + 1).as_bytes());
    }

    #[test]
    fn descriptions_parse_with_their_indexlets() {
        let d = description("s", 8, &[(0, 1), (3, 4)], Some(1));
        let parsed = tessera_types::parse::parse_space(&d).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert_eq!(parsed.attrs.len(), 11, "{d}");
        assert_eq!(parsed.partitions, 8, "{d}");
        let globals: Vec<(String, Option<u32>)> = parsed
            .global_indexes
            .iter()
            .map(|g| (parsed.attrs[g.attr].name.clone(), g.partitions))
            .collect();
        assert_eq!(
            globals,
            [("a0".to_string(), Some(1)), ("a3".to_string(), Some(4))],
            "{d}"
        );
        let bare = description("s", 2, &[], None);
        assert!(tessera_types::parse::parse_space(&bare).is_ok(), "{bare}");
    }

    #[test]
    fn scenario_names_round_trip_and_unknown_ones_are_refused() {
        for s in GiScenario::ALL {
            assert_eq!(s.name().parse::<GiScenario>().unwrap(), s);
        }
        assert!("lookups".parse::<GiScenario>().is_err());
    }

    #[test]
    fn a_range_window_covers_the_asked_share() {
        let w = range_window(1000, 10) as f64;
        let share = w / u64::MAX as f64;
        assert!((share - 0.01).abs() < 1e-6, "{share}");
        assert_eq!(range_window(1, 10), i64::MAX);
    }
}
