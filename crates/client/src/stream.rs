//! Streaming search: [`SearchStream`] fetches each planned region's pages
//! lazily and yields the merged results one at a time.
//!
//! ```text
//!  next() ──▶ Merge::pop ──Item──▶ Record
//!                 │ Wait(lane)
//!                 ▼
//!       lane's page fetch (a task: one page ahead per region) ──▶ tail of
//!       the region's chain: Search { after: last item of the previous page }
//! ```
//!
//! Daemons keep no cursor: each page request names where to continue, so a
//! page can be retried anywhere — after a reconfiguration it goes to the
//! region's new tail. The stream holds about two pages per region (the
//! unconsumed one and the one being fetched) and, in a sorted search, the
//! keys yielded so far.
//!
//! Consistency: an object that no update touches while the stream runs, and
//! whose last update completed before it started, is yielded exactly once.
//! An object updated meanwhile may come in its old or new version; one that
//! an update moves between two regions of the chosen subspace — from the
//! part of one region not yet read into the part of another already read —
//! can be missed, as in any search over regions read at different moments.

use crate::attempt::{check_shape, owned, unexpected, Step};
use crate::client::Client;
use crate::error::ClientError;
use crate::merge::{Item, Merge, Pop};
use crate::record::Record;
use crate::resolve;
use std::sync::Arc;
use tessera_protocol::{AuthOp, DaemonRequest, DaemonResponse, SearchAfter, SortBy, Status};
use tessera_types::coordinate::key_bytes;
use tessera_types::lookup::plan_lookup;
use tessera_types::plan::plan_search;
use tessera_types::sortkey::sort_key;
use tessera_types::{Check, Configuration, PredOp, RegionId, Space, SpaceDesc, SpaceId, Value};
use tokio::task::JoinHandle;

/// What a search asks of each region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// Whole objects.
    Objects,
    /// Keys only: of objects to read (count) or to write (group
    /// operations), which on a space `with authorization` are those the
    /// caller's macaroons authorize for that operation.
    Keys(AuthOp),
}

/// A result of a search stream: an object, or a key of a keys-only search.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    Object(tessera_types::Object),
    Key(Value),
}

/// A page: its items, whether the region may have more, and where the
/// next page starts (after the last item, or for a lookup after the last
/// entry read, which may have been left out).
type Page = (Vec<Item<Found>>, bool, Option<SearchAfter>);

/// What the stream was asked for, kept until the first `next` plans it.
struct Request {
    space: String,
    predicates: Vec<(String, PredOp)>,
    sort: Option<(String, bool)>,
    limit: Option<u64>,
    want: Want,
}

/// A planned, running search.
struct Running {
    space: SpaceId,
    desc: Arc<SpaceDesc>,
    regions: Vec<RegionId>,
    /// The indexed attribute when the regions are a global index's
    /// indexlets (a lookup), in the stream's order.
    lookup: Option<usize>,
    checks: Arc<Vec<Check>>,
    sort: Option<SortBy>,
    want: Want,
    merge: Merge<Found>,
    /// Per lane: the position after the last item received.
    after: Vec<Option<SearchAfter>>,
    /// Per lane: the page being fetched.
    fetches: Vec<Option<JoinHandle<Result<Page, ClientError>>>>,
    /// Where the stream stands: after the last item yielded.
    yielded: Option<SearchAfter>,
    /// Times the search was planned again after its subspace was dropped.
    replans: u32,
}

/// A search re-plans at most this many times (each after the subspace it
/// read was dropped); a layout that keeps changing faster fails it.
const REPLANS_MAX: u32 = 8;

enum State {
    Start(Request),
    Running(Box<Running>),
    Finished,
}

/// The results of a search, fetched lazily: each matching object once,
/// with its key attribute first; in key order, or in a sorted search's
/// order. Obtained from [`Client::search_stream`] or
/// [`Client::sorted_search_stream`]; the blocking form is
/// [`crate::BlockingSearchStream`].
///
/// Errors (an unknown space or attribute, a wrong type, a region that
/// stays unreachable) come out of [`SearchStream::next`] as `Some(Err)`,
/// after which the stream ends. Dropping the stream stops its fetches.
pub struct SearchStream {
    client: Client,
    state: State,
}

impl Client {
    /// Every object matching all predicates (an empty list matches all),
    /// each with its key attribute first, each key once, in key order:
    /// [`Client::search_stream`] collected.
    pub async fn search<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<Vec<Record>, ClientError> {
        collect(self.search_stream(space, predicates)).await
    }

