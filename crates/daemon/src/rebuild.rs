//! Rebuilding a lost replex region from the other replexes, at one daemon
//! (`docs/design/replex.md`, "Rebuild").
//!
//! Pure: the node (`node/rebuild.rs`) carries out the actions, reads the
//! pages and stores the entries; this module decides what to do.
//!
//! - The coordinator names a [`Rebuild`] in the configuration: a lost
//!   region (empty chain), a target, and source regions (its covering set)
//!   with their daemons.
//! - The target first deletes whatever it holds of the region (a partial
//!   copy from a cancelled rebuild could hold a key deleted since, whose
//!   tombstone may be collected), then asks every source for pages
//!   (`RebuildMsg::Fetch`), each after the last key of the one before.
//! - A source answers a page from its disk and its cores: per key of its
//!   region, [`rebuild_record`] of the committed record and, when its
//!   part comes after the lost region in the chain, the updates pending
//!   there, kept only when the lost region holds that key. A source
//!   before the lost region drives its pending updates through the
//!   rebuilt region again; had the region taken them, it would
//!   acknowledge them at once and never send them on.
//! - Nothing a page reports can change while the rebuild runs: every update
//!   of a key the lost region holds (or held, or will hold) passes through
//!   the lost region, which has no daemon, so the point leader refuses new
//!   ones and members keep the ones in flight blocked. A page is therefore
//!   an answer, not a stream: a lost request or answer is asked for again
//!   after [`FETCH_WAIT_TICKS`], and no hand-over hold is needed (unlike
//!   `crate::transfer`).
//! - The target stores each entry keeping per key the highest version
//!   (and every `recent` writer any source knew), and once every source
//!   said `done` it tells the coordinator, again every
//!   [`COMPLETE_TICKS`] until a configuration without the rebuild arrives.
//!   In that configuration it is the region's chain; the blocked updates
//!   are driven again along chains through it.
//! - A rebuild that ends without making this daemon a member (it was
//!   cancelled: the old daemon returned, or a source moved) leaves a
//!   partial copy, which is deleted.

use crate::record::{trim_recent, Record};
use std::collections::BTreeMap;
use tessera_protocol::{ClientRef, RebuildMsg, TransferEntry};
use tessera_types::coordinate::key_value;
use tessera_types::{Configuration, DaemonId, Object, Rebuild, RegionId, Space, Version};

/// Ticks a target waits for a page before asking for it again.
pub const FETCH_WAIT_TICKS: u32 = 8;
/// Ticks between a target's completion reports while the coordinator has
/// not ended the rebuild.
pub const COMPLETE_TICKS: u32 = 8;

/// One update a source holds pending for a key.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingWrite {
    pub version: Version,
    /// The object after the update; `None` when it erases the key.
    pub object: Option<Object>,
    /// Its writer, for at-most-once.
    pub client: ClientRef,
}

/// The lost region of a rebuild: which objects it holds.
pub struct LostRegion<'a> {
    pub space: &'a Space,
    /// Its part's index in `space.subspaces`.
    pub part: usize,
    pub region: RegionId,
}

impl LostRegion<'_> {
    /// Finds rebuild `rebuild`'s region in `config`.
    pub fn of<'c>(config: &'c Configuration, rebuild: &Rebuild) -> Option<LostRegion<'c>> {
        let (space, part, region) = config.region(rebuild.region)?;
        Some(LostRegion {
            space,
            part,
            region: region.id,
        })
    }

    /// Whether the region places `object` in its cell.
    pub fn holds(&self, object: &Object) -> bool {
        self.space.subspaces[self.part].region_of(object).id == self.region
    }

    /// Whether a key region, this one, holds the key with these storage
    /// bytes (a key region places by the key alone, so also a deleted
    /// key's tombstone).
    fn holds_key(&self, key: &[u8]) -> bool {
        self.part == 0
            && key_value(key)
                .and_then(|k| self.space.key_region(&k).ok().map(|r| r.id))
                .is_some_and(|r| r == self.region)
    }
}

