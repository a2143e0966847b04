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
use crate::index::{self, Access, PageBounds};
use crate::record::Record;
use tessera_protocol::{Auth, AuthOp, DaemonResponse, SearchAfter, SortBy, Status};
use tessera_storage::Engine;
use tessera_types::coordinate::key_bytes;
use tessera_types::{
    Check, Configuration, DaemonId, Epoch, Object, RegionDirectory, RegionId, SpaceDesc, SpaceId,
    Value,
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
    let record = match engine
        .get(region.id, &key_bytes(key))
        .map_err(ReadFailed::of)?
    {
        Some(bytes) => Some(Record::decode(&bytes).map_err(ReadFailed::of)?),
        None => None,
    };
    let object = record.as_ref().and_then(|r| r.object.as_ref());
    let desc = &space.desc;
    if desc.authorization {
        let authorized =
            Credentials::parse(auth).and_then(|c| c.authorize_object(desc, object, AuthOp::Read));
        if let Err(e) = authorized {
            return Ok(failed(Status::Unauthorized, e.to_string()));
        }
    }
    Ok(match record {
        Some(Record {
            version,
            object: Some(object),
            ..
        }) => DaemonResponse::Found {
            version,
            object: auth::strip(desc, object),
        },
        _ => failed(Status::NotFound, "no object has this key"),
    })
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
        let kept: Vec<_> = matches
            .into_iter()
            .filter(|m| readers.admit(desc, &m.object))
            .map(|mut m| {
                m.object = auth::strip(desc, m.object);
                m
            })
            .collect();
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
    auth: &Auth,
) -> Result<DaemonResponse, ReadFailed> {
    if let Err(response) = check_region(view, epoch, space, region) {
        return Ok(response);
    }
    let readers = match Readers::of(view.config, space, checks, (auth, AuthOp::Read)) {
        Ok(readers) => readers,
        Err(refusal) => return Ok(refusal),
    };
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
        sort_value: sort.and_then(|s| m.object.values.get(s.attr).cloned()),
    };
    let read = |after: Option<&SearchAfter>| {
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
        index::key_order_page(view.engine, region, &access, checks, after, bounds)
            .map_err(ReadFailed::of)
    };
    let after = after.map(|key| SearchAfter {
        key: key.to_vec(),
        sort_value: None,
    });
    let (matches, more) = admitted_page(view.config, space, &readers, after, position, read)?;
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
