//! State transfer bookkeeping at one daemon, as source and as target.
//!
//! Pure: the shell (and the simulator) run the scans, move the messages
//! and call the coordinator; this module decides what to do. A transfer
//! copies one region from a chain member (the source) to a daemon about to
//! join the chain (the target):
//!
//! - The target first sends a `Digest` of what it already holds of the
//!   region (nothing, or a stale copy from before a restart): per bucket of
//!   keys, a sum of hashes of (key, version). The source scans the region
//!   and ships the records of every bucket whose digest differs from its
//!   own — all of them when the target holds nothing, only what changed
//!   when it comes back with its data directory — and its cores ship each
//!   commit made meanwhile. Every message of one attempt carries a
//!   sequence number from 0. Without a digest within
//!   [`DIGEST_WAIT_TICKS`], and on every restart, it ships everything.
//!   Per key the highest version wins, so of a stale copy the target keeps
//!   what is still current. Every bucket the source did ship replaces the
//!   target's wholesale: once it has every message of the attempt, and
//!   before it says `Have`, the target deletes whatever it holds in those
//!   buckets that the attempt did not bring — keys the region no longer
//!   holds, whose tombstones may have been collected (see
//!   [`Work::Prune`]). A daemon that was away long cannot bring a
//!   deleted object back.
//! - Every tick the source reports `Progress { sent, scanned }`; once the
//!   scan is done the target answers `Have { have }`, the number of leading
//!   messages it holds.
//! - A target that keeps missing messages (a broken connection lost them)
//!   asks for a `Restart`: the source scans again as a new attempt. Entries
//!   are versioned records and the target keeps the highest version per
//!   key, so a second copy of anything is harmless.
//! - Hand-over. When the target has every message, the source *holds* the
//!   region: updates that reach it from then on wait there, neither sent
//!   on nor committed. Those it had sent on before complete as usual and
//!   their commits are shipped. When none is left in flight
//!   (`ReplicaCore::in_flight`) and the target has every message, the
//!   target holds everything any daemon after the source holds, and the
//!   source reports the transfer complete to the coordinator. The epoch
//!   that makes the target the region's tail releases the hold, and the
//!   waiting updates travel on through the target. If the source dies
//!   meanwhile, the waiting updates are still pending upstream and nobody
//!   downstream has them, so the chain's repair drives them again without
//!   a hole. (Completing while the source had updates in flight let a
//!   target join lacking an update that daemons after it held; if the
//!   source then died, a new point leader reused that version number.)
//!   A hold lasts about one round trip down the chain, one to the target
//!   and one to the coordinator.
//! - Two hand-overs on one chain can wait for each other: an update in
//!   flight from one held region waits, held, at the next. So a hold that
//!   has not completed within [`HOLD_TICKS_MAX`] is released, and the source
//!   waits a while that depends on the transfer's id before holding again,
//!   so that one of them goes first.
//! - Once the configuration no longer names the transfer, the target
//!   ignores its messages: it confirmed every one before the source
//!   completed, and a late one is a stale copy — a source that was paused
//!   sends a scan from before its pause — which could bring back a key whose
//!   tombstone was collected meanwhile. (The source keeps reporting its
//!   final count for a while; nothing depends on it.)

use crate::record::Record;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use tessera_protocol::{TransferEntry, TransferMsg};
use tessera_storage::{Engine, StorageError};
use tessera_types::coordinate::string_hash;
use tessera_types::{Configuration, DaemonId, RegionId, Version};

/// Ticks a source keeps reporting its final count after the transfer ended.
pub const PROGRESS_TICKS_AFTER_END: u32 = 40;
/// Progress reports a target may see while lacking messages before it asks
/// for a restart (messages may still be on their way).
pub const BEHIND_REPORTS_MAX: u32 = 6;
/// Buckets of a region digest.
pub const DIGEST_BUCKETS: usize = 4096;
/// Ticks a source waits for the target's digest before shipping everything.
pub const DIGEST_WAIT_TICKS: u32 = 4;

/// Ticks a source holds its region before giving up this hand-over attempt.
pub const HOLD_TICKS_MAX: u32 = 8;

/// Ticks a source waits after giving up a hold before holding again:
/// different for transfers with different ids, so two that blocked each
/// other do not hold at the same time again.
fn hold_backoff(transfer: u64) -> u32 {
    4 + 3 * (transfer % 8) as u32
}

