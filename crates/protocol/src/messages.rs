//! Every message Tessera sends. One top-level [`Message`] enum serves every
//! connection; requests carry an id that their response echoes, so many
//! requests may be in flight on one connection.

use crate::object_bytes::ObjectBytes;
use crate::status::{AdminStatus, Status};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use tessera_types::{
    Check, Configuration, DaemonId, Epoch, Object, PartId, RegionId, SpaceId, Value, Version,
};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// Client → daemon. `epoch` is the configuration the client routed by.
    DaemonRequest {
        id: u64,
        epoch: Epoch,
        request: DaemonRequest,
    },
    /// Daemon → client; exactly one response per request.
    DaemonResponse { id: u64, response: DaemonResponse },
    /// Daemon → daemon, along a value-dependent chain.
    Chain(ChainMsg),
    /// Daemon → daemon: state transfer of one region.
    Transfer(TransferMsg),
    /// Daemon → point leader: anti-entropy between a subspace and the key
    /// subspace.
    Held(HeldObjects),
    /// Client, daemon or member → coordinator member.
    CoordRequest { id: u64, request: CoordRequest },
    /// Coordinator member → requester.
    CoordResponse { id: u64, response: CoordResponse },
    /// Client, daemon or member → coordinator member: a request that
    /// changes the configuration, with the admin credential
    /// (`credential.rs`); answered by a `CoordResponse` like any other.
    CredentialedRequest {
        id: u64,
        token: Vec<u8>,
        request: CoordRequest,
    },
    /// Point leader → head of a non-key region: the objects (key and
    /// version, in `objects`) the key subspace places in `region`. The
    /// head answers with a `Held` whose `absent` lists those it holds no
    /// record of: the direction of anti-entropy that finds what a region
    /// lost, not only what it holds apart.
    Expected(HeldObjects),
    /// Daemon → daemon: the rebuild of a lost replex region from the
    /// other replexes. (Last: variant indexes are part of the wire
    /// format.)
    Rebuild(RebuildMsg),
}

impl Message {
    /// Whether only a daemon sends it to another (chain, state transfer,
    /// anti-entropy): a daemon takes it only from the cluster's servers.
    /// Every variant is named, so a new one must be placed here.
    pub fn is_peer(&self) -> bool {
        match self {
            Message::Chain(_)
            | Message::Transfer(_)
            | Message::Held(_)
            | Message::Expected(_)
            | Message::Rebuild(_) => true,
            Message::DaemonRequest { .. }
            | Message::DaemonResponse { .. }
            | Message::CoordRequest { .. }
            | Message::CoordResponse { .. }
            | Message::CredentialedRequest { .. } => false,
        }
    }
}

// ---------------------------------------------------------------- data path

/// Who sent an update, for at-most-once: the point leader remembers the
/// outcome of recent `(client_id, request_no)` pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClientRef {
    pub client_id: u64,
    pub request_no: u64,
}

impl ClientRef {
    /// The writer of anti-entropy's repairs (no client's: client ids are
    /// random, and a repair is never answered nor remembered for
    /// at-most-once).
    pub const REPAIR: ClientRef = ClientRef {
        client_id: 0,
        request_no: 0,
    };

    /// The writer of a building part's backfill: like a repair, never
    /// answered nor remembered, but it carries the key's committed
    /// version instead of a new one (see `ChainForward` and the daemon's
    /// `core::backfill`).
    pub const BACKFILL: ClientRef = ClientRef {
        client_id: 0,
        request_no: 1,
    };

    /// Whether the daemons themselves wrote the update (a repair or a
    /// backfill): no client waits for it or retries it.
    pub fn is_internal(self) -> bool {
        self == Self::REPAIR || self == Self::BACKFILL
    }
}

/// Anti-entropy: live objects a replica of a non-key region holds, sent to
/// their keys' point leader. The point leader repairs each one the key
/// subspace does not hold exactly there (at that version, in that
/// region): an orphan left by an update lost with every key-region
/// replica, or a region that missed a write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldObjects {
    /// The sender's epoch; a point leader in another epoch ignores it.
    pub epoch: Epoch,
    pub space: SpaceId,
    pub region: RegionId,
    pub objects: Vec<(Value, Version)>,
    /// Tombstones the head holds, by key and version: a delete that reached
    /// this region but was lost with every key-region replica leaves one
    /// newer than the live object the key subspace still has.
    #[serde(default)]
    pub removed: Vec<(Value, Version)>,
    /// Keys a point leader expected in this region (`Message::Expected`)
    /// of which the head holds no record at all, with the version
    /// expected: a write the region lost, or a tombstone it collected
    /// while the key subspace kept the object.
    #[serde(default)]
    pub absent: Vec<(Value, Version)>,
    /// The sender: the replica whose store a `Held` report describes (a
    /// point leader repairs on two reports in a row from one replica), the
    /// point leader of an `Expected`.
    #[serde(default)]
    pub from: DaemonId,
}

/// The three flags that decide NOTFOUND and CMPFAIL (API.md §3.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateFlags {
    /// The object must exist, else NOTFOUND.
    pub must_exist: bool,
    /// The object must not exist, else CMPFAIL.
    pub must_not_exist: bool,
    /// The update deletes the object.
    pub erase: bool,
}

