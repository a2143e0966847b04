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
//!
//! Reads during a failure (replex spaces, `docs/design/replex.md`): a
//! planned region whose chain names no live daemon is read through its
//! covering set instead ([`redirect_reads`]): one lane per covering region,
//! each keeping only objects of the lost region (and of those two
//! covering regions hold, the first's), so every object still comes from
//! exactly one lane. A region that fails while the stream runs re-plans
//! the stream, like a dropped subspace. Such reads see committed data of
//! other replexes and are not linearizable (C.4 #6).

use crate::attempt::{check_len, owned, unexpected, Step};
use crate::client::Client;
use crate::error::ClientError;
use crate::merge::{Item, Merge, Pop};
use crate::record::{malformed, RawRecord, Record};
use crate::resolve;
use std::sync::Arc;
use tessera_protocol::{
    AuthOp, DaemonRequest, DaemonResponse, ObjectBytes, SearchAfter, SortBy, Status,
};
use tessera_types::coordinate::key_bytes;
use tessera_types::lookup::plan_lookup;
use tessera_types::plan::{plan_search, regions_in_value_order};
use tessera_types::replex::{failed_regions, redirect_reads, CoverError, LostRegion, ReadLane};
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
    /// An object decoded on the way (a lookup's gets, a lane standing in
    /// for a lost region).
    Object(tessera_types::Object),
    /// An object as the daemon sent it, its shape checked, not decoded.
    Bytes(ObjectBytes),
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
    lanes: Vec<ReadLane>,
    /// The space as planned, when a lane stands in for a lost region (its
    /// grid decides which objects the lane keeps).
    planned_on: Option<Arc<Space>>,
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
    /// Times the search was planned again after its subspace was dropped
    /// or a region it read lost its last live daemon.
    replans: u32,
}

