//! Authorization on a real cluster (API.md §10, docs/design/authorization.md):
//! every caveat kind accepted and refused through the Rust client, bad
//! tokens refused with UNAUTHORIZED, and authorized search, count, sorted
//! search and group updates against a brute-force model of which objects
//! each token set may read or write.

// Tests of real processes and sockets wait with real deadlines, and the
// `time` caveats need the wall clock.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{run_cli, Cluster};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};
use tessera_client::{Client, ClientError, Outcome, PredOp, Status, Value};
use tessera_daemon::auth_macaroon::{mint, Macaroon};
use tokio::runtime::Runtime;

const SPACE: &str = "space acct key int k attributes int a, int n, string owner \
                     subspace a create 4 partitions tolerate 1 failure with authorization";

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

fn token(m: &Macaroon) -> Vec<u8> {
    mint::serialize_v2(m)
}

fn root(secret: &str, caveats: &[&str]) -> Macaroon {
    let mut m = mint::new(b"tessera", b"acct", secret.as_bytes());
    for c in caveats {
        mint::first_party(&mut m, c.as_bytes());
    }
    m
}

fn unauthorized<T: std::fmt::Debug>(r: Result<T, ClientError>, what: &str) {
    match r {
        Err(e) if e.status == Status::Unauthorized => {}
        other => panic!("{what}: expected UNAUTHORIZED, got {other:?}"),
    }
}

fn start() -> (Cluster, Runtime, Client) {
    let cluster = Cluster::start(2);
    cluster.admin().add_space(SPACE).expect("add space");
    let rt = Runtime::new().expect("runtime");
    let client = rt
        .block_on(Client::connect(&cluster.coordinator_addr(0)))
        .expect("connect");
    (cluster, rt, client)
}

#[test]
fn every_caveat_kind_is_accepted_and_refused() {
    let (_cluster, rt, c) = start();
    rt.block_on(async {
        let attrs = || vec![("a", Value::Int(1)), ("owner", Value::str("alice"))];
        unauthorized(
            c.put("acct", Value::Int(1), attrs()).await,
            "creation without a secret",
        );
        let created = c
            .with_secret("s1")
            .put("acct", Value::Int(1), attrs())
            .await;
        assert_eq!(created.expect("creation with a secret"), Outcome::Done);

        unauthorized(
            c.get("acct", Value::Int(1)).await,
            "a get without macaroons",
        );
        let plain = c.with_auth([token(&root("s1", &[]))]);
        let record = plain
            .get("acct", Value::Int(1))
            .await
            .expect("get")
            .expect("found");
        assert_eq!(record.get("owner"), Some(&Value::str("alice")));
        assert_eq!(
            record.attrs.len(),
            3,
            "the secret is never returned: {record:?}"
        );

        let read = c.with_auth([token(&root("s1", &["op = read"]))]);
        assert!(read
            .get("acct", Value::Int(1))
            .await
            .expect("read")
            .is_some());
        unauthorized(
            read.put("acct", Value::Int(1), attrs()).await,
            "a write with op = read",
        );
        let write = c.with_auth([token(&root("s1", &["op = write"]))]);
        assert_eq!(
            write
                .put("acct", Value::Int(1), attrs())
                .await
                .expect("write"),
            Outcome::Done
        );
        unauthorized(
            write.get("acct", Value::Int(1)).await,
            "a read with op = write",
        );

        let future = format!("time < {}", now_s() + 3600);
        let past = format!("time < {}", now_s() - 10);
        let fresh = c.with_auth([token(&root("s1", &[&future]))]);
        assert!(fresh
            .get("acct", Value::Int(1))
            .await
            .expect("fresh")
            .is_some());
        let expired = c.with_auth([token(&root("s1", &[&past]))]);
        unauthorized(
            expired.get("acct", Value::Int(1)).await,
            "an expired macaroon",
        );
        let unknown = c.with_auth([token(&root("s1", &["account = alice"]))]);
        unauthorized(
            unknown.get("acct", Value::Int(1)).await,
            "an unknown caveat",
        );
        let wrong = c.with_auth([token(&root("s2", &[]))]);
        unauthorized(wrong.get("acct", Value::Int(1)).await, "the wrong secret");

        // Third party: discharged, unbound, missing, discharge expired.
        let mut tp = root("s1", &["op = read"]);
        mint::third_party(&mut tp, b"auth", b"tp-key", b"is-alice", [9; 24]);
        let discharge = mint::discharge(b"auth", b"is-alice", b"tp-key");
        let mut stale = discharge.clone();
        mint::first_party(&mut stale, past.as_bytes());
        let with = |ms: Vec<Vec<u8>>| c.with_auth(ms);
        let ok = with(vec![token(&tp), token(&mint::bound(&tp, &discharge))]);
        assert!(ok
            .get("acct", Value::Int(1))
            .await
            .expect("discharged")
            .is_some());
        unauthorized(
            with(vec![token(&tp), token(&discharge)])
                .get("acct", Value::Int(1))
                .await,
            "an unbound discharge",
        );
        unauthorized(
            with(vec![token(&tp)]).get("acct", Value::Int(1)).await,
            "no discharge",
        );
        unauthorized(
            with(vec![token(&tp), token(&mint::bound(&tp, &stale))])
                .get("acct", Value::Int(1))
                .await,
            "an expired discharge",
        );

        // Garbage and forgeries: refused, and the daemons keep serving.
        for bad in [
            &b"not a macaroon!"[..],
            b"",
            b"AgJ0ZXNzZXJh",
            &[0xff, 0x00, 0x80],
        ] {
            unauthorized(
                with(vec![bad.to_vec()]).get("acct", Value::Int(1)).await,
                "garbage",
            );
        }
        let mut forged = root("s1", &["op = read"]);
        forged.caveats.clear();
        unauthorized(
            with(vec![token(&forged)])
                .put("acct", Value::Int(1), attrs())
                .await,
            "forged",
        );
        assert!(plain
            .get("acct", Value::Int(1))
            .await
            .expect("still serving")
            .is_some());

        // A missing key is UNAUTHORIZED, not None: nothing to verify against.
        unauthorized(
            plain.get("acct", Value::Int(2)).await,
            "a get of a missing key",
        );
        unauthorized(
            plain.del("acct", Value::Int(2)).await,
            "a delete of a missing key",
        );

        // A new secret retires the old macaroons.
        let rotated = plain
            .with_secret("s3")
            .put("acct", Value::Int(1), attrs())
            .await;
        assert_eq!(rotated.expect("rotate"), Outcome::Done);
        unauthorized(
            plain.get("acct", Value::Int(1)).await,
            "a macaroon of the old secret",
        );
        let s3 = c.with_auth([token(&root("s3", &[]))]);
        assert!(s3
            .get("acct", Value::Int(1))
            .await
            .expect("new secret")
            .is_some());

        // Predicates may not probe the secret (it is no attribute), and a
        // search without macaroons is refused, not silently empty.
        unauthorized(
            c.search("acct", Vec::<(&str, PredOp)>::new()).await,
            "a search without auth",
        );
        unauthorized(
            c.count("acct", Vec::<(&str, PredOp)>::new()).await,
            "a count without auth",
        );
        unauthorized(
            c.group_del("acct", Vec::<(&str, PredOp)>::new()).await,
            "a group delete without auth",
        );
        assert_eq!(
            s3.count("acct", Vec::<(&str, PredOp)>::new())
                .await
                .expect("count"),
            1
        );
        assert_eq!(
            s3.del("acct", Value::Int(1)).await.expect("delete"),
            Outcome::Done
        );
    });
}

