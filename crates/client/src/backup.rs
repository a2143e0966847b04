//! Consistent backups of a whole cluster ([`Admin::backup`]) and the
//! reading and loading side of a restore ([`BackupContents`],
//! [`restore_objects`]). The design and the on-disk format are in
//! docs/design/backup.md.
//!
//! ```text
//!  set read-only ─▶ BackupDrain (every daemon: read-only epoch, nothing in flight)
//!                ─▶ BackupTake  (every daemon freezes its objects)
//!  set read-write ◀──────────────┘   (the write pause ends here)
//!  BackupRead pages of each key region from its tail ─▶ DIR/regions/*.bin
//!  configuration.bin, MANIFEST (SHA-256 and size of every file) ─▶ rename
//! ```

use crate::admin::Admin;
use crate::client::Client;
use crate::error::{AdminError, ClientError};
use crate::ops::Op;
use crate::pool::DaemonPool;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_protocol::{
    DaemonRequest, DaemonResponse, Status, UpdateFlags, FRAME_BYTES_MAX_DEFAULT,
};
use tessera_types::parse::format_space;
use tessera_types::{Configuration, DaemonId, Epoch, Object, PartState, RegionId, Value};
use tokio::time::Instant;

/// The manifest's name inside a backup directory.
pub const MANIFEST: &str = "MANIFEST";
/// The configuration's file inside a backup directory.
pub const CONFIGURATION_FILE: &str = "configuration.bin";
/// The manifest's first line: the format and its version.
const FORMAT_LINE: &str = "tessera-backup 1";
/// An object in a region file is at most this long (the frame maximum:
/// no daemon could have sent a longer one).
const OBJECT_BYTES_MAX: usize = FRAME_BYTES_MAX_DEFAULT;
/// How long the daemons have to become quiet at the read-only epoch.
const QUIET_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one daemon has to answer one backup request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Updates a restore keeps in flight at once.
const RESTORE_IN_FLIGHT_MAX: usize = 128;

/// Why a backup failed. Nothing is left in the backup directory's place:
/// the files are written to a temporary sibling, renamed at the end.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The backup directory exists and is not empty; a backup never
    /// writes over anything.
    #[error("the backup directory {} exists and is not empty", .0.display())]
    Exists(PathBuf),
    /// A file or directory of the backup could not be created or written
    /// (no permission, a full disk, a path that is not a directory).
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The coordinator group refused or failed a step: the read-only
    /// switch or reading the configuration.
    #[error("the coordinator refused or failed a step of the backup")]
    Admin(#[source] AdminError),
    /// A daemon could not be reached, or did not answer in time.
    #[error("daemon {daemon} did not answer")]
    Unreachable {
        daemon: DaemonId,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A daemon refused a step of the backup.
    #[error("daemon {daemon} refused the backup ({}): {reason}", status.name())]
    Refused {
        daemon: DaemonId,
        status: Status,
        reason: String,
    },
    /// The daemons did not all become quiet at one read-only epoch in
    /// time (`busy`: those still with updates in flight or behind).
    #[error("the daemons were not quiet after {after:?}; still busy: {busy:?}")]
    NotQuiet {
        after: Duration,
        busy: Vec<DaemonId>,
    },
    /// A region's chain names no daemon, or one the configuration does not
    /// list: nothing can be copied from it.
    #[error("region {0} has no replica to copy")]
    NoReplica(RegionId),
}

impl From<AdminError> for BackupError {
    fn from(e: AdminError) -> Self {
        BackupError::Admin(e)
    }
}

/// What a backup did, for the caller to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupReport {
    /// The read-only epoch the cut was taken at.
    pub epoch: Epoch,
    /// How long writes were refused: from asking for read-only to the
    /// coordinator's answer that the cluster is read-write again.
    pub pause: Duration,
    /// Objects written.
    pub objects: u64,
    /// Region files written.
    pub regions: usize,
    /// Bytes of region files.
    pub bytes: u64,
}

