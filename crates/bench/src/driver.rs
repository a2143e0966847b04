//! The closed-loop driver: `workers` tasks, each with one operation in
//! flight, share an operation budget and a deadline; latencies go into one
//! HDR histogram per operation kind and worker, merged at the end.

use crate::workload::{Op, OpSource};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A boxed, sendable future (stores are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an operation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done; for reads and searches, something was found.
    Ok,
    /// A read or search that found nothing (not an error).
    NotFound,
}

/// A system under test. Each store executes the operations it supports
/// and answers `Err` for the others (the driver counts them as errors and
/// scenarios only send supported kinds).
pub trait Store: Send + Sync + 'static {
    /// A short name for tables (`tessera`, `redis`, …).
    fn name(&self) -> &str;
    /// Whether the store implements this operation kind.
    fn supports(&self, kind: &str) -> bool;
    /// Executes one operation.
    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>>;
}

/// How much load a phase offers.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Load {
    /// Tasks, each with one operation in flight (so this is the number of
    /// operations in flight).
    pub workers: usize,
    /// Operations in total (all workers together).
    pub operations: u64,
    /// The phase stops at this time even if operations remain.
    pub time_limit: Duration,
}

/// Latency summary of one operation kind, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpStats {
    pub count: u64,
    pub errors: u64,
    pub not_found: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// The latency distribution: `(quantile, µs)` at [`CDF_QUANTILES`]
    /// (for plots).
    #[serde(default)]
    pub cdf: Vec<(f64, u64)>,
}

/// Quantiles of [`OpStats::cdf`]: every percent, then finer in the tail.
pub const CDF_QUANTILES: &[f64] = &[
    0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2,
    0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.92, 0.94, 0.95,
    0.96, 0.97, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0,
];

/// The result of one phase against one store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseResult {
    pub store: String,
    pub phase: String,
    pub workers: usize,
    pub operations: u64,
    pub seconds: f64,
    /// Completed operations (errors included) per second.
    pub throughput: f64,
    /// Whether the time limit ended the phase before its operation budget.
    pub timed_out: bool,
    pub ops: BTreeMap<String, OpStats>,
    /// The first error message seen, if any.
    pub first_error: Option<String>,
}

impl PhaseResult {
    /// Operations that failed, over every kind.
    pub fn errors(&self) -> u64 {
        self.ops.values().map(|o| o.errors).sum()
    }
}

#[derive(Default)]
struct Tally {
    hist: BTreeMap<&'static str, Histogram<u64>>,
    errors: BTreeMap<&'static str, u64>,
    not_found: BTreeMap<&'static str, u64>,
    first_error: Option<String>,
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs to 100 s, 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

/// Where a phase stands, as shown to the [`observe_phases`] observer.
#[derive(Clone, Debug)]
pub struct PhaseProgress<'a> {
    pub store: &'a str,
    pub phase: &'a str,
    /// Operations claimed so far, out of `budget`.
    pub done: u64,
    pub budget: u64,
    pub elapsed: Duration,
    /// The phase stops at this time even if operations remain.
    pub time_limit: Duration,
    /// The phase has ended (the last report of it).
    pub finished: bool,
}

