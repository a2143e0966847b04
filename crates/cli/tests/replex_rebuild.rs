//! Rebuilding lost replex regions (issue 13, point 5) with real processes:
//! a Replex-3 space (key subspace, hybrid, replex) under writers doing
//! relocating puts, atomic adds, deletes and gets; kill -9 of the daemon
//! leading a key region, which the coordinator declares lost once it has
//! been silent for the lost timeout (no operator involved), its regions
//! rebuilt on other daemons from the other replexes; then a second kill
//! after that rebuild joined; then the first victim restarted on its old
//! disk, which must be refused and stop without serving anything. Every
//! acknowledged write must be there at the end (a sequential model per
//! worker, each owning its keys; an unacknowledged write may or may not
//! be), every region must hold exactly the objects its part places there
//! (read region by region from its daemon), and no call may fail for a
//! reason other than waiting for a lost region (OFFLINE).
//!
//! Prints the figures: time from each kill to the rebuilt regions joining,
//! objects rebuilt, failed calls, wrong answers (`-- --nocapture`).

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{wait_for, Cluster};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{BlockingClient, ClientError, Outcome, Record, Value};
use tessera_protocol::{
    read_frame, write_frame, DaemonRequest, DaemonResponse, Message, SearchAfter, Status, Transport,
};
use tessera_types::{coordinate::key_bytes, Configuration, DaemonId, Epoch, Object, RegionId};
use tokio::io::AsyncWriteExt;

const SPACE: &str = "space r key int k attributes int a, int b \
                     replex a hybrid k, a groups 2, 2 create 4 partitions";
const DAEMONS: usize = 7;
const WORKERS: usize = 3;
const KEYS_PER_WORKER: usize = 40;
/// Each writer stops by itself after this many calls (bounded work), well
/// beyond what the test needs (4,000–5,500 calls in all here): at 3,000
/// the writers once ran out before the last phase, which then waited for
/// progress that could not come.
const OPS_PER_WORKER_MAX: u64 = 20_000;
const REBUILD_TIMEOUT: Duration = Duration::from_secs(120);

/// Keys and values spread over the whole int axis: coordinates are
/// order-preserving, so they fall into every region.
fn spread(i: usize, n: usize) -> i64 {
    (i as i64 - n as i64 / 2) * (i64::MAX / n as i64)
}

fn key_of(worker: usize, i: usize) -> i64 {
    spread(worker * KEYS_PER_WORKER + i, WORKERS * KEYS_PER_WORKER)
}

/// What a worker knows of one of its keys: the object (or its absence)
/// after its last acknowledged write, or nothing after a call whose
/// outcome is unknown.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Known {
    Exactly(Option<(i64, i64)>),
    Unknown,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    ops: AtomicU64,
    /// Writers that made all their calls and stopped.
    finished: AtomicU64,
    /// Calls that ran out of retries waiting for a lost region (OFFLINE).
    waited: AtomicU64,
    /// Calls that failed for any other reason.
    failed: Mutex<Vec<String>>,
    /// Answers that contradict the worker's model.
    wrong: Mutex<Vec<String>>,
    models: Mutex<BTreeMap<i64, Known>>,
}

impl Shared {
    /// Notes a failed call: OFFLINE is the documented waiting (the update
    /// crosses a region without a daemon until it is rebuilt).
    fn failure(&self, what: &str, e: &ClientError) {
        if e.status() == Status::Offline {
            self.waited.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.lock().unwrap().push(format!("{what}: {e}"));
        }
    }
}

fn decode(record: &Record) -> (i64, i64) {
    let int = |name| match record.get(name) {
        Some(Value::Int(i)) => *i,
        other => panic!("{name} is {other:?}"),
    };
    (int("a"), int("b"))
}

