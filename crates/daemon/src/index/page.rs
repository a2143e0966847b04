//! Page readers: one page of a region's matches, in key order or in a
//! sorted search's order, read through an index or by a scan.

use super::access::{Access, Walk};
use super::entry::{entry, entry_bounds, entry_parts};
use super::slot::Slot;
use crate::record::{DecodeRecordError, ReadRecordError, Record};
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use tessera_protocol::{DecodeObjectError, ObjectBytes, ObjectView, SortBy};
use tessera_storage::{Engine, IndexRange};
use tessera_types::coordinate::coordinate;
use tessera_types::{Check, RegionId, Value, Version};

/// One object a search found.
#[derive(Clone, Debug)]
pub struct Match {
    /// Its storage key (`key_bytes` of the key).
    pub key: Vec<u8>,
    pub version: Version,
    /// The object as stored, cut out of its record without decoding it.
    pub object: ObjectBytes,
    /// In a sorted search, the object's value of the sort attribute (the
    /// only attribute decoded besides the checked ones); `None` in key
    /// order, or when the object has no such attribute.
    pub sort_value: Option<Value>,
    /// The size of its stored record.
    pub bytes: usize,
}

/// Why a page of a search could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadPageError {
    /// The engine failed, or a record's header is not a record's.
    #[error(transparent)]
    Record(#[from] ReadRecordError),
    /// A record's object is not a well-formed object.
    #[error("corrupt object in a stored record: {0}")]
    Object(#[from] DecodeObjectError),
}

impl From<tessera_storage::StorageError> for ReadPageError {
    fn from(e: tessera_storage::StorageError) -> ReadPageError {
        ReadPageError::Record(e.into())
    }
}

/// A stored record read as far as a search needs: its version and, unless
/// it is a tombstone, its object delimited but not decoded. This follows
/// [`crate::record::Record`]'s postcard layout — the version, the object as
/// an option (a 0 or 1 byte, then the object), then the recent writers,
/// which a search never reads; `stored_records_split_as_they_decode`
/// checks the two agree.
pub fn stored_object(bytes: &[u8]) -> Result<(Version, Option<ObjectView<'_>>), ReadPageError> {
    match Record::split(bytes) {
        Ok((version, object, _)) => Ok((version, object)),
        Err(DecodeRecordError::Object(e)) => Err(ReadPageError::Object(e)),
        Err(e) => Err(ReadRecordError::Decode(e).into()),
    }
}

/// What a page reader decodes of each record: the attributes `checks`
/// read, and the sort attribute `sort` of a sorted search; and what else
/// a match must pass (`keep`), tested after the checks.
#[derive(Clone, Copy)]
struct Filter<'a> {
    checks: &'a [Check],
    sort: Option<usize>,
    keep: Option<Keep<'a>>,
}

/// A test a match must pass beside the checks, on the object as stored
/// (a read standing in for a failed region of a replex space keeps that
/// region's objects alone: `search::search`). A page filled by the
/// readers holds only matches that pass it, so a sorted page is one scan
/// however few pass.
pub type Keep<'a> = &'a dyn Fn(&ObjectView<'_>) -> bool;

/// The match the record `bytes` stored under `key` makes, if it holds an
/// object that passes `filter`'s checks and, read through an index entry
/// (`entry`: its slot and coordinate), still has the entry's coordinate —
/// so a stale entry is ignored and no object is found twice. Only the
/// attributes the checks, the entry and the sort read are decoded.
fn read_match(
    key: &[u8],
    bytes: &[u8],
    filter: Filter<'_>,
    entry: Option<(&Slot, u64)>,
) -> Result<Option<Match>, ReadPageError> {
    let (version, Some(view)) = stored_object(bytes)? else {
        return Ok(None);
    };
    if let Some((slot, coord)) = entry {
        let value = view.value(slot.attr())?;
        if value.and_then(|v| slot.value_coordinate(&v)) != Some(coord) {
            return Ok(None);
        }
    }
    if !view.matches(filter.checks)? || filter.keep.is_some_and(|keep| !keep(&view)) {
        return Ok(None);
    }
    let sort_value = match filter.sort {
        Some(attr) => view.value(attr)?,
        None => None,
    };
    Ok(Some(Match {
        key: key.to_vec(),
        version,
        object: ObjectBytes::from_view(view),
        sort_value,
        bytes: bytes.len(),
    }))
}

/// What an index walk does with an entry before loading its object.
enum Step {
    /// Load the object and, if it matches, hand it on.
    Load,
    /// Pass over it.
    Skip,
    /// End the walk.
    Stop,
}

/// The match the object stored under `key` makes ([`read_match`]: it
/// exists, passes `filter` and, read through an index `entry`, still has
/// the entry's coordinate), read in place: only the match's object is
/// copied out of the engine. Without an entry: a read by key.
fn read_key(
    engine: &dyn Engine,
    region: RegionId,
    key: &[u8],
    filter: Filter<'_>,
    entry: Option<(&Slot, u64)>,
) -> Result<Option<Match>, ReadPageError> {
    let mut found = Ok(None);
    engine.read(region, key, &mut |bytes| {
        if let Some(bytes) = bytes {
            found = read_match(key, bytes, filter, entry);
        }
    })?;
    found
}

/// The index entries a walk reads: those of `slot` with a coordinate in
/// `interval`, from `start` instead of the interval's first entry when
/// given, largest first when `reverse`.
struct Entries<'a> {
    slot: &'a Slot,
    interval: (u64, u64),
    start: Option<Vec<u8>>,
    reverse: bool,
}