/// Sees each phase's progress about once a second, and once at its end.
pub type PhaseObserver = Box<dyn Fn(&PhaseProgress<'_>) + Send + Sync>;

static PHASE_OBSERVER: OnceLock<PhaseObserver> = OnceLock::new();

/// Sets the process's phase observer (the CLI's progress report); only the
/// first call counts. Without one, phases report nothing.
pub fn observe_phases(observer: PhaseObserver) {
    let _ = PHASE_OBSERVER.set(observer);
}

/// Reports `budget_left` of `load` to the observer, if there is one.
fn report_phase(store: &str, phase: &str, load: &Load, left: u64, started: Instant, end: bool) {
    if let Some(observer) = PHASE_OBSERVER.get() {
        observer(&PhaseProgress {
            store,
            phase,
            done: load.operations.saturating_sub(left),
            budget: load.operations,
            elapsed: started.elapsed(),
            time_limit: load.time_limit,
            finished: end,
        });
    }
}

/// Runs one phase: `workers` tasks take operations from their own source
/// (`sources(i)`) until the shared budget or the time limit runs out.
pub async fn run_phase<S, F>(
    store: Arc<S>,
    phase: &str,
    load: Load,
    sources: F,
) -> anyhow::Result<PhaseResult>
where
    S: Store + ?Sized,
    F: Fn(usize) -> Box<dyn OpSource>,
{
    run_phase_until(store, phase, load, None, sources).await
}

/// [`run_phase`] that also ends, between operations, once `stop` is set:
/// a foreground load that lasts as long as something else (an index
/// build, a split) takes, still bounded by the budget and the time limit.
pub async fn run_phase_until<S, F>(
    store: Arc<S>,
    phase: &str,
    load: Load,
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    sources: F,
) -> anyhow::Result<PhaseResult>
where
    S: Store + ?Sized,
    F: Fn(usize) -> Box<dyn OpSource>,
{
    let budget = Arc::new(AtomicU64::new(load.operations));
    let started = Instant::now();
    let deadline = started + load.time_limit;
    let mut handles = Vec::with_capacity(load.workers);
    for i in 0..load.workers.max(1) {
        let mut source = sources(i);
        let store = store.clone();
        let budget = budget.clone();
        let stop = stop.clone();
        handles.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            loop {
                if Instant::now() >= deadline {
                    break;
                }
                if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                    break;
                }
                let claimed = budget
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
                    .is_ok();
                if !claimed {
                    break;
                }
                let op = source.next_op();
                let kind = op.kind();
                let t0 = Instant::now();
                let remaining = deadline.saturating_duration_since(t0) + Duration::from_secs(5);
                let result = match tokio::time::timeout(remaining, store.execute(&op)).await {
                    Ok(r) => r,
                    Err(_) => Err(anyhow::anyhow!("operation timed out")),
                };
                let micros = t0.elapsed().as_micros().clamp(1, 100_000_000) as u64;
                let ok = result.is_ok();
                match result {
                    Ok(outcome) => {
                        tally
                            .hist
                            .entry(kind)
                            .or_insert_with(new_histogram)
                            .saturating_record(micros);
                        if outcome == Outcome::NotFound {
                            *tally.not_found.entry(kind).or_insert(0) += 1;
                        }
                    }
                    Err(e) => {
                        *tally.errors.entry(kind).or_insert(0) += 1;
                        if tally.first_error.is_none() {
                            tally.first_error = Some(format!("{kind}: {e:#}"));
                        }
                    }
                }
                source.done(&op, ok);
            }
            tally
        }));
    }
    let reporter = PHASE_OBSERVER.get().map(|_| {
        let (store_name, phase_name) = (store.name().to_string(), phase.to_string());
        let budget = budget.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            loop {
                ticks.tick().await;
                let left = budget.load(Ordering::Relaxed);
                report_phase(&store_name, &phase_name, &load, left, started, false);
            }
        })
    });
    let mut total = Tally::default();
    for handle in handles {
        let tally = handle.await?;
        for (kind, h) in tally.hist {
            total
                .hist
                .entry(kind)
                .or_insert_with(new_histogram)
                .add(&h)
                .map_err(|e| anyhow::anyhow!("merging histograms: {e}"))?;
        }
        for (kind, n) in tally.errors {
            *total.errors.entry(kind).or_insert(0) += n;
        }
        for (kind, n) in tally.not_found {
            *total.not_found.entry(kind).or_insert(0) += n;
        }
        if total.first_error.is_none() {
            total.first_error = tally.first_error;
        }
    }
    if let Some(reporter) = reporter {
        reporter.abort();
        let left = budget.load(Ordering::Relaxed);
        report_phase(store.name(), phase, &load, left, started, true);
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut ops = BTreeMap::new();
    let mut kinds: Vec<&'static str> = total.hist.keys().copied().collect();
    kinds.extend(total.errors.keys().copied());
    kinds.sort_unstable();
    kinds.dedup();
    let mut completed = 0;
    for kind in kinds {
        let errors = total.errors.get(kind).copied().unwrap_or(0);
        let h = total.hist.get(kind);
        let count = h.map(|h| h.len()).unwrap_or(0);
        completed += count + errors;
        let q = |q: f64| h.map(|h| h.value_at_quantile(q)).unwrap_or(0);
        ops.insert(
            kind.to_string(),
            OpStats {
                count,
                errors,
                not_found: total.not_found.get(kind).copied().unwrap_or(0),
                mean_us: h.map(|h| h.mean()).unwrap_or(0.0),
                p50_us: q(0.5),
                p95_us: q(0.95),
                p99_us: q(0.99),
                p999_us: q(0.999),
                max_us: h.map(|h| h.max()).unwrap_or(0),
                cdf: h.map_or_else(Vec::new, |h| {
                    CDF_QUANTILES
                        .iter()
                        .map(|&q| (q, h.value_at_quantile(q)))
                        .collect()
                }),
            },
        );
    }
    Ok(PhaseResult {
        store: store.name().to_string(),
        phase: phase.to_string(),
        workers: load.workers,
        operations: completed,
        seconds,
        throughput: if seconds > 0.0 {
            completed as f64 / seconds
        } else {
            0.0
        },
        // A phase that `stop` ended did not run out of time.
        timed_out: budget.load(Ordering::Relaxed) > 0
            && !stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)),
        ops,
        first_error: total.first_error,
    })
}

