//! Secondary indexes inside each region, so that a search reads only the
//! objects its checks can match instead of the whole region.
//!
//! What is indexed: in every region of a space, every attribute that a
//! subspace or an `index` clause names and whose type has a coordinate
//! (string, int, float, timestamp) — [`indexed_attrs`]. An entry is
//! `attr (u32 BE) ++ coordinate (u64 BE) ++ storage key`; ints, floats and
//! timestamps have order-preserving coordinates, so a range of values is a
//! range of entries, and a string's coordinate is its hash, so string
//! equality is one short range too (hash collisions are filtered out).
//!
//! How it stays right: [`IndexedEngine`] wraps the storage engine and, for
//! every object it writes, computes the entries the old and the new record
//! imply and writes the difference in the same atomic batch as the object —
//! so a crash leaves both or neither, and state transfer (which writes
//! through the same engine) indexes what it copies. Dropping a region drops
//! its entries. Readers never trust an entry alone: [`visit_matching`]
//! loads the object an entry names, skips it unless its current value
//! still has the entry's coordinate, and evaluates every check on it.
//!
//! Which index a search uses is pure ([`choose_access`]): an equality
//! first, then the walk of the sort attribute in order when a sorted search
//! has a limit and nothing else narrows, then the narrowest range, else the
//! whole region. A check whose interval covers this region's whole cell
//! (its subspace already confines every object to it) narrows nothing.

use crate::record::{DecodeRecordError, ReadRecordError, Record};
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, RwLock};
use tessera_protocol::SortBy;
use tessera_storage::{Engine, IndexRange, IndexWrite, StorageError, Write};
use tessera_types::coordinate::coordinate;
use tessera_types::predicate::intersect_intervals;
use tessera_types::{
    coordinate_interval, Check, Configuration, DataType, Object, RegionId, Space, SpaceDesc,
    SubspaceLayout, Value, Version,
};

const ATTR_BYTES: usize = 4;
const COORD_BYTES: usize = 8;
const PREFIX_BYTES: usize = ATTR_BYTES + COORD_BYTES;

/// The attributes the regions of subspace `subspace` (0: the key subspace)
/// index, ascending: in the key subspace every indexed attribute of the
/// space ([`SpaceDesc::indexed_attrs`]: those a subspace or an `index`
/// clause names); in another subspace its own attributes and the `index`
/// clauses' (hashable ones only). A search goes to one subspace's regions:
/// to the subspace of the attribute its checks narrow, or to the key
/// subspace when none narrows — so each put writes entries in proportion to
/// its subspaces, not to their square.
pub fn indexed_attrs(desc: &SpaceDesc, subspace: usize) -> Vec<usize> {
    if subspace == 0 {
        return desc.indexed_attrs();
    }
    desc.indexable(
        desc.subspaces
            .get(subspace - 1)
            .into_iter()
            .flatten()
            .chain(&desc.indexes),
    )
}

/// The index entry of an object with storage key `key` whose attribute
/// `attr` has coordinate `coordinate`.
pub fn entry(attr: usize, coordinate: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_BYTES + key.len());
    out.extend_from_slice(&attr_bytes(attr));
    out.extend_from_slice(&coordinate.to_be_bytes());
    out.extend_from_slice(key);
    out
}

fn attr_bytes(attr: usize) -> [u8; ATTR_BYTES] {
    u32::try_from(attr).unwrap_or(u32::MAX).to_be_bytes()
}

/// The attribute, coordinate and storage key of an entry; `None` if it is
/// too short to be one.
pub fn entry_parts(entry: &[u8]) -> Option<(usize, u64, &[u8])> {
    let attr = u32::from_be_bytes(entry.get(..ATTR_BYTES)?.try_into().ok()?);
    let coord = u64::from_be_bytes(entry.get(ATTR_BYTES..PREFIX_BYTES)?.try_into().ok()?);
    Some((attr as usize, coord, &entry[PREFIX_BYTES..]))
}

/// The entries of `object` (stored under `key`) for the attributes `attrs`.
pub fn object_entries(attrs: &[usize], object: &Object, key: &[u8]) -> Vec<Vec<u8>> {
    attrs
        .iter()
        .filter_map(|&a| {
            let c = coordinate(object.values.get(a)?)?;
            Some(entry(a, c, key))
        })
        .collect()
}

