//! YCSB core workloads A–F: operation proportions, request distributions,
//! record shape, and the per-worker operation stream.

use crate::generator::{key_name, key_suffix, Distribution, KeyChooser};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One operation the driver sends to a store.
#[derive(Clone, Debug)]
pub enum Op {
    /// Create a whole record.
    Insert {
        key: String,
        recno: i64,
        fields: Fields,
    },
    /// Read a record by key (all fields).
    Read { key: String },
    /// Overwrite one field. `record` is the whole new record, for stores
    /// that keep a record as one value (Redis, etcd) and must write it all.
    Update {
        key: String,
        field: usize,
        value: Vec<u8>,
        record: Fields,
    },
    /// Read, then update one field of the same record.
    ReadModifyWrite {
        key: String,
        field: usize,
        value: Vec<u8>,
        record: Fields,
    },
    /// YCSB scan as HyperDex emulated it: records with `recno >= start`
    /// (below `start + window`), ascending by `recno`, at most `count`.
    Scan { start: i64, window: i64, count: u64 },
    /// Equality on the indexed secondary attribute `recno`.
    SearchEq { recno: i64 },
    /// Set the indexed secondary attribute `recno` of a record.
    UpdateIndexed { key: String, recno: i64 },
}

impl Op {
    /// The name results are grouped under (YCSB's spelling).
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Insert { .. } => "INSERT",
            Op::Read { .. } => "READ",
            Op::Update { .. } => "UPDATE",
            Op::ReadModifyWrite { .. } => "READ-MODIFY-WRITE",
            Op::Scan { .. } => "SCAN",
            Op::SearchEq { .. } => "SEARCH-EQ",
            Op::UpdateIndexed { .. } => "UPDATE-INDEXED",
        }
    }
}

/// A record's fields, `field0..fieldN-1`, as bytes.
pub type Fields = Arc<Vec<Vec<u8>>>;

/// The name of field `i` (YCSB's `field0`, `field1`, …).
pub fn field_name(i: usize) -> String {
    format!("field{i}")
}

/// `len` random printable bytes (YCSB fills values with random ASCII).
pub fn random_value<R: Rng>(rng: &mut R, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.gen_range(b' '..=b'~')).collect()
}

/// A whole record of `count` fields of `len` bytes.
pub fn random_record<R: Rng>(rng: &mut R, count: usize, len: usize) -> Fields {
    Arc::new((0..count).map(|_| random_value(rng, len)).collect())
}

/// The parameters of a YCSB core workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub recordcount: u64,
    pub operationcount: u64,
    pub fieldcount: usize,
    pub fieldlength: usize,
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub readmodifywrite: f64,
    pub distribution: Distribution,
    /// Scans read `1..=maxscanlength` records, uniformly.
    pub maxscanlength: u64,
}

