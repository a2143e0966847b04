//! Power losses: every daemon crashes at one instant and returns with its
//! disk (`Options::power_loss`).
//!
//! The nemesis otherwise spares each region's last healthy replica; a
//! power loss takes them all, so every region loses its chain, the
//! coordinator keeps each region for the daemon that left it last (an
//! orphan), and the cluster must come back by itself once the daemons
//! restart: orphans adopted, the other replicas transferred again, no
//! acknowledged write lost. The coordinator's members keep their state
//! (its Raft log is fsynced); the simulated disks are those of
//! `--fsync-every-commit` daemons: a region's tail syncs its commit before
//! acknowledging it, the other members commit unsynced, and a power loss
//! takes back every write a daemon made since its last synced one (its
//! interval fsync, a tail's commit, the epoch it records before acting
//! in a new configuration; `MemoryEngine::lose_unsynced`).

use crate::world::{Ev, World};
use tessera_types::DaemonId;

/// Power losses per thousand nemesis turns, when enabled.
const POWER_LOSS_PER_MILLE: u64 = 40;

/// At most this many power losses per seed.
const POWER_LOSSES_MAX: u32 = 2;

/// How long the power stays off at most (ms): restarts come within it,
/// each daemon at its own time.
const OFF_MS_MAX: u64 = 5_000;

impl World {
    /// Cuts the power now and then, when enabled and every daemon runs
    /// healthy (a power loss of a cluster already failing is a beyond-f
    /// case of its own); true when it did.
    pub(crate) fn maybe_power_loss(&mut self) -> bool {
        if !self.power_loss
            || self.report.faults.power_losses >= POWER_LOSSES_MAX
            || !self.power_rng.chance(POWER_LOSS_PER_MILLE)
        {
            return false;
        }
        let ids: Vec<DaemonId> = self.daemons.keys().copied().collect();
        if !ids.iter().all(|&d| self.healthy(d)) {
            return false;
        }
        // A replex seed's coordinator declares lost a daemon silent past
        // its lost timeout and discards its disk: every daemon returns
        // before that, or there would be nothing left to return to.
        let off_max = match self.knobs.lost_timeout_ms {
            Some(lost) => OFF_MS_MAX.min(lost.saturating_sub(1_000)),
            None => OFF_MS_MAX,
        };
        self.report.faults.power_losses += 1;
        self.trace(|| "power loss: every daemon crashes".to_string());
        for d in ids {
            self.faulted.insert(d);
            self.crash(d);
            let lost = self.daemons[&d].data.lose_unsynced();
            self.report.faults.unsynced_lost += lost as u64;
            let back = 100 + self.power_rng.below(off_max.max(200));
            self.at(back, Ev::Restart(d));
        }
        true
    }
}