impl Entries<'_> {
    /// Every entry of `slot` in `interval`, smallest first.
    fn of(slot: &Slot, interval: (u64, u64)) -> Entries<'_> {
        Entries {
            slot,
            interval,
            start: None,
            reverse: false,
        }
    }
}

/// Walks `entries`; `step(coordinate, key)` decides per entry, `found` gets
/// each match and returns whether to go on.
fn walk_index(
    engine: &dyn Engine,
    region: RegionId,
    entries: Entries<'_>,
    filter: Filter<'_>,
    step: &mut dyn FnMut(u64, &[u8]) -> Step,
    found: &mut dyn FnMut(Match) -> bool,
) -> Result<(), ReadPageError> {
    let Entries {
        slot,
        interval,
        start,
        reverse,
    } = entries;
    let (first, end) = entry_bounds(slot.number(), interval);
    let start = start.unwrap_or(first);
    let range = IndexRange {
        start: &start,
        end: end.as_deref(),
        reverse,
    };
    let mut failure = None;
    engine.index_scan(region, range, &mut |entry| {
        let Some((_, coord, key)) = entry_parts(entry) else {
            return true;
        };
        match step(coord, key) {
            Step::Stop => false,
            Step::Skip => true,
            Step::Load => match read_key(engine, region, key, filter, Some((slot, coord))) {
                Ok(Some(m)) => found(m),
                Ok(None) => true,
                Err(e) => {
                    failure = Some(e);
                    false
                }
            },
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// Walks the lists of several equalities ([`Access::Equalities`]) in key
/// order from after `after`: the current list until it has read
/// `switch_after` entries without ending, then, from the key it stopped
/// at, the list with the fewest entries left (counted up to as many; the
/// current one on a tie), with `switch_after` doubled. `found` gets each
/// match and returns whether to go on.
fn walk_equalities(
    engine: &dyn Engine,
    region: RegionId,
    walks: &[(Slot, u64)],
    switch_after: usize,
    after: Option<&[u8]>,
    filter: Filter<'_>,
    found: &mut dyn FnMut(Match) -> bool,
) -> Result<(), ReadPageError> {
    let Some(mut current) = walks.first() else {
        return Ok(());
    };
    let mut switch_after = switch_after.max(1);
    // The first entry of a list to read: one after `after`'s, then the
    // stopped key's own.
    let after_key = |slot: &Slot, coord: u64, key: &[u8]| {
        let mut e = entry(slot.number(), coord, key);
        e.push(0);
        e
    };
    let mut start = after.map(|a| after_key(&current.0, current.1, a));
    loop {
        let (slot, coord) = current;
        let mut read = 0;
        let mut stopped_at: Option<Vec<u8>> = None;
        walk_index(
            engine,
            region,
            Entries {
                start: start.take(),
                ..Entries::of(slot, (*coord, *coord))
            },
            filter,
            &mut |_, key| {
                if read == switch_after {
                    stopped_at = Some(key.to_vec());
                    Step::Stop
                } else {
                    read += 1;
                    Step::Load
                }
            },
            found,
        )?;
        // The list ended, or the page is full.
        let Some(key) = stopped_at else {
            return Ok(());
        };
        let mut fewest = count_entries(engine, region, slot, *coord, &key, switch_after)?;
        for other in walks {
            if other != current {
                let n = count_entries(engine, region, &other.0, other.1, &key, fewest)?;
                if n < fewest {
                    (fewest, current) = (n, other);
                }
            }
        }
        start = Some(entry(current.0.number(), current.1, &key));
        switch_after = switch_after.saturating_mul(2);
    }
}

/// The entries of `slot` at `coord` from storage key `from` on, counted up
/// to `cap`.
fn count_entries(
    engine: &dyn Engine,
    region: RegionId,
    slot: &Slot,
    coord: u64,
    from: &[u8],
    cap: usize,
) -> Result<usize, ReadPageError> {
    let start = entry(slot.number(), coord, from);
    let (_, end) = entry_bounds(slot.number(), (coord, coord));
    let mut n = 0;
    if cap > 0 {
        engine.index_scan(
            region,
            IndexRange {
                start: &start,
                end: end.as_deref(),
                reverse: false,
            },
            &mut |_| {
                n += 1;
                n < cap
            },
        )?;
    }
    Ok(n)
}

/// Scans the region in key order after `after`; `found` gets each match
/// and returns whether to go on.
fn scan_region(
    engine: &dyn Engine,
    region: RegionId,
    after: Option<&[u8]>,
    filter: Filter<'_>,
    found: &mut dyn FnMut(Match) -> bool,
) -> Result<(), ReadPageError> {
    let mut failure = None;
    engine.scan(
        region,
        after,
        &mut |key, bytes| match read_match(key, bytes, filter, None) {
            Ok(Some(m)) => found(m),
            Ok(None) => true,
            Err(e) => {
                failure = Some(e);
                false
            }
        },
    )?;
    failure.map_or(Ok(()), Err)
}

/// Bounds on one page: at most `objects` matches, and the page is cut once
/// the `size` of its matches reaches `size_max` (a page always holds at
/// least one match).
#[derive(Clone, Copy)]
pub struct PageBounds {
    pub objects: usize,
    pub size: fn(&Match) -> usize,
    pub size_max: usize,
}

/// Orders matches by key, so a max-heap keeps the largest key on top.
struct ByKey(Match);

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}
impl Eq for ByKey {}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.key.cmp(&other.0.key)
    }
}

/// Keeps the first matches of `ranked` (ascending) until the page's size
/// bound; returns them and whether any was cut.
fn cut_to_size(ranked: Vec<Match>, bounds: PageBounds) -> (Vec<Match>, bool) {
    let mut out = Vec::with_capacity(ranked.len());
    let mut total = 0;
    let mut cut = false;
    for m in ranked {
        let size = (bounds.size)(&m);
        if !out.is_empty() && total + size > bounds.size_max {
            cut = true;
            break;
        }
        total += size;
        out.push(m);
    }
    (out, cut)
}

/// One page of the region's matches in key order after `after`, and
/// whether more may follow (then the next page may be empty).
///
/// A scan stops at the bound. An equality walks its entries, which share a
/// coordinate and so come in key order, from `after` on. A range's entries
/// come in value order: the page keeps the `bounds.objects` smallest
/// matching keys in a heap, loading an entry's object only when its key
/// would enter the heap. With `keep`, only the matches that pass it.
pub fn key_order_page(
    engine: &dyn Engine,
    region: RegionId,
    access: &Access,
    checks: &[Check],
    after: Option<&[u8]>,
    bounds: PageBounds,
    keep: Option<Keep<'_>>,
) -> Result<(Vec<Match>, bool), ReadPageError> {
    let filter = Filter {
        checks,
        sort: None,
        keep,
    };
    let wanted = bounds.objects;
    if wanted == 0 {
        return Ok((Vec::new(), false));
    }
    let mut page = Vec::new();
    let mut total = 0;
    let mut more = false;
    let mut take = |m: Match| {
        total += (bounds.size)(&m);
        page.push(m);
        more = page.len() >= wanted || total >= bounds.size_max;
        !more
    };
    match access {
        Access::Nothing => {}
        Access::Scan => scan_region(engine, region, after, filter, &mut take)?,
        Access::Key(key) => {
            if after.is_none_or(|a| key.as_slice() > a) {
                if let Some(m) = read_key(engine, region, key, filter, None)? {
                    take(m);
                }
            }
        }
        Access::Equalities {
            walks,
            switch_after,
        } => walk_equalities(
            engine,
            region,
            walks,
            *switch_after,
            after,
            filter,
            &mut take,
        )?,
        &Access::Index {
            ref slot, interval, ..
        } if interval.0 == interval.1 => {
            let start = after.map(|a| {
                let mut e = entry(slot.number(), interval.0, a);
                e.push(0); // the first entry after `a`'s
                e
            });
            walk_index(
                engine,
                region,
                Entries {
                    start,
                    ..Entries::of(slot, interval)
                },
                filter,
                &mut |_, _| Step::Load,
                &mut take,
            )?;
        }
        &Access::Index {
            ref slot, interval, ..
        } => {
            let mut heap: BinaryHeap<ByKey> = BinaryHeap::with_capacity(wanted + 1);
            // The heap's largest key once it is full: larger keys cannot enter.
            let largest: RefCell<Option<Vec<u8>>> = RefCell::new(None);
            let passed = Cell::new(false);
            walk_index(
                engine,
                region,
                Entries::of(slot, interval),
                filter,
                &mut |_, key| {
                    if after.is_some_and(|a| key <= a) {
                        Step::Skip
                    } else if largest.borrow().as_deref().is_some_and(|l| key >= l) {
                        passed.set(true);
                        Step::Skip
                    } else {
                        Step::Load
                    }
                },
                &mut |m| {
                    heap.push(ByKey(m));
                    if heap.len() > wanted {
                        heap.pop();
                        passed.set(true);
                    }
                    if heap.len() >= wanted {
                        *largest.borrow_mut() = heap.peek().map(|top| top.0.key.clone());
                    }
                    true
                },
            )?;
            let passed = passed.get();
            let ranked = heap.into_sorted_vec().into_iter().map(|b| b.0).collect();
            let (objects, cut) = cut_to_size(ranked, bounds);
            return Ok((objects, passed || cut));
        }
    }
    Ok((page, more))
}

/// A match ranked by a sorted search's order ([`SortBy::compare`]) of its
/// sort value, so a max-heap keeps the worst on top.
struct Ranked(SortBy, Value, Match);

impl Ranked {
    fn position(&self) -> (&Value, &[u8]) {
        (&self.1, &self.2.key)
    }

    /// The match, its sort value back in place.
    fn into_match(self) -> Match {
        Match {
            sort_value: Some(self.1),
            ..self.2
        }
    }
}
impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.compare(self.position(), other.position())
    }
}

