//! Valid values of the vocabulary, from which the seed inputs are encoded:
//! one of every value kind, checks of every operator, records and a small
//! configuration.

use tessera_daemon::record::Record;
use tessera_protocol::ClientRef;
use tessera_types::{
    Attribute, Check, Configuration, CoordinatorInfo, DaemonId, DaemonInfo, DaemonState, DataType,
    Epoch, Object, PredOp, Prim, Region, RegionId, Space, SpaceDesc, SpaceId, SubspaceLayout,
    TimeUnit, Transfer, Value, Version,
};

/// Seed texts as bytes.
pub fn texts(texts: &[&str]) -> Vec<Vec<u8>> {
    texts.iter().map(|t| t.as_bytes().to_vec()).collect()
}

/// One value of every kind, the containers holding scalars.
pub fn values() -> Vec<Value> {
    vec![
        Value::str("key"),
        Value::String(vec![0xff, 0x00, 0x80]),
        Value::Int(-42),
        Value::Int(i64::MAX),
        Value::Float(-0.5),
        Value::Float(f64::NAN),
        Value::Timestamp(1_714_564_800_000_000),
        Value::Document(r#"{"a":[1,{"b":"c"}],"d":null}"#.into()),
        Value::List(vec![Value::Int(1), Value::Int(1)]),
        Value::Set(vec![Value::str("a"), Value::str("b")]),
        Value::Map(vec![(Value::Int(1), Value::str("one"))]),
    ]
}

/// An object holding every sample value.
pub fn object() -> Object {
    Object { values: values() }
}

/// One check per operator, one of them on a document path.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(0, PredOp::Eq(Value::str("key"))),
        Check::new(2, PredOp::Lt(Value::Int(5))),
        Check::new(2, PredOp::Le(Value::Int(5))),
        Check::new(4, PredOp::Gt(Value::Float(0.25))),
        Check::new(6, PredOp::Ge(Value::Timestamp(0))),
        Check::new(1, PredOp::Regex("^a.*b$".into())),
        Check::new(8, PredOp::LenEq(2)),
        Check::new(9, PredOp::LenLe(3)),
        Check::new(10, PredOp::LenGe(1)),
        Check::new(9, PredOp::Contains(Value::str("a"))),
        Check::at_path(7, "a[1].b", PredOp::Eq(Value::str("c"))),
    ]
}

/// A live record with a recent-writer list, and a tombstone.
pub fn records() -> Vec<Record> {
    let client = |client_id, request_no| ClientRef {
        client_id,
        request_no,
    };
    vec![
        Record {
            version: Version(7),
            object: Some(object()),
            recent: vec![(client(1, 2), Version(6)), (client(3, 9), Version(7))],
        },
        Record {
            version: Version(u64::MAX),
            object: None,
            recent: vec![],
        },
    ]
}

/// A space with two subspaces over every attribute type.
pub fn space_desc() -> SpaceDesc {
    let attr = |name: &str, dtype| Attribute {
        name: name.into(),
        dtype,
    };
    SpaceDesc {
        name: "s".into(),
        attrs: vec![
            attr("k", DataType::String),
            attr("n", DataType::Int),
            attr("f", DataType::Float),
            attr("t", DataType::Timestamp(TimeUnit::Day)),
            attr("d", DataType::Document),
            attr("l", DataType::List(Prim::Int)),
            attr("m", DataType::Map(Prim::String, Prim::Float)),
        ],
        subspaces: vec![vec![1], vec![2, 3]],
        indexes: vec![1],
        fault_tolerance: 1,
        partitions: 4,
        authorization: false,
        global_indexes: Vec::new(),
        replex: None,
    }
}

/// A configuration with one space, two daemons and a transfer.
pub fn configuration() -> Configuration {
    let region = |id, chain: &[u64]| Region {
        id: RegionId(id),
        chain: chain.iter().copied().map(DaemonId).collect(),
    };
    let daemon = |id, state| {
        (
            DaemonId(id),
            DaemonInfo {
                id: DaemonId(id),
                addr: format!("127.0.0.1:{}", 2000 + id),
                state,
                metrics: None,
            },
        )
    };
    Configuration {
        epoch: Epoch(3),
        coordinators: vec![CoordinatorInfo {
            id: 1,
            addr: "127.0.0.1:1982".into(),
            metrics: None,
        }],
        daemons: [
            daemon(1, DaemonState::Available),
            daemon(2, DaemonState::Offline),
        ]
        .into_iter()
        .collect(),
        spaces: vec![Space {
            id: SpaceId(1),
            desc: space_desc(),
            subspaces: vec![
                SubspaceLayout {
                    attrs: vec![0],
                    splits: vec![vec![1 << 63]],
                    regions: vec![region(1, &[1, 2]), region(2, &[2])],
                    part: tessera_types::PartId(0),
                    state: tessera_types::PartState::Ready,
                    kind: Default::default(),
                },
                SubspaceLayout {
                    attrs: vec![1],
                    splits: vec![vec![]],
                    regions: vec![region(3, &[1])],
                    part: tessera_types::PartId(1),
                    state: tessera_types::PartState::Ready,
                    kind: Default::default(),
                },
            ],
            indexes: vec![tessera_types::IndexPart {
                id: tessera_types::PartId(2),
                attr: 1,
                path: None,
                state: tessera_types::PartState::Ready,
            }],
        }],
        read_only: false,
        transfers: vec![Transfer {
            id: 1,
            region: RegionId(2),
            from: DaemonId(2),
            to: DaemonId(1),
            replaces: None,
        }],
        tombstone_horizon: Epoch(2),
        advisor: None,
        rebuilds: vec![tessera_types::Rebuild {
            id: 1,
            region: RegionId(1),
            to: DaemonId(3),
            sources: vec![(RegionId(2), DaemonId(2))],
        }],
        waiting: Default::default(),
    }
}
