//! Re-predicts a kept validation (`docs/validation/RUN`, written by
//! `scripts/advisor-validation`) with this build's model, its own
//! parameters, and any of them overridden, and prints what
//! `tessera bench layouts` prints of it: per workload the mean error,
//! the level, the error about it, Kendall τ-b and the measured rank of
//! the predicted best; what the runs tell apart round by round
//! (`validate::paired`) and how the predictions order it; then each
//! layout's error about its workload's level by the heuristics that chose
//! it.
//!
//! ```text
//! cargo run --release -p tessera-advisor --example repredict -- docs/validation/M [alpha=1.2 ...]
//! ```
//! An override names a field of `Params` (`params.rs`) and a number.
//!
//! `--entries-moved` re-reads parameters a calibration before version 12
//! fitted (validations M, N and O) in version 12's terms: there α
//! included the index entries a move carries, which the model now counts
//! apart, so on the calibration's puts (subspaces of 16 intervals, two
//! entries a region) the same fit is α + δ·(2 − m)/(2m), m = 15/16; and
//! an insert's entries δ_c count twice and ι is lower by δ_c
//! (`docs/design/advisor.md`, "Entries that move with an object").
//! Overrides apply after it.
//!
//! `--layouts` also prints every layout: its error about its workload's
//! level, predicted and measured ops/s, and its description.
//!
//! `--sample` also prints, per workload, the layouts `bench layouts`
//! would measure now with the validation's parameters
//! (`validate::sampled_layouts` with the default sampling), and whether
//! the kept validation measured each.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use tessera_advisor::validate::{agreement, level, paired, predict_over_run};
use tessera_advisor::{
    advise, parse_workload, sampled_layouts, Layout, Model, Options, Params, Sampling,
};

