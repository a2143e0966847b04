//! State transfer bookkeeping at one daemon, as source and as target.
//!
//! Pure: the shell (and the simulator) run the scans, move the messages
//! and call the coordinator; this module decides what to do. A transfer
//! copies one region from a chain member (the source) to a daemon about to
//! join the chain (the target):
//!
//! - The source scans the region and ships every record, and its cores ship
//!   each commit made meanwhile. Every message of one attempt carries a
//!   sequence number from 0.
//! - Every tick the source reports `Progress { sent, scanned }`. The target
//!   reports the transfer complete to the coordinator once the scan is done
//!   and it holds every message sent so far.
//! - A target that keeps missing messages (a broken connection lost them)
//!   asks for a `Restart`: the source scans again as a new attempt. Entries
//!   are versioned records and the target keeps the highest version per
//!   key, so a second copy of anything is harmless.
//! - Commits shipped between the target's report and the source learning
//!   that the transfer ended could be lost too: the source keeps reporting
//!   its final count for a while after the end, and the target, by then a
//!   chain member, asks for a restart if it lacks any of them.

use crate::record::Record;
use std::collections::{BTreeMap, BTreeSet};
use tessera_protocol::{TransferEntry, TransferMsg};
use tessera_storage::{Engine, StorageError};
use tessera_types::{Configuration, DaemonId, RegionId};

/// Ticks a source keeps reporting its final count after the transfer ended.
pub const PROGRESS_TICKS_AFTER_END: u32 = 40;
/// Progress reports a target may see while lacking messages before it asks
/// for a restart (messages may still be on their way).
pub const BEHIND_REPORTS_MAX: u32 = 6;

/// What the caller must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Source: scan `region`, send its records through [`Transfers::stamp`],
    /// then call [`Transfers::scanned`] with the same attempt.
    Scan {
        transfer: u64,
        attempt: u32,
        region: RegionId,
    },
    /// Target: store these entries (through `ReplicaCore::on_transfer_entry`),
    /// first dropping whatever the daemon held of the region when `fresh`.
    Store {
        region: RegionId,
        entries: Vec<TransferEntry>,
        fresh: bool,
    },
    /// Send a message to a peer.
    Send { to: DaemonId, msg: TransferMsg },
    /// Target: tell the coordinator the transfer has caught up.
    Complete { transfer: u64 },
}

#[derive(Debug)]
struct Source {
    region: RegionId,
    to: DaemonId,
    attempt: u32,
    sent: u64,
    scanned: bool,
    /// Ticks since the configuration stopped naming the transfer.
    ended: Option<u32>,
}

#[derive(Debug)]
struct Target {
    from: DaemonId,
    attempt: u32,
    received: BTreeSet<u64>,
    /// Whether the region was cleared for this transfer already.
    cleared: bool,
    behind: u32,
    /// Ticks since the configuration stopped naming the transfer.
    ended: Option<u32>,
}

impl Target {
    /// Follows the source to a newer attempt (forgetting what the older one
    /// delivered); false for a message of an older attempt.
    fn follow(&mut self, attempt: u32) -> bool {
        if attempt > self.attempt {
            self.attempt = attempt;
            self.received.clear();
        }
        attempt == self.attempt
    }

    /// Asks the source to scan again, as this target's current attempt.
    fn restart(&self, transfer: u64, me: DaemonId) -> Action {
        Action::Send {
            to: self.from,
            msg: TransferMsg::Restart {
                transfer,
                attempt: self.attempt,
                from: me,
            },
        }
    }

    fn has_all(&self, sent: u64) -> bool {
        // Sequence numbers start at 0 and are never repeated within an
        // attempt, so holding `sent` of them below `sent` means all.
        self.received.range(..sent).count() as u64 == sent
    }
}

/// Source: reads every record of `region` and hands them to `ship` in
/// batches of at most `batch` entries, the last one possibly short (or
/// empty, so an empty region still sends a message). Stops early when
/// `ship` returns false (the attempt was superseded); returns whether every
/// batch was shipped.
pub fn scan_region(
    engine: &dyn Engine,
    region: RegionId,
    batch: usize,
    mut ship: impl FnMut(Vec<TransferEntry>) -> bool,
) -> Result<bool, StorageError> {
    let mut entries = Vec::new();
    let mut going = true;
    engine.scan(region, None, &mut |key, value| {
        // A record that does not decode is not shipped (its key waits for
        // a later write to reach the target).
        let Ok(record) = Record::decode(value) else {
            return true;
        };
        entries.push(TransferEntry {
            key: key.to_vec(),
            version: record.version,
            record: value.to_vec(),
        });
        if entries.len() >= batch {
            going = ship(std::mem::take(&mut entries));
        }
        going
    })?;
    Ok(going && ship(entries))
}

/// Every transfer one daemon takes part in.
#[derive(Debug)]
pub struct Transfers {
    me: DaemonId,
    sources: BTreeMap<u64, Source>,
    targets: BTreeMap<u64, Target>,
}