/// A numeric atomic operation (API.md §3.6). On ints every operation is
/// checked 64-bit arithmetic (overflow, ÷0 and `i64::MIN / -1` fail); on
/// floats only `Add Sub Mul Div Min Max` apply, with IEEE results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NumOp {
    Add,
    Sub,
    Mul,
    /// Truncating integer division.
    Div,
    /// Remainder with the sign of the dividend (ints only).
    Mod,
    /// Bitwise (ints only).
    And,
    Or,
    Xor,
    Min,
    Max,
}

impl NumOp {
    /// Every operation, in API order.
    pub const ALL: [NumOp; 10] = [
        NumOp::Add,
        NumOp::Sub,
        NumOp::Mul,
        NumOp::Div,
        NumOp::Mod,
        NumOp::And,
        NumOp::Or,
        NumOp::Xor,
        NumOp::Min,
        NumOp::Max,
    ];

    /// The operation's name in method names (`atomic_add` …).
    pub fn name(self) -> &'static str {
        match self {
            NumOp::Add => "add",
            NumOp::Sub => "sub",
            NumOp::Mul => "mul",
            NumOp::Div => "div",
            NumOp::Mod => "mod",
            NumOp::And => "and",
            NumOp::Or => "or",
            NumOp::Xor => "xor",
            NumOp::Min => "min",
            NumOp::Max => "max",
        }
    }

    /// Whether the operation applies to floats (`mod` and bitwise do not).
    pub fn applies_to_float(self) -> bool {
        !matches!(self, NumOp::Mod | NumOp::And | NumOp::Or | NumOp::Xor)
    }
}

/// What to do to one attribute (or, with [`Mutation::path`], to one field
/// of a document attribute). Evaluated once, at the point leader.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Replace the attribute's value (with a path: set the document field,
    /// creating intermediate objects; the value is a string, int, float or
    /// document).
    Set(Value),
    /// A numeric atomic with this operand (int or float attribute; a
    /// numeric document field, created from 0 when absent).
    Num(NumOp, Value),
    /// Concatenate at the front (string attribute or document field).
    StringPrepend(Vec<u8>),
    /// Concatenate at the back.
    StringAppend(Vec<u8>),
    /// Drop this many bytes from the start (clamped to the length).
    StringLtrim(u64),
    /// Drop this many bytes from the end (clamped to the length).
    StringRtrim(u64),
    /// Push one element at the front of a list (or a JSON array field).
    ListLpush(Value),
    /// Push one element at the back of a list (or a JSON array field).
    ListRpush(Value),
    /// Insert one element into a set.
    SetAdd(Value),
    /// Remove one element from a set (absent: no change).
    SetRemove(Value),
    /// Store the union with these elements.
    SetUnion(Vec<Value>),
    /// Store the intersection with these elements.
    SetIntersect(Vec<Value>),
    /// Insert or overwrite one map entry.
    MapAdd(Value, Value),
    /// Remove the entry with this map key (absent: no change).
    MapRemove(Value),
    /// A numeric atomic on the value under this map key (absent: from 0).
    MapNum(Value, NumOp, Value),
    /// Prepend to the string under this map key (absent: from "").
    MapStringPrepend(Value, Vec<u8>),
    /// Append to the string under this map key (absent: from "").
    MapStringAppend(Value, Vec<u8>),
    /// Move the document field at [`Mutation::path`] to this path
    /// (relative to the document root).
    DocRename(String),
    /// Remove the document field at [`Mutation::path`].
    DocUnset,
}

/// One mutation of one attribute (by index into the space's `attrs`, never 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mutation {
    pub attr: usize,
    pub action: Action,
    /// A path inside a document attribute (`a.b[3].c`, no attribute
    /// prefix); `None` acts on the whole attribute.
    #[serde(default)]
    pub path: Option<String>,
}

impl Mutation {
    /// A mutation of the whole attribute.
    pub fn new(attr: usize, action: Action) -> Mutation {
        Mutation {
            attr,
            action,
            path: None,
        }
    }
}

/// Why a mutation could not be applied (status CMPFAIL). It travels as a
/// field of [`DaemonResponse::CmpFail`], so that clients can tell the cause
/// apart without parsing prose (API.md §0.2: "the Rust API reports the
/// precise reason").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpFailKind {
    /// A predicate did not hold.
    Predicate,
    /// The object exists (put_if_not_exist).
    Exists,
    /// Integer overflow (including `i64::MIN / -1`).
    Overflow,
    /// Division or remainder by zero.
    DivideByZero,
    /// A document path runs through a non-object, names an absent field
    /// where one is required, or is malformed.
    BadPath,
    /// A document field or map value has a type the operation cannot use.
    FieldType,
    /// A float result that JSON cannot hold (NaN, infinity) in a document.
    NotFinite,
    /// Anything else.
    Other,
}

