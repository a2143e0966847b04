//! Blocking wrappers: [`BlockingClient`] and [`BlockingAdmin`] run the async
//! API on a small runtime of their own. Do not call them from inside an
//! async runtime (tokio refuses to block one of its own threads).

use crate::admin::{Admin, IndexInfo, Stability};
use crate::client::{Client, ClientOptions};
use crate::error::{AdminError, ClientError};
use crate::record::{RawRecord, Record};
use crate::stream::SearchStream;
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::coord_client::CoordLink;
use tessera_protocol::{AdminStatus, CoordStatus, Status};
use tessera_types::{Configuration, DaemonId, Epoch, PartId, PredOp, SpaceDesc, Value};
use tokio::runtime::Runtime;

fn runtime() -> std::io::Result<Arc<Runtime>> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("tessera-client")
        .enable_all()
        .build()
        .map(Arc::new)
}

/// [`Client`] with blocking methods of the same names and results.
pub struct BlockingClient {
    // Declared before the runtime so that it drops first.
    client: Client,
    runtime: Arc<Runtime>,
}

impl BlockingClient {
    /// Connects through the coordinator member at `coordinator`.
    pub fn connect(coordinator: &str) -> Result<BlockingClient, ClientError> {
        BlockingClient::connect_with([coordinator], ClientOptions::default())
    }

    pub fn connect_with<I, S>(
        coordinators: I,
        options: ClientOptions,
    ) -> Result<BlockingClient, ClientError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let runtime = runtime().map_err(|e| {
            ClientError::new(Status::Internal, format!("cannot start a runtime: {e}"))
        })?;
        let client = runtime.block_on(Client::connect_with(coordinators, options))?;
        Ok(BlockingClient { client, runtime })
    }

    /// The async client inside.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// [`Client::with_auth`]: a handle whose requests carry `macaroons`.
    pub fn with_auth<I, M>(&self, macaroons: I) -> BlockingClient
    where
        I: IntoIterator<Item = M>,
        M: Into<Vec<u8>>,
    {
        BlockingClient {
            client: self.client.with_auth(macaroons),
            runtime: self.runtime.clone(),
        }
    }

    /// [`Client::with_secret`]: a handle whose updates set the secret.
    pub fn with_secret(&self, secret: impl Into<Vec<u8>>) -> BlockingClient {
        BlockingClient {
            client: self.client.with_secret(secret),
            runtime: self.runtime.clone(),
        }
    }

    /// Runs one future of the async client to completion on this client's
    /// runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// An admin handle over the same coordinator members, on this runtime.
    pub fn admin(&self, coordinator: &str) -> BlockingAdmin {
        BlockingAdmin {
            admin: Admin::new(coordinator),
            runtime: self.runtime.clone(),
        }
    }

    pub fn config(&self) -> Arc<Configuration> {
        self.client.config()
    }

    /// See [`Client::client_id`].
    pub fn client_id(&self) -> u64 {
        self.client.client_id()
    }

    /// See [`Client::check`].
    pub fn check<P: AsRef<str>>(
        &self,
        space: &str,
        key: Option<&Value>,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        ops: &[(String, crate::ops::Op)],
        sort_by: Option<&str>,
    ) -> Result<(), ClientError> {
        self.runtime
            .block_on(self.client.check(space, key, predicates, ops, sort_by))
    }

    pub fn refresh(&self, wait: Duration) -> Result<Arc<Configuration>, ClientError> {
        self.runtime.block_on(self.client.refresh(wait))
    }

    pub fn wait_for_epoch(&self, epoch: Epoch, timeout: Duration) -> Result<(), ClientError> {
        self.runtime
            .block_on(self.client.wait_for_epoch(epoch, timeout))
    }

    pub fn space(&self, space: &str) -> Result<SpaceDesc, ClientError> {
        self.runtime.block_on(self.client.space(space))
    }

    pub fn get(&self, space: &str, key: impl Into<Value>) -> Result<Option<Record>, ClientError> {
        self.runtime.block_on(self.client.get(space, key))
    }

    pub fn search<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<Vec<Record>, ClientError> {
        self.runtime.block_on(self.client.search(space, predicates))
    }

    /// See [`Client::search_stream`]: an iterator that fetches lazily.
    pub fn search_stream<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> BlockingSearchStream {
        BlockingSearchStream {
            stream: self.client.search_stream(space, predicates),
            runtime: self.runtime.clone(),
        }
    }

    /// See [`Client::sorted_search_stream`].
    pub fn sorted_search_stream<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        sort_by: &str,
        limit: u64,
        descending: bool,
    ) -> BlockingSearchStream {
        BlockingSearchStream {
            stream: self
                .client
                .sorted_search_stream(space, predicates, sort_by, limit, descending),
            runtime: self.runtime.clone(),
        }
    }

    pub fn sorted_search<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
        sort_by: &str,
        limit: u64,
        descending: bool,
    ) -> Result<Vec<Record>, ClientError> {
        self.runtime.block_on(
            self.client
                .sorted_search(space, predicates, sort_by, limit, descending),
        )
    }

    pub fn count<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<u64, ClientError> {
        self.runtime.block_on(self.client.count(space, predicates))
    }

    pub fn search_describe<P: AsRef<str>>(
        &self,
        space: &str,
        predicates: impl IntoIterator<Item = (P, PredOp)>,
    ) -> Result<String, ClientError> {
        self.runtime
            .block_on(self.client.search_describe(space, predicates))
    }
}

