//! Runs built from the driver: YCSB, the side-by-side comparison, and the
//! HyperDex paper's experiments against Tessera.

use crate::driver::{run_phase, Load, PhaseResult, Store};
use crate::generator::{key_name, key_suffix, KeyChooser, ScrambledZipfian};
use crate::stores::tessera::{usertable_description, TesseraStore};
use crate::workload::{
    random_record, random_value, scan_window, InsertSequence, LoadOps, Op, OpSource, RunOps,
    Workload,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tessera_client::{Admin, Authorization, Client, ClientOptions, CoordLink, Transport};

/// An operation stream from a closure over a per-worker RNG.
pub struct FnSource<F> {
    rng: StdRng,
    f: F,
}

impl<F: FnMut(&mut StdRng) -> Op + Send> FnSource<F> {
    pub fn boxed(seed: u64, f: F) -> Box<dyn OpSource>
    where
        F: 'static,
    {
        Box::new(FnSource {
            rng: StdRng::seed_from_u64(seed),
            f,
        })
    }
}

impl<F: FnMut(&mut StdRng) -> Op + Send> OpSource for FnSource<F> {
    fn next_op(&mut self) -> Op {
        (self.f)(&mut self.rng)
    }
}

/// Loads `workload.recordcount` records, then runs its operation mix.
pub async fn ycsb(
    store: Arc<dyn Store>,
    workload: Arc<Workload>,
    workers: usize,
    time_limit: Duration,
    load: bool,
) -> anyhow::Result<Vec<PhaseResult>> {
    let mut results = Vec::new();
    if load {
        results
            .push(load_records(store.clone(), workload.clone(), workers, time_limit, 1000).await?);
    }
    let seq = Arc::new(InsertSequence::new(workload.recordcount));
    let phase = Load {
        workers,
        operations: workload.operationcount,
        time_limit,
    };
    let name = workload.name.clone();
    results.push(run_mix(store, &name, workload, seq, phase, 2000).await?);
    Ok(results)
}

/// Inserts records `0..workload.recordcount` of `workload`'s shape into
/// `store` with `workers` in flight (phase `load`); worker `i` seeds its
/// generator with `seed + i`.
pub async fn load_records(
    store: Arc<dyn Store>,
    workload: Arc<Workload>,
    workers: usize,
    time_limit: Duration,
    seed: u64,
) -> anyhow::Result<PhaseResult> {
    let seq = Arc::new(InsertSequence::new(0));
    let phase = Load {
        workers,
        operations: workload.recordcount,
        time_limit,
    };
    run_phase(store, "load", phase, move |i| {
        Box::new(LoadOps::new(workload.clone(), seq.clone(), seed + i as u64))
    })
    .await
}

/// Runs `workload`'s operation mix as phase `name`, with inserts taking
/// record numbers from `seq`; worker `i` seeds its generator with
/// `seed + i`.
async fn run_mix(
    store: Arc<dyn Store>,
    name: &str,
    workload: Arc<Workload>,
    seq: Arc<InsertSequence>,
    phase: Load,
    seed: u64,
) -> anyhow::Result<PhaseResult> {
    let chooser = RunOps::chooser(&workload);
    run_phase(store, name, phase, move |i| {
        Box::new(RunOps::new(
            workload.clone(),
            seq.clone(),
            chooser.clone(),
            seed + i as u64,
        ))
    })
    .await
}

/// Sizes of the side-by-side comparison.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct CompareSize {
    pub records: u64,
    /// Operations per phase after the load.
    pub operations: u64,
    /// Operations per YCSB workload (A–F) after the phases; 0: none.
    #[serde(default)]
    pub ycsb_operations: u64,
    pub workers: usize,
    pub fieldcount: usize,
    pub fieldlength: usize,
    pub time_limit: Duration,
}

/// The comparison's phases against one store: load, then zipfian point
/// reads and one-field updates; then, where the store supports them,
/// equality on the indexed secondary attribute `recno`, 10-record range
/// reads on it, and updates of it (which move the record between regions
/// of the `recno` subspace in Tessera, and update the index in PostgreSQL).
pub async fn compare_phases(
    store: Arc<dyn Store>,
    size: CompareSize,
) -> anyhow::Result<Vec<PhaseResult>> {
    compare_phase_set(store, size, true).await
}

