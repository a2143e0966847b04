//! criterion micro-benchmarks of the hot paths under every operation: the
//! wire codec (protocol frames), coordinate mapping and search planning,
//! predicate evaluation, and the storage engine's get and put (plain fjall,
//! and through the daemon's per-region index).
//!
//! `cargo bench -p tessera-bench --bench micro` times them (release
//! profile); `cargo test` runs each once in test mode (debug profile), so
//! CI compiles and exercises them without an optimized build.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

/// The allocator the `tessera` binary ships with, so that allocation costs
/// what it costs in the daemon and the client (glibc's malloc takes a slow
/// path for blocks above ~1 KB, the size of a usertable object).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::hint::black_box;
use std::sync::Arc;
use tessera_daemon::index::{
    choose_access, key_order_page, place_of, sorted_page, stored_object, Access, IndexedEngine,
    PageBounds, Walk,
};
use tessera_daemon::record::Record;
use tessera_protocol::frame::{decode, decode_shared, encode};
use tessera_protocol::{
    Action, ClientRef, DaemonRequest, DaemonResponse, Message, Mutation, ObjectBytes, SortBy,
    UpdateFlags, UpdateRequest,
};
use tessera_storage::{Durability, Engine, FjallEngine, Write};
use tessera_types::coordinate::{coordinate, key_bytes, string_hash};
use tessera_types::{
    parse_space, plan_search, Check, Configuration, Epoch, Object, PredOp, RegionId, Space,
    SpaceDesc, SpaceId, Value, Version,
};

/// The YCSB usertable as the bench creates it: key, `recno`, 10 fields of
/// 100 bytes, a `recno` subspace, 24 partitions.
fn usertable() -> Space {
    let fields: Vec<String> = (0..10).map(|i| format!("field{i}")).collect();
    let text = format!(
        "space usertable key k attributes int recno, {} subspace recno create 24 partitions",
        fields.join(", ")
    );
    let desc = parse_space(&text).expect("the usertable parses");
    tessera_types::region::default_layout(SpaceId(1), desc)
}

fn record_object(n: i64) -> Object {
    let mut values = vec![Value::str(&format!("user{n:019}")), Value::Int(n)];
    values.extend((0..10).map(|f| Value::String(vec![b'a' + (f as u8) + (n % 7) as u8; 100])));
    Object { values }
}

fn codec(c: &mut Criterion) {
    let object = record_object(42);
    let update = Message::DaemonRequest {
        id: 7,
        epoch: Epoch(3),
        request: DaemonRequest::Update(UpdateRequest {
            since: Default::default(),
            space: SpaceId(1),
            key: object.values[0].clone(),
            client: ClientRef {
                client_id: 1,
                request_no: 99,
            },
            flags: UpdateFlags::default(),
            checks: vec![],
            auth: Default::default(),
            secret: None,
            mutations: (1..object.values.len())
                .map(|attr| Mutation {
                    attr,
                    action: Action::Set(object.values[attr].clone()),
                    path: None,
                })
                .collect(),
        }),
    };
    let page = Message::DaemonResponse {
        id: 7,
        response: DaemonResponse::SearchPage {
            objects: (0..10)
                .map(|n| (Version(n), ObjectBytes::encode(&record_object(n as i64))))
                .collect(),
            more: false,
        },
    };
    let mut group = c.benchmark_group("codec");
    group.bench_function("encode put of a 1 KB record", |b| {
        b.iter(|| encode(black_box(&update)))
    });
    let frame = encode(&update);
    group.bench_function("decode put of a 1 KB record", |b| {
        b.iter(|| decode(black_box(&frame[4..])).expect("decodes"))
    });
    group.bench_function("encode search page of 10 records", |b| {
        b.iter(|| encode(black_box(&page)))
    });
    let frame = encode(&page);
    group.bench_function("decode search page of 10 records", |b| {
        b.iter(|| decode(black_box(&frame[4..])).expect("decodes"))
    });
    group.finish();
}

