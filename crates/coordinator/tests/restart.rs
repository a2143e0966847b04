//! A member restarted from its data directory resumes: same node id, same
//! configuration and epoch, and ids handed out before are never reused.

mod common;

use common::{agreed_leader, status, Member};
use std::time::Duration;
use tessera_protocol::coord_client::CoordClient;
use tessera_protocol::{CoordRequest, CoordResponse};
use tessera_types::{DaemonId, Epoch, SpaceId};

const PATIENCE: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_member_restart_keeps_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let member = Member::start(dir.path(), None).await;
    let addr = member.addr.clone();
    agreed_leader(std::slice::from_ref(&addr), 1, PATIENCE).await;
    let node_id = status(&addr).await.unwrap().node_id;

    let client = CoordClient::new([addr.clone()]);
    for port in [2012, 2013] {
        let register = CoordRequest::RegisterDaemon {
            id: None,
            addr: format!("127.0.0.1:{port}"),
            metrics: None,
            installed: None,
        };
        assert!(matches!(
            client.call(register).await.unwrap(),
            CoordResponse::Registered { .. }
        ));
    }
    for description in [
        "space gone key k create 4 partitions",
        "space kv key k attributes v create 4 partitions",
    ] {
        let add = CoordRequest::AddSpace {
            description: description.into(),
        };
        assert_eq!(client.call(add).await.unwrap(), CoordResponse::Done);
    }
    let rm = CoordRequest::RmSpace {
        name: "gone".into(),
    };
    assert_eq!(client.call(rm).await.unwrap(), CoordResponse::Done);
    let before = client
        .wait_config(Epoch(0), Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before.spaces.len(), 1);
    member.stop().await.unwrap();

    // Restart at the same address. A --join given now must be ignored: the
    // member has state, so it neither re-initializes nor re-joins.
    let member = Member::start_at(
        addr.parse().unwrap(),
        dir.path(),
        Some("127.0.0.1:1".into()),
    )
    .await;
    agreed_leader(std::slice::from_ref(&addr), 1, PATIENCE).await;
    assert_eq!(
        status(&addr).await.unwrap().node_id,
        node_id,
        "node id persisted"
    );

    let client = CoordClient::new([addr.clone()]);
    let after = client
        .wait_config(Epoch(0), Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, before, "configuration and epoch survive the restart");

    // Ids are never reused: the next daemon, space and regions are new.
    let register = CoordRequest::RegisterDaemon {
        id: None,
        addr: "127.0.0.1:2014".into(),
        metrics: None,
        installed: None,
    };
    assert_eq!(
        client.call(register).await.unwrap(),
        CoordResponse::Registered { id: DaemonId(3) }
    );
    // A restarted daemon keeps its id (and leaves the chains it shares
    // with another replica, which is one change).
    let again = CoordRequest::RegisterDaemon {
        id: Some(DaemonId(1)),
        addr: "127.0.0.1:2012".into(),
        metrics: None,
        installed: None,
    };
    assert_eq!(
        client.call(again).await.unwrap(),
        CoordResponse::Registered { id: DaemonId(1) }
    );
    let add = CoordRequest::AddSpace {
        description: "space more key k create 2 partitions".into(),
    };
    assert_eq!(client.call(add).await.unwrap(), CoordResponse::Done);
    let latest = client
        .wait_config(after.epoch, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        latest.epoch,
        Epoch(after.epoch.0 + 3),
        "one epoch per change: a registration, a restart, a space"
    );
    let more = latest.space("more").unwrap();
    assert_eq!(
        more.id,
        SpaceId(3),
        "space ids 1 (removed) and 2 are not reused"
    );
    let region_max_before = before
        .spaces
        .iter()
        .flat_map(|s| {
            s.subspaces
                .iter()
                .flat_map(|sub| sub.regions.iter().map(|r| r.id))
        })
        .max()
        .unwrap();
    assert!(more.subspaces[0]
        .regions
        .iter()
        .all(|r| r.id > region_max_before));
    member.stop().await.unwrap();
}