/// Disk-bound work of a transfer: the node hands it to its driver as a job
/// ([`crate::node::Job::Transfer`]), to run off every lock.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// Source: scan `region` (skipping the buckets where `digest`, the
    /// target's, equals ours: see [`scan_region`]), send its records through
    /// [`Transfers::stamp`], then call [`Transfers::scanned`] with the same
    /// attempt.
    Scan {
        transfer: u64,
        attempt: u32,
        region: RegionId,
        digest: Option<Vec<u64>>,
    },
    /// Target: send the source `TransferMsg::Digest` with
    /// [`region_digest`] of what this daemon holds of `region`.
    Digest {
        transfer: u64,
        region: RegionId,
        to: DaemonId,
    },
    /// Target: delete every key of `region` outside the `skipped` buckets
    /// for which [`Transfers::unsent`] holds (checking each under its
    /// core's lock, since entries may still arrive), then call
    /// [`Transfers::pruned`] with the same attempt.
    Prune {
        transfer: u64,
        attempt: u32,
        region: RegionId,
        skipped: Vec<u64>,
    },
}

/// What the caller must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Disk-bound work, to run when convenient.
    Work(Work),
    /// Target: store these entries (through `ReplicaCore::on_transfer_entry`).
    Store {
        region: RegionId,
        entries: Vec<TransferEntry>,
    },
    /// Send a message to a peer.
    Send { to: DaemonId, msg: TransferMsg },
    /// Source: hold `region` in every core (`ReplicaCore::hold`), then
    /// call [`Transfers::held`].
    Hold { transfer: u64, region: RegionId },
    /// Source: if no core has an update of `region` in flight
    /// (`ReplicaCore::in_flight`), call [`Transfers::drained`].
    CheckDrained { transfer: u64, region: RegionId },
    /// Source: commit updates of `region` again (the transfer ended).
    Release { region: RegionId },
    /// Source: tell the coordinator the transfer has caught up.
    Complete { transfer: u64 },
}

/// A source's hand-over of its region to the target.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hold {
    Off,
    /// The cores are being told to hold.
    Requested,
    /// Every core holds: only updates sent on before are still shipped.
    Held,
}

#[derive(Debug)]
struct Source {
    region: RegionId,
    to: DaemonId,
    attempt: u32,
    sent: u64,
    scanned: bool,
    /// Once scanned: the buckets the scan skipped (a bit set).
    skipped: Vec<u64>,
    /// Leading messages of `attempt` the target has confirmed it holds.
    confirmed: u64,
    hold: Hold,
    /// Ticks since the hold was asked for (while it lasts).
    hold_ticks: u32,
    /// Ticks to wait before holding again after giving up a hold.
    backoff: u32,
    /// Ticks waited for the target's digest, until the first scan starts.
    waiting: Option<u32>,
    /// Completion was reported: the coordinator may have made the target
    /// a member already, so the hold lasts until the configuration says
    /// how it ended, whatever the time.
    completing: bool,
    /// Ticks since the configuration stopped naming the transfer.
    ended: Option<u32>,
}

impl Source {
    /// Whether the target holds everything shipped, scan included.
    fn caught_up(&self) -> bool {
        self.scanned && self.confirmed >= self.sent
    }

    /// Asserts the combinations of phase fields the hand-over allows;
    /// called after every change of them. A hold is asked for only once
    /// the scan is through, outlives a restart only once completion was
    /// reported, and never outlives the transfer.
    fn check(&self, transfer: u64) {
        assert!(
            self.ended.is_none() || self.hold == Hold::Off,
            "transfer {transfer}: the source still holds region {} after the transfer ended",
            self.region
        );
        assert!(
            self.waiting.is_none() || (!self.scanned && self.hold == Hold::Off),
            "transfer {transfer}: waiting for the digest, yet scanned ({}) or holding ({:?})",
            self.scanned,
            self.hold
        );
        assert!(
            self.hold == Hold::Off || self.scanned || self.completing,
            "transfer {transfer}: holding region {} ({:?}) before its scan went through",
            self.region,
            self.hold
        );
        assert!(
            !self.completing || self.ended.is_some() || self.hold == Hold::Held,
            "transfer {transfer}: completion reported without every core holding region {} ({:?})",
            self.region,
            self.hold
        );
    }
}

