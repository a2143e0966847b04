//! The library half of the `tessera` binary: the pure conversions between
//! command-line JSON and typed values ([`json`]).
//!
//! It exists so that tests and the fuzz targets (`crates/fuzz`) reach the
//! very functions the binary runs; everything with I/O stays in the binary.

pub mod json;
