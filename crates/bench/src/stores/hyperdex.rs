//! Real HyperDex 1.8 (the system Tessera descends from) through its C
//! client library, `libhyperdex-client`, opened at run time (module `ffi`).
//!
//! The space is the YCSB table Tessera runs against: key `k`, `int recno`
//! (the key's numeric suffix) with a subspace of its own, `field0..9`
//! strings, tolerating one failure. HyperDex's client is not thread-safe,
//! so every connection of the pool is a thread of its own that creates,
//! uses and destroys one client; an operation travels to it over a channel
//! and its answer comes back over another.
//!
//! Scans are a `search` on a `recno` range, as HyperDex's own YCSB binding
//! did, not a `sorted_search`: HyperDex's `sorted_search` returns the wrong
//! records when its limit is below a region's number of matches (its daemon
//! keeps the wrong end of its heap). A search cannot be limited, so a scan
//! reads every record of the range (about [`scan_window`]'s slack times
//! the records asked for), where Tessera's `sorted_search` stops at them.
//!
//! [`scan_window`]: crate::workload::scan_window

mod ffi;

pub use ffi::{Api, AttributeIn, AttributeOut, CallError, CheckIn, LoadLibraryError};

use super::Pool;
use crate::driver::{BoxFuture, Outcome, Store};
use crate::workload::{field_name, Op};
use anyhow::Context;
use ffi::Client;
use std::ffi::{c_int, CString};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The HyperDex description of the YCSB table, in the words of
/// [`usertable_description`](super::tessera::usertable_description).
pub fn usertable_description(space: &str, fieldcount: usize, partitions: u32) -> String {
    let fields: String = (0..fieldcount)
        .map(|i| format!(", {}", field_name(i)))
        .collect();
    format!(
        "space {space} key k attributes int recno{fields} subspace recno create {partitions} partitions tolerate 1 failure"
    )
}

/// Why a value HyperDex returned could not be read as the datatype named.
#[derive(Debug, thiserror::Error)]
pub enum DecodeValueError {
    /// An `int` is 8 bytes, little-endian.
    #[error("an int attribute of {len} bytes (HyperDex's are 8)")]
    IntLength { len: usize },
}

