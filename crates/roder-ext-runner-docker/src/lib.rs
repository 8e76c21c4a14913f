//! Roder runner provider `docker`: a session is a Docker container, driven
//! through the Docker Engine API (bollard over the local socket; never the
//! `docker` CLI).
//!
//! Commands run as execs (timeouts and cancellation kill the whole process
//! tree in the container), files move through the archive API, ports are
//! published at creation, snapshots are commits, pause/resume use the cgroup
//! freezer, and a detached container is found again by id. Every container
//! is labelled (with the id of the Roder home it serves, too), so
//! `DockerRunnerProvider::gc` can remove what no thread of that home uses
//! and nothing of another home's. The thread's bound workspace is the
//! container's working root for files and commands alike. A warm pool
//! keeps started containers ready per config. The sandbox policy (the
//! config's `sandbox`, else the default: enforced, network off) becomes
//! container settings (see [`sandbox`]): no-new-privileges, a minimal
//! capability set, pids, memory and CPU limits, no network unless it is
//! on, a read-only root with the workspace and `/tmp` on size-bounded
//! tmpfs volumes, an optional non-root user, and no credential in the
//! environment. With `"checkpoints": "per_turn"` every turn commits the
//! container ([`DockerCheckpointer`]), so the thread can be rolled back
//! (the workspace's files replaced by the checkpoint's) or forked (a new
//! container from the committed image).
//!
//! ```no_run
//! use std::sync::Arc;
//! use roder_api::remote_runner::RemoteRunnerProvider;
//! use roder_ext_runner_docker::DockerRunnerProvider;
//!
//! let provider: Arc<dyn RemoteRunnerProvider> = Arc::new(DockerRunnerProvider::default());
//! assert_eq!(provider.id(), "docker");
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod archive;
mod artifact;
pub mod checkpoint;
mod client;
pub mod config;
mod container;
mod exec;
mod executor;
mod gc;
pub mod labels;
mod manifest;
mod paths;
mod pool;
mod provider;
pub mod sandbox;
mod sandboxes;
mod session;
mod snapshot;
mod workspace_restore;

/// The Docker client crate [`DockerRunnerProvider::docker`] hands out, for
/// tooling and tests that inspect or clean up containers with the same
/// client version.
pub use bollard;
pub use checkpoint::DockerCheckpointer;
pub use client::{DEFAULT_SOCKET, daemon_address, daemon_socket_present};
pub use config::{Checkpoints, Cleanup, DockerConfig};
pub use container::require_image;
pub use exec::MARKER_VAR;
pub use gc::{GcEntry, GcOptions, GcReport, GcVerdict};
pub use provider::{DockerRunnerProvider, PROVIDER_ID};
pub use sandbox::{BUILD_CAPABILITIES, protections};
pub use sandboxes::SandboxEntry;
pub use session::{DockerSession, SNAPSHOT_REPOSITORY};
