//! Reads over committed data: get at the point leader, and search pages
//! over one region at one of its replicas.
//!
//! A search is paged: every request names where to continue (`after`) and
//! every answer is one frame bounded by [`PAGE_OBJECTS_MAX`] objects (or
//! [`KEYS_PAGE_MAX`] keys) and about [`PAGE_BYTES_MAX`] bytes — far below
//! the frame maximum, so a region of any size streams without the daemon or
//! the client holding more than a page. The daemon keeps no cursor state:
//! a page is a fresh read starting after the given position — through the
//! region's index when the checks select few entries of it
//! ([`index::choose_access`]), else a scan of the region.

use crate::auth::{self, Credentials};
use crate::chain::{check_key, key_region};
use crate::index::stored_object;
use crate::index::{self, Access, PageBounds};
use crate::record::Record;
use tessera_protocol::{
    Auth, AuthOp, DaemonRequest, DaemonResponse, ObjectBytes, ObjectView, SearchAfter, SortBy,
    Status,
};
use tessera_storage::{Engine, IndexRange};
use tessera_types::coordinate::key_bytes;
use tessera_types::lookup::after_prefix;
use tessera_types::replex::Within;
use tessera_types::sortkey::{sort_key, sort_key_len, value_of};
use tessera_types::{
    Check, Configuration, DaemonId, DataType, Epoch, Object, RegionDirectory, RegionId, SpaceDesc,
    SpaceId, SubspaceKind, Value,
};

/// The most objects in one search page.
pub const PAGE_OBJECTS_MAX: usize = 256;
/// The most keys in one keys-only page.
pub const KEYS_PAGE_MAX: usize = 4096;
/// A page is cut once its stored records reach this many bytes (a page
/// always holds at least one object, so one larger object still travels).
pub const PAGE_BYTES_MAX: usize = 256 * 1024;

fn failed(status: Status, reason: impl Into<String>) -> DaemonResponse {
    DaemonResponse::Failed {
        status,
        reason: reason.into(),
    }
}

/// What a read needs of its daemon: the configuration it routes by, who it
/// is, and the engine to read from.
pub struct ReadView<'a> {
    pub config: &'a Configuration,
    /// `config`'s regions by id.
    pub directory: &'a RegionDirectory,
    pub me: DaemonId,
    pub engine: &'a dyn Engine,
}

/// A get at daemon `me` under `config`: the key's committed object, if
/// `me` is its point leader and the client's epoch is `config`'s. (A
/// committed version at the point leader is held by every replica.) On a
/// space `with authorization` the object is returned only if `auth`
/// authorizes reading it, and a missing one is UNAUTHORIZED (API.md §10).
pub fn get_committed(
    config: &Configuration,
    me: DaemonId,
    engine: &dyn Engine,
    epoch: Epoch,
    space: SpaceId,
    key: &Value,
    auth: &Auth,
) -> Result<DaemonResponse, ReadFailed> {
    if epoch != config.epoch {
        return Ok(DaemonResponse::WrongEpoch {
            epoch: config.epoch,
        });
    }
    let Some(space) = config.space_by_id(space) else {
        return Ok(failed(Status::UnknownSpace, "no space has this id"));
    };
    if let Err(r) = check_key(space, key) {
        return Ok(r.into());
    }
    let Some(region) = key_region(space, key) else {
        return Ok(failed(Status::Internal, "the key subspace has no regions"));
    };
    if region.chain.first() != Some(&me) {
        return Ok(failed(
            Status::Reconfigure,
            "this daemon is not the key's point leader",
        ));
    }
    let desc = &space.desc;
    let mut answer = None;
    engine
        .read(region.id, &key_bytes(key), &mut |bytes| {
            let Some(bytes) = bytes else { return };
            answer = Some(if desc.authorization {
                Record::decode(bytes)
                    .map(|record| get_answer(desc, auth, Some(record)))
                    .map_err(ReadFailed::of)
            } else {
                // The object's bytes as stored, copied once out of the
                // engine: nothing is decoded but the record's version (the
                // client decodes the object).
                stored_object(bytes)
                    .map(|(version, view)| match view {
                        Some(view) => DaemonResponse::Found {
                            version,
                            object: ObjectBytes::from_view(view),
                        },
                        None => get_answer(desc, auth, None),
                    })
                    .map_err(ReadFailed::of)
            });
        })
        .map_err(ReadFailed::of)?;
    answer.unwrap_or_else(|| Ok(get_answer(desc, auth, None)))
}