/// What the lost region must store of one key that a source holds
/// `committed` and `pending` (in any order; pass none from a source before
/// the lost region in the chain), or `None` when the key has no business
/// there.
///
/// - The version is the newest the source holds, pending included. A
///   pending update was applied by a member after the lost region in its
///   chain, so the lost region had applied it too; it will commit once the
///   chain is whole again (those members drive it again). Taking only
///   committed versions would let a rebuilt point leader evaluate the next
///   update on an older object than its successors hold, and build that
///   update's chain from the wrong regions.
/// - The lost region stores the key when any version the source knows
///   placed the object there (or, for a key region, by the key alone, so
///   deletions too). If the newest version places it elsewhere, or deleted
///   it, the region stores a tombstone at that version, so the driven-again
///   update that moved it out is recognized as applied. Tombstones of
///   other parts carry no object and cannot be placed: they are not needed
///   (a late copy of an older update belongs to an older epoch, and the
///   rebuilt region joins in a newer one).
/// - `recent` is the committed record's with the pending writers appended
///   (in version order), so a rebuilt key region recognizes a retry of an
///   update that reached any replex.
pub fn rebuild_record(
    lost: &LostRegion<'_>,
    key: &[u8],
    committed: Option<&Record>,
    pending: &[PendingWrite],
) -> Option<Record> {
    let mut versions: Vec<(Version, Option<&Object>)> = pending
        .iter()
        .map(|p| (p.version, p.object.as_ref()))
        .collect();
    if let Some(record) = committed {
        versions.push((record.version, record.object.as_ref()));
    }
    let (version, newest) = versions.iter().max_by_key(|(v, _)| *v).copied()?;
    let placed_here = versions
        .iter()
        .any(|(_, object)| object.is_some_and(|o| lost.holds(o)));
    if !(placed_here || lost.holds_key(key)) {
        return None;
    }
    let mut recent = committed.map(|r| r.recent.clone()).unwrap_or_default();
    let mut writers: Vec<&PendingWrite> = pending.iter().collect();
    writers.sort_by_key(|p| p.version);
    for p in writers {
        if !p.client.is_internal() && committed.is_none_or(|r| r.version < p.version) {
            recent.push((p.client, p.version));
        }
    }
    trim_recent(&mut recent);
    Some(Record {
        version,
        object: newest.filter(|o| lost.holds(o)).cloned(),
        recent,
    })
}

/// What a target stores for a key that holds `stored` when a source sends
/// `incoming`: the newer record, with the writers both remember (two
/// sources may report one version, each knowing other writers). `None`
/// when `stored` already says everything.
///
/// At one version, a record with an object wins over a tombstone. One
/// update leaves one object (or none), but a source also holds a
/// tombstone at an update's version when the update moved the object out
/// of its region, to a region of the same part that another source holds.
/// Keeping whichever came first, a rebuilt key region lost the object of
/// an update that moved it inside the replex (`tessera-sim --seed
/// 97000030`).
pub fn merge_record(stored: Option<&Record>, incoming: Record) -> Option<Record> {
    let Some(stored) = stored else {
        return Some(incoming);
    };
    let mut recent = stored.recent.clone();
    for writer in &incoming.recent {
        if !recent.contains(writer) {
            recent.push(*writer);
        }
    }
    recent.sort_by_key(|(_, v)| *v);
    trim_recent(&mut recent);
    let newer =
        (incoming.version, incoming.object.is_some()) > (stored.version, stored.object.is_some());
    let mut merged = if newer { incoming } else { stored.clone() };
    merged.recent = recent;
    (&merged != stored).then_some(merged)
}

