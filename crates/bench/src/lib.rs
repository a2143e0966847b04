//! `tessera-bench`: the benchmark library behind `tessera bench`.
//!
//! - [`generator`] and [`workload`]: YCSB's core workloads A–F — key naming
//!   (`"user"` + FNV hash of the record number), scrambled zipfian (0.99),
//!   latest and uniform request distributions, 10 fields × 100 bytes;
//!   scans emulated as HyperDex did, as a sorted search on `recno`, the
//!   key's numeric suffix stored as an int attribute.
//! - [`driver`]: a closed-loop driver with many operations in flight and
//!   one HDR histogram per operation kind (p50/p95/p99/p999).
//! - [`stores`]: Tessera and the baselines (Redis, etcd, PostgreSQL, and
//!   real HyperDex through its C client) behind one [`driver::Store`]
//!   trait, so every system sees the same load.
//! - [`baselines`]: installing (HyperDex), starting and stopping the
//!   baseline servers on loopback.
//! - [`scenarios`]: YCSB runs, the comparison, and the paper's experiments.
//! - [`global_index`]: global secondary indexes beside SLIK's figures —
//!   lookup vs get, writes vs number of indexes, indexlets vs a local-index
//!   fan-out, live creation and split under load, a string range vs
//!   PostgreSQL's B-tree.
//! - [`cluster`]: the cluster a run uses (a local one started through the
//!   binary's [`cluster::Launch`], or a running one) and the readiness test.
//! - [`runs`]: every `tessera bench` scenario end to end, its tables and
//!   JSON; the binary only maps its arguments onto these.
//! - [`layouts`]: `tessera bench layouts`, the layout advisor's predictions
//!   against measured runs of a workload on each sampled layout.
//! - [`recovery`]: kill -9 of a point leader among real server processes:
//!   the time to the first acknowledged write and the state transfer's
//!   throughput.

// A benchmark measures real time: every module reads the clock.
#![allow(clippy::disallowed_methods)]

pub mod baselines;
pub mod calibrate;
pub mod cluster;
pub mod driver;
pub mod generator;
pub mod global_index;
pub mod layouts;
pub mod recovery;
pub mod replex;
pub mod runs;
pub mod scenarios;
pub mod stores;
pub mod workload;
