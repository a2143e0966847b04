//! openraft glue: the type configuration, the Raft RPC encoding, and the
//! network that carries RPCs between members as `CoordRequest::Raft`.
//!
//! A Raft RPC is JSON (openraft's types derive serde) inside the `payload`
//! of a `CoordRequest::Raft`, sent over the same framed TCP port that serves
//! clients and daemons; the answer comes back as `CoordResponse::Raft`.
//! A member's address is the `addr` of its [`MemberNode`] in the membership.

use crate::state::{Command, CommandResult};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::time::Duration;
use tessera_protocol::coord_client::{CoordClientError, CoordConnection, CoordLink};
use tessera_protocol::{CoordRequest, CoordResponse};

openraft::declare_raft_types!(
    /// Tessera's Raft types: the log carries [`Command`]s, the state machine
    /// answers [`CommandResult`]s, members are [`MemberNode`]s.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = MemberNode,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A member of the coordinator group as the Raft membership records it
/// (openraft's `BasicNode` with one more field): the membership is what
/// every member agrees on, so the configuration's `coordinators` list,
/// metrics URLs included, is built from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberNode {
    /// `host:port` where the member serves clients, daemons and members.
    pub addr: String,
    /// The URL of the member's Prometheus metrics, when it serves them.
    /// Absent from memberships written before metrics existed.
    #[serde(default)]
    pub metrics: Option<String>,
}

/// A member's Raft node id: random, generated at first start, persisted.
pub type NodeId = u64;

/// The Raft handle of one member.
pub type Raft = openraft::Raft<TypeConfig>;

/// A Raft RPC, as the payload of `CoordRequest::Raft`.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRpc {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
}

/// The answer to a [`RaftRpc`], as the payload of `CoordResponse::Raft`.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRpcResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
}

/// Serves one incoming Raft RPC on the local Raft node.
pub async fn serve_rpc(raft: &Raft, payload: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let rpc: RaftRpc = serde_json::from_slice(payload)?;
    let response = match rpc {
        RaftRpc::AppendEntries(rpc) => {
            RaftRpcResponse::AppendEntries(raft.append_entries(rpc).await)
        }
        RaftRpc::Vote(rpc) => RaftRpcResponse::Vote(raft.vote(rpc).await),
        RaftRpc::InstallSnapshot(rpc) => {
            RaftRpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
        }
    };
    serde_json::to_vec(&response)
}

/// Makes one [`PeerClient`] per target member; the link carries the
/// transport (TLS or plain) and the admin credential, which a member that
/// requires one checks on Raft RPCs too.
pub struct Network {
    pub link: CoordLink,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &MemberNode) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            link: self.link.clone(),
            connection: None,
        }
    }
}

/// Sends Raft RPCs to one member, over a connection opened on first use
/// and reopened after a failure.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    link: CoordLink,
    connection: Option<CoordConnection>,
}

/// How the transport failed, before openraft's error types are chosen.
enum SendError {
    /// The member could not be reached (connect failed, connection lost,
    /// timeout): openraft backs off and retries.
    Unreachable(CoordClientError),
    /// The member answered something that is not a Raft answer.
    Garbled(String),
}

impl PeerClient {
    async fn send(
        &mut self,
        rpc: &RaftRpc,
        timeout: Duration,
    ) -> Result<RaftRpcResponse, SendError> {
        let payload = serde_json::to_vec(rpc).map_err(|e| SendError::Garbled(e.to_string()))?;
        if self
            .connection
            .as_ref()
            .is_none_or(CoordConnection::is_closed)
        {
            let connection = CoordConnection::connect_over(&self.link, &self.addr, timeout)
                .await
                .map_err(SendError::Unreachable)?;
            self.connection = Some(connection);
        }
        let connection = self.connection.as_ref().expect("connected above");
        let answer = match connection
            .call(CoordRequest::Raft { payload }, timeout)
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                self.connection = None;
                return Err(SendError::Unreachable(e));
            }
        };
        match answer {
            CoordResponse::Raft { payload } => serde_json::from_slice(&payload)
                .map_err(|e| SendError::Garbled(format!("undecodable Raft answer: {e}"))),
            other => Err(SendError::Garbled(format!(
                "answer {other:?} to a Raft RPC"
            ))),
        }
    }

    fn transport_error<E: std::error::Error>(
        &self,
        error: SendError,
    ) -> RPCError<NodeId, MemberNode, E> {
        match error {
            SendError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            SendError::Garbled(reason) => RPCError::Network(NetworkError::new(&Garbled(reason))),
        }
    }

    fn remote<E: std::error::Error>(
        &self,
        error: RaftError<NodeId, E>,
    ) -> RPCError<NodeId, MemberNode, RaftError<NodeId, E>> {
        RPCError::RemoteError(RemoteError::new_with_node(
            self.target,
            MemberNode {
                addr: self.addr.clone(),
                metrics: None,
            },
            error,
        ))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Garbled(String);

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, MemberNode, RaftError<NodeId>>>
    {
        match self
            .send(&RaftRpc::AppendEntries(rpc), option.hard_ttl())
            .await
        {
            Ok(RaftRpcResponse::AppendEntries(Ok(response))) => Ok(response),
            Ok(RaftRpcResponse::AppendEntries(Err(e))) => Err(self.remote(e)),
            Ok(other) => {
                Err(self.transport_error(SendError::Garbled(format!("{other:?} to AppendEntries"))))
            }
            Err(e) => Err(self.transport_error(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, MemberNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .send(&RaftRpc::InstallSnapshot(rpc), option.hard_ttl())
            .await
        {
            Ok(RaftRpcResponse::InstallSnapshot(Ok(response))) => Ok(response),
            Ok(RaftRpcResponse::InstallSnapshot(Err(e))) => Err(self.remote(e)),
            Ok(other) => {
                Err(self
                    .transport_error(SendError::Garbled(format!("{other:?} to InstallSnapshot"))))
            }
            Err(e) => Err(self.transport_error(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, MemberNode, RaftError<NodeId>>> {
        match self.send(&RaftRpc::Vote(rpc), option.hard_ttl()).await {
            Ok(RaftRpcResponse::Vote(Ok(response))) => Ok(response),
            Ok(RaftRpcResponse::Vote(Err(e))) => Err(self.remote(e)),
            Ok(other) => {
                Err(self.transport_error(SendError::Garbled(format!("{other:?} to Vote"))))
            }
            Err(e) => Err(self.transport_error(e)),
        }
    }
}