    /// At most `limit` matching objects, ordered by the attribute `sort_by`
    /// (largest first when `descending`; ties in key order): each region
    /// returns its best `limit`, the client merges them.
    /// [`Client::sorted_search_stream`] collected.
    pub async fn sorted_search<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        sort_by: &str,
        limit: u64,
        descending: bool,
    ) -> Result<Vec<Record>, ClientError> {
        collect(self.sorted_search_stream(space, predicates, sort_by, limit, descending)).await
    }

    /// The number of objects matching all predicates.
    ///
    /// Each region sends the keys of its matches (no values), in pages;
    /// the client counts distinct keys. A sum of per-region counts would
    /// count twice an object that an update relocates between two regions
    /// while the count runs (both regions can hold it for a moment).
    pub async fn count<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<u64, ClientError> {
        let mut keys = self.stream(space, predicates, None, None, Want::Keys(AuthOp::Read));
        let mut count = 0u64;
        while let Some(key) = keys.next_key().await {
            key?;
            count += 1;
        }
        Ok(count)
    }

    /// Every object matching all predicates (none: every object), as a
    /// stream: see [`SearchStream`]. Nothing is checked or sent before the
    /// first [`SearchStream::next`].
    pub fn search_stream<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> SearchStream {
        self.stream(space, predicates, None, None, Want::Objects)
    }

    /// At most `limit` matching objects ordered by `sort_by` (largest first
    /// when `descending`; ties in key order), as a stream. Each region
    /// returns its best `limit`, in pages; the client merges them.
    pub fn sorted_search_stream<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        sort_by: &str,
        limit: u64,
        descending: bool,
    ) -> SearchStream {
        self.stream(
            space,
            predicates,
            Some((sort_by.to_string(), descending)),
            Some(limit),
            Want::Objects,
        )
    }

    pub(crate) fn stream<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        sort: Option<(String, bool)>,
        limit: Option<u64>,
        want: Want,
    ) -> SearchStream {
        SearchStream {
            client: self.clone(),
            state: State::Start(Request {
                space: space.to_string(),
                predicates: owned(predicates),
                sort,
                limit,
                want,
            }),
        }
    }
}

/// Every result of a stream, or its first error.
async fn collect(mut stream: SearchStream) -> Result<Vec<Record>, ClientError> {
    let mut out = Vec::new();
    while let Some(record) = stream.next().await {
        out.push(record?);
    }
    Ok(out)
}

impl SearchStream {
    /// The next matching object; `None` when there are no more.
    pub async fn next(&mut self) -> Option<Result<Record, ClientError>> {
        let found = self.next_found().await?;
        Some(
            found.and_then(|(version, found)| match (&self.state, found) {
                (State::Running(r), Found::Object(object)) => {
                    Ok(Record::from_object(&r.desc, version, object, true))
                }
                _ => Err(ClientError::new(
                    Status::Internal,
                    "a search stream yielded a key where an object was due",
                )),
            }),
        )
    }

    /// The next key of a keys-only stream.
    pub(crate) async fn next_key(&mut self) -> Option<Result<Value, ClientError>> {
        Some(self.next_found().await?.map(|(_, found)| match found {
            Found::Key(key) => key,
            Found::Object(object) => object.values.into_iter().next().unwrap_or(Value::Int(0)),
        }))
    }

    async fn next_found(&mut self) -> Option<Result<(tessera_types::Version, Found), ClientError>> {
        if let State::Start(_) = self.state {
            let State::Start(request) = std::mem::replace(&mut self.state, State::Finished) else {
                unreachable!()
            };
            match self.start(request).await {
                Ok(running) => self.state = State::Running(Box::new(running)),
                Err(e) => return Some(Err(e)),
            }
        }
        let State::Running(running) = &mut self.state else {
            return None;
        };
        loop {
            match running.merge.pop() {
                Pop::Item(item) => {
                    running.yielded = Some(item.after());
                    return Some(Ok((item.version, item.payload)));
                }
                Pop::Done => {
                    self.state = State::Finished;
                    return None;
                }
                Pop::Wait(lane) => {
                    let Err(e) = running.receive(&self.client, lane).await else {
                        continue;
                    };
                    let replanned = if running.lost_a_dropped_region(&self.client) {
                        running.replan(&self.client).await
                    } else {
                        Err(e)
                    };
                    if let Err(e) = replanned {
                        self.state = State::Finished;
                        return Some(Err(e));
                    }
                }
            }
        }
    }

