//! The replica cores of several daemons, wired by an in-test network that
//! delivers messages in a seeded random order (FIFO per ordered pair of
//! daemons, like TCP), checked against a sequential model: the point leader
//! orders updates in arrival order, so every answer and every replica's
//! final contents must equal applying the updates one by one in that order.

use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use tessera_daemon::chain::{build_hops, key_region};
use tessera_daemon::core::{Effect, Held, HeldKind, ReplicaCore, ReplyTo, STUCK_TICKS};
use tessera_daemon::record::Record;
use tessera_protocol::{
    chain_digest, Action, ChainAck, ChainForward, ChainMsg, ClientRef, CmpFailKind, DaemonResponse,
    HopWrite, Mutation, ObjectBytes, Status, UpdateFlags, UpdateRequest,
};
use tessera_storage::fault::{Hooked, Hooks};
use tessera_storage::{Engine, IndexWrite, MemoryEngine, StorageError, Write};
use tessera_types::coordinate::key_bytes;
use tessera_types::region::default_splits;
use tessera_types::{
    Attribute, Check, Configuration, DaemonId, DaemonInfo, DaemonState, DataType, Epoch, Object,
    PredOp, Region, RegionId, Space, SpaceDesc, SpaceId, SubspaceLayout, Value, Version,
};

