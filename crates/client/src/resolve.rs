//! Turning what a user names into what the wire carries: space and
//! attribute names into indexes, values into the attribute's type, and
//! predicates into validated [`Check`]s. Pure functions, no I/O: every error
//! here is raised before anything is sent (API.md §3.2).

use crate::error::ClientError;
use tessera_protocol::Status;
#[cfg(test)]
use tessera_protocol::{Action, Mutation};
use tessera_types::predicate::{coerce_value, validate_check};
use tessera_types::{Check, Configuration, PredOp, Space, SpaceDesc, Value};

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

/// One `Set` mutation per named attribute (the resolution of a `put`).
/// Writing the key is DONTUSEKEY, naming an attribute twice is DUPEATTR, a
/// value of the wrong type is WRONGTYPE.
#[cfg(test)]
pub(crate) fn mutations<K: AsRef<str>>(
    desc: &SpaceDesc,
    attrs: impl IntoIterator<Item = (K, Value)>,
) -> Result<Vec<Mutation>, ClientError> {
    let ops: Vec<(String, crate::ops::Op)> = attrs
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_string(), crate::ops::Op::Put(v)))
        .collect();
    crate::ops::mutations(desc, &ops, true)
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
        let (index, path) = crate::ops::target(desc, name)?;
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
    fn mutations_resolve_names_to_indexes() {
        let desc = desc();
        let m = mutations(&desc, [("n", Value::Int(3)), ("s", Value::str("x"))]).unwrap();
        assert_eq!(
            m,
            vec![
                Mutation::new(2, Action::Set(Value::Int(3))),
                Mutation::new(1, Action::Set(Value::str("x"))),
            ]
        );
    }

    #[test]
    fn mutations_refuse_key_unknown_duplicate_and_wrong_type() {
        let desc = desc();
        let status = |r: Result<Vec<Mutation>, ClientError>| r.unwrap_err().status();
        assert_eq!(
            status(mutations(&desc, [("k", Value::Int(1))])),
            Status::DontUseKey
        );
        assert_eq!(
            status(mutations(&desc, [("zz", Value::Int(1))])),
            Status::UnknownAttr
        );
        assert_eq!(
            status(mutations(
                &desc,
                [("n", Value::Int(1)), ("n", Value::Int(2))]
            )),
            Status::DupeAttr
        );
        assert_eq!(
            status(mutations(&desc, [("n", Value::str("x"))])),
            Status::WrongType
        );
        assert_eq!(
            status(mutations(&desc, [("l", Value::str("x"))])),
            Status::WrongType
        );
        // A heterogeneous container, refused before sending.
        assert_eq!(
            status(mutations(
                &desc,
                [("l", Value::List(vec![Value::Int(1), Value::str("x")]))]
            )),
            Status::WrongType
        );
    }

    #[test]
    fn numbers_mix_on_put() {
        // API.md §2.2: an int attribute takes a float (rounded), a float
        // attribute takes an int.
        let desc = desc();
        let m = mutations(&desc, [("n", Value::Float(3.7)), ("f", Value::Int(2))]).unwrap();
        assert_eq!(m[0].action, Action::Set(Value::Int(4)));
        assert_eq!(m[1].action, Action::Set(Value::Float(2.0)));
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
