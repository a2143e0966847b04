//! `tessera advise`: the layout advisor (API.md §12.4) on a workload file
//! or on the workload the daemons observed, and `--apply` of its advice.
//!
//! The space's description comes from the workload itself, from
//! `--description FILE`, or from the cluster (`--space NAME`, or a workload
//! that names its space) through the admin client, as `show-config` reads
//! it. Without `--workload`, `--space NAME` takes the workload from the
//! shape counts every daemon's metrics page shows
//! (`tessera_advisor::observed`); the object count is `--objects`. The
//! model's parameters are those `tessera calibrate` stored in the
//! cluster's configuration when advise reads it (it talks to the cluster
//! anyway, `--host`/`--port` are given, or `--params cluster`), else
//! `Params::default()`; the output says which.
//!
//! `--apply` moves the space to the top layout with `relayout` (and
//! `--wait` waits as the layout commands do); it refuses a layout with a
//! part Tessera does not build yet.

use crate::Target;
use anyhow::Context;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tessera_advisor::observed::{ObservedWorkload, OP_SHAPES_METRIC};
use tessera_advisor::workload::ClassKind;
use tessera_advisor::Held;
use tessera_advisor::{
    advise, observed_workload, parse_workload, space_ref, Advice, Layout, Model, Observed, Options,
    Params, Prediction, SearchKind, SpaceRef, Workload,
};
use tessera_client::{AdminError, AdminStatus};
use tessera_types::{parse_space, AdvisorCalibration, Configuration, DaemonId, SpaceDesc};

/// How long one daemon's metrics page may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// The cost model, as the command line names it.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ModelArg {
    /// The configurator thesis's equations.
    Thesis,
    /// Tessera's extended model.
    Tessera,
}

impl ModelArg {
    /// The model this names.
    pub fn model(self) -> Model {
        match self {
            ModelArg::Thesis => Model::Thesis,
            ModelArg::Tessera => Model::Tessera,
        }
    }
}

/// Where the model's parameters come from.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ParamsArg {
    /// The cluster's calibrated ones when advise reads the cluster anyway
    /// or `--host`/`--port` are given; the defaults otherwise or when
    /// none are stored.
    Auto,
    /// The cluster's calibrated ones (the defaults if none are stored);
    /// an unreachable cluster is an error.
    Cluster,
    /// The uncalibrated defaults.
    Defaults,
}

/// The arguments of `advise`.
#[derive(clap::Args)]
pub struct AdviseArgs {
    /// Where the model's parameters come from.
    #[arg(long, value_enum, default_value = "auto")]
    params: ParamsArg,
    /// Whether `--host` or `--port` was on the command line (set by main).
    #[arg(skip)]
    pub target_named: bool,
    /// The workload file (JSON, API.md §12.4). Without it, `--space NAME`
    /// advises on the workload the daemons observed.
    #[arg(long, required_unless_present = "space")]
    workload: Option<PathBuf>,
    /// Take the space's description from the cluster (and, without
    /// `--workload`, the workload its daemons observed).
    #[arg(long, conflicts_with = "description")]
    space: Option<String>,
    /// Take the space's description from FILE.
    #[arg(long)]
    description: Option<PathBuf>,
    /// The objects of an observed workload. Default: counted in the
    /// space (every region's keys, read once), with their mean stored
    /// size taken from the first objects a search over the space yields
    /// (if they cannot be read, 100,000 of the default size, with a
    /// warning).
    #[arg(long, conflicts_with = "workload", value_parser = clap::value_parser!(u64).range(1..))]
    objects: Option<u64>,
    /// How many layouts to print.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Print JSON: `{"layouts": [{"rank", "description",
    /// "predicted_ops_per_s", "bytes_per_object", "recovery_s", …}], …}`,
    /// with `"observed"` for an observed workload.
    #[arg(long)]
    json: bool,
    /// At most this many bytes stored per object (every copy and index
    /// entry).
    #[arg(long, value_name = "BYTES")]
    storage_budget: Option<f64>,
    /// At most this many seconds to rebuild a lost daemon's data.
    #[arg(long, value_name = "SECONDS")]
    recovery_budget: Option<f64>,
    /// The cost model.
    #[arg(long, value_enum, default_value = "tessera")]
    model: ModelArg,
    /// Also propose global indexes, and layouts of the other kind than the
    /// space's (replexes for a space of subspaces, or the other way
    /// round), which the space takes only by being created anew.
    #[arg(long)]
    future: bool,
    /// At most this many dimensions per proposed subspace.
    #[arg(long, default_value_t = 3)]
    dims_max: usize,
    /// Predict for a cluster of this many daemons of the same servers
    /// (every cost is cluster time, shared by its daemons): default, the
    /// cluster's available daemons when the cluster is read, else the
    /// daemons the parameters were measured on.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    daemons: Option<u32>,
    /// Relayout the space in the cluster to the top layout.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    wait: crate::LayoutWait,
}

