//! `tessera bench layouts`: the advisor's model against real runs
//! (RESEARCH.md A.6). For a workload file, the optimizer's top layouts and
//! each heuristic's layout (`tessera_advisor::sampled_layouts`) are
//! measured one after the other: a scratch space with that layout, loaded
//! with objects whose attribute values follow what the model assumes, then
//! the workload's mix in a closed loop for a fixed time. Beside each
//! layout's predicted throughput goes the measured one; the pure
//! comparison (mean error, Kendall τ-b, rank of the predicted best) is
//! `tessera_advisor::agreement`. Each layout is measured `runs` times,
//! interleaved (every layout once, then every layout again), so that a
//! slow minute of a shared machine falls on every layout alike; the
//! comparison uses each layout's median, and the spread (min–max) says how
//! far apart its runs were.
//!
//! Data, as the model assumes it: attribute `a` of object `n` is value
//! number `hash(n, a) mod d_a` (`global_index::mix`), where `d_a` is the workload's distinct
//! count for `a` (the object count when it gives none), so equality on a
//! value drawn at random matches O / d_a objects on average and attributes
//! are independent. Strings are `name` + number (they hash evenly over
//! the intervals); ints are spread evenly over the whole axis (their
//! coordinates keep their order, so small ints would share one interval),
//! and a range of a fraction φ of the axis, placed at random, meets
//! 1 + φ(n − 1) of n intervals and matches φ·O objects. A modify gets the
//! object, then puts new random values of its attributes; an insert
//! writes a fresh key. Other types, ranges on strings and regexes are
//! refused: their selectivity is not something the load can reproduce.
//!
//! Scratch spaces are named [`SCRATCH_PREFIX`]`N`, one at a time, as
//! calibration's are: a run refuses to start when one exists, and removes
//! the one it created however it ends. Each run is bounded by `seconds`
//! and each load by [`LOAD_LIMIT`].

use crate::calibrate::{
    add_scratch, existing_scratch, int_at, int_range, LOAD_ERRORS_MAX, LOAD_LIMIT, STEP_ERRORS_MAX,
};
use crate::driver::{run_phase, BoxFuture, Load, Outcome, PhaseResult, Store};
use crate::global_index::mix as hash;
use crate::scenarios::{wait_space, FnSource};
use crate::workload::Op;
use anyhow::Context;
use rand::Rng;
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_advisor::validate::{median_position, spread, Paired, Spread};
use tessera_advisor::workload::{Class, ClassKind, SearchOp};
use tessera_advisor::{
    advise, agreement, parse_workload, predict, predict_over_run, sampled_layouts, space_ref,
    Agreement, Heuristic, Layout, Options, Params, Sampled, Sampling, SpaceRef, Workload,
};
use tessera_client::{Admin, Client, PredOp, Value};
use tessera_types::{Configuration, DataType, Epoch};

/// Every scratch space's name starts with this.
pub const SCRATCH_PREFIX: &str = "tessera_layouts_";
/// Classes an operation can name (its class travels in 8 bits).
const CLASSES_MAX: usize = 256;
/// At most this many runs per layout.
pub const RUNS_MAX: usize = 100;

/// The shape of a validation run.
#[derive(Clone, Debug)]
pub struct LayoutsOptions {
    /// How many of the optimizer's top groups of equal predictions to
    /// measure, and how many groups to draw at random from the rest (the
    /// heuristics' layouts come on top): `validate::sampled_layouts`.
    pub sampling: Sampling,
    /// Measure only the layout the workload's space declares instead.
    pub declared: bool,
    /// Seconds the mix runs on each layout.
    pub seconds: f64,
    /// Objects loaded into each layout (replaces the workload's count).
    pub objects: Option<u64>,
    /// Operations in flight.
    pub workers: usize,
    /// Times each layout is measured, interleaved.
    pub runs: usize,
    /// Also run each class of the mix alone on the same space for
    /// `seconds`: the model's error per operation class, as the thesis
    /// reports it beside its error on mixes. Classes that only read run
    /// before the mix, on the space as loaded; those that write, after.
    pub classes: bool,
}

/// One layout, measured.
#[derive(Clone, Debug)]
pub struct LayoutRun {
    /// The layout with its prediction and who chose it.
    pub sampled: Sampled,
    /// Its space description (the workload's space name).
    pub description: String,
    /// Objects loaded before the mix ran.
    pub loaded: u64,
    /// Objects the model expects the space to hold on average while the
    /// mix runs (those loaded plus half the inserts of its predicted
    /// throughput): the prediction is for this count.
    pub mean_objects: u64,
    /// Objects the space held on average while the median run's mix ran:
    /// those loaded plus half its inserts.
    pub measured_mean_objects: u64,
    /// The phase of the median run, as the driver reports it.
    pub phase: PhaseResult,
    /// Operations that failed over every run (at most 1 in
    /// [`STEP_ERRORS_MAX`] in each).
    pub errors: u64,
    /// Operations over every run.
    pub operations: u64,
    /// Seconds the mix ran over every run.
    pub seconds: f64,
    /// Operations that succeeded per second, the median over the runs.
    pub measured_ops_per_s: f64,
    /// Each run's operations that succeeded per second, in the order run.
    pub runs_ops_per_s: Vec<f64>,
    /// The median over the runs whose round's probe completed of the run's
    /// rate divided by that round's machine speed: what the layout would
    /// measure at the calibration's speed, each run judged by the probe
    /// that ran beside it rather than by the probes' median.
    pub at_calibration_ops_per_s: Option<f64>,
    /// The runs' median, minimum and maximum.
    pub spread: Spread,
    /// Runs during which the configuration's epoch moved (a daemon taken
    /// offline or back): their measurements are suspect.
    pub disturbed_runs: usize,
    /// Runs that failed and are left out of its figures.
    pub failed_runs: usize,
    /// Each run's machine CPU seconds (every process's) per operation
    /// that succeeded during its mix, in the order run; `None` where
    /// `/proc/stat` could not be read.
    pub runs_cpu_s_per_op: Vec<Option<f64>>,
    /// Each run's share of the machine's CPU time that was busy.
    pub runs_busy: Vec<Option<f64>>,
    /// Where each run ran in its round (0: first, right after the probe),
    /// in the order run.
    pub runs_positions: Vec<usize>,
    /// The round (from 1) of each run, in the order run: a failed run
    /// leaves its round out, so the runs of two layouts pair by round,
    /// not by place.
    pub runs_rounds: Vec<usize>,
    /// Per class of the workload (`--classes`; else empty): the model's
    /// ops/s for the class alone on this layout, and the median over the
    /// runs of what it measured alone after the mix (`None`: no run
    /// measured it).
    pub classes: Vec<ClassAlone>,
}

impl LayoutRun {
    /// Whether any of its runs was disturbed.
    pub fn disturbed(&self) -> bool {
        self.disturbed_runs > 0
    }
}

/// One class of the workload run alone on a layout.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassAlone {
    /// `search`, `get`, `modify` or `insert`.
    pub kind: &'static str,
    pub predicted_ops_per_s: f64,
    pub measured_ops_per_s: Option<f64>,
    /// The objects the space held when it started (the mean over the
    /// runs), which the prediction is for.
    pub objects: u64,
}

/// The mean absolute relative error of the classes alone, per kind in
/// the order search, get, modify, insert (kinds never measured left out),
/// and over all: (kind, error, classes counted).
pub fn class_errors(classes: &[ClassAlone]) -> Vec<(&'static str, f64, usize)> {
    let mut out = Vec::new();
    for kind in ["search", "get", "modify", "insert", "all"] {
        let errors: Vec<f64> = classes
            .iter()
            .filter(|c| kind == "all" || c.kind == kind)
            .filter_map(|c| {
                let m = c.measured_ops_per_s?;
                Some(tessera_advisor::validate::relative_error(c.predicted_ops_per_s, m).abs())
            })
            .collect();
        if !errors.is_empty() {
            out.push((
                kind,
                errors.iter().sum::<f64>() / errors.len() as f64,
                errors.len(),
            ));
        }
    }
    out
}

fn kind_name(kind: &ClassKind) -> &'static str {
    match kind {
        ClassKind::Search(_) => "search",
        ClassKind::Get => "get",
        ClassKind::Modify(_) => "modify",
        ClassKind::Insert => "insert",
    }
}

