//! The daemon node's side of the heartbeat protocol, driven directly as
//! the shell and the simulator drive it: what each heartbeat answer makes
//! it do, and how a storage failure turns heartbeats into a request to
//! leave, then a stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::core::ReplyTo;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{DaemonNode, NodeOptions, Output, Stopping, LEASE};
use tessera_protocol::{
    CoordRequest, CoordResponse, DaemonRequest, DaemonResponse, HeartbeatAnswer, LeaveReason,
    Status, StopReason,
};
use tessera_storage::fault::{Hooked, Hooks};
use tessera_storage::{MemoryEngine, StorageError};
use tessera_types::{Configuration, DaemonId, DaemonInfo, DaemonState, Epoch, SpaceId, Value};

/// Hooks of a disk whose fsync fails once told to (a disk gone bad).
#[derive(Default)]
struct Fsync {
    broken: AtomicBool,
}

impl Hooks for Fsync {
    fn sync(&self) -> Result<(), StorageError> {
        if self.broken.load(Ordering::Acquire) {
            return Err(StorageError::Engine("simulated fsync failure".into()));
        }
        Ok(())
    }
}

type Disk = Hooked<Fsync>;

const ME: DaemonId = DaemonId(1);

fn node() -> (DaemonNode, Arc<Disk>) {
    let config = Configuration {
        epoch: Epoch(3),
        daemons: [(
            ME,
            DaemonInfo {
                id: ME,
                addr: "d1:1".into(),
                state: DaemonState::Available,
                metrics: None,
            },
        )]
        .into_iter()
        .collect(),
        ..Configuration::default()
    };
    let disk = Arc::new(Hooked::new(Arc::new(MemoryEngine::new()), Fsync::default()));
    let index = IndexedEngine::open(disk.clone(), &config).unwrap();
    let options = NodeOptions {
        addr: "d1:1".into(),
        transfer_batch: 8,
        collect_ticks: tessera_daemon::node::COLLECT_TICKS,
        metrics: None,
    };
    let mut outputs = Vec::new();
    let node = DaemonNode::new(
        ME,
        options,
        Arc::new(config),
        Arc::new(index),
        secs(0),
        &mut |o| outputs.push(o),
    );
    assert!(outputs.is_empty(), "{outputs:?}");
    (node, disk)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn answer(
    node: &DaemonNode,
    answer: HeartbeatAnswer,
    sent: Duration,
    now: Duration,
) -> Vec<Output> {
    let request = node.heartbeat();
    assert!(matches!(
        request,
        CoordRequest::Heartbeat {
            id: ME,
            epoch: Epoch(3)
        }
    ));
    let mut outputs = Vec::new();
    node.on_coord_answer(
        &request,
        sent,
        CoordResponse::Heartbeat(answer),
        now,
        &mut |o| outputs.push(o),
    );
    outputs
}

/// A get the node answers itself: it refuses (RECONFIGURE) exactly when
/// it may not serve.
fn refuses_clients(node: &DaemonNode, now: Duration) -> bool {
    let mut outputs = Vec::new();
    let request = DaemonRequest::Get {
        space: SpaceId(1),
        key: Value::Int(1),
        auth: Default::default(),
    };
    node.on_request(
        ReplyTo { conn: 1, id: 1 },
        Epoch(3),
        request,
        now,
        &mut |o| outputs.push(o),
    );
    match outputs.as_slice() {
        [Output::Reply {
            response: DaemonResponse::Failed { status, .. },
            ..
        }] => *status == Status::Reconfigure,
        [Output::Reply { .. }] => false,
        other => panic!("one reply expected: {other:?}"),
    }
}

#[test]
fn the_lease_follows_the_answers_and_registration_counts_as_the_first() {
    let (node, _) = node();
    assert!(node.serving(secs(0)) && !refuses_clients(&node, secs(0)));
    assert!(!node.serving(LEASE), "a lease from registration runs out");
    assert!(refuses_clients(&node, LEASE));
    assert!(answer(&node, HeartbeatAnswer::Renewed, secs(5), secs(5)).is_empty());
    assert!(node.serving(secs(5)));
    let refused = answer(
        &node,
        HeartbeatAnswer::NoLeaseUntil { epoch: Epoch(4) },
        secs(6),
        secs(6),
    );
    assert!(refused.is_empty());
    assert!(
        !node.serving(secs(6)),
        "the answer to the newer heartbeat decides"
    );
}

#[test]
fn a_daemon_taken_offline_while_alive_asks_to_come_back_with_a_backoff() {
    let (node, _) = node();
    let asks = |outputs: Vec<Output>| {
        outputs
            .iter()
            .filter(|o| {
                matches!(o, Output::Coord(CoordRequest::RegisterDaemon { id: Some(ME), addr, .. }) if addr == "d1:1")
            })
            .count()
    };
    assert_eq!(
        asks(answer(&node, HeartbeatAnswer::Offline, secs(10), secs(10))),
        1
    );
    assert!(!node.serving(secs(10)));
    // Heartbeats keep being answered Offline every half second: it does
    // not ask again until the backoff has passed.
    let mut total = 0;
    for half in 21..=40 {
        let t = Duration::from_millis(half * 500);
        total += asks(answer(&node, HeartbeatAnswer::Offline, t, t));
    }
    // From 10.5 s to 20 s: asks at 11 s (after 1 s), 13 s (2 s), 17 s (4 s).
    assert_eq!(total, 3);
    // An operator's offline waits; a stop stops.
    assert_eq!(
        asks(answer(
            &node,
            HeartbeatAnswer::HeldOffline,
            secs(60),
            secs(60)
        )),
        0
    );
    let stop = answer(
        &node,
        HeartbeatAnswer::Stop(StopReason::Killed),
        secs(61),
        secs(61),
    );
    assert!(matches!(
        stop.as_slice(),
        [Output::Stop(Stopping::Told(StopReason::Killed))]
    ));
}

#[test]
fn a_failed_fsync_poisons_the_node_which_leaves_then_stops() {
    let (node, disk) = node();
    assert!(answer(&node, HeartbeatAnswer::Renewed, secs(1), secs(1)).is_empty());
    let mut outputs = Vec::new();
    node.sync(&mut |o| outputs.push(o));
    assert!(outputs.is_empty(), "a healthy sync outputs nothing");
    disk.hooks().broken.store(true, Ordering::Release);
    node.sync(&mut |o| outputs.push(o));
    let leave = CoordRequest::Leave {
        id: ME,
        reason: LeaveReason::CannotPersist,
    };
    assert!(
        matches!(outputs.as_slice(), [Output::Coord(r)] if *r == leave),
        "it asks to leave at once: {outputs:?}"
    );
    assert!(node.poisoned());
    assert!(
        refuses_clients(&node, secs(1)),
        "a poisoned node serves no client"
    );
    // Instead of heartbeats it keeps asking to leave, and stops once out.
    assert_eq!(node.heartbeat(), leave);
    let mut outputs = Vec::new();
    node.on_coord_answer(&leave, secs(2), CoordResponse::Done, secs(2), &mut |o| {
        outputs.push(o)
    });
    assert!(matches!(
        outputs.as_slice(),
        [Output::Stop(Stopping::CannotPersist)]
    ));
}
