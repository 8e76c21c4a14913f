//! `workdirs/*`: per-thread working directories (git worktrees).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Materialize a new working directory of a local repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkdirsCreateParams {
    /// Absolute path of a local git repository.
    pub repository: String,
    /// Branch, tag or commit (default `HEAD`, which needs a clean source).
    #[serde(default)]
    pub selector: Option<String>,
    /// Path-safe id (`[A-Za-z0-9._-]`, no leading `-` or `.`); generated
    /// when absent.
    #[serde(default)]
    pub id: Option<String>,
}

/// Bind a new thread to an existing working directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkdirClaimParams {
    pub id: String,
    /// Directory inside the checkout to work in; must stay inside it.
    #[serde(default)]
    pub relative_cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkdirIdParams {
    pub id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkdirsListParams {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkdirResult {
    pub workdir: WorkdirInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkdirsListResult {
    pub workdirs: Vec<WorkdirInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkdirInfo {
    pub id: String,
    pub status: WorkdirStatus,
    /// Absolute path of the checkout.
    pub checkout: String,
    pub repository: String,
    pub selector: String,
    /// The commit and tree the checkout started from.
    pub base_commit: String,
    pub base_tree: String,
    /// Absent when it cannot be determined (corrupted, not found).
    pub cleanliness: Option<Cleanliness>,
    pub head_commit: Option<String>,
    pub branch: Option<String>,
    /// The thread bound to it; cleanup is refused while there is one.
    pub primary_thread_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkdirStatus {
    Active,
    /// Removal failed; call `workdirs/cleanup` again.
    CleanupPending,
    /// The checkout or its source repository is gone.
    Corrupted,
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cleanliness {
    Clean,
    Dirty,
}
