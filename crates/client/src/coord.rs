//! The client's view of the configuration: a cache kept fresh by a
//! background long-poll, and the calls to the coordinator group.

use crate::error::ClientError;
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClient, CoordClientError};
use tessera_protocol::{CoordRequest, CoordResponse, Status};
use tessera_types::{Configuration, Epoch};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long one long-poll waits at the coordinator before it answers
/// "nothing newer".
const LONG_POLL_WAIT: Duration = Duration::from_secs(10);
/// Pause after a failed long-poll before the next.
const POLL_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The newest configuration this client knows, shared with a background
/// task that long-polls the coordinator for newer ones.
///
/// Invariant: the epoch in the watch channel never decreases.
pub(crate) struct ConfigCache {
    coord: CoordClient,
    config: watch::Sender<Arc<Configuration>>,
}

impl ConfigCache {
    /// Fetches the first configuration (COORDFAIL when no member answers
    /// before `deadline`).
    pub(crate) async fn start(
        coord: CoordClient,
        deadline: Instant,
    ) -> Result<Arc<ConfigCache>, ClientError> {
        let (config, _) = watch::channel(Arc::new(Configuration::default()));
        let cache = Arc::new(ConfigCache { coord, config });
        loop {
            match cache.fetch_once(Duration::ZERO).await {
                Ok(()) if cache.current().epoch > Epoch(0) => break,
                Ok(()) => {}
                // A refusal or a failed TLS handshake will not change.
                Err(Fetch::Final(e)) => return Err(e),
                Err(Fetch::Retry(e)) if Instant::now() >= deadline => return Err(e),
                Err(Fetch::Retry(e)) => {
                    tracing::debug!(error = %e, "first configuration fetch failed; retrying")
                }
            }
            if Instant::now() >= deadline {
                return Err(ClientError::new(
                    Status::CoordFail,
                    "the coordinator has no configuration yet",
                ));
            }
            tokio::time::sleep(POLL_RETRY_PAUSE).await;
        }
        Ok(cache)
    }

    /// Starts the background long-poll that installs every newer
    /// configuration. The owner aborts the task when it is done.
    pub(crate) fn spawn_poller(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = cache.fetch(LONG_POLL_WAIT).await {
                    tracing::debug!(error = %e, "configuration long-poll failed");
                    tokio::time::sleep(POLL_RETRY_PAUSE).await;
                }
            }
        })
    }

    /// The newest configuration known.
    /// Tells the coordinator, in the background, that this client could
    /// not reach `daemon` (see [`CoordRequest::Unreachable`]): evidence of
    /// a gray failure its heartbeats cannot show. Best effort.
    pub(crate) fn report_unreachable(&self, daemon: tessera_types::DaemonId, reporter: u64) {
        let coord = self.coord.clone();
        tokio::spawn(async move {
            let request = CoordRequest::Unreachable {
                daemon,
                reporter: tessera_protocol::Reporter::Client(reporter),
            };
            if let Err(e) = coord.call(request).await {
                tracing::debug!(%daemon, "could not report an unreachable daemon: {e}");
            }
        });
    }

    pub(crate) fn current(&self) -> Arc<Configuration> {
        self.config.borrow().clone()
    }

    /// Asks the coordinator for a configuration newer than the current one,
    /// waiting up to `wait` for one to appear, and installs it.
    pub(crate) async fn fetch(&self, wait: Duration) -> Result<(), ClientError> {
        self.fetch_once(wait)
            .await
            .map_err(|(Fetch::Final(e) | Fetch::Retry(e))| e)
    }

    async fn fetch_once(&self, wait: Duration) -> Result<(), Fetch> {
        let known = self.current().epoch;
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
        match self
            .coord
            .call(CoordRequest::GetConfig { known, wait_ms })
            .await
        {
            Ok(CoordResponse::Config(Some(config))) => {
                self.install(*config);
                Ok(())
            }
            Ok(CoordResponse::Config(None)) => Ok(()),
            Ok(CoordResponse::Failed { reason, .. }) => Err(Fetch::Final(ClientError::new(
                Status::CoordFail,
                format!("the coordinator refused: {reason}"),
            ))),
            Ok(other) => Err(Fetch::Retry(ClientError::new(
                Status::CoordFail,
                format!("unexpected coordinator answer to a configuration request: {other:?}"),
            ))),
            Err(e) => {
                let error =
                    ClientError::new(Status::CoordFail, format!("coordinator unreachable: {e}"));
                Err(match e {
                    CoordClientError::Tls { .. } => Fetch::Final(error),
                    _ => Fetch::Retry(error),
                })
            }
        }
    }

    /// Waits until a configuration of at least `epoch` is installed, asking
    /// the coordinator directly, until `deadline`.
    pub(crate) async fn wait_for(
        &self,
        epoch: Epoch,
        deadline: Instant,
    ) -> Result<(), ClientError> {
        // COORDFAIL when the coordinator was the problem, else RECONFIGURE.
        let mut coordinator_failed: Option<ClientError> = None;
        while self.current().epoch < epoch {
            let now = Instant::now();
            if now >= deadline {
                return Err(coordinator_failed.unwrap_or_else(|| {
                    ClientError::new(
                        Status::Reconfigure,
                        format!(
                            "configuration {epoch} did not arrive in time (have {})",
                            self.current().epoch
                        ),
                    )
                }));
            }
            let wait = (deadline - now).min(Duration::from_secs(1));
            match tokio::time::timeout_at(deadline, self.fetch(wait)).await {
                Ok(Ok(())) => coordinator_failed = None,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "configuration fetch failed");
                    coordinator_failed = Some(e);
                    let pause =
                        POLL_RETRY_PAUSE.min(deadline.saturating_duration_since(Instant::now()));
                    tokio::time::sleep(pause).await;
                }
                Err(_) => {
                    coordinator_failed = Some(ClientError::new(
                        Status::CoordFail,
                        "the coordinator did not answer in time",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Installs `config` when it is newer than the one held.
    fn install(&self, config: Configuration) {
        let installed = self.config.send_if_modified(|held| {
            if config.epoch > held.epoch {
                *held = Arc::new(config);
                true
            } else {
                false
            }
        });
        if installed {
            tracing::debug!(epoch = %self.current().epoch, "configuration installed");
        }
    }
}

/// Why a configuration fetch failed: `Final` when asking again cannot help
/// (the coordinator refused, or TLS failed), so a client fails at once
/// instead of retrying until its deadline.
enum Fetch {
    Final(ClientError),
    Retry(ClientError),
}