#[test]
fn the_cli_takes_secret_and_auth() {
    let (cluster, _rt, _c) = start();
    let port = cluster.coordinator_ports[0].to_string();
    let timeout = std::time::Duration::from_secs(60);
    let at = ["--host", "127.0.0.1", "--port", port.as_str()];
    let cli = |args: &[&str]| {
        let all: Vec<&str> = args.iter().chain(at.iter()).copied().collect();
        run_cli(&all, None, timeout)
    };
    let (ok, _, err) = cli(&["put", "acct", "7", r#"{"owner": "carol"}"#]);
    assert!(!ok && err.contains("UNAUTHORIZED"), "{err}");
    let (ok, _, err) = cli(&[
        "put",
        "acct",
        "7",
        r#"{"owner": "carol"}"#,
        "--secret",
        "s7",
    ]);
    assert!(ok, "{err}");
    let (ok, _, err) = cli(&["get", "acct", "7"]);
    assert!(!ok && err.contains("UNAUTHORIZED"), "{err}");
    let token = String::from_utf8(token(&root("s7", &["op = read"]))).expect("base64 is text");
    let (ok, out, err) = cli(&["get", "acct", "7", "--auth", &token]);
    assert!(ok, "{err}");
    assert!(out.contains("carol") && !out.contains("s7"), "{out}");
    let (ok, out, err) = cli(&["count", "acct", "--auth", &token]);
    assert!(ok && out.trim() == "1", "{out} {err}");
    let (ok, _, err) = cli(&["del", "acct", "7", "--auth", &token]);
    assert!(
        !ok && err.contains("UNAUTHORIZED"),
        "a read macaroon deletes nothing: {err}"
    );
}

/// A token in the model: the secret it was minted with and its caveats.
#[derive(Clone, Debug)]
struct Token {
    secret: usize,
    caveats: Vec<Caveat>,
}

#[derive(Clone, Copy, Debug)]
enum Caveat {
    Read,
    Write,
    Future,
    Past,
    Unknown,
}

impl Caveat {
    fn holds(self, write: bool) -> bool {
        match self {
            Caveat::Read => !write,
            Caveat::Write => write,
            Caveat::Future => true,
            Caveat::Past | Caveat::Unknown => false,
        }
    }
}

const SECRETS: usize = 6;

/// The model's form of a search's predicates, on attribute `a`.
type Matcher = Box<dyn Fn(i64) -> bool>;

fn secret_name(i: usize) -> String {
    format!("secret-{i}")
}

#[test]
fn authorized_search_matches_a_model() {
    let (_cluster, rt, c) = start();
    let mut rng = StdRng::seed_from_u64(0x5ec2e7);
    // key → (a, n, secret index)
    let mut objects: Vec<(i64, i64, usize)> = Vec::new();
    rt.block_on(async {
        for k in 0..80i64 {
            let (a, secret) = (rng.gen_range(0..10), rng.gen_range(0..SECRETS));
            let put = c
                .with_secret(secret_name(secret))
                .put(
                    "acct",
                    Value::Int(k),
                    [("a", Value::Int(a)), ("n", Value::Int(0))],
                )
                .await;
            assert_eq!(put.expect("put"), Outcome::Done);
            objects.push((a, 0, secret));
        }
        for trial in 0..40 {
            // Secrets up to SECRETS name no object.
            let tokens: Vec<Token> = (0..rng.gen_range(1..=3))
                .map(|_| Token {
                    secret: rng.gen_range(0..=SECRETS),
                    caveats: (0..rng.gen_range(0..=2))
                        .map(|_| match rng.gen_range(0..10) {
                            0..=3 => Caveat::Read,
                            4..=5 => Caveat::Write,
                            6..=7 => Caveat::Future,
                            8 => Caveat::Past,
                            _ => Caveat::Unknown,
                        })
                        .collect(),
                })
                .collect();
            let serialized: Vec<Vec<u8>> = tokens
                .iter()
                .map(|t| {
                    let caveats: Vec<String> = t
                        .caveats
                        .iter()
                        .map(|c| match c {
                            Caveat::Read => "op = read".to_string(),
                            Caveat::Write => "op = write".to_string(),
                            Caveat::Future => format!("time < {}", now_s() + 3600),
                            Caveat::Past => format!("time < {}", now_s() - 60),
                            Caveat::Unknown => "tenant = x".to_string(),
                        })
                        .collect();
                    let refs: Vec<&str> = caveats.iter().map(String::as_str).collect();
                    token(&root(&secret_name(t.secret), &refs))
                })
                .collect();
            let allowed = |secret: usize, write: bool| {
                tokens
                    .iter()
                    .any(|t| t.secret == secret && t.caveats.iter().all(|c| c.holds(write)))
            };
            let bound = rng.gen_range(0..10);
            let (preds, matches): (Vec<(&str, PredOp)>, Matcher) = match rng.gen_range(0..3) {
                0 => (vec![], Box::new(|_| true)),
                1 => (
                    vec![("a", PredOp::Eq(Value::Int(bound)))],
                    Box::new(move |a| a == bound),
                ),
                _ => (
                    vec![("a", PredOp::Le(Value::Int(bound)))],
                    Box::new(move |a| a <= bound),
                ),
            };
            let readable: BTreeSet<i64> = (0..objects.len() as i64)
                .filter(|&k| {
                    let (a, _, s) = objects[k as usize];
                    matches(a) && allowed(s, false)
                })
                .collect();
            let writable: BTreeSet<i64> = (0..objects.len() as i64)
                .filter(|&k| {
                    let (a, _, s) = objects[k as usize];
                    matches(a) && allowed(s, true)
                })
                .collect();
            let h = c.with_auth(serialized);
            let found: BTreeSet<i64> = h
                .search("acct", preds.clone())
                .await
                .expect("search")
                .iter()
                .map(|r| match r.get("k") {
                    Some(Value::Int(k)) => *k,
                    other => panic!("key {other:?}"),
                })
                .collect();
            assert_eq!(found, readable, "trial {trial}: search with {tokens:?}");
            let count = h.count("acct", preds.clone()).await.expect("count");
            assert_eq!(count, readable.len() as u64, "trial {trial}: count");
            let top = h
                .sorted_search("acct", preds.clone(), "a", 5, true)
                .await
                .expect("sorted");
            let mut model_top: Vec<(i64, i64)> = readable
                .iter()
                .map(|&k| (objects[k as usize].0, k))
                .collect();
            model_top.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            let got_top: Vec<Value> = top.iter().filter_map(|r| r.get("a").cloned()).collect();
            let want_top: Vec<Value> = model_top
                .iter()
                .take(5)
                .map(|&(a, _)| Value::Int(a))
                .collect();
            assert_eq!(got_top, want_top, "trial {trial}: sorted search");
            let added = h
                .group_atomic_add("acct", preds.clone(), [("n", Value::Int(1))])
                .await
                .expect("group add");
            assert_eq!(added, writable.len() as u64, "trial {trial}: group add");
            for &k in &writable {
                objects[k as usize].1 += 1;
            }
        }
        // Every object's n, read with a root macaroon of its own secret.
        for (k, &(_, n, secret)) in objects.iter().enumerate() {
            let owner = c.with_auth([token(&root(&secret_name(secret), &[]))]);
            let record = owner
                .get("acct", Value::Int(k as i64))
                .await
                .expect("get")
                .expect("found");
            assert_eq!(record.get("n"), Some(&Value::Int(n)), "key {k}");
        }
    });
}
