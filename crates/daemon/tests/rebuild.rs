//! Rebuilding a lost key region of a replex space from the other replexes,
//! with real daemon nodes wired by an in-test network: the rebuilt point
//! leader must take updates still pending at later parts, and recognize
//! retries of updates it never saw (their writers come with the records).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_daemon::core::ReplyTo;
use tessera_daemon::index::IndexedEngine;
use tessera_daemon::node::{DaemonNode, NodeOptions, Output};
use tessera_daemon::record::Record;
use tessera_protocol::{
    Action, ChainMsg, ClientRef, CoordRequest, DaemonRequest, DaemonResponse, Message, Mutation,
    NumOp, UpdateFlags, UpdateRequest,
};
use tessera_storage::fault::{Hooked, Hooks};
use tessera_storage::{Engine, IndexWrite, MemoryEngine, StorageError, Write};
use tessera_types::coordinate::key_bytes;
use tessera_types::parse::parse_space;
use tessera_types::replex::{covering_set, replex_layouts};
use tessera_types::{
    Configuration, DaemonId, DaemonInfo, DaemonState, Epoch, Rebuild, RegionId, Space, SpaceId,
    Value, Version,
};

/// Key subspace, then replex `a`, then replex `b`: chains K → A → B.
const SPACE: &str =
    "space r key int k attributes int a, int b replex a replex b create 2 partitions";
/// Part `p`'s regions live on daemon `p + 1`; daemon 4 is the spare.
const SPARE: DaemonId = DaemonId(4);

fn daemon_info(id: u64, state: DaemonState) -> (DaemonId, DaemonInfo) {
    let id = DaemonId(id);
    let info = DaemonInfo {
        id,
        addr: format!("d{}", id.0),
        state,
        metrics: None,
    };
    (id, info)
}

fn first_config() -> Configuration {
    config_of(SPACE)
}

fn config_of(space: &str) -> Configuration {
    let desc = parse_space(space).unwrap();
    let (mut subspaces, _) = replex_layouts(&desc, RegionId(1));
    for (p, layout) in subspaces.iter_mut().enumerate() {
        for region in &mut layout.regions {
            region.chain = vec![DaemonId(p as u64 + 1)];
        }
    }
    Configuration {
        epoch: Epoch(1),
        daemons: (1..=4)
            .map(|i| daemon_info(i, DaemonState::Available))
            .collect(),
        spaces: vec![Space {
            id: SpaceId(1),
            desc,
            subspaces,
            indexes: Vec::new(),
        }],
        ..Configuration::default()
    }
}

/// The daemons, the messages between them, and what they told clients
/// and the coordinator.
struct Net {
    nodes: BTreeMap<DaemonId, DaemonNode>,
    engines: BTreeMap<DaemonId, Arc<IndexedEngine>>,
    queue: VecDeque<(DaemonId, Message)>,
    replies: Vec<(ReplyTo, DaemonResponse)>,
    completed: BTreeSet<u64>,
    /// Messages to these daemons are lost.
    dead: BTreeSet<DaemonId>,
    /// Chain acknowledgements to these daemons are lost.
    deaf: BTreeSet<DaemonId>,
}

impl Net {
    fn new(config: &Configuration) -> Net {
        Net::with_disks(config, |_| Arc::new(MemoryEngine::new()))
    }

    /// The daemons of `config`, each storing on the engine `disk` gives it.
    fn with_disks(config: &Configuration, disk: impl Fn(DaemonId) -> Arc<dyn Engine>) -> Net {
        let mut net = Net {
            nodes: BTreeMap::new(),
            engines: BTreeMap::new(),
            queue: VecDeque::new(),
            replies: Vec::new(),
            completed: BTreeSet::new(),
            dead: BTreeSet::new(),
            deaf: BTreeSet::new(),
        };
        for &d in config.daemons.keys() {
            let engine = Arc::new(IndexedEngine::open(disk(d), config).unwrap());
            let options = NodeOptions {
                addr: format!("d{}", d.0),
                transfer_batch: 3,
                collect_ticks: tessera_daemon::node::COLLECT_TICKS,
                metrics: None,
            };
            let mut outputs = Vec::new();
            let node = DaemonNode::new(
                d,
                options,
                Arc::new(config.clone()),
                engine.clone(),
                Duration::ZERO,
                &mut |o| outputs.push(o),
            );
            net.nodes.insert(d, node);
            net.engines.insert(d, engine);
            net.take(outputs);
        }
        net
    }