/// HyperDex's encoding of an `int` (int64) value: 8 bytes, little-endian.
pub fn encode_int(value: i64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

/// The inverse of [`encode_int`].
pub fn decode_int(bytes: &[u8]) -> Result<i64, DecodeValueError> {
    let array: [u8; 8] = bytes
        .try_into()
        .map_err(|_| DecodeValueError::IntLength { len: bytes.len() })?;
    Ok(i64::from_le_bytes(array))
}

fn c_name(name: &str) -> CString {
    // Attribute names are ours (`recno`, `fieldN`): never a NUL byte.
    CString::new(name).expect("attribute names hold no NUL byte")
}

fn string_attribute(name: &str, value: &[u8]) -> AttributeIn {
    AttributeIn {
        name: c_name(name),
        datatype: ffi::DATATYPE_STRING,
        value: value.to_vec(),
    }
}

fn recno_attribute(recno: i64) -> AttributeIn {
    AttributeIn {
        name: c_name("recno"),
        datatype: ffi::DATATYPE_INT64,
        value: encode_int(recno),
    }
}

/// The attributes of a whole new record: `recno`, then `field0..`.
pub fn insert_attributes(recno: i64, fields: &[Vec<u8>]) -> Vec<AttributeIn> {
    let mut attrs = Vec::with_capacity(fields.len() + 1);
    attrs.push(recno_attribute(recno));
    for (i, value) in fields.iter().enumerate() {
        attrs.push(string_attribute(&field_name(i), value));
    }
    attrs
}

fn recno_check(predicate: c_int, value: i64) -> CheckIn {
    CheckIn {
        name: c_name("recno"),
        datatype: ffi::DATATYPE_INT64,
        value: encode_int(value),
        predicate,
    }
}

/// The predicate of records with `lo <= recno < hi`.
pub fn recno_range_checks(lo: i64, hi: i64) -> Vec<CheckIn> {
    vec![
        recno_check(ffi::PREDICATE_GREATER_EQUAL, lo),
        recno_check(ffi::PREDICATE_LESS_THAN, hi),
    ]
}

/// The predicate of records with `recno == value`.
pub fn recno_equal_checks(value: i64) -> Vec<CheckIn> {
    vec![recno_check(ffi::PREDICATE_EQUALS, value)]
}

/// Work for a connection's thread, run against its client.
type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// What a connection's thread holds: its client and the space's names.
pub struct Session {
    client: Client,
    space: CString,
}

impl Session {
    fn found(yes: bool) -> Outcome {
        if yes {
            Outcome::Ok
        } else {
            Outcome::NotFound
        }
    }

    fn get(&mut self, key: &str) -> Result<Option<Vec<AttributeOut>>, CallError> {
        self.client.get(&self.space, key.as_bytes())
    }

    fn put(&mut self, key: &str, attrs: &[AttributeIn]) -> Result<Outcome, CallError> {
        self.client.put(&self.space, key.as_bytes(), attrs)?;
        Ok(Outcome::Ok)
    }

    fn search(&mut self, checks: &[CheckIn]) -> Result<Vec<Vec<AttributeOut>>, CallError> {
        self.client.search(&self.space, checks)
    }

    fn run(&mut self, op: &Op) -> Result<Outcome, CallError> {
        match op {
            Op::Insert { key, recno, fields } => self.put(key, &insert_attributes(*recno, fields)),
            Op::Read { key } => Ok(Self::found(self.get(key)?.is_some())),
            Op::Update {
                key, field, value, ..
            } => self.put(key, &[string_attribute(&field_name(*field), value)]),
            Op::ReadModifyWrite {
                key, field, value, ..
            } => {
                self.get(key)?;
                self.put(key, &[string_attribute(&field_name(*field), value)])
            }
            Op::Scan { start, window, .. } => {
                let end = start.saturating_add(*window);
                Ok(Self::found(
                    !self.search(&recno_range_checks(*start, end))?.is_empty(),
                ))
            }
            Op::SearchEq { recno } => Ok(Self::found(
                !self.search(&recno_equal_checks(*recno))?.is_empty(),
            )),
            Op::UpdateIndexed { key, recno } => self.put(key, &[recno_attribute(*recno)]),
        }
    }
}

/// One pooled connection: a thread owning one HyperDex client.
pub struct Connection {
    jobs: mpsc::Sender<Job>,
}

impl Connection {
    /// Starts a thread with a client of the coordinator `host:port`; fails
    /// if the client cannot be created.
    async fn open(api: Arc<Api>, host: String, port: u16, space: CString) -> anyhow::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, created) = oneshot::channel();
        std::thread::Builder::new()
            .name("hyperdex-client".to_string())
            .spawn(move || {
                let client = match Client::create(api, &host, port) {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                let mut session = Session { client, space };
                // Ends when the pool drops this connection's sender.
                for job in queue {
                    job(&mut session);
                }
            })
            .context("starting a HyperDex client thread")?;
        created
            .await
            .context("the HyperDex client thread ended at start")??;
        Ok(Connection { jobs })
    }

    /// Runs `f` on this connection's thread and returns its answer.
    async fn call<T, F>(&self, f: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Session) -> T + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        self.jobs
            .send(Box::new(move |session: &mut Session| {
                let _ = answer.send(f(session));
            }))
            .map_err(|_| anyhow::anyhow!("the HyperDex client thread has ended"))?;
        answered
            .await
            .context("the HyperDex client thread ended during an operation")
    }
}

/// HyperDex as a [`Store`]: every operation kind, one client per
/// operation in flight.
pub struct HyperdexStore {
    api: Arc<Api>,
    host: String,
    port: u16,
    space: CString,
    pool: Pool<Connection>,
}

/// How long a new space may stay UNKNOWNSPACE / OFFLINE to clients.
const SPACE_READY_TIMEOUT: Duration = Duration::from_secs(60);

