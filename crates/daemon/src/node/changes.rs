//! What a new configuration changes for this daemon, as log events: its
//! own state (available, offline) and, per region, whether it joined or
//! left the chain, became or stopped being the point leader, or started
//! or finished a state transfer. Each change is logged once, at the epoch
//! that made it, so an operator can follow a region across daemons by
//! grepping its id; nothing is logged for an epoch that changes nothing
//! here.

use tessera_types::{Configuration, DaemonId, DaemonState, Epoch, RegionId};

/// One change, as this daemon sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// This daemon's state in the configuration changed.
    Daemon { state: DaemonState },
    /// It is now in the region's chain, at `position` (0 is the head).
    Joined { region: RegionId, position: usize },
    /// It is no longer in the region's chain.
    Left { region: RegionId },
    /// It now heads a region of the key subspace: the point leader.
    Leads { region: RegionId },
    /// It heads that key region no more.
    StoppedLeading { region: RegionId },
    /// A transfer it sends (`sending`) or receives started.
    TransferStarted {
        transfer: u64,
        region: RegionId,
        sending: bool,
    },
    /// A transfer it sent or received ended (its target joined the chain,
    /// or it was cancelled).
    TransferEnded {
        transfer: u64,
        region: RegionId,
        sending: bool,
    },
}

/// Per region this daemon is in: its position and whether the region is
/// in the key subspace.
fn places(me: DaemonId, config: &Configuration) -> Vec<(RegionId, usize, bool)> {
    let mut out = Vec::new();
    for space in &config.spaces {
        for (si, layout) in space.subspaces.iter().enumerate() {
            for region in &layout.regions {
                if let Some(position) = region.chain.iter().position(|d| *d == me) {
                    out.push((region.id, position, si == 0));
                }
            }
        }
    }
    out.sort_unstable_by_key(|p| p.0);
    out
}

/// What moving from `old` to `new` changes for daemon `me`, in a stable
/// order: its own state, then regions by id, then transfers by id.
pub(crate) fn changes(me: DaemonId, old: &Configuration, new: &Configuration) -> Vec<Change> {
    let mut out = Vec::new();
    let state = |c: &Configuration| c.daemons.get(&me).map(|d| d.state);
    if let (Some(before), Some(after)) = (state(old), state(new)) {
        if before != after {
            out.push(Change::Daemon { state: after });
        }
    }
    let (before, after) = (places(me, old), places(me, new));
    let find = |list: &[(RegionId, usize, bool)], id| {
        list.binary_search_by_key(&id, |p| p.0)
            .ok()
            .map(|i| list[i])
    };
    for &(region, position, key) in &after {
        let was = find(&before, region);
        if was.is_none() {
            out.push(Change::Joined { region, position });
        }
        let led = was.is_some_and(|(_, p, _)| p == 0);
        if key && position == 0 && !led {
            out.push(Change::Leads { region });
        }
        if key && position != 0 && led {
            out.push(Change::StoppedLeading { region });
        }
    }
    for &(region, position, key) in &before {
        if find(&after, region).is_none() {
            if key && position == 0 {
                out.push(Change::StoppedLeading { region });
            }
            out.push(Change::Left { region });
        }
    }
    let mine = |c: &Configuration| -> Vec<(u64, RegionId, bool)> {
        c.transfers
            .iter()
            .filter(|t| t.from == me || t.to == me)
            .map(|t| (t.id, t.region, t.from == me))
            .collect()
    };
    let (sent_before, sent_after) = (mine(old), mine(new));
    for &(transfer, region, sending) in &sent_after {
        if !sent_before.iter().any(|t| t.0 == transfer) {
            out.push(Change::TransferStarted {
                transfer,
                region,
                sending,
            });
        }
    }
    for &(transfer, region, sending) in &sent_before {
        if !sent_after.iter().any(|t| t.0 == transfer) {
            out.push(Change::TransferEnded {
                transfer,
                region,
                sending,
            });
        }
    }
    out
}

