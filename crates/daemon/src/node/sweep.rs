//! Anti-entropy at every replica of a non-key region, and at the head of
//! a key region (see [`super::Job::Sweep`]).

use super::{lock, DaemonNode, Out, Output, SWEEP_OBJECTS_MAX};
use crate::chain::key_region;
use crate::index::{entry_bounds, ordered_entry, Slot};
use crate::record::Record;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use tessera_protocol::CoordRequest;
use tessera_protocol::{HeldObjects, Message};
use tessera_storage::IndexRange;
use tessera_types::coordinate::{key_bytes, key_value};
use tessera_types::sortkey::{order_coordinate, value_of};
use tessera_types::{
    Configuration, DaemonId, RegionId, Space, SubspaceKind, SubspaceLayout, Value, Version,
};

/// An indexlet's head counts at most this many entries per sweep pass;
/// beyond it the count says only "at least".
const INDEXLET_COUNT_MAX: u64 = 1 << 22;

/// Why a round over part of a region stopped short.
#[derive(Debug, thiserror::Error)]
pub(super) enum RoundFailed {
    #[error(transparent)]
    Storage(#[from] tessera_storage::StorageError),
    #[error(transparent)]
    Record(#[from] crate::record::DecodeRecordError),
}

impl DaemonNode {
    /// One round of a job that walks `region` a part at a time: decodes
    /// the records after the cursor `cursors` keeps for the region and
    /// hands each to `visit`, which says whether it counts toward `max`;
    /// at `max` the cursor stays at the last record, else the next round
    /// starts over.
    pub(super) fn scan_round(
        &self,
        cursors: &Mutex<HashMap<RegionId, Vec<u8>>>,
        region: RegionId,
        max: usize,
        mut visit: impl FnMut(&[u8], Record) -> bool,
    ) -> Result<(), RoundFailed> {
        let after = lock(cursors).remove(&region);
        let mut counted = 0;
        let mut last = None;
        let mut undecodable = None;
        self.engine()
            .scan(region, after.as_deref(), &mut |key, value| {
                match Record::decode(value) {
                    Ok(record) => {
                        if visit(key, record) {
                            counted += 1;
                        }
                    }
                    Err(e) => {
                        undecodable = Some(e);
                        return false;
                    }
                }
                last = Some(key.to_vec());
                counted < max
            })?;
        if let Some(e) = undecodable {
            return Err(e.into());
        }
        if counted >= max {
            if let Some(last) = last {
                lock(cursors).insert(region, last);
            }
        }
        Ok(())
    }

    /// See [`Job::Sweep`].
    pub(super) fn sweep(&self, region: RegionId, every_replica: bool, out: Out<'_>) {
        let config = self.config();
        let Some((space, subspace, _)) = config.region(region) else {
            return;
        };
        if subspace == 0 {
            return self.expect(&config, space, region, every_replica, out);
        }
        // An indexlet's head also reports its size, once per pass over it
        // (when the sweep starts over), for the leader to split it.
        let layout = &space.subspaces[subspace];
        let starts_over = !lock(&self.sweeps).contains_key(&region);
        let head = config
            .region(region)
            .is_some_and(|(_, _, r)| r.chain.first() == Some(&self.me));
        if layout.kind == SubspaceKind::GlobalIndex && starts_over && head {
            match self.indexlet_size(layout, region) {
                Ok((entries, median)) => out(Output::Coord(CoordRequest::IndexletReport {
                    space: space.id,
                    part: layout.part,
                    region,
                    entries,
                    median,
                })),
                Err(e) => return self.poison("counting an indexlet", &e, out),
            }
        }
        // Per point leader: the live objects, and the tombstones. Ordered
        // maps here and below: the reports go out in their order, and a
        // simulated seed replays only if that order is the same in every
        // process (a HashMap's is seeded afresh in each).
        type Reports = (Vec<(Value, Version)>, Vec<(Value, Version)>);
        let mut held: BTreeMap<DaemonId, Reports> = BTreeMap::new();
        let scanned = self.scan_round(&self.sweeps, region, SWEEP_OBJECTS_MAX, |key, record| {
            let (key_value, live) = match &record.object {
                Some(object) => (object.values[0].clone(), true),
                None => match key_value(key) {
                    Some(value) => (value, false),
                    None => return false,
                },
            };
            if let Some(&leader) = key_region(space, &key_value).and_then(|r| r.chain.first()) {
                let reports = held.entry(leader).or_default();
                let list = if live { &mut reports.0 } else { &mut reports.1 };
                list.push((key_value, record.version));
            }
            true
        });
        if let Err(e) = scanned {
            return self.poison("an anti-entropy sweep", &e, out);
        }
        for (leader, (objects, removed)) in held {
            let msg = Message::Held(HeldObjects {
                epoch: config.epoch,
                space: space.id,
                region,
                objects,
                removed,
                absent: Vec::new(),
                from: self.me,
            });
            out(Output::Send { to: leader, msg });
        }
    }

    /// How many entries indexlet `region` of global index `layout` holds
    /// (at most [`INDEXLET_COUNT_MAX`]), and the order coordinate of its
    /// middle entry's value. Two walks over the entries' keys, no record
    /// read: once per sweep pass.
    fn indexlet_size(
        &self,
        layout: &SubspaceLayout,
        region: RegionId,
    ) -> Result<(u64, Option<u64>), RoundFailed> {
        let Some(&attr) = layout.attrs.first() else {
            return Ok((0, None));
        };
        let slot = Slot::Ordered(attr).number();
        let start = ordered_entry(slot, &[], &[]);
        let end = entry_bounds(slot, (0, u64::MAX)).1;
        let range = || IndexRange {
            start: &start,
            end: end.as_deref(),
            reverse: false,
        };
        let mut entries = 0u64;
        self.engine().index_scan(region, range(), &mut |_| {
            entries += 1;
            entries < INDEXLET_COUNT_MAX
        })?;
        let mut seen = 0u64;
        let mut median = None;
        let dtype = self
            .config()
            .region(region)
            .and_then(|(space, _, _)| space.desc.attrs.get(attr).map(|a| a.dtype));
        self.engine().index_scan(region, range(), &mut |entry| {
            seen += 1;
            if seen > entries / 2 {
                median = dtype
                    .and_then(|dtype| value_of(entry.get(4..).unwrap_or_default(), dtype))
                    .and_then(|value| order_coordinate(&value));
                return false;
            }
            true
        })?;
        Ok((entries, median))
    }

    /// The sweep of key region `region` at its head: for the next objects
    /// it holds, the head (with `every_replica`, every replica) of each
    /// ready non-key region where one belongs is told to expect it at its
    /// version ([`Message::Expected`]). Every replica now and then, not
    /// the head alone: after a power loss one replica of a region can lack
    /// an object its head holds (simulator seed 243000018,
    /// `--power-loss`), which asking the head never showed.
    fn expect(
        &self,
        config: &Configuration,
        space: &Space,
        region: RegionId,
        every_replica: bool,
        out: Out<'_>,
    ) {
        // By home region, the objects to expect there.
        let mut expected = BTreeMap::new();
        let ready: Vec<&SubspaceLayout> = space
            .subspaces
            .iter()
            .skip(1)
            .filter(|layout| layout.state.is_ready())
            .collect();
        let scanned = self.scan_round(&self.sweeps, region, SWEEP_OBJECTS_MAX, |_, record| {
            let Some(object) = &record.object else {
                return false;
            };
            for layout in &ready {
                let home = layout.region_of(object);
                if !home.chain.is_empty() {
                    let (_, list) = expected.entry(home.id).or_insert((home, Vec::new()));
                    list.push((object.values[0].clone(), record.version));
                }
            }
            true
        });
        if let Err(e) = scanned {
            return self.poison("an anti-entropy sweep", &e, out);
        }
        for (home, objects) in expected.into_values() {
            let replicas = if every_replica {
                &home.chain[..]
            } else {
                &home.chain[..1]
            };
            let msg = Message::Expected(HeldObjects {
                epoch: config.epoch,
                space: space.id,
                region: home.id,
                objects,
                removed: Vec::new(),
                absent: Vec::new(),
                from: self.me,
            });
            for &replica in replicas {
                out(Output::Send {
                    to: replica,
                    msg: msg.clone(),
                });
            }
        }
    }

    /// A point leader's [`Message::Expected`] at a replica of a non-key
    /// region: the keys of which it holds no record at all (neither the
    /// object nor a tombstone) go back to their point leaders as `absent`.
    /// A write on its way here is no record yet, but its point leader has
    /// it under way and ignores the report; one that committed here left
    /// a record.
    pub(super) fn on_expected(&self, expected: HeldObjects, out: Out<'_>) {
        let config = self.config();
        if expected.epoch != config.epoch {
            return;
        }
        let Some((space, subspace, region)) = config.region(expected.region) else {
            return;
        };
        if space.id != expected.space || subspace == 0 || !region.chain.contains(&self.me) {
            return;
        }
        let mut absent: BTreeMap<DaemonId, Vec<(Value, Version)>> = BTreeMap::new();
        for (key, version) in expected.objects {
            match self.engine().get(region.id, &key_bytes(&key)) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    if let Some(&leader) = key_region(space, &key).and_then(|r| r.chain.first()) {
                        absent.entry(leader).or_default().push((key, version));
                    }
                }
                Err(e) => return self.poison("an anti-entropy check", &e, out),
            }
        }
        for (leader, absent) in absent {
            let msg = Message::Held(HeldObjects {
                epoch: config.epoch,
                space: space.id,
                region: region.id,
                objects: Vec::new(),
                removed: Vec::new(),
                absent,
                from: self.me,
            });
            out(Output::Send { to: leader, msg });
        }
    }
}
