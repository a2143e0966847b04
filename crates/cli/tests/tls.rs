//! TLS and the admin credential on real processes (docs/design/tls.md):
//! a cluster whose every connection is TLS — two coordinator members (Raft
//! and the join over TLS), two daemons (chains over TLS) — serves the CLI
//! and the Rust client, checked against a model of what was written;
//! plain clients and clients of another CA are refused with a clear error;
//! a daemon takes chain messages only from a holder of the cluster's
//! certificate;
//! configuration changes without the credential, or with a wrong one, are
//! refused with UNAUTHORIZED and change nothing.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{run_cli, wait_for, Cluster};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tessera_client::{
    AdminStatus, AdminToken, BlockingAdmin, BlockingClient, ClientOptions, CoordLink, PredOp,
    Transport, Value,
};
use tessera_protocol::test_certs::TestPki;
use tessera_protocol::{read_frame, write_frame, DaemonRequest, HeldObjects, Message};
use tessera_types::{DaemonId, Epoch, RegionId, SpaceId};
use tokio::io::AsyncWriteExt;

const SPACE: &str = "space people key int id attributes string city, int age \
                     subspace city create 4 partitions tolerate 1 failure";
const TOKEN: &str = "a-test-admin-token-of-some-length";
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// `tessera ARGS --host 127.0.0.1 --port P EXTRA…`, returning (success,
/// stdout, stderr).
fn cli(cluster: &Cluster, args: &[&str], extra: &[&str]) -> (bool, String, String) {
    let port = cluster.coordinator_ports[0].to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--host", "127.0.0.1", "--port", &port]);
    all.extend(extra);
    run_cli(&all, None, CLI_TIMEOUT)
}

/// Harmless anti-entropy messages of both directions (of epoch 0, which
/// every daemon ignores).
fn anti_entropy_messages() -> [Message; 2] {
    let objects = || HeldObjects {
        epoch: Epoch(0),
        space: SpaceId(u64::MAX),
        region: RegionId(u64::MAX),
        objects: vec![],
        removed: vec![],
        absent: vec![],
        from: DaemonId(u64::MAX),
    };
    [Message::Held(objects()), Message::Expected(objects())]
}

/// Sends peer message `msg` and then a request to the daemon at `addr`
/// over `transport`; whether the request was answered (the daemon closes
/// a connection that sends peer messages without the cluster's
/// certificate).
fn peer_message_then_request(addr: &str, transport: &Transport, msg: &Message) -> bool {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (mut read, mut write) = transport
            .connect(addr, Duration::from_secs(10))
            .await
            .expect("connect to the daemon")
            .into_split();
        let probe = Message::DaemonRequest {
            id: 7,
            epoch: Epoch(1),
            request: DaemonRequest::SearchKeys {
                space: SpaceId(u64::MAX),
                region: RegionId(u64::MAX),
                checks: vec![],
                after: None,
                auth: Default::default(),
                op: Default::default(),
            },
        };
        write_frame(&mut write, msg).await.expect("write");
        write_frame(&mut write, &probe).await.expect("write");
        write.flush().await.expect("flush");
        // The timeout only keeps a broken daemon from hanging the test.
        let answer = tokio::time::timeout(Duration::from_secs(30), read_frame(&mut read, 1 << 20))
            .await
            .expect("an answer or a close");
        match answer {
            Ok(Message::DaemonResponse { id: 7, .. }) => true,
            Ok(other) => panic!("unexpected message {other:?}"),
            Err(_) => false,
        }
    })
}

fn city(i: i64) -> &'static str {
    ["Oslo", "Lima", "Pune"][(i % 3) as usize]
}