/// Logs each change with the epoch that made it.
pub(crate) fn log(changes: &[Change], epoch: Epoch) {
    let epoch = epoch.0;
    for change in changes {
        match *change {
            Change::Daemon {
                state: DaemonState::Offline,
            } => tracing::warn!(epoch, "daemon offline: in no replica chain"),
            Change::Daemon {
                state: DaemonState::Available,
            } => tracing::info!(epoch, "daemon available"),
            Change::Joined { region, position } => {
                tracing::info!(
                    epoch,
                    region = region.0,
                    position,
                    "joined a region's chain"
                )
            }
            Change::Left { region } => {
                tracing::info!(epoch, region = region.0, "left a region's chain")
            }
            Change::Leads { region } => {
                tracing::info!(
                    epoch,
                    region = region.0,
                    "became point leader of a key region"
                )
            }
            Change::StoppedLeading { region } => {
                tracing::info!(
                    epoch,
                    region = region.0,
                    "no longer point leader of a key region"
                )
            }
            Change::TransferStarted {
                transfer,
                region,
                sending,
            }
            | Change::TransferEnded {
                transfer,
                region,
                sending,
            } => {
                let role = if sending { "source" } else { "target" };
                let region = region.0;
                if matches!(change, Change::TransferStarted { .. }) {
                    tracing::info!(epoch, transfer, region, role, "state transfer started")
                } else {
                    tracing::info!(epoch, transfer, region, role, "state transfer finished")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{
        DaemonInfo, PartId, PartState, Region, Space, SpaceId, SubspaceLayout, Transfer,
    };

    const ME: DaemonId = DaemonId(1);

    /// A space whose key subspace has regions 1 and 2 and whose one other
    /// subspace has region 3, with the given chains.
    fn config(
        epoch: u64,
        chains: [&[u64]; 3],
        transfers: Vec<Transfer>,
        me: DaemonState,
    ) -> Configuration {
        let desc = tessera_types::parse::parse_space("space s key k attributes a subspace a")
            .expect("a valid description");
        let region = |id: u64, chain: &[u64]| Region {
            id: RegionId(id),
            chain: chain.iter().map(|d| DaemonId(*d)).collect(),
        };
        let space = Space {
            id: SpaceId(1),
            desc,
            subspaces: vec![
                SubspaceLayout {
                    attrs: vec![0],
                    splits: vec![vec![1 << 63]],
                    regions: vec![region(1, chains[0]), region(2, chains[1])],
                    part: PartId(0),
                    state: PartState::Ready,
                    kind: Default::default(),
                },
                SubspaceLayout {
                    attrs: vec![1],
                    splits: vec![vec![]],
                    regions: vec![region(3, chains[2])],
                    part: PartId(1),
                    state: PartState::Ready,
                    kind: Default::default(),
                },
            ],
            indexes: Vec::new(),
        };
        let daemon = |id: u64, state| {
            let info = DaemonInfo {
                id: DaemonId(id),
                addr: format!("d{id}:1"),
                state,
                metrics: None,
            };
            (DaemonId(id), info)
        };
        Configuration {
            epoch: Epoch(epoch),
            daemons: [daemon(1, me), daemon(2, DaemonState::Available)].into(),
            spaces: vec![space],
            transfers,
            ..Configuration::default()
        }
    }

    fn transfer(id: u64, region: u64, from: u64, to: u64) -> Transfer {
        Transfer {
            id,
            region: RegionId(region),
            from: DaemonId(from),
            to: DaemonId(to),
            replaces: None,
        }
    }

    #[test]
    fn joining_leading_and_transfers_are_each_one_change() {
        let available = DaemonState::Available;
        let old = config(4, [&[2, 1], &[2], &[2]], vec![], available);
        let new = config(5, [&[1], &[2], &[2]], vec![transfer(9, 3, 2, 1)], available);
        assert_eq!(
            changes(ME, &old, &new),
            vec![
                Change::Leads {
                    region: RegionId(1)
                },
                Change::TransferStarted {
                    transfer: 9,
                    region: RegionId(3),
                    sending: false
                },
            ]
        );
        let later = config(6, [&[2], &[2, 1], &[2, 1]], vec![], DaemonState::Available);
        assert_eq!(
            changes(ME, &new, &later),
            vec![
                Change::Joined {
                    region: RegionId(2),
                    position: 1
                },
                Change::Joined {
                    region: RegionId(3),
                    position: 1
                },
                Change::StoppedLeading {
                    region: RegionId(1)
                },
                Change::Left {
                    region: RegionId(1)
                },
                Change::TransferEnded {
                    transfer: 9,
                    region: RegionId(3),
                    sending: false
                },
            ]
        );
        // The same configuration again changes nothing.
        assert_eq!(changes(ME, &later, &later), vec![]);
    }

    #[test]
    fn going_offline_is_a_change_of_the_daemon() {
        let old = config(4, [&[1], &[2], &[1]], vec![], DaemonState::Available);
        let new = config(5, [&[2], &[2], &[2]], vec![], DaemonState::Offline);
        let found = changes(ME, &old, &new);
        assert_eq!(
            found[0],
            Change::Daemon {
                state: DaemonState::Offline
            }
        );
        assert!(found.contains(&Change::Left {
            region: RegionId(3)
        }));
        assert!(found.contains(&Change::StoppedLeading {
            region: RegionId(1)
        }));
    }

    #[test]
    fn each_change_is_one_json_line_with_its_epoch() {
        use tessera_observe::logs::{subscriber, Captured, LogFormat};
        let old = config(4, [&[2, 1], &[2], &[2]], vec![], DaemonState::Available);
        let new = config(
            5,
            [&[1], &[2], &[2]],
            vec![transfer(9, 3, 2, 1)],
            DaemonState::Offline,
        );
        let found = changes(ME, &old, &new);
        let captured = Captured::default();
        let filter = tessera_observe::logs::Filter::new("info");
        let sub = subscriber(LogFormat::Json, filter, captured.clone(), false);
        tracing::subscriber::with_default(sub, || log(&found, new.epoch));
        let text = captured.text();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect();
        assert_eq!(lines.len(), found.len(), "{text}");
        assert!(lines.iter().all(|l| l["epoch"] == 5), "{text}");
        assert_eq!(lines[0]["message"], "daemon offline: in no replica chain");
        assert!(lines
            .iter()
            .any(|l| l["message"] == "state transfer started"
                && l["transfer"] == 9
                && l["role"] == "target"));
    }
}
