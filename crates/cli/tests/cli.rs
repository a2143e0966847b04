//! The `tessera` command line against `tessera dev`: readiness, admin and
//! data commands, errors with their status names, a clean stop on SIGTERM,
//! and resuming the data on the next run.

mod common;

use common::{ports_free, run_cli, sigterm, wait_exit, Procs, TESSERA};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const DAEMONS: u16 = 3;
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A coordinator port P such that P and the daemon ports P+30.. are free.
fn dev_port() -> u16 {
    common::wait_for(
        "free ports for tessera dev",
        Duration::from_secs(10),
        || {
            let port = common::free_port();
            let daemon_ports = (0..DAEMONS).map(|i| port.checked_add(30 + i));
            let all: Option<Vec<u16>> = daemon_ports.collect();
            all.filter(|ports| ports_free(ports.iter().copied()))
                .map(|_| port)
        },
    )
}

/// Starts `tessera dev` and waits for its `ready` line; returns its PID.
fn start_dev(procs: &mut Procs, port: u16, data: &std::path::Path) -> u32 {
    let mut child = Command::new(TESSERA)
        .args([
            "dev",
            "--daemons",
            &DAEMONS.to_string(),
            "--port",
            &port.to_string(),
            "--data",
        ])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tessera dev");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Keep draining after the test stops listening, so that later
        // lines never meet a full or closed pipe.
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let pid = child.id();
    let log = data.with_extension("log");
    procs.procs.push(common::Proc {
        name: "dev".into(),
        child,
        log,
    });
    let line = lines_rx
        .recv_timeout(Duration::from_secs(90))
        .expect("tessera dev printed no line within 90 s");
    assert!(
        line.contains("ready"),
        "first line of tessera dev: {line:?}"
    );
    assert!(
        line.contains(&format!("127.0.0.1:{port}")),
        "the ready line names the coordinator: {line:?}"
    );
    // After the `metrics:` lines comes the dashboard's URL.
    let dashboard = loop {
        let line = lines_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("tessera dev printed no dashboard line within 30 s");
        if let Some(url) = line.strip_prefix("dashboard: ") {
            break url.to_string();
        }
        assert!(line.starts_with("metrics: "), "unexpected line {line:?}");
    };
    assert!(
        dashboard.starts_with("http://127.0.0.1:") && dashboard.ends_with('/'),
        "dashboard line: {dashboard:?}"
    );
    pid
}

/// Stops `tessera dev` with SIGTERM and checks that it exits cleanly.
fn stop_dev(procs: &mut Procs, pid: u32) {
    sigterm(pid);
    let proc = procs
        .procs
        .iter_mut()
        .find(|p| p.name == "dev")
        .expect("dev process");
    let status = wait_exit(&mut proc.child, Duration::from_secs(30));
    assert!(
        status.success(),
        "tessera dev exited with {status} after SIGTERM"
    );
    procs.procs.retain(|p| p.name != "dev");
}

