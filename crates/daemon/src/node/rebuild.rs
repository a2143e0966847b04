//! The glue between the rebuild bookkeeping ([`crate::rebuild::Rebuilds`])
//! and the cores and the disk: a source answers pages, a target clears,
//! stores and reports.

use super::{lock, DaemonNode, Out, Output};
use crate::rebuild::{rebuild_entry, Action, LostRegion, PendingWrite};
use crate::record::Record;
use std::collections::BTreeMap;
use tessera_protocol::{CoordRequest, Message, RebuildEntry, RebuildMsg};
use tessera_types::{DaemonId, RegionId};

/// A source's view of one key of its region: the committed record (if it
/// decodes) and the updates pending there.
type KeyView = (Option<Record>, Vec<PendingWrite>);

impl DaemonNode {
    /// A rebuild message from a peer.
    pub(super) fn on_rebuild_msg(&self, msg: RebuildMsg, out: Out<'_>) {
        match msg {
            RebuildMsg::Fetch {
                rebuild,
                from,
                source,
                after,
            } => self.serve_rebuild_page(rebuild, from, source, after, out),
            RebuildMsg::Page {
                rebuild,
                source,
                after,
                entries,
                last,
                done,
            } => {
                let actions =
                    lock(&self.rebuilds).on_page(rebuild, source, after, entries, last, done);
                self.rebuild_actions(actions, out);
            }
        }
    }

    /// As a source of rebuild `rebuild`: the page of `source` after key
    /// `after`, for the target `from`. Nothing when the installed
    /// configuration does not name this daemon as that source of that
    /// rebuild, or a core has not installed it yet (so that no update of
    /// the lost region can still commit here): the target asks again.
    fn serve_rebuild_page(
        &self,
        rebuild: u64,
        from: DaemonId,
        source: RegionId,
        after: Option<Vec<u8>>,
        out: Out<'_>,
    ) {
        let config = self.config();
        let Some(b) = config.rebuilds.iter().find(|b| b.id == rebuild) else {
            return;
        };
        if b.to != from || !b.sources.contains(&(source, self.me)) {
            return;
        }
        let Some(lost) = LostRegion::of(&config, b) else {
            return;
        };
        // A source before the lost region in the chain (parts are chained
        // in order) drives its pending updates through the rebuilt region
        // again, so the region must not hold them yet: it would acknowledge
        // them at once and never send them on. A source after it holds
        // pending only updates the lost region had applied and sent on.
        let after_lost = config
            .region(source)
            .is_some_and(|(_, part, _)| part > lost.part);
        let batch = self.options.transfer_batch.max(1);
        let mut keys: BTreeMap<Vec<u8>, KeyView> = BTreeMap::new();
        let scanned = self
            .engine()
            .scan(source, after.as_deref(), &mut |key, value| {
                keys.insert(key.to_vec(), (Record::decode(value).ok(), Vec::new()));
                keys.len() < batch
            });
        if let Err(e) = scanned {
            return self.poison("a rebuild source's scan", &e, out);
        }
        let done = keys.len() < batch;
        let scanned_last = keys.keys().next_back().cloned();
        for shard in &self.shards {
            let core = lock(shard);
            if core.epoch() < config.epoch {
                return;
            }
            let pending = if after_lost {
                core.pending_writes(source)
            } else {
                BTreeMap::new()
            };
            for (key, writes) in pending {
                let past_after = after.as_ref().is_none_or(|a| key > *a);
                let in_page = done || scanned_last.as_ref().is_some_and(|l| key <= *l);
                if past_after && in_page {
                    keys.entry(key).or_default().1 = writes;
                }
            }
        }
        let last = keys.keys().next_back().cloned();
        let entries: Vec<RebuildEntry> = keys
            .into_iter()
            .filter_map(|(key, (committed, pending))| {
                rebuild_entry(&lost, &key, committed.as_ref(), pending)
            })
            .collect();
        let page = RebuildMsg::Page {
            rebuild,
            source,
            after,
            entries,
            last,
            done,
        };
        out(Output::Send {
            to: from,
            msg: Message::Rebuild(page),
        });
    }

    pub(super) fn rebuild_actions(&self, actions: Vec<Action>, out: Out<'_>) {
        for action in actions {
            // A store that failed poisoned the daemon: what it holds of the
            // region is not what the sources sent, so it must not report
            // the rebuild complete. Reported, the region named it a member
            // that held nothing, and after its restart it came back as the
            // region's only copy (`tessera-sim --seed 383001822`: an
            // acknowledged object read as absent).
            if self.poisoned() {
                return;
            }
            match action {
                Action::Clear {
                    rebuild,
                    region,
                    keep,
                } => {
                    if !keep {
                        if let Err(e) = self.engine().drop_region(region) {
                            return self.poison("clearing a region to rebuild", &e, out);
                        }
                    } else if self.index_received(region, out).is_none() {
                        // A refresh keeps the copy this daemon came back
                        // with, which an index built meanwhile never
                        // indexed (as a transfer's target, `prune`).
                        return;
                    }
                    for shard in &self.shards {
                        lock(shard).forget_rebuild(region);
                    }
                    let more = lock(&self.rebuilds).cleared(rebuild);
                    self.rebuild_actions(more, out);
                }
                Action::Send { to, msg } => out(Output::Send {
                    to,
                    msg: Message::Rebuild(msg),
                }),
                Action::Store { region, entries } => {
                    for entry in entries {
                        let key = entry.key.clone();
                        self.with_core(&key, out, |core| core.on_rebuild_entry(region, entry));
                    }
                }
                Action::Complete { rebuild } => {
                    tracing::info!(rebuild, "rebuild: every source sent its last page");
                    out(Output::Coord(CoordRequest::RebuildComplete { rebuild }))
                }
            }
        }
    }
}
