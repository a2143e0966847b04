//! The real-process chaos test (issue 3, point 8).
//!
//! Five daemons and three coordinator members run as processes, each behind
//! a fault-injecting proxy (`common/proxy.rs`). Two spaces, one tolerating
//! one failure and one tolerating two, each with subspaces on `a` and `b`.
//! Worker threads, each with its own client, run put, put_if_not_exist,
//! conditional put, atomic add, delete, get and search on a few keys, while
//! a nemesis kills -9 and restarts daemons (also the target of a running
//! state transfer, right after another daemon died), kills -9 and restarts
//! the coordinator leader, cuts a daemon off the network (both directions,
//! coordinator included; sometimes while the coordinator leader dies too),
//! cuts a daemon off the coordinator only (it still reaches its peers and
//! they it), and pauses a daemon with SIGSTOP; meanwhile answers are
//! dropped on their way back now and then, so clients retry. Between
//! faults it waits until every daemon is available, the cluster is stable
//! and every region has f + 1 replicas again, so that no space loses more
//! than it tolerates.
//!
//! Then everything heals, and the test checks:
//! - the recorded history (invocation and return times, operation, result;
//!   an update without a definite answer is indeterminate) is linearizable
//!   per key, by porcupine (`tests/linearizability`, built with the Go
//!   toolchain; the final reads of every key are part of the history);
//! - no acknowledged write was lost: for every key whose last write was
//!   acknowledged after every other write of it had returned, the final
//!   read shows exactly that write;
//! - every search after healing equals a brute-force filter over the final
//!   state, and every search during the chaos returned only matching
//!   objects;
//! - no server process died on its own.
//!
//! `TESSERA_CHAOS_SECS` sets the length of the fault phase (default 45 s);
//! `TESSERA_CHAOS_SEED` the seed of the workload and the nemesis (printed;
//! timing is real, so a seed does not replay a run exactly).

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::history::{
    check_no_lost_writes, check_processes, check_searches, client_options, read_all,
    space_description, worker, Checker, Rng, Shared, Workload,
};
use common::ProxiedCluster;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_client::{BlockingAdmin, BlockingClient};
use tessera_types::DaemonState;

/// (name, tolerated failures).
const SPACES: [(&str, u32); 2] = [("c1", 1), ("c2", 2)];
const WORKLOAD: Workload = Workload {
    spaces: &SPACES,
    keys: 6,
    // The fault phase's length bounds the workers; this only caps them.
    ops_per_worker_max: 1_000_000,
};
const WORKERS: usize = 6;
const DAEMONS: usize = 5;
const COORDINATORS: usize = 3;
/// How long the cluster may take to settle after a fault.
const SETTLE_TIME_MAX: Duration = Duration::from_secs(120);

/// What the nemesis did.
#[derive(Default, Debug)]
struct Faults {
    daemon_kills: u64,
    coordinator_leader_kills: u64,
    daemon_isolations: u64,
    daemon_pauses: u64,
    coordinator_cuts: u64,
    transfer_target_kills: u64,
    brought_back_online: u64,
}

