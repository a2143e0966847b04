//! The replica core: the chain protocol as a state machine that does no
//! network I/O. The shell feeds it client updates, chain messages and new
//! configurations, and carries out the effects it returns (sends and
//! replies). Commits write through the [`Engine`] before the acknowledgement
//! leaves, so an acknowledged update is on disk at every replica.
//!
//! State per (region, key) held by this daemon:
//!
//! ```text
//!   storage: committed Record (version, object)       — what reads and searches see
//!   pending: version → update applied here, not yet acknowledged by the tail
//!   buffered: version → update that arrived before the version it follows
//!   queued:  (point leader only) client updates waiting for earlier ones
//! ```
//!
//! The code follows the roles a daemon plays for a key: [`leader`] (the
//! point leader orders and starts updates), [`member`] (every replica
//! applies, forwards, acknowledges and commits), [`reconfig`] (a new epoch
//! rechains what is in flight), [`handover`] (a region moving to another
//! daemon), [`repair`] (anti-entropy between subspaces), [`backfill`]
//! (filling a subspace that is being built) and [`collect`] (tombstone
//! collection).

mod backfill;
mod collect;
mod handover;
mod leader;
mod member;
mod rebuild;
mod reconfig;
mod repair;

use crate::rebuild::Unsettled;
use crate::record::{ReadRecordError, Record, RecordHead};
use crate::shapes::Shapes;
pub use backfill::BackfillStep;
pub use repair::{Held, HeldKind};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use tessera_protocol::{
    ChainForward, ChainMsg, ClientRef, DaemonResponse, DecodeObjectError, ObjectBytes, Status,
    TransferEntry, UpdateRequest,
};
use tessera_storage::{Engine, StorageError};
use tessera_types::{
    Configuration, DaemonId, Epoch, RegionDirectory, RegionId, SubspaceKind, Version,
};

/// Where to send a client's answer: the shell's connection and request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplyTo {
    pub conn: u64,
    pub id: u64,
}

/// What the shell must do after a call into the core, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    Send {
        to: DaemonId,
        msg: ChainMsg,
    },
    /// A committed entry for the target of `transfer`, which receives this
    /// region (the shell numbers it through `transfer::Transfers::stamp`).
    Ship {
        transfer: u64,
        entry: TransferEntry,
    },
    Reply {
        to: ReplyTo,
        response: DaemonResponse,
    },
    /// Storage failed (a read, a write, a corrupt record): the daemon can no
    /// longer vouch for what it holds. The core acknowledged nothing that
    /// depends on it; the daemon must stop serving and leave its chains.
    Fatal {
        during: &'static str,
        error: String,
    },
}

#[derive(Clone, Debug)]
struct Pending {
    /// The update as this member last received or sent it (hops, epoch).
    forward: ChainForward,
    /// At the point leader: the clients to answer when it commits (the
    /// original request, and retries of it that arrived meanwhile).
    replies: Vec<ReplyTo>,
    phase: Phase,
    /// At a refreshed point leader: writers of older versions whose effects
    /// this update carries (see `rebuild::Settled::folded`), remembered
    /// with it when it commits.
    folded: Vec<(ClientRef, Version)>,
}

/// Where a pending update stands at this member. Every combination the
/// protocol allows is a variant; in particular an acknowledged update is
/// never held nor blocked, so `commit_ready` commits only
/// what may go.
///
/// ```text
///   apply_forward ──► Sending ──ack / tail──► Acked ──► committed
///        │              ▲  │
///        │      rechain │  │ a region on the way has no replica
///        │              │  ▼
///        │            Blocked
///        └─ region held ─► Held { blocked } ──release──► Sending / Blocked
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Sent (or about to be sent) to the successor, last at `sent_tick`;
    /// waiting for its acknowledgement.
    Sending { sent_tick: u64 },
    /// Acknowledged by the successor, or this member is the update's tail:
    /// it commits once every earlier version of the key has.
    Acked,
    /// A region on the update's way has no replica in this epoch: it is
    /// neither sent on nor committed until one returns.
    Blocked,
    /// It arrived while its region was held for a transfer's hand-over: it
    /// waits here, unsent and uncommitted, until [`ReplicaCore::release`].
    /// `blocked` records a rechaining that found a region without replica
    /// meanwhile, so that the release leaves it [`Phase::Blocked`].
    Held { blocked: bool },
}

