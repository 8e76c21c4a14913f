//! Where things live under a materializer's root:
//!
//! ```text
//! <root>/<id>/checkout              the detached git worktree
//! <root>/<id>/materialization.json  its record
//! ```

use std::path::{Path, PathBuf};

/// The worktree directory inside `<root>/<id>`.
pub(crate) const CHECKOUT: &str = "checkout";
/// The record file inside `<root>/<id>`.
pub(crate) const RECORD: &str = "materialization.json";

/// The root directory all worktrees of one materializer live under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    /// Makes `root` absolute (against the process's working directory) so
    /// every path handed out is absolute, as the contract requires.
    pub(crate) fn new(root: PathBuf) -> Self {
        let root = std::path::absolute(&root).unwrap_or(root);
        Self { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/<id>`: everything of one worktree; removing it removes all.
    pub(crate) fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    pub(crate) fn checkout(&self, id: &str) -> PathBuf {
        self.dir(id).join(CHECKOUT)
    }

    pub(crate) fn record(&self, id: &str) -> PathBuf {
        self.dir(id).join(RECORD)
    }
}
