//! A daemon's side of a consistent backup (docs/design/backup.md).
//!
//! The backup client sets the cluster read-only, asks every daemon with
//! `BackupDrain` until each has installed that epoch and has no update in
//! flight, then asks each to freeze its objects (`BackupTake`), sets the
//! cluster read-write again and reads the frozen objects page by page
//! (`BackupRead`) while writes go on. Because no daemon holds an update in
//! flight when the first one freezes, and none accepts a new one until the
//! last one has frozen, the frozen views together are one cut of the
//! cluster.

use super::{lock, DaemonNode};
use crate::record::Record;
use std::collections::VecDeque;
use std::sync::Arc;
use tessera_protocol::{DaemonResponse, Status};
use tessera_storage::EngineSnapshot;
use tessera_types::{Epoch, RegionId};

/// How many frozen views a daemon keeps. A backup client that dies leaves
/// its view behind; fjall keeps every version a view can see, so the
/// oldest views are dropped rather than kept for ever.
const FROZEN_MAX: usize = 2;

/// At most this many objects in one `BackupPage`.
pub const BACKUP_PAGE_OBJECTS_MAX: usize = 1024;

/// About this many bytes of stored records in one `BackupPage`, far below
/// the frame maximum.
pub const BACKUP_PAGE_BYTES_MAX: usize = 1 << 20;

/// The frozen views of this daemon's objects, oldest first.
#[derive(Default)]
pub(super) struct Frozen {
    views: VecDeque<(u64, Arc<dyn EngineSnapshot>)>,
}

impl DaemonNode {
    /// Where this daemon stands for a backup: its epoch, whether that
    /// configuration is read-only, and how many keys have updates in
    /// flight in any of its cores.
    fn backup_state(&self) -> (Epoch, bool, u64) {
        let config = self.config();
        let mut in_flight = 0u64;
        let mut epoch = config.epoch;
        for shard in &self.shards {
            let core = lock(shard);
            in_flight += core.busy_keys() as u64;
            // A core that has not installed the node's configuration yet
            // may still start an update under the older one.
            epoch = epoch.min(core.epoch());
        }
        (epoch, config.read_only, in_flight)
    }

    /// `BackupDrain`.
    pub(super) fn backup_drain(&self) -> DaemonResponse {
        let (epoch, read_only, in_flight) = self.backup_state();
        DaemonResponse::BackupState {
            epoch,
            read_only,
            in_flight,
            taken: false,
        }
    }

    /// `BackupTake` at `wanted`: freezes the objects when this daemon is
    /// quiet at that read-only epoch.
    pub(super) fn backup_take(&self, wanted: Epoch, backup: u64) -> DaemonResponse {
        // Holding the node's backup list across the check and the freeze
        // keeps two takes from interleaving; the cores' locks are taken
        // and released inside, which is enough: a read-only daemon with
        // nothing in flight starts nothing new.
        let mut frozen = lock(&self.frozen);
        let (epoch, read_only, in_flight) = self.backup_state();
        let quiet = epoch == wanted && read_only && in_flight == 0;
        if quiet && !frozen.views.iter().any(|(id, _)| *id == backup) {
            match self.engine().snapshot() {
                Ok(view) => {
                    if frozen.views.len() >= FROZEN_MAX {
                        frozen.views.pop_front();
                    }
                    frozen.views.push_back((backup, view));
                }
                Err(e) => {
                    return DaemonResponse::Failed {
                        status: Status::ServerError,
                        reason: format!("cannot freeze the objects: {e}"),
                    }
                }
            }
        }
        DaemonResponse::BackupState {
            epoch,
            read_only,
            in_flight,
            taken: quiet,
        }
    }

    /// `BackupRelease`.
    pub(super) fn backup_release(&self, backup: u64) -> DaemonResponse {
        lock(&self.frozen).views.retain(|(id, _)| *id != backup);
        DaemonResponse::Done
    }

    /// `BackupRead`: one page of the live objects `region` held when
    /// `backup` was taken.
    pub(super) fn backup_read(
        &self,
        backup: u64,
        region: RegionId,
        after: Option<&[u8]>,
    ) -> DaemonResponse {
        let view = lock(&self.frozen)
            .views
            .iter()
            .find(|(id, _)| *id == backup)
            .map(|(_, view)| view.clone());
        let Some(view) = view else {
            return DaemonResponse::Failed {
                status: Status::NotFound,
                reason: format!("this daemon holds no backup {backup} (released or replaced)"),
            };
        };
        let mut objects = Vec::new();
        let mut bytes = 0usize;
        let mut last: Option<Vec<u8>> = None;
        let mut full = false;
        let mut corrupt = None;
        let scanned = view.scan(region, after, &mut |key, value| {
            if objects.len() >= BACKUP_PAGE_OBJECTS_MAX || bytes >= BACKUP_PAGE_BYTES_MAX {
                full = true;
                return false;
            }
            match Record::decode(value) {
                Ok(record) => {
                    if let Some(object) = record.object {
                        bytes += value.len();
                        objects.push(object);
                    }
                }
                Err(e) => {
                    corrupt = Some(e);
                    return false;
                }
            }
            last = Some(key.to_vec());
            true
        });
        if let Err(e) = scanned {
            return DaemonResponse::Failed {
                status: Status::ServerError,
                reason: format!("cannot read the frozen objects: {e}"),
            };
        }
        if let Some(e) = corrupt {
            return DaemonResponse::Failed {
                status: Status::ServerError,
                reason: format!("a stored record of region {region} is damaged: {e}"),
            };
        }
        DaemonResponse::BackupPage {
            objects,
            next_after: if full { last } else { None },
        }
    }
}
