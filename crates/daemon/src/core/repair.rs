//! Anti-entropy: the key's point leader repairs a key that another
//! subspace holds apart from the key subspace.

use super::ReplicaCore;
use crate::chain::{key_region, repair_hops};
use tessera_protocol::{ChainForward, ClientRef, ObjectBytes};
use tessera_types::coordinate::key_bytes;
use tessera_types::{DaemonId, Epoch, RegionId, SpaceId, Value, Version};

/// What a sweep reported of one key: a replica (`from`) of non-key region
/// `region` holds it at `version`, live or as a tombstone, or nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    /// The sender's epoch; a point leader in another epoch ignores it.
    pub epoch: Epoch,
    pub space: SpaceId,
    pub region: RegionId,
    pub key: Value,
    pub version: Version,
    /// What the replica holds of it.
    pub kind: HeldKind,
    /// The replica.
    pub from: DaemonId,
}

/// What a region's replica reported of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldKind {
    /// The object, at the reported version.
    Live,
    /// A tombstone at the reported version.
    Tombstone,
    /// Nothing at all, though the point leader expected the object at the
    /// reported version there (`Message::Expected`).
    Absent,
}

/// How many suspects a point leader remembers (see `ReplicaCore::on_held`).
const SUSPECTS_MAX: usize = 65_536;

impl ReplicaCore {
    /// Anti-entropy: replica `from` of non-key region `region` holds
    /// `key`'s object (or a tombstone, or nothing) at `version`. As the key's point leader,
    /// with no update of the key under way, repair it unless it agrees
    /// with the key subspace's committed object — a live copy: the same
    /// version, mapping to that region; a tombstone: not newer than a
    /// committed object mapping there — but only once two sweeps in a row
    /// of that same replica reported that same version.
    /// The repair is an ordinary update through the chain (so every
    /// replica of every region it touches applies it, in the key's order)
    /// that writes the committed object again at a fresh version, removes
    /// the key from `region` when the object does not belong there, and
    /// puts it where it does.
    pub fn on_held(&mut self, held: Held) {
        let Held {
            epoch,
            space,
            region,
            key,
            version,
            kind,
            from,
        } = held;
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
        if config.rebuilding(key_region.id) {
            // A refresh: this point leader restarted and may have lost
            // updates that the other parts hold, committed or pending. Its
            // record is no measure of theirs until the refresh has told it
            // what they hold (and it drives those updates again): a repair
            // now would write its older object over an update in flight
            // (simulator seed 143016748: an acknowledged put undone).
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
        // A building part is still being filled and a dropping one is on
        // its way out: neither is expected to hold anything yet.
        if kind == HeldKind::Absent && !layout.state.is_ready() {
            return;
        }
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
        let suspect = (region, state_key.1.clone(), from);
        // A live copy must be the committed object, where it belongs. A
        // tombstone is only wrong where the committed object belongs and
        // is older than it: a delete that reached this region was lost
        // with every key-region replica, and the region hides the object.
        let consistent = match kind {
            HeldKind::Live => belongs && prev == Some(version),
            HeldKind::Tombstone => !belongs || prev >= Some(version),
            // Absent is wrong only while the object that was expected is
            // still the committed one and still belongs there.
            HeldKind::Absent => !belongs || prev != Some(version),
        };
        if consistent {
            self.suspects.remove(&suspect);
            return;
        }
        // A report can be stale (the region's copy was read before a later
        // update reached it, or the key subspace committed one since) and a
        // repair writes a new version of the key: under a steady load that
        // rewrote hot keys for nothing. A divergence that lasts is reported
        // again by the next sweep with the same version; only then repair.
        if self.suspects.get(&suspect) != Some(&version) {
            if self.suspects.len() >= SUSPECTS_MAX {
                // Bounded memory: forgetting only delays repairs by a sweep.
                self.suspects.clear();
            }
            self.suspects.insert(suspect, version);
            return;
        }
        self.suspects.remove(&suspect);
        let Ok(hops) = repair_hops(space, &key, object.as_ref(), region, prev) else {
            return; // a region on its way has no replica: later
        };
        let repair_version = Version::next(prev.max(Some(version)), config.epoch);
        if Some(repair_version) <= prev.max(Some(version)) {
            // Only a peer's report at the very end of the version range
            // gets here: no version exceeds it, so nothing can repair it.
            tracing::warn!(%region, %version, "anti-entropy: a reported version leaves no room for a repair");
            return;
        }
        tracing::warn!(%region, ?key, %version, "anti-entropy: repairing a key its subspace holds apart from the key subspace");
        let forward = ChainForward {
            epoch: config.epoch,
            from: self.me,
            space: space.id,
            key,
            version: repair_version,
            hops,
            position: 0,
            object: object.as_ref().map(ObjectBytes::encode),
            client: ClientRef::REPAIR,
        };
        self.apply_forward(forward, Vec::new());
        self.run_local();
    }
}