impl Transfers {
    pub fn new(me: DaemonId) -> Transfers {
        Transfers {
            me,
            sources: BTreeMap::new(),
            targets: BTreeMap::new(),
        }
    }

    /// A new configuration: start scans for new transfers from this daemon,
    /// and note the ones that ended.
    pub fn on_config(&mut self, config: &Configuration) -> Vec<Action> {
        let mut actions = Vec::new();
        for t in &config.transfers {
            if t.from == self.me && !self.sources.contains_key(&t.id) {
                self.sources.insert(
                    t.id,
                    Source {
                        region: t.region,
                        to: t.to,
                        attempt: 0,
                        sent: 0,
                        scanned: false,
                        ended: None,
                    },
                );
                actions.push(Action::Scan {
                    transfer: t.id,
                    attempt: 0,
                    region: t.region,
                });
            }
            if t.to == self.me {
                self.target(t.id, t.from);
            }
        }
        let running = |id: &u64| config.transfers.iter().any(|t| t.id == *id);
        for (id, s) in self.sources.iter_mut() {
            if !running(id) && s.ended.is_none() {
                s.ended = Some(0);
            }
        }
        for (id, t) in self.targets.iter_mut() {
            if !running(id) && t.ended.is_none() {
                t.ended = Some(0);
            }
        }
        actions
    }

    fn target(&mut self, transfer: u64, from: DaemonId) -> &mut Target {
        self.targets.entry(transfer).or_insert(Target {
            from,
            attempt: 0,
            received: BTreeSet::new(),
            cleared: false,
            behind: 0,
            ended: None,
        })
    }

    /// Source: wraps entries of `transfer` into the next message of its
    /// current attempt. `None` when this daemon no longer sends it, or when
    /// `attempt` is given and is no longer current (a superseded scan).
    pub fn stamp(
        &mut self,
        transfer: u64,
        attempt: Option<u32>,
        entries: Vec<TransferEntry>,
    ) -> Option<(DaemonId, TransferMsg)> {
        let s = self.sources.get_mut(&transfer)?;
        if attempt.is_some_and(|a| a != s.attempt) {
            return None;
        }
        let msg = TransferMsg::Entries {
            transfer,
            attempt: s.attempt,
            seq: s.sent,
            from: self.me,
            region: s.region,
            entries,
        };
        s.sent += 1;
        Some((s.to, msg))
    }

