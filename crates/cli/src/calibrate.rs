//! `tessera calibrate`: measures the advisor's cost-model parameters on
//! the running cluster (`tessera_bench::calibrate`), fits them
//! (`tessera_advisor::calibrate::fit`), stores them in the cluster's
//! configuration through the coordinator (averaged with the calibrations
//! stored before, `Params::pooled`, unless `--fresh`), and prints them
//! with their fit error.

use crate::Target;
use anyhow::Context;
use serde_json::{json, Value};
use tessera_advisor::calibrate::{fit, Fit};
use tessera_advisor::Params;
use tessera_bench::calibrate::{
    measure, CalibrateOptions, CalibrationRun, SATURATING_WORKERS, SCRATCH_PREFIX,
};
use tessera_types::calibration::{ADVISOR_CALIBRATION_VERSION, CALIBRATIONS_MAX};
use tessera_types::AdvisorCalibration;

/// The arguments of `calibrate`.
#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Seconds each measured step runs (47 steps on a cluster of two or
    /// more daemons, fewer on one).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Operations in flight: enough to saturate the cluster, as the
    /// model's costs assume; `bench layouts` runs as many. The stored
    /// calibration does not record it: after changing it, start over
    /// with `--fresh` rather than average the two loads.
    #[arg(long, default_value_t = SATURATING_WORKERS)]
    workers: usize,
    /// Objects loaded into the scratch space searches run on.
    #[arg(long, default_value_t = 4000)]
    objects: u64,
    /// Partitions of every scratch space.
    #[arg(long, default_value_t = 16)]
    partitions: u32,
    /// Times every step is measured (the whole sequence again, on new
    /// scratch spaces); each step's median is fitted. 3 narrows what one
    /// slow second of a busy machine does to a step.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Seconds of gets on a small space of its own before every step and
    /// after each space's last: each step's cost is scaled by how fast
    /// those ran against their median over the calibration, so that a
    /// slow minute of the machine is not fitted as a cost. 0: no probe.
    #[arg(long, default_value_t = 0.5)]
    probe_seconds: f64,
    /// Store this calibration's parameters alone, dropping those stored
    /// before. Without it, a calibration of the same cluster (as many
    /// daemons, this build's calibration version) is averaged with the
    /// stored parameters, each calibration weighing alike up to the last
    /// eight.
    #[arg(long)]
    fresh: bool,
    /// Print JSON: `{"stored", "parameters" (this calibration's fit),
    /// "stored_parameters" (what was stored: the average), "calibrations",
    /// "started_over", "fits", "steps", "kept", …}`.
    #[arg(long)]
    json: bool,
}

/// The stored calibration the new one joins ([`Params::pooled`]), as
/// parameters and how many calibrations they average, or why the new one
/// starts over instead: it joins one of
/// this build's version measured on as many daemons (`run.daemons`) with
/// as many objects searched (`run.objects`, the reference of the larger
/// space's costs). A calibration of another version measured other steps,
/// one on another cluster other servers.
fn earlier(
    stored: Option<&AdvisorCalibration>,
    run: &CalibrationRun,
    fresh: bool,
) -> Result<(Params, u32), String> {
    let (daemons, objects) = (run.daemons, run.objects as f64);
    match stored {
        _ if fresh => Err("--fresh".into()),
        None => Err("none stored".into()),
        Some(c) if c.version != ADVISOR_CALIBRATION_VERSION => Err(format!(
            "the stored one is version {}, not {ADVISOR_CALIBRATION_VERSION}",
            c.version
        )),
        Some(c) if c.daemons != daemons => Err(format!(
            "the stored one was measured on {} daemons, not {daemons}",
            c.daemons
        )),
        Some(c) if c.larger_reference_objects != Some(objects) => Err(format!(
            "the stored one searched {} objects, not {objects}",
            c.larger_reference_objects.unwrap_or(0.0)
        )),
        Some(c) => Ok((Params::default().calibrated(c), c.calibrations.unwrap_or(1))),
    }
}