/// Runs `advise`.
pub async fn run(args: AdviseArgs, target: &Target) -> anyhow::Result<()> {
    // Where the size of an object comes from: the workload file, the
    // objects the space holds, or the default parameter.
    let mut bytes_source = "default";
    let (mut workload, observed, read_cluster) = match (&args.workload, &args.space) {
        (Some(path), _) => {
            let (mut workload, read) = file_workload(&args, path, target).await?;
            if workload.object_bytes.is_some() {
                bytes_source = "workload";
            }
            // A file about a space the cluster holds, silent on the size
            // of its objects: the size of those it holds.
            if read && workload.object_bytes.is_none() {
                match held_sizes(target, &workload.space).await {
                    Ok(sizes) => sizes.size(&mut workload),
                    Err(e) => eprintln!("warning: {e:#}; objects priced at the default size"),
                }
                if workload.object_bytes.is_some() {
                    bytes_source = "measured";
                }
            }
            (workload, None, read)
        }
        (None, Some(name)) => {
            let observed = observe(target, name, args.objects).await?;
            if observed.workload.object_bytes.is_some() {
                bytes_source = "measured";
            }
            (observed.workload.clone(), Some(observed), true)
        }
        (None, None) => anyhow::bail!("give --workload FILE or --space NAME"),
    };
    let options = Options {
        model: args.model.model(),
        top: args.top,
        storage_budget: args.storage_budget,
        recovery_budget_s: args.recovery_budget,
        dims_max: args.dims_max,
        future: args.future,
        ..Options::default()
    };
    let ask = match args.params {
        ParamsArg::Auto => read_cluster || args.apply || args.target_named,
        ParamsArg::Cluster => true,
        ParamsArg::Defaults => false,
    };
    let read = if ask || read_cluster {
        Some(target.admin()?.config().await?)
    } else {
        None
    };
    // A space read from the cluster has its global indexes' indexlets as
    // they are now (declared counts and the leader's splits).
    if read_cluster {
        if let Some(space) = read.as_ref().and_then(|c| c.space(&workload.space.name)) {
            workload.global_indexlets = space.global_indexlets();
        }
    }
    let config = read.filter(|_| ask);
    let stored = config.as_ref().and_then(|c| c.advisor.clone());
    let measured = match &stored {
        Some(c) => Params::default().calibrated(c),
        None => Params::default(),
    };
    // The cluster predicted for: what its daemons share, what a lost
    // daemon's share is of, and what a hybrid's regions are placed apart on.
    let params = match (args.daemons, &config) {
        (Some(n), _) => measured.on_daemons(n),
        (None, Some(config)) => measured.on_cluster(config),
        (None, None) => measured.clone(),
    };
    let advice = advise(&workload, &params, &options)?;
    if args.json {
        let mut document = advice_json(&workload, &advice, &options, &params);
        document["measured_daemons"] = json!(measured.daemons);
        document["object_bytes_source"] = json!(bytes_source);
        document["calibrated"] = json!(stored.is_some());
        document["parameters_source"] = json!(if stored.is_some() {
            "cluster"
        } else {
            "defaults"
        });
        document["calibration"] = json!(stored);
        if let Some(observed) = &observed {
            document["observed"] = observed_json(observed);
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&document).context("encoding the advice")?
        );
    } else {
        if let Some(observed) = &observed {
            print!("{}", observed_text(observed));
        }
        print!(
            "{}",
            advice_text(&workload, &advice, &options, stored.as_ref(), &params)
        );
    }
    if args.apply {
        apply(target, &workload, &advice, &args.wait).await?;
    }
    Ok(())
}

