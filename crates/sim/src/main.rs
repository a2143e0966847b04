//! Runs the simulator from the command line.
//!
//! ```text
//! cargo run -p tessera-sim -- [--seeds N] [--first S]   # N seeds from S (default 500 from 0)
//! cargo run -p tessera-sim -- --seed S [--trace]         # one seed, with its report or failure
//! ```
//! `--within-f` keeps the nemesis to at most f faulted daemons between two
//! moments when the cluster is whole (see `Options::within_f`); `--losses`
//! lets it lose daemons of replex seeds for good, so that their regions are
//! rebuilt (see `Options::losses`); `--power-loss` lets it crash every
//! daemon at once now and then (see `Options::power_loss`).
//! Exits with status 1 if any seed fails; each failure prints its seed.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| -> Option<u64> {
        let i = args.iter().position(|a| a == flag)?;
        let v = args.get(i + 1)?;
        Some(v.parse().unwrap_or_else(|_| {
            eprintln!("{flag} needs a number, not {v:?}");
            std::process::exit(2)
        }))
    };
    let options = tessera_sim::Options {
        trace: args.iter().any(|a| a == "--trace"),
        within_f: args.iter().any(|a| a == "--within-f"),
        losses: args.iter().any(|a| a == "--losses"),
        power_loss: args.iter().any(|a| a == "--power-loss"),
    };
    if let Some(seed) = value("--seed") {
        return match tessera_sim::run_opts(seed, options) {
            Ok(report) => {
                println!("{report:#?}");
                ExitCode::SUCCESS
            }
            Err(failure) => {
                eprintln!("{failure}");
                ExitCode::FAILURE
            }
        };
    }
    let count = value("--seeds").unwrap_or(500);
    let first = value("--first").unwrap_or(0);
    let summary = tessera_sim::run_many(first, count, options, |f| eprintln!("{f}\n"));
    println!("{summary}");
    if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
