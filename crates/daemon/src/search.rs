//! Reads over committed data: get at the point leader, and search pages
//! over one region at one of its replicas.
//!
//! A search is paged: every request names where to continue (`after`) and
//! every answer is one frame bounded by [`PAGE_OBJECTS_MAX`] objects (or
//! [`KEYS_PAGE_MAX`] keys) and about [`PAGE_BYTES_MAX`] bytes — far below
//! the frame maximum, so a region of any size streams without the daemon or
//! the client holding more than a page. The daemon keeps no cursor state:
//! a page is a fresh scan starting after the given position.

use crate::chain::{check_key, key_region};
use crate::shell::{decode_record, Daemon};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use tessera_protocol::{DaemonResponse, SearchAfter, SortBy, Status};
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::{
    Check, Configuration, DaemonId, Epoch, Object, RegionId, SpaceId, Value, Version,
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

pub(crate) fn get(daemon: &Daemon, epoch: Epoch, space: SpaceId, key: &Value) -> DaemonResponse {
    get_committed(
        &daemon.config(),
        daemon.me,
        daemon.engine.as_ref(),
        epoch,
        space,
        key,
    )
}

/// A get at daemon `me` under `config`: the key's committed object, if
/// `me` is its point leader and the client's epoch is `config`'s. (A
/// committed version at the point leader is held by every replica.)
pub fn get_committed(
    config: &Configuration,
    me: DaemonId,
    engine: &dyn Engine,
    epoch: Epoch,
    space: SpaceId,
    key: &Value,
) -> DaemonResponse {
    if epoch != config.epoch {
        return DaemonResponse::WrongEpoch {
            epoch: config.epoch,
        };
    }
    let Some(space) = config.space_by_id(space) else {
        return failed(Status::UnknownSpace, "no space has this id");
    };
    if let Err(r) = check_key(space, key) {
        return failed(r.status, r.reason);
    }
    let Some(region) = key_region(space, key) else {
        return failed(Status::Internal, "the key subspace has no regions");
    };
    if region.chain.first() != Some(&me) {
        return failed(
            Status::Reconfigure,
            "this daemon is not the key's point leader",
        );
    }
    match engine.get(region.id, &key_bytes(key)) {
        Err(e) => failed(Status::ServerError, e.to_string()),
        Ok(None) => failed(Status::NotFound, "no object has this key"),
        Ok(Some(bytes)) => match decode_record(&bytes) {
            Err(response) => response,
            Ok(record) => match record.object {
                Some(object) => DaemonResponse::Found {
                    version: record.version,
                    object,
                },
                None => failed(Status::NotFound, "no object has this key"),
            },
        },
    }
}

/// Checks that this daemon holds `region` of `space` in `epoch`.
fn check_region(
    daemon: &Daemon,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
) -> Result<(), DaemonResponse> {
    let config = daemon.config();
    if epoch != config.epoch {
        return Err(DaemonResponse::WrongEpoch {
            epoch: config.epoch,
        });
    }
    match config.region(region) {
        Some((s, _, r)) if s.id == space && r.chain.contains(&daemon.me) => Ok(()),
        Some(_) => Err(failed(
            Status::Reconfigure,
            "this daemon does not hold that region",
        )),
        None => Err(failed(Status::UnknownSpace, "no such region")),
    }
}

/// Visits, in key order after `after`, the region's committed objects that
/// match every check: `visit(key bytes, version, object, record bytes)`
/// returns whether to go on.
fn scan_matching(
    daemon: &Daemon,
    region: RegionId,
    checks: &[Check],
    after: Option<&[u8]>,
    mut visit: impl FnMut(&[u8], Version, Object, usize) -> bool,
) -> Result<(), DaemonResponse> {
    let mut error = None;
    daemon
        .engine
        .scan(
            region,
            after,
            &mut |key, bytes| match decode_record(bytes) {
                Ok(record) => match record.object {
                    Some(object) if checks.iter().all(|c| c.matches(&object)) => {
                        visit(key, record.version, object, bytes.len())
                    }
                    _ => true,
                },
                Err(e) => {
                    error = Some(e);
                    false
                }
            },
        )
        .map_err(|e| failed(Status::ServerError, e.to_string()))?;
    error.map_or(Ok(()), Err)
}

/// The number of objects a page may hold when the client asks for at most
/// `limit`.
fn page_objects(limit: Option<u64>, max: usize) -> usize {
    limit.map_or(max, |l| usize::try_from(l).unwrap_or(usize::MAX).min(max))
}

/// One page of a search (`DaemonRequest::Search`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn search(
    daemon: &Daemon,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    sort: Option<SortBy>,
    after: Option<&SearchAfter>,
    limit: Option<u64>,
) -> DaemonResponse {
    if let Err(response) = check_region(daemon, epoch, space, region) {
        return response;
    }
    let wanted = page_objects(limit, PAGE_OBJECTS_MAX);
    if wanted == 0 {
        return DaemonResponse::SearchPage {
            objects: Vec::new(),
            more: false,
        };
    }
    let page = match sort {
        Some(sort) => sorted_page(daemon, region, checks, sort, after, wanted),
        None => key_order_page(daemon, region, checks, after, wanted),
    };
    match page {
        Ok((objects, more)) => DaemonResponse::SearchPage { objects, more },
        Err(response) => response,
    }
}

