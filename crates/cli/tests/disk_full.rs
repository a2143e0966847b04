//! A daemon whose disk fills up under writes, with `tolerate 1 failure`:
//! it notices that it can no longer persist, stops acknowledging, asks the
//! coordinator to take it out of every chain, and exits with an error; its
//! regions are re-replicated as after a crash. No client call fails and no
//! acknowledged write is lost: afterwards every key reads back as last
//! acknowledged, searches equal a brute-force filter over the model, and
//! every region has two replicas again, none of them the full daemon.
//!
//! The full disk is a small tmpfs under the victim's data directory when
//! the test may mount one (it runs as root). Otherwise, or when
//! `TESSERA_TEST_DISK_FULL=engine`, the victim's engine is wrapped by the
//! storage crate's fault injection (`TESSERA_FAULT_DISK_BYTES_MAX`), which
//! fails every write once a budget of bytes is spent.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{wait_exit, wait_for, Cluster, Procs};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_client::{BlockingAdmin, BlockingClient, Outcome, PredOp, Value};
use tessera_types::{Configuration, DaemonId, DaemonState, Epoch};

const SPACE: &str = "space d key int k attributes string pad, int a \
                     subspace a create 4 partitions tolerate 1 failure";
/// Keys written, each once before any is written again. The victim's
/// journal grows with every write, overwrites too, until its disk is full.
const KEYS: i64 = 800;
/// Distinct values of the searchable attribute `a`.
const A_VALUES: i64 = 11;
/// The padding of each object, so that the disk fills within a bounded
/// number of writes.
const PAD_BYTES: usize = 8 * 1024;
/// The victim's tmpfs: room for fjall to start, full after some thousand
/// writes.
const TMPFS_BYTES: u64 = 16 << 20;
/// The victim's budget when its engine fails writes on purpose instead.
const ENGINE_BYTES_MAX: u64 = 8 << 20;
const VICTIM: usize = 1;
const WRITES_MAX: usize = 6_000;
/// Writes made after the victim left its chains, through the repair.
const WRITES_AFTER_LEAVING: usize = 300;
const WRITING_TIME_MAX: Duration = Duration::from_secs(40);
/// How often the watcher looks at the victim's disk and log.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Keys are spread over the whole int axis, so that (coordinates being
/// order-preserving) they fall into every key region.
fn key_of(i: i64) -> Value {
    Value::Int((i - KEYS / 2) * (i64::MAX / (KEYS / 2)))
}

/// The key number of a stored key attribute.
fn key_index(value: Option<&Value>) -> i64 {
    match value {
        Some(Value::Int(k)) => *k / (i64::MAX / (KEYS / 2)) + KEYS / 2,
        other => panic!("key attribute missing: {other:?}"),
    }
}

/// Values of `a` spread over the int axis too, so that writes reach every
/// region of subspace `a`.
fn a_of(index: i64) -> Value {
    Value::Int((index - A_VALUES / 2) * (i64::MAX / A_VALUES))
}

