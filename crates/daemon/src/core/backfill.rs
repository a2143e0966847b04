//! Backfill of a building subspace, at the point leader of a key region:
//! each committed object is sent down its chain again, at the version it
//! already has, so that the new subspace's regions receive it in the key's
//! order and no new version of any object is written.

use super::ReplicaCore;
use crate::chain::{repair_hops, revisit_hops};
use tessera_protocol::{ChainForward, ClientRef, ObjectBytes};
use tessera_types::{RegionId, SpaceId};

/// What [`ReplicaCore::backfill_key`] did with one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackfillStep {
    /// The key is handled: rewritten through the chain, or nothing to do
    /// (deleted, or the space is gone).
    Done,
    /// An update of the key is under way, a region on its way has no
    /// replica, or this daemon does not lead the key region (any more):
    /// try the same key again later, so that the walk never steps over a
    /// key whose pending update was drawn before the new subspace existed.
    Busy,
}

impl ReplicaCore {
    /// As the point leader of key region `region`, sends the committed
    /// object of the key stored as `key` down the chain every subspace
    /// draws for it — the building ones among them — as a backfill
    /// (`ClientRef::BACKFILL`): the committed version itself, not a new
    /// one. It is pending at the point leader like any update, so a later
    /// update of the key queues behind it or follows it down the same
    /// chain, and every region takes a key's versions in order: a member
    /// that holds exactly this version passes it on without writing, one
    /// that holds an older version (or none: a building region) stores it,
    /// and one that holds a newer version acknowledges it at once — that
    /// newer update is on its way to every region after it.
    ///
    /// `clear`: the key may have had an update under way when the part
    /// began to build, drawn without it (a revisit, or a walk by a leader
    /// that did not see the build begin); in a replex space its backfill
    /// also clears the key from the building parts' other regions, and a
    /// deleted key is sent too, as a removal ([`revisit_hops`]).
    pub fn backfill_key(
        &mut self,
        space: SpaceId,
        region: RegionId,
        key: &[u8],
        clear: bool,
    ) -> BackfillStep {
        let config = self.config.clone();
        let Some(space) = config.space_by_id(space) else {
            return BackfillStep::Done;
        };
        let leads = space
            .subspaces
            .first()
            .and_then(|key_subspace| key_subspace.regions.iter().find(|r| r.id == region))
            .is_some_and(|r| r.chain.first() == Some(&self.me));
        if !leads {
            return BackfillStep::Busy;
        }
        if self.held.contains(&region) {
            return BackfillStep::Busy;
        }
        let state_key = (region, key.to_vec());
        if self.keys.get(&state_key).is_some_and(|s| !s.is_idle()) {
            return BackfillStep::Busy;
        }
        let record = match self.load(&state_key) {
            Ok(Some(record)) => record,
            Ok(None) => return BackfillStep::Done,
            Err(e) => {
                self.fatal("reading a key to backfill", e);
                return BackfillStep::Busy;
            }
        };
        // Only a replex space rebuilds regions, a building one among them,
        // from the other parts: elsewhere a building region holds nothing
        // stale to clear.
        let clear = clear && space.desc.replex.is_some();
        if record.object.is_none() && !clear {
            return BackfillStep::Done; // a tombstone: nothing to place
        }
        let Some(key_value) = tessera_types::coordinate::key_value(key) else {
            return BackfillStep::Done;
        };
        let object = record.object;
        let hops = if clear {
            revisit_hops(space, &key_value, object.as_ref(), Some(record.version))
        } else {
            // No region is a stray here: every subspace puts the object home.
            repair_hops(
                space,
                &key_value,
                object.as_ref(),
                RegionId(0),
                Some(record.version),
            )
        };
        let Ok(hops) = hops else {
            return BackfillStep::Busy;
        };
        let forward = ChainForward {
            epoch: config.epoch,
            from: self.me,
            space: space.id,
            key: key_value,
            version: record.version,
            hops,
            position: 0,
            object: object.as_ref().map(ObjectBytes::encode),
            client: ClientRef::BACKFILL,
        };
        self.apply_forward(forward, Vec::new());
        self.run_local();
        BackfillStep::Done
    }

    /// The keys of `region` with an update under way here.
    pub fn busy_keys_of(&self, region: RegionId) -> Vec<Vec<u8>> {
        self.keys
            .range((region, Vec::new())..)
            .take_while(|((r, _), _)| *r == region)
            .filter(|(_, state)| !state.is_idle())
            .map(|((_, key), _)| key.clone())
            .collect()
    }

    /// Whether no update of any key of `region` is under way here, so that
    /// every backfill rewrite this daemon started there has committed.
    pub fn region_idle(&self, region: RegionId) -> bool {
        self.keys
            .range((region, Vec::new())..)
            .take_while(|((r, _), _)| *r == region)
            .all(|(_, state)| state.is_idle())
    }
}
