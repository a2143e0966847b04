//! The measurements of `tessera calibrate`: short closed-loop runs of gets,
//! puts, inserts, equality searches and int-range searches on scratch
//! spaces of known layouts, each
//! reduced to seconds of cluster work per operation and described in the
//! advisor model's terms ([`tessera_advisor::calibrate::Measured`]). The
//! fit itself is pure and lives in the advisor.
//!
//! Scratch spaces are named [`SCRATCH_PREFIX`]`…`; a run refuses to start
//! when one exists (another run, or one interrupted) and removes the ones
//! it created however it ends. Every step is bounded by `seconds` and an
//! operation budget; loading by [`LOAD_LIMIT`].

use crate::driver::{run_phase, BoxFuture, Load, Outcome, PhaseResult, Store};
use crate::global_index::{mix as hash, wait_parts};
use crate::scenarios::{wait_space, FnSource};
use crate::workload::Op;
use anyhow::Context;
use rand::Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_advisor::calibrate::{Measured, Measurement};
use tessera_advisor::validate::median_position;
use tessera_client::{Admin, Client, PredOp, Value};
use tessera_types::region::{grid_for_partitions, uniform_splits};
use tessera_types::DaemonState;

/// Every scratch space's name starts with this.
pub const SCRATCH_PREFIX: &str = "tessera_calibrate_";

/// Operations in flight by default, in calibration and in `bench
/// layouts` alike: the model prices a saturated cluster. At 16 in flight
/// cheap operations left a 2-core machine up to a tenth idle and cost
/// more CPU each than at 128 (fewer requests answered per wake-up),
/// while scans kept it busy either way (`docs/design/advisor.md`,
/// "Operations in flight").
pub const SATURATING_WORKERS: usize = 128;
/// How long loading one scratch space may take.
pub const LOAD_LIMIT: Duration = Duration::from_secs(60);
/// A step fails when more than one operation in this many fails.
pub const STEP_ERRORS_MAX: u64 = 50;
/// Loading fails when more than one insert in this many fails.
pub(crate) const LOAD_ERRORS_MAX: u64 = 20;
/// Distinct values of `d`, the attribute searches scan for: a present
/// value matches about objects / 4.
const D_VALUES: u64 = 4;
/// Objects per distinct value of `a` and `c`; `b` has one value per
/// loaded object, so that a search on it reads exactly one object.
const MATCHES: u64 = 10;

/// How many times the first space's objects the larger space holds.
const LARGER: u64 = 10;
/// How many times the first space's objects, in its layout, a padding
/// space stores beside it while three of its searches run again: the
/// daemons then store four times the rows, none of the padding read
/// (`Measured::Stored`).
const PADDING: u64 = 3;
/// The first space's searches run again beside the padding: one region
/// walked for ten objects, one for one, every region walked.
const PADDED_SEARCHES: [&str; 3] = ["a", "b", "c"];
/// The widths of the range steps on `e`, as shares of one interval of its
/// subspace: two lengths of walk, so that the per-entry cost of a range
/// walk and its per-search cost can be told apart; both below one
/// interval, so that every region met walks its index (a region the range
/// covers whole would be scanned instead, `choose_access`).
const RANGE_SHARES: [f64; 2] = [0.2, 0.9];

/// The shares of searches in the calibration's mixes of searches and
/// puts: two, so that the fit sees the term grow with the writes.
const MIX_SEARCH_SHARES: [f64; 2] = [0.9, 0.5];

/// The shares of e's axis the range lookups through its global index
/// cover: with 1000 objects, about 20 and 100 matches.
const GLOBAL_RANGES: [f64; 2] = [0.02, 0.1];
/// Objects in the speed probe's space: few, so that loading it is quick
/// and its gets hit memory.
const PROBE_OBJECTS: u64 = 1000;
/// The salt of `e`'s values (`hash(n, E_SALT)`), spread over the whole
/// axis.
const E_SALT: usize = 5;

/// The int whose coordinate is `c` (`types::coordinate::int_coordinate`
/// inverted): ints keep their order in coordinates, so a value spread over
/// the coordinate axis is spread over the regions of an int dimension.
pub(crate) fn int_at(c: u64) -> i64 {
    (c ^ (1 << 63)) as i64
}

/// The bounds `[low, high)` of a range over a `fraction` of an int axis,
/// placed by `draw` anywhere on it.
pub(crate) fn int_range(fraction: f64, draw: u64) -> (PredOp, PredOp) {
    let width = (fraction.clamp(0.0, 1.0) * u64::MAX as f64) as u64;
    let room = u64::MAX - width;
    let low = if room == 0 { 0 } else { draw % room };
    (
        PredOp::Ge(Value::Int(int_at(low))),
        PredOp::Lt(Value::Int(int_at(low + width))),
    )
}

/// The shape of a calibration run.
#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    /// Seconds per measured step.
    pub seconds: f64,
    /// Operations in flight.
    pub workers: usize,
    /// Objects loaded into the space searches run on.
    pub objects: u64,
    /// Objects loaded into each of the other spaces (the puts' targets).
    pub put_objects: u64,
    /// Partitions of every scratch space.
    pub partitions: u32,
    /// Times every step is measured: the whole sequence again, on new
    /// scratch spaces; each step's median is fitted.
    pub runs: usize,
    /// Seconds of the speed probe (gets on a small key-only space) run
    /// before every step and after each space's last; 0: no probe, and
    /// costs are fitted as measured.
    pub probe_seconds: f64,
}

/// At most this many `runs`.
pub const RUNS_MAX: usize = 20;

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            seconds: 3.0,
            workers: SATURATING_WORKERS,
            objects: 4000,
            put_objects: 1000,
            partitions: 16,
            runs: 1,
            probe_seconds: 0.5,
        }
    }
}

/// One measured step, as run.
#[derive(Clone, Debug)]
pub struct Step {
    /// The measurement it gave.
    pub measurement: Measurement,
    /// Its phase, as the driver reports it.
    pub phase: PhaseResult,
    /// Operations that failed (at most 1 in [`STEP_ERRORS_MAX`]); the
    /// cost counts only the others.
    pub errors: u64,
    /// The step's cost in each run, in the order run, at the probe's
    /// reference speed (see [`scale_to_reference`]); `measurement` and
    /// `phase` are those of the median run.
    pub runs_s: Vec<f64>,
    /// The step's cost in each run as measured, before scaling.
    pub raw_runs_s: Vec<f64>,
    /// Per run, the probe's gets per second around the step (the mean of
    /// the probes just before and just after it), when both completed.
    pub probe_ops_per_s: Vec<Option<f64>>,
}

impl Step {
    /// This run's probe rate around the step, when one completed with a
    /// finite, positive rate (before [`median_steps`] gathers the runs,
    /// a step holds one run).
    fn probe_rate(&self) -> Option<f64> {
        self.probe_ops_per_s
            .first()
            .copied()
            .flatten()
            .filter(|r| r.is_finite() && *r > 0.0)
    }
}