/// A space `key k attributes int a, int b subspace a subspace b` with
/// `partitions` regions per subspace, chains of `f + 1` of `daemons`.
fn config(daemons: u64, f: usize, partitions: u32) -> Configuration {
    let desc = SpaceDesc {
        name: "t".into(),
        attrs: vec![
            Attribute {
                name: "k".into(),
                dtype: DataType::Int,
            },
            Attribute {
                name: "a".into(),
                dtype: DataType::Int,
            },
            Attribute {
                name: "b".into(),
                dtype: DataType::Int,
            },
        ],
        subspaces: vec![vec![1], vec![2]],
        indexes: vec![],
        fault_tolerance: f as u32,
        partitions,
        authorization: false,
        global_indexes: Vec::new(),
        replex: None,
    };
    let mut next_region = 0u64;
    let mut next_head = 0u64;
    let subspaces = [vec![0usize], vec![1], vec![2]]
        .into_iter()
        .map(|attrs| {
            let splits = default_splits(partitions, attrs.len());
            let count: usize = splits.iter().map(|s| s.len() + 1).product();
            let regions = (0..count)
                .map(|_| {
                    next_region += 1;
                    next_head += 1;
                    let chain = (0..=f as u64)
                        .map(|i| DaemonId(1 + (next_head + i) % daemons))
                        .collect();
                    Region {
                        id: RegionId(next_region),
                        chain,
                    }
                })
                .collect();
            SubspaceLayout {
                attrs,
                splits,
                regions,
                part: tessera_types::PartId::default(),
                state: tessera_types::PartState::Ready,
                kind: Default::default(),
            }
        })
        .collect();
    Configuration {
        epoch: Epoch(1),
        coordinators: vec![],
        daemons: (1..=daemons)
            .map(|i| {
                let id = DaemonId(i);
                (
                    id,
                    DaemonInfo {
                        id,
                        addr: format!("d{i}"),
                        state: DaemonState::Available,
                        metrics: None,
                    },
                )
            })
            .collect(),
        spaces: vec![Space {
            id: SpaceId(1),
            desc,
            subspaces,
            indexes: vec![],
        }],
        read_only: false,
        transfers: vec![],
        tombstone_horizon: Epoch(0),
        advisor: None,
        rebuilds: vec![],
        waiting: Default::default(),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put { key: i64, a: i64, b: i64 },
    PutIfNotExist { key: i64, a: i64 },
    CondPut { key: i64, a_is: i64, b: i64 },
    Del { key: i64 },
}

fn request(op: &Op, n: u64) -> UpdateRequest {
    let set = |attr, v| Mutation {
        attr,
        action: Action::Set(Value::Int(v)),
        path: None,
    };
    let (key, flags, checks, mutations) = match *op {
        Op::Put { key, a, b } => (
            key,
            UpdateFlags::default(),
            vec![],
            vec![set(1, a), set(2, b)],
        ),
        Op::PutIfNotExist { key, a } => (
            key,
            UpdateFlags {
                must_not_exist: true,
                ..Default::default()
            },
            vec![],
            vec![set(1, a)],
        ),
        Op::CondPut { key, a_is, b } => (
            key,
            UpdateFlags {
                must_exist: true,
                ..Default::default()
            },
            vec![Check {
                attr: 1,
                op: PredOp::Eq(Value::Int(a_is)),
                path: None,
            }],
            vec![set(2, b)],
        ),
        Op::Del { key } => (
            key,
            UpdateFlags {
                must_exist: true,
                erase: true,
                ..Default::default()
            },
            vec![],
            vec![],
        ),
    };
    UpdateRequest {
        since: Default::default(),
        space: SpaceId(1),
        key: Value::Int(key),
        client: ClientRef {
            client_id: 1,
            request_no: n,
        },
        flags,
        checks,
        mutations,
        auth: Default::default(),
        secret: None,
    }
}

/// A refusal the model expects: NOTFOUND, or CMPFAIL of a kind.
#[derive(Debug, PartialEq)]
enum Refused {
    NotFound,
    CmpFail(CmpFailKind),
}

/// The sequential model: the answer each op must get and the state after.
fn model_apply(model: &mut BTreeMap<i64, (i64, i64)>, op: &Op) -> Result<(), Refused> {
    match *op {
        Op::Put { key, a, b } => {
            model.insert(key, (a, b));
            Ok(())
        }
        Op::PutIfNotExist { key, a } => match model.entry(key) {
            std::collections::btree_map::Entry::Occupied(_) => {
                Err(Refused::CmpFail(CmpFailKind::Exists))
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert((a, 0));
                Ok(())
            }
        },
        Op::CondPut { key, a_is, b } => match model.get_mut(&key) {
            None => Err(Refused::NotFound),
            Some(v) if v.0 != a_is => Err(Refused::CmpFail(CmpFailKind::Predicate)),
            Some(v) => {
                v.1 = b;
                Ok(())
            }
        },
        Op::Del { key } => model.remove(&key).map(|_| ()).ok_or(Refused::NotFound),
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let key = 0i64..6;
    let val = -3i64..4;
    prop_oneof![
        4 => (key.clone(), val.clone(), val.clone()).prop_map(|(key, a, b)| Op::Put { key, a, b }),
        1 => (key.clone(), val.clone()).prop_map(|(key, a)| Op::PutIfNotExist { key, a }),
        2 => (key.clone(), val.clone(), val.clone()).prop_map(|(key, a_is, b)| Op::CondPut { key, a_is, b }),
        1 => key.prop_map(|key| Op::Del { key }),
    ]
}

/// What must hold on every replica when op `n` is acknowledged.
#[derive(Clone)]
struct AtAck {
    key: i64,
    /// The key's version after op n: one per successful update of the key.
    version: u64,
    /// The object after op n, if it exists.
    object: Option<(i64, i64)>,
}

fn xorshift(mut x: usize) -> usize {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x.max(1)
}

type Versions = std::collections::BTreeSet<Version>;

/// Hooks that remember every version written to each key of each region,
/// so a test can count how many times updates were applied (versions are
/// not consecutive: each epoch starts at its floor).
#[derive(Default)]
struct Recorder {
    written: std::sync::Mutex<BTreeMap<(RegionId, Vec<u8>), Versions>>,
}

impl Recorder {
    fn versions_written(&self, region: RegionId, key: &[u8]) -> u64 {
        let written = self.written.lock().unwrap();
        written
            .get(&(region, key.to_vec()))
            .map_or(0, |v| v.len() as u64)
    }
}

impl Hooks for Recorder {
    fn write(&self, writes: &[Write], _: &[IndexWrite], _: usize) -> Result<(), StorageError> {
        let mut written = self.written.lock().unwrap();
        for write in writes {
            if let Write::Put { region, key, value } = write {
                let version = Record::decode(value).unwrap().version;
                written
                    .entry((*region, key.clone()))
                    .or_default()
                    .insert(version);
            }
        }
        Ok(())
    }
}

/// A memory engine that records the versions written to it.
type Recording = Hooked<Recorder>;

struct Net {
    at_ack: Vec<AtAck>,
    config: Arc<Configuration>,
    cores: BTreeMap<DaemonId, ReplicaCore>,
    engines: BTreeMap<DaemonId, Arc<Recording>>,
    /// The memory under each engine: what a power loss would leave.
    disks: BTreeMap<DaemonId, Arc<MemoryEngine>>,
    links: BTreeMap<(DaemonId, DaemonId), VecDeque<ChainMsg>>,
    replies: HashMap<u64, DaemonResponse>,
    /// When non-zero, about one message in this many is lost.
    drop_modulus: usize,
    /// The loss generator's state.
    attempts: usize,
}

impl Net {
    fn new(config: &Arc<Configuration>) -> Net {
        let mut cores = BTreeMap::new();
        let mut engines = BTreeMap::new();
        let mut disks = BTreeMap::new();
        for &id in config.daemons.keys() {
            let disk = Arc::new(MemoryEngine::new());
            let engine = Arc::new(Hooked::new(disk.clone(), Recorder::default()));
            cores.insert(id, ReplicaCore::new(id, config.clone(), engine.clone()));
            engines.insert(id, engine);
            disks.insert(id, disk);
        }
        Net {
            at_ack: Vec::new(),
            config: config.clone(),
            cores,
            engines,
            disks,
            links: BTreeMap::new(),
            replies: HashMap::new(),
            drop_modulus: 0,
            attempts: 1,
        }
    }

    fn collect(&mut self, from: DaemonId) {
        for effect in self.cores.get_mut(&from).unwrap().drain_effects() {
            match effect {
                Effect::Ship { .. } => panic!("these configurations have no transfers"),
                Effect::Fatal { during, error } => {
                    panic!("memory engines do not fail: {during}: {error}")
                }
                Effect::Send { to, msg } => {
                    self.links.entry((from, to)).or_default().push_back(msg)
                }
                Effect::Reply { to, response } => {
                    if response == DaemonResponse::Done {
                        self.check_acknowledged(to.id as usize);
                    }
                    assert!(
                        self.replies.insert(to.id, response).is_none(),
                        "request {} answered twice",
                        to.id
                    );
                }
            }
        }
    }

    /// The client hears success only when every replica in every subspace
    /// holds the update: check it at the moment of the answer.
    fn check_acknowledged(&self, n: usize) {
        let Some(at) = self.at_ack.get(n) else { return };
        // Versions in epoch 1 start at its floor, 2³², one per successful
        // update of the key.
        let Some(expected) = at.version.checked_sub(1).map(|v| (1u64 << 32) + v) else {
            return;
        };
        let space = &self.config.spaces[0];
        let kb = key_bytes(&Value::Int(at.key));
        // A later update of the key may have run to completion inside the
        // same call (all its hops on one daemon); then op n is superseded.
        let leader_region = key_region(space, &Value::Int(at.key)).unwrap();
        let leader_version = self.engines[&leader_region.chain[0]]
            .get(leader_region.id, &kb)
            .unwrap()
            .map_or(0, |b| Record::decode(&b).unwrap().version.0);
        if leader_version > expected {
            return;
        }
        let object = at.object.map(|(a, b)| Object {
            values: vec![Value::Int(at.key), Value::Int(a), Value::Int(b)],
        });
        for (si, layout) in space.subspaces.iter().enumerate() {
            for region in &layout.regions {
                let holds = match (&object, si) {
                    (_, 0) => key_region(space, &Value::Int(at.key)).unwrap().id == region.id,
                    (Some(o), _) => layout.region_of(o).id == region.id,
                    (None, _) => false,
                };
                for daemon in &region.chain {
                    let record = self.engines[daemon]
                        .get(region.id, &kb)
                        .unwrap()
                        .map(|b| Record::decode(&b).unwrap());
                    if holds {
                        let v = record.as_ref().map_or(0, |r| r.version.0);
                        assert!(
                            v >= expected,
                            "op {n} acknowledged but {daemon} holds v{v} < v{expected} in subspace {si}"
                        );
                        // Durable at the region's tail, the member an
                        // emptied region comes back from: a power loss
                        // now would not take it back there.
                        if region.chain.last() == Some(daemon) {
                            let durable = self.disks[daemon]
                                .get_durable(region.id, &kb)
                                .map_or(0, |b| Record::decode(&b).unwrap().version.0);
                            assert!(
                                durable >= expected,
                                "op {n} acknowledged but tail {daemon} holds v{expected} durably only v{durable} in subspace {si}"
                            );
                        }
                    } else if let Some(r) = record.filter(|r| r.object.is_some()) {
                        // A tombstone is fine; an object must be a later one.
                        assert!(r.version.0 > expected, "op {n} acknowledged but {daemon} still holds v{} in a region it left (subspace {si})", r.version.0);
                    }
                }
            }
        }
    }

    /// Delivers one message from a link picked by `pick`; false when idle.
    fn step(&mut self, pick: usize) -> bool {
        let busy: Vec<_> = self
            .links
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
            .collect();
        if busy.is_empty() {
            return false;
        }
        let (from, to) = busy[pick % busy.len()];
        let msg = self
            .links
            .get_mut(&(from, to))
            .unwrap()
            .pop_front()
            .unwrap();
        // A fair-lossy network: each message is lost with probability
        // 1/drop_modulus, decided by a seeded generator advanced on every
        // delivery (a rule tied to the schedule could lose one message
        // forever, which no real network does).
        self.attempts = xorshift(self.attempts ^ pick);
        if self.drop_modulus != 0 && self.attempts.is_multiple_of(self.drop_modulus) {
            return true; // lost with a broken connection
        }
        self.cores.get_mut(&to).unwrap().on_chain(msg);
        self.collect(to);
        true
    }
}

fn run(ops: &[Op], schedule: &[usize], daemons: u64, f: usize, partitions: u32, interleave: usize) {
    run_lossy(ops, schedule, daemons, f, partitions, interleave, 0)
}

fn run_lossy(
    ops: &[Op],
    schedule: &[usize],
    daemons: u64,
    f: usize,
    partitions: u32,
    interleave: usize,
    drop_modulus: usize,
) {
    let config = Arc::new(config(daemons, f, partitions));
    let space = &config.spaces[0];
    let mut net = Net::new(&config);
    net.drop_modulus = drop_modulus;
    {
        let mut model = BTreeMap::new();
        let mut versions: HashMap<i64, u64> = HashMap::new();
        for op in ops {
            let key = match *op {
                Op::Put { key, .. }
                | Op::PutIfNotExist { key, .. }
                | Op::CondPut { key, .. }
                | Op::Del { key } => key,
            };
            if model_apply(&mut model, op).is_ok() {
                *versions.entry(key).or_default() += 1;
            }
            net.at_ack.push(AtAck {
                key,
                version: versions.get(&key).copied().unwrap_or(0),
                object: model.get(&key).copied(),
            });
        }
    }
    let mut picks = schedule.iter().copied().cycle();
    for (n, op) in ops.iter().enumerate() {
        let req = request(op, n as u64);
        let leader = key_region(space, &req.key).unwrap().chain[0];
        net.cores.get_mut(&leader).unwrap().on_update(
            ReplyTo {
                conn: 1,
                id: n as u64,
            },
            Epoch(1),
            req,
        );
        net.collect(leader);
        // Deliver a few messages between submissions so updates overlap.
        for _ in 0..interleave {
            net.step(picks.next().unwrap());
        }
    }
    let mut steps = 0;
    loop {
        while net.step(picks.next().unwrap()) {
            steps += 1;
            assert!(steps < 1_000_000, "the chain does not quiesce");
        }
        if net.cores.values().all(|c| c.busy_keys() == 0) {
            break;
        }
        // Idle but unfinished: messages were lost. Time passes.
        assert!(steps < 1_000_000, "lost messages are never made good");
        let ids: Vec<DaemonId> = net.cores.keys().copied().collect();
        for id in ids {
            net.cores.get_mut(&id).unwrap().on_tick();
            net.collect(id);
        }
        steps += 1;
    }

    let mut model = BTreeMap::new();
    for (n, op) in ops.iter().enumerate() {
        let want = model_apply(&mut model, op);
        let got = net
            .replies
            .get(&(n as u64))
            .unwrap_or_else(|| panic!("op {n} {op:?} never answered"));
        match (want, got) {
            (Ok(()), DaemonResponse::Done) => {}
            (Err(Refused::CmpFail(want)), DaemonResponse::CmpFail { kind, .. })
                if want == *kind => {}
            (
                Err(Refused::NotFound),
                DaemonResponse::Failed {
                    status: Status::NotFound,
                    ..
                },
            ) => {}
            (want, got) => panic!("op {n} {op:?}: model says {want:?}, cluster answered {got:?}"),
        }
    }
    for core in net.cores.values() {
        assert_eq!(core.busy_keys(), 0, "work left in flight after quiescence");
    }
    // Every replica of every region holds exactly the model's objects that
    // lie in that region (and tombstones of keys that left it).
    for (si, layout) in space.subspaces.iter().enumerate() {
        for region in &layout.regions {
            let expected: BTreeMap<Vec<u8>, Object> = model
                .iter()
                .map(|(&k, &(a, b))| Object {
                    values: vec![Value::Int(k), Value::Int(a), Value::Int(b)],
                })
                .filter(|o| layout.region_of(o).id == region.id)
                .map(|o| (key_bytes(o.key()), o))
                .collect();
            for daemon in &region.chain {
                let mut got = BTreeMap::new();
                net.engines[daemon]
                    .scan(region.id, None, &mut |k, v| {
                        let record = Record::decode(v).unwrap();
                        if let Some(o) = record.object {
                            got.insert(k.to_vec(), o);
                        }
                        true
                    })
                    .unwrap();
                assert_eq!(
                    got, expected,
                    "subspace {si} region {} at {daemon}",
                    region.id
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn chains_match_a_sequential_model(
        ops in proptest::collection::vec(op_strategy(), 1..60),
        schedule in proptest::collection::vec(any::<usize>(), 1..50),
        daemons in 2u64..6,
        f in 0usize..3,
        partitions in 1u32..5,
        interleave in 0usize..4,
    ) {
        let f = f.min(daemons as usize - 1);
        run(&ops, &schedule, daemons, f, partitions, interleave);
    }
}

#[test]
fn relocation_chain_visits_old_region_before_new() {
    let config = config(4, 1, 4);
    let space = &config.spaces[0];
    // Find two values of `a` that lie in different regions of subspace 1.
    let obj = |a| Object {
        values: vec![Value::Int(7), Value::Int(a), Value::Int(0)],
    };
    let layout = &space.subspaces[1];
    let (a_old, a_new) = (i64::MIN + 1, i64::MAX - 1);
    assert_ne!(
        layout.region_of(&obj(a_old)).id,
        layout.region_of(&obj(a_new)).id
    );
    let hops = build_hops(
        &config,
        space,
        &Value::Int(7),
        Some(&obj(a_old)),
        Some(&obj(a_new)),
        Some(tessera_types::Version(3)),
    )
    .unwrap();
    // key region (2 replicas), subspace 1 old (2) + new (2), subspace 2 (2)
    assert_eq!(hops.len(), 8);
    assert!(hops[..2]
        .iter()
        .all(|h| h.write == HopWrite::Put && h.after == Some(tessera_types::Version(3))));
    assert_eq!(hops[2].region, layout.region_of(&obj(a_old)).id);
    assert!(hops[2..4]
        .iter()
        .all(|h| h.write == HopWrite::Remove && h.after.is_some()));
    assert_eq!(hops[4].region, layout.region_of(&obj(a_new)).id);
    assert!(hops[4..6]
        .iter()
        .all(|h| h.write == HopWrite::Put && h.after.is_none()));
    // A delete visits each subspace's old region only.
    let hops = build_hops(
        &config,
        space,
        &Value::Int(7),
        Some(&obj(a_old)),
        None,
        Some(tessera_types::Version(3)),
    )
    .unwrap();
    assert_eq!(hops.len(), 6);
    assert!(hops.iter().all(|h| h.write == HopWrite::Remove));
    // A region on the way that lost every replica fails the chain rather
    // than being skipped (it would come back stale).
    let mut orphaned = config.clone();
    let lost = orphaned.spaces[0].subspaces[1].region_of(&obj(a_old)).id;
    for layout in &mut orphaned.spaces[0].subspaces {
        for region in layout.regions.iter_mut().filter(|r| r.id == lost) {
            region.chain.clear();
        }
    }
    let space = &orphaned.spaces[0];
    let built = build_hops(
        &orphaned,
        space,
        &Value::Int(7),
        Some(&obj(a_old)),
        Some(&obj(a_new)),
        Some(tessera_types::Version(3)),
    );
    assert_eq!(built, Err(lost));
}

#[test]
fn older_epoch_requests_are_refused() {
    let config = Arc::new(config(3, 1, 2));
    let mut net = Net::new(&config);
    let req = request(&Op::Put { key: 1, a: 1, b: 1 }, 0);
    let leader = key_region(&config.spaces[0], &req.key).unwrap().chain[0];
    net.cores
        .get_mut(&leader)
        .unwrap()
        .on_update(ReplyTo { conn: 1, id: 0 }, Epoch(0), req);
    net.collect(leader);
    assert_eq!(
        net.replies[&0],
        DaemonResponse::WrongEpoch { epoch: Epoch(1) }
    );
}

/// Bytes from the network: a forward whose object lacks attributes of its
/// space, or whose bytes are not one well-formed object, is dropped by the
/// member it reaches, with nothing written and no panic later when code
/// reads the object by attribute or stores its bytes.
#[test]
fn a_forward_whose_object_does_not_fit_its_space_is_dropped() {
    let config = Arc::new(config(3, 1, 2));
    let space = &config.spaces[0];
    let key = Value::Int(1);
    let object = Object {
        values: vec![key.clone(), Value::Int(1), Value::Int(1)],
    };
    let hops = build_hops(&config, space, &key, None, Some(&object), None).unwrap();
    let whole = ObjectBytes::encode(&object);
    let whole = whole.view().unwrap().bytes();
    // Bytes as a peer may send them: `ObjectBytes` on the wire is a byte
    // string, postcard's encoding of a `Vec<u8>`.
    let from_wire = |bytes: &[u8]| -> ObjectBytes {
        postcard::from_bytes(&postcard::to_allocvec(&bytes.to_vec()).unwrap()).unwrap()
    };
    let short = ObjectBytes::encode(&Object {
        values: vec![key.clone()],
    });
    let mut trailing = whole.to_vec();
    trailing.push(0);
    let mut unknown_kind = whole.to_vec();
    let last_value = whole.len() - 2; // an int's tag, then its one-byte varint
    unknown_kind[last_value] = 9;
    for (what, bytes) in [
        ("lacks attributes", short),
        ("is cut short", from_wire(&whole[..whole.len() - 1])),
        ("has bytes after it", from_wire(&trailing)),
        ("has a value of no kind", from_wire(&unknown_kind)),
        ("is empty", from_wire(&[])),
    ] {
        let forward = ChainForward {
            epoch: config.epoch,
            from: hops[0].daemon,
            space: space.id,
            key: key.clone(),
            version: Version::next(None, config.epoch),
            hops: hops.clone(),
            position: 1,
            object: Some(bytes),
            client: ClientRef {
                client_id: 9,
                request_no: 1,
            },
        };
        let member = hops[1].daemon;
        let mut net = Net::new(&config);
        net.cores
            .get_mut(&member)
            .unwrap()
            .on_chain(ChainMsg::Forward(forward.clone()));
        net.collect(member);
        assert!(
            net.links.values().all(VecDeque::is_empty),
            "an object that {what}: sent on"
        );
        assert_eq!(
            net.engines[&member]
                .get(hops[1].region, &key_bytes(&key))
                .unwrap(),
            None,
            "an object that {what}: written"
        );
        // The same forward with the whole object is taken.
        let mut forward = forward;
        forward.object = Some(from_wire(whole));
        net.cores
            .get_mut(&member)
            .unwrap()
            .on_chain(ChainMsg::Forward(forward));
        net.collect(member);
        assert!(
            net.links.values().any(|q| !q.is_empty()),
            "after an object that {what}: the whole one not sent on or acknowledged"
        );
    }
}

/// At most once for a retry that arrives while its original still waits in
/// the point leader's queue (behind a delete, which never pipelines): the
/// retry must be answered with the original's outcome, not run again.
#[test]
fn a_retry_queued_behind_its_original_is_not_applied_twice() {
    let config = Arc::new(config(3, 1, 2));
    let mut net = Net::new(&config);
    let key = 1;
    let leader = key_region(&config.spaces[0], &Value::Int(key))
        .unwrap()
        .chain[0];
    let ops = [
        (0, Op::Put { key, a: 1, b: 1 }),
        (1, Op::Del { key }),
        (2, Op::PutIfNotExist { key, a: 2 }),
        // The client's retry of request 2, on a new connection.
        (2, Op::PutIfNotExist { key, a: 2 }),
    ];
    for (reply_id, (request_no, op)) in ops.iter().enumerate() {
        net.cores.get_mut(&leader).unwrap().on_update(
            ReplyTo {
                conn: reply_id as u64,
                id: reply_id as u64,
            },
            config.epoch,
            request(op, *request_no),
        );
        net.collect(leader);
    }
    let mut pick = 1;
    while net.step(pick) {
        pick = xorshift(pick);
    }
    for id in 0..4 {
        assert_eq!(
            net.replies.get(&id),
            Some(&DaemonResponse::Done),
            "reply {id}"
        );
    }
    let region = key_region(&config.spaces[0], &Value::Int(key)).unwrap();
    for daemon in &region.chain {
        let record = net.engines[daemon]
            .get(region.id, &key_bytes(&Value::Int(key)))
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
            .expect("the key exists");
        // put, delete, put_if_not_exist: three versions, not four.
        let third = [(); 3]
            .iter()
            .fold(None, |v, _| Some(Version::next(v, config.epoch)));
        assert_eq!(Some(record.version), third, "at {daemon}");
    }
}

/// A daemon handing a region over to a transfer target holds its commits:
/// an update that passes through a held region is not acknowledged (nor
/// written there) until the hold is released, and then completes once.
#[test]
fn a_held_region_commits_nothing_until_released() {
    let config = Arc::new(config(3, 1, 2));
    let mut net = Net::new(&config);
    let key = 1;
    let region = key_region(&config.spaces[0], &Value::Int(key)).unwrap();
    let (leader, tail) = (region.chain[0], *region.chain.last().unwrap());
    net.cores.get_mut(&tail).unwrap().hold(region.id);
    net.cores.get_mut(&leader).unwrap().on_update(
        ReplyTo { conn: 0, id: 0 },
        config.epoch,
        request(&Op::Put { key, a: 1, b: 2 }, 0),
    );
    net.collect(leader);
    let mut pick = 1;
    while net.step(pick) {
        pick = xorshift(pick);
    }
    assert!(net.replies.is_empty(), "answered while the tail held");
    let stored = |net: &Net, d: DaemonId| {
        net.engines[&d]
            .get(region.id, &key_bytes(&Value::Int(key)))
            .unwrap()
    };
    assert!(stored(&net, tail).is_none(), "committed while held");
    // Holding another region changes nothing; releasing this one commits.
    net.cores.get_mut(&tail).unwrap().release(RegionId(9999));
    net.collect(tail);
    assert!(net.links.values().all(VecDeque::is_empty));
    net.cores.get_mut(&tail).unwrap().release(region.id);
    net.collect(tail);
    while net.step(pick) {
        pick = xorshift(pick);
    }
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));
    for d in &region.chain {
        let record = Record::decode(&stored(&net, *d).expect("committed")).unwrap();
        assert_eq!(record.version, Version::next(None, config.epoch), "at {d}");
    }
}

/// Kills the point leader of key 0 while updates are in flight, installs a
/// configuration without it, and lets clients retry unanswered updates with
/// the same (client id, request number). Every update must then be applied
/// exactly once — each key's region is written at as many versions as the
/// key had puts — and every
/// live replica of every region must hold exactly the objects the key
/// subspace says lie there.
fn failover_case(seed: u64, interleave: usize) {
    let config1 = Arc::new(config(4, 2, 2));
    let space = config1.spaces[0].clone();
    let mut net = Net::new(&config1);
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng as usize
    };
    let ops: Vec<Op> = (0..40)
        .map(|i| Op::Put {
            key: (next() % 5) as i64,
            a: i as i64 * 1_000_003,
            b: (next() % 7) as i64,
        })
        .collect();
    let leader_of = |config: &Configuration, op: &Op| {
        let req = request(op, 0);
        key_region(&config.spaces[0], &req.key).unwrap().chain[0]
    };
    for (n, op) in ops.iter().enumerate() {
        let leader = leader_of(&config1, op);
        net.cores.get_mut(&leader).unwrap().on_update(
            ReplyTo {
                conn: 1,
                id: n as u64,
            },
            Epoch(1),
            request(op, n as u64),
        );
        net.collect(leader);
        for _ in 0..interleave {
            net.step(next());
        }
    }
    // The failure: the victim's state and every message to or from it vanish.
    let victim = key_region(&space, &Value::Int(0)).unwrap().chain[0];
    net.cores.remove(&victim);
    net.links
        .retain(|(from, to), _| *from != victim && *to != victim);
    let mut config2 = (*config1).clone();
    config2.epoch = Epoch(2);
    config2.daemons.remove(&victim);
    for layout in &mut config2.spaces[0].subspaces {
        for region in &mut layout.regions {
            region.chain.retain(|d| *d != victim);
        }
    }
    let config2 = Arc::new(config2);
    net.config = config2.clone();
    let live: Vec<DaemonId> = net.cores.keys().copied().collect();
    for d in &live {
        net.cores.get_mut(d).unwrap().on_config(config2.clone());
        net.collect(*d);
    }
    let quiesce = |net: &mut Net, next: &mut dyn FnMut() -> usize| {
        let mut steps = 0;
        while net.step(next()) {
            steps += 1;
            assert!(steps < 1_000_000, "no quiescence");
        }
    };
    quiesce(&mut net, &mut next);
    // Clients retry whatever was not answered with success.
    for attempt in 1..=3u64 {
        for (n, op) in ops.iter().enumerate() {
            let done = (0..attempt)
                .any(|a| net.replies.get(&(n as u64 + 1000 * a)) == Some(&DaemonResponse::Done));
            if done {
                continue;
            }
            let leader = leader_of(&config2, op);
            let id = n as u64 + 1000 * attempt;
            net.cores.get_mut(&leader).unwrap().on_update(
                ReplyTo { conn: 1, id },
                Epoch(2),
                request(op, n as u64),
            );
            net.collect(leader);
            quiesce(&mut net, &mut next);
        }
    }
    for (n, _) in ops.iter().enumerate() {
        let done = (0..=3u64)
            .any(|a| net.replies.get(&(n as u64 + 1000 * a)) == Some(&DaemonResponse::Done));
        assert!(done, "op {n} never succeeded");
    }
    for core in net.cores.values() {
        assert_eq!(core.busy_keys(), 0);
    }
    // Exactly once: the versions written count the puts of each key.
    let mut puts: BTreeMap<i64, u64> = BTreeMap::new();
    for op in &ops {
        if let Op::Put { key, .. } = op {
            *puts.entry(*key).or_default() += 1;
        }
    }
    let mut objects = Vec::new();
    for (&key, &count) in &puts {
        let region = key_region(&config2.spaces[0], &Value::Int(key)).unwrap();
        let mut seen = None;
        for d in &region.chain {
            let record = Record::decode(
                &net.engines[d]
                    .get(region.id, &key_bytes(&Value::Int(key)))
                    .unwrap()
                    .unwrap(),
            )
            .unwrap();
            let written = net.engines[d]
                .hooks()
                .versions_written(region.id, &key_bytes(&Value::Int(key)));
            assert_eq!(
                written, count,
                "key {key} at {d}: applied {written} times for {count} puts"
            );
            if let Some(s) = &seen {
                assert_eq!(
                    s, &record.object,
                    "key-region replicas disagree on key {key}"
                );
            }
            seen = Some(record.object.clone());
        }
        objects.push(seen.unwrap().unwrap());
    }
    for layout in config2.spaces[0].subspaces.iter().skip(1) {
        for region in &layout.regions {
            let expected: BTreeMap<Vec<u8>, Object> = objects
                .iter()
                .filter(|o| layout.region_of(o).id == region.id)
                .map(|o| (key_bytes(o.key()), o.clone()))
                .collect();
            for d in &region.chain {
                let mut got = BTreeMap::new();
                net.engines[d]
                    .scan(region.id, None, &mut |k, v| {
                        if let Some(o) = Record::decode(v).unwrap().object {
                            got.insert(k.to_vec(), o);
                        }
                        true
                    })
                    .unwrap();
                assert_eq!(got, expected, "region {} at {d}", region.id);
            }
        }
    }
}

#[test]
fn failover_redrives_pending_and_applies_each_update_once() {
    for seed in 1..=60u64 {
        failover_case(seed * 0x9E37_79B9, (seed % 4) as usize);
    }
}
proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Messages are lost (a broken connection drops what it had queued);
    /// the point leaders' re-sends must still complete every update once.
    #[test]
    fn lost_messages_delay_but_never_stall_or_duplicate(
        ops in proptest::collection::vec(op_strategy(), 1..40),
        schedule in proptest::collection::vec(any::<usize>(), 1..50),
        daemons in 2u64..5,
        f in 0usize..3,
        interleave in 0usize..3,
        drop_modulus in 2usize..6,
    ) {
        let f = f.min(daemons as usize - 1);
        run_lossy(&ops, &schedule, daemons, f, 2, interleave, drop_modulus);
    }
}

/// Anti-entropy: a subspace region holding an object the key subspace does
/// not hold there (an orphan: an update that reached a later subspace and
/// was then lost with every key-region replica, beyond f) is repaired by
/// the point leader through the chain — the orphan is removed from every
/// replica of its region, the committed object stays where it belongs —
/// and a region that holds the key exactly as the key subspace says is
/// left alone.
#[test]
fn anti_entropy_removes_an_orphan_the_key_subspace_does_not_hold() {
    let config = Arc::new(config(3, 1, 4));
    let mut net = Net::new(&config);
    let key = 7;
    let space = config.spaces[0].clone();
    let leader = key_region(&space, &Value::Int(key)).unwrap().chain[0];
    net.cores.get_mut(&leader).unwrap().on_update(
        ReplyTo { conn: 0, id: 0 },
        config.epoch,
        request(
            &Op::Put {
                key,
                a: i64::MIN + 1,
                b: 0,
            },
            1,
        ),
    );
    net.collect(leader);
    let mut pick = 1;
    while net.step(pick) {
        pick = xorshift(pick);
    }
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));

    // The orphan: `a` far away, in another region of subspace 1, at a
    // version of this epoch the key subspace never committed.
    let layout = &space.subspaces[1];
    let object = |a| Object {
        values: vec![Value::Int(key), Value::Int(a), Value::Int(0)],
    };
    let home = layout.region_of(&object(i64::MIN + 1)).id;
    let stray = layout.region_of(&object(i64::MAX - 1));
    assert_ne!(home, stray.id);
    let kb = key_bytes(&Value::Int(key));
    let committed = net.engines[&leader]
        .get(key_region(&space, &Value::Int(key)).unwrap().id, &kb)
        .unwrap()
        .map(|b| Record::decode(&b).unwrap())
        .unwrap();
    let orphan_version = Version(committed.version.0 + 5);
    let orphan = Record {
        version: orphan_version,
        object: Some(object(i64::MAX - 1)),
        recent: vec![],
    };
    for daemon in &stray.chain {
        net.engines[daemon]
            .apply(vec![Write::Put {
                region: stray.id,
                key: kb.clone(),
                value: orphan.encode(),
            }])
            .unwrap();
    }

    // While the key region is being refreshed (its point leader
    // registered again and may have forgotten updates the other parts
    // hold), its record is no measure of theirs: no repair, however often
    // the stray region reports.
    let key_region_id = key_region(&space, &Value::Int(key)).unwrap().id;
    let mut refreshing = (*config).clone();
    refreshing.epoch = Epoch(config.epoch.0 + 1);
    refreshing.rebuilds = vec![tessera_types::Rebuild {
        id: 1,
        region: key_region_id,
        to: leader,
        sources: vec![(stray.id, stray.chain[0])],
    }];
    let refreshing = Arc::new(refreshing);
    for core in net.cores.values_mut() {
        core.on_config(refreshing.clone());
    }
    let ids: Vec<DaemonId> = net.cores.keys().copied().collect();
    for id in &ids {
        net.collect(*id);
    }
    // The stray region's sweep report of its orphan, in an epoch.
    let stray_report = |epoch: Epoch| Held {
        epoch,
        space: space.id,
        region: stray.id,
        key: Value::Int(key),
        version: orphan_version,
        kind: HeldKind::Live,
        from: DaemonId(0),
    };
    for _ in 0..3 {
        net.cores
            .get_mut(&leader)
            .unwrap()
            .on_held(stray_report(refreshing.epoch));
        net.collect(leader);
        assert!(
            net.links.values().all(|q| q.is_empty()),
            "no repair while the key region is refreshed"
        );
    }

    // A later epoch (the failure that made the orphan moved it on; the
    // refresh ended).
    let mut next = (*config).clone();
    next.epoch = Epoch(config.epoch.0 + 2);
    let next = Arc::new(next);
    for core in net.cores.values_mut() {
        core.on_config(next.clone());
    }
    for id in &ids {
        net.collect(*id);
    }

    let live = |net: &Net, region: RegionId, daemon: DaemonId| {
        net.engines[&daemon]
            .get(region, &kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
            .filter(|r| r.object.is_some())
    };
    // The region where the object belongs, at the committed version:
    // nothing to repair, nothing written.
    let home_before = live(
        &net,
        home,
        layout.regions.iter().find(|r| r.id == home).unwrap().chain[0],
    );
    net.cores.get_mut(&leader).unwrap().on_held(Held {
        epoch: next.epoch,
        space: space.id,
        region: home,
        key: Value::Int(key),
        version: committed.version,
        kind: HeldKind::Live,
        from: DaemonId(0),
    });
    net.collect(leader);
    assert!(
        net.links.values().all(|q| q.is_empty()),
        "no repair for a faithful region"
    );

    // The stray region reports its orphan: a first report only makes it a
    // suspect (it could be stale), the next sweep's same report repairs.
    for sweep in 0..2 {
        net.cores
            .get_mut(&leader)
            .unwrap()
            .on_held(stray_report(next.epoch));
        net.collect(leader);
        if sweep == 0 {
            assert!(
                net.links.values().all(|q| q.is_empty()),
                "no repair on a first report"
            );
        }
    }
    while net.step(pick) {
        pick = xorshift(pick);
    }
    for daemon in &stray.chain {
        assert_eq!(
            live(&net, stray.id, *daemon),
            None,
            "the orphan is gone at {daemon}"
        );
    }
    let home_region = layout.regions.iter().find(|r| r.id == home).unwrap();
    for daemon in &home_region.chain {
        let record = live(&net, home, *daemon).expect("the object stays where it belongs");
        assert_eq!(record.object, home_before.as_ref().unwrap().object);
        assert!(
            record.version > orphan_version,
            "the repair supersedes the orphan"
        );
    }
    // The key subspace still holds the same object, at the repair's version.
    let region = key_region(&space, &Value::Int(key)).unwrap();
    for daemon in &region.chain {
        let record = live(&net, region.id, *daemon).unwrap();
        assert_eq!(record.object, committed.object);
        assert!(record.version > orphan_version);
        assert!(record.recent.iter().all(|(c, _)| *c != ClientRef::REPAIR));
    }
    // A request of an older epoch is not a reason to repair.
    let before = net.engines[&leader].get(region.id, &kb).unwrap();
    net.cores.get_mut(&leader).unwrap().on_held(Held {
        epoch: config.epoch,
        space: space.id,
        region: stray.id,
        key: Value::Int(key),
        version: orphan_version,
        kind: HeldKind::Live,
        from: DaemonId(0),
    });
    net.collect(leader);
    assert!(net.links.values().all(|q| q.is_empty()));
    assert_eq!(net.engines[&leader].get(region.id, &kb).unwrap(), before);
}

/// The other direction of anti-entropy: a region that lost an object
/// altogether (no record, not even a tombstone: a write lost beyond f, or
/// a tombstone collected while the key subspace kept the object) is
/// reported absent by its head when the point leader expects it; two
/// reports of the committed version repair it, and a report of a version
/// that is no longer the committed one changes nothing.
#[test]
fn anti_entropy_puts_back_an_object_a_region_lost() {
    let config = Arc::new(config(3, 1, 4));
    let mut net = Net::new(&config);
    let key = 11;
    let space = config.spaces[0].clone();
    let Placed {
        leader,
        kb,
        committed,
        home,
    } = put_and_place(&mut net, &config, key);
    // Every replica of the home region loses the key.
    for daemon in &home.chain {
        net.engines[daemon]
            .apply(vec![Write::Delete {
                region: home.id,
                key: kb.clone(),
            }])
            .unwrap();
    }
    let absent = |version| Held {
        epoch: config.epoch,
        space: space.id,
        region: home.id,
        key: Value::Int(key),
        version,
        kind: HeldKind::Absent,
        from: DaemonId(0),
    };
    // A stale report (another version than the committed one): nothing.
    net.cores
        .get_mut(&leader)
        .unwrap()
        .on_held(absent(Version(committed.version.0 - 1)));
    net.collect(leader);
    assert!(net.links.values().all(|q| q.is_empty()));
    two_sweeps(&mut net, leader, || vec![absent(committed.version)]);
    assert_rewritten(&net, &home, &kb, &committed);
}

/// Every replica of a region reports, and the replicas may disagree:
/// after a power loss one can lack an object the other holds (simulator
/// seed 243000018). The replica that holds it reports it as it should
/// between the other's two reports of its absence; the key is repaired
/// all the same, since a replica's suspicion is cleared only by that
/// replica's own report.
#[test]
fn anti_entropy_repairs_a_replica_that_lacks_what_its_peer_holds() {
    let config = Arc::new(config(3, 1, 4));
    let mut net = Net::new(&config);
    let key = 12;
    let space = config.spaces[0].clone();
    let Placed {
        leader,
        kb,
        committed,
        home,
    } = put_and_place(&mut net, &config, key);
    let (holder, lacker) = (home.chain[0], home.chain[1]);
    net.engines[&lacker]
        .apply(vec![Write::Delete {
            region: home.id,
            key: kb.clone(),
        }])
        .unwrap();
    let report = |from, kind| Held {
        epoch: config.epoch,
        space: space.id,
        region: home.id,
        key: Value::Int(key),
        version: committed.version,
        kind,
        from,
    };
    two_sweeps(&mut net, leader, || {
        vec![
            report(lacker, HeldKind::Absent),
            report(holder, HeldKind::Live),
        ]
    });
    assert_rewritten(&net, &home, &kb, &committed);
}

/// A key put and acknowledged, and where it is: see [`put_and_place`].
struct Placed {
    /// The key's point leader.
    leader: DaemonId,
    kb: Vec<u8>,
    /// Its record in the key subspace.
    committed: Record,
    /// The region of subspace 1 that holds it.
    home: Region,
}

/// Puts `key` (a = 5, b = 6) through its point leader, settles, and
/// returns where it went.
fn put_and_place(net: &mut Net, config: &Configuration, key: i64) -> Placed {
    let space = &config.spaces[0];
    let region = key_region(space, &Value::Int(key)).unwrap().clone();
    let leader = region.chain[0];
    net.cores.get_mut(&leader).unwrap().on_update(
        ReplyTo { conn: 0, id: 0 },
        config.epoch,
        request(&Op::Put { key, a: 5, b: 6 }, 1),
    );
    net.collect(leader);
    settle(net, 3);
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));
    let kb = key_bytes(&Value::Int(key));
    let committed = net.engines[&leader]
        .get(region.id, &kb)
        .unwrap()
        .map(|b| Record::decode(&b).unwrap())
        .unwrap();
    let home = space.subspaces[1]
        .region_of(committed.object.as_ref().unwrap())
        .clone();
    Placed {
        leader,
        kb,
        committed,
        home,
    }
}