/// A whole validation run.
#[derive(Clone, Debug)]
pub struct LayoutsReport {
    /// The workload, with the object count that was loaded.
    pub workload: Workload,
    /// The model's parameters.
    pub params: Params,
    /// Whether they are the cluster's calibrated ones.
    pub calibrated: bool,
    /// How many calibrations they average (0: not calibrated).
    pub calibrations: u32,
    /// The daemons the parameters were measured on (`params.daemons` is
    /// the cluster's, which they were scaled to).
    pub measured_daemons: u32,
    /// The options of the run.
    pub seconds: f64,
    /// Operations in flight.
    pub workers: usize,
    /// How the layouts were picked (absent for `--declared`).
    pub sampling: Option<Sampling>,
    /// Times each layout was measured.
    pub runs_per_layout: usize,
    /// Every measured layout, in the order measured.
    pub runs: Vec<LayoutRun>,
    /// Predictions against measurements.
    pub agreement: Option<Agreement>,
    /// Layouts none of whose runs completed: left out of the agreement.
    pub failed: Vec<FailedLayout>,
    /// The machine's speed against the calibration's, once per round;
    /// `None` when no probe completed.
    pub probe: Option<Probe>,
}

/// Gets on a key-only space of the workload's, once per round before its
/// layouts: what the model predicts for them (one calibrated get each)
/// against what they measure says how fast the machine ran this round
/// compared with when it was calibrated. A validation minutes after its
/// calibration can land in a slower or faster minute of a shared machine
/// (docs/design/advisor.md, "A common scale"); the probe measures that
/// apart from the model's errors.
#[derive(Clone, Debug)]
pub struct Probe {
    /// The model's gets per second on the probe space.
    pub predicted_ops_per_s: f64,
    /// Each round's measured gets per second.
    pub rounds_ops_per_s: Vec<f64>,
}

impl Probe {
    /// Measured ÷ predicted, the median over the rounds.
    pub fn speed(&self) -> Option<f64> {
        let s = spread(&self.rounds_ops_per_s)?;
        (self.predicted_ops_per_s > 0.0).then(|| s.median / self.predicted_ops_per_s)
    }
}

/// The mean absolute relative error of `predicted` scaled by `speed`
/// against `measured`.
pub fn scaled_mean_abs_error(predicted: &[f64], measured: &[f64], speed: f64) -> Option<f64> {
    if predicted.is_empty() || predicted.len() != measured.len() {
        return None;
    }
    let sum: f64 = predicted
        .iter()
        .zip(measured)
        .map(|(p, m)| tessera_advisor::validate::relative_error(p * speed, *m).abs())
        .sum();
    Some(sum / predicted.len() as f64)
}

/// A layout none of whose runs completed.
#[derive(Clone, Debug)]
pub struct FailedLayout {
    /// The layout with its prediction and who chose it.
    pub sampled: Sampled,
    /// Its space description.
    pub description: String,
    /// Why each run failed.
    pub errors: Vec<String>,
}

/// How one attribute's values are made.
#[derive(Clone, Debug)]
struct Attr {
    name: String,
    int: bool,
    /// Distinct values.
    values: u64,
}

impl Attr {
    fn value(&self, j: u64) -> Value {
        if self.int {
            // The middle of the j-th of `values` equal slices of the axis.
            let width = u64::MAX / self.values.max(1);
            Value::Int(int_at(j * width + width / 2))
        } else {
            Value::str(&format!("{}{j}", self.name))
        }
    }
}

/// What one class does, ready to run.
#[derive(Clone, Debug)]
enum Plan {
    /// Checks: (attribute, operator, range fraction).
    Search(Vec<(usize, SearchOp, f64)>),
    Get,
    Modify(Vec<usize>),
    Insert,
}

/// The workload, as operations on one space.
struct Mix {
    int_key: bool,
    /// Every attribute but the key (index 0), by index.
    attrs: Vec<Attr>,
    /// Cumulative probability and plan, per class.
    classes: Vec<(f64, Plan)>,
    objects: u64,
}

impl Mix {
    /// Whether class `class` writes (a modify or an insert).
    fn writes(&self, class: usize) -> bool {
        matches!(self.classes[class].1, Plan::Modify(_) | Plan::Insert)
    }

    fn new(workload: &Workload, range_fraction: f64) -> anyhow::Result<Mix> {
        let space = &workload.space;
        anyhow::ensure!(
            workload.classes.len() <= CLASSES_MAX,
            "at most {CLASSES_MAX} classes"
        );
        let int_key = match space.attrs[0].dtype {
            DataType::Int => true,
            DataType::String => false,
            other => anyhow::bail!("bench layouts writes string and int keys; the key is {other}"),
        };
        let mut attrs = Vec::new();
        for (i, a) in space.attrs.iter().enumerate().skip(1) {
            let int = match a.dtype {
                DataType::Int => true,
                DataType::String => false,
                other => anyhow::bail!(
                    "bench layouts writes string and int attributes; {} is {other}",
                    a.name
                ),
            };
            let values = workload
                .distinct
                .get(&i)
                .copied()
                .unwrap_or(workload.objects);
            attrs.push(Attr {
                name: a.name.clone(),
                int,
                values: values.max(1),
            });
        }
        let mut sum = 0.0;
        let mut classes = Vec::new();
        for class in &workload.classes {
            let plan = match &class.kind {
                ClassKind::Search(search) => {
                    let mut checks = Vec::new();
                    for &(a, op) in &search.checks {
                        let name = &space.attrs[a].name;
                        anyhow::ensure!(a != 0, "searches on the key are not measured");
                        anyhow::ensure!(
                            op == SearchOp::Eq || (op == SearchOp::Range && attrs[a - 1].int),
                            "{} on {name} is not measured: only equality, and ranges on ints",
                            op.name()
                        );
                        let fraction = search
                            .range_fraction
                            .or(workload.range_fraction)
                            .unwrap_or(range_fraction);
                        checks.push((a, op, fraction));
                    }
                    Plan::Search(checks)
                }
                ClassKind::Get => Plan::Get,
                ClassKind::Modify(attrs) => Plan::Modify(attrs.clone()),
                ClassKind::Insert => Plan::Insert,
            };
            sum += class.p;
            classes.push((sum, plan));
        }
        Ok(Mix {
            int_key,
            attrs,
            classes,
            objects: workload.objects,
        })
    }

    fn key(&self, n: u64) -> Value {
        if self.int_key {
            Value::Int(n as i64)
        } else {
            Value::str(&format!("k{n}"))
        }
    }

    fn attr(&self, a: usize) -> &Attr {
        &self.attrs[a - 1]
    }

    /// Every attribute of object `n`.
    fn record(&self, n: u64) -> Vec<(&str, Value)> {
        (1..=self.attrs.len())
            .map(|a| {
                let attr = self.attr(a);
                (attr.name.as_str(), attr.value(hash(n, a) % attr.values))
            })
            .collect()
    }

    /// The class a uniform draw in [0, 1) falls in.
    fn class_of(&self, u: f64) -> usize {
        self.classes
            .iter()
            .position(|(sum, _)| u < *sum)
            .unwrap_or(self.classes.len() - 1)
    }
}

/// A class and a seed in one number: the class in the low 8 bits.
fn pack(class: usize, seed: u64) -> u64 {
    (seed & ((1 << 54) - 1)) << 8 | class as u64
}

fn unpack(n: u64) -> (usize, u64) {
    ((n & 0xff) as usize, n >> 8)
}

/// Runs the mix on one space. Operations carry their class and a seed
/// (searches in `SearchEq::recno`, modifies in `ReadModifyWrite::field`),
/// from which the values are drawn.
struct MixStore {
    client: Client,
    space: String,
    mix: Arc<Mix>,
}