    fn take(&mut self, outputs: Vec<Output>) {
        for o in outputs {
            match o {
                Output::Send { to, msg } => self.queue.push_back((to, msg)),
                Output::Reply { to, response } => self.replies.push((to, response)),
                Output::Coord(CoordRequest::RebuildComplete { rebuild }) => {
                    self.completed.insert(rebuild);
                }
                Output::Job(job) => panic!("no job expected here: {job:?}"),
                Output::Coord(_) | Output::Stop(_) => {}
            }
        }
    }

    fn with(&mut self, d: DaemonId, f: impl FnOnce(&DaemonNode, &mut dyn FnMut(Output))) {
        let mut outputs = Vec::new();
        if let Some(node) = self.nodes.get(&d) {
            f(node, &mut |o| outputs.push(o));
        }
        self.take(outputs);
    }

    /// Delivers until nothing is left in flight.
    fn run(&mut self) {
        while let Some((to, msg)) = self.queue.pop_front() {
            let ack = matches!(msg, Message::Chain(ChainMsg::Ack(_)));
            let lost = self.dead.contains(&to) || (ack && self.deaf.contains(&to));
            if !lost {
                self.with(to, |node, out| node.on_peer(msg, out));
            }
        }
    }

    fn install(&mut self, config: &Configuration) {
        let ids: Vec<DaemonId> = self.nodes.keys().copied().collect();
        for d in ids {
            self.with(d, |node, out| {
                node.on_config(Arc::new(config.clone()), out);
            });
        }
        self.run();
    }

    fn ticks(&mut self, n: usize) {
        for _ in 0..n {
            let ids: Vec<DaemonId> = self.nodes.keys().copied().collect();
            for d in ids {
                self.with(d, |node, out| node.on_tick(out));
            }
            self.run();
        }
    }

    /// Sends `request` to daemon `d` and returns its answer, if one came.
    fn call(
        &mut self,
        d: DaemonId,
        epoch: Epoch,
        request: DaemonRequest,
    ) -> Option<DaemonResponse> {
        let to = ReplyTo {
            conn: 1,
            id: self.replies.len() as u64 + 1000,
        };
        self.with(d, |node, out| {
            node.on_request(to, epoch, request, Duration::ZERO, out)
        });
        self.run();
        self.replies
            .iter()
            .find(|(r, _)| *r == to)
            .map(|(_, response)| response.clone())
    }

    /// The record daemon `d` stores for `key` in the region of part `part`
    /// that holds it (by `config`), if any.
    fn record(&self, config: &Configuration, d: DaemonId, part: usize, key: i64) -> Option<Record> {
        let layout = &config.spaces[0].subspaces[part];
        layout.regions.iter().find_map(|r| {
            let bytes = self.engines[&d]
                .get(r.id, &key_bytes(&Value::Int(key)))
                .unwrap()?;
            Some(Record::decode(&bytes).unwrap())
        })
    }
}

fn update(key: i64, request_no: u64, mutations: Vec<Mutation>) -> DaemonRequest {
    DaemonRequest::Update(UpdateRequest {
        since: Default::default(),
        space: SpaceId(1),
        key: Value::Int(key),
        client: ClientRef {
            client_id: 77,
            request_no,
        },
        flags: UpdateFlags::default(),
        checks: Vec::new(),
        mutations,
        auth: Default::default(),
        secret: None,
    })
}

fn set(attr: usize, v: i64) -> Mutation {
    Mutation {
        attr,
        action: tessera_protocol::Action::Set(Value::Int(v)),
        path: None,
    }
}

fn add(attr: usize, v: i64) -> Mutation {
    Mutation {
        attr,
        action: Action::Num(NumOp::Add, Value::Int(v)),
        path: None,
    }
}