/// What the node must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Delete everything this daemon holds of `region`, then call
    /// [`Rebuilds::cleared`].
    Clear { rebuild: u64, region: RegionId },
    /// Send a message to a peer.
    Send { to: DaemonId, msg: RebuildMsg },
    /// Store these entries of `region` with [`merge_record`].
    Store {
        region: RegionId,
        entries: Vec<TransferEntry>,
    },
    /// Tell the coordinator the rebuild is complete.
    Complete { rebuild: u64 },
}

#[derive(Debug)]
struct Source {
    daemon: DaemonId,
    /// The last key received (`None`: nothing yet).
    after: Option<Vec<u8>>,
    done: bool,
    /// Ticks since the last fetch was sent.
    waited: u32,
}

#[derive(Debug)]
struct Target {
    region: RegionId,
    cleared: bool,
    sources: BTreeMap<RegionId, Source>,
    /// Ticks since the last completion report.
    reported: u32,
}

impl Target {
    fn fetch(&self, rebuild: u64, me: DaemonId, source: RegionId) -> Action {
        let s = &self.sources[&source];
        Action::Send {
            to: s.daemon,
            msg: RebuildMsg::Fetch {
                rebuild,
                from: me,
                source,
                after: s.after.clone(),
            },
        }
    }

    fn complete(&self) -> bool {
        self.cleared && self.sources.values().all(|s| s.done)
    }
}

/// The rebuilds this daemon is the target of.
#[derive(Debug)]
pub struct Rebuilds {
    me: DaemonId,
    targets: BTreeMap<u64, Target>,
}

impl Rebuilds {
    pub fn new(me: DaemonId) -> Rebuilds {
        Rebuilds {
            me,
            targets: BTreeMap::new(),
        }
    }

    /// A new configuration: start the rebuilds it names to this daemon;
    /// forget those it no longer names, deleting the partial copy of
    /// those that did not make this daemon a member.
    pub fn on_config(&mut self, config: &Configuration) -> Vec<Action> {
        let mut actions = Vec::new();
        self.targets.retain(|id, t| {
            if config.rebuilds.iter().any(|b| b.id == *id) {
                return true;
            }
            let member = config
                .region(t.region)
                .is_some_and(|(_, _, r)| r.chain.contains(&self.me));
            if !member && config.region(t.region).is_some() {
                actions.push(Action::Clear {
                    rebuild: *id,
                    region: t.region,
                });
            }
            false
        });
        for b in config.rebuilds.iter().filter(|b| b.to == self.me) {
            if self.targets.contains_key(&b.id) {
                continue;
            }
            let sources = b
                .sources
                .iter()
                .map(|&(region, daemon)| {
                    let source = Source {
                        daemon,
                        after: None,
                        done: false,
                        waited: 0,
                    };
                    (region, source)
                })
                .collect();
            self.targets.insert(
                b.id,
                Target {
                    region: b.region,
                    cleared: false,
                    sources,
                    reported: 0,
                },
            );
            actions.push(Action::Clear {
                rebuild: b.id,
                region: b.region,
            });
        }
        actions
    }

    /// The target deleted what it held of the region: fetch from every
    /// source. Nothing for a rebuild no longer running (the clear of a
    /// partial copy).
    pub fn cleared(&mut self, rebuild: u64) -> Vec<Action> {
        let me = self.me;
        let Some(t) = self.targets.get_mut(&rebuild) else {
            return Vec::new();
        };
        if t.cleared {
            return Vec::new();
        }
        t.cleared = true;
        let sources: Vec<RegionId> = t.sources.keys().copied().collect();
        sources
            .into_iter()
            .map(|s| t.fetch(rebuild, me, s))
            .collect()
    }