fn coordinates(c: &mut Criterion) {
    let space = usertable();
    let object = record_object(12345);
    let mut group = c.benchmark_group("coordinate");
    group.bench_function("string hash of a 24-byte key", |b| {
        b.iter(|| string_hash(black_box(b"user00000000000012345xyz")))
    });
    group.bench_function("coordinate of an int", |b| {
        b.iter(|| coordinate(black_box(&Value::Int(-77))))
    });
    group.bench_function("key bytes of a string key", |b| {
        b.iter(|| key_bytes(black_box(&object.values[0])))
    });
    group.bench_function("regions of an object in every subspace", |b| {
        b.iter(|| {
            space
                .subspaces
                .iter()
                .map(|l| l.region_of(black_box(&object)).id)
                .collect::<Vec<_>>()
        })
    });
    let range = [
        Check::new(1, PredOp::Ge(Value::Int(1000))),
        Check::new(1, PredOp::Lt(Value::Int(2000))),
    ];
    group.bench_function("plan a range search", |b| {
        b.iter(|| plan_search(black_box(&space), black_box(&range)))
    });
    group.finish();
}

fn predicates(c: &mut Criterion) {
    let object = record_object(12345);
    let eq = Check::new(1, PredOp::Eq(Value::Int(12345)));
    let range = Check::new(1, PredOp::Lt(Value::Int(20000)));
    let regex = Check::new(3, PredOp::Regex("^b.*b$".into()));
    let mut group = c.benchmark_group("predicate");
    group.bench_function("int equality", |b| {
        b.iter(|| black_box(&eq).matches(black_box(&object)))
    });
    group.bench_function("int range", |b| {
        b.iter(|| black_box(&range).matches(black_box(&object)))
    });
    group.bench_function("regex on 100 bytes", |b| {
        b.iter(|| black_box(&regex).matches(black_box(&object)))
    });
    group.finish();
}

const RECORDS: i64 = 2000;

fn put(n: i64, region: RegionId) -> Write {
    put_object(record_object(n), region)
}

/// A put of `object` at version 1 into `region`, keyed by its first value.
fn put_object(object: Object, region: RegionId) -> Write {
    Write::Put {
        region,
        key: key_bytes(&object.values[0]),
        value: Record {
            version: Version(1),
            object: Some(object),
            recent: vec![],
        }
        .encode(),
    }
}

