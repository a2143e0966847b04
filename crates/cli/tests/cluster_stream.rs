//! Streaming search on a real cluster: a region far larger than a frame
//! streams in pages to a client whose frame maximum is smaller than a
//! tenth of the region, every key once, in key order; count, sorted
//! search and group operations page too; a stream can be dropped half-way.

mod common;

use common::Cluster;
use tessera_client::{BlockingClient, ClientOptions, Outcome, PredOp, Value};

/// One partition: every object in one region of each subspace.
const SPACE: &str = "space big key int k attributes string pad, int n \
                     create 1 partition tolerate 1 failure";
const OBJECTS: i64 = 5000;
/// Most objects carry a small pad, every 100th a large one: pages are cut
/// by their number of objects and by their bytes.
const PAD_BYTES: usize = 1000;
const PAD_BYTES_LARGE: usize = 100_000;
/// The client refuses frames larger than this. The region holds about
/// 10 MB, so an unpaged answer could not reach it, nor a page of 256
/// objects (the daemon's most) holding two or three large ones: only the
/// daemon's byte bound (256 KiB, plus at most the one object that crosses
/// it) keeps the pages below.
const FRAME_BYTES_MAX: usize = 400 * 1024;

/// `n` of key `k`: a permutation of the keys, so a sort by `n` differs
/// from key order.
fn n_of(k: i64) -> i64 {
    (k * 7919) % OBJECTS
}

fn pad_of(k: i64) -> Value {
    let byte = b'a' + (k % 26) as u8;
    let len = if k % 100 == 7 {
        PAD_BYTES_LARGE
    } else {
        PAD_BYTES
    };
    Value::String(vec![byte; len])
}

