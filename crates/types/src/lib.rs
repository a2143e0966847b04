//! `tessera-types`: the vocabulary of Tessera as plain data and pure functions.
//!
//! What it is: values and their types, space schemas and the description
//! language that declares them, predicates, the mapping of values to
//! coordinates, regions and the search plan, and the [`Configuration`] that the
//! coordinator publishes by epoch.
//!
//! What it is not: it does no I/O, keeps no clock and draws no randomness.
//! Every other crate depends on it; it depends on none of them.
//!
//! Key items, by module:
//!
//! - [`value`]: [`Value`], [`DataType`], [`Object`].
//! - [`schema`] and [`parse`]: [`SpaceDesc`]; [`parse_space`] reads the space
//!   description language (API.md §8), [`format_space`] writes it.
//! - [`coordinate`](mod@coordinate): the fixed string hash and the order-preserving int/float
//!   encodings that place values on axes, and [`key_bytes`], the storage key
//!   (byte rules in `docs/PROTOCOL.md`, section "Coordinates").
//! - [`region`]: grid sizes, split points, the region holding a point, the
//!   regions meeting a box.
//! - [`predicate`]: [`Check`] and its semantics, [`validate_check`];
//!   [`regex`](mod@regex) its pattern dialect; [`interval`]:
//!   [`coordinate_interval`], the coordinates a check confines an attribute
//!   to; [`coerce`]: [`coerce_value`] and the canonical form of written values.
//! - [`plan`]: [`plan_search`], the fewest regions of one subspace that can
//!   hold every match, and [`describe_plan`]; [`lookup`]: searches through
//!   a global index ([`lookup::plan_lookup`]) and the entries they walk.
//! - [`replex`]: replex spaces: hybrid grids, which regions can hold one
//!   object, covering sets, the fraction of objects at risk.
//! - [`config`]: the [`Configuration`] published by epoch; [`layout`]: a
//!   space's layout parts and their lifecycle, and the [`RegionDirectory`].

#![warn(missing_docs)]

pub mod calibration;
pub mod coerce;
pub mod config;
pub mod coordinate;
pub mod ids;
pub mod interval;
pub mod layout;
pub mod lookup;
pub mod parse;
pub mod plan;
pub mod predicate;
pub mod regex;
pub mod region;
pub mod replex;
pub mod schema;
pub mod sortkey;
pub mod value;

pub use calibration::{AdvisorCalibration, CalibrationError, FitQuality};
pub use coerce::{coerce_value, TypeError};
pub use config::{
    Configuration, CoordinatorInfo, DaemonInfo, DaemonState, Rebuild, Region, Space, SubspaceKind,
    SubspaceLayout, Transfer,
};
pub use coordinate::{coordinate, key_bytes, string_hash};
pub use ids::{DaemonId, Epoch, PartId, RegionId, SpaceId, Version};
pub use interval::coordinate_interval;
pub use layout::{IndexPart, PartKind, PartState, PartView, RegionDirectory};
pub use parse::{format_space, parse_space, ParseSpaceError};
pub use plan::{describe_plan, plan_search, SearchPlan};
pub use predicate::{validate_check, Check, CheckError, PredOp};
pub use region::KeyRegionError;
pub use schema::{Attribute, GlobalIndexDecl, HybridDecl, ReplexDecl, SpaceDesc};
pub use value::{DataType, Object, Prim, TimeUnit, Value};