/// Runs `calibrate`.
pub async fn run(args: CalibrateArgs, target: &Target) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 600.0,
        "--seconds must be above 0 and at most 600"
    );
    anyhow::ensure!(
        args.probe_seconds.is_finite() && (0.0..=60.0).contains(&args.probe_seconds),
        "--probe-seconds must be 0 to 60"
    );
    let admin = target.admin()?;
    let client = target.client().await?;
    let options = CalibrateOptions {
        seconds: args.seconds,
        workers: args.workers.max(1),
        objects: args.objects,
        put_objects: args.objects.min(1000),
        partitions: args.partitions,
        runs: args.runs,
        probe_seconds: args.probe_seconds,
    };
    eprintln!(
        "calibrate: scratch spaces {SCRATCH_PREFIX}*, {} s per step",
        args.seconds
    );
    let progress = |what: &str| eprintln!("calibrate: {what}");
    let run = measure(&admin, &client, &options, &progress).await?;
    let measurements: Vec<_> = run.steps.iter().map(|s| s.measurement.clone()).collect();
    // Read after measuring: a calibration stored meanwhile is joined.
    let stored = admin.config().await?.advisor;
    let earlier = earlier(stored.as_ref(), &run, args.fresh);
    // A parameter no step determines keeps its default, which would be
    // averaged as if measured: when joining, the stored value is its
    // default instead.
    let defaults = match &earlier {
        Ok((params, _)) => params.clone(),
        Err(_) => Params::default(),
    };
    let mut fitted = fit(&measurements, &defaults).context("fitting the measurements")?;
    // The parameters as `advise` will use them: the daemons measured.
    fitted.params.daemons = run.daemons;
    let (params, calibrations) = match &earlier {
        Ok((params, n)) => (
            fitted.params.pooled(params, *n),
            (n + 1).min(CALIBRATIONS_MAX),
        ),
        Err(_) => (fitted.params.clone(), 1),
    };
    let payload = params.calibration(run.daemons, run.epoch, calibrations, fitted.quality.clone());
    admin.set_advisor_params(payload).await?;
    let stored = Stored {
        params,
        calibrations,
        started_over: earlier.err(),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report_json(&run, &fitted, &stored))
                .context("encoding the report")?
        );
    } else {
        print!("{}", report_text(&run, &fitted, &stored));
    }
    Ok(())
}

/// What `calibrate` stored.
struct Stored {
    /// The parameters: this calibration's, or their average with the
    /// earlier ones.
    params: Params,
    /// How many calibrations they average.
    calibrations: u32,
    /// Why they are this calibration's alone, if they are.
    started_over: Option<String>,
}

fn report_json(run: &CalibrationRun, fitted: &Fit, stored: &Stored) -> Value {
    let steps: Vec<Value> = run
        .steps
        .iter()
        .zip(&fitted.points)
        .map(|(s, p)| {
            json!({
                "step": p.step,
                "group": p.group,
                "ops_per_s": p.measured_s.recip(),
                "errors": s.errors,
                "measured_s": p.measured_s,
                "fitted_s": p.fitted_s,
                "runs_s": s.runs_s,
                "raw_runs_s": s.raw_runs_s,
                "probe_ops_per_s": s.probe_ops_per_s,
                "stored_rows": s.measurement.stored_rows,
            })
        })
        .collect();
    json!({
        "stored": true,
        "daemons": run.daemons,
        "epoch": run.epoch,
        "objects": run.objects,
        "probe": run.probe_reference_ops_per_s.map(|reference| json!({
            "reference_ops_per_s": reference,
            "slowest": run.probe_spread.map(|s| s.0),
            "fastest": run.probe_spread.map(|s| s.1),
        })),
        "parameters": fitted.params,
        "stored_parameters": stored.params,
        "calibrations": stored.calibrations,
        "started_over": stored.started_over,
        "fits": fitted.quality,
        "kept": fitted.kept,
        "steps": steps,
    })
}