/// A [`SearchStream`] as a blocking iterator: each `next` waits for the
/// next object, fetching pages as needed. It owns a handle on its client's
/// runtime, so it may outlive the borrow of the [`BlockingClient`].
pub struct BlockingSearchStream {
    // Declared before the runtime so that it drops first.
    stream: SearchStream,
    runtime: Arc<Runtime>,
}

impl BlockingSearchStream {
    /// The next object not decoded yet: [`SearchStream::next_raw`].
    pub fn next_raw(&mut self) -> Option<Result<RawRecord, ClientError>> {
        self.runtime.block_on(self.stream.next_raw())
    }
}

impl Iterator for BlockingSearchStream {
    type Item = Result<Record, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.runtime.block_on(self.stream.next())
    }
}

/// [`Admin`] with blocking methods of the same names and results.
pub struct BlockingAdmin {
    admin: Admin,
    runtime: Arc<Runtime>,
}

impl BlockingAdmin {
    /// An admin handle starting from the member at `coordinator`.
    pub fn new(coordinator: &str) -> Result<BlockingAdmin, AdminError> {
        BlockingAdmin::on_own_runtime(Admin::new(coordinator))
    }

    /// An admin handle over several member addresses, giving up on the group
    /// (COORDFAIL) after `give_up_after`.
    pub fn with_members<I, S>(
        members: I,
        give_up_after: Duration,
    ) -> Result<BlockingAdmin, AdminError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        BlockingAdmin::on_own_runtime(Admin::with_members(members, give_up_after))
    }

    /// [`Admin::with_link`]: over TLS, with the admin credential.
    pub fn with_link<I, S>(
        members: I,
        give_up_after: Duration,
        link: CoordLink,
    ) -> Result<BlockingAdmin, AdminError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        BlockingAdmin::on_own_runtime(Admin::with_link(members, give_up_after, link))
    }

    /// `admin` with a runtime of its own to block on.
    fn on_own_runtime(admin: Admin) -> Result<BlockingAdmin, AdminError> {
        let runtime = runtime().map_err(|e| {
            AdminError::new(
                AdminStatus::Internal,
                format!("cannot start a runtime: {e}"),
            )
        })?;
        Ok(BlockingAdmin { admin, runtime })
    }

    pub fn add_space(&self, description: &str) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.add_space(description))
    }

    pub fn rm_space(&self, name: &str) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.rm_space(name))
    }

    pub fn list_spaces(&self) -> Result<Vec<String>, AdminError> {
        self.runtime.block_on(self.admin.list_spaces())
    }

    pub fn config(&self) -> Result<Configuration, AdminError> {
        self.runtime.block_on(self.admin.config())
    }

    pub fn wait_config(
        &self,
        known: Epoch,
        wait: Duration,
    ) -> Result<Option<Configuration>, AdminError> {
        self.runtime.block_on(self.admin.wait_config(known, wait))
    }

    pub fn coordinator_status(&self) -> Result<CoordStatus, AdminError> {
        self.runtime.block_on(self.admin.coordinator_status())
    }

    pub fn set_read_only(&self, read_only: bool) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.set_read_only(read_only))
    }

    /// [`Admin::backup`], without progress reports.
    pub fn backup(
        &self,
        dir: &std::path::Path,
    ) -> Result<crate::backup::BackupReport, crate::backup::BackupError> {
        self.runtime.block_on(self.admin.backup(dir, &mut |_| {}))
    }

    pub fn server_offline(&self, id: DaemonId) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.server_offline(id))
    }

    pub fn server_online(&self, id: DaemonId) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.server_online(id))
    }

    pub fn server_kill(&self, id: DaemonId) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.server_kill(id))
    }

    pub fn server_forget(&self, id: DaemonId) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.server_forget(id))
    }

    pub fn stability(&self) -> Result<Stability, AdminError> {
        self.runtime.block_on(self.admin.stability())
    }

    pub fn add_subspace(&self, space: &str, attrs: &[String]) -> Result<PartId, AdminError> {
        self.runtime.block_on(self.admin.add_subspace(space, attrs))
    }

    pub fn rm_subspace(&self, space: &str, part: PartId) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.rm_subspace(space, part))
    }

    pub fn add_index(&self, space: &str, attr: &str) -> Result<PartId, AdminError> {
        self.runtime.block_on(self.admin.add_index(space, attr))
    }

    pub fn rm_index(&self, space: Option<&str>, part: PartId) -> Result<(), AdminError> {
        self.runtime.block_on(self.admin.rm_index(space, part))
    }

    pub fn relayout(&self, space: &str, description: &str) -> Result<(), AdminError> {
        self.runtime
            .block_on(self.admin.relayout(space, description))
    }

    pub fn list_indices(&self, space: &str) -> Result<Vec<IndexInfo>, AdminError> {
        self.runtime.block_on(self.admin.list_indices(space))
    }

    pub fn wait_until_stable(
        &self,
        timeout: Duration,
        poll: Duration,
    ) -> Result<Epoch, AdminError> {
        self.runtime
            .block_on(self.admin.wait_until_stable(timeout, poll))
    }
}
