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
//!   region, [`rebuild_entry`]: the committed record and, when its part
//!   comes after the lost region in the chain, the updates pending there,
//!   sent only when the lost region has business with that key.
//! - Nothing a page reports can change while the rebuild runs: every update
//!   of a key the lost region holds (or held, or will hold) passes through
//!   the lost region, which has no daemon, so the point leader refuses new
//!   ones and members keep the ones in flight blocked. A page is therefore
//!   an answer, not a stream: a lost request or answer is asked for again
//!   after [`FETCH_WAIT_TICKS`], and no hand-over hold is needed (unlike
//!   `crate::transfer`).
//! - The target stores each committed record keeping per key the highest
//!   version (and every `recent` writer any source knew), remembers the
//!   pending updates ([`Unsettled`]), and once every source said `done`
//!   it tells the coordinator, again every [`COMPLETE_TICKS`] until a
//!   configuration without the rebuild arrives. In that configuration it
//!   is the region's chain: the keys with pending updates are settled
//!   ([`settle`]: a rebuilt point leader drives the updates above the
//!   agreed committed version itself), and the blocked updates are driven
//!   again along chains through it.
//! - A rebuild that ends without making this daemon a member (it was
//!   cancelled: the old daemon returned, or a source moved) leaves a
//!   partial copy, which is deleted once the region has another daemon
//!   (until then the rebuild may have completed in a configuration this
//!   daemon missed; see [`Rebuilds::on_config`]).

use crate::record::{trim_recent, Record};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
pub use tessera_protocol::PendingWrite;
use tessera_protocol::{ClientRef, RebuildEntry, RebuildMsg};
use tessera_types::coordinate::key_value;
use tessera_types::{Configuration, DaemonId, Object, Rebuild, RegionId, Space, Version};

/// Ticks a target waits for a page before asking for it again.
pub const FETCH_WAIT_TICKS: u32 = 8;
/// Ticks between a target's completion reports while the coordinator has
/// not ended the rebuild.
pub const COMPLETE_TICKS: u32 = 8;

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

/// What a source sends of one key it holds `committed` and `pending` (pass
/// no pending updates from a source before the lost region in the chain),
/// or `None` when the key has no business in the lost region: no version
/// the source knows places the object there and, for a key region, the
/// key does not either. A key region places by the key alone, so its
/// deletions come too.
///
/// The committed record is sent as the lost region would store it: the
/// object only when the region places it, else a tombstone at that
/// version (the update that moved the object out is then recognized as
/// applied when it is driven again). Tombstones of other parts carry no
/// object and cannot be placed: they are not sent (a late copy of an
/// older update belongs to an older epoch, and the rebuilt region joins
/// in a newer one). The pending updates go whole: what the target does
/// with them is [`settle`]'s decision, which needs every source.
pub fn rebuild_entry(
    lost: &LostRegion<'_>,
    key: &[u8],
    committed: Option<&Record>,
    pending: Vec<PendingWrite>,
) -> Option<RebuildEntry> {
    let placed_here = committed
        .and_then(|r| r.object.as_ref())
        .into_iter()
        .chain(pending.iter().filter_map(|p| p.object.as_ref()))
        .any(|o| lost.holds(o));
    // A key region places by the key: its keys are known without one.
    let tombstone = lost.part != 0 && committed.is_some_and(|r| r.object.is_none());
    if !(placed_here || tombstone || lost.holds_key(key)) {
        return None;
    }
    let committed = committed.map(|r| Record {
        version: r.version,
        object: r.object.clone().filter(|o| lost.holds(o)),
        recent: r.recent.clone(),
    });
    let mut pending = pending;
    pending.sort_by_key(|p| p.version);
    Some(RebuildEntry {
        key: key.to_vec(),
        committed: committed.map(|r| r.encode()),
        pending,
    })
}

/// What a target learned of one key that some source holds an update of
/// pending: the committed version those sources agree on, and every
/// pending update.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unsettled {
    /// The oldest committed record among the sources whose oldest pending
    /// update follows a version of their region (`Some(None)`: such a
    /// source has nothing committed). A source the update brought the
    /// object into holds an older record, or none, that says nothing of
    /// the key's committed version, and counts not.
    floor: Option<Option<Record>>,
    writes: BTreeMap<Version, PendingWrite>,
    /// Versions of a refresh known only from committed tombstones: see
    /// [`Unsettled::add_refreshed`].
    unconfirmed: BTreeSet<Version>,
    /// A refresh's writers of versions a source committed under a newer
    /// one it reports, by that newer version: see [`Settled::folded`].
    folded: BTreeMap<Version, Vec<(ClientRef, Version)>>,
}

