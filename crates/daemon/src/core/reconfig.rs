//! A new configuration: updates in flight are rechained along the chains
//! the new epoch draws, blocked while a region on their way has no
//! replica, and clients this daemon no longer answers for are told to
//! retry elsewhere.

use super::{outgoing_transfers, Phase, ReplicaCore};
use crate::chain::{rechain, Unchained};
use std::sync::Arc;
use tessera_protocol::DaemonResponse;
use tessera_types::Configuration;

impl ReplicaCore {
    /// A new configuration. Updates in flight are driven again along their
    /// chains as the new epoch draws them; messages of the old epoch that
    /// were waiting are dropped (their point leaders send them again).
    pub fn on_config(&mut self, config: Arc<Configuration>) {
        if config.epoch <= self.config.epoch {
            return;
        }
        // A refusal answers only late copies of its own epoch's request (a
        // copy of an older epoch is refused with WRONG_EPOCH anyway). In a
        // later epoch the request may have been evaluated again and applied
        // by another point leader while this daemon was cut off, and this
        // one may lead the key again without having seen the epochs between
        // (simulator seed 1002178): answering from the old refusal would
        // then report CMPFAIL for an update that took effect.
        self.refused.clear();
        self.refused_order.clear();
        self.relays.clear();
        self.backfills_passed.clear();
        self.outgoing = outgoing_transfers(self.me, &config);
        self.directory = tessera_types::RegionDirectory::new(&config);
        self.config = config;
        let epoch = self.config.epoch;
        let me = self.me;
        let tick = self.tick;
        let config = self.config.clone();
        let mut redrive = Vec::new();
        let mut refused = Vec::new();
        for (state_key, state) in self.keys.iter_mut() {
            state.buffered.clear();
            let mut dropped = Vec::new();
            for (version, pending) in state.pending.iter_mut() {
                let hops = match rechain(&config, &pending.forward.hops) {
                    Ok(hops) => hops,
                    Err(Unchained::Gone) => {
                        dropped.push(*version); // the space is gone
                        continue;
                    }
                    Err(Unchained::Unavailable(_)) => {
                        // Skipping the region would leave it stale when
                        // its replica returns: wait for that instead. So
                        // does an update of a region left without any
                        // daemon: this daemon, its last one, takes it back
                        // when it returns (a daemon cut off, then taken
                        // offline), and no one else drives the update,
                        // which members after it may hold; a rebuilt
                        // region after it may even lack it (simulator seed
                        // 99000434). A region that went to another daemon
                        // drops it below, in the configuration that says so.
                        let Some((_, sub, region)) = config
                            .region(state_key.0)
                            .filter(|(_, _, r)| r.chain.contains(&me) || r.chain.is_empty())
                        else {
                            dropped.push(*version);
                            continue;
                        };
                        pending.phase = match pending.phase {
                            Phase::Held { .. } => Phase::Held { blocked: true },
                            Phase::Sending { .. } | Phase::Acked | Phase::Blocked => Phase::Blocked,
                        };
                        if sub != 0 || region.chain.first() != Some(&me) {
                            // Only the key region's head answers clients.
                            refused.append(&mut pending.replies);
                        }
                        continue;
                    }
                };
                let Some(pos) = hops
                    .iter()
                    .position(|h| h.daemon == me && h.region == state_key.0)
                else {
                    dropped.push(*version); // this daemon left the region's chain
                    continue;
                };
                // An acknowledgement came from the old chain: whoever
                // follows this daemon now may not hold the update yet, so
                // it must acknowledge again (members that committed it do
                // so at once). The last hop commits without one, below.
                pending.phase = match pending.phase {
                    Phase::Held { .. } => Phase::Held { blocked: false },
                    Phase::Sending { sent_tick } => Phase::Sending { sent_tick },
                    // Not sent in this epoch yet: the redrive below (or
                    // the predecessor's forward) sends it.
                    Phase::Acked | Phase::Blocked => Phase::Sending { sent_tick: tick },
                };
                let last = pos + 1 == hops.len();
                pending.forward.hops = hops;
                pending.forward.position = pos as u32;
                pending.forward.epoch = epoch;
                if pos == 0 {
                    // Head of the key region: drive the update again.
                    pending.forward.from = me;
                } else {
                    // Someone else heads it now; they answer its clients.
                    refused.append(&mut pending.replies);
                }
                if pos == 0 || last {
                    redrive.push((state_key.clone(), *version));
                }
            }
            for version in dropped {
                if let Some(p) = state.pending.remove(&version) {
                    refused.extend(p.replies);
                }
            }
            // Queued requests were received in the old epoch and are not
            // evaluated in the new one, even by a point leader that stays:
            // the client may have had another copy answered meanwhile (a
            // CMPFAIL, forgotten with the epoch's refusals) and moved on,
            // and evaluating the queued copy later could apply what was
            // answered as refused (simulator seed 3200417, within f). The
            // client retries in the new epoch, where a retry is recognized.
            refused.extend(state.queued.drain(..).map(|(r, _)| r));
        }
        for reply in refused {
            // Not applied here: the client refreshes its configuration and
            // retries at the new point leader, which recognizes a retry.
            self.reply(reply, DaemonResponse::WrongEpoch { epoch });
        }
        for (state_key, version) in redrive {
            self.continue_pending(&state_key, version);
        }
        self.keys.retain(|_, s| !s.is_idle());
        self.settle_rebuilt();
        let future = std::mem::take(&mut self.future);
        for msg in future {
            self.handle_chain(msg);
        }
        self.run_local();
    }
}