/// The workload of the file at `path`, its space described as the
/// arguments say, and whether that read the cluster.
async fn file_workload(
    args: &AdviseArgs,
    path: &PathBuf,
    target: &Target,
) -> anyhow::Result<(Workload, bool)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the workload {}", path.display()))?;
    let given = match (&args.space, &args.description) {
        (Some(name), _) => Some(fetch_space(target, name).await?),
        (None, Some(path)) => {
            let description = std::fs::read_to_string(path)
                .with_context(|| format!("reading the description {}", path.display()))?;
            Some(
                parse_space(&description)
                    .map_err(|e| AdminError::new(AdminStatus::BadSpace, e.to_string()))?,
            )
        }
        (None, None) => match space_ref(&text)? {
            SpaceRef::Name(name) => Some(fetch_space(target, &name).await?),
            SpaceRef::Description(_) => None,
        },
    };
    let read_cluster = given.is_some() && args.description.is_none();
    Ok((parse_workload(&text, given.as_ref())?, read_cluster))
}

/// The description of the space `name` in the cluster's configuration.
async fn fetch_space(target: &Target, name: &str) -> anyhow::Result<SpaceDesc> {
    let config = target.admin()?.config().await?;
    Ok(space_in(&config, name)?.clone())
}

pub(crate) fn space_in<'a>(
    config: &'a Configuration,
    name: &str,
) -> Result<&'a SpaceDesc, AdminError> {
    config.space(name).map(|s| &s.desc).ok_or_else(|| {
        AdminError::new(
            AdminStatus::NotFound,
            format!("space {name:?} does not exist"),
        )
    })
}

/// The workload the daemons observed on space `name`: every daemon's
/// shape counts, added up (see [`scrape_shapes`]), on `objects` objects,
/// else on the objects the space holds ([`space_objects`]).
async fn observe(
    target: &Target,
    name: &str,
    objects: Option<u64>,
) -> anyhow::Result<ObservedWorkload> {
    let config = target.admin()?.config().await?;
    let desc = space_in(&config, name)?;
    let mut observed = Observed::default();
    for counts in scrape_shapes(&config, name).await?.into_values() {
        for (label, n) in counts.counts {
            *observed.counts.entry(label).or_default() += n;
        }
    }
    // A space whose reads need a credential, say, cannot be measured: the
    // model still advises, on the defaults.
    let held = match objects {
        Some(objects) => Held::count(objects),
        None => space_held(target, desc).await,
    };
    let mut observed = observed_workload(&observed, desc, held.objects)?;
    held.size(&mut observed.workload);
    Ok(observed)
}

/// What the space `desc` holds, for the model (`advise --space` and the
/// autopilot): counted and measured, or, when it cannot be read, the
/// default count and sizes with a warning.
pub(crate) async fn space_held(target: &Target, desc: &SpaceDesc) -> Held {
    match space_objects(target, desc).await {
        Ok(held) => Held {
            objects: held.objects.max(1),
            ..held
        },
        Err(e) => {
            eprintln!("warning: {e:#}; advising on {OBJECTS_DEFAULT} objects of the default size");
            Held::count(OBJECTS_DEFAULT)
        }
    }
}

/// The objects an observed workload is priced on when they cannot be
/// counted.
const OBJECTS_DEFAULT: u64 = 100_000;

/// Objects whose stored sizes [`sizes`] averages.
const SIZE_SAMPLE: usize = 256;

/// Bytes a stored copy holds beyond its object's encoding: its version,
/// the region in its storage key, and the record's framing.
const RECORD_OVERHEAD_BYTES: usize = 16;

