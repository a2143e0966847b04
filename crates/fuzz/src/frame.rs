//! Target `frame`: bytes as they arrive on a socket, read frame after frame
//! by `read_frame` — the function every server's connection loop calls —
//! until the stream ends or a frame is refused.
//!
//! Checks: no panic, no allocation beyond the frame maximum, and every
//! accepted message survives encoding again: its encoding decodes, and
//! encodes to the same bytes; a search page's object bytes decode or are
//! refused with a typed error.

use crate::runner::{outcome_of, Outcome, Target};
use crate::samples;
use tessera_protocol::frame::{decode, encode};
use tessera_protocol::{
    read_frame, Action, Auth, AuthOp, ChainAck, ChainForward, ChainMsg, ClientRef, CoordRequest,
    CoordResponse, CoordStatus, DaemonRequest, DaemonResponse, Hop, HopWrite, Message, Mutation,
    NumOp, ObjectBytes, SearchAfter, SortBy, Status, TransferEntry, TransferMsg, UpdateFlags,
    UpdateRequest,
};
use tessera_types::{DaemonId, Epoch, RegionId, SpaceId, Version};

/// The frame maximum the target reads with: small, so that a forged length
/// costs little, and the same code path as the servers' 16 MiB default.
const FRAME_BYTES_MAX: usize = 1 << 16;

pub const TARGET: Target = Target {
    name: "frame",
    about: "read_frame over a byte stream; accepted messages re-encode stably",
    seeds,
    dictionary: &[],
    input_bytes_max: 4096,
    run,
};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime without drivers builds")
    })
}

fn run(data: &[u8]) -> Outcome {
    let mut stream = data;
    runtime().block_on(async {
        let mut outcome = None::<Outcome>;
        loop {
            let result = read_frame(&mut stream, FRAME_BYTES_MAX).await;
            if let Ok(message) = &result {
                check_round_trip(message);
            }
            let this = outcome_of(&result);
            // The first frame's outcome leads; later frames refine it.
            let merged = match outcome {
                None => this,
                Some(o) => Outcome {
                    accepted: o.accepted,
                    feature: o.feature.rotate_left(7) ^ this.feature,
                },
            };
            outcome = Some(merged);
            if result.is_err() {
                return merged;
            }
        }
    })
}

fn check_round_trip(message: &Message) {
    let frame = encode(message);
    let len = u32::from_be_bytes(frame[..4].try_into().expect("a 4-byte prefix"));
    assert_eq!(len as usize, frame.len() - 4, "the prefix counts the body");
    let again = decode(&frame[4..]).expect("an encoded message decodes");
    // A search page's objects are bytes the client decodes after the
    // frame: damaged ones must be a typed error, not a panic.
    if let Message::DaemonResponse {
        response: DaemonResponse::SearchPage { objects, .. },
        ..
    } = message
    {
        for (_, object) in objects {
            let _ = object.decode();
        }
    }
    // Compared as bytes: a float NaN is not equal to itself as a value.
    assert_eq!(encode(&again), frame, "re-encoding changed {message:?}");
}

fn update() -> UpdateRequest {
    UpdateRequest {
        space: SpaceId(3),
        key: samples::values()[0].clone(),
        client: ClientRef {
            client_id: 9,
            request_no: 41,
        },
        since: Epoch(2),
        flags: UpdateFlags {
            must_exist: true,
            must_not_exist: false,
            erase: false,
        },
        checks: samples::checks(),
        mutations: vec![
            Mutation::new(1, Action::Set(samples::values()[1].clone())),
            Mutation::new(2, Action::Num(NumOp::Add, tessera_types::Value::Int(-3))),
            Mutation::new(
                3,
                Action::MapNum(
                    samples::values()[0].clone(),
                    NumOp::Max,
                    tessera_types::Value::Float(2.5),
                ),
            ),
            Mutation::new(4, Action::SetUnion(samples::values())),
            Mutation::new(5, Action::StringLtrim(7)),
            Mutation {
                attr: 6,
                action: Action::DocRename("a.b[2]".into()),
                path: Some("x.y".into()),
            },
            Mutation::new(7, Action::DocUnset),
        ],
        auth: Auth::new(vec![b"MDAxY2xvY2F0aW9u".to_vec(), Vec::new()]),
        secret: Some(b"s3cret".to_vec()),
    }
}

