//! What `--trace` prints.

use crate::world::World;
use tessera_protocol::TransferMsg;
use tessera_types::{Configuration, DaemonId};

impl World {
    pub(crate) fn trace(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("{:>7} {}", self.now, what());
        }
    }

    pub(crate) fn trace_transfer(&self, d: DaemonId, m: &TransferMsg) {
        match m {
            TransferMsg::Entries {
                transfer,
                attempt,
                seq,
                entries,
                ..
            } => eprintln!(
                "{:>7} {d} transfer {transfer}.{attempt} #{seq}: {:?}",
                self.now,
                entries
                    .iter()
                    .map(|e| (e.key.last().copied(), e.version.0))
                    .collect::<Vec<_>>()
            ),
            other => eprintln!("{:>7} {d} {other:?}", self.now),
        }
    }

    /// A new configuration: its epoch, transfers and every region's chain.
    pub(crate) fn trace_epoch(&self, config: &Configuration) {
        self.trace(|| {
            let space = &config.spaces[0];
            let chains: Vec<String> = space.subspaces[0]
                .regions
                .iter()
                .map(|r| format!("{}:{:?}", r.id, r.chain))
                .collect();
            let others: Vec<String> = space.subspaces[1..]
                .iter()
                .flat_map(|l| l.regions.iter())
                .map(|r| format!("{}:{:?}", r.id, r.chain))
                .collect();
            format!(
                "epoch {} transfers {:?} rebuilds {:?} key regions {} others {}",
                config.epoch,
                config.transfers,
                config
                    .rebuilds
                    .iter()
                    .map(|b| (b.id, b.region, b.to))
                    .collect::<Vec<_>>(),
                chains.join(" "),
                others.join(" ")
            )
        });
    }
}
