//! `tessera-coordinator`: the replicated service that owns the cluster's
//! configuration.
//!
//! What it is: a Raft group (1, 3 or 5 members, on openraft) whose state
//! machine is the [`ClusterState`] — the epoch, the daemons, the spaces with
//! their subspaces, split points and replica chains, and the read-only flag.
//! It assigns ids (never reused), places regions on daemons
//! ([`placement`]), and publishes a [`Configuration`](tessera_types::Configuration)
//! per epoch to anyone who long-polls for it.
//!
//! What it is not: it knows nothing about objects, keys or values, and it
//! never sits on the data path. Only the coordinator changes configuration;
//! daemons and clients only read it. It does not implement consensus
//! itself: openraft does, over our framed TCP, with the log, vote and state
//! machine kept durably in fjall.
//!
//! Key types and layers:
//! - [`state`]: [`ClusterState`], [`Command`], [`CommandResult`] — the pure core.
//! - [`layout`]: the layout commands (add/remove subspaces and indexes,
//!   `relayout`) and the part lifecycle, with [`layout::LayoutChangeError`].
//! - [`placement`]: [`Placer`] — pure, balanced, distinct replica chains.
//! - [`rebuild`]: rebuilds of lost replex regions from the other replexes.
//! - [`tails`]: which daemon a region whose chain emptied comes back from.
//! - [`detector`]: [`FailureDetector`] — the leader's heartbeat bookkeeping (soft state, time as a parameter).
//! - [`node`]: [`CoordinatorNode`] — the policy toward daemons (heartbeat answers, failure detection) that the shell and the simulator both drive.
//! - [`store`]: fjall-backed `RaftLogStorage` and `RaftStateMachine`.
//! - [`raft`]: the openraft type configuration and network.
//! - [`server`]: [`run`] / [`serve`], the tokio shell of one member;
//!   `metrics`: what it serves at `/metrics` (`--metrics ADDR`);
//!   `dashboard`: the live page (`/`) and its snapshot (`/api/cluster`) on
//!   the same listener.

mod dashboard;
pub mod detector;
pub mod gate;
pub mod layout;
mod metrics;
pub mod node;
pub mod placement;
pub mod raft;
pub mod rebuild;
#[cfg(test)]
mod replex_relayout_tests;
pub mod tails;
// The server does the I/O: it reads the clock the node gets as `now`.
#[allow(clippy::disallowed_methods)]
pub mod server;
pub mod state;
// The Raft store stamps its snapshots with the wall clock.
#[allow(clippy::disallowed_methods)]
pub mod store;
pub mod tombstones;

pub use detector::FailureDetector;
pub use node::CoordinatorNode;
pub use placement::{PlacementError, Placer};
pub use server::{
    run, serve, serve_with, CoordinatorError, CoordinatorOptions, FAILURE_TIMEOUT_DEFAULT,
    LOST_TIMEOUT_DEFAULT,
};
pub use state::{ClusterState, Command, CommandResult};