    /// Resolves and plans the search, and asks every region for its first
    /// page at once.
    async fn start(&self, request: Request) -> Result<Running, ClientError> {
        let Request {
            space,
            predicates,
            sort,
            limit,
            want,
        } = request;
        let (space, predicates, sort) = (&space, &predicates, &sort);
        let (space_id, desc, lanes, checks, sort) = self
            .client
            .run(move |config, _| async move {
                let space = resolve::space(&config, space)?;
                let checks =
                    resolve::checks(&space.desc, predicates.iter().map(|(n, p)| (n, p.clone())))?;
                let sort = match sort {
                    Some((name, descending)) => Some(SortBy {
                        attr: resolve::sort_attr(&space.desc, name)?,
                        descending: *descending,
                    }),
                    None => None,
                };
                let lanes = plan_lanes(space, &checks, sort, limit);
                Ok((space.id, space.desc.clone(), lanes, checks, sort))
            })
            .await?;
        // A lookup streams in its index's order: a search without a sort
        // is sorted by the indexed attribute, ascending.
        let sort = sort.or(lanes.lookup.map(|attr| SortBy {
            attr,
            descending: false,
        }));
        let Lanes { regions, lookup } = lanes;
        let lanes = regions.len();
        let mut running = Running {
            space: space_id,
            desc: Arc::new(desc),
            regions,
            lookup,
            checks: Arc::new(checks),
            sort,
            want,
            merge: Merge::new(lanes, sort, limit).sequential(lookup.is_some()),
            after: vec![None; lanes],
            fetches: (0..lanes).map(|_| None).collect(),
            yielded: None,
            replans: 0,
        };
        for lane in 0..lanes {
            running.fetch(&self.client, lane);
        }
        Ok(running)
    }
}

/// The regions a search reads, one lane each, in the stream's order.
struct Lanes {
    regions: Vec<RegionId>,
    /// The indexed attribute when the regions are a global index's
    /// indexlets.
    lookup: Option<usize>,
}

/// Plans a search: through a global index when one beats the subspaces
/// ([`plan_lookup`]), its indexlets in the stream's order; else the
/// fewest regions of one subspace ([`plan_search`]).
fn plan_lanes(space: &Space, checks: &[Check], sort: Option<SortBy>, limit: Option<u64>) -> Lanes {
    let plan = plan_search(space, checks);
    let by = sort.map(|s| (s.attr, limit.is_some()));
    if let Some(lookup) = plan_lookup(space, checks, by, &plan) {
        let layout = &space.subspaces[lookup.subspace];
        let mut regions: Vec<RegionId> = lookup
            .indexlets
            .iter()
            .map(|&i| layout.regions[i].id)
            .collect();
        if sort.is_some_and(|s| s.descending) {
            regions.reverse();
        }
        return Lanes {
            regions,
            lookup: Some(lookup.attr),
        };
    }
    let subspace = &space.subspaces[plan.subspace];
    Lanes {
        regions: plan
            .regions
            .iter()
            .map(|&i| subspace.regions[i].id)
            .collect(),
        lookup: None,
    }
}

impl Running {
    /// Whether a region this search reads is gone from the newest
    /// configuration while its space remains: the coordinator dropped the
    /// subspace the search was planned on (`rm-subspace`, `relayout`).
    fn lost_a_dropped_region(&self, client: &Client) -> bool {
        let config = client.config();
        config.space_by_id(self.space).is_some()
            && self.regions.iter().any(|r| config.region(*r).is_none())
    }

    /// Plans the search again in the newest configuration and continues
    /// every new region after the last item yielded: the stream's order
    /// (key, or sort value then key) is the same in every subspace, so
    /// what was yielded is behind and what was not is ahead.
    async fn replan(&mut self, client: &Client) -> Result<(), ClientError> {
        self.replans += 1;
        if self.replans > REPLANS_MAX {
            return Err(ClientError::new(
                Status::UnknownSpace,
                "the searched space's layout changed too often during the search",
            ));
        }
        let (space, checks, sort) = (self.space, self.checks.clone(), self.sort);
        let limit = self.merge.limit_left();
        let Lanes { regions, lookup } = client
            .run(move |config, _| {
                let checks = checks.clone();
                async move {
                    let Some(space) = config.space_by_id(space) else {
                        return Err(Step::Fail(ClientError::new(
                            Status::UnknownSpace,
                            "the searched space was removed during the search",
                        )));
                    };
                    Ok(plan_lanes(space, &checks, sort, limit))
                }
            })
            .await?;
        for handle in self.fetches.iter().flatten() {
            handle.abort();
        }
        // The stream keeps its order (the sort, forced by a first lookup
        // or asked for), so every new lane continues after what was
        // yielded, through a subspace or an index on the sort attribute.
        let lanes = regions.len();
        self.regions = regions;
        self.lookup = lookup;
        self.after = vec![self.yielded.clone(); lanes];
        self.fetches = (0..lanes).map(|_| None).collect();
        self.merge.restart(lanes, lookup.is_some());
        for lane in 0..lanes {
            self.fetch(client, lane);
        }
        Ok(())
    }