/// The first entry (inclusive) and the end (exclusive; `None`: the last
/// entry of the index) of the entries of `attr` whose coordinate lies in the
/// inclusive interval.
pub fn entry_bounds(attr: usize, (lo, hi): (u64, u64)) -> (Vec<u8>, Option<Vec<u8>>) {
    let prefix = attr_bytes(attr);
    let mut start = prefix.to_vec();
    start.extend_from_slice(&lo.to_be_bytes());
    let end = match hi.checked_add(1) {
        Some(next) => {
            let mut end = prefix.to_vec();
            end.extend_from_slice(&next.to_be_bytes());
            Some(end)
        }
        None => u32::from_be_bytes(prefix)
            .checked_add(1)
            .map(|n| n.to_be_bytes().to_vec()),
    };
    (start, end)
}

/// How a search reads one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// No object can match.
    Nothing,
    /// Every object of the region.
    Scan,
    /// The entries of `attr` with a coordinate in `interval`; `order`
    /// (descending when true) when the walk follows a sorted search's order
    /// and may stop at its limit.
    Index {
        attr: usize,
        interval: (u64, u64),
        order: Option<bool>,
    },
}

/// The inclusive coordinate interval of each dimension of the cell at
/// `index` in `layout` ([`SubspaceLayout::cell_bounds`]), by attribute.
pub fn region_cell(layout: &SubspaceLayout, index: usize) -> BTreeMap<usize, (u64, u64)> {
    layout
        .attrs
        .iter()
        .copied()
        .zip(layout.cell_bounds(index))
        .collect()
}

/// Where a region lies in its space: its subspace and its cell.
#[derive(Clone, Debug, Default)]
pub struct RegionPlace {
    /// Index into `Space::subspaces` (0: the key subspace).
    pub subspace: usize,
    /// See [`region_cell`].
    pub cell: BTreeMap<usize, (u64, u64)>,
}

/// The place of `region` in its space (the key subspace and no cell if the
/// space does not hold it).
pub fn place_of(space: &Space, region: RegionId) -> RegionPlace {
    space
        .subspaces
        .iter()
        .enumerate()
        .find_map(|(subspace, layout)| {
            let index = layout.regions.iter().position(|r| r.id == region)?;
            Some(RegionPlace {
                subspace,
                cell: region_cell(layout, index),
            })
        })
        .unwrap_or_default()
}

fn is_ordered(dtype: DataType) -> bool {
    matches!(
        dtype,
        DataType::Int | DataType::Float | DataType::Timestamp(_)
    )
}

/// Picks how a search with `checks` (and `sort`, `limit`) reads a region
/// of `desc`'s space at `place` (see [`place_of`]).
pub fn choose_access(
    desc: &SpaceDesc,
    place: &RegionPlace,
    checks: &[Check],
    sort: Option<SortBy>,
    limit: Option<u64>,
) -> Access {
    let indexed = indexed_attrs(desc, place.subspace);
    let cell = &place.cell;
    let mut bounds: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for check in checks.iter().filter(|c| indexed.contains(&c.attr)) {
        let dtype = desc.attrs[check.attr].dtype;
        if let Some(interval) = coordinate_interval(check, dtype) {
            let b = bounds.entry(check.attr).or_insert((0, u64::MAX));
            *b = intersect_intervals(*b, interval);
        }
    }
    if bounds.values().any(|&(lo, hi)| lo > hi) {
        return Access::Nothing;
    }
    // Bounds that exclude some object this region may hold.
    let narrowing: Vec<(usize, (u64, u64))> = bounds
        .iter()
        .map(|(&a, &b)| (a, b))
        .filter(|&(a, (lo, hi))| {
            let (cell_lo, cell_hi) = cell.get(&a).copied().unwrap_or((0, u64::MAX));
            lo > cell_lo || hi < cell_hi
        })
        .collect();
    if let Some(&(attr, interval)) = narrowing.iter().find(|(_, (lo, hi))| lo == hi) {
        return Access::Index {
            attr,
            interval,
            order: None,
        };
    }
    let ordered_walk = match (sort, limit) {
        (Some(sort), Some(_))
            if indexed.contains(&sort.attr) && is_ordered(desc.attrs[sort.attr].dtype) =>
        {
            Some(Access::Index {
                attr: sort.attr,
                interval: bounds.get(&sort.attr).copied().unwrap_or((0, u64::MAX)),
                order: Some(sort.descending),
            })
        }
        _ => None,
    };
    if let Some(walk) = &ordered_walk {
        if narrowing
            .iter()
            .all(|&(a, _)| Some(a) == sort.map(|s| s.attr))
        {
            return walk.clone();
        }
    }
    if let Some(&(attr, interval)) = narrowing.iter().min_by_key(|(_, (lo, hi))| hi - lo) {
        return Access::Index {
            attr,
            interval,
            order: None,
        };
    }
    ordered_walk.unwrap_or(Access::Scan)
}

