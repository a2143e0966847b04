//! Durable Raft storage on fjall: the log, the vote, and the state machine
//! with its snapshot, all in one fjall database under `<data>/raft`.
//!
//! Key layout (one keyspace per column):
//!
//! | keyspace | key                  | value                                           |
//! |----------|----------------------|-------------------------------------------------|
//! | `log`    | index, u64 BE        | JSON `openraft::Entry`                          |
//! | `meta`   | `format`             | u32 BE: [`STORE_FORMAT`] the store is written in |
//! | `meta`   | `node_id`            | u64 BE: this member's Raft node id              |
//! | `meta`   | `vote`               | JSON `Vote`                                     |
//! | `meta`   | `committed`          | JSON `Option<LogId>`                            |
//! | `meta`   | `last_purged`        | JSON `LogId`                                    |
//! | `sm`     | `applied`            | JSON `Option<LogId>`: last applied entry        |
//! | `sm`     | `membership`         | JSON `StoredMembership`                         |
//! | `sm`     | `state`              | postcard [`ClusterState`]                       |
//! | `sm`     | `snapshot_meta`      | JSON `SnapshotMeta` of the last snapshot        |
//! | `sm`     | `snapshot_data`      | postcard [`ClusterState`] of the last snapshot  |
//!
//! Big-endian indexes keep the log in order under fjall's byte ordering.
//! Writes that Raft relies on (log appends, truncation, the vote, the
//! applied state, snapshots) are synced before they are acknowledged.

// openraft's storage errors are large; our helpers return what its traits return.
#![allow(clippy::result_large_err)]

use crate::raft::{MemberNode, NodeId, TypeConfig};
use crate::state::{ClusterState, Command, CommandResult};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftLogReader, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership, Vote,
};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;
use tessera_types::{Configuration, CoordinatorInfo};
use tokio::sync::watch;

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenStoreError {
    /// fjall refused to open or read the database.
    #[error("cannot open the coordinator store at {path}: {source}")]
    Fjall {
        path: String,
        #[source]
        source: fjall::Error,
    },
    /// A stored value did not decode: the directory holds foreign or damaged data.
    #[error("the coordinator store at {path} holds an undecodable {what}: {reason}")]
    Corrupt {
        path: String,
        what: &'static str,
        reason: String,
    },
    /// The store was written by a newer Tessera, in a format this build
    /// does not read; nothing was changed in it.
    #[error(
        "the coordinator store at {path} was written by a newer Tessera (format {found}; \
         this build reads formats up to {supported}): run that version, or a later one"
    )]
    Format {
        path: String,
        found: u32,
        supported: u32,
    },
}

/// The format this build writes the store in: the keyspaces and their
/// values below, the cluster state's postcard encoding included (postcard
/// has no field names, so a changed [`ClusterState`] is a new format). A
/// store without [`KEY_FORMAT`] predates the key and is in format 1, which
/// is this one; a later format reads the earlier ones or says why not.
pub const STORE_FORMAT: u32 = 1;

const KEY_FORMAT: &[u8] = b"format";
const KEY_NODE_ID: &[u8] = b"node_id";
const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_LAST_PURGED: &[u8] = b"last_purged";
const KEY_APPLIED: &[u8] = b"applied";
const KEY_MEMBERSHIP: &[u8] = b"membership";
const KEY_STATE: &[u8] = b"state";
const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";
const KEY_SNAPSHOT_DATA: &[u8] = b"snapshot_data";

type Membership = StoredMembership<NodeId, MemberNode>;

/// The opened store: the Raft log half, the state machine half, and the
/// member's node id (generated at first start, then read back).
pub struct Opened {
    pub node_id: NodeId,
    pub log: LogStore,
    pub state_machine: StateMachineStore,
    /// The configuration the state machine has applied, updated on every apply.
    pub config: watch::Receiver<Arc<Configuration>>,
    /// The cluster state behind it (the failure detector and heartbeats
    /// need what the configuration does not say, such as killed daemons).
    pub state: watch::Receiver<Arc<ClusterState>>,
}

