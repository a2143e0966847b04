//! The retry machinery every operation runs through.
//!
//! ```text
//!  operation ──attempt(config, deadline)──▶ Ok(value)
//!      ▲                     │ Err(Step)
//!      └── Newer: wait for that epoch; Later: pause, refresh; Fail: give up
//! ```
//!
//! [`Attempts`] owns the configuration cache and the daemon connections:
//! [`Attempts::run`] retries an attempt against the newest configuration
//! as its [`Step`] asks, within the client's retry time; [`Attempts::send`]
//! and [`Attempts::answer_read`] turn connection failures into steps. The
//! free functions route a key to its point leader and classify answers.

use crate::coord::ConfigCache;
use crate::error::ClientError;
use crate::pool::{Answer, ConnError, DaemonPool};
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::report::ReportLimit;
use tessera_protocol::{DaemonRequest, DaemonResponse, Status};
use tessera_types::{
    Configuration, DaemonId, Epoch, KeyRegionError, Object, Space, SpaceDesc, Value,
};
use tokio::time::Instant;

/// First pause before retrying an operation; it doubles up to the maximum.
const RETRY_PAUSE_FIRST: Duration = Duration::from_millis(10);

/// How long an operation on a space its configuration does not know waits,
/// after one refresh, for a newer configuration: a coordinator member may
/// answer before it applied the space its leader committed.
const UNKNOWN_SPACE_GRACE: Duration = Duration::from_millis(500);
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(500);

/// Why one attempt of an operation did not finish, and what to do next.
pub(crate) enum Step {
    /// Give up with this error.
    Fail(ClientError),
    /// A daemon acts on a newer configuration: fetch it, then retry.
    Newer(Epoch),
    /// Retry after a pause (a daemon behind the client, a replica that could
    /// not be reached, a chain without members). The error is reported if
    /// time runs out.
    Later(ClientError),
}

impl From<ClientError> for Step {
    fn from(e: ClientError) -> Step {
        Step::Fail(e)
    }
}

/// What every attempt needs: the newest configuration, the connections to
/// daemons, and how long an operation may keep retrying.
pub(crate) struct Attempts {
    pub(crate) cache: Arc<ConfigCache>,
    pub(crate) pool: DaemonPool,
    retry_time_max: Duration,
    /// How long one attempt of a read waits for its answer.
    read_timeout: Duration,
    /// This client's identity when it reports a daemon unreachable, and
    /// when it last reported each one.
    reporter: u64,
    reported: std::sync::Mutex<ReportLimit>,
    /// The origin of the report limit's times.
    started: Instant,
}

impl Attempts {
    pub(crate) fn new(
        cache: Arc<ConfigCache>,
        pool: DaemonPool,
        retry_time_max: Duration,
        read_timeout: Duration,
    ) -> Attempts {
        Attempts {
            cache,
            pool,
            retry_time_max,
            read_timeout,
            reporter: rand::random(),
            reported: std::sync::Mutex::new(ReportLimit::default()),
            started: Instant::now(),
        }
    }

    /// Runs `attempt` against the newest configuration until it finishes,
    /// retrying as its [`Step`] asks, within the retry time.
    ///
    /// (`attempt` is a closure returning a future rather than an async
    /// closure so that the futures of the public methods are `Send`.)
    pub(crate) async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(Arc<Configuration>, Instant) -> Fut,
        Fut: std::future::Future<Output = Result<T, Step>>,
    {
        let deadline = Instant::now() + self.retry_time_max;
        let mut pause = RETRY_PAUSE_FIRST;
        let mut unknown_space_asked = 0;
        loop {
            let config = self.cache.current();
            let epoch = config.epoch;
            match attempt(config, deadline).await {
                Ok(value) => return Ok(value),
                Err(Step::Fail(e))
                    if e.status == Status::UnknownSpace && unknown_space_asked == 0 =>
                {
                    // The space may be newer than our configuration.
                    unknown_space_asked = 1;
                    self.refresh_until(deadline).await;
                }
                Err(Step::Fail(e))
                    if e.status == Status::UnknownSpace && unknown_space_asked == 1 =>
                {
                    // The member that answered may lag the leader that
                    // committed the space: wait briefly for a newer
                    // configuration, then give up.
                    unknown_space_asked = 2;
                    let grace = (Instant::now() + UNKNOWN_SPACE_GRACE).min(deadline);
                    if self
                        .cache
                        .wait_for(Epoch(epoch.0 + 1), grace)
                        .await
                        .is_err()
                    {
                        return Err(e);
                    }
                }
                Err(Step::Fail(e)) => return Err(e),
                Err(Step::Newer(epoch)) => {
                    self.cache.wait_for(epoch, deadline).await?;
                    pause = RETRY_PAUSE_FIRST;
                }
                Err(Step::Later(why)) => {
                    if Instant::now() + pause > deadline {
                        return Err(why);
                    }
                    tracing::debug!(error = %why, ?pause, "retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_PAUSE_MAX);
                    // A replica that cannot be reached may be gone in a
                    // configuration we have not seen yet.
                    self.refresh_until(deadline).await;
                }
            }
        }
    }

    /// Asks the coordinator for a newer configuration without waiting for
    /// one, giving up at `deadline` (an unreachable coordinator must not
    /// stretch an operation's retry time).
    async fn refresh_until(&self, deadline: Instant) {
        match tokio::time::timeout_at(deadline, self.cache.fetch(Duration::ZERO)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "configuration refresh failed"),
            Err(_) => tracing::debug!("configuration refresh timed out"),
        }
    }

