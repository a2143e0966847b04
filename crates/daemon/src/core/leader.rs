//! The point leader's side: a client's update is checked, evaluated
//! against the key's newest version and started down its chain, or queued
//! behind the key's earlier updates; retries and refusals are remembered so
//! that an update applies at most once.

use super::{refuse, ReplicaCore, ReplyTo, Start, StateKey};
use crate::chain::{build_hops, can_pipeline, check_key, evaluate, key_region};
use crate::record::{DecodeRecordError, ReadRecordError};
use crate::shapes::Shape;
use tessera_protocol::{
    ChainForward, ClientRef, DaemonResponse, ObjectBytes, Status, UpdateRequest,
};
use tessera_types::coordinate::key_bytes;
use tessera_types::{Epoch, Object, Version};

/// How many refused requests a point leader remembers.
const REFUSED_REMEMBERED_MAX: usize = 1 << 16;

impl ReplicaCore {
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
        if config.rebuilding(region.id) {
            // A refresh (this daemon registered again): the other parts
            // may hold updates of the region's keys in flight that this
            // daemon has forgotten, and a new one would be sequenced
            // without them. Not remembered as refused: the client retries.
            let reason = format!(
                "region {} is being refreshed from the other parts at epoch {}",
                region.id, config.epoch
            );
            self.reply(reply, refuse(Status::Offline, reason));
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
        if self.try_start(&state_key, reply, &request) == Start::Wait {
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
            if let Some(p) = state.pending.values_mut().find(|p| {
                p.forward.client == request.client
                    || p.folded.iter().any(|(c, _)| *c == request.client)
            }) {
                p.replies.push(reply);
                return true;
            }
        }
        match self.load_head(state_key) {
            Ok(Some(record)) if record.recent.iter().any(|(c, _)| *c == request.client) => {
                self.reply(reply, DaemonResponse::Done);
                true
            }
            // First sent before the tombstone horizon: had it been applied,
            // what remembered it may have been collected since, so not
            // finding it proves nothing (collection keeps every record of
            // a later epoch, so a newer request is always recognized).
            Ok(_) if request.since < self.config.tombstone_horizon => {
                self.reply(
                    reply,
                    refuse(
                        Status::Timeout,
                        "the update was first sent too long ago to tell whether it took effect",
                    ),
                );
                true
            }
            Ok(_) => false,
            // Whether the request was applied is unknown: evaluating it
            // again could apply it twice (simulator seed 316610, within
            // f: a retry reached a point leader whose disk had just
            // broken and was applied a second time on top of a pending
            // update). The daemon is poisoned; the client retries
            // elsewhere.
            Err(e) => {
                self.fatal("reading a key's recent writers", e);
                self.reply(
                    reply,
                    refuse(Status::Reconfigure, "this daemon's storage failed"),
                );
                true
            }
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

    /// Evaluates and starts `request`, or answers it; [`Start::Wait`] when
    /// it must wait for the key's earlier updates to be acknowledged.
    fn try_start(
        &mut self,
        state_key: &StateKey,
        reply: ReplyTo,
        request: &UpdateRequest,
    ) -> Start {
        let config = self.config.clone();
        let Some(space) = config.space_by_id(request.space) else {
            self.reply(reply, refuse(Status::UnknownSpace, "the space was removed"));
            return Start::Done;
        };
        let latest = match self.latest(state_key) {
            Ok(latest) => latest,
            Err(e) => {
                self.fatal("reading a key at its point leader", e);
                self.reply(
                    reply,
                    refuse(Status::Reconfigure, "this daemon's storage failed"),
                );
                return Start::Done;
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
        if let Err(e) = crate::auth::authorize_update(&space.desc, old.as_ref(), request) {
            // As below: a pending update may change the object's secret.
            if has_pending {
                return Start::Wait;
            }
            let response = refuse(Status::Unauthorized, e.to_string());
            self.remember_refusal(request.client, response.clone());
            self.reply(reply, response);
            return Start::Done;
        }
        let new = match evaluate(space, old.as_ref(), request) {
            Ok(Some(mut new)) => {
                if let Some(secret) = &request.secret {
                    crate::auth::set_secret(&space.desc, &mut new, secret);
                }
                Some(new)
            }
            Ok(None) => None,
            // An answer computed from an unacknowledged version could be
            // contradicted if that version never completes: wait for it.
            Err(_) if has_pending => return Start::Wait,
            Err(refusal) => {
                let response = DaemonResponse::from(refusal);
                self.remember_refusal(request.client, response.clone());
                self.reply(reply, response);
                return Start::Done;
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
                let with = config
                    .waiting
                    .get(&region)
                    .map_or_else(|| "its last replica".to_string(), ToString::to_string);
                let reason = format!(
                    "region {region} has no replica at epoch {}; it returns with {with}",
                    config.epoch
                );
                self.reply(reply, refuse(Status::Offline, reason));
                return Start::Done;
            }
        };
        if let Some((_, last)) = self
            .keys
            .get(state_key)
            .and_then(|s| s.pending.last_key_value())
        {
            if !can_pipeline(&last.forward.hops, &hops) {
                return Start::Wait;
            }
        }
        // Counted here, where the update starts down its chain once
        // however often its client sends it.
        if let Some(shapes) = &self.shapes {
            shapes.count(request.space, &Shape::update(old.as_ref(), new.as_ref()));
        }
        let version = Version::next(prev_version, config.epoch);
        // Members take a version they have applied for a copy already
        // seen: one that did not grow would be lost as a duplicate.
        assert!(
            prev_version.is_none_or(|prev| version > prev),
            "try_start: the new version {version} does not exceed the key's newest {prev_version:?}"
        );
        let forward = ChainForward {
            epoch: config.epoch,
            from: self.me,
            space: request.space,
            key: request.key.clone(),
            version,
            hops,
            position: 0,
            object: new.as_ref().map(ObjectBytes::encode),
            client: request.client,
        };
        self.apply_forward(forward, vec![reply]);
        Start::Done
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
            // Encoded here or checked on arrival, so it decodes; an error
            // is passed on all the same.
            let object = p.forward.object.as_ref().map(ObjectBytes::decode);
            let object = object.transpose().map_err(DecodeRecordError::from)?;
            return Ok(Some((*v, object)));
        }
        Ok(self.load(state_key)?.map(|r| (r.version, r.object)))
    }

    /// Starts queued updates of the key while they can go.
    pub(super) fn drain_queue(&mut self, state_key: &StateKey) {
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
            if self.try_start(state_key, reply, &request) == Start::Wait {
                if let Some(s) = self.keys.get_mut(state_key) {
                    s.queued.push_front((reply, request));
                }
                return;
            }
        }
    }
}
