//! Predicates over one attribute (API.md §6) and their coordinate intervals.
//! TODO(types helper): implement.

use crate::value::{Object, Value};
use serde::{Deserialize, Serialize};

/// One predicate operator with its operand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PredOp {
    Eq(Value),
    Lt(Value),
    Le(Value),
    Gt(Value),
    Ge(Value),
    /// The minimal regex dialect of API.md §6.3, on string attributes.
    Regex(String),
    LenEq(u64),
    LenLe(u64),
    LenGe(u64),
    /// List or set element, or map key.
    Contains(Value),
}

/// A predicate on one attribute, by index into the space's `attrs`.
/// A search or a conditional operation holds when all its checks hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub attr: usize,
    pub op: PredOp,
}

impl Check {
    /// Whether `object` satisfies this check.
    pub fn matches(&self, object: &Object) -> bool {
        let _ = object;
        unimplemented!()
    }
}
