//! Roder runner provider `unix-local`: a session is a host directory and its
//! commands are host processes.
//!
//! It is the simplest real runner: no isolation beyond path confinement of
//! file operations and working directories, but the same contract as the
//! hosted sandboxes, so the runtime's routing, cancellation and fallback paths
//! can be exercised with real processes.
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

mod command;
pub mod config;
mod paths;
mod provider;
mod running;
mod session;

pub use config::UnixLocalConfig;
pub use provider::{PROVIDER_ID, UnixLocalRunnerProvider};
pub use session::UnixLocalSession;