/// One fault (or two at once), then healing; the kinds take turns.
fn nemesis(
    cluster: &mut ProxiedCluster,
    admin: &BlockingAdmin,
    rng: &mut Rng,
    faults: &mut Faults,
    round: usize,
) {
    let i = rng.below(DAEMONS);
    match round % 7 {
        0 => {
            eprintln!("chaos: kill -9 daemon {i}");
            cluster.kill_daemon(i);
            faults.daemon_kills += 1;
            std::thread::sleep(rng.millis(300, 3500));
            cluster.start_daemon(i);
        }
        1 => {
            let leader = cluster.leader_index(admin, SETTLE_TIME_MAX);
            eprintln!("chaos: kill -9 coordinator leader {leader}");
            cluster.kill_coordinator(leader);
            faults.coordinator_leader_kills += 1;
            std::thread::sleep(rng.millis(500, 3000));
            cluster.start_coordinator(leader);
        }
        2 => {
            eprintln!("chaos: cut daemon {i} off the network");
            cluster.isolate_daemon(i);
            faults.daemon_isolations += 1;
            std::thread::sleep(rng.millis(2500, 5000));
            cluster.heal_daemon(i);
        }
        3 => {
            eprintln!("chaos: pause daemon {i} (SIGSTOP)");
            cluster.pause_daemon(i, true);
            faults.daemon_pauses += 1;
            std::thread::sleep(rng.millis(1500, 4500));
            cluster.pause_daemon(i, false);
        }
        4 => {
            // A second failure that the spaces tolerate: the daemon that
            // receives a region by state transfer dies mid-transfer.
            eprintln!("chaos: kill -9 daemon {i}, then a state transfer's target");
            cluster.kill_daemon(i);
            faults.daemon_kills += 1;
            let target = (0..60).find_map(|_| {
                std::thread::sleep(Duration::from_millis(100));
                let config = admin.config().ok()?;
                let dead = cluster.daemon_id(&config, i)?;
                config.transfers.iter().find_map(|transfer| {
                    let j = (0..DAEMONS)
                        .find(|&j| j != i && cluster.daemon_id(&config, j) == Some(transfer.to))?;
                    // Only if every region keeps a live replica without
                    // both: that is all a space tolerating one failure has.
                    let survives = config.spaces.iter().all(|space| {
                        space.subspaces.iter().flat_map(|l| &l.regions).all(|r| {
                            !r.chain.contains(&transfer.to)
                                || r.chain.iter().any(|&d| d != dead && d != transfer.to)
                        })
                    });
                    survives.then_some(j)
                })
            });
            if let Some(j) = target {
                eprintln!("chaos: kill -9 daemon {j}, a transfer target");
                cluster.kill_daemon(j);
                faults.transfer_target_kills += 1;
                std::thread::sleep(rng.millis(300, 2000));
                cluster.start_daemon(j);
            }
            cluster.start_daemon(i);
        }
        5 => {
            // A partial partition: peers and clients still reach the
            // daemon, but it loses its lease and is replaced.
            eprintln!("chaos: cut daemon {i} off the coordinator only");
            cluster.cut_daemon_from_coordinators(i, true);
            faults.coordinator_cuts += 1;
            std::thread::sleep(rng.millis(2500, 5000));
            cluster.cut_daemon_from_coordinators(i, false);
        }
        _ => {
            // Both fault domains at once.
            eprintln!("chaos: cut daemon {i} off the network and kill -9 the coordinator leader");
            cluster.isolate_daemon(i);
            faults.daemon_isolations += 1;
            std::thread::sleep(rng.millis(500, 2000));
            let leader = cluster.leader_index(admin, SETTLE_TIME_MAX);
            cluster.kill_coordinator(leader);
            faults.coordinator_leader_kills += 1;
            std::thread::sleep(rng.millis(1000, 3000));
            cluster.start_coordinator(leader);
            std::thread::sleep(rng.millis(500, 2000));
            cluster.heal_daemon(i);
        }
    }
}

