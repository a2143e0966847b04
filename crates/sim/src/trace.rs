//! What `--trace` prints.

use crate::world::World;
use tessera_protocol::TransferMsg;
use tessera_types::DaemonId;
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
}
