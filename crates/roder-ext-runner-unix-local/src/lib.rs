//! Roder runner provider `unix-local`: a session is a host directory and its
//! commands are host processes.
//!
//! It is the simplest real runner: no isolation beyond path confinement of
//! file operations and working directories, but the same contract as the
//! hosted sandboxes, so the runtime's routing, cancellation and fallback paths
//! can be exercised with real processes.
//!
//! Its machinery is public for other runners whose sessions are host
//! directories with extra rules: [`UnixLocalSession::open`] with
//! [`SessionOptions`] (working directory, environment to add and to remove)
//! gives a session to wrap, [`paths::ConfinedRoot`] confines paths the same
//! way outside a session, and [`provider_checks`] refuses foreign or
//! unsupported destinations in the same words. The git-worktree runner is
//! built on them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use roder_api::remote_runner::RemoteRunnerProvider;
//! use roder_ext_runner_unix_local::UnixLocalRunnerProvider;
//!
//! let provider: Arc<dyn RemoteRunnerProvider> = Arc::new(UnixLocalRunnerProvider::default());
//! assert_eq!(provider.id(), "unix-local");
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod checkpointer;
mod command;
pub mod config;
mod options;
pub mod paths;
mod provider;
pub mod provider_checks;
mod running;
mod session;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;

pub use checkpointer::{CHECKPOINTER_ID, DirectoryCheckpointer, tree_bytes};
pub use config::UnixLocalConfig;
pub use options::SessionOptions;
pub use provider::{PROVIDER_ID, UnixLocalRunnerProvider};
pub use session::UnixLocalSession;
