//! `tessera-advisor`: which layout a space should have, for a workload.
//!
//! What it is: the HyperDex configurator thesis's performance model of a
//! layout (its equations exactly, [`thesis`]), Tessera's extended model
//! over local indexes, ranges, results, global indexes and replexes, with
//! storage and recovery time beside throughput ([`model`]), workload files
//! in the JSON of API.md §12.4 ([`workload`]) or observed by the daemons
//! ([`observed`]), and an optimizer that
//! searches layouts within a storage and a recovery-time budget and
//! compares them with the thesis's heuristics ([`optimize`]), and an
//! autopilot that re-advises when the observed mix drifts ([`autopilot`]).
//! `docs/design/advisor.md` explains the model and what is whose.
//!
//! What it is not: it does no I/O, keeps no clock and draws no randomness;
//! it never measures anything (calibration, `tessera calibrate`, and the
//! validation bench live elsewhere) and never changes a cluster (the CLI
//! turns advice into a `relayout`). Global indexes and replexes are
//! modelled ahead of Tessera building them, and proposed only on request.
//!
//! Key items: [`parse_workload`] → [`Workload`]; [`Layout`]; [`predict`]
//! with a [`Model`] and [`Params`] → [`Prediction`]; [`advise`] with
//! [`Options`] → [`Advice`] (the top layouts and every [`Heuristic`]'s).

#![warn(missing_docs)]

pub mod autopilot;
pub mod calibrate;
pub mod layout;
pub mod model;
pub mod observed;
pub mod optimize;
pub mod params;
pub mod thesis;
pub mod validate;
pub mod workload;

pub use layout::Layout;
pub use model::{predict, Model, Prediction};
pub use observed::{observed_workload, Observed, ObservedError, ObservedWorkload};
pub use optimize::{
    advise, Advice, AdviseError, Heuristic, HeuristicChoice, Options, Ranked, SearchKind,
};
pub use params::Params;
pub use validate::{
    agreement, kendall_tau_b, predict_over_run, sampled_layouts, Agreement, Sampled, Sampling,
};
pub use workload::{parse_workload, space_ref, Held, ParseWorkloadError, SpaceRef, Workload};