impl HyperdexStore {
    /// A store on `space` (already created) of the cluster whose
    /// coordinator is `host:port`, once clients can use the space: right
    /// after `add-space`, HyperDex answers UNKNOWNSPACE or OFFLINE for a
    /// while, and a benchmark must not count that.
    pub async fn open(api: Arc<Api>, host: &str, port: u16, space: &str) -> anyhow::Result<Self> {
        let store = HyperdexStore {
            api,
            host: host.to_string(),
            port,
            space: CString::new(space).context("a space name with a NUL byte")?,
            pool: Pool::default(),
        };
        let deadline = Instant::now() + SPACE_READY_TIMEOUT;
        loop {
            let probe = store
                .with_session(|s| s.get("tessera-bench-space-probe").map(|_| ()))
                .await;
            let waiting = match &probe {
                Ok(()) => return Ok(store),
                Err(e) => e
                    .downcast_ref::<CallError>()
                    .and_then(CallError::code)
                    .is_some_and(|c| c == ffi::UNKNOWNSPACE || c == ffi::OFFLINE),
            };
            if !waiting || Instant::now() > deadline {
                return probe
                    .map(|()| store)
                    .with_context(|| format!("HyperDex space {space} did not become usable"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs `f` with a pooled session; a failed call drops its connection.
    async fn with_session<T, F>(&self, f: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Session) -> Result<T, CallError> + Send + 'static,
    {
        self.pool
            .with(
                || {
                    Connection::open(
                        self.api.clone(),
                        self.host.clone(),
                        self.port,
                        self.space.clone(),
                    )
                },
                |conn| async move {
                    let result = match conn.call(f).await {
                        Ok(r) => r.map_err(anyhow::Error::from),
                        Err(e) => Err(e),
                    };
                    (conn, result)
                },
            )
            .await
    }

    /// The record `key`, its attributes as HyperDex returned them.
    pub async fn get_record(&self, key: &str) -> anyhow::Result<Option<Vec<AttributeOut>>> {
        let key = key.to_string();
        self.with_session(move |s| s.get(&key)).await
    }

    /// Every record with `lo <= recno < hi`, in no particular order.
    pub async fn recno_range(&self, lo: i64, hi: i64) -> anyhow::Result<Vec<Vec<AttributeOut>>> {
        self.with_session(move |s| s.search(&recno_range_checks(lo, hi)))
            .await
    }
}

impl Store for HyperdexStore {
    fn name(&self) -> &str {
        "hyperdex"
    }

    fn supports(&self, _kind: &str) -> bool {
        true
    }

    fn execute<'a>(&'a self, op: &'a Op) -> BoxFuture<'a, anyhow::Result<Outcome>> {
        let op = op.clone();
        Box::pin(self.with_session(move |s| s.run(&op)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_are_eight_little_endian_bytes() {
        // HyperDex packs int64 with e::pack64le (its datatype_int64.cc).
        assert_eq!(encode_int(1), vec![1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            encode_int(-2),
            vec![0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            encode_int(0x0102_0304_0506_0708),
            vec![8, 7, 6, 5, 4, 3, 2, 1]
        );
        for v in [0, 1, -1, i64::MIN, i64::MAX, 4_611_686_018_427_387_904] {
            assert_eq!(decode_int(&encode_int(v)).unwrap(), v);
        }
        for len in [0, 7, 9] {
            assert!(matches!(
                decode_int(&vec![0; len]),
                Err(DecodeValueError::IntLength { len: l }) if l == len
            ));
        }
    }

    #[test]
    fn a_record_is_recno_then_string_fields() {
        let fields = vec![b"a".to_vec(), b"bc".to_vec(), Vec::new()];
        let attrs = insert_attributes(42, &fields);
        let names: Vec<&str> = attrs.iter().map(|a| a.name.to_str().unwrap()).collect();
        assert_eq!(names, ["recno", "field0", "field1", "field2"]);
        assert_eq!(attrs[0].datatype, 9218, "HYPERDATATYPE_INT64");
        assert_eq!(attrs[0].value, [42, 0, 0, 0, 0, 0, 0, 0]);
        for (a, f) in attrs[1..].iter().zip(&fields) {
            assert_eq!(a.datatype, 9217, "HYPERDATATYPE_STRING");
            assert_eq!(&a.value, f);
        }
    }

    #[test]
    fn range_and_equality_predicates() {
        let range = recno_range_checks(-5, 300);
        assert_eq!(range.len(), 2);
        // HYPERPREDICATE_GREATER_EQUAL and HYPERPREDICATE_LESS_THAN.
        assert_eq!(
            (range[0].predicate, decode_int(&range[0].value).unwrap()),
            (9731, -5)
        );
        assert_eq!(
            (range[1].predicate, decode_int(&range[1].value).unwrap()),
            (9738, 300)
        );
        let eq = recno_equal_checks(7);
        assert_eq!(eq.len(), 1);
        assert_eq!(
            (eq[0].predicate, decode_int(&eq[0].value).unwrap()),
            (9729, 7)
        );
        assert!(range
            .iter()
            .chain(&eq)
            .all(|c| c.name.to_str() == Ok("recno") && c.datatype == 9218));
    }

    #[test]
    fn description_matches_tesseras_usertable() {
        let d = usertable_description("usertable", 2, 24);
        assert_eq!(
            d,
            "space usertable key k attributes int recno, field0, field1 subspace recno create 24 partitions tolerate 1 failure"
        );
        // Tessera's grammar is HyperDex's: the same words parse there too.
        let parsed = tessera_types::parse::parse_space(&usertable_description("usertable", 10, 8))
            .expect("HyperDex's description parses as Tessera's");
        assert_eq!(parsed.attrs.len(), 12);
    }
}
