//! `tessera-sim`: a deterministic simulation of a Tessera cluster.
//!
//! Everything runs on one thread in simulated time: five daemons (the real
//! [`ReplicaCore`] over an in-memory engine, the real state-transfer
//! bookkeeping, a lease from heartbeats), the coordinator (the real
//! [`ClusterState`] and [`FailureDetector`]; its Raft group is modelled as
//! one state machine that can become unavailable for a while, which is what
//! a leader crash or a lost majority looks like from outside), and clients
//! that retry with the same request id. The network delays, drops,
//! duplicates and reorders messages and can cut a daemon off.
//!
//! A seed fixes everything: the knobs (loss, duplication, delay, which
//! faults) and every random choice. Phase 1 runs the workload while a
//! nemesis injects faults, never taking the last healthy replica of any
//! region. Phase 2 heals everything and requires every operation to finish
//! and the cluster to settle. Then the checkers run: per-key
//! linearizability of the history (which covers acknowledged writes lost),
//! every replica of every region equal, every object in exactly the regions
//! its attributes map to, and epochs only growing at every daemon.

pub mod check;
pub mod disk;

mod clients;
mod converge;
mod coord;
mod daemons;
mod knobs;
mod nemesis;
mod net;
mod pause;
mod report;
mod trace;
mod world;

pub use knobs::{Knobs, Rng};
pub use report::{Failure, Holding, Report, Summary, Violation};
use world::World;

/// Runs `count` seeds from `first` with `options`, calling `on_failure`
/// for each failure.
pub fn run_many(
    first: u64,
    count: u64,
    options: Options,
    mut on_failure: impl FnMut(&Failure),
) -> Summary {
    let mut summary = Summary {
        seeds: count,
        ..Summary::default()
    };
    for seed in first..first + count {
        match run_opts(seed, options) {
            Ok(report) => summary.add(&report),
            Err(f) => {
                on_failure(&f);
                summary.failed.push(seed);
            }
        }
    }
    summary
}

/// Runs one seed to completion (tracing to stderr when the environment
/// sets `TESSERA_SIM_TRACE`).
pub fn run(seed: u64) -> Result<Report, Failure> {
    let trace = std::env::var_os("TESSERA_SIM_TRACE").is_some();
    run_opts(
        seed,
        Options {
            trace,
            within_f: false,
        },
    )
}

/// How to run a seed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Trace every fault, epoch, chain message and client operation to
    /// stderr.
    pub trace: bool,
    /// Keep the nemesis within the guarantee: at most f daemons faulted
    /// (crashed or cut off) between two moments when the cluster is whole
    /// again. Without it the nemesis only spares each region's last
    /// healthy replica, which can take more than f replicas of a region
    /// before re-replication ends.
    pub within_f: bool,
}

/// Runs one seed with `options`.
pub fn run_opts(seed: u64, options: Options) -> Result<Report, Failure> {
    let mut rng = Rng::new(seed);
    let knobs = Knobs::from_seed(&mut rng);
    let mut world = World::new(seed, knobs, rng);
    world.trace = options.trace;
    world.within_f = options.within_f;
    match world.run().and_then(|()| world.check()) {
        Ok(()) => {
            world.report.sim_ms = world.now;
            world.report.epochs = world.coord.state.epoch.0;
            world.report.transfers = world.coord.state.transfer_id_next - 1;
            Ok(world.report)
        }
        Err(what) => Err(Failure {
            seed,
            knobs: world.report.knobs,
            at_ms: world.now,
            what,
        }),
    }
}