type Page = (Vec<(Version, Object)>, bool);

/// The next `wanted` matches in key order after `after`.
fn key_order_page(
    daemon: &Daemon,
    region: RegionId,
    checks: &[Check],
    after: Option<&SearchAfter>,
    wanted: usize,
) -> Result<Page, DaemonResponse> {
    let mut objects = Vec::new();
    let mut bytes_total = 0;
    let mut more = false;
    let after = after.map(|a| a.key.as_slice());
    scan_matching(
        daemon,
        region,
        checks,
        after,
        |_, version, object, bytes| {
            objects.push((version, object));
            bytes_total += bytes;
            more = objects.len() >= wanted || bytes_total >= PAGE_BYTES_MAX;
            !more
        },
    )?;
    Ok((objects, more))
}

/// One candidate of a sorted page, ordered by [`SortBy::compare`] so that
/// a max-heap keeps the worst candidate on top.
struct Ranked {
    sort: SortBy,
    key: Vec<u8>,
    version: Version,
    object: Object,
    bytes: usize,
}

impl Ranked {
    fn value(&self) -> &Value {
        &self.object.values[self.sort.attr]
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sort
            .compare((self.value(), &self.key), (other.value(), &other.key))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

/// The best `wanted` matches in sort order strictly after `after`: a scan
/// of the whole region keeping a heap of `wanted` candidates, so the
/// daemon holds at most one page whatever the region's size.
fn sorted_page(
    daemon: &Daemon,
    region: RegionId,
    checks: &[Check],
    sort: SortBy,
    after: Option<&SearchAfter>,
    wanted: usize,
) -> Result<Page, DaemonResponse> {
    let mut heap: BinaryHeap<Ranked> = BinaryHeap::with_capacity(wanted + 1);
    let mut dropped = false;
    scan_matching(
        daemon,
        region,
        checks,
        None,
        |key, version, object, bytes| {
            let Some(value) = object.values.get(sort.attr) else {
                return true;
            };
            if let Some(after) = after {
                let after_value = after.sort_value.as_ref().unwrap_or(value);
                if sort.compare((value, key), (after_value, &after.key)) != Ordering::Greater {
                    return true;
                }
            }
            heap.push(Ranked {
                sort,
                key: key.to_vec(),
                version,
                object,
                bytes,
            });
            if heap.len() > wanted {
                heap.pop();
                dropped = true;
            }
            true
        },
    )?;
    let mut objects = Vec::with_capacity(heap.len());
    let mut bytes_total = 0;
    let ranked = heap.into_sorted_vec();
    let mut cut = false;
    for r in ranked {
        if !objects.is_empty() && bytes_total + r.bytes > PAGE_BYTES_MAX {
            cut = true;
            break;
        }
        bytes_total += r.bytes;
        objects.push((r.version, r.object));
    }
    Ok((objects, dropped || cut))
}

/// One page of a keys-only search (`DaemonRequest::SearchKeys`).
pub(crate) fn search_keys(
    daemon: &Daemon,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    after: Option<&[u8]>,
) -> DaemonResponse {
    if let Err(response) = check_region(daemon, epoch, space, region) {
        return response;
    }
    let mut keys = Vec::new();
    let mut bytes_total = 0;
    let mut more = false;
    let result = scan_matching(daemon, region, checks, after, |key, _, object, _| {
        bytes_total += key.len();
        let Some(key) = object.values.into_iter().next() else {
            return true;
        };
        keys.push(key);
        more = keys.len() >= KEYS_PAGE_MAX || bytes_total >= PAGE_BYTES_MAX;
        !more
    });
    match result {
        Ok(()) => DaemonResponse::KeysPage { keys, more },
        Err(response) => response,
    }
}