/// Two sweeps' reports reach `leader`: the first repairs nothing (a
/// report may be stale), the second does; then everything settles.
fn two_sweeps(net: &mut Net, leader: DaemonId, reports: impl Fn() -> Vec<Held>) {
    for sweep in 0..2 {
        for held in reports() {
            net.cores.get_mut(&leader).unwrap().on_held(held);
            net.collect(leader);
        }
        if sweep == 0 {
            assert!(
                net.links.values().all(|q| q.is_empty()),
                "no repair on a first report"
            );
        }
    }
    settle(net, 5);
}

/// Every replica of `home` holds the committed object again, rewritten
/// by a repair at a newer version.
fn assert_rewritten(net: &Net, home: &Region, kb: &[u8], committed: &Record) {
    for daemon in &home.chain {
        let record = net.engines[daemon]
            .get(home.id, kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
            .unwrap_or_else(|| panic!("the object is back at {daemon}"));
        assert_eq!(record.object, committed.object, "at {daemon}");
        assert!(record.version > committed.version, "rewritten at {daemon}");
    }
}

/// A hop that puts the object in `region` at its head, after `after`.
fn put_hop(region: &Region, after: Option<Version>) -> tessera_protocol::Hop {
    tessera_protocol::Hop {
        daemon: region.chain[0],
        region: region.id,
        write: HopWrite::Put,
        after,
    }
}

/// A client's update of `object` at `version` in the first space, as the
/// point leader at the head of `leader` sends it to the second hop.
fn second_hop_forward(
    config: &Configuration,
    leader: &Region,
    version: Version,
    object: &Object,
    hops: Vec<tessera_protocol::Hop>,
) -> ChainForward {
    let space = &config.spaces[0];
    ChainForward {
        epoch: config.epoch,
        from: leader.chain[0],
        space: space.id,
        key: object.values[0].clone(),
        version,
        hops,
        position: 1,
        object: Some(ObjectBytes::encode(object)),
        client: ClientRef {
            client_id: 7,
            request_no: version.0,
        },
    }
}

/// Delivers every message in flight, in the seeded order `pick` starts.
fn settle(net: &mut Net, mut pick: usize) {
    while net.step(pick) {
        pick = xorshift(pick);
    }
}

/// A forward from a peer is checked before the core relies on its hop
/// list: one whose position does not name the receiver right after its
/// sender is dropped (no effect, nothing pending or stored, no panic), and
/// the genuine forward still goes through afterwards.
#[test]
fn forwards_that_do_not_name_the_receiver_are_dropped() {
    let config = Arc::new(config(3, 1, 2));
    let mut net = Net::new(&config);
    let key = 1;
    let kb = key_bytes(&Value::Int(key));
    let region = key_region(&config.spaces[0], &Value::Int(key)).unwrap();
    let (leader, next) = (region.chain[0], region.chain[1]);
    let stranger = *config
        .daemons
        .keys()
        .find(|d| **d != leader && **d != next)
        .unwrap();
    net.cores.get_mut(&leader).unwrap().on_update(
        ReplyTo { conn: 0, id: 0 },
        config.epoch,
        request(&Op::Put { key, a: 1, b: 2 }, 0),
    );
    net.collect(leader);
    let genuine = match net
        .links
        .get_mut(&(leader, next))
        .and_then(VecDeque::pop_front)
    {
        Some(ChainMsg::Forward(f)) => f,
        other => panic!("the leader should forward to {next}, sent {other:?}"),
    };
    assert_eq!(genuine.position, 1);
    let malformed = [
        ChainForward {
            position: u32::MAX,
            ..genuine.clone()
        },
        ChainForward {
            position: genuine.hops.len() as u32,
            ..genuine.clone()
        },
        ChainForward {
            position: 0,
            ..genuine.clone()
        },
        ChainForward {
            from: stranger,
            ..genuine.clone()
        },
        ChainForward {
            hops: Vec::new(),
            ..genuine.clone()
        },
        ChainForward {
            hops: genuine.hops[1..].to_vec(),
            ..genuine.clone()
        },
    ];
    let core = net.cores.get_mut(&next).unwrap();
    for forward in malformed {
        core.on_chain(ChainMsg::Forward(forward.clone()));
        assert_eq!(core.drain_effects(), Vec::new(), "acted on {forward:?}");
        assert_eq!(core.busy_keys(), 0, "kept {forward:?}");
    }
    assert!(net.engines[&next].get(region.id, &kb).unwrap().is_none());
    core.on_chain(ChainMsg::Forward(genuine));
    net.collect(next);
    settle(&mut net, 1);
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));
    assert!(net.engines[&next].get(region.id, &kb).unwrap().is_some());
}