const WORKLOADS: [&str; 6] = [
    "search-one",
    "search-two",
    "mixed",
    "modify-heavy",
    "ranges",
    "inserts-gets",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        return Err(
            "usage: repredict DIR [--entries-moved] [--layouts] [--sample] [FIELD=VALUE ...]"
                .into(),
        );
    };
    if let Some(unknown) = args[1..].iter().find(|a| {
        a.starts_with("--") && !["--entries-moved", "--layouts", "--sample"].contains(&a.as_str())
    }) {
        return Err(format!("{unknown}: not a flag of repredict").into());
    }
    let flag = |name: &str| args[1..].iter().any(|a| a == name);
    let (entries_moved, each_layout, sample) =
        (flag("--entries-moved"), flag("--layouts"), flag("--sample"));
    let overrides: Vec<(String, f64)> = args[1..]
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|a| {
            let (k, v) = a.split_once('=').ok_or(format!("{a}: not FIELD=VALUE"))?;
            Ok((k.to_string(), v.parse::<f64>()?))
        })
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    let workloads_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/workloads");
    let mut by_heuristic: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut errors, mut abouts, mut taus, mut best) = (Vec::new(), Vec::new(), Vec::new(), 0);
    // What the runs tell apart round by round (`validate::paired`).
    let (mut told, mut best_up_to_runs, mut apart_alike, mut apart_against) = (Vec::new(), 0, 0, 0);
    println!(
        "workload      error   level  about   tau-b  best's rank  (as reported: error, tau-b)"
    );
    for name in WORKLOADS {
        let path = Path::new(dir).join(format!("{name}.json"));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let report: Value = serde_json::from_str(&text)?;
        let mut workload = parse_workload(
            &std::fs::read_to_string(workloads_dir.join(format!("{name}.json")))?,
            None,
        )?;
        workload.objects = report["objects"].as_u64().ok_or("no objects")?;
        // A report from before a parameter existed (κ and R₀ came with
        // calibration version 13) predicts with its default, which prices
        // nothing the report's calibration did not measure.
        let mut params = serde_json::to_value(Params::default())?;
        let Value::Object(fields) = &report["parameters"] else {
            return Err(format!("{name}: no parameters").into());
        };
        for (field, value) in fields {
            params[field.as_str()] = value.clone();
        }
        if entries_moved {
            let number = |field: &str| params[field].as_f64();
            let delta = number("index_write").ok_or("no index_write")?;
            let delta_c = number("index_create").unwrap_or(delta);
            let moves = 15.0 / 16.0;
            let alpha = number("alpha").ok_or("no alpha")? + delta * (2.0 - moves) / (2.0 * moves);
            let iota = (number("indexed_create").unwrap_or(0.0) - delta_c).max(0.0);
            params["alpha"] = Value::from(alpha);
            params["index_create"] = Value::from(2.0 * delta_c);
            params["indexed_create"] = Value::from(iota);
        }
        for (field, value) in &overrides {
            match params.get_mut(field) {
                Some(slot) => *slot = Value::from(*value),
                None => return Err(format!("no parameter {field}").into()),
            }
        }
        let params: Params = serde_json::from_value(params)?;
        let seconds = report["seconds"].as_f64().ok_or("no seconds")?;
        // As `bench layouts` predicts: each layout's space is new, so its
        // walks meet one run's worth of removed entries.
        workload.churn_horizon_s.get_or_insert(seconds);
        if sample {
            let options = Options {
                top: usize::MAX,
                ..Options::default()
            };
            let advice = advise(&workload, &params, &options)?;
            let measured: Vec<&str> = report["layouts"]
                .as_array()
                .ok_or("no layouts")?
                .iter()
                .filter_map(|l| l["summary"].as_str())
                .collect();
            for s in sampled_layouts(&advice, Sampling::default()) {
                let summary = s.layout.summary(&workload.space);
                println!(
                    "  {name:<13} {:>9.0}  {:<8} {}  {summary}",
                    s.prediction.ops_per_s,
                    match (s.top_rank, s.drawn) {
                        (Some(r), _) => format!("top {r}"),
                        (None, true) => "drawn".to_string(),
                        (None, false) => "heur.".to_string(),
                    },
                    if measured.contains(&summary.as_str()) {
                        "kept"
                    } else {
                        "new "
                    },
                );
            }
        }
        let mut predicted = Vec::new();
        let mut measured = Vec::new();
        let mut heuristics = Vec::new();
        let mut descriptions = Vec::new();
        let mut runs: Vec<Vec<(usize, f64)>> = Vec::new();
        for layout in report["layouts"].as_array().ok_or("no layouts")? {
            let description = layout["description"].as_str().ok_or("no description")?;
            let space = tessera_types::parse::parse_space(description)?;
            let (prediction, _) = predict_over_run(
                Model::Tessera,
                &workload,
                &Layout::of_space(&space),
                &params,
                seconds,
            );
            let reported = layout["predicted_ops_per_s"].as_f64().unwrap_or(f64::NAN);
            if overrides.is_empty()
                && !entries_moved
                && (prediction.ops_per_s / reported - 1.0).abs() > 1e-6
            {
                eprintln!(
                    "{name}: {description}: predicted {:.0} now, {reported:.0} when run",
                    prediction.ops_per_s
                );
            }
            // The layout: what follows the attributes.
            let one_line = description.replace('\n', " ");
            let layout_at = [" subspace ", " index ", " tolerate ", " create "]
                .iter()
                .filter_map(|w| one_line.find(w))
                .min()
                .unwrap_or(0);
            descriptions.push(one_line[layout_at..].trim().to_string());
            predicted.push(prediction.ops_per_s);
            // Each run with its round: reports before `runs_rounds`
            // existed number them 1, 2, … (a failed run then leaves the
            // pairing unknown, and the layout is paired with none).
            let rates: Vec<f64> = layout["runs_ops_per_s"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            let rounds: Vec<usize> = match layout["runs_rounds"].as_array() {
                Some(r) => r
                    .iter()
                    .filter_map(Value::as_u64)
                    .map(|r| r as usize)
                    .collect(),
                None if layout["failed_runs"].as_u64().unwrap_or(0) == 0 => {
                    (1..=rates.len()).collect()
                }
                None => Vec::new(),
            };
            runs.push(rounds.into_iter().zip(rates).collect());
            measured.push(
                layout["measured_ops_per_s"]
                    .as_f64()
                    .ok_or("no measurement")?,
            );
            heuristics.push(
                layout["heuristics"]
                    .as_array()
                    .map(|h| {
                        h.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_else(Vec::new),
            );
        }
        let Some(a) = agreement(&predicted, &measured) else {
            continue;
        };
        if let Some(p) = paired(&predicted, &runs) {
            told.push(format!(
                "{name:<13} {:>3} of {:>2} {:>6} {:>8} {:>9}",
                p.apart, p.pairs, p.ordered_alike, p.ordered_against, p.faster_than_predicted_best
            ));
            best_up_to_runs += usize::from(p.faster_than_predicted_best == 0);
            apart_alike += p.ordered_alike;
            apart_against += p.ordered_against;
        }
        let lvl = level(&predicted, &measured).unwrap_or(1.0);
        let about: Vec<f64> = predicted
            .iter()
            .zip(&measured)
            .map(|(p, m)| p / m / lvl - 1.0)
            .collect();
        let about_mean = about.iter().map(|e| e.abs()).sum::<f64>() / about.len() as f64;
        if each_layout {
            for (((e, p), m), d) in about
                .iter()
                .zip(&predicted)
                .zip(&measured)
                .zip(&descriptions)
            {
                println!("  {name:<13} {:+6.1} % {p:8.0} {m:8.0}  {d}", 100.0 * e);
            }
        }
        for (hs, e) in heuristics.iter().zip(&about) {
            let key = if hs.is_empty() {
                "(top only)".to_string()
            } else {
                hs.join(",")
            };
            by_heuristic.entry(key).or_default().push(*e);
        }
        println!(
            "{name:<13} {:5.1} % {:+5.1} % {:5.1} % {:6.2}  {:>3}          ({:.1} %, {:.2})",
            100.0 * a.mean_abs_relative_error,
            100.0 * (lvl - 1.0),
            100.0 * about_mean,
            a.kendall_tau_b.unwrap_or(f64::NAN),
            a.predicted_best_measured_rank,
            100.0
                * report["mean_abs_relative_error"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
            report["kendall_tau_b"].as_f64().unwrap_or(f64::NAN),
        );
        errors.push(a.mean_abs_relative_error);
        abouts.push(about_mean);
        taus.push(a.kendall_tau_b.unwrap_or(0.0));
        best += usize::from(a.predicted_best_measured_rank == 1);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "over {}: error {:.1} %, about the levels {:.1} %, tau-b {:.2}, best chosen in {}",
        errors.len(),
        100.0 * mean(&errors),
        100.0 * mean(&abouts),
        mean(&taus),
        best
    );
    if !told.is_empty() {
        println!(
            "\nwhat the runs tell apart round by round (signed-rank test at 5 %):\n\
             workload      apart    alike  against  faster than the predicted best"
        );
        for line in &told {
            println!("{line}");
        }
        println!(
            "over {}: of the pairs apart, {apart_alike} ordered alike and {apart_against} \
             the other way; no layout measured faster than the predicted best in {best_up_to_runs}",
            told.len()
        );
    }
    println!("\nabout each workload's level, by the heuristics that chose the layout:");
    for (heuristic, es) in &by_heuristic {
        let shown: Vec<String> = es.iter().map(|e| format!("{:+.1}", 100.0 * e)).collect();
        println!(
            "  {heuristic:<40} mean {:+5.1} %: {}",
            100.0 * mean(es),
            shown.join(" ")
        );
    }
    Ok(())
}