/// The comparison's load, read and update phases, and with `secondary`
/// the search and indexed-update phases where the store supports them.
pub async fn compare_phase_set(
    store: Arc<dyn Store>,
    size: CompareSize,
    secondary: bool,
) -> anyhow::Result<Vec<PhaseResult>> {
    let mut results = Vec::new();
    let workload = Arc::new(Workload {
        fieldcount: size.fieldcount,
        fieldlength: size.fieldlength,
        ..Workload::core('a', size.records, size.operations).expect("workload a")
    });
    results.push(
        load_records(
            store.clone(),
            workload.clone(),
            size.workers,
            size.time_limit,
            1000,
        )
        .await?,
    );
    let loaded = results[0].ops.get("INSERT").map(|s| s.count).unwrap_or(0);
    let records = size.records.min(loaded.max(1));
    let phase = Load {
        workers: size.workers,
        operations: size.operations,
        time_limit: size.time_limit,
    };
    let zipf = ScrambledZipfian::new(0, records - 1);
    let (fc, fl) = (size.fieldcount, size.fieldlength);

    let z = zipf.clone();
    results.push(
        run_phase(store.clone(), "read", phase, move |i| {
            let z = z.clone();
            FnSource::boxed(10 + i as u64, move |rng| Op::Read {
                key: key_name(z.next(rng)),
            })
        })
        .await?,
    );
    let z = zipf.clone();
    results.push(
        run_phase(store.clone(), "update", phase, move |i| {
            let z = z.clone();
            FnSource::boxed(20 + i as u64, move |rng| Op::Update {
                key: key_name(z.next(rng)),
                field: rng.gen_range(0..fc.max(1)),
                value: random_value(rng, fl),
                record: random_record(rng, fc, fl),
            })
        })
        .await?,
    );
    if secondary && store.supports("SEARCH-EQ") {
        results.push(
            run_phase(store.clone(), "search-eq", phase, move |i| {
                FnSource::boxed(30 + i as u64, move |rng| Op::SearchEq {
                    recno: key_suffix(rng.gen_range(0..records)),
                })
            })
            .await?,
        );
        results.push(
            run_phase(store.clone(), "range10", phase, move |i| {
                FnSource::boxed(40 + i as u64, move |rng| Op::Scan {
                    start: key_suffix(rng.gen_range(0..records)),
                    window: scan_window(records, 10),
                    count: 10,
                })
            })
            .await?,
        );
        results.push(
            run_phase(store.clone(), "update-indexed", phase, move |i| {
                FnSource::boxed(50 + i as u64, move |rng| Op::UpdateIndexed {
                    key: key_name(rng.gen_range(0..records)),
                    recno: rng.gen_range(0..i64::MAX),
                })
            })
            .await?,
        );
    }
    Ok(results)
}

/// The YCSB core workloads in the order the suite runs them (YCSB's own
/// advice: the read-mostly ones before D and E grow the table).
pub const YCSB_ORDER: [char; 6] = ['a', 'b', 'c', 'f', 'd', 'e'];

/// The operation kinds a workload mixes, by the names stores support.
fn workload_kinds(w: &Workload) -> Vec<&'static str> {
    [
        (w.read, "READ"),
        (w.update, "UPDATE"),
        (w.insert, "INSERT"),
        (w.scan, "SCAN"),
        (w.readmodifywrite, "READ-MODIFY-WRITE"),
    ]
    .into_iter()
    .filter(|(p, _)| *p > 0.0)
    .map(|(_, k)| k)
    .collect()
}

/// YCSB workloads A–F (in [`YCSB_ORDER`]) against a store that already
/// holds `loaded` records (records `0..loaded`), `size.ycsb_operations`
/// operations each, phases named `ycsb-a` …; inserts of D and E take new
/// record numbers from one shared sequence. A workload whose operations
/// the store cannot do is left out, with a note.
pub async fn ycsb_suite(
    store: Arc<dyn Store>,
    size: CompareSize,
    loaded: u64,
) -> anyhow::Result<(Vec<PhaseResult>, Vec<String>)> {
    ycsb_letters(store, size, loaded, &YCSB_ORDER).await
}