/// Opens (or creates) the store under `dir`.
pub fn open(dir: &Path) -> Result<Opened, OpenStoreError> {
    let path = dir.join("raft");
    let fjall_err = |source| OpenStoreError::Fjall {
        path: path.display().to_string(),
        source,
    };
    let db = Database::builder(&path).open().map_err(fjall_err)?;
    let log = db
        .keyspace("log", KeyspaceCreateOptions::default)
        .map_err(fjall_err)?;
    let meta = db
        .keyspace("meta", KeyspaceCreateOptions::default)
        .map_err(fjall_err)?;
    let sm = db
        .keyspace("sm", KeyspaceCreateOptions::default)
        .map_err(fjall_err)?;
    let corrupt = |what, reason: String| OpenStoreError::Corrupt {
        path: path.display().to_string(),
        what,
        reason,
    };
    // A read that fails is fjall's error; bytes that do not decode are corruption.
    let read_err = |what, e: ReadJsonError| match e {
        ReadJsonError::Fjall(source) => fjall_err(source),
        ReadJsonError::Json(e) => corrupt(what, e.to_string()),
    };

    // The format first, before anything is read or written.
    match meta.get(KEY_FORMAT).map_err(fjall_err)? {
        Some(bytes) => {
            let bytes: [u8; 4] = bytes
                .as_ref()
                .try_into()
                .map_err(|_| corrupt("store format", format!("{} bytes", bytes.len())))?;
            let found = u32::from_be_bytes(bytes);
            if found > STORE_FORMAT {
                return Err(OpenStoreError::Format {
                    path: path.display().to_string(),
                    found,
                    supported: STORE_FORMAT,
                });
            }
        }
        None => {
            meta.insert(KEY_FORMAT, STORE_FORMAT.to_be_bytes())
                .map_err(fjall_err)?;
            db.persist(PersistMode::SyncAll).map_err(fjall_err)?;
        }
    }

    let node_id = match meta.get(KEY_NODE_ID).map_err(fjall_err)? {
        Some(bytes) => {
            let bytes: [u8; 8] = bytes
                .as_ref()
                .try_into()
                .map_err(|_| corrupt("node id", format!("{} bytes", bytes.len())))?;
            u64::from_be_bytes(bytes)
        }
        None => {
            // Zero is avoided only so that logs never show a member "0".
            let id = rand::random::<u64>().max(1);
            meta.insert(KEY_NODE_ID, id.to_be_bytes())
                .map_err(fjall_err)?;
            db.persist(PersistMode::SyncAll).map_err(fjall_err)?;
            id
        }
    };

    let applied: Option<LogId<NodeId>> = read_json(&sm, KEY_APPLIED)
        .map_err(|e| read_err("applied log id", e))?
        .unwrap_or(None);
    let membership: Membership = read_json(&sm, KEY_MEMBERSHIP)
        .map_err(|e| read_err("membership", e))?
        .unwrap_or_default();
    let state: ClusterState = match sm.get(KEY_STATE).map_err(fjall_err)? {
        Some(bytes) => {
            postcard::from_bytes(&bytes).map_err(|e| corrupt("cluster state", e.to_string()))?
        }
        None => ClusterState::default(),
    };
    let data = SmData {
        applied,
        membership,
        state,
    };
    let (config_tx, config_rx) = watch::channel(Arc::new(data.configuration()));
    let (state_tx, state_rx) = watch::channel(Arc::new(data.state.clone()));
    Ok(Opened {
        node_id,
        log: LogStore {
            db: db.clone(),
            log,
            meta,
        },
        state_machine: StateMachineStore {
            db,
            sm,
            data,
            config_tx,
            state_tx,
        },
        config: config_rx,
        state: state_rx,
    })
}

/// Why a JSON value of the Raft bookkeeping could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadJsonError {
    /// fjall failed to read the key.
    #[error("cannot read the coordinator store: {0}")]
    Fjall(#[from] fjall::Error),
    /// The stored bytes are not the JSON of the expected type.
    #[error("undecodable JSON in the coordinator store: {0}")]
    Json(#[from] serde_json::Error),
}

fn read_json<T: serde::de::DeserializeOwned>(
    keyspace: &Keyspace,
    key: &[u8],
) -> Result<Option<T>, ReadJsonError> {
    match keyspace.get(key)? {
        Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        None => Ok(None),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("raft types serialize to JSON")
}

// ------------------------------------------------------------------- log

/// The Raft log and vote. Clones share the database.
#[derive(Clone)]
pub struct LogStore {
    db: Database,
    log: Keyspace,
    meta: Keyspace,
}

impl LogStore {
    fn sync(&self) -> Result<(), StorageIOError<NodeId>> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| StorageIOError::write_logs(&e))
    }

    fn last_purged(&self) -> Result<Option<LogId<NodeId>>, StorageIOError<NodeId>> {
        read_json(&self.meta, KEY_LAST_PURGED).map_err(|e| StorageIOError::read_logs(&e))
    }
}