impl MixStore {
    async fn run(&self, op: &Op) -> anyhow::Result<Outcome> {
        let mix = &self.mix;
        match op {
            Op::Insert { recno, .. } => {
                let n = *recno as u64;
                self.client
                    .put(&self.space, mix.key(n), mix.record(n))
                    .await?
                    .into_result()?;
                Ok(Outcome::Ok)
            }
            Op::Read { key } => {
                let key = mix.key(key.parse()?);
                Ok(match self.client.get(&self.space, key).await? {
                    Some(_) => Outcome::Ok,
                    None => Outcome::NotFound,
                })
            }
            Op::ReadModifyWrite { key, field, .. } => {
                let (class, seed) = unpack(*field as u64);
                let Plan::Modify(attrs) = &mix.classes[class].1 else {
                    anyhow::bail!("class {class} is not a modify");
                };
                let key = mix.key(key.parse()?);
                let found = self.client.get(&self.space, key.clone()).await?;
                let changed = attrs.iter().map(|&a| {
                    let attr = mix.attr(a);
                    (attr.name.as_str(), attr.value(hash(seed, a) % attr.values))
                });
                self.client
                    .put(&self.space, key, changed)
                    .await?
                    .into_result()?;
                Ok(if found.is_some() {
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                })
            }
            Op::SearchEq { recno } => {
                let (class, seed) = unpack(*recno as u64);
                let Plan::Search(checks) = &mix.classes[class].1 else {
                    anyhow::bail!("class {class} is not a search");
                };
                let mut predicates = Vec::new();
                for &(a, op, fraction) in checks {
                    let attr = mix.attr(a);
                    let draw = hash(seed, a);
                    if op == SearchOp::Eq {
                        predicates.push((
                            attr.name.as_str(),
                            PredOp::Eq(attr.value(draw % attr.values)),
                        ));
                    } else {
                        // A fraction of the axis, anywhere on it.
                        let (low, high) = int_range(fraction, draw);
                        predicates.push((attr.name.as_str(), low));
                        predicates.push((attr.name.as_str(), high));
                    }
                }
                let found = self.client.search(&self.space, predicates).await?;
                Ok(if found.is_empty() {
                    Outcome::NotFound
                } else {
                    Outcome::Ok
                })
            }
            op => anyhow::bail!("bench layouts cannot run {}", op.kind()),
        }
    }
}

impl Store for MixStore {
    fn name(&self) -> &str {
        "tessera"
    }

    fn supports(&self, _kind: &str) -> bool {
        true
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        Box::pin(self.run(op))
    }
}