/// One object a search found.
#[derive(Clone, Debug)]
pub struct Match {
    /// Its storage key (`key_bytes` of the key).
    pub key: Vec<u8>,
    pub version: Version,
    pub object: Object,
    /// The size of its stored record.
    pub bytes: usize,
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

/// Loads the object an entry names; `None` unless it exists, still has the
/// entry's coordinate at `attr` (so a stale entry is ignored and no object
/// is found twice) and matches every check.
fn load_match(
    engine: &dyn Engine,
    region: RegionId,
    attr: usize,
    coord: u64,
    key: &[u8],
    checks: &[Check],
) -> Result<Option<Match>, ReadRecordError> {
    let Some(bytes) = engine.get(region, key)? else {
        return Ok(None);
    };
    let record = Record::decode(&bytes)?;
    let Some(object) = record.object else {
        return Ok(None);
    };
    if object.values.get(attr).and_then(coordinate) != Some(coord)
        || !checks.iter().all(|c| c.matches(&object))
    {
        return Ok(None);
    }
    Ok(Some(Match {
        key: key.to_vec(),
        version: record.version,
        object,
        bytes: bytes.len(),
    }))
}

/// Walks the entries of `attr` in `interval` (from `start` instead of the
/// interval's first entry when given), largest first when `reverse`;
/// `step(coordinate, key)` decides per entry, `found` gets each match and
/// returns whether to go on.
#[allow(clippy::too_many_arguments)]
fn walk_index(
    engine: &dyn Engine,
    region: RegionId,
    attr: usize,
    interval: (u64, u64),
    start: Option<Vec<u8>>,
    reverse: bool,
    checks: &[Check],
    step: &mut dyn FnMut(u64, &[u8]) -> Step,
    found: &mut dyn FnMut(Match) -> bool,
) -> Result<(), ReadRecordError> {
    let (first, end) = entry_bounds(attr, interval);
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
            Step::Load => match load_match(engine, region, attr, coord, key, checks) {
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

/// Scans the region in key order after `after`; `found` gets each match
/// and returns whether to go on.
fn scan_region(
    engine: &dyn Engine,
    region: RegionId,
    after: Option<&[u8]>,
    checks: &[Check],
    found: &mut dyn FnMut(Match) -> bool,
) -> Result<(), ReadRecordError> {
    let mut failure = None;
    engine.scan(
        region,
        after,
        &mut |key, bytes| match Record::decode(bytes) {
            Ok(Record {
                version,
                object: Some(object),
                ..
            }) if checks.iter().all(|c| c.matches(&object)) => found(Match {
                key: key.to_vec(),
                version,
                object,
                bytes: bytes.len(),
            }),
            Ok(_) => true,
            Err(e) => {
                failure = Some(e);
                false
            }
        },
    )?;
    failure.map_or(Ok(()), |e| Err(e.into()))
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
/// would enter the heap.
pub fn key_order_page(
    engine: &dyn Engine,
    region: RegionId,
    access: &Access,
    checks: &[Check],
    after: Option<&[u8]>,
    bounds: PageBounds,
) -> Result<(Vec<Match>, bool), ReadRecordError> {
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
    match *access {
        Access::Nothing => {}
        Access::Scan => scan_region(engine, region, after, checks, &mut take)?,
        Access::Index { attr, interval, .. } if interval.0 == interval.1 => {
            let start = after.map(|a| {
                let mut e = entry(attr, interval.0, a);
                e.push(0); // the first entry after `a`'s
                e
            });
            walk_index(
                engine,
                region,
                attr,
                interval,
                start,
                false,
                checks,
                &mut |_, _| Step::Load,
                &mut take,
            )?;
        }
        Access::Index { attr, interval, .. } => {
            let mut heap: BinaryHeap<ByKey> = BinaryHeap::with_capacity(wanted + 1);
            // The heap's largest key once it is full: larger keys cannot enter.
            let largest: RefCell<Option<Vec<u8>>> = RefCell::new(None);
            let passed = Cell::new(false);
            walk_index(
                engine,
                region,
                attr,
                interval,
                None,
                false,
                checks,
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

/// A match ranked by a sorted search's order ([`SortBy::compare`]), so a
/// max-heap keeps the worst on top.
struct Ranked(SortBy, Match);

impl Ranked {
    fn position(&self) -> (&Value, &[u8]) {
        (&self.1.object.values[self.0.attr], &self.1.key)
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
/// sort attribute's own index (`order` set), the walk starts at `after`'s
/// coordinate and stops once the heap is full and the entries' coordinate
/// has passed its worst member's: nothing later can rank higher.
pub fn sorted_page(
    engine: &dyn Engine,
    region: RegionId,
    access: &Access,
    checks: &[Check],
    sort: SortBy,
    after: Option<(Option<&Value>, &[u8])>,
    bounds: PageBounds,
) -> Result<(Vec<Match>, bool), ReadRecordError> {
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
    match *access {
        Access::Nothing => {}
        Access::Scan => scan_region(engine, region, None, checks, &mut |m| {
            top.offer(m);
            true
        })?,
        Access::Index {
            attr,
            interval,
            order: Some(descending),
        } if attr == sort.attr && descending == sort.descending => {
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
                    attr,
                    (lo, hi),
                    None,
                    descending,
                    checks,
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
        Access::Index { attr, interval, .. } => walk_index(
            engine,
            region,
            attr,
            interval,
            None,
            false,
            checks,
            &mut |_, _| Step::Load,
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
        .map(|r| r.1)
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
    fn offer(&mut self, m: Match) {
        let Some(value) = m.object.values.get(self.sort.attr) else {
            return;
        };
        if let Some((after_value, after_key)) = self.after {
            let after_value = after_value.unwrap_or(value);
            if self.sort.compare((value, &m.key), (after_value, after_key)) != Ordering::Greater {
                return;
            }
        }
        self.heap.push(Ranked(self.sort, m));
        if self.heap.len() > self.wanted {
            self.heap.pop();
            self.dropped = true;
        }
    }
}

/// Number of lock stripes of an [`IndexedEngine`].
const STRIPES: usize = 64;

/// An engine that keeps every region's index in step with its objects (see
/// the module docs). Every method but `apply_with_index` passes through.
pub struct IndexedEngine {
    inner: Arc<dyn Engine>,
    /// The indexed attributes of each region the configuration names.
    specs: RwLock<Arc<HashMap<RegionId, Arc<[usize]>>>>,
    /// Writes of one key read its old record and write the new one under
    /// the key's stripe, so two writers cannot both miss each other's entries.
    stripes: Vec<Mutex<()>>,
}

/// Meta record naming the index format the engine's entries follow; absent
/// in data written before indexes existed, which [`IndexedEngine::open`]
/// then indexes.
const META_INDEX_FORMAT: &str = "index_format";
const INDEX_FORMAT: &[u8] = b"1";

fn specs_of(config: &Configuration) -> HashMap<RegionId, Arc<[usize]>> {
    let mut out = HashMap::new();
    for space in &config.spaces {
        for (subspace, layout) in space.subspaces.iter().enumerate() {
            let attrs: Arc<[usize]> = indexed_attrs(&space.desc, subspace).into();
            for region in &layout.regions {
                out.insert(region.id, attrs.clone());
            }
        }
    }
    out
}

fn stripe_of(region: RegionId, key: &[u8]) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    region.hash(&mut h);
    key.hash(&mut h);
    (h.finish() % STRIPES as u64) as usize
}

fn record_entries(
    attrs: &[usize],
    key: &[u8],
    bytes: &[u8],
) -> Result<Vec<Vec<u8>>, DecodeRecordError> {
    Ok(match Record::decode(bytes)?.object {
        Some(object) => object_entries(attrs, &object, key),
        None => Vec::new(),
    })
}

impl IndexedEngine {
    /// Wraps `inner` for the regions of `config`, first indexing every
    /// stored object if the data predates indexes.
    pub fn open(inner: Arc<dyn Engine>, config: &Configuration) -> Result<Self, StorageError> {
        let engine = IndexedEngine {
            inner,
            specs: RwLock::new(Arc::new(specs_of(config))),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        };
        if engine.inner.meta_get(META_INDEX_FORMAT)?.as_deref() != Some(INDEX_FORMAT) {
            for region in engine.inner.regions()? {
                engine.rebuild_region(region)?;
            }
            engine.inner.meta_put(META_INDEX_FORMAT, INDEX_FORMAT)?;
        }
        Ok(engine)
    }

    /// Learns the regions of a new configuration. Call it before anything
    /// writes to a region the configuration adds.
    pub fn on_config(&self, config: &Configuration) {
        let specs = Arc::new(specs_of(config));
        *self.specs.write().unwrap_or_else(|p| p.into_inner()) = specs;
    }

    fn spec(&self, region: RegionId) -> Option<Arc<[usize]>> {
        self.specs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&region)
            .filter(|attrs| !attrs.is_empty())
            .cloned()
    }

    /// Writes the entries of every object of the region (entries already
    /// there stay; they are a set).
    pub fn rebuild_region(&self, region: RegionId) -> Result<(), StorageError> {
        let Some(attrs) = self.spec(region) else {
            return Ok(());
        };
        let mut puts = Vec::new();
        self.inner.scan(region, None, &mut |key, bytes| {
            if let Ok(entries) = record_entries(&attrs, key, bytes) {
                puts.extend(
                    entries
                        .into_iter()
                        .map(|entry| IndexWrite::Put { region, entry }),
                );
            }
            true
        })?;
        for chunk in puts.chunks(4096) {
            self.inner.apply_with_index(Vec::new(), chunk.to_vec())?;
        }
        Ok(())
    }
}

/// A write to an indexed region: its region, key, new record (none: a
/// delete) and the attributes the region indexes.
type IndexedWrite<'a> = (RegionId, &'a [u8], Option<&'a [u8]>, Arc<[usize]>);

impl Engine for IndexedEngine {
    fn get(&self, region: RegionId, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(region, key)
    }

    fn apply_with_index(
        &self,
        writes: Vec<Write>,
        mut index: Vec<IndexWrite>,
    ) -> Result<(), StorageError> {
        let indexed: Vec<IndexedWrite> = writes
            .iter()
            .filter_map(|w| {
                let (region, key, value) = match w {
                    Write::Put { region, key, value } => (*region, key, Some(value.as_slice())),
                    Write::Delete { region, key } => (*region, key, None),
                };
                Some((region, key.as_slice(), value, self.spec(region)?))
            })
            .collect();
        if indexed.is_empty() {
            return self.inner.apply_with_index(writes, index);
        }
        let mut stripes: Vec<usize> = indexed
            .iter()
            .map(|&(region, key, ..)| stripe_of(region, key))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let _guards: Vec<_> = stripes
            .iter()
            .map(|&s| self.stripes[s].lock().unwrap_or_else(|p| p.into_inner()))
            .collect();
        // The entries each key has so far, counting earlier writes of this batch.
        let mut current: HashMap<(RegionId, &[u8]), Vec<Vec<u8>>> = HashMap::new();
        for (region, key, value, attrs) in indexed {
            let old = match current.remove(&(region, key)) {
                Some(old) => old,
                None => match self.inner.get(region, key)? {
                    // An old record that does not decode has unknown entries;
                    // any it left are stale, which readers tolerate.
                    Some(bytes) => record_entries(&attrs, key, &bytes).unwrap_or_default(),
                    None => Vec::new(),
                },
            };
            let new = match value {
                Some(bytes) => record_entries(&attrs, key, bytes).map_err(|e| {
                    StorageError::Engine(format!("cannot index a write to {region}: {e}"))
                })?,
                None => Vec::new(),
            };
            for entry in new.iter().filter(|e| !old.contains(e)) {
                index.push(IndexWrite::Put {
                    region,
                    entry: entry.clone(),
                });
            }
            // Disjoint from the puts just made, so their order is free.
            for entry in old.into_iter().filter(|e| !new.contains(e)) {
                index.push(IndexWrite::Delete { region, entry });
            }
            current.insert((region, key), new);
        }
        self.inner.apply_with_index(writes, index)
    }

    fn scan(
        &self,
        region: RegionId,
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.inner.scan(region, after, visit)
    }

    fn index_scan(
        &self,
        region: RegionId,
        range: IndexRange<'_>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.inner.index_scan(region, range, visit)
    }

    fn drop_region(&self, region: RegionId) -> Result<(), StorageError> {
        self.inner.drop_region(region)
    }

    fn regions(&self) -> Result<Vec<RegionId>, StorageError> {
        self.inner.regions()
    }

    fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.meta_get(name)
    }

    fn meta_put(&self, name: &str, value: &[u8]) -> Result<(), StorageError> {
        self.inner.meta_put(name, value)
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.inner.sync()
    }
}