/// The YCSB workloads `letters`, as [`ycsb_suite`] runs them.
pub async fn ycsb_letters(
    store: Arc<dyn Store>,
    size: CompareSize,
    loaded: u64,
    letters: &[char],
) -> anyhow::Result<(Vec<PhaseResult>, Vec<String>)> {
    let mut results = Vec::new();
    let mut notes = Vec::new();
    if size.ycsb_operations == 0 || loaded == 0 {
        return Ok((results, notes));
    }
    let seq = Arc::new(InsertSequence::new(loaded));
    for &letter in letters {
        let workload = Arc::new(Workload {
            fieldcount: size.fieldcount,
            fieldlength: size.fieldlength,
            ..Workload::core(letter, loaded, size.ycsb_operations).expect("a core workload")
        });
        let missing: Vec<&str> = workload_kinds(&workload)
            .into_iter()
            .filter(|k| !store.supports(k))
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "{}: YCSB {} not run (no {})",
                store.name(),
                letter.to_ascii_uppercase(),
                missing.join(", ")
            ));
            continue;
        }
        let phase = Load {
            workers: size.workers,
            operations: size.ycsb_operations,
            time_limit: size.time_limit,
        };
        let name = format!("ycsb-{letter}");
        results.push(run_mix(store.clone(), &name, workload, seq.clone(), phase, 3000).await?);
    }
    Ok((results, notes))
}

/// One line of a ratio table: Tessera ÷ baseline for one phase.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ratio {
    /// Which Tessera run (its `PhaseResult::store`: durability and f).
    #[serde(default)]
    pub tessera: String,
    pub baseline: String,
    pub phase: String,
    pub op: String,
    pub tessera_ops_per_s: f64,
    pub baseline_ops_per_s: f64,
    /// Tessera throughput ÷ baseline throughput (above 1: Tessera faster).
    pub throughput_ratio: f64,
    /// Tessera p50 ÷ baseline p50 (above 1: Tessera slower).
    pub p50_ratio: f64,
    pub p99_ratio: f64,
}

/// Tessera ÷ each baseline, phase by phase, for phases both ran.
pub fn ratios(tessera: &[PhaseResult], baselines: &[PhaseResult]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for b in baselines {
        let Some(t) = tessera.iter().find(|t| t.phase == b.phase) else {
            continue;
        };
        for (op, bs) in &b.ops {
            let Some(ts) = t.ops.get(op) else { continue };
            if bs.count == 0 || ts.count == 0 {
                continue;
            }
            let tput = |r: &PhaseResult, s: &crate::driver::OpStats| {
                (s.count + s.errors) as f64 / r.seconds.max(1e-9)
            };
            let (tt, bt) = (tput(t, ts), tput(b, bs));
            out.push(Ratio {
                tessera: t.store.clone(),
                baseline: b.store.clone(),
                phase: b.phase.clone(),
                op: op.clone(),
                tessera_ops_per_s: tt,
                baseline_ops_per_s: bt,
                throughput_ratio: tt / bt.max(1e-9),
                p50_ratio: ts.p50_us as f64 / bs.p50_us.max(1) as f64,
                p99_ratio: ts.p99_us as f64 / bs.p99_us.max(1) as f64,
            });
        }
    }
    out
}

/// A fixed-width ratio table.
pub fn ratio_table(ratios: &[Ratio]) -> String {
    let mut out = format!(
        "{:<22} {:<10} {:<15} {:<18} {:>12} {:>12} {:>11} {:>9} {:>9}\n",
        "tessera",
        "baseline",
        "phase",
        "op",
        "tessera op/s",
        "base op/s",
        "tput ratio",
        "p50 ratio",
        "p99 ratio"
    );
    for r in ratios {
        out.push_str(&format!(
            "{:<22} {:<10} {:<15} {:<18} {:>12.0} {:>12.0} {:>11.3} {:>9.2} {:>9.2}\n",
            r.tessera,
            r.baseline,
            r.phase,
            r.op,
            r.tessera_ops_per_s,
            r.baseline_ops_per_s,
            r.throughput_ratio,
            r.p50_ratio,
            r.p99_ratio
        ));
    }
    out
}

/// Creates a space, replacing one of the same name.
pub async fn fresh_space(admin: &Admin, name: &str, description: &str) -> anyhow::Result<()> {
    if admin.list_spaces().await?.iter().any(|s| s == name) {
        admin.rm_space(name).await?;
    }
    admin.add_space(description).await?;
    Ok(())
}