fn measuring(space: &str) -> String {
    format!(
        "measuring the objects of space {space:?} (`--objects N`, or `object_bytes` in a \
         workload file, skips it)"
    )
}

/// Counts the objects of the space `desc` (every region's keys, once:
/// `Client::count`) and measures their [`sizes`].
async fn space_objects(target: &Target, desc: &SpaceDesc) -> anyhow::Result<Held> {
    let measure = async {
        let client = target.client().await?;
        let none = Vec::<(&str, tessera_types::PredOp)>::new();
        let count = client.count(&desc.name, none).await?;
        anyhow::Ok(Held {
            objects: count,
            ..sizes(&client, desc).await?
        })
    };
    measure.await.with_context(|| measuring(&desc.name))
}

/// [`sizes`] through a client of its own.
async fn held_sizes(target: &Target, desc: &SpaceDesc) -> anyhow::Result<Held> {
    let measure = async { anyhow::Ok(sizes(&target.client().await?, desc).await?) };
    measure.await.with_context(|| measuring(&desc.name))
}

/// What the objects of the space `desc` take as the daemons store them,
/// on average over the first [`SIZE_SAMPLE`] objects a search over the
/// whole space yields (the count is left at 0; nothing for an empty
/// space):
///
/// - a stored copy: the object's encoding, its storage key (`key_bytes`)
///   and [`RECORD_OVERHEAD_BYTES`];
/// - a local index entry: region, slot, coordinate and storage key
///   (`tessera_daemon::index::entry` under `tessera_storage::region_key`),
///   whatever the value;
/// - a global index on each attribute whose values order: the indexlet's
///   record of the object's projection (`tessera_types::region::projection`,
///   stored as a copy is) and its ordered entry
///   (`tessera_daemon::index::ordered_entry`).
async fn sizes(
    client: &tessera_client::Client,
    desc: &SpaceDesc,
) -> Result<Held, tessera_client::ClientError> {
    use tessera_daemon::index::{entry, ordered_entry, Slot};
    use tessera_storage::region_key;
    use tessera_types::RegionId;
    let stored = |object: &tessera_types::Object, key: &[u8]| {
        tessera_protocol::ObjectBytes::encode(object).len() + key.len() + RECORD_OVERHEAD_BYTES
    };
    let none = Vec::<(&str, tessera_types::PredOp)>::new();
    let mut stream = client.search_stream(&desc.name, none);
    let (mut sampled, mut objects, mut entries) = (0usize, 0usize, 0usize);
    let mut global: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    while sampled < SIZE_SAMPLE {
        let Some(record) = stream.next().await else {
            break;
        };
        let object = tessera_types::Object {
            values: record?.attrs.into_iter().map(|(_, v)| v).collect(),
        };
        let key = tessera_types::key_bytes(object.key());
        objects += stored(&object, &key);
        entries += region_key(RegionId(0), &entry(0, 0, &key)).len();
        for (attr, value) in object.values.iter().enumerate().skip(1) {
            let Some(sort_key) = tessera_types::sortkey::sort_key(value) else {
                continue;
            };
            let projection = tessera_types::region::projection(desc, &[attr], &object);
            let ordered = ordered_entry(Slot::Ordered(attr).number(), &sort_key, &key);
            let (n, bytes) = global.entry(attr).or_default();
            *n += 1;
            *bytes += stored(&projection, &key) + region_key(RegionId(0), &ordered).len();
        }
        sampled += 1;
    }
    if sampled == 0 {
        return Ok(Held::default());
    }
    Ok(Held {
        objects: 0,
        object_bytes: Some(objects as f64 / sampled as f64),
        index_entry_bytes: Some(entries as f64 / sampled as f64),
        global_entry_bytes: global
            .into_iter()
            .map(|(attr, (n, bytes))| (attr, bytes as f64 / n as f64))
            .collect(),
    })
}