/// One page of the region's best matches in [`SortBy::compare`] order,
/// strictly after `after` (a sort value and a key; without a value, after
/// the key among equal values), and whether more may
/// follow (then the next page may be empty).
///
/// The page holds the best `bounds.objects` in a heap. Read through the
/// sort attribute's own index in its order ([`Walk::following`]), the walk
/// starts at `after`'s coordinate and stops once the heap is full and the
/// entries' coordinate has passed its worst member's: nothing later can
/// rank higher. With `keep`, only the matches that pass it.
#[allow(clippy::too_many_arguments)]
pub fn sorted_page(
    engine: &dyn Engine,
    region: RegionId,
    access: &Access,
    checks: &[Check],
    sort: SortBy,
    after: Option<(Option<&Value>, &[u8])>,
    bounds: PageBounds,
    keep: Option<Keep<'_>>,
) -> Result<(Vec<Match>, bool), ReadPageError> {
    let filter = Filter {
        checks,
        sort: Some(sort.attr),
        keep,
    };
    let wanted = bounds.objects;
    if wanted == 0 {
        return Ok((Vec::new(), false));
    }
    let mut top = TopN {
        heap: BinaryHeap::with_capacity(wanted + 1),
        wanted,
        sort,
        after,
        dropped: false,
    };
    match access {
        Access::Nothing => {}
        Access::Scan => scan_region(engine, region, None, filter, &mut |m| {
            top.offer(m);
            true
        })?,
        Access::Key(key) => {
            if let Some(m) = read_key(engine, region, key, filter, None)? {
                top.offer(m);
            }
        }
        &Access::Index {
            ref slot,
            interval,
            walk,
        } if *slot == Slot::Attr(sort.attr) && walk == Walk::following(sort) => {
            let descending = sort.descending;
            let (mut lo, mut hi) = interval;
            if let Some(c) = after.and_then(|(v, _)| v.and_then(coordinate)) {
                if descending {
                    hi = hi.min(c);
                } else {
                    lo = lo.max(c);
                }
            }
            if lo <= hi {
                // The coordinate of the heap's worst member, once it is full.
                let worst = Cell::new(None::<u64>);
                let stopped = Cell::new(false);
                walk_index(
                    engine,
                    region,
                    Entries {
                        reverse: descending,
                        ..Entries::of(slot, (lo, hi))
                    },
                    filter,
                    &mut |coord, _| match worst.get() {
                        Some(w) if (descending && coord < w) || (!descending && coord > w) => {
                            stopped.set(true);
                            Step::Stop
                        }
                        _ => Step::Load,
                    },
                    &mut |m| {
                        top.offer(m);
                        if top.heap.len() >= wanted {
                            worst.set(top.heap.peek().and_then(|r| coordinate(r.position().0)));
                        }
                        true
                    },
                )?;
                top.dropped |= stopped.get();
            }
        }
        &Access::Index {
            ref slot, interval, ..
        } => walk_index(
            engine,
            region,
            Entries::of(slot, interval),
            filter,
            &mut |_, _| Step::Load,
            &mut |m| {
                top.offer(m);
                true
            },
        )?,
        Access::Equalities {
            walks,
            switch_after,
        } => walk_equalities(
            engine,
            region,
            walks,
            *switch_after,
            None,
            filter,
            &mut |m| {
                top.offer(m);
                true
            },
        )?,
    }
    let dropped = top.dropped;
    let ranked = top
        .heap
        .into_sorted_vec()
        .into_iter()
        .map(Ranked::into_match)
        .collect();
    let (objects, cut) = cut_to_size(ranked, bounds);
    Ok((objects, dropped || cut))
}