/// Progress of a backup, as it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupProgress {
    /// Writes are paused and every daemon has frozen its objects.
    Frozen { epoch: Epoch },
    /// Writes resumed after `pause`.
    Resumed { pause: Duration },
    /// `done` of `total` regions are copied, `objects` objects so far.
    Copied {
        done: usize,
        total: usize,
        objects: u64,
    },
}

/// One region file as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionFile {
    /// Its path inside the backup directory.
    pub path: String,
    /// The name of the space it belongs to.
    pub space: String,
    /// The region in the backed-up cluster.
    pub region: RegionId,
    /// How many objects it holds.
    pub objects: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
}

impl Admin {
    /// Takes a consistent backup of the whole cluster into `dir`, which
    /// must not exist or be empty (docs/design/backup.md). Writes are
    /// refused (READONLY) from the start until every daemon has frozen its
    /// objects; the copy is made afterwards, while writes go on. A cluster
    /// already read-only stays so.
    pub async fn backup(
        &self,
        dir: &Path,
        progress: &mut (dyn FnMut(BackupProgress) + Send),
    ) -> Result<BackupReport, BackupError> {
        let partial = prepare_dir(dir)?;
        let pool = DaemonPool::new(
            FRAME_BYTES_MAX_DEFAULT,
            ANSWER_TIMEOUT,
            self.transport.clone(),
        );
        let backup: u64 = rand::random();
        let result = self
            .backup_into(&pool, backup, &partial, dir, progress)
            .await;
        if result.is_err() {
            let _ = fs::remove_dir_all(&partial);
        }
        result
    }

