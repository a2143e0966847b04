//! `tessera backup` and `tessera restore` with real processes: the cut
//! property under running writers, a restore into a cluster of another
//! size compared object by object and search by search with the cut, and
//! the refusals (an existing or unwritable backup directory, damaged
//! backups). `TESSERA_BACKUP_OBJECTS` and `TESSERA_BACKUP_RUNS` size the
//! figures test (docs/design/backup.md reports its numbers).

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{free_port, ports_free, run_cli, wait_for, Cluster, Procs};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_client::backup::{BackupContents, BackupError, RestoreError};
use tessera_client::{BlockingAdmin, BlockingClient, Client, Outcome, PredOp, Record, Value};
use tessera_types::PartState;

const SPACE: &str = "space kv key k attributes int v, string tag, document doc subspace v index tag create 8 partitions";

/// One write of a key by its only writer, in issue order.
#[derive(Clone, Debug)]
struct Write {
    /// The writer's sequence number of this write, across all its keys.
    n: i64,
    /// `Some(v)`: a put of `v` (unique per key); `None`: a delete.
    value: Option<i64>,
    issued: Instant,
    /// When the success answer came; `None` when the outcome is unknown
    /// (an error other than READONLY).
    acked: Option<Instant>,
}

/// What a restore or a backup holds for the space: key → (v, tag).
type Model = BTreeMap<String, (i64, String)>;