#[test]
fn a_tls_cluster_serves_tls_clients_and_refuses_the_others() {
    let pki_dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::generate(pki_dir.path(), "cluster");
    let stranger = TestPki::generate(pki_dir.path(), "stranger");
    let token_file = pki_dir.path().join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write the token");
    let wrong_token_file = pki_dir.path().join("wrong-token");
    std::fs::write(&wrong_token_file, "another-token-entirely-0123").expect("write");

    let (ca, cert, key, token) = (
        path(&pki.ca),
        path(&pki.cert),
        path(&pki.key),
        path(&token_file),
    );
    let server_flags = [
        "--tls-ca",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--admin-token-file",
        &token,
    ];
    let mut cluster = Cluster::launch(2, &server_flags, &server_flags);
    let link = CoordLink {
        transport: Transport::tls(&pki.client_files()).expect("client TLS"),
        admin_token: Some(AdminToken::new(TOKEN.as_bytes()).expect("token")),
    };
    let admin = BlockingAdmin::with_link(
        [cluster.coordinator_addr(0)],
        Duration::from_secs(10),
        link.clone(),
    )
    .expect("admin");
    cluster.wait_daemons_available_with(&admin, Duration::from_secs(60));

    // A second member joins over TLS, with the credential (the join and
    // the Raft RPCs it then receives are gated).
    cluster.coordinator_ports.push(common::free_port());
    cluster.start_coordinator(1, Some(cluster.coordinator_addr(0)));
    wait_for("the second member to vote", Duration::from_secs(60), || {
        let status = admin.coordinator_status().ok()?;
        (status.voters.len() == 2).then_some(())
    });

    let tls = ["--tls-ca", ca.as_str()];
    let tls_admin = [
        "--tls-ca",
        ca.as_str(),
        "--admin-token-file",
        token.as_str(),
    ];

    // The admin credential: refused without it and with a wrong one, and
    // nothing changed; accepted with it.
    let (ok, _, err) = cli(&cluster, &["add-space", SPACE], &tls);
    assert!(!ok && err.starts_with("UNAUTHORIZED"), "{err}");
    let wrong = path(&wrong_token_file);
    let (ok, _, err) = cli(
        &cluster,
        &["add-space", SPACE],
        &["--tls-ca", &ca, "--admin-token-file", &wrong],
    );
    assert!(!ok && err.starts_with("UNAUTHORIZED"), "{err}");
    assert!(admin.list_spaces().expect("list").is_empty());
    let (ok, _, err) = cli(&cluster, &["add-space", SPACE], &tls_admin);
    assert!(ok, "{err}");
    // Reads of the configuration stay open to TLS clients.
    let (ok, out, err) = cli(&cluster, &["list-spaces"], &tls);
    assert!(ok && out.trim() == "people", "{out} {err}");

    // Data through the CLI, over TLS to the coordinator and the daemons.
    let mut model: BTreeMap<i64, (String, i64)> = BTreeMap::new();
    for i in 0..12i64 {
        let json = format!(r#"{{"city": "{}", "age": {}}}"#, city(i), 20 + i);
        let (ok, _, err) = cli(&cluster, &["put", "people", &i.to_string(), &json], &tls);
        assert!(ok, "put {i}: {err}");
        model.insert(i, (city(i).to_string(), 20 + i));
    }
    let (ok, out, err) = cli(&cluster, &["get", "people", "7"], &tls);
    assert!(ok, "{err}");
    let got: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(got["city"], model[&7].0.as_str());
    assert_eq!(got["age"], model[&7].1);
    let (ok, out, err) = cli(&cluster, &["search", "people", r#"{"city": "Lima"}"#], &tls);
    assert!(ok, "{err}");
    let mut found: Vec<i64> = out
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            v["id"].as_i64().expect("id")
        })
        .collect();
    found.sort();
    let expected: Vec<i64> = model
        .iter()
        .filter(|(_, (c, _))| c == "Lima")
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(found, expected);

    // Data through the Rust client over TLS.
    let options = ClientOptions {
        transport: link.transport.clone(),
        ..ClientOptions::default()
    };
    let client =
        BlockingClient::connect_with([cluster.coordinator_addr(0)], options).expect("connect");
    for i in 12..24i64 {
        let attrs = [("city", Value::str(city(i))), ("age", Value::Int(20 + i))];
        client
            .block_on(client.client().put("people", Value::Int(i), attrs))
            .expect("put")
            .into_result()
            .expect("done");
        model.insert(i, (city(i).to_string(), 20 + i));
    }
    for (k, (c, age)) in &model {
        let record = client
            .get("people", Value::Int(*k))
            .expect("get")
            .expect("present");
        assert_eq!(record.get("city"), Some(&Value::str(c)));
        assert_eq!(record.get("age"), Some(&Value::Int(*age)));
    }
    let old = client
        .count("people", [("age", PredOp::Ge(Value::Int(30)))])
        .expect("count");
    assert_eq!(
        old,
        model.values().filter(|(_, age)| *age >= 30).count() as u64
    );
    let pune = client
        .search("people", [("city", PredOp::Eq(Value::str("Pune")))])
        .expect("search");
    assert_eq!(
        pune.len(),
        model.values().filter(|(c, _)| c == "Pune").count()
    );

    // A plain client is told the coordinator wants TLS; a client of
    // another CA refuses the cluster's certificate. Neither hangs: each
    // returns well within the CLI's own timeout.
    let (ok, _, err) = cli(&cluster, &["list-spaces"], &[]);
    assert!(!ok && err.contains("only TLS"), "{err}");
    let (ok, _, err) = cli(&cluster, &["get", "people", "1"], &[]);
    assert!(!ok && err.contains("only TLS"), "{err}");
    let other_ca = path(&stranger.ca);
    let (ok, _, err) = cli(&cluster, &["list-spaces"], &["--tls-ca", &other_ca]);
    assert!(
        !ok && err.contains("TLS") && err.contains("certificate"),
        "{err}"
    );

    // Peer messages: a daemon takes them from a peer with the cluster's
    // certificate, and closes a client's connection that sends one.
    let peer = Transport::tls(&pki.server_files()).expect("peer TLS");
    let daemon_addr = cluster.daemon_addr(0);
    for msg in anti_entropy_messages() {
        assert!(
            peer_message_then_request(&daemon_addr, &peer, &msg),
            "a peer's connection closed after {msg:?}"
        );
        assert!(!peer_message_then_request(
            &daemon_addr,
            &link.transport,
            &msg
        ));
    }

    // Other configuration changes are gated too, and leave no trace.
    let config = admin.config().expect("config");
    let daemon = *config.daemons.keys().next().expect("a daemon");
    let (ok, _, err) = cli(&cluster, &["server-offline", &daemon.0.to_string()], &tls);
    assert!(!ok && err.starts_with("UNAUTHORIZED"), "{err}");
    let (ok, _, err) = cli(&cluster, &["rm-space", "people"], &tls);
    assert!(!ok && err.starts_with("UNAUTHORIZED"), "{err}");
    let after = admin.config().expect("config");
    assert_eq!(
        after.epoch, config.epoch,
        "a refused change moved the epoch"
    );
    // The same refusal reaches the Rust admin without a token.
    let tokenless = BlockingAdmin::with_link(
        [cluster.coordinator_addr(0)],
        Duration::from_secs(10),
        CoordLink {
            admin_token: None,
            ..link.clone()
        },
    )
    .expect("admin");
    let refused = tokenless.rm_space("people").expect_err("refused");
    assert_eq!(refused.status(), AdminStatus::Unauthorized);
    // With the credential it goes through.
    let (ok, _, err) = cli(&cluster, &["rm-space", "people"], &tls_admin);
    assert!(ok, "{err}");
    assert!(admin.list_spaces().expect("list").is_empty());
}
