//! Bytes from the network never take a member down: a connection that sends
//! garbage or an oversized frame is closed, and everyone else is served.

mod common;

use common::{agreed_leader, Member};
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClient, CoordConnection};
use tessera_protocol::{CoordRequest, CoordResponse};
use tessera_types::Epoch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PATIENCE: Duration = Duration::from_secs(15);

/// Sends `bytes` and expects the member to close the connection.
async fn expect_closed_after(addr: &str, bytes: &[u8]) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The member may close while we are still writing; that is fine.
    let _ = stream.write_all(bytes).await;
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
    match read {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => panic!("the member answered {n} bytes to garbage"),
        Err(_) => panic!("the member kept a garbage connection open"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversized_frames_close_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let member = Member::start(dir.path(), None).await;
    let addr = member.addr.clone();
    agreed_leader(std::slice::from_ref(&addr), 1, PATIENCE).await;

    // A healthy connection opened before the garbage arrives.
    let healthy = CoordConnection::connect(&addr, Duration::from_secs(2))
        .await
        .unwrap();

    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7e55e7a);
    // A well-formed length prefix around an undecodable body.
    let mut framed = 200u32.to_be_bytes().to_vec();
    framed.extend((0..200).map(|_| 0xff_u8));
    expect_closed_after(&addr, &framed).await;
    // A length prefix far above the frame limit (nothing is allocated).
    expect_closed_after(&addr, &u32::MAX.to_be_bytes()).await;
    // Random bytes, several seeds.
    for _ in 0..5 {
        let len = rng.gen_range(8..4096);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // Keep the prefix within the limit so the body is read and decoded.
        bytes[0] = 0;
        bytes[1] = 0;
        let body = (len - 4) as u16;
        bytes[2..4].copy_from_slice(&body.to_be_bytes());
        expect_closed_after(&addr, &bytes).await;
    }

    // The member still answers, on the old connection and on new ones.
    let status = healthy
        .call(CoordRequest::Status, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(matches!(status, CoordResponse::Status(_)));
    let client = CoordClient::new([addr.clone()]);
    let config = client
        .wait_config(Epoch(0), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a configuration");
    assert!(config.epoch >= Epoch(1));
    member.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_on_one_connection_are_answered_by_id_out_of_order() {
    let dir = tempfile::tempdir().unwrap();
    let member = Member::start(dir.path(), None).await;
    let addr = member.addr.clone();
    let leader = agreed_leader(std::slice::from_ref(&addr), 1, PATIENCE).await;
    assert_eq!(leader, addr);
    let connection = CoordConnection::connect(&addr, Duration::from_secs(2))
        .await
        .unwrap();
    let epoch = match connection
        .call(
            CoordRequest::GetConfig {
                known: Epoch(0),
                wait_ms: 0,
            },
            Duration::from_secs(5),
        )
        .await
    {
        Ok(CoordResponse::Config(Some(config))) => config.epoch,
        other => panic!("unexpected {other:?}"),
    };
    // A long-poll that cannot finish soon, then a quick request behind it.
    let long_poll = connection.call(
        CoordRequest::GetConfig {
            known: epoch,
            wait_ms: 20_000,
        },
        Duration::from_secs(25),
    );
    let quick = async {
        let answer = connection
            .call(CoordRequest::Status, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(matches!(answer, CoordResponse::Status(_)));
        // Now change the configuration so the long-poll completes.
        let register = CoordRequest::RegisterDaemon {
            id: None,
            addr: "127.0.0.1:2012".into(),
            metrics: None,
            installed: None,
        };
        let answer = connection
            .call(register, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(matches!(answer, CoordResponse::Registered { .. }));
    };
    let (long_poll, ()) = tokio::join!(long_poll, quick);
    match long_poll.unwrap() {
        CoordResponse::Config(Some(config)) => assert_eq!(config.epoch, Epoch(epoch.0 + 1)),
        other => panic!("unexpected {other:?}"),
    }
    member.stop().await.unwrap();
}