#[derive(Debug)]
struct Target {
    from: DaemonId,
    attempt: u32,
    received: BTreeSet<u64>,
    /// Hashes of the keys `attempt` brought (see [`Transfers::unsent`]).
    keys: HashSet<u64>,
    /// The attempt's stale keys are deleted: from now on `Have` may go.
    pruned: bool,
    /// A prune of the attempt is under way.
    pruning: bool,
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
            self.keys.clear();
            self.pruned = false;
            self.pruning = false;
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

/// The digest bucket of a key.
pub fn bucket_of(key: &[u8]) -> usize {
    (string_hash(key) % DIGEST_BUCKETS as u64) as usize
}

/// Whether `bucket` is in the bit set `set` (64 buckets per word).
pub fn bucket_in(set: &[u64], bucket: usize) -> bool {
    set.get(bucket / 64)
        .is_some_and(|word| word & (1 << (bucket % 64)) != 0)
}

/// The hash by which a target remembers a key an attempt brought.
fn key_hash(key: &[u8]) -> u64 {
    string_hash(key)
}

/// The hash one record adds to its bucket's digest: the key's hash mixed
/// with the version and whether the record holds an object, hashed again
/// so that sums of similar entries spread.
///
/// The object's presence counts because one version does not always name
/// one record: a replex region rebuilt from the other parts takes a
/// tombstone at an update's version from the region the update moved the
/// object out of, and the object at that version from the region it moved
/// into. A target left with such a tombstone by a rebuild it did not finish
/// matched a source holding the object, which skipped the bucket, and the
/// region lost the object (`tessera-sim --seed 383001362`).
fn entry_hash(key: &[u8], version: Version, live: bool) -> u64 {
    let mixed = string_hash(key)
        ^ version.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ u64::from(live).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    string_hash(&mixed.to_le_bytes())
}

/// What this daemon holds of `region`, as [`DIGEST_BUCKETS`] sums of
/// (key, version, live) hashes; empty when it holds nothing.
pub fn region_digest(engine: &dyn Engine, region: RegionId) -> Result<Vec<u64>, StorageError> {
    let mut buckets = Vec::new();
    engine.scan(region, None, &mut |key, value| {
        if let Ok(record) = Record::decode(value) {
            if buckets.is_empty() {
                buckets = vec![0u64; DIGEST_BUCKETS];
            }
            let b = &mut buckets[bucket_of(key)];
            *b = b.wrapping_add(entry_hash(key, record.version, record.object.is_some()));
        }
        true
    })?;
    Ok(buckets)
}

/// Source: reads every record of `region` and hands them to `ship` in
/// batches of at most `batch` entries, the last one possibly short (or
/// empty, so an empty region still sends a message). With the target's
/// `digest`, records of the buckets where it equals ours are skipped: the
/// target holds them already. Stops early when `ship` returns false (the
/// attempt was superseded); returns the skipped buckets (a bit set) when
/// every batch was shipped.
pub fn scan_region(
    engine: &dyn Engine,
    region: RegionId,
    batch: usize,
    digest: Option<&[u64]>,
    mut ship: impl FnMut(Vec<TransferEntry>) -> bool,
) -> Result<Option<Vec<u64>>, StorageError> {
    let mut skipped = Vec::new();
    if let Some(theirs) = digest.filter(|d| d.len() == DIGEST_BUCKETS) {
        let ours = region_digest(engine, region)?;
        if !ours.is_empty() {
            skipped = vec![0u64; DIGEST_BUCKETS / 64];
            for (bucket, _) in ours
                .iter()
                .zip(theirs)
                .enumerate()
                .filter(|(_, (a, b))| a == b)
            {
                skipped[bucket / 64] |= 1 << (bucket % 64);
            }
        }
    }
    let mut entries = Vec::new();
    let mut going = true;
    engine.scan(region, None, &mut |key, value| {
        if bucket_in(&skipped, bucket_of(key)) {
            return true;
        }
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
    Ok((going && ship(entries)).then_some(skipped))
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
                        skipped: Vec::new(),
                        confirmed: 0,
                        hold: Hold::Off,
                        hold_ticks: 0,
                        backoff: 0,
                        completing: false,
                        waiting: Some(0),
                        ended: None,
                    },
                );
            }
            if t.to == self.me && !self.targets.contains_key(&t.id) {
                self.target(t.id, t.from);
                actions.push(Action::Work(Work::Digest {
                    transfer: t.id,
                    region: t.region,
                    to: t.from,
                }));
            }
        }
        let running = |id: &u64| config.transfers.iter().any(|t| t.id == *id);
        for (id, s) in self.sources.iter_mut() {
            if !running(id) && s.ended.is_none() {
                s.ended = Some(0);
                // Always, not only when a hold is known: a hold racing a
                // restart's release may have reached a core late.
                s.hold = Hold::Off;
                actions.push(Action::Release { region: s.region });
            }
            s.check(*id);
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
            keys: HashSet::new(),
            pruned: false,
            pruning: false,
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

    /// Source: the scan of `attempt` has been sent in full, skipping the
    /// buckets in `skipped`.
    pub fn scanned(&mut self, transfer: u64, attempt: u32, skipped: Vec<u64>) {
        if let Some(s) = self.sources.get_mut(&transfer) {
            if s.attempt == attempt {
                s.scanned = true;
                s.skipped = skipped;
            }
            s.check(transfer);
        }
    }

    /// Source: every core now holds the region of `transfer`.
    pub fn held(&mut self, transfer: u64) -> Vec<Action> {
        let Some(s) = self.sources.get_mut(&transfer) else {
            return Vec::new();
        };
        if s.hold != Hold::Requested || s.ended.is_some() {
            return Vec::new();
        }
        s.hold = Hold::Held;
        s.check(transfer);
        if s.caught_up() {
            return vec![Action::CheckDrained {
                transfer,
                region: s.region,
            }];
        }
        Vec::new()
    }

    /// Source: no core has an update of the region in flight any more.
    /// Complete when the target still has everything shipped.
    pub fn drained(&mut self, transfer: u64) -> Vec<Action> {
        match self.sources.get_mut(&transfer) {
            Some(s) if s.hold == Hold::Held && s.ended.is_none() && s.caught_up() => {
                s.completing = true;
                s.check(transfer);
                vec![Action::Complete { transfer }]
            }
            _ => Vec::new(),
        }
    }

    /// Time passes: sources report their progress; ended transfers are
    /// forgotten after a while.
    pub fn on_tick(&mut self) -> Vec<Action> {
        let me = self.me;
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
        for (id, s) in self.sources.iter_mut() {
            if let Some(ticks) = s.waiting.as_mut() {
                *ticks += 1;
                if *ticks > DIGEST_WAIT_TICKS && s.ended.is_none() {
                    s.waiting = None;
                    actions.push(Action::Work(Work::Scan {
                        transfer: *id,
                        attempt: s.attempt,
                        region: s.region,
                        digest: None,
                    }));
                }
            }
            s.backoff = s.backoff.saturating_sub(1);
            if s.hold != Hold::Off && s.ended.is_none() && !s.completing {
                s.hold_ticks += 1;
                if s.hold_ticks > HOLD_TICKS_MAX {
                    s.hold = Hold::Off;
                    s.backoff = hold_backoff(*id);
                    actions.push(Action::Release { region: s.region });
                }
            }
            s.check(*id);
            actions.push(Action::Send {
                to: s.to,
                msg: TransferMsg::Progress {
                    transfer: *id,
                    attempt: s.attempt,
                    from: me,
                    region: s.region,
                    sent: s.sent,
                    scanned: s.scanned,
                    skipped: if s.scanned {
                        s.skipped.clone()
                    } else {
                        Vec::new()
                    },
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
                // Only transfers a configuration named to us, and only while
                // it runs: the target confirmed every message before the
                // source completed, so anything later is a stale copy (a
                // source that was paused sends a scan from before its pause)
                // and could bring back a key whose tombstone was collected.
                let Some(t) = self.targets.get_mut(&transfer) else {
                    return Vec::new();
                };
                if t.ended.is_some() || !t.follow(attempt) {
                    return Vec::new();
                }
                t.received.insert(seq);
                t.keys.extend(entries.iter().map(|e| key_hash(&e.key)));
                vec![Action::Store { region, entries }]
            }
            TransferMsg::Progress {
                transfer,
                attempt,
                sent,
                scanned,
                region,
                skipped,
                ..
            } => {
                let Some(t) = self.targets.get_mut(&transfer) else {
                    return Vec::new();
                };
                if t.ended.is_some() {
                    return Vec::new();
                }
                if !t.follow(attempt) {
                    // Our request for a restart was lost: ask again.
                    return vec![t.restart(transfer, me)];
                }
                if t.has_all(sent) {
                    t.behind = 0;
                    if scanned && !t.pruned {
                        if t.pruning {
                            return Vec::new();
                        }
                        t.pruning = true;
                        return vec![Action::Work(Work::Prune {
                            transfer,
                            attempt,
                            region,
                            skipped,
                        })];
                    }
                    if scanned {
                        return vec![Action::Send {
                            to: t.from,
                            msg: TransferMsg::Have {
                                transfer,
                                attempt,
                                from: me,
                                have: sent,
                            },
                        }];
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
            TransferMsg::Have {
                transfer,
                attempt,
                have,
                ..
            } => {
                let Some(s) = self.sources.get_mut(&transfer) else {
                    return Vec::new();
                };
                if attempt != s.attempt || s.ended.is_some() {
                    return Vec::new();
                }
                s.confirmed = s.confirmed.max(have);
                if !s.caught_up() {
                    return Vec::new();
                }
                match s.hold {
                    Hold::Off if s.backoff > 0 => Vec::new(),
                    Hold::Off => {
                        s.hold = Hold::Requested;
                        s.hold_ticks = 0;
                        s.check(transfer);
                        vec![Action::Hold {
                            transfer,
                            region: s.region,
                        }]
                    }
                    Hold::Requested => Vec::new(),
                    // Still draining, or the coordinator may not have heard.
                    Hold::Held => vec![Action::CheckDrained {
                        transfer,
                        region: s.region,
                    }],
                }
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
                s.skipped = Vec::new();
                s.confirmed = 0;
                let mut actions = Vec::new();
                if s.hold != Hold::Off && s.ended.is_none() && !s.completing {
                    // Writes go on while the region is scanned again.
                    s.hold = Hold::Off;
                    actions.push(Action::Release { region: s.region });
                }
                s.waiting = None;
                s.check(transfer);
                actions.push(Action::Work(Work::Scan {
                    transfer,
                    attempt,
                    region: s.region,
                    digest: None,
                }));
                actions
            }
            TransferMsg::Digest {
                transfer, buckets, ..
            } => {
                let Some(s) = self.sources.get_mut(&transfer) else {
                    return Vec::new();
                };
                if s.waiting.take().is_none() || s.ended.is_some() {
                    return Vec::new(); // late: the scan started without it
                }
                vec![Action::Work(Work::Scan {
                    transfer,
                    attempt: s.attempt,
                    region: s.region,
                    digest: Some(buckets),
                })]
            }
        }
    }

    /// Target: whether the key is one [`Work::Prune`] of `attempt` must
    /// delete — the attempt is still current and has not brought it, and
    /// the transfer has not ended (after which the target is a chain
    /// member, and what it holds is the chain's). Asked under the key's
    /// core lock, after which no entry can slip in unseen.
    pub fn unsent(&self, transfer: u64, attempt: u32, key: &[u8]) -> bool {
        self.targets.get(&transfer).is_some_and(|t| {
            t.attempt == attempt && t.ended.is_none() && !t.keys.contains(&key_hash(key))
        })
    }

    /// Target: the prune of `attempt` is over (`done`: it deleted every
    /// stale key; otherwise it failed and is asked for again).
    pub fn pruned(&mut self, transfer: u64, attempt: u32, done: bool) {
        if let Some(t) = self.targets.get_mut(&transfer) {
            if t.attempt == attempt {
                t.pruning = false;
                t.pruned = done;
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

    /// The digest of a target that holds nothing of the region.
    pub(super) fn empty_digest(transfer: u64, from: DaemonId) -> TransferMsg {
        TransferMsg::Digest {
            transfer,
            from,
            buckets: Vec::new(),
        }
    }

    /// The target's side of a message, as the node runs it: a prune it
    /// asks for is done at once (deleting nothing), and the message that
    /// asked for it is handled again, as the next progress report would be.
    pub(super) fn deliver(target: &mut Transfers, msg: TransferMsg) -> Vec<Action> {
        let mut actions = target.on_message(msg.clone());
        if let Some(at) = actions
            .iter()
            .position(|a| matches!(a, Action::Work(Work::Prune { .. })))
        {
            let Action::Work(Work::Prune {
                transfer, attempt, ..
            }) = actions.remove(at)
            else {
                unreachable!()
            };
            target.pruned(transfer, attempt, true);
            actions.extend(target.on_message(msg));
        }
        actions
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
            replaces: None,
        };
        let mut source = Transfers::new(src);
        let mut target = Transfers::new(dst);
        let cfg = config(vec![t]);
        // The source scans once the target said what it holds.
        assert!(source.on_config(&cfg).is_empty());
        assert_eq!(
            target.on_config(&cfg),
            vec![Action::Work(Work::Digest {
                transfer: 7,
                region: RegionId(3),
                to: src
            })]
        );
        let digest = TransferMsg::Digest {
            transfer: 7,
            from: dst,
            buckets: Vec::new(),
        };
        assert_eq!(
            source.on_message(digest.clone()),
            vec![Action::Work(Work::Scan {
                transfer: 7,
                attempt: 0,
                region: RegionId(3),
                digest: Some(Vec::new()),
            })]
        );
        assert!(source.on_message(digest).is_empty(), "one scan only");
        let (_, m0) = source.stamp(7, Some(0), vec![entry(1)]).unwrap();
        let (_, _lost) = source.stamp(7, Some(0), vec![entry(2)]).unwrap();
        let (_, m2) = source.stamp(7, Some(0), vec![entry(3)]).unwrap();
        source.scanned(7, 0, Vec::new());
        let stores = deliver(&mut target, m0);
        assert!(matches!(stores[..], [Action::Store { .. }]));
        let stores = deliver(&mut target, m2);
        assert!(matches!(stores[..], [Action::Store { .. }]));
        // Message 1 was lost: never complete; after a few reports, restart.
        let mut restart = None;
        for _ in 0..BEHIND_REPORTS_MAX {
            for msg in sends(source.on_tick()) {
                let out = deliver(&mut target, msg);
                assert!(!out.iter().any(|a| matches!(a, Action::Complete { .. })));
                restart = restart.or(sends(out).pop());
            }
        }
        let restart = restart.expect("the target asks for a restart");
        let scan = source.on_message(restart);
        assert_eq!(
            scan,
            vec![Action::Work(Work::Scan {
                transfer: 7,
                attempt: 1,
                region: RegionId(3),
                digest: None,
            })]
        );
        // A message of the superseded scan is refused at the source.
        assert!(source.stamp(7, Some(0), vec![entry(9)]).is_none());
        for k in 1..=3 {
            let (_, m) = source.stamp(7, Some(1), vec![entry(k)]).unwrap();
            let out = deliver(&mut target, m);
            assert!(matches!(out[..], [Action::Store { .. }]));
        }
        // No hand-over before the scan is done.
        let out: Vec<_> = sends(source.on_tick())
            .into_iter()
            .flat_map(|m| deliver(&mut target, m))
            .collect();
        assert!(out.is_empty());
        source.scanned(7, 1, Vec::new());
        let have = sends(
            sends(source.on_tick())
                .into_iter()
                .flat_map(|m| deliver(&mut target, m))
                .collect(),
        );
        assert!(matches!(have[..], [TransferMsg::Have { have: 3, .. }]));
        // The source holds the region, then reports completion.
        let hold = source.on_message(have[0].clone());
        assert_eq!(
            hold,
            vec![Action::Hold {
                transfer: 7,
                region: RegionId(3)
            }]
        );
        assert_eq!(
            source.held(7),
            vec![Action::CheckDrained {
                transfer: 7,
                region: RegionId(3)
            }]
        );
        assert_eq!(source.drained(7), vec![Action::Complete { transfer: 7 }]);
    }

    /// A commit shipped after the target confirmed, but before the cores
    /// held, must reach the target before the source reports completion.
    #[test]
    fn hand_over_waits_for_what_was_shipped_before_the_hold() {
        let (src, dst) = (DaemonId(1), DaemonId(2));
        let t = Transfer {
            id: 4,
            region: RegionId(9),
            from: src,
            to: dst,
            replaces: None,
        };
        let mut source = Transfers::new(src);
        let mut target = Transfers::new(dst);
        let cfg = config(vec![t]);
        source.on_config(&cfg);
        target.on_config(&cfg);
        // The target holds nothing: the source scans everything.
        let scan = source.on_message(empty_digest(4, dst));
        assert!(matches!(
            scan[..],
            [Action::Work(Work::Scan { attempt: 0, .. })]
        ));
        let (_, m0) = source.stamp(4, Some(0), vec![entry(1)]).unwrap();
        source.scanned(4, 0, Vec::new());
        deliver(&mut target, m0);
        let exchange = |source: &mut Transfers, target: &mut Transfers| -> Vec<Action> {
            sends(source.on_tick())
                .into_iter()
                .flat_map(|m| sends(deliver(target, m)))
                .flat_map(|m| source.on_message(m))
                .collect()
        };
        let hold = exchange(&mut source, &mut target);
        assert!(matches!(hold[..], [Action::Hold { transfer: 4, .. }]));
        // A core commits and ships once more before it holds.
        let (_, late) = source.stamp(4, None, vec![entry(2)]).unwrap();
        assert!(source.held(4).is_empty(), "the target lacks message 1");
        assert!(source.drained(4).is_empty(), "the target lacks message 1");
        assert!(exchange(&mut source, &mut target).is_empty());
        deliver(&mut target, late);
        let check = exchange(&mut source, &mut target);
        assert!(matches!(
            check[..],
            [Action::CheckDrained { transfer: 4, .. }]
        ));
        assert_eq!(source.drained(4), vec![Action::Complete { transfer: 4 }]);
        // The epoch without the transfer releases the region.
        let released = source.on_config(&Configuration {
            epoch: Epoch(2),
            ..Configuration::default()
        });
        assert_eq!(
            released,
            vec![Action::Release {
                region: RegionId(9)
            }]
        );
    }

    #[test]
    fn ended_transfers_keep_reporting_then_are_forgotten() {
        let (src, dst) = (DaemonId(1), DaemonId(2));
        let t = Transfer {
            id: 1,
            region: RegionId(1),
            from: src,
            to: dst,
            replaces: None,
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

#[cfg(test)]
mod hold_tests {
    use super::tests::empty_digest;
    use super::*;
    use tessera_types::{Epoch, Transfer};

    /// A hold that cannot drain is given up after `HOLD_TICKS_MAX` ticks,
    /// and taken again only after the transfer's backoff.
    #[test]
    fn an_undrained_hold_is_released_then_retried_later() {
        let (src, dst) = (DaemonId(1), DaemonId(2));
        let t = Transfer {
            id: 5,
            region: RegionId(2),
            from: src,
            to: dst,
            replaces: None,
        };
        let cfg = Configuration {
            epoch: Epoch(1),
            transfers: vec![t],
            ..Configuration::default()
        };
        let mut source = Transfers::new(src);
        source.on_config(&cfg);
        let scan = source.on_message(empty_digest(5, dst));
        assert!(matches!(
            scan[..],
            [Action::Work(Work::Scan { attempt: 0, .. })]
        ));
        source.stamp(5, Some(0), Vec::new()).unwrap();
        source.scanned(5, 0, Vec::new());
        let have = || TransferMsg::Have {
            transfer: 5,
            attempt: 0,
            from: dst,
            have: 1,
        };
        assert!(matches!(
            source.on_message(have())[..],
            [Action::Hold { transfer: 5, .. }]
        ));
        source.held(5);
        let releases = |actions: Vec<Action>| {
            actions
                .iter()
                .filter(|a| matches!(a, Action::Release { .. }))
                .count()
        };
        for _ in 0..HOLD_TICKS_MAX {
            assert_eq!(releases(source.on_tick()), 0);
        }
        assert_eq!(releases(source.on_tick()), 1, "given up");
        // No new hold during the backoff, then one again.
        for _ in 1..hold_backoff(5) {
            assert!(source.on_message(have()).is_empty());
            source.on_tick();
        }
        source.on_tick();
        assert!(matches!(
            source.on_message(have())[..],
            [Action::Hold { transfer: 5, .. }]
        ));
        // Once completion is reported the hold outlasts any timeout: the
        // coordinator may already have made the target a member.
        source.held(5);
        assert_eq!(source.drained(5), vec![Action::Complete { transfer: 5 }]);
        for _ in 0..3 * HOLD_TICKS_MAX {
            assert_eq!(releases(source.on_tick()), 0);
        }
    }
}

#[cfg(test)]
mod digest_tests {
    use super::*;
    use std::collections::BTreeMap;
    use tessera_storage::{MemoryEngine, Write};

    fn put(engine: &MemoryEngine, region: RegionId, key: u32, version: u64) {
        let record = Record {
            version: Version(version),
            object: None,
            recent: Vec::new(),
        };
        engine
            .apply(vec![Write::Put {
                region,
                key: key.to_be_bytes().to_vec(),
                value: record.encode(),
            }])
            .unwrap();
    }

    /// A target holding a tombstone at the version the source holds an
    /// object at (what a replex rebuild it did not finish leaves) gets that
    /// key's bucket: one version names two records there.
    #[test]
    fn a_tombstone_and_an_object_at_one_version_differ() {
        let region = RegionId(4);
        let (source, target) = (MemoryEngine::new(), MemoryEngine::new());
        for k in 0..200 {
            put(&source, region, k, 3);
            put(&target, region, k, 3);
        }
        let live = Record {
            version: Version(3),
            object: Some(tessera_types::Object {
                values: vec![tessera_types::Value::Int(9)],
            }),
            recent: Vec::new(),
        };
        source
            .apply(vec![Write::Put {
                region,
                key: 9u32.to_be_bytes().to_vec(),
                value: live.encode(),
            }])
            .unwrap();
        let (shipped, skipped) = scan_against(&source, &target, region);
        let bucket = bucket_of(&9u32.to_be_bytes());
        assert!(!bucket_in(&skipped, bucket));
        assert!(shipped.iter().any(|e| e.key == 9u32.to_be_bytes()));
        // Every other bucket matched and was skipped.
        let others = (0..DIGEST_BUCKETS).filter(|&b| b != bucket);
        assert!(others.clone().all(|b| bucket_in(&skipped, b)));
        assert!(shipped.iter().all(|e| bucket_of(&e.key) == bucket));
    }

    /// What `source` ships of `region` to `target`, by `target`'s digest,
    /// and the buckets it skipped.
    fn scan_against(
        source: &MemoryEngine,
        target: &MemoryEngine,
        region: RegionId,
    ) -> (Vec<TransferEntry>, Vec<u64>) {
        let digest = region_digest(target, region).unwrap();
        let mut shipped = Vec::new();
        let skipped = scan_region(source, region, 64, Some(&digest), |batch| {
            shipped.extend(batch);
            true
        })
        .unwrap()
        .expect("every batch shipped");
        (shipped, skipped)
    }

    fn contents(engine: &MemoryEngine, region: RegionId) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut out = BTreeMap::new();
        engine
            .scan(region, None, &mut |k, v| {
                out.insert(k.to_vec(), v.to_vec());
                true
            })
            .unwrap();
        out
    }

    /// A target that comes back with a stale copy gets only the buckets
    /// that differ, and ends up equal to the source; one that holds nothing
    /// gets everything.
    #[test]
    fn a_stale_target_receives_only_what_differs() {
        let region = RegionId(4);
        let (source, target) = (MemoryEngine::new(), MemoryEngine::new());
        for k in 0..2000 {
            put(&source, region, k, 3);
            put(&target, region, k, 3);
        }
        // What happened while the target was away: newer versions, new
        // keys (a removal is a newer tombstone, the same thing here).
        let changed: Vec<u32> = vec![5, 77, 1500, 1999];
        for &k in &changed {
            put(&source, region, k, 4);
        }
        for k in 2000..2003 {
            put(&source, region, k, 1);
        }
        let (shipped, skipped) = scan_against(&source, &target, region);
        let differing: BTreeSet<usize> = changed
            .iter()
            .copied()
            .chain(2000..2003)
            .map(|k| bucket_of(&k.to_be_bytes()))
            .collect();
        // The target is told exactly which buckets were not shipped.
        for bucket in 0..DIGEST_BUCKETS {
            assert_eq!(bucket_in(&skipped, bucket), !differing.contains(&bucket));
        }
        // Exactly the records of the differing buckets, by brute force.
        let expected: BTreeSet<Vec<u8>> = contents(&source, region)
            .into_keys()
            .filter(|k| differing.contains(&bucket_of(k)))
            .collect();
        let got: BTreeSet<Vec<u8>> = shipped.iter().map(|e| e.key.clone()).collect();
        assert_eq!(got, expected);
        assert!(got.len() < 100, "{} of 2003 shipped", got.len());
        // Stored the way a target stores them: the highest version wins.
        for e in shipped {
            let stored = target
                .get(region, &e.key)
                .unwrap()
                .map(|v| Record::decode(&v).unwrap().version);
            if stored.is_none_or(|v| v < e.version) {
                target
                    .apply(vec![Write::Put {
                        region,
                        key: e.key,
                        value: e.record,
                    }])
                    .unwrap();
            }
        }
        assert_eq!(contents(&target, region), contents(&source, region));
        // An empty target sends an empty digest and gets everything.
        let empty = MemoryEngine::new();
        let none = region_digest(&empty, region).unwrap();
        assert!(none.is_empty());
        let mut all = 0;
        let skipped = scan_region(&source, region, 64, Some(&none), |batch| {
            all += batch.len();
            true
        })
        .unwrap()
        .expect("every batch shipped");
        assert_eq!(all, 2003);
        assert!((0..DIGEST_BUCKETS).all(|b| !bucket_in(&skipped, b)));
    }
}
