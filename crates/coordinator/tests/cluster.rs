//! Three coordinator members: joining, writes through any member, and
//! surviving the loss of the leader.

mod common;

use common::{agreed_leader, ask, Member};
use std::time::Duration;
use tessera_protocol::coord_client::CoordClient;
use tessera_protocol::{AdminStatus, CoordRequest, CoordResponse};
use tessera_types::{DaemonId, Epoch};

const PATIENCE: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_members_survive_the_loss_of_the_leader() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let first = Member::start(dirs[0].path(), None).await;
    agreed_leader(std::slice::from_ref(&first.addr), 1, PATIENCE).await;
    let second = Member::start(dirs[1].path(), Some(first.addr.clone())).await;
    let third = Member::start(dirs[2].path(), Some(first.addr.clone())).await;
    let mut members = vec![first, second, third];
    let addrs: Vec<String> = members.iter().map(|m| m.addr.clone()).collect();
    let leader = agreed_leader(&addrs, 3, PATIENCE).await;

    // Start from a follower: writes must follow the NotLeader redirect.
    let follower = addrs.iter().find(|a| **a != leader).unwrap().clone();
    match ask(
        &follower,
        CoordRequest::RmSpace {
            name: "none".into(),
        },
    )
    .await
    .unwrap()
    {
        CoordResponse::NotLeader { leader_addr } => {
            assert_eq!(leader_addr.as_deref(), Some(leader.as_str()))
        }
        other => panic!("a follower answered a write with {other:?}"),
    }
    let client = CoordClient::new([follower.clone()]);

    // No daemons yet: AddSpace is refused with a clear COORDFAIL.
    match client
        .call(CoordRequest::AddSpace {
            description: "space kv key k attributes v".into(),
        })
        .await
        .unwrap()
    {
        CoordResponse::Failed { status, reason } => {
            assert_eq!(status, AdminStatus::CoordFail);
            assert!(reason.contains("no daemons are available"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // A bad description is BADSPACE with a position.
    match client
        .call(CoordRequest::AddSpace {
            description: "space kv key".into(),
        })
        .await
        .unwrap()
    {
        CoordResponse::Failed { status, reason } => {
            assert_eq!(status, AdminStatus::BadSpace);
            assert!(reason.contains("line 1"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }

    for (i, expected) in (1..=3).enumerate() {
        let addr = format!("127.0.0.1:{}", 2012 + i);
        match client
            .call(CoordRequest::RegisterDaemon {
                id: None,
                addr,
                metrics: None,
                installed: None,
            })
            .await
            .unwrap()
        {
            CoordResponse::Registered { id } => assert_eq!(id, DaemonId(expected)),
            other => panic!("unexpected {other:?}"),
        }
    }
    let add = CoordRequest::AddSpace {
        description: "space kv key k attributes v create 8 partitions".into(),
    };
    assert_eq!(client.call(add.clone()).await.unwrap(), CoordResponse::Done);
    match client.call(add).await.unwrap() {
        CoordResponse::Failed { status, .. } => assert_eq!(status, AdminStatus::Duplicate),
        other => panic!("unexpected {other:?}"),
    }

    let before = client
        .wait_config(Epoch(0), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a configuration");
    assert!(before.space("kv").is_some());
    assert_eq!(before.daemons.len(), 3);
    let mut coordinators: Vec<String> =
        before.coordinators.iter().map(|c| c.addr.clone()).collect();
    coordinators.sort();
    let mut expected = addrs.clone();
    expected.sort();
    assert_eq!(coordinators, expected);
    // Nothing newer: the long-poll ends empty after its wait.
    let nothing = client
        .wait_config(before.epoch, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(nothing.is_none());

    // Stop the leader.
    let index = members.iter().position(|m| m.addr == leader).unwrap();
    members.remove(index).stop().await.unwrap();
    let survivors: Vec<String> = members.iter().map(|m| m.addr.clone()).collect();
    let new_leader = agreed_leader(&survivors, 3, PATIENCE).await;
    assert_ne!(new_leader, leader);

    // The client (which learned of the old leader) fails over.
    let add = CoordRequest::AddSpace {
        description: "space kv2 key k attributes int n subspace n".into(),
    };
    assert_eq!(client.call(add).await.unwrap(), CoordResponse::Done);
    let after = client
        .wait_config(before.epoch, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a newer configuration");
    assert!(after.epoch > before.epoch, "epochs only grow");
    assert!(after.space("kv").is_some() && after.space("kv2").is_some());
    assert_eq!(
        after.space("kv").unwrap(),
        before.space("kv").unwrap(),
        "the first space is unchanged"
    );
    assert_eq!(after.daemons, before.daemons);

    // Every survivor serves the new configuration.
    for addr in &survivors {
        let only_this = CoordClient::new([addr.clone()]);
        let config = common::eventually("a survivor to apply the new space", PATIENCE, || async {
            match only_this
                .wait_config(Epoch(after.epoch.0 - 1), Duration::from_millis(500))
                .await
            {
                Ok(Some(config)) => Some(config),
                _ => None,
            }
        })
        .await;
        assert!(config.epoch >= after.epoch);
        assert!(config.space("kv2").is_some());
    }

    for member in members {
        member.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_follower_catches_up_without_rejoining() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let first = Member::start(dirs[0].path(), None).await;
    agreed_leader(std::slice::from_ref(&first.addr), 1, PATIENCE).await;
    let via = first.addr.clone();
    let mut members = vec![first];
    for dir in &dirs[1..] {
        members.push(Member::start(dir.path(), Some(via.clone())).await);
    }
    let addrs: Vec<String> = members.iter().map(|m| m.addr.clone()).collect();
    let leader = agreed_leader(&addrs, 3, PATIENCE).await;
    let client = CoordClient::new(addrs.clone());
    let register = CoordRequest::RegisterDaemon {
        id: None,
        addr: "127.0.0.1:2012".into(),
        metrics: None,
        installed: None,
    };
    assert!(matches!(
        client.call(register).await.unwrap(),
        CoordResponse::Registered { .. }
    ));

    // Stop a follower, change the configuration while it is down.
    let index = members.iter().position(|m| m.addr != leader).unwrap();
    let follower = members.remove(index);
    let (follower_addr, follower_dir) = (follower.socket_addr(), follower.dir.clone());
    follower.stop().await.unwrap();
    let add = CoordRequest::AddSpace {
        description: "space kv key k create 4 partitions".into(),
    };
    assert_eq!(client.call(add).await.unwrap(), CoordResponse::Done);
    let latest = client
        .wait_config(Epoch(0), Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();

    // It comes back from its directory (its --join is ignored: it is a voter).
    let follower = Member::start_at(follower_addr, &follower_dir, Some(via)).await;
    let only_follower = CoordClient::new([follower.addr.clone()]);
    let caught_up = common::eventually("the restarted follower to catch up", PATIENCE, || async {
        match only_follower
            .wait_config(Epoch(latest.epoch.0 - 1), Duration::from_millis(500))
            .await
        {
            Ok(Some(config)) if config.epoch >= latest.epoch => Some(config),
            _ => None,
        }
    })
    .await;
    assert_eq!(caught_up.space("kv"), latest.space("kv"));
    assert_eq!(caught_up.coordinators.len(), 3, "no member was added twice");
    members.push(follower);
    for member in members {
        member.stop().await.unwrap();
    }
}