/// An update waiting at a member that holds its region for a hand-over has
/// not been sent on, so no acknowledgement for it can be genuine: one that
/// arrives anyway (a stray or forged message) must not commit it past the
/// hold, nor let the point leader answer the client. After the release it
/// completes as usual.
#[test]
fn an_acknowledgement_for_a_held_update_commits_nothing() {
    let config = Arc::new(config(3, 2, 2));
    let mut net = Net::new(&config);
    let key = 1;
    let kb = key_bytes(&Value::Int(key));
    let region = key_region(&config.spaces[0], &Value::Int(key)).unwrap();
    let (leader, middle, tail) = (region.chain[0], region.chain[1], region.chain[2]);
    net.cores.get_mut(&middle).unwrap().hold(region.id);
    net.cores.get_mut(&leader).unwrap().on_update(
        ReplyTo { conn: 0, id: 0 },
        config.epoch,
        request(&Op::Put { key, a: 1, b: 2 }, 0),
    );
    net.collect(leader);
    settle(&mut net, 1);
    let version = Version::next(None, config.epoch);
    let stray = ChainAck {
        epoch: config.epoch,
        from: tail,
        space: config.spaces[0].id,
        key: Value::Int(key),
        version,
        region: region.id,
        position: 1,
        backfill: false,
        // What the tail would vouch for, so that only the hold refuses it.
        chain: chain_digest(&[tessera_protocol::Hop {
            daemon: tail,
            region: region.id,
            write: HopWrite::Put,
            after: None,
        }]),
    };
    let core = net.cores.get_mut(&middle).unwrap();
    core.on_chain(ChainMsg::Ack(stray));
    net.collect(middle);
    settle(&mut net, 1);
    assert!(net.replies.is_empty(), "answered while the middle held");
    for d in [middle, tail] {
        assert!(
            net.engines[&d].get(region.id, &kb).unwrap().is_none(),
            "{d} committed while the middle held"
        );
    }
    net.cores.get_mut(&middle).unwrap().release(region.id);
    net.collect(middle);
    settle(&mut net, 1);
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));
    for d in &region.chain {
        let record = Record::decode(&net.engines[d].get(region.id, &kb).unwrap().unwrap()).unwrap();
        assert_eq!(record.version, version, "at {d}");
    }
}

