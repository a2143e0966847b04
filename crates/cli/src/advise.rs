//! `tessera advise`: the layout advisor (API.md §12.4) on a workload file.
//!
//! The space's description comes from the workload itself, from
//! `--description FILE`, or from the cluster (`--space NAME`, or a workload
//! that names its space) through the admin client, as `show-config` reads
//! it. The model's parameters are `Params::default()`: uncalibrated until
//! `tessera calibrate` exists, which the output says.

use crate::Target;
use anyhow::Context;
use serde_json::{json, Value};
use std::path::PathBuf;
use tessera_advisor::{
    advise, parse_workload, space_ref, Advice, Layout, Model, Options, Params, Prediction,
    SearchKind, SpaceRef, Workload,
};
use tessera_client::{AdminError, AdminStatus};
use tessera_types::{parse_space, SpaceDesc};

/// The cost model, as the command line names it.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ModelArg {
    /// The configurator thesis's equations.
    Thesis,
    /// Tessera's extended model.
    Tessera,
}

/// The arguments of `advise`.
#[derive(clap::Args)]
pub struct AdviseArgs {
    /// The workload file (JSON, API.md §12.4).
    #[arg(long)]
    workload: PathBuf,
    /// Take the space's description from the cluster.
    #[arg(long, conflicts_with = "description")]
    space: Option<String>,
    /// Take the space's description from FILE.
    #[arg(long)]
    description: Option<PathBuf>,
    /// How many layouts to print.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Print JSON: `{"layouts": [{"rank", "description",
    /// "predicted_ops_per_s", "bytes_per_object", "recovery_s", …}], …}`.
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
    /// Also propose global indexes and replexes (modelled; not built yet).
    #[arg(long)]
    future: bool,
    /// At most this many dimensions per proposed subspace.
    #[arg(long, default_value_t = 3)]
    dims_max: usize,
}

/// Runs `advise`.
pub async fn run(args: AdviseArgs, target: &Target) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.workload)
        .with_context(|| format!("reading the workload {}", args.workload.display()))?;
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
    let workload = parse_workload(&text, given.as_ref())?;
    let options = Options {
        model: match args.model {
            ModelArg::Thesis => Model::Thesis,
            ModelArg::Tessera => Model::Tessera,
        },
        top: args.top,
        storage_budget: args.storage_budget,
        recovery_budget_s: args.recovery_budget,
        dims_max: args.dims_max,
        future: args.future,
        ..Options::default()
    };
    let params = Params::default();
    let advice = advise(&workload, &params, &options)?;
    if args.json {
        let document = advice_json(&workload, &advice, &options, &params);
        println!(
            "{}",
            serde_json::to_string_pretty(&document).context("encoding the advice")?
        );
    } else {
        print!("{}", advice_text(&workload, &advice, &options));
    }
    Ok(())
}

/// The description of the space `name` in the cluster's configuration.
async fn fetch_space(target: &Target, name: &str) -> anyhow::Result<SpaceDesc> {
    let config = target.admin()?.config().await?;
    let space = config.space(name).ok_or_else(|| {
        AdminError::new(
            AdminStatus::NotFound,
            format!("space {name:?} does not exist"),
        )
    })?;
    Ok(space.desc.clone())
}

fn names<'a>(space: &'a SpaceDesc, attrs: &[usize]) -> Vec<&'a str> {
    attrs
        .iter()
        .map(|&a| space.attrs[a].name.as_str())
        .collect()
}

/// A layout's parts in a few words: `subspace a, b; index c`.
fn parts_text(space: &SpaceDesc, layout: &Layout) -> String {
    let subspace = if layout.replex { "replex" } else { "subspace" };
    let parts: Vec<String> = layout
        .subspaces
        .iter()
        .map(|s| format!("{subspace} {}", names(space, s).join(", ")))
        .chain(
            layout
                .indexes
                .iter()
                .map(|&a| format!("index {}", space.attrs[a].name)),
        )
        .chain(
            layout
                .global_indexes
                .iter()
                .map(|&a| format!("global index {}", space.attrs[a].name)),
        )
        .collect();
    if parts.is_empty() {
        "key subspace only".to_string()
    } else {
        parts.join("; ")
    }
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
        "ahead_of_features": layout.ahead_of_features(),
        "class_costs_s": p.class_costs_s,
    })
}

/// `advise --json`: stable keys, best first.
pub fn advice_json(
    workload: &Workload,
    advice: &Advice,
    options: &Options,
    params: &Params,
) -> Value {
    let space = &workload.space;
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
        "parameters": params,
        "search": search_name(advice.search),
        "predicted": advice.predicted,
        "layouts": layouts,
        "heuristics": heuristics,
    })
}

fn search_name(search: SearchKind) -> &'static str {
    match search {
        SearchKind::Exhaustive => "exhaustive",
        SearchKind::Beam => "beam",
    }
}

/// `advise` without `--json`: two tables and the best description.
pub fn advice_text(workload: &Workload, advice: &Advice, options: &Options) -> String {
    use std::fmt::Write as _;
    let space = &workload.space;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "space {}: {} model, uncalibrated default parameters (until `tessera calibrate`); {} search, {} layouts predicted",
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
            if r.layout.ahead_of_features() {
                " (not built yet)"
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
