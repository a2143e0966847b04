//! `tessera autopilot`: watch a space's observed mix and propose, or with
//! `--apply` make, a relayout when it has drifted and the model predicts
//! a gain (issue 14, point 6; the decisions are
//! `tessera_advisor::autopilot`'s).
//!
//! It is off unless started: nothing in the cluster relayouts a space by
//! itself. Each round (every `--every` seconds) reads every daemon's shape
//! counts and the configuration (for the space's current layout and the
//! calibrated parameters), and prints one line — or, with `--json`, one
//! JSON object — saying what it decided. A proposal is applied only with
//! `--apply`, by `relayout`, waiting until every part is ready before the
//! next round, so that a round never observes a half-built layout. A round
//! that cannot read the cluster says so on stderr and the next one tries
//! again; a space that does not exist (or is a replex space) ends it.

use crate::advise::{by_name, scrape_shapes, space_held, space_in, ModelArg};
use crate::Target;
use anyhow::Context;
use serde_json::{json, Value};
use std::time::Duration;
use tessera_advisor::autopilot::{Advised, Autopilot, AutopilotError, Settings, Verdict};
use tessera_advisor::Held;
use tessera_advisor::{Options, Params};
use tessera_client::AdminError;

/// The arguments of `autopilot`.
#[derive(clap::Args)]
pub struct AutopilotArgs {
    /// The space to watch.
    #[arg(long)]
    space: String,
    /// The space's object count, for the model. Without it, each round
    /// that advises counts the space's objects and measures their size,
    /// as `advise --space` does.
    #[arg(long)]
    objects: Option<u64>,
    /// Seconds between rounds.
    #[arg(long, default_value_t = 60.0)]
    every: f64,
    /// Advise again once the mix has moved this far (total variation
    /// distance, 0–1) from the mix last advised on.
    #[arg(long, default_value_t = Settings::default().drift)]
    drift: f64,
    /// Propose a layout predicted at least this much faster (0.2: 20 %).
    #[arg(long, default_value_t = Settings::default().min_gain)]
    min_gain: f64,
    /// A window of fewer operations decides nothing.
    #[arg(long, default_value_t = Settings::default().min_ops)]
    min_ops: u64,
    /// Relayout the space to each proposal (without it, only propose).
    #[arg(long)]
    apply: bool,
    /// Stop after this many rounds (default: until interrupted).
    #[arg(long)]
    rounds: Option<u64>,
    /// One JSON object per round: `{"round", "verdict", "ops", "drift",
    /// "gain", "current_ops_per_s", "best_ops_per_s", "best", "applied",
    /// "objects", "object_bytes", "index_entry_bytes", "global_entry_bytes"}`
    /// (what a priced round assumed the space holds).
    #[arg(long)]
    json: bool,
    /// The cost model.
    #[arg(long, value_enum, default_value = "tessera")]
    model: ModelArg,
}

/// Runs `autopilot`.
pub async fn run(args: AutopilotArgs, target: &Target) -> anyhow::Result<()> {
    if !(args.every.is_finite() && args.every > 0.0) {
        anyhow::bail!("--every must be a positive number of seconds");
    }
    let mut pilot = Autopilot::new(Settings {
        drift: args.drift,
        min_gain: args.min_gain,
        min_ops: args.min_ops,
    })?;
    let admin = target.admin()?;
    let options = Options {
        model: args.model.model(),
        ..Options::default()
    };
    let mut round = 0u64;
    loop {
        round += 1;
        match one_round(&args, target, &mut pilot, &options).await {
            Ok((verdict, space, held)) => {
                let applied = match (&verdict, args.apply) {
                    (Verdict::Propose(advised), true) => {
                        let description = advised.best.layout.describe(&space);
                        admin.relayout(&args.space, &description).await?;
                        crate::progress::wait_layout(
                            &admin,
                            &args.space,
                            crate::progress::LAYOUT_WAIT_MAX,
                            Duration::from_millis(250),
                        )
                        .await?;
                        true
                    }
                    _ => false,
                };
                print_round(&args, round, &verdict, &space, held.as_ref(), applied)?;
            }
            Err(e) => match e.downcast_ref::<AutopilotError>() {
                Some(AutopilotError::BadSetting { .. }) => return Err(e),
                _ if e.downcast_ref::<AdminError>().is_some() => return Err(e),
                _ => eprintln!("autopilot round {round}: {e:#}; trying again next round"),
            },
        }
        if args.rounds.is_some_and(|n| round >= n) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs_f64(args.every)).await;
    }
}

