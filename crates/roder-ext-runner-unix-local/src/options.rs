//! How a [`crate::UnixLocalSession`] is built outside the provider.
//!
//! The provider builds sessions from a destination config. Other runners
//! whose sessions are host directories too (the git-worktree runner) build
//! one directly, with their own working directory and environment rules, and
//! wrap it, so the process and path machinery exists once.

use std::path::PathBuf;

/// What errors call the root of a session built with default options.
const ROOT_LABEL: &str = "runner root";

/// Everything about a session besides its root and its persisted state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOptions {
    /// Where relative paths and commands without a `cwd` start: an existing
    /// directory inside the root, absolute or relative to the root. `None`
    /// is the root itself.
    pub cwd: Option<PathBuf>,
    /// Added to every command's environment; a request's own `env` is
    /// applied on top, so the request wins.
    pub env: Vec<(String, String)>,
    /// Variables removed from the environment commands inherit from this
    /// process, before `env` and the request's `env` are applied. A runner
    /// drops what would point its tools elsewhere (`GIT_DIR` inherited from
    /// a git hook would send `git status` to another repository).
    pub env_remove: Vec<String>,
    /// What errors call the root ("path `x` is outside the runner root"),
    /// so refusals read in the words of the runner the user configured.
    pub root_label: &'static str,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            cwd: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            root_label: ROOT_LABEL,
        }
    }
}