/// The configuration after daemon 1 (every key region) fails: its
/// regions have no daemon and rebuild on the spare from their covering
/// sets.
fn failed_config(first: &Configuration) -> Configuration {
    let mut config = first.clone();
    config.epoch = Epoch(2);
    config
        .daemons
        .insert(DaemonId(1), daemon_info(1, DaemonState::Offline).1);
    for r in &mut config.spaces[0].subspaces[0].regions {
        r.chain.clear();
    }
    let lost: BTreeSet<RegionId> = config.spaces[0].subspaces[0]
        .regions
        .iter()
        .map(|r| r.id)
        .collect();
    config.rebuilds = lost
        .iter()
        .enumerate()
        .map(|(n, &region)| {
            let sources = covering_set(&config.spaces[0], &lost, region)
                .unwrap()
                .into_iter()
                .map(|s| (s, config.region(s).unwrap().2.chain[0]))
                .collect();
            Rebuild {
                id: n as u64 + 1,
                region,
                to: SPARE,
                sources,
            }
        })
        .collect();
    config
}

/// The configuration in which every rebuild joined.
fn joined_config(failed: &Configuration) -> Configuration {
    let mut config = failed.clone();
    config.epoch = Epoch(3);
    for r in &mut config.spaces[0].subspaces[0].regions {
        r.chain = vec![SPARE];
    }
    config.rebuilds.clear();
    config
}

/// Fails daemon 1, rebuilds its regions on the spare, and joins them.
fn fail_and_rebuild(net: &mut Net, first: &Configuration) -> Configuration {
    net.dead.insert(DaemonId(1));
    net.nodes.remove(&DaemonId(1));
    let failed = failed_config(first);
    net.install(&failed);
    let expected: BTreeSet<u64> = failed.rebuilds.iter().map(|b| b.id).collect();
    assert_eq!(net.completed, expected, "every rebuild reports completion");
    let joined = joined_config(&failed);
    net.install(&joined);
    joined
}

#[test]
fn a_rebuilt_point_leader_takes_updates_pending_at_later_parts() {
    let first = first_config();
    let mut net = Net::new(&first);
    let leader = DaemonId(1);
    assert_eq!(
        net.call(
            leader,
            first.epoch,
            update(7, 1, vec![set(1, 1), set(2, 2)])
        ),
        Some(DaemonResponse::Done)
    );
    // Seven other keys, so that the sources answer several pages.
    for key in 100..107 {
        let done = net.call(
            leader,
            first.epoch,
            update(key, key as u64, vec![set(1, key)]),
        );
        assert_eq!(done, Some(DaemonResponse::Done));
    }
    // An atomic add reaches A and B, but B's acknowledgement to A is
    // lost and the point leader fails: the update is pending at A.
    net.dead.insert(leader);
    net.deaf.insert(DaemonId(2));
    assert_eq!(
        net.call(leader, first.epoch, update(7, 2, vec![add(1, 10)])),
        None
    );
    net.deaf.clear();
    let at_a = net.record(&first, DaemonId(2), 1, 7).unwrap();
    let at_b = net.record(&first, DaemonId(3), 2, 7).unwrap();
    let issued = at_b.version;
    assert!(
        at_a.version < issued,
        "pending at A, committed at its tail B"
    );
    assert_eq!(at_b.object.as_ref().unwrap().values[1], Value::Int(11));

    let joined = fail_and_rebuild(&mut net, &first);
    // The rebuilt key region holds the update A held pending, with its
    // writer; A commits it once driven again through the whole chain.
    let rebuilt = net.record(&joined, SPARE, 0, 7).unwrap();
    assert_eq!(rebuilt.version, issued);
    assert_eq!(rebuilt.object.as_ref().unwrap().values[1], Value::Int(11));
    net.ticks(tessera_daemon::core::REDRIVE_TICKS as usize + 1);
    assert_eq!(
        net.record(&joined, DaemonId(2), 1, 7).unwrap().version,
        issued
    );
    // The client's retry is recognized, not applied a second time.
    assert_eq!(
        net.call(SPARE, joined.epoch, update(7, 2, vec![add(1, 10)])),
        Some(DaemonResponse::Done)
    );
    // The next update follows the pending one everywhere.
    assert_eq!(
        net.call(SPARE, joined.epoch, update(7, 3, vec![add(1, 100)])),
        Some(DaemonResponse::Done)
    );
    let mut versions = BTreeSet::new();
    for (part, d) in [(0, SPARE), (1, DaemonId(2)), (2, DaemonId(3))] {
        let record = net.record(&joined, d, part, 7).unwrap();
        assert_eq!(
            record.object.unwrap().values[1],
            Value::Int(111),
            "part {part}"
        );
        versions.insert(record.version);
    }
    assert_eq!(versions.len(), 1, "one version of the key in every part");
    assert!(versions.into_iter().next().unwrap() > Version(issued.0));
    // Every other key came back too, in the region the key subspace
    // places it in.
    for key in 100..107 {
        let got = net.call(
            SPARE,
            joined.epoch,
            DaemonRequest::Get {
                space: SpaceId(1),
                key: Value::Int(key),
                auth: Default::default(),
            },
        );
        match got {
            Some(DaemonResponse::Found { object, .. }) => {
                assert_eq!(object.decode().unwrap().values[1], Value::Int(key))
            }
            other => panic!("key {key}: {other:?}"),
        }
    }
}

