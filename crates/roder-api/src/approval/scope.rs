//! What one call would touch, read from its arguments alone.

use serde::{Deserialize, Serialize};

/// The command a call runs and the paths it changes, as its tool reads them
/// from the arguments, before anything runs. Rules match on this; it needs
/// no workspace, so deciding a call by rule costs no I/O.
///
/// ```
/// use roder_api::approval::CallScope;
///
/// let scope = CallScope::command("cargo test");
/// assert_eq!(scope.command.as_deref(), Some("cargo test"));
/// assert!(CallScope::paths(["src/lib.rs"]).command.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallScope {
    /// The command line it runs through the workspace's shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Files it writes, deletes or moves (both ends of a move), as the
    /// model named them: relative to the workspace root or absolute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

impl CallScope {
    pub fn command(line: impl Into<String>) -> Self {
        Self {
            command: Some(line.into()),
            paths: Vec::new(),
        }
    }

    pub fn paths<I, S>(paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            command: None,
            paths: paths.into_iter().map(Into::into).collect(),
        }
    }
}