/// A message as an error, for openraft's `AnyError`.
#[derive(Debug)]
struct Text(String);

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Text {}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => Bound::Included(i.to_be_bytes()),
            Bound::Excluded(i) => Bound::Excluded(i.to_be_bytes()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut entries = Vec::new();
        for guard in self
            .log
            .range::<[u8; 8], _>((Bound::Included(start.to_be_bytes()), end))
        {
            let (_, value) = guard
                .into_inner()
                .map_err(|e| StorageIOError::read_logs(&e))?;
            let entry: Entry<TypeConfig> =
                serde_json::from_slice(&value).map_err(|e| StorageIOError::read_logs(&e))?;
            entries.push(entry);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last_purged_log_id = self.last_purged()?;
        let last_log_id = match self.log.last_key_value() {
            Some(guard) => {
                let (_, value) = guard
                    .into_inner()
                    .map_err(|e| StorageIOError::read_logs(&e))?;
                let entry: Entry<TypeConfig> =
                    serde_json::from_slice(&value).map_err(|e| StorageIOError::read_logs(&e))?;
                Some(entry.log_id)
            }
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.meta
            .insert(KEY_VOTE, to_json(vote))
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| StorageIOError::write_vote(&e))?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(read_json(&self.meta, KEY_VOTE).map_err(|e| StorageIOError::read_vote(&e))?)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        // Not synced: losing it only means re-learning the commit index.
        self.meta
            .insert(KEY_COMMITTED, to_json(&committed))
            .map_err(|e| StorageIOError::write(&e))?;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(
            read_json::<Option<LogId<NodeId>>>(&self.meta, KEY_COMMITTED)
                .map_err(|e| StorageIOError::read(&e))?
                .unwrap_or(None),
        )
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = self.db.batch();
        for entry in entries {
            batch.insert(&self.log, entry.log_id.index.to_be_bytes(), to_json(&entry));
        }
        let result = batch
            .commit()
            .and_then(|()| self.db.persist(PersistMode::SyncAll));
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(StorageIOError::write_logs(&e).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // Removes every entry at index >= log_id.index.
        let mut batch = self.db.batch();
        for guard in self.log.range::<[u8; 8], _>(log_id.index.to_be_bytes()..) {
            let key = guard.key().map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(&self.log, key);
        }
        batch.commit().map_err(|e| StorageIOError::write_logs(&e))?;
        self.sync()?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // Records the purge point first, so a crash in between leaves extra
        // entries (harmless) rather than a gap.
        self.meta
            .insert(KEY_LAST_PURGED, to_json(&log_id))
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.sync()?;
        let mut batch = self.db.batch();
        for guard in self.log.range::<[u8; 8], _>(..=log_id.index.to_be_bytes()) {
            let key = guard.key().map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(&self.log, key);
        }
        batch.commit().map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}

// ------------------------------------------------------------- state machine

/// What the state machine holds: the cluster state, the last applied entry
/// and the coordinator group's membership as of that entry.
#[derive(Clone, Debug)]
struct SmData {
    applied: Option<LogId<NodeId>>,
    membership: Membership,
    state: ClusterState,
}

impl SmData {
    fn configuration(&self) -> Configuration {
        let coordinators = self
            .membership
            .nodes()
            .map(|(id, node)| CoordinatorInfo {
                id: *id,
                addr: node.addr.clone(),
                metrics: node.metrics.clone(),
            })
            .collect();
        self.state.configuration(coordinators)
    }
}

/// The replicated [`ClusterState`], persisted after every applied batch.
pub struct StateMachineStore {
    db: Database,
    sm: Keyspace,
    data: SmData,
    config_tx: watch::Sender<Arc<Configuration>>,
    state_tx: watch::Sender<Arc<ClusterState>>,
}

impl StateMachineStore {
    fn persist(&self) -> Result<(), StorageIOError<NodeId>> {
        let state = postcard::to_allocvec(&self.data.state)
            .map_err(|e| StorageIOError::write_state_machine(&e))?;
        let mut batch = self.db.batch();
        batch.insert(&self.sm, KEY_APPLIED, to_json(&self.data.applied));
        batch.insert(&self.sm, KEY_MEMBERSHIP, to_json(&self.data.membership));
        batch.insert(&self.sm, KEY_STATE, state);
        batch
            .commit()
            .map_err(|e| StorageIOError::write_state_machine(&e))?;
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| StorageIOError::write_state_machine(&e))?;
        Ok(())
    }

    fn publish(&self) {
        self.state_tx.send_if_modified(|current| {
            if **current == self.data.state {
                false
            } else {
                *current = Arc::new(self.data.state.clone());
                true
            }
        });
        let config = self.data.configuration();
        self.config_tx.send_if_modified(|current| {
            if **current == config {
                false
            } else {
                *current = Arc::new(config);
                true
            }
        });
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        Ok((self.data.applied, self.data.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResult>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut results = Vec::new();
        for entry in entries {
            self.data.applied = Some(entry.log_id);
            let result = match entry.payload {
                EntryPayload::Blank => CommandResult::Done,
                EntryPayload::Normal(command) => self.data.state.apply(command),
                EntryPayload::Membership(membership) => {
                    self.data.membership = StoredMembership::new(Some(entry.log_id), membership);
                    self.data.state.apply(Command::MembershipChanged)
                }
            };
            results.push(result);
        }
        self.persist()?;
        self.publish();
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            db: self.db.clone(),
            sm: self.sm.clone(),
            data: self.data.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, MemberNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = snapshot.into_inner();
        let state: ClusterState = postcard::from_bytes(&bytes)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        self.data = SmData {
            applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            state,
        };
        let mut batch = self.db.batch();
        batch.insert(&self.sm, KEY_SNAPSHOT_META, to_json(meta));
        batch.insert(&self.sm, KEY_SNAPSHOT_DATA, bytes);
        batch
            .commit()
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.persist()?;
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let meta: Option<SnapshotMeta<NodeId, MemberNode>> = read_json(&self.sm, KEY_SNAPSHOT_META)
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        let Some(meta) = meta else { return Ok(None) };
        let data = self
            .sm
            .get(KEY_SNAPSHOT_DATA)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?
            .ok_or_else(|| {
                StorageIOError::read_snapshot(
                    Some(meta.signature()),
                    &Text("snapshot data missing".into()),
                )
            })?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data.to_vec())),
        }))
    }
}