/// A search's predicates, and the same test over a model's `(v, tag)`.
type Search = (
    Vec<(&'static str, PredOp)>,
    Box<dyn Fn(&(i64, String)) -> bool>,
);

fn tag_of(v: i64) -> String {
    format!("t{}", v % 5)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

/// The objects of a backup, by key.
fn backup_model(dir: &Path) -> Model {
    let contents = BackupContents::open(dir).expect("the backup verifies");
    let mut model = Model::new();
    for file in &contents.files {
        contents
            .read_objects(file, &mut |object| {
                let key = text(&object.values[0]);
                let v = int(&object.values[1]);
                let tag = text(&object.values[2]);
                assert!(model.insert(key, (v, tag)).is_none(), "a key twice");
                Ok(())
            })
            .expect("the region file reads");
    }
    model
}

fn record_entry(record: &Record) -> (String, (i64, String)) {
    (
        text(record.get("k").expect("key")),
        (
            int(record.get("v").expect("v")),
            text(record.get("tag").expect("tag")),
        ),
    )
}

/// Writers, each the only one of its keys, put increasing values and now
/// and then delete, recording every write until `stop`.
fn run_writer(
    client: BlockingClient,
    keys: Vec<String>,
    stop: Arc<AtomicBool>,
) -> BTreeMap<String, Vec<Write>> {
    let mut history: BTreeMap<String, Vec<Write>> = BTreeMap::new();
    let mut n: i64 = 0;
    while !stop.load(Ordering::Relaxed) {
        for key in &keys {
            n += 1;
            let delete = n % 7 == 0;
            let issued = Instant::now();
            let result = if delete {
                client.block_on(client.client().del("kv", Value::str(key)))
            } else {
                let attrs = vec![("v", Value::Int(n)), ("tag", Value::str(&tag_of(n)))];
                client.block_on(client.client().put("kv", Value::str(key), attrs))
            };
            let acked = match &result {
                Ok(_) => Some(Instant::now()),
                // Refused while the backup holds writes: not applied.
                Err(e) if e.symbol().ends_with("READONLY") => continue,
                Err(_) => None,
            };
            history.entry(key.clone()).or_default().push(Write {
                n,
                value: (!delete).then_some(n),
                issued,
                acked,
            });
        }
    }
    history
}

/// Checks the backed-up state of one key against its history: it is the
/// state after some prefix of the writes that holds every write acknowledged
/// before the backup began and no write issued after it ended.
fn check_cut(key: &str, writes: &[Write], backed_up: Option<i64>, began: Instant, ended: Instant) {
    let must_hold = writes
        .iter()
        .rposition(|w| w.acked.is_some_and(|a| a < began))
        .map_or(0, |i| i + 1);
    let may_hold = writes.iter().take_while(|w| w.issued < ended).count();
    // Prefix lengths whose last write leaves the backed-up state.
    let fits = |len: usize| -> bool {
        let state = if len == 0 {
            None
        } else {
            writes[len - 1].value
        };
        state == backed_up && len >= must_hold && len <= may_hold
    };
    assert!(
        (0..=writes.len()).any(fits),
        "key {key}: backed up {backed_up:?} is no allowed prefix (must hold {must_hold}, may hold {may_hold}) of {:?}",
        writes.iter().map(|w| w.value).collect::<Vec<_>>()
    );
}

/// Checks that one writer's writes, over all its keys, are cut at a
/// single point: some N such that every key holds the state its writes
/// numbered up to N leave. A backup frozen at different instants on
/// different daemons while writes go on would split the writer's
/// sequence.
fn check_writer_cut(writer: &str, history: &BTreeMap<String, Vec<Write>>, model: &Model) {
    let mut writes: Vec<(&String, &Write)> = history
        .iter()
        .filter(|(k, _)| k.starts_with(writer))
        .flat_map(|(k, ws)| ws.iter().map(move |w| (k, w)))
        .collect();
    writes.sort_by_key(|(_, w)| w.n);
    // Only writes with a known outcome: an unknown one may have applied or
    // not, and the per-key check covers it.
    if writes.iter().any(|(_, w)| w.acked.is_none()) {
        return;
    }
    let backed_up = |key: &str| model.get(key).map(|(v, _)| *v);
    let keys: Vec<&String> = history.keys().filter(|k| k.starts_with(writer)).collect();
    // Keys whose state at N differs from the backup, for N = 0 first.
    let mut state: BTreeMap<&str, Option<i64>> = keys.iter().map(|k| (k.as_str(), None)).collect();
    let mut differing = keys.iter().filter(|k| backed_up(k).is_some()).count();
    let mut found = differing == 0;
    for (key, w) in &writes {
        let before = state[key.as_str()] == backed_up(key);
        state.insert(key.as_str(), w.value);
        let after = w.value == backed_up(key);
        match (before, after) {
            (true, false) => differing += 1,
            (false, true) => differing -= 1,
            _ => {}
        }
        found |= differing == 0;
    }
    assert!(
        found,
        "writer {writer}: no single point of its sequence gives the backup"
    );
}

/// `tessera backup DIR` against the cluster; returns the pause in ms.
fn backup(coordinator: &str, dir: &Path) -> f64 {
    let out = common::cli_at(&["backup", &dir.display().to_string()], coordinator);
    let pause = out
        .split("writes paused ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse::<f64>().ok());
    pause.unwrap_or_else(|| panic!("no pause in {out:?}"))
}

/// A coordinator port P with P+30.. free for `daemons` daemons.
fn dev_port(daemons: u16) -> u16 {
    wait_for("free dev ports", Duration::from_secs(10), || {
        let p = free_port();
        (p < 65_000 && ports_free((0..daemons).map(|i| p + 30 + i))).then_some(p)
    })
}

/// Restores `dir` into `data` for `daemons` daemons, starts the restored
/// cluster and returns a client of it (the process lives in `procs`).
fn restore_and_start(
    dir: &Path,
    data: &Path,
    daemons: u16,
    procs: &mut Procs,
) -> (BlockingClient, BlockingAdmin, f64) {
    let port = dev_port(daemons);
    let started = Instant::now();
    let (ok, _, err) = run_cli(
        &[
            "restore",
            &dir.display().to_string(),
            "--data",
            &data.display().to_string(),
            "--daemons",
            &daemons.to_string(),
            "--port",
            &port.to_string(),
        ],
        None,
        Duration::from_secs(1800),
    );
    assert!(ok, "restore failed: {err}");
    let restore_s = started.elapsed().as_secs_f64();
    eprintln!("restore into {daemons} daemons: {restore_s:.2} s");
    let args: Vec<String> = [
        "dev",
        "--no-metrics",
        "--data",
        &data.display().to_string(),
        "--port",
        &port.to_string(),
        "--daemons",
        &daemons.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log = data.with_extension("log");
    procs.spawn("restored", &args, &log);
    let coordinator = format!("127.0.0.1:{port}");
    // Reopening a large data directory takes a while on a small machine.
    let reopened = Instant::now();
    let admin = wait_for("the restored cluster", Duration::from_secs(600), || {
        let admin = BlockingAdmin::new(&coordinator).ok()?;
        admin.config().ok().map(|_| admin)
    });
    admin
        .wait_until_stable(Duration::from_secs(600), Duration::from_millis(100))
        .expect("the restored cluster becomes stable");
    eprintln!(
        "the restored cluster is stable {:.2} s after it was started",
        reopened.elapsed().as_secs_f64()
    );
    let client = BlockingClient::connect(&coordinator).expect("client");
    (client, admin, restore_s)
}

#[test]
fn a_backup_under_writers_is_a_cut_and_restores_exactly() {
    let cluster = Cluster::start(3);
    let coordinator = cluster.coordinator_addr(0);
    cluster.admin().add_space(SPACE).expect("add space");
    // A path index is part of the layout only, not of the description.
    cluster
        .admin()
        .add_index("kv", "doc.x")
        .expect("add a path index");
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let client = BlockingClient::connect(&coordinator).expect("client");
            let keys = (0..25).map(|i| format!("w{w}k{i}")).collect();
            let stop = stop.clone();
            std::thread::spawn(move || run_writer(client, keys, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("backup");
    let began = Instant::now();
    let pause_ms = backup(&coordinator, &dir);
    let ended = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let mut history = BTreeMap::new();
    for writer in writers {
        history.extend(writer.join().expect("writer"));
    }

    // The writers ran across the backup: acknowledged writes before it
    // began and after it ended.
    let all = history.values().flatten();
    assert!(all.clone().any(|w| w.acked.is_some_and(|a| a < began)));
    assert!(all.clone().any(|w| w.issued > ended && w.acked.is_some()));

    let model = backup_model(&dir);
    for key in model.keys() {
        assert!(history.contains_key(key), "{key} was never written");
    }
    for (key, writes) in &history {
        let backed_up = model.get(key).map(|(v, tag)| {
            assert_eq!(tag, &tag_of(*v), "{key}: a torn object");
            *v
        });
        check_cut(key, writes, backed_up, began, ended);
    }
    for w in 0..4 {
        check_writer_cut(&format!("w{w}k"), &history, &model);
    }
    eprintln!(
        "backup of {} objects under 4 writers: writes paused {pause_ms} ms",
        model.len()
    );

    // Restored into 2 daemons (the backup came from 3): every object and
    // every search as in the cut.
    let mut procs = Procs::default();
    let data = work.path().join("restored");
    let (client, admin, _) = restore_and_start(&dir, &data, 2, &mut procs);
    // The same space, every part of it ready.
    let original = BackupContents::open(&dir).expect("verifies").config;
    let original = &original.space("kv").expect("the space").desc;
    assert_eq!(&client.space("kv").expect("the restored space"), original);
    let indices = admin.list_indices("kv").expect("indices");
    let mut names: Vec<_> = indices
        .iter()
        .map(|i| (i.attribute.as_str(), i.path.as_deref()))
        .collect();
    names.sort();
    assert_eq!(names, [("doc", Some("x")), ("tag", None)]);
    assert!(
        indices.iter().all(|i| i.state == PartState::Ready),
        "{indices:?}"
    );
    let restored = admin.config().expect("config");
    let space = restored.space("kv").expect("restored space");
    assert_eq!(space.subspaces.len(), 2);
    assert!(space.subspaces.iter().all(|s| s.state == PartState::Ready));
    let everything: Model = client
        .search("kv", Vec::<(&str, PredOp)>::new())
        .expect("search all")
        .iter()
        .map(record_entry)
        .collect();
    assert_eq!(everything, model);
    for key in history.keys() {
        let got = client.get("kv", Value::str(key)).expect("get");
        let got = got.map(|r| (int(r.get("v").unwrap()), text(r.get("tag").unwrap())));
        assert_eq!(got.as_ref(), model.get(key), "get {key}");
    }
    let searches: Vec<Search> = vec![
        (
            vec![("tag", PredOp::Eq(Value::str("t3")))],
            Box::new(|(_, tag)| tag == "t3"),
        ),
        (
            vec![
                ("v", PredOp::Ge(Value::Int(200))),
                ("v", PredOp::Lt(Value::Int(900))),
            ],
            Box::new(|(v, _)| (200..900).contains(v)),
        ),
        (
            vec![
                ("v", PredOp::Lt(Value::Int(500))),
                ("tag", PredOp::Eq(Value::str("t1"))),
            ],
            Box::new(|(v, tag)| *v < 500 && tag == "t1"),
        ),
    ];
    for (predicates, matches) in searches {
        let want: Model = model
            .iter()
            .filter(|(_, o)| matches(o))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        let got: Model = client
            .search("kv", predicates.clone())
            .expect("search")
            .iter()
            .map(record_entry)
            .collect();
        assert_eq!(got, want, "search {predicates:?}");
        let count = client.count("kv", predicates.clone()).expect("count");
        assert_eq!(count, want.len() as u64, "count {predicates:?}");
    }
    procs.kill_all();
}

/// Copies a backup directory (flat files and `regions/`).
fn copy_backup(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("regions")).unwrap();
    for sub in ["", "regions"] {
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
}

/// The directory's entries whose names contain `part`.
fn leftovers(dir: &Path, part: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(part))
        .collect()
}

#[test]
fn existing_unwritable_and_damaged_backups_are_refused() {
    let cluster = Cluster::start(1);
    let coordinator = cluster.coordinator_addr(0);
    cluster.admin().add_space(SPACE).expect("add space");
    let client = BlockingClient::connect(&coordinator).expect("client");
    for i in 0..40 {
        let attrs = vec![("v", Value::Int(i)), ("tag", Value::str(&tag_of(i)))];
        let outcome = client
            .block_on(
                client
                    .client()
                    .put("kv", Value::str(&format!("k{i}")), attrs),
            )
            .expect("put");
        assert_eq!(outcome, Outcome::Done);
    }
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("backup");
    let port = cluster.coordinator_ports[0].to_string();
    let (ok, _, progress) = run_cli(
        &["backup", &dir.display().to_string(), "--port", &port],
        None,
        Duration::from_secs(60),
    );
    assert!(ok, "{progress}");
    // Progress on stderr, plain lines off a terminal.
    assert!(
        progress.contains("backup: writes resumed after"),
        "{progress}"
    );
    assert!(
        progress.contains("backup: 8/8 regions, 40 objects ... 100%"),
        "{progress}"
    );
    assert_eq!(backup_model(&dir).len(), 40);

    // An existing, non-empty directory is left alone.
    let manifest = std::fs::read(dir.join("MANIFEST")).unwrap();
    let (ok, _, err) = run_cli(
        &[
            "backup",
            &dir.display().to_string(),
            "--port",
            &cluster.coordinator_ports[0].to_string(),
        ],
        None,
        Duration::from_secs(60),
    );
    assert!(!ok);
    assert!(err.contains("exists and is not empty"), "{err}");
    let again = cluster.admin().backup(&dir);
    assert!(matches!(again, Err(BackupError::Exists(_))), "{again:?}");
    assert_eq!(std::fs::read(dir.join("MANIFEST")).unwrap(), manifest);

    // Under a regular file nothing can be created; nothing is left.
    let file = work.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let (ok, _, err) = run_cli(
        &[
            "backup",
            &file.join("backup").display().to_string(),
            "--port",
            &cluster.coordinator_ports[0].to_string(),
        ],
        None,
        Duration::from_secs(60),
    );
    assert!(!ok);
    assert!(err.contains("cannot write"), "{err}");
    let under_file = cluster.admin().backup(&file.join("backup"));
    assert!(
        matches!(under_file, Err(BackupError::Write { .. })),
        "{under_file:?}"
    );
    assert!(leftovers(work.path(), "partial").is_empty());
    // The failed backups left the cluster writable.
    let outcome = client
        .block_on(
            client
                .client()
                .put("kv", Value::str("after"), vec![("v", Value::Int(1))]),
        )
        .expect("put after refused backups");
    assert_eq!(outcome, Outcome::Done);

    // Damage, each to its own copy, each found before anything is loaded.
    let region = BackupContents::open(&dir).unwrap().files[0].path.clone();
    let damaged = |name: &str, damage: &dyn Fn(&Path)| -> RestoreError {
        let copy = work.path().join(name);
        copy_backup(&dir, &copy);
        damage(&copy);
        BackupContents::open(&copy).expect_err("damage goes unnoticed")
    };
    let flipped = damaged("flipped", &|d| {
        let path = d.join(&region);
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
    });
    assert!(matches!(flipped, RestoreError::Checksum(_)), "{flipped:?}");
    let truncated = damaged("truncated", &|d| {
        let path = d.join(&region);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    });
    assert!(
        matches!(truncated, RestoreError::Length { .. }),
        "{truncated:?}"
    );
    let missing = damaged("missing", &|d| {
        std::fs::remove_file(d.join(&region)).unwrap()
    });
    assert!(matches!(missing, RestoreError::Missing(_)), "{missing:?}");
    let cut_manifest = damaged("cut-manifest", &|d| {
        let path = d.join("MANIFEST");
        let text = std::fs::read_to_string(&path).unwrap();
        let keep: Vec<&str> = text.lines().collect();
        std::fs::write(&path, keep[..keep.len() - 2].join("\n")).unwrap();
    });
    assert!(
        matches!(cut_manifest, RestoreError::Manifest { .. }),
        "{cut_manifest:?}"
    );
    let config = damaged("config", &|d| {
        std::fs::write(d.join("configuration.bin"), b"garbage").unwrap()
    });
    assert!(matches!(config, RestoreError::Length { .. }), "{config:?}");

    // The command says so, and leaves no data directory behind.
    let data = work.path().join("restored");
    let (ok, _, err) = run_cli(
        &[
            "restore",
            &work.path().join("flipped").display().to_string(),
            "--data",
            &data.display().to_string(),
            "--port",
            &dev_port(3).to_string(),
        ],
        None,
        Duration::from_secs(60),
    );
    assert!(!ok);
    assert!(err.contains("SHA-256"), "{err}");
    assert!(!data.exists());
    assert!(leftovers(work.path(), "restoring").is_empty());
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Figures: the write pause over several backups (median), and the time
/// to back up and restore `TESSERA_BACKUP_OBJECTS` objects (small by
/// default, so that the suite stays quick).
#[test]
fn backup_and_restore_figures() {
    let objects = env_number("TESSERA_BACKUP_OBJECTS", 2000);
    let runs = env_number("TESSERA_BACKUP_RUNS", 3).max(1);
    let cluster = Cluster::start(3);
    let coordinator = cluster.coordinator_addr(0);
    cluster.admin().add_space(SPACE).expect("add space");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = Client::connect(&coordinator).await.expect("client");
        let mut tasks: tokio::task::JoinSet<Result<Outcome, _>> = tokio::task::JoinSet::new();
        for i in 0..objects {
            if tasks.len() >= 256 {
                let outcome = tasks.join_next().await.unwrap().unwrap().expect("put");
                assert_eq!(outcome, Outcome::Done);
            }
            let client = client.clone();
            tasks.spawn(async move {
                let v = i as i64;
                let attrs = vec![("v", Value::Int(v)), ("tag", Value::str(&tag_of(v)))];
                client
                    .put("kv", Value::str(&format!("k{i:08}")), attrs)
                    .await
            });
        }
        while let Some(done) = tasks.join_next().await {
            assert_eq!(done.unwrap().expect("put"), Outcome::Done);
        }
    });
    let work = tempfile::tempdir().expect("tempdir");
    let mut pauses = Vec::new();
    let mut backup_s = Vec::new();
    for run in 0..runs {
        let dir = work.path().join(format!("backup-{run}"));
        let started = Instant::now();
        pauses.push(backup(&coordinator, &dir));
        backup_s.push(started.elapsed().as_secs_f64());
        let contents = BackupContents::open(&dir).expect("verifies");
        assert_eq!(contents.object_count(), objects as u64);
        if run + 1 < runs {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    pauses.sort_by(f64::total_cmp);
    backup_s.sort_by(f64::total_cmp);
    let mut procs = Procs::default();
    let dir = work.path().join(format!("backup-{}", runs - 1));
    let (client, _, restore_s) =
        restore_and_start(&dir, &work.path().join("restored"), 2, &mut procs);
    let count = client
        .count("kv", Vec::<(&str, PredOp)>::new())
        .expect("count");
    assert_eq!(count, objects as u64);
    eprintln!(
        "figures: {objects} objects, {runs} backups: pause median {:.1} ms (min {:.1}, max {:.1}); backup median {:.2} s; restore into 2 daemons {restore_s:.2} s",
        pauses[runs / 2],
        pauses[0],
        pauses[runs - 1],
        backup_s[runs / 2],
    );
    procs.kill_all();
}