/// What became of a client's update at its point leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// Started down its chain, or answered (refused, or found done).
    Done,
    /// It must wait for the key's earlier updates to be acknowledged: an
    /// answer computed from an unacknowledged version could be contradicted.
    Wait,
}

/// Ticks after which a chain member sends an unacknowledged update again to
/// its successor (a message lost with a broken connection must not stall
/// the key).
pub const REDRIVE_TICKS: u64 = 4;

/// Ticks after which an update buffered for the version it follows is
/// applied without it (see [`ReplicaCore::on_tick`]): forty re-sends of
/// that version would have arrived by then, so it is lost, not late.
pub const STUCK_TICKS: u64 = 40;

#[derive(Default, Debug)]
struct KeyState {
    pending: BTreeMap<Version, Pending>,
    buffered: BTreeMap<Version, Buffered>,
    queued: VecDeque<(ReplyTo, UpdateRequest)>,
}

/// An update that arrived before the version it follows, and the tick it
/// first did (copies sent again meanwhile keep that tick).
#[derive(Debug)]
struct Buffered {
    forward: ChainForward,
    since: u64,
}

impl KeyState {
    fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.buffered.is_empty() && self.queued.is_empty()
    }
}

type StateKey = (RegionId, Vec<u8>);

/// At most this many messages from a newer epoch wait for the configuration
/// to catch up; beyond it they are dropped (their point leaders resend).
const FUTURE_MAX: usize = 100_000;

/// At most this many committed updates are relayed at once; beyond it a
/// member acknowledges them at once, as before relays existed.
const RELAYS_MAX: usize = 65_536;

/// At most this many backfills a member passed on are remembered per
/// epoch (see `member::apply_forward`); beyond it a copy sent again walks
/// the chain again, as before.
const BACKFILLS_PASSED_MAX: usize = 65_536;

pub struct ReplicaCore {
    me: DaemonId,
    /// Where the point leader counts the shapes of the updates it starts
    /// (`crate::shapes`); none in the simulator and in unit tests.
    shapes: Option<Arc<Shapes>>,
    config: Arc<Configuration>,
    /// `config`'s regions by id, built once per configuration: every
    /// commit asks which subspace its region is in.
    directory: RegionDirectory,
    engine: Arc<dyn Engine>,
    /// The stored bytes of the key read last, while one message is
    /// handled: handling an update reads its key's record up to four times
    /// (the point leader: a retry's check, the object to evaluate, the
    /// applied version; every member: the applied version, then the record
    /// a commit merges), each a search of fjall's memtable. Forgotten at
    /// every write of the core and when its effects are taken (the end of
    /// a message), so nothing written outside the core between two
    /// messages is missed.
    stored: RefCell<Option<(StateKey, Option<Vec<u8>>)>>,
    keys: BTreeMap<StateKey, KeyState>,
    /// Chain messages stamped with an epoch newer than ours, held until our
    /// configuration catches up.
    future: Vec<ChainMsg>,
    /// Messages this daemon sends to itself (it may hold several hops).
    local: VecDeque<ChainMsg>,
    effects: Vec<Effect>,
    /// Transfers this daemon is the source of, by region: every commit in
    /// the region is also shipped to the target.
    outgoing: HashMap<RegionId, Vec<u64>>,
    /// Regions whose transfer is handing over (see `transfer`): updates
    /// arriving now wait here, neither sent on nor committed, so the target
    /// joins holding everything any daemon after this one holds.
    held: BTreeSet<RegionId>,
    /// Logical time: the number of `on_tick` calls so far.
    tick: u64,
    /// Requests this point leader refused when it evaluated them (NOTFOUND,
    /// CMPFAIL, …), oldest first. A late copy of one (its client timed out,
    /// sent it again and may have returned with this answer already) gets
    /// the same answer instead of a second evaluation that could apply.
    /// Only for the epoch they were made in: `on_config` forgets them.
    refused: HashMap<ClientRef, DaemonResponse>,
    refused_order: VecDeque<ClientRef>,
    /// Anti-entropy's suspects: keys a sweep reported held apart from the
    /// key subspace, with the version reported, by (region, key, replica).
    /// A key is repaired only when the same replica's next sweep reports
    /// the same version again (see `repair`).
    suspects: HashMap<(RegionId, Vec<u8>, DaemonId), Version>,
    /// Keys of regions this daemon rebuilds that a source holds an update
    /// of pending: settled when the region joins (see `rebuild`).
    rebuilt: BTreeMap<StateKey, Unsettled>,
    /// Updates driven again in a later epoch that this member had already
    /// committed, passed on down their chain (see `member::relay`): the
    /// forward as received and the tick it was last sent on.
    relays: BTreeMap<(StateKey, Version), (ChainForward, u64)>,
    /// Backfills this member (not a point leader) passed on and saw
    /// acknowledged by the chain after it in this epoch, with the hops of
    /// that chain: a copy sent again along the same hops is acknowledged
    /// at once.
    backfills_passed: BTreeMap<(StateKey, Version), Vec<tessera_protocol::Hop>>,
}

