//! What a person sees before deciding a call.

use serde::{Deserialize, Serialize};

use crate::tools::ToolWorkspace;

/// A call as it would happen, computed before it runs: the command with its
/// working directory and where it runs, or the diff each file edit would
/// make. Tools compute it ([`ToolExecutor::preview`]); the default shows the
/// arguments.
///
/// [`ToolExecutor::preview`]: crate::tools::ToolExecutor::preview
///
/// ```
/// use roder_api::approval::{CallPreview, CommandPreview, RunsOn};
///
/// let preview = CallPreview::for_command(CommandPreview {
///     command: "cargo test".into(),
///     cwd: "/work/repo".into(),
///     runs_on: RunsOn::Host,
/// });
/// assert_eq!(preview.summary, "run `cargo test` in /work/repo (on this host)");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallPreview {
    /// One line: what the call does.
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandPreview>,
    /// Each file the call would change, with its diff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePreview>,
    /// The call's arguments as the model sent them.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// A command about to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandPreview {
    pub command: String,
    /// The working directory, as a path where the command runs.
    pub cwd: String,
    pub runs_on: RunsOn,
}

/// Where a command runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunsOn {
    /// On Roder's host, in a local workspace (confined by the sandbox policy).
    Host,
    /// In a runner session: a container, a worktree runner, a hosted sandbox.
    Runner {
        provider_id: String,
        session_id: String,
    },
}

impl RunsOn {
    /// Where commands of `workspace` run.
    pub fn of(workspace: &ToolWorkspace) -> RunsOn {
        match workspace {
            ToolWorkspace::Remote(remote) => {
                let state = remote.session.state();
                RunsOn::Runner {
                    provider_id: state.provider_id,
                    session_id: state.session_id,
                }
            }
            ToolWorkspace::Local(_) | ToolWorkspace::None => RunsOn::Host,
        }
    }
}

impl std::fmt::Display for RunsOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunsOn::Host => f.write_str("on this host"),
            RunsOn::Runner {
                provider_id,
                session_id,
            } => write!(f, "in {provider_id} sandbox {session_id}"),
        }
    }
}

/// One file a call would change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePreview {
    /// The path as the tool resolved it (absolute, where it will be written).
    pub path: String,
    /// Unified diff of the change.
    pub diff: String,
    /// The whole text before (`None`: the file is new) and after (`None`:
    /// deleted), for clients that render their own diff; left out for files
    /// over [`FilePreview::WHOLE_TEXT_LIMIT`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_text: Option<String>,
}

impl FilePreview {
    /// Largest text carried whole in a preview.
    pub const WHOLE_TEXT_LIMIT: usize = 256 * 1024;
}

impl CallPreview {
    /// A preview of a call that only has arguments to show.
    pub fn for_arguments(tool_name: &str, arguments: serde_json::Value) -> Self {
        Self {
            summary: format!("call {tool_name}"),
            arguments,
            ..Self::default()
        }
    }

    pub fn for_command(command: CommandPreview) -> Self {
        Self {
            summary: format!(
                "run `{}` in {} ({})",
                command.command, command.cwd, command.runs_on
            ),
            command: Some(command),
            ..Self::default()
        }
    }

    pub fn for_files(files: Vec<FilePreview>) -> Self {
        let paths: Vec<&str> = files.iter().map(|file| file.path.as_str()).collect();
        Self {
            summary: format!("edit {}", paths.join(", ")),
            files,
            ..Self::default()
        }
    }
}