fn report_text(run: &CalibrationRun, fitted: &Fit, stored: &Stored) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = match &stored.started_over {
        Some(why) => writeln!(
            out,
            "stored in the configuration: parameters measured on {} daemons ({} objects \
             searched), this calibration's alone ({why})",
            run.daemons, run.objects
        ),
        None => writeln!(
            out,
            "stored in the configuration: parameters measured on {} daemons ({} objects \
             searched), averaged with those stored: {} calibrations (--fresh to start over)",
            run.daemons, run.objects, stored.calibrations
        ),
    };
    match (run.probe_reference_ops_per_s, run.probe_spread) {
        (Some(reference), Some((low, high))) => {
            let _ = writeln!(
                out,
                "speed probe: {reference:.0} gets/s at the median; steps ran at {low:.2}–{high:.2} \
                 of it, and their costs are scaled to it"
            );
        }
        _ => {
            let _ = writeln!(out, "speed probe: none completed; costs as measured");
        }
    }
    let _ = writeln!(out, "  {:<24} {:>10} {:>10}", "", "measured", "stored");
    let measured = parameter_rows(&fitted.params);
    for ((name, value), (_, kept)) in measured.iter().zip(parameter_rows(&stored.params)) {
        let _ = writeln!(out, "  {name:<24} {value:>10} {kept:>10}");
    }
    let _ = writeln!(
        out,
        "\n{:<10} {:>6} {:>8} {:>10}",
        "fit", "points", "R²", "rel. RMS"
    );
    for q in &fitted.quality {
        let _ = writeln!(
            out,
            "{:<10} {:>6} {:>8.4} {:>9.1}%",
            q.op,
            q.points,
            q.r2,
            q.rel_rms * 100.0
        );
    }
    let _ = writeln!(
        out,
        "\n{:<40} {:>10} {:>12} {:>12} {:>7}",
        "step", "ops/s", "measured_s", "fitted_s", "error"
    );
    for (s, point) in run.steps.iter().zip(&fitted.points) {
        let _ = writeln!(
            out,
            "{:<40} {:>10.0} {:>12.3e} {:>12.3e} {:>6.1}%{}",
            point.step,
            point.measured_s.recip(),
            point.measured_s,
            point.fitted_s,
            (point.fitted_s - point.measured_s) / point.measured_s * 100.0,
            if s.errors > 0 {
                format!("  ({} failed, not counted)", s.errors)
            } else {
                String::new()
            }
        );
    }
    for kept in &fitted.kept {
        let _ = writeln!(out, "kept the default of {kept}");
    }
    out
}

/// Each parameter's name and value as `calibrate` prints them.
fn parameter_rows(p: &Params) -> Vec<(&'static str, String)> {
    vec![
        ("T_max (ops/s)", format!("{:.0}", p.t_max_ops_per_s)),
        ("alpha", format!("{:.3}", p.alpha)),
        ("alpha_create", format!("{:.3}", p.alpha_create)),
        ("index_write (delta)", format!("{:.3}", p.index_write)),
        ("request_s (c_req)", format!("{:.3e}", p.request_s)),
        ("beta_s", format!("{:.3e}", p.beta_s)),
        ("result_s (gamma)", format!("{:.3e}", p.result_s)),
        ("range_search_s (rho)", format!("{:.3e}", p.range_search_s)),
        ("range_entry_s (beta_r)", format!("{:.3e}", p.range_entry_s)),
        ("get_s (g)", format!("{:.3e}", p.get_cost_s())),
        ("write_s (w)", format!("{:.3e}", p.write_s)),
        ("insert_s (w_i)", format!("{:.3e}", p.insert_s)),
        ("index_create (delta_c)", format!("{:.3}", p.index_create())),
        ("indexed_create (iota)", format!("{:.3}", p.indexed_create)),
        ("walk_first_s (epsilon)", format!("{:.3e}", p.walk_first_s)),
        ("unbounded_s (u)", format!("{:.3e}", p.unbounded_s)),
        ("handoff_first_s (u1)", format!("{:.3e}", p.handoff_first_s)),
        ("search_base_s (s0)", format!("{:.3e}", p.search_base_s)),
        ("modify_s (m)", format!("{:.3e}", p.modify_s)),
        ("global_index_hop (g)", format!("{:.3}", p.global_index_hop)),
        (
            "global_index_move (mu)",
            format!("{:.3}", p.global_move_hops()),
        ),
        ("lookup_base_s (l0)", format!("{:.3e}", p.lookup_base_s)),
        ("lookup_match_s", format!("{:.3e}", p.lookup_match_cost_s())),
        ("handoff_mixed_s (v)", format!("{:.3e}", p.handoff_mixed_s)),
        ("writes_beside_s (x)", format!("{:.3e}", p.writes_beside_s)),
        ("modify_hop_s (m_h)", format!("{:.3e}", p.modify_hop_s)),
        (
            "larger_search_s (a_L)",
            format!("{:.3e}", p.larger_search_s),
        ),
        ("larger_entry_s (b_L)", format!("{:.3e}", p.larger_entry_s)),
        (
            "larger_reference_objects",
            format!("{:.0}", p.larger_reference_objects),
        ),
        (
            "stored_per_fold (kappa)",
            format!("{:.3}", p.stored_per_fold),
        ),
        (
            "stored_reference_rows",
            format!("{:.0}", p.stored_reference_rows),
        ),
    ]
}
