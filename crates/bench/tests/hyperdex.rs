//! The HyperDex baseline end to end: installed (when missing) and started
//! by the benchmark's own lifecycle code, 200 records written through its
//! store and read back against a model of what was written, then the
//! cluster stopped and its processes checked gone.
//!
//! Like every test that needs an outside program here, this one fails,
//! with the reason, when HyperDex cannot be installed: a skipped baseline
//! must not look green.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_bench::baselines::{self, HYPERDEX_BASELINE_ENV};
use tessera_bench::driver::{Outcome, Store};
use tessera_bench::generator::{key_name, key_suffix};
use tessera_bench::stores::hyperdex::{decode_int, AttributeOut, HyperdexStore};
use tessera_bench::workload::{field_name, random_record, Fields, Op};

const RECORDS: u64 = 200;
const FIELDS: usize = 10;

/// A coordinator port whose daemons' ports (`+30..+33`) are free too.
fn free_ports() -> u16 {
    for _ in 0..50 {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
        let port = probe.local_addr().expect("probe address").port();
        drop(probe);
        let Some(last) = port.checked_add(33) else {
            continue;
        };
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && (port + 30..=last).all(free) {
            return port;
        }
    }
    panic!("no free coordinator port with free daemon ports after it");
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The record as HyperDex returned it: attribute name → value bytes.
fn by_name(attrs: Vec<AttributeOut>) -> BTreeMap<String, Vec<u8>> {
    attrs.into_iter().map(|a| (a.name, a.value)).collect()
}

async fn check_record(store: &HyperdexStore, key: &str, recno: i64, fields: &Fields) {
    let got = by_name(
        store
            .get_record(key)
            .await
            .unwrap_or_else(|e| panic!("get {key}: {e:#}"))
            .unwrap_or_else(|| panic!("{key} is missing")),
    );
    let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    expected.insert("recno".to_string(), recno.to_le_bytes().to_vec());
    for (i, value) in fields.iter().enumerate() {
        expected.insert(field_name(i), value.clone());
    }
    // HyperDex returns every attribute but the key, which it may add.
    let mut got_without_key = got.clone();
    if let Some(k) = got_without_key.remove("k") {
        assert_eq!(k, key.as_bytes(), "the key attribute of {key}");
    }
    assert_eq!(got_without_key, expected, "record {key}");
    assert_eq!(decode_int(&got["recno"]).unwrap(), recno);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperdex_holds_what_was_written() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let port = free_ports();
    let mut server = baselines::start_hyperdex(dir.path(), port)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "HyperDex could not be installed or started: {e:#}\n\
                 This test needs the HyperDex baseline directory (../shared/baselines/hyperdex, \
                 or ${HYPERDEX_BASELINE_ENV}) on x86_64 Linux, and root for apt the first time."
            )
        });
    let pids = server
        .hyperdex()
        .expect("a HyperDex cluster")
        .ready
        .pids
        .clone();
    assert_eq!(pids.len(), 1 + baselines::HYPERDEX_DAEMONS);
    assert!(
        pids.iter().all(|&p| alive(p)),
        "every process runs: {pids:?}"
    );

    let store = Arc::new(
        server
            .hyperdex()
            .unwrap()
            .usertable("usertable", FIELDS, 8)
            .await
            .expect("the usertable space"),
    );

    // The model: what each key should hold.
    let mut rng = StdRng::seed_from_u64(15);
    let mut model: BTreeMap<String, (i64, Fields)> = BTreeMap::new();
    for n in 0..RECORDS {
        let (key, recno) = (key_name(n), key_suffix(n));
        let fields = random_record(&mut rng, FIELDS, 100);
        let op = Op::Insert {
            key: key.clone(),
            recno,
            fields: fields.clone(),
        };
        assert_eq!(
            store.execute(&op).await.unwrap(),
            Outcome::Ok,
            "insert {key}"
        );
        model.insert(key, (recno, fields));
    }
    // One-field updates of a few records, applied to the model too.
    for n in (0..RECORDS).step_by(17) {
        let key = key_name(n);
        let field = rng.gen_range(0..FIELDS);
        let value: Vec<u8> = (0..100).map(|_| rng.gen_range(b'a'..=b'z')).collect();
        let op = Op::Update {
            key: key.clone(),
            field,
            value: value.clone(),
            record: Arc::new(Vec::new()),
        };
        assert_eq!(store.execute(&op).await.unwrap(), Outcome::Ok);
        let (_, fields) = model.get_mut(&key).unwrap();
        let mut updated = (**fields).clone();
        updated[field] = value;
        *fields = Arc::new(updated);
    }

    for (key, (recno, fields)) in &model {
        check_record(&store, key, *recno, fields).await;
    }

    // Reads and searches of absent records find nothing.
    let missing = key_name(RECORDS + 1);
    assert_eq!(
        store.execute(&Op::Read { key: missing }).await.unwrap(),
        Outcome::NotFound
    );
    let (present, _) = model.values().next().unwrap();
    assert_eq!(
        store
            .execute(&Op::SearchEq { recno: *present })
            .await
            .unwrap(),
        Outcome::Ok
    );
    let absent = (0..)
        .map(|i| i * 7 + 1)
        .find(|r| model.values().all(|(x, _)| x != r))
        .unwrap();
    assert_eq!(
        store
            .execute(&Op::SearchEq { recno: absent })
            .await
            .unwrap(),
        Outcome::NotFound
    );

    // A range search finds exactly the records a filter over the model finds.
    let mut recnos: Vec<i64> = model.values().map(|(r, _)| *r).collect();
    recnos.sort_unstable();
    let (lo, hi) = (recnos[RECORDS as usize / 4], recnos[RECORDS as usize / 2]);
    let mut found: Vec<String> = store
        .recno_range(lo, hi)
        .await
        .expect("range search")
        .into_iter()
        .map(|attrs| String::from_utf8(by_name(attrs).remove("k").expect("a key")).unwrap())
        .collect();
    found.sort();
    let expected: Vec<String> = model
        .iter()
        .filter(|(_, (r, _))| (lo..hi).contains(r))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(found, expected);
    assert_eq!(expected.len(), RECORDS as usize / 4);

    drop(store);
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap();
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running after stop: {left:?}");
}