impl Unsettled {
    /// A source's entry for the key with at least one pending update.
    pub fn add(&mut self, committed: Option<&Record>, pending: Vec<PendingWrite>) {
        let follows = pending
            .iter()
            .min_by_key(|p| p.version)
            .is_some_and(|p| p.follows.is_some());
        if follows {
            let older = match (&self.floor, committed) {
                (None, _) | (Some(Some(_)), None) => true,
                (Some(None), _) => false,
                (Some(Some(floor)), Some(c)) => c.version < floor.version,
            };
            if older {
                self.floor = Some(committed.cloned());
            }
        }
        for write in pending {
            self.writes.entry(write.version).or_insert(write);
        }
    }

    /// A source of a key region holds `live` committed while another
    /// holds a later version: it missed that update, which is therefore
    /// still in flight, as if that source held it pending (see `settle`).
    pub fn lagging(&mut self, live: Record) {
        let older = match &self.floor {
            None => true,
            Some(None) => false,
            Some(Some(floor)) => live.version < floor.version,
        };
        if older {
            self.floor = Some(Some(live));
        }
    }

    /// A source's entry for a key of a region being *refreshed*: its one
    /// daemon registered again and may have lost updates it had started,
    /// so every version a source holds above `own` (what the region holds
    /// committed, hence every member too) is in flight, pending or
    /// committed there, and the refreshed point leader drives each again.
    /// Taking one a source committed as committed would leave it missing
    /// in a region rebuilt meanwhile from the parts before that source.
    pub fn add_refreshed(
        &mut self,
        own: Option<&Record>,
        committed: Option<&Record>,
        pending: Vec<PendingWrite>,
    ) {
        self.floor = Some(own.cloned());
        let own_version = own.map(|r| r.version);
        if let Some(c) = committed.filter(|c| Some(c.version) > own_version) {
            let folded: Vec<(ClientRef, Version)> = c
                .recent
                .iter()
                .filter(|(_, v)| Some(*v) > own_version && *v < c.version)
                .copied()
                .collect();
            let known = self.folded.entry(c.version).or_default();
            for writer in folded {
                if !known.contains(&writer) {
                    known.push(writer);
                }
            }
            let write = committed_write(c);
            // As in `merge_record`: at one version a live copy is the
            // version's object, while a tombstone may only say that it
            // moved to a region rebuilt since without it (the point
            // leader, which drove it again, restarted): that cannot be
            // told from a deletion, so a version only tombstones report is
            // not driven. It was never acknowledged, and the key's object
            // stays the one the region acknowledged (simulator seed
            // 118002160: driven as a deletion, it lost an object).
            if write.object.is_none() && !self.writes.contains_key(&c.version) {
                self.unconfirmed.insert(c.version);
            }
            match self.writes.entry(c.version) {
                Entry::Vacant(e) => {
                    e.insert(write);
                }
                Entry::Occupied(mut e) if e.get().object.is_none() && write.object.is_some() => {
                    self.unconfirmed.remove(&c.version);
                    e.insert(write);
                }
                Entry::Occupied(_) => {}
            }
        }
        // A pending update travels whole: it wins over a committed record.
        for write in pending
            .into_iter()
            .filter(|w| Some(w.version) > own_version)
        {
            self.unconfirmed.remove(&write.version);
            self.writes.insert(write.version, write);
        }
    }
}

/// What a rebuilt region holds of a key once every source answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The record it stores committed (`None`: nothing, the key is new).
    pub base: Option<Record>,
    /// The updates above it that the rebuilt point leader drives down the
    /// chain itself, oldest first (always empty for a region that is not a
    /// key region: the point leader, or a member before it, drives them).
    /// The first may be the base's own version, driven again: a base the
    /// sources could only show as the update that moved the object out of
    /// their regions (see [`settle`]).
    pub drive: Vec<PendingWrite>,
    /// For a refresh, per driven version, the writers of the older versions
    /// a source committed and reported only under it (its record's
    /// `recent`): their effects are in its object, so their retries wait
    /// for its commit, which remembers them (simulator seed 117002898: a
    /// retried put, not recognized, was applied a second time over an add
    /// that followed it).
    pub folded: BTreeMap<Version, Vec<(ClientRef, Version)>>,
}

