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
use tessera_types::{
    Check, Configuration, DaemonId, Epoch, RegionDirectory, RegionId, SpaceId, Value,
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
/// committed version at the point leader is held by every replica.)
pub fn get_committed(
    config: &Configuration,
    me: DaemonId,
    engine: &dyn Engine,
    epoch: Epoch,
    space: SpaceId,
    key: &Value,
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
    let Some(bytes) = engine
        .get(region.id, &key_bytes(key))
        .map_err(ReadFailed::of)?
    else {
        return Ok(failed(Status::NotFound, "no object has this key"));
    };
    let record = Record::decode(&bytes).map_err(ReadFailed::of)?;
    Ok(match record.object {
        Some(object) => DaemonResponse::Found {
            version: record.version,
            object,
        },
        None => failed(Status::NotFound, "no object has this key"),
    })
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
) -> Result<DaemonResponse, ReadFailed> {
    if let Err(response) = check_region(view, epoch, space, region) {
        return Ok(response);
    }
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
    let (matches, more) = page.map_err(ReadFailed::of)?;
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
) -> Result<DaemonResponse, ReadFailed> {
    if let Err(response) = check_region(view, epoch, space, region) {
        return Ok(response);
    }
    let access = access_for(view, space, region, checks, None, KEYS_PAGE_MAX);
    let bounds = PageBounds {
        objects: KEYS_PAGE_MAX,
        size: |m| m.key.len(),
        size_max: PAGE_BYTES_MAX,
    };
    let (matches, more) =
        index::key_order_page(view.engine, region, &access, checks, after, bounds)
            .map_err(ReadFailed::of)?;
    Ok(DaemonResponse::KeysPage {
        keys: matches
            .into_iter()
            .filter_map(|m| m.object.values.into_iter().next())
            .collect(),
        more,
    })
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
