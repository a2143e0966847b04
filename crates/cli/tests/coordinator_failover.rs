//! Three coordinator members (the first, then two joining it), three
//! daemons and a space; the leader is killed with SIGKILL; within a bounded
//! time a new space can be created and keys written and read through the
//! client.

mod common;

use common::{free_port, wait_for, Cluster, Procs};
use std::time::Duration;
use tessera_client::{BlockingAdmin, BlockingClient, ClientOptions, Outcome, Value};

#[test]
fn the_cluster_serves_after_the_coordinator_leader_dies() {
    let mut cluster = Cluster {
        procs: Procs::default(),
        dir: tempfile::tempdir().expect("tempdir"),
        coordinator_ports: (0..3).map(|_| free_port()).collect(),
        daemon_ports: (0..3).map(|_| free_port()).collect(),
        coordinator_flags: Vec::new(),
        daemon_flags: Vec::new(),
    };
    cluster.start_coordinator(0, None);
    // The first member must be up (and lead) before the others join it.
    let first = BlockingAdmin::new(&cluster.coordinator_addr(0)).expect("admin");
    wait_for(
        "the first coordinator to serve",
        Duration::from_secs(30),
        || first.config().ok(),
    );
    let join = cluster.coordinator_addr(0);
    cluster.start_coordinator(1, Some(join.clone()));
    cluster.start_coordinator(2, Some(join));
    wait_for(
        "three voting coordinator members",
        Duration::from_secs(60),
        || {
            let status = first.coordinator_status().ok()?;
            (status.voters.len() == 3).then_some(())
        },
    );
    for i in 0..3 {
        cluster.start_daemon(i);
    }
    cluster.wait_daemons_available(Duration::from_secs(60));

    let members = cluster.coordinator_addrs();
    let admin =
        BlockingAdmin::with_members(members.clone(), Duration::from_secs(60)).expect("admin");
    admin
        .add_space("space before key k attributes v")
        .expect("add_space before the failure");
    let options = ClientOptions {
        retry_time_max: Duration::from_secs(30),
        ..ClientOptions::default()
    };
    let client = BlockingClient::connect_with(members.clone(), options.clone()).expect("connect");
    let outcome = client
        .put("before", Value::str("x"), [("v", Value::str("1"))])
        .expect("put before the failure");
    assert_eq!(outcome, Outcome::Done);

    // Find the leader and kill it.
    let status = wait_for("a known leader", Duration::from_secs(30), || {
        let status = admin.coordinator_status().ok()?;
        status.leader_addr.is_some().then_some(status)
    });
    let leader_addr = status.leader_addr.expect("leader");
    let leader = (0..3)
        .find(|&i| cluster.coordinator_addr(i) == leader_addr)
        .expect("the leader is one of ours");
    cluster.procs.kill(&format!("coordinator-{leader}"));

    // A new space and key operations succeed within a bounded time.
    wait_for(
        "a space to be created after the failover",
        Duration::from_secs(60),
        || {
            match admin.add_space("space after key k attributes v") {
                Ok(()) => Some(()),
                // An earlier attempt may have succeeded without its answer.
                Err(e) if e.status() == tessera_client::AdminStatus::Duplicate => Some(()),
                Err(_) => None,
            }
        },
    );
    let client =
        BlockingClient::connect_with(members, options).expect("connect after the failover");
    let outcome = wait_for("a put after the failover", Duration::from_secs(60), || {
        client
            .put("after", Value::str("y"), [("v", Value::str("2"))])
            .ok()
    });
    assert_eq!(outcome, Outcome::Done);
    let got = client
        .get("after", Value::str("y"))
        .expect("get after the failover")
        .expect("the object");
    assert_eq!(got.get("v"), Some(&Value::str("2")));
    let got = client
        .get("before", Value::str("x"))
        .expect("get of the old key")
        .expect("the old object");
    assert_eq!(got.get("v"), Some(&Value::str("1")));
}