    /// Source: the transfers whose commits the cores must ship now, with
    /// their targets, by region.
    pub fn shipping(&self) -> impl Iterator<Item = (RegionId, u64)> + '_ {
        self.sources
            .iter()
            .filter(|(_, s)| s.ended.is_none())
            .map(|(id, s)| (s.region, *id))
    }

    /// Source: the scan of `attempt` has been sent in full.
    pub fn scanned(&mut self, transfer: u64, attempt: u32) {
        if let Some(s) = self.sources.get_mut(&transfer) {
            if s.attempt == attempt {
                s.scanned = true;
            }
        }
    }

    /// Time passes: sources report their progress; ended transfers are
    /// forgotten after a while.
    pub fn on_tick(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        self.sources.retain(|_, s| {
            if let Some(ticks) = s.ended.as_mut() {
                *ticks += 1;
                if *ticks > PROGRESS_TICKS_AFTER_END {
                    return false;
                }
            }
            true
        });
        for (id, s) in &self.sources {
            actions.push(Action::Send {
                to: s.to,
                msg: TransferMsg::Progress {
                    transfer: *id,
                    attempt: s.attempt,
                    from: self.me,
                    region: s.region,
                    sent: s.sent,
                    scanned: s.scanned,
                },
            });
        }
        self.targets.retain(|_, t| {
            if let Some(ticks) = t.ended.as_mut() {
                *ticks += 1;
                if *ticks > 2 * PROGRESS_TICKS_AFTER_END {
                    return false;
                }
            }
            true
        });
        actions
    }

    /// A transfer message from a peer.
    pub fn on_message(&mut self, msg: TransferMsg) -> Vec<Action> {
        let me = self.me;
        match msg {
            TransferMsg::Entries {
                transfer,
                attempt,
                seq,
                region,
                entries,
                ..
            } => {
                // Only transfers a configuration named to us: a late message
                // of one long forgotten must not clear a region we now
                // serve as a chain member.
                let Some(t) = self.targets.get_mut(&transfer) else {
                    return Vec::new();
                };
                if !t.follow(attempt) {
                    return Vec::new();
                }
                t.received.insert(seq);
                // Clear stale data once, before the first entries, and only
                // while the transfer runs (afterwards we are a member).
                let fresh = !t.cleared && t.ended.is_none();
                t.cleared = true;
                vec![Action::Store {
                    region,
                    entries,
                    fresh,
                }]
            }
            TransferMsg::Progress {
                transfer,
                attempt,
                sent,
                scanned,
                ..
            } => {
                let Some(t) = self.targets.get_mut(&transfer) else {
                    return Vec::new();
                };
                if !t.follow(attempt) {
                    // Our request for a restart was lost: ask again.
                    return vec![t.restart(transfer, me)];
                }
                if t.has_all(sent) {
                    t.behind = 0;
                    if scanned && t.ended.is_none() {
                        return vec![Action::Complete { transfer }];
                    }
                    return Vec::new();
                }
                t.behind += 1;
                if t.behind < BEHIND_REPORTS_MAX {
                    return Vec::new();
                }
                t.behind = 0;
                t.follow(t.attempt + 1);
                vec![t.restart(transfer, me)]
            }
            TransferMsg::Restart {
                transfer, attempt, ..
            } => {
                let Some(s) = self.sources.get_mut(&transfer) else {
                    return Vec::new();
                };
                if attempt <= s.attempt {
                    return Vec::new();
                }
                s.attempt = attempt;
                s.sent = 0;
                s.scanned = false;
                vec![Action::Scan {
                    transfer,
                    attempt,
                    region: s.region,
                }]
            }
        }
    }

    /// Number of transfers this daemon is sending or receiving.
    pub fn running(&self) -> usize {
        self.sources.values().filter(|s| s.ended.is_none()).count()
            + self.targets.values().filter(|t| t.ended.is_none()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{Epoch, Transfer};

    fn config(transfers: Vec<Transfer>) -> Configuration {
        Configuration {
            epoch: Epoch(1),
            transfers,
            ..Configuration::default()
        }
    }

    fn entry(k: u8) -> TransferEntry {
        TransferEntry {
            key: vec![k],
            version: tessera_types::Version(1),
            record: Vec::new(),
        }
    }

    fn sends(actions: Vec<Action>) -> Vec<TransferMsg> {
        actions
            .into_iter()
            .filter_map(|a| match a {
                Action::Send { msg, .. } => Some(msg),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn complete_only_with_every_message_and_restart_after_loss() {
        let (src, dst) = (DaemonId(1), DaemonId(2));
        let t = Transfer {
            id: 7,
            region: RegionId(3),
            from: src,
            to: dst,
        };
        let mut source = Transfers::new(src);
        let mut target = Transfers::new(dst);
        let cfg = config(vec![t]);
        assert_eq!(
            source.on_config(&cfg),
            vec![Action::Scan {
                transfer: 7,
                attempt: 0,
                region: RegionId(3)
            }]
        );
        assert!(target.on_config(&cfg).is_empty());
        let (_, m0) = source.stamp(7, Some(0), vec![entry(1)]).unwrap();
        let (_, _lost) = source.stamp(7, Some(0), vec![entry(2)]).unwrap();
        let (_, m2) = source.stamp(7, Some(0), vec![entry(3)]).unwrap();
        source.scanned(7, 0);
        let stores = target.on_message(m0);
        assert!(matches!(stores[..], [Action::Store { fresh: true, .. }]));
        let stores = target.on_message(m2);
        assert!(matches!(stores[..], [Action::Store { fresh: false, .. }]));
        // Message 1 was lost: never complete; after a few reports, restart.
        let mut restart = None;
        for _ in 0..BEHIND_REPORTS_MAX {
            for msg in sends(source.on_tick()) {
                let out = target.on_message(msg);
                assert!(!out.iter().any(|a| matches!(a, Action::Complete { .. })));
                restart = restart.or(sends(out).pop());
            }
        }
        let restart = restart.expect("the target asks for a restart");
        let scan = source.on_message(restart);
        assert_eq!(
            scan,
            vec![Action::Scan {
                transfer: 7,
                attempt: 1,
                region: RegionId(3)
            }]
        );
        // A message of the superseded scan is refused at the source.
        assert!(source.stamp(7, Some(0), vec![entry(9)]).is_none());
        for k in 1..=3 {
            let (_, m) = source.stamp(7, Some(1), vec![entry(k)]).unwrap();
            let out = target.on_message(m);
            assert!(matches!(out[..], [Action::Store { fresh: false, .. }]));
        }
        // Not complete before the scan is done, complete after.
        let out: Vec<_> = sends(source.on_tick())
            .into_iter()
            .flat_map(|m| target.on_message(m))
            .collect();
        assert!(out.is_empty());
        source.scanned(7, 1);
        let out: Vec<_> = sends(source.on_tick())
            .into_iter()
            .flat_map(|m| target.on_message(m))
            .collect();
        assert_eq!(out, vec![Action::Complete { transfer: 7 }]);
    }

    #[test]
    fn ended_transfers_keep_reporting_then_are_forgotten() {
        let (src, dst) = (DaemonId(1), DaemonId(2));
        let t = Transfer {
            id: 1,
            region: RegionId(1),
            from: src,
            to: dst,
        };
        let mut source = Transfers::new(src);
        source.on_config(&config(vec![t]));
        assert_eq!(source.shipping().count(), 1);
        source.on_config(&Configuration {
            epoch: Epoch(2),
            ..Configuration::default()
        });
        assert_eq!(source.shipping().count(), 0, "commits go by the chain now");
        for _ in 0..PROGRESS_TICKS_AFTER_END {
            assert_eq!(sends(source.on_tick()).len(), 1);
        }
        assert!(sends(source.on_tick()).is_empty());
    }
}