/// The answer to a get that found `record` (none: no record), in a space
/// that may check authorization and strip the secret.
fn get_answer(desc: &SpaceDesc, auth: &Auth, record: Option<Record>) -> DaemonResponse {
    let object = record.as_ref().and_then(|r| r.object.as_ref());
    if desc.authorization {
        let authorized =
            Credentials::parse(auth).and_then(|c| c.authorize_object(desc, object, AuthOp::Read));
        if let Err(e) = authorized {
            return failed(Status::Unauthorized, e.to_string());
        }
    }
    match record {
        Some(Record {
            version,
            object: Some(object),
            ..
        }) => DaemonResponse::Found {
            version,
            object: ObjectBytes::encode(&auth::strip(desc, object)),
        },
        _ => failed(Status::NotFound, "no object has this key"),
    }
}

/// Which objects a search may return: all of them, or on a space `with
/// authorization` those the request's macaroons authorize for an
/// operation (the rule of `docs/design/authorization.md`).
enum Readers {
    Anyone,
    Only(Credentials, AuthOp),
}

impl Readers {
    /// The readers of a search of `space` with `checks` and `auth`, or the
    /// UNAUTHORIZED refusal of a search that can return nothing: one
    /// without a decodable macaroon, or whose predicates name the secret.
    fn of(
        config: &Configuration,
        space: SpaceId,
        checks: &[Check],
        (auth, op): (&Auth, AuthOp),
    ) -> Result<Readers, DaemonResponse> {
        let Some(desc) = config.space_by_id(space).map(|s| &s.desc) else {
            return Ok(Readers::Anyone);
        };
        if !desc.authorization {
            return Ok(Readers::Anyone);
        }
        auth::check_predicates(desc, checks)
            .and_then(|()| Credentials::parse(auth))
            .map(|c| Readers::Only(c, op))
            .map_err(|e| failed(Status::Unauthorized, e.to_string()))
    }

    fn admit(&self, desc: &SpaceDesc, object: &Object) -> bool {
        match self {
            Readers::Anyone => true,
            Readers::Only(credentials, op) => credentials
                .authorize_object(desc, Some(object), *op)
                .is_ok(),
        }
    }
}

/// Reads pages with `read` from `after` until one keeps an object that
/// `readers` admit, or the region ends: a page whose objects were all
/// withheld would give the client no position to continue after. Returns
/// the admitted matches and whether more may follow.
fn admitted_page(
    config: &Configuration,
    space: SpaceId,
    readers: &Readers,
    mut after: Option<SearchAfter>,
    position: impl Fn(&crate::index::Match) -> SearchAfter,
    mut read: impl FnMut(Option<&SearchAfter>) -> Result<(Vec<crate::index::Match>, bool), ReadFailed>,
) -> Result<(Vec<crate::index::Match>, bool), ReadFailed> {
    let desc = config.space_by_id(space).map(|s| &s.desc);
    loop {
        let (matches, more) = read(after.as_ref())?;
        let (Readers::Only(..), Some(desc)) = (readers, desc) else {
            return Ok((matches, more));
        };
        let last = matches.last().map(&position);
        // Authorization reads any attribute, so here objects are decoded
        // whole, and those kept are encoded again without their secret.
        let mut kept = Vec::with_capacity(matches.len());
        for mut m in matches {
            let object = m.object.decode().map_err(ReadFailed::of)?;
            if readers.admit(desc, &object) {
                m.object = ObjectBytes::encode(&auth::strip(desc, object));
                kept.push(m);
            }
        }
        match last {
            Some(last) if kept.is_empty() && more => after = Some(last),
            _ => return Ok((kept, more)),
        }
    }
}