#[test]
fn a_rebuilt_key_region_recognizes_a_retry_of_a_committed_update() {
    let first = first_config();
    let mut net = Net::new(&first);
    let leader = DaemonId(1);
    assert_eq!(
        net.call(leader, first.epoch, update(7, 1, vec![set(1, 1)])),
        Some(DaemonResponse::Done)
    );
    // Committed everywhere, but the answer is lost with the point leader.
    assert_eq!(
        net.call(leader, first.epoch, update(7, 2, vec![add(1, 10)])),
        Some(DaemonResponse::Done)
    );
    let joined = fail_and_rebuild(&mut net, &first);
    let before = net.record(&joined, SPARE, 0, 7).unwrap();
    assert_eq!(before.object.as_ref().unwrap().values[1], Value::Int(11));
    assert_eq!(
        net.call(SPARE, joined.epoch, update(7, 2, vec![add(1, 10)])),
        Some(DaemonResponse::Done)
    );
    let after = net.record(&joined, SPARE, 0, 7).unwrap();
    assert_eq!(after, before, "the retry changed nothing");
}

/// A disk whose writes of records fail once it breaks (dropping a region,
/// which writes no record, still works: the rebuild's clear goes through).
struct Breakable(AtomicBool);

impl Hooks for Breakable {
    fn write(&self, writes: &[Write], _: &[IndexWrite], _: usize) -> Result<(), StorageError> {
        if self.0.load(Ordering::Acquire) && !writes.is_empty() {
            return Err(StorageError::Engine("the test broke this disk".into()));
        }
        Ok(())
    }
}

/// The spare's disk breaks while it stores the one page its one source
/// sends (the last): the failed store poisons it, and it must not report
/// the rebuild complete. Reported, the coordinator would make it the
/// region's member, holding nothing of what the region acknowledged.
#[test]
fn a_rebuild_whose_store_failed_is_not_reported_complete() {
    let first = config_of(
        "space r key int k attributes int a, int b replex a replex b create 1 partitions",
    );
    let spare_disk = Arc::new(Hooked::new(
        Arc::new(MemoryEngine::new()),
        Breakable(AtomicBool::new(false)),
    ));
    let mut net = Net::with_disks(&first, |d| {
        if d == SPARE {
            spare_disk.clone()
        } else {
            Arc::new(MemoryEngine::new())
        }
    });
    // Fewer keys than a page holds (`transfer_batch`): one page, the last.
    for key in 0..2 {
        let done = net.call(DaemonId(1), first.epoch, update(key, 1, vec![set(1, key)]));
        assert_eq!(done, Some(DaemonResponse::Done));
    }
    spare_disk.hooks().0.store(true, Ordering::Release);
    net.dead.insert(DaemonId(1));
    net.nodes.remove(&DaemonId(1));
    let failed = failed_config(&first);
    assert_eq!(failed.rebuilds.len(), 1);
    net.install(&failed);
    assert!(
        net.nodes[&SPARE].poisoned(),
        "the failed store poisoned the spare"
    );
    assert!(net.completed.is_empty(), "reported: {:?}", net.completed);
    assert!(
        net.engines[&SPARE]
            .get(failed.rebuilds[0].region, &key_bytes(&Value::Int(0)))
            .unwrap()
            .is_none(),
        "the spare holds nothing of the region"
    );
}
