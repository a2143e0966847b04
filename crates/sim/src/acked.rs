//! An acknowledged update is in every copy: checked the moment a client
//! hears the acknowledgement, because anti-entropy would later repair a
//! copy the chain skipped (or a stray it left behind), hiding the fault
//! from the settled-state check. In a replex space that window matters:
//! a rebuild from the other replexes meanwhile would lose the write.

use crate::report::Violation;
use crate::world::World;
use tessera_daemon::record::Record;
use tessera_protocol::ClientRef;
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::{Region, SubspaceLayout, Version};

impl World {
    /// When client `c` hears its update acknowledged while no other update
    /// of the key can be on its way (no other client's is unanswered, none
    /// was abandoned) and the key region's record is the one the update
    /// produced (by its at-most-once list), every ready part holds the key
    /// at that version (on disk or pending), live in exactly the region its
    /// object belongs to (in none after a delete), among the regions a
    /// running daemon serves.
    pub(crate) fn check_acknowledged(
        &self,
        c: usize,
        key: i64,
        client: ClientRef,
    ) -> Result<(), Violation> {
        let concurrent = self.clients.iter().enumerate().any(|(other, client)| {
            other != c
                && client
                    .current
                    .as_ref()
                    .is_some_and(|cur| cur.key == key && cur.op.is_update())
        });
        let abandoned = self
            .abandoned
            .iter()
            .any(|&(k, i)| k == key && self.history[&k][i].op.is_update());
        if concurrent || abandoned {
            return Ok(());
        }
        let Some(space) = self.coord.state.spaces.iter().find(|s| s.id == self.space) else {
            return Ok(());
        };
        let value = self.knobs.key_value(key);
        let bytes = key_bytes(&value);
        let Ok(key_region) = space.key_region(&value) else {
            return Ok(());
        };
        let Some(record) = self.stored(key_region, &bytes) else {
            return Ok(());
        };
        let produced = record.recent.iter().find(|(c, _)| *c == client);
        let Some(&(_, version)) = produced.filter(|(_, v)| *v == record.version) else {
            return Ok(()); // a later update, or its entry trimmed away
        };
        for layout in space.subspaces.iter().skip(1) {
            if !layout.state.is_ready() {
                continue;
            }
            // Only regions a running daemon serves are judged. Before
            // rebuilds no update was acknowledged while its chain crossed
            // a region without one (it waited). A rebuilt point leader
            // answers a retry from its at-most-once list as soon as it took
            // the update from a later part holding it pending; the parts
            // after that one, or a region waiting for a crashed daemon,
            // get it once their daemon returns or is rebuilt, and the
            // settled checks judge them then.
            let home = record
                .object
                .as_ref()
                .map(|o| layout.region_of(o))
                .filter(|home| self.served(home))
                .map(|home| home.id);
            let mut live = Vec::new();
            for region in layout.regions.iter().filter(|r| self.served(r)) {
                if let Some((version, true)) = self.held(layout, region, &bytes) {
                    live.push((region.id, version));
                }
            }
            let expected: Vec<_> = home.map(|h| (h, version)).into_iter().collect();
            if live != expected {
                return Err(Violation::Unreplicated {
                    key,
                    part: layout.part,
                    live,
                    expected,
                    deleted: record.object.is_none(),
                });
            }
        }
        Ok(())
    }

    /// Whether a running daemon (not one lost for good) serves `region`.
    fn served(&self, region: &Region) -> bool {
        region
            .chain
            .first()
            .and_then(|d| self.daemons.get(d))
            .is_some_and(|d| d.up && d.node.is_some())
    }

    /// The newest version of `key` the replica of `region` (of `layout`)
    /// holds, its pending updates included, and whether the key is live
    /// there at that version: a stored record with an object, or a pending
    /// update whose object `layout` places in `region` (one that places it
    /// elsewhere moves it out). Pending matters after a rebuild (see
    /// `check_acknowledged`).
    fn held(
        &self,
        layout: &SubspaceLayout,
        region: &Region,
        key: &[u8],
    ) -> Option<(Version, bool)> {
        let stored = self
            .stored(region, key)
            .map(|r| (r.version, r.object.is_some()));
        let pending = region
            .chain
            .first()
            .and_then(|d| self.daemons.get(d)?.node.as_ref())
            .and_then(|node| node.pending_writes(region.id).remove(key))
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                let here = p
                    .object
                    .is_some_and(|o| layout.region_of(&o).id == region.id);
                (p.version, here)
            });
        stored.into_iter().chain(pending).max_by_key(|(v, _)| *v)
    }

    /// What the replica of `region` stores under `key`: its chain's head,
    /// or the daemon an orphan waits for (its disk keeps the region);
    /// nothing when that daemon was lost for good, disk and all.
    pub(crate) fn stored(&self, region: &Region, key: &[u8]) -> Option<Record> {
        let daemon = region
            .chain
            .first()
            .or_else(|| self.coord.state.orphans.get(&region.id))?;
        let bytes = self
            .daemons
            .get(daemon)?
            .data
            .get(region.id, key)
            .expect("memory get")?;
        Some(Record::decode(&bytes).expect("valid record"))
    }
}