fn worker(client: BlockingClient, w: usize, shared: Arc<Shared>) {
    let mut rng = StdRng::seed_from_u64(0x5eed + w as u64);
    let mut model: BTreeMap<usize, Known> = (0..KEYS_PER_WORKER)
        .map(|i| (i, Known::Exactly(None)))
        .collect();
    let mut ops = 0;
    while !shared.stop.load(Ordering::Relaxed) && ops < OPS_PER_WORKER_MAX {
        ops += 1;
        shared.ops.fetch_add(1, Ordering::Relaxed);
        let i = rng.gen_range(0..KEYS_PER_WORKER);
        let key = key_of(w, i);
        let known = model[&i];
        let wrong = |what: String| shared.wrong.lock().unwrap().push(what);
        match rng.gen_range(0..10) {
            // A put with a new `a`: the object moves in the hybrid and the
            // replex.
            0..=3 => {
                let (a, b) = (spread(rng.gen_range(0..16), 16), rng.gen_range(0..1000));
                let attrs = [("a", Value::Int(a)), ("b", Value::Int(b))];
                match client.put("r", Value::Int(key), attrs) {
                    Ok(Outcome::Done) => {
                        model.insert(i, Known::Exactly(Some((a, b))));
                    }
                    Ok(other) => wrong(format!("put {key}: {other:?}")),
                    Err(e) => {
                        shared.failure("put", &e);
                        model.insert(i, Known::Unknown);
                    }
                }
            }
            4..=6 => match client.atomic_add("r", Value::Int(key), [("b", Value::Int(1))]) {
                Ok(Outcome::Done) => match known {
                    Known::Exactly(Some((a, b))) => {
                        model.insert(i, Known::Exactly(Some((a, b + 1))));
                    }
                    Known::Exactly(None) => wrong(format!("add {key}: done on an absent key")),
                    Known::Unknown => {}
                },
                Ok(Outcome::NotFound) => match known {
                    Known::Exactly(Some(_)) => wrong(format!("add {key}: not found")),
                    _ => {
                        model.insert(i, Known::Exactly(None));
                    }
                },
                Ok(other) => wrong(format!("add {key}: {other:?}")),
                Err(e) => {
                    shared.failure("add", &e);
                    if known != Known::Exactly(None) {
                        model.insert(i, Known::Unknown);
                    }
                }
            },
            7 => match client.del("r", Value::Int(key)) {
                Ok(Outcome::Done | Outcome::NotFound) => {
                    model.insert(i, Known::Exactly(None));
                }
                Ok(other) => wrong(format!("del {key}: {other:?}")),
                Err(e) => {
                    shared.failure("del", &e);
                    model.insert(i, Known::Unknown);
                }
            },
            _ => match client.get("r", Value::Int(key)) {
                Ok(found) => {
                    let got = found.as_ref().map(decode);
                    if let Known::Exactly(expected) = known {
                        if got != expected {
                            wrong(format!("get {key}: {got:?}, expected {expected:?}"));
                        }
                    }
                }
                Err(e) => shared.failure("get", &e),
            },
        }
    }
    let mut models = shared.models.lock().unwrap();
    models.extend(model.into_iter().map(|(i, k)| (key_of(w, i), k)));
    shared.finished.fetch_add(1, Ordering::Relaxed);
}

/// Every object region `region` of space `space` holds, read from its
/// daemon at `addr` page by page (a search without predicates).
fn region_objects(
    addr: &str,
    epoch: Epoch,
    space: tessera_types::SpaceId,
    region: RegionId,
) -> Option<Vec<Object>> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (mut read, mut write) = Transport::plain()
            .connect(addr, Duration::from_secs(10))
            .await
            .ok()?
            .into_split();
        let mut objects = Vec::new();
        let mut after = None;
        for id in 1.. {
            let request = DaemonRequest::Search {
                space,
                region,
                checks: Vec::new(),
                sort: None,
                after: after.clone(),
                limit: Some(200),
                auth: Default::default(),
                within: None,
            };
            let msg = Message::DaemonRequest { id, epoch, request };
            write_frame(&mut write, &msg).await.ok()?;
            write.flush().await.ok()?;
            let answer =
                tokio::time::timeout(Duration::from_secs(30), read_frame(&mut read, 1 << 26))
                    .await
                    .ok()?
                    .ok()?;
            let Message::DaemonResponse {
                response:
                    DaemonResponse::SearchPage {
                        objects: page,
                        more,
                    },
                ..
            } = answer
            else {
                eprintln!("region {region} at {addr}: {answer:?}");
                return None; // a newer epoch, say: asked again
            };
            let page: Vec<Object> = page
                .iter()
                .map(|(_, o)| o.decode().expect("a well-formed object"))
                .collect();
            if let Some(last) = page.last() {
                after = Some(SearchAfter {
                    key: key_bytes(&last.values[0]),
                    sort_value: None,
                });
            }
            objects.extend(page);
            if !more {
                break;
            }
        }
        Some(objects)
    })
}

