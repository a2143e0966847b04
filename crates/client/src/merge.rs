//! Merging the pages of a search's regions into one stream, each key once.
//!
//! A search asks one replica of each planned region for pages, each region
//! in its own order: key order (`key_bytes`), or a sorted search's order
//! ([`SortBy::compare`]). [`Merge`] holds the unconsumed part of one page
//! per region (a *lane*) and yields the smallest head of all lanes, so the
//! stream comes out in the same order and the client never holds more than
//! about one page per region.
//!
//! The same key can come from two regions when an update relocated its
//! object while the search ran (the new region's copy commits before the
//! old one is removed). In key order both copies reach the heads of their
//! lanes together: a lane yields keys in increasing order and a key is
//! yielded only when every lane's head is known, so the copies are merged
//! then and the highest version wins. In a sorted search the copies may sit
//! far apart (the sort value may have changed too), so the merge remembers
//! the keys it yielded — at most `limit` of them — and drops later copies.
//!
//! This module does no I/O: the caller feeds pages in and asks for items
//! (`stream.rs` does the fetching).

use std::cmp::Ordering;
use std::collections::{HashSet, VecDeque};
use tessera_protocol::{SearchAfter, SortBy};
use tessera_types::{Value, Version};

/// One object (or key) of a page, with the position that orders it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Item<T> {
    /// `key_bytes` of the object's key.
    pub(crate) key: Vec<u8>,
    /// The sort attribute's value in a sorted search.
    pub(crate) sort_value: Option<Value>,
    pub(crate) version: Version,
    pub(crate) payload: T,
}

impl<T> Item<T> {
    /// Where a region's next page starts when this was the last item.
    pub(crate) fn after(&self) -> SearchAfter {
        SearchAfter {
            key: self.key.clone(),
            sort_value: self.sort_value.clone(),
        }
    }
}

/// What [`Merge::pop`] has to say.
#[derive(Debug, PartialEq)]
pub(crate) enum Pop<T> {
    /// The next item of the stream.
    Item(Item<T>),
    /// The next item cannot be known before this lane's next page arrives.
    Wait(usize),
    /// The stream is complete.
    Done,
}

#[derive(Debug)]
struct Lane<T> {
    buffer: VecDeque<Item<T>>,
    /// The region may have more after the last page.
    more: bool,
    /// Items received from the region so far.
    received: u64,
}

/// The pure merge of a search's lanes.
#[derive(Debug)]
pub(crate) struct Merge<T> {
    sort: Option<SortBy>,
    lanes: Vec<Lane<T>>,
    /// Items a region contributes at most (a sorted search's `limit`: each
    /// region returns its best `limit`).
    lane_limit: Option<u64>,
    /// Items the stream may still yield.
    remaining: Option<u64>,
    /// Sorted order: the keys yielded so far.
    seen: HashSet<Vec<u8>>,
    /// Key order: the last key yielded.
    last_key: Option<Vec<u8>>,
    /// The lanes are a lookup's indexlets in the stream's order: every
    /// item of a lane comes before every item of the next, so only the
    /// first lane not yet exhausted is read, and a limit stops the reads
    /// as soon as enough items came.
    sequential: bool,
}

impl<T> Merge<T> {
    /// A merge of `lanes` regions, none of which has answered yet. With a
    /// `sort`, `limit` bounds both each region's contribution and the
    /// stream; without, it bounds the stream.
    pub(crate) fn new(lanes: usize, sort: Option<SortBy>, limit: Option<u64>) -> Merge<T> {
        Merge {
            sort,
            lanes: (0..lanes)
                .map(|_| Lane {
                    buffer: VecDeque::new(),
                    more: true,
                    received: 0,
                })
                .collect(),
            lane_limit: if sort.is_some() { limit } else { None },
            remaining: limit,
            seen: HashSet::new(),
            last_key: None,
            sequential: false,
        }
    }

    /// The same merge over sequential lanes (see the field).
    pub(crate) fn sequential(mut self, sequential: bool) -> Merge<T> {
        self.sequential = sequential;
        self
    }

    /// The lanes a sequential merge reads now: those up to the first one
    /// not exhausted; every lane otherwise.
    fn open_lanes(&self) -> usize {
        if !self.sequential {
            return self.lanes.len();
        }
        self.lanes
            .iter()
            .position(|l| !l.buffer.is_empty() || l.more)
            .map_or(self.lanes.len(), |i| i + 1)
    }