    /// Starts fetching `lane`'s next page if the merge wants one and none
    /// is on its way.
    fn fetch(&mut self, client: &Client, lane: usize) {
        if self.fetches[lane].is_some() {
            return;
        }
        let Some(limit) = self.merge.wants(lane) else {
            return;
        };
        let page = PageRequest {
            space: self.space,
            region: self.regions[lane],
            lookup: self.lookup,
            checks: self.checks.clone(),
            sort: self.sort,
            after: self.after[lane].clone(),
            limit,
            want: self.want,
            desc: self.desc.clone(),
        };
        let client = client.clone();
        self.fetches[lane] = Some(tokio::spawn(async move { page.fetch(&client).await }));
    }

    /// Waits for `lane`'s page, hands it to the merge, and starts fetching
    /// the next one.
    async fn receive(&mut self, client: &Client, lane: usize) -> Result<(), ClientError> {
        self.fetch(client, lane);
        let Some(handle) = self.fetches[lane].take() else {
            return Err(ClientError::new(
                Status::Internal,
                "waiting for a region nobody asked",
            ));
        };
        let (items, more, last) = handle
            .await
            .map_err(|e| ClientError::new(Status::Internal, e.to_string()))??;
        if more && last.is_none() {
            return Err(ClientError::new(
                Status::ServerError,
                "a daemon answered an empty search page with more to come",
            ));
        }
        if last.is_some() {
            self.after[lane] = last;
        }
        self.merge.push_page(lane, items, more);
        self.fetch(client, lane);
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for handle in self.fetches.iter().flatten() {
            handle.abort();
        }
    }
}

/// One page request, owned so that it can run as a task.
struct PageRequest {
    space: SpaceId,
    region: RegionId,
    /// The indexed attribute when `region` is an indexlet.
    lookup: Option<usize>,
    checks: Arc<Vec<Check>>,
    sort: Option<SortBy>,
    after: Option<SearchAfter>,
    limit: Option<u64>,
    want: Want,
    desc: Arc<SpaceDesc>,
}

impl PageRequest {
    /// Fetches the page from the tail of the region's chain in the newest
    /// configuration, retrying like any read.
    async fn fetch(&self, client: &Client) -> Result<Page, ClientError> {
        if let Some(attr) = self.lookup {
            return self.lookup(client, attr).await;
        }
        client
            .run(move |config, deadline| async move {
                let replica = self.replica(&config)?;
                let request = match self.want {
                    Want::Objects => DaemonRequest::Search {
                        space: self.space,
                        region: self.region,
                        checks: self.checks.to_vec(),
                        sort: self.sort,
                        after: self.after.clone(),
                        limit: self.limit,
                        auth: client.auth(),
                    },
                    Want::Keys(op) => DaemonRequest::SearchKeys {
                        space: self.space,
                        region: self.region,
                        checks: self.checks.to_vec(),
                        after: self.after.as_ref().map(|a| a.key.clone()),
                        auth: client.auth(),
                        op,
                    },
                };
                let attempts = client.attempts();
                let mut answer = attempts.send(&config, replica, request).await?;
                match attempts.answer_read(&mut answer, deadline).await? {
                    DaemonResponse::SearchPage { objects, more } if self.want == Want::Objects => {
                        let mut items = Vec::with_capacity(objects.len());
                        for (version, object) in objects {
                            check_shape(&self.desc, &object)?;
                            items.push(Item {
                                key: key_bytes(object.key()),
                                sort_value: self.sort.map(|s| object.values[s.attr].clone()),
                                version,
                                payload: Found::Object(object),
                            });
                        }
                        let last = items.last().map(Item::after);
                        Ok((items, more, last))
                    }
                    DaemonResponse::KeysPage { keys, more }
                        if matches!(self.want, Want::Keys(_)) =>
                    {
                        let items: Vec<Item<Found>> = keys
                            .into_iter()
                            .map(|key| Item {
                                key: key_bytes(&key),
                                sort_value: None,
                                version: tessera_types::Version(0),
                                payload: Found::Key(key),
                            })
                            .collect();
                        let last = items.last().map(Item::after);
                        Ok((items, more, last))
                    }
                    other => Err(unexpected(config.epoch, other)),
                }
            })
            .await
    }