/// Waits until `client` can use `space` (its configuration has it and
/// a read of a missing key succeeds at its epoch).
pub async fn wait_space(client: &Client, space: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let attempt = async {
            client.space(space).await?;
            client
                .get(space, tessera_client::Value::str("bench-probe"))
                .await?;
            Ok::<(), tessera_client::ClientError>(())
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            // On a space with authorization a probe of a missing key is
            // refused by the key's point leader: the space is served.
            Err(e) if e.status == tessera_client::Status::Unauthorized => return Ok(()),
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(anyhow::anyhow!("space {space} not usable: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The shares of scans in the search-heavy mixes of [`scan_share`].
pub const SCAN_SHARES: [f64; 6] = [0.0, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Latency of a mix of point reads and scans as the scan share grows
/// (HyperDex paper, Fig. 9): the usertable is loaded with `records`
/// records, then for each share `s` a phase of `operations` operations,
/// a fraction `s` of them YCSB scans (`sorted_search` on a `recno` range,
/// 1..=100 records) and the rest reads, zipfian keys. Phases are named
/// `scan-share=<s>`.
pub async fn scan_share(
    store: Arc<dyn Store>,
    records: u64,
    operations: u64,
    workers: usize,
    time_limit: Duration,
) -> anyhow::Result<Vec<PhaseResult>> {
    let base = Workload::core('e', records, operations).expect("workload e");
    let loaded = load_records(
        store.clone(),
        Arc::new(base.clone()),
        workers,
        time_limit,
        7,
    )
    .await?;
    let loaded = loaded.ops.get("INSERT").map_or(0, |s| s.count).max(1);
    let mut results = Vec::new();
    let seq = Arc::new(InsertSequence::new(loaded));
    for share in SCAN_SHARES {
        let workload = Arc::new(Workload {
            name: format!("scan-share={share}"),
            recordcount: loaded,
            read: 1.0 - share,
            update: 0.0,
            insert: 0.0,
            scan: share,
            readmodifywrite: 0.0,
            ..base.clone()
        });
        let phase = Load {
            workers,
            operations,
            time_limit,
        };
        let name = workload.name.clone();
        results.push(run_mix(store.clone(), &name, workload, seq.clone(), phase, 4000).await?);
    }
    Ok(results)
}

/// Put latency and throughput as a function of the number of non-key
/// subspaces (HyperDex paper, Figure 10): for each `k`, a space whose
/// fields `field0..field{k-1}` each have a subspace is loaded with
/// `records` records.
pub async fn subspaces(
    coordinator: &str,
    counts: &[usize],
    records: u64,
    workers: usize,
    partitions: u32,
    time_limit: Duration,
) -> anyhow::Result<Vec<PhaseResult>> {
    let admin = Admin::new(coordinator);
    let client = Client::connect(coordinator).await?;
    let mut results = Vec::new();
    for &k in counts {
        let name = format!("bench_sub{k}");
        fresh_space(&admin, &name, &subspaces_description(&name, k, partitions)).await?;
        wait_space(&client, &name).await?;
        let store: Arc<dyn Store> = Arc::new(TesseraStore::new(client.clone(), &name, 10));
        results.push(subspaces_phase(store, k, records, workers, time_limit).await?);
        admin.rm_space(&name).await?;
    }
    Ok(results)
}

/// The space of the `subspaces` scenario with `k` non-key subspaces (one
/// per field, in HyperDex's words too, so both systems read it alike).
pub fn subspaces_description(name: &str, k: usize, partitions: u32) -> String {
    let fields: Vec<String> = (0..10).map(crate::workload::field_name).collect();
    let subs: String = (0..k).map(|i| format!(" subspace field{i}")).collect();
    format!(
        "space {name} key k attributes int recno, {}{subs} create {partitions} partitions tolerate 1 failure",
        fields.join(", ")
    )
}

/// Inserts `records` whole records into `store`, whose space has `k`
/// non-key subspaces; the phase is named `subspaces=k`.
pub async fn subspaces_phase(
    store: Arc<dyn Store>,
    k: usize,
    records: u64,
    workers: usize,
    time_limit: Duration,
) -> anyhow::Result<PhaseResult> {
    let w = Arc::new(Workload::core('a', records, 0).expect("workload a"));
    let mut r = load_records(store, w, workers, time_limit, 77).await?;
    r.phase = format!("subspaces={k}");
    Ok(r)
}

/// The least-squares slope of `y` over `x`; `None` with fewer than two
/// distinct `x`.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Per-subspace growth of put latency in the `subspaces` phases of one
/// store: µs per added subspace of the mean and of p50, and the latency
/// with none (the fitted intercept's point, measured).
#[derive(Clone, Debug, Serialize)]
pub struct SubspaceSlope {
    pub store: String,
    pub mean_us_per_subspace: Option<f64>,
    pub p50_us_per_subspace: Option<f64>,
    pub mean_us_without: Option<f64>,
}

/// The slopes of `results` (`subspaces=k` phases of one store).
pub fn subspace_slope(store: &str, results: &[PhaseResult]) -> SubspaceSlope {
    let points = |f: &dyn Fn(&crate::driver::OpStats) -> f64| -> Vec<(f64, f64)> {
        results
            .iter()
            .filter_map(|r| {
                let k: f64 = r.phase.strip_prefix("subspaces=")?.parse().ok()?;
                let stats = r.ops.values().next()?;
                Some((k, f(stats)))
            })
            .collect()
    };
    let mean = points(&|s| s.mean_us);
    SubspaceSlope {
        store: store.to_string(),
        mean_us_per_subspace: slope(&mean),
        p50_us_per_subspace: slope(&points(&|s| s.p50_us as f64)),
        mean_us_without: mean.iter().find(|p| p.0 == 0.0).map(|p| p.1),
    }
}

/// What [`search_vs_scan`] found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchVsScan {
    pub with_subspace: PhaseResult,
    pub without_subspace: PhaseResult,
    pub plan_with_subspace: String,
    pub plan_without_subspace: String,
    /// Mean latency without the subspace ÷ with it.
    pub mean_latency_ratio: f64,
    /// Throughput with the subspace ÷ without it.
    pub throughput_ratio: f64,
}

/// Equality search on `recno` in a space with a `recno` subspace (one
/// region contacted) and in an identical space without (every region of
/// the key subspace contacted), both holding the same records.
pub async fn search_vs_scan(
    coordinator: &str,
    records: u64,
    searches: u64,
    workers: usize,
    partitions: u32,
    time_limit: Duration,
) -> anyhow::Result<SearchVsScan> {
    let admin = Admin::new(coordinator);
    let client = Client::connect(coordinator).await?;
    let mut phases = Vec::new();
    let mut plans = Vec::new();
    for (name, with_subspace) in [("bench_svs_sub", true), ("bench_svs_nosub", false)] {
        let description = usertable_description(name, 10, with_subspace, partitions, 1);
        fresh_space(&admin, name, &description).await?;
        wait_space(&client, name).await?;
        let store: Arc<dyn Store> = Arc::new(TesseraStore::new(client.clone(), name, 10));
        let w = Arc::new(Workload::core('a', records, 0).expect("workload a"));
        let seq = Arc::new(InsertSequence::new(0));
        let load = Load {
            workers,
            operations: records,
            time_limit,
        };
        run_phase(store.clone(), "load", load, move |i| {
            Box::new(LoadOps::new(w.clone(), seq.clone(), 5 + i as u64))
        })
        .await?;
        plans.push(
            client
                .search_describe(
                    name,
                    [(
                        "recno",
                        tessera_client::PredOp::Eq(tessera_client::Value::Int(key_suffix(0))),
                    )],
                )
                .await?,
        );
        let phase = Load {
            workers,
            operations: searches,
            time_limit,
        };
        let label = if with_subspace {
            "search-eq (subspace)"
        } else {
            "search-eq (all regions)"
        };
        let mut r = run_phase(store, label, phase, move |i| {
            FnSource::boxed(60 + i as u64, move |rng| Op::SearchEq {
                recno: key_suffix(rng.gen_range(0..records)),
            })
        })
        .await?;
        r.phase = label.to_string();
        phases.push(r);
        admin.rm_space(name).await?;
    }
    let without_subspace = phases.pop().expect("two phases");
    let with_subspace = phases.pop().expect("two phases");
    let mean = |r: &PhaseResult| r.ops.get("SEARCH-EQ").map(|s| s.mean_us).unwrap_or(0.0);
    Ok(SearchVsScan {
        mean_latency_ratio: mean(&without_subspace) / mean(&with_subspace).max(1e-9),
        throughput_ratio: with_subspace.throughput / without_subspace.throughput.max(1e-9),
        plan_without_subspace: plans.pop().unwrap_or_default(),
        plan_with_subspace: plans.pop().unwrap_or_default(),
        with_subspace,
        without_subspace,
    })
}

/// Get and put latency distributions at one operation in flight (and at
/// `workers` in flight), on a loaded usertable.
pub async fn latency(
    coordinator: &str,
    records: u64,
    operations: u64,
    workers: usize,
    partitions: u32,
    time_limit: Duration,
) -> anyhow::Result<Vec<PhaseResult>> {
    let name = "bench_latency";
    let (admin, store) = fresh_usertable(coordinator, name, partitions).await?;
    let results = latency_phases(store, records, operations, workers, time_limit).await?;
    admin.rm_space(name).await?;
    Ok(results)
}

/// The phases of [`latency`] on `store`, a fresh usertable of any system:
/// load `records`, then `operations` gets and one-field updates with one
/// in flight, then with `workers` in flight.
pub async fn latency_phases(
    store: Arc<dyn Store>,
    records: u64,
    operations: u64,
    workers: usize,
    time_limit: Duration,
) -> anyhow::Result<Vec<PhaseResult>> {
    let mut results = Vec::new();
    for inflight in [1, workers.max(1)] {
        let size = key_only_size(records, operations, inflight, time_limit);
        let mut rs = compare_phases_key_only(store.clone(), size, inflight == 1).await?;
        for r in &mut rs {
            r.phase = format!("{} x{inflight}", r.phase);
        }
        results.extend(rs);
    }
    Ok(results)
}

/// Point reads and one-field updates with `workers` in flight, on a
/// usertable loaded for them: the phases `tessera bench metrics-cost`
/// compares with metrics off and on.
pub async fn get_put(
    coordinator: &str,
    records: u64,
    operations: u64,
    workers: usize,
    partitions: u32,
    time_limit: Duration,
) -> anyhow::Result<Vec<PhaseResult>> {
    get_put_over(
        coordinator,
        &Transport::plain(),
        records,
        operations,
        workers,
        partitions,
        time_limit,
    )
    .await
}

/// [`get_put`] with clients that connect over `transport` (TLS, for
/// `bench tls-cost`).
pub async fn get_put_over(
    coordinator: &str,
    transport: &Transport,
    records: u64,
    operations: u64,
    workers: usize,
    partitions: u32,
    time_limit: Duration,
) -> anyhow::Result<Vec<PhaseResult>> {
    let size = key_only_size(records, operations, workers, time_limit);
    let (admin, store) =
        fresh_usertable_over(coordinator, transport, "bench_get_put", partitions, None).await?;
    let results = compare_phases_key_only(store, size, true).await?;
    admin.rm_space("bench_get_put").await?;
    Ok(results)
}

/// [`get_put`] on a usertable `with authorization`: every object is
/// written with `auth.secret` (each put sets it again) and every call
/// carries `auth.macaroons`, so each operation pays their decoding and
/// verification at the daemon.
pub async fn get_put_authorized(
    coordinator: &str,
    records: u64,
    operations: u64,
    workers: usize,
    partitions: u32,
    time_limit: Duration,
    auth: &Authorization,
) -> anyhow::Result<Vec<PhaseResult>> {
    let size = key_only_size(records, operations, workers, time_limit);
    get_put_on(
        coordinator,
        "bench_get_put_auth",
        partitions,
        size,
        Some(auth),
    )
    .await
}

async fn get_put_on(
    coordinator: &str,
    name: &str,
    partitions: u32,
    size: CompareSize,
    auth: Option<&Authorization>,
) -> anyhow::Result<Vec<PhaseResult>> {
    let (admin, store) =
        fresh_usertable_over(coordinator, &Transport::plain(), name, partitions, auth).await?;
    let results = compare_phases_key_only(store, size, true).await?;
    admin.rm_space(name).await?;
    Ok(results)
}

/// A fresh usertable space `name` (10 fields, a `recno` subspace), ready.
async fn fresh_usertable(
    coordinator: &str,
    name: &str,
    partitions: u32,
) -> anyhow::Result<(Admin, Arc<dyn Store>)> {
    fresh_usertable_over(coordinator, &Transport::plain(), name, partitions, None).await
}

/// [`fresh_usertable`] over `transport`; with `auth`, a space `with
/// authorization` whose store writes `auth.secret` and carries
/// `auth.macaroons`.
async fn fresh_usertable_over(
    coordinator: &str,
    transport: &Transport,
    name: &str,
    partitions: u32,
    auth: Option<&Authorization>,
) -> anyhow::Result<(Admin, Arc<dyn Store>)> {
    let link = CoordLink {
        transport: transport.clone(),
        admin_token: None,
    };
    let admin = Admin::with_link([coordinator], Duration::from_secs(10), link);
    let options = ClientOptions {
        transport: transport.clone(),
        ..ClientOptions::default()
    };
    let mut client = Client::connect_with([coordinator], options).await?;
    let mut description = usertable_description(name, 10, true, partitions, 1);
    if let Some(auth) = auth {
        description += " with authorization";
        client = client
            .with_secret(auth.secret.clone().unwrap_or_default())
            .with_auth(auth.macaroons.iter().cloned());
    }
    fresh_space(&admin, name, &description).await?;
    wait_space(&client, name).await?;
    Ok((admin, Arc::new(TesseraStore::new(client, name, 10))))
}

/// The size of a run of key-only phases on 10 fields of 100 bytes.
fn key_only_size(
    records: u64,
    operations: u64,
    workers: usize,
    time_limit: Duration,
) -> CompareSize {
    CompareSize {
        records,
        operations,
        ycsb_operations: 0,
        workers,
        fieldcount: 10,
        fieldlength: 100,
        time_limit,
    }
}

/// Load (once), then point reads and one-field updates.
async fn compare_phases_key_only(
    store: Arc<dyn Store>,
    size: CompareSize,
    load_first: bool,
) -> anyhow::Result<Vec<PhaseResult>> {
    let mut results = Vec::new();
    if load_first {
        let w = Arc::new(Workload::core('a', size.records, 0).expect("workload a"));
        let seq = Arc::new(InsertSequence::new(0));
        let load = Load {
            workers: size.workers.max(8),
            operations: size.records,
            time_limit: size.time_limit,
        };
        run_phase(store.clone(), "load", load, move |i| {
            Box::new(LoadOps::new(w.clone(), seq.clone(), 3 + i as u64))
        })
        .await?;
    }
    let phase = Load {
        workers: size.workers,
        operations: size.operations,
        time_limit: size.time_limit,
    };
    let records = size.records;
    let chooser = KeyChooser::new(
        crate::generator::Distribution::Uniform,
        records,
        records - 1,
    );
    let c = chooser.clone();
    results.push(
        run_phase(store.clone(), "get", phase, move |i| {
            let mut c = c.clone();
            FnSource::boxed(70 + i as u64, move |rng| Op::Read {
                key: key_name(c.next(rng, records - 1)),
            })
        })
        .await?,
    );
    let c = chooser;
    results.push(
        run_phase(store, "put", phase, move |i| {
            let mut c = c.clone();
            FnSource::boxed(80 + i as u64, move |rng| Op::Update {
                key: key_name(c.next(rng, records - 1)),
                field: rng.gen_range(0..10),
                value: random_value(rng, 100),
                record: random_record(rng, 10, 100),
            })
        })
        .await?,
    );
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn the_slope_of_points_on_a_line_is_its_gradient() {
        let line: Vec<(f64, f64)> = (0..=10).map(|k| (k as f64, 3.5 * k as f64 + 7.0)).collect();
        assert!((slope(&line).expect("a slope") - 3.5).abs() < 1e-9);
        // Noise alternating about the line barely moves the gradient.
        let noisy: Vec<(f64, f64)> = (0..=10)
            .map(|k| {
                (
                    k as f64,
                    2.0 * k as f64 + if k % 2 == 0 { 1.0 } else { -1.0 },
                )
            })
            .collect();
        let fitted = slope(&noisy).expect("a slope");
        assert!((fitted - 2.0).abs() < 0.2, "{fitted}");
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 5.0)]), None);
    }
}
