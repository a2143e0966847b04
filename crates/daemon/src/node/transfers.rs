//! The glue between the state-transfer bookkeeping
//! ([`crate::transfer::Transfers`]) and the cores: what each of its actions
//! means for this daemon.

use super::{lock, DaemonNode, Job, Out, Output};
use crate::transfer::{
    bucket_in, bucket_of, region_digest, scan_region, Action as TransferAction, Work,
};
use std::sync::atomic::Ordering;
use tessera_protocol::{CoordRequest, Message, TransferEntry, TransferMsg};
use tessera_types::RegionId;

impl DaemonNode {
    /// Numbers entries of `transfer` and hands them on for its target, in
    /// the order numbered. False when the transfer (or this attempt of it,
    /// when given) is no longer being sent.
    pub(super) fn ship(
        &self,
        transfer: u64,
        attempt: Option<u32>,
        entries: Vec<TransferEntry>,
        out: Out<'_>,
    ) -> bool {
        match lock(&self.transfers).stamp(transfer, attempt, entries) {
            Some((to, msg)) => {
                out(Output::Send {
                    to,
                    msg: Message::Transfer(msg),
                });
                true
            }
            None => false,
        }
    }

    /// As the source of a transfer: ship every record of the region.
    /// Commits made meanwhile are shipped by the cores as they happen
    /// (they learned of the transfer before the scan began), and the
    /// target keeps the highest version of each key.
    pub(super) fn scan(
        &self,
        transfer: u64,
        attempt: u32,
        region: RegionId,
        digest: Option<Vec<u64>>,
        out: Out<'_>,
    ) {
        tracing::info!(transfer, attempt, %region, "state transfer: scanning");
        let mut sent = 0usize;
        let batch = self.options.transfer_batch;
        let shipped = scan_region(self.engine(), region, batch, digest.as_deref(), |entries| {
            sent += entries.len();
            self.ship(transfer, Some(attempt), entries, out)
        });
        match shipped {
            Ok(Some(skipped)) => {
                lock(&self.transfers).scanned(transfer, attempt, skipped);
                tracing::info!(transfer, attempt, sent, "state transfer: scan shipped");
            }
            Ok(None) => {} // superseded by a restart
            Err(e) => self.poison("a transfer's scan", &e, out),
        }
    }

    /// As the target of a transfer that has every message of `attempt`:
    /// delete what it holds outside the `skipped` buckets that the attempt
    /// did not bring (see [`crate::transfer`]). Each key is checked again
    /// under its core's lock, so an entry arriving meanwhile is never
    /// deleted.
    pub(super) fn prune(
        &self,
        transfer: u64,
        attempt: u32,
        region: RegionId,
        skipped: &[u64],
        out: Out<'_>,
    ) {
        let mut stale = Vec::new();
        let scanned = self.engine().scan(region, None, &mut |key, _| {
            if !bucket_in(skipped, bucket_of(key))
                && lock(&self.transfers).unsent(transfer, attempt, key)
            {
                stale.push(key.to_vec());
            }
            true
        });
        if let Err(e) = scanned {
            lock(&self.transfers).pruned(transfer, attempt, false);
            return self.poison("a transfer target's prune", &e, out);
        }
        let mut count = 0u64;
        for key in stale {
            self.with_core(&key, out, |core| {
                if lock(&self.transfers).unsent(transfer, attempt, &key) {
                    core.drop_stale(region, &key);
                    count += 1;
                }
            });
        }
        self.stats.stale_dropped.fetch_add(count, Ordering::Relaxed);
        if count > 0 {
            tracing::info!(transfer, attempt, %region, count, "state transfer: deleted keys the region no longer holds");
        }
        // What it kept may lack the entries of a part built meanwhile.
        let indexed = self.index_received(region, out).is_some();
        lock(&self.transfers).pruned(transfer, attempt, indexed && !self.poisoned());
    }

    /// Runs a transfer's disk-bound work (see [`Job::Transfer`]).
    pub(super) fn transfer_work(&self, work: Work, out: Out<'_>) {
        match work {
            Work::Scan {
                transfer,
                attempt,
                region,
                digest,
            } => self.scan(transfer, attempt, region, digest, out),
            Work::Digest {
                transfer,
                region,
                to,
            } => match region_digest(self.engine(), region) {
                Ok(buckets) => {
                    let msg = TransferMsg::Digest {
                        transfer,
                        from: self.me,
                        buckets,
                    };
                    out(Output::Send {
                        to,
                        msg: Message::Transfer(msg),
                    });
                }
                Err(e) => self.poison("region digest", &e, out),
            },
            Work::Prune {
                transfer,
                attempt,
                region,
                skipped,
            } => self.prune(transfer, attempt, region, &skipped, out),
        }
    }

    pub(super) fn transfer_actions(&self, actions: Vec<TransferAction>, out: Out<'_>) {
        for action in actions {
            match action {
                TransferAction::Work(work) => out(Output::Job(Job::Transfer(work))),
                TransferAction::Store { region, entries } => {
                    for entry in entries {
                        let key = entry.key.clone();
                        self.with_core(&key, out, |core| core.on_transfer_entry(region, entry));
                    }
                }
                TransferAction::Send { to, msg } => out(Output::Send {
                    to,
                    msg: Message::Transfer(msg),
                }),
                TransferAction::Hold { transfer, region } => {
                    for shard in &self.shards {
                        lock(shard).hold(region);
                    }
                    let actions = lock(&self.transfers).held(transfer);
                    self.transfer_actions(actions, out);
                }
                TransferAction::CheckDrained { transfer, region } => {
                    // Each core ships its commits before its lock is let
                    // go, so the count `drained` checks covers them.
                    if self.shards.iter().all(|s| lock(s).in_flight(region) == 0) {
                        let actions = lock(&self.transfers).drained(transfer);
                        self.transfer_actions(actions, out);
                    }
                }
                TransferAction::Release { region } => {
                    for shard in &self.shards {
                        let mut core = lock(shard);
                        core.release(region);
                        let effects = core.drain_effects();
                        self.core_effects(effects, out);
                    }
                }
                TransferAction::Complete { transfer } => {
                    out(Output::Coord(CoordRequest::TransferComplete { transfer }))
                }
            }
        }
    }
}
