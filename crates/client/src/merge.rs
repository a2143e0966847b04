//! Merging the answers of a search's regions into one result.
//!
//! A search asks one replica of each planned region. The same key can come
//! back from two regions when an update relocated its object while the
//! search ran (the new region's copy commits before the old one is removed),
//! so results are de-duplicated by key and the highest version wins: each
//! key appears at most once (DESIGN.md "Search").

use std::cmp::Ordering;
use std::collections::BTreeMap;
use tessera_protocol::SortBy;
use tessera_types::coordinate::key_bytes;
use tessera_types::{Object, Value, Version};

/// Accumulates objects from any number of regions, one per key.
#[derive(Debug, Default)]
pub(crate) struct SearchMerge {
    /// Keyed by `key_bytes(key)`, so the default order is the key order.
    by_key: BTreeMap<Vec<u8>, (Version, Object)>,
}

impl SearchMerge {
    /// Adds one object; an older version of a key already held is replaced,
    /// a newer one is kept.
    pub(crate) fn add(&mut self, version: Version, object: Object) {
        let key = key_bytes(object.key());
        match self.by_key.get(&key) {
            Some((held, _)) if *held >= version => {}
            _ => {
                self.by_key.insert(key, (version, object));
            }
        }
    }

    /// The number of distinct keys held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The merged objects: in `sort` order when given (ties by key), else in
    /// key order; at most `limit` of them.
    pub(crate) fn finish(self, sort: Option<SortBy>, limit: Option<u64>) -> Vec<(Version, Object)> {
        let mut out: Vec<(Version, Object)> = self.by_key.into_values().collect();
        if let Some(sort) = sort {
            // A stable sort keeps key order among equal sort values.
            out.sort_by(|(_, a), (_, b)| {
                let order = compare_values(&a.values[sort.attr], &b.values[sort.attr]);
                if sort.descending {
                    order.reverse()
                } else {
                    order
                }
            });
        }
        if let Some(limit) = limit {
            out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        out
    }
}

/// The order a sorted search uses: numbers numerically (floats in IEEE
/// total order), strings bytewise. Values of different kinds (which one
/// attribute never holds) order by kind so the order stays total.
pub(crate) fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Document(x), Value::Document(y)) => x.cmp(y),
        _ => key_bytes(a).cmp(&key_bytes(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: i64, n: i64) -> Object {
        Object {
            values: vec![Value::Int(key), Value::Int(n)],
        }
    }

    #[test]
    fn each_key_once_with_the_highest_version() {
        let mut merge = SearchMerge::default();
        merge.add(Version(2), object(1, 20));
        merge.add(Version(1), object(1, 10)); // older copy from the old region
        merge.add(Version(3), object(2, 30));
        merge.add(Version(4), object(2, 40)); // newer copy from the new region
        merge.add(Version(1), object(3, 5));
        assert_eq!(merge.len(), 3);
        let out = merge.finish(None, None);
        assert_eq!(
            out,
            vec![
                (Version(2), object(1, 20)),
                (Version(4), object(2, 40)),
                (Version(1), object(3, 5))
            ]
        );
    }

    #[test]
    fn default_order_is_key_order_even_for_negative_ints() {
        let mut merge = SearchMerge::default();
        for k in [5, -3, 0, 100, -100] {
            merge.add(Version(1), object(k, 0));
        }
        let keys: Vec<i64> = merge
            .finish(None, None)
            .into_iter()
            .map(|(_, o)| match o.values[0] {
                Value::Int(i) => i,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(keys, vec![-100, -3, 0, 5, 100]);
    }

    #[test]
    fn sort_and_limit_apply_after_deduplication() {
        let mut merge = SearchMerge::default();
        merge.add(Version(1), object(1, 7));
        merge.add(Version(1), object(2, 9));
        merge.add(Version(1), object(3, 8));
        merge.add(Version(2), object(1, 1)); // key 1 now has n = 1
        let sort = SortBy {
            attr: 1,
            descending: true,
        };
        let out = merge.finish(Some(sort), Some(2));
        assert_eq!(
            out,
            vec![(Version(1), object(2, 9)), (Version(1), object(3, 8))]
        );
    }

    #[test]
    fn floats_sort_in_total_order() {
        assert_eq!(
            compare_values(&Value::Float(-1.0), &Value::Float(2.5)),
            Ordering::Less
        );
        assert_eq!(
            compare_values(&Value::str("b"), &Value::str("ab")),
            Ordering::Greater
        );
    }
}
