//! [`Record`], an object as the client returns it, and [`RawRecord`], one
//! not decoded yet.

use crate::error::ClientError;
use std::sync::Arc;
use tessera_protocol::{ObjectBytes, Status};
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

/// An object of a search as the daemon sent it: its bytes, checked to be
/// one well-formed object with one value per attribute, decoded only
/// where asked ([`RawRecord::get`] decodes one attribute,
/// [`RawRecord::to_record`] all of them). A search that reads a few
/// attributes of each object, or only counts them, skips decoding the
/// rest; [`crate::SearchStream::next_raw`] yields these.
///
/// The bytes are not copied out of the page they arrived in: a raw record
/// keeps that page's buffer alive (a daemon cuts pages at about 256 KB)
/// until it is dropped. To keep a few objects of many pages
/// for long, keep their [`RawRecord::to_record`]s instead.
#[derive(Clone, Debug)]
pub struct RawRecord {
    version: Version,
    desc: Arc<SpaceDesc>,
    object: ObjectBytes,
}

impl RawRecord {
    pub(crate) fn new(desc: Arc<SpaceDesc>, version: Version, object: ObjectBytes) -> RawRecord {
        RawRecord {
            version,
            desc,
            object,
        }
    }

    /// The version the point leader gave the object.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The value of the attribute with this name, decoding that value
    /// only; `None` when the space has no such attribute.
    pub fn get(&self, name: &str) -> Result<Option<Value>, ClientError> {
        let Some(attr) = self.desc.attrs.iter().position(|a| a.name == name) else {
            return Ok(None);
        };
        self.object
            .view()
            .and_then(|view| view.value(attr))
            .map_err(malformed)
    }

    /// The key attribute's value.
    pub fn key(&self) -> Result<Value, ClientError> {
        self.object
            .view()
            .and_then(|view| view.value(0))
            .map_err(malformed)?
            .ok_or_else(|| malformed("the object has no values"))
    }

    /// The whole object as a [`Record`], key attribute first.
    pub fn to_record(&self) -> Result<Record, ClientError> {
        let object = self.object.decode().map_err(malformed)?;
        Ok(Record::from_object(&self.desc, self.version, object, true))
    }
}

/// The error for an object a daemon sent that does not decode.
pub(crate) fn malformed(e: impl std::fmt::Display) -> ClientError {
    ClientError::new(
        Status::ServerError,
        format!("a daemon returned a malformed object: {e}"),
    )
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
