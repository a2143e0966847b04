//! Failure detection and re-replication through a real member: three
//! daemons heartbeat (from a test task), one goes silent, the leader takes
//! it out of every chain and plans transfers; completing them restores
//! `f + 1` replicas and the cluster becomes stable again.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{agreed_leader, eventually, Member};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_protocol::coord_client::CoordClient;
use tessera_protocol::{AdminStatus, CoordRequest, CoordResponse, HeartbeatAnswer, StopReason};
use tessera_types::{Configuration, DaemonId, DaemonState, Epoch};

const PATIENCE: Duration = Duration::from_secs(15);
const FAILURE_TIMEOUT: Duration = Duration::from_secs(1);

async fn current_config(client: &CoordClient) -> Option<Configuration> {
    client
        .wait_config(Epoch(0), Duration::from_millis(500))
        .await
        .ok()
        .flatten()
}

/// Heartbeats every 200 ms for each daemon in `alive`, reporting the
/// newest epoch the test's client has seen (as a daemon that installs every
/// configuration would).
fn heartbeat(client: CoordClient, alive: Arc<Mutex<BTreeSet<DaemonId>>>) {
    tokio::spawn(async move {
        loop {
            if let Some(config) = current_config(&client).await {
                let ids: Vec<DaemonId> = alive.lock().unwrap().iter().copied().collect();
                for id in ids {
                    let request = CoordRequest::Heartbeat {
                        id,
                        epoch: config.epoch,
                    };
                    let _ = client.call(request).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

async fn stability(client: &CoordClient) -> (Epoch, bool, Vec<DaemonId>, usize) {
    match client.call(CoordRequest::Stability).await.unwrap() {
        CoordResponse::Stability {
            epoch,
            stable,
            lagging,
            transfers,
        } => (epoch, stable, lagging, transfers),
        other => panic!("unexpected answer to Stability: {other:?}"),
    }
}

fn chains(config: &Configuration) -> Vec<Vec<DaemonId>> {
    config
        .spaces
        .iter()
        .flat_map(|s| s.subspaces.iter())
        .flat_map(|sub| sub.regions.iter().map(|r| r.chain.clone()))
        .collect()
}

/// One member with the test's failure timeout, leading; and a client.
async fn leading_member(dir: &std::path::Path) -> (Member, CoordClient) {
    let member =
        Member::start_with("127.0.0.1:0".parse().unwrap(), dir, None, FAILURE_TIMEOUT).await;
    agreed_leader(std::slice::from_ref(&member.addr), 1, PATIENCE).await;
    let client = CoordClient::new([member.addr.clone()]);
    (member, client)
}

/// Registers a daemon at 127.0.0.1:`port`; its id.
async fn register(client: &CoordClient, port: u16) -> DaemonId {
    let register = CoordRequest::RegisterDaemon {
        id: None,
        addr: format!("127.0.0.1:{port}"),
        metrics: None,
        installed: None,
    };
    match client.call(register).await.unwrap() {
        CoordResponse::Registered { id } => id,
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_daemon_is_replaced_by_state_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let (member, client) = leading_member(dir.path()).await;

    // Unknown daemons are told to stop.
    assert_eq!(
        client
            .call(CoordRequest::Heartbeat {
                id: DaemonId(99),
                epoch: Epoch(0),
            })
            .await
            .unwrap(),
        CoordResponse::Heartbeat(HeartbeatAnswer::Stop(StopReason::Unknown))
    );

    let alive = Arc::new(Mutex::new(BTreeSet::new()));
    let mut ids = Vec::new();
    for port in 2012..2015 {
        let id = register(&client, port).await;
        alive.lock().unwrap().insert(id);
        ids.push(id);
    }
    heartbeat(client.clone(), alive.clone());
    let add = CoordRequest::AddSpace {
        description: "space kv key k attributes int v subspace v \
                      create 4 partitions tolerate 1 failure"
            .into(),
    };
    assert_eq!(client.call(add).await.unwrap(), CoordResponse::Done);

    // Everyone reports the space's epoch: stable.
    eventually("a stable cluster", PATIENCE, || async {
        let (_, stable, _, _) = stability(&client).await;
        stable.then_some(())
    })
    .await;
    let before = current_config(&client).await.unwrap();
    assert!(chains(&before).iter().all(|c| c.len() == 2));

    // The victim must hold replicas for the test to mean anything.
    let victim = ids[2];
    assert!(chains(&before).iter().any(|c| c.contains(&victim)));
    alive.lock().unwrap().remove(&victim);
    let started = tokio::time::Instant::now();
    let after = eventually(
        "the silent daemon to be taken offline",
        PATIENCE,
        || async {
            current_config(&client)
                .await
                .filter(|c| c.daemons[&victim].state == DaemonState::Offline)
        },
    )
    .await;
    assert!(
        started.elapsed() >= FAILURE_TIMEOUT - Duration::from_millis(300),
        "not before the timeout: {:?}",
        started.elapsed()
    );
    assert!(chains(&after).iter().all(|c| !c.contains(&victim)));
    assert!(ids[..2]
        .iter()
        .all(|id| after.daemons[id].state == DaemonState::Available));
    // One transfer per region that lost a replica, from its tail, to the
    // other survivor, never to the victim.
    let short: Vec<Vec<DaemonId>> = chains(&after).into_iter().filter(|c| c.len() < 2).collect();
    assert!(!short.is_empty());
    assert_eq!(after.transfers.len(), short.len());
    for t in &after.transfers {
        let (_, _, region) = after.region(t.region).unwrap();
        assert_eq!(region.chain.last(), Some(&t.from));
        assert!(!region.chain.contains(&t.to));
        assert_ne!(t.to, victim);
    }
    let (_, stable, _, transfers) = stability(&client).await;
    assert!(!stable, "transfers are running");
    assert_eq!(transfers, after.transfers.len());

    // The targets report completion: chains are back to f + 1.
    for t in &after.transfers {
        let complete = CoordRequest::TransferComplete { transfer: t.id };
        assert_eq!(client.call(complete).await.unwrap(), CoordResponse::Done);
    }
    // Twice is harmless: NOTFOUND.
    match client
        .call(CoordRequest::TransferComplete {
            transfer: after.transfers[0].id,
        })
        .await
        .unwrap()
    {
        CoordResponse::Failed { status, .. } => assert_eq!(status, AdminStatus::NotFound),
        other => panic!("unexpected {other:?}"),
    }
    let repaired = current_config(&client).await.unwrap();
    assert!(repaired.transfers.is_empty());
    assert!(chains(&repaired)
        .iter()
        .all(|c| c.len() == 2 && !c.contains(&victim)));
    eventually("stable again", PATIENCE, || async {
        let (epoch, stable, lagging, transfers) = stability(&client).await;
        assert!(!lagging.contains(&victim), "offline daemons do not count");
        (stable && transfers == 0 && epoch == repaired.epoch).then_some(())
    })
    .await;

    // The operator kills the victim: its next heartbeat is told to stop.
    assert_eq!(
        client
            .call(CoordRequest::ServerKill { id: victim })
            .await
            .unwrap(),
        CoordResponse::Done
    );
    assert_eq!(
        client
            .call(CoordRequest::Heartbeat {
                id: victim,
                epoch: repaired.epoch,
            })
            .await
            .unwrap(),
        CoordResponse::Heartbeat(HeartbeatAnswer::Stop(StopReason::Killed))
    );
    // Forgetting an unknown daemon is NOTFOUND; forgetting the victim works.
    match client
        .call(CoordRequest::ServerForget { id: DaemonId(99) })
        .await
        .unwrap()
    {
        CoordResponse::Failed { status, .. } => assert_eq!(status, AdminStatus::NotFound),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        client
            .call(CoordRequest::ServerForget { id: victim })
            .await
            .unwrap(),
        CoordResponse::Done
    );
    let last = current_config(&client).await.unwrap();
    assert!(!last.daemons.contains_key(&victim));
    member.stop().await.unwrap();
}

/// A daemon taken out of a chain keeps heartbeating, but until it reports
/// the epoch it left the chain in, its lease is not renewed: a healed or
/// resumed daemon that has not installed the new configuration would
/// otherwise lead keys and answer reads it no longer owns. It is not told
/// to stop, and it is not suspected either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lease_for_a_daemon_behind_the_epoch_it_left_a_chain_in() {
    let dir = tempfile::tempdir().unwrap();
    let (member, client) = leading_member(dir.path()).await;
    let mut ids = Vec::new();
    for port in 2012..2015 {
        ids.push(register(&client, port).await);
    }
    let add = CoordRequest::AddSpace {
        description: "space kv key k create 3 partitions tolerate 1 failure".into(),
    };
    assert_eq!(client.call(add).await.unwrap(), CoordResponse::Done);
    let before = current_config(&client).await.unwrap();
    let victim = chains(&before)[0][0];
    let other = *ids.iter().find(|&&d| d != victim).unwrap();
    let heartbeat = |id, epoch| {
        let client = client.clone();
        async move {
            client
                .call(CoordRequest::Heartbeat { id, epoch })
                .await
                .unwrap()
        }
    };
    let renewed = CoordResponse::Heartbeat(HeartbeatAnswer::Renewed);
    assert_eq!(heartbeat(victim, before.epoch).await, renewed);
    // Every daemon heartbeats meanwhile (the operator's command waits
    // longer than the failure timeout), reporting the newest epoch.
    let alive: BTreeSet<DaemonId> = ids.iter().copied().collect();
    self::heartbeat(client.clone(), Arc::new(Mutex::new(alive)));

    // Taking a serving daemon out waits until its lease ran out; its
    // lease is refused meanwhile.
    let offline = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .call(CoordRequest::ServerOffline { id: victim })
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        matches!(
            heartbeat(victim, before.epoch).await,
            CoordResponse::Heartbeat(HeartbeatAnswer::NoLeaseUntil { .. })
        ),
        "no lease while the operator's command waits"
    );
    assert_eq!(offline.await.unwrap().unwrap(), CoordResponse::Done);
    let after = current_config(&client).await.unwrap();
    assert!(after.epoch > before.epoch);
    // Taken out by an operator: no lease, and it does not ask to come back.
    assert_eq!(
        heartbeat(victim, before.epoch).await,
        CoordResponse::Heartbeat(HeartbeatAnswer::HeldOffline)
    );
    assert_eq!(
        client
            .call(CoordRequest::ServerOnline { id: victim })
            .await
            .unwrap(),
        CoordResponse::Done
    );
    let online = current_config(&client).await.unwrap();
    // Online again but still behind the epoch it left its chains in: no
    // lease until it installs that epoch.
    match heartbeat(victim, before.epoch).await {
        CoordResponse::Heartbeat(HeartbeatAnswer::NoLeaseUntil { epoch }) => {
            assert_eq!(epoch, after.epoch)
        }
        other => panic!("a stale daemon's lease was renewed: {other:?}"),
    }
    // Others, behind or not, and the victim once it caught up, are renewed.
    assert_eq!(heartbeat(other, before.epoch).await, renewed);
    assert_eq!(heartbeat(victim, online.epoch).await, renewed);
    member.stop().await.unwrap();
}
