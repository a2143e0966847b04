//! `tessera-types`: the vocabulary of Tessera as plain data and pure functions.
//!
//! What it is: values and their types, space schemas and the description
//! language that declares them, predicates, the mapping of values to
//! coordinates, regions and the search plan, and the [`Configuration`] that the
//! coordinator publishes by epoch.
//!
//! What it is not: it does no I/O, keeps no clock and draws no randomness.
//! Every other crate depends on it; it depends on none of them.

pub mod config;
pub mod coordinate;
pub mod ids;
pub mod parse;
pub mod plan;
pub mod predicate;
pub mod region;
pub mod schema;
pub mod value;

pub use config::{
    Configuration, CoordinatorInfo, DaemonInfo, DaemonState, Region, Space, SubspaceLayout,
};
pub use ids::{DaemonId, Epoch, RegionId, SpaceId, Version};
pub use predicate::{Check, PredOp};
pub use schema::{Attribute, SpaceDesc};
pub use value::{DataType, Object, Prim, TimeUnit, Value};
