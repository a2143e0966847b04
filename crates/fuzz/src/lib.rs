//! `tessera-fuzz`: fuzz targets for every decoder of bytes from the network
//! or the disk and for every parser of user text, on the stable toolchain.
//!
//! What it is: five [`Target`]s ([`TARGETS`]) — `frame` (the wire),
//! `record` (stored records and index entries), `space` (the description
//! language), `predicates` (the CLI's JSON) and `macaroon` (the tokens of
//! `auth=`) — each a function that runs
//! the production code on one input and asserts its properties, plus a
//! mutation [`runner`] that starts from valid seed encodings and counts
//! panics and oversized allocations as crashes. `cargo run -p tessera-fuzz
//! --release -- --runs N` runs them (see `README.md`).
//!
//! What it is not: coverage-guided (no compiler instrumentation, so it
//! builds with the workspace and needs no nightly); the outcome shapes a
//! target reports stand in for coverage.

pub mod alloc_guard;
pub mod frame;
pub mod macaroon;
pub mod mutate;
pub mod predicates;
pub mod record;
// Reports how long each target ran.
#[allow(clippy::disallowed_methods)]
pub mod runner;
pub mod samples;
pub mod space;

pub use runner::{run, Crash, Outcome, Report, Target};

/// Every target, in the order `all` runs them.
pub const TARGETS: [Target; 5] = [
    frame::TARGET,
    record::TARGET,
    space::TARGET,
    predicates::TARGET,
    macaroon::TARGET,
];

/// The target with this name.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
