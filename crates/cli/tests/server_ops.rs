//! The operator's commands through the real `tessera` binary against a
//! real cluster: `server-offline`, `server-online`, `server-kill`,
//! `server-forget`, `wait-until-stable`, and what `show-config` says about
//! daemons and chains after each. Data written before stays readable
//! throughout (the space tolerates one failure).

mod common;

use common::{run_cli, wait_exit, wait_for, Cluster};
use std::time::Duration;
use tessera_client::{BlockingClient, Value};

const SPACE: &str = "space ops key int k attributes int v subspace v \
                     create 4 partitions tolerate 1 failure";
const KEYS: i64 = 40;
const CLI_TIMEOUT: Duration = Duration::from_secs(90);

fn cli(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    let port = cluster.coordinator_ports[0].to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--port", &port]);
    run_cli(&all, None, CLI_TIMEOUT)
}

fn cli_ok(cluster: &Cluster, args: &[&str]) -> String {
    let (ok, out, err) = cli(cluster, args);
    assert!(ok, "tessera {args:?} failed: {err}");
    out
}

/// The state `show-config` prints for daemon `id` (`None`: not listed).
fn daemon_state(config_text: &str, id: &str) -> Option<String> {
    let daemons = config_text
        .split("daemons:\n")
        .nth(1)
        .expect("a daemons section");
    daemons
        .lines()
        .take_while(|l| l.starts_with("  ") && !l.starts_with("   "))
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(id)).then(|| words.next().unwrap_or_default().to_string())
        })
}

