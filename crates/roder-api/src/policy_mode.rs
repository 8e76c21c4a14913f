//! What the model's tools may do in a thread's workspace.

use serde::{Deserialize, Serialize};

/// The tool policy of a runtime.
///
/// Roder never prompts for approval: a policy decides up front which tools the
/// model is offered and what they may touch. Confinement to the workspace root
/// holds under every mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyMode {
    /// Only tools that read: `read_file`, `list_files`, `glob`, `grep`.
    ReadOnly,
    /// Every tool, confined to the workspace; file tools refuse to write inside
    /// the repository's `.git` directory.
    #[default]
    Default,
    /// Same as `Default`. Kept as its own name because clients that have an
    /// approval UI send it; Roder has no approval step to skip.
    AcceptAll,
    /// Every tool, confined to the workspace, and file tools may also write
    /// inside `.git`.
    Bypass,
}

impl PolicyMode {
    /// Whether tools that change files or run commands are offered at all.
    pub fn allows_mutation(self) -> bool {
        !matches!(self, PolicyMode::ReadOnly)
    }

    /// Whether file tools may write under `.git/`.
    pub fn allows_vcs_metadata_writes(self) -> bool {
        matches!(self, PolicyMode::Bypass)
    }
}