/// A fixed-width table of phase results, one line per operation kind.
pub fn results_table(results: &[PhaseResult]) -> String {
    let mut out = format!(
        "{:<10} {:<18} {:<18} {:>8} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6}\n",
        "store",
        "phase",
        "op",
        "count",
        "ops/s",
        "p50 µs",
        "p95 µs",
        "p99 µs",
        "p999 µs",
        "mean µs",
        "errors"
    );
    for r in results {
        for (kind, s) in &r.ops {
            out.push_str(&format!(
                "{:<10} {:<18} {:<18} {:>8} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>9.0} {:>6}\n",
                r.store,
                r.phase,
                kind,
                s.count,
                (s.count + s.errors) as f64 / r.seconds.max(1e-9),
                s.p50_us,
                s.p95_us,
                s.p99_us,
                s.p999_us,
                s.mean_us,
                s.errors
            ));
        }
        if let Some(e) = &r.first_error {
            out.push_str(&format!("  first error ({} / {}): {e}\n", r.store, r.phase));
        }
        if r.timed_out {
            out.push_str(&format!(
                "  ({} / {} stopped at its time limit after {} operations)\n",
                r.store, r.phase, r.operations
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{InsertSequence, LoadOps, Workload};
    use std::sync::Mutex;

    /// Counts operations and fails every third one.
    struct Fake {
        seen: Mutex<Vec<String>>,
    }

    impl Store for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn supports(&self, _kind: &str) -> bool {
            true
        }
        fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
            Box::pin(async move {
                let mut seen = self.seen.lock().unwrap();
                if let Op::Insert { key, .. } = op {
                    seen.push(key.clone());
                }
                if seen.len().is_multiple_of(3) {
                    anyhow::bail!("boom")
                }
                Ok(Outcome::Ok)
            })
        }
    }

    #[tokio::test]
    async fn phase_runs_exactly_the_budget_and_counts_errors() {
        let store = Arc::new(Fake {
            seen: Mutex::new(Vec::new()),
        });
        let w = Arc::new(Workload::core('a', 0, 0).unwrap());
        let seq = Arc::new(InsertSequence::new(0));
        let load = Load {
            workers: 4,
            operations: 300,
            time_limit: Duration::from_secs(60),
        };
        let r = run_phase(store.clone(), "load", load, |i| {
            Box::new(LoadOps::new(w.clone(), seq.clone(), i as u64))
        })
        .await
        .unwrap();
        let seen = store.seen.lock().unwrap();
        assert_eq!(seen.len(), 300);
        let distinct: std::collections::HashSet<_> = seen.iter().collect();
        assert_eq!(distinct.len(), 300, "each insert gets its own record");
        let s = &r.ops["INSERT"];
        assert_eq!(s.count + s.errors, 300);
        assert_eq!(s.errors, 100);
        assert_eq!(r.operations, 300);
        assert!(!r.timed_out);
        assert!(r.first_error.as_deref().unwrap().contains("boom"));
        assert!(s.p50_us <= s.p99_us && s.p99_us <= s.max_us);
        assert!(results_table(&[r]).contains("INSERT"));
    }
}