/// Checks that this daemon holds `region` of `space` in `epoch`.
fn check_region(
    view: &ReadView<'_>,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
) -> Result<(), DaemonResponse> {
    let config = view.config;
    if epoch != config.epoch {
        return Err(DaemonResponse::WrongEpoch {
            epoch: config.epoch,
        });
    }
    match view.directory.region(config, region) {
        // A replex region being refreshed: this daemon's copy may miss
        // what changed while it was away until the refresh completes, so
        // readers go to its covering set (`replex::failed_regions`).
        Some((s, _, r)) if s.id == space && r.chain.contains(&view.me) => {
            if config.rebuilding(region) {
                Err(failed(Status::Offline, "this region is being refreshed"))
            } else {
                Ok(())
            }
        }
        Some(_) => Err(failed(
            Status::Reconfigure,
            "this daemon does not hold that region",
        )),
        None => Err(failed(Status::UnknownSpace, "no such region")),
    }
}

/// How a search reads `region` of `space` (see [`index::choose_access`]).
fn access_for(
    view: &ReadView<'_>,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    sort: Option<SortBy>,
    wanted: usize,
) -> Access {
    let place = view
        .directory
        .region(view.config, region)
        .filter(|(s, ..)| s.id == space);
    match place {
        Some((space, subspace, _)) => index::choose_access(
            &space.desc,
            &index::place_in(
                space,
                subspace,
                view.directory.place(region).map_or(0, |p| p.region),
            ),
            checks,
            sort,
            Some(wanted as u64),
        ),
        None => Access::Scan,
    }
}

/// The number of objects a page may hold when the client asks for at most
/// `limit`.
fn page_objects(limit: Option<u64>, max: usize) -> usize {
    limit.map_or(max, |l| usize::try_from(l).unwrap_or(usize::MAX).min(max))
}

/// Objects a walk that tests a check object by object may load where its
/// request arrived ([`PagePlan::Walk`]).
///
/// A hand-off costs two thread wake-ups, as much as a get, and among
/// pages answered at once a third more again (`docs/BENCHMARKS.md`, "Walks
/// answered where they arrive"); a selective walk (one entry, its other
/// check tested on the object) ends long before this many loads. A walk
/// that passes the budget reads its first loads twice: 64 loads cost
/// about what a hand-off costs among other work (~0.3–0.4 µs each
/// against ~25 µs), so, as in renting until the rent paid equals the
/// price, no walk costs more than about twice what the best choice made
/// in advance would have. The runtime's thread is held for about as long
/// as a bounded page of as many objects holds it.
pub use tessera_types::plan::INLINE_LOADS;

/// Where a search page is read ([`search_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagePlan {
    /// Bounded by its object count ([`index::walk_is_bounded`]): as short
    /// as a get, read where the request arrived.
    AtOnce,
    /// An index walk that leaves a check to test object by object: read
    /// where the request arrived while it loads at most [`INLINE_LOADS`]
    /// objects, handed off if it would load more.
    Walk,
    /// Anything else, handed off to a page thread: a scan (it may read a
    /// whole region), a search of a space with authorization or for a
    /// lane standing in for a failed region (whose filter may drop what
    /// the walk returns), a keys-only search, a lookup.
    Apart,
}

/// Where the page `request` asks for is read ([`PagePlan`]).
pub fn search_plan(view: &ReadView<'_>, request: &DaemonRequest) -> PagePlan {
    let DaemonRequest::Search {
        space,
        region,
        checks,
        sort,
        limit,
        within,
        ..
    } = request
    else {
        return PagePlan::Apart;
    };
    let Some(desc) = view.config.space_by_id(*space).map(|s| &s.desc) else {
        return PagePlan::Apart;
    };
    if desc.authorization {
        return PagePlan::Apart;
    }
    let wanted = page_objects(*limit, PAGE_OBJECTS_MAX);
    let access = access_for(view, *space, *region, checks, *sort, wanted);
    // A page for a lane standing in for a failed region may drop what its
    // walk finds and read on to fill the page; a point read by key (a
    // redirected get) reads one object whatever it keeps.
    if within.is_some() && !matches!(access, Access::Key(_) | Access::Nothing) {
        return PagePlan::Apart;
    }
    if index::walk_is_bounded(desc, &access, checks) {
        PagePlan::AtOnce
    } else if matches!(access, Access::Index { .. } | Access::Equalities { .. }) {
        PagePlan::Walk
    } else {
        PagePlan::Apart
    }
}