/// The configuration once `victim` holds nothing and every region of the
/// space has a daemon again with no rebuild running; the rebuilds seen on
/// the way, by region.
fn wait_rebuilt(
    client: &BlockingClient,
    victim: DaemonId,
    seen: &mut BTreeMap<RegionId, DaemonId>,
) -> Arc<Configuration> {
    wait_for("the lost regions to be rebuilt", REBUILD_TIMEOUT, || {
        let config = client.refresh(Duration::from_millis(200)).ok()?;
        for b in &config.rebuilds {
            seen.insert(b.region, b.to);
        }
        let space = config.space("r")?;
        let whole = space
            .subspaces
            .iter()
            .flat_map(|l| &l.regions)
            .all(|r| r.chain.len() == 1 && r.chain[0] != victim);
        (whole && config.rebuilds.is_empty()).then_some(config)
    })
}

/// No daemon holds two regions of different parts that can hold one
/// object (the placement rule kept by the rebuild targets).
fn assert_copies_apart(config: &Configuration) {
    let space = config.space("r").unwrap();
    let parts = &space.subspaces;
    for (k, p) in parts.iter().enumerate() {
        for o in parts.iter().skip(k + 1) {
            for (i, r) in p.regions.iter().enumerate() {
                for (j, s) in o.regions.iter().enumerate() {
                    if r.chain == s.chain {
                        assert!(
                            !tessera_types::replex::can_share(p, i, o, j),
                            "regions {} and {} share daemon {:?}",
                            r.id,
                            s.id,
                            r.chain
                        );
                    }
                }
            }
        }
    }
}

/// Whether every region `victim` holds could move to another available
/// daemon holding no region able to share an object with it (checked
/// pair by pair): the strict placement rule leaves a rebuild target.
fn rebuildable(config: &Configuration, victim: DaemonId) -> bool {
    let space = config.space("r").unwrap();
    let parts = &space.subspaces;
    let holders = config
        .daemons
        .values()
        .filter(|d| d.id != victim && d.state == tessera_types::DaemonState::Available);
    let mut candidates: Vec<DaemonId> = holders.map(|d| d.id).collect();
    for (k, p) in parts.iter().enumerate() {
        for (i, r) in p.regions.iter().enumerate() {
            if r.chain != vec![victim] {
                continue;
            }
            // Each lost region needs a target beside none of its copies;
            // this keeps the daemons fit for all of them (they were
            // placed together, so they share no object).
            candidates.retain(|d| {
                parts.iter().enumerate().all(|(q, o)| {
                    q == k
                        || o.regions.iter().enumerate().all(|(j, s)| {
                            s.chain != vec![*d] || !tessera_types::replex::can_share(p, i, o, j)
                        })
                })
            });
        }
    }
    !candidates.is_empty()
}

/// Every region in `lost` has a daemon again, not `victim`, and the
/// target of the rebuild the configurations showed for it (rebuilds of
/// small regions may begin and end between two configurations a client
/// sees).
fn assert_joined(
    config: &Configuration,
    lost: &BTreeSet<RegionId>,
    victim: DaemonId,
    seen: &BTreeMap<RegionId, DaemonId>,
) {
    for region in lost {
        let chain = &config.region(*region).unwrap().2.chain;
        assert!(
            chain.len() == 1 && chain[0] != victim,
            "region {region}: {chain:?}"
        );
        if let Some(to) = seen.get(region) {
            assert_eq!(chain, &vec![*to], "region {region} joined on its target");
        }
    }
}

/// How long a silent daemon's replex regions wait for it before the
/// coordinator declares it lost and rebuilds them.
const LOST_TIMEOUT_MS: &str = "3000";