fn outgoing_transfers(me: DaemonId, config: &Configuration) -> HashMap<RegionId, Vec<u64>> {
    let mut out: HashMap<RegionId, Vec<u64>> = HashMap::new();
    for t in config.transfers.iter().filter(|t| t.from == me) {
        out.entry(t.region).or_default().push(t.id);
    }
    out
}

fn refuse(status: Status, reason: impl Into<String>) -> DaemonResponse {
    DaemonResponse::Failed {
        status,
        reason: reason.into(),
    }
}

impl ReplicaCore {
    pub fn new(me: DaemonId, config: Arc<Configuration>, engine: Arc<dyn Engine>) -> Self {
        ReplicaCore {
            me,
            shapes: None,
            engine,
            stored: RefCell::new(None),
            keys: BTreeMap::new(),
            future: Vec::new(),
            local: VecDeque::new(),
            effects: Vec::new(),
            outgoing: outgoing_transfers(me, &config),
            held: BTreeSet::new(),
            refused: HashMap::new(),
            refused_order: VecDeque::new(),
            suspects: HashMap::new(),
            rebuilt: BTreeMap::new(),
            relays: BTreeMap::new(),
            backfills_passed: BTreeMap::new(),
            tick: 0,
            directory: RegionDirectory::new(&config),
            config,
        }
    }

    /// Counts the shapes of the updates this core starts as point leader
    /// into `shapes`.
    pub fn count_shapes_into(&mut self, shapes: Arc<Shapes>) {
        self.shapes = Some(shapes);
    }

    pub fn epoch(&self) -> Epoch {
        self.config.epoch
    }

    /// Takes the effects produced so far.
    pub fn drain_effects(&mut self) -> Vec<Effect> {
        self.stored.take();
        std::mem::take(&mut self.effects)
    }

    /// Number of (region, key) entries with work in flight (for tests and metrics).
    pub fn busy_keys(&self) -> usize {
        self.keys.values().filter(|s| !s.is_idle()).count()
    }

    /// What the busy keys wait for, for diagnostics.
    pub fn describe_busy(&self) -> String {
        let mut out = Vec::new();
        if !self.held.is_empty() {
            out.push(format!("holding {:?}", self.held));
        }
        for ((region, key), s) in self.keys.iter().filter(|(_, s)| !s.is_idle()) {
            let pending: Vec<String> = s
                .pending
                .iter()
                .map(|(v, p)| {
                    let hop = p.forward.hops[p.forward.position as usize];
                    format!(
                        "v{} at {}/{} after {:?} {:?} from {}",
                        v.0,
                        p.forward.position,
                        p.forward.hops.len(),
                        hop.after,
                        p.phase,
                        p.forward.from,
                    )
                })
                .collect();
            let stored = self
                .load(&(*region, key.clone()))
                .ok()
                .flatten()
                .map(|r| r.version.0);
            out.push(format!(
                "{region} {key:?}: stored v{stored:?} pending [{}] buffered {:?} queued {}",
                pending.join(", "),
                s.buffered.keys().map(|v| v.0).collect::<Vec<_>>(),
                s.queued.len()
            ));
        }
        out.join("; ")
    }

    fn is_key_subspace(&self, region: RegionId) -> bool {
        self.directory
            .place(region)
            .is_some_and(|place| place.subspace == 0)
    }

    /// Whether `region`'s records remember their recent writers: the key
    /// subspace's, and every region of a replex space, whose key region
    /// may be rebuilt from the other replexes and must still recognize a
    /// retry (RESEARCH.md C.4 #9).
    fn keeps_recent(&self, region: RegionId) -> bool {
        self.directory.place(region).is_some_and(|place| {
            place.subspace == 0
                || self
                    .config
                    .spaces
                    .get(place.space)
                    .is_some_and(|space| space.desc.replex.is_some())
        })
    }