/// The rule for a key some source holds an update of pending, given what
/// the target stored from every entry (`stored`: the newest committed
/// version any source reported). A version is committed in the rebuilt
/// region only when every source that holds a later update pending had
/// committed it: the base is the oldest committed version among them
/// (nothing when every pending update brought the object into its region:
/// the key is new). Every version above the base, pending somewhere or
/// committed further down the chain, is still in flight:
///
/// - a rebuilt key region holds each as a pending update and drives it
///   down the chain itself (the members that hold it recognize its
///   version, pass it on or acknowledge it), so the point leader commits
///   last again;
/// - any other rebuilt region holds none of them: its point leader (or a
///   member before it) holds each pending and drives it through the
///   rebuilt region again, which then applies it and sends it on. Taking
///   it as committed would acknowledge it at once, while a member after
///   the region may still hold it pending.
///
/// `recent` keeps the writers up to the base; the writers of the updates
/// above it are those updates' clients.
///
/// One exception, for a key region: no source's pending update follows a
/// version of its region, yet the newest committed record is a tombstone
/// at the version of a pending update that carries an object. That
/// tombstone is no deletion: the update moved the object out of the
/// committing source's region, so the key held an object before it, in
/// regions the covering set does not read — one that mixes parts, where a
/// later part's region stands in for a failed one and has already
/// committed the move while the earlier part's region the object entered
/// holds it pending (simulator seed 391008841: a key region rebuilt from
/// hybrid region r5 and replex regions r11 and r12 for the failed r6; r11
/// had committed the move to r10, r5 held it pending, and the rebuilt key
/// region, taking the key for new, answered NotFound for an object
/// acknowledged long before). The object before that version is not
/// known, but the version itself is: committed at that source, so at every
/// member after it, the tail included, and its object travels whole with
/// the pending update. It is the base, its writer left to its commit, and
/// it is driven again too, first, so that the members holding it pending
/// commit it and its client's retry still waits for the point leader.
///
/// Another, for a key region too: no source's pending update follows a
/// version of its region, yet the newest committed record is live and
/// older than every pending update. The source holding it lags: the
/// object lived in its region at that version, so every later update
/// passes through it (moving the object out, or over it), but it holds
/// none of them pending — it was itself rebuilt meanwhile, as a region
/// that is not a key region, and left them to its point leader: the region
/// being rebuilt now (simulator seed 395000268: hybrid region r5 was
/// rebuilt from replex region r10 with v777 committed, v778 left to point
/// leader r1, whose daemon was lost; r1, rebuilt from r5 and from r6,
/// which v778 moves the object into and holds it pending following
/// nothing, took the key for new and answered NotFound for v777,
/// acknowledged long before). That record was committed at its source,
/// hence at the tail: it is the base, as if the source still held its
/// pending update, and the updates above it are driven from it.
pub fn settle(key_region: bool, stored: Option<&Record>, unsettled: Unsettled) -> Settled {
    // The two exceptions: (the base's object, whether its version is
    // driven again), from the stored record when no floor testifies.
    let unfloored = match (&unsettled.floor, stored) {
        (None, Some(s)) if key_region => match &s.object {
            // Moved: the tombstone of a pending update that carries an
            // object.
            None => unsettled
                .writes
                .get(&s.version)
                .and_then(|w| w.object.clone())
                .map(|object| (s.version, Some(object), true)),
            // Lagged: live, older than every pending update.
            Some(object) => unsettled
                .writes
                .keys()
                .all(|v| *v > s.version)
                .then(|| (s.version, Some(object.clone()), false)),
        },
        _ => None,
    };
    let again = unfloored
        .as_ref()
        .and_then(|(v, _, again)| again.then_some(*v));
    let base = match unfloored {
        Some((version, object, _)) => Some(Record {
            version,
            object,
            recent: Vec::new(),
        }),
        None => unsettled.floor.unwrap_or_default(),
    };
    let base_version = base.as_ref().map(|r| r.version);
    let base = base.map(|mut r| {
        for writer in stored.map(|s| s.recent.as_slice()).unwrap_or_default() {
            if !r.recent.contains(writer) {
                r.recent.push(*writer);
            }
        }
        r.recent
            .retain(|(_, v)| *v < r.version || (*v == r.version && again.is_none()));
        r.recent.sort_by_key(|(_, v)| *v);
        trim_recent(&mut r.recent);
        r
    });
    if !key_region {
        return Settled {
            base,
            drive: Vec::new(),
            folded: BTreeMap::new(),
        };
    }
    let mut writes = unsettled.writes;
    writes.retain(|v, _| !unsettled.unconfirmed.contains(v));
    // A version committed further down the chain than every source holding
    // it pending is in flight too (those sources hold it pending as well;
    // this only guards against one missing).
    if let Some(s) = stored.filter(|s| Some(s.version) > base_version) {
        writes
            .entry(s.version)
            .or_insert_with(|| committed_write(s));
    }
    let drive: Vec<PendingWrite> = writes
        .into_values()
        .filter(|w| Some(w.version) > base_version || Some(w.version) == again)
        .collect();
    let mut folded = unsettled.folded;
    // The key is new, yet a source committed a tombstone before the first
    // update driven: a deletion, whose writers (and those before it) are
    // in no object. Their retries must still be answered as done, so the
    // first update's commit remembers them (simulator seed 511009790: a
    // key region rebuilt over a deleted key forgot the put the deletion
    // followed, and that put's retry was applied a second time over a
    // later acknowledged put).
    if let (None, Some(first), Some(s)) = (&base, drive.first(), stored) {
        let known = folded.entry(first.version).or_default();
        for writer in s.recent.iter().filter(|(_, v)| *v < first.version) {
            if !known.contains(writer) {
                known.push(*writer);
            }
        }
        if known.is_empty() {
            folded.remove(&first.version);
        }
    }
    Settled {
        base,
        drive,
        folded,
    }
}

