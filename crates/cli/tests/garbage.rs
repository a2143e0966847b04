//! Bytes that are not Tessera frames — random bytes, a length beyond the
//! frame maximum, a frame that does not decode, a frame cut short — sent to
//! a daemon and to a coordinator: each closes that connection and keeps
//! serving everyone else.

// Tests of real processes and sockets wait with real deadlines.
#![allow(clippy::disallowed_methods)]

mod common;

use common::Cluster;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tessera_client::{BlockingClient, Epoch, Outcome, Value};

/// Sends `bytes` on a fresh connection to `addr`, then waits (bounded) for
/// the server to close the connection or stay silent; a server that
/// crashes shows up in the checks that follow.
fn send_garbage(addr: &str, bytes: &[u8], expect_close: bool) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    // The server may close while we still write; that is fine.
    let _ = stream.write_all(bytes);
    if !expect_close {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            // Whatever it answers, the connection must end.
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // Reset by the server: closed too.
            Err(_) => return,
        }
        assert!(
            Instant::now() < deadline,
            "{addr} kept a garbage connection open for 10 s"
        );
    }
}

fn attack(addr: &str, rng: &mut StdRng) {
    // An oversized length prefix: refused before anything is allocated.
    send_garbage(addr, &[0xff, 0xff, 0xff, 0xff, 1, 2, 3], true);
    send_garbage(addr, &(64u32 << 20).to_be_bytes(), true);
    // A well-sized frame whose body is not a message.
    let mut frame = 64u32.to_be_bytes().to_vec();
    frame.extend((0..64).map(|_| 0xee));
    send_garbage(addr, &frame, true);
    // Random bytes, many times.
    for _ in 0..50 {
        let mut bytes = vec![0u8; rng.gen_range(1..2048)];
        rng.fill_bytes(&mut bytes);
        send_garbage(addr, &bytes, false);
    }
    // A frame cut short, then the connection closes.
    let mut short = 1000u32.to_be_bytes().to_vec();
    short.extend([1, 2, 3]);
    send_garbage(addr, &short, false);
    // Connections opened and dropped without a byte.
    for _ in 0..20 {
        drop(TcpStream::connect(addr).expect("connect"));
    }
}

#[test]
fn servers_survive_garbage() {
    let seed: u64 = rand::random();
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let cluster = Cluster::start(2);
    let admin = cluster.admin();
    admin
        .add_space("space kv key k attributes v create 4 partitions")
        .expect("add_space");
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    let outcome = client
        .put("kv", Value::str("a"), [("v", Value::str("1"))])
        .expect("put before");
    assert_eq!(outcome, Outcome::Done);

    attack(&cluster.daemon_addr(0), &mut rng);
    attack(&cluster.daemon_addr(1), &mut rng);
    attack(&cluster.coordinator_addr(0), &mut rng);

    // Everything still serves, on old and new connections.
    let config = admin
        .wait_config(Epoch(0), Duration::ZERO)
        .expect("config fetch")
        .expect("a configuration");
    assert!(config.space("kv").is_some());
    let outcome = client
        .put("kv", Value::str("b"), [("v", Value::str("2"))])
        .expect("put after");
    assert_eq!(outcome, Outcome::Done);
    assert_eq!(
        client
            .get("kv", Value::str("a"))
            .expect("get a")
            .and_then(|r| r.get("v").cloned()),
        Some(Value::str("1"))
    );
    let fresh = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect after");
    assert_eq!(
        fresh
            .get("kv", Value::str("b"))
            .expect("get b")
            .and_then(|r| r.get("v").cloned()),
        Some(Value::str("2"))
    );
    assert_eq!(
        fresh
            .count("kv", Vec::<(&str, tessera_client::PredOp)>::new())
            .expect("count"),
        2
    );
    admin
        .add_space("space later key k")
        .expect("add_space after");
}