/// A search re-plans at most this many times (each after the subspace it
/// read was dropped, or a region it read failed); a layout that keeps
/// changing faster fails it.
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

    /// The committed object under `key` when its key region has no live
    /// daemon: a search for `key == k`, which the plan sends to the key
    /// region and the failure to its covering set. Not linearizable: the
    /// other replexes may hold a version the point leader has not yet
    /// committed, or miss one it committed a moment ago (C.4 #6).
    pub(crate) async fn redirected_get(
        &self,
        space: &str,
        key_attr: &str,
        key: &Value,
    ) -> Result<Option<(tessera_types::Version, tessera_types::Object)>, ClientError> {
        let mut stream = self.stream(
            space,
            [(key_attr, PredOp::Eq(key.clone()))],
            None,
            None,
            Want::Objects,
        );
        match stream.next_found().await {
            None => Ok(None),
            Some(Ok((version, Found::Object(object)))) => Ok(Some((version, object))),
            Some(Ok((version, Found::Bytes(bytes)))) => bytes
                .decode()
                .map(|object| Some((version, object)))
                .map_err(malformed),
            Some(Ok((_, Found::Key(_)))) => Err(ClientError::new(
                Status::Internal,
                "a redirected get yielded a key where an object was due",
            )),
            Some(Err(e)) => Err(e),
        }
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

fn key_not_object() -> ClientError {
    ClientError::new(
        Status::Internal,
        "a search stream yielded a key where an object was due",
    )
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
                (State::Running(r), Found::Bytes(bytes)) => {
                    RawRecord::new(r.desc.clone(), version, bytes).to_record()
                }
                _ => Err(key_not_object()),
            }),
        )
    }

    /// The next matching object, not decoded yet ([`RawRecord`]): the
    /// stream of [`SearchStream::next`] for a caller that reads a few
    /// attributes of each object, or none. A sorted search with a limit
    /// decodes nothing of the objects its merge drops either way.
    pub async fn next_raw(&mut self) -> Option<Result<RawRecord, ClientError>> {
        let found = self.next_found().await?;
        Some(
            found.and_then(|(version, found)| match (&self.state, found) {
                (State::Running(r), Found::Bytes(bytes)) => {
                    Ok(RawRecord::new(r.desc.clone(), version, bytes))
                }
                (State::Running(r), Found::Object(object)) => Ok(RawRecord::new(
                    r.desc.clone(),
                    version,
                    ObjectBytes::encode(&object),
                )),
                _ => Err(key_not_object()),
            }),
        )
    }

    /// The next key of a keys-only stream.
    pub(crate) async fn next_key(&mut self) -> Option<Result<Value, ClientError>> {
        Some(self.next_found().await?.and_then(|(_, found)| {
            match found {
                Found::Key(key) => Ok(key),
                Found::Object(object) => {
                    Ok(object.values.into_iter().next().unwrap_or(Value::Int(0)))
                }
                Found::Bytes(bytes) => bytes
                    .view()
                    .and_then(|view| view.value(0))
                    .map(|key| key.unwrap_or(Value::Int(0)))
                    .map_err(malformed),
            }
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
                    let replanned = if running.plan_is_stale(&self.client, &e) {
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
                let lanes = plan_lanes(&config, space, &checks, sort, limit)?;
                Ok((space.id, space.desc.clone(), lanes, checks, sort))
            })
            .await?;
        // A lookup streams in its index's order: a search without a sort
        // is sorted by the indexed attribute, ascending.
        let sort = sort.or(lanes.lookup.map(|attr| SortBy {
            attr,
            descending: false,
        }));
        let Lanes {
            lanes: read_lanes,
            lookup,
            planned_on,
            sequential,
        } = lanes;
        let lanes = read_lanes.len();
        let mut running = Running {
            space: space_id,
            desc: Arc::new(desc),
            lanes: read_lanes,
            planned_on,
            lookup,
            checks: Arc::new(checks),
            sort,
            want,
            merge: Merge::new(lanes, sort, limit).sequential(sequential),
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
pub(crate) struct Lanes {
    pub(crate) lanes: Vec<ReadLane>,
    /// The indexed attribute when the regions are a global index's
    /// indexlets.
    lookup: Option<usize>,
    /// The space as planned when a lane stands in for a lost region.
    planned_on: Option<Arc<Space>>,
    /// Whether every item of a lane comes before every item of the next
    /// in the stream's order (the merge then reads them one at a time):
    /// a lookup's indexlets, or a sorted search's regions cut only by the
    /// sort attribute's value ([`regions_in_value_order`]).
    sequential: bool,
}

/// Plans a search: through a global index when one beats the subspaces
/// ([`plan_lookup`]), its indexlets in the stream's order; else the
/// fewest regions of one subspace ([`plan_search`]), each region without
/// a live daemon replaced by its covering set ([`redirect_reads`]).
///
/// When some lost region has no covering set the step is to wait and
/// retry (a rebuild may bring it back), failing with OFFLINE and the
/// reason once the retry time runs out.
pub(crate) fn plan_lanes(
    config: &Configuration,
    space: &Space,
    checks: &[Check],
    sort: Option<SortBy>,
    limit: Option<u64>,
) -> Result<Lanes, Step> {
    let plan = plan_search(space, checks);
    let by = sort.map(|s| (s.attr, limit.is_some()));
    if let Some(lookup) = plan_lookup(space, checks, by, &plan) {
        let layout = &space.subspaces[lookup.subspace];
        let mut lanes: Vec<ReadLane> = lookup
            .indexlets
            .iter()
            .map(|&i| ReadLane {
                region: layout.regions[i].id,
                lost: None,
            })
            .collect();
        if sort.is_some_and(|s| s.descending) {
            lanes.reverse();
        }
        return Ok(Lanes {
            lanes,
            lookup: Some(lookup.attr),
            planned_on: None,
            sequential: true,
        });
    }
    let subspace = &space.subspaces[plan.subspace];
    // With a limit, regions that hold consecutive stretches of the sort
    // attribute are read in its order, one after the other: a range that
    // crosses into a second region reads that region only for what the
    // first lacked, not for the whole limit again.
    let in_order = match (sort, limit) {
        (Some(sort), Some(_)) => regions_in_value_order(space, &plan, sort.attr).map(|mut r| {
            if sort.descending {
                r.reverse();
            }
            r
        }),
        _ => None,
    };
    let planned: Vec<RegionId> = in_order
        .as_ref()
        .unwrap_or(&plan.regions)
        .iter()
        .map(|&i| subspace.regions[i].id)
        .collect();
    let failed = failed_regions(config, space);
    let lanes = redirect_reads(space, &failed, &planned).map_err(|e| cover_step(space, e))?;
    let redirected = lanes.iter().any(|l| l.lost.is_some());
    Ok(Lanes {
        lanes,
        lookup: None,
        planned_on: redirected.then(|| Arc::new(space.clone())),
        sequential: in_order.is_some() && !redirected,
    })
}

/// The step for a read whose lost region cannot be covered.
fn cover_step(space: &Space, e: CoverError) -> Step {
    match e {
        CoverError::Unavailable(_) => Step::Later(ClientError::new(
            Status::Offline,
            format!("space {:?}: {e}", space.desc.name),
        )),
        CoverError::NoRegion(_) => Step::Fail(ClientError::new(
            Status::Internal,
            format!(
                "space {:?}: planning a redirected read: {e}",
                space.desc.name
            ),
        )),
    }
}

impl Running {
    /// Whether the plan no longer fits the newest configuration while the
    /// space remains: a region it reads is gone (the coordinator dropped
    /// the subspace it was planned on: `rm-subspace`, `relayout`), or has
    /// no live daemon in a replex space (a region's page fetch fails with
    /// OFFLINE then, so that error re-plans too, even if the region has
    /// come back since).
    fn plan_is_stale(&self, client: &Client, error: &ClientError) -> bool {
        let config = client.config();
        let Some(space) = config.space_by_id(self.space) else {
            return false;
        };
        if self.lanes.iter().any(|l| config.region(l.region).is_none()) {
            return true;
        }
        if space.desc.replex.is_none() {
            return false;
        }
        let failed = failed_regions(&config, space);
        error.status == Status::Offline || self.lanes.iter().any(|l| failed.contains(&l.region))
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
                "the searched space's layout or failures changed too often during the search",
            ));
        }
        let (space, checks, sort) = (self.space, self.checks.clone(), self.sort);
        let limit = self.merge.limit_left();
        let Lanes {
            lanes: read_lanes,
            lookup,
            planned_on,
            sequential,
        } = client
            .run(move |config, _| {
                let checks = checks.clone();
                async move {
                    let Some(space) = config.space_by_id(space) else {
                        return Err(Step::Fail(ClientError::new(
                            Status::UnknownSpace,
                            "the searched space was removed during the search",
                        )));
                    };
                    plan_lanes(&config, space, &checks, sort, limit)
                }
            })
            .await?;
        for handle in self.fetches.iter().flatten() {
            handle.abort();
        }
        // The stream keeps its order (the sort, forced by a first lookup
        // or asked for), so every new lane continues after what was
        // yielded, through a subspace or an index on the sort attribute.
        let lanes = read_lanes.len();
        self.lanes = read_lanes;
        self.planned_on = planned_on;
        self.lookup = lookup;
        self.after = vec![self.yielded.clone(); lanes];
        self.fetches = (0..lanes).map(|_| None).collect();
        self.merge.restart(lanes, sequential);
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
            region: self.lanes[lane].region,
            lost: self.lanes[lane]
                .lost
                .clone()
                .and_then(|lost| Some((lost, self.planned_on.clone()?))),
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
    /// When `region` stands in for a lost region: that region, and the
    /// space as planned, whose grid decides which objects are kept.
    lost: Option<(LostRegion, Arc<Space>)>,
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
    /// configuration, retrying like any read. A lane standing in for a
    /// lost region keeps only objects of that region; it reads whole
    /// objects even for a keys-only search, since a key alone does not
    /// say where the other parts place an object.
    async fn fetch(&self, client: &Client) -> Result<Page, ClientError> {
        if let Some(attr) = self.lookup {
            return self.lookup(client, attr).await;
        }
        let objects = self.want == Want::Objects || self.lost.is_some();
        client
            .run(move |config, deadline| async move {
                let replica = self.replica(&config)?;
                let request = match self.want {
                    Want::Keys(op) if !objects => DaemonRequest::SearchKeys {
                        space: self.space,
                        region: self.region,
                        checks: self.checks.to_vec(),
                        after: self.after.as_ref().map(|a| a.key.clone()),
                        auth: client.auth(),
                        op,
                    },
                    _ => DaemonRequest::Search {
                        space: self.space,
                        region: self.region,
                        checks: self.checks.to_vec(),
                        sort: self.sort,
                        after: self.after.clone(),
                        limit: self.limit,
                        auth: client.auth(),
                        // The daemon ships only what this lane keeps; the
                        // lane still checks each object it receives.
                        within: self
                            .lost
                            .as_ref()
                            .and_then(|(lost, space)| lost.within(space)),
                    },
                };
                let attempts = client.attempts();
                let mut answer = attempts.send(&config, replica, request).await?;
                match attempts.answer_read(&mut answer, deadline).await? {
                    DaemonResponse::SearchPage {
                        objects: page,
                        more,
                    } if objects => self.objects_page(page, more),
                    DaemonResponse::KeysPage { keys, more } if !objects => {
                        Ok(self.keys_page(keys, more))
                    }
                    other => Err(unexpected(config.epoch, other)),
                }
            })
            .await
    }

    /// A page of whole objects as this lane yields it: objects, or their
    /// keys in a keys-only search; in a lane standing in for a lost region
    /// only the objects it keeps ([`LostRegion::keeps`]). The next page
    /// starts after the last object read, kept or not.
    fn objects_page(
        &self,
        page: Vec<(tessera_types::Version, ObjectBytes)>,
        more: bool,
    ) -> Result<Page, Step> {
        let mut items = Vec::with_capacity(page.len());
        let mut last = None;
        for (version, bytes) in page {
            // Each object is checked whole here (one value per attribute,
            // each well-formed) but only its key and sort value are
            // decoded; the rest waits for the caller.
            let view = bytes.view().map_err(|e| Step::Fail(malformed(e)))?;
            check_len(&self.desc, view.len())?;
            let value = |attr| {
                view.value(attr)
                    .map_err(|e| Step::Fail(malformed(e)))?
                    .ok_or_else(|| Step::Fail(malformed("a value is missing")))
            };
            let key = value(0)?;
            let after = SearchAfter {
                key: key_bytes(&key),
                sort_value: self.sort.map(|s| value(s.attr)).transpose()?,
            };
            last = Some(after.clone());
            let payload = match (self.want, &self.lost) {
                (Want::Keys(_), None) => Found::Key(key),
                (Want::Objects, None) => Found::Bytes(bytes),
                (want, Some(_)) => {
                    let object = bytes.decode().map_err(|e| Step::Fail(malformed(e)))?;
                    if !self.keeps(&object)? {
                        continue;
                    }
                    match want {
                        Want::Objects => Found::Object(object),
                        Want::Keys(_) => Found::Key(key),
                    }
                }
            };
            items.push(Item {
                key: after.key,
                sort_value: after.sort_value,
                version,
                payload,
            });
        }
        Ok((items, more, last))
    }

    /// A page of keys of a region the plan named.
    fn keys_page(&self, keys: Vec<Value>, more: bool) -> Page {
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
        (items, more, last)
    }

    /// Whether this lane keeps an object it read: always, unless it stands
    /// in for a lost region; an object that region cannot place does not
    /// fit the space.
    fn keeps(&self, object: &tessera_types::Object) -> Result<bool, Step> {
        let Some((lost, space)) = &self.lost else {
            return Ok(true);
        };
        lost.keeps(space, self.region, object).ok_or_else(|| {
            Step::Fail(ClientError::new(
                Status::ServerError,
                format!(
                    "a daemon returned an object of space {:?} that region {} cannot place",
                    space.desc.name, lost.region
                ),
            ))
        })
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

    /// The replica to ask: the tail of the region's chain. A region of a
    /// replex space without a live daemon fails at once with OFFLINE: the
    /// stream re-plans and reads it through its covering set (elsewhere a
    /// region without replicas is waited for).
    fn replica(&self, config: &Configuration) -> Result<tessera_types::DaemonId, Step> {
        match config.region(self.region) {
            Some((space, _, region)) if space.id == self.space => {
                let no_replica = || {
                    ClientError::new(
                        Status::Offline,
                        format!(
                            "region {} of space {:?} has no live daemon at epoch {}",
                            region.id, space.desc.name, config.epoch
                        ),
                    )
                };
                if failed_regions(config, space).contains(&region.id) {
                    return Err(Step::Fail(no_replica()));
                }
                match region.chain.last() {
                    Some(&tail) => Ok(tail),
                    None => Err(Step::Later(no_replica())),
                }
            }
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

    use tessera_types::config::{DaemonInfo, DaemonState};
    use tessera_types::{DaemonId, Object, Version};

    /// A configuration holding one Replex-3 space — key, `hybrid k, b
    /// groups 2, 3`, replex `b`, 6 partitions — whose every region has a
    /// daemon of its own, all available.
    fn replex_config() -> Configuration {
        let desc = tessera_types::parse_space(
            "space s key int k attributes int b replex b hybrid k, b groups 2, 3 \
             create 6 partitions",
        )
        .expect("a replex space");
        let mut space = tessera_types::region::default_layout(SpaceId(1), desc);
        let mut config = Configuration::default();
        for region in space.subspaces.iter_mut().flat_map(|l| &mut l.regions) {
            let daemon = DaemonId(region.id.0);
            region.chain = vec![daemon];
            config.daemons.insert(
                daemon,
                DaemonInfo {
                    id: daemon,
                    addr: String::new(),
                    state: DaemonState::Available,
                    metrics: None,
                },
            );
        }
        config.spaces.push(space);
        config
    }

    /// An object of the test space: key `k`, `b` as given. Ints spread
    /// over the axis so that they fall into different regions.
    fn object(k: i64, b: i64) -> Object {
        let spread = |v: i64| v * (i64::MAX / 8);
        Object {
            values: vec![Value::Int(spread(k)), Value::Int(spread(b))],
        }
    }

    fn objects() -> Vec<Object> {
        (-7..8)
            .flat_map(|k| (-7..8).map(move |b| object(k, b)))
            .collect()
    }

    fn lanes_for(config: &Configuration, checks: &[Check]) -> Result<Lanes, Step> {
        plan_lanes(config, &config.spaces[0], checks, None, None)
    }

    #[test]
    fn a_sorted_search_with_a_limit_reads_regions_cut_by_its_sort_in_order() {
        let mut config = replex_config();
        let space = config.spaces[0].clone();
        let checks = [Check::new(1, PredOp::Ge(Value::Int(-(1 << 62))))];
        let by = |attr, descending| Some(SortBy { attr, descending });
        let plan = |config: &Configuration, sort, limit| {
            let Ok(lanes) = plan_lanes(config, &config.spaces[0], &checks, sort, limit) else {
                panic!("a plan");
            };
            lanes
        };
        // The lanes' lowest b, by the regions' bounds.
        let lows = |lanes: &Lanes| -> Vec<u64> {
            lanes
                .lanes
                .iter()
                .map(|l| {
                    let (layout, index) = space
                        .subspaces
                        .iter()
                        .find_map(|s| {
                            let i = s.regions.iter().position(|r| r.id == l.region)?;
                            Some((s, i))
                        })
                        .expect("a planned region");
                    layout.cell_by_attr(index)[&1].0
                })
                .collect()
        };
        let ascending = plan(&config, by(1, false), Some(5));
        assert!(ascending.sequential && ascending.lanes.len() > 1);
        let mut sorted = lows(&ascending);
        sorted.sort_unstable();
        assert_eq!(lows(&ascending), sorted);
        let descending = plan(&config, by(1, true), Some(5));
        assert!(descending.sequential);
        sorted.reverse();
        assert_eq!(lows(&descending), sorted);
        // Without a limit, or sorted by what does not cut these regions,
        // every region is asked at once.
        assert!(!plan(&config, by(1, false), None).sequential);
        assert!(!plan(&config, by(0, false), Some(5)).sequential);
        assert!(!plan(&config, None, Some(5)).sequential);
        // A lane standing in for a lost region holds objects of several
        // stretches of b: not in order any more.
        let lost = ascending.lanes[1].region;
        let daemon = space
            .subspaces
            .iter()
            .flat_map(|s| &s.regions)
            .find(|r| r.id == lost)
            .expect("the region")
            .chain[0];
        config.daemons.get_mut(&daemon).expect("its daemon").state = DaemonState::Offline;
        let redirected = plan(&config, by(1, false), Some(5));
        assert!(redirected.lanes.iter().any(|l| l.lost.is_some()));
        assert!(!redirected.sequential);
    }

    #[test]
    fn a_lost_region_is_planned_as_its_covering_set() {
        let mut config = replex_config();
        let space = config.spaces[0].clone();
        let (hybrid, b_part) = (&space.subspaces[1], &space.subspaces[2]);
        let probe = object(0, 3);
        let lost = b_part.region_of(&probe).id;
        let checks = [Check::new(1, PredOp::Eq(probe.values[1].clone()))];
        let live = lanes_for(&config, &checks).ok().expect("a plan");
        assert_eq!(
            live.lanes,
            vec![ReadLane {
                region: lost,
                lost: None
            }]
        );
        assert!(live.planned_on.is_none());

        // The region's chain empties: the N1 = 2 hybrid regions holding
        // `b`'s group stand in for it, each keeping the lost region's
        // objects.
        let index = b_part.regions.iter().position(|r| r.id == lost).unwrap();
        config.spaces[0].subspaces[2].regions[index].chain.clear();
        let planned = lanes_for(&config, &checks).ok().expect("a plan");
        let (lo, hi) = b_part.cell_by_attr(index)[&1];
        let expected: Vec<RegionId> = (0..hybrid.regions.len())
            .filter(|&h| {
                let (hlo, hhi) = hybrid.cell_by_attr(h)[&1];
                hlo.max(lo) <= hhi.min(hi)
            })
            .map(|h| hybrid.regions[h].id)
            .collect();
        let expected: Vec<ReadLane> = expected
            .iter()
            .map(|&region| ReadLane {
                region,
                lost: Some(LostRegion {
                    part: 2,
                    region: lost,
                    cover: expected.iter().map(|&r| (1, r)).collect(),
                }),
            })
            .collect();
        assert_eq!(expected.len(), 2);
        assert_eq!(planned.lanes, expected);
        assert!(planned.planned_on.is_some());

        // A daemon taken offline fails its region as an empty chain does.
        let mut offline = replex_config();
        let daemon = offline.spaces[0].subspaces[2].regions[index].chain[0];
        offline.daemons.get_mut(&daemon).unwrap().state = DaemonState::Offline;
        let planned_offline = lanes_for(&offline, &checks).ok().expect("a plan");
        assert_eq!(planned_offline.lanes, expected);

        // With the key subspace and the hybrid gone too, nothing covers
        // it: the read waits, then fails with OFFLINE.
        for part in [0, 1] {
            for region in &mut config.spaces[0].subspaces[part].regions {
                region.chain.clear();
            }
        }
        match lanes_for(&config, &checks) {
            Err(Step::Later(e)) => {
                assert_eq!(e.status, Status::Offline);
                assert!(e.message.contains("unavailable"), "{}", e.message);
            }
            _ => panic!("an uncovered region must make the read wait"),
        }
    }

    fn page_request(config: &Configuration, lane: ReadLane, want: Want) -> PageRequest {
        let space = Arc::new(config.spaces[0].clone());
        PageRequest {
            space: space.id,
            region: lane.region,
            lost: lane.lost.map(|l| (l, space.clone())),
            lookup: None,
            checks: Arc::new(Vec::new()),
            sort: None,
            after: None,
            limit: None,
            want,
            desc: Arc::new(space.desc.clone()),
        }
    }

    #[test]
    fn a_redirected_lane_keeps_only_the_lost_regions_objects() {
        let config = replex_config();
        let space = config.spaces[0].clone();
        let page: Vec<(Version, Object)> = objects().into_iter().map(|o| (Version(1), o)).collect();
        // As a daemon ships it.
        let wire: Vec<(Version, ObjectBytes)> = page
            .iter()
            .map(|(v, o)| (*v, ObjectBytes::encode(o)))
            .collect();
        let last = SearchAfter {
            key: key_bytes(page.last().unwrap().1.key()),
            sort_value: None,
        };
        for part in [0, 2] {
            let layout = &space.subspaces[part];
            let region = layout.regions[1].id;
            let failed = std::collections::BTreeSet::from([region]);
            let lanes = redirect_reads(&space, &failed, &[region]).expect("a cover");
            assert!(lanes.len() > 1);
            let mut kept_by_lanes: Vec<Value> = Vec::new();
            for lane in lanes {
                // The part each lane's region belongs to places the objects
                // it holds.
                let holder = space
                    .subspaces
                    .iter()
                    .find(|l| l.regions.iter().any(|r| r.id == lane.region))
                    .unwrap();
                let placed: Vec<Value> = page
                    .iter()
                    .filter(|(_, o)| {
                        layout.region_of(o).id == region && holder.region_of(o).id == lane.region
                    })
                    .map(|(_, o)| o.key().clone())
                    .collect();
                for want in [Want::Objects, Want::Keys(AuthOp::Read)] {
                    let request = page_request(&config, lane.clone(), want);
                    let Ok((items, more, after)) = request.objects_page(wire.clone(), true) else {
                        panic!("a page of the space's objects");
                    };
                    let keys: Vec<Value> = items
                        .iter()
                        .map(|i| match &i.payload {
                            Found::Object(o) if want == Want::Objects => o.key().clone(),
                            Found::Key(k) if want != Want::Objects => k.clone(),
                            other => panic!("{other:?} in a {want:?} search"),
                        })
                        .collect();
                    assert_eq!(keys, placed, "part {part}");
                    // The next page starts after the last object read.
                    assert!(more);
                    assert_eq!(after, Some(last.clone()));
                }
                kept_by_lanes.extend(placed);
            }
            // Together the lanes keep the lost region's objects, each once.
            kept_by_lanes.sort_by_key(key_bytes);
            let mut expected: Vec<Value> = page
                .iter()
                .filter(|(_, o)| layout.region_of(o).id == region)
                .map(|(_, o)| o.key().clone())
                .collect();
            expected.sort_by_key(key_bytes);
            assert!(!expected.is_empty() && expected.len() < page.len());
            assert_eq!(kept_by_lanes, expected);
        }
        // A lane the plan named keeps everything.
        let named = ReadLane {
            region: space.subspaces[0].regions[0].id,
            lost: None,
        };
        let request = page_request(&config, named, Want::Objects);
        let Ok((items, _, _)) = request.objects_page(wire.clone(), false) else {
            panic!("a page");
        };
        assert_eq!(items.len(), page.len());
    }

    #[test]
    fn a_named_lane_passes_objects_on_undecoded_with_their_positions() {
        let config = replex_config();
        let page: Vec<(Version, Object)> = objects()
            .into_iter()
            .enumerate()
            .map(|(i, o)| (Version(i as u64 + 1), o))
            .collect();
        let wire: Vec<(Version, ObjectBytes)> = page
            .iter()
            .map(|(v, o)| (*v, ObjectBytes::encode(o)))
            .collect();
        let named = ReadLane {
            region: config.spaces[0].subspaces[0].regions[0].id,
            lost: None,
        };
        let mut request = page_request(&config, named.clone(), Want::Objects);
        request.sort = Some(SortBy {
            attr: 1,
            descending: false,
        });
        let Ok((items, more, after)) = request.objects_page(wire.clone(), true) else {
            panic!("a page");
        };
        assert!(more);
        let (_, last) = page.last().unwrap();
        assert_eq!(
            after,
            Some(SearchAfter {
                key: key_bytes(last.key()),
                sort_value: Some(last.values[1].clone()),
            })
        );
        assert_eq!(items.len(), page.len());
        for (item, (version, object)) in items.iter().zip(&page) {
            assert_eq!(item.version, *version);
            assert_eq!(item.key, key_bytes(object.key()));
            assert_eq!(item.sort_value.as_ref(), Some(&object.values[1]));
            let Found::Bytes(bytes) = &item.payload else {
                panic!(
                    "{:?}: an object of a named lane is passed on as bytes",
                    item.payload
                );
            };
            assert_eq!(&bytes.decode().unwrap(), object);
            let raw = RawRecord::new(request.desc.clone(), *version, bytes.clone());
            let name = |i: usize| request.desc.attrs[i].name.clone();
            assert_eq!(raw.get(&name(1)).unwrap().as_ref(), Some(&object.values[1]));
            assert_eq!(raw.get("no such attribute").unwrap(), None);
            assert_eq!(&raw.key().unwrap(), object.key());
            let record = raw.to_record().unwrap();
            assert_eq!(record.version, *version);
            assert_eq!(
                record.attrs,
                vec![
                    (name(0), object.values[0].clone()),
                    (name(1), object.values[1].clone())
                ]
            );
        }
        // Keys only: the keys, in order.
        let request = page_request(&config, named.clone(), Want::Keys(AuthOp::Read));
        let Ok((items, _, _)) = request.objects_page(wire, false) else {
            panic!("a page");
        };
        let keys: Vec<&Found> = items.iter().map(|i| &i.payload).collect();
        let want: Vec<Found> = page
            .iter()
            .map(|(_, o)| Found::Key(o.key().clone()))
            .collect();
        assert_eq!(keys, want.iter().collect::<Vec<_>>());
        // An object of the wrong shape, or bytes that are no object, fail
        // the page.
        let request = page_request(&config, named, Want::Objects);
        let short = ObjectBytes::encode(&Object {
            values: vec![Value::Int(1)],
        });
        let cut = {
            let mut bytes = postcard::to_allocvec(&ObjectBytes::encode(&page[0].1)).unwrap();
            bytes.truncate(bytes.len() - 3);
            let len = bytes.len() - 1;
            bytes[0] = u8::try_from(len).unwrap();
            postcard::from_bytes::<ObjectBytes>(&bytes).unwrap()
        };
        for bad in [short, cut] {
            match request.objects_page(vec![(Version(1), bad)], false) {
                Err(Step::Fail(e)) => assert_eq!(e.status, Status::ServerError),
                _ => panic!("a malformed object must fail the page"),
            }
        }
    }

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
