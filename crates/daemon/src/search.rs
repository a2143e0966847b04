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

use crate::chain::{check_key, key_region};
use crate::index::{self, Access, PageBounds};
use crate::record::Record;
use tessera_protocol::{DaemonResponse, SearchAfter, SortBy, Status};
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::{Check, Configuration, DaemonId, Epoch, RegionId, SpaceId, Value};

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
    pub me: DaemonId,
    pub engine: &'a dyn Engine,
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
        return r.into();
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
    match config.region(region) {
        Some((s, _, r)) if s.id == space && r.chain.contains(&view.me) => Ok(()),
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
    let config = view.config;
    match config.space_by_id(space) {
        Some(space) => index::choose_access(
            &space.desc,
            &index::place_of(space, region),
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
) -> DaemonResponse {
    if let Err(response) = check_region(view, epoch, space, region) {
        return response;
    }
    let wanted = page_objects(limit, PAGE_OBJECTS_MAX);
    if wanted == 0 {
        return DaemonResponse::SearchPage {
            objects: Vec::new(),
            more: false,
        };
    }
    let access = access_for(view, space, region, checks, sort, wanted);
    let engine = view.engine;
    let bounds = PageBounds {
        objects: wanted,
        size: |m| m.bytes,
        size_max: PAGE_BYTES_MAX,
    };
    let page = match sort {
        Some(sort) => {
            let after = after.map(|a| (a.sort_value.as_ref(), a.key.as_slice()));
            index::sorted_page(engine, region, &access, checks, sort, after, bounds)
        }
        None => {
            let after = after.map(|a| a.key.as_slice());
            index::key_order_page(engine, region, &access, checks, after, bounds)
        }
    };
    match page {
        Ok((matches, more)) => DaemonResponse::SearchPage {
            objects: matches.into_iter().map(|m| (m.version, m.object)).collect(),
            more,
        },
        Err(e) => failed(Status::ServerError, e.to_string()),
    }
}

/// One page of a keys-only search (`DaemonRequest::SearchKeys`).
pub fn search_keys(
    view: &ReadView<'_>,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    after: Option<&[u8]>,
) -> DaemonResponse {
    if let Err(response) = check_region(view, epoch, space, region) {
        return response;
    }
    let access = access_for(view, space, region, checks, None, KEYS_PAGE_MAX);
    let bounds = PageBounds {
        objects: KEYS_PAGE_MAX,
        size: |m| m.key.len(),
        size_max: PAGE_BYTES_MAX,
    };
    match index::key_order_page(view.engine, region, &access, checks, after, bounds) {
        Ok((matches, more)) => DaemonResponse::KeysPage {
            keys: matches
                .into_iter()
                .filter_map(|m| m.object.values.into_iter().next())
                .collect(),
            more,
        },
        Err(e) => failed(Status::ServerError, e.to_string()),
    }
}

/// Decodes a stored record, treating corruption as a server error.
fn decode_record(bytes: &[u8]) -> Result<Record, DaemonResponse> {
    Record::decode(bytes).map_err(|e| DaemonResponse::Failed {
        status: Status::ServerError,
        reason: e.to_string(),
    })
}