/// One page of a search (`DaemonRequest::Search`).
#[allow(clippy::too_many_arguments)]
pub fn search(
    view: &ReadView<'_>,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    sort: Option<SortBy>,
    after: Option<&SearchAfter>,
    limit: Option<u64>,
    auth: &Auth,
    within: Option<&Within>,
) -> Result<DaemonResponse, ReadFailed> {
    if let Err(response) = check_region(view, epoch, space, region) {
        return Ok(response);
    }
    let readers = match Readers::of(view.config, space, checks, (auth, AuthOp::Read)) {
        Ok(readers) => readers,
        Err(refusal) => return Ok(refusal),
    };
    // A lane standing in for a failed region keeps that region's objects
    // alone: the readers drop the others as they read, so a page holds
    // only kept objects (a sorted page stays one scan however few pass).
    // Parts the daemon cannot find leave every match to the client.
    let lost = view.config.space_by_id(space).and_then(|s| {
        let lost = within?.lost_region(s)?;
        Some((s, lost))
    });
    let keeps = |object: &ObjectView<'_>| {
        let Some((space, lost)) = &lost else {
            return true;
        };
        // An object the parts cannot place (it lacks an attribute they
        // place by) is shipped: the client judges it.
        object
            .to_object()
            .ok()
            .and_then(|object| lost.keeps(space, region, &object))
            != Some(false)
    };
    let keep: Option<index::Keep<'_>> = lost.as_ref().map(|_| &keeps as index::Keep<'_>);
    let wanted = page_objects(limit, PAGE_OBJECTS_MAX);
    if wanted == 0 {
        return Ok(DaemonResponse::SearchPage {
            objects: Vec::new(),
            more: false,
        });
    }
    let access = access_for(view, space, region, checks, sort, wanted);
    let engine = view.engine;
    let bounds = PageBounds {
        objects: wanted,
        size: |m| m.bytes,
        size_max: PAGE_BYTES_MAX,
    };
    let position = |m: &index::Match| SearchAfter {
        key: m.key.clone(),
        sort_value: m.sort_value.clone(),
    };
    let read = |after: Option<&SearchAfter>| {
        let page = match sort {
            Some(sort) => {
                let after = after.map(|a| (a.sort_value.as_ref(), a.key.as_slice()));
                index::sorted_page(engine, region, &access, checks, sort, after, bounds, keep)
            }
            None => {
                let after = after.map(|a| a.key.as_slice());
                index::key_order_page(engine, region, &access, checks, after, bounds, keep)
            }
        };
        page.map_err(ReadFailed::of)
    };
    let (matches, more) =
        admitted_page(view.config, space, &readers, after.cloned(), position, read)?;
    Ok(DaemonResponse::SearchPage {
        objects: matches.into_iter().map(|m| (m.version, m.object)).collect(),
        more,
    })
}

/// One page of a keys-only search (`DaemonRequest::SearchKeys`).
pub fn search_keys(
    view: &ReadView<'_>,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    after: Option<&[u8]>,
    auth: (&Auth, AuthOp),
) -> Result<DaemonResponse, ReadFailed> {
    if let Err(response) = check_region(view, epoch, space, region) {
        return Ok(response);
    }
    let readers = match Readers::of(view.config, space, checks, auth) {
        Ok(readers) => readers,
        Err(refusal) => return Ok(refusal),
    };
    let access = access_for(view, space, region, checks, None, KEYS_PAGE_MAX);
    let bounds = PageBounds {
        objects: KEYS_PAGE_MAX,
        size: |m| m.key.len(),
        size_max: PAGE_BYTES_MAX,
    };
    let position = |m: &index::Match| SearchAfter {
        key: m.key.clone(),
        sort_value: None,
    };
    let read = |after: Option<&SearchAfter>| {
        let after = after.map(|a| a.key.as_slice());
        index::key_order_page(view.engine, region, &access, checks, after, bounds, None)
            .map_err(ReadFailed::of)
    };
    let after = after.map(|key| SearchAfter {
        key: key.to_vec(),
        sort_value: None,
    });
    let (matches, more) = admitted_page(view.config, space, &readers, after, position, read)?;
    // Of each object only the key is decoded.
    let mut keys = Vec::with_capacity(matches.len());
    for m in &matches {
        let view = m.object.view().map_err(ReadFailed::of)?;
        keys.extend(view.value(0).map_err(ReadFailed::of)?);
    }
    Ok(DaemonResponse::KeysPage { keys, more })
}

