//! What `--trace` prints.

use crate::world::World;
use tessera_daemon::record::Record;
use tessera_protocol::{ChainMsg, Message, RebuildMsg, TransferMsg};
use tessera_types::{Configuration, DaemonId};

impl World {
    pub(crate) fn trace(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("{:>7} {}", self.now, what());
        }
    }

    /// A peer message `d` sends `to`, when it is about moving data: a
    /// transfer's, a rebuild's page (each entry's key, version, object and
    /// writers), or a chain's forward.
    pub(crate) fn trace_peer(&self, d: DaemonId, to: DaemonId, msg: &Message) {
        match msg {
            Message::Transfer(m) => self.trace_transfer(d, m),
            Message::Rebuild(RebuildMsg::Page {
                rebuild,
                source,
                entries,
                done,
                ..
            }) => {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|e| {
                        let committed = match e.committed.as_deref().map(Record::decode) {
                            Some(Ok(r)) => format!(
                                "v{} {:?} {:?}",
                                r.version.0,
                                r.object.map(|o| o.values),
                                r.recent
                            ),
                            Some(Err(_)) => "(bad record)".to_string(),
                            None => "none".to_string(),
                        };
                        let pending: Vec<u64> = e.pending.iter().map(|p| p.version.0).collect();
                        format!(
                            "{:?} committed {committed} pending {pending:?}",
                            e.key.last()
                        )
                    })
                    .collect();
                self.trace(|| {
                    format!("{d} -> {to} rebuild {rebuild} page of {source} (done: {done}): {entries:?}")
                });
            }
            Message::Chain(ChainMsg::Ack(a)) => self.trace(|| {
                format!(
                    "{d} -> {to} ack {:?} v{} region {} at {} backfill {} {}",
                    a.key, a.version.0, a.region, a.position, a.backfill, a.epoch
                )
            }),
            Message::Chain(ChainMsg::Forward(f)) => self.trace(|| {
                format!(
                    "{d} -> {to} forward at {} {} {:?} v{} {:?} from {:?} hops {:?}",
                    f.position,
                    f.epoch,
                    f.key,
                    f.version.0,
                    f.object
                        .as_ref()
                        .and_then(|o| o.decode().ok())
                        .map(|o| o.values[1..].to_vec()),
                    f.client,
                    f.hops
                        .iter()
                        .map(|h| (h.daemon, h.region, h.write, h.after.map(|v| v.0)))
                        .collect::<Vec<_>>()
                )
            }),
            _ => {}
        }
    }

    fn trace_transfer(&self, d: DaemonId, m: &TransferMsg) {
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