/// One round: the configuration, the counts, what the space holds (only
/// for a round that advises), the decision.
async fn one_round(
    args: &AutopilotArgs,
    target: &Target,
    pilot: &mut Autopilot,
    options: &Options,
) -> anyhow::Result<(Verdict, tessera_types::SpaceDesc, Option<Held>)> {
    let config = target.admin()?.config().await?;
    let space = space_in(&config, &args.space)?.clone();
    let params = match &config.advisor {
        Some(c) => Params::default().calibrated(c),
        None => Params::default(),
    }
    .on_cluster(&config);
    let counts = scrape_shapes(&config, &args.space).await?;
    let held = match args.objects {
        Some(objects) => Held::count(objects),
        // Counting reads every key of the space: only when it is priced.
        None if pilot.would_advise(&counts) => space_held(target, &space).await,
        None => Held::default(),
    };
    let verdict = pilot.round(&counts, &space, &held, &params, options)?;
    let priced = matches!(verdict, Verdict::Keep(_) | Verdict::Propose(_));
    Ok((verdict, space, priced.then_some(held)))
}

fn print_round(
    args: &AutopilotArgs,
    round: u64,
    verdict: &Verdict,
    space: &tessera_types::SpaceDesc,
    held: Option<&Held>,
    applied: bool,
) -> anyhow::Result<()> {
    let advised = |name: &str, a: &Advised| -> Value {
        json!({
            "round": round,
            "verdict": name,
            "ops": a.ops,
            "drift": a.drift,
            "gain": a.gain,
            "current_ops_per_s": a.current.ops_per_s,
            "best_ops_per_s": a.best.prediction.ops_per_s,
            "best": a.best.layout.describe(space),
            "applied": applied,
            "objects": held.map(|h| h.objects),
            "object_bytes": held.and_then(|h| h.object_bytes),
            "index_entry_bytes": held.and_then(|h| h.index_entry_bytes),
            "global_entry_bytes": held.map(|h| by_name(space, &h.global_entry_bytes)),
        })
    };
    let doc = match verdict {
        Verdict::TooFew { ops } => json!({"round": round, "verdict": "too_few", "ops": ops}),
        Verdict::Steady { drift } => json!({"round": round, "verdict": "steady", "drift": drift}),
        Verdict::Keep(a) => advised("keep", a),
        Verdict::Propose(a) => advised("propose", a),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&doc).context("encoding a round")?
        );
        return Ok(());
    }
    let line = match verdict {
        Verdict::TooFew { ops } => format!(
            "round {round}: {ops} operations since the last decision, fewer than {}; waiting",
            args.min_ops
        ),
        Verdict::Steady { drift } => {
            format!("round {round}: steady (drift {drift:.3} from the mix last advised on)")
        }
        Verdict::Keep(a) | Verdict::Propose(a) => {
            let drift = a
                .drift
                .map_or("first advice".to_string(), |d| format!("drift {d:.3}"));
            let what = match (verdict, applied) {
                (Verdict::Keep(_), _) => "keep the current layout",
                (_, true) => "applied",
                (_, false) => "propose (run with --apply to apply)",
            };
            format!(
                "round {round}: {drift}, {} operations{}; current {:.1} ops/s, best {:.1} ops/s ({:+.1} %): {what}: {}",
                a.ops,
                held.map_or(String::new(), held_text),
                a.current.ops_per_s,
                a.best.prediction.ops_per_s,
                a.gain * 100.0,
                a.best.layout.describe(space)
            )
        }
    };
    println!("{line}");
    Ok(())
}

/// What a priced round assumed the space holds, for its line.
fn held_text(held: &Held) -> String {
    match held.object_bytes {
        Some(bytes) => format!(" on {} objects of {bytes:.0} bytes", held.objects),
        None => format!(" on {} objects", held.objects),
    }
}