    async fn backup_into(
        &self,
        pool: &DaemonPool,
        backup: u64,
        partial: &Path,
        dir: &Path,
        progress: &mut (dyn FnMut(BackupProgress) + Send),
    ) -> Result<BackupReport, BackupError> {
        let started = Instant::now();
        let was_read_only = self.config().await?.read_only;
        if !was_read_only {
            self.set_read_only(true).await?;
        }
        let frozen = freeze(self, pool, backup).await;
        // Writes resume whatever happened: a failed backup must not leave
        // the cluster read-only.
        let resumed = if was_read_only {
            Ok(())
        } else {
            self.set_read_only(false).await
        };
        let pause = started.elapsed();
        let config = match (frozen, resumed) {
            (Ok(config), Ok(())) => config,
            (Err(e), _) => {
                release(pool, None, backup).await;
                return Err(e);
            }
            (Ok(config), Err(e)) => {
                release(pool, Some(&config), backup).await;
                return Err(e.into());
            }
        };
        progress(BackupProgress::Frozen {
            epoch: config.epoch,
        });
        progress(BackupProgress::Resumed { pause });
        let copied = copy_regions(pool, &config, backup, partial, progress).await;
        release(pool, Some(&config), backup).await;
        let files = copied?;
        let configuration = postcard::to_allocvec(&config).expect("encoding to a Vec cannot fail");
        let config_path = partial.join(CONFIGURATION_FILE);
        write_synced(&config_path, &configuration)?;
        let manifest = manifest_text(
            &config,
            &sha256_hex(&configuration),
            configuration.len(),
            &files,
        );
        write_synced(&partial.join(MANIFEST), manifest.as_bytes())?;
        sync_dir(&partial.join("regions"))?;
        sync_dir(partial)?;
        fs::rename(partial, dir).map_err(|source| BackupError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        sync_dir(parent)?;
        Ok(BackupReport {
            epoch: config.epoch,
            pause,
            objects: files.iter().map(|f| f.objects).sum(),
            regions: files.len(),
            bytes: files.iter().map(|f| f.bytes).sum(),
        })
    }
}

/// Checks that `dir` may receive a backup and creates the temporary
/// sibling the backup is written to first.
fn prepare_dir(dir: &Path) -> Result<PathBuf, BackupError> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(BackupError::Exists(dir.to_path_buf()));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(BackupError::Write {
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    let name = dir.file_name().ok_or_else(|| BackupError::Write {
        path: dir.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path names no directory"),
    })?;
    let partial = dir.with_file_name(format!(
        ".{}.partial-{:016x}",
        name.to_string_lossy(),
        rand::random::<u64>()
    ));
    let regions = partial.join("regions");
    fs::create_dir_all(&regions).map_err(|source| BackupError::Write {
        path: partial.clone(),
        source,
    })?;
    Ok(partial)
}

/// Waits for a read-only configuration in which every daemon of a chain
/// is quiet, then has each freeze its objects; returns that configuration.
async fn freeze(
    admin: &Admin,
    pool: &DaemonPool,
    backup: u64,
) -> Result<Configuration, BackupError> {
    let deadline = Instant::now() + QUIET_TIMEOUT;
    let mut config = admin.config().await?;
    loop {
        if config.read_only {
            let daemons = chain_members(&config);
            let mut busy = Vec::new();
            for &daemon in &daemons {
                if !quiet(
                    &config,
                    ask(pool, &config, daemon, DaemonRequest::BackupDrain).await?,
                ) {
                    busy.push(daemon);
                }
            }
            // Every daemon was quiet at this epoch, and a read-only daemon
            // starts nothing new: no update is in flight anywhere, so the
            // views frozen now are one cut whatever order they are taken in.
            if busy.is_empty() {
                let mut taken = true;
                for &daemon in &daemons {
                    let request = DaemonRequest::BackupTake { backup };
                    let state = match ask(pool, &config, daemon, request).await {
                        Ok(state) => state,
                        Err(e) => {
                            // Those already frozen would pin old versions.
                            release(pool, Some(&config), backup).await;
                            return Err(e);
                        }
                    };
                    taken &= matches!(state, DaemonResponse::BackupState { taken: true, .. });
                }
                if taken {
                    return Ok(config);
                }
                // The configuration moved between the two rounds: forget
                // what was frozen and start again at the new epoch.
                release(pool, Some(&config), backup).await;
            }
            if Instant::now() >= deadline {
                return Err(BackupError::NotQuiet {
                    after: QUIET_TIMEOUT,
                    busy,
                });
            }
        } else if Instant::now() >= deadline {
            return Err(BackupError::NotQuiet {
                after: QUIET_TIMEOUT,
                busy: Vec::new(),
            });
        }
        // A newer configuration, or a short wait for the daemons to drain.
        if let Some(newer) = admin
            .wait_config(config.epoch, Duration::from_millis(2))
            .await?
        {
            config = newer;
        }
    }
}

/// Whether a daemon's answer says it is quiet at `config`'s epoch.
fn quiet(config: &Configuration, state: DaemonResponse) -> bool {
    matches!(
        state,
        DaemonResponse::BackupState { epoch, read_only: true, in_flight: 0, .. }
            if epoch == config.epoch
    )
}

/// Every daemon in some region's chain.
fn chain_members(config: &Configuration) -> BTreeSet<DaemonId> {
    config
        .spaces
        .iter()
        .flat_map(|s| &s.subspaces)
        .flat_map(|sub| &sub.regions)
        .flat_map(|r| r.chain.iter().copied())
        .collect()
}

/// Sends one backup request to `daemon` and waits for its answer; a
/// `Failed` answer is [`BackupError::Refused`].
async fn ask(
    pool: &DaemonPool,
    config: &Configuration,
    daemon: DaemonId,
    request: DaemonRequest,
) -> Result<DaemonResponse, BackupError> {
    let unreachable = |source: Box<dyn std::error::Error + Send + Sync>| BackupError::Unreachable {
        daemon,
        source,
    };
    let addr = config
        .daemon_addr(daemon)
        .ok_or_else(|| BackupError::Refused {
            daemon,
            status: Status::Internal,
            reason: "the configuration lists no address for it".into(),
        })?;
    let mut answer = pool
        .request(addr, config.epoch, request)
        .await
        .map_err(|e| unreachable(Box::new(e)))?;
    let response = tokio::time::timeout(ANSWER_TIMEOUT, answer.next())
        .await
        .map_err(|e| unreachable(Box::new(e)))?
        .map_err(|e| unreachable(Box::new(e)))?;
    match response {
        DaemonResponse::Failed { status, reason } => Err(BackupError::Refused {
            daemon,
            status,
            reason,
        }),
        response => Ok(response),
    }
}

/// Tells every daemon of `config` (or, without one, none) to forget the
/// frozen view; a daemon that cannot be told drops it when a later backup
/// replaces it.
async fn release(pool: &DaemonPool, config: Option<&Configuration>, backup: u64) {
    let Some(config) = config else { return };
    for daemon in chain_members(config) {
        let request = DaemonRequest::BackupRelease { backup };
        if let Err(e) = ask(pool, config, daemon, request).await {
            tracing::warn!("cannot release backup {backup:016x} on daemon {daemon}: {e}");
        }
    }
}

/// Copies every key-subspace region from its tail into `partial/regions`.
async fn copy_regions(
    pool: &DaemonPool,
    config: &Configuration,
    backup: u64,
    partial: &Path,
    progress: &mut (dyn FnMut(BackupProgress) + Send),
) -> Result<Vec<RegionFile>, BackupError> {
    let regions: Vec<_> = config
        .spaces
        .iter()
        .flat_map(|space| {
            space.subspaces[..1]
                .iter()
                .flat_map(|sub| &sub.regions)
                .map(move |region| (space, region))
        })
        .collect();
    let total = regions.len();
    let mut files = Vec::with_capacity(total);
    let mut objects_total = 0u64;
    for (done, (space, region)) in regions.into_iter().enumerate() {
        // The tail has committed every update the cut holds: with nothing
        // in flight, every member holds the same, and the tail is the
        // replica a search would read.
        let tail = *region
            .chain
            .last()
            .ok_or(BackupError::NoReplica(region.id))?;
        let rel = format!("regions/{}-{}.bin", space.id.0, region.id.0);
        let path = partial.join(&rel);
        let write_err = |source| BackupError::Write {
            path: path.clone(),
            source,
        };
        let mut out = HashingWriter::new(File::create(&path).map_err(write_err)?);
        let mut after: Option<Vec<u8>> = None;
        let mut objects = 0u64;
        loop {
            let request = DaemonRequest::BackupRead {
                backup,
                region: region.id,
                after: after.take(),
            };
            let (page, next_after) = match ask(pool, config, tail, request).await? {
                DaemonResponse::BackupPage {
                    objects,
                    next_after,
                } => (objects, next_after),
                other => {
                    return Err(BackupError::Refused {
                        daemon: tail,
                        status: Status::Internal,
                        reason: format!("answered a backup read with {other:?}"),
                    })
                }
            };
            for object in &page {
                let bytes = postcard::to_allocvec(object).expect("encoding to a Vec cannot fail");
                let len = u32::try_from(bytes.len()).map_err(|_| {
                    write_err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an object beyond 4 GiB",
                    ))
                })?;
                out.write_all(&len.to_be_bytes()).map_err(write_err)?;
                out.write_all(&bytes).map_err(write_err)?;
            }
            objects += page.len() as u64;
            match next_after {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let (bytes, sha256) = out.finish().map_err(write_err)?;
        objects_total += objects;
        files.push(RegionFile {
            path: rel,
            space: space.desc.name.clone(),
            region: region.id,
            objects,
            bytes,
            sha256,
        });
        progress(BackupProgress::Copied {
            done: done + 1,
            total,
            objects: objects_total,
        });
    }
    Ok(files)
}

/// A buffered file writer that counts and hashes what passes through it.
struct HashingWriter {
    out: BufWriter<File>,
    hash: Sha256,
    bytes: u64,
}

impl HashingWriter {
    fn new(file: File) -> Self {
        HashingWriter {
            out: BufWriter::with_capacity(1 << 16, file),
            hash: Sha256::new(),
            bytes: 0,
        }
    }

    /// Flushes and syncs the file; its length and SHA-256.
    fn finish(self) -> io::Result<(u64, String)> {
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok((self.bytes, hex(&self.hash.finalize())))
    }
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    let write = || -> io::Result<()> {
        let mut file = File::create(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write().map_err(|source| BackupError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Makes a directory's entries (new files, a rename) durable.
fn sync_dir(path: &Path) -> Result<(), BackupError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(|source| BackupError::Write {
            path: path.to_path_buf(),
            source,
        })
}

/// The manifest: the format line, the epoch, the configuration file and
/// every region file with its SHA-256 and length, then an `end` line with
/// the number of files, so that a manifest cut short is noticed.
///
/// ```text
/// tessera-backup 1
/// epoch 17
/// config <sha256> <bytes> configuration.bin
/// region <sha256> <bytes> <objects> <space name> <region id> regions/<space id>-<region id>.bin
/// end <number of region lines>
/// ```
fn manifest_text(
    config: &Configuration,
    config_sha256: &str,
    config_bytes: usize,
    files: &[RegionFile],
) -> String {
    let mut out = format!(
        "{FORMAT_LINE}\nepoch {}\nconfig {config_sha256} {config_bytes} {CONFIGURATION_FILE}\n",
        config.epoch.0
    );
    for f in files {
        out.push_str(&format!(
            "region {} {} {} {} {} {}\n",
            f.sha256, f.bytes, f.objects, f.space, f.region.0, f.path
        ));
    }
    out.push_str(&format!("end {}\n", files.len()));
    out
}

/// Why a backup cannot be restored. Every file is checked before anything
/// is loaded.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The backup directory or one of its files cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file the manifest lists (or the manifest) is missing.
    #[error("the backup is missing {}", .0.display())]
    Missing(PathBuf),
    /// The manifest is not a Tessera backup manifest, or is cut short.
    #[error("the backup manifest is damaged at line {line}: {reason}")]
    Manifest { line: usize, reason: String },
    /// A file's length differs from the manifest's: cut short or grown.
    #[error("{} has {found} bytes, the manifest says {expected}", path.display())]
    Length {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    /// A file's SHA-256 differs from the manifest's: its bytes changed.
    #[error("{} fails its SHA-256 check", .0.display())]
    Checksum(PathBuf),
    /// A file that passed its checksum does not decode (a backup written
    /// by another version, or a manifest rewritten to match damage).
    #[error("{} does not decode: {reason}", path.display())]
    Decode { path: PathBuf, reason: String },
    /// The backup names a space its configuration does not hold.
    #[error("the backup's configuration has no space {0}")]
    UnknownSpace(String),
    /// Creating a space in the new cluster failed.
    #[error("creating space {space}")]
    AddSpace {
        space: String,
        #[source]
        source: AdminError,
    },
    /// The new cluster could not be reached.
    #[error("connecting to the new cluster")]
    Connect(#[source] ClientError),
    /// The new cluster answered a put of the backup with something other
    /// than success (a plain put never should).
    #[error("the new cluster did not apply an object of space {space}: {outcome:?}")]
    Refused {
        space: String,
        outcome: crate::ops::Outcome,
    },
    /// A loading task panicked or was cancelled.
    #[error("a loading task failed")]
    Task(#[source] tokio::task::JoinError),
    /// Writing an object into the new cluster failed.
    #[error("loading an object of space {space}")]
    Load {
        space: String,
        #[source]
        source: ClientError,
    },
}

/// A verified backup: its configuration and region files, every file's
/// length and SHA-256 checked against the manifest.
#[derive(Clone, Debug)]
pub struct BackupContents {
    dir: PathBuf,
    /// The configuration at the cut.
    pub config: Configuration,
    /// The region files, in manifest order.
    pub files: Vec<RegionFile>,
}

impl BackupContents {
    /// Reads the manifest of the backup in `dir` and checks every file it
    /// lists; reads each file once.
    pub fn open(dir: &Path) -> Result<BackupContents, RestoreError> {
        let manifest_path = dir.join(MANIFEST);
        let text = read_file(&manifest_path)?;
        let text = String::from_utf8(text).map_err(|_| RestoreError::Manifest {
            line: 0,
            reason: "not UTF-8".into(),
        })?;
        let manifest = parse_manifest(&text)?;
        let config_bytes = read_file(&dir.join(CONFIGURATION_FILE))?;
        check_file(
            &dir.join(CONFIGURATION_FILE),
            &config_bytes,
            manifest.config_bytes,
            &manifest.config_sha256,
        )?;
        let config: Configuration =
            postcard::from_bytes(&config_bytes).map_err(|e| RestoreError::Decode {
                path: dir.join(CONFIGURATION_FILE),
                reason: e.to_string(),
            })?;
        if config.epoch != manifest.epoch {
            return Err(RestoreError::Manifest {
                line: 2,
                reason: format!(
                    "epoch {} but the configuration is of epoch {}",
                    manifest.epoch.0, config.epoch.0
                ),
            });
        }
        for f in &manifest.files {
            if config.space(&f.space).is_none() {
                return Err(RestoreError::UnknownSpace(f.space.clone()));
            }
            let path = dir.join(&f.path);
            let (bytes, sha256) = hash_file(&path)?;
            if bytes != f.bytes {
                return Err(RestoreError::Length {
                    path,
                    expected: f.bytes,
                    found: bytes,
                });
            }
            if sha256 != f.sha256 {
                return Err(RestoreError::Checksum(path));
            }
        }
        Ok(BackupContents {
            dir: dir.to_path_buf(),
            config,
            files: manifest.files,
        })
    }

    /// Every object of the backup.
    pub fn object_count(&self) -> u64 {
        self.files.iter().map(|f| f.objects).sum()
    }

    /// Calls `visit` with each object of `file`, in the file's order.
    pub fn read_objects(
        &self,
        file: &RegionFile,
        visit: &mut dyn FnMut(Object) -> Result<(), RestoreError>,
    ) -> Result<(), RestoreError> {
        let path = self.dir.join(&file.path);
        let decode = |reason: String| RestoreError::Decode {
            path: path.clone(),
            reason,
        };
        let read_err = |source| RestoreError::Read {
            path: path.clone(),
            source,
        };
        let mut input = BufReader::new(File::open(&path).map_err(read_err)?);
        let mut buf = Vec::new();
        let mut count = 0u64;
        loop {
            let mut len = [0u8; 4];
            match input.read_exact(&mut len) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(read_err(e)),
            }
            let len = u32::from_be_bytes(len) as usize;
            if len > OBJECT_BYTES_MAX {
                return Err(decode(format!("an object of {len} bytes")));
            }
            buf.resize(len, 0);
            input
                .read_exact(&mut buf)
                .map_err(|_| decode("cut short inside an object".into()))?;
            let object: Object = postcard::from_bytes(&buf).map_err(|e| decode(e.to_string()))?;
            count += 1;
            visit(object)?;
        }
        if count != file.objects {
            return Err(decode(format!(
                "{count} objects, the manifest says {}",
                file.objects
            )));
        }
        Ok(())
    }
}

struct Manifest {
    epoch: Epoch,
    config_sha256: String,
    config_bytes: u64,
    files: Vec<RegionFile>,
}

fn parse_manifest(text: &str) -> Result<Manifest, RestoreError> {
    let bad = |line: usize, reason: &str| RestoreError::Manifest {
        line,
        reason: reason.into(),
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    match lines.next() {
        Some((_, FORMAT_LINE)) => {}
        _ => return Err(bad(1, "not a Tessera backup manifest (format 1)")),
    }
    let epoch = match lines
        .next()
        .map(|(n, l)| (n, l.split(' ').collect::<Vec<_>>()))
    {
        Some((_, words)) if words.len() == 2 && words[0] == "epoch" => Epoch(
            words[1]
                .parse()
                .map_err(|_| bad(2, "the epoch is not a number"))?,
        ),
        _ => return Err(bad(2, "expected `epoch N`")),
    };
    let (config_sha256, config_bytes) = match lines
        .next()
        .map(|(n, l)| (n, l.split(' ').collect::<Vec<_>>()))
    {
        Some((_, w)) if w.len() == 4 && w[0] == "config" && w[3] == CONFIGURATION_FILE => (
            w[1].to_string(),
            w[2].parse()
                .map_err(|_| bad(3, "the length is not a number"))?,
        ),
        _ => return Err(bad(3, "expected `config SHA256 BYTES configuration.bin`")),
    };
    let mut files = Vec::new();
    for (n, line) in lines.by_ref() {
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["region", sha256, bytes, objects, space, region, path] => {
                let number = |s: &str| {
                    s.parse::<u64>()
                        .map_err(|_| bad(n, "a field is not a number"))
                };
                // A path from the manifest must stay inside the backup.
                if !path.starts_with("regions/") || path.contains("..") || path[8..].contains('/') {
                    return Err(bad(n, "a region file outside regions/"));
                }
                files.push(RegionFile {
                    path: path.to_string(),
                    space: space.to_string(),
                    region: RegionId(number(region)?),
                    objects: number(objects)?,
                    bytes: number(bytes)?,
                    sha256: sha256.to_string(),
                });
            }
            ["end", count] => {
                if count.parse::<usize>().ok() != Some(files.len()) {
                    return Err(bad(n, "the region count does not match the lines above"));
                }
                return Ok(Manifest {
                    epoch,
                    config_sha256,
                    config_bytes,
                    files,
                });
            }
            _ => return Err(bad(n, "expected a `region` or `end` line")),
        }
    }
    Err(bad(text.lines().count() + 1, "cut short: no `end` line"))
}

fn read_file(path: &Path) -> Result<Vec<u8>, RestoreError> {
    fs::read(path).map_err(|source| open_error(path, source))
}

fn open_error(path: &Path, source: io::Error) -> RestoreError {
    if source.kind() == io::ErrorKind::NotFound {
        RestoreError::Missing(path.to_path_buf())
    } else {
        RestoreError::Read {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn check_file(path: &Path, bytes: &[u8], expected: u64, sha256: &str) -> Result<(), RestoreError> {
    if bytes.len() as u64 != expected {
        return Err(RestoreError::Length {
            path: path.to_path_buf(),
            expected,
            found: bytes.len() as u64,
        });
    }
    if sha256_hex(bytes) != sha256 {
        return Err(RestoreError::Checksum(path.to_path_buf()));
    }
    Ok(())
}

/// The length and SHA-256 of a file, read in chunks.
fn hash_file(path: &Path) -> Result<(u64, String), RestoreError> {
    let mut file = File::open(path).map_err(|e| open_error(path, e))?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| open_error(path, e))?;
        if n == 0 {
            return Ok((bytes, hex(&hash.finalize())));
        }
        hash.update(&buf[..n]);
        bytes += n as u64;
    }
}

/// Creates the backup's spaces in the (empty) cluster at `coordinator` and
/// writes every object of the backup into it through the ordinary write
/// path, so that every subspace and index of the new cluster is built as
/// for any write. `progress` sees the number of objects loaded so far.
pub async fn restore_objects(
    coordinator: &str,
    backup: &BackupContents,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<u64, RestoreError> {
    let admin = Admin::new(coordinator);
    for space in &backup.config.spaces {
        let added = |source| RestoreError::AddSpace {
            space: space.desc.name.clone(),
            source,
        };
        admin
            .add_space(&format_space(&space.desc))
            .await
            .map_err(added)?;
        // Indexes on document paths are parts of the layout, not of the
        // description: each is added again as `attr.path`.
        for index in crate::admin::index_infos(space) {
            if let (Some(path), false) = (&index.path, index.state == PartState::Dropping) {
                let name = format!("{}.{path}", index.attribute);
                admin
                    .add_index(&space.desc.name, &name)
                    .await
                    .map_err(added)?;
            }
        }
    }
    let client = Client::connect(coordinator)
        .await
        .map_err(RestoreError::Connect)?;
    let mut loaded = 0u64;
    let mut tasks = tokio::task::JoinSet::new();
    for file in &backup.files {
        let space = backup
            .config
            .space(&file.space)
            .ok_or_else(|| RestoreError::UnknownSpace(file.space.clone()))?;
        let desc = &space.desc;
        let mut objects = Vec::new();
        backup.read_objects(file, &mut |object| {
            objects.push(object);
            Ok(())
        })?;
        for object in objects {
            while tasks.len() >= RESTORE_IN_FLIGHT_MAX {
                joined(tasks.join_next().await)?;
                loaded += 1;
                progress(loaded);
            }
            let (writer, key, ops) = object_put(&client, desc, object);
            let name = desc.name.clone();
            tasks.spawn(async move {
                let result = writer
                    .execute(
                        &name,
                        key,
                        UpdateFlags::default(),
                        Vec::<(String, _)>::new(),
                        ops,
                    )
                    .await;
                (name, result)
            });
        }
    }
    while let Some(done) = tasks.join_next().await {
        joined(Some(done))?;
        loaded += 1;
        progress(loaded);
    }
    Ok(loaded)
}

/// The client, key and puts that write `object` whole; on a space `with
/// authorization` the client carries the object's secret, so the restored
/// object keeps it.
fn object_put(
    client: &Client,
    desc: &tessera_types::SpaceDesc,
    object: Object,
) -> (Client, Value, Vec<(String, Op)>) {
    let attrs = desc.attrs.len();
    let mut values = object.values.into_iter();
    let key = values.next().unwrap_or(Value::Int(0));
    let mut ops = Vec::with_capacity(attrs);
    for attr in desc.attrs.iter().skip(1) {
        if let Some(value) = values.next() {
            ops.push((attr.name.clone(), Op::Put(value)));
        }
    }
    let writer = match (desc.authorization, values.next()) {
        (true, Some(Value::String(secret))) => client.with_secret(secret),
        _ => client.clone(),
    };
    (writer, key, ops)
}

/// The outcome of one loading task: a put that was not applied is an
/// error, as is a task that panicked.
fn joined(done: Option<Result<LoadResult, tokio::task::JoinError>>) -> Result<(), RestoreError> {
    match done {
        Some(Ok((_, Ok(crate::ops::Outcome::Done)))) | None => Ok(()),
        Some(Ok((space, Ok(outcome)))) => Err(RestoreError::Refused { space, outcome }),
        Some(Ok((space, Err(source)))) => Err(RestoreError::Load { space, source }),
        Some(Err(e)) => Err(RestoreError::Task(e)),
    }
}

/// What a loading task gives back: its space, and how its put went.
type LoadResult = (String, Result<crate::ops::Outcome, ClientError>);

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: u64) -> RegionFile {
        RegionFile {
            path: format!("regions/1-{n}.bin"),
            space: "kv".into(),
            region: RegionId(n),
            objects: n * 3,
            bytes: n * 100,
            sha256: sha256_hex(&n.to_be_bytes()),
        }
    }

    #[test]
    fn a_manifest_reads_back_and_any_cut_is_refused() {
        let config = Configuration {
            epoch: Epoch(9),
            ..Configuration::default()
        };
        let files = vec![file(1), file(2), file(3)];
        let text = manifest_text(&config, "ab", 12, &files);
        let m = parse_manifest(&text).unwrap();
        assert_eq!(m.epoch, Epoch(9));
        assert_eq!((m.config_sha256.as_str(), m.config_bytes), ("ab", 12));
        assert_eq!(m.files, files);
        // Every prefix that ends on a line boundary lacks the `end` line
        // or its count no longer matches.
        let lines: Vec<&str> = text.lines().collect();
        for keep in 0..lines.len() {
            let cut = lines[..keep].join("\n");
            assert!(parse_manifest(&cut).is_err(), "{keep} lines accepted");
        }
        let dropped: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 4)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        assert!(matches!(
            parse_manifest(&dropped),
            Err(RestoreError::Manifest { .. })
        ));
    }

    #[test]
    fn a_manifest_path_must_stay_inside_the_backup() {
        for path in ["../x.bin", "regions/../../x", "/etc/passwd", "regions/a/b"] {
            let text = format!(
                "{FORMAT_LINE}\nepoch 1\nconfig ab 1 {CONFIGURATION_FILE}\nregion ab 1 1 kv 1 {path}\nend 1\n"
            );
            assert!(parse_manifest(&text).is_err(), "{path} accepted");
        }
    }
}