/// The chains `show-config` prints, one list of daemon ids per region.
fn chains(config_text: &str) -> Vec<Vec<String>> {
    config_text
        .lines()
        .filter(|l| l.starts_with("      r"))
        .map(|l| {
            l.split_whitespace()
                .filter(|w| w.contains('@'))
                .map(|w| w.split('@').next().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn all_keys_read_back(client: &BlockingClient) {
    for k in 0..KEYS {
        let record = client
            .get("ops", Value::Int(k))
            .expect("get")
            .unwrap_or_else(|| panic!("key {k} lost"));
        assert_eq!(record.get("v"), Some(&Value::Int(k * 7)));
    }
}

#[test]
fn server_operations_through_the_cli() {
    let mut cluster = Cluster::start(4);
    cli_ok(&cluster, &["add-space", SPACE]);
    let client = BlockingClient::connect(&cluster.coordinator_addr(0)).expect("connect");
    for k in 0..KEYS {
        let outcome = client
            .put("ops", Value::Int(k), [("v", Value::Int(k * 7))])
            .expect("put");
        assert_eq!(outcome, tessera_client::Outcome::Done);
    }
    let out = cli_ok(&cluster, &["wait-until-stable", "--timeout", "60"]);
    assert!(out.starts_with("stable at epoch "), "{out}");

    let text = cli_ok(&cluster, &["show-config"]);
    let region_count = chains(&text).len();
    assert_eq!(region_count, 8, "4 key regions and 4 regions of subspace v");
    assert!(chains(&text).iter().all(|c| c.len() == 2), "{text}");
    // The victim: daemon 1's id, from its address.
    let victim_line = text
        .lines()
        .find(|l| l.ends_with(&format!(" {}", cluster.daemon_addr(1))))
        .expect("daemon 1 listed");
    let victim = victim_line.split_whitespace().next().unwrap().to_string();
    assert_eq!(daemon_state(&text, &victim).as_deref(), Some("available"));
    assert!(chains(&text).iter().any(|c| c.contains(&victim)));

    // Offline: out of every chain, re-replicated elsewhere, data intact.
    cli_ok(&cluster, &["server-offline", &victim]);
    cli_ok(&cluster, &["wait-until-stable", "--timeout", "60"]);
    let text = cli_ok(&cluster, &["show-config"]);
    assert_eq!(daemon_state(&text, &victim).as_deref(), Some("offline"));
    assert!(
        chains(&text)
            .iter()
            .all(|c| c.len() == 2 && !c.contains(&victim)),
        "every chain has two replicas, none of them {victim}:\n{text}"
    );
    all_keys_read_back(&client);

    // Online: available again (it takes regions when some are short).
    cli_ok(&cluster, &["server-online", &victim]);
    let text = cli_ok(&cluster, &["show-config"]);
    assert_eq!(daemon_state(&text, &victim).as_deref(), Some("available"));
    cli_ok(&cluster, &["wait-until-stable", "--timeout", "60"]);

    // Kill: offline, and the process stops by itself.
    cli_ok(&cluster, &["server-kill", &victim]);
    let text = cli_ok(&cluster, &["show-config"]);
    assert_eq!(daemon_state(&text, &victim).as_deref(), Some("offline"));
    let proc = cluster
        .procs
        .procs
        .iter_mut()
        .find(|p| p.name == "daemon-1")
        .expect("daemon-1 process");
    wait_exit(&mut proc.child, Duration::from_secs(30));
    cli_ok(&cluster, &["wait-until-stable", "--timeout", "60"]);
    all_keys_read_back(&client);

    // Forget: gone from the configuration.
    cli_ok(&cluster, &["server-forget", &victim]);
    let text = cli_ok(&cluster, &["show-config"]);
    assert_eq!(daemon_state(&text, &victim), None, "{text}");
    all_keys_read_back(&client);

    // Mistakes: an unknown id, and text that is no id.
    let (ok, _, err) = cli(&cluster, &["server-offline", "d999"]);
    assert!(!ok);
    assert!(err.starts_with("NOTFOUND"), "{err}");
    let (ok, _, err) = cli(&cluster, &["server-online", "seven"]);
    assert!(!ok);
    assert!(err.starts_with("LOCALERROR"), "{err}");
    let (ok, _, err) = cli(&cluster, &["wait-until-stable", "--timeout=-1"]);
    assert!(!ok);
    assert!(err.starts_with("LOCALERROR"), "{err}");

    // A daemon killed with SIGKILL: the cluster is unstable until the
    // failure is detected and its regions are re-replicated, then stable.
    cluster.procs.kill("daemon-2");
    wait_for(
        "the killed daemon to be marked offline",
        Duration::from_secs(30),
        || {
            let text = cli_ok(&cluster, &["show-config"]);
            let line = text
                .lines()
                .find(|l| l.ends_with(&format!(" {}", cluster.daemon_addr(2))))?
                .to_string();
            line.contains(" offline ").then_some(())
        },
    );
    cli_ok(&cluster, &["wait-until-stable", "--timeout", "60"]);
    let text = cli_ok(&cluster, &["show-config"]);
    assert!(!text.contains("transfers:"), "no transfer runs when stable");
    all_keys_read_back(&client);
}

/// A daemon started on a data directory of a newer format (as a later
/// build would leave it) refuses to start and says why, and leaves the
/// directory as it was. (The coordinator's store: `store::tests`.)
#[test]
fn a_daemon_refuses_a_data_directory_of_a_newer_format() {
    use tessera_storage::{Durability, Engine, FjallEngine, STORAGE_FORMAT, STORAGE_FORMAT_KEY};
    let dir = tempfile::tempdir().expect("temp dir");
    let newer = (STORAGE_FORMAT + 1).to_be_bytes();
    {
        let engine = FjallEngine::open(dir.path(), Durability::Interval).expect("open");
        engine
            .meta_put(STORAGE_FORMAT_KEY, &newer)
            .expect("write the format");
    }
    let data = dir.path().to_str().expect("utf-8 path");
    let (ok, _, err) = run_cli(
        &[
            "daemon",
            "--data",
            data,
            "--port",
            "0",
            "--coordinator",
            "127.0.0.1:9",
        ],
        None,
        CLI_TIMEOUT,
    );
    assert!(!ok, "the daemon started on a newer format");
    assert!(err.contains("newer Tessera"), "{err}");
    match FjallEngine::open(dir.path(), Durability::Interval) {
        Err(e) => assert!(e.to_string().contains("newer Tessera"), "{e}"),
        Ok(_) => panic!("the directory's format was changed"),
    }
}
