//! The async [`Client`]: connecting, key operations and result decoding.
//! Every operation runs through the retry machinery of `attempt.rs`;
//! searches and counts live beside their stream in `stream.rs`.

use crate::attempt::{check_shape, owned, point_leader, unexpected, Attempts, Step};
use crate::coord::ConfigCache;
use crate::error::ClientError;
use crate::ops::{Op, Outcome};
use crate::pool::DaemonPool;
use crate::record::Record;
use crate::resolve;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClient, CoordClientOptions, CoordLink};
use tessera_protocol::Transport;
use tessera_protocol::{
    ClientRef, DaemonRequest, DaemonResponse, Status, UpdateFlags, UpdateRequest,
    FRAME_BYTES_MAX_DEFAULT,
};
use tessera_types::lookup::plan_lookup;
use tessera_types::plan::{describe_plan, plan_search};
use tessera_types::replex::{no_live_daemon, ReadLane};
use tessera_types::{Configuration, Epoch, PredOp, RegionId, Space, SpaceDesc, Value};
use tokio::time::Instant;

/// Knobs of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long an operation keeps retrying through stale epochs,
    /// unreachable replicas and unanswered updates before it fails with
    /// RECONFIGURE (or COORDFAIL when the coordinator cannot be reached).
    /// Also bounds `connect`.
    pub retry_time_max: Duration,
    /// How long one attempt of an update waits for its point leader's
    /// answer before the client retries it (with the same request number,
    /// so it is not applied twice). One attempt of a read (a get, a search
    /// page) waits as long before it is sent again.
    pub update_timeout: Duration,
    /// How long opening a TCP connection to a daemon may take.
    pub connect_timeout: Duration,
    /// The largest frame accepted from a daemon, and sent to one.
    pub frame_bytes_max: usize,
    /// Plain TCP (the default) or TLS to the coordinator and the daemons
    /// ([`Transport::tls`] with the cluster's CA).
    pub transport: Transport,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            retry_time_max: Duration::from_secs(10),
            update_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
            transport: Transport::plain(),
        }
    }
}

/// The async Tessera client.
///
/// It bootstraps from one coordinator address, caches the configuration
/// (a background task long-polls for newer ones), and routes locally: key
/// operations go to the point leader of the key (the head of the chain of
/// the key-subspace region holding it); searches go to one replica (the
/// tail) of each region the search plan names, and the answers are merged
/// with each key at most once.
///
/// Retries: an operation that meets a daemon with a newer epoch fetches that
/// configuration and retries; one that meets a daemon behind it, a replica
/// it cannot connect to, or a daemon that refuses to serve (it lost its
/// lease, or no longer leads the key) retries after a short pause with the
/// newest configuration; all within [`ClientOptions::retry_time_max`]. A
/// read whose connection fails mid-request is retried too. So is an update
/// whose connection fails, or whose answer does not come within
/// [`ClientOptions::update_timeout`], after it was sent: every attempt
/// carries the same `(client id, request number)`, and the point leader —
/// the old one or a new one after a failure — recognizes a request it has
/// seen, attaching the retry to the update still in flight or answering
/// from the key's record of recent writers, so the update is applied at
/// most once. Only when the retry time runs out without a definite answer
/// after an attempt may have arrived does an update fail with RECONFIGURE,
/// meaning its outcome is unknown.
///
/// Cheap to clone; clones share connections and the configuration.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// What this handle's requests carry for spaces `with authorization`
    /// (see [`Client::with_auth`]); handles share everything else.
    authorization: Arc<crate::auth::Authorization>,
}

struct Inner {
    attempts: Attempts,
    options: ClientOptions,
    /// Random per client; with `request_no_next` it names every update.
    client_id: u64,
    request_no_next: AtomicU64,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.poller.abort();
        self.attempts.pool.close_all();
    }
}

impl Client {
    /// Connects through the coordinator member at `coordinator` (`host:port`)
    /// and fetches the configuration. COORDFAIL when none arrives in time.
    pub async fn connect(coordinator: &str) -> Result<Client, ClientError> {
        Client::connect_with([coordinator], ClientOptions::default()).await
    }