    /// Continues with `lanes` new regions in place of the old ones (a
    /// search re-planned after its subspace was dropped; every new lane
    /// starts after the last item yielded). What was yielded is kept: the
    /// limit still left, the last key, and the keys a sorted search has
    /// yielded, so nothing comes twice.
    pub(crate) fn restart(&mut self, lanes: usize, sequential: bool) {
        self.sequential = sequential;
        self.lanes = (0..lanes)
            .map(|_| Lane {
                buffer: VecDeque::new(),
                more: true,
                received: 0,
            })
            .collect();
        if self.sort.is_some() {
            self.lane_limit = self.remaining;
        }
    }

    /// Items the stream may still yield (`None`: no limit).
    pub(crate) fn limit_left(&self) -> Option<u64> {
        self.remaining
    }

    /// Whether `lane` should be asked for another page, and for at most how
    /// many items (`None`: no bound but the daemon's).
    pub(crate) fn wants(&self, lane: usize) -> Option<Option<u64>> {
        let l = &self.lanes[lane];
        if !l.more || self.remaining == Some(0) || lane >= self.open_lanes() {
            return None;
        }
        if self.sequential {
            return Some(self.remaining);
        }
        match self.lane_limit {
            None => Some(None),
            Some(limit) if l.received < limit => Some(Some(limit - l.received)),
            Some(_) => None,
        }
    }

    /// Adds a page of `lane`, in the lane's order; `more` when the region
    /// may have more after it.
    pub(crate) fn push_page(&mut self, lane: usize, items: Vec<Item<T>>, more: bool) {
        let l = &mut self.lanes[lane];
        l.received += items.len() as u64;
        l.more = more;
        l.buffer.extend(items);
    }

    /// The next item of the stream, or which lane to wait for, or done.
    pub(crate) fn pop(&mut self) -> Pop<T> {
        loop {
            if self.remaining == Some(0) {
                return Pop::Done;
            }
            let mut best: Option<usize> = None;
            for i in 0..self.open_lanes() {
                let Some(head) = self.lanes[i].buffer.front() else {
                    if self.wants(i).is_some() {
                        return Pop::Wait(i);
                    }
                    continue;
                };
                let better = match best {
                    None => true,
                    Some(b) => {
                        let held = self.lanes[b].buffer.front().expect("best lane has a head");
                        self.order(head, held) == Ordering::Less
                    }
                };
                if better {
                    best = Some(i);
                }
            }
            let Some(best) = best else {
                return Pop::Done;
            };
            let mut item = self.lanes[best].buffer.pop_front().expect("head");
            match self.sort {
                None => {
                    // Every other copy of this key is at the head of its lane.
                    for lane in &mut self.lanes {
                        if lane.buffer.front().is_some_and(|h| h.key == item.key) {
                            let copy = lane.buffer.pop_front().expect("head");
                            if copy.version > item.version {
                                item = copy;
                            }
                        }
                    }
                    if self.last_key.as_ref() == Some(&item.key) {
                        continue;
                    }
                    self.last_key = Some(item.key.clone());
                }
                Some(_) => {
                    if !self.seen.insert(item.key.clone()) {
                        continue;
                    }
                }
            }
            if let Some(r) = &mut self.remaining {
                *r -= 1;
            }
            return Pop::Item(item);
        }
    }

