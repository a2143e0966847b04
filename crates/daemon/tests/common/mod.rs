//! Helpers of the tests that drive one daemon node directly: a
//! configuration in which daemon [`ME`] holds the one region of a space,
//! starting the node, and running its ticks.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{DaemonNode, NodeOptions, Output};
use tessera_protocol::CoordRequest;
use tessera_types::{
    Configuration, DaemonId, DaemonInfo, DaemonState, Epoch, IndexPart, PartId, PartState, Region,
    RegionId, Space, SpaceDesc, SpaceId, SubspaceLayout,
};

/// The daemon under test.
pub const ME: DaemonId = DaemonId(1);
/// The one region of the space, held by [`ME`] alone.
pub const REGION: RegionId = RegionId(1);

/// Epoch 5: space 1 of `desc` with one key region, [`REGION`], held by
/// [`ME`], and these local indexes.
pub fn one_region(desc: SpaceDesc, indexes: Vec<IndexPart>) -> Configuration {
    let space = Space {
        id: SpaceId(1),
        desc,
        subspaces: vec![SubspaceLayout {
            attrs: vec![0],
            splits: vec![vec![]],
            regions: vec![Region {
                id: REGION,
                chain: vec![ME],
            }],
            part: PartId(0),
            state: PartState::Ready,
            kind: Default::default(),
        }],
        indexes,
    };
    Configuration {
        epoch: Epoch(5),
        daemons: [(
            ME,
            DaemonInfo {
                id: ME,
                addr: "d1:1".into(),
                state: DaemonState::Available,
                metrics: None,
            },
        )]
        .into_iter()
        .collect(),
        spaces: vec![space],
        ..Configuration::default()
    }
}

/// Daemon [`ME`] under `config`, writing through `engine`.
pub fn start(config: &Configuration, engine: Arc<IndexedEngine>) -> DaemonNode {
    let options = NodeOptions {
        addr: "d1:1".into(),
        transfer_batch: 8,
        collect_ticks: tessera_daemon::node::COLLECT_TICKS,
        metrics: None,
    };
    DaemonNode::new(
        ME,
        options,
        Arc::new(config.clone()),
        engine,
        Duration::ZERO,
        &mut |_| {},
    )
}

/// One tick; the regions its backfill reports name as finished.
pub fn tick(node: &DaemonNode) -> Vec<RegionId> {
    let mut done = Vec::new();
    node.on_tick(&mut |o| {
        if let Output::Coord(CoordRequest::BackfillReport { entries_done, .. }) = o {
            done.extend(entries_done);
        }
    });
    done
}