fn messages() -> Vec<Message> {
    let hops = vec![
        Hop {
            daemon: DaemonId(1),
            region: RegionId(10),
            write: HopWrite::Put,
            after: Some(Version(4)),
        },
        Hop {
            daemon: DaemonId(2),
            region: RegionId(11),
            write: HopWrite::Remove,
            after: None,
        },
    ];
    let request = |id, request| Message::DaemonRequest {
        id,
        epoch: Epoch(12),
        request,
    };
    let response = |id, response| Message::DaemonResponse { id, response };
    let coord = |id, request| Message::CoordRequest { id, request };
    let answer = |id, response| Message::CoordResponse { id, response };
    vec![
        request(
            1,
            DaemonRequest::Get {
                space: SpaceId(1),
                key: tessera_types::Value::str("k"),
                auth: Auth::new(vec![b"token".to_vec()]),
            },
        ),
        request(2, DaemonRequest::Update(update())),
        request(
            3,
            DaemonRequest::Search {
                space: SpaceId(1),
                region: RegionId(7),
                checks: samples::checks(),
                sort: Some(SortBy {
                    attr: 2,
                    descending: true,
                }),
                after: Some(SearchAfter {
                    key: b"key".to_vec(),
                    sort_value: Some(tessera_types::Value::Float(1.5)),
                }),
                limit: Some(100),
                auth: Auth::default(),
                within: Some(tessera_types::replex::Within {
                    part: tessera_types::PartId(2),
                    region: RegionId(9),
                    cover: vec![(tessera_types::PartId(1), RegionId(7))],
                }),
            },
        ),
        request(
            4,
            DaemonRequest::SearchKeys {
                space: SpaceId(1),
                region: RegionId(7),
                checks: vec![],
                after: Some(b"k".to_vec()),
                auth: Auth::new(vec![b"a".to_vec(), b"b".to_vec()]),
                op: AuthOp::Write,
            },
        ),
        response(5, DaemonResponse::WrongEpoch { epoch: Epoch(13) }),
        response(
            6,
            DaemonResponse::Found {
                version: Version(8),
                object: ObjectBytes::encode(&samples::object()),
            },
        ),
        response(7, DaemonResponse::Done),
        response(
            8,
            DaemonResponse::Failed {
                status: Status::CmpFail,
                reason: "[predicate] no".into(),
            },
        ),
        response(
            9,
            DaemonResponse::SearchPage {
                objects: vec![
                    (Version(1), ObjectBytes::encode(&samples::object())),
                    (Version(2), ObjectBytes::encode(&samples::object())),
                ],
                more: true,
            },
        ),
        response(
            10,
            DaemonResponse::KeysPage {
                keys: samples::values(),
                more: false,
            },
        ),
        Message::Chain(ChainMsg::Forward(ChainForward {
            epoch: Epoch(12),
            from: DaemonId(1),
            space: SpaceId(1),
            key: tessera_types::Value::Int(77),
            version: Version(5),
            hops,
            position: 1,
            object: Some(ObjectBytes::encode(&samples::object())),
            client: ClientRef {
                client_id: 1,
                request_no: 2,
            },
        })),
        Message::Chain(ChainMsg::Ack(ChainAck {
            epoch: Epoch(12),
            from: DaemonId(2),
            space: SpaceId(1),
            key: tessera_types::Value::str("k"),
            version: Version(5),
            region: RegionId(11),
            position: 0,
            backfill: false,
            chain: 0x1234_5678_9abc_def0,
        })),
        Message::Transfer(TransferMsg::Entries {
            transfer: 4,
            attempt: 1,
            seq: 0,
            from: DaemonId(3),
            region: RegionId(9),
            entries: vec![TransferEntry {
                key: b"k".to_vec(),
                version: Version(2),
                record: samples::records()[0].encode(),
            }],
        }),
        Message::Transfer(TransferMsg::Progress {
            transfer: 4,
            attempt: 1,
            from: DaemonId(3),
            region: RegionId(9),
            sent: 10,
            scanned: true,
            skipped: vec![0, u64::MAX, 5],
        }),
        Message::Transfer(TransferMsg::Have {
            transfer: 4,
            attempt: 1,
            from: DaemonId(5),
            have: 10,
        }),
        Message::Transfer(TransferMsg::Digest {
            transfer: 4,
            from: DaemonId(5),
            buckets: vec![0, 1, u64::MAX],
        }),
        Message::Transfer(TransferMsg::Restart {
            transfer: 4,
            attempt: 2,
            from: DaemonId(5),
        }),
        coord(
            11,
            CoordRequest::GetConfig {
                known: Epoch(3),
                wait_ms: 1000,
            },
        ),
        coord(
            12,
            CoordRequest::RegisterDaemon {
                id: Some(DaemonId(4)),
                addr: "127.0.0.1:2000".into(),
                metrics: None,
                installed: None,
            },
        ),
        coord(
            13,
            CoordRequest::AddSpace {
                description: "space kv key k attributes v".into(),
            },
        ),
        coord(
            14,
            CoordRequest::Raft {
                payload: b"{\"Vote\":{}}".to_vec(),
            },
        ),
        coord(
            15,
            CoordRequest::Heartbeat {
                id: DaemonId(4),
                epoch: Epoch(3),
            },
        ),
        coord(16, CoordRequest::Stability),
        coord(17, CoordRequest::ServerKill { id: DaemonId(2) }),
        answer(
            18,
            CoordResponse::Config(Some(Box::new(samples::configuration()))),
        ),
        answer(19, CoordResponse::Config(None)),
        answer(
            20,
            CoordResponse::NotLeader {
                leader_addr: Some("127.0.0.1:1".into()),
            },
        ),
        answer(
            21,
            CoordResponse::Status(Box::new(CoordStatus {
                node_id: 1,
                addr: "127.0.0.1:1".into(),
                leader_id: Some(2),
                leader_addr: None,
                term: 5,
                members: samples::configuration().coordinators,
                voters: vec![1, 2],
                epoch: Epoch(3),
                applied_index: Some(40),
            })),
        ),
        answer(
            22,
            CoordResponse::Stability {
                epoch: Epoch(3),
                stable: false,
                lagging: vec![DaemonId(2)],
                transfers: 1,
            },
        ),
    ]
}