/// An update of one key, evaluated once at the point leader.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UpdateRequest {
    pub space: SpaceId,
    pub key: Value,
    pub client: ClientRef,
    /// The epoch of the client's configuration when it first sent this
    /// update; every retry carries the same. A point leader that cannot
    /// tell whether a retry from before the tombstone horizon was applied
    /// (what remembered it may have been collected) refuses it with
    /// TIMEOUT instead of applying it again.
    pub since: Epoch,
    pub flags: UpdateFlags,
    /// Must all hold on the current object (only checked when it exists).
    pub checks: Vec<Check>,
    pub mutations: Vec<Mutation>,
    /// The caller's macaroons, checked for `op = write` on a space `with
    /// authorization` (API.md §10).
    #[serde(default)]
    pub auth: Auth,
    /// A new secret for the object (`put(..., secret=)`), kept in its
    /// hidden `__secret` value; on a space `with authorization` an object
    /// is created only with one. Refused on other spaces.
    #[serde(default)]
    pub secret: Option<Vec<u8>>,
}

/// The macaroons a request carries for a space `with authorization`
/// (API.md §10, `docs/design/authorization.md`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    /// Serialized macaroons (base64 text, as pymacaroons' `serialize()`
    /// gives). An object is authorized when one of them, with the others
    /// as its discharges, verifies against the object's secret.
    pub macaroons: Vec<Vec<u8>>,
    /// Unix seconds when the daemon received the request, against which
    /// `time < N` caveats are checked. Never on the wire: the daemon's
    /// shell stamps it, so that no client picks the time it is judged at;
    /// unstamped, every `time` caveat fails.
    #[serde(skip)]
    pub received_unix_s: Option<u64>,
}

impl Auth {
    /// Serialized macaroons, with no time stamped yet.
    pub fn new(macaroons: Vec<Vec<u8>>) -> Auth {
        Auth {
            macaroons,
            received_unix_s: None,
        }
    }
}

/// What a request does to an object, for its `op = read|write` caveats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AuthOp {
    /// A get, a search, a count: satisfies `op = read`.
    #[default]
    Read,
    /// An update, or the search for the keys a group update will write:
    /// satisfies `op = write`.
    Write,
}

/// Sort order of a sorted search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortBy {
    pub attr: usize,
    /// Largest first when true.
    pub descending: bool,
}

impl SortBy {
    /// The order of a sorted search over `(sort value, key bytes)`
    /// positions: by the value (reversed when descending), ties by key
    /// bytes ascending. Daemons page by it and clients merge by it, so both
    /// must use this one function.
    pub fn compare(self, a: (&Value, &[u8]), b: (&Value, &[u8])) -> Ordering {
        let by_value = sort_value_order(a.0, b.0);
        let by_value = if self.descending {
            by_value.reverse()
        } else {
            by_value
        };
        by_value.then_with(|| a.1.cmp(b.1))
    }
}

/// The order of sort values: numbers numerically (floats in IEEE total
/// order), strings bytewise. Values of different kinds (which one
/// attribute never holds) order by kind, so the order stays total.
pub fn sort_value_order(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => tessera_types::coordinate::key_bytes(a).cmp(&tessera_types::coordinate::key_bytes(b)),
    }
}

/// Where the next page of a region's search starts: just after this
/// position in the answer's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchAfter {
    /// `key_bytes` of the last key already received.
    pub key: Vec<u8>,
    /// In a sorted search, that object's sort attribute value (the order
    /// is then [`SortBy::compare`]); `None` in key order.
    pub sort_value: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DaemonRequest {
    /// Read a key's committed object at its point leader.
    Get {
        space: SpaceId,
        key: Value,
        #[serde(default)]
        auth: Auth,
    },
    /// Sent to the point leader of `update.key`.
    Update(UpdateRequest),
    /// One page of the committed objects of one region matching `checks`,
    /// in key order (`key_bytes`), or with `sort` in [`SortBy::compare`]
    /// order, starting after `after`. At most `limit` objects (the daemon
    /// may return fewer: it bounds every page by a number of objects and
    /// of bytes). Answered by [`DaemonResponse::SearchPage`].
    Search {
        space: SpaceId,
        region: RegionId,
        checks: Vec<Check>,
        sort: Option<SortBy>,
        after: Option<SearchAfter>,
        limit: Option<u64>,
        /// On a space `with authorization`: the objects returned are those
        /// these macaroons authorize for reading.
        #[serde(default)]
        auth: Auth,
        /// In a replex space, when `region` is read in place of a failed
        /// region: only the objects the client keeps of it
        /// ([`tessera_types::replex::Within`]). A daemon that cannot find
        /// its parts in its configuration returns every match.
        #[serde(default)]
        within: Option<tessera_types::replex::Within>,
    },
    /// Like `Search` in key order, but only the keys (count and group
    /// operations need nothing else). `after` is the `key_bytes` of the
    /// last key received. Answered by [`DaemonResponse::KeysPage`].
    SearchKeys {
        space: SpaceId,
        region: RegionId,
        checks: Vec<Check>,
        after: Option<Vec<u8>>,
        /// On a space `with authorization`: the keys returned are those
        /// these macaroons authorize for `op`.
        #[serde(default)]
        auth: Auth,
        #[serde(default)]
        op: AuthOp,
    },
    /// One page of a global index's entries in indexlet `region`, in value
    /// order (largest first when `descending`), starting after `after`
    /// (`sort_value`: the value, `key`: the key's `key_bytes`): the
    /// entries whose values the bounding checks among `checks` (all on the
    /// index's attribute) admit and that every check matches. At most
    /// `limit` entries. Read at the indexlet chain's tail, so only
    /// committed entries. Answered by [`DaemonResponse::LookupPage`].
    Lookup {
        space: SpaceId,
        region: RegionId,
        checks: Vec<Check>,
        descending: bool,
        after: Option<SearchAfter>,
        limit: Option<u64>,
    },
    /// Backup, first phase (docs/design/backup.md): how far this daemon is
    /// from a quiet state. Answered [`DaemonResponse::BackupState`].
    BackupDrain,
    /// Backup, second phase: when this daemon has installed the request's
    /// epoch, that configuration is read-only and no update is in flight
    /// here, freeze its objects under the number `backup`. Answered
    /// [`DaemonResponse::BackupState`], `taken` telling whether it did.
    BackupTake { backup: u64 },
    /// One page of the objects region `region` held when `backup` was
    /// taken, in key order after the `key_bytes` `after`. Answered
    /// [`DaemonResponse::BackupPage`].
    BackupRead {
        backup: u64,
        region: RegionId,
        after: Option<Vec<u8>>,
    },
    /// Forget the frozen objects of `backup`. Answered `Done`.
    BackupRelease { backup: u64 },
}