/// Waits until every daemon is available (an operator brings offline ones
/// back: this test checks safety, `gray_failures.rs` self-healing), the
/// cluster is stable, and every region has f + 1 replicas.
fn settle(cluster: &ProxiedCluster, admin: &BlockingAdmin, faults: &mut Faults) {
    let deadline = Instant::now() + SETTLE_TIME_MAX;
    loop {
        if let Ok(config) = admin.config() {
            for i in 0..cluster.daemons.len() {
                let Some(id) = cluster.daemon_id(&config, i) else {
                    continue;
                };
                if config.daemons[&id].state == DaemonState::Offline
                    && admin.server_online(id).is_ok()
                {
                    faults.brought_back_online += 1;
                }
            }
        }
        let Some(why) = cluster.unsettled(admin) else {
            return;
        };
        if Instant::now() > deadline {
            let config = admin
                .config()
                .map(|c| format!("{c:#?}"))
                .unwrap_or_default();
            panic!(
                "the cluster did not settle within {SETTLE_TIME_MAX:?}: {why}\n{}",
                &config[..config.len().min(20_000)]
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn chaos_history_is_linearizable() {
    let chaos_time = Duration::from_secs(
        std::env::var("TESSERA_CHAOS_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(45),
    );
    let seed: u64 = std::env::var("TESSERA_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::random::<u64>() | 1);
    eprintln!("chaos: seed {seed}, fault phase {chaos_time:?}");

    let mut cluster = ProxiedCluster::start(COORDINATORS, DAEMONS);
    let checker = Checker::build(cluster.dir.path());

    let admin = cluster.admin();
    for (name, f) in SPACES {
        admin
            .add_space(&space_description(name, f))
            .expect("add_space");
    }
    let mut faults = Faults::default();
    settle(&cluster, &admin, &mut faults);

    let shared = Arc::new(Shared::new());
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (shared, coordinators) = (shared.clone(), cluster.coordinator_addrs());
            let worker_seed = seed.wrapping_mul(i as u64 + 7) | 1;
            std::thread::spawn(move || worker(shared, coordinators, WORKLOAD, i, worker_seed))
        })
        .collect();

    // Answers lost on their way back, now and then at a random daemon: the
    // client retries at once, and the point leader must recognise the
    // retry (pending, or among the key's recent writers).
    let dropper = {
        let (shared, proxies) = (
            shared.clone(),
            cluster
                .daemons
                .iter()
                .map(|d| d.proxy.clone())
                .collect::<Vec<_>>(),
        );
        let mut rng = Rng(seed ^ 0x2545_f491_4f6c_dd1d);
        std::thread::spawn(move || {
            while !shared.stop.load(Ordering::SeqCst) {
                std::thread::sleep(rng.millis(100, 400));
                proxies[rng.below(proxies.len())].drop_next_replies(1);
            }
            proxies.iter().map(|p| p.replies_dropped()).sum::<u64>()
        })
    };

    // The nemesis: one fault at a time, then wait until the cluster has
    // repaired itself, until the time is up.
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let deadline = Instant::now() + chaos_time;
    let mut round = 0usize;
    while Instant::now() < deadline {
        std::thread::sleep(rng.millis(200, 1000));
        nemesis(&mut cluster, &admin, &mut rng, &mut faults, round);
        check_processes(&mut cluster);
        settle(&cluster, &admin, &mut faults);
        round += 1;
    }
    shared.stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().expect("a worker panicked");
    }
    let replies_dropped = dropper.join().expect("the reply dropper panicked");
    for daemon in &cluster.daemons {
        daemon.proxy.drop_next_replies(0);
    }
    settle(&cluster, &admin, &mut faults);
    check_processes(&mut cluster);

    // The final state, read key by key (part of the history).
    let client = BlockingClient::connect_with(cluster.coordinator_addrs(), client_options())
        .expect("connect");
    let final_state = read_all(&shared, &client, &WORKLOAD);
    check_searches(&shared, &client, &WORKLOAD, &final_state);
    let history = shared.history.lock().unwrap().clone();
    let keys_checked = check_no_lost_writes(&history, &WORKLOAD, &final_state);

    // Linearizability of the whole history, per key.
    let (code, text, kept) = checker.check(
        cluster.dir.path(),
        &history,
        &format!("tessera-chaos-{seed}"),
    );
    let stats = shared.stats.lock().unwrap();
    let (links_cut, connections_held) = cluster.net.counts();
    eprintln!(
        "chaos summary: seed {seed}; {} operations recorded {:?}; gets without answer {}; \
         searches {} ({} failed, {} objects); faults {faults:?}; proxy: {links_cut} connections \
         cut, {connections_held} held, {replies_dropped} answers dropped; final-state keys checked for lost writes: {keys_checked}\n{text}",
        history.len(),
        stats.by_outcome,
        stats.gets_failed,
        stats.searches,
        stats.searches_failed,
        stats.search_objects,
    );
    assert_eq!(
        code,
        0,
        "the history is not linearizable (kept at {}): {text}",
        kept.display()
    );
}