    /// Sends one request to `daemon` at the configuration's epoch.
    pub(crate) async fn send(
        &self,
        config: &Configuration,
        daemon: DaemonId,
        request: DaemonRequest,
    ) -> Result<Answer, Step> {
        let Some(addr) = config.daemon_addr(daemon) else {
            return Err(Step::Later(ClientError::new(
                Status::Reconfigure,
                format!("daemon {daemon} is named in a chain but has no address"),
            )));
        };
        match self.pool.request(addr, config.epoch, request).await {
            Ok(answer) => Ok(answer),
            Err(e @ ConnError::TooLarge { .. }) => Err(Step::Fail(ClientError::new(
                Status::Internal,
                e.to_string(),
            ))),
            Err(
                e @ (ConnError::Connect { .. }
                | ConnError::ConnectTimeout { .. }
                | ConnError::Congested { .. }),
            ) => {
                self.report_unreachable(daemon);
                Err(Step::Later(ClientError::new(
                    Status::Reconfigure,
                    e.to_string(),
                )))
            }
            Err(e) => Err(Step::Later(ClientError::new(
                Status::Reconfigure,
                e.to_string(),
            ))),
        }
    }

    /// Reports `daemon` unreachable to the coordinator, at most once per
    /// [`tessera_protocol::report::UNREACHABLE_REPORT_INTERVAL`].
    fn report_unreachable(&self, daemon: DaemonId) {
        let now = self.started.elapsed();
        let allowed = self
            .reported
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(daemon, now);
        if !allowed {
            return;
        }
        self.cache.report_unreachable(daemon, self.reporter);
    }

    /// The next answer frame of a read (get, search): a lost connection or
    /// an answer later than the read timeout means retry; an epoch mismatch
    /// becomes its step.
    pub(crate) async fn answer_read(
        &self,
        answer: &mut Answer,
        deadline: Instant,
    ) -> Result<DaemonResponse, Step> {
        // A frozen daemon, or one that packets no longer reach, keeps the
        // connection open without answering: without a bound per attempt a
        // read would wait for it for the whole retry time, although the
        // cluster routes around it within seconds. Allow a moment past the
        // deadline so that an attempt started just before it can finish.
        let wait_until = (Instant::now() + self.read_timeout)
            .min(deadline.max(Instant::now() + Duration::from_secs(1)));
        match tokio::time::timeout_at(wait_until, answer.next()).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(Step::Later(ClientError::new(
                Status::Reconfigure,
                e.to_string(),
            ))),
            Err(_) => Err(Step::Later(ClientError::new(
                Status::Timeout,
                "a daemon did not answer in time",
            ))),
        }
    }
}

/// Owned copies of user-given `(name, value)` pairs, so that every attempt
/// can resolve them again against the configuration it uses.
pub(crate) fn owned<K: AsRef<str>, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Vec<(String, V)> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_string(), v))
        .collect()
}

/// The point leader of `key`: the head of the chain of the key-subspace
/// region holding it.
pub(crate) fn point_leader(
    config: &Configuration,
    space: &Space,
    key: &Value,
) -> Result<tessera_types::DaemonId, Step> {
    let region = match space.key_region(key) {
        Ok(region) => region,
        Err(e @ KeyRegionError::NotHashable) => {
            return Err(Step::Fail(ClientError::new(
                Status::WrongType,
                e.to_string(),
            )))
        }
        // A configuration no coordinator should produce; a newer one may
        // be whole again, so retry until the retry time runs out.
        Err(e @ KeyRegionError::NoKeySubspace { .. }) => {
            return Err(Step::Later(ClientError::new(
                Status::Reconfigure,
                format!("{e} at epoch {}", config.epoch),
            )))
        }
    };
    match region.chain.first() {
        Some(&head) => Ok(head),
        None => Err(Step::Later(ClientError::new(
            Status::Offline,
            format!(
                "region {} of space {:?} has no replica at epoch {}",
                region.id, space.desc.name, config.epoch
            ),
        ))),
    }
}

/// The step for an answer that is not what the request expects:
/// an epoch mismatch, a refusal, or nonsense.
pub(crate) fn unexpected(ours: Epoch, response: DaemonResponse) -> Step {
    match response {
        DaemonResponse::WrongEpoch { epoch } if epoch > ours => Step::Newer(epoch),
        DaemonResponse::WrongEpoch { epoch } => Step::Later(ClientError::new(
            Status::Reconfigure,
            format!("a daemon is at configuration {epoch}, behind the client's {ours}"),
        )),
        // The daemon refused before doing anything (it lost its lease, or
        // is no longer the point leader): a newer configuration will say
        // who serves now.
        // A region the update must pass has no replica for now (Offline).
        DaemonResponse::Failed {
            status: status @ (Status::Reconfigure | Status::Offline),
            reason,
        } => Step::Later(ClientError::new(status, reason)),
        DaemonResponse::Failed { status, reason } => Step::Fail(ClientError::new(status, reason)),
        DaemonResponse::CmpFail { reason, .. } => {
            Step::Fail(ClientError::new(Status::CmpFail, reason))
        }
        other => Step::Fail(ClientError::new(
            Status::ServerError,
            format!("unexpected answer from a daemon: {other:?}"),
        )),
    }
}

/// A daemon's object must have one value per attribute of its space.
pub(crate) fn check_shape(desc: &SpaceDesc, object: &Object) -> Result<(), Step> {
    check_len(desc, object.values.len())
}

/// [`check_shape`] of an object with `len` values.
pub(crate) fn check_len(desc: &SpaceDesc, len: usize) -> Result<(), Step> {
    if len == desc.attrs.len() {
        Ok(())
    } else {
        Err(Step::Fail(ClientError::new(
            Status::ServerError,
            format!(
                "a daemon returned an object with {} values for space {:?} of {} attributes",
                len,
                desc.name,
                desc.attrs.len()
            ),
        )))
    }
}