impl DaemonRequest {
    /// The macaroons the request carries.
    pub fn auth_mut(&mut self) -> Option<&mut Auth> {
        Some(match self {
            DaemonRequest::Get { auth, .. }
            | DaemonRequest::Search { auth, .. }
            | DaemonRequest::SearchKeys { auth, .. } => auth,
            DaemonRequest::Update(update) => &mut update.auth,
            // Backup requests read no object of a space on a caller's
            // behalf; they carry no macaroons.
            // A lookup on a space `with authorization` is refused.
            DaemonRequest::Lookup { .. }
            | DaemonRequest::BackupDrain
            | DaemonRequest::BackupTake { .. }
            | DaemonRequest::BackupRead { .. }
            | DaemonRequest::BackupRelease { .. } => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DaemonResponse {
    /// The request named another epoch than the daemon's; retry after
    /// fetching a configuration at least as new as `epoch`.
    WrongEpoch { epoch: Epoch },
    /// A get found this committed object: its bytes as the daemon stored
    /// them (not decoded and encoded again), which the client checks as it
    /// decodes them.
    Found {
        version: Version,
        object: ObjectBytes,
    },
    /// The update was applied on every replica of every subspace.
    Done,
    /// The operation did not happen: NOTFOUND, UNKNOWNSPACE, WRONGTYPE,
    /// SERVERERROR …, with a human-readable reason. A CMPFAIL is answered
    /// by [`DaemonResponse::CmpFail`] instead, which carries its kind.
    Failed { status: Status, reason: String },
    /// The update changed nothing (status CMPFAIL).
    CmpFail {
        /// Why, for code.
        kind: CmpFailKind,
        /// Why, for people.
        reason: String,
    },
    /// One page of a search. `more`: the page was cut by a bound; ask
    /// again after its last object (the next page may be empty). Each
    /// object travels as the bytes its daemon stored, not re-encoded
    /// ([`ObjectBytes`]); the client checks them as it decodes them.
    SearchPage {
        objects: Vec<(Version, ObjectBytes)>,
        more: bool,
    },
    /// One page of a keys-only search, the keys in key order; `more` as in
    /// `SearchPage`.
    KeysPage { keys: Vec<Value>, more: bool },
    /// One page of a lookup: `(value, key)` per entry, in the lookup's
    /// order; `more` as in `SearchPage`. `last`: the position the page
    /// ended at, where the next page starts, even when every entry read
    /// was left out (an entry whose checks fail, or a stale one).
    LookupPage {
        entries: Vec<(Value, Value)>,
        more: bool,
        last: Option<SearchAfter>,
    },
    /// A daemon's side of a backup: the epoch it has installed, whether
    /// that configuration is read-only, how many updates it has in flight
    /// (pending, buffered or queued, in any role), and whether it froze
    /// its objects (`BackupTake` only).
    BackupState {
        epoch: Epoch,
        read_only: bool,
        in_flight: u64,
        taken: bool,
    },
    /// One page of a backup: the live objects (tombstones left out) of a
    /// region in key order, and the `key_bytes` of the last entry visited
    /// (`None`: the region's end was reached).
    BackupPage {
        objects: Vec<Object>,
        next_after: Option<Vec<u8>>,
    },
}

/// What a chain member does to its region's copy of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HopWrite {
    /// Store the new object.
    Put,
    /// Drop the key from this region (a delete, or the old region of a
    /// relocation); in the key subspace a delete leaves a tombstone.
    Remove,
}

/// One member of a value-dependent chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    pub daemon: DaemonId,
    pub region: RegionId,
    pub write: HopWrite,
    /// The version this region must have applied before this one: the
    /// previous version when the old object lived in this region, `None`
    /// when the object is new to the region.
    pub after: Option<Version>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainForward {
    pub epoch: Epoch,
    pub from: DaemonId,
    pub space: SpaceId,
    pub key: Value,
    pub version: Version,
    pub hops: Vec<Hop>,
    /// Index into `hops` of the receiver.
    pub position: u32,
    /// The object after the update, encoded once by the point leader and
    /// stored by every member as it arrives (a record holds the same
    /// bytes); `None` for a delete. Bytes from a peer are checked on
    /// arrival (`ObjectBytes::view`).
    pub object: Option<ObjectBytes>,
    /// Who wrote it. [`ClientRef::BACKFILL`] marks the one update whose
    /// `version` is not new: the key's committed version, carried on to
    /// regions that do not hold it yet.
    pub client: ClientRef,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainAck {
    pub epoch: Epoch,
    pub from: DaemonId,
    pub space: SpaceId,
    pub key: Value,
    pub version: Version,
    /// The receiver's region.
    pub region: RegionId,
    /// Index into the update's hops of the receiver.
    pub position: u32,
    /// Whether it acknowledges a backfill: a backfill carries the version
    /// of an update that has already run (see `ClientRef::BACKFILL`), so a
    /// late acknowledgement of that update must not count for it.
    #[serde(default)]
    pub backfill: bool,
    /// [`chain_digest`] of the hops from the sender to the tail: what the
    /// acknowledgement vouches for. Two backfills of one version may
    /// travel different chains in one epoch (a revisit adds the building
    /// parts' other regions), and a late copy of the first one's
    /// acknowledgement must not count for the second (simulator seed
    /// 201004610: a revisit committed at its point leader before it had
    /// cleared a stale hybrid region).
    #[serde(default)]
    pub chain: u64,
}

/// A digest of a run of hops, the same in every process: an
/// acknowledgement counts only for a pending update whose hops after the
/// receiver digest to the value it carries. FNV-1a's step taken a word at
/// a time (each field as one `u64`): it runs for every acknowledgement
/// sent and received, and tells chains apart, not adversaries.
pub fn chain_digest(hops: &[Hop]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: u64| h = (h ^ x).wrapping_mul(PRIME);
    for hop in hops {
        eat(hop.daemon.0);
        eat(hop.region.0);
        eat(match hop.write {
            HopWrite::Put => 0,
            HopWrite::Remove => 1,
        });
        eat(hop.after.map_or(0, |v| v.0.wrapping_add(1)));
    }
    h
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ChainMsg {
    Forward(ChainForward),
    Ack(ChainAck),
}

/// One key's committed state in a region being transferred.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferEntry {
    /// The key's storage bytes (`key_bytes`).
    pub key: Vec<u8>,
    pub version: Version,
    /// The daemon's stored record bytes (a tombstone when the key was
    /// deleted or left the region at `version`).
    pub record: Vec<u8>,
}

/// One key of a rebuild page: what a source region holds of it, for the
/// lost region. The target decides from every source's entries which
/// version the lost region holds committed and which updates it drives
/// again (`daemon/src/rebuild.rs`, `settle`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebuildEntry {
    /// The key's storage bytes (`key_bytes`).
    pub key: Vec<u8>,
    /// The source's committed record as the lost region would store it
    /// (record bytes: the object only when the lost region places it, else
    /// a tombstone at that version); `None` when the source has none.
    pub committed: Option<Vec<u8>>,
    /// The updates of the key the source holds pending, oldest first (only
    /// from a source whose part comes after the lost region in the chain).
    pub pending: Vec<PendingWrite>,
}

/// An update a chain member holds pending (applied, not yet committed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingWrite {
    pub version: Version,
    /// The whole object after the update; `None` when it erases the key.
    pub object: Option<Object>,
    /// Its writer, for at-most-once.
    pub client: ClientRef,
    /// The version the member's region had to hold before applying it
    /// (the hop's `after`); `None` when the update brings the object into
    /// that region or the key is new.
    pub follows: Option<Version>,
}

/// The rebuild of a lost replex region (`docs/design/replex.md`,
/// "Rebuild"): the target pulls, page by page, the objects each source
/// region holds that the lost region places in its cell. A source's state
/// of those objects cannot change while the rebuild runs (every update of
/// them crosses the lost region, which has no daemon), so a page is an
/// answer, not a stream: a lost one is asked for again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RebuildMsg {
    /// Target → the daemon of `source`: the next page after key `after`
    /// (`None`: from the start).
    Fetch {
        rebuild: u64,
        from: DaemonId,
        source: RegionId,
        after: Option<Vec<u8>>,
    },
    /// Source → target: the entries of the page after `after`, in key
    /// order, each what the source holds of a key the lost region has
    /// business with (committed and pending); `last` is the last key the
    /// page read (`None` with `done` on an empty source), and `done` says
    /// no key follows it.
    Page {
        rebuild: u64,
        source: RegionId,
        after: Option<Vec<u8>>,
        entries: Vec<RebuildEntry>,
        last: Option<Vec<u8>>,
        done: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TransferMsg {
    /// Committed entries, from the source's scan or from later commits; the
    /// target keeps, per key, the highest version it has seen. `seq` counts
    /// the messages of one `attempt` from 0, so the target can tell whether
    /// it has them all.
    Entries {
        transfer: u64,
        attempt: u32,
        seq: u64,
        from: DaemonId,
        region: RegionId,
        entries: Vec<TransferEntry>,
    },
    /// Source to target, every tick while the transfer runs (and for a
    /// while after it ends): `sent` messages of `attempt` have gone out;
    /// `scanned` when the scan among them is complete. Idempotent, so a
    /// lost copy costs nothing.
    Progress {
        transfer: u64,
        attempt: u32,
        from: DaemonId,
        region: RegionId,
        sent: u64,
        scanned: bool,
        /// Once `scanned`: the digest buckets the scan skipped because the
        /// target held them already, as a bit set (64 buckets per word;
        /// empty when none was skipped). The target replaces every other
        /// bucket wholesale: what it holds there and was not sent in this
        /// attempt is gone from the region (its tombstone may have been
        /// collected), so the target deletes it before it says `Have`.
        skipped: Vec<u64>,
    },
    /// Target to source, in answer to a `Progress` that says the scan is
    /// complete: it holds every one of the first `have` messages of
    /// `attempt`. The source uses it to decide when to hand over.
    Have {
        transfer: u64,
        attempt: u32,
        from: DaemonId,
        have: u64,
    },
    /// Target to source, when a transfer starts: what the target holds of
    /// the region already, as per-bucket sums of (key, version) hashes
    /// (empty when nothing). The source skips the buckets that match.
    Digest {
        transfer: u64,
        from: DaemonId,
        buckets: Vec<u64>,
    },
    /// Target to source: some messages were lost; scan again, as `attempt`.
    Restart {
        transfer: u64,
        attempt: u32,
        from: DaemonId,
    },
}

// ---------------------------------------------------------------- coordinator

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CoordRequest {
    /// Long-poll: answer as soon as the epoch is newer than `known`, or
    /// after `wait_ms` with `Config(None)`.
    GetConfig {
        known: Epoch,
        wait_ms: u32,
    },
    /// A daemon announces itself; `id` is the one it was given before, if any.
    RegisterDaemon {
        id: Option<DaemonId>,
        addr: String,
        /// The URL of its Prometheus metrics, when it serves them.
        #[serde(default)]
        metrics: Option<String>,
        /// The newest epoch it had installed, from its disk: the
        /// coordinator's evidence of whether it acted as a region's tail
        /// (`tessera_coordinator::tails`).
        #[serde(default)]
        installed: Option<Epoch>,
    },
    AddSpace {
        description: String,
    },
    RmSpace {
        name: String,
    },
    /// A new member asks to join the group.
    Join {
        node_id: u64,
        addr: String,
        /// The URL of its Prometheus metrics, when it serves them. A
        /// member already in the group with another URL (it restarted on
        /// a new metrics port) has its entry updated.
        #[serde(default)]
        metrics: Option<String>,
    },
    /// A Raft RPC between members; the coordinator crate owns its encoding.
    Raft {
        payload: Vec<u8>,
    },
    /// Who the members are and who leads, as this member sees it; answered
    /// by any member with [`CoordResponse::Status`].
    Status,
    /// Sets or clears the cluster-wide read-only flag (leader only).
    SetReadOnly {
        read_only: bool,
    },
    /// Stores the layout advisor's calibrated parameters in the
    /// configuration (`tessera calibrate`; leader only). Answered `Done`,
    /// or `Failed` with BADSPACE for a payload that does not validate.
    SetAdvisorParams {
        params: Box<tessera_types::AdvisorCalibration>,
    },
    /// A daemon is alive and has installed `epoch` (leader only; sent about
    /// every 500 ms). Answered [`CoordResponse::Heartbeat`] with what the
    /// daemon should do.
    Heartbeat {
        id: DaemonId,
        epoch: Epoch,
    },
    /// `reporter` could not reach `daemon` (a connection refused or timed
    /// out, a queue that never drained): evidence of a gray failure the
    /// heartbeats cannot show, such as a one-way partition. The leader
    /// takes the daemon offline once reports from more than one reporter
    /// agree (leader only; answered `Done`).
    Unreachable {
        daemon: DaemonId,
        reporter: Reporter,
    },
    /// A daemon can no longer serve (it cannot persist): take it out of
    /// every chain now rather than after the failure timeout (leader only).
    /// It does not come back by itself; answered `Done`.
    Leave {
        id: DaemonId,
        reason: LeaveReason,
    },
    /// Once per tombstone collection round, from every daemon (leader
    /// only; answered `Done`): the oldest epoch whose versions it may still
    /// have in flight — of its pending and buffered updates, and never
    /// above the epoch it has installed — and, if any, the newest epoch of
    /// tombstones the horizon does not let it collect yet. The leader moves
    /// the horizon only up to the oldest epoch every available daemon may
    /// still have in flight, so that no update older than a collected
    /// tombstone can arrive after it.
    CollectReport {
        id: DaemonId,
        in_flight_since: Epoch,
        waiting: Option<Epoch>,
    },
    /// The target of transfer `transfer` holds everything the source had
    /// committed when it finished its scan; the coordinator appends the
    /// target to the region's chain in a new epoch (leader only).
    TransferComplete {
        transfer: u64,
    },
    /// Operations on a daemon (API.md §0.2): take it out of every chain
    /// (`Offline`), let it take regions again (`Online`), remove it for
    /// good (`Forget`; its id is never reused), or mark it offline and tell
    /// it to stop at its next heartbeat (`Kill`).
    ServerOffline {
        id: DaemonId,
    },
    ServerOnline {
        id: DaemonId,
    },
    ServerForget {
        id: DaemonId,
    },
    ServerKill {
        id: DaemonId,
    },
    /// Whether the cluster is stable: every available daemon reported the
    /// current epoch and no transfer is running (leader only).
    Stability,
    /// A new subspace on these attributes, built live (API.md §12.2);
    /// answered `PartAdded` once accepted, while it still builds.
    AddSubspace {
        space: String,
        attrs: Vec<String>,
    },
    /// Subspace `part` starts dropping (never the key subspace, part 0).
    RmSubspace {
        space: String,
        part: PartId,
    },
    /// A new local index on `attr` or `docattr.path`, built live;
    /// answered `PartAdded`.
    AddIndex {
        space: String,
        attr: String,
    },
    /// Index `part` of `space` starts dropping; without a space, of the
    /// one space that has an index `part` (HyperDex's `rm_index(idxid)`
    /// names no space).
    RmIndex {
        space: Option<String>,
        part: PartId,
    },
    /// The space moves to the subspaces and indexes of `description`.
    Relayout {
        space: String,
        description: String,
    },
    /// A daemon's backfill of building part `part` of `space` (leader
    /// only; answered `Done`): the key regions whose objects it, as their
    /// point leader, has written through the chain to every subspace
    /// (`keys_done`), and the regions it holds whose index entries it has
    /// completed for the part's attributes (`entries_done`). The leader
    /// marks the part ready once the current configuration's every
    /// region is covered.
    BackfillReport {
        daemon: DaemonId,
        space: SpaceId,
        part: PartId,
        keys_done: Vec<RegionId>,
        entries_done: Vec<RegionId>,
    },
    /// A new global index on `attr` with `partitions` indexlets (default:
    /// the space's partitions), built live; answered `PartAdded`.
    AddGlobalIndex {
        space: String,
        attr: String,
        partitions: Option<u32>,
    },
    /// The global index on `attr` of `space` starts dropping.
    RmGlobalIndex {
        space: String,
        attr: String,
    },
    /// The global index on `attr` of `space` is cut again, also at the
    /// values `at` (text, read as the attribute's type): a new part with
    /// those cuts builds, then the old one drops. Answered `PartAdded`.
    SplitGlobalIndex {
        space: String,
        attr: String,
        at: Vec<String>,
    },
    /// The head of indexlet `region` of global index `part` (leader only;
    /// answered `Done`): how many entries it holds, and the order
    /// coordinate of its middle entry's value. The leader splits an
    /// indexlet that grew past its threshold there.
    IndexletReport {
        space: SpaceId,
        part: PartId,
        region: RegionId,
        entries: u64,
        median: Option<u64>,
    },
    /// A replica of indexlet `region` of global index `part` (leader
    /// only; answered `Done`): how many lookup pages `daemon` served from
    /// it in the last `window_ms`. The leader splits an indexlet whose
    /// replicas together serve more than its threshold.
    IndexletLoad {
        daemon: DaemonId,
        space: SpaceId,
        part: PartId,
        region: RegionId,
        pages: u64,
        window_ms: u64,
    },
    /// The target of rebuild `rebuild` holds every object of its lost
    /// replex region; the coordinator makes it the region's chain in a new
    /// epoch (leader only). (Last: variant indexes are part of the wire
    /// format.)
    RebuildComplete {
        rebuild: u64,
    },
}

/// How long a `Renewed` heartbeat answer lets a daemon serve clients,
/// counted from when it sent that heartbeat: half the coordinator's
/// default failure timeout (2 s), so that a daemon cut off from the
/// coordinator stops answering before anyone can have replaced it.
pub const LEASE: std::time::Duration = std::time::Duration::from_millis(1000);

/// How long the coordinator's leader refuses a daemon's lease before it
/// takes the daemon out of its chains while it may still be serving (a
/// gray failure, an operator's `server-offline`, `-kill` or `-forget`):
/// [`LEASE`] with a margin for the daemon's clock and the answer's way,
/// so that every lease granted before has run out.
pub const FENCE: std::time::Duration = std::time::Duration::from_millis(1250);

/// What a daemon should do after a heartbeat (`CoordResponse::Heartbeat`).
/// The daemon acts on the variant alone; nothing is read from text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HeartbeatAnswer {
    /// Heard: the daemon's lease is renewed from the moment it sent the
    /// heartbeat.
    Renewed,
    /// Heard, but the daemon left a chain in `epoch` and reported an older
    /// one: it may still act on places it no longer holds, so it gets no
    /// lease until it has installed `epoch`.
    NoLeaseUntil { epoch: Epoch },
    /// The daemon is Offline (its heartbeats stopped for the failure
    /// timeout, or it was paused): it is alive after all and asks to come
    /// back by registering again. No lease.
    Offline,
    /// An operator took the daemon offline (`server-offline`): it waits,
    /// without a lease, until an operator brings it back.
    HeldOffline,
    /// The daemon must stop.
    Stop(StopReason),
}

/// Who reports a daemon unreachable (`CoordRequest::Unreachable`): each
/// counts once, however often it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Reporter {
    /// A peer daemon.
    Daemon(DaemonId),
    /// A client process (its random reporter id).
    Client(u64),
    /// The coordinator leader itself, which probes a reported daemon by
    /// connecting to it (a second source when only one other can tell).
    Coordinator,
}

/// Why the coordinator tells a daemon to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// An operator killed it (`server-kill`); it may not register again
    /// under its id.
    Killed,
    /// The coordinator does not know its id (forgotten with
    /// `server-forget`, or another cluster's).
    Unknown,
    /// The leader declared it lost: it was silent for the lost timeout
    /// while replex regions waited for it, and they were rebuilt
    /// elsewhere. It may not register again under its id.
    Lost,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Killed => "killed by an operator",
            StopReason::Unknown => "unknown to the coordinator (forgotten?)",
            StopReason::Lost => {
                "declared lost after a long silence (its replex regions were rebuilt \
                 elsewhere); forget it and start it with a fresh data directory"
            }
        })
    }
}

