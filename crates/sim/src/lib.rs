//! `tessera-sim`: a deterministic simulation of a Tessera cluster.
//!
//! Everything runs on one thread in simulated time, and every protocol
//! decision is made by the code that ships: five daemons, each the real
//! [`DaemonNode`](tessera_daemon::node::DaemonNode) over a simulated disk
//! ([`disk`]: an in-memory engine that survives crashes and can fill up or
//! break); a coordinator of three members sharing the real
//! [`ClusterState`](tessera_coordinator::state::ClusterState), the
//! leader's real [`CoordinatorNode`](tessera_coordinator::node::CoordinatorNode)
//! answering heartbeats and detecting failures (Raft itself is not
//! simulated, only what it looks like from outside: the group can lose its
//! majority for a while, and a frozen leader is replaced by an election in
//! a new term); and clients that retry with the same request id. The
//! simulator itself holds no protocol logic, only the world around it:
//!
//! | module | what it models |
//! | --- | --- |
//! | `world` | processes, the event queue, simulated time |
//! | `net` | delay, loss, duplication, reordering; cuts of a daemon from everyone or from the coordinator, both ways or one way |
//! | `daemons`, `coord` | carrying out what the nodes output (the shells' part) |
//! | `pause` | processes frozen while time runs on, resumed with stale state |
//! | `nemesis` | which fault, on whom, for how long; healing |
//! | `power` | power losses: every daemon crashing at once (an option) |
//! | `clients` | the workload and the history it records |
//! | `lookups`, `searches` | reads through global indexes, and through subspaces and regions' indexes, turned into claims the checker judges |
//! | `converge`, [`check`] | settling after healing, and the checks |
//!
//! A seed fixes everything: the knobs (loss, duplication, delay, which
//! faults) and every random choice. Phase 1 runs the workload while a
//! nemesis crashes daemons, cuts them off (both ways or one way), pauses
//! daemons and coordinator members, takes the coordinator's majority away
//! and fails disks — never the last healthy replica of any region, and
//! with [`Options::within_f`] never more than f daemons until the cluster
//! is whole again. Phase 2 heals everything and requires the cluster to
//! recover by itself (liveness): every operation finishes, every daemon
//! runs, Available at the current epoch, every region has f + 1 replicas,
//! and every key's final read returns. Then the safety checkers run:
//! per-key linearizability of the history (which covers acknowledged
//! writes lost; and as each update is acknowledged, every copy holds it),
//! every replica of every region equal, every object in
//! exactly the regions its attributes map to, the settled objects those
//! the final reads returned, and epochs only growing at every daemon.
//!
//! About one seed in five runs a replex space instead ([`ReplexSpace`]:
//! the key subspace and a replex, maybe a hybrid between them; one
//! replica per region). There the nemesis may fail any daemon: its
//! regions wait for it as orphans. With [`Options::losses`] it also loses
//! daemons for good (`loss`): the operator kills each at the coordinator
//! and starts a fresh daemon, and the coordinator rebuilds the lost
//! regions from the other replexes.

pub mod check;
pub mod disk;

mod acked;
mod clients;
mod converge;
mod coord;
mod daemons;
mod knobs;
mod lookups;
mod loss;
mod nemesis;
mod net;
mod pause;
mod power;
mod replex;
mod report;
mod searches;
mod trace;
mod world;

pub use knobs::{Knobs, ReplexSpace, Rng};
pub use report::{Failure, Faults, Holding, Report, Summary, Violation};
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
            Ok(report) => {
                summary.replex_seeds += u64::from(report.replex);
                summary.add(&report);
            }
            Err(f) => {
                on_failure(&f);
                summary.replex_seeds += u64::from(f.replex);
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
            ..Options::default()
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
    /// Let the nemesis lose daemons of replex seeds for good
    /// (`Knobs::losses`; see `loss.rs`), so that the coordinator rebuilds
    /// their regions. Off by default; CI sweeps 500 seeds with it within f
    /// (`tests/seeds.rs`). Outside f, sweeps with it still find the rare
    /// update in flight that loses every copy as daemons are lost one
    /// after another (docs/design/replex.md, "What remains").
    pub losses: bool,
    /// Let the nemesis cut the power now and then (`power.rs`): every
    /// daemon crashes at once and restarts with its disk, beyond f, so
    /// that every region waits as an orphan for the daemon that left it
    /// last. Off by default; CI sweeps seeds with it (`tests/seeds.rs`).
    pub power_loss: bool,
}

/// Runs one seed with `options`.
pub fn run_opts(seed: u64, options: Options) -> Result<Report, Failure> {
    let mut rng = Rng::new(seed);
    let knobs = Knobs::from_seed(&mut rng);
    let mut world = World::new(seed, knobs, rng);
    world.trace = options.trace;
    world.within_f = options.within_f;
    world.losses = options.losses;
    world.power_loss = options.power_loss;
    match world.run().and_then(|()| world.check()) {
        Ok(()) => {
            world.count_rebuilds();
            world.report.sim_ms = world.now;
            world.report.epochs = world.coord.state.epoch.0;
            world.report.transfers = world.coord.state.transfer_id_next - 1;
            for daemon in world.daemons.values() {
                if let Some(node) = &daemon.node {
                    world.report.tombstones_collected += node.tombstones_collected();
                    world.report.stale_dropped += node.stale_dropped();
                }
            }
            Ok(world.report)
        }
        Err(what) => Err(Failure {
            seed,
            replex: world.report.replex,
            knobs: world.report.knobs,
            at_ms: world.now,
            what,
        }),
    }
}