/// A read of committed data failed in the engine or found a record it
/// cannot decode: the daemon's storage can no longer be trusted (the node
/// poisons itself; the client is sent elsewhere).
#[derive(Debug, thiserror::Error)]
#[error("reading committed data failed: {0}")]
pub struct ReadFailed(#[source] Box<dyn std::error::Error + Send + Sync + 'static>);

impl ReadFailed {
    fn of(e: impl std::error::Error + Send + Sync + 'static) -> ReadFailed {
        ReadFailed(Box::new(e))
    }
}

/// One page of a lookup in a global index's indexlet
/// (`DaemonRequest::Lookup`): the entries in `checks`' range after
/// `after`, in value order, each verified against the projection stored
/// beside it (an entry and its record are written in one batch, so a
/// mismatch is not expected, but a lookup never trusts an entry alone) and
/// kept only if every check matches that projection.
#[allow(clippy::too_many_arguments)]
pub fn lookup(
    view: &ReadView<'_>,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    descending: bool,
    after: Option<&SearchAfter>,
    limit: Option<u64>,
) -> Result<DaemonResponse, ReadFailed> {
    if let Err(response) = check_region(view, epoch, space, region) {
        return Ok(response);
    }
    let Some((found, subspace, _)) = view.directory.region(view.config, region) else {
        return Ok(failed(Status::UnknownSpace, "no such region"));
    };
    let layout = &found.subspaces[subspace];
    let (SubspaceKind::GlobalIndex, &[attr]) = (layout.kind, layout.attrs.as_slice()) else {
        return Ok(failed(
            Status::Internal,
            format!("region {region} is not an indexlet of a global index"),
        ));
    };
    if found.desc.authorization {
        return Ok(failed(
            Status::Unauthorized,
            "a space with authorization is not read through a global index",
        ));
    }
    if let Some(other) = checks.iter().find(|c| c.attr != attr || c.path.is_some()) {
        return Ok(failed(
            Status::Internal,
            format!(
                "a lookup's checks are on the indexed attribute {attr} only, not on {}",
                other.attr
            ),
        ));
    }
    let dtype = found.desc.attrs[attr].dtype;
    let wanted = page_objects(limit, PAGE_OBJECTS_MAX);
    let range = tessera_types::lookup::entry_range(checks, attr, dtype);
    let empty = DaemonResponse::LookupPage {
        entries: Vec::new(),
        more: false,
        last: None,
    };
    if wanted == 0 || range.is_empty() {
        return Ok(empty);
    }
    let slot = index::Slot::Ordered(attr).number();
    let start = index::ordered_entry(slot, &range.start, &[]);
    let end = match &range.end {
        Some(end) => Some(index::ordered_entry(slot, end, &[])),
        None => index::entry_bounds(slot, (0, u64::MAX)).1,
    };
    let after = match after {
        Some(after) => match after.sort_value.as_ref().and_then(sort_key) {
            Some(value) => Some((value, after.key.as_slice())),
            None => return Ok(failed(Status::Internal, "a lookup continues after a value")),
        },
        None => None,
    };
    let walk = EntryWalk {
        engine: view.engine,
        region,
        slot,
        string: dtype == DataType::String,
        start,
        end,
    };
    let positions = if descending {
        walk.descending(after, wanted)
    } else {
        walk.ascending(after, wanted)
    }?;
    let mut more = positions.len() == wanted;
    let mut last = positions.last().map(|(value, key)| SearchAfter {
        key: key.clone(),
        sort_value: value_of(value, dtype),
    });
    let read = positions.len();
    let mut entries = Vec::with_capacity(read);
    let mut bytes = 0;
    for (i, (value, key)) in positions.into_iter().enumerate() {
        let Some(stored) = view.engine.get(region, &key).map_err(ReadFailed::of)? else {
            continue;
        };
        let record = Record::decode(&stored).map_err(ReadFailed::of)?;
        let Some(projection) = record.object else {
            continue;
        };
        let current = projection.values.get(attr);
        if current.and_then(sort_key).as_deref() != Some(value.as_slice())
            || !checks.iter().all(|c| c.matches(&projection))
        {
            continue;
        }
        bytes += stored.len();
        entries.push((
            current.cloned().expect("compared"),
            projection.values[0].clone(),
        ));
        if bytes >= PAGE_BYTES_MAX && i + 1 < read {
            // The page is full before the positions read are: it ends
            // here, and the next continues after this entry.
            more = true;
            last = Some(SearchAfter {
                sort_value: value_of(&value, dtype),
                key,
            });
            break;
        }
    }
    Ok(DaemonResponse::LookupPage {
        entries,
        more,
        last,
    })
}

/// Where an entry lies: its sort key and its object's storage key.
type Position = (Vec<u8>, Vec<u8>);

/// Walks the entries of one ordered slot of an indexlet between `start`
/// (inclusive) and `end` (exclusive), collecting `(sort key, storage key)`
/// positions in a lookup's order: by value, ties by key ascending in both
/// directions (as [`SortBy::compare`] orders a sorted search).
struct EntryWalk<'a> {
    engine: &'a dyn Engine,
    region: RegionId,
    slot: usize,
    string: bool,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl EntryWalk<'_> {
    /// Up to `wanted` positions of `[from, to)`, in entry order or reversed.
    fn scan(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        reverse: bool,
        wanted: usize,
        out: &mut Vec<Position>,
    ) -> Result<(), ReadFailed> {
        let from = from.max(self.start.as_slice());
        let to = match (to, self.end.as_deref()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if out.len() >= wanted || to.is_some_and(|to| to <= from) {
            return Ok(());
        }
        let mut malformed = false;
        let range = IndexRange {
            start: from,
            end: to,
            reverse,
        };
        self.engine
            .index_scan(self.region, range, &mut |entry| {
                let rest = entry.get(4..).unwrap_or_default();
                match sort_key_len(rest, self.string) {
                    Some(len) => out.push((rest[..len].to_vec(), rest[len..].to_vec())),
                    None => malformed = true,
                }
                !malformed && out.len() < wanted
            })
            .map_err(ReadFailed::of)?;
        if malformed {
            return Err(ReadFailed::of(MalformedEntry {
                region: self.region,
            }));
        }
        Ok(())
    }

    /// The entry of `value` (a sort key) and `key`, and the first byte
    /// string after every entry of `value`.
    fn entry(&self, value: &[u8], key: &[u8]) -> Vec<u8> {
        index::ordered_entry(self.slot, value, key)
    }

    fn after_value(&self, value: &[u8]) -> Option<Vec<u8>> {
        after_prefix(&self.entry(value, &[]))
    }

    fn ascending(
        &self,
        after: Option<(Vec<u8>, &[u8])>,
        wanted: usize,
    ) -> Result<Vec<Position>, ReadFailed> {
        let mut out = Vec::with_capacity(wanted);
        let from = match after {
            Some((value, key)) => {
                // The smallest entry above the last one returned.
                let mut next = self.entry(&value, key);
                next.push(0);
                next
            }
            None => self.start.clone(),
        };
        self.scan(&from, None, false, wanted, &mut out)?;
        Ok(out)
    }

    /// Largest value first, each value's keys ascending: a reverse walk
    /// finds the next smaller value, a forward walk reads its keys.
    fn descending(
        &self,
        after: Option<(Vec<u8>, &[u8])>,
        wanted: usize,
    ) -> Result<Vec<Position>, ReadFailed> {
        let mut out = Vec::with_capacity(wanted);
        let mut below = self.end.clone();
        if let Some((value, key)) = after {
            // The rest of the last value's keys, then smaller values.
            let mut next = self.entry(&value, key);
            next.push(0);
            let group_end = self.after_value(&value);
            self.scan(&next, group_end.as_deref(), false, wanted, &mut out)?;
            let group = self.entry(&value, &[]);
            below = Some(below.map_or(group.clone(), |b| b.min(group)));
        }
        while out.len() < wanted {
            let mut last = Vec::with_capacity(1);
            self.scan(&self.start, below.as_deref(), true, 1, &mut last)?;
            let Some((value, _)) = last.pop() else {
                break;
            };
            let group = self.entry(&value, &[]);
            let group_end = self.after_value(&value);
            self.scan(&group, group_end.as_deref(), false, wanted, &mut out)?;
            below = Some(group);
        }
        Ok(out)
    }
}

/// An index entry of an ordered slot that does not hold a whole sort key.
#[derive(Debug, thiserror::Error)]
#[error("region {region} holds a malformed global index entry")]
struct MalformedEntry {
    region: RegionId,
}