#[test]
fn a_region_larger_than_a_frame_streams_in_pages() {
    let mut cluster = Cluster::start(2);
    cluster.admin().add_space(SPACE).expect("add_space");
    let options = ClientOptions {
        frame_bytes_max: FRAME_BYTES_MAX,
        ..ClientOptions::default()
    };
    let client =
        BlockingClient::connect_with([cluster.coordinator_addr(0)], options).expect("connect");

    let inner = client.client().clone();
    client.block_on(async move {
        let mut tasks = tokio::task::JoinSet::new();
        for k in 0..OBJECTS {
            if tasks.len() >= 32 {
                tasks.join_next().await.expect("task").expect("join");
            }
            let c = inner.clone();
            tasks.spawn(async move {
                let outcome = c
                    .put(
                        "big",
                        Value::Int(k),
                        [("pad", pad_of(k)), ("n", Value::Int(n_of(k)))],
                    )
                    .await
                    .unwrap_or_else(|e| panic!("put {k}: {e}"));
                assert_eq!(outcome, Outcome::Done, "put {k}");
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("join");
        }
    });

    // Every object once, in key order, with its values.
    let mut expected_k = 0;
    for record in client.search_stream("big", Vec::<(&str, PredOp)>::new()) {
        let record = record.expect("search page");
        assert_eq!(record.get("k"), Some(&Value::Int(expected_k)));
        assert_eq!(record.get("pad"), Some(&pad_of(expected_k)));
        assert_eq!(record.get("n"), Some(&Value::Int(n_of(expected_k))));
        expected_k += 1;
    }
    assert_eq!(expected_k, OBJECTS, "every object streamed");

    // Count ships keys in pages (more than one page of keys here).
    assert_eq!(
        client
            .count("big", Vec::<(&str, PredOp)>::new())
            .expect("count"),
        OBJECTS as u64
    );
    let high = vec![("n", PredOp::Ge(Value::Int(OBJECTS - 1000)))];
    assert_eq!(client.count("big", high.clone()).expect("count"), 1000);

    // A sorted search whose limit spans several pages of the region.
    let limit = 300;
    let sorted: Vec<i64> = client
        .sorted_search_stream("big", Vec::<(&str, PredOp)>::new(), "n", limit, true)
        .map(|r| match r.expect("sorted page").get("n") {
            Some(Value::Int(n)) => *n,
            other => panic!("n is {other:?}"),
        })
        .collect();
    let want: Vec<i64> = (0..limit as i64).map(|i| OBJECTS - 1 - i).collect();
    assert_eq!(sorted, want, "the largest n first");
    // The same search with objects left undecoded until asked: the same
    // objects, each decoding to what the stream's records hold.
    let mut raw =
        client.sorted_search_stream("big", Vec::<(&str, PredOp)>::new(), "n", limit, true);
    let mut raw_n = Vec::new();
    while let Some(record) = raw.next_raw() {
        let record = record.expect("sorted page");
        let Some(Value::Int(n)) = record.get("n").expect("n decodes") else {
            panic!("n is missing");
        };
        let k = (0..OBJECTS)
            .find(|&k| n_of(k) == n)
            .expect("a key has this n");
        assert_eq!(record.key().expect("the key decodes"), Value::Int(k));
        let whole = record.to_record().expect("the object decodes");
        assert_eq!(whole.get("pad"), Some(&pad_of(k)));
        raw_n.push(n);
    }
    assert_eq!(raw_n, want, "raw records come in the same order");

    // A stream dropped after a few objects; the client goes on working.
    let first: Vec<_> = client
        .search_stream("big", high.clone())
        .take(3)
        .map(|r| r.expect("first objects"))
        .collect();
    assert_eq!(first.len(), 3);
    let found = client.search("big", high.clone()).expect("search");
    assert_eq!(found.len(), 1000);
    assert!(found
        .iter()
        .all(|r| matches!(r.get("n"), Some(Value::Int(n)) if *n >= OBJECTS - 1000)));

    // Group operations page through the keys too.
    let low = vec![("n", PredOp::Lt(Value::Int(10)))];
    assert_eq!(
        client
            .group_atomic_add("big", low.clone(), [("n", Value::Int(OBJECTS))])
            .expect("group add"),
        10
    );
    assert_eq!(client.count("big", low).expect("count"), 0);
    // The 1000 largest n, and the 10 just moved above them.
    assert_eq!(client.group_del("big", high).expect("group_del"), 1010);
    let rest = client
        .search_stream("big", Vec::<(&str, PredOp)>::new())
        .map(|r| r.expect("search after group_del"))
        .filter(|r| matches!(r.get("n"), Some(Value::Int(n)) if (10..OBJECTS - 1000).contains(n)))
        .count();
    assert_eq!(rest, OBJECTS as usize - 1010);

    // A stream outlives the replica it reads from: once that daemon is
    // killed, the next page goes to the region's new tail and continues
    // after the last key received — every remaining key once, in order.
    let everything = Vec::<(&str, PredOp)>::new;
    let plan = client
        .search_describe("big", everything())
        .expect("describe");
    let tail = plan
        .lines()
        .filter(|l| l.contains(" -> "))
        .find_map(|l| l.split(" at ").nth(1))
        .expect("the plan names a replica")
        .trim()
        .to_string();
    let victim = (0..2)
        .find(|&i| cluster.daemon_addr(i) == tail)
        .expect("the replica is one of ours");
    let want: Vec<i64> = (0..OBJECTS)
        .filter(|&k| (10..OBJECTS - 1000).contains(&n_of(k)))
        .collect();
    let key = |r: Result<tessera_client::Record, tessera_client::ClientError>| match r
        .expect("a page across the failure")
        .get("k")
    {
        Some(Value::Int(k)) => *k,
        other => panic!("key {other:?}"),
    };
    let mut stream = client.search_stream("big", everything());
    let mut got: Vec<i64> = stream.by_ref().take(600).map(key).collect();
    cluster.procs.kill(&format!("daemon-{victim}"));
    got.extend(stream.map(key));
    assert_eq!(got, want);
    drop(client);
}