fn seeds() -> Vec<Vec<u8>> {
    let frames: Vec<Vec<u8>> = messages().iter().map(encode).collect();
    // Two frames back to back, as a connection carries them.
    let pair = [frames[0].clone(), frames[6].clone()].concat();
    frames.into_iter().chain([pair]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_message_is_read_back() {
        for message in messages() {
            let frame = encode(&message);
            let mut stream = frame.as_slice();
            let read = runtime()
                .block_on(read_frame(&mut stream, FRAME_BYTES_MAX))
                .expect("a seed frame reads");
            // Compared as frames: the samples hold a NaN.
            assert_eq!(encode(&read), frame);
            assert!(run(&frame).accepted);
        }
    }

    #[test]
    fn a_forged_length_is_refused_before_reading() {
        let mut frame = encode(&messages()[0]);
        frame[..4].copy_from_slice(&(FRAME_BYTES_MAX as u32 + 1).to_be_bytes());
        let mut stream = frame.as_slice();
        let result = runtime().block_on(read_frame(&mut stream, FRAME_BYTES_MAX));
        assert!(matches!(
            result,
            Err(tessera_protocol::FrameError::TooLarge { len, .. }) if len == FRAME_BYTES_MAX + 1
        ));
        assert!(!run(&frame).accepted);
    }
}