    /// Like [`Client::connect`], with several member addresses and options.
    pub async fn connect_with<I, S>(
        coordinators: I,
        options: ClientOptions,
    ) -> Result<Client, ClientError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let deadline = Instant::now() + options.retry_time_max;
        let coord = CoordClient::with_link(
            coordinators,
            CoordClientOptions {
                attempt_timeout: Duration::from_secs(2),
                give_up_after: options.retry_time_max,
            },
            CoordLink {
                transport: options.transport.clone(),
                admin_token: None,
            },
        );
        let cache = ConfigCache::start(coord, deadline).await?;
        let poller = cache.spawn_poller();
        Ok(Client {
            inner: Arc::new(Inner {
                attempts: Attempts::new(
                    cache,
                    DaemonPool::new(
                        options.frame_bytes_max,
                        options.connect_timeout,
                        options.transport.clone(),
                    ),
                    options.retry_time_max,
                    options.update_timeout,
                ),
                options,
                client_id: rand::random(),
                request_no_next: AtomicU64::new(1),
                poller,
            }),
            authorization: Arc::default(),
        })
    }

    pub(crate) fn authorization(&self) -> &crate::auth::Authorization {
        &self.authorization
    }

    pub(crate) fn set_authorization(&mut self, authorization: Arc<crate::auth::Authorization>) {
        self.authorization = authorization;
    }

    /// The newest configuration this client knows.
    pub fn config(&self) -> Arc<Configuration> {
        self.inner.attempts.cache.current()
    }

    /// The random id that, with a request number, names each update.
    pub fn client_id(&self) -> u64 {
        self.inner.client_id
    }

    /// Asks the coordinator for a newer configuration now (waiting up to
    /// `wait` for one) and installs it.
    pub async fn refresh(&self, wait: Duration) -> Result<Arc<Configuration>, ClientError> {
        self.inner.attempts.cache.fetch(wait).await?;
        Ok(self.config())
    }

    /// Waits until this client knows a configuration of at least `epoch`.
    pub async fn wait_for_epoch(&self, epoch: Epoch, timeout: Duration) -> Result<(), ClientError> {
        self.inner
            .attempts
            .cache
            .wait_for(epoch, Instant::now() + timeout)
            .await
    }

    /// The schema of a space (UNKNOWNSPACE when it does not exist, after
    /// asking the coordinator for a newer configuration and waiting half a
    /// second for one: the member asked may lag its leader).
    pub async fn space(&self, space: &str) -> Result<SpaceDesc, ClientError> {
        self.run(move |config, _| async move { Ok(resolve::space(&config, space)?.desc.clone()) })
            .await
    }

    // ------------------------------------------------------------ key ops

    /// The object stored under `key`, without the key attribute; `None`
    /// when there is none.
    pub async fn get(
        &self,
        space: &str,
        key: impl Into<Value>,
    ) -> Result<Option<Record>, ClientError> {
        let key = &key.into();
        let (id, desc, key) = self
            .run(move |config, _| async move {
                let space = resolve::space(&config, space)?;
                let key = resolve::key(&space.desc, key.clone())?;
                Ok((space.id, space.desc.clone(), key))
            })
            .await?;
        let found = self.get_object(id, &key).await?;
        Ok(found.map(|(version, object)| Record::from_object(&desc, version, object, false)))
    }

    /// The committed object stored under `key` in space `space` (by id),
    /// with its version; `None` when there is none. What a lookup reads
    /// for each index entry it found.
    ///
    /// The point leader answers, which is linearizable. In a replex space
    /// whose key region has no live daemon the other replexes answer
    /// instead ([`Client::redirected_get`]), which is not.
    pub(crate) async fn get_object(
        &self,
        space: tessera_types::SpaceId,
        key: &Value,
    ) -> Result<Option<(tessera_types::Version, tessera_types::Object)>, ClientError> {
        let read = self
            .run(move |config, deadline| async move {
                let Some(space) = config.space_by_id(space) else {
                    return Err(Step::Fail(ClientError::new(
                        Status::UnknownSpace,
                        "the space was removed",
                    )));
                };
                // A key region being refreshed keeps its live point
                // leader, which answers gets as before (only searches
                // avoid its copy until the refresh completes).
                let lost = space.desc.replex.is_some()
                    && space
                        .key_region(key)
                        .is_ok_and(|r| no_live_daemon(&config, r));
                if lost {
                    let key_attr = space.desc.attrs[0].name.clone();
                    return Ok(GetRoute::Redirect(space.desc.name.clone(), key_attr));
                }
                self.get_at_point_leader(&config, space, key, deadline)
                    .await
                    .map(GetRoute::Read)
            })
            .await?;
        match read {
            GetRoute::Read(found) => Ok(found),
            GetRoute::Redirect(space, key_attr) => {
                self.redirected_get(&space, &key_attr, key).await
            }
        }
    }

    /// One attempt of a get at the key's point leader.
    async fn get_at_point_leader(
        &self,
        config: &Configuration,
        space: &Space,
        key: &Value,
        deadline: Instant,
    ) -> Result<Option<(tessera_types::Version, tessera_types::Object)>, Step> {
        let request = DaemonRequest::Get {
            space: space.id,
            key: key.clone(),
            auth: self.auth(),
        };
        let attempts = self.attempts();
        let mut answer = attempts
            .send(config, point_leader(config, space, key)?, request)
            .await?;
        match attempts.answer_read(&mut answer, deadline).await? {
            DaemonResponse::Found { version, object } => {
                let object = object.decode().map_err(|e| {
                    Step::Fail(ClientError::new(
                        Status::ServerError,
                        format!("a daemon returned a malformed object: {e}"),
                    ))
                })?;
                check_shape(&space.desc, &object)?;
                Ok(Some((version, object)))
            }
            DaemonResponse::Failed {
                status: Status::NotFound,
                ..
            } => Ok(None),
            other => Err(unexpected(config.epoch, other)),
        }
    }

    /// Runs one update of `key`: `ops` (applied together or not at all)
    /// under `flags` (API.md §3.5), if every predicate holds on an existing
    /// object. The outcome carries the precise reason of a CMPFAIL; every
    /// other status is an error. The building block of every mutator.
    pub async fn execute<P: AsRef<str>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        flags: UpdateFlags,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        ops: Vec<(String, Op)>,
    ) -> Result<Outcome, ClientError> {
        self.update(space, key.into(), flags, owned(predicates), ops, false)
            .await
    }

    pub(crate) async fn update(
        &self,
        space: &str,
        key: Value,
        flags: UpdateFlags,
        predicates: Vec<(String, PredOp)>,
        ops: Vec<(String, Op)>,
        refuse_dupes: bool,
    ) -> Result<Outcome, ClientError> {
        // One request number for every attempt: a point leader that has
        // seen it (pending, or among the key's recent writers) answers the
        // retry instead of applying the update again.
        let request_no = self.inner.request_no_next.fetch_add(1, Ordering::Relaxed);
        let client = ClientRef {
            client_id: self.inner.client_id,
            request_no,
        };
        // Set once an attempt may have reached a point leader: from then on
        // a failure to get an answer leaves the outcome unknown.
        let maybe_applied = &AtomicBool::new(false);
        // The epoch of the first attempt, which every retry carries (see
        // `UpdateRequest::since`).
        let since = &std::sync::OnceLock::new();
        let (key, predicates, ops) = (&key, &predicates, &ops);
        let update_timeout = self.inner.options.update_timeout;
        let result = self
            .run(move |config, deadline| async move {
                let space = resolve::space(&config, space)?;
                let key = resolve::key(&space.desc, key.clone())?;
                let checks =
                    resolve::checks(&space.desc, predicates.iter().map(|(n, p)| (n, p.clone())))?;
                let mutations = crate::ops::mutations(&space.desc, ops, refuse_dupes)?;
                let request = DaemonRequest::Update(UpdateRequest {
                    space: space.id,
                    key: key.clone(),
                    client,
                    since: *since.get_or_init(|| config.epoch),
                    flags,
                    checks,
                    mutations,
                    auth: self.auth(),
                    secret: self.secret(),
                });
                let leader = point_leader(&config, space, &key)?;
                let mut answer = self.attempts().send(&config, leader, request).await?;
                maybe_applied.store(true, Ordering::Relaxed);
                // An attempt waits at most `update_timeout`, and not much
                // past the retry time: the retry attaches to the update if
                // it is still in flight.
                let wait_until = (Instant::now() + update_timeout)
                    .min(deadline.max(Instant::now() + Duration::from_secs(1)));
                let response = match tokio::time::timeout_at(wait_until, answer.next()).await {
                    Ok(Ok(response)) => response,
                    Ok(Err(e)) => {
                        return Err(Step::Later(ClientError::new(
                            Status::Reconfigure,
                            format!("{e} while an update was in flight"),
                        )));
                    }
                    Err(_) => {
                        return Err(Step::Later(ClientError::new(
                            Status::Reconfigure,
                            "the point leader did not answer in time",
                        )));
                    }
                };
                match response {
                    DaemonResponse::Done => Ok(Outcome::Done),
                    DaemonResponse::Failed {
                        status: Status::NotFound,
                        ..
                    } => Ok(Outcome::NotFound),
                    DaemonResponse::CmpFail { kind, reason } => {
                        Ok(Outcome::CmpFail { kind, reason })
                    }
                    other => Err(unexpected(config.epoch, other)),
                }
            })
            .await;
        match result {
            Err(e) if maybe_applied.load(Ordering::Relaxed) && is_transient(e.status) => {
                Err(ClientError::new(
                    Status::Reconfigure,
                    format!(
                        "no definite answer within the retry time ({}); the update may or may not have been applied",
                        e.message
                    ),
                ))
            }
            other => other,
        }
    }

    /// Checks an operation as it would be checked before sending, and
    /// sends nothing: the space exists (asking the coordinator once for a
    /// newer configuration if not), the key has the key's type, every
    /// predicate is valid for its attribute, every operation applies to its
    /// attribute, and `sort_by` (a sorted search's attribute) is sortable.
    /// The errors are those the operation itself would raise before
    /// sending (UNKNOWNSPACE, WRONGTYPE, UNKNOWNATTR, DONTUSEKEY …), so a
    /// caller that starts the operation in the background can report them
    /// at once.
    pub async fn check<P: AsRef<str>>(
        &self,
        space: &str,
        key: Option<&Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        ops: &[(String, Op)],
        sort_by: Option<&str>,
    ) -> Result<(), ClientError> {
        let predicates = &owned(predicates);
        self.run(move |config, _| async move {
            let space = resolve::space(&config, space)?;
            if let Some(key) = key {
                resolve::key(&space.desc, key.clone())?;
            }
            resolve::checks(&space.desc, predicates.iter().map(|(n, p)| (n, p.clone())))?;
            crate::ops::mutations(&space.desc, ops, false)?;
            if let Some(name) = sort_by {
                resolve::sort_attr(&space.desc, name)?;
            }
            Ok(())
        })
        .await
    }

    /// How a search with these predicates would run: the subspace chosen
    /// and the regions (with their replicas) it would contact.
    pub async fn search_describe<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<String, ClientError> {
        let predicates = &owned(predicates);
        self.run(move |config, _| async move {
            let space = resolve::space(&config, space)?;
            let checks =
                resolve::checks(&space.desc, predicates.iter().map(|(n, p)| (n, p.clone())))?;
            Ok(describe_search(&config, space, &checks))
        })
        .await
    }

    /// The retry machinery this client's operations run through.
    pub(crate) fn attempts(&self) -> &Attempts {
        &self.inner.attempts
    }

    /// [`Attempts::run`] with this client's attempts.
    pub(crate) async fn run<T, F, Fut>(&self, attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(Arc<Configuration>, Instant) -> Fut,
        Fut: std::future::Future<Output = Result<T, Step>>,
    {
        self.inner.attempts.run(attempt).await
    }
}