/// Builds a snapshot from a copy of the state machine taken when Raft asked.
pub struct SnapshotBuilder {
    db: Database,
    sm: Keyspace,
    data: SmData,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let bytes = postcard::to_allocvec(&self.data.state)
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        let snapshot_id = match &self.data.applied {
            Some(log_id) => format!(
                "{}-{}-{}",
                log_id.leader_id.term, log_id.leader_id.node_id, log_id.index
            ),
            None => "empty".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: self.data.applied,
            last_membership: self.data.membership.clone(),
            snapshot_id,
        };
        let mut batch = self.db.batch();
        batch.insert(&self.sm, KEY_SNAPSHOT_META, to_json(&meta));
        batch.insert(&self.sm, KEY_SNAPSHOT_DATA, bytes.clone());
        batch
            .commit()
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::storage::RaftLogStorageExt;
    use openraft::testing::{StoreBuilder, Suite};
    use openraft::{CommittedLeaderId, Membership as RaftMembership};
    use std::collections::{BTreeMap, BTreeSet};
    use tempfile::TempDir;

    struct Builder;

    impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for Builder {
        async fn build(
            &self,
        ) -> Result<(TempDir, LogStore, StateMachineStore), StorageError<NodeId>> {
            let dir = tempfile::tempdir().expect("temp dir");
            let opened = open(dir.path()).expect("open store");
            Ok((dir, opened.log, opened.state_machine))
        }
    }

    /// openraft's own conformance suite for log and state machine storage.
    #[test]
    fn openraft_storage_suite() {
        Suite::test_all(Builder).unwrap();
    }

