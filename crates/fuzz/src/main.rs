//! `tessera-fuzz`: runs fuzz targets for a number of executions each and
//! prints what they did; exits non-zero if any input crashed a target.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_fuzz::alloc_guard::AllocationGuard;
use tessera_fuzz::{Report, Target, TARGETS};

/// Watches every allocation's size (see `alloc_guard`).
#[global_allocator]
static ALLOCATOR: AllocationGuard = AllocationGuard;

#[derive(Parser)]
#[command(
    name = "tessera-fuzz",
    about = "Mutation fuzzing of Tessera's decoders and parsers"
)]
struct Cli {
    /// Targets to run, one after another (`frame`, `record`, `space`,
    /// `predicates`); none or `all` for every one.
    targets: Vec<String>,
    /// Executions per target, seeds included.
    #[arg(long, default_value_t = 100_000)]
    runs: u64,
    /// The random seed; the same seed and runs replay the same inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where crashing inputs are written, one file each.
    #[arg(long, default_value = "fuzz-crashes")]
    crash_dir: PathBuf,
    /// Run the one named target once on this file's bytes (a saved crash)
    /// and print what happened.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        for t in &TARGETS {
            println!("{:<11} {}", t.name, t.about);
        }
        return ExitCode::SUCCESS;
    }
    let mut chosen: Vec<&Target> = Vec::new();
    for name in &cli.targets {
        if name == "all" {
            chosen.extend(&TARGETS);
        } else if let Some(t) = tessera_fuzz::target(name) {
            chosen.push(t);
        } else {
            eprintln!("unknown target {name:?}; --list shows them");
            return ExitCode::from(2);
        }
    }
    if chosen.is_empty() {
        chosen.extend(&TARGETS);
    }
    if let Some(path) = &cli.replay {
        return replay(&chosen, path);
    }
    let mut failed = false;
    for target in chosen {
        let report = tessera_fuzz::run(target, cli.runs, cli.seed);
        print_report(target, &report, cli.seed);
        if report.seeds_rejected > 0 {
            eprintln!("{}: {} seed(s) refused", target.name, report.seeds_rejected);
            failed = true;
        }
        if !report.allocations_watched {
            eprintln!("{}: the allocation guard is not installed", target.name);
            failed = true;
        }
        failed |= save_crashes(target, &report, &cli.crash_dir);
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn replay(chosen: &[&Target], path: &PathBuf) -> ExitCode {
    let [target] = chosen else {
        eprintln!("--replay needs exactly one target");
        return ExitCode::from(2);
    };
    let input = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    match tessera_fuzz::runner::execute(target, &input) {
        Ok(outcome) => {
            println!("{}: no crash; accepted: {}", target.name, outcome.accepted);
            ExitCode::SUCCESS
        }
        Err(message) => {
            println!("{}: crash: {message}", target.name);
            ExitCode::FAILURE
        }
    }
}

fn print_report(target: &Target, r: &Report, seed: u64) {
    let secs = r.elapsed.as_secs_f64();
    println!(
        "{}: {} executions, {} crashes (seed {seed}); {} accepted, {} outcome shapes, \
         corpus {}; {:.1} s, {:.0} exec/s; slowest {:.2} ms ({} bytes)",
        target.name,
        r.executions,
        r.crash_count,
        r.accepted,
        r.features,
        r.corpus_len,
        secs,
        r.executions as f64 / secs.max(1e-9),
        r.slowest.0.as_secs_f64() * 1e3,
        r.slowest.1.len(),
    );
}

/// Prints and writes each kept crash; true if there was any.
fn save_crashes(target: &Target, r: &Report, dir: &PathBuf) -> bool {
    if r.crash_count == 0 {
        return false;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("cannot create {}: {e}", dir.display());
    }
    for (i, crash) in r.crashes.iter().enumerate() {
        let path = dir.join(format!("{}-{i}", target.name));
        eprintln!(
            "{}: crash {i}: {}\n  input ({} bytes, written to {}): {:?}",
            target.name,
            crash.message,
            crash.input.len(),
            path.display(),
            String::from_utf8_lossy(&crash.input)
        );
        if let Err(e) = std::fs::write(&path, &crash.input) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
    true
}