/// A building subspace is backfilled at the versions the objects already
/// have: every replica of the object's home region in the new subspace
/// ends with the key subspace's committed version and object, no other
/// region is written again, and updates racing the backfill (puts that
/// relocate, deletes) are never overtaken by it — whatever the order the
/// network delivers in.
#[test]
fn backfill_carries_the_committed_version_and_never_overtakes_an_update() {
    let full = config(3, 1, 2);
    let mut early = full.clone();
    early.spaces[0].subspaces.truncate(2);
    let early = Arc::new(early);
    let mut later = full.clone();
    later.epoch = Epoch(2);
    later.spaces[0].subspaces[2].state = tessera_types::PartState::Building { progress: 0 };
    let later = Arc::new(later);
    let space = later.spaces[0].clone();
    let keys: Vec<i64> = (0..24).collect();
    for seed in 1..=40usize {
        let mut net = Net::new(&early);
        let mut n = 0u64;
        let mut submit = |net: &mut Net, epoch: Epoch, op: Op| {
            let req = request(&op, n);
            let leader = key_region(&space, &req.key).unwrap().chain[0];
            net.cores
                .get_mut(&leader)
                .unwrap()
                .on_update(ReplyTo { conn: 1, id: n }, epoch, req);
            net.collect(leader);
            n += 1;
        };
        for &key in &keys {
            let op = Op::Put {
                key,
                a: key * 1000,
                b: key.wrapping_mul(0x9e37_79b9) << 20,
            };
            submit(&mut net, early.epoch, op);
        }
        settle(&mut net, seed);
        for core in net.cores.values_mut() {
            core.on_config(later.clone());
        }
        let ids: Vec<DaemonId> = net.cores.keys().copied().collect();
        for id in &ids {
            net.collect(*id);
        }

        let mut pick = seed;
        for &key in &keys {
            let region = key_region(&space, &Value::Int(key)).unwrap();
            let leader = region.chain[0];
            let step = net.cores.get_mut(&leader).unwrap().backfill_key(
                space.id,
                region.id,
                &key_bytes(&Value::Int(key)),
                false,
            );
            assert_eq!(step, tessera_daemon::core::BackfillStep::Done);
            net.collect(leader);
            // Updates race the backfill of some keys.
            match key % 4 {
                0 => submit(
                    &mut net,
                    later.epoch,
                    Op::Put {
                        key,
                        a: -key,
                        b: (key + 7).wrapping_mul(0x7f4a_7c15) << 24,
                    },
                ),
                1 => submit(&mut net, later.epoch, Op::Del { key }),
                _ => {}
            }
            for _ in 0..(seed % 5) {
                pick = xorshift(pick);
                net.step(pick);
            }
        }
        settle(&mut net, pick);
        assert!(
            net.replies.values().all(|r| *r == DaemonResponse::Done),
            "seed {seed}: {:?}",
            net.replies
        );

        for &key in &keys {
            let kb = key_bytes(&Value::Int(key));
            let region = key_region(&space, &Value::Int(key)).unwrap();
            let committed = net.engines[&region.chain[0]]
                .get(region.id, &kb)
                .unwrap()
                .map(|b| Record::decode(&b).unwrap())
                .unwrap();
            if key % 4 >= 2 {
                assert_eq!(
                    net.engines[&region.chain[0]]
                        .hooks()
                        .versions_written(region.id, &kb),
                    1,
                    "seed {seed}: the backfill wrote a new version of key {key}"
                );
            }
            for (si, layout) in space.subspaces.iter().enumerate().skip(1) {
                let home = committed.object.as_ref().map(|o| layout.region_of(o).id);
                for r in &layout.regions {
                    for daemon in &r.chain {
                        let held = net.engines[daemon]
                            .get(r.id, &kb)
                            .unwrap()
                            .map(|b| Record::decode(&b).unwrap());
                        let live = held.as_ref().filter(|h| h.object.is_some());
                        if Some(r.id) == home {
                            let live = live.unwrap_or_else(|| {
                                panic!(
                                    "seed {seed}: key {key} missing in subspace {si} at {daemon}"
                                )
                            });
                            assert_eq!(
                                (live.version, &live.object),
                                (committed.version, &committed.object),
                                "seed {seed}: key {key}, subspace {si}, {daemon}"
                            );
                            if si == 2 && key % 4 >= 2 {
                                assert_eq!(
                                    net.engines[daemon].hooks().versions_written(r.id, &kb),
                                    1,
                                    "seed {seed}: key {key} written more than once in the building subspace"
                                );
                            }
                        } else {
                            assert!(
                                live.is_none(),
                                "seed {seed}: key {key} held outside its home in subspace {si} at {daemon}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A point leader answers a late copy of a request it refused with the
/// same refusal, but only in the epoch of that refusal: in a later epoch
/// another point leader may have evaluated the retried request and applied
/// it (the daemon was cut off meanwhile and leads the key again), so the
/// key's recent writers decide. Simulator seed 1002178 reported CMPFAIL
/// for a conditional put that had taken effect.
#[test]
fn a_refusal_is_remembered_only_in_its_own_epoch() {
    let config = Arc::new(config(3, 1, 2));
    let mut net = Net::new(&config);
    let key = 1;
    let space = &config.spaces[0];
    let region = key_region(space, &Value::Int(key)).unwrap().clone();
    let leader = region.chain[0];
    let cond = request(&Op::CondPut { key, a_is: 2, b: 1 }, 5);
    let send = |net: &mut Net, id: u64, epoch: Epoch| {
        net.cores.get_mut(&leader).unwrap().on_update(
            ReplyTo { conn: id, id },
            epoch,
            cond.clone(),
        );
        net.collect(leader);
        settle(net, 1);
        net.replies.get(&id).cloned()
    };
    // Nothing stored: refused.
    let refusal = send(&mut net, 0, config.epoch).expect("answered");
    assert_ne!(refusal, DaemonResponse::Done);
    // A late copy in the same epoch gets the same answer.
    assert_eq!(send(&mut net, 1, config.epoch), Some(refusal));

    // Meanwhile, elsewhere: the retry was applied by another point leader,
    // whose record (with the request among its recent writers) every
    // replica of the key region now holds.
    let mut next = (*config).clone();
    next.epoch = Epoch(config.epoch.0 + 3);
    let applied_at = Version::next(None, Epoch(config.epoch.0 + 1));
    let record = Record {
        version: applied_at,
        object: Some(Object {
            values: vec![Value::Int(key), Value::Int(2), Value::Int(1)],
        }),
        recent: vec![(cond.client, applied_at)],
    };
    for daemon in &region.chain {
        net.engines[daemon]
            .apply(vec![Write::Put {
                region: region.id,
                key: key_bytes(&Value::Int(key)),
                value: record.encode(),
            }])
            .unwrap();
    }
    let next = Arc::new(next);
    for core in net.cores.values_mut() {
        core.on_config(next.clone());
    }
    assert_eq!(
        send(&mut net, 2, next.epoch),
        Some(DaemonResponse::Done),
        "the retry is recognized as applied, not answered from the old refusal"
    );
}

/// In a region that waits for no earlier version (a building one), a
/// later update of a key can arrive and apply before an earlier one. The
/// earlier one must still travel down the rest of its chain — a region
/// there may wait for exactly it — instead of being acknowledged as seen.
/// Simulator seed 1204460 left the later update buffered forever.
#[test]
fn an_update_overtaken_in_a_building_region_still_travels_its_chain() {
    let config = Arc::new(config(3, 0, 2));
    let mut net = Net::new(&config);
    let space = &config.spaces[0];
    let key = Value::Int(4);
    let object = |a: i64, b: i64| Object {
        values: vec![key.clone(), Value::Int(a), Value::Int(b)],
    };
    let first = object(1, 1);
    let second = object(1, 2);
    let leader = key_region(space, &key).unwrap().clone();
    // H: the object's region in subspace `a` (both versions live there);
    // R: its region in subspace `b` for the first version, on another daemon.
    let h = space.subspaces[1].region_of(&first).clone();
    let r = space.subspaces[2].region_of(&first).clone();
    assert_ne!(h.chain[0], r.chain[0], "the configuration spreads regions");
    let hop = put_hop;
    let (v1, v2) = (Version(10), Version(11));
    let forward = |version, object: &Object, hops| {
        second_hop_forward(&config, &leader, version, object, hops)
    };
    let second_r = space.subspaces[2].region_of(&second).clone();
    let f1 = forward(
        v1,
        &first,
        vec![hop(&leader, None), hop(&h, None), hop(&r, None)],
    );
    let mut f2_hops = vec![hop(&leader, Some(v1)), hop(&h, None), hop(&r, Some(v1))];
    if second_r.id != r.id {
        f2_hops[2].write = HopWrite::Remove;
        f2_hops.push(hop(&second_r, None));
    }
    let f2 = forward(v2, &second, f2_hops);
    // The later update reaches H first, then the earlier one.
    let hd = h.chain[0];
    net.cores
        .get_mut(&hd)
        .unwrap()
        .on_chain(ChainMsg::Forward(f2));
    net.collect(hd);
    net.cores
        .get_mut(&hd)
        .unwrap()
        .on_chain(ChainMsg::Forward(f1));
    net.collect(hd);
    settle(&mut net, 3);
    let kb = key_bytes(&key);
    for (region, version) in [(&h, v2), (&r, v2)] {
        let record = net.engines[&region.chain[0]]
            .get(region.id, &kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
            .expect("written");
        assert_eq!(record.version, version, "region {}", region.id);
    }
    for (id, core) in &net.cores {
        assert_eq!(
            core.busy_keys(),
            0,
            "{id} still waits: {}",
            core.describe_busy()
        );
    }
}

/// After a power loss a key region can come back without a version that
/// regions after it had committed, and a region that never held that
/// version then waits for it with the next update — for ever, before
/// (simulator seeds 240000978 and 241001279). An update buffered that long
/// is applied without its predecessor; the predecessor, should it come
/// late after all, does not take the region's version back.
#[test]
fn an_update_whose_predecessor_never_comes_is_applied_after_a_while() {
    let config = Arc::new(config(3, 0, 2));
    let mut net = Net::new(&config);
    let space = &config.spaces[0];
    let key = Value::Int(4);
    let object = |a: i64, b: i64| Object {
        values: vec![key.clone(), Value::Int(a), Value::Int(b)],
    };
    let (first, second) = (object(1, 1), object(1, 2));
    let leader = key_region(space, &key).unwrap().clone();
    let r = space.subspaces[2].region_of(&second).clone();
    let (v1, v2) = (Version(10), Version(11));
    let forward = |version, object: &Object, after| {
        let hops = vec![put_hop(&leader, after), put_hop(&r, after)];
        second_hop_forward(&config, &leader, version, object, hops)
    };
    let rd = r.chain[0];
    let kb = key_bytes(&key);
    let stored = |net: &Net| {
        net.engines[&rd]
            .get(r.id, &kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap().version)
    };
    // The second update reaches R, which never held the first.
    let deliver = |net: &mut Net, f: ChainForward| {
        net.cores
            .get_mut(&rd)
            .unwrap()
            .on_chain(ChainMsg::Forward(f));
        net.collect(rd);
    };
    deliver(&mut net, forward(v2, &second, Some(v1)));
    for _ in 0..STUCK_TICKS - 1 {
        net.cores.get_mut(&rd).unwrap().on_tick();
        net.collect(rd);
        // Its predecessor sends it again meanwhile: it keeps waiting.
        deliver(&mut net, forward(v2, &second, Some(v1)));
    }
    assert_eq!(stored(&net), None, "waits while the first may be late");
    assert_eq!(net.cores[&rd].busy_keys(), 1);
    net.cores.get_mut(&rd).unwrap().on_tick();
    net.collect(rd);
    settle(&mut net, 5);
    assert_eq!(stored(&net), Some(v2), "applied without the first");
    assert_eq!(
        net.cores[&rd].busy_keys(),
        0,
        "{}",
        net.cores[&rd].describe_busy()
    );
    // The first arrives after all: acknowledged, not stored over the second.
    deliver(&mut net, forward(v1, &first, None));
    settle(&mut net, 7);
    assert_eq!(stored(&net), Some(v2));
    assert_eq!(net.cores[&rd].busy_keys(), 0);
}

/// A delete that reached a subspace region but was lost with every replica
/// of the key region leaves there a tombstone newer than the object the
/// key subspace still has, hiding it from searches. Sweeps report
/// tombstones too; after two reports the point leader writes the object
/// back. A tombstone that agrees with the key subspace (older than the
/// object, or where the object does not belong) is left alone.
#[test]
fn anti_entropy_restores_an_object_a_lost_delete_hid() {
    let config = Arc::new(config(3, 1, 4));
    let mut net = Net::new(&config);
    let key = 9;
    let space = config.spaces[0].clone();
    let region = key_region(&space, &Value::Int(key)).unwrap().clone();
    let leader = region.chain[0];
    net.cores.get_mut(&leader).unwrap().on_update(
        ReplyTo { conn: 0, id: 0 },
        config.epoch,
        request(&Op::Put { key, a: 5, b: 6 }, 1),
    );
    net.collect(leader);
    settle(&mut net, 1);
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));
    let kb = key_bytes(&Value::Int(key));
    let committed = net.engines[&leader]
        .get(region.id, &kb)
        .unwrap()
        .map(|b| Record::decode(&b).unwrap())
        .unwrap();
    let object = committed.object.clone().unwrap();
    let layout = &space.subspaces[1];
    let home = layout.region_of(&object).clone();
    let elsewhere = layout
        .regions
        .iter()
        .find(|r| r.id != home.id)
        .unwrap()
        .clone();
    let lost_delete = Version(committed.version.0 + 3);
    for daemon in &home.chain {
        let tombstone = Record {
            version: lost_delete,
            object: None,
            recent: vec![],
        };
        net.engines[daemon]
            .apply(vec![Write::Put {
                region: home.id,
                key: kb.clone(),
                value: tombstone.encode(),
            }])
            .unwrap();
    }
    let mut next = (*config).clone();
    next.epoch = Epoch(config.epoch.0 + 1);
    let next = Arc::new(next);
    for core in net.cores.values_mut() {
        core.on_config(next.clone());
    }
    let report = |region: RegionId, version| Held {
        epoch: next.epoch,
        space: space.id,
        region,
        key: Value::Int(key),
        version,
        kind: HeldKind::Tombstone,
        from: DaemonId(0),
    };
    // Tombstones that agree with the key subspace: no repair, ever.
    for held in [
        report(home.id, committed.version),
        report(elsewhere.id, lost_delete),
    ] {
        for _ in 0..2 {
            net.cores.get_mut(&leader).unwrap().on_held(held.clone());
            net.collect(leader);
        }
        assert!(net.links.values().all(|q| q.is_empty()), "{held:?}");
    }
    // The hiding tombstone, reported by two sweeps.
    for sweep in 0..2 {
        net.cores
            .get_mut(&leader)
            .unwrap()
            .on_held(report(home.id, lost_delete));
        net.collect(leader);
        if sweep == 0 {
            assert!(net.links.values().all(|q| q.is_empty()));
        }
    }
    settle(&mut net, 1);
    for daemon in &home.chain {
        let record = net.engines[daemon]
            .get(home.id, &kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
            .unwrap();
        assert_eq!(record.object.as_ref(), Some(&object), "at {daemon}");
        assert!(record.version > lost_delete, "at {daemon}");
    }
}

/// Anti-entropy never collects what an update in flight wrote: a region
/// that committed the new value of a key whose update has not committed at
/// its point leader yet (the window between an index entry's write and the
/// object's commit) reports a version the key subspace does not hold, but
/// the point leader leaves the key alone while it is busy, and the update
/// completes with its entries in place. (An indexlet is a region like this
/// one; its entries are rows of the same records.)
#[test]
fn anti_entropy_leaves_the_writes_of_an_update_in_flight() {
    let config = Arc::new(config(3, 1, 4));
    let mut net = Net::new(&config);
    let key = 7;
    let space = config.spaces[0].clone();
    let leader = key_region(&space, &Value::Int(key)).unwrap().chain[0];
    let put = |net: &mut Net, id, a| {
        net.cores.get_mut(&leader).unwrap().on_update(
            ReplyTo { conn: 0, id },
            config.epoch,
            request(&Op::Put { key, a, b: 0 }, id + 1),
        );
        net.collect(leader);
    };
    put(&mut net, 0, i64::MIN + 1);
    let mut pick = 1;
    while net.step(pick) {
        pick = xorshift(pick);
    }
    assert_eq!(net.replies.get(&0), Some(&DaemonResponse::Done));

    // The second put moves the object to another region of subspace 1.
    let layout = &space.subspaces[1];
    let object = |a| Object {
        values: vec![Value::Int(key), Value::Int(a), Value::Int(0)],
    };
    let home = layout.region_of(&object(i64::MIN + 1)).id;
    let new = layout.region_of(&object(i64::MAX - 1)).clone();
    assert_ne!(home, new.id);
    let kb = key_bytes(&Value::Int(key));
    let stored = |net: &Net, region: RegionId, daemon: DaemonId| {
        net.engines[&daemon]
            .get(region, &kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
    };
    put(&mut net, 1, i64::MAX - 1);
    // Deliver until every replica of the new region committed the object,
    // before the point leader has.
    let committed_there = |net: &Net| {
        new.chain.iter().all(|d| {
            stored(net, new.id, *d).is_some_and(|r| r.object == Some(object(i64::MAX - 1)))
        })
    };
    while !committed_there(&net) {
        assert!(net.step(pick), "the update stalled");
        pick = xorshift(pick);
    }
    assert_eq!(net.replies.get(&1), None, "still in flight");
    let in_flight = stored(&net, new.id, new.chain[0]).unwrap().version;
    let region = key_region(&space, &Value::Int(key)).unwrap();
    assert!(
        stored(&net, region.id, leader).unwrap().version < in_flight,
        "the point leader has not committed it"
    );

    // Two sweeps report it: the point leader repairs nothing while busy.
    let queued = |net: &Net| net.links.values().map(VecDeque::len).sum::<usize>();
    let before = queued(&net);
    for _ in 0..2 {
        net.cores.get_mut(&leader).unwrap().on_held(Held {
            epoch: config.epoch,
            space: space.id,
            region: new.id,
            key: Value::Int(key),
            version: in_flight,
            kind: HeldKind::Live,
            from: DaemonId(0),
        });
        net.collect(leader);
    }
    assert_eq!(queued(&net), before, "no repair of an update in flight");

    while net.step(pick) {
        pick = xorshift(pick);
    }
    assert_eq!(net.replies.get(&1), Some(&DaemonResponse::Done));
    for daemon in &new.chain {
        let record = stored(&net, new.id, *daemon).unwrap();
        assert_eq!(
            record.object,
            Some(object(i64::MAX - 1)),
            "kept at {daemon}"
        );
        assert_eq!(record.version, in_flight);
    }
    for daemon in &region.chain {
        assert_eq!(stored(&net, region.id, *daemon).unwrap().version, in_flight);
    }
}

/// A key region rebuilt from two regions of one subspace between which
/// an update moved the object: the region it moved into holds the new
/// version, the region it left still holds the old one live (it missed the
/// removal, which a member held pending and lost). The old copy lags, so
/// the update is in flight and the rebuilt point leader drives it again —
/// also when the old copy's page comes second and brings a writer the new
/// record does not remember, which the merge keeps (simulator seed
/// 142008075: the lag went unnoticed that way and the old region kept a
/// stale copy for good).
#[test]
fn a_rebuilt_key_region_drives_an_update_a_lagging_source_missed() {
    let key = 7;
    let (first, space, key_region_id, target) = key_region_lost(key);
    let object = |a: i64| Object {
        values: vec![Value::Int(key), Value::Int(a), Value::Int(0)],
    };
    let layout = &space.subspaces[1];
    let (left, moved_into) = (
        layout.region_of(&object(i64::MIN + 1)).id,
        layout.region_of(&object(i64::MAX - 1)).id,
    );
    assert_ne!(left, moved_into);
    let older = Version::next(None, first.epoch);
    let newer = Version::next(Some(older), first.epoch);
    let (put_old, put_new) = (
        ClientRef {
            client_id: 11,
            request_no: 1,
        },
        ClientRef {
            client_id: 12,
            request_no: 1,
        },
    );
    let entry = |record: Record| tessera_protocol::RebuildEntry {
        key: key_bytes(&Value::Int(key)),
        committed: Some(record.encode()),
        pending: Vec::new(),
    };
    let with_rebuild = |chain: Vec<DaemonId>, rebuilding: bool, epoch: u64| {
        key_region_rebuilt(&first, key_region_id, target, chain, rebuilding, epoch)
    };
    let mut net = Net::new(&first);
    let rebuilding = with_rebuild(vec![], true, first.epoch.0 + 1);
    let core = net.cores.get_mut(&target).unwrap();
    core.on_config(rebuilding);
    // The region the object moved into first, then the one it left.
    core.on_rebuild_entry(
        key_region_id,
        entry(Record {
            version: newer,
            object: Some(object(i64::MAX - 1)),
            recent: vec![(put_new, newer)],
        }),
    );
    core.on_rebuild_entry(
        key_region_id,
        entry(Record {
            version: older,
            object: Some(object(i64::MIN + 1)),
            recent: vec![(put_old, older)],
        }),
    );
    core.on_config(with_rebuild(vec![target], false, first.epoch.0 + 2));
    net.collect(target);
    let driven: Vec<Version> = net
        .links
        .iter()
        .filter(|((from, _), _)| *from == target)
        .flat_map(|(_, q)| q.iter())
        .filter_map(|msg| match msg {
            ChainMsg::Forward(f) if f.key == Value::Int(key) => Some(f.version),
            _ => None,
        })
        .collect();
    assert!(
        driven.contains(&newer),
        "the update the old region missed is driven again: {driven:?}"
    );
}

/// A cluster of three daemons without replication, the key region of
/// `key`, and a daemon other than the one it loses, to rebuild it on.
fn key_region_lost(key: i64) -> (Arc<Configuration>, Space, RegionId, DaemonId) {
    let first = Arc::new(config(3, 0, 4));
    let space = first.spaces[0].clone();
    let region = key_region(&space, &Value::Int(key)).unwrap();
    let (id, lost) = (region.id, region.chain[0]);
    let target = *first.daemons.keys().find(|d| **d != lost).unwrap();
    (first, space, id, target)
}

/// `first` with key region `region`'s chain set to `chain`, at `epoch`,
/// and (when `rebuilding`) a rebuild of it to `target`.
fn key_region_rebuilt(
    first: &Configuration,
    region: RegionId,
    target: DaemonId,
    chain: Vec<DaemonId>,
    rebuilding: bool,
    epoch: u64,
) -> Arc<Configuration> {
    let mut config = first.clone();
    config.epoch = Epoch(epoch);
    for r in &mut config.spaces[0].subspaces[0].regions {
        if r.id == region {
            r.chain = chain.clone();
        }
    }
    if rebuilding {
        config.rebuilds = vec![tessera_types::Rebuild {
            id: 1,
            region,
            to: target,
            sources: vec![],
        }];
    }
    Arc::new(config)
}

/// A region of a subspace whose one daemon registered again is refreshed:
/// it forgot the updates it held pending, so it stores a version a source
/// committed above its own copy (simulator seed 146007266: without it the
/// next update waited there for ever), keeps its copy when that is newer,
/// and takes no pending update (a member before it drives those again).
#[test]
fn a_refreshed_region_of_another_part_stores_what_its_sources_committed() {
    let first = Arc::new(config(3, 0, 4));
    let space = first.spaces[0].clone();
    let key = 7;
    let object = |a: i64, b: i64| Object {
        values: vec![Value::Int(key), Value::Int(a), Value::Int(b)],
    };
    let layout = &space.subspaces[1];
    let region = layout.region_of(&object(5, 0)).clone();
    let me = region.chain[0];
    let mut refreshing = (*first).clone();
    refreshing.epoch = Epoch(first.epoch.0 + 1);
    refreshing.rebuilds = vec![tessera_types::Rebuild {
        id: 1,
        region: region.id,
        to: me,
        sources: vec![],
    }];
    let mut net = Net::new(&first);
    let core = net.cores.get_mut(&me).unwrap();
    core.on_config(Arc::new(refreshing));
    let kb = key_bytes(&Value::Int(key));
    let v1 = Version::next(None, first.epoch);
    let v2 = Version::next(Some(v1), first.epoch);
    let v3 = Version::next(Some(v2), first.epoch);
    let stored = |net: &Net| {
        net.engines[&me]
            .get(region.id, &kb)
            .unwrap()
            .map(|b| Record::decode(&b).unwrap())
    };
    let entry = |version: Version, b: i64, pending: Vec<tessera_daemon::rebuild::PendingWrite>| {
        tessera_protocol::RebuildEntry {
            key: kb.clone(),
            committed: Some(
                Record {
                    version,
                    object: Some(object(5, b)),
                    recent: vec![],
                }
                .encode(),
            ),
            pending,
        }
    };
    // Its own copy, v1.
    net.engines[&me]
        .apply(vec![Write::Put {
            region: region.id,
            key: kb.clone(),
            value: Record {
                version: v1,
                object: Some(object(5, 1)),
                recent: vec![],
            }
            .encode(),
        }])
        .unwrap();
    // A source committed v2, and holds v3 pending.
    let pending = vec![tessera_daemon::rebuild::PendingWrite {
        version: v3,
        object: Some(object(5, 3)),
        client: ClientRef {
            client_id: 9,
            request_no: 1,
        },
        follows: Some(v2),
    }];
    let core = net.cores.get_mut(&me).unwrap();
    core.on_rebuild_entry(region.id, entry(v2, 2, pending));
    let record = stored(&net).expect("a record");
    assert_eq!(record.version, v2, "the committed version above its copy");
    assert_eq!(record.object, Some(object(5, 2)));
    // An older committed version changes nothing.
    let core = net.cores.get_mut(&me).unwrap();
    core.on_rebuild_entry(region.id, entry(v1, 1, Vec::new()));
    assert_eq!(stored(&net).expect("a record").version, v2);
    // Nothing was driven: a member before it drives v3 again.
    net.collect(me);
    assert!(net.links.values().all(|q| q.is_empty()));
}

/// A member that commits an update keeps in `recent` only the writers of
/// versions up to the one the update follows there, and the update's:
/// a later version it holds (its point leader forgot it) is not in the
/// update's object, so that version's writer must not be answered as done
/// (simulator seed 152019038: a delete was answered done under an add
/// made from the object before it).
#[test]
fn a_commit_forgets_the_writers_of_versions_its_update_skipped() {
    let config = Arc::new(config(3, 1, 2));
    let space = &config.spaces[0];
    let key = Value::Int(1);
    let object = |a: i64| Object {
        values: vec![key.clone(), Value::Int(a), Value::Int(1)],
    };
    let v1 = Version::next(None, config.epoch);
    let v2 = Version::next(Some(v1), config.epoch);
    let v3 = Version::next(Some(v2), config.epoch);
    let writer = |n: u64| ClientRef {
        client_id: n,
        request_no: 1,
    };
    // The key region's second replica is the chain's last hop here.
    let hops = build_hops(
        &config,
        space,
        &key,
        Some(&object(1)),
        Some(&object(3)),
        Some(v1),
    )
    .unwrap();
    let member = hops[1].daemon;
    let region = hops[1].region;
    let kb = key_bytes(&key);
    let net = Net::new(&config);
    // It holds v2, a delete the point leader never saw committed.
    net.engines[&member]
        .apply(vec![Write::Put {
            region,
            key: kb.clone(),
            value: Record {
                version: v2,
                object: None,
                recent: vec![(writer(1), v1), (writer(2), v2)],
            }
            .encode(),
        }])
        .unwrap();
    let mut net = net;
    let forward = ChainForward {
        epoch: config.epoch,
        from: hops[0].daemon,
        space: space.id,
        key: key.clone(),
        version: v3,
        hops: hops[..2].to_vec(),
        position: 1,
        object: Some(ObjectBytes::encode(&object(3))),
        client: writer(3),
    };
    net.cores
        .get_mut(&member)
        .unwrap()
        .on_chain(ChainMsg::Forward(forward));
    net.collect(member);
    let record = net.engines[&member]
        .get(region, &kb)
        .unwrap()
        .map(|b| Record::decode(&b).unwrap())
        .expect("committed");
    assert_eq!(record.version, v3);
    assert_eq!(record.recent, vec![(writer(1), v1), (writer(3), v3)]);
}

/// A source of a rebuilt key region that holds a write pending at the
/// version it has committed is carrying a backfill (the object sent again,
/// at its own version, to a part being built), not an update in flight:
/// the rebuilt region keeps the committed object (simulator seed
/// 152001614: counted as an update that brought the object in, it made
/// the key look new, and the rebuilt region dropped it).
#[test]
fn a_backfill_pending_at_a_source_is_no_update_in_flight() {
    let key = 7;
    let (first, _, key_region_id, target) = key_region_lost(key);
    let object = Object {
        values: vec![Value::Int(key), Value::Int(3), Value::Int(4)],
    };
    let v1 = Version::next(None, first.epoch);
    let writer = ClientRef {
        client_id: 11,
        request_no: 1,
    };
    let with_rebuild = |chain: Vec<DaemonId>, rebuilding: bool, epoch: u64| {
        key_region_rebuilt(&first, key_region_id, target, chain, rebuilding, epoch)
    };
    let mut net = Net::new(&first);
    let core = net.cores.get_mut(&target).unwrap();
    core.on_config(with_rebuild(vec![], true, first.epoch.0 + 1));
    let kb = key_bytes(&Value::Int(key));
    core.on_rebuild_entry(
        key_region_id,
        tessera_protocol::RebuildEntry {
            key: kb.clone(),
            committed: Some(
                Record {
                    version: v1,
                    object: Some(object.clone()),
                    recent: vec![(writer, v1)],
                }
                .encode(),
            ),
            pending: vec![tessera_daemon::rebuild::PendingWrite {
                version: v1,
                object: Some(object.clone()),
                client: ClientRef::BACKFILL,
                follows: None,
            }],
        },
    );
    core.on_config(with_rebuild(vec![target], false, first.epoch.0 + 2));
    net.collect(target);
    let record = net.engines[&target]
        .get(key_region_id, &kb)
        .unwrap()
        .map(|b| Record::decode(&b).unwrap())
        .expect("the key is kept");
    assert_eq!((record.version, record.object), (v1, Some(object)));
    assert!(record.recent.contains(&(writer, v1)), "{:?}", record.recent);
}

/// A key revisited for a part being built (its update was drawn without
/// the part) clears the key from every other region of that part: one of
/// them may hold an older version a rebuild copied there meanwhile
/// (simulator seed 155001241). Ready parts only get the object home; a
/// deleted key is sent as removals.
#[test]
fn a_revisit_clears_the_other_regions_of_a_building_part() {
    use tessera_daemon::chain::revisit_hops;
    let mut config = config(3, 0, 4);
    config.spaces[0].subspaces[2].state = tessera_types::PartState::Building { progress: 10 };
    let space = &config.spaces[0];
    let key = Value::Int(5);
    let object = Object {
        values: vec![key.clone(), Value::Int(1), Value::Int(2)],
    };
    let v = Version::next(None, config.epoch);
    let writes = |hops: &[tessera_protocol::Hop], part: usize| -> Vec<(RegionId, HopWrite)> {
        let ids: Vec<RegionId> = space.subspaces[part].regions.iter().map(|r| r.id).collect();
        hops.iter()
            .filter(|h| ids.contains(&h.region))
            .map(|h| (h.region, h.write))
            .collect()
    };
    let hops = revisit_hops(space, &key, Some(&object), Some(v)).unwrap();
    let home = |part: usize| space.subspaces[part].region_of(&object).id;
    assert_eq!(writes(&hops, 0), vec![(home(0), HopWrite::Put)]);
    assert_eq!(writes(&hops, 1), vec![(home(1), HopWrite::Put)]);
    let building = writes(&hops, 2);
    let mut expected: Vec<(RegionId, HopWrite)> = space.subspaces[2]
        .regions
        .iter()
        .filter(|r| r.id != home(2))
        .map(|r| (r.id, HopWrite::Remove))
        .collect();
    expected.push((home(2), HopWrite::Put));
    assert_eq!(building, expected);
    assert_eq!(hops[0].after, Some(v), "the key region follows its version");
    // A deleted key: a removal in the key region and everywhere in the
    // building part, nothing in a ready one.
    let hops = revisit_hops(space, &key, None, Some(v)).unwrap();
    assert_eq!(writes(&hops, 0), vec![(home(0), HopWrite::Remove)]);
    assert!(writes(&hops, 1).is_empty());
    assert_eq!(writes(&hops, 2).len(), space.subspaces[2].regions.len());
    assert!(writes(&hops, 2).iter().all(|(_, w)| *w == HopWrite::Remove));
}

/// A chain of an insert of key 1 with f = 1, whose second hop (the key
/// region's second replica) holds the object committed at `version`, and
/// the forward at that hop from `client`.
struct SecondHop {
    config: Arc<Configuration>,
    hops: Vec<tessera_protocol::Hop>,
    member: DaemonId,
    version: Version,
    net: Net,
    forward: ChainForward,
}

impl SecondHop {
    fn new(version_epoch: impl Fn(Epoch) -> Epoch) -> SecondHop {
        let config = Arc::new(config(3, 1, 2));
        let space = &config.spaces[0];
        let key = Value::Int(1);
        let object = Object {
            values: vec![key.clone(), Value::Int(1), Value::Int(1)],
        };
        let version = Version::next(None, version_epoch(config.epoch));
        let hops = build_hops(&config, space, &key, None, Some(&object), None).unwrap();
        assert!(hops.len() > 3);
        let member = hops[1].daemon;
        let net = Net::new(&config);
        net.engines[&member]
            .apply(vec![Write::Put {
                region: hops[1].region,
                key: key_bytes(&key),
                value: Record {
                    version,
                    object: Some(object.clone()),
                    recent: vec![],
                }
                .encode(),
            }])
            .unwrap();
        let forward = ChainForward {
            epoch: config.epoch,
            from: hops[0].daemon,
            space: space.id,
            key,
            version,
            hops: hops.clone(),
            position: 1,
            object: Some(ObjectBytes::encode(&object)),
            client: ClientRef::BACKFILL,
        };
        SecondHop {
            config,
            hops,
            member,
            version,
            net,
            forward,
        }
    }

    fn deliver(&mut self, msg: ChainMsg) {
        self.net.cores.get_mut(&self.member).unwrap().on_chain(msg);
        self.net.collect(self.member);
    }

    /// The third hop acknowledges the backfill.
    fn ack_backfill(&mut self) {
        let ack = ChainAck {
            epoch: self.config.epoch,
            from: self.hops[2].daemon,
            space: self.config.spaces[0].id,
            key: self.forward.key.clone(),
            version: self.version,
            region: self.hops[1].region,
            position: 1,
            backfill: true,
            chain: chain_digest(&self.hops[2..]),
        };
        self.deliver(ChainMsg::Ack(ack));
    }

    /// Forwards and acknowledgements the member sent to `to`.
    fn sent(&self, to: DaemonId) -> (usize, usize) {
        let msgs = self.net.links.get(&(self.member, to)).into_iter().flatten();
        msgs.fold((0, 0), |(f, a), m| match m {
            ChainMsg::Forward(_) => (f + 1, a),
            ChainMsg::Ack(_) => (f, a + 1),
        })
    }
}

/// A member relaying an update it committed (driven again in a later
/// epoch) and holding a backfill of the same version (a backfill carries
/// the version of the update that wrote the object) keeps the two apart:
/// the backfill's acknowledgement goes to the backfill, not to the relay
/// (simulator seed 157017320: taken by the relay, it left the backfill
/// resent for ever and a global index that never finished building).
#[test]
fn a_backfill_acknowledgement_is_not_taken_by_a_relay_of_its_version() {
    // Written in the epoch before the configuration's.
    let mut t = SecondHop::new(|e| Epoch(e.0 - 1));
    let writer = ClientRef {
        client_id: 9,
        request_no: 1,
    };
    // The update driven again: committed here, so relayed.
    t.deliver(ChainMsg::Forward(ChainForward {
        client: writer,
        ..t.forward.clone()
    }));
    // Its object's backfill, at the same version: pending here.
    t.deliver(ChainMsg::Forward(t.forward.clone()));
    t.net.links.clear();
    t.ack_backfill();
    let upstream: Vec<bool> = t
        .net
        .links
        .get(&(t.member, t.hops[0].daemon))
        .into_iter()
        .flatten()
        .filter_map(|m| match m {
            ChainMsg::Ack(a) if a.version == t.version => Some(a.backfill),
            _ => None,
        })
        .collect();
    assert_eq!(
        upstream,
        vec![true],
        "the backfill is acknowledged upstream"
    );
}

/// A member that passed a backfill on and saw the chain after it
/// acknowledge it answers a copy sent again at once, instead of walking it
/// down the chain again: on a long chain with lossy links every redrive
/// otherwise started a new walk, and the copies in flight never died out
/// (simulator seeds 141005088, 154005855). A copy along other hops, or in
/// a new epoch, walks on.
#[test]
fn a_backfill_passed_on_and_acknowledged_is_acknowledged_again_at_once() {
    let mut t = SecondHop::new(|e| e);
    let (upstream, downstream) = (t.hops[0].daemon, t.hops[2].daemon);
    t.deliver(ChainMsg::Forward(t.forward.clone()));
    assert_eq!(t.sent(downstream), (1, 0), "passed on");
    t.net.links.clear();
    t.ack_backfill();
    assert_eq!(t.sent(upstream), (0, 1), "acknowledged upstream");
    t.net.links.clear();
    // The same backfill again: acknowledged at once, not walked on.
    t.deliver(ChainMsg::Forward(t.forward.clone()));
    assert_eq!(t.sent(downstream), (0, 0));
    assert_eq!(t.sent(upstream), (0, 1));
    t.net.links.clear();
    // The same version along other hops after it (a revisit clearing
    // building regions): walked on.
    let mut longer = t.forward.clone();
    longer.hops.push(tessera_protocol::Hop {
        write: HopWrite::Remove,
        ..*t.hops.last().unwrap()
    });
    t.deliver(ChainMsg::Forward(longer));
    assert_eq!(t.sent(downstream), (1, 0));
    t.net.links.clear();
    // In a new epoch it walks on again: the chain after it may differ.
    let mut next = (*t.config).clone();
    next.epoch = Epoch(t.config.epoch.0 + 1);
    t.net
        .cores
        .get_mut(&t.member)
        .unwrap()
        .on_config(Arc::new(next.clone()));
    t.net.collect(t.member);
    t.net.links.clear();
    t.deliver(ChainMsg::Forward(ChainForward {
        epoch: next.epoch,
        ..t.forward.clone()
    }));
    assert_eq!(t.sent(downstream), (1, 0));
}

/// A walk's backfill and then its revisit carry one version along two
/// chains in one epoch: a late copy of the backfill's acknowledgement
/// does not vouch for the revisit's longer chain (simulator seed
/// 201004610: taken for it, the revisit committed at its point leader
/// before it had cleared a stale copy in a building hybrid region).
#[test]
fn an_acknowledgement_counts_only_for_the_chain_it_vouches_for() {
    let mut t = SecondHop::new(|e| e);
    let (upstream, downstream) = (t.hops[0].daemon, t.hops[2].daemon);
    t.deliver(ChainMsg::Forward(t.forward.clone()));
    t.ack_backfill();
    assert_eq!(
        t.sent(upstream),
        (0, 1),
        "the walk's backfill is acknowledged"
    );
    t.net.links.clear();
    let mut revisit = t.forward.clone();
    revisit.hops.push(tessera_protocol::Hop {
        write: HopWrite::Remove,
        ..*t.hops.last().unwrap()
    });
    t.deliver(ChainMsg::Forward(revisit.clone()));
    assert_eq!(t.sent(downstream), (1, 0), "the revisit walks on");
    t.net.links.clear();
    // A duplicate of the first acknowledgement arrives late.
    t.ack_backfill();
    assert_eq!(
        t.sent(upstream),
        (0, 0),
        "the late copy is not the revisit's"
    );
    // The revisit's own acknowledgement counts.
    let ack = ChainAck {
        epoch: t.config.epoch,
        from: downstream,
        space: t.config.spaces[0].id,
        key: t.forward.key.clone(),
        version: t.version,
        region: t.hops[1].region,
        position: 1,
        backfill: true,
        chain: chain_digest(&revisit.hops[2..]),
    };
    t.deliver(ChainMsg::Ack(ack));
    assert_eq!(t.sent(upstream), (0, 1));
}

/// A member holding a client's update that its point leader has since
/// forgotten (the point leader restarted and was refreshed while this
/// member was paused) drops it when the point leader's next update
/// arrives following the version before it: driven on, it would have
/// placed a never-acknowledged object in the regions after this one, and
/// held back every later commit of the key here (simulator seed
/// 202002573).
#[test]
fn a_member_drops_an_update_its_point_leader_skipped() {
    let config = Arc::new(config(3, 1, 2));
    let space = &config.spaces[0];
    let key = Value::Int(1);
    let object = |a: i64| Object {
        values: vec![key.clone(), Value::Int(a), Value::Int(1)],
    };
    let base = Version::next(None, config.epoch);
    let hops = build_hops(
        &config,
        space,
        &key,
        Some(&object(1)),
        Some(&object(1)),
        Some(base),
    )
    .unwrap();
    let (leader, member, next) = (hops[0].daemon, hops[1].daemon, hops[2].daemon);
    let net = Net::new(&config);
    // Every member holds the key committed at `base`.
    for hop in &hops {
        net.engines[&hop.daemon]
            .apply(vec![Write::Put {
                region: hop.region,
                key: key_bytes(&key),
                value: Record {
                    version: base,
                    object: Some(object(1)),
                    recent: vec![],
                }
                .encode(),
            }])
            .unwrap();
    }
    let mut net = net;
    let forward = |version: Version, a: i64, request_no: u64| ChainForward {
        epoch: config.epoch,
        from: leader,
        space: space.id,
        key: key.clone(),
        version,
        hops: hops.clone(),
        position: 1,
        object: Some(ObjectBytes::encode(&object(a))),
        client: ClientRef {
            client_id: 7,
            request_no,
        },
    };
    let deliver = |net: &mut Net, msg: ChainMsg| {
        net.cores.get_mut(&member).unwrap().on_chain(msg);
        net.collect(member);
    };
    // The forgotten update: the version right after `base`.
    let orphan = Version(base.0 + 1);
    deliver(&mut net, ChainMsg::Forward(forward(orphan, 2, 1)));
    // The refreshed point leader's next update follows `base` again.
    let later = Version(base.0 + 2);
    deliver(&mut net, ChainMsg::Forward(forward(later, 3, 2)));
    net.links.clear();
    deliver(
        &mut net,
        ChainMsg::Ack(ChainAck {
            epoch: config.epoch,
            from: next,
            space: space.id,
            key: key.clone(),
            version: later,
            region: hops[1].region,
            position: 1,
            backfill: false,
            chain: chain_digest(&hops[2..]),
        }),
    );
    let acked: Vec<Version> = net
        .links
        .get(&(member, leader))
        .into_iter()
        .flatten()
        .filter_map(|m| match m {
            ChainMsg::Ack(a) => Some(a.version),
            ChainMsg::Forward(_) => None,
        })
        .collect();
    assert_eq!(
        acked,
        vec![later],
        "the later update commits and is acknowledged"
    );
    let stored = net.engines[&member]
        .get(hops[1].region, &key_bytes(&key))
        .unwrap()
        .map(|bytes| Record::decode(&bytes).unwrap().version);
    assert_eq!(stored, Some(later));
    // The orphan is not sent on again on the redrive timer.
    net.links.clear();
    for _ in 0..8 {
        net.cores.get_mut(&member).unwrap().on_tick();
        net.collect(member);
    }
    let resent = net
        .links
        .get(&(member, next))
        .into_iter()
        .flatten()
        .filter(|m| matches!(m, ChainMsg::Forward(f) if f.version == orphan))
        .count();
    assert_eq!(resent, 0);
}