fn engines(c: &mut Criterion) {
    let space = usertable();
    // The region of the recno subspace that holds recno 0.. (ints map
    // order-preservingly, so the non-negative ones share a few regions).
    let region = space.subspaces[1].region_of(&record_object(0)).id;
    let config = Configuration {
        epoch: Epoch(1),
        spaces: vec![space.clone()],
        ..Configuration::default()
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let fjall: Arc<dyn Engine> = Arc::new(
        FjallEngine::open(&dir.path().join("plain"), Durability::Interval).expect("fjall opens"),
    );
    let indexed_inner: Arc<dyn Engine> = Arc::new(
        FjallEngine::open(&dir.path().join("indexed"), Durability::Interval).expect("fjall opens"),
    );
    let indexed = IndexedEngine::open(indexed_inner, &config).expect("index opens");
    for n in 0..RECORDS {
        fjall.apply(vec![put(n, region)]).expect("put");
        indexed.apply(vec![put(n, region)]).expect("put");
    }
    let mut group = c.benchmark_group("engine");
    let key = key_bytes(&record_object(777).values[0]);
    group.bench_function("fjall get of a 1 KB record", |b| {
        b.iter(|| fjall.get(region, black_box(&key)).expect("get"))
    });
    let mut n = 0;
    group.bench_function("fjall put of a 1 KB record", |b| {
        b.iter_batched(
            || {
                n = (n + 1) % RECORDS;
                put(n, region)
            },
            |w| fjall.apply(vec![w]).expect("put"),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("indexed put of a 1 KB record (index kept)", |b| {
        b.iter_batched(
            || {
                n = (n + 1) % RECORDS;
                put(n, region)
            },
            |w| indexed.apply(vec![w]).expect("put"),
            BatchSize::SmallInput,
        )
    });
    let checks = [Check::new(1, PredOp::Eq(Value::Int(777)))];
    let access = choose_access(&space.desc, &place_of(&space, region), &checks, None, None);
    let bounds = PageBounds {
        objects: 256,
        size: |m| m.bytes,
        size_max: 256 * 1024,
    };
    let (found, more) =
        key_order_page(&indexed, region, &access, &checks, None, bounds, None).expect("page");
    assert!(
        found.len() == 1
            && found[0].object.decode().expect("an object").values[1] == Value::Int(777)
            && !more,
        "the index finds exactly recno 777"
    );
    group.bench_function("equality search page through the index", |b| {
        b.iter(|| {
            key_order_page(
                &indexed,
                region,
                &access,
                black_box(&checks),
                None,
                bounds,
                None,
            )
            .expect("page")
        })
    });
    // range10's page: the first 10 objects of a recno range, by recno.
    let range = [
        Check::new(1, PredOp::Ge(Value::Int(700))),
        Check::new(1, PredOp::Lt(Value::Int(740))),
    ];
    let sort = SortBy {
        attr: 1,
        descending: false,
    };
    let ten = PageBounds {
        objects: 10,
        ..bounds
    };
    let access = choose_access(
        &space.desc,
        &place_of(&space, region),
        &range,
        Some(sort),
        Some(10),
    );
    let (found, _) =
        sorted_page(&indexed, region, &access, &range, sort, None, ten, None).expect("page");
    let recnos: Vec<Value> = found
        .iter()
        .map(|m| m.object.decode().expect("an object").values[1].clone())
        .collect();
    assert_eq!(
        recnos,
        (700..710).map(Value::Int).collect::<Vec<_>>(),
        "the index walk finds recnos 700..710 in order"
    );
    group.bench_function("10-row range page through the index, sorted", |b| {
        b.iter(|| {
            sorted_page(
                &indexed,
                region,
                &access,
                black_box(&range),
                sort,
                None,
                ten,
                None,
            )
            .expect("page")
        })
    });
    group.finish();
}

/// A search of a common value and a rare one, both indexed, where the
/// common one's attribute comes first (`status = "active" and email =
/// …`): the first list walked to its end, as the daemon read it before
/// session 47, against the walk that counts both lists after 16 entries
/// and goes on with the rarer (`Access::Equalities`), in one run.
fn several_equalities(c: &mut Criterion) {
    // Subspaces of both, so that the key subspace's regions index both
    // completely (`Space::entries_complete`); only those regions are
    // written and read here.
    let desc = parse_space(
        "space people key k attributes string status, string email \
         subspace status subspace email create 4 partitions",
    )
    .expect("the space parses");
    let space = tessera_types::region::default_layout(SpaceId(1), desc);
    let config = Configuration {
        epoch: Epoch(1),
        spaces: vec![space.clone()],
        ..Configuration::default()
    };
    let person = |n: i64| Object {
        values: vec![
            Value::str(&format!("p{n}")),
            Value::str(if n % 2 == 0 { "active" } else { "idle" }),
            Value::str(&format!("p{n}@example.org")),
        ],
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let inner: Arc<dyn Engine> =
        Arc::new(FjallEngine::open(dir.path(), Durability::Interval).expect("fjall opens"));
    let indexed = IndexedEngine::open(inner, &config).expect("index opens");
    let key_subspace = &space.subspaces[0];
    for n in 0..RECORDS {
        let object = person(n);
        let region = key_subspace.region_of(&object).id;
        indexed
            .apply(vec![put_object(object, region)])
            .expect("put");
    }
    let target = person(778);
    let region = key_subspace.region_of(&target).id;
    let checks = [
        Check::new(1, PredOp::Eq(Value::str("active"))),
        Check::new(2, PredOp::Eq(Value::str("p778@example.org"))),
    ];
    let switching = choose_access(&space.desc, &place_of(&space, region), &checks, None, None);
    let Access::Equalities { walks, .. } = &switching else {
        panic!("two indexed equalities: {switching:?}");
    };
    let first_only = Access::Index {
        slot: walks[0].0.clone(),
        interval: (walks[0].1, walks[0].1),
        walk: Walk::Unordered,
    };
    let bounds = PageBounds {
        objects: 256,
        size: |m| m.bytes,
        size_max: 256 * 1024,
    };
    for access in [&first_only, &switching] {
        let (found, more) =
            key_order_page(&indexed, region, access, &checks, None, bounds, None).expect("page");
        assert!(
            found.len() == 1 && found[0].key == key_bytes(&target.values[0]) && !more,
            "{access:?} finds exactly p778"
        );
    }
    let mut group = c.benchmark_group("several equalities");
    for (name, access) in [
        ("status's list walked to its end", &first_only),
        ("moved to email's list after 16", &switching),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                key_order_page(
                    &indexed,
                    region,
                    access,
                    black_box(&checks),
                    None,
                    bounds,
                    None,
                )
                .expect("page")
            })
        });
    }
    group.finish();
}

/// An object as the client yields it: attribute names with the values.
fn client_record(desc: &SpaceDesc, object: Object) -> Vec<(String, Value)> {
    desc.attrs
        .iter()
        .zip(object.values)
        .map(|(a, v)| (a.name.clone(), v))
        .collect()
}

/// A search page as the daemon built it before it shipped stored bytes:
/// every stored record decoded whole, checked, and its object encoded
/// again into the page (`SearchPage { objects: Vec<(Version, Object)> }`,
/// here as the same fields without the message's enum tags).
fn page_decoding_records(stored: &[Vec<u8>], checks: &[Check]) -> Vec<u8> {
    let objects: Vec<(Version, Object)> = stored
        .iter()
        .filter_map(|bytes| {
            let record = Record::decode(bytes).expect("a record");
            let object = record.object?;
            checks
                .iter()
                .all(|c| c.matches(&object))
                .then_some((record.version, object))
        })
        .collect();
    postcard::to_allocvec(&(7u64, objects, false)).expect("encodes")
}

/// The client's side of [`page_decoding_records`]: the page decoded, each
/// object converted into what the client yields.
fn records_of_decoded_page(desc: &SpaceDesc, page: &[u8]) -> Vec<Vec<(String, Value)>> {
    let (_, objects, _): (u64, Vec<(Version, Object)>, bool) =
        postcard::from_bytes(page).expect("decodes");
    objects
        .into_iter()
        .map(|(_, o)| client_record(desc, o))
        .collect()
}

/// A search page as the daemon builds it now: each record's object cut out
/// of its stored bytes, only the checked attribute decoded.
fn page_of_stored_bytes(stored: &[Vec<u8>], checks: &[Check]) -> Vec<u8> {
    let objects = stored
        .iter()
        .filter_map(|bytes| {
            let (version, view) = stored_object(bytes).expect("a record");
            let view = view?;
            view.matches(checks)
                .expect("an object")
                .then(|| (version, ObjectBytes::from_view(view)))
        })
        .collect();
    encode(&Message::DaemonResponse {
        id: 7,
        response: DaemonResponse::SearchPage {
            objects,
            more: false,
        },
    })
}

/// The client's side of [`page_of_stored_bytes`]: the frame decoded, each
/// object decoded once from its bytes.
fn records_of_stored_page(desc: &SpaceDesc, frame: &[u8]) -> Vec<Vec<(String, Value)>> {
    let Ok(Message::DaemonResponse {
        response: DaemonResponse::SearchPage { objects, .. },
        ..
    }) = decode(&frame[4..])
    else {
        panic!("a search page");
    };
    objects
        .into_iter()
        .map(|(_, o)| client_record(desc, o.decode().expect("an object")))
        .collect()
}

/// The stored records of `records` usertable objects.
fn stored_records(records: i64) -> Vec<Vec<u8>> {
    (0..records)
        .map(|n| {
            Record {
                version: Version(1),
                object: Some(record_object(n)),
                recent: vec![],
            }
            .encode()
        })
        .collect()
}

/// A scan's page (YCSB E reads up to 100 records) from stored records to
/// the client's records, the way it was and the way it is.
fn search_pages(c: &mut Criterion) {
    let desc = usertable().desc;
    let checks = [Check::new(1, PredOp::Ge(Value::Int(0)))];
    let mut group = c.benchmark_group("search page");
    for records in [10i64, 100] {
        let stored = stored_records(records);
        let expected: Vec<_> = (0..records)
            .map(|n| client_record(&desc, record_object(n)))
            .collect();
        // The two ways, each a daemon's side and a client's side.
        type Build = fn(&[Vec<u8>], &[Check]) -> Vec<u8>;
        type Read = fn(&SpaceDesc, &[u8]) -> Vec<Vec<(String, Value)>>;
        let ways: [(&str, Build, Read); 2] = [
            (
                "decoded and re-encoded (before)",
                page_decoding_records,
                records_of_decoded_page,
            ),
            (
                "stored bytes shipped (after)",
                page_of_stored_bytes,
                records_of_stored_page,
            ),
        ];
        for (way, build, read) in ways {
            assert!(
                read(&desc, &build(&stored, &checks)) == expected,
                "{way} yields every record"
            );
            group.bench_function(format!("{records} records, daemon only, {way}"), |b| {
                b.iter(|| build(black_box(&stored), &checks))
            });
            group.bench_function(format!("{records} records, daemon + client, {way}"), |b| {
                b.iter(|| read(&desc, &build(black_box(&stored), &checks)))
            });
        }
    }
    group.finish();
}

/// What the client does with a page's frame when it arrives: decode it,
/// check each object whole and decode its key (`stream.rs`,
/// `objects_page`), keeping the objects for the caller — copied out of
/// the frame (`decode`) or left in it (`decode_shared`, the client's
/// reader). The frame's body is the reader's own buffer either way, so
/// each iteration gets a fresh one outside the timing.
fn client_pages(c: &mut Criterion) {
    let checks = [Check::new(1, PredOp::Ge(Value::Int(0)))];
    let mut group = c.benchmark_group("client page");
    for records in [10i64, 100] {
        let stored = stored_records(records);
        let body = page_of_stored_bytes(&stored, &checks)[4..].to_vec();
        type Decode = fn(Vec<u8>) -> Message;
        let ways: [(&str, Decode); 2] = [
            ("objects copied out of the frame", |b| {
                decode(&b).expect("decodes")
            }),
            ("objects left in the frame", |b| {
                decode_shared(b).expect("decodes")
            }),
        ];
        for (way, decode_page) in ways {
            let arrive = |body: Vec<u8>| {
                let Message::DaemonResponse {
                    response: DaemonResponse::SearchPage { objects, .. },
                    ..
                } = decode_page(body)
                else {
                    panic!("a search page");
                };
                let keys: Vec<Value> = objects
                    .iter()
                    .map(|(_, o)| {
                        let view = o.view().expect("an object");
                        view.value(0).expect("a key").expect("a key")
                    })
                    .collect();
                (objects, keys)
            };
            let (objects, keys) = arrive(body.clone());
            let expected: Vec<Value> = (0..records)
                .map(|n| record_object(n).values[0].clone())
                .collect();
            assert_eq!(keys, expected, "{way}");
            assert_eq!(objects.len(), records as usize);
            group.bench_function(format!("{records} records, {way}"), |b| {
                b.iter_batched(|| body.clone(), arrive, BatchSize::SmallInput)
            });
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    codec,
    coordinates,
    predicates,
    engines,
    several_equalities,
    search_pages,
    client_pages
);
criterion_main!(benches);