    /// A page of a lookup: a page of entries from the indexlet's tail,
    /// then the objects they name from their point leaders, all at once,
    /// each kept only if its current value is the entry's (the object is
    /// the ground truth: an entry may be of an update that has not
    /// committed at the point leader yet, or of a value since replaced)
    /// and every check holds on it.
    async fn lookup(&self, client: &Client, attr: usize) -> Result<Page, ClientError> {
        let on_attr: Vec<Check> = self
            .checks
            .iter()
            .filter(|c| c.attr == attr && c.path.is_none())
            .cloned()
            .collect();
        let descending = self.sort.is_some_and(|s| s.descending);
        let (entries, more, last) = client
            .run(|config, deadline| {
                let on_attr = on_attr.clone();
                async move {
                    let replica = self.replica(&config)?;
                    let request = DaemonRequest::Lookup {
                        space: self.space,
                        region: self.region,
                        checks: on_attr,
                        descending,
                        after: self.after.clone(),
                        limit: self.limit,
                    };
                    let attempts = client.attempts();
                    let mut answer = attempts.send(&config, replica, request).await?;
                    match attempts.answer_read(&mut answer, deadline).await? {
                        DaemonResponse::LookupPage {
                            entries,
                            more,
                            last,
                        } => Ok((entries, more, last)),
                        other => Err(unexpected(config.epoch, other)),
                    }
                }
            })
            .await?;
        let mut gets = tokio::task::JoinSet::new();
        for (position, (value, key)) in entries.into_iter().enumerate() {
            let (client, space) = (client.clone(), self.space);
            gets.spawn(async move {
                let found = client.get_object(space, &key).await;
                (position, value, key, found)
            });
        }
        let mut found = Vec::with_capacity(gets.len());
        while let Some(joined) = gets.join_next().await {
            let (position, value, key, object) =
                joined.map_err(|e| ClientError::new(Status::Internal, e.to_string()))?;
            found.push((position, value, key, object?));
        }
        found.sort_by_key(|(position, ..)| *position);
        let items = found
            .into_iter()
            .filter_map(|(_, value, key, object)| {
                let (version, object) = object?;
                let current = object.values.get(attr).and_then(sort_key);
                let matches = current.is_some() && current == sort_key(&value);
                (matches && self.checks.iter().all(|c| c.matches(&object))).then(|| Item {
                    key: key_bytes(&key),
                    sort_value: Some(value),
                    version,
                    payload: match self.want {
                        Want::Objects => Found::Object(object),
                        Want::Keys(_) => Found::Key(key),
                    },
                })
            })
            .collect();
        Ok((items, more, last))
    }

    /// The replica to ask: the tail of the region's chain.
    fn replica(&self, config: &Configuration) -> Result<tessera_types::DaemonId, Step> {
        match config.region(self.region) {
            Some((space, _, region)) if space.id == self.space => match region.chain.last() {
                Some(&tail) => Ok(tail),
                None => Err(Step::Later(ClientError::new(
                    Status::Offline,
                    format!(
                        "region {} of space {:?} has no replica",
                        region.id, space.desc.name
                    ),
                ))),
            },
            _ => Err(Step::Fail(ClientError::new(
                Status::UnknownSpace,
                format!(
                    "region {} of the searched space is gone from configuration {}",
                    self.region, config.epoch
                ),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles only if a stream and its `next` future can move to another
    /// task or thread (a binding spawns them on a runtime).
    #[allow(dead_code)]
    fn streams_are_send(client: &Client, stream: &mut SearchStream) {
        fn send<T: Send>(_: T) {}
        send(client.search_stream("s", Vec::<(&str, PredOp)>::new()));
        send(stream.next());
        send(client.count("s", Vec::<(&str, PredOp)>::new()));
        send(client.group_del("s", Vec::<(&str, PredOp)>::new()));
    }
}
