//! [`Admin`]: the administrative operations of the coordinator group.

use crate::error::AdminError;
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClient, CoordClientOptions, CoordLink};
use tessera_protocol::{AdminStatus, CoordRequest, CoordResponse, CoordStatus};
use tessera_types::parse::parse_space;
use tessera_types::{Configuration, DaemonId, Epoch, PartId, PartState, Space, SubspaceKind};

/// Administers a cluster through its coordinator group: spaces and the
/// configuration. No network activity happens until the first call.
#[derive(Clone)]
pub struct Admin {
    coord: CoordClient,
    /// How daemons are reached for the operations that talk to them
    /// directly (a backup): the transport of the coordinator link.
    pub(crate) transport: tessera_protocol::Transport,
}

impl Admin {
    /// An admin handle that starts from the member at `coordinator`
    /// (`host:port`); it learns the other members from the configuration.
    pub fn new(coordinator: &str) -> Admin {
        Admin::with_members([coordinator], Duration::from_secs(10))
    }

    /// An admin handle over several member addresses, giving up on the group
    /// (COORDFAIL) after `give_up_after`.
    pub fn with_members<I, S>(members: I, give_up_after: Duration) -> Admin
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Admin::with_link(members, give_up_after, CoordLink::default())
    }

    /// [`Admin::with_members`] over `link`: TLS and the admin credential a
    /// coordinator that requires one expects on configuration changes.
    pub fn with_link<I, S>(members: I, give_up_after: Duration, link: CoordLink) -> Admin
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let options = CoordClientOptions {
            attempt_timeout: Duration::from_secs(2),
            give_up_after,
        };
        Admin {
            transport: link.transport.clone(),
            coord: CoordClient::with_link(members, options, link),
        }
    }

    /// Creates a space from its description (API.md §8). The description is
    /// parsed here first, so that a mistake is reported as BADSPACE with
    /// its line and column without a round trip.
    pub async fn add_space(&self, description: &str) -> Result<(), AdminError> {
        parse_space(description)
            .map_err(|e| AdminError::new(AdminStatus::BadSpace, e.to_string()))?;
        self.done(CoordRequest::AddSpace {
            description: description.to_string(),
        })
        .await
    }

    /// Removes a space and its data (NOTFOUND when there is none).
    pub async fn rm_space(&self, name: &str) -> Result<(), AdminError> {
        self.done(CoordRequest::RmSpace {
            name: name.to_string(),
        })
        .await
    }

    /// The names of every space.
    pub async fn list_spaces(&self) -> Result<Vec<String>, AdminError> {
        Ok(self
            .config()
            .await?
            .spaces
            .iter()
            .map(|s| s.desc.name.clone())
            .collect())
    }

    /// The current configuration, as the answering member has applied it.
    pub async fn config(&self) -> Result<Configuration, AdminError> {
        self.wait_config(Epoch(0), Duration::ZERO)
            .await?
            .ok_or_else(|| {
                AdminError::new(
                    AdminStatus::CoordFail,
                    "the coordinator has no configuration yet",
                )
            })
    }

    /// A configuration newer than `known`, waiting up to `wait` for one;
    /// `None` when none appeared.
    pub async fn wait_config(
        &self,
        known: Epoch,
        wait: Duration,
    ) -> Result<Option<Configuration>, AdminError> {
        self.coord
            .wait_config(known, wait)
            .await
            .map_err(|e| AdminError::new(e.admin_status(), e.to_string()))
    }

    /// The answering member's view of the coordinator group.
    pub async fn coordinator_status(&self) -> Result<CoordStatus, AdminError> {
        match self.call(CoordRequest::Status).await? {
            CoordResponse::Status(status) => Ok(*status),
            other => Err(unexpected(other)),
        }
    }

    /// Sets or clears the cluster-wide read-only flag.
    pub async fn set_read_only(&self, read_only: bool) -> Result<(), AdminError> {
        self.done(CoordRequest::SetReadOnly { read_only }).await
    }

    /// Stores the layout advisor's calibrated parameters in the cluster
    /// configuration (`tessera calibrate`). A payload that does not
    /// validate is refused here with BADSPACE, before it is sent.
    pub async fn set_advisor_params(
        &self,
        params: tessera_types::AdvisorCalibration,
    ) -> Result<(), AdminError> {
        params
            .validate()
            .map_err(|e| AdminError::new(AdminStatus::BadSpace, e.to_string()))?;
        self.done(CoordRequest::SetAdvisorParams {
            params: Box::new(params),
        })
        .await
    }

    /// Whether the cluster is stable: every available daemon runs the
    /// current configuration and no state transfer is running.
    pub async fn stability(&self) -> Result<Stability, AdminError> {
        match self.call(CoordRequest::Stability).await? {
            CoordResponse::Stability {
                epoch,
                stable,
                lagging,
                transfers,
            } => Ok(Stability {
                epoch,
                stable,
                lagging,
                transfers,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// Returns once the cluster is stable (see [`Admin::stability`]),
    /// asking again after each configuration change or every `poll`;
    /// TIMEOUT after `timeout`.
    pub async fn wait_until_stable(
        &self,
        timeout: Duration,
        poll: Duration,
    ) -> Result<Epoch, AdminError> {
        self.wait_until_stable_watching(timeout, poll, |_| {}).await
    }

    /// [`Admin::wait_until_stable`], showing each answer to `watch` first
    /// (the CLI draws its progress from them).
    pub async fn wait_until_stable_watching(
        &self,
        timeout: Duration,
        poll: Duration,
        mut watch: impl FnMut(&Stability),
    ) -> Result<Epoch, AdminError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let stability = self.stability().await?;
            watch(&stability);
            if stability.stable {
                return Ok(stability.epoch);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(AdminError::new(
                    AdminStatus::Timeout,
                    format!(
                        "not stable after {timeout:?}: epoch {}, daemons behind {:?}, {} transfers running",
                        stability.epoch.0, stability.lagging, stability.transfers
                    ),
                ));
            }
            // A newer configuration or the poll interval, whichever is first.
            let wait = poll.min(deadline - now);
            let _ = tokio::time::timeout(wait, self.wait_config(stability.epoch, wait)).await;
        }
    }

    /// Takes a daemon out of every replica chain (it keeps its data).
    pub async fn server_offline(&self, id: DaemonId) -> Result<(), AdminError> {
        self.done(CoordRequest::ServerOffline { id }).await
    }

    /// Lets an offline daemon take regions again.
    pub async fn server_online(&self, id: DaemonId) -> Result<(), AdminError> {
        self.done(CoordRequest::ServerOnline { id }).await
    }

    /// Marks a daemon offline and tells it to stop at its next heartbeat.
    pub async fn server_kill(&self, id: DaemonId) -> Result<(), AdminError> {
        self.done(CoordRequest::ServerKill { id }).await
    }

    /// Removes a daemon from the configuration for good (its id is never
    /// reused).
    pub async fn server_forget(&self, id: DaemonId) -> Result<(), AdminError> {
        self.done(CoordRequest::ServerForget { id }).await
    }

    /// Adds a subspace on `attrs` to `space`, built live (API.md §12.2):
    /// returns its part id once the coordinator accepted it; searches use
    /// it once it is ready.
    pub async fn add_subspace(&self, space: &str, attrs: &[String]) -> Result<PartId, AdminError> {
        self.part_added(CoordRequest::AddSubspace {
            space: space.to_string(),
            attrs: attrs.to_vec(),
        })
        .await
    }

    /// Drops subspace `part` (never the key subspace, 0) live.
    pub async fn rm_subspace(&self, space: &str, part: PartId) -> Result<(), AdminError> {
        self.done(CoordRequest::RmSubspace {
            space: space.to_string(),
            part,
        })
        .await
    }

    /// Adds a local index on `attr` (or `docattr.path`), built live;
    /// returns its id (what [`Admin::rm_index`] takes).
    pub async fn add_index(&self, space: &str, attr: &str) -> Result<PartId, AdminError> {
        self.part_added(CoordRequest::AddIndex {
            space: space.to_string(),
            attr: attr.to_string(),
        })
        .await
    }

    /// Adds a global index on `attr` with `partitions` indexlets (default:
    /// the space's partitions), built live; returns its part id.
    pub async fn add_global_index(
        &self,
        space: &str,
        attr: &str,
        partitions: Option<u32>,
    ) -> Result<PartId, AdminError> {
        self.part_added(CoordRequest::AddGlobalIndex {
            space: space.to_string(),
            attr: attr.to_string(),
            partitions,
        })
        .await
    }

    /// Cuts the global index on `attr` of `space` again, also at the
    /// values `at` (text, read as the attribute's type), live: a new part
    /// builds with the cuts, then the old one drops. Returns the new
    /// part's id.
    pub async fn split_global_index(
        &self,
        space: &str,
        attr: &str,
        at: &[String],
    ) -> Result<PartId, AdminError> {
        self.part_added(CoordRequest::SplitGlobalIndex {
            space: space.to_string(),
            attr: attr.to_string(),
            at: at.to_vec(),
        })
        .await
    }

    /// Drops the global index on `attr` of `space` live.
    pub async fn rm_global_index(&self, space: &str, attr: &str) -> Result<(), AdminError> {
        self.done(CoordRequest::RmGlobalIndex {
            space: space.to_string(),
            attr: attr.to_string(),
        })
        .await
    }

    /// Drops index `part` of `space` live; with no space, of the one
    /// space that has an index `part` (COORDFAIL when several do).
    pub async fn rm_index(&self, space: Option<&str>, part: PartId) -> Result<(), AdminError> {
        self.done(CoordRequest::RmIndex {
            space: space.map(str::to_string),
            part,
        })
        .await
    }

    /// Moves `space` to the subspaces and indexes of `description` (same
    /// name, key and attributes): the new parts build, then the omitted
    /// ones drop. The description is parsed here first (BADSPACE).
    pub async fn relayout(&self, space: &str, description: &str) -> Result<(), AdminError> {
        parse_space(description)
            .map_err(|e| AdminError::new(AdminStatus::BadSpace, e.to_string()))?;
        self.done(CoordRequest::Relayout {
            space: space.to_string(),
            description: description.to_string(),
        })
        .await
    }

    /// The local indexes of `space` with their state (none for a space
    /// that does not exist, as HyperDex's `list_indices`).
    pub async fn list_indices(&self, space: &str) -> Result<Vec<IndexInfo>, AdminError> {
        let config = self.config().await?;
        Ok(config.space(space).map(index_infos).unwrap_or_default())
    }

    async fn part_added(&self, request: CoordRequest) -> Result<PartId, AdminError> {
        match self.call(request).await? {
            CoordResponse::PartAdded { part } => Ok(part),
            other => Err(unexpected(other)),
        }
    }

    async fn done(&self, request: CoordRequest) -> Result<(), AdminError> {
        match self.call(request).await? {
            CoordResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    async fn call(&self, request: CoordRequest) -> Result<CoordResponse, AdminError> {
        match self.coord.call(request).await {
            Ok(CoordResponse::Failed { status, reason }) => Err(AdminError::new(status, reason)),
            Ok(response) => Ok(response),
            Err(e) => Err(AdminError::new(e.admin_status(), e.to_string())),
        }
    }
}

/// The coordinator leader's answer to a stability question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stability {
    /// The configuration the answer is about.
    pub epoch: Epoch,
    /// Every available daemon runs `epoch` and no transfer is running.
    pub stable: bool,
    /// Available daemons that have not reported `epoch` yet.
    pub lagging: Vec<DaemonId>,
    /// State transfers still running.
    pub transfers: usize,
}

/// A local or global index as `list_indices` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexInfo {
    /// Its id (what `rm_index` takes, for a local index).
    pub id: PartId,
    /// A global index (its indexlets are `indexlets` regions of their own)
    /// rather than a local one.
    pub global: bool,
    /// A global index's number of indexlets; 0 for a local index.
    pub indexlets: usize,
    /// The indexed attribute's name.
    pub attribute: String,
    /// The path inside a document attribute, if any.
    pub path: Option<String>,
    /// Building, ready or dropping.
    pub state: PartState,
}

/// The local indexes of `space`, then its global indexes, each in the
/// configuration's order.
pub fn index_infos(space: &Space) -> Vec<IndexInfo> {
    let name = |attr: usize| {
        space
            .desc
            .attrs
            .get(attr)
            .map_or_else(String::new, |a| a.name.clone())
    };
    let local = space.indexes.iter().map(|index| IndexInfo {
        id: index.id,
        global: false,
        indexlets: 0,
        attribute: name(index.attr),
        path: index.path.clone(),
        state: index.state,
    });
    let global = space
        .subspaces
        .iter()
        .filter(|layout| layout.kind == SubspaceKind::GlobalIndex)
        .map(|layout| IndexInfo {
            id: layout.part,
            global: true,
            indexlets: layout.regions.len(),
            attribute: layout.attrs.first().map_or_else(String::new, |&a| name(a)),
            path: None,
            state: layout.state,
        });
    local.chain(global).collect()
}

fn unexpected(response: CoordResponse) -> AdminError {
    AdminError::new(
        AdminStatus::Internal,
        format!("unexpected answer from the coordinator: {response:?}"),
    )
}
