//! Helpers of the multi-process tests: free ports, server processes of the
//! real `tessera` binary that are always killed, and bounded waits.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tessera_client::{BlockingAdmin, Configuration, Epoch};
use tessera_types::DaemonState;

pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Whether every port of `ports` can be bound on 127.0.0.1 now.
pub fn ports_free(ports: impl IntoIterator<Item = u16>) -> bool {
    ports
        .into_iter()
        .all(|p| TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], p))).is_ok())
}

/// Calls `condition` until it returns `Some`, or panics with `what` after
/// `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut condition: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = condition() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One child process with its log file.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

/// Server processes that are killed (SIGKILL, by PID) when the guard drops,
/// also when a test fails. On failure their logs are printed.
#[derive(Default)]
pub struct Procs {
    pub procs: Vec<Proc>,
}

impl Procs {
    /// Starts `tessera ARGS`, stdout and stderr appended to `log`.
    pub fn spawn(&mut self, name: &str, args: &[String], log: &Path) -> u32 {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log");
        let err = out.try_clone().expect("clone log");
        let child = Command::new(TESSERA)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("TESSERA_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn tessera");
        let pid = child.id();
        self.procs.push(Proc {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        });
        pid
    }

    /// Kills every process with SIGKILL and reaps it.
    pub fn kill_all(&mut self) {
        for proc in &mut self.procs {
            let _ = proc.child.kill();
            let _ = proc.child.wait();
        }
        self.procs.clear();
    }

    /// Kills one process by name with SIGKILL and reaps it.
    pub fn kill(&mut self, name: &str) {
        let index = self
            .procs
            .iter()
            .position(|p| p.name == name)
            .expect("no such process");
        let mut proc = self.procs.remove(index);
        let _ = proc.child.kill();
        let _ = proc.child.wait();
    }

    fn print_logs(&self) {
        for proc in &self.procs {
            let text = std::fs::read_to_string(&proc.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!(
                "----- {} ({}) last lines -----",
                proc.name,
                proc.log.display()
            );
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
        self.kill_all();
    }
}

/// Sends SIGTERM to `pid`.
pub fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid} failed");
}

/// Waits for `child` to exit within `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    wait_for("a process to exit", timeout, || {
        child.try_wait().expect("try_wait")
    })
}

/// A coordinator and daemons as separate processes, with their data under
/// one temporary directory.
pub struct Cluster {
    // Declared first: the processes die before their directory goes.
    pub procs: Procs,
    pub dir: tempfile::TempDir,
    pub coordinator_ports: Vec<u16>,
    pub daemon_ports: Vec<u16>,
}

impl Cluster {
    /// One coordinator and `daemons` daemons, started and registered.
    pub fn start(daemons: usize) -> Cluster {
        let mut cluster = Cluster {
            procs: Procs::default(),
            dir: tempfile::tempdir().expect("tempdir"),
            coordinator_ports: vec![free_port()],
            daemon_ports: (0..daemons).map(|_| free_port()).collect(),
        };
        cluster.start_coordinator(0, None);
        for i in 0..daemons {
            cluster.start_daemon(i);
        }
        cluster.wait_daemons_available(Duration::from_secs(60));
        cluster
    }

    pub fn coordinator_addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.coordinator_ports[i])
    }

    pub fn coordinator_addrs(&self) -> Vec<String> {
        (0..self.coordinator_ports.len())
            .map(|i| self.coordinator_addr(i))
            .collect()
    }

    pub fn daemon_addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.daemon_ports[i])
    }

    /// Starts coordinator member `i` (its port must be in
    /// `coordinator_ports`), joining `join` when given.
    pub fn start_coordinator(&mut self, i: usize, join: Option<String>) {
        let data = self.dir.path().join(format!("coordinator-{i}"));
        let mut args = vec![
            "coordinator".to_string(),
            "--listen".into(),
            "127.0.0.1".into(),
            "--port".into(),
            self.coordinator_ports[i].to_string(),
            "--data".into(),
            data.display().to_string(),
        ];
        if let Some(join) = join {
            args.extend(["--join".to_string(), join]);
        }
        let log = self.dir.path().join(format!("coordinator-{i}.log"));
        self.procs.spawn(&format!("coordinator-{i}"), &args, &log);
    }

    /// Starts daemon `i` against coordinator member 0.
    pub fn start_daemon(&mut self, i: usize) {
        let data = self.dir.path().join(format!("daemon-{i}"));
        let args = vec![
            "daemon".to_string(),
            "--listen".into(),
            "127.0.0.1".into(),
            "--port".into(),
            self.daemon_ports[i].to_string(),
            "--coordinator".into(),
            self.coordinator_addr(0),
            "--data".into(),
            data.display().to_string(),
        ];
        let log = self.dir.path().join(format!("daemon-{i}.log"));
        self.procs.spawn(&format!("daemon-{i}"), &args, &log);
    }

    /// An admin handle over every coordinator member.
    pub fn admin(&self) -> BlockingAdmin {
        BlockingAdmin::new(&self.coordinator_addr(0)).expect("admin")
    }

    /// Waits until every daemon of this cluster is available in the
    /// configuration; returns that configuration.
    pub fn wait_daemons_available(&self, timeout: Duration) -> Configuration {
        let admin = self.admin();
        let addrs: Vec<String> = (0..self.daemon_ports.len())
            .map(|i| self.daemon_addr(i))
            .collect();
        wait_for("every daemon to be available", timeout, || {
            let config = admin.wait_config(Epoch(0), Duration::ZERO).ok().flatten()?;
            let all = addrs.iter().all(|addr| {
                config
                    .daemons
                    .values()
                    .any(|d| &d.addr == addr && d.state == DaemonState::Available)
            });
            all.then_some(config)
        })
    }
}

/// Runs `tessera ARGS` to completion within `timeout`; returns (exit
/// success, stdout, stderr).
pub fn run_cli(args: &[&str], stdin: Option<&str>, timeout: Duration) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(TESSERA)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tessera");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    // Read the pipes on threads so that a full pipe cannot block the child.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tessera {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.success(),
        out_thread.join().unwrap_or_default(),
        err_thread.join().unwrap_or_default(),
    )
}