/// A committed record's version as an update to drive again: its object,
/// and its writer as `recent` remembers it (REPAIR when it does not).
fn committed_write(record: &Record) -> PendingWrite {
    PendingWrite {
        version: record.version,
        object: record.object.clone(),
        client: record
            .recent
            .iter()
            .find(|(_, v)| *v == record.version)
            .map_or(ClientRef::REPAIR, |(c, _)| *c),
        follows: None,
    }
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
    // At one version an object is either deleted everywhere or lives in
    // exactly one region of each part; the other regions a move crossed
    // hold a tombstone at that version. So at equal versions a live copy
    // is the version's object, whichever source answered first
    // (simulator seeds 66 and 78 with rebuilds on failure: a key region
    // rebuilt from a hybrid kept the tombstone of the region the object
    // left and lost the object).
    let newer = supersedes(
        stored.version,
        stored.object.is_some(),
        incoming.version,
        || incoming.object.is_some(),
    );
    let mut merged = if newer { incoming } else { stored.clone() };
    merged.recent = recent;
    (&merged != stored).then_some(merged)
}

/// Whether a record at version `incoming` (holding an object when
/// `incoming_live` says so, asked only at equal versions) replaces one
/// stored at `stored`: the newer version, and at one version an object
/// over a tombstone (see [`merge_record`]). Rebuilds and transfers both
/// store by it.
pub fn supersedes(
    stored: Version,
    stored_live: bool,
    incoming: Version,
    incoming_live: impl FnOnce() -> bool,
) -> bool {
    incoming > stored || (incoming == stored && !stored_live && incoming_live())
}

/// What the node must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Delete everything this daemon holds of `region` — unless `keep`,
    /// for a refresh: the daemon heads the region, and its copy holds
    /// every update the region acknowledged — and forget what the cores
    /// learned of it, then call [`Rebuilds::cleared`].
    Clear {
        rebuild: u64,
        region: RegionId,
        keep: bool,
    },
    /// Send a message to a peer.
    Send { to: DaemonId, msg: RebuildMsg },
    /// Store these entries of `region` with [`merge_record`].
    Store {
        region: RegionId,
        entries: Vec<RebuildEntry>,
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
    /// Regions whose rebuild to this daemon left the configuration while
    /// the region had no daemon, with that rebuild's id. Whether the copy
    /// is partial is not known yet: the rebuild may have completed in a
    /// configuration this daemon never installed (it was cut off and then
    /// taken offline), and then the copy is whole and the region comes
    /// back to it. Decided once the region has a daemon again.
    ended: BTreeMap<RegionId, u64>,
}

impl Rebuilds {
    pub fn new(me: DaemonId) -> Rebuilds {
        Rebuilds {
            me,
            targets: BTreeMap::new(),
            ended: BTreeMap::new(),
        }
    }