/// What a calibration run measured.
#[derive(Clone, Debug)]
pub struct CalibrationRun {
    /// Every measured step.
    pub steps: Vec<Step>,
    /// Daemons available when it started.
    pub daemons: u32,
    /// The configuration's epoch when it started.
    pub epoch: u64,
    /// Objects in the space the searches ran on.
    pub objects: u64,
    /// The probe's median gets per second over every probe of the
    /// calibration: the speed every cost was scaled to (`None`: no probe
    /// completed, costs as measured).
    pub probe_reference_ops_per_s: Option<f64>,
    /// The slowest and fastest probe, as shares of the reference.
    pub probe_spread: Option<(f64, f64)>,
}

/// A step's operations: from the objects loaded and a random generator.
type StepSource = Box<dyn Fn(u64, &mut rand::rngs::StdRng) -> Op + Send + Sync>;

/// What one store operation does on its space.
#[derive(Clone, Debug)]
enum Action {
    /// Insert every attribute (`Op::Insert`, its `recno` picks the values).
    Insert,
    /// Get (`Op::Read`).
    Get,
    /// Put new values of these attributes (`Op::Update`).
    Put(Vec<&'static str>),
    /// Get the object, then put new values of these attributes
    /// (`Op::Update`): a modify.
    Modify(Vec<&'static str>),
    /// Equality on one attribute (`Op::SearchEq`): a `recno` below zero
    /// asks for a value no object has.
    Search(&'static str),
    /// Equality on the first attribute with a value some object has, and
    /// on the second with one no object has: the first's index is read,
    /// nothing is returned.
    SearchNone(&'static str, &'static str),
    /// A range over this fraction of `e`'s axis (`Op::SearchEq`, whose
    /// `recno` places it).
    Range(f64),
    /// The same range with equality on this attribute for a value no
    /// object has: every entry of the range is read, nothing returned.
    RangeNone(f64, &'static str),
    /// A range of `e` that covers exactly one of the first `n − 1` of its
    /// `n` intervals (`Op::SearchEq`'s `recno` picks which), with equality
    /// on this attribute for a value no object has: the interval's region
    /// is scanned (its index would not narrow it), nothing returned.
    IntervalNone(u32, &'static str),
    /// Equality on this attribute for `Op::SearchEq` (a value some object
    /// has), this action for every other operation: a mix.
    SearchOr(&'static str, Box<Action>),
}

/// The store every step runs through: one space, one action; it adds up
/// what searches return.
struct CalStore {
    client: Client,
    space: String,
    action: Action,
    /// Distinct values of `a` and `c`.
    values: u64,
    /// Distinct values of `b`: the objects loaded.
    unique: u64,
    results: AtomicU64,
    searches: AtomicU64,
}

fn attr_value(attr: &str, n: u64, values: u64, unique: u64) -> Value {
    if attr == "e" {
        // One value per object, spread over the int axis (as loaded).
        return Value::Int(int_at(hash(n % unique.max(1), E_SALT)));
    }
    let n = match attr {
        "d" => n % D_VALUES,
        "b" => n % unique.max(1),
        _ => n % values,
    };
    Value::str(&format!("{attr}{n}"))
}

impl CalStore {
    async fn run(&self, op: &Op) -> anyhow::Result<Outcome> {
        let search;
        let action = match (&self.action, op) {
            (Action::SearchOr(attr, _), Op::SearchEq { .. }) => {
                search = Action::Search(attr);
                &search
            }
            (Action::SearchOr(_, other), _) => other.as_ref(),
            (action, _) => action,
        };
        match (action, op) {
            (Action::Insert, Op::Insert { key, recno, .. }) => {
                let n = *recno as u64;
                let e = Value::Int(int_at(hash(n, E_SALT)));
                let attrs = ["a", "b", "c", "d"]
                    .map(|a| (a, attr_value(a, n, self.values, self.unique)))
                    .into_iter()
                    .chain([("e", e)]);
                self.client
                    .put(&self.space, Value::str(key), attrs)
                    .await?
                    .into_result()?;
                Ok(Outcome::Ok)
            }
            (Action::Get, Op::Read { key }) => {
                Ok(match self.client.get(&self.space, Value::str(key)).await? {
                    Some(_) => Outcome::Ok,
                    None => Outcome::NotFound,
                })
            }
            (Action::Modify(attrs), Op::Update { key, field, .. }) => {
                let found = self.client.get(&self.space, Value::str(key)).await?;
                self.put_values(key, attrs, *field as u64).await?;
                Ok(if found.is_some() {
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                })
            }
            (Action::Put(attrs), Op::Update { key, field, .. }) => {
                self.put_values(key, attrs, *field as u64).await?;
                Ok(Outcome::Ok)
            }
            (Action::Search(attr), Op::SearchEq { recno }) => {
                let value = if *recno < 0 {
                    Value::str(&format!("absent{recno}"))
                } else {
                    attr_value(attr, *recno as u64, self.values, self.unique)
                };
                self.search([(*attr, PredOp::Eq(value))]).await
            }
            (Action::SearchNone(attr, absent), Op::SearchEq { recno }) => {
                let value = attr_value(attr, *recno as u64, self.values, self.unique);
                let none = Value::str(&format!("absent{recno}"));
                self.search([(*attr, PredOp::Eq(value)), (*absent, PredOp::Eq(none))])
                    .await
            }
            (Action::Range(fraction), Op::SearchEq { recno }) => {
                let (low, high) = int_range(*fraction, hash(*recno as u64, E_SALT));
                self.search([("e", low), ("e", high)]).await
            }
            (Action::RangeNone(fraction, absent), Op::SearchEq { recno }) => {
                let (low, high) = int_range(*fraction, hash(*recno as u64, E_SALT));
                let none = Value::str(&format!("absent{recno}"));
                self.search([("e", low), ("e", high), (*absent, PredOp::Eq(none))])
                    .await
            }
            (Action::IntervalNone(n, absent), Op::SearchEq { recno }) => {
                let splits = uniform_splits(*n);
                anyhow::ensure!(!splits.is_empty(), "one interval: no region to scan alone");
                let i = (hash(*recno as u64, E_SALT) % splits.len() as u64) as usize;
                let low = if i == 0 { 0 } else { splits[i - 1] };
                let none = Value::str(&format!("absent{recno}"));
                self.search([
                    ("e", PredOp::Ge(Value::Int(int_at(low)))),
                    ("e", PredOp::Lt(Value::Int(int_at(splits[i])))),
                    (*absent, PredOp::Eq(none)),
                ])
                .await
            }
            (action, op) => anyhow::bail!("{action:?} cannot run {}", op.kind()),
        }
    }
}

impl CalStore {
    /// Puts new values of `attrs` (drawn from `n`) under `key`.
    async fn put_values(&self, key: &str, attrs: &[&'static str], n: u64) -> anyhow::Result<()> {
        let attrs = attrs
            .iter()
            .map(|&a| (a, attr_value(a, n, self.values, self.unique)));
        self.client
            .put(&self.space, Value::str(key), attrs)
            .await?
            .into_result()?;
        Ok(())
    }

    /// Runs one search and adds up what it returned.
    async fn search<const N: usize>(
        &self,
        predicates: [(&str, PredOp); N],
    ) -> anyhow::Result<Outcome> {
        let found = self.client.search(&self.space, predicates).await?;
        self.results
            .fetch_add(found.len() as u64, Ordering::Relaxed);
        self.searches.fetch_add(1, Ordering::Relaxed);
        Ok(if found.is_empty() {
            Outcome::NotFound
        } else {
            Outcome::Ok
        })
    }
}

impl Store for CalStore {
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

/// The scratch spaces one run measures, in order, and the daemons their
/// rows spread over.
struct Plan {
    spaces: Vec<Scratch>,
    daemons: u32,
}

/// A scratch space: its layout in the model's terms.
#[derive(Clone)]
struct Scratch {
    name: String,
    /// K = f + 1.
    copies: f64,
    /// Subspaces a, b and e and an index on c, or the key subspace only.
    subspaces: bool,
    /// A global index on e (in a space of the key subspace only), whose
    /// indexlets are as many as the space's partitions.
    global: bool,
    /// [`LARGER`] times the first space's objects, searched by equality
    /// only (`Measured::Larger`).
    larger: bool,
    /// The key subspace with an index on c alone, where only inserts run:
    /// a copy of one entry, beside the subspace spaces' copies of two
    /// and four (`indexed_create`).
    one_index: bool,
}

impl Scratch {
    fn description(&self, partitions: u32) -> String {
        let f = self.copies as u32 - 1;
        // `create` right after a global index clause is its indexlets'.
        format!(
            "space {} key k attributes string a, string b, string c, string d, int e {} \
             create {partitions} partitions tolerate {f} {}",
            self.name,
            if self.subspaces {
                "subspace a subspace b subspace e index c".to_string()
            } else if self.one_index {
                "index c".to_string()
            } else if self.global {
                format!("global index e create {partitions} partitions")
            } else {
                String::new()
            },
            if f == 1 { "failure" } else { "failures" }
        )
    }

    /// Rows each of `daemons` daemons stores for `objects` objects: a
    /// record per copy of every part, and an entry per replica of the
    /// global index, as the model counts a layout's.
    fn stored_rows(&self, objects: u64, daemons: u32) -> f64 {
        let global = if self.global { self.copies } else { 0.0 };
        let per_object = self.parts() * self.copies + global;
        tessera_advisor::model::stored_rows(objects as f64, per_object, daemons)
    }

    /// Parts, the key subspace included.
    fn parts(&self) -> f64 {
        if self.subspaces {
            4.0
        } else {
            1.0
        }
    }

    /// Entries a region of subspace a, b or e holds per object: its own
    /// attribute's and c's.
    const SUBSPACE_ENTRIES: f64 = 2.0;

    /// Local index entries one copy of an object writes over the parts,
    /// a region of each part indexing its own attributes and the `index`
    /// clauses', the key subspace's every indexed attribute
    /// (`daemon::index::indexed_attrs`): 4 (a, b, c, e) + 3 × 2 with the
    /// subspaces, 1 (c) with the index alone, else none.
    fn region_entries(&self) -> f64 {
        if self.subspaces {
            4.0 + 3.0 * Scratch::SUBSPACE_ENTRIES
        } else if self.one_index {
            1.0
        } else {
            0.0
        }
    }

    /// An insert of new keys (`k{objects}` on): a create on every copy,
    /// with its index entries.
    fn inserts(&self, objects: u64) -> (String, Measured, StepSource) {
        let copies = self.copies * self.parts();
        let entries = self.copies * self.region_entries();
        let kind = Measured::Insert {
            copies,
            entries,
            indexed: if entries > 0.0 { copies } else { 0.0 },
        };
        let fresh = Arc::new(AtomicU64::new(objects));
        let source = Box::new(move |_: u64, _: &mut rand::rngs::StdRng| {
            let n = fresh.fetch_add(1, Ordering::Relaxed);
            Op::Insert {
                key: format!("k{n}"),
                recno: n as i64,
                fields: Arc::default(),
            }
        });
        (format!("insert on {}", self.name), kind, source)
    }
}

/// The spaces whose names start with `prefix`: scratch spaces another run
/// is using or left behind.
pub(crate) async fn existing_scratch(admin: &Admin, prefix: &str) -> anyhow::Result<Vec<String>> {
    Ok(admin
        .list_spaces()
        .await?
        .into_iter()
        .filter(|s| s.starts_with(prefix))
        .collect())
}

/// Creates the scratch space `name` from `description`. A request retried
/// after its first attempt went through (a busy machine, a coordinator
/// that answered late) finds the space: no other run can own it, the
/// prefix was free when this run began, so it is this run's.
pub(crate) async fn add_scratch(
    admin: &Admin,
    name: &str,
    description: &str,
) -> anyhow::Result<()> {
    if let Err(e) = admin.add_space(description).await {
        if !admin.list_spaces().await?.iter().any(|s| s == name) {
            return Err(e).with_context(|| format!("creating {description:?}"));
        }
    }
    Ok(())
}

/// Measures the cluster behind `admin` and `client`: see the module docs.
pub async fn measure(
    admin: &Admin,
    client: &Client,
    options: &CalibrateOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<CalibrationRun> {
    let config = admin.config().await?;
    let daemons = config
        .daemons
        .values()
        .filter(|d| d.state == DaemonState::Available)
        .count() as u32;
    anyhow::ensure!(daemons > 0, "no daemon is available to calibrate");
    let mut scratch = vec![
        Scratch {
            name: format!("{SCRATCH_PREFIX}sub_f0"),
            copies: 1.0,
            subspaces: true,
            global: false,
            larger: false,
            one_index: false,
        },
        // The first's layout, LARGER times its objects: what a walk costs
        // more as a space grows.
        Scratch {
            name: format!("{SCRATCH_PREFIX}larger_f0"),
            copies: 1.0,
            subspaces: true,
            global: false,
            larger: true,
            one_index: false,
        },
        Scratch {
            name: format!("{SCRATCH_PREFIX}key_f0"),
            copies: 1.0,
            subspaces: false,
            global: false,
            larger: false,
            one_index: false,
        },
        Scratch {
            name: format!("{SCRATCH_PREFIX}indexed_f0"),
            copies: 1.0,
            subspaces: false,
            global: false,
            larger: false,
            one_index: true,
        },
    ];
    if daemons > 1 {
        scratch.push(Scratch {
            name: format!("{SCRATCH_PREFIX}sub_f1"),
            copies: 2.0,
            subspaces: true,
            global: false,
            larger: false,
            one_index: false,
        });
        scratch.push(Scratch {
            name: format!("{SCRATCH_PREFIX}key_f1"),
            copies: 2.0,
            subspaces: false,
            global: false,
            larger: false,
            one_index: false,
        });
    }
    // Lookups and puts through a global index, and with two daemons or
    // more puts again at f = 1: two puts alone would fit g and μ exactly.
    for (copies, f) in [(1.0, "f0"), (2.0, "f1")] {
        if copies == 1.0 || daemons > 1 {
            scratch.push(Scratch {
                name: format!("{SCRATCH_PREFIX}global_{f}"),
                copies,
                subspaces: false,
                global: true,
                larger: false,
                one_index: false,
            });
        }
    }
    let existing = existing_scratch(admin, SCRATCH_PREFIX).await?;
    if !existing.is_empty() {
        anyhow::bail!(
            "scratch space(s) {} exist: another calibration is running, or one was \
             interrupted; if none runs, remove them with `tessera rm-space NAME`",
            existing.join(", ")
        );
    }
    anyhow::ensure!(
        (1..=RUNS_MAX).contains(&options.runs),
        "--runs must be 1 to {RUNS_MAX}"
    );
    let probe_name = format!("{SCRATCH_PREFIX}probe");
    let mut probe_created = false;
    let outcome = measure_rounds(
        admin,
        client,
        options,
        &Plan {
            spaces: scratch,
            daemons,
        },
        &probe_name,
        &mut probe_created,
        progress,
    )
    .await;
    if probe_created {
        let removed = admin.rm_space(&probe_name).await;
        if outcome.is_ok() {
            removed.with_context(|| format!("removing the scratch space {probe_name}"))?;
        }
    }
    let (mut rounds, objects) = outcome?;
    let (reference, spread) = match scale_to_reference(&mut rounds) {
        Some((reference, spread)) => (Some(reference), Some(spread)),
        None => (None, None),
    };
    Ok(CalibrationRun {
        steps: median_steps(rounds)?,
        daemons,
        epoch: config.epoch.0,
        objects,
        probe_reference_ops_per_s: reference,
        probe_spread: spread,
    })
}

/// Every run of the sequence, with the speed probe's space created (and
/// loaded) first when `options.probe_seconds` asks for one; the caller
/// removes it (`probe_created`).
async fn measure_rounds(
    admin: &Admin,
    client: &Client,
    options: &CalibrateOptions,
    plan: &Plan,
    probe_name: &str,
    probe_created: &mut bool,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<(Vec<Vec<Step>>, u64)> {
    let prober = if options.probe_seconds > 0.0 {
        let space = Scratch {
            name: probe_name.to_string(),
            copies: 1.0,
            subspaces: false,
            global: false,
            larger: false,
            one_index: false,
        };
        add_scratch(admin, probe_name, &space.description(options.partitions)).await?;
        *probe_created = true;
        wait_space(client, probe_name).await?;
        let store = Arc::new(CalStore::new(
            client,
            probe_name,
            Action::Insert,
            PROBE_OBJECTS,
        ));
        progress(&format!(
            "loading {PROBE_OBJECTS} objects into {probe_name} (the speed probe: {} s of gets \
             around every step)",
            options.probe_seconds
        ));
        let objects = load(store, probe_name, PROBE_OBJECTS, options.workers).await?;
        Some(Prober {
            store: Arc::new(CalStore::new(
                client,
                probe_name,
                Action::Get,
                PROBE_OBJECTS,
            )),
            objects,
            load: Load {
                workers: options.workers,
                operations: 10_000_000,
                time_limit: Duration::from_secs_f64(options.probe_seconds.min(60.0)),
            },
        })
    } else {
        None
    };
    let mut rounds: Vec<Vec<Step>> = Vec::new();
    let mut objects = 0;
    for round in 1..=options.runs {
        if options.runs > 1 {
            progress(&format!("run {round} of {}", options.runs));
        }
        let mut created = Vec::new();
        let outcome = measure_on(
            admin,
            client,
            options,
            plan,
            prober.as_ref(),
            &mut created,
            progress,
        )
        .await;
        let mut cleanup = Ok(());
        for name in created {
            if let Err(e) = admin.rm_space(&name).await {
                cleanup = Err(anyhow::anyhow!("removing the scratch space {name}: {e}"));
            }
        }
        let (steps, searched) = outcome?;
        cleanup?;
        objects = searched;
        rounds.push(steps);
    }
    Ok((rounds, objects))
}

/// The speed probe: gets on a small key-only space of its own, run just
/// before every step and after each space's last. A step's cost is scaled
/// by how fast the probe ran around it against the probe's median over
/// the whole calibration ([`scale_to_reference`]): this machine's slow and
/// fast minutes (every phase of a run 1.3–1.5× slower, `docs/BENCHMARKS.md`)
/// otherwise fall on some steps and not others, and the fit takes them
/// for costs. `bench layouts` scales its runs by the same kind of probe.
struct Prober {
    store: Arc<CalStore>,
    objects: u64,
    load: Load,
}

impl Prober {
    /// Gets per second over one probe; `None` when too many failed or
    /// none completed (the step beside it is then fitted as measured).
    async fn rate(&self) -> Option<f64> {
        let objects = self.objects.max(1);
        let phase = run_phase(self.store.clone(), "probe", self.load, |w| {
            FnSource::boxed(31 * (1 + w as u64), move |rng| Op::Read {
                key: format!("k{}", rng.gen_range(0..objects)),
            })
        })
        .await
        .ok()?;
        let errors = phase.errors();
        let done = phase.operations.saturating_sub(errors);
        (errors * STEP_ERRORS_MAX <= phase.operations && done > 0 && phase.seconds > 0.0)
            .then(|| done as f64 / phase.seconds)
    }
}

/// Scales every step's cost in every run to the probe's reference speed,
/// the median of the probe rates around all steps: a cost measured while
/// the probe ran at `p` gets/s becomes `cost · p / reference` (a slow
/// minute, `p` below the reference, measured a cost above what the
/// reference speed would have). Steps without a probe keep their cost.
/// Returns the reference and the slowest and fastest probe as shares of
/// it; `None` (nothing scaled) when no probe completed.
pub fn scale_to_reference(rounds: &mut [Vec<Step>]) -> Option<(f64, (f64, f64))> {
    let rates: Vec<f64> = rounds
        .iter()
        .flatten()
        .filter_map(Step::probe_rate)
        .collect();
    let reference = rates[median_position(&rates)?];
    let (mut low, mut high) = (f64::INFINITY, 0.0f64);
    for step in rounds.iter_mut().flatten() {
        if let Some(rate) = step.probe_rate() {
            let speed = rate / reference;
            low = low.min(speed);
            high = high.max(speed);
            step.measurement.cost_s *= speed;
        }
    }
    Some((reference, (low, high)))
}

/// Each step's median run (the lower of the two middle ones for an even
/// count), with every run's cost. Every run measures the same steps in
/// the same order.
fn median_steps(rounds: Vec<Vec<Step>>) -> anyhow::Result<Vec<Step>> {
    let count = rounds.first().map_or(0, Vec::len);
    anyhow::ensure!(
        rounds.iter().all(|r| r.len() == count),
        "the runs measured different steps"
    );
    let mut per_step: Vec<Vec<Step>> = (0..count).map(|_| Vec::new()).collect();
    for round in rounds {
        for (i, step) in round.into_iter().enumerate() {
            per_step[i].push(step);
        }
    }
    Ok(per_step
        .into_iter()
        .filter_map(|mut runs| {
            let costs: Vec<f64> = runs.iter().map(|s| s.measurement.cost_s).collect();
            let raw: Vec<f64> = runs
                .iter()
                .map(|s| {
                    s.raw_runs_s
                        .first()
                        .copied()
                        .unwrap_or(s.measurement.cost_s)
                })
                .collect();
            let probes: Vec<Option<f64>> = runs.iter().map(Step::probe_rate).collect();
            let mut step = runs.swap_remove(median_position(&costs)?);
            step.runs_s = costs;
            step.raw_runs_s = raw;
            step.probe_ops_per_s = probes;
            Some(step)
        })
        .collect())
}

async fn measure_on(
    admin: &Admin,
    client: &Client,
    options: &CalibrateOptions,
    plan: &Plan,
    prober: Option<&Prober>,
    created: &mut Vec<String>,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<(Vec<Step>, u64)> {
    let limit = Duration::from_secs_f64(options.seconds.max(0.1));
    let step_load = |seconds: Duration| Load {
        workers: options.workers,
        // A budget no step on this machine reaches in its time.
        operations: 10_000_000,
        time_limit: seconds,
    };
    let intervals = f64::from(grid_for_partitions(options.partitions, 1)[0]);
    let moves = 1.0 - 1.0 / intervals;
    let mut steps = Vec::new();
    let mut searched_objects = 0;
    let daemons = plan.daemons;
    for (i, space) in plan.spaces.iter().enumerate() {
        let description = space.description(options.partitions);
        add_scratch(admin, &space.name, &description).await?;
        created.push(space.name.clone());
        wait_space(client, &space.name).await?;
        if space.global {
            wait_parts(admin, &space.name, "the global index", |parts| {
                parts.iter().all(|&(_, ready, _)| ready)
            })
            .await?;
        }
        let objects = if i == 0 {
            options.objects
        } else if space.larger {
            options.objects.saturating_mul(LARGER)
        } else {
            options.put_objects
        }
        .max(MATCHES);
        let values = (objects / MATCHES).max(1);
        let store = |action: Action| Arc::new(CalStore::new(client, &space.name, action, objects));
        progress(&format!("loading {objects} objects into {}", space.name));
        let objects = load(store(Action::Insert), &space.name, objects, options.workers).await?;
        // The rows the daemons store while a step runs: this space's,
        // and a padding space's while one is loaded beside it.
        let stored_rows = std::cell::Cell::new(space.stored_rows(objects, daemons));
        // The first step of this space: the probes before each of its
        // steps and after its last are paired up below.
        let first = steps.len();
        let k = space.copies;
        // A search no part narrows contacts every region of one part; every
        // part here has the regions of a one-dimensional grid.
        let regions = intervals;
        let run = async |label: String,
                         action: Action,
                         kind: Measured,
                         source: StepSource|
               -> anyhow::Result<Step> {
            progress(&format!("{label} ({:.1} s)", limit.as_secs_f64()));
            let probe = match prober {
                Some(prober) => prober.rate().await,
                None => None,
            };
            let store = store(action);
            let source = Arc::new(source);
            let phase = run_phase(store.clone(), &label, step_load(limit), |w| {
                let source = source.clone();
                let seed = 1 + w as u64;
                FnSource::boxed(seed * 7919, move |rng| source(objects, rng))
            })
            .await?;
            let errors = phase.errors();
            if errors * STEP_ERRORS_MAX > phase.operations.max(1) {
                anyhow::bail!(
                    "{label}: {errors} of {} operations failed ({})",
                    phase.operations,
                    phase.first_error.clone().unwrap_or_default()
                );
            }
            let done = phase.operations - errors;
            anyhow::ensure!(
                done > 0 && phase.seconds > 0.0,
                "{label}: no operation completed in {limit:?}"
            );
            let kind = counted(kind, &store);
            let cost_s = phase.seconds / done as f64;
            Ok(Step {
                measurement: Measurement {
                    step: label,
                    kind,
                    cost_s,
                    stored_rows: stored_rows.get(),
                },
                errors,
                phase,
                runs_s: vec![cost_s],
                raw_runs_s: vec![cost_s],
                // The probe before it, for now; paired with the one after
                // it once the space's steps are done.
                probe_ops_per_s: vec![probe],
            })
        };
        let existing = |objects: u64, rng: &mut rand::rngs::StdRng| -> String {
            format!("k{}", rng.gen_range(0..objects.max(1)))
        };
        let name = &space.name;
        if i == 0 {
            searched_objects = objects;
            let o = objects as f64;
            let m = |n: u64| o / n as f64;
            // (attribute, a value some object has, regions met, objects
            // examined, whether read through an index; a walk through an
            // index answers the one check, so the daemons answer those
            // pages at once, and scans go to a blocking thread)
            for (attr, present, regions, examined, indexed) in [
                ("a", false, 1.0, 0.0, true),
                ("a", true, 1.0, m(values), true),
                ("b", true, 1.0, 1.0, true),
                ("c", false, regions, 0.0, true),
                ("c", true, regions, m(values), true),
                ("d", false, regions, o, false),
                ("d", true, regions, o, false),
            ] {
                let label = format!(
                    "search {attr} {} on {name}",
                    if present { "present" } else { "absent" }
                );
                let kind = Measured::Search {
                    regions,
                    examined,
                    range: false,
                    range_entries: 0.0,
                    results: 0.0,
                    index_reads: if indexed { examined } else { 0.0 },
                    handed_off: if indexed { 0.0 } else { regions },
                };
                let source = Box::new(move |_: u64, rng: &mut rand::rngs::StdRng| {
                    let n = rng.gen_range(0..i64::MAX / 2);
                    Op::SearchEq {
                        recno: if present { n } else { -1 - n },
                    }
                });
                steps.push(run(label, Action::Search(attr), kind, source).await?);
            }
            // One object read through b's index, none returned: what a
            // read costs apart from returning it. d is left to check
            // object by object, and the walk's one load is well within
            // what the daemon reads where the request arrives
            // (`INLINE_LOADS`): answered at once.
            let label = format!("search b present, d absent on {name}");
            let kind = Measured::Search {
                regions: 1.0,
                examined: 1.0,
                range: false,
                range_entries: 0.0,
                results: 0.0,
                index_reads: 1.0,
                handed_off: 0.0,
            };
            steps.push(run(label, Action::SearchNone("b", "d"), kind, searches()).await?);
            // Ranges on e, whose subspace has one-dimensional regions: a
            // range of φ meets 1 + φ(n − 1) of them. Each width runs twice:
            // returning what it walks (its entries, counted by `run`), then
            // with d left to check object by object for a value none has,
            // the same entries read and none returned (so a walked entry's
            // read, β_r, is told from returning its object, γ). The
            // narrower loads tens of objects a region, answered where the
            // request arrives; the wider loads more than the daemon reads
            // there, so its pages are handed to a page thread and read
            // again (`INLINE_LOADS`).
            for none in [false, true] {
                for share in RANGE_SHARES {
                    let fraction = share / intervals;
                    let (label, entries, action) = if none {
                        (
                            format!("search e range {fraction:.4}, d absent on {name}"),
                            fraction * o,
                            Action::RangeNone(fraction, "d"),
                        )
                    } else {
                        (
                            format!("search e range {fraction:.4} on {name}"),
                            0.0,
                            Action::Range(fraction),
                        )
                    };
                    let kind = Measured::range_walk(fraction, intervals, entries, !none);
                    steps.push(run(label, action, kind, searches()).await?);
                }
            }
            // One region scanned: a range of e covering one interval of e's
            // subspace exactly, which its region's e index does not narrow
            // (`choose_access` scans a region whose cell the checks cover
            // whole), with d absent: ~O/n records stepped over, none
            // returned, in one page handed to a page thread. Beside the
            // scans of every region (n pages, O records), it tells what a
            // search handing off any page pays once (u₁) from what each
            // page handed off costs (u).
            let label = format!("search e over one interval, d absent on {name}");
            let kind = Measured::Search {
                regions: 1.0,
                examined: o / intervals,
                range: false,
                range_entries: 0.0,
                results: 0.0,
                index_reads: 0.0,
                handed_off: 1.0,
            };
            let action = Action::IntervalNone(intervals as u32, "d");
            steps.push(run(label, action, kind, searches()).await?);
            // Searches of a among puts of d (key, a and b overwritten in
            // place, no index entry), at two shares: what writes cost the
            // searches beside them. A process that has served much more
            // than it holds measured such mixes below their parts, each
            // kind alone at its speed (`writes_beside_s`).
            let search_a = measured_a(&steps, name)?;
            let put_d = Measured::Put {
                copies: space.copies,
                unchanged: space.parts() - 1.0,
                moved: vec![],
                entries: 0.0,
                global: vec![],
            };
            for searches in MIX_SEARCH_SHARES {
                let label = format!("mix {searches} of search a present and put d on {name}");
                let mix = Measured::Mix(vec![
                    (searches, search_a.clone()),
                    (1.0 - searches, put_d.clone()),
                ]);
                let source = Box::new(move |objects: u64, rng: &mut rand::rngs::StdRng| {
                    if rng.gen_bool(searches) {
                        search(rng)
                    } else {
                        update(objects, rng)
                    }
                });
                let action = Action::SearchOr("a", Box::new(Action::Put(vec!["d"])));
                steps.push(run(label, action, mix, source).await?);
            }
            // Three of the searches again, each right before and then
            // beside a padding space of this layout and PADDING times its
            // objects, none of it read: what rows stored cost every
            // operation (κ). Measured against themselves just before the
            // padding rather than against the steps above, which ran on a
            // younger space (session 56 found those steps slower than the
            // same searches a minute later, whatever the padding). The
            // padding is removed before this space's writes.
            let pad = Scratch {
                name: format!("{SCRATCH_PREFIX}pad_f0"),
                ..space.clone()
            };
            let source = || -> StepSource {
                Box::new(move |_: u64, rng: &mut rand::rngs::StdRng| Op::SearchEq {
                    recno: rng.gen_range(0..i64::MAX / 2),
                })
            };
            let mut bases = Vec::new();
            for attr in PADDED_SEARCHES {
                let first = format!("search {attr} present on {name}");
                let measured = steps
                    .iter()
                    .find(|s| s.measurement.step == first)
                    .map(|s| s.measurement.kind.clone())
                    .ok_or_else(|| anyhow::anyhow!("no step {first:?} to run again"))?;
                let label = format!("{first}, before {}", pad.name);
                let step = run(label.clone(), Action::Search(attr), measured, source()).await?;
                bases.push((attr, label, step.measurement.kind.clone()));
                steps.push(step);
            }
            add_scratch(admin, &pad.name, &pad.description(options.partitions)).await?;
            created.push(pad.name.clone());
            wait_space(client, &pad.name).await?;
            let padding = objects.saturating_mul(PADDING);
            progress(&format!("loading {padding} objects into {}", pad.name));
            let pad_store = Arc::new(CalStore::new(client, &pad.name, Action::Insert, padding));
            let padding = load(pad_store, &pad.name, padding, options.workers).await?;
            let alone = stored_rows.get();
            stored_rows.set(alone + pad.stored_rows(padding, daemons));
            for (attr, base, measured) in bases {
                let label = format!("search {attr} present on {name}, {} beside", pad.name);
                let kind = Measured::Stored {
                    base,
                    measured: Box::new(measured),
                };
                steps.push(run(label, Action::Search(attr), kind, source()).await?);
            }
            stored_rows.set(alone);
            admin.rm_space(&pad.name).await?;
            created.retain(|c| c != &pad.name);
        }
        if space.larger {
            // The first space's searches of a (MATCHES objects) and b (one),
            // each read through its index in one region, on LARGER times
            // its objects: `values` grows with the objects, so the matches
            // stay as many.
            let reference = searched_objects as f64;
            for (attr, examined) in [("a", MATCHES as f64), ("b", 1.0)] {
                let label = format!("search {attr} present on {name}");
                let kind = Measured::Larger {
                    objects: objects as f64,
                    reference,
                    search: Box::new(Measured::Search {
                        regions: 1.0,
                        examined,
                        range: false,
                        range_entries: 0.0,
                        results: 0.0,
                        index_reads: examined,
                        handed_off: 0.0,
                    }),
                };
                steps.push(run(label, Action::Search(attr), kind, searches()).await?);
            }
            done_with(admin, prober, &mut steps[first..], name, created).await?;
            continue;
        }
        if space.global {
            let indexlets = f64::from(options.partitions.max(1));
            // The lookups once, on the first of these spaces.
            let lookups = !steps
                .iter()
                .any(|s: &Step| matches!(s.measurement.kind, Measured::Lookup { .. }));
            steps.extend(global_steps(client, name, k, indexlets, lookups, &run).await?);
            done_with(admin, prober, &mut steps[first..], name, created).await?;
            continue;
        }
        if space.one_index {
            let (label, kind, source) = space.inserts(objects);
            steps.push(run(label, Action::Insert, kind, source).await?);
            done_with(admin, prober, &mut steps[first..], name, created).await?;
            continue;
        }
        if !space.subspaces {
            let source = Box::new(move |objects: u64, rng: &mut rand::rngs::StdRng| Op::Read {
                key: existing(objects, rng),
            });
            steps.push(run(format!("get on {name}"), Action::Get, Measured::Get, source).await?);
        }
        let parts = space.parts();
        let subspaces = parts - 1.0;
        let mut puts: Vec<(Vec<&'static str>, Measured)> = vec![(
            vec!["d"],
            Measured::Put {
                copies: k,
                unchanged: subspaces,
                moved: vec![],
                entries: 0.0,
                global: vec![],
            },
        )];
        if space.subspaces {
            puts.push((
                vec!["c"],
                Measured::Put {
                    copies: k,
                    unchanged: subspaces,
                    moved: vec![],
                    entries: k * parts,
                    global: vec![],
                },
            ));
            // Two relocating puts of one shape (a, then b): α rests on the
            // puts that move objects, whose runs are the noisiest. A put of
            // a rewrites a's entry in the key subspace's regions; in
            // subspace a's, which index a and c, one entry where the
            // object stays and both where it moves (removed from the old
            // region, put in the new); none in b's and e's, which do not
            // index a (`Scratch::region_entries`).
            let moved_entries = (1.0 - moves) + moves * Scratch::SUBSPACE_ENTRIES;
            for attr in ["a", "b"] {
                puts.push((
                    vec![attr],
                    Measured::Put {
                        copies: k,
                        unchanged: subspaces - 1.0,
                        moved: vec![moves],
                        entries: k * (1.0 + moved_entries),
                        global: vec![],
                    },
                ));
            }
            puts.push((
                vec!["a", "b"],
                Measured::Put {
                    copies: k,
                    unchanged: subspaces - 2.0,
                    moved: vec![moves, moves],
                    entries: 2.0 * k * (1.0 + moved_entries),
                    global: vec![],
                },
            ));
        }
        let put_d = puts[0].1.clone();
        for (attrs, kind) in puts {
            let label = format!("put {} on {name}", attrs.join(","));
            steps.push(run(label, Action::Put(attrs), kind, Box::new(update)).await?);
        }
        {
            // A modify of d: its get and its put are measured above.
            let kind = Measured::Modify(Box::new(put_d));
            let label = format!("modify d on {name}");
            steps.push(run(label, Action::Modify(vec!["d"]), kind, Box::new(update)).await?);
        }
        let (label, kind, source) = space.inserts(objects);
        steps.push(run(label, Action::Insert, kind, source).await?);
        done_with(admin, prober, &mut steps[first..], name, created).await?;
    }
    Ok((steps, searched_objects))
}

/// Lookups (when `lookups`), then puts, on a key-only space of K =
/// `copies` with a global index on `e` of `indexlets` indexlets: lookups
/// by equality (one indexlet, one
/// match) and over two widths of range (so that an indexlet met is told
/// from a match), run first, while every value of `e` is still the one
/// loaded; then puts of `d`, which leave the projection in its indexlet,
/// and of `e`, which move it to another with probability 1 − 1/n.
async fn global_steps<F>(
    client: &Client,
    name: &str,
    copies: f64,
    indexlets: f64,
    lookups: bool,
    run: &F,
) -> anyhow::Result<Vec<Step>>
where
    F: AsyncFn(String, Action, Measured, StepSource) -> anyhow::Result<Step>,
{
    // The planner must take the index, or the steps below measure a
    // subspace's plan and call it a lookup.
    let plan = client
        .search_describe(name, [("e", PredOp::Eq(attr_value("e", 0, 1, 1)))])
        .await?;
    anyhow::ensure!(
        plan.contains("uses global index"),
        "a search by e on {name} does not use its global index:\n{plan}"
    );
    let mut steps = Vec::new();
    if lookups {
        let kind = Measured::Lookup {
            indexlets: 1.0,
            matches: 0.0,
        };
        let label = format!("lookup e present on {name}");
        steps.push(run(label, Action::Search("e"), kind, searches()).await?);
        for fraction in GLOBAL_RANGES {
            let kind = Measured::Lookup {
                indexlets: 1.0 + fraction * (indexlets - 1.0),
                matches: 0.0,
            };
            let label = format!("lookup e range {fraction} on {name}");
            steps.push(run(label, Action::Range(fraction), kind, searches()).await?);
        }
    }
    for (attr, moves) in [("d", 0.0), ("e", 1.0 - 1.0 / indexlets)] {
        let kind = Measured::Put {
            copies,
            unchanged: 0.0,
            moved: vec![],
            entries: 0.0,
            global: vec![moves],
        };
        let label = format!("put {attr} on {name}");
        steps.push(run(label, Action::Put(vec![attr]), kind, Box::new(update)).await?);
    }
    Ok(steps)
}

/// Done with the scratch space `name`, whose steps are `steps`: the probe
/// after its last step is paired with the ones before each, and the space
/// is removed, to free its memory and disk for the next.
async fn done_with(
    admin: &Admin,
    prober: Option<&Prober>,
    steps: &mut [Step],
    name: &str,
    created: &mut Vec<String>,
) -> anyhow::Result<()> {
    if let Some(prober) = prober {
        let last = prober.rate().await;
        around_steps(steps, last);
    }
    admin.rm_space(name).await?;
    created.retain(|c| c != name);
    Ok(())
}

/// The search "a present" on space `name` as its step measured it (its
/// results counted), for the mixes that run it beside something else.
fn measured_a(steps: &[Step], name: &str) -> anyhow::Result<Measured> {
    let label = format!("search a present on {name}");
    steps
        .iter()
        .find(|s| s.measurement.step == label)
        .map(|s| s.measurement.kind.clone())
        .ok_or_else(|| anyhow::anyhow!("no step {label:?} before the mixes that run it"))
}

/// `kind` with what `store`'s searches returned: a search's result count
/// is what it returned on average, a range walk reads exactly the entries
/// it returns, and a lookup reads the entries it returns (its exact filter
/// keeps every object of an entry not written meanwhile).
fn counted(kind: Measured, store: &CalStore) -> Measured {
    let per_search = || {
        let n = store.searches.load(Ordering::Relaxed).max(1);
        store.results.load(Ordering::Relaxed) as f64 / n as f64
    };
    match kind {
        Measured::Search {
            regions,
            examined,
            range,
            range_entries,
            index_reads,
            handed_off,
            ..
        } => {
            let results = per_search();
            Measured::Search {
                regions,
                examined,
                range,
                // A range walk reads what it returns, or when a second
                // check drops everything, the entries the step expects its
                // range to hold.
                range_entries: if range {
                    range_entries.max(results)
                } else {
                    0.0
                },
                // Scans read no index; equality walks read what they
                // examine, range walks what they read.
                index_reads: if range {
                    index_reads.max(results)
                } else {
                    index_reads
                },
                results,
                handed_off,
            }
        }
        Measured::Lookup { indexlets, .. } => Measured::Lookup {
            indexlets,
            matches: per_search(),
        },
        Measured::Larger {
            objects,
            reference,
            search,
        } => Measured::Larger {
            objects,
            reference,
            search: Box::new(counted(*search, store)),
        },
        // A mix's parts are counted where each ran alone: its searches'
        // results are not told apart here.
        kind => kind,
    }
}

/// A search step's operation: a record number that places what the
/// step's action searches for.
fn search(rng: &mut rand::rngs::StdRng) -> Op {
    Op::SearchEq {
        recno: rng.gen_range(0..i64::MAX / 2),
    }
}

/// The operations of a step that only searches.
fn searches() -> StepSource {
    Box::new(|_: u64, rng: &mut rand::rngs::StdRng| search(rng))
}

/// An update of an existing key (`k0 … k{objects − 1}`) with a seed for
/// its new values (in `field`): what every put and modify step runs.
fn update(objects: u64, rng: &mut rand::rngs::StdRng) -> Op {
    Op::Update {
        key: format!("k{}", rng.gen_range(0..objects.max(1))),
        field: rng.gen_range(0..usize::MAX / 2),
        value: Vec::new(),
        record: Arc::default(),
    }
}

/// Pairs each step's probe (the one before it) with the next step's, or
/// `last` (the probe after the final step): a step's speed is the mean of
/// the two, or unknown when either failed.
fn around_steps(steps: &mut [Step], last: Option<f64>) {
    let befores: Vec<Option<f64>> = steps.iter().map(Step::probe_rate).collect();
    for (i, step) in steps.iter_mut().enumerate() {
        let after = befores.get(i + 1).copied().unwrap_or(last);
        step.probe_ops_per_s = vec![befores[i].zip(after).map(|(a, b)| (a + b) / 2.0)];
    }
}

impl CalStore {
    /// A store for `action` on `space`, whose objects (numbered from 0)
    /// number `objects`.
    fn new(client: &Client, space: &str, action: Action, objects: u64) -> CalStore {
        CalStore {
            client: client.clone(),
            space: space.to_string(),
            action,
            values: (objects / MATCHES).max(1),
            unique: objects,
            results: AtomicU64::new(0),
            searches: AtomicU64::new(0),
        }
    }
}

/// Inserts objects `k0 … k{objects − 1}` through `store`; the count
/// inserted. A few failures (a daemon that briefly lost its lease on a
/// busy machine) leave keys that a put then creates: tolerated.
async fn load(
    store: Arc<CalStore>,
    name: &str,
    objects: u64,
    workers: usize,
) -> anyhow::Result<u64> {
    let next = Arc::new(AtomicU64::new(0));
    let load = Load {
        workers,
        operations: objects,
        time_limit: LOAD_LIMIT,
    };
    let loaded = run_phase(store, "load", load, |w| {
        let next = next.clone();
        FnSource::boxed(w as u64, move |_| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            Op::Insert {
                key: format!("k{n}"),
                recno: n as i64,
                fields: Arc::default(),
            }
        })
    })
    .await?;
    let errors = loaded.errors();
    if errors * LOAD_ERRORS_MAX > loaded.operations.max(1) {
        anyhow::bail!(
            "loading {name}: {errors} of {} inserts failed ({})",
            loaded.operations,
            loaded.first_error.unwrap_or_default()
        );
    }
    Ok(loaded.operations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(label: &str, cost_s: f64) -> Step {
        Step {
            measurement: Measurement {
                stored_rows: 0.0,
                step: label.to_string(),
                kind: Measured::Get,
                cost_s,
            },
            phase: PhaseResult {
                store: "tessera".into(),
                phase: label.to_string(),
                workers: 1,
                operations: (1.0 / cost_s) as u64,
                seconds: 1.0,
                throughput: 1.0 / cost_s,
                timed_out: true,
                ops: BTreeMap::new(),
                first_error: None,
            },
            errors: 0,
            runs_s: vec![cost_s],
            raw_runs_s: vec![cost_s],
            probe_ops_per_s: vec![None],
        }
    }

    fn probed(label: &str, cost_s: f64, probe: Option<f64>) -> Step {
        Step {
            probe_ops_per_s: vec![probe],
            ..step(label, cost_s)
        }
    }

    #[test]
    fn a_step_is_timed_by_the_probes_on_either_side() {
        // Probes of 100 and 80 before two steps, then 60 after the last.
        let mut steps = vec![
            probed("get", 1e-5, Some(100.0)),
            probed("put", 1e-4, Some(80.0)),
        ];
        around_steps(&mut steps, Some(60.0));
        assert_eq!(steps[0].probe_ops_per_s, [Some(90.0)]);
        assert_eq!(steps[1].probe_ops_per_s, [Some(70.0)]);
        // A failed probe leaves both steps beside it unknown.
        let mut steps = vec![
            probed("get", 1e-5, Some(100.0)),
            probed("put", 1e-4, None),
            probed("search", 1e-3, Some(50.0)),
        ];
        around_steps(&mut steps, None);
        assert_eq!(
            steps
                .iter()
                .map(|s| s.probe_ops_per_s[0])
                .collect::<Vec<_>>(),
            [None, None, None]
        );
    }

    #[test]
    fn costs_are_scaled_to_the_median_probe_speed() {
        // Three runs of one step: the probe ran at 100, 50 and 80 gets/s
        // around it; the reference is the median, 80.
        let mut rounds = vec![
            vec![probed("put", 2e-4, Some(100.0))],
            vec![probed("put", 4e-4, Some(50.0))],
            vec![probed("put", 3e-4, Some(80.0))],
        ];
        let (reference, (low, high)) = scale_to_reference(&mut rounds).expect("probes ran");
        assert_eq!(reference, 80.0);
        assert_eq!((low, high), (50.0 / 80.0, 100.0 / 80.0));
        // 2e-4 at 1.25× the reference speed would have cost 2.5e-4 there;
        // 4e-4 at 0.625×, 2.5e-4; 3e-4 at the reference, itself.
        let costs: Vec<f64> = rounds.iter().map(|r| r[0].measurement.cost_s).collect();
        for (got, want) in costs.iter().zip([2.5e-4, 2.5e-4, 3e-4]) {
            assert!((got - want).abs() < 1e-15, "{costs:?}");
        }
        let steps = median_steps(rounds).expect("same steps");
        // The median of the scaled costs, with every run's raw cost and
        // probe kept.
        assert!((steps[0].measurement.cost_s - 2.5e-4).abs() < 1e-15);
        assert_eq!(steps[0].raw_runs_s, [2e-4, 4e-4, 3e-4]);
        assert_eq!(
            steps[0].probe_ops_per_s,
            [Some(100.0), Some(50.0), Some(80.0)]
        );
        // A step without a probe keeps its cost; no probe at all: nothing
        // scaled.
        let mut rounds = vec![vec![
            probed("get", 1e-5, None),
            probed("put", 1e-4, Some(50.0)),
        ]];
        assert_eq!(scale_to_reference(&mut rounds), Some((50.0, (1.0, 1.0))));
        assert_eq!(rounds[0][0].measurement.cost_s, 1e-5);
        let mut rounds = vec![vec![probed("get", 1e-5, None)]];
        assert_eq!(scale_to_reference(&mut rounds), None);
        assert_eq!(rounds[0][0].measurement.cost_s, 1e-5);
    }

    #[test]
    fn each_step_keeps_its_median_run_and_every_cost() {
        let rounds = vec![
            vec![step("get", 3e-5), step("put", 1e-4)],
            vec![step("get", 1e-5), step("put", 4e-4)],
            vec![step("get", 2e-5), step("put", 2e-4)],
        ];
        let steps = median_steps(rounds).expect("same steps");
        let got: Vec<(&str, f64, &[f64])> = steps
            .iter()
            .map(|s| {
                (
                    s.measurement.step.as_str(),
                    s.measurement.cost_s,
                    s.runs_s.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("get", 2e-5, &[3e-5, 1e-5, 2e-5][..]),
                ("put", 2e-4, &[1e-4, 4e-4, 2e-4][..]),
            ]
        );
        // The median run's phase comes with it.
        assert_eq!(steps[1].phase.operations, 5000);
        // Two runs: the lower.
        let steps = median_steps(vec![vec![step("get", 3e-5)], vec![step("get", 1e-5)]])
            .expect("same steps");
        assert_eq!(steps[0].measurement.cost_s, 1e-5);
        assert!(median_steps(vec![vec![step("get", 1e-5)], vec![]]).is_err());
    }
}