/// Each daemon's shape counts of space `name`, from its metrics page. A
/// daemon without a metrics page, or whose page cannot be read, is left
/// out with a warning: its share is missing. None read is an error.
pub(crate) async fn scrape_shapes(
    config: &Configuration,
    name: &str,
) -> anyhow::Result<BTreeMap<DaemonId, Observed>> {
    let mut read = BTreeMap::new();
    for daemon in config.daemons.values() {
        let Some(url) = &daemon.metrics else {
            eprintln!(
                "warning: daemon {} serves no metrics; what it served is not counted",
                daemon.id
            );
            continue;
        };
        let page = match tessera_observe::scrape::fetch(url, SCRAPE_TIMEOUT).await {
            Ok(page) => page,
            Err(e) => {
                eprintln!(
                    "warning: daemon {}: {e}; what it served is not counted",
                    daemon.id
                );
                continue;
            }
        };
        let mut observed = Observed::default();
        for sample in tessera_observe::scrape::samples(&page) {
            if sample.name == OP_SHAPES_METRIC {
                observed.add_sample(name, sample.labels, sample.value)?;
            }
        }
        read.insert(daemon.id, observed);
    }
    if read.is_empty() {
        anyhow::bail!(
            "no daemon's metrics could be read (start daemons with --metrics) to observe space {name:?}"
        );
    }
    Ok(read)
}

/// Moves the workload's space to the advice's top layout, unless it has it.
async fn apply(
    target: &Target,
    workload: &Workload,
    advice: &Advice,
    wait: &crate::LayoutWait,
) -> anyhow::Result<()> {
    let space = &workload.space;
    let best = advice.layouts.first().context("no layout to apply")?;
    if best.layout.converts(space) {
        return Err(AdminError::new(
            AdminStatus::BadSpace,
            format!(
                "the top layout ({}) is of another kind than space {}'s (replexes against \
                 subspaces), which relayout does not change; not applied. Create a new space \
                 with `{}` and copy the objects",
                parts_text(space, &best.layout),
                space.name,
                best.layout.describe(space)
            ),
        )
        .into());
    }
    let admin = target.admin()?;
    let current = admin.config().await?;
    let now = Layout::of_space(space_in(&current, &space.name)?);
    if now == best.layout {
        eprintln!("space {} already has the top layout", space.name);
    } else {
        let description = best.layout.describe(space);
        admin.relayout(&space.name, &description).await?;
        eprintln!("applied: {description}");
    }
    wait.run(&admin, &space.name).await?;
    Ok(())
}

/// A class as a workload file writes it (API.md §12.4).
fn class_json(space: &SpaceDesc, p: f64, kind: &ClassKind) -> Value {
    let name = |a: usize| space.attrs[a].name.clone();
    match kind {
        ClassKind::Search(search) => {
            let checks: serde_json::Map<String, Value> = search
                .checks
                .iter()
                .map(|&(a, op)| (name(a), json!(op.name())))
                .collect();
            json!({"p": p, "search": checks})
        }
        ClassKind::Get => json!({"p": p, "get": true}),
        ClassKind::Modify(attrs) => {
            json!({"p": p, "modify": attrs.iter().map(|&a| name(a)).collect::<Vec<_>>()})
        }
        ClassKind::Insert => json!({"p": p, "insert": true}),
    }
}

/// `"observed"` of `advise --json`: `workload` is a valid workload file,
/// `counts` the operations behind each of its classes.
fn observed_json(observed: &ObservedWorkload) -> Value {
    let w = &observed.workload;
    let classes: Vec<Value> = w
        .classes
        .iter()
        .map(|c| class_json(&w.space, c.p, &c.kind))
        .collect();
    let unmodelled: Vec<Value> = observed
        .unmodelled
        .iter()
        .map(|(label, n, why)| json!({"kind": label.kind, "shape": label.shape, "count": n, "why": why}))
        .collect();
    json!({
        "workload": {"space": w.space.name, "objects": w.objects, "object_bytes": w.object_bytes,
                     "index_entry_bytes": w.index_entry_bytes,
                     "global_entry_bytes": by_name(&w.space, &w.global_entry_bytes),
                     "classes": classes},
        "counts": observed.counts,
        "unmodelled": unmodelled,
    })
}

