//! The coordinator's dashboard in a real headless browser: a coordinator
//! (with `--metrics`, where the dashboard is served) and three daemons as
//! separate processes; Chromium from the distribution renders the page
//! with its script run (`--dump-dom` after a virtual time budget) and the
//! DOM must name every daemon and space; then a space is added and a
//! daemon killed with SIGKILL, and the DOM must show the new space and the
//! daemon offline. Screenshots go under the target directory (their paths
//! are printed), and the page's load time is printed.
//!
//! Chromium is required: CI installs it (scripts/test); without it this
//! test fails and says so.

// A test of real processes: it waits on and times them with the clock.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{cli_at as cli, free_port, wait_for, Cluster};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_client::Epoch;
use tessera_types::DaemonState;

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long one Chromium run may take before it is killed.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);
const DAEMONS: usize = 3;

/// The Chromium binary: `$CHROMIUM`, else `chromium` or `chromium-browser`
/// on the PATH.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "Chromium is not installed: this test renders the dashboard in a real headless browser. \
         Install it with `apt-get install -y chromium` (scripts/test does so when run as root), \
         or point $CHROMIUM at a Chromium binary."
    );
}

/// Runs Chromium headless on `url` with `extra` flags, killed after
/// [`BROWSER_TIMEOUT`]; returns its stdout and how long it ran.
fn browse(browser: &Path, profile: &Path, url: &str, extra: &[String]) -> (String, Duration) {
    let out_path = profile.with_extension("out");
    let out = std::fs::File::create(&out_path).expect("create the browser's output file");
    let started = Instant::now();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            // Root (CI, containers) cannot use Chromium's sandbox.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--window-size=1400,1100",
            // Virtual time runs the page's polling without waiting for it.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .expect("start Chromium");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for Chromium") {
            break status;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Chromium did not finish within {BROWSER_TIMEOUT:?} on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed();
    assert!(status.success(), "Chromium failed on {url}: {status}");
    let dom = std::fs::read_to_string(&out_path).expect("read the browser's output");
    (dom, elapsed)
}

/// `GET path` on `addr`; the whole answer.
fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the dashboard");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    answer
}

/// The `<tr>` of daemon `id` in a dumped DOM, if there is one.
fn daemon_row(dom: &str, id: u64) -> Option<&str> {
    let start = dom.find(&format!("<tr data-daemon=\"{id}\""))?;
    let end = dom[start..].find("</tr>")? + start;
    Some(&dom[start..end])
}

