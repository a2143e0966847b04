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

use crate::chain::{
    build_hops, can_pipeline, check_key, evaluate, key_region, rechain, repair_hops, Unchained,
};
use crate::record::{trim_recent, ReadRecordError, Record};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use tessera_protocol::{
    ChainAck, ChainForward, ChainMsg, ClientRef, DaemonResponse, HopWrite, Status, TransferEntry,
    UpdateRequest,
};
use tessera_storage::{Engine, Write};
use tessera_types::coordinate::key_bytes;
use tessera_types::{Configuration, DaemonId, Epoch, Object, RegionId, SpaceId, Value, Version};

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
    acked: bool,
    /// At the point leader: the clients to answer when it commits (the
    /// original request, and retries of it that arrived meanwhile).
    replies: Vec<ReplyTo>,
    /// The tick at which this member last sent the update downstream.
    sent_tick: u64,
    /// A region on the update's way has no replica in this epoch: it is
    /// neither sent on nor committed until one returns.
    blocked: bool,
    /// It arrived while its region was held for a transfer's hand-over: it
    /// waits here, unsent and uncommitted, until [`ReplicaCore::release`].
    held: bool,
}

/// Ticks after which a chain member sends an unacknowledged update again to
/// its successor (a message lost with a broken connection must not stall
/// the key).
pub const REDRIVE_TICKS: u64 = 4;

