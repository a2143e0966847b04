//! Metrics and structured logs of real processes: a coordinator and two
//! daemons started with `--metrics 127.0.0.1:0 --log-format json`, a few
//! puts, gets, deletes and searches through the CLI, then every process's
//! `/metrics` page read over plain TCP and checked against what was done
//! and against the configuration; `show-config --json` lists each URL; a
//! malformed request gets a 400 and the page is still served after it;
//! every log line is one JSON object, state changes carrying the epoch.

mod common;

use common::{cli_at as cli, free_port, run_cli, wait_for, Procs};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use tessera_client::{BlockingAdmin, Epoch};
use tessera_types::DaemonState;

const TIMEOUT: Duration = Duration::from_secs(60);
const DAEMONS: usize = 2;

/// Sends `request` to `addr` and reads the answer to the end.
fn http(addr: &str, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the metrics port");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream.write_all(request).expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    answer
}

/// `host:port` of an `http://host:port/metrics` URL.
fn authority(url: &str) -> &str {
    let rest = url.strip_prefix("http://").expect("an http URL");
    rest.strip_suffix("/metrics").expect("a /metrics URL")
}

/// The samples of a metrics page: `name{labels}` → value.
fn samples(page: &str) -> BTreeMap<String, f64> {
    let body = page.split("\r\n\r\n").nth(1).expect("a body");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("`series value`");
            (series.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

fn scrape(url: &str) -> BTreeMap<String, f64> {
    let page = http(
        authority(url),
        b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n",
    );
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    samples(&page)
}

/// The value of one series on every page, added up (0 where absent).
fn total(pages: &[BTreeMap<String, f64>], series: &str) -> f64 {
    pages.iter().filter_map(|p| p.get(series)).sum()
}

#[test]
fn every_process_serves_metrics_that_count_what_was_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut procs = Procs::default();
    let coordinator = format!("127.0.0.1:{}", free_port());
    let observe = |kind: &str, port: &str, i: usize| -> Vec<String> {
        let data = dir.path().join(format!("{kind}-{i}"));
        [
            kind,
            "--listen",
            "127.0.0.1",
            "--port",
            port,
            "--data",
            &data.display().to_string(),
            "--metrics",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let coordinator_port = coordinator.rsplit_once(':').unwrap().1.to_string();
    let args = observe("coordinator", &coordinator_port, 0);
    let info = [("RUST_LOG", "info,openraft=warn".to_string())];
    let log = |name: &str| dir.path().join(format!("{name}.log"));
    procs.spawn_with_env("coordinator", &args, &log("coordinator"), &info);
    for i in 0..DAEMONS {
        let mut args = observe("daemon", &free_port().to_string(), i);
        args.extend(["--coordinator".to_string(), coordinator.clone()]);
        let name = format!("daemon-{i}");
        procs.spawn_with_env(&name, &args, &log(&name), &info);
    }
    let admin = BlockingAdmin::new(&coordinator).expect("admin");
    wait_for("both daemons available", TIMEOUT, || {
        let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
        let available = config
            .daemons
            .values()
            .filter(|d| d.state == DaemonState::Available)
            .count();
        (available == DAEMONS).then_some(())
    });

    cli(
        &[
            "add-space",
            "space m key k attributes string a, int n subspace a create 4 partitions",
        ],
        &coordinator,
    );
    let (puts, gets) = (12, 5);
    for i in 0..puts {
        let value = format!(
            r#"{{"a": "{}", "n": {i}}}"#,
            if i % 3 == 0 { "x" } else { "y" }
        );
        cli(&["put", "m", &format!("k{i}"), &value], &coordinator);
    }
    for i in 0..gets {
        let got = cli(&["get", "m", &format!("k{i}")], &coordinator);
        assert!(got.contains(&format!(r#""n":{i}"#)), "{got}");
    }
    // A delete of a key that is not there is answered NOTFOUND.
    let (host, port) = coordinator.split_once(':').unwrap();
    let (ok, _, err) = run_cli(
        &["del", "m", "absent", "--host", host, "--port", port],
        None,
        TIMEOUT,
    );
    assert!(!ok && err.contains("NOTFOUND"), "{err}");
    let found = cli(&["search", "m", r#"{"a": "x"}"#], &coordinator);
    let matching = found.lines().count();
    assert_eq!(matching, (0..puts).filter(|i| i % 3 == 0).count());
    cli(&["count", "m", "{}"], &coordinator);
    // A new subspace is backfilled: every object is sent down its chain
    // once, and every key region indexes the new attribute.
    let part: u64 = cli(&["add-subspace", "m", "n"], &coordinator)
        .trim()
        .parse()
        .expect("the new part's id");
    wait_for("the new subspace to be ready", TIMEOUT, || {
        let config = admin.config().ok()?;
        let state = config.space("m")?.part_state(tessera_types::PartId(part))?;
        state.is_ready().then_some(())
    });

    // The URLs travel in the configuration.
    let shown: serde_json::Value =
        serde_json::from_str(&cli(&["show-config", "--json"], &coordinator)).expect("JSON");
    let url = |entry: &serde_json::Value| -> String {
        let url = entry["metrics"]
            .as_str()
            .expect("a metrics URL")
            .to_string();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/metrics"),
            "{url}"
        );
        url
    };
    let coordinator_urls: Vec<String> = shown["coordinators"]
        .as_array()
        .expect("coordinators")
        .iter()
        .map(url)
        .collect();
    let daemon_urls: Vec<String> = shown["daemons"]
        .as_array()
        .expect("daemons")
        .iter()
        .map(url)
        .collect();
    assert_eq!((coordinator_urls.len(), daemon_urls.len()), (1, DAEMONS));
    let text = cli(&["show-config"], &coordinator);
    for url in coordinator_urls.iter().chain(&daemon_urls) {
        assert!(
            text.contains(url.as_str()),
            "show-config omits {url}: {text}"
        );
    }

    // Read after every request was answered: the counts cover them all.
    let config = admin
        .wait_config(Epoch(0), Duration::ZERO)
        .unwrap()
        .unwrap();
    let pages: Vec<_> = daemon_urls.iter().map(|u| scrape(u)).collect();
    let answered = |op: &str, status: &str, at_least: usize| {
        let series = format!(r#"tessera_daemon_requests_total{{op="{op}",status="{status}"}}"#);
        let counted = total(&pages, &series);
        assert!(
            counted >= at_least as f64,
            "{series}: {counted} counted, {at_least} done"
        );
    };
    answered("put", "SUCCESS", puts);
    answered("get", "SUCCESS", gets);
    // The failed delete.
    answered("del", "NOTFOUND", 1);
    let put_latency = total(
        &pages,
        r#"tessera_daemon_request_duration_seconds_count{op="put"}"#,
    );
    assert!(put_latency >= puts as f64);
    let returned = total(&pages, "tessera_daemon_search_objects_returned_total");
    let examined = total(&pages, "tessera_daemon_search_objects_examined_total");
    // The search returned `matching` objects and the count every key.
    assert!(returned >= (matching + puts) as f64, "{returned} returned");
    assert!(
        examined >= returned,
        "{examined} examined < {returned} returned"
    );
    assert!(total(&pages, "tessera_daemon_heartbeats_total") >= 1.0);
    assert!(total(&pages, "tessera_daemon_backfill_keys_total") >= puts as f64);
    assert!(total(&pages, "tessera_daemon_backfill_entries_total") >= puts as f64);
    assert!(pages
        .iter()
        .all(|p| p.contains_key("tessera_daemon_tombstones_collected_total")));
    assert!(
        total(
            &pages,
            r#"tessera_daemon_peer_messages_total{direction="sent",kind="forward"}"#
        ) >= 1.0
    );
    // Regions held, by the configuration: every chain position counts once.
    let positions: usize = config
        .spaces
        .iter()
        .flat_map(|s| &s.subspaces)
        .flat_map(|l| &l.regions)
        .map(|r| r.chain.len())
        .sum();
    assert_eq!(total(&pages, "tessera_daemon_regions"), positions as f64);
    for page in &pages {
        assert!(page["tessera_daemon_epoch"] >= config.epoch.0 as f64);
        assert_eq!(page["tessera_daemon_serving"], 1.0);
        assert!(page["tessera_daemon_disk_bytes"] > 0.0);
        // Every daemon has started, registered and served: it used CPU.
        assert!(page["tessera_daemon_process_cpu_seconds_total"] > 0.0);
    }
    let coordinator_page = scrape(&coordinator_urls[0]);
    assert_eq!(
        coordinator_page[r#"tessera_coordinator_raft_role{role="leader"}"#],
        1.0
    );
    assert_eq!(
        coordinator_page[r#"tessera_coordinator_daemons{state="available"}"#],
        DAEMONS as f64
    );
    assert!(coordinator_page["tessera_coordinator_epoch"] >= config.epoch.0 as f64);
    // Registering two daemons and adding a space moved the epoch.
    assert!(coordinator_page["tessera_coordinator_epoch_changes_total"] >= 3.0);

    // Bytes that are not HTTP get a 400, and the listener keeps serving.
    for url in coordinator_urls.iter().chain(&daemon_urls) {
        let answer = http(authority(url), b"\x16\x03\x01garbage\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        let answer = http(authority(url), b"GET /nothing HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
        scrape(url);
    }

    // Logs: one JSON object per line; state changes carry their epoch.
    for name in ["coordinator", "daemon-0", "daemon-1"] {
        let text = std::fs::read_to_string(log(name)).expect("log");
        for line in text.lines().filter(|l| !l.is_empty()) {
            let event: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {line}"));
            let message = event["message"].as_str().unwrap_or_default();
            if message == "daemon registered" || message == "joined a region's chain" {
                assert!(
                    event["epoch"].as_u64().is_some(),
                    "{name}: no epoch: {line}"
                );
            }
        }
        if name != "coordinator" {
            assert!(
                text.contains(r#""message":"daemon registered""#),
                "{name}: {text}"
            );
            assert!(
                text.contains(r#""message":"joined a region's chain""#),
                "{name}: {text}"
            );
        }
    }
    procs.kill_all();
}