/// A map by attribute position as one by attribute name.
pub(crate) fn by_name<T: Into<Value> + Copy>(space: &SpaceDesc, map: &BTreeMap<usize, T>) -> Value {
    map.iter()
        .filter_map(|(&attr, &v)| Some((space.attrs.get(attr)?.name.clone(), v.into())))
        .collect::<serde_json::Map<String, Value>>()
        .into()
}

/// The observed workload as a table, before the advice.
fn observed_text(observed: &ObservedWorkload) -> String {
    use std::fmt::Write as _;
    let w = &observed.workload;
    let total: u64 = observed.counts.iter().sum();
    let mut out = String::new();
    let size = match (w.object_bytes, w.index_entry_bytes) {
        (Some(bytes), Some(entry)) => {
            format!(", {bytes:.0} bytes a stored copy, {entry:.0} an index entry")
        }
        (Some(bytes), None) => format!(", {bytes:.0} bytes a stored copy"),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "observed on space {}: {total} operations on {} objects{size}",
        w.space.name, w.objects
    );
    let _ = writeln!(out, "{:>10}  {:>7}  class", "count", "p");
    for (class, n) in w.classes.iter().zip(&observed.counts) {
        let name = |a: &usize| w.space.attrs[*a].name.as_str();
        let what = match &class.kind {
            ClassKind::Search(s) => format!(
                "search {}",
                s.checks
                    .iter()
                    .map(|(a, op)| format!("{} {}", name(a), op.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ClassKind::Get => "get".to_string(),
            ClassKind::Modify(attrs) => format!(
                "modify {}",
                attrs.iter().map(name).collect::<Vec<_>>().join(", ")
            ),
            ClassKind::Insert => "insert (or delete)".to_string(),
        };
        let _ = writeln!(out, "{n:>10}  {:>7.4}  {what}", class.p);
    }
    for (label, n, why) in &observed.unmodelled {
        let _ = writeln!(
            out,
            "{n:>10}  {:>7}  {} {:?} left out: {why}",
            "-", label.kind, label.shape
        );
    }
    out.push('\n');
    out
}

fn names<'a>(space: &'a SpaceDesc, attrs: &[usize]) -> Vec<&'a str> {
    attrs
        .iter()
        .map(|&a| space.attrs[a].name.as_str())
        .collect()
}

/// A layout's parts in a few words: `subspace a, b; index c`.
fn parts_text(space: &SpaceDesc, layout: &Layout) -> String {
    layout.summary(space)
}

fn prediction_json(space: &SpaceDesc, layout: &Layout, p: &Prediction) -> Value {
    json!({
        "description": layout.describe(space),
        "predicted_ops_per_s": p.ops_per_s,
        "bytes_per_object": p.bytes_per_object,
        "recovery_s": p.recovery_s,
        "subspaces": layout.subspaces.iter().map(|s| names(space, s)).collect::<Vec<_>>(),
        "indexes": names(space, &layout.indexes),
        "global_indexes": names(space, &layout.global_indexes),
        "replex": layout.replex,
        "hybrids": layout.hybrids.iter().map(|h| json!({
            "sides": h.sides.iter().map(|s| names(space, s)).collect::<Vec<_>>(),
            "groups": h.groups,
        })).collect::<Vec<_>>(),
        "new_space_only": layout.converts(space),
        "class_costs_s": p.class_costs_s,
    })
}

/// `advise --json`: stable keys, best first; `"calibrated": false` and
/// the default parameters' source until `run` says otherwise.
pub fn advice_json(
    workload: &Workload,
    advice: &Advice,
    options: &Options,
    params: &Params,
) -> Value {
    let space = &workload.space;
    // The indexlets of each global index as the cluster has them, when
    // the space was read from it (what the model priced lookups with).
    let indexlets = by_name(space, &workload.global_indexlets);
    let layouts: Vec<Value> = advice
        .layouts
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut entry = prediction_json(space, &r.layout, &r.prediction);
            entry["rank"] = json!(i + 1);
            entry
        })
        .collect();
    let heuristics: Vec<Value> = advice
        .heuristics
        .iter()
        .map(|h| {
            let mut entry = prediction_json(space, &h.ranked.layout, &h.ranked.prediction);
            entry["name"] = json!(h.heuristic.name());
            entry["within_budget"] = json!(h.within_budget);
            entry
        })
        .collect();
    json!({
        "space": space.name,
        "model": options.model.name(),
        "calibrated": false,
        "parameters_source": "defaults",
        "calibration": null,
        "parameters": params,
        "objects": workload.objects,
        "object_bytes": workload.object_bytes.unwrap_or(params.object_bytes),
        "index_entry_bytes": workload.index_entry_bytes.unwrap_or(params.index_entry_bytes),
        "global_entry_bytes": by_name(&workload.space, &workload.global_entry_bytes),
        "daemons": params.daemons,
        "search": search_name(advice.search),
        "predicted": advice.predicted,
        "layouts": layouts,
        "heuristics": heuristics,
        "global_indexlets": indexlets,
    })
}