/// Measures the workload `text` (a workload file) on the cluster behind
/// `admin` and `client`: see the module docs.
pub async fn run(
    admin: &Admin,
    client: &Client,
    text: &str,
    options: &LayoutsOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<LayoutsReport> {
    anyhow::ensure!(
        options.seconds.is_finite() && options.seconds > 0.0 && options.seconds <= 600.0,
        "--seconds must be above 0 and at most 600"
    );
    anyhow::ensure!(options.sampling.top > 0, "--layouts must be at least 1");
    anyhow::ensure!(
        (1..=RUNS_MAX).contains(&options.runs),
        "--runs must be 1 to {RUNS_MAX}"
    );
    let config = admin.config().await?;
    let given = match space_ref(text)? {
        SpaceRef::Name(name) => Some(
            config
                .space(&name)
                .map(|s| s.desc.clone())
                .with_context(|| format!("the workload's space {name:?} does not exist"))?,
        ),
        SpaceRef::Description(_) => None,
    };
    let mut workload = parse_workload(text, given.as_ref())?;
    if let Some(objects) = options.objects {
        workload.objects = objects.max(1);
    }
    // Each layout runs on a space created for it: the index entries its
    // modifies remove stay in the memtable for the whole run, so its
    // walks meet a run's worth of them (`Workload::churn_horizon_s`).
    workload.churn_horizon_s.get_or_insert(options.seconds);
    let calibrated = config.advisor.is_some();
    let calibrations = config
        .advisor
        .as_ref()
        .map_or(0, |c| c.calibrations.unwrap_or(1));
    let as_measured = match &config.advisor {
        Some(c) => Params::default().calibrated(c),
        None => Params::default(),
    };
    let measured_daemons = as_measured.daemons;
    // Predicted for the cluster the layouts run on, which may have more
    // or fewer daemons than the parameters were measured on.
    let params = as_measured.on_cluster(&config);
    let mix = Arc::new(Mix::new(&workload, params.range_fraction)?);
    let advice = advise(
        &workload,
        &params,
        &Options {
            // The whole ranking: the sample takes groups from its top and
            // draws others from the rest.
            top: usize::MAX,
            ..Options::default()
        },
    )?;
    // Inserts grow the space while a mix runs (3 s at 20,000 ops/s with
    // 30 % inserts add 18,000 objects to 4,000, and every search then
    // returns five times as much): each layout is predicted for the mean
    // count its own predicted throughput leaves in the space.
    let candidates = if options.declared {
        let layout = Layout::of_space(&workload.space);
        vec![Sampled {
            prediction: predict(Options::default().model, &workload, &layout, &params),
            layout,
            top_rank: None,
            drawn: false,
            heuristics: Vec::new(),
        }]
    } else {
        sampled_layouts(&advice, options.sampling)
    };
    let sampled: Vec<(Sampled, u64)> = candidates
        .into_iter()
        .filter(|s| !s.layout.converts(&workload.space))
        .map(|mut s| {
            let (prediction, mean) = predict_over_run(
                Options::default().model,
                &workload,
                &s.layout,
                &params,
                options.seconds,
            );
            s.prediction = prediction;
            (s, mean)
        })
        .collect();
    let existing = existing_scratch(admin, SCRATCH_PREFIX).await?;
    if !existing.is_empty() {
        anyhow::bail!(
            "scratch space(s) {} exist: another `bench layouts` is running, or one was \
             interrupted; if none runs, remove them with `tessera rm-space NAME`",
            existing.join(", ")
        );
    }
    progress(&format!(
        "{} layouts, {} objects each, {} s each, {} run(s) each; parameters: {}, measured on {} daemons, predicting for {}",
        sampled.len(),
        workload.objects,
        options.seconds,
        options.runs,
        if calibrated {
            match calibrations {
                1 => "the cluster's calibrated ones (one calibration)".to_string(),
                n => format!("the cluster's calibrated ones (the average of {n} calibrations)"),
            }
        } else {
            "the defaults (the cluster is not calibrated: run `tessera calibrate`)".to_string()
        },
        measured_daemons,
        params.daemons,
    ));
    // Interleaved: every layout once per round, so that the machine's
    // slow and fast minutes fall on every layout alike; each round starts
    // at a different layout (`round_order`), so that no layout always
    // runs first after the probe or after the same neighbour.
    let mut measured: Vec<Vec<Mixed>> = sampled.iter().map(|_| Vec::new()).collect();
    // A run that fails (a daemon offline mid-load on a busy machine) is
    // reported and left out; the layout's other runs still count.
    let mut failures: Vec<Vec<String>> = sampled.iter().map(|_| Vec::new()).collect();
    let probe_workload = Workload {
        classes: vec![Class {
            p: 1.0,
            kind: ClassKind::Get,
        }],
        ..workload.clone()
    };
    let probe_mix = Arc::new(Mix::new(&probe_workload, params.range_fraction)?);
    let probe_layout = Layout::of_subspaces(Vec::new());
    let mut probe = Probe {
        predicted_ops_per_s: tessera_advisor::predict(
            Options::default().model,
            &probe_workload,
            &probe_layout,
            &params,
        )
        .ops_per_s,
        rounds_ops_per_s: Vec::new(),
    };
    for round in 1..=options.runs {
        let mut speed = None;
        let name = format!("{SCRATCH_PREFIX}probe");
        progress(&format!("{name}: gets on a key-only space, round {round}"));
        let mut created = false;
        let outcome = measure(
            admin,
            client,
            &probe_workload,
            &probe_mix,
            &probe_layout,
            &name,
            &mut created,
            options,
            progress,
        )
        .await;
        if created {
            admin
                .rm_space(&name)
                .await
                .with_context(|| format!("removing the scratch space {name}"))?;
        }
        match outcome {
            Ok(m) => {
                let rate = (m.phase.operations - m.errors) as f64 / m.phase.seconds;
                probe.rounds_ops_per_s.push(rate);
                // `at_calibration` leaves out a speed that is not finite
                // and positive.
                speed = Some(rate / probe.predicted_ops_per_s);
            }
            // The probe only explains the layouts' figures; without it
            // they stand as they are.
            Err(e) => progress(&format!("{name}: round {round} failed, left out: {e:#}")),
        }
        for (position, i) in round_order(sampled.len(), round, options.runs)
            .into_iter()
            .enumerate()
        {
            let s = &sampled[i].0;
            let name = format!("{SCRATCH_PREFIX}{i}");
            if options.runs > 1 {
                progress(&format!("{name}: run {round} of {}", options.runs));
            }
            let mut created = false;
            let outcome = measure(
                admin,
                client,
                &workload,
                &mix,
                &s.layout,
                &name,
                &mut created,
                options,
                progress,
            )
            .await;
            let cleanup = if created {
                admin
                    .rm_space(&name)
                    .await
                    .with_context(|| format!("removing the scratch space {name}"))
            } else {
                Ok(())
            };
            // A scratch space left behind would be taken for this run's
            // own next time: that ends the whole run.
            cleanup?;
            let m = match outcome {
                Ok(m) => Mixed {
                    speed,
                    position,
                    round,
                    ..m
                },
                Err(e) => {
                    progress(&format!("{name}: run {round} failed, left out: {e:#}"));
                    failures[i].push(format!("{e:#}"));
                    continue;
                }
            };
            if m.disturbed {
                progress(&format!(
                    "{name}: the configuration changed during the mix (a daemon lost its \
                     lease?): its measurement is marked disturbed"
                ));
            }
            measured[i].push(m);
        }
    }
    let mut runs = Vec::new();
    let mut failed = Vec::new();
    for (((s, mean), ms), errors) in sampled.into_iter().zip(measured).zip(failures) {
        let failed_runs = errors.len();
        let predicted = if options.classes {
            // Each class at the objects its runs started with, on average.
            let held = (0..workload.classes.len())
                .map(|i| {
                    let counts: Vec<u64> = ms
                        .iter()
                        .filter_map(|m| m.classes_objects.get(i).copied())
                        .collect();
                    (counts.iter().sum::<u64>() / (counts.len() as u64).max(1)).max(1)
                })
                .collect::<Vec<_>>();
            class_predictions(&workload, &s.layout, &params, options.seconds, &held)
        } else {
            Vec::new()
        };
        match layout_run(&workload, s.clone(), mean, ms, predicted) {
            Some(mut run) => {
                run.failed_runs = failed_runs;
                runs.push(run);
            }
            None => failed.push(FailedLayout {
                description: s.layout.describe(&workload.space),
                sampled: s,
                errors,
            }),
        }
    }
    anyhow::ensure!(
        !runs.is_empty(),
        "no layout was measured: {}",
        failed
            .iter()
            .filter_map(|f| f.errors.first())
            .next()
            .map_or("", String::as_str)
    );
    let predicted: Vec<f64> = runs
        .iter()
        .map(|r| r.sampled.prediction.ops_per_s)
        .collect();
    let measured: Vec<f64> = runs.iter().map(|r| r.measured_ops_per_s).collect();
    Ok(LayoutsReport {
        agreement: agreement(&predicted, &measured),
        workload,
        params,
        calibrated,
        calibrations,
        measured_daemons,
        seconds: options.seconds,
        workers: options.workers,
        runs_per_layout: options.runs,
        sampling: (!options.declared).then_some(options.sampling),
        runs,
        failed,
        probe: (!probe.rounds_ops_per_s.is_empty()).then_some(probe),
    })
}

/// The model's ops/s for each class of `workload` alone on `layout`, with
/// its kind, each starting from the objects `held` gives it (the space
/// grows by the inserts run before it).
fn class_predictions(
    workload: &Workload,
    layout: &Layout,
    params: &Params,
    seconds: f64,
    held: &[u64],
) -> Vec<(&'static str, f64, u64)> {
    workload
        .classes
        .iter()
        .zip(held)
        .map(|(class, &objects)| {
            let alone = Workload {
                classes: vec![Class {
                    p: 1.0,
                    kind: class.kind.clone(),
                }],
                objects,
                ..workload.clone()
            };
            let (prediction, _) = tessera_advisor::validate::predict_over_run(
                Options::default().model,
                &alone,
                layout,
                params,
                seconds,
            );
            (kind_name(&class.kind), prediction.ops_per_s, objects)
        })
        .collect()
}

/// One layout's runs reduced to their median and spread, with its
/// classes alone against `predicted` (`--classes`, else empty); `None`
/// without a run.
fn layout_run(
    workload: &Workload,
    sampled: Sampled,
    mean_objects: u64,
    ms: Vec<Mixed>,
    predicted: Vec<(&'static str, f64, u64)>,
) -> Option<LayoutRun> {
    let rates: Vec<f64> = ms
        .iter()
        .map(|m| (m.phase.operations - m.errors) as f64 / m.phase.seconds)
        .collect();
    let speeds: Vec<Option<f64>> = ms.iter().map(|m| m.speed).collect();
    let at_calibration = at_calibration(&rates, &speeds);
    let spread = spread(&rates)?;
    let middle = median_position(&rates)?;
    let inserted = inserted(&ms[middle].phase);
    Some(LayoutRun {
        description: sampled.layout.describe(&workload.space),
        sampled,
        loaded: ms[middle].loaded,
        mean_objects,
        measured_mean_objects: ms[middle].loaded + inserted / 2,
        errors: ms.iter().map(|m| m.errors).sum(),
        operations: ms.iter().map(|m| m.phase.operations).sum(),
        seconds: ms.iter().map(|m| m.phase.seconds).sum(),
        disturbed_runs: ms.iter().filter(|m| m.disturbed).count(),
        failed_runs: 0,
        runs_cpu_s_per_op: ms
            .iter()
            .map(|m| Some(m.cpu?.busy_s / (m.phase.operations - m.errors) as f64))
            .collect(),
        runs_busy: ms.iter().map(|m| m.cpu?.busy()).collect(),
        runs_positions: ms.iter().map(|m| m.position).collect(),
        runs_rounds: ms.iter().map(|m| m.round).collect(),
        // Each class's median over the runs that measured it alone.
        classes: predicted
            .into_iter()
            .enumerate()
            .map(|(i, (kind, predicted_ops_per_s, objects))| {
                let alone: Vec<f64> = ms
                    .iter()
                    .filter_map(|m| m.classes.get(i).copied().flatten())
                    .collect();
                ClassAlone {
                    kind,
                    predicted_ops_per_s,
                    measured_ops_per_s: tessera_advisor::validate::spread(&alone).map(|s| s.median),
                    objects,
                }
            })
            .collect(),
        measured_ops_per_s: spread.median,
        at_calibration_ops_per_s: at_calibration,
        runs_ops_per_s: rates,
        spread,
        phase: ms.into_iter().nth(middle)?.phase,
    })
}

/// The median of each run's rate divided by its round's machine speed,
/// over the runs whose round has one.
fn at_calibration(rates: &[f64], speeds: &[Option<f64>]) -> Option<f64> {
    let scaled: Vec<f64> = rates
        .iter()
        .zip(speeds)
        .filter_map(|(rate, speed)| Some(rate / speed.filter(|s| s.is_finite() && *s > 0.0)?))
        .collect();
    spread(&scaled).map(|s| s.median)
}

/// Whether the configuration changed from `before` to `after` in more
/// than its epoch and tombstone horizon: the coordinator advances the
/// horizon (a new epoch) every few seconds while writes go on, which
/// changes nothing a run depends on.
fn disturbs(before: &Configuration, after: &Configuration) -> bool {
    let routing = |c: &Configuration| Configuration {
        epoch: Epoch(0),
        tombstone_horizon: Epoch(0),
        ..c.clone()
    };
    routing(before) != routing(after)
}

/// What [`measure`] gives.
struct Mixed {
    loaded: u64,
    phase: PhaseResult,
    errors: u64,
    disturbed: bool,
    /// Its round's probe speed (measured ÷ predicted gets), when the
    /// round's probe completed.
    speed: Option<f64>,
    /// Where it ran in its round: 0 first, right after the probe.
    position: usize,
    /// Its round, from 1.
    round: usize,
    /// The machine's CPU during the mix, when `/proc/stat` could be read.
    cpu: Option<MachineCpu>,
    /// Each class alone, ops/s, when `--classes` asked (`None`: too many
    /// of its operations failed, or none completed).
    classes: Vec<Option<f64>>,
    /// The objects the space held when each class alone started: those
    /// loaded, and those the mix's and the earlier classes' inserts added.
    classes_objects: Vec<u64>,
}

/// What the whole machine's CPUs did over an interval (`/proc/stat`'s
/// first line): every process on it, the cluster's and the client's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MachineCpu {
    /// Seconds of CPU spent working (user, nice, system, irq, softirq).
    pub busy_s: f64,
    /// Seconds of CPU in all (busy, idle, iowait, steal).
    pub total_s: f64,
}

impl MachineCpu {
    /// The machine's counters now, in seconds since boot.
    fn now() -> Option<MachineCpu> {
        MachineCpu::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The `cpu` line of `/proc/stat`, in clock ticks of 1/100 s.
    fn parse(stat: &str) -> Option<MachineCpu> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|t| t.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal (guest time is
        // already counted in user).
        let at = |i: usize| ticks.get(i).copied().unwrap_or(0) as f64 / 100.0;
        let busy_s = at(0) + at(1) + at(2) + at(5) + at(6);
        Some(MachineCpu {
            busy_s,
            total_s: busy_s + at(3) + at(4) + at(7),
        })
    }

    fn since(self, before: MachineCpu) -> MachineCpu {
        MachineCpu {
            busy_s: self.busy_s - before.busy_s,
            total_s: self.total_s - before.total_s,
        }
    }

    /// The share of the machine's CPU time that was busy.
    pub fn busy(&self) -> Option<f64> {
        (self.total_s > 0.0).then(|| self.busy_s / self.total_s)
    }
}

/// One layout: create `name` with it, load, run the mix.
#[allow(clippy::too_many_arguments)]
async fn measure(
    admin: &Admin,
    client: &Client,
    workload: &Workload,
    mix: &Arc<Mix>,
    layout: &Layout,
    name: &str,
    created: &mut bool,
    options: &LayoutsOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<Mixed> {
    let mut space = workload.space.clone();
    space.name = name.to_string();
    let description = layout.describe(&space);
    add_scratch(admin, name, &description).await?;
    *created = true;
    wait_space(client, name).await?;
    let store = Arc::new(MixStore {
        client: client.clone(),
        space: name.to_string(),
        mix: mix.clone(),
    });
    let objects = mix.objects;
    progress(&format!(
        "{name}: {}: loading {objects} objects",
        layout.summary(&space)
    ));
    let next = Arc::new(AtomicU64::new(0));
    let load = Load {
        workers: options.workers,
        operations: objects,
        time_limit: LOAD_LIMIT,
    };
    let loaded = run_phase(store.clone(), "load", load, |w| {
        let next = next.clone();
        FnSource::boxed(w as u64, move |_| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Op::Insert {
                key: String::new(),
                recno: n as i64,
                fields: Arc::default(),
            }
        })
    })
    .await?;
    let errors = loaded.errors();
    if errors * LOAD_ERRORS_MAX > loaded.operations.max(1) || loaded.operations < objects {
        anyhow::bail!(
            "loading {name}: {} of {objects} inserts done, {errors} failed ({})",
            loaded.operations,
            loaded.first_error.unwrap_or_default()
        );
    }
    let fresh = Arc::new(AtomicU64::new(objects));
    let step = Load {
        workers: options.workers,
        // A budget no run on this machine reaches in its time.
        operations: 100_000_000,
        time_limit: Duration::from_secs_f64(options.seconds),
    };
    // Each class alone (`--classes`): those that only read first, on the
    // space as loaded, since the dead versions and index entries a mix's
    // writes leave behind slow a search for a while and the model prices
    // a class alone without them; those that write after the mix.
    let measured = if options.classes {
        mix.classes.len()
    } else {
        0
    };
    let mut classes = vec![None; measured];
    let mut classes_objects = vec![loaded.operations; classes.len()];
    for class in (0..classes.len()).filter(|&c| !mix.writes(c)) {
        progress(&format!("{name}: class {} alone", class + 1));
        let alone = run_classes(store.clone(), "class", step, mix, &fresh, Some(class)).await?;
        classes[class] = class_rate(name, class, &alone, progress);
    }
    progress(&format!("{name}: the mix ({:.1} s)", options.seconds));
    let before = admin.config().await?;
    let cpu_before = MachineCpu::now();
    let phase = run_classes(store.clone(), "mix", step, mix, &fresh, None).await?;
    let cpu = cpu_before.zip(MachineCpu::now()).map(|(b, a)| a.since(b));
    // A change of routing meanwhile (a daemon that lost its lease and was
    // taken offline, on a loaded machine) disturbed the run.
    let disturbed = disturbs(&before, &admin.config().await?);
    let errors = phase.errors();
    if let Some(c) = cpu {
        let done = phase.operations.saturating_sub(errors);
        progress(&format!(
            "{name}: {:.0} ops/s; the machine {:.0} % busy, {:.1} µs of CPU per operation",
            done as f64 / phase.seconds.max(1e-9),
            100.0 * c.busy().unwrap_or(0.0),
            1e6 * c.busy_s / done.max(1) as f64
        ));
    }
    if errors * STEP_ERRORS_MAX > phase.operations.max(1) {
        anyhow::bail!(
            "{name}: {errors} of {} operations failed ({})",
            phase.operations,
            phase.first_error.clone().unwrap_or_default()
        );
    }
    anyhow::ensure!(
        phase.operations > errors && phase.seconds > 0.0,
        "{name}: no operation completed in {} s",
        options.seconds
    );
    let mut held = loaded.operations + inserted(&phase);
    for class in (0..classes.len()).filter(|&c| mix.writes(c)) {
        progress(&format!("{name}: class {} alone", class + 1));
        let alone = run_classes(store.clone(), "class", step, mix, &fresh, Some(class)).await?;
        classes[class] = class_rate(name, class, &alone, progress);
        classes_objects[class] = held;
        held += inserted(&alone);
    }
    Ok(Mixed {
        speed: None,
        position: 0,
        round: 0,
        cpu,
        classes,
        classes_objects,
        loaded: loaded.operations,
        phase,
        errors,
        disturbed,
    })
}

/// The order in which round `round` (from 1) of `runs` measures
/// `layouts` layouts: every one once, starting at layout
/// ⌊(round − 1)·layouts / runs⌋ and wrapping around, so that the rounds
/// spread their starts over the list and each layout runs at a different
/// place in each (when there are at least as many layouts as rounds).
pub fn round_order(layouts: usize, round: usize, runs: usize) -> Vec<usize> {
    if layouts == 0 {
        return Vec::new();
    }
    let start = (round.saturating_sub(1) % runs.max(1)) * layouts / runs.max(1);
    (0..layouts).map(|j| (start + j) % layouts).collect()
}

/// The inserts of `phase` that succeeded (`count` leaves errors apart).
fn inserted(phase: &PhaseResult) -> u64 {
    phase.ops.get("INSERT").map_or(0, |o| o.count)
}

/// What class `class` run alone measured, in ops/s: `None` when too
/// many of its operations failed (said through `progress`) or none
/// completed.
fn class_rate(
    name: &str,
    class: usize,
    alone: &PhaseResult,
    progress: &(dyn Fn(&str) + Sync),
) -> Option<f64> {
    let failed = alone.errors();
    let done = alone.operations.saturating_sub(failed);
    if failed * STEP_ERRORS_MAX > alone.operations.max(1) {
        progress(&format!(
            "{name}: class {}: {failed} of {} failed, left out",
            class + 1,
            alone.operations
        ));
        return None;
    }
    (done > 0 && alone.seconds > 0.0).then(|| done as f64 / alone.seconds)
}

/// Runs the workload's operations on the store for `step`: drawn as the
/// mix draws them, or only class `only`.
async fn run_classes(
    store: Arc<MixStore>,
    label: &str,
    step: Load,
    mix: &Arc<Mix>,
    fresh: &Arc<AtomicU64>,
    only: Option<usize>,
) -> anyhow::Result<PhaseResult> {
    let objects = mix.objects;
    run_phase(store, label, step, |w| {
        let mix = mix.clone();
        let fresh = fresh.clone();
        FnSource::boxed(7919 * (1 + w as u64), move |rng| {
            let class = only.unwrap_or_else(|| mix.class_of(rng.gen::<f64>()));
            let seed = rng.gen::<u64>();
            let mut existing = || rng.gen_range(0..objects).to_string();
            match &mix.classes[class].1 {
                Plan::Search(_) => Op::SearchEq {
                    recno: pack(class, seed) as i64,
                },
                Plan::Get => Op::Read { key: existing() },
                Plan::Modify(_) => Op::ReadModifyWrite {
                    key: existing(),
                    field: pack(class, seed) as usize,
                    value: Vec::new(),
                    record: Arc::default(),
                },
                Plan::Insert => Op::Insert {
                    key: String::new(),
                    recno: fresh.fetch_add(1, Ordering::Relaxed) as i64,
                    fields: Arc::default(),
                },
            }
        })
    })
    .await
}

/// Who chose a layout: `top 1`, `greedy`, `top 2, dominant`, `drawn`.
fn chosen_by(s: &Sampled) -> String {
    s.top_rank
        .map(|r| format!("top {r}"))
        .into_iter()
        .chain(s.drawn.then(|| "drawn".to_string()))
        .chain(s.heuristics.iter().map(|h| h.name().to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl LayoutsReport {
    /// The measured layout a heuristic chose, if any.
    fn heuristic(&self, h: Heuristic) -> Option<&LayoutRun> {
        self.runs.iter().find(|r| r.sampled.heuristics.contains(&h))
    }

    fn best(&self) -> Option<&LayoutRun> {
        self.agreement
            .as_ref()
            .map(|a| &self.runs[a.predicted_best])
    }

    /// The predicted best and the layout measured fastest (the highest
    /// median). When their runs overlap (`Spread::overlaps`) the runs do
    /// not tell the two apart: a predicted best ranked below it may be as
    /// fast.
    fn chosen_and_fastest(&self) -> Option<(&LayoutRun, &LayoutRun)> {
        let fastest = self
            .runs
            .iter()
            .max_by(|a, b| a.measured_ops_per_s.total_cmp(&b.measured_ops_per_s))?;
        Some((self.best()?, fastest))
    }

    /// The table and the summary lines.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let space = &self.workload.space;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} objects per layout, {} s each, {} run(s) each (median, min–max), {} in \
             flight; parameters: {}{}",
            self.workload.objects,
            self.seconds,
            self.runs_per_layout,
            self.workers,
            if self.calibrated {
                "calibrated (cluster)"
            } else {
                "defaults (not calibrated)"
            },
            if self.measured_daemons == self.params.daemons {
                String::new()
            } else {
                format!(
                    ", measured on {} daemons and scaled to {}",
                    self.measured_daemons, self.params.daemons
                )
            }
        );
        if let Some(s) = self.sampling {
            let _ = writeln!(
                out,
                "layouts: the top {} groups of equal predictions, {} drawn at random from the \
                 other groups (seed {}), and each heuristic's",
                s.top, s.random, s.seed
            );
        }
        let _ = writeln!(
            out,
            "{:>11} {:>11} {:>15} {:>8} {:>8}  {:<40}  chosen by",
            "predicted", "measured", "min–max", "error", "scaled", "layout"
        );
        for r in &self.runs {
            let mut summary = r.sampled.layout.summary(space);
            if summary.chars().count() > 40 {
                summary = summary.chars().take(39).collect::<String>() + "…";
            }
            let _ = writeln!(
                out,
                "{:>11.0} {:>11.0} {:>15} {:>+7.1}% {:>8}  {summary:<40}  {}{}",
                r.sampled.prediction.ops_per_s,
                r.measured_ops_per_s,
                format!("{:.0}–{:.0}", r.spread.min, r.spread.max),
                tessera_advisor::validate::relative_error(
                    r.sampled.prediction.ops_per_s,
                    r.measured_ops_per_s
                ) * 100.0,
                r.at_calibration_ops_per_s
                    .map_or("-".to_string(), |m| format!(
                        "{:+.1}%",
                        tessera_advisor::validate::relative_error(
                            r.sampled.prediction.ops_per_s,
                            m
                        ) * 100.0
                    )),
                chosen_by(&r.sampled),
                if r.disturbed() { " (disturbed)" } else { "" },
            );
        }
        if let Some(a) = &self.agreement {
            let _ = writeln!(
                out,
                "mean absolute relative error: {:.1}%",
                a.mean_abs_relative_error * 100.0
            );
            if let (Some(level), Some(around)) = (self.level(), self.error_around_level()) {
                let _ = writeln!(
                    out,
                    "the predictions' level: {:+.1}% (geometric mean of predicted / measured); \
                     about it, the mean absolute relative error is {:.1}%; the runs of a \
                     layout spread over {:.1}% of their median on average (max - min)",
                    (level - 1.0) * 100.0,
                    around * 100.0,
                    self.mean_spread() * 100.0
                );
            }
            let _ = writeln!(
                out,
                "Kendall tau-b (predicted vs measured): {}",
                a.kendall_tau_b
                    .map_or("undefined".to_string(), |t| format!("{t:.3}"))
            );
            if let Some(h) = self.halves() {
                let _ = writeln!(
                    out,
                    "the runs against themselves (each layout's odd runs vs its even ones): \
                     {:.1}% apart, tau-b {}, {}",
                    h.mean_abs_relative_error * 100.0,
                    h.kendall_tau_b
                        .map_or("undefined".to_string(), |t| format!("{t:.3}")),
                    if h.predicted_best_measured_rank == 1 {
                        "the same best"
                    } else {
                        "a different best"
                    }
                );
            }
            if let Some(p) = self.paired() {
                let _ = writeln!(
                    out,
                    "what the runs tell apart (round by round, signed-rank test at 5%): {} of {} \
                     pairs; the predictions order {} of them alike and {} the other way; {}",
                    p.apart,
                    p.pairs,
                    p.ordered_alike,
                    p.ordered_against,
                    match p.faster_than_predicted_best {
                        0 => "no layout measured faster than the predicted best".to_string(),
                        n => format!("{n} layout(s) measured faster than the predicted best"),
                    }
                );
            }
            let _ = write!(
                out,
                "predicted best: measured rank {} of {}",
                a.predicted_best_measured_rank,
                self.runs.len()
            );
            if a.predicted_best_ties > 1 {
                let _ = write!(
                    out,
                    " (predicted equal to {} other(s); the best of them measured rank {})",
                    a.predicted_best_ties - 1,
                    a.tied_best_measured_rank
                );
            }
            match self.chosen_and_fastest() {
                Some((chosen, fastest)) if a.predicted_best_measured_rank > 1 => {
                    let (c, f) = (&chosen.spread, &fastest.spread);
                    let _ = write!(
                        out,
                        "; its runs ({:.0}–{:.0}) {} the measured best's ({:.0}–{:.0})",
                        c.min,
                        c.max,
                        if c.overlaps(f) {
                            "overlap"
                        } else {
                            "stay below"
                        },
                        f.min,
                        f.max
                    );
                }
                _ => {}
            }
            let _ = writeln!(out);
        }
        let per_kind = self.class_errors();
        if !per_kind.is_empty() {
            let line: Vec<String> = per_kind
                .iter()
                .map(|(kind, error, n)| format!("{kind} {:.1}% ({n})", error * 100.0))
                .collect();
            let _ = writeln!(
                out,
                "each class alone, mean absolute relative error by kind (classes): {}",
                line.join(", ")
            );
        }
        if let Some((probe, speed)) = self.probe.as_ref().zip(self.speed()) {
            let rounds: Vec<String> = probe
                .rounds_ops_per_s
                .iter()
                .map(|r| format!("{:.2}", r / probe.predicted_ops_per_s))
                .collect();
            let _ = writeln!(
                out,
                "machine speed against the calibration (gets on a key-only space, measured ÷ \
                 predicted, each round): {} (median {speed:.2})",
                rounds.join(", ")
            );
            if let Some(e) = self.scaled_error() {
                let _ = writeln!(
                    out,
                    "mean absolute relative error with every prediction scaled by that speed: \
                     {:.1}%",
                    e * 100.0
                );
            }
            if let Some(e) = self.per_round_error() {
                let _ = writeln!(
                    out,
                    "mean absolute relative error with each run scaled by its own round's \
                     speed (the `scaled` column): {:.1}%",
                    e * 100.0
                );
            }
        }
        for f in &self.failed {
            let _ = writeln!(
                out,
                "failed, left out: {} ({} of {} runs: {})",
                f.sampled.layout.summary(space),
                f.errors.len(),
                self.runs_per_layout,
                f.errors.first().map_or("", String::as_str)
            );
        }
        let failed: usize = self.runs.iter().map(|r| r.failed_runs).sum();
        if failed > 0 {
            let _ = writeln!(
                out,
                "{failed} run(s) of measured layouts failed and are left out of their medians"
            );
        }
        let disturbed: usize = self.runs.iter().map(|r| r.disturbed_runs).sum();
        if disturbed > 0 {
            let _ = writeln!(
                out,
                "{disturbed} run(s) disturbed: the configuration changed while the mix ran"
            );
        }
        if let (Some(best), Some(greedy)) = (self.best(), self.heuristic(Heuristic::Greedy)) {
            let _ = writeln!(
                out,
                "predicted best vs greedy: measured ×{:.2}, predicted ×{:.2}",
                best.measured_ops_per_s / greedy.measured_ops_per_s,
                best.sampled.prediction.ops_per_s / greedy.sampled.prediction.ops_per_s
            );
        }
        out
    }

    /// The JSON of API.md §12.5: per layout its description with
    /// `predicted_ops_per_s` and `measured_ops_per_s`, the mean absolute
    /// relative error and the measured rank of the predicted best; and
    /// more.
    pub fn json(&self) -> Json {
        let space = &self.workload.space;
        let layouts: Vec<Json> = self
            .runs
            .iter()
            .map(|r| {
                json!({
                    "description": r.description,
                    "summary": r.sampled.layout.summary(space),
                    "top_rank": r.sampled.top_rank,
                    "drawn": r.sampled.drawn,
                    "heuristics": r.sampled.heuristics.iter().map(|h| h.name()).collect::<Vec<_>>(),
                    "predicted_ops_per_s": r.sampled.prediction.ops_per_s,
                    "measured_ops_per_s": r.measured_ops_per_s,
                    "relative_error": tessera_advisor::validate::relative_error(
                        r.sampled.prediction.ops_per_s,
                        r.measured_ops_per_s
                    ),
                    "objects": r.loaded,
                    "mean_objects": r.mean_objects,
                    "measured_mean_objects": r.measured_mean_objects,
                    "operations": r.operations,
                    "errors": r.errors,
                    "disturbed": r.disturbed(),
                    "disturbed_runs": r.disturbed_runs,
                    "failed_runs": r.failed_runs,
                    "seconds": r.seconds,
                    "ops": r.phase.ops,
                    "runs_ops_per_s": r.runs_ops_per_s,
                    "at_calibration_ops_per_s": r.at_calibration_ops_per_s,
                    "measured_min_ops_per_s": r.spread.min,
                    "measured_max_ops_per_s": r.spread.max,
                    "measured_spread": r.spread.relative(),
                    // The whole machine's CPU per operation and busy share
                    // during each run's mix (null where unread).
                    "runs_cpu_s_per_op": r.runs_cpu_s_per_op,
                    "runs_busy": r.runs_busy,
                    "runs_positions": r.runs_positions,
                    "runs_rounds": r.runs_rounds,
                    "classes": r.classes.iter().map(|c| json!({
                        "kind": c.kind,
                        "predicted_ops_per_s": c.predicted_ops_per_s,
                        "measured_ops_per_s": c.measured_ops_per_s,
                        "objects": c.objects,
                        "relative_error": c.measured_ops_per_s.map(|m| {
                            tessera_advisor::validate::relative_error(c.predicted_ops_per_s, m)
                        }),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let a = self.agreement.as_ref();
        let greedy = match (self.best(), self.heuristic(Heuristic::Greedy)) {
            (Some(best), Some(greedy)) => json!({
                "description": greedy.description,
                "measured_ops_per_s": greedy.measured_ops_per_s,
                "predicted_ops_per_s": greedy.sampled.prediction.ops_per_s,
                "best_over_greedy_measured": best.measured_ops_per_s / greedy.measured_ops_per_s,
                "best_over_greedy_predicted":
                    best.sampled.prediction.ops_per_s / greedy.sampled.prediction.ops_per_s,
            }),
            _ => Json::Null,
        };
        json!({
            "space": space.name,
            "objects": self.workload.objects,
            "seconds": self.seconds,
            "workers": self.workers,
            "calibrated": self.calibrated,
            "calibrations": self.calibrations,
            "parameters_source": if self.calibrated { "cluster" } else { "defaults" },
            "parameters": self.params,
            "daemons": self.params.daemons,
            "measured_daemons": self.measured_daemons,
            "layouts": layouts,
            "mean_abs_relative_error": a.map(|a| a.mean_abs_relative_error),
            "kendall_tau_b": a.and_then(|a| a.kendall_tau_b),
            "predicted_best": a.map(|a| self.runs[a.predicted_best].description.clone()),
            "predicted_best_measured_rank": a.map(|a| a.predicted_best_measured_rank),
            "predicted_best_is_measured_best": a.map(|a| a.predicted_best_measured_rank == 1),
            "predicted_best_ties": a.map(|a| a.predicted_best_ties),
            "tied_best_measured_rank": a.map(|a| a.tied_best_measured_rank),
            // Whether the predicted best's min–max overlaps the measured
            // best's: the runs do not tell them apart.
            "predicted_best_overlaps_measured_best": self
                .chosen_and_fastest()
                .map(|(c, f)| c.spread.overlaps(&f.spread)),
            "greedy": greedy,
            "disturbed_layouts": self.runs.iter().filter(|r| r.disturbed()).count(),
            "failed_layouts": self.failed.iter().map(|f| json!({
                "description": f.description,
                "summary": f.sampled.layout.summary(space),
                "predicted_ops_per_s": f.sampled.prediction.ops_per_s,
                "errors": f.errors,
            })).collect::<Vec<_>>(),
            "runs": self.runs_per_layout,
            "sampling": self.sampling,
            "probe": self.probe.as_ref().map(|p| json!({
                "predicted_ops_per_s": p.predicted_ops_per_s,
                "rounds_ops_per_s": p.rounds_ops_per_s,
                "speed": p.speed(),
            })),
            "class_errors": self.class_errors().into_iter().map(|(kind, error, classes)| json!({
                "kind": kind,
                "mean_abs_relative_error": error,
                "classes": classes,
            })).collect::<Vec<_>>(),
            "mean_abs_relative_error_scaled": self.scaled_error(),
            "level": self.level(),
            "mean_abs_relative_error_around_level": self.error_around_level(),
            "mean_measured_spread": self.mean_spread(),
            "mean_abs_relative_error_per_round": self.per_round_error(),
            // The runs against themselves: the first, third … run of
            // each layout against its second, fourth …, compared as the
            // predictions are (what the machine lets a model reach).
            "halves": self.halves().map(|h| json!({
                "mean_abs_relative_error": h.mean_abs_relative_error,
                "kendall_tau_b": h.kendall_tau_b,
                "same_best": h.predicted_best_measured_rank == 1,
            })),
            // What the runs tell apart, round by round (a signed-rank
            // test at 5 %), and how the predictions order it.
            "paired": self.paired().map(|p| json!({
                "pairs": p.pairs,
                "apart": p.apart,
                "ordered_alike": p.ordered_alike,
                "ordered_against": p.ordered_against,
                "faster_than_predicted_best": p.faster_than_predicted_best,
            })),
        })
    }

    /// [`class_errors`] over every layout's classes alone.
    pub fn class_errors(&self) -> Vec<(&'static str, f64, usize)> {
        let all: Vec<ClassAlone> = self.runs.iter().flat_map(|r| r.classes.clone()).collect();
        class_errors(&all)
    }

    /// What the runs tell apart round by round, and how the predictions
    /// order it ([`tessera_advisor::validate::paired`]).
    pub fn paired(&self) -> Option<Paired> {
        let runs: Vec<Vec<(usize, f64)>> = self
            .runs
            .iter()
            .map(|r| {
                r.runs_rounds
                    .iter()
                    .copied()
                    .zip(r.runs_ops_per_s.iter().copied())
                    .collect()
            })
            .collect();
        let (predicted, _) = self.predicted_and_measured();
        tessera_advisor::validate::paired(&predicted, &runs)
    }

    /// The probe's median speed (measured ÷ predicted gets).
    pub fn speed(&self) -> Option<f64> {
        self.probe.as_ref().and_then(Probe::speed)
    }

    /// The mean absolute relative error with every prediction scaled by
    /// the probe's speed.
    pub fn scaled_error(&self) -> Option<f64> {
        let (predicted, measured) = self.predicted_and_measured();
        scaled_mean_abs_error(&predicted, &measured, self.speed()?)
    }

    /// The predictions' level ([`tessera_advisor::validate::level`]): the
    /// geometric mean of predicted ÷ measured over the layouts.
    pub fn level(&self) -> Option<f64> {
        let (predicted, measured) = self.predicted_and_measured();
        tessera_advisor::validate::level(&predicted, &measured)
    }

    /// The mean absolute relative error with every prediction divided by
    /// the [`level`](Self::level): how well the model placed the layouts
    /// against each other, whatever the machine's speed that hour.
    pub fn error_around_level(&self) -> Option<f64> {
        let (predicted, measured) = self.predicted_and_measured();
        scaled_mean_abs_error(&predicted, &measured, 1.0 / self.level()?)
    }

    /// The mean over the layouts of their runs' (max − min) / median: how
    /// far apart one layout's runs measured, beside the errors.
    pub fn mean_spread(&self) -> f64 {
        self.runs.iter().map(|r| r.spread.relative()).sum::<f64>() / self.runs.len().max(1) as f64
    }

    fn predicted_and_measured(&self) -> (Vec<f64>, Vec<f64>) {
        self.runs
            .iter()
            .map(|r| (r.sampled.prediction.ops_per_s, r.measured_ops_per_s))
            .unzip()
    }

    /// The runs against themselves
    /// ([`tessera_advisor::validate::halves_agreement`]): each layout's
    /// alternate runs as two measurements, compared as predictions are.
    /// `None` with fewer than two runs of some layout.
    pub fn halves(&self) -> Option<Agreement> {
        let runs: Vec<Vec<f64>> = self.runs.iter().map(|r| r.runs_ops_per_s.clone()).collect();
        tessera_advisor::validate::halves_agreement(&runs)
    }

    /// The mean absolute relative error against each layout's
    /// [`LayoutRun::at_calibration_ops_per_s`]; `None` unless every
    /// layout has one.
    pub fn per_round_error(&self) -> Option<f64> {
        let at: Option<Vec<f64>> = self
            .runs
            .iter()
            .map(|r| r.at_calibration_ops_per_s)
            .collect();
        let (predicted, _) = self.predicted_and_measured();
        scaled_mean_abs_error(&predicted, &at?, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_measures_every_layout_once_from_a_different_start() {
        for layouts in 0..12 {
            for runs in 1..6 {
                let rounds: Vec<Vec<usize>> = (1..=runs)
                    .map(|round| round_order(layouts, round, runs))
                    .collect();
                for order in &rounds {
                    let mut sorted = order.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..layouts).collect::<Vec<_>>());
                    // Consecutive, wrapping around: the same neighbours.
                    for w in order.windows(2) {
                        assert_eq!(w[1], (w[0] + 1) % layouts);
                    }
                }
                if layouts == 0 {
                    continue;
                }
                // One round keeps the listed order.
                assert_eq!(rounds[0][0], 0);
                // With at least as many layouts as rounds, no layout runs
                // at the same place twice, the first place included.
                if layouts >= runs {
                    for layout in 0..layouts {
                        let mut places: Vec<usize> = rounds
                            .iter()
                            .map(|o| o.iter().position(|&l| l == layout).unwrap())
                            .collect();
                        places.sort_unstable();
                        places.dedup();
                        assert_eq!(places.len(), runs, "{layouts} layouts, {runs} runs");
                    }
                }
            }
        }
    }

    #[test]
    fn the_probe_speed_scales_every_prediction() {
        let probe = Probe {
            predicted_ops_per_s: 100_000.0,
            rounds_ops_per_s: vec![80_000.0, 90_000.0, 70_000.0],
        };
        // The median round, 80,000 of 100,000 predicted.
        assert!((probe.speed().unwrap() - 0.8).abs() < 1e-12);
        // Predictions 25 % and 50 % above two measurements; scaled by
        // 0.8 they are on the first and 20 % above the second.
        let e = scaled_mean_abs_error(&[1250.0, 3000.0], &[1000.0, 2000.0], 0.8).unwrap();
        assert!((e - 0.1).abs() < 1e-12, "{e}");
        assert_eq!(scaled_mean_abs_error(&[], &[], 1.0), None);
        assert_eq!(scaled_mean_abs_error(&[1.0], &[1.0, 2.0], 1.0), None);
        let none = Probe {
            predicted_ops_per_s: 100_000.0,
            rounds_ops_per_s: Vec::new(),
        };
        assert_eq!(none.speed(), None);
    }

    #[test]
    fn only_a_change_of_routing_disturbs_a_run() {
        use tessera_types::{DaemonId, DaemonInfo, DaemonState};
        let mut before = Configuration {
            epoch: Epoch(7),
            ..Configuration::default()
        };
        before.daemons.insert(
            DaemonId(1),
            DaemonInfo {
                id: DaemonId(1),
                addr: "127.0.0.1:1".into(),
                state: DaemonState::Available,
                metrics: None,
            },
        );
        assert!(!disturbs(&before, &before));
        let mut horizon = before.clone();
        horizon.epoch = Epoch(8);
        horizon.tombstone_horizon = Epoch(6);
        assert!(!disturbs(&before, &horizon));
        let mut offline = horizon.clone();
        offline.daemons.get_mut(&DaemonId(1)).unwrap().state = DaemonState::Offline;
        assert!(disturbs(&before, &offline));
    }

    #[test]
    fn each_run_is_scaled_by_its_own_rounds_speed() {
        // A machine fast in round 2 (1.2) and slow in round 3 (0.8): the
        // runs, scaled one by one, agree (10,000 each).
        let rates = [10_000.0, 12_000.0, 8_000.0];
        let speeds = [Some(1.0), Some(1.2), Some(0.8)];
        let at = at_calibration(&rates, &speeds).unwrap();
        assert!((at - 10_000.0).abs() < 1e-9, "{at}");
        // A round without a probe is left out; none at all: no figure.
        let at = at_calibration(&rates, &[None, Some(1.2), Some(0.8)]).unwrap();
        assert!((at - 10_000.0).abs() < 1e-9, "{at}");
        assert_eq!(at_calibration(&rates, &[None, None, Some(0.0)]), None);
        assert_eq!(
            at_calibration(&rates, &[Some(f64::INFINITY), Some(f64::NAN), None]),
            None
        );
    }

    fn workload(text: &str) -> Workload {
        parse_workload(text, None).expect("the workload parses")
    }

    #[test]
    fn class_errors_average_by_kind_and_leave_out_what_was_not_measured() {
        let c = |kind, predicted_ops_per_s, measured_ops_per_s| ClassAlone {
            kind,
            predicted_ops_per_s,
            measured_ops_per_s,
            objects: 1000,
        };
        let classes = [
            c("search", 110.0, Some(100.0)),
            c("search", 70.0, Some(100.0)),
            c("modify", 50.0, Some(40.0)),
            c("get", 10.0, None),
        ];
        let got = class_errors(&classes);
        let want = [
            ("search", 0.2, 2),
            ("modify", 0.25, 1),
            ("all", 0.65 / 3.0, 3),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((k, e, n), (wk, we, wn)) in got.iter().zip(want) {
            assert_eq!((*k, *n), (wk, wn));
            assert!((e - we).abs() < 1e-12, "{k}: {e} against {we}");
        }
        assert!(class_errors(&[c("get", 1.0, None)]).is_empty());
    }

    #[test]
    fn the_machine_cpu_is_read_from_the_first_line_of_proc_stat() {
        let before = MachineCpu::parse(
            "cpu  100 2 30 500 7 0 4 3 0 0\ncpu0 50 1 15 250 3 0 2 1 0 0\nintr 1",
        )
        .unwrap();
        let after = MachineCpu::parse("cpu  250 2 80 550 7 0 14 13 0 0\n").unwrap();
        let d = after.since(before);
        // user +150, system +50, softirq +10 ticks busy; idle +50, steal +10.
        assert!((d.busy_s - 2.10).abs() < 1e-9, "{d:?}");
        assert!((d.total_s - 2.70).abs() < 1e-9, "{d:?}");
        assert!((d.busy().unwrap() - 2.10 / 2.70).abs() < 1e-9);
        assert_eq!(MachineCpu::parse("intr 1\n"), None);
        assert_eq!(MachineCpu::parse("cpu  1 x 3\n"), None);
        assert_eq!(MachineCpu::default().busy(), None);
    }

    #[test]
    fn class_and_seed_pack_into_one_number() {
        let n = pack(7, 0x3_1234_5678);
        assert_eq!(unpack(n), (7, 0x3_1234_5678));
        assert!(n <= i64::MAX as u64);
    }

    #[test]
    fn ints_spread_over_the_axis_in_order() {
        let a = Attr {
            name: "price".into(),
            int: true,
            values: 4,
        };
        let v: Vec<i64> = (0..4)
            .map(|j| match a.value(j) {
                Value::Int(i) => i,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
        // One per quarter of the axis: the first below −2^62, the last
        // above 2^62.
        assert!(v[0] < -(1 << 62) && v[3] > 1 << 62, "{v:?}");
    }

    #[test]
    fn the_mix_draws_classes_by_probability_and_refuses_what_it_cannot_load() {
        let text = r#"{"space": "space h key id attributes string city, int price",
            "objects": 100, "distinct": {"city": 10},
            "classes": [{"p": 0.25, "search": {"city": "eq"}},
                        {"p": 0.25, "search": {"price": "range"}},
                        {"p": 0.5, "modify": ["price"]}]}"#;
        let mix = Mix::new(&workload(text), 0.01).unwrap();
        assert_eq!(mix.attrs[0].values, 10);
        assert_eq!(mix.attrs[1].values, 100);
        assert_eq!(
            [0.0, 0.2, 0.3, 0.6, 0.99].map(|u| mix.class_of(u)),
            [0, 0, 1, 2, 2]
        );
        let record = mix.record(3);
        assert_eq!(record.len(), 2);
        let bad = r#"{"space": "space h key id attributes string city, float x",
            "objects": 100, "classes": [{"p": 1, "get": true}]}"#;
        assert!(Mix::new(&workload(bad), 0.01).is_err());
        let regex = r#"{"space": "space h key id attributes string city",
            "objects": 100, "classes": [{"p": 1, "search": {"city": "regex"}}]}"#;
        assert!(Mix::new(&workload(regex), 0.01).is_err());
    }
}