/// Where a get is answered.
enum GetRoute {
    /// By the point leader: the object and its version, if any.
    Read(Option<(tessera_types::Version, tessera_types::Object)>),
    /// By a search of the other replexes (space and key attribute names):
    /// the key region has no live daemon.
    Redirect(String, String),
}

/// Statuses that say "no answer yet" rather than "this is the answer".
fn is_transient(status: Status) -> bool {
    matches!(
        status,
        Status::Reconfigure | Status::Timeout | Status::Offline | Status::CoordFail
    )
}

/// The text of `search_describe`: the plan (subspace, regions contacted,
/// the alternatives), each planned region without a live daemon and the
/// regions read in its place, and per region the replica the search
/// would ask.
fn describe_search(
    config: &Configuration,
    space: &Space,
    checks: &[tessera_types::Check],
) -> String {
    use std::fmt::Write;
    let plan = plan_search(space, checks);
    let lookup = plan_lookup(space, checks, None, &plan);
    let mut out = describe_plan(space, checks, &plan, lookup.as_ref());
    let (position, asked) = match &lookup {
        Some(lookup) => (lookup.subspace, &lookup.indexlets),
        None => (plan.subspace, &plan.regions),
    };
    let Some(subspace) = space.subspaces.get(position) else {
        return out;
    };
    let lanes = match crate::stream::plan_lanes(config, space, checks, None, None) {
        Ok(lanes) => lanes.lanes,
        Err(Step::Fail(e) | Step::Later(e)) => {
            let _ = writeln!(
                out,
                "a planned region cannot be read: {}; the search retries until a rebuild brings it back, then fails with {}",
                e.message,
                e.symbol()
            );
            asked
                .iter()
                .map(|&i| ReadLane {
                    region: subspace.regions[i].id,
                    lost: None,
                })
                .collect()
        }
        Err(Step::Newer(_)) => Vec::new(),
    };
    let mut lost: Vec<RegionId> = lanes
        .iter()
        .filter_map(|l| Some(l.lost.as_ref()?.region))
        .collect();
    lost.dedup();
    for region in lost {
        let to: Vec<String> = lanes
            .iter()
            .filter(|l| l.lost.as_ref().is_some_and(|x| x.region == region))
            .map(|l| l.region.to_string())
            .collect();
        let _ = writeln!(
            out,
            "region {region} has no live daemon: redirected to {} regions of other parts ({}), keeping the objects region {region} places (not linearizable)",
            to.len(),
            to.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "replicas asked (chain tails) at epoch {}:",
        config.epoch.0
    );
    for lane in &lanes {
        let replica = match config
            .region(lane.region)
            .and_then(|(_, _, r)| r.chain.last())
        {
            Some(&d) => format!("{d} at {}", config.daemon_addr(d).unwrap_or("?")),
            None => "no replica".to_string(),
        };
        let instead = lane
            .lost
            .as_ref()
            .map_or(String::new(), |l| format!(" (for region {})", l.region));
        let _ = writeln!(out, "  region {} -> {replica}{instead}", lane.region);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles only if the public futures can be spawned on a runtime.
    #[allow(dead_code)]
    fn futures_are_send(client: &Client) {
        fn send<T: Send>(_: T) {}
        let no_predicates = Vec::<(&str, PredOp)>::new;
        send(client.space("s"));
        send(client.get("s", Value::Int(1)));
        send(client.put("s", Value::Int(1), vec![("a", Value::Int(1))]));
        send(client.put_if_not_exist("s", Value::Int(1), vec![("a", Value::Int(1))]));
        send(client.cond_put(
            "s",
            Value::Int(1),
            no_predicates(),
            vec![("a", Value::Int(1))],
        ));
        send(client.del("s", Value::Int(1)));
        send(client.search("s", no_predicates()));
        send(client.sorted_search("s", no_predicates(), "a", 1, true));
        send(client.count("s", no_predicates()));
        send(client.search_describe("s", no_predicates()));
        send(client.check("s", None, no_predicates(), &[], None));
    }
}