/// What write number `n` puts: a key, an `a` index and a padding drawn
/// from `n`, so that reading it back tells which write it was. The padding
/// is pseudo-random: fjall compresses large values in its journal, and a
/// repeated pattern would barely take space.
fn write(n: usize) -> (i64, i64, Vec<u8>) {
    let n64 = n as i64;
    let key = (n64 * 7) % KEYS;
    let a = (n64 * 31 + n64 / KEYS) % A_VALUES;
    let mut state = n as u64;
    let pad = std::iter::repeat_with(|| {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
    .flat_map(u64::to_le_bytes)
    .take(PAD_BYTES)
    .collect();
    (key, a, pad)
}

/// A tmpfs mounted on a directory of its own; unmounted when dropped, so
/// declare it before the processes that use it (they die first).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` when mounting fails (the test does not run as root).
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        if output.status.success() {
            Some(Tmpfs { dir })
        } else {
            eprintln!(
                "cannot mount a tmpfs ({}); the victim's engine fails writes on purpose instead",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            None
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something still holds a file open: detach the mount now, the
            // kernel frees it when the last file closes.
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
    }
}

/// Bytes available to unprivileged writers on the filesystem of `path`.
fn available_bytes(path: &Path) -> u64 {
    let output = Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(path)
        .output()
        .expect("run df");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("df printed no available bytes: {text:?}"))
}

/// The victim's id, from its address.
fn daemon_id(config: &Configuration, addr: &str) -> DaemonId {
    config
        .daemons
        .values()
        .find(|d| d.addr == addr)
        .expect("daemon registered")
        .id
}

/// Whether `id` is offline and in no chain of `config`.
fn left_every_chain(config: &Configuration, id: DaemonId) -> bool {
    let offline = config
        .daemons
        .get(&id)
        .is_some_and(|d| d.state == DaemonState::Offline);
    let in_chain = config
        .spaces
        .iter()
        .flat_map(|s| &s.subspaces)
        .flat_map(|l| &l.regions)
        .any(|r| r.chain.contains(&id));
    offline && !in_chain
}

/// When the victim was seen out of every chain, and how many writes had
/// been acknowledged then.
#[derive(Clone, Copy, Debug)]
struct Left {
    at: Instant,
    writes: usize,
}

/// When the victim's disk filled, bracketed by two polls of the watcher:
/// it was not full yet when the last clean poll began, and full when the
/// first full poll ended.
#[derive(Clone, Copy, Debug)]
struct Full {
    not_yet: Instant,
    seen: Instant,
    /// Writes acknowledged when it was seen.
    writes: usize,
    how: &'static str,
}

/// Watches the victim's disk: full when the filesystem has no room for
/// one more write (tmpfs) or the victim's log reports a failed write. A
/// write may reach the victim twice, in its key region and in its region
/// of subspace `a`, so one write needs room for two paddings.
fn watch_disk(
    mount: Option<PathBuf>,
    log: PathBuf,
    acked: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Option<Full>> {
    std::thread::spawn(move || {
        let mut not_yet = Instant::now();
        while !stop.load(Ordering::Acquire) {
            let poll = Instant::now();
            let how = if mount
                .as_deref()
                .is_some_and(|m| available_bytes(m) < 2 * PAD_BYTES as u64)
            {
                Some("no room for one more write")
            } else if std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("storage failed")
            {
                Some("a write failed")
            } else {
                None
            };
            if let Some(how) = how {
                return Some(Full {
                    not_yet,
                    seen: Instant::now(),
                    writes: acked.load(Ordering::Acquire),
                    how,
                });
            }
            not_yet = poll;
            std::thread::sleep(POLL_INTERVAL);
        }
        None
    })
}

/// Follows configurations until one shows `victim` out of every chain.
fn watch_leaving(
    admin: BlockingAdmin,
    victim: DaemonId,
    acked: Arc<AtomicUsize>,
    left: Arc<Mutex<Option<Left>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut known = Epoch(0);
        while !stop.load(Ordering::Acquire) {
            let config = match admin.wait_config(known, Duration::from_millis(500)) {
                Ok(Some(config)) => config,
                Ok(None) => continue,
                Err(_) => {
                    // The coordinator is briefly unreachable: try again
                    // soon, without spinning.
                    std::thread::sleep(POLL_INTERVAL);
                    continue;
                }
            };
            known = config.epoch;
            if left_every_chain(&config, victim) {
                *left.lock().unwrap_or_else(|p| p.into_inner()) = Some(Left {
                    at: Instant::now(),
                    writes: acked.load(Ordering::Acquire),
                });
                return;
            }
        }
    })
}

/// A client call that failed, for the report.
struct Failure {
    write: usize,
    error: String,
}

