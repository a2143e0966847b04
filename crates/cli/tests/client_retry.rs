//! Transparent retries are applied at most once. A proxy in front of the
//! key's point leader lets the update through and drops its answer, closing
//! the connection: the client cannot know whether the update was applied,
//! retries it with the same (client id, request number), and the point
//! leader answers from the key's record instead of applying it again. A
//! second application would show: the atomic add would count twice, and
//! put_if_not_exist and del would report their own effect as a failure.
//! A read retries too, after a bounded wait, when its daemon freezes.

mod common;

use common::ProxiedCluster;
use std::time::Duration;
use tessera_client::{BlockingClient, ClientOptions, Outcome, Value};
use tessera_types::coordinate::coordinate;

const SPACE: &str =
    "space r key k attributes int n subspace n create 4 partitions tolerate 1 failure";

/// The index of the daemon leading `key` in space `r`.
fn leader_of(cluster: &ProxiedCluster, client: &BlockingClient, key: &str) -> usize {
    let config = client.config();
    let layout = &config.space("r").expect("space r").subspaces[0];
    let c = coordinate(&Value::str(key)).expect("hashable key");
    let head = layout.regions[layout.region_index(&[c])].chain[0];
    (0..cluster.daemons.len())
        .find(|&i| cluster.daemon_id(&config, i) == Some(head))
        .expect("the point leader is one of the cluster's daemons")
}

fn n_of(client: &BlockingClient, key: &str) -> Option<i64> {
    client
        .get("r", Value::str(key))
        .expect("get")
        .map(|r| match r.get("n") {
            Some(Value::Int(n)) => *n,
            other => panic!("n is {other:?}"),
        })
}

#[test]
fn an_update_whose_answer_is_lost_is_retried_and_applied_once() {
    let cluster = ProxiedCluster::start(1, 3);
    cluster.admin().add_space(SPACE).expect("add_space");
    let options = ClientOptions {
        retry_time_max: Duration::from_secs(30),
        ..ClientOptions::default()
    };
    let client =
        BlockingClient::connect_with(cluster.coordinator_addrs(), options).expect("connect");
    client
        .space("r")
        .expect("the client sees the space once it is created");

    for round in 0..4 {
        let key = format!("k{round}");
        let leader = leader_of(&cluster, &client, &key);
        let proxy = &cluster.daemons[leader].proxy;

        // Creation: the retry must not find "exists" and answer CMPFAIL.
        let dropped = proxy.replies_dropped();
        proxy.drop_next_replies(1);
        let created = client
            .put_if_not_exist("r", Value::str(&key), [("n", Value::Int(10))])
            .expect("put_if_not_exist survives a lost answer");
        assert_eq!(
            proxy.replies_dropped(),
            dropped + 1,
            "an answer was dropped"
        );
        assert_eq!(
            created,
            Outcome::Done,
            "the retry reported the client's own creation as CMPFAIL"
        );
        assert_eq!(n_of(&client, &key), Some(10));

        // An atomic add must count once.
        proxy.drop_next_replies(1);
        let added = client
            .block_on(
                client
                    .client()
                    .atomic_add("r", Value::str(&key), [("n", Value::Int(5))]),
            )
            .expect("atomic_add survives a lost answer");
        assert_eq!(
            proxy.replies_dropped(),
            dropped + 2,
            "an answer was dropped"
        );
        assert_eq!(added, Outcome::Done);
        assert_eq!(n_of(&client, &key), Some(15), "the add was applied twice");

        // A delete must report its own effect, not NOTFOUND.
        proxy.drop_next_replies(1);
        let deleted = client
            .del("r", Value::str(&key))
            .expect("del survives a lost answer");
        assert_eq!(
            proxy.replies_dropped(),
            dropped + 3,
            "an answer was dropped"
        );
        assert_eq!(
            deleted,
            Outcome::Done,
            "the retry reported the client's own delete as NOTFOUND"
        );
        assert_eq!(n_of(&client, &key), None);
    }
}

/// A get sent to a point leader that then freezes (SIGSTOP) is sent again
/// once its attempt times out, and answered by the daemon that replaces
/// the frozen one, which stays frozen until the answer is in. Without a
/// bound per read attempt, the get would wait for the frozen daemon for
/// its whole retry time and fail although the cluster routed around it.
#[test]
fn a_read_from_a_frozen_point_leader_is_answered_by_its_successor() {
    let cluster = ProxiedCluster::start(1, 3);
    cluster.admin().add_space(SPACE).expect("add_space");
    let options = ClientOptions {
        retry_time_max: Duration::from_secs(20),
        update_timeout: Duration::from_secs(1),
        ..ClientOptions::default()
    };
    let client =
        BlockingClient::connect_with(cluster.coordinator_addrs(), options).expect("connect");
    let put = client
        .put("r", Value::str("frozen"), [("n", Value::Int(7))])
        .expect("put");
    assert_eq!(put, Outcome::Done);
    let leader = leader_of(&cluster, &client, "frozen");
    cluster.pause_daemon(leader, true);
    let got = client.get("r", Value::str("frozen"));
    cluster.pause_daemon(leader, false);
    let record = got
        .expect("a get while the point leader is frozen")
        .expect("the object");
    assert_eq!(record.get("n"), Some(&Value::Int(7)));
}