/// The best `wanted` matches strictly after `after` seen so far.
struct TopN<'a> {
    heap: BinaryHeap<Ranked>,
    wanted: usize,
    sort: SortBy,
    /// A sort value and a key; without the value, only the key counts.
    after: Option<(Option<&'a Value>, &'a [u8])>,
    /// Whether a match ranked out of the heap.
    dropped: bool,
}

impl TopN<'_> {
    fn offer(&mut self, mut m: Match) {
        let Some(value) = m.sort_value.take() else {
            return;
        };
        if let Some((after_value, after_key)) = self.after {
            let after_value = after_value.unwrap_or(&value);
            if self
                .sort
                .compare((&value, &m.key), (after_value, after_key))
                != Ordering::Greater
            {
                return;
            }
        }
        self.heap.push(Ranked(self.sort, value, m));
        if self.heap.len() > self.wanted {
            self.heap.pop();
            self.dropped = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use proptest::prelude::*;
    use tessera_protocol::ClientRef;
    use tessera_types::Object;

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            "[a-z]{0,12}".prop_map(|s| Value::str(&s)),
            any::<i64>().prop_map(Value::Int),
            any::<f64>().prop_map(Value::Float),
            proptest::collection::vec(any::<i64>().prop_map(Value::Int), 0..4)
                .prop_map(Value::List),
        ]
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        let object =
            proptest::collection::vec(arb_value(), 1..6).prop_map(|values| Object { values });
        let writer = (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(c, r, v)| {
            (
                ClientRef {
                    client_id: c,
                    request_no: r,
                },
                Version(v),
            )
        });
        (
            any::<u64>(),
            proptest::option::of(object),
            proptest::collection::vec(writer, 0..4),
        )
            .prop_map(|(version, object, recent)| Record {
                version: Version(version),
                object,
                recent,
            })
    }

    proptest! {
        /// Splitting a stored record without decoding it finds the version
        /// and the object `Record::decode` finds, and its object bytes are
        /// the object's own encoding (what a search page ships).
        #[test]
        fn stored_records_split_as_they_decode(record in arb_record()) {
            let bytes = record.encode();
            let (version, view) = stored_object(&bytes).unwrap();
            prop_assert_eq!(version, record.version);
            match (view, &record.object) {
                (Some(view), Some(object)) => {
                    prop_assert_eq!(ObjectBytes::from_view(view), ObjectBytes::encode(object));
                }
                (None, None) => {}
                (view, object) => prop_assert!(false, "{:?} split as {:?}", object, view),
            }
        }

        /// Every proper prefix of a record holding an object is refused.
        #[test]
        fn cut_records_are_refused(record in arb_record()) {
            let bytes = record.encode();
            let header = bytes.len() - postcard::to_allocvec(&record.recent).unwrap().len();
            for len in 0..header {
                prop_assert!(stored_object(&bytes[..len]).is_err(), "a prefix of {} bytes", len);
            }
        }
    }
}