    /// A new configuration: start the rebuilds it names to this daemon;
    /// forget those it no longer names, deleting the partial copy of
    /// those that did not make this daemon a member.
    ///
    /// A rebuild that ended while its region has no daemon decides
    /// nothing yet: a configuration this daemon missed may have completed
    /// it (made this daemon the region's chain) before a later one took
    /// the daemon offline, and then the coordinator gives the region back
    /// to it as its last daemon, whole. Deleting the copy then lost every
    /// object of the region for good (seed 80001049). A copy that was
    /// partial can only come back to this daemon through a rebuild (which
    /// clears first) or a transfer (which replaces what differs), so
    /// keeping it until the region has a daemon again is harmless.
    pub fn on_config(&mut self, config: &Configuration) -> Vec<Action> {
        let ended = &mut self.ended;
        self.targets.retain(|id, t| {
            let named = config.rebuilds.iter().any(|b| b.id == *id);
            if !named {
                ended.insert(t.region, *id);
            }
            named
        });
        let me = self.me;
        let mut actions = Vec::new();
        self.ended.retain(|&region, &mut rebuild| {
            let Some((_, _, r)) = config.region(region) else {
                return false; // Removed with its space: the node drops it.
            };
            if r.chain.is_empty() {
                return true;
            }
            if !r.chain.contains(&me) {
                // Another daemon holds the region now: this copy, whole or
                // partial, is stale.
                actions.push(Action::Clear {
                    rebuild,
                    region,
                    keep: false,
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
            let refresh = config
                .region(b.region)
                .is_some_and(|(_, _, r)| r.chain.contains(&self.me));
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
                keep: refresh,
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
        entries: Vec<RebuildEntry>,
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

    fn decode(entry: &RebuildEntry) -> Option<Record> {
        entry
            .committed
            .as_deref()
            .map(|b| Record::decode(b).unwrap())
    }

    fn write(version: u64, object: Option<Object>, n: u64, follows: Option<u64>) -> PendingWrite {
        PendingWrite {
            version: Version(version),
            object,
            client: writer(n),
            follows: follows.map(Version),
        }
    }

    #[test]
    fn a_source_sends_its_committed_record_as_the_lost_region_stores_it() {
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
        // Moving out: the committed object, and the pending update whole.
        let moving_out = write(5, Some(object(9, there)), 2, Some(4));
        let entry = rebuild_entry(&lost, &key, Some(&committed), vec![moving_out.clone()]).unwrap();
        assert_eq!(decode(&entry), Some(committed.clone()));
        assert_eq!(entry.pending, vec![moving_out]);
        // Never in the lost region: nothing to send.
        let elsewhere = Record {
            object: Some(object(9, there)),
            ..committed.clone()
        };
        assert_eq!(rebuild_entry(&lost, &key, Some(&elsewhere), vec![]), None);
        // Moving in: sent, the committed record as a tombstone here.
        let moving_in = write(5, Some(object(9, here)), 2, None);
        let entry = rebuild_entry(&lost, &key, Some(&elsewhere), vec![moving_in]).unwrap();
        assert_eq!(decode(&entry).unwrap().object, None);
        assert_eq!(decode(&entry).unwrap().version, Version(4));
        // A tombstone is sent to a region that is not a key region: the
        // lost region applied the update that left it (simulator seed
        // 92001966 needed one that moved the object out of the lost region
        // to be recognized). A key region takes only its own keys
        // (simulator seed 81000931 drove another region's key).
        let tombstone = Record {
            object: None,
            ..committed
        };
        let entry = rebuild_entry(&lost, &key, Some(&tombstone), vec![]).unwrap();
        assert_eq!(decode(&entry), Some(tombstone.clone()));
        let key_region = space.key_region(&Value::Int(9)).unwrap().id;
        let lost_key = LostRegion {
            space: &space,
            part: 0,
            region: key_region,
        };
        let entry = rebuild_entry(&lost_key, &key, Some(&tombstone), vec![]).unwrap();
        assert_eq!(decode(&entry), Some(tombstone.clone()));
        let other = space.subspaces[0]
            .regions
            .iter()
            .find(|r| r.id != key_region);
        let other = LostRegion {
            region: other.unwrap().id,
            ..lost_key
        };
        assert_eq!(rebuild_entry(&other, &key, Some(&tombstone), vec![]), None);
    }

    #[test]
    fn settling_holds_committed_what_every_source_holding_a_later_update_committed() {
        let space = space();
        let (here, there) = a_in_each_region(&space);
        let (old, moved) = (Some(object(9, here)), Some(object(9, there)));
        let record = |v: u64, object: Option<Object>, n: u64| Record {
            version: Version(v),
            object,
            recent: vec![(writer(n), Version(v))],
        };
        // A relocation, v5, pending in the region the object leaves (it
        // follows v4 there) and in the one it enters; further down the
        // chain v5 committed, and the stored record is that newest one.
        let mut unsettled = Unsettled::default();
        unsettled.add(
            Some(&record(4, old.clone(), 1)),
            vec![write(5, moved.clone(), 2, Some(4))],
        );
        unsettled.add(
            Some(&record(1, None, 7)),
            vec![write(5, moved.clone(), 2, None)],
        );
        let stored = record(5, moved.clone(), 2);
        // The region entered holds an old tombstone: it does not count.
        let key_region = settle(true, Some(&stored), unsettled.clone());
        let base = key_region.base.unwrap();
        assert_eq!((base.version, base.object), (Version(4), old.clone()));
        assert_eq!(base.recent, vec![(writer(1), Version(4))]);
        assert_eq!(key_region.drive, vec![write(5, moved.clone(), 2, Some(4))]);
        // Another region holds the base; its point leader drives v5.
        let other = settle(false, Some(&stored), unsettled);
        assert_eq!(other.base.unwrap().version, Version(4));
        assert!(other.drive.is_empty());
        // A key no source held committed (an insert in flight): nothing
        // committed, the insert driven.
        let mut insert = Unsettled::default();
        insert.add(None, vec![write(3, old.clone(), 4, None)]);
        let settled = settle(true, Some(&record(3, old.clone(), 4)), insert);
        assert_eq!(settled.base, None);
        assert_eq!(settled.drive, vec![write(3, old.clone(), 4, None)]);
        // Two sources with pending updates: the older committed version is
        // the base, every version above it is driven, in order, and a
        // version only committed further down is driven too, its writer
        // taken from `recent`.
        let mut two = Unsettled::default();
        two.add(
            Some(&record(6, old.clone(), 1)),
            vec![write(7, moved.clone(), 2, Some(6))],
        );
        two.add(
            Some(&record(5, old.clone(), 3)),
            vec![
                write(6, old.clone(), 1, Some(5)),
                write(7, moved.clone(), 2, Some(6)),
            ],
        );
        let settled = settle(true, Some(&record(8, moved.clone(), 9)), two);
        assert_eq!(settled.base.unwrap().version, Version(5));
        let driven: Vec<(u64, ClientRef)> = settled
            .drive
            .iter()
            .map(|w| (w.version.0, w.client))
            .collect();
        assert_eq!(driven, vec![(6, writer(1)), (7, writer(2)), (8, writer(9))]);
    }

    #[test]
    fn a_key_rebuilt_as_new_over_a_deletion_remembers_the_deletions_writers() {
        let space = space();
        let (here, _) = a_in_each_region(&space);
        // v2 put the object, v3 deleted it; one source holds that
        // tombstone, another the put v5 pending that brings the object
        // into its region (it follows nothing there).
        let tombstone = Record {
            version: Version(3),
            object: None,
            recent: vec![(writer(1), Version(2)), (writer(2), Version(3))],
        };
        let mut unsettled = Unsettled::default();
        unsettled.add(None, vec![write(5, Some(object(9, here)), 3, None)]);
        let settled = settle(true, Some(&tombstone), unsettled);
        // Nothing committed is the base; the deletion, committed further
        // down than every source holding a later update, is driven first,
        // then the put.
        assert_eq!(settled.base, None);
        let driven: Vec<u64> = settled.drive.iter().map(|w| w.version.0).collect();
        assert_eq!(driven, vec![3, 5]);
        // The put the deletion followed is in no object; its retry is
        // answered as done once the first driven version commits (seed
        // 511009790 applied it a second time).
        assert_eq!(
            settled.folded.get(&Version(3)),
            Some(&vec![(writer(1), Version(2))])
        );
        // Only the first driven version's own writer stored: none added.
        let mut insert = Unsettled::default();
        insert.add(None, vec![write(3, None, 2, None)]);
        let own = Record {
            recent: vec![(writer(2), Version(3))],
            ..tombstone
        };
        let settled = settle(true, Some(&own), insert);
        assert!(settled.folded.is_empty(), "{:?}", settled.folded);
    }

    #[test]
    fn a_refresh_drives_every_version_above_its_own_with_the_writers_folded_in() {
        let space = space();
        let (here, there) = a_in_each_region(&space);
        let (old, moved) = (Some(object(9, here)), Some(object(9, there)));
        // The refreshed point leader holds v4 committed; it had started v5
        // and v6 and forgot them on restarting.
        let own = Record {
            version: Version(4),
            object: old.clone(),
            recent: vec![(writer(1), Version(4))],
        };
        // The region v6 moved the object out of holds its tombstone; the
        // region it entered holds it live, with v5's writer in `recent`
        // (v5 committed there, then v6 over it).
        let left = Record {
            version: Version(6),
            object: None,
            recent: vec![
                (writer(1), Version(4)),
                (writer(2), Version(5)),
                (writer(3), Version(6)),
            ],
        };
        let entered = Record {
            object: moved.clone(),
            ..left.clone()
        };
        let mut unsettled = Unsettled::default();
        unsettled.add_refreshed(Some(&own), Some(&left), Vec::new());
        unsettled.add_refreshed(Some(&own), Some(&entered), Vec::new());
        // An older record of a third source says nothing new.
        unsettled.add_refreshed(Some(&own), Some(&own), Vec::new());
        let settled = settle(true, Some(&own), unsettled);
        // Its own record stays the base, even though a source committed
        // v6: a region rebuilt from the parts before that source may lack
        // v6, so the leader drives it again, with the live object.
        assert_eq!(settled.base.as_ref().map(|r| r.version), Some(Version(4)));
        assert_eq!(settled.drive, vec![write(6, moved.clone(), 3, None)]);
        // v5's effects are in v6's object: its retry waits for v6.
        assert_eq!(
            settled.folded.get(&Version(6)),
            Some(&vec![(writer(2), Version(5))])
        );
        // A version only tombstones report may be a move into a region
        // rebuilt since without it: not driven (it was never
        // acknowledged), where driving it would delete the object.
        let mut only_tombstones = Unsettled::default();
        only_tombstones.add_refreshed(Some(&own), Some(&left), Vec::new());
        let settled = settle(true, Some(&own), only_tombstones);
        assert!(settled.drive.is_empty(), "{:?}", settled.drive);
        // A pending update travels whole, so a source holding v6 pending
        // confirms a deletion the tombstones report.
        let mut deleted = Unsettled::default();
        deleted.add_refreshed(Some(&own), Some(&left), Vec::new());
        deleted.add_refreshed(Some(&own), None, vec![write(6, None, 3, Some(4))]);
        let settled = settle(true, Some(&own), deleted);
        assert_eq!(settled.drive, vec![write(6, None, 3, Some(4))]);
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
        // At one version the live copy wins over a tombstone of a region
        // the object left, whichever arrives first (simulator seeds 66 and
        // 78 lost an object to the order of two sources' pages).
        let left = Record {
            object: None,
            recent: Vec::new(),
            ..new.clone()
        };
        let kept = merge_record(Some(&left), new.clone()).unwrap();
        assert_eq!(kept.object, new.object);
        let after = merge_record(Some(&new), left).unwrap_or(new.clone());
        assert_eq!(after.object, new.object);
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
        let committed = |record: &Record| {
            let entry = rebuild_entry(&lost, &key, Some(record), Vec::new()).unwrap();
            Record::decode(&entry.committed.unwrap()).unwrap()
        };
        let (from_left, from_entered) = (committed(&left), committed(&entered));
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

    /// A key region rebuilt from a covering set that mixes parts
    /// (simulator seed 391008841: hybrid region r5, and replex regions r11
    /// and r12 for the failed hybrid region r6). v5 moved the object in
    /// both parts: the replex region it left, further down the chain,
    /// committed v5 (a tombstone), while the hybrid region it entered holds
    /// v5 pending, following nothing there, over a tombstone of its own
    /// from an earlier move out. No source shows the object before v5, but
    /// the key is not new: the rebuilt key region holds v5 with the
    /// update's object (not nothing, read as NotFound), older writers
    /// kept, and drives v5 again for the member that holds it pending.
    #[test]
    fn a_key_region_rebuilt_around_a_move_keeps_the_moved_object() {
        let space = space();
        let (_, there) = a_in_each_region(&space);
        let moved = Some(object(9, there));
        // The replex region the object left: v5's tombstone.
        let left = Record {
            version: Version(5),
            object: None,
            recent: vec![(writer(1), Version(3)), (writer(2), Version(5))],
        };
        // The hybrid region it entered: an older tombstone, v5 pending.
        let entered = Record {
            version: Version(3),
            object: None,
            recent: vec![(writer(1), Version(3))],
        };
        let pending = write(5, moved.clone(), 2, None);
        let stored = merge_record(Some(&left), entered.clone()).unwrap_or(left.clone());
        let mut unsettled = Unsettled::default();
        unsettled.add(Some(&entered), vec![pending.clone()]);
        let settled = settle(true, Some(&stored), unsettled.clone());
        let base = settled.base.expect("the key is not new");
        assert_eq!((base.version, base.object), (Version(5), moved.clone()));
        // v5's writer comes back with v5's commit; until then its retry
        // finds v5 pending.
        assert_eq!(base.recent, vec![(writer(1), Version(3))]);
        assert_eq!(settled.drive, vec![pending]);
        // Any other rebuilt region still holds nothing of it: its point
        // leader drives v5.
        let other = settle(false, Some(&stored), unsettled);
        assert_eq!(other.base, None);
        assert!(other.drive.is_empty());
    }

    /// A key region rebuilt beside a region that lost its pending update
    /// (simulator seed 395000268: hybrid regions r5 and r6). v4 moved the
    /// object out of one replex region into the other; v5 moves it back.
    /// The region v5 leaves was rebuilt while v5 was in flight, as a
    /// region that is not a key region: it kept v4 committed and left v5
    /// to the point leader — the key region rebuilt now — so it holds v4
    /// live and nothing pending. The region v5 enters holds v4's tombstone
    /// and v5 pending, following nothing there. No pending update follows
    /// a committed version, but the key is not new: the rebuilt key region
    /// holds v4, acknowledged, committed (not pending, read as NotFound),
    /// and drives v5 from it.
    #[test]
    fn a_key_region_rebuilt_beside_a_region_that_lost_its_pending_update_keeps_the_object() {
        let space = space();
        let (here, there) = a_in_each_region(&space);
        let (old, moved) = (Some(object(9, here)), Some(object(9, there)));
        let lagging = Record {
            version: Version(4),
            object: old.clone(),
            recent: vec![(writer(1), Version(3)), (writer(2), Version(4))],
        };
        let left = Record {
            version: Version(4),
            object: None,
            recent: vec![(writer(2), Version(4))],
        };
        let pending = write(5, moved.clone(), 3, None);
        // A source with nothing pending adds no `Unsettled` entry.
        let mut unsettled = Unsettled::default();
        unsettled.add(Some(&left), vec![pending.clone()]);
        for (first, second) in [(&left, &lagging), (&lagging, &left)] {
            let stored = merge_record(Some(first), second.clone()).unwrap_or(first.clone());
            let settled = settle(true, Some(&stored), unsettled.clone());
            let base = settled.base.expect("the key is not new");
            assert_eq!((base.version, base.object), (Version(4), old.clone()));
            assert_eq!(
                base.recent,
                vec![(writer(1), Version(3)), (writer(2), Version(4))]
            );
            assert_eq!(settled.drive, vec![pending.clone()]);
        }
    }

    fn config_with(rebuilds: Vec<Rebuild>) -> Configuration {
        Configuration {
            spaces: vec![space()],
            rebuilds,
            ..Configuration::default()
        }
    }

    fn entry(k: u8) -> RebuildEntry {
        RebuildEntry {
            key: vec![k],
            committed: None,
            pending: Vec::new(),
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
                region: RegionId(1),
                keep: false,
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
                region: RegionId(1),
                keep: false,
            }]
        );
        assert_eq!(target.running(), 0);
    }

    /// `config` with region `region`'s chain set to `chain`.
    fn chained(mut config: Configuration, region: RegionId, chain: &[DaemonId]) -> Configuration {
        for layout in &mut config.spaces[0].subspaces {
            for r in layout.regions.iter_mut().filter(|r| r.id == region) {
                r.chain = chain.to_vec();
            }
        }
        config
    }

    #[test]
    fn a_rebuild_that_ends_while_its_region_has_no_daemon_keeps_the_copy_until_it_has_one() {
        let me = DaemonId(9);
        let b = |id| Rebuild {
            id,
            region: RegionId(1),
            to: me,
            sources: vec![(RegionId(3), DaemonId(2))],
        };
        let lost = |rebuilds| chained(config_with(rebuilds), RegionId(1), &[]);
        // The target completes rebuild 7 and reports it, but is cut off:
        // the next configuration it installs no longer names the rebuild
        // and has the region without a daemon (it joined, then was taken
        // offline). Its copy may be the whole region: nothing is cleared.
        let mut target = Rebuilds::new(me);
        target.on_config(&lost(vec![b(7)]));
        target.cleared(7);
        let done = target.on_page(7, RegionId(3), None, vec![entry(1)], Some(vec![1]), true);
        assert_eq!(done.last(), Some(&Action::Complete { rebuild: 7 }));
        assert_eq!(target.on_config(&lost(Vec::new())), vec![]);
        assert_eq!(target.running(), 0);
        // The coordinator gives the region back to its last daemon: the
        // copy is the region's, and stays.
        let back = chained(config_with(Vec::new()), RegionId(1), &[me]);
        assert_eq!(target.on_config(&back), vec![]);
        // Had it gone to another daemon instead, the copy would be partial
        // or stale, and cleared, once.
        let mut target = Rebuilds::new(me);
        target.on_config(&lost(vec![b(8)]));
        assert_eq!(target.on_config(&lost(Vec::new())), vec![]);
        let elsewhere = chained(config_with(Vec::new()), RegionId(1), &[DaemonId(4)]);
        assert_eq!(
            target.on_config(&elsewhere),
            vec![Action::Clear {
                rebuild: 8,
                region: RegionId(1),
                keep: false,
            }]
        );
        assert_eq!(target.on_config(&elsewhere), vec![]);
    }
}
