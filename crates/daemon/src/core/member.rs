//! Every chain member's side: a forward is applied in version order
//! (buffered until the version it follows is here), sent on, and committed
//! when the acknowledgement comes back from the tail; unacknowledged
//! updates are sent again on a timer.

use super::{
    Buffered, KeyState, Pending, Phase, ReplicaCore, ReplyTo, StateKey, BACKFILLS_PASSED_MAX,
    FUTURE_MAX, REDRIVE_TICKS, RELAYS_MAX, STUCK_TICKS,
};
use crate::record::{trim_recent, ReadRecordError, Record};
use tessera_protocol::{
    chain_digest, ChainAck, ChainForward, ChainMsg, ClientRef, DaemonResponse, HopWrite,
};
use tessera_storage::Write;
use tessera_types::coordinate::key_bytes;
use tessera_types::{DaemonId, Epoch, Version};

impl ReplicaCore {
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
                    .filter(|(_, p)| match p.phase {
                        Phase::Sending { sent_tick } => tick - sent_tick >= REDRIVE_TICKS,
                        Phase::Acked | Phase::Blocked | Phase::Held { .. } => false,
                    })
                    .map(move |(v, _)| (k.clone(), *v))
            })
            .collect();
        for (state_key, version) in stale {
            self.continue_pending(&state_key, version);
        }
        let relays: Vec<ChainForward> = self
            .relays
            .values()
            .filter(|(_, sent)| tick - sent >= REDRIVE_TICKS)
            .map(|(forward, _)| forward.clone())
            .collect();
        for forward in relays {
            self.relay(forward);
        }
        self.apply_stuck();
        self.run_local();
    }

    /// Applies, per key, the oldest update buffered here for
    /// [`STUCK_TICKS`] without the version it follows arriving. That
    /// version was lost on its way to this region, not delayed: its
    /// predecessor on the chain sends an update again every
    /// [`REDRIVE_TICKS`] until it is acknowledged, and a new epoch clears
    /// the buffer. It happens beyond f: after a power loss a key region can
    /// come back without an update that later regions committed, and a
    /// region built since (which the lost version never reached) then
    /// waited for it for ever, and every later update of the key behind it
    /// (simulator seeds 240000978 and 241001279, `--power-loss`).
    ///
    /// Applying it without its predecessor is safe because each update
    /// carries the whole object (or its removal) for the regions it
    /// writes, and a region's version of a key only grows: should the
    /// predecessor still arrive, it finds a newer version and is
    /// acknowledged, or applied beneath a newer one still pending.
    /// Its hops in this region stop naming the lost version, so that the
    /// region's other replicas take it in the same order without waiting
    /// again.
    fn apply_stuck(&mut self) {
        let tick = self.tick;
        let stuck: Vec<(StateKey, Version)> = self
            .keys
            .iter()
            .filter_map(|(k, s)| {
                let (v, b) = s.buffered.first_key_value()?;
                (tick - b.since >= STUCK_TICKS).then(|| (k.clone(), *v))
            })
            .collect();
        for (state_key, version) in stuck {
            let Some(Buffered { mut forward, .. }) = self
                .keys
                .get_mut(&state_key)
                .and_then(|s| s.buffered.remove(&version))
            else {
                continue;
            };
            let after = forward.hops[forward.position as usize].after;
            tracing::warn!(
                region = %state_key.0,
                version = %version,
                after = ?after,
                "an update waited too long for the version it follows; applying it without that version"
            );
            for hop in forward.hops.iter_mut().filter(|h| h.region == state_key.0) {
                hop.after = None;
            }
            self.apply_forward(forward, Vec::new());
        }
    }

    /// A chain message from another daemon.
    pub fn on_chain(&mut self, msg: ChainMsg) {
        self.handle_chain(msg);
        self.run_local();
    }

    pub(super) fn handle_chain(&mut self, msg: ChainMsg) {
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
                // Bytes from the network: a forward whose position does not
                // name this daemon, after the daemon that sent it, is
                // refused here so that everything past this point may rely
                // on it (and asserts it).
                if !names_receiver(&forward, self.me) {
                    tracing::warn!(from = %forward.from, pos = forward.position, hops = forward.hops.len(), "dropping a forward that does not name this daemon after its sender");
                    return;
                }
                if !fits_space(&forward, &self.config) {
                    tracing::warn!(from = %forward.from, space = %forward.space, "dropping a forward whose object does not fit its space's schema");
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
        self.load_version(state_key)
    }

    pub(super) fn apply_forward(&mut self, forward: ChainForward, replies: Vec<ReplyTo>) {
        self.apply_forward_folding(forward, replies, Vec::new());
    }

    /// [`Self::apply_forward`] for an update whose commit here also
    /// remembers `folded`, writers whose effects it carries (see
    /// `rebuild::Settled::folded`). They are set before the update can
    /// commit: on a chain of one hop it commits at once.
    pub(super) fn apply_forward_folding(
        &mut self,
        forward: ChainForward,
        replies: Vec<ReplyTo>,
        folded: Vec<(ClientRef, Version)>,
    ) {
        let pos = forward.position as usize;
        assert!(
            forward.hops.get(pos).is_some_and(|h| h.daemon == self.me),
            "apply_forward at {}: position {pos} of {} hops does not name this daemon \
             (forwards from peers are checked by `names_receiver`, our own are built so)",
            self.me,
            forward.hops.len(),
        );
        assert!(
            pos == 0 || replies.is_empty(),
            "apply_forward: only the point leader (position 0) answers clients, not position {pos}"
        );
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
            let backfill = forward.client == ClientRef::BACKFILL;
            if let Some(pending) = self.pending_mut(&state_key, version) {
                if (pending.forward.client == ClientRef::BACKFILL) == backfill {
                    // Seen before: an update driven again in a new epoch.
                    pending.forward = forward;
                    if !folded.is_empty() {
                        pending.folded = folded;
                    }
                    self.continue_pending(&state_key, version);
                    return;
                }
                // A backfill of this version is pending here, and a late
                // copy of the update that wrote it arrives (or the other
                // way round): not the same update. The update committed
                // before its backfill began, so it is acknowledged again;
                // a backfill arriving while its update is still pending
                // here is dropped (its point leader sends it again).
                if !backfill && pos > 0 {
                    self.send_ack(&forward, pos);
                }
                return;
            }
            let committed = match self.load_version(&state_key) {
                Ok(version) => version,
                Err(e) => return self.fatal("reading a key's committed version", e),
            };
            // A backfill meets the version it carries committed in every
            // region the key already lived in: it passes on through them
            // (see `core::backfill`).
            let passes_on = backfill && committed == Some(version);
            // Once, in this epoch: a copy sent again (its predecessor's
            // redrive, or a duplicate) after the chain beyond this member
            // acknowledged the backfill is acknowledged at once. Walked
            // down the chain again, every copy started a new walk behind
            // it; on a long chain with lossy links the copies in flight
            // never died out (simulator seeds 141005088, 154005855: a
            // global index that never finished building).
            // The same chain after it, too: a revisit sends the same
            // version along more hops (clearing building regions).
            if passes_on
                && pos > 0
                && self
                    .backfills_passed
                    .get(&(state_key.clone(), version))
                    .is_some_and(|after| after[..] == forward.hops[pos + 1..])
            {
                self.send_ack(&forward, pos);
                return;
            }
            if committed >= Some(version) && !passes_on {
                // Committed here, so sent on before: acknowledge again —
                // unless it is driven again in a later epoch than it was
                // issued in. The chain after this member may then hold a
                // region rebuilt from other parts that lacks it (simulator
                // seed 99001018: an update moving the object into a lost
                // hybrid region, committed in the region it left, which
                // acknowledged it at once and left the rebuilt one
                // without it); it goes on, and is acknowledged upstream
                // when the rest of the chain acknowledges it.
                let last = pos + 1 == forward.hops.len();
                if pos > 0 && !last && forward.epoch > version.epoch() && !backfill {
                    self.relay(forward);
                } else if pos > 0 {
                    self.send_ack(&forward, pos);
                }
                return;
            }
            // Neither pending nor committed here: a later update of the key
            // overtook this one in a region that waits for no earlier
            // version (a building one). It is applied all the same, below
            // that later one, so that it still travels down the rest of its
            // chain: a region there may wait for exactly this version
            // (simulator seed 1204460, where acknowledging it here left a
            // later update buffered forever).
        }
        if let Some(after) = hop.after {
            if !self.follows(applied, after) {
                let tick = self.tick;
                let buffered = &mut self.keys.entry(state_key).or_default().buffered;
                let since = buffered.get(&version).map_or(tick, |b| b.since);
                buffered.insert(version, Buffered { forward, since });
                return;
            }
        }
        if let Some(after) = hop.after.filter(|_| !forward.client.is_internal()) {
            self.drop_skipped(&state_key, after, version);
        }
        let last = pos + 1 == forward.hops.len();
        let held = self.held.contains(&state_key.0);
        let phase = if held {
            // Waits for the release (see `hold`).
            Phase::Held { blocked: false }
        } else if last {
            Phase::Acked
        } else {
            Phase::Sending {
                sent_tick: self.tick,
            }
        };
        let state = self.keys.entry(state_key.clone()).or_default();
        state.pending.insert(
            version,
            Pending {
                forward,
                replies,
                phase,
                folded,
            },
        );
        match phase {
            Phase::Acked => self.commit_ready(&state_key),
            Phase::Sending { .. } => self.send_downstream(&state_key, version),
            Phase::Held { .. } | Phase::Blocked => {}
        }
        self.release_buffered(&state_key);
    }

    /// A client's update of version `version` follows `after` here: its
    /// point leader issued it right after `after`, so an update of a
    /// version between the two that this member holds pending (or
    /// buffered) is one that point leader never issued or has forgotten —
    /// a point leader that restarted and was refreshed while this member,
    /// paused or cut off, still held it (simulator seed 202002573). Driven
    /// on, it would place a never-acknowledged object in regions after this
    /// one that no later update of the key clears; it is dropped instead.
    /// Only members after the point leader hold one (no client waits on it
    /// here), and the point leader's own updates never skip a version.
    fn drop_skipped(&mut self, state_key: &StateKey, after: Version, version: Version) {
        let Some(state) = self.keys.get_mut(state_key) else {
            return;
        };
        let skipped = |v: &Version| after < *v && *v < version;
        state.pending.retain(|v, p| {
            let orphan = skipped(v) && p.forward.client != ClientRef::BACKFILL && p.replies.is_empty();
            if orphan {
                tracing::info!(version = %v, %after, next = %version, "dropping an update its point leader skipped");
            }
            !orphan
        });
        state
            .buffered
            .retain(|v, b| !(skipped(v) && b.forward.client != ClientRef::BACKFILL));
    }

    /// Whether an update that follows version `after` of a key in a
    /// region may apply where `applied` is the region's version here.
    fn follows(&self, applied: Option<Version>, after: Version) -> bool {
        follows(self.config.tombstone_horizon, applied, after)
    }

    /// Applies buffered updates whose predecessor has now been applied.
    pub(super) fn release_buffered(&mut self, state_key: &StateKey) {
        loop {
            let applied = match self.applied(state_key) {
                Ok(applied) => applied,
                Err(e) => return self.fatal("reading a key's applied version", e),
            };
            let Some(state) = self.keys.get_mut(state_key) else {
                return;
            };
            let horizon = self.config.tombstone_horizon;
            let ready = state.buffered.iter().find_map(|(v, b)| {
                let after = b.forward.hops[b.forward.position as usize].after;
                after
                    .is_none_or(|a| follows(horizon, applied, a))
                    .then_some(*v)
            });
            let Some(version) = ready else { return };
            let buffered = state.buffered.remove(&version).expect("found above");
            self.apply_forward(buffered.forward, Vec::new());
        }
    }

    /// Moves a pending update on after its chain changed: forward it, or
    /// commit it when this daemon is now its tail.
    pub(super) fn continue_pending(&mut self, state_key: &StateKey, version: Version) {
        let Some(pending) = self.pending_mut(state_key, version) else {
            return;
        };
        if !matches!(pending.phase, Phase::Sending { .. }) {
            return;
        }
        if pending.forward.position as usize + 1 == pending.forward.hops.len() {
            pending.phase = Phase::Acked;
            self.commit_ready(state_key);
        } else {
            self.send_downstream(state_key, version);
        }
    }

    fn send_downstream(&mut self, state_key: &StateKey, version: Version) {
        let tick = self.tick;
        let Some(pending) = self.pending_mut(state_key, version) else {
            return;
        };
        // Acknowledged, blocked and held updates are not sent; a tail
        // commits instead of sending.
        assert!(
            matches!(pending.phase, Phase::Sending { .. }),
            "send_downstream: v{version} is {:?}, not sending",
            pending.phase
        );
        let mut next = pending.forward.clone();
        let pos = next.position as usize;
        let Some(to) = next.hops.get(pos + 1).map(|h| h.daemon) else {
            unreachable!("send_downstream: v{version} is at the tail (position {pos})");
        };
        pending.phase = Phase::Sending { sent_tick: tick };
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
            backfill: forward.client == ClientRef::BACKFILL,
            chain: chain_digest(&forward.hops[pos..]),
        };
        self.send(upstream.daemon, ChainMsg::Ack(ack));
    }

    /// Passes on `forward`, an update this member committed, driven again
    /// in a later epoch (see `apply_forward`); sent again on the redrive
    /// timer until the successor acknowledges it, then acknowledged
    /// upstream. A new configuration forgets relays: upstream drives the
    /// update again along the new chain.
    fn relay(&mut self, forward: ChainForward) {
        let pos = forward.position as usize;
        let state_key = (forward.hops[pos].region, key_bytes(&forward.key));
        let slot = (state_key, forward.version);
        if !self.relays.contains_key(&slot) && self.relays.len() >= RELAYS_MAX {
            return self.send_ack(&forward, pos);
        }
        let mut next = forward.clone();
        next.position = (pos + 1) as u32;
        next.from = self.me;
        next.epoch = self.config.epoch;
        let to = next.hops[pos + 1].daemon;
        self.relays.insert(slot, (forward, self.tick));
        self.send(to, ChainMsg::Forward(next));
    }

    fn apply_ack(&mut self, ack: ChainAck) {
        let state_key = (ack.region, key_bytes(&ack.key));
        let slot = (state_key.clone(), ack.version);
        // A relay and a pending backfill may share a slot: a backfill
        // carries the version of the update that wrote the object, which
        // this member may be relaying again. An acknowledgement that is
        // not the relay's goes on to the pending update; dropping it left
        // a backfill resent for ever (simulator seed 157017320, a global
        // index that never finished building).
        if let Some((forward, _)) = self.relays.get(&slot) {
            let pos = forward.position as usize;
            if ack.position as usize == pos
                && forward.hops[pos + 1].daemon == ack.from
                && (forward.client == ClientRef::BACKFILL) == ack.backfill
                && chain_digest(&forward.hops[pos + 1..]) == ack.chain
            {
                let (forward, _) = self.relays.remove(&slot).expect("found above");
                self.send_ack(&forward, pos);
                return;
            }
        }
        let Some(pending) = self.pending_mut(&state_key, ack.version) else {
            tracing::debug!(version = %ack.version, "acknowledgement for an update not pending here");
            return;
        };
        if (pending.forward.client == ClientRef::BACKFILL) != ack.backfill {
            // The update that first wrote this version, or its backfill:
            // the same version, another update.
            tracing::debug!(version = %ack.version, "acknowledgement for another update of the same version");
            return;
        }
        let pos = pending.forward.position as usize;
        let expected = pending.forward.hops.get(pos + 1).map(|h| h.daemon);
        if pos != ack.position as usize || expected != Some(ack.from) {
            tracing::warn!(from = %ack.from, "dropping an acknowledgement from a daemon that is not next in the chain");
            return;
        }
        if chain_digest(&pending.forward.hops[pos + 1..]) != ack.chain {
            // A late copy from a pass of this version along another chain
            // (a backfill and then its revisit): the rest of this chain
            // has not vouched for it. The redrive timer sends it again.
            tracing::debug!(version = %ack.version, "acknowledgement for another chain of the same version");
            return;
        }
        match pending.phase {
            Phase::Sending { .. } | Phase::Acked => pending.phase = Phase::Acked,
            Phase::Blocked | Phase::Held { .. } => {
                // This member has not sent the update in this epoch, so no
                // successor can have acknowledged it: a stray message.
                tracing::warn!(from = %ack.from, version = %ack.version, phase = ?pending.phase, "dropping an acknowledgement for an update not sent in this epoch");
                return;
            }
        }
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
            if entry.get().phase != Phase::Acked {
                break;
            }
            let pending = entry.remove();
            let forward = &pending.forward;
            let pos = forward.position as usize;
            let hop = forward.hops[pos];
            assert_eq!(
                (hop.region, hop.daemon),
                (state_key.0, self.me),
                "commit_ready: v{} is pending under a key whose region or daemon its hop does not name",
                forward.version
            );
            let is_key_region = self.is_key_subspace(hop.region);
            let keeps_recent = self.keeps_recent(hop.region);
            // Only the key region's head answers clients: every other
            // member handed its replies to whoever heads the chain now.
            assert!(
                pos == 0 || pending.replies.is_empty(),
                "commit_ready: v{} at position {pos} holds clients to answer",
                forward.version
            );
            assert!(
                pos > 0 || is_key_region,
                "commit_ready: v{} commits at position 0 in region {}, which is not in the key subspace",
                forward.version,
                hop.region
            );
            // The key region (and every region of a replex space) merges
            // `recent` from the stored record. Other regions read it only
            // in debug builds, for the check below: in release builds it
            // would cost a read per commit on the write path.
            let backfill = forward.client == ClientRef::BACKFILL;
            let stored = if keeps_recent || backfill || cfg!(debug_assertions) {
                match self.load_head(state_key) {
                    Ok(record) => record,
                    Err(e) => {
                        return self.abandon_commit(
                            state_key,
                            pending,
                            "reading a record before its commit",
                            e,
                        );
                    }
                }
            } else {
                None
            };
            // Versions are applied in order and only a newer transfer
            // entry is stored over a record, so a commit never takes a
            // region's version of a key back.
            if let Some(stored) = stored.as_ref().filter(|_| !backfill) {
                assert!(
                    stored.version <= forward.version,
                    "commit_ready: region {} would take a key from v{} back to v{}",
                    hop.region,
                    stored.version,
                    forward.version
                );
            }
            // A backfill writes only where the key's version is older (a
            // building region); elsewhere it was passed on unchanged.
            let unchanged = backfill
                && stored
                    .as_ref()
                    .is_some_and(|stored| stored.version >= forward.version);
            if !unchanged {
                let recent = if keeps_recent {
                    let mut recent = stored.map(|r| r.recent).unwrap_or_default();
                    // The update was made from the version it follows here:
                    // writers of later versions this region holds (a
                    // version the tail committed while its point leader
                    // forgot it, and its refresh did not drive again) are
                    // not in its object, so they are no longer done: their
                    // retries run again rather than being answered as done
                    // over a state that lost them (simulator seed
                    // 152019038: a delete answered done under an add made
                    // from the object before it).
                    if let Some(after) = hop.after {
                        recent.retain(|(_, v)| *v <= after);
                    }
                    for writer in &pending.folded {
                        if !recent.contains(writer) {
                            recent.push(*writer);
                        }
                    }
                    if !forward.client.is_internal() {
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
                let object = match hop.write {
                    HopWrite::Put => self.stored_form(hop.region, forward.object.as_ref()),
                    HopWrite::Remove => Ok(None),
                };
                let object = match object {
                    Ok(object) => object,
                    Err(e) => {
                        // Checked on arrival (`fits_space`), so not reached;
                        // were it, the update is not committed here.
                        return self.abandon_commit(
                            state_key,
                            pending,
                            "decoding an update's object",
                            e,
                        );
                    }
                };
                let value = Record::encode_parts(forward.version, object.as_deref(), &recent);
                let shipped = self
                    .outgoing
                    .contains_key(&hop.region)
                    .then(|| value.clone());
                let write = Write::Put {
                    region: hop.region,
                    key: state_key.1.clone(),
                    value,
                };
                // The last hop in this region is its tail.
                let at_tail = forward
                    .hops
                    .get(pos + 1)
                    .is_none_or(|next| next.region != hop.region);
                if let Err(e) = self.write_commit(vec![write], at_tail) {
                    // A daemon that cannot write must not acknowledge: stop here.
                    // Replication keeps the data; the daemon leaves its chains
                    // (`Effect::Fatal`) and the update is driven again along
                    // the chain the next epoch draws.
                    return self.abandon_commit(state_key, pending, "a commit", e);
                }
                if let Some(record) = shipped {
                    self.ship(hop.region, &state_key.1, forward.version, &record);
                }
            }
            if pos > 0 {
                if backfill && self.backfills_passed.len() < BACKFILLS_PASSED_MAX {
                    self.backfills_passed.insert(
                        (state_key.clone(), forward.version),
                        forward.hops[pos + 1..].to_vec(),
                    );
                }
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
}

impl ReplicaCore {
    /// Puts back an update [`ReplicaCore::commit_ready`] took out to commit
    /// and could not, and stops the daemon (`Effect::Fatal`): it must not
    /// acknowledge what it did not commit. The update stays pending, to be
    /// driven again along the chain the next epoch draws.
    fn abandon_commit(
        &mut self,
        state_key: &StateKey,
        pending: Pending,
        during: &'static str,
        error: impl std::fmt::Display,
    ) {
        if let Some(state) = self.keys.get_mut(state_key) {
            state.pending.insert(pending.forward.version, pending);
        }
        self.fatal(during, error);
    }
}

/// Whether a forward's object (if any) is one well-formed object with one
/// value per attribute of its space: members store its bytes as they
/// came, and later code reads the values by attribute.
fn fits_space(forward: &ChainForward, config: &tessera_types::Configuration) -> bool {
    let Some(object) = &forward.object else {
        return true;
    };
    let Ok(view) = object.view() else {
        return false;
    };
    config
        .space_by_id(forward.space)
        .is_some_and(|space| view.len() == crate::auth::stored_len(&space.desc))
}

/// Whether a forward from a peer names this daemon at its position, right
/// after the daemon that sent it: the first hop is the point leader's own,
/// so a forward from elsewhere is never at position 0.
fn names_receiver(forward: &ChainForward, me: DaemonId) -> bool {
    let pos = forward.position as usize;
    pos > 0
        && forward.hops.get(pos).is_some_and(|h| h.daemon == me)
        && forward
            .hops
            .get(pos - 1)
            .is_some_and(|h| h.daemon == forward.from)
}

/// Whether an update that follows version `after` may apply where the
/// region's version of the key is `applied`: once that version is applied,
/// or when nothing is stored and `after` lies below the tombstone horizon —
/// it was a tombstone, collected here (it was issued at least the grace
/// ago, so no older update of the key is still on its way).
fn follows(horizon: Epoch, applied: Option<Version>, after: Version) -> bool {
    match applied {
        Some(applied) => applied >= after,
        None => after < Version::floor(horizon),
    }
}