fn search_name(search: SearchKind) -> &'static str {
    match search {
        SearchKind::Exhaustive => "exhaustive",
        SearchKind::Beam => "beam",
    }
}

/// `advise` without `--json`: two tables and the best description.
pub fn advice_text(
    workload: &Workload,
    advice: &Advice,
    options: &Options,
    calibration: Option<&AdvisorCalibration>,
    params: &Params,
) -> String {
    use std::fmt::Write as _;
    let space = &workload.space;
    let mut out = String::new();
    let (source, measured_on) = match calibration {
        Some(c) => (
            format!(
                "parameters calibrated on the cluster ({} daemons, {})",
                c.daemons,
                match c.calibrations {
                    Some(n) if n > 1 => format!(
                        "the average of {n} calibrations, the latest from epoch {}",
                        c.epoch
                    ),
                    _ => format!("from epoch {}", c.epoch),
                }
            ),
            c.daemons,
        ),
        None => (
            format!(
                "uncalibrated default parameters ({} daemons; see `tessera calibrate`)",
                Params::default().daemons
            ),
            Params::default().daemons,
        ),
    };
    let params = if params.daemons == measured_on {
        source
    } else {
        format!("{source}, for {} daemons", params.daemons)
    };
    let _ = writeln!(
        out,
        "space {}: {} model, {params}; {} search, {} layouts predicted",
        space.name,
        options.model.name(),
        search_name(advice.search),
        advice.predicted
    );
    let _ = writeln!(
        out,
        "{:>4}  {:>12}  {:>10}  {:>10}  layout",
        "rank", "ops/s", "bytes/obj", "recovery_s"
    );
    for (i, r) in advice.layouts.iter().enumerate() {
        let p = &r.prediction;
        let _ = writeln!(
            out,
            "{:>4}  {:>12.1}  {:>10.0}  {:>10.2}  {}{}",
            i + 1,
            p.ops_per_s,
            p.bytes_per_object,
            p.recovery_s,
            parts_text(space, &r.layout),
            if r.layout.converts(space) {
                " (a new space only)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        out,
        "\n{:<13}  {:>12}  {:>10}  {:>10}  {:<4}  layout",
        "heuristic", "ops/s", "bytes/obj", "recovery_s", "fits"
    );
    for h in &advice.heuristics {
        let p = &h.ranked.prediction;
        let _ = writeln!(
            out,
            "{:<13}  {:>12.1}  {:>10.0}  {:>10.2}  {:<4}  {}",
            h.heuristic.name(),
            p.ops_per_s,
            p.bytes_per_object,
            p.recovery_s,
            if h.within_budget { "yes" } else { "no" },
            parts_text(space, &h.ranked.layout)
        );
    }
    if let Some(best) = advice.layouts.first() {
        let _ = writeln!(out, "\nbest: {}", best.layout.describe(space));
    }
    out
}