/// The process index of the daemon with this id.
fn index_of(cluster: &Cluster, config: &Configuration, victim: DaemonId) -> usize {
    let addr = &config.daemons[&victim].addr;
    (0..DAEMONS)
        .find(|i| &cluster.daemon_addr(*i) == addr)
        .expect("a daemon of this cluster")
}

/// Kills the daemon process with this id (kill -9). Nobody tells the
/// coordinator: its leader takes the daemon offline after the failure
/// timeout and declares it lost after the lost timeout. Returns when the
/// process was killed.
fn kill(cluster: &mut Cluster, config: &Configuration, victim: DaemonId) -> Instant {
    let index = index_of(cluster, config, victim);
    cluster.procs.kill(&format!("daemon-{index}"));
    Instant::now()
}

/// Restarts the daemon process `index`, which was declared lost, on its old
/// data directory: it must be refused and stop, and the configuration must
/// never list it again.
fn restart_refused(cluster: &mut Cluster, client: &BlockingClient, index: usize, victim: DaemonId) {
    cluster.start_daemon(index);
    let name = format!("daemon-{index}");
    let proc = cluster
        .procs
        .procs
        .iter_mut()
        .find(|p| p.name == name)
        .expect("restarted");
    let status = common::wait_exit(&mut proc.child, Duration::from_secs(60));
    assert!(!status.success(), "a lost daemon's restart exited cleanly");
    let log = proc.log_tail(20);
    assert!(log.contains("declared lost"), "its log says why: {log}");
    let config = client.refresh(Duration::ZERO).unwrap();
    assert!(
        config
            .daemons
            .get(&victim)
            .is_none_or(|d| d.state != tessera_types::DaemonState::Available),
        "the lost daemon {victim} is back in the configuration"
    );
}

