//! Turning what a user names into what the wire carries: space and
//! attribute names into indexes, values into the attribute's type, and
//! predicates into validated [`Check`]s. Pure functions, no I/O: every error
//! here is raised before anything is sent (API.md §3.2).

use crate::error::ClientError;
use tessera_protocol::Status;
use tessera_types::predicate::{coerce_value, validate_check};
use tessera_types::value::{parse_doc_path, split_attr_path};
use tessera_types::{Check, Configuration, DataType, PredOp, Space, SpaceDesc, Value};

/// The space with this name in `config`, or UNKNOWNSPACE.
pub(crate) fn space<'c>(config: &'c Configuration, name: &str) -> Result<&'c Space, ClientError> {
    config.space(name).ok_or_else(|| {
        ClientError::new(
            Status::UnknownSpace,
            format!("space {name:?} does not exist"),
        )
    })
}

/// The key converted to the key attribute's type, or WRONGTYPE.
pub(crate) fn key(desc: &SpaceDesc, key: Value) -> Result<Value, ClientError> {
    let attr = desc.key();
    coerce_value(attr.dtype, key).map_err(|e| {
        ClientError::new(
            Status::WrongType,
            format!("key of space {:?} ({}): {e}", desc.name, attr.dtype),
        )
    })
}

/// The index of the attribute with this name, or UNKNOWNATTR.
pub(crate) fn attr(desc: &SpaceDesc, name: &str) -> Result<usize, ClientError> {
    desc.attr_index(name)
        .ok_or_else(|| unknown_attr(desc, name))
}

/// UNKNOWNATTR: `name` addresses no attribute of the space.
pub(crate) fn unknown_attr(desc: &SpaceDesc, name: &str) -> ClientError {
    ClientError::new(
        Status::UnknownAttr,
        format!("space {:?} has no attribute {name:?}", desc.name),
    )
}

/// The attribute a sorted search orders by: it must be a string, number or
/// timestamp (WRONGTYPE otherwise).
pub(crate) fn sort_attr(desc: &SpaceDesc, name: &str) -> Result<usize, ClientError> {
    let index = attr(desc, name)?;
    let dtype = desc.attrs[index].dtype;
    if dtype.is_hashable() {
        Ok(index)
    } else {
        Err(ClientError::new(
            Status::WrongType,
            format!("cannot sort by {name:?} of type {dtype}"),
        ))
    }
}

/// A WRONGTYPE error with this message.
pub(crate) fn wrong_type(message: String) -> ClientError {
    ClientError::new(Status::WrongType, message)
}

/// The attribute (and document path) a name addresses. `doc.a.b` and
/// `doc[3]` address inside the document attribute `doc`.
pub(crate) fn target(desc: &SpaceDesc, name: &str) -> Result<(usize, Option<String>), ClientError> {
    if let Some(index) = desc.attr_index(name) {
        return Ok((index, None));
    }
    let Some((attr, path)) = split_attr_path(name) else {
        return Err(unknown_attr(desc, name));
    };
    let index = desc
        .attr_index(attr)
        .ok_or_else(|| unknown_attr(desc, name))?;
    let dtype = desc.attrs[index].dtype;
    if dtype != DataType::Document {
        return Err(wrong_type(format!(
            "{name:?} addresses inside {attr:?}, which is a {dtype}, not a document"
        )));
    }
    parse_doc_path(path).map_err(|e| wrong_type(format!("{name:?}: {e}")))?;
    Ok((index, Some(path.to_string())))
}

/// One validated check per predicate; several predicates may name the same
/// attribute (they all must hold, e.g. a range as `Ge` and `Lt`).
pub(crate) fn checks<K: AsRef<str>>(
    desc: &SpaceDesc,
    predicates: impl IntoIterator<Item = (K, PredOp)>,
) -> Result<Vec<Check>, ClientError> {
    let mut out = Vec::new();
    for (name, op) in predicates {
        let name = name.as_ref();
        let (index, path) = target(desc, name)?;
        let check = Check {
            attr: index,
            op,
            path,
        };
        validate_check(desc, &check).map_err(|e| {
            let dtype = desc.attrs[check.attr].dtype;
            ClientError::new(
                Status::WrongType,
                format!("predicate on {name:?} ({dtype}): {e}"),
            )
        })?;
        out.push(check);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `space t key int k attributes string s, int n, float f, list(int) l`
    fn desc() -> SpaceDesc {
        tessera_types::parse::parse_space("space t key int k attributes string s, int n, float f, list(int) l subspace n create 4 partitions").expect("a valid description")
    }

    #[test]
    fn key_takes_the_key_type() {
        let desc = desc();
        assert_eq!(key(&desc, Value::Int(42)).unwrap(), Value::Int(42));
        assert_eq!(
            key(&desc, Value::str("42")).unwrap_err().status(),
            Status::WrongType
        );
    }

    #[test]
    fn checks_resolve_and_validate() {
        let desc = desc();
        let c = checks(
            &desc,
            [
                ("n", PredOp::Ge(Value::Int(1))),
                ("n", PredOp::Lt(Value::Int(9))),
            ],
        )
        .unwrap();
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|c| c.attr == 2));
        // The key may be searched.
        assert!(checks(&desc, [("k", PredOp::Eq(Value::Int(1)))]).is_ok());
        let status = |r: Result<Vec<Check>, ClientError>| r.unwrap_err().status();
        assert_eq!(
            status(checks(&desc, [("nope", PredOp::Eq(Value::Int(1)))])),
            Status::UnknownAttr
        );
        // Predicates do not mix numbers (API.md §6.2).
        assert_eq!(
            status(checks(&desc, [("f", PredOp::Eq(Value::Int(1)))])),
            Status::WrongType
        );
        assert_eq!(
            status(checks(&desc, [("n", PredOp::Regex("^a".into()))])),
            Status::WrongType
        );
        assert_eq!(
            status(checks(&desc, [("l", PredOp::Lt(Value::Int(1)))])),
            Status::WrongType
        );
        assert!(checks(&desc, [("l", PredOp::Contains(Value::Int(1)))]).is_ok());
        assert!(checks(&desc, [("s", PredOp::Regex("^a".into()))]).is_ok());
    }

    #[test]
    fn unknown_space_is_reported() {
        let config = Configuration::default();
        assert_eq!(
            space(&config, "t").unwrap_err().status(),
            Status::UnknownSpace
        );
    }
}
