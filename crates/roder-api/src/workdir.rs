//! Working directories materialized per thread (a git worktree each), so
//! agents working in parallel on one repository never share a checkout.
//!
//! A [`WorkdirMaterializer`] creates and tracks them; the runtime binds a
//! thread to one through the runner provider named by
//! [`WorkdirMaterializer::provider_id`], with the checkout as the thread's
//! runner workspace.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::remote_runner::RemoteRunnerProviderId;

/// Materialize a new working directory of a local repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkdirRequest {
    /// Absolute path of a local git repository (remote URLs are refused).
    pub repository: PathBuf,
    /// Branch, tag or commit to check out; default `HEAD` (which requires a
    /// clean source repository).
    #[serde(default)]
    pub selector: Option<String>,
    /// Path-safe id (`[A-Za-z0-9._-]`, no leading `-` or `.`); generated when
    /// absent.
    #[serde(default)]
    pub id: Option<String>,
}

/// Bind to a working directory that already exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkdirClaim {
    pub id: String,
    /// Directory inside the checkout to work in; must stay inside it.
    #[serde(default)]
    pub relative_cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkdirStatus {
    Active,
    /// Removal was attempted and failed; try `cleanup` again.
    CleanupPending,
    /// The checkout or its source repository is gone.
    Corrupted,
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cleanliness {
    Clean,
    Dirty,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkdirInfo {
    pub id: String,
    pub status: WorkdirStatus,
    /// Absolute path of the checkout.
    pub checkout: PathBuf,
    pub repository: PathBuf,
    pub selector: String,
    /// The commit and tree the checkout started from.
    pub base_commit: String,
    pub base_tree: String,
    /// `None` when it cannot be determined (corrupted, not found).
    pub cleanliness: Option<Cleanliness>,
    pub head_commit: Option<String>,
    pub branch: Option<String>,
    /// The thread bound to it, if any.
    pub primary_thread_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// A working directory ready to bind a thread to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaterializedWorkdir {
    pub info: WorkdirInfo,
    /// Absolute directory the thread works in (the checkout, or the claimed
    /// `relative_cwd` inside it).
    pub cwd: PathBuf,
    /// Whether this call created it (and so a failed thread creation must
    /// roll it back).
    pub created: bool,
}

#[async_trait::async_trait]
pub trait WorkdirMaterializer: Send + Sync + 'static {
    /// The runner provider that runs tools inside these working directories.
    fn provider_id(&self) -> RemoteRunnerProviderId;

    async fn materialize(&self, request: WorkdirRequest) -> anyhow::Result<MaterializedWorkdir>;

    async fn claim(&self, claim: WorkdirClaim) -> anyhow::Result<MaterializedWorkdir>;

    /// Records `thread_id` as the working directory's primary thread.
    async fn bind(&self, id: &str, thread_id: &str) -> anyhow::Result<()>;

    /// Clears the primary thread if it is `thread_id`.
    async fn unbind(&self, id: &str, thread_id: &str) -> anyhow::Result<()>;

    /// Removes a working directory this process just materialized, record
    /// included, leaving nothing under the root.
    async fn rollback(&self, id: &str) -> anyhow::Result<()>;

    /// Status of one working directory (`NotFound` when unknown).
    async fn get(&self, id: &str) -> anyhow::Result<WorkdirInfo>;

    async fn list(&self) -> anyhow::Result<Vec<WorkdirInfo>>;

    /// Removes the worktree (git's removal, then the directory). Refused while
    /// a thread is bound; marks `CleanupPending` when removal fails.
    async fn cleanup(&self, id: &str) -> anyhow::Result<WorkdirInfo>;

    /// The diff of the working directory against the commit it started from,
    /// untracked files included, as a patch `git apply` accepts.
    async fn export_patch(&self, id: &str) -> anyhow::Result<String>;

    /// Commits the working directory's changes as branch `roder/<id>` in the
    /// source repository; returns the branch name.
    async fn export_branch(&self, id: &str) -> anyhow::Result<String>;
}