    /// What region `region` stores of `object`, an update's encoded
    /// object: the bytes as they came, or a global index's indexlet only
    /// their projection (see [`SubspaceLayout::stored_form`]), which alone
    /// decodes them.
    ///
    /// [`SubspaceLayout::stored_form`]: tessera_types::SubspaceLayout::stored_form
    fn stored_form<'o>(
        &self,
        region: RegionId,
        object: Option<&'o ObjectBytes>,
    ) -> Result<Option<std::borrow::Cow<'o, [u8]>>, DecodeObjectError> {
        let Some(object) = object else {
            return Ok(None);
        };
        let indexlet = self.directory.place(region).and_then(|place| {
            let space = self.config.spaces.get(place.space)?;
            let layout = space.subspaces.get(place.subspace)?;
            (layout.kind == SubspaceKind::GlobalIndex).then_some((space, layout))
        });
        Ok(Some(match indexlet {
            None => std::borrow::Cow::Borrowed(object.as_bytes()),
            Some((space, layout)) => {
                let projected = layout.stored_form(&space.desc, &object.decode()?);
                std::borrow::Cow::Owned(ObjectBytes::encode(&projected).into_vec())
            }
        }))
    }

    /// The pending update of the key at `version`, if this member has it.
    fn pending_mut(&mut self, state_key: &StateKey, version: Version) -> Option<&mut Pending> {
        self.keys.get_mut(state_key)?.pending.get_mut(&version)
    }

    /// Runs `f` on the stored bytes of the key's record (none: no record),
    /// read once per message (see `stored`).
    fn with_stored<T>(
        &self,
        state_key: &StateKey,
        f: impl FnOnce(Option<&[u8]>) -> Result<T, ReadRecordError>,
    ) -> Result<T, ReadRecordError> {
        if let Some((key, bytes)) = &*self.stored.borrow() {
            if key == state_key {
                return f(bytes.as_deref());
            }
        }
        let bytes = self.engine.get(state_key.0, &state_key.1)?;
        let result = f(bytes.as_deref());
        *self.stored.borrow_mut() = Some((state_key.clone(), bytes));
        result
    }

    fn load(&self, state_key: &StateKey) -> Result<Option<Record>, ReadRecordError> {
        self.with_stored(state_key, |bytes| {
            Ok(bytes.map(Record::decode).transpose()?)
        })
    }

    /// The version and recent writers of the key's stored record, without
    /// decoding its object.
    fn load_head(&self, state_key: &StateKey) -> Result<Option<RecordHead>, ReadRecordError> {
        self.with_stored(state_key, |bytes| {
            Ok(bytes.map(Record::decode_head).transpose()?)
        })
    }

    /// The version of the key's stored record, without decoding its object.
    fn load_version(&self, state_key: &StateKey) -> Result<Option<Version>, ReadRecordError> {
        self.with_stored(state_key, |bytes| {
            Ok(bytes.map(Record::decode_version).transpose()?)
        })
    }

    /// Writes through the engine, forgetting the bytes read last.
    fn write(&self, writes: Vec<tessera_storage::Write>) -> Result<(), StorageError> {
        self.write_commit(writes, true)
    }

    /// A commit's write: synced (with `durability always`) only at its
    /// region's tail, the member an emptied region comes back from
    /// (`tessera_coordinator::tails`); the others' commits become durable
    /// with the daemon's next fsync, and before it installs an epoch in
    /// which it could be that tail (`DaemonNode::on_config`).
    fn write_commit(
        &self,
        writes: Vec<tessera_storage::Write>,
        at_tail: bool,
    ) -> Result<(), StorageError> {
        self.stored.take();
        if at_tail {
            self.engine.apply(writes)
        } else {
            self.engine.apply_with_index_unsynced(writes, Vec::new())
        }
    }

    // ------------------------------------------------------------ effects

    fn send(&mut self, to: DaemonId, msg: ChainMsg) {
        if to == self.me {
            self.local.push_back(msg);
        } else {
            self.effects.push(Effect::Send { to, msg });
        }
    }

    fn reply(&mut self, to: ReplyTo, response: DaemonResponse) {
        self.effects.push(Effect::Reply { to, response });
    }

    fn fatal(&mut self, during: &'static str, error: impl std::fmt::Display) {
        self.effects.push(Effect::Fatal {
            during,
            error: error.to_string(),
        });
    }

    fn run_local(&mut self) {
        while let Some(msg) = self.local.pop_front() {
            self.handle_chain(msg);
        }
    }
}
