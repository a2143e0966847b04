//! The Rust client's result mapping (API.md §3.4–3.5) and errors raised
//! before sending, against a real cluster; and reads that survive a daemon
//! restart on a pooled connection.

mod common;

use common::Cluster;
use std::time::Duration;
use tessera_client::{BlockingClient, CmpFailKind, Outcome, PredOp, Status, Value};

#[test]
fn results_and_errors_follow_the_api() {
    let mut cluster = Cluster::start(3);
    cluster
        .admin()
        .add_space("space acct key int id attributes string owner, int balance, float rate subspace owner create 4 partitions")
        .expect("add_space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    let no_predicates = Vec::<(&str, PredOp)>::new;

    // put_if_not_exist: Done once, then CMPFAIL (HyperDex's False) with
    // the reason "exists".
    let created = client
        .put_if_not_exist(
            "acct",
            Value::Int(1),
            [("owner", Value::str("ann")), ("balance", Value::Int(10))],
        )
        .unwrap();
    assert_eq!(created.as_option(), Some(true));
    let again = client
        .put_if_not_exist("acct", Value::Int(1), [("owner", Value::str("bob"))])
        .unwrap();
    assert_eq!(again.as_option(), Some(false));
    assert_eq!(again.cmp_fail_kind(), Some(CmpFailKind::Exists));
    let got = client.get("acct", Value::Int(1)).unwrap().expect("object");
    assert_eq!(got.get("owner"), Some(&Value::str("ann")));
    // Unwritten attributes hold their defaults; the key is not in a get.
    assert_eq!(got.get("rate"), Some(&Value::Float(0.0)));
    assert_eq!(got.get("id"), None);

    // cond_put: Done (True) when the predicates hold, CMPFAIL (False) when
    // not, NOTFOUND (None) when there is no object.
    let enough = [("balance", PredOp::Ge(Value::Int(5)))];
    assert_eq!(
        client
            .cond_put(
                "acct",
                Value::Int(1),
                enough.clone(),
                [("balance", Value::Int(4))]
            )
            .unwrap(),
        Outcome::Done
    );
    assert_eq!(
        client
            .cond_put(
                "acct",
                Value::Int(1),
                enough.clone(),
                [("balance", Value::Int(0))]
            )
            .unwrap()
            .cmp_fail_kind(),
        Some(CmpFailKind::Predicate)
    );
    assert_eq!(
        client
            .cond_put("acct", Value::Int(2), enough, [("balance", Value::Int(0))])
            .unwrap(),
        Outcome::NotFound
    );
    let got = client.get("acct", Value::Int(1)).unwrap().expect("object");
    assert_eq!(got.get("balance"), Some(&Value::Int(4)));

    // Numbers mix on writes: a float into an int attribute is rounded.
    let outcome = client
        .put(
            "acct",
            Value::Int(3),
            [("balance", Value::Float(2.6)), ("rate", Value::Int(1))],
        )
        .unwrap();
    assert_eq!(outcome, Outcome::Done);
    let got = client.get("acct", Value::Int(3)).unwrap().expect("object");
    assert_eq!(
        (got.get("balance"), got.get("rate")),
        (Some(&Value::Int(3)), Some(&Value::Float(1.0)))
    );

    // Search, sorted search, count, describe.
    let outcome = client
        .put(
            "acct",
            Value::Int(4),
            [("owner", Value::str("ann")), ("balance", Value::Int(40))],
        )
        .unwrap();
    assert!(outcome.is_done());
    let anns = client
        .search("acct", [("owner", PredOp::Eq(Value::str("ann")))])
        .unwrap();
    let ids: Vec<&Value> = anns
        .iter()
        .map(|r| r.get("id").expect("search includes the key"))
        .collect();
    assert_eq!(ids, vec![&Value::Int(1), &Value::Int(4)]);
    let top = client
        .sorted_search("acct", no_predicates(), "balance", 2, true)
        .unwrap();
    let balances: Vec<&Value> = top.iter().map(|r| r.get("balance").unwrap()).collect();
    assert_eq!(balances, vec![&Value::Int(40), &Value::Int(4)]);
    assert_eq!(client.count("acct", no_predicates()).unwrap(), 3);
    let plan = client
        .search_describe("acct", [("owner", PredOp::Eq(Value::str("ann")))])
        .unwrap();
    assert!(plan.contains("contacts 1 of"), "{plan}");

    // del: Done (True), then NOTFOUND (None).
    assert_eq!(client.del("acct", Value::Int(3)).unwrap(), Outcome::Done);
    assert_eq!(client.del("acct", Value::Int(3)).unwrap().as_option(), None);
    assert_eq!(client.get("acct", Value::Int(3)).unwrap(), None);

    // Errors raised before anything is sent.
    let status = |e: tessera_client::ClientError| e.status();
    assert_eq!(
        status(client.get("nope", Value::Int(1)).unwrap_err()),
        Status::UnknownSpace
    );
    assert_eq!(
        status(client.get("acct", Value::str("1")).unwrap_err()),
        Status::WrongType
    );
    assert_eq!(
        status(
            client
                .put("acct", Value::Int(1), [("zz", Value::Int(1))])
                .unwrap_err()
        ),
        Status::UnknownAttr
    );
    assert_eq!(
        status(
            client
                .put("acct", Value::Int(1), [("id", Value::Int(1))])
                .unwrap_err()
        ),
        Status::DontUseKey
    );
    assert_eq!(
        status(
            client
                .put("acct", Value::Int(1), [("owner", Value::Int(1))])
                .unwrap_err()
        ),
        Status::WrongType
    );
    assert_eq!(
        status(
            client
                .search("acct", [("rate", PredOp::Eq(Value::Int(1)))])
                .unwrap_err()
        ),
        Status::WrongType,
        "predicates do not mix numbers"
    );
    assert_eq!(
        status(
            client
                .sorted_search("acct", no_predicates(), "zz", 1, true)
                .unwrap_err()
        ),
        Status::UnknownAttr
    );
    let e = client.get("nope", Value::Int(1)).unwrap_err();
    assert_eq!(e.symbol(), "HYPERDEX_CLIENT_UNKNOWNSPACE");

    // A space created after the client connected is found.
    cluster
        .admin()
        .add_space("space late key k attributes v")
        .unwrap();
    let outcome = client
        .put("late", Value::str("x"), [("v", Value::str("y"))])
        .expect("put in a new space");
    assert_eq!(outcome, Outcome::Done);

    // Every daemon restarts on the same port and data: the pooled
    // connections die, and reads and writes reconnect.
    for i in 0..3 {
        cluster.procs.kill(&format!("daemon-{i}"));
        cluster.start_daemon(i);
    }
    cluster.wait_daemons_available(Duration::from_secs(60));
    let got = client
        .get("acct", Value::Int(1))
        .expect("get after the restart")
        .expect("object");
    assert_eq!(got.get("balance"), Some(&Value::Int(4)));
    assert_eq!(
        client
            .count("acct", no_predicates())
            .expect("count after the restart"),
        2
    );
    let outcome = common::wait_for(
        "a put after the daemons restarted",
        Duration::from_secs(30),
        || {
            client
                .put("acct", Value::Int(5), [("balance", Value::Int(5))])
                .ok()
        },
    );
    assert_eq!(outcome, Outcome::Done);
}