#[test]
fn lost_replex_regions_are_rebuilt_and_no_acknowledged_write_is_lost() {
    let mut cluster = Cluster::start_with(DAEMONS, &["--lost-timeout-ms", LOST_TIMEOUT_MS], &[]);
    cluster.admin().add_space(SPACE).expect("add_space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    let shared = Arc::new(Shared::default());
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
            let shared = shared.clone();
            std::thread::spawn(move || worker(client, w, shared))
        })
        .collect();
    let warm = |n: u64| {
        wait_for("the writers to make progress", REBUILD_TIMEOUT, || {
            let done = shared.finished.load(Ordering::Relaxed) == WORKERS as u64;
            (done || shared.ops.load(Ordering::Relaxed) >= n).then_some(())
        })
    };
    warm(300);

    // First kill: the daemon leading key region 0 (a point leader).
    let config = client.refresh(Duration::ZERO).unwrap();
    let space = config.space("r").unwrap();
    let first = space.subspaces[0].regions[0].chain[0];
    let lost_first: BTreeSet<RegionId> = space
        .subspaces
        .iter()
        .flat_map(|l| &l.regions)
        .filter(|r| r.chain == vec![first])
        .map(|r| r.id)
        .collect();
    let first_index = index_of(&cluster, &config, first);
    let killed = kill(&mut cluster, &config, first);
    let mut seen = BTreeMap::new();
    let after_first = wait_rebuilt(&client, first, &mut seen);
    let first_join = killed.elapsed();
    assert_copies_apart(&after_first);
    assert_joined(&after_first, &lost_first, first, &seen);

    // Second kill, after that rebuild joined: a daemon of the replex or
    // the hybrid whose regions have somewhere to go.
    let ops_before = shared.ops.load(Ordering::Relaxed);
    warm(ops_before + 200);
    let space = after_first.space("r").unwrap();
    let second = space
        .subspaces
        .iter()
        .skip(1)
        .flat_map(|l| &l.regions)
        .map(|r| r.chain[0])
        .find(|d| rebuildable(&after_first, *d))
        .expect("a daemon whose regions can be rebuilt elsewhere");
    let lost_second: BTreeSet<RegionId> = space
        .subspaces
        .iter()
        .flat_map(|l| &l.regions)
        .filter(|r| r.chain == vec![second])
        .map(|r| r.id)
        .collect();
    let killed = kill(&mut cluster, &after_first, second);
    seen.clear();
    let after_second = wait_rebuilt(&client, second, &mut seen);
    let second_join = killed.elapsed();
    assert_copies_apart(&after_second);
    assert_joined(&after_second, &lost_second, second, &seen);

    // The first victim comes back with its stale disk: refused, it stops.
    restart_refused(&mut cluster, &client, first_index, first);

    warm(shared.ops.load(Ordering::Relaxed) + 200);
    shared.stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }

    // Every acknowledged write is there.
    let models = shared.models.lock().unwrap().clone();
    let mut truth: BTreeMap<i64, Option<(i64, i64)>> = BTreeMap::new();
    let mut wrong_final = Vec::new();
    for (&key, &known) in &models {
        let got = client
            .get("r", Value::Int(key))
            .expect("get after the rebuilds");
        let got = got.as_ref().map(decode);
        if let Known::Exactly(expected) = known {
            if got != expected {
                wrong_final.push(format!("key {key}: {got:?}, acknowledged {expected:?}"));
            }
        }
        truth.insert(key, got);
    }

    // Every region holds exactly the objects its part places there.
    let config = client.refresh(Duration::ZERO).unwrap();
    let space = config.space("r").unwrap().clone();
    let mut rebuilt_objects = 0;
    let rebuilt: BTreeSet<RegionId> = lost_first.union(&lost_second).copied().collect();
    wait_for(
        "every region to hold its part's objects",
        REBUILD_TIMEOUT,
        || {
            let config = client.refresh(Duration::ZERO).ok()?;
            let mut count = 0;
            for layout in &space.subspaces {
                let mut held: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
                for region in &layout.regions {
                    let daemon = config.region(region.id)?.2.chain[0];
                    let addr = &config.daemons[&daemon].addr;
                    for object in region_objects(addr, config.epoch, space.id, region.id)? {
                        if layout.region_of(&object).id != region.id {
                            eprintln!("region {} holds {object:?}, not its own", region.id);
                            return None;
                        }
                        if rebuilt.contains(&region.id) {
                            count += 1;
                        }
                        let int = |v: &Value| match v {
                            Value::Int(i) => *i,
                            other => panic!("{other:?}"),
                        };
                        let values = (int(&object.values[1]), int(&object.values[2]));
                        held.insert(int(&object.values[0]), values);
                    }
                }
                let expected: BTreeMap<i64, (i64, i64)> = truth
                    .iter()
                    .filter_map(|(k, v)| Some((*k, (*v)?)))
                    .collect();
                if held != expected {
                    let missing: Vec<_> = expected
                        .iter()
                        .filter(|(k, v)| held.get(k) != Some(v))
                        .collect();
                    let extra: Vec<_> = held
                        .iter()
                        .filter(|(k, v)| expected.get(k) != Some(v))
                        .collect();
                    eprintln!(
                        "part {:?}: missing or different {missing:?}; extra {extra:?}",
                        layout.part
                    );
                    return None;
                }
            }
            rebuilt_objects = count;
            Some(())
        },
    );

    let failed = shared.failed.lock().unwrap().clone();
    let wrong = shared.wrong.lock().unwrap().clone();
    eprintln!(
        "replex rebuild: first kill (daemon {first}, {} regions) to joined {:.1?}; \
         second kill (daemon {second}, {} regions) to joined {:.1?}",
        lost_first.len(),
        first_join,
        lost_second.len(),
        second_join
    );
    eprintln!(
        "replex rebuild: {} operations, {} objects now in rebuilt regions, \
         {} calls waited out (OFFLINE), {} failed calls, {} wrong answers, \
         {} acknowledged writes missing",
        shared.ops.load(Ordering::Relaxed),
        rebuilt_objects,
        shared.waited.load(Ordering::Relaxed),
        failed.len(),
        wrong.len(),
        wrong_final.len()
    );
    assert!(failed.is_empty(), "failed calls: {failed:?}");
    assert!(wrong.is_empty(), "wrong answers: {wrong:?}");
    assert!(wrong_final.is_empty(), "lost writes: {wrong_final:?}");
    assert!(rebuilt_objects > 0, "the rebuilt regions hold nothing");
}
