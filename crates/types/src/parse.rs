//! The space description language (API.md §8).
//! TODO(types helper): implement.

use crate::schema::SpaceDesc;

/// Why a description was refused, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {reason}")]
pub struct ParseSpaceError {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub reason: String,
}

/// Parses and validates a space description.
pub fn parse_space(text: &str) -> Result<SpaceDesc, ParseSpaceError> {
    let _ = text;
    unimplemented!()
}
