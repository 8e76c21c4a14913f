//! Roder's git worktree support: a [`GitWorktreeMaterializer`] that gives
//! each coding agent its own detached worktree of a local repository, and a
//! [`GitWorktreeRunnerProvider`] that runs the agent's tools inside it.
//!
//! Agents working in parallel on one repository must not share a checkout:
//! their edits, builds and `git` commands would collide. A worktree is a
//! cheap, fully separate checkout sharing the source's object store, and its
//! work can be exported as a patch or a branch in the source.
//!
//! ```no_run
//! use std::sync::Arc;
//! use roder_api::workdir::{WorkdirMaterializer, WorkdirRequest};
//! use roder_ext_runner_git_worktree::{GitWorktreeMaterializer, GitWorktreeRunnerProvider};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let root = std::path::PathBuf::from("/var/lib/roder/worktrees");
//! let materializer = Arc::new(GitWorktreeMaterializer::new(root.clone()));
//! let provider = Arc::new(GitWorktreeRunnerProvider::new(root));
//! let made = materializer
//!     .materialize(WorkdirRequest {
//!         repository: "/src/project".into(),
//!         selector: None,
//!         id: None,
//!     })
//!     .await?;
//! println!("agent works in {}", made.cwd.display());
//! # let _ = provider;
//! # Ok(())
//! # }
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod checkpointer;
mod config;
mod export;
mod git;
mod id;
mod inspect;
mod keyed_lock;
mod layout;
mod lifecycle;
mod materialize;
mod materializer;
mod paths;
mod provider;
mod record;
mod removal;
mod retention;
mod session;
mod snapshot;
mod source;

pub use checkpointer::{CHECKPOINTER_ID, GitCheckpointer};
pub use materializer::GitWorktreeMaterializer;
pub use provider::{GitWorktreeRunnerProvider, PROVIDER_ID};
pub use session::GitWorktreeSession;

#[cfg(test)]
mod checkpointer_tests;
#[cfg(test)]
mod confinement_tests;
#[cfg(test)]
mod materializer_tests;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod test_support;