    fn order(&self, a: &Item<T>, b: &Item<T>) -> Ordering {
        match (self.sort, &a.sort_value, &b.sort_value) {
            (Some(sort), Some(x), Some(y)) => sort.compare((x, &a.key), (y, &b.key)),
            _ => a.key.cmp(&b.key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use tessera_types::coordinate::key_bytes;

    fn item(key: i64, n: i64, version: u64) -> Item<i64> {
        Item {
            key: key_bytes(&Value::Int(key)),
            sort_value: Some(Value::Int(n)),
            version: Version(version),
            payload: key,
        }
    }

    fn key_item(key: i64, version: u64) -> Item<i64> {
        Item {
            sort_value: None,
            ..item(key, 0, version)
        }
    }

    /// Drains the merge, feeding each lane its pages (of `page` items) on
    /// demand.
    fn drain(
        mut merge: Merge<i64>,
        mut lanes: Vec<Vec<Item<i64>>>,
        page: usize,
    ) -> Vec<(i64, u64)> {
        let mut out = Vec::new();
        loop {
            match merge.pop() {
                Pop::Item(i) => out.push((i.payload, i.version.0)),
                Pop::Done => return out,
                Pop::Wait(lane) => {
                    let bound = merge.wants(lane).expect("waits only for a lane it wants");
                    let n = page.min(bound.map_or(usize::MAX, |b| b as usize));
                    let at = n.min(lanes[lane].len());
                    let rest = lanes[lane].split_off(at);
                    let taken = std::mem::replace(&mut lanes[lane], rest);
                    let more = !lanes[lane].is_empty();
                    merge.push_page(lane, taken, more);
                }
            }
        }
    }

    #[test]
    fn key_order_keeps_each_key_once_with_the_highest_version() {
        let lanes = vec![
            vec![key_item(1, 2), key_item(4, 1), key_item(7, 1)],
            vec![key_item(1, 1), key_item(2, 5), key_item(7, 3)],
            vec![key_item(-5, 1), key_item(2, 4)],
        ];
        let out = drain(Merge::new(3, None, None), lanes, 1);
        assert_eq!(out, vec![(-5, 1), (1, 2), (2, 5), (4, 1), (7, 3)]);
    }

    #[test]
    fn a_restart_continues_with_new_lanes_and_keeps_the_limit_and_what_was_yielded() {
        // A sorted search (limit 3) yields its best item, then its
        // subspace is dropped: the new lanes (another subspace) start
        // after that item; key 1 relocated and comes again, and is dropped.
        let sort = SortBy {
            attr: 1,
            descending: true,
        };
        let mut merge = Merge::new(1, Some(sort), Some(3));
        merge.push_page(0, vec![item(1, 90, 1), item(3, 50, 1)], true);
        let Pop::Item(first) = merge.pop() else {
            panic!("an item")
        };
        assert_eq!(first.payload, 1);
        merge.restart(2, false);
        assert_eq!(merge.wants(0), Some(Some(2)), "the limit left, per lane");
        let lanes = vec![
            vec![item(1, 80, 2), item(3, 50, 1)],
            vec![item(4, 60, 1), item(5, 5, 1)],
        ];
        // Best first: 4 (n 60), then 3 (n 50); 1 was yielded already.
        assert_eq!(drain(merge, lanes, 1), vec![(4, 1), (3, 1)]);
    }

    #[test]
    fn sequential_lanes_are_read_one_after_the_other_and_stop_at_the_limit() {
        let sort = SortBy {
            attr: 1,
            descending: false,
        };
        let mut merge = Merge::new(3, Some(sort), Some(3)).sequential(true);
        // Only the first lane is asked, for the whole limit.
        assert_eq!(merge.wants(0), Some(Some(3)));
        assert_eq!(merge.wants(1), None);
        assert_eq!(merge.pop(), Pop::Wait(0));
        // An empty page with more to come (every entry filtered out)
        // keeps the lane open.
        merge.push_page(0, vec![], true);
        assert_eq!(merge.pop(), Pop::Wait(0));
        merge.push_page(0, vec![item(1, 10, 1)], false);
        let Pop::Item(first) = merge.pop() else {
            panic!("an item")
        };
        assert_eq!(first.payload, 1);
        // Lane 0 is exhausted: lane 1 opens, asked for what the limit left.
        assert_eq!(merge.pop(), Pop::Wait(1));
        assert_eq!(merge.wants(1), Some(Some(2)));
        assert_eq!(merge.wants(2), None);
        merge.push_page(1, vec![item(2, 20, 1), item(3, 30, 1)], true);
        let rest: Vec<i64> = std::iter::from_fn(|| match merge.pop() {
            Pop::Item(i) => Some(i.payload),
            _ => None,
        })
        .collect();
        assert_eq!(rest, vec![2, 3]);
        // The limit is reached: lane 2 is never asked.
        assert_eq!(merge.pop(), Pop::Done);
        assert_eq!(merge.wants(2), None);
    }

    #[test]
    fn nothing_is_yielded_before_every_lane_has_answered() {
        let mut merge = Merge::new(2, None, None);
        merge.push_page(0, vec![key_item(1, 1)], false);
        assert_eq!(merge.pop(), Pop::Wait(1));
        merge.push_page(1, vec![], false);
        assert!(merge.pop().is_item());
        assert_eq!(merge.pop(), Pop::Done);
    }

    #[test]
    fn sorted_order_merges_each_regions_best_and_drops_later_copies() {
        let sort = SortBy {
            attr: 1,
            descending: true,
        };
        // Each lane in descending n; key 3 relocated with a new n.
        let lanes = vec![
            vec![item(1, 90, 1), item(3, 50, 1), item(2, 10, 1)],
            vec![item(3, 70, 2), item(4, 60, 1), item(5, 5, 1)],
        ];
        let out = drain(Merge::new(2, Some(sort), Some(3)), lanes, 2);
        assert_eq!(out, vec![(1, 1), (3, 2), (4, 1)]);
    }

    #[test]
    fn a_sorted_lane_is_asked_for_no_more_than_the_limit() {
        let sort = SortBy {
            attr: 1,
            descending: false,
        };
        let mut merge: Merge<i64> = Merge::new(1, Some(sort), Some(5));
        assert_eq!(merge.wants(0), Some(Some(5)));
        merge.push_page(0, vec![item(1, 1, 1), item(2, 2, 1)], true);
        assert_eq!(merge.wants(0), Some(Some(3)));
        merge.push_page(0, vec![item(3, 3, 1), item(4, 4, 1), item(5, 5, 1)], true);
        assert_eq!(merge.wants(0), None);
    }

    impl<T> Pop<T> {
        fn is_item(&self) -> bool {
            matches!(self, Pop::Item(_))
        }
    }

    proptest! {
        /// Random regions holding random keys (a key in several regions
        /// with different versions, as during relocations), random page
        /// sizes: the stream is every key once, in key order, each with its
        /// highest version — the brute-force answer.
        #[test]
        fn key_order_merge_matches_a_model(
            copies in proptest::collection::vec((0usize..4, -20i64..20, 1u64..5), 0..60),
            page in 1usize..5,
        ) {
            let mut lanes: Vec<BTreeMap<Vec<u8>, (i64, u64)>> = vec![BTreeMap::new(); 4];
            let mut model: BTreeMap<Vec<u8>, (i64, u64)> = BTreeMap::new();
            for &(lane, key, version) in &copies {
                let kb = key_bytes(&Value::Int(key));
                lanes[lane].insert(kb.clone(), (key, version));
            }
            for lane in &lanes {
                for (kb, &(key, version)) in lane {
                    let e = model.entry(kb.clone()).or_insert((key, version));
                    if version > e.1 {
                        *e = (key, version);
                    }
                }
            }
            let lanes: Vec<Vec<Item<i64>>> = lanes
                .into_iter()
                .map(|l| l.into_values().map(|(k, v)| key_item(k, v)).collect())
                .collect();
            let out = drain(Merge::new(4, None, None), lanes, page);
            let want: Vec<(i64, u64)> = model.into_values().collect();
            prop_assert_eq!(out, want);
        }

        /// Sorted merges against sorting every distinct object: with a
        /// limit, the best `limit` objects in order (objects here never
        /// appear twice, so the answer is unique).
        #[test]
        fn sorted_merge_matches_a_model(
            objects in proptest::collection::btree_map(-30i64..30, (0usize..3, -5i64..5), 0..40),
            limit in 1u64..15,
            descending in any::<bool>(),
            page in 1usize..4,
        ) {
            let sort = SortBy { attr: 1, descending };
            let mut lanes: Vec<Vec<Item<i64>>> = vec![Vec::new(); 3];
            let mut all: Vec<Item<i64>> = Vec::new();
            for (&key, &(lane, n)) in &objects {
                lanes[lane].push(item(key, n, 1));
                all.push(item(key, n, 1));
            }
            let by = |a: &Item<i64>, b: &Item<i64>| {
                sort.compare(
                    (a.sort_value.as_ref().unwrap(), &a.key),
                    (b.sort_value.as_ref().unwrap(), &b.key),
                )
            };
            for lane in &mut lanes {
                lane.sort_by(by);
                lane.truncate(limit as usize); // each region's best `limit`
            }
            all.sort_by(by);
            all.truncate(limit as usize);
            let want: Vec<(i64, u64)> = all.into_iter().map(|i| (i.payload, 1)).collect();
            let out = drain(Merge::new(3, Some(sort), Some(limit)), lanes, page);
            prop_assert_eq!(out, want);
        }
    }
}