#[derive(Default, Debug)]
struct KeyState {
    pending: BTreeMap<Version, Pending>,
    buffered: BTreeMap<Version, ChainForward>,
    queued: VecDeque<(ReplyTo, UpdateRequest)>,
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

pub struct ReplicaCore {
    me: DaemonId,
    config: Arc<Configuration>,
    engine: Arc<dyn Engine>,
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
    refused: HashMap<ClientRef, DaemonResponse>,
    refused_order: VecDeque<ClientRef>,
}

/// How many refused requests a point leader remembers.
const REFUSED_REMEMBERED_MAX: usize = 1 << 16;

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
            engine,
            keys: BTreeMap::new(),
            future: Vec::new(),
            local: VecDeque::new(),
            effects: Vec::new(),
            outgoing: outgoing_transfers(me, &config),
            held: BTreeSet::new(),
            refused: HashMap::new(),
            refused_order: VecDeque::new(),
            tick: 0,
            config,
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.config.epoch
    }

    /// Takes the effects produced so far.
    pub fn drain_effects(&mut self) -> Vec<Effect> {
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
                        "v{} at {}/{} after {:?} acked {} from {}{}{}",
                        v.0,
                        p.forward.position,
                        p.forward.hops.len(),
                        hop.after,
                        p.acked,
                        p.forward.from,
                        if p.held { " held" } else { "" },
                        if p.blocked { " blocked" } else { "" },
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

    // ------------------------------------------------------------ inputs

    /// A client's update, sent to this daemon as the key's point leader.
    pub fn on_update(&mut self, reply: ReplyTo, epoch: Epoch, request: UpdateRequest) {
        if epoch != self.config.epoch {
            let epoch = self.config.epoch;
            self.reply(reply, DaemonResponse::WrongEpoch { epoch });
            return;
        }
        let config = self.config.clone();
        let Some(space) = config.space_by_id(request.space) else {
            self.reply(reply, refuse(Status::UnknownSpace, "no space has this id"));
            return;
        };
        if let Err(r) = check_key(space, &request.key) {
            self.reply(reply, r.into());
            return;
        }
        let Some(region) = key_region(space, &request.key) else {
            self.reply(
                reply,
                refuse(Status::Internal, "the key subspace has no regions"),
            );
            return;
        };
        if region.chain.first() != Some(&self.me) {
            self.reply(
                reply,
                refuse(
                    Status::Reconfigure,
                    "this daemon is not the key's point leader",
                ),
            );
            return;
        }
        let state_key = (region.id, key_bytes(&request.key));
        if self.answer_retry(&state_key, reply, &request) {
            return;
        }
        if config.read_only {
            // A retry of an update applied before the switch was answered
            // above; anything new waits for `set-read-write`.
            self.reply(
                reply,
                refuse(
                    Status::ReadOnly,
                    "the cluster is read-only; writes are refused",
                ),
            );
            return;
        }
        let state = self.keys.entry(state_key.clone()).or_default();
        if !state.queued.is_empty() {
            state.queued.push_back((reply, request));
            return;
        }
        if !self.try_start(&state_key, reply, &request) {
            self.keys
                .entry(state_key)
                .or_default()
                .queued
                .push_back((reply, request));
        }
        self.run_local();
    }

    /// At most once: a request this key has already seen — pending, or
    /// among the recent writers of its committed record — is not applied
    /// again; its client is answered when (or as) it commits.
    fn answer_retry(
        &mut self,
        state_key: &StateKey,
        reply: ReplyTo,
        request: &UpdateRequest,
    ) -> bool {
        if let Some(response) = self.refused.get(&request.client) {
            let response = response.clone();
            self.reply(reply, response);
            return true;
        }
        if let Some(state) = self.keys.get_mut(state_key) {
            if let Some(p) = state
                .pending
                .values_mut()
                .find(|p| p.forward.client == request.client)
            {
                p.replies.push(reply);
                return true;
            }
        }
        match self.load(state_key) {
            Ok(Some(record)) if record.recent.iter().any(|(c, _)| *c == request.client) => {
                self.reply(reply, DaemonResponse::Done);
                true
            }
            _ => false,
        }
    }

    fn remember_refusal(&mut self, client: ClientRef, response: DaemonResponse) {
        if self.refused.insert(client, response).is_none() {
            self.refused_order.push_back(client);
        }
        while self.refused_order.len() > REFUSED_REMEMBERED_MAX {
            if let Some(old) = self.refused_order.pop_front() {
                self.refused.remove(&old);
            }
        }
    }

    /// Committed entries of a region this daemon receives by transfer. Per
    /// key the highest version wins, whether it came from the source's scan,
    /// from a commit the source shipped later, or from the chain itself.
    pub fn on_transfer_entry(&mut self, region: RegionId, entry: TransferEntry) {
        let state_key = (region, entry.key.clone());
        let stored = match self.load(&state_key) {
            Ok(r) => r.map(|r| r.version),
            Err(e) => {
                self.fatal("reading a key a transfer brings", e);
                return;
            }
        };
        // Removals arrive as tombstone records, so the stored version alone
        // tells whether this entry is news.
        if stored.is_some_and(|v| v >= entry.version) {
            return;
        }
        let write = Write::Put {
            region,
            key: entry.key.clone(),
            value: entry.record.clone(),
        };
        if let Err(e) = self.engine.apply(vec![write]) {
            self.fatal("storing a transferred record", e);
            return;
        }
        // This daemon may itself be the source of a transfer of the region
        // whose scan has passed the key already (a late entry of the
        // transfer that made it a member): pass the entry on like a commit.
        self.ship(region, &entry.key, entry.version, &entry.record);
        self.release_buffered(&state_key);
        self.run_local();
    }

    /// Anti-entropy: the head of non-key region `region` holds `key`'s
    /// object at `version`. As the key's point leader, with no update of
    /// the key under way, repair it unless the key subspace's committed
    /// object is exactly that: the same version, mapping to that region.
    /// The repair is an ordinary update through the chain (so every
    /// replica of every region it touches applies it, in the key's order)
    /// that writes the committed object again at a fresh version, removes
    /// the key from `region` when the object does not belong there, and
    /// puts it where it does.
    pub fn on_held(
        &mut self,
        epoch: Epoch,
        space: SpaceId,
        region: RegionId,
        key: Value,
        version: Version,
    ) {
        let config = self.config.clone();
        if epoch != config.epoch {
            return;
        }
        let Some(space) = config.space_by_id(space) else {
            return;
        };
        let Some(key_region) = key_region(space, &key) else {
            return;
        };
        if key_region.chain.first() != Some(&self.me) || self.held.contains(&key_region.id) {
            return;
        }
        let state_key = (key_region.id, key_bytes(&key));
        if self.keys.get(&state_key).is_some_and(|s| !s.is_idle()) {
            // An update is under way; the next round looks again.
            return;
        }
        let Some((_, subspace, _)) = config.region(region) else {
            return;
        };
        if subspace == 0 {
            return;
        }
        let Some(layout) = space.subspaces.get(subspace) else {
            return;
        };
        let record = match self.load(&state_key) {
            Ok(record) => record,
            Err(e) => return self.fatal("reading a key for anti-entropy", e),
        };
        let (prev, object) = match record {
            Some(r) => (Some(r.version), r.object),
            None => (None, None),
        };
        let belongs = object
            .as_ref()
            .is_some_and(|o| layout.region_of(o).id == region);
        if belongs && prev == Some(version) {
            return;
        }
        let Ok(hops) = repair_hops(space, &key, object.as_ref(), region, prev) else {
            return; // a region on its way has no replica: later
        };
        tracing::warn!(%region, ?key, %version, "anti-entropy: repairing a key its subspace holds apart from the key subspace");
        let forward = ChainForward {
            epoch: config.epoch,
            from: self.me,
            space: space.id,
            key,
            version: Version::next(prev.max(Some(version)), config.epoch),
            hops,
            position: 0,
            object,
            client: ClientRef::REPAIR,
        };
        self.apply_forward(forward, Vec::new());
        self.run_local();
    }

    /// Holds `region` for a transfer's hand-over: updates that arrive from
    /// now on wait here, neither sent on nor committed, until
    /// [`Self::release`]. Those already sent on complete as usual (their
    /// commits are shipped to the target); [`Self::in_flight`] counts them.
    pub fn hold(&mut self, region: RegionId) {
        self.held.insert(region);
    }

    /// Updates of `region` this daemon sent on (or was sending) before the
    /// hold and has not committed yet. When none is left and the target has
    /// every shipped commit, it holds all the region holds downstream.
    pub fn in_flight(&self, region: RegionId) -> usize {
        self.region_keys(region)
            .map(|(_, s)| s.pending.values().filter(|p| !p.held).count())
            .sum()
    }

    fn region_keys(&self, region: RegionId) -> impl Iterator<Item = (&StateKey, &KeyState)> {
        self.keys
            .range((region, Vec::new())..)
            .take_while(move |(k, _)| k.0 == region)
    }

    /// Ends the hold of `region`: the updates that waited go on along their
    /// chains as the current configuration draws them (to the target, once
    /// it is the region's tail).
    pub fn release(&mut self, region: RegionId) {
        if !self.held.remove(&region) {
            return;
        }
        let waiting: Vec<(StateKey, Version)> = self
            .region_keys(region)
            .flat_map(|(k, s)| {
                s.pending
                    .iter()
                    .filter(|(_, p)| p.held)
                    .map(move |(v, _)| (k.clone(), *v))
            })
            .collect();
        for (state_key, version) in waiting {
            if let Some(p) = self
                .keys
                .get_mut(&state_key)
                .and_then(|s| s.pending.get_mut(&version))
            {
                p.held = false;
            }
            self.continue_pending(&state_key, version);
        }
        self.run_local();
    }

    /// Logical time passes (the shell calls this every 250 ms). Every chain
    /// member sends again to its successor each update it forwarded and
    /// has waited on for [`REDRIVE_TICKS`]; the successor forwards it or
    /// acknowledges it again. A lost message thus costs one re-send on its
    /// own hop, not a new pass down the whole chain (which, on a long
    /// chain over a lossy link, might almost never get through).
    pub fn on_tick(&mut self) {
        self.tick += 1;
        let tick = self.tick;
        let stale: Vec<(StateKey, Version)> = self
            .keys
            .iter()
            .flat_map(|(k, s)| {
                s.pending
                    .iter()
                    .filter(|(_, p)| {
                        !p.acked && !p.blocked && !p.held && tick - p.sent_tick >= REDRIVE_TICKS
                    })
                    .map(move |(v, _)| (k.clone(), *v))
            })
            .collect();
        for (state_key, version) in stale {
            self.continue_pending(&state_key, version);
        }
        self.run_local();
    }

    /// A chain message from another daemon.
    pub fn on_chain(&mut self, msg: ChainMsg) {
        self.handle_chain(msg);
        self.run_local();
    }

    /// A new configuration. Updates in flight are driven again along their
    /// chains as the new epoch draws them; messages of the old epoch that
    /// were waiting are dropped (their point leaders send them again).
    pub fn on_config(&mut self, config: Arc<Configuration>) {
        if config.epoch <= self.config.epoch {
            return;
        }
        self.outgoing = outgoing_transfers(self.me, &config);
        self.config = config;
        let epoch = self.config.epoch;
        let me = self.me;
        let config = self.config.clone();
        let mut redrive = Vec::new();
        let mut refused = Vec::new();
        for (state_key, state) in self.keys.iter_mut() {
            state.buffered.clear();
            let mut dropped = Vec::new();
            for (version, pending) in state.pending.iter_mut() {
                let hops = match rechain(&config, &pending.forward.hops) {
                    Ok(hops) => hops,
                    Err(Unchained::Gone) => {
                        dropped.push(*version); // the space is gone
                        continue;
                    }
                    Err(Unchained::Unavailable(_)) => {
                        // Skipping the region would leave it stale when
                        // its replica returns: wait for that instead.
                        let Some((_, sub, region)) = config
                            .region(state_key.0)
                            .filter(|(_, _, r)| r.chain.contains(&me))
                        else {
                            dropped.push(*version);
                            continue;
                        };
                        pending.blocked = true;
                        pending.acked = false;
                        if sub != 0 || region.chain.first() != Some(&me) {
                            // Only the key region's head answers clients.
                            refused.append(&mut pending.replies);
                        }
                        continue;
                    }
                };
                pending.blocked = false;
                let Some(pos) = hops
                    .iter()
                    .position(|h| h.daemon == me && h.region == state_key.0)
                else {
                    dropped.push(*version); // this daemon left the region's chain
                    continue;
                };
                // An acknowledgement came from the old chain: whoever
                // follows this daemon now may not hold the update yet, so
                // it must acknowledge again (members that committed it do
                // so at once). The last hop commits without one, below.
                pending.acked = false;
                let last = pos + 1 == hops.len();
                pending.forward.hops = hops;
                pending.forward.position = pos as u32;
                pending.forward.epoch = epoch;
                if pos == 0 {
                    // Head of the key region: drive the update again.
                    pending.forward.from = me;
                } else {
                    // Someone else heads it now; they answer its clients.
                    refused.append(&mut pending.replies);
                }
                if pos == 0 || last {
                    redrive.push((state_key.clone(), *version));
                }
            }
            for version in dropped {
                if let Some(p) = state.pending.remove(&version) {
                    refused.extend(p.replies);
                }
            }
            let still_leader = state
                .pending
                .values()
                .next()
                .is_none_or(|p| p.forward.position == 0)
                && config
                    .region(state_key.0)
                    .is_some_and(|(_, sub, r)| sub == 0 && r.chain.first() == Some(&me));
            if !still_leader {
                refused.extend(state.queued.drain(..).map(|(r, _)| r));
            }
        }
        for reply in refused {
            // Not applied here: the client refreshes its configuration and
            // retries at the new point leader, which recognizes a retry.
            self.reply(reply, DaemonResponse::WrongEpoch { epoch });
        }
        for (state_key, version) in redrive {
            self.continue_pending(&state_key, version);
        }
        self.keys.retain(|_, s| !s.is_idle());
        let future = std::mem::take(&mut self.future);
        for msg in future {
            self.handle_chain(msg);
        }
        self.run_local();
    }

    // ------------------------------------------------------------ leader

    /// Evaluates and starts `request`; false when it must wait for the
    /// key's earlier updates to be acknowledged.
    fn try_start(&mut self, state_key: &StateKey, reply: ReplyTo, request: &UpdateRequest) -> bool {
        let config = self.config.clone();
        let Some(space) = config.space_by_id(request.space) else {
            self.reply(reply, refuse(Status::UnknownSpace, "the space was removed"));
            return true;
        };
        let latest = match self.latest(state_key) {
            Ok(latest) => latest,
            Err(e) => {
                self.fatal("reading a key at its point leader", e);
                self.reply(
                    reply,
                    refuse(Status::Reconfigure, "this daemon's storage failed"),
                );
                return true;
            }
        };
        let has_pending = self
            .keys
            .get(state_key)
            .is_some_and(|s| !s.pending.is_empty());
        let (prev_version, old) = match latest {
            Some((v, o)) => (Some(v), o),
            None => (None, None),
        };
        let new = match evaluate(space, old.as_ref(), request) {
            Ok(new) => new,
            // An answer computed from an unacknowledged version could be
            // contradicted if that version never completes: wait for it.
            Err(_) if has_pending => return false,
            Err(refusal) => {
                let response = DaemonResponse::from(refusal);
                self.remember_refusal(request.client, response.clone());
                self.reply(reply, response);
                return true;
            }
        };
        let hops = match build_hops(
            &config,
            space,
            &request.key,
            old.as_ref(),
            new.as_ref(),
            prev_version,
        ) {
            Ok(hops) => hops,
            Err(region) => {
                // Not remembered as refused: the client retries, and may
                // succeed once the region has a replica again.
                let reason = format!(
                    "region {region} has no replica at epoch {}; it returns with its last replica",
                    config.epoch
                );
                self.reply(reply, refuse(Status::Offline, reason));
                return true;
            }
        };
        if let Some((_, last)) = self
            .keys
            .get(state_key)
            .and_then(|s| s.pending.last_key_value())
        {
            if !can_pipeline(&last.forward.hops, &hops) {
                return false;
            }
        }
        let version = Version::next(prev_version, config.epoch);
        let forward = ChainForward {
            epoch: config.epoch,
            from: self.me,
            space: request.space,
            key: request.key.clone(),
            version,
            hops,
            position: 0,
            object: new,
            client: request.client,
        };
        self.apply_forward(forward, vec![reply]);
        true
    }

    /// The newest version of the key at the point leader, pending or committed.
    fn latest(
        &self,
        state_key: &StateKey,
    ) -> Result<Option<(Version, Option<Object>)>, ReadRecordError> {
        if let Some((v, p)) = self
            .keys
            .get(state_key)
            .and_then(|s| s.pending.last_key_value())
        {
            return Ok(Some((*v, p.forward.object.clone())));
        }
        Ok(self.load(state_key)?.map(|r| (r.version, r.object)))
    }

    /// Starts queued updates of the key while they can go.
    fn drain_queue(&mut self, state_key: &StateKey) {
        loop {
            let Some((reply, request)) = self
                .keys
                .get_mut(state_key)
                .and_then(|s| s.queued.pop_front())
            else {
                return;
            };
            // The same request may have been queued twice (its client sent
            // it again): the first copy's outcome answers the second.
            if self.answer_retry(state_key, reply, &request) {
                continue;
            }
            if !self.try_start(state_key, reply, &request) {
                if let Some(s) = self.keys.get_mut(state_key) {
                    s.queued.push_front((reply, request));
                }
                return;
            }
        }
    }

    // ------------------------------------------------------------ members

    fn handle_chain(&mut self, msg: ChainMsg) {
        let epoch = match &msg {
            ChainMsg::Forward(f) => f.epoch,
            ChainMsg::Ack(a) => a.epoch,
        };
        if epoch > self.config.epoch {
            if self.future.len() < FUTURE_MAX {
                self.future.push(msg);
            }
            return;
        }
        if epoch < self.config.epoch {
            tracing::debug!(?epoch, "dropping a chain message from an older epoch");
            return;
        }
        match msg {
            ChainMsg::Forward(forward) => {
                let pos = forward.position as usize;
                let valid = forward.hops.get(pos).is_some_and(|h| h.daemon == self.me)
                    && pos > 0
                    && forward.hops[pos - 1].daemon == forward.from;
                if !valid {
                    tracing::warn!(from = %forward.from, pos, "dropping a forward that does not name this daemon");
                    return;
                }
                self.apply_forward(forward, Vec::new());
            }
            ChainMsg::Ack(ack) => self.apply_ack(ack),
        }
    }

    /// The version this region of the key has applied: pending or committed.
    fn applied(&self, state_key: &StateKey) -> Result<Option<Version>, ReadRecordError> {
        if let Some(v) = self
            .keys
            .get(state_key)
            .and_then(|s| s.pending.last_key_value())
            .map(|(v, _)| *v)
        {
            return Ok(Some(v));
        }
        Ok(self.load(state_key)?.map(|r| r.version))
    }

    fn apply_forward(&mut self, forward: ChainForward, replies: Vec<ReplyTo>) {
        let pos = forward.position as usize;
        let hop = forward.hops[pos];
        let state_key = (hop.region, key_bytes(&forward.key));
        let version = forward.version;
        let applied = match self.applied(&state_key) {
            Ok(a) => a,
            Err(e) => {
                self.fatal("reading a key's applied version", e);
                return;
            }
        };
        if applied.is_some_and(|a| a >= version) {
            // Seen before: an update driven again in a new epoch.
            let state = self.keys.entry(state_key.clone()).or_default();
            if let Some(pending) = state.pending.get_mut(&version) {
                pending.forward = forward;
                self.continue_pending(&state_key, version);
            } else if pos > 0 {
                // Already committed here: acknowledge again.
                self.send_ack(&forward, pos);
            }
            return;
        }
        if let Some(after) = hop.after {
            if applied.is_none_or(|a| a < after) {
                self.keys
                    .entry(state_key)
                    .or_default()
                    .buffered
                    .insert(version, forward);
                return;
            }
        }
        let last = pos + 1 == forward.hops.len();
        let held = self.held.contains(&state_key.0);
        let state = self.keys.entry(state_key.clone()).or_default();
        state.pending.insert(
            version,
            Pending {
                forward,
                acked: last && !held,
                replies,
                sent_tick: self.tick,
                blocked: false,
                held,
            },
        );
        if held {
            // Waits for the release (see `hold`).
        } else if last {
            self.commit_ready(&state_key);
        } else {
            self.send_downstream(&state_key, version);
        }
        self.release_buffered(&state_key);
    }

    /// Applies buffered updates whose predecessor has now been applied.
    fn release_buffered(&mut self, state_key: &StateKey) {
        loop {
            let Ok(applied) = self.applied(state_key) else {
                return;
            };
            let Some(state) = self.keys.get_mut(state_key) else {
                return;
            };
            let ready = state.buffered.iter().find_map(|(v, f)| {
                let after = f.hops[f.position as usize].after;
                after
                    .is_none_or(|a| applied.is_some_and(|ap| ap >= a))
                    .then_some(*v)
            });
            let Some(version) = ready else { return };
            let forward = state.buffered.remove(&version).expect("found above");
            self.apply_forward(forward, Vec::new());
        }
    }

    /// Moves a pending update on after its chain changed: forward it, or
    /// commit it when this daemon is now its tail.
    fn continue_pending(&mut self, state_key: &StateKey, version: Version) {
        let Some(pending) = self
            .keys
            .get_mut(state_key)
            .and_then(|s| s.pending.get_mut(&version))
        else {
            return;
        };
        if pending.acked || pending.blocked || pending.held {
            return;
        }
        if pending.forward.position as usize + 1 == pending.forward.hops.len() {
            pending.acked = true;
            self.commit_ready(state_key);
        } else {
            self.send_downstream(state_key, version);
        }
    }

    fn send_downstream(&mut self, state_key: &StateKey, version: Version) {
        let tick = self.tick;
        let Some(pending) = self
            .keys
            .get_mut(state_key)
            .and_then(|s| s.pending.get_mut(&version))
        else {
            return;
        };
        pending.sent_tick = tick;
        let mut next = pending.forward.clone();
        let pos = next.position as usize;
        let Some(to) = next.hops.get(pos + 1).map(|h| h.daemon) else {
            return;
        };
        next.position = (pos + 1) as u32;
        next.from = self.me;
        next.epoch = self.config.epoch;
        self.send(to, ChainMsg::Forward(next));
    }

    fn send_ack(&mut self, forward: &ChainForward, pos: usize) {
        let upstream = forward.hops[pos - 1];
        let ack = ChainAck {
            epoch: self.config.epoch,
            from: self.me,
            space: forward.space,
            key: forward.key.clone(),
            version: forward.version,
            region: upstream.region,
            position: (pos - 1) as u32,
        };
        self.send(upstream.daemon, ChainMsg::Ack(ack));
    }

    fn apply_ack(&mut self, ack: ChainAck) {
        let state_key = (ack.region, key_bytes(&ack.key));
        let Some(pending) = self
            .keys
            .get_mut(&state_key)
            .and_then(|s| s.pending.get_mut(&ack.version))
        else {
            tracing::debug!(version = %ack.version, "acknowledgement for an update not pending here");
            return;
        };
        let pos = pending.forward.position as usize;
        let expected = pending.forward.hops.get(pos + 1).map(|h| h.daemon);
        if pos != ack.position as usize || expected != Some(ack.from) {
            tracing::warn!(from = %ack.from, "dropping an acknowledgement from a daemon that is not next in the chain");
            return;
        }
        pending.acked = true;
        self.commit_ready(&state_key);
    }

    /// Commits acknowledged updates in version order: writes them through,
    /// then acknowledges upstream (or answers the client at the head).
    fn commit_ready(&mut self, state_key: &StateKey) {
        let mut leader_committed = false;
        while let Some(entry) = self
            .keys
            .get_mut(state_key)
            .and_then(|s| s.pending.first_entry())
        {
            if !entry.get().acked {
                break;
            }
            let pending = entry.remove();
            let forward = &pending.forward;
            let pos = forward.position as usize;
            let hop = forward.hops[pos];
            let is_key_region = pos < forward.hops.len() && self.is_key_subspace(hop.region);
            let recent = if is_key_region {
                let mut recent = match self.load(state_key) {
                    Ok(record) => record.map(|r| r.recent).unwrap_or_default(),
                    Err(e) => {
                        if let Some(state) = self.keys.get_mut(state_key) {
                            state.pending.insert(forward.version, pending);
                        }
                        self.fatal("reading a record before its commit", e);
                        return;
                    }
                };
                if forward.client != ClientRef::REPAIR {
                    recent.push((forward.client, forward.version));
                    trim_recent(&mut recent);
                }
                recent
            } else {
                Vec::new()
            };
            // A removal leaves a tombstone in every region, so the region's
            // version of the key only grows: a late copy of an older update
            // (sent again while its acknowledgement was on the way) is
            // recognized as seen instead of bringing the object back.
            let value = Record {
                version: forward.version,
                object: match hop.write {
                    HopWrite::Put => forward.object.clone(),
                    HopWrite::Remove => None,
                },
                recent,
            }
            .encode();
            let shipped = self
                .outgoing
                .contains_key(&hop.region)
                .then(|| value.clone());
            let write = Write::Put {
                region: hop.region,
                key: state_key.1.clone(),
                value,
            };
            if let Err(e) = self.engine.apply(vec![write]) {
                // A daemon that cannot write must not acknowledge: stop here.
                // Replication keeps the data; the daemon leaves its chains
                // (`Effect::Fatal`) and the update is driven again along
                // the chain the next epoch draws.
                if let Some(state) = self.keys.get_mut(state_key) {
                    state.pending.insert(forward.version, pending);
                }
                self.fatal("a commit", e);
                return;
            }
            if let Some(record) = shipped {
                self.ship(hop.region, &state_key.1, forward.version, &record);
            }
            if pos > 0 {
                self.send_ack(forward, pos);
            } else {
                for reply in &pending.replies {
                    self.reply(*reply, DaemonResponse::Done);
                }
                leader_committed = true;
            }
        }
        if leader_committed {
            self.drain_queue(state_key);
        }
        if self.keys.get(state_key).is_some_and(KeyState::is_idle) {
            self.keys.remove(state_key);
        }
    }

    /// Hands a record just stored in `region` to every transfer this
    /// daemon sends of that region.
    fn ship(&mut self, region: RegionId, key: &[u8], version: Version, record: &[u8]) {
        for transfer in self.outgoing.get(&region).into_iter().flatten() {
            let entry = TransferEntry {
                key: key.to_vec(),
                version,
                record: record.to_vec(),
            };
            self.effects.push(Effect::Ship {
                transfer: *transfer,
                entry,
            });
        }
    }

    fn is_key_subspace(&self, region: RegionId) -> bool {
        self.config
            .region(region)
            .is_some_and(|(_, subspace, _)| subspace == 0)
    }

    fn load(&self, state_key: &StateKey) -> Result<Option<Record>, ReadRecordError> {
        let bytes = self.engine.get(state_key.0, &state_key.1)?;
        Ok(bytes.map(|b| Record::decode(&b)).transpose()?)
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
