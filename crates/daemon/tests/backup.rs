//! A daemon's side of a backup, driven directly: it freezes only when
//! quiet at the read-only epoch it is asked for, its pages show the
//! objects of that instant (no tombstones, nothing written later) in key
//! order across page boundaries, and a released view is gone.

mod common;

use common::REGION;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::core::ReplyTo;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{DaemonNode, Output};
use tessera_daemon::record::Record;
use tessera_protocol::{DaemonRequest, DaemonResponse, Status};
use tessera_storage::{Engine, MemoryEngine, Write};
use tessera_types::parse::parse_space;
use tessera_types::{key_bytes, Configuration, Epoch, Object, Value, Version};

/// More objects than one page holds.
const OBJECTS: i64 = 2500;

/// One daemon holding the one region of a space, at `epoch`.
fn config(epoch: u64, read_only: bool) -> Configuration {
    let desc =
        parse_space("space s key int k attributes int b create 1 partition tolerate 0 failures")
            .expect("valid");
    Configuration {
        epoch: Epoch(epoch),
        read_only,
        ..common::one_region(desc, Vec::new())
    }
}

/// A record of key `k` holding `b`, or a tombstone.
fn put(k: i64, b: Option<i64>) -> Write {
    Write::Put {
        region: REGION,
        key: key_bytes(&Value::Int(k)),
        value: Record {
            version: Version(1),
            object: b.map(|b| Object {
                values: vec![Value::Int(k), Value::Int(b)],
            }),
            recent: Vec::new(),
        }
        .encode(),
    }
}

/// Every third key a tombstone, the others `b = k`.
fn stored(k: i64) -> Option<i64> {
    (k % 3 != 0).then_some(k)
}

fn start() -> DaemonNode {
    let disk = Arc::new(MemoryEngine::new());
    disk.apply((0..OBJECTS).map(|k| put(k, stored(k))).collect())
        .expect("memory");
    let config = config(5, false);
    let engine = IndexedEngine::open(disk, &config).expect("open");
    common::start(&config, Arc::new(engine))
}

/// Sends `request` stamped `epoch`, runs any job it makes, and returns the
/// answer.
fn ask(node: &DaemonNode, epoch: u64, request: DaemonRequest) -> DaemonResponse {
    let mut outputs = Vec::new();
    let to = ReplyTo { conn: 1, id: 1 };
    node.on_request(to, Epoch(epoch), request, Duration::ZERO, &mut |o| {
        outputs.push(o)
    });
    let mut answers = Vec::new();
    for output in outputs {
        match output {
            Output::Reply { response, .. } => answers.push(response),
            Output::Job(job) => node.run_job(job, &mut |o| {
                if let Output::Reply { response, .. } = o {
                    answers.push(response);
                }
            }),
            _ => {}
        }
    }
    assert_eq!(answers.len(), 1, "{answers:?}");
    answers.remove(0)
}

/// Reading `backup` is NOTFOUND: the daemon holds no such view.
fn assert_no_view(node: &DaemonNode, backup: u64) {
    let request = DaemonRequest::BackupRead {
        backup,
        region: REGION,
        after: None,
    };
    let read = ask(node, 9, request);
    assert!(
        matches!(
            read,
            DaemonResponse::Failed {
                status: Status::NotFound,
                ..
            }
        ),
        "{read:?}"
    );
}

fn taken(response: &DaemonResponse) -> bool {
    matches!(response, DaemonResponse::BackupState { taken: true, .. })
}

/// Every page of region `REGION` of `backup`, and how many pages.
fn read_all(node: &DaemonNode, backup: u64) -> (Vec<Object>, usize) {
    let mut objects = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let request = DaemonRequest::BackupRead {
            backup,
            region: REGION,
            after,
        };
        match ask(node, 9, request) {
            DaemonResponse::BackupPage {
                objects: page,
                next_after,
            } => {
                pages += 1;
                objects.extend(page);
                match next_after {
                    Some(next) => after = Some(next),
                    None => return (objects, pages),
                }
            }
            other => panic!("not a page: {other:?}"),
        }
    }
}

#[test]
fn a_daemon_freezes_only_when_read_only_at_the_asked_epoch() {
    let node = start();
    let state = ask(&node, 5, DaemonRequest::BackupDrain);
    assert_eq!(
        state,
        DaemonResponse::BackupState {
            epoch: Epoch(5),
            read_only: false,
            in_flight: 0,
            taken: false
        }
    );
    assert!(!taken(&ask(
        &node,
        5,
        DaemonRequest::BackupTake { backup: 7 }
    )));
    assert!(node.on_config(Arc::new(config(6, true)), &mut |_| {}));
    // Asked for the epoch before: the configuration moved, nothing frozen.
    assert!(!taken(&ask(
        &node,
        5,
        DaemonRequest::BackupTake { backup: 7 }
    )));
    assert_no_view(&node, 7);
    assert!(taken(&ask(
        &node,
        6,
        DaemonRequest::BackupTake { backup: 7 }
    )));
}

#[test]
fn pages_show_the_frozen_instant_in_key_order_until_released() {
    let node = start();
    assert!(node.on_config(Arc::new(config(6, true)), &mut |_| {}));
    assert!(taken(&ask(
        &node,
        6,
        DaemonRequest::BackupTake { backup: 7 }
    )));
    // Later writes: changed, deleted and new objects.
    node.engine()
        .apply(vec![put(1, Some(-1)), put(2, None), put(OBJECTS, Some(0))])
        .expect("memory");

    let (objects, pages) = read_all(&node, 7);
    assert!(pages > 1, "one page held everything");
    let mut want: BTreeMap<Vec<u8>, Object> = BTreeMap::new();
    for k in 0..OBJECTS {
        if let Some(b) = stored(k) {
            let object = Object {
                values: vec![Value::Int(k), Value::Int(b)],
            };
            want.insert(key_bytes(&Value::Int(k)), object);
        }
    }
    let want: Vec<Object> = want.into_values().collect();
    assert_eq!(objects, want);

    assert_eq!(
        ask(&node, 9, DaemonRequest::BackupRelease { backup: 7 }),
        DaemonResponse::Done
    );
    assert_no_view(&node, 7);
}