impl Workload {
    /// YCSB's core workload `letter` (a–f), with the given sizes.
    pub fn core(letter: char, recordcount: u64, operationcount: u64) -> Option<Workload> {
        let (read, update, insert, scan, rmw, distribution) = match letter.to_ascii_lowercase() {
            'a' => (0.5, 0.5, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'b' => (0.95, 0.05, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'c' => (1.0, 0.0, 0.0, 0.0, 0.0, Distribution::Zipfian),
            'd' => (0.95, 0.0, 0.05, 0.0, 0.0, Distribution::Latest),
            'e' => (0.0, 0.0, 0.05, 0.95, 0.0, Distribution::Zipfian),
            'f' => (0.5, 0.0, 0.0, 0.0, 0.5, Distribution::Zipfian),
            _ => return None,
        };
        Some(Workload {
            name: format!("workload{}", letter.to_ascii_lowercase()),
            recordcount,
            operationcount,
            fieldcount: 10,
            fieldlength: 100,
            read,
            update,
            insert,
            scan,
            readmodifywrite: rmw,
            distribution,
            maxscanlength: 100,
        })
    }

    /// The operation kind for a uniform draw `u` in `[0, 1)`, by the
    /// cumulative proportions in YCSB's order.
    pub fn choose(&self, u: f64) -> OpKind {
        let table = [
            (self.read, OpKind::Read),
            (self.update, OpKind::Update),
            (self.insert, OpKind::Insert),
            (self.scan, OpKind::Scan),
            (self.readmodifywrite, OpKind::ReadModifyWrite),
        ];
        let total: f64 = table.iter().map(|(p, _)| p).sum();
        let mut acc = 0.0;
        let target = u * total;
        for (p, kind) in table {
            acc += p;
            if target < acc {
                return kind;
            }
        }
        table
            .iter()
            .rev()
            .find(|(p, _)| *p > 0.0)
            .map(|(_, k)| *k)
            .unwrap_or(OpKind::Read)
    }

    /// How many inserts the run part expects (YCSB sizes the zipfian key
    /// range with twice this, so new records can become popular).
    fn expected_new_keys(&self) -> u64 {
        (self.operationcount as f64 * self.insert * 2.0) as u64
    }
}

/// The kinds of operation a core workload mixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// Record numbers handed out for inserts and the highest one below which
/// every insert has been acknowledged (YCSB's acknowledged counter), so
/// reads never chase a record whose insert is still in flight.
#[derive(Debug)]
pub struct InsertSequence {
    next: AtomicU64,
    acked: Mutex<(u64, BTreeSet<u64>)>,
}

impl InsertSequence {
    /// Records `0..start` already exist.
    pub fn new(start: u64) -> InsertSequence {
        InsertSequence {
            next: AtomicU64::new(start),
            acked: Mutex::new((start, BTreeSet::new())),
        }
    }

    /// The next record number to insert.
    pub fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks `n` as inserted.
    pub fn acknowledge(&self, n: u64) {
        let mut guard = self.acked.lock().unwrap_or_else(|p| p.into_inner());
        let (limit, pending) = &mut *guard;
        if n == *limit {
            *limit += 1;
            while pending.remove(limit) {
                *limit += 1;
            }
        } else if n > *limit {
            pending.insert(n);
        }
    }

    /// The number of records `0..count` all acknowledged.
    pub fn acknowledged(&self) -> u64 {
        self.acked.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

/// The operation stream of one worker of a run.
pub trait OpSource: Send {
    /// The next operation.
    fn next_op(&mut self) -> Op;
    /// Told when an operation finished (successfully or not).
    fn done(&mut self, _op: &Op, _ok: bool) {}
}

/// The load phase: inserts of records taken from a shared sequence.
pub struct LoadOps {
    workload: Arc<Workload>,
    sequence: Arc<InsertSequence>,
    rng: StdRng,
}

impl LoadOps {
    pub fn new(workload: Arc<Workload>, sequence: Arc<InsertSequence>, seed: u64) -> LoadOps {
        LoadOps {
            workload,
            sequence,
            rng: StdRng::seed_from_u64(seed),
        }
    }
}

impl OpSource for LoadOps {
    fn next_op(&mut self) -> Op {
        let n = self.sequence.take();
        Op::Insert {
            key: key_name(n),
            recno: key_suffix(n),
            fields: random_record(
                &mut self.rng,
                self.workload.fieldcount,
                self.workload.fieldlength,
            ),
        }
    }
}

/// The run phase of a core workload.
pub struct RunOps {
    workload: Arc<Workload>,
    sequence: Arc<InsertSequence>,
    chooser: KeyChooser,
    rng: StdRng,
    pending_insert: Option<u64>,
}

impl RunOps {
    /// `chooser` comes from [`RunOps::chooser`], built once and cloned per
    /// worker (building a zipfian sums a zeta series).
    pub fn new(
        workload: Arc<Workload>,
        sequence: Arc<InsertSequence>,
        chooser: KeyChooser,
        seed: u64,
    ) -> RunOps {
        RunOps {
            workload,
            sequence,
            chooser,
            rng: StdRng::seed_from_u64(seed),
            pending_insert: None,
        }
    }

    /// The key chooser for `workload` over records already loaded.
    pub fn chooser(workload: &Workload) -> KeyChooser {
        let items = workload.recordcount + workload.expected_new_keys();
        KeyChooser::new(
            workload.distribution,
            items,
            workload.recordcount.saturating_sub(1),
        )
    }

    fn existing(&mut self) -> u64 {
        let latest = self.sequence.acknowledged().saturating_sub(1);
        self.chooser.next(&mut self.rng, latest)
    }
}

/// Record numbers hash over `[0, 2^63)`; a scan of `count` records looks
/// through a window this many times the expected span of `count` keys.
const SCAN_WINDOW_SLACK: u64 = 4;

/// The width of the `recno` window a scan of `count` records searches in a
/// store of `records` records.
pub fn scan_window(records: u64, count: u64) -> i64 {
    let gap = (i64::MAX as u64) / records.max(1);
    gap.saturating_mul(count.max(1))
        .saturating_mul(SCAN_WINDOW_SLACK)
        .min(i64::MAX as u64) as i64
}

impl OpSource for RunOps {
    fn next_op(&mut self) -> Op {
        let w = self.workload.clone();
        let kind = w.choose(self.rng.gen());
        match kind {
            OpKind::Read => Op::Read {
                key: key_name(self.existing()),
            },
            OpKind::Update | OpKind::ReadModifyWrite => {
                let key = key_name(self.existing());
                let field = self.rng.gen_range(0..w.fieldcount);
                let value = random_value(&mut self.rng, w.fieldlength);
                let record = random_record(&mut self.rng, w.fieldcount, w.fieldlength);
                if kind == OpKind::Update {
                    Op::Update {
                        key,
                        field,
                        value,
                        record,
                    }
                } else {
                    Op::ReadModifyWrite {
                        key,
                        field,
                        value,
                        record,
                    }
                }
            }
            OpKind::Insert => {
                let n = self.sequence.take();
                self.pending_insert = Some(n);
                Op::Insert {
                    key: key_name(n),
                    recno: key_suffix(n),
                    fields: random_record(&mut self.rng, w.fieldcount, w.fieldlength),
                }
            }
            OpKind::Scan => {
                let start = key_suffix(self.existing());
                let count = self.rng.gen_range(1..=w.maxscanlength.max(1));
                Op::Scan {
                    start,
                    window: scan_window(self.sequence.acknowledged(), count),
                    count,
                }
            }
        }
    }

    fn done(&mut self, op: &Op, _ok: bool) {
        if let (Op::Insert { .. }, Some(n)) = (op, self.pending_insert.take()) {
            // A failed insert is acknowledged too, or the counter stalls;
            // reads of that record count as not found.
            self.sequence.acknowledge(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn mix(letter: char, draws: usize) -> HashMap<&'static str, usize> {
        let w = Arc::new(Workload::core(letter, 1000, draws as u64).unwrap());
        let seq = Arc::new(InsertSequence::new(1000));
        let mut ops = RunOps::new(w.clone(), seq, RunOps::chooser(&w), 42);
        let mut counts = HashMap::new();
        for _ in 0..draws {
            let op = ops.next_op();
            ops.done(&op, true);
            *counts.entry(op.kind()).or_insert(0) += 1;
        }
        counts
    }

    fn share(counts: &HashMap<&'static str, usize>, kind: &str, draws: usize) -> f64 {
        *counts.get(kind).unwrap_or(&0) as f64 / draws as f64
    }

    #[test]
    fn core_workload_proportions() {
        let n = 20_000;
        let cases: [(char, &[(&str, f64)]); 6] = [
            ('a', &[("READ", 0.5), ("UPDATE", 0.5)]),
            ('b', &[("READ", 0.95), ("UPDATE", 0.05)]),
            ('c', &[("READ", 1.0)]),
            ('d', &[("READ", 0.95), ("INSERT", 0.05)]),
            ('e', &[("SCAN", 0.95), ("INSERT", 0.05)]),
            ('f', &[("READ", 0.5), ("READ-MODIFY-WRITE", 0.5)]),
        ];
        for (letter, expected) in cases {
            let counts = mix(letter, n);
            let total: usize = counts.values().sum();
            assert_eq!(total, n);
            for (kind, p) in expected {
                let got = share(&counts, kind, n);
                assert!(
                    (got - p).abs() < 0.015,
                    "workload {letter} {kind}: {got} vs {p}"
                );
            }
            let listed: usize = expected
                .iter()
                .map(|(k, _)| *counts.get(k).unwrap_or(&0))
                .sum();
            assert_eq!(
                listed, n,
                "workload {letter} produced other kinds: {counts:?}"
            );
        }
        assert!(Workload::core('g', 1, 1).is_none());
    }

    #[test]
    fn choose_respects_boundaries() {
        let w = Workload::core('a', 10, 10).unwrap();
        assert_eq!(w.choose(0.0), OpKind::Read);
        assert_eq!(w.choose(0.4999), OpKind::Read);
        assert_eq!(w.choose(0.5), OpKind::Update);
        assert_eq!(w.choose(0.999_999), OpKind::Update);
    }

    #[test]
    fn inserts_extend_the_key_space_and_reads_stay_within_it() {
        let w = Arc::new(Workload::core('d', 100, 1000).unwrap());
        let seq = Arc::new(InsertSequence::new(100));
        let mut ops = RunOps::new(w.clone(), seq.clone(), RunOps::chooser(&w), 1);
        let mut inserted = std::collections::HashSet::new();
        for n in 0..100 {
            inserted.insert(key_name(n));
        }
        for _ in 0..2000 {
            let op = ops.next_op();
            match &op {
                Op::Insert { key, recno, fields } => {
                    assert_eq!(fields.len(), 10);
                    assert!(fields.iter().all(|f| f.len() == 100));
                    assert_eq!(crate::generator::parse_key_suffix(key), Some(*recno));
                    assert!(inserted.insert(key.clone()), "inserted {key} twice");
                }
                Op::Read { key } => assert!(inserted.contains(key), "read of {key}"),
                other => panic!("workload d produced {other:?}"),
            }
            ops.done(&op, true);
        }
        assert_eq!(seq.acknowledged() as usize, inserted.len());
    }

    #[test]
    fn insert_sequence_acknowledges_contiguously() {
        let s = InsertSequence::new(10);
        let a = s.take();
        let b = s.take();
        let c = s.take();
        assert_eq!((a, b, c), (10, 11, 12));
        s.acknowledge(c);
        assert_eq!(s.acknowledged(), 10);
        s.acknowledge(a);
        assert_eq!(s.acknowledged(), 11);
        s.acknowledge(b);
        assert_eq!(s.acknowledged(), 13);
    }

    #[test]
    fn scans_have_bounded_lengths() {
        let w = Arc::new(Workload::core('e', 1000, 1000).unwrap());
        let seq = Arc::new(InsertSequence::new(1000));
        let mut ops = RunOps::new(w.clone(), seq, RunOps::chooser(&w), 9);
        let mut lengths = std::collections::BTreeSet::new();
        for _ in 0..5000 {
            let op = ops.next_op();
            if let Op::Scan {
                count,
                window,
                start,
            } = &op
            {
                assert!((1..=100).contains(count));
                assert!(*window > 0 && *start >= 0);
                lengths.insert(*count);
            }
            ops.done(&op, true);
        }
        assert!(lengths.len() > 90, "scan lengths not uniform over 1..=100");
    }
}