    /// A page from a source: store it, then fetch the next, or report
    /// completion after the last page of the last source. A page that
    /// does not answer the fetch outstanding (a duplicate, a late answer
    /// to a fetch sent again) is ignored.
    pub fn on_page(
        &mut self,
        rebuild: u64,
        source: RegionId,
        after: Option<Vec<u8>>,
        entries: Vec<TransferEntry>,
        last: Option<Vec<u8>>,
        done: bool,
    ) -> Vec<Action> {
        let me = self.me;
        let Some(t) = self.targets.get_mut(&rebuild) else {
            return Vec::new();
        };
        let region = t.region;
        let Some(s) = t.sources.get_mut(&source).filter(|_| t.cleared) else {
            return Vec::new();
        };
        if s.done || s.after != after {
            return Vec::new();
        }
        let mut actions = vec![Action::Store { region, entries }];
        if last.is_some() {
            s.after = last;
        }
        s.done = done;
        s.waited = 0;
        if !done {
            actions.push(t.fetch(rebuild, me, source));
        } else if t.complete() {
            t.reported = 0;
            actions.push(Action::Complete { rebuild });
        }
        actions
    }

    /// Time passes: fetches unanswered for [`FETCH_WAIT_TICKS`] are sent
    /// again; complete rebuilds report again every [`COMPLETE_TICKS`].
    pub fn on_tick(&mut self) -> Vec<Action> {
        let me = self.me;
        let mut actions = Vec::new();
        for (id, t) in self.targets.iter_mut().filter(|(_, t)| t.cleared) {
            if t.complete() {
                t.reported += 1;
                if t.reported >= COMPLETE_TICKS {
                    t.reported = 0;
                    actions.push(Action::Complete { rebuild: *id });
                }
                continue;
            }
            let late: Vec<RegionId> = t
                .sources
                .iter_mut()
                .filter(|(_, s)| !s.done)
                .filter_map(|(r, s)| {
                    s.waited += 1;
                    (s.waited >= FETCH_WAIT_TICKS).then(|| {
                        s.waited = 0;
                        *r
                    })
                })
                .collect();
            actions.extend(late.into_iter().map(|r| t.fetch(*id, me, r)));
        }
        actions
    }