/// Puts write `n` until it is acknowledged. A put is idempotent, so
/// retrying one whose answer was lost is safe; every error is recorded as
/// a failed call all the same.
fn put_acked(client: &BlockingClient, n: usize, deadline: Instant, failures: &mut Vec<Failure>) {
    let (key, a, pad) = write(n);
    loop {
        let attrs = [("pad", Value::String(pad.clone())), ("a", a_of(a))];
        match client.put("d", key_of(key), attrs) {
            Ok(Outcome::Done) => return,
            Ok(other) => panic!("put of write {n}: {other:?}"),
            Err(e) => {
                failures.push(Failure {
                    write: n,
                    error: e.to_string(),
                });
                assert!(Instant::now() < deadline, "write {n} never succeeded: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn victim_proc(cluster: &mut Cluster) -> &mut common::Proc {
    let name = format!("daemon-{VICTIM}");
    cluster
        .procs
        .procs
        .iter_mut()
        .find(|p| p.name == name)
        .expect("the victim's process")
}

/// Starts a coordinator and four daemons, the victim's data on the tmpfs
/// when there is one, else behind an engine that fills on purpose.
fn start_cluster(tmpfs: Option<&Tmpfs>) -> Cluster {
    let mut cluster = Cluster {
        procs: Procs::default(),
        dir: tempfile::tempdir().expect("tempdir"),
        coordinator_ports: vec![common::free_port()],
        daemon_ports: (0..4).map(|_| common::free_port()).collect(),
        coordinator_flags: Vec::new(),
        daemon_flags: Vec::new(),
    };
    cluster.start_coordinator(0, None);
    for i in 0..4 {
        if i != VICTIM {
            cluster.start_daemon(i);
        } else if let Some(tmpfs) = tmpfs {
            // The daemon keeps its data at `daemon-N` of the cluster's
            // directory; there, a link leads to the tmpfs.
            let data = cluster.dir.path().join(format!("daemon-{i}"));
            std::os::unix::fs::symlink(tmpfs.path(), data).expect("link to the tmpfs");
            cluster.start_daemon(i);
        } else {
            let env = [(
                tessera_storage::fault::DISK_BYTES_MAX_ENV,
                ENGINE_BYTES_MAX.to_string(),
            )];
            cluster.start_daemon_with_env(i, &env);
        }
    }
    cluster.wait_daemons_available(Duration::from_secs(60));
    cluster
}

#[test]
fn a_daemon_whose_disk_fills_leaves_its_chains_and_loses_nothing() {
    let forced_engine = std::env::var("TESSERA_TEST_DISK_FULL").is_ok_and(|v| v == "engine");
    // Declared before the cluster: its processes die before it unmounts.
    let tmpfs = if forced_engine {
        None
    } else {
        Tmpfs::mount(TMPFS_BYTES)
    };
    let mut cluster = start_cluster(tmpfs.as_ref());
    let disk = if tmpfs.is_some() {
        "tmpfs"
    } else {
        "fault-injecting engine"
    };
    cluster.admin().add_space(SPACE).expect("add_space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    let config = client.refresh(Duration::ZERO).expect("config");
    let victim = daemon_id(&config, &cluster.daemon_addr(VICTIM));
    let victim_regions = config
        .space("d")
        .expect("space d")
        .subspaces
        .iter()
        .flat_map(|l| &l.regions)
        .filter(|r| r.chain.contains(&victim))
        .count();
    assert!(
        victim_regions > 0,
        "the victim holds no region; the test would prove nothing"
    );

    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let left = Arc::new(Mutex::new(None));
    let victim_log = victim_proc(&mut cluster).log.clone();
    let disk_watcher = watch_disk(
        tmpfs.as_ref().map(|t| t.path().to_path_buf()),
        victim_log.clone(),
        acked.clone(),
        stop.clone(),
    );
    let leave_watcher = watch_leaving(
        cluster.admin(),
        victim,
        acked.clone(),
        left.clone(),
        stop.clone(),
    );

    // Write until the victim has left and the cluster has taken a few
    // hundred writes more, within bounds of writes and time.
    let started = Instant::now();
    let deadline = started + WRITING_TIME_MAX;
    let mut model: BTreeMap<i64, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut writes_when_left = None;
    for n in 0..WRITES_MAX {
        if Instant::now() >= deadline {
            break;
        }
        put_acked(&client, n, deadline, &mut failures);
        model.insert(write(n).0, n);
        acked.store(n + 1, Ordering::Release);
        if writes_when_left.is_none() && left.lock().unwrap().is_some() {
            writes_when_left = Some(n + 1);
        }
        if writes_when_left.is_some_and(|w| n + 1 >= w + WRITES_AFTER_LEAVING) {
            break;
        }
    }
    let writes = acked.load(Ordering::Acquire);
    let writing_time = started.elapsed();
    stop.store(true, Ordering::Release);
    let full = disk_watcher.join().expect("disk watcher");
    leave_watcher.join().expect("leave watcher");
    let left = *left.lock().unwrap();

    eprintln!(
        "disk: {disk}; {writes} writes of {PAD_BYTES} padding bytes in {writing_time:?}; \
         failed client calls: {}",
        failures.len()
    );
    let full = full.unwrap_or_else(|| {
        panic!("the victim's disk never filled within {writes} writes ({writing_time:?})")
    });
    eprintln!(
        "disk full ({}) after {} acknowledged writes, {:?} into writing",
        full.how,
        full.writes,
        full.seen - started
    );
    let left = left.unwrap_or_else(|| {
        panic!(
            "the victim never left its chains ({:?} after its disk filled)",
            writing_time.saturating_sub(full.seen - started)
        )
    });
    // The disk filled between two polls of its watcher; the departure is
    // seen as soon as the coordinator publishes it.
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "the victim left every chain {:.0} to {:.0} ms after its disk filled \
         (after {} acknowledged writes)",
        ms(left.at.saturating_duration_since(full.seen)),
        ms(left.at.saturating_duration_since(full.not_yet)),
        left.writes
    );
    for f in &failures {
        eprintln!("failed call during write {}: {}", f.write, f.error);
    }
    assert_eq!(failures.len(), 0, "client calls failed");

    // The victim exits by itself, with an error.
    let proc = victim_proc(&mut cluster);
    let status = wait_exit(&mut proc.child, Duration::from_secs(15));
    assert!(!status.success(), "the victim exited with {status}");
    let log = std::fs::read_to_string(&victim_log).expect("the victim's log");
    assert!(
        log.contains("storage failed"),
        "the victim exited ({status}) but its log reports no storage failure"
    );
    eprintln!("the victim exited with {status}");

    // Repair: every region has two replicas again, none of them the
    // victim, and the victim stays out.
    let admin = cluster.admin();
    let config = wait_for(
        "re-replication after the victim left",
        Duration::from_secs(30),
        || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let repaired = config.transfers.is_empty()
                && config.space("d")?.subspaces.iter().all(|l| {
                    l.regions
                        .iter()
                        .all(|r| r.chain.len() == 2 && !r.chain.contains(&victim))
                });
            (repaired && left_every_chain(&config, victim)).then_some(config)
        },
    );
    eprintln!(
        "every region has two replicas again (seen {:?} after the victim left)",
        left.at.elapsed()
    );
    client
        .wait_for_epoch(config.epoch, Duration::from_secs(10))
        .expect("client follows");

    // Every key reads back as last acknowledged.
    let mut lost = Vec::new();
    for (&key, &n) in &model {
        let (_, a, pad) = write(n);
        let record = client.get("d", key_of(key)).expect("get");
        let found = record.as_ref().map(|r| (r.get("a"), r.get("pad")));
        if found != Some((Some(&a_of(a)), Some(&Value::String(pad)))) {
            lost.push(key);
        }
    }
    eprintln!(
        "acknowledged writes lost: {} of {} keys",
        lost.len(),
        model.len()
    );
    assert!(lost.is_empty(), "keys not as last acknowledged: {lost:?}");

    // Searches over subspace `a` equal a brute-force filter of the model.
    for a in 0..A_VALUES {
        let mut got: Vec<i64> = client
            .search("d", [("a", PredOp::Eq(a_of(a)))])
            .expect("search")
            .iter()
            .map(|r| key_index(r.get("k")))
            .collect();
        got.sort_unstable();
        let want: Vec<i64> = model
            .iter()
            .filter(|(_, &n)| write(n).1 == a)
            .map(|(&k, _)| k)
            .collect();
        assert_eq!(got, want, "search a = {a}");
    }
}