#[test]
fn dev_cluster_through_the_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("tessera-data");
    let port = dev_port();
    let port_text = port.to_string();
    let mut procs = Procs::default();
    let pid = start_dev(&mut procs, port, &data);

    let cli = |args: &[&str], stdin: Option<&str>| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--port", &port_text]);
        run_cli(&all, stdin, COMMAND_TIMEOUT)
    };
    let ok = |args: &[&str]| {
        let (success, out, err) = cli(args, None);
        assert!(success, "tessera {args:?} failed: {err}");
        out
    };

    // A description with a mistake: line and column, BADSPACE, non-zero.
    let (success, _, err) = cli(
        &["add-space"],
        Some("space bad\nkey k attributes int a,\n  strng s"),
    );
    assert!(!success, "a bad description must fail");
    assert!(err.contains("BADSPACE"), "stderr names the status: {err}");
    assert!(
        err.contains("line 3") && err.contains("column"),
        "stderr names line and column: {err}"
    );

    // A description as an argument, another on stdin.
    ok(&["add-space", "space people key name attributes int age, string city, float score subspace age subspace city create 4 partitions"]);
    let (success, _, err) = cli(
        &["add-space"],
        Some("space counters key int id attributes int n"),
    );
    assert!(success, "add-space from stdin failed: {err}");
    let spaces = ok(&["list-spaces"]);
    assert!(
        spaces.lines().any(|l| l == "people") && spaces.lines().any(|l| l == "counters"),
        "{spaces}"
    );
    let (success, _, err) = cli(&["add-space", "space people key name"], None);
    assert!(
        !success && err.contains("DUPLICATE"),
        "adding an existing space: {err}"
    );

    // Data.
    ok(&[
        "put",
        "people",
        "ada",
        r#"{"age": 36, "city": "London", "score": 9.5}"#,
    ]);
    ok(&[
        "put",
        "people",
        "alan",
        r#"{"age": 41, "city": "Manchester", "score": 8}"#,
    ]);
    ok(&[
        "put",
        "people",
        "grace",
        r#"{"age": 85, "city": "Arlington"}"#,
    ]);
    ok(&["put", "counters", "42", r#"{"n": 7}"#]);
    ok(&["put", "counters", "-3", r#"{"n": 1}"#]);

    let got: serde_json::Value =
        serde_json::from_str(&ok(&["get", "people", "ada"])).expect("get prints JSON");
    assert_eq!(
        got,
        serde_json::json!({"age": 36, "city": "London", "score": 9.5})
    );
    let got: serde_json::Value =
        serde_json::from_str(&ok(&["get", "counters", "42"])).expect("JSON");
    assert_eq!(got, serde_json::json!({"n": 7}));
    assert_eq!(ok(&["get", "counters", "-3"]).trim(), r#"{"n":1}"#);
    assert_eq!(ok(&["get", "people", "nobody"]).trim(), "null");

    let search = |json: &str| -> Vec<serde_json::Value> {
        let mut found: Vec<serde_json::Value> = ok(&["search", "people", json])
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        found.sort_by_key(|v| v["name"].as_str().unwrap_or_default().to_string());
        found
    };
    let found = search(r#"{"age": {"ge": 36, "lt": 50}}"#);
    assert_eq!(
        found,
        vec![
            serde_json::json!({"name": "ada", "age": 36, "city": "London", "score": 9.5}),
            serde_json::json!({"name": "alan", "age": 41, "city": "Manchester", "score": 8.0}),
        ]
    );
    assert_eq!(search(r#"{"city": "Arlington"}"#).len(), 1);
    assert_eq!(search(r#"{"city": {"regex": "^M"}}"#).len(), 1);
    assert_eq!(search("{}").len(), 3);
    assert_eq!(
        ok(&["count", "people", r#"{"score": {"gt": 1}}"#]).trim(),
        "2"
    );
    assert_eq!(ok(&["count", "people", "{}"]).trim(), "3");

    let plan = ok(&["search", "people", r#"{"city": "London"}"#, "--explain"]);
    assert!(
        plan.contains("subspace 2 (city)"),
        "the plan uses the city subspace: {plan}"
    );

    // Every type in JSON: sets as sorted arrays, maps as objects,
    // documents as JSON, timestamps as RFC 3339; the same line from get
    // (without the key) and from search (with it).
    ok(&[
        "add-space",
        "space every key timestamp(day) t attributes int i, float f, \
          timestamp(second) at, document d, list(string) l, set(int) st, map(string, float) m, \
          map(int, string) mi create 2 partitions",
    ]);
    ok(&[
        "put",
        "every",
        "2024-05-01T12:00:00Z",
        r#"{"i": -4, "f": 2.5, "at": "2024-05-01T14:00:00.5+02:00", "d": {"p": {"n": [1, "x"]}},
            "l": ["b", "a", "b"], "st": [3, 1, 2, 1], "m": {"y": 1, "x": 0.5}, "mi": {"10": "ten", "2": "two"}}"#,
    ]);
    ok(&["put", "every", "2024-05-02T00:00:00Z", r#"{"d.p.n": 7}"#]);
    let first = serde_json::json!({
        "i": -4, "f": 2.5, "at": "2024-05-01T12:00:00.500000Z", "d": {"p": {"n": [1, "x"]}},
        "l": ["b", "a", "b"], "st": [1, 2, 3], "m": {"x": 0.5, "y": 1.0}, "mi": {"2": "two", "10": "ten"}
    });
    let got: serde_json::Value =
        serde_json::from_str(&ok(&["get", "every", "2024-05-01T12:00:00Z"])).expect("JSON");
    assert_eq!(got, first);
    let got: serde_json::Value =
        serde_json::from_str(&ok(&["get", "every", "2024-05-02T00:00:00Z"])).expect("JSON");
    assert_eq!(
        got,
        serde_json::json!({
            "i": 0, "f": 0.0, "at": "1970-01-01T00:00:00Z", "d": {"p": {"n": 7}},
            "l": [], "st": [], "m": {}, "mi": {}
        })
    );
    let lines = ok(&[
        "search",
        "every",
        r#"{"st": {"contains": 2}, "d.p.n": {"len_eq": 2}}"#,
    ]);
    let found: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let mut with_key = first.clone();
    with_key["t"] = serde_json::json!("2024-05-01T12:00:00Z");
    assert_eq!(found, vec![with_key]);
    assert_eq!(
        ok(&["count", "every", r#"{"t": {"ge": "2024-05-01T13:00:00Z"}}"#]).trim(),
        "1"
    );

    // Errors carry their status names.
    let (success, _, err) = cli(&["get", "nospace", "x"], None);
    assert!(!success && err.contains("UNKNOWNSPACE"), "{err}");
    let (success, _, err) = cli(&["put", "people", "x", r#"{"nope": 1}"#], None);
    assert!(!success && err.contains("UNKNOWNATTR"), "{err}");
    let (success, _, err) = cli(&["put", "people", "x", r#"{"age": "old"}"#], None);
    assert!(!success && err.contains("WRONGTYPE"), "{err}");
    let (success, _, err) = cli(&["put", "people", "x", r#"{"name": "x"}"#], None);
    assert!(!success && err.contains("DONTUSEKEY"), "{err}");
    let (success, _, err) = cli(&["get", "counters", "notanint"], None);
    assert!(!success && err.contains("WRONGTYPE"), "{err}");

    ok(&["del", "people", "grace"]);
    assert_eq!(ok(&["get", "people", "grace"]).trim(), "null");
    let (success, _, err) = cli(&["del", "people", "grace"], None);
    assert!(!success && err.contains("NOTFOUND"), "{err}");

    let config = ok(&["show-config"]);
    assert!(
        config.contains("space people") && config.contains("available"),
        "{config}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["show-config", "--json"])).expect("JSON config");
    let daemons = json["daemons"].as_array().expect("a list of daemons");
    assert_eq!(daemons.len(), usize::from(DAEMONS));
    for daemon in daemons {
        for field in ["id", "addr", "state", "metrics"] {
            assert!(daemon.get(field).is_some(), "{field} missing in {daemon}");
        }
    }
    // API.md §12.5: per space, name, tolerate and parts, the key first.
    let people = json["spaces"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "people"))
        .expect("space people");
    assert!(people["tolerate"].is_u64(), "{people}");
    let key = &people["parts"][0];
    assert_eq!(key["kind"], "key");
    assert_eq!(key["state"], "ready");
    let regions = key["regions"].as_array().expect("regions");
    assert!(!regions.is_empty());
    for region in regions {
        assert!(region["id"].is_u64(), "{region}");
        assert!(region["bounds"].is_array(), "{region}");
        assert!(
            region["chain"].as_array().is_some_and(|c| !c.is_empty()),
            "{region}"
        );
    }

    ok(&["rm-space", "counters"]);
    assert!(!ok(&["list-spaces"]).lines().any(|l| l == "counters"));

    stop_dev(&mut procs, pid);

    // The next run with the same data resumes.
    let pid = start_dev(&mut procs, port, &data);
    let got: serde_json::Value =
        serde_json::from_str(&ok(&["get", "people", "ada"])).expect("JSON");
    assert_eq!(
        got,
        serde_json::json!({"age": 36, "city": "London", "score": 9.5})
    );
    assert_eq!(ok(&["get", "people", "grace"]).trim(), "null");
    assert_eq!(ok(&["count", "people", "{}"]).trim(), "2");
    assert!(!ok(&["list-spaces"]).lines().any(|l| l == "counters"));
    stop_dev(&mut procs, pid);
}