/// Why a daemon leaves every chain by itself (`CoordRequest::Leave`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaveReason {
    /// A write or an fsync failed, or the disk is full: it cannot promise
    /// that what it acknowledges is durable.
    CannotPersist,
}

impl std::fmt::Display for LeaveReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LeaveReason::CannotPersist => "it cannot persist (write or fsync failed, or disk full)",
        })
    }
}

/// One member's view of the coordinator group (`CoordRequest::Status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordStatus {
    /// The answering member's Raft node id and address.
    pub node_id: u64,
    pub addr: String,
    /// The leader this member knows of, if any.
    pub leader_id: Option<u64>,
    pub leader_addr: Option<String>,
    /// The member's current Raft term.
    pub term: u64,
    /// Every member (voters and learners), by node id.
    pub members: Vec<tessera_types::CoordinatorInfo>,
    /// The node ids of the voting members.
    pub voters: Vec<u64>,
    /// The epoch of the configuration this member has applied.
    pub epoch: Epoch,
    /// The index of the last Raft log entry applied to the state machine.
    pub applied_index: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CoordResponse {
    /// `None`: no newer configuration arrived within the wait.
    Config(Option<Box<Configuration>>),
    Registered {
        id: DaemonId,
    },
    /// A layout change was accepted: the new part's id (it is building).
    PartAdded {
        part: PartId,
    },
    Done,
    /// Only the leader changes configuration; retry there.
    NotLeader {
        leader_addr: Option<String>,
    },
    Failed {
        status: AdminStatus,
        reason: String,
    },
    Raft {
        payload: Vec<u8>,
    },
    Status(Box<CoordStatus>),
    /// The answer to `Heartbeat`.
    Heartbeat(HeartbeatAnswer),
    /// The answer to `Stability`.
    Stability {
        epoch: Epoch,
        stable: bool,
        /// Available daemons that have not reported `epoch` yet.
        lagging: Vec<DaemonId>,
        transfers: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CMPFAIL's kind crosses the wire as itself, whatever the reason
    /// says: a client never has to read the prose.
    #[test]
    fn cmpfail_kind_survives_the_frame() {
        let kinds = [
            CmpFailKind::Predicate,
            CmpFailKind::Exists,
            CmpFailKind::Overflow,
            CmpFailKind::DivideByZero,
            CmpFailKind::BadPath,
            CmpFailKind::FieldType,
            CmpFailKind::NotFinite,
            CmpFailKind::Other,
        ];
        for (id, kind) in (0u64..).zip(kinds) {
            // A reason that imitates the old `[tag]` text of another kind.
            let sent = Message::DaemonResponse {
                id,
                response: DaemonResponse::CmpFail {
                    kind,
                    reason: "[exists] looks like a tag".into(),
                },
            };
            let frame = crate::frame::encode(&sent);
            let heard = crate::frame::decode(&frame[4..]).expect("a frame we encoded decodes");
            assert_eq!(heard, sent);
        }
    }

    /// The variant indexes of `docs/PROTOCOL.md`, and which messages only
    /// daemons exchange.
    #[test]
    fn message_variants_keep_their_wire_index() {
        let objects = || HeldObjects {
            epoch: Epoch(0),
            space: SpaceId(0),
            region: RegionId(0),
            objects: vec![],
            removed: vec![],
            absent: vec![],
            from: DaemonId(1),
        };
        let request = || CoordRequest::Unreachable {
            daemon: DaemonId(1),
            reporter: Reporter::Client(7),
        };
        let cases = [
            (4, Message::Held(objects()), true),
            (
                5,
                Message::CoordRequest {
                    id: 0,
                    request: request(),
                },
                false,
            ),
            (
                7,
                Message::CredentialedRequest {
                    id: 0,
                    token: vec![],
                    request: request(),
                },
                false,
            ),
            (8, Message::Expected(objects()), true),
        ];
        for (index, msg, peer) in cases {
            let frame = crate::frame::encode(&msg);
            assert_eq!(frame[4], index, "{msg:?}");
            assert_eq!(msg.is_peer(), peer, "{msg:?}");
        }
    }
}