    fn log_id(index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(1, 9), index)
    }

    /// Writes `value` under the store's format key, as another build would.
    fn write_format(dir: &Path, value: &[u8]) {
        let db = Database::builder(dir.join("raft")).open().unwrap();
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default).unwrap();
        meta.insert(KEY_FORMAT, value).unwrap();
        db.persist(PersistMode::SyncAll).unwrap();
    }

    /// A store records its format; one of a newer build is refused as it
    /// is, and a damaged format is corruption.
    #[test]
    fn a_store_of_a_newer_format_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let node_id = open(dir.path()).unwrap().node_id;
        write_format(dir.path(), &(STORE_FORMAT + 1).to_be_bytes());
        for _ in 0..2 {
            match open(dir.path()) {
                Err(OpenStoreError::Format {
                    found, supported, ..
                }) => assert_eq!((found, supported), (STORE_FORMAT + 1, STORE_FORMAT)),
                Err(other) => panic!("refused for another reason: {other}"),
                Ok(_) => panic!("a newer format was opened"),
            }
        }
        write_format(dir.path(), &STORE_FORMAT.to_be_bytes());
        assert_eq!(open(dir.path()).unwrap().node_id, node_id);
        write_format(dir.path(), b"xyz");
        match open(dir.path()) {
            Err(OpenStoreError::Corrupt { what, .. }) => assert_eq!(what, "store format"),
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("a damaged format was opened"),
        }
    }

    #[tokio::test]
    async fn state_survives_reopen_and_snapshots_install_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let opened = open(dir.path()).unwrap();
        let node_id = opened.node_id;
        let (mut log, mut sm, config) = (opened.log, opened.state_machine, opened.config);
        let membership = RaftMembership::new(
            vec![BTreeSet::from([9])],
            BTreeMap::from([(
                9,
                MemberNode {
                    addr: "127.0.0.1:1982".into(),
                    metrics: Some("http://127.0.0.1:9/metrics".into()),
                },
            )]),
        );
        let entries = vec![
            Entry {
                log_id: log_id(1),
                payload: EntryPayload::Membership(membership),
            },
            Entry {
                log_id: log_id(2),
                payload: EntryPayload::Normal(Command::RegisterDaemon {
                    id: None,
                    addr: "127.0.0.1:2012".into(),
                    metrics: None,
                    installed: None,
                }),
            },
            Entry {
                log_id: log_id(3),
                payload: EntryPayload::Normal(Command::AddSpace {
                    description: "space kv key k create 4 partitions".into(),
                }),
            },
        ];
        log.blocking_append(entries.clone()).await.unwrap();
        let results = sm.apply(entries).await.unwrap();
        assert_eq!(
            results[1],
            CommandResult::Registered {
                id: tessera_types::DaemonId(1)
            }
        );
        assert!(matches!(results[2], CommandResult::SpaceAdded { .. }));
        let published = config.borrow().clone();
        assert_eq!(published.epoch, tessera_types::Epoch(3));
        assert_eq!(
            published.coordinators,
            vec![CoordinatorInfo {
                id: 9,
                addr: "127.0.0.1:1982".into(),
                metrics: Some("http://127.0.0.1:9/metrics".into()),
            }]
        );
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        drop((log, sm, config));

        let reopened = open(dir.path()).unwrap();
        assert_eq!(reopened.node_id, node_id, "node id persisted");
        assert_eq!(
            *reopened.config.borrow().as_ref(),
            *published,
            "configuration persisted"
        );
        let (mut log, mut sm) = (reopened.log, reopened.state_machine);
        assert_eq!(
            log.get_log_state().await.unwrap().last_log_id,
            Some(log_id(3))
        );
        assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(3)));
        assert_eq!(
            sm.get_current_snapshot().await.unwrap().unwrap().meta,
            snapshot.meta
        );

        let other = tempfile::tempdir().unwrap();
        let fresh = open(other.path()).unwrap();
        assert_ne!(fresh.node_id, node_id);
        let mut fresh_sm = fresh.state_machine;
        fresh_sm
            .install_snapshot(&snapshot.meta, snapshot.snapshot)
            .await
            .unwrap();
        assert_eq!(*fresh.config.borrow().as_ref(), *published);
    }
}
