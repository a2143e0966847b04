//! `tessera`: the one binary of Tessera (API.md §0.3).
//!
//! Servers: `coordinator`, `daemon`, and `dev` (a coordinator and N daemons
//! in one process). Admin: `add-space`, `rm-space`, `list-spaces`,
//! `list-subspaces`, `show-config`, `validate-space`, the live layout
//! changes `add-subspace`, `rm-subspace`, `add-index`, `rm-index`,
//! `relayout` and `list-indices`, `advise`, `calibrate`, `server-offline`,
//! `server-online`, `server-kill`, `server-forget`, `wait-until-stable`. Data: `put`, `get`,
//! `del`, `search`, `count`, with values and results as JSON.
//!
//! Exit status 0 on success; otherwise non-zero with the status name (e.g.
//! `NOTFOUND`, `BADSPACE`) and a message on stderr. Logs go to stderr,
//! filtered by `RUST_LOG` (warnings only by default), as text or, with a
//! server command's `--log-format json`, one JSON object per line.

mod advise;
mod autopilot;
// Reports how long a backup or a restore took, in real time.
#[allow(clippy::disallowed_methods)]
mod backup;
mod bench;
mod calibrate;
// Runs servers in this process and waits for them with real deadlines.
#[allow(clippy::disallowed_methods)]
mod dev;
mod progress;
mod security;
mod show;

use tessera_cli::json;

use anyhow::Context;

/// mimalloc instead of the system allocator (see the workspace Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use security::{ClientSecurity, ServerSecurity};
use std::io::Read;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tessera_client::{
    Admin, AdminError, AdminStatus, Client, ClientError, ClientOptions, Outcome, Status,
};
use tessera_observe::logs::LogFormat;

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a distributed searchable key-value store"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which coordinator member to talk to, and how.
#[derive(Args, Clone)]
struct Target {
    /// Host of any coordinator member.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port of that member.
    #[arg(long, default_value_t = 1982)]
    port: u16,
    #[command(flatten)]
    security: ClientSecurity,
}

/// The macaroons of a data command on a space `with authorization`
/// (API.md §10): serialized tokens, as pymacaroons' `serialize()` gives.
#[derive(Args, Clone)]
struct AuthArgs {
    /// A serialized macaroon; repeat for discharges or for several objects.
    #[arg(long = "auth", value_name = "MACAROON")]
    macaroons: Vec<String>,
}

impl AuthArgs {
    /// `client`, carrying these macaroons when there are any.
    fn apply(&self, client: Client) -> Client {
        if self.macaroons.is_empty() {
            client
        } else {
            client.with_auth(self.macaroons.iter().map(|m| m.as_bytes().to_vec()))
        }
    }
}

/// What a server command shows of itself.
#[derive(Args, Clone)]
struct Observe {
    /// `host:port` where to serve Prometheus metrics (`GET /metrics`); off
    /// when absent.
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// How logs are written to stderr: text or json (one object per line).
    #[arg(long, default_value = "text")]
    log_format: LogFormat,
}

impl Target {
    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// An admin handle on this member, over TLS and with the admin
    /// credential when the flags give them.
    fn admin(&self) -> anyhow::Result<Admin> {
        Ok(Admin::with_link(
            [self.addr()],
            Duration::from_secs(10),
            self.security.link()?,
        ))
    }

    /// A data client through this member, over TLS when asked.
    async fn client(&self) -> anyhow::Result<Client> {
        let options = ClientOptions {
            transport: self.security.link()?.transport,
            ..ClientOptions::default()
        };
        Ok(Client::connect_with([self.addr()], options).await?)
    }
}

/// The arguments of `add-index` and `rm-index`.
#[derive(Args)]
struct IndexArgs {
    space: String,
    attr: String,
    /// A global index (SLIK): its own range-partitioned indexlets rather
    /// than entries inside every region.
    #[arg(long)]
    global: bool,
    /// With --global on add-index: the number of indexlets (default: the
    /// space's partitions).
    #[arg(long, requires = "global")]
    partitions: Option<u32>,
    #[command(flatten)]
    wait: LayoutWait,
    #[command(flatten)]
    target: Target,
}

/// `--wait` of the layout commands, which otherwise exit as soon as the
/// coordinator accepted the change (API.md §12.5).
#[derive(Args)]
struct LayoutWait {
    /// Wait until every part of the space is ready, showing the progress of
    /// the parts being built on stderr.
    #[arg(long)]
    wait: bool,
}