    /// Number of rebuilds this daemon is the target of.
    pub fn running(&self) -> usize {
        self.targets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse::parse_space;
    use tessera_types::replex::replex_layouts;
    use tessera_types::{SpaceId, Value};

    /// Key subspace and replex `a`, two regions each (ids 1, 2 and 3, 4).
    fn space() -> Space {
        let desc =
            parse_space("space r key int k attributes int a replex a create 2 partitions").unwrap();
        let (mut subspaces, _) = replex_layouts(&desc, RegionId(1));
        for (p, layout) in subspaces.iter_mut().enumerate() {
            for region in &mut layout.regions {
                region.chain = vec![DaemonId(p as u64 + 1)];
            }
        }
        Space {
            id: SpaceId(1),
            desc,
            subspaces,
            indexes: Vec::new(),
        }
    }

    fn object(k: i64, a: i64) -> Object {
        Object {
            values: vec![Value::Int(k), Value::Int(a)],
        }
    }

    fn writer(request_no: u64) -> ClientRef {
        ClientRef {
            client_id: 5,
            request_no,
        }
    }

    /// Two values of `a` that replex `a` places in its first and its
    /// second region.
    fn a_in_each_region(space: &Space) -> (i64, i64) {
        let part = &space.subspaces[1];
        let find = |region: RegionId| {
            (-10_000..10_000)
                .find(|a| part.region_of(&object(0, *a)).id == region)
                .unwrap_or_else(|| panic!("no value of a falls in region {region}"))
        };
        (find(part.regions[0].id), find(part.regions[1].id))
    }

    #[test]
    fn a_relocation_pending_at_the_source_leaves_a_tombstone_at_its_version() {
        let space = space();
        let lost = LostRegion {
            space: &space,
            part: 1,
            region: space.subspaces[1].regions[0].id,
        };
        let (here, there) = a_in_each_region(&space);
        let key = tessera_types::key_bytes(&Value::Int(9));
        let committed = Record {
            version: Version(4),
            object: Some(object(9, here)),
            recent: vec![(writer(1), Version(4))],
        };
        let moving_out = PendingWrite {
            version: Version(5),
            object: Some(object(9, there)),
            client: writer(2),
        };
        let record = rebuild_record(
            &lost,
            &key,
            Some(&committed),
            std::slice::from_ref(&moving_out),
        )
        .unwrap();
        assert_eq!(record.version, Version(5));
        assert_eq!(record.object, None);
        assert_eq!(
            record.recent,
            vec![(writer(1), Version(4)), (writer(2), Version(5))]
        );
        // Never in the lost region: nothing to store.
        let elsewhere = Record {
            object: Some(object(9, there)),
            ..committed.clone()
        };
        assert_eq!(rebuild_record(&lost, &key, Some(&elsewhere), &[]), None);
        // Moving in: the pending object.
        let moving_in = PendingWrite {
            object: Some(object(9, here)),
            ..moving_out
        };
        let record = rebuild_record(&lost, &key, Some(&elsewhere), &[moving_in]).unwrap();
        assert_eq!(record.object, Some(object(9, here)));
        // A tombstone of another part cannot be placed; of the key
        // subspace it is placed by its key.
        let tombstone = Record {
            object: None,
            ..committed
        };
        assert_eq!(rebuild_record(&lost, &key, Some(&tombstone), &[]), None);
        let key_region = space.key_region(&Value::Int(9)).unwrap().id;
        let lost_key = LostRegion {
            space: &space,
            part: 0,
            region: key_region,
        };
        assert_eq!(
            rebuild_record(&lost_key, &key, Some(&tombstone), &[]),
            Some(tombstone.clone())
        );
        let other_id = space.subspaces[0]
            .regions
            .iter()
            .find(|r| r.id != key_region);
        let other = LostRegion {
            region: other_id.unwrap().id,
            ..lost_key
        };
        assert_eq!(rebuild_record(&other, &key, Some(&tombstone), &[]), None);
    }

    #[test]
    fn merging_keeps_the_newest_version_and_every_writer() {
        let old = Record {
            version: Version(3),
            object: Some(object(1, 1)),
            recent: vec![(writer(1), Version(3))],
        };
        let new = Record {
            version: Version(4),
            object: Some(object(1, 2)),
            recent: vec![(writer(2), Version(4))],
        };
        let merged = merge_record(Some(&old), new.clone()).unwrap();
        assert_eq!(merged.version, Version(4));
        assert_eq!(merged.object, new.object);
        assert_eq!(
            merged.recent,
            vec![(writer(1), Version(3)), (writer(2), Version(4))]
        );
        // An older record adds only its writers; nothing new, nothing written.
        let back = merge_record(Some(&merged), old.clone()).unwrap_or(merged.clone());
        assert_eq!(back, merged);
        assert_eq!(merge_record(Some(&merged), merged.clone()), None);
        assert_eq!(merge_record(None, old.clone()), Some(old));
    }

    /// A lost key region rebuilt from the two regions of a replex between
    /// which an update moved the object: the region it left holds a
    /// tombstone at the update's version, the one it entered the object.
    /// In whichever order their pages arrive, the key region keeps the
    /// object, with both writers.
    #[test]
    fn a_key_region_keeps_an_object_that_moved_inside_a_replex() {
        let space = space();
        let key_region = space.key_region(&Value::Int(9)).unwrap().id;
        let lost = LostRegion {
            space: &space,
            part: 0,
            region: key_region,
        };
        let (here, there) = a_in_each_region(&space);
        let key = tessera_types::key_bytes(&Value::Int(9));
        let left = Record {
            version: Version(5),
            object: None,
            recent: vec![(writer(1), Version(4)), (writer(2), Version(5))],
        };
        let entered = Record {
            version: Version(5),
            object: Some(object(9, there)),
            recent: vec![(writer(2), Version(5))],
        };
        assert_ne!(here, there);
        let from_left = rebuild_record(&lost, &key, Some(&left), &[]).unwrap();
        let from_entered = rebuild_record(&lost, &key, Some(&entered), &[]).unwrap();
        for (first, second) in [(&from_left, &from_entered), (&from_entered, &from_left)] {
            let stored = merge_record(None, first.clone()).unwrap();
            let merged = merge_record(Some(&stored), second.clone()).unwrap_or(stored);
            assert_eq!(merged.version, Version(5));
            assert_eq!(merged.object, Some(object(9, there)));
            assert_eq!(
                merged.recent,
                vec![(writer(1), Version(4)), (writer(2), Version(5))]
            );
        }
    }

    fn config_with(rebuilds: Vec<Rebuild>) -> Configuration {
        Configuration {
            spaces: vec![space()],
            rebuilds,
            ..Configuration::default()
        }
    }

    fn entry(k: u8) -> TransferEntry {
        TransferEntry {
            key: vec![k],
            version: Version(1),
            record: Vec::new(),
        }
    }

    #[test]
    fn a_target_fetches_every_page_once_asks_again_when_one_is_lost_then_completes() {
        let me = DaemonId(9);
        let b = Rebuild {
            id: 7,
            region: RegionId(1),
            to: me,
            sources: vec![(RegionId(3), DaemonId(2)), (RegionId(4), DaemonId(2))],
        };
        let mut target = Rebuilds::new(me);
        assert_eq!(
            target.on_config(&config_with(vec![b.clone()])),
            vec![Action::Clear {
                rebuild: 7,
                region: RegionId(1)
            }]
        );
        // Nothing is fetched before the region is cleared.
        assert!(target.on_tick().is_empty());
        let fetches = target.cleared(7);
        assert_eq!(fetches.len(), 2);
        let fetch = |source: u64, after: Option<Vec<u8>>| Action::Send {
            to: DaemonId(2),
            msg: RebuildMsg::Fetch {
                rebuild: 7,
                from: me,
                source: RegionId(source),
                after,
            },
        };
        assert_eq!(fetches, vec![fetch(3, None), fetch(4, None)]);
        // Region 3's first page: stored, the next fetched.
        let page = target.on_page(7, RegionId(3), None, vec![entry(1)], Some(vec![1]), false);
        assert_eq!(
            page,
            vec![
                Action::Store {
                    region: RegionId(1),
                    entries: vec![entry(1)]
                },
                fetch(3, Some(vec![1]))
            ]
        );
        // The same page again (a duplicate answer) is ignored.
        assert!(target
            .on_page(7, RegionId(3), None, vec![entry(1)], Some(vec![1]), false)
            .is_empty());
        let last = target.on_page(7, RegionId(3), Some(vec![1]), vec![], None, true);
        assert_eq!(last.len(), 1, "stored, and region 4 still to come");
        // Region 4's answer was lost: asked for again after a while.
        let mut asked = Vec::new();
        for _ in 0..FETCH_WAIT_TICKS {
            asked.extend(target.on_tick());
        }
        assert_eq!(asked, vec![fetch(4, None)]);
        let done = target.on_page(7, RegionId(4), None, vec![entry(2)], Some(vec![2]), true);
        assert_eq!(done.last(), Some(&Action::Complete { rebuild: 7 }));
        // Reported again until the configuration ends the rebuild.
        let mut again = Vec::new();
        for _ in 0..COMPLETE_TICKS {
            again.extend(target.on_tick());
        }
        assert_eq!(again, vec![Action::Complete { rebuild: 7 }]);
        // Cancelled without joining: the partial copy is cleared.
        assert_eq!(
            target.on_config(&config_with(Vec::new())),
            vec![Action::Clear {
                rebuild: 7,
                region: RegionId(1)
            }]
        );
        assert_eq!(target.running(), 0);
    }
}
