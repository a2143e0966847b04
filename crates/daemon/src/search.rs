//! Reads over committed data: get at the point leader, and search and count
//! over one region at one of its replicas.

use crate::chain::{check_key, key_region};
use crate::core::ReplyTo;
use crate::shell::{decode_record, Daemon};
use std::cmp::Ordering;
use tessera_protocol::{DaemonResponse, SortBy, Status};
use tessera_types::coordinate::key_bytes;
use tessera_types::{Check, Epoch, Object, RegionId, SpaceId, Value, Version};

/// Objects per search frame, and the approximate bytes at which a frame is
/// cut early.
const BATCH_OBJECTS_MAX: usize = 512;
const BATCH_BYTES_MAX: usize = 1 << 20;

fn failed(status: Status, reason: impl Into<String>) -> DaemonResponse {
    DaemonResponse::Failed {
        status,
        reason: reason.into(),
    }
}

pub(crate) fn get(daemon: &Daemon, epoch: Epoch, space: SpaceId, key: &Value) -> DaemonResponse {
    let config = daemon.config();
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
    if region.chain.first() != Some(&daemon.me) {
        return failed(
            Status::Reconfigure,
            "this daemon is not the key's point leader",
        );
    }
    match daemon.engine.get(region.id, &key_bytes(key)) {
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

/// Visits the region's committed objects that match every check.
fn scan_matching(
    daemon: &Daemon,
    region: RegionId,
    checks: &[Check],
    mut visit: impl FnMut(Version, Object, usize) -> bool,
) -> Result<(), DaemonResponse> {
    let mut error = None;
    daemon
        .engine
        .scan(region, None, &mut |_, bytes| match decode_record(bytes) {
            Ok(record) => match record.object {
                Some(object) if checks.iter().all(|c| c.matches(&object)) => {
                    visit(record.version, object, bytes.len())
                }
                _ => true,
            },
            Err(e) => {
                error = Some(e);
                false
            }
        })
        .map_err(|e| failed(Status::ServerError, e.to_string()))?;
    error.map_or(Ok(()), Err)
}

/// Orders two values of one attribute for sorted search.
pub(crate) fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => Ordering::Equal,
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn search(
    daemon: &Daemon,
    to: ReplyTo,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
    sort: Option<SortBy>,
    limit: Option<u64>,
) {
    if let Err(response) = check_region(daemon, epoch, space, region) {
        daemon.reply(to, response);
        return;
    }
    let limit = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    if let Some(sort) = sort {
        // Each region returns its best `limit`; the client merges.
        let mut all = Vec::new();
        if let Err(response) = scan_matching(daemon, region, checks, |v, o, _| {
            all.push((v, o));
            true
        }) {
            daemon.reply(to, response);
            return;
        }
        let attr = sort.attr;
        all.sort_by(|(_, a), (_, b)| {
            let order = match (a.values.get(attr), b.values.get(attr)) {
                (Some(x), Some(y)) => compare_values(x, y),
                _ => Ordering::Equal,
            };
            if sort.descending {
                order.reverse()
            } else {
                order
            }
        });
        all.truncate(limit);
        daemon.reply(
            to,
            DaemonResponse::SearchBatch {
                objects: all,
                done: true,
            },
        );
        return;
    }
    let mut batch = Vec::new();
    let mut batch_bytes = 0;
    let mut sent = 0usize;
    let result = scan_matching(daemon, region, checks, |v, o, bytes| {
        batch.push((v, o));
        batch_bytes += bytes;
        sent += 1;
        if batch.len() >= BATCH_OBJECTS_MAX || batch_bytes >= BATCH_BYTES_MAX {
            let objects = std::mem::take(&mut batch);
            batch_bytes = 0;
            daemon.reply(
                to,
                DaemonResponse::SearchBatch {
                    objects,
                    done: false,
                },
            );
        }
        sent < limit
    });
    match result {
        Ok(()) => daemon.reply(
            to,
            DaemonResponse::SearchBatch {
                objects: batch,
                done: true,
            },
        ),
        Err(response) => daemon.reply(to, response),
    }
}

pub(crate) fn count(
    daemon: &Daemon,
    epoch: Epoch,
    space: SpaceId,
    region: RegionId,
    checks: &[Check],
) -> DaemonResponse {
    if let Err(response) = check_region(daemon, epoch, space, region) {
        return response;
    }
    let mut count = 0u64;
    match scan_matching(daemon, region, checks, |_, _, _| {
        count += 1;
        true
    }) {
        Ok(()) => DaemonResponse::Count { count },
        Err(response) => response,
    }
}