impl LayoutWait {
    async fn run(&self, admin: &Admin, space: &str) -> Result<(), AdminError> {
        if self.wait {
            progress::wait_layout(
                admin,
                space,
                progress::LAYOUT_WAIT_MAX,
                Duration::from_millis(250),
            )
            .await?;
        }
        Ok(())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run one coordinator member.
    Coordinator {
        #[arg(long, default_value = "127.0.0.1")]
        listen: String,
        #[arg(long, default_value_t = 1982)]
        port: u16,
        /// Where the member keeps its state.
        #[arg(long)]
        data: PathBuf,
        /// `host:port` of a member of an existing group to join.
        #[arg(long)]
        join: Option<String>,
        /// `host:port` the others should dial when it is not the listening
        /// address (behind a proxy); keep it the same across restarts.
        #[arg(long)]
        advertise: Option<String>,
        /// Milliseconds after an epoch ends before the tombstones written
        /// in it may be collected; must exceed how long clients retry.
        #[arg(long, default_value_t = 60_000)]
        tombstone_grace_ms: u64,
        /// Milliseconds an offline daemon may stay silent, while regions of
        /// replex spaces wait for it as their last daemon, before the
        /// leader declares it lost and rebuilds them from the other
        /// replexes (0: never; only `server-kill` then starts a rebuild).
        #[arg(long, default_value_t = tessera_coordinator::LOST_TIMEOUT_DEFAULT.as_millis() as u64)]
        lost_timeout_ms: u64,
        /// As leader, split an indexlet of a global index at its middle
        /// value once it holds this many entries (0: never).
        #[arg(long, default_value_t = tessera_coordinator::layout::DEFAULT_INDEXLET_SPLIT_ENTRIES)]
        indexlet_split_entries: u64,
        /// As leader, split an indexlet of a global index at its middle
        /// value once its replicas serve this many lookup pages per second
        /// (0, the default: never; a split rebuilds the whole index).
        #[arg(long, default_value_t = 0)]
        indexlet_split_lookups: u64,
        #[command(flatten)]
        observe: Observe,
        #[command(flatten)]
        security: ServerSecurity,
    },
    /// Run one daemon.
    Daemon {
        #[arg(long, default_value = "127.0.0.1")]
        listen: String,
        #[arg(long, default_value_t = 2012)]
        port: u16,
        /// `host:port` of any coordinator member.
        #[arg(long, default_value = "127.0.0.1:1982")]
        coordinator: String,
        /// Where the daemon keeps its objects and identity.
        #[arg(long)]
        data: PathBuf,
        /// `host:port` that peers and clients should dial when it is not
        /// the listening address (behind a proxy).
        #[arg(long)]
        advertise: Option<String>,
        /// Milliseconds between tombstone collection rounds.
        #[arg(long, default_value_t = 10_000)]
        tombstone_collect_ms: u64,
        /// MiB of the storage engine's block cache (table blocks kept in
        /// memory for reads).
        #[arg(long, default_value_t = tessera_daemon::CACHE_BYTES_DEFAULT >> 20)]
        cache_mib: u64,
        /// MiB of the row cache (stored objects by key, in front of the
        /// engine's point reads; 0 turns it off).
        #[arg(long, default_value_t = tessera_daemon::ROW_CACHE_BYTES_DEFAULT >> 20)]
        row_cache_mib: u64,
        #[command(flatten)]
        observe: Observe,
        #[command(flatten)]
        security: ServerSecurity,
    },
    /// Run a coordinator and N daemons in this process (daemon i listens on
    /// port P+30+i); prints a line with `ready` once the cluster serves,
    /// then one `metrics:` line per process.
    Dev {
        #[arg(long, default_value_t = 3)]
        daemons: usize,
        /// The coordinator's port.
        #[arg(long, default_value_t = 1982)]
        port: u16,
        #[arg(long, default_value = "./tessera-data")]
        data: PathBuf,
        /// Serve no metrics (by default every process serves them on a
        /// free port of 127.0.0.1).
        #[arg(long)]
        no_metrics: bool,
        /// How logs are written to stderr: text or json.
        #[arg(long, default_value = "text")]
        log_format: LogFormat,
    },
    /// Create a space from a description (argument, or stdin when absent).
    AddSpace {
        description: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Check a description (argument or stdin) without a cluster.
    ValidateSpace { description: Option<String> },
    /// Remove a space and its data.
    RmSpace {
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// Print the name of every space.
    ListSpaces {
        #[command(flatten)]
        target: Target,
    },
    /// Print a space's subspaces (the first is the key subspace).
    ListSubspaces {
        space: String,
        #[command(flatten)]
        target: Target,
    },
    /// Add a subspace on `A[,B…]` to a space, built live (exits once the
    /// coordinator accepted it; `show-config` shows it building).
    AddSubspace {
        space: String,
        /// Comma-separated attribute names.
        attrs: String,
        #[command(flatten)]
        wait: LayoutWait,
        #[command(flatten)]
        target: Target,
    },
    /// Drop subspace N (as `list-subspaces` numbers it; never 0) live.
    RmSubspace {
        space: String,
        part: u64,
        #[command(flatten)]
        wait: LayoutWait,
        #[command(flatten)]
        target: Target,
    },
    /// Cut the global index on ATTR again, also at each VALUE (read as
    /// ATTR's type), live: a new index with those cuts is built while the
    /// old one serves, then the old one drops. No VALUE: the same cuts on
    /// fresh placements (moves every indexlet). Prints the new part's id.
    SplitIndex {
        space: String,
        attr: String,
        /// Negative numbers need no `--` before them.
        #[arg(allow_negative_numbers = true)]
        values: Vec<String>,
        #[command(flatten)]
        wait: LayoutWait,
        #[command(flatten)]
        target: Target,
    },
    /// Add a local index on ATTR (or `docattr.path`), built live.
    AddIndex(IndexArgs),
    /// Drop the local index on ATTR (or with id ATTR, as `list-indices`
    /// numbers them) live.
    RmIndex(IndexArgs),
    /// Move a space to the subspaces and indexes of a new description of it
    /// (argument, or stdin when absent): new parts build, then the omitted
    /// ones drop.
    Relayout {
        space: String,
        description: Option<String>,
        #[command(flatten)]
        wait: LayoutWait,
        #[command(flatten)]
        target: Target,
    },
    /// Print a space's local indexes: `N: attr state` per index.
    ListIndices {
        space: String,
        #[command(flatten)]
        target: Target,
    },
    /// Print the configuration: epoch, coordinators, daemons, spaces, regions.
    ShowConfig {
        /// Print the configuration as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Take a daemon out of every chain (`d3` or `3`); it keeps running.
    ServerOffline {
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Let an offline daemon take regions again.
    ServerOnline {
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Take a daemon offline and tell it to stop.
    ServerKill {
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Remove a daemon for good (its id is never reused).
    ServerForget {
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Wait until every daemon acknowledged the current epoch and no state
    /// transfer runs; TIMEOUT after `--timeout` seconds.
    WaitUntilStable {
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        #[command(flatten)]
        target: Target,
    },
    /// Take a consistent backup of the whole cluster into DIR (which must
    /// not exist, or be empty); writes pause only while daemons freeze.
    Backup {
        dir: PathBuf,
        #[command(flatten)]
        target: Target,
    },
    /// Build a new cluster's data directory DATA from the backup in DIR;
    /// start it with `tessera dev --data DATA --port P --daemons N`.
    Restore {
        dir: PathBuf,
        #[arg(long)]
        data: PathBuf,
        /// Daemons of the new cluster (any number).
        #[arg(long, default_value_t = 3)]
        daemons: usize,
        /// The new cluster's coordinator port, as for `tessera dev`.
        #[arg(long, default_value_t = 1982)]
        port: u16,
    },
    /// Create or update an object: `put SPACE KEY '{"attr": value, ...}'`.
    Put {
        space: String,
        #[arg(allow_hyphen_values = true)]
        key: String,
        json: String,
        /// The object's secret, on a space `with authorization`.
        #[arg(long)]
        secret: Option<String>,
        #[command(flatten)]
        auth: AuthArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Print an object as one JSON line (without the key), or `null`.
    Get {
        space: String,
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[command(flatten)]
        auth: AuthArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Delete an object (NOTFOUND when there is none).
    Del {
        space: String,
        #[arg(allow_hyphen_values = true)]
        key: String,
        #[command(flatten)]
        auth: AuthArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Print every matching object, one JSON line each, key included.
    Search {
        space: String,
        /// Predicates, e.g. `{"a": "x", "n": {"ge": 1, "lt": 10}}`.
        #[arg(default_value = "{}")]
        json: String,
        /// Print how the search would run instead of running it.
        #[arg(long)]
        explain: bool,
        #[command(flatten)]
        auth: AuthArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Benchmarks: YCSB, the paper's experiments, baselines side by side.
    Bench(bench::BenchArgs),
    /// The layout advisor: the best layouts for a workload file (API.md
    /// §12.4), with the thesis's heuristics for comparison.
    Advise {
        #[command(flatten)]
        args: advise::AdviseArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Watch a space's observed mix of operations and propose (with
    /// `--apply`, make) a relayout when it drifts and the model predicts a
    /// gain. Off unless run.
    Autopilot {
        #[command(flatten)]
        args: autopilot::AutopilotArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Measure the advisor's cost-model parameters on the running cluster
    /// (short loads on scratch spaces of its own) and store them in the
    /// configuration, where `advise` finds them.
    Calibrate {
        #[command(flatten)]
        args: calibrate::CalibrateArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Print the number of matching objects.
    Count {
        space: String,
        #[arg(default_value = "{}")]
        json: String,
        #[command(flatten)]
        auth: AuthArgs,
        #[command(flatten)]
        target: Target,
    },
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // `advise` reads calibrated parameters from a cluster it was pointed at.
    if let (Command::Advise { args, .. }, Some(m)) =
        (&mut cli.command, matches.subcommand_matches("advise"))
    {
        args.target_named = ["host", "port"]
            .iter()
            .any(|id| m.value_source(id) == Some(ValueSource::CommandLine));
    }
    let log_format = match &cli.command {
        Command::Coordinator { observe, .. } | Command::Daemon { observe, .. } => {
            observe.log_format
        }
        Command::Dev { log_format, .. } => *log_format,
        _ => LogFormat::Text,
    };
    if let Err(e) = tessera_observe::logs::init(log_format, "warn") {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli.command));
    // Background tasks (connection readers, pollers) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e);
            ExitCode::FAILURE
        }
    }
}

/// Prints an error on stderr, led by its status name when it has one.
fn report(error: &anyhow::Error) {
    if let Some(e) = error.downcast_ref::<ClientError>() {
        eprintln!("{}: {}", e.status().name(), e.message());
    } else if let Some(e) = error.downcast_ref::<AdminError>() {
        eprintln!("{}: {}", e.status().name(), e.message());
    } else {
        eprintln!("error: {error:#}");
    }
}

fn socket_addr(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}:{port}"))?
        .next()
        .with_context(|| format!("{host}:{port} resolves to no address"))
}

/// A daemon id as `show-config` prints it (`d3`) or as a number.
fn daemon_id(text: &str) -> Result<tessera_client::DaemonId, AdminError> {
    text.strip_prefix('d')
        .unwrap_or(text)
        .parse()
        .map(tessera_client::DaemonId)
        .map_err(|_| {
            AdminError::new(
                AdminStatus::LocalError,
                format!("{text:?} is not a daemon id (like d3 or 3)"),
            )
        })
}

/// The text of an optional argument, or all of stdin.
fn argument_or_stdin(argument: Option<String>) -> anyhow::Result<String> {
    match argument {
        Some(text) => Ok(text),
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the description from stdin")?;
            Ok(text)
        }
    }
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Bench(args) => bench::run(args).await?,
        Command::Advise { args, target } => advise::run(args, &target).await?,
        Command::Calibrate { args, target } => calibrate::run(args, &target).await?,
        Command::Autopilot { args, target } => autopilot::run(args, &target).await?,
        Command::Coordinator {
            listen,
            port,
            data,
            join,
            advertise,
            tombstone_grace_ms,
            lost_timeout_ms,
            indexlet_split_entries,
            indexlet_split_lookups,
            observe,
            security,
        } => {
            let link = security.link()?;
            let options = tessera_coordinator::server::CoordinatorOptions {
                transport: link.transport,
                admin_token: link.admin_token,
                join,
                advertise,
                metrics: observe.metrics,
                tombstone_grace: Duration::from_millis(tombstone_grace_ms),
                lost_timeout: (lost_timeout_ms > 0).then(|| Duration::from_millis(lost_timeout_ms)),
                indexlet_split_entries,
                indexlet_split_pages_per_s: indexlet_split_lookups,
                ..tessera_coordinator::server::CoordinatorOptions::new(
                    socket_addr(&listen, port)?,
                    data,
                )
            };
            tessera_coordinator::server::run(options, shutdown_signal())
                .await
                .context("coordinator")?;
        }
        Command::Daemon {
            listen,
            port,
            coordinator,
            data,
            advertise,
            tombstone_collect_ms,
            cache_mib,
            row_cache_mib,
            observe,
            security,
        } => {
            let link = security.link()?;
            let options = tessera_daemon::DaemonOptions {
                transport: link.transport,
                admin_token: link.admin_token,
                advertise,
                collect_every: Duration::from_millis(tombstone_collect_ms),
                caches: tessera_daemon::Caches {
                    blocks: cache_mib.saturating_mul(1 << 20),
                    rows: row_cache_mib.saturating_mul(1 << 20),
                },
                metrics: observe.metrics,
                ..tessera_daemon::DaemonOptions::new(socket_addr(&listen, port)?, data, coordinator)
            };
            tessera_daemon::run(options, shutdown_signal())
                .await
                .context("daemon")?;
        }
        Command::Dev {
            daemons,
            port,
            data,
            no_metrics,
            log_format: _,
        } => {
            dev::run(
                dev::DevOptions {
                    daemons,
                    port,
                    data,
                    durability: tessera_daemon::Durability::default(),
                    metrics: !no_metrics,
                    transport: tessera_client::Transport::plain(),
                },
                shutdown_signal(),
            )
            .await?;
        }
        Command::AddSpace {
            description,
            target,
        } => {
            let description = argument_or_stdin(description)?;
            target.admin()?.add_space(&description).await?;
        }
        Command::ValidateSpace { description } => {
            let description = argument_or_stdin(description)?;
            tessera_types::parse::parse_space(&description)
                .map_err(|e| AdminError::new(AdminStatus::BadSpace, e.to_string()))?;
        }
        Command::RmSpace { name, target } => {
            target.admin()?.rm_space(&name).await?;
        }
        Command::ListSpaces { target } => {
            for name in target.admin()?.list_spaces().await? {
                println!("{name}");
            }
        }
        Command::ListSubspaces { space, target } => {
            let config = target.admin()?.config().await?;
            let space = config.space(&space).ok_or_else(|| {
                AdminError::new(
                    AdminStatus::NotFound,
                    format!("space {space:?} does not exist"),
                )
            })?;
            print!("{}", show::subspaces_text(space));
        }
        Command::AddSubspace {
            space,
            attrs,
            wait,
            target,
        } => {
            let attrs: Vec<String> = attrs
                .split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect();
            let admin = target.admin()?;
            let part = admin.add_subspace(&space, &attrs).await?;
            println!("{}", part.0);
            wait.run(&admin, &space).await?;
        }
        Command::RmSubspace {
            space,
            part,
            wait,
            target,
        } => {
            let admin = target.admin()?;
            admin
                .rm_subspace(&space, tessera_client::PartId(part))
                .await?;
            wait.run(&admin, &space).await?;
        }
        Command::SplitIndex {
            space,
            attr,
            values,
            wait,
            target,
        } => {
            let admin = target.admin()?;
            let part = admin.split_global_index(&space, &attr, &values).await?;
            println!("{}", part.0);
            wait.run(&admin, &space).await?;
        }
        Command::AddIndex(IndexArgs {
            space,
            attr,
            global,
            partitions,
            wait,
            target,
        }) => {
            let admin = target.admin()?;
            let part = if global {
                admin.add_global_index(&space, &attr, partitions).await?
            } else {
                admin.add_index(&space, &attr).await?
            };
            println!("{}", part.0);
            wait.run(&admin, &space).await?;
        }
        Command::RmIndex(IndexArgs {
            space,
            attr,
            global,
            partitions: _,
            wait,
            target,
        }) => {
            let admin = target.admin()?;
            if global {
                admin.rm_global_index(&space, &attr).await?;
                return wait.run(&admin, &space).await.map_err(Into::into);
            }
            let indexes = admin.list_indices(&space).await?;
            let named = |i: &&tessera_client::IndexInfo| match &i.path {
                Some(path) => format!("{}.{path}", i.attribute) == attr,
                None => i.attribute == attr,
            };
            let found = indexes
                .iter()
                .filter(|i| i.state != tessera_client::PartState::Dropping && !i.global)
                .find(|i| named(i) || attr.parse() == Ok(i.id.0))
                .ok_or_else(|| {
                    AdminError::new(
                        AdminStatus::NotFound,
                        format!("space {space:?} has no index on {attr:?}"),
                    )
                })?;
            admin.rm_index(Some(&space), found.id).await?;
            wait.run(&admin, &space).await?;
        }
        Command::Relayout {
            space,
            description,
            wait,
            target,
        } => {
            let description = argument_or_stdin(description)?;
            let admin = target.admin()?;
            admin.relayout(&space, &description).await?;
            wait.run(&admin, &space).await?;
        }
        Command::ListIndices { space, target } => {
            let config = target.admin()?.config().await?;
            if let Some(space) = config.space(&space) {
                print!("{}", show::indices_text(space));
            }
        }
        Command::ShowConfig { json, target } => {
            let config = target.admin()?.config().await?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&show::config_json(&config))
                        .context("encoding the configuration")?
                );
            } else {
                print!("{}", show::config_text(&config));
            }
        }
        Command::ServerOffline { id, target } => {
            target.admin()?.server_offline(daemon_id(&id)?).await?;
        }
        Command::ServerOnline { id, target } => {
            target.admin()?.server_online(daemon_id(&id)?).await?;
        }
        Command::ServerKill { id, target } => {
            target.admin()?.server_kill(daemon_id(&id)?).await?;
        }
        Command::ServerForget { id, target } => {
            target.admin()?.server_forget(daemon_id(&id)?).await?;
        }
        Command::WaitUntilStable { timeout, target } => {
            let timeout = std::time::Duration::try_from_secs_f64(timeout).map_err(|_| {
                AdminError::new(
                    AdminStatus::LocalError,
                    format!("--timeout {timeout} is not a number of seconds"),
                )
            })?;
            let admin = target.admin()?;
            let epoch =
                progress::wait_until_stable(&admin, timeout, std::time::Duration::from_millis(200))
                    .await?;
            println!("stable at epoch {}", epoch.0);
        }
        Command::Backup { dir, target } => backup::backup(&target.addr(), &dir).await?,
        Command::Restore {
            dir,
            data,
            daemons,
            port,
        } => backup::restore(&dir, &data, daemons, port).await?,
        Command::Put {
            space,
            key,
            json,
            secret,
            auth,
            target,
        } => {
            let mut client = auth.apply(target.client().await?);
            if let Some(secret) = secret {
                client = client.with_secret(secret);
            }
            let desc = client.space(&space).await?;
            let key = json::key_from_arg(&desc, &key)?;
            let attrs = json::attrs_from_json(&desc, &json::parse(&json)?)?;
            client.put(&space, key, attrs).await?.into_result()?;
        }
        Command::Get {
            space,
            key,
            auth,
            target,
        } => {
            let client = auth.apply(target.client().await?);
            let desc = client.space(&space).await?;
            let key = json::key_from_arg(&desc, &key)?;
            match client.get(&space, key).await? {
                Some(record) => println!(
                    "{}",
                    json::record_to_json(record.attrs.iter().map(|(n, v)| (n.as_str(), v)))
                ),
                None => println!("null"),
            }
        }
        Command::Del {
            space,
            key,
            auth,
            target,
        } => {
            let client = auth.apply(target.client().await?);
            let desc = client.space(&space).await?;
            let key = json::key_from_arg(&desc, &key)?;
            if client.del(&space, key).await? == Outcome::NotFound {
                return Err(ClientError::new(
                    Status::NotFound,
                    format!("no object with that key in {space:?}"),
                )
                .into());
            }
        }
        Command::Search {
            space,
            json,
            explain,
            auth,
            target,
        } => {
            let client = auth.apply(target.client().await?);
            let desc = client.space(&space).await?;
            let predicates = json::predicates_from_json(&desc, &json::parse(&json)?)?;
            if explain {
                print!("{}", client.search_describe(&space, predicates).await?);
            } else {
                use std::io::Write;
                // Printed as the pages arrive.
                let mut records = client.search_stream(&space, predicates);
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                while let Some(record) = records.next().await {
                    let record = record?;
                    writeln!(
                        out,
                        "{}",
                        json::record_to_json(record.attrs.iter().map(|(n, v)| (n.as_str(), v)))
                    )?;
                }
                out.flush()?;
            }
        }
        Command::Count {
            space,
            json,
            auth,
            target,
        } => {
            let client = auth.apply(target.client().await?);
            let desc = client.space(&space).await?;
            let predicates = json::predicates_from_json(&desc, &json::parse(&json)?)?;
            println!("{}", client.count(&space, predicates).await?);
        }
    }
    Ok(())
}