#[test]
fn the_dashboard_renders_the_cluster_and_follows_its_changes() {
    let browser = chromium();
    let http_port = free_port();
    let http_addr = format!("127.0.0.1:{http_port}");
    let mut cluster = Cluster::start_with(
        DAEMONS,
        &["--metrics", &http_addr],
        &["--metrics", "127.0.0.1:0"],
    );
    let coordinator = cluster.coordinator_addr(0);
    let url = format!("http://{http_addr}/");
    cli(
        &[
            "add-space",
            "space first key k attributes string a, int n subspace a, n create 4 partitions",
        ],
        &coordinator,
    );
    let admin = cluster.admin();
    // The member that answers may not have applied every registration
    // yet (it lags the leader by a heartbeat): wait until it has.
    let config = wait_for("every daemon in the configuration", TIMEOUT, || {
        admin
            .wait_config(Epoch(0), Duration::ZERO)
            .ok()
            .flatten()
            .filter(|c| c.daemons.len() == DAEMONS && !c.spaces.is_empty())
    });
    let ids: Vec<u64> = config.daemons.keys().map(|d| d.0).collect();
    let shown = cli(&["show-config", "--json"], &coordinator);
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(
        shown["dashboard"],
        url.as_str(),
        "show-config names the dashboard"
    );
    assert_eq!(ids.len(), DAEMONS);

    // The page and its snapshot straight over HTTP: the load time of the
    // bytes alone, without the browser.
    let started = Instant::now();
    let page = http_get(&http_addr, "/");
    let api = http_get(&http_addr, "/api/cluster");
    let http_time = started.elapsed();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(page.contains("text/html") && page.contains("/api/cluster"));
    assert!(
        !page.contains("https://"),
        "the page must load nothing from elsewhere"
    );
    let body = api.split("\r\n\r\n").nth(1).expect("a body");
    let snapshot: serde_json::Value = serde_json::from_str(body).expect("JSON");
    assert_eq!(snapshot["spaces"][0]["name"], "first");
    assert_eq!(snapshot["daemons"].as_array().map(Vec::len), Some(DAEMONS));

    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&shots).expect("create the screenshot directory");
    let profile = cluster.dir.path().join("chromium-profile");

    // Every daemon and the space, once the script has drawn them.
    let (dom, browser_time) = wait_for("the dashboard to draw the cluster", TIMEOUT, || {
        let (dom, elapsed) = browse(&browser, &profile, &url, &["--dump-dom".into()]);
        let drawn = dom.contains("data-loaded=\"yes\"")
            && dom.contains("data-space=\"first\"")
            && ids.iter().all(|&id| {
                daemon_row(&dom, id).is_some_and(|row| row.contains("data-state=\"available\""))
            });
        drawn.then_some((dom, elapsed))
    });
    // The region grids: every region of the space is a cell.
    let regions: usize = config.spaces[0]
        .subspaces
        .iter()
        .map(|s| s.regions.len())
        .sum();
    assert_eq!(dom.matches("data-region=").count(), regions);
    let load_ms = dom
        .split("data-first-draw-ms=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(str::to_string)
        .expect("the page records when it first drew");
    let screenshot = |path: &Path| {
        browse(
            &browser,
            &profile,
            &url,
            &[format!("--screenshot={}", path.display())],
        )
    };
    let before = shots.join("before.png");
    screenshot(&before);

    // A new space, and one daemon killed (SIGKILL, by PID).
    cli(
        &[
            "add-space",
            "space later key id attributes int x create 2 partitions",
        ],
        &coordinator,
    );
    let victim_addr = cluster.daemon_addr(2);
    let victim = config
        .daemons
        .values()
        .find(|d| d.addr == victim_addr)
        .expect("the third daemon is registered")
        .id;
    cluster.procs.kill("daemon-2");
    wait_for(
        "the coordinator to take the killed daemon offline",
        TIMEOUT,
        || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            (config.daemons.get(&victim)?.state == DaemonState::Offline).then_some(())
        },
    );
    let dom = wait_for("the dashboard to show the change", TIMEOUT, || {
        let (dom, _) = browse(&browser, &profile, &url, &["--dump-dom".into()]);
        let changed = dom.contains("data-space=\"later\"")
            && dom.contains("data-space=\"first\"")
            && daemon_row(&dom, victim.0).is_some_and(|row| row.contains(">offline<"));
        changed.then_some(dom)
    });
    for &id in &ids {
        let row = daemon_row(&dom, id).expect("every daemon keeps its row");
        let expected = if id == victim.0 {
            "offline"
        } else {
            "available"
        };
        assert!(
            row.contains(&format!("data-state=\"{expected}\"")),
            "daemon {id}: {row}"
        );
    }
    let after = shots.join("after.png");
    screenshot(&after);
    for shot in [&before, &after] {
        let bytes = std::fs::read(shot).expect("the screenshot was written");
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000,
            "{} is not a real screenshot ({} bytes)",
            shot.display(),
            bytes.len()
        );
    }
    println!(
        "dashboard screenshots: {} {}",
        before.display(),
        after.display()
    );
    println!(
        "dashboard load: page + snapshot over HTTP {:.1} ms; Chromium start to DOM dump {:.0} ms; \
         first draw {load_ms} ms after navigation (the page's performance.now)",
        http_time.as_secs_f64() * 1e3,
        browser_time.as_secs_f64() * 1e3
    );
}
