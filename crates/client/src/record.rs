//! [`Record`], an object as the client returns it.

use tessera_types::{Object, SpaceDesc, Value, Version};

/// An object as the client returns it: attribute names with their values,
/// in schema order, and the version the point leader gave it.
///
/// `get` leaves the key out (as HyperDex's `get` does); `search` and
/// `sorted_search` put the key attribute first.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub version: Version,
    pub attrs: Vec<(String, Value)>,
}

impl Record {
    /// The value of the attribute with this name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub(crate) fn from_object(
        desc: &SpaceDesc,
        version: Version,
        object: Object,
        with_key: bool,
    ) -> Record {
        let skip = if with_key { 0 } else { 1 };
        let attrs = desc
            .attrs
            .iter()
            .zip(object.values)
            .skip(skip)
            .map(|(a, v)| (a.name.clone(), v))
            .collect();
        Record { version, attrs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_name_their_attributes() {
        let desc = SpaceDesc {
            name: "t".into(),
            attrs: vec![
                tessera_types::Attribute {
                    name: "k".into(),
                    dtype: tessera_types::DataType::Int,
                },
                tessera_types::Attribute {
                    name: "v".into(),
                    dtype: tessera_types::DataType::String,
                },
            ],
            subspaces: vec![],
            indexes: vec![],
            fault_tolerance: 0,
            partitions: 1,
            authorization: false,
            global_indexes: Vec::new(),
            replex: None,
        };
        let object = Object {
            values: vec![Value::Int(1), Value::str("x")],
        };
        let without_key = Record::from_object(&desc, Version(3), object.clone(), false);
        assert_eq!(without_key.attrs, vec![("v".to_string(), Value::str("x"))]);
        assert_eq!(without_key.get("k"), None);
        let with_key = Record::from_object(&desc, Version(3), object, true);
        assert_eq!(with_key.get("k"), Some(&Value::Int(1)));
        assert_eq!(with_key.version, Version(3));
    }
}
