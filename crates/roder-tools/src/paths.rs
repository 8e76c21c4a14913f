//! The tools' side of path confinement: a model's path string, resolved by
//! [`roder_sandbox::paths`] (where the rules live, for the tools and every
//! runner), kept with the words the model used so results and errors can
//! name it.
//!
//! Confinement is the default (SPEC section 4): a path the model names is
//! resolved against the workspace root, `..` never climbs above it, and the
//! result must stay under the root (writes, working directories) or under the
//! root or one of its read roots (reads). This part is lexical, the same for
//! a host directory and a runner's file system; the local workspace adds the
//! symlink check on top (see `workspace::local`).

use std::path::{Path, PathBuf};

pub(crate) use roder_sandbox::paths::{Access, Location, display_path, is_vcs_metadata, normalize};
use roder_sandbox::paths::{Confined, Confinement, PathError};

use crate::tool::ToolError;

/// What errors call the root the model works in.
pub(crate) const ROOT_LABEL: &str = "workspace";

/// A path that passed lexical confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedPath {
    /// The path as the model wrote it, for messages.
    pub requested: String,
    /// Absolute, lexically normalised path.
    pub absolute: PathBuf,
    pub location: Location,
}

impl ResolvedPath {
    /// The path relative to the workspace root, if it lies under it.
    pub fn relative(&self) -> Option<&Path> {
        match &self.location {
            Location::Root(relative) => Some(relative),
            Location::ReadRoot => None,
        }
    }

    /// How results name this path: relative to the root when under it (`.`
    /// for the root itself), absolute otherwise. Results use names the model
    /// can pass straight back to another tool.
    pub fn display(&self) -> String {
        display_path(&self.absolute, self.relative())
    }
}

/// The confinement of a workspace, in the tools' words.
pub(crate) fn confinement<'a>(
    root: &'a Path,
    read_roots: &'a [PathBuf],
    allow_vcs_metadata: bool,
) -> Confinement<'a> {
    Confinement {
        root,
        read_roots,
        label: ROOT_LABEL,
        allow_vcs_metadata,
    }
}

/// Resolves `requested` against `root` for `access`. The empty path is
/// refused (a tool always names a file or directory).
///
/// `allow_vcs_metadata` lifts the `.git` write refusal (the `Bypass` policy).
pub(crate) fn resolve(
    root: &Path,
    read_roots: &[PathBuf],
    requested: &str,
    access: Access,
    allow_vcs_metadata: bool,
) -> Result<ResolvedPath, ToolError> {
    if requested.is_empty() {
        return Err(tool_error(PathError::Empty {
            label: ROOT_LABEL.to_string(),
            root: root.to_path_buf(),
        }));
    }
    let Confined { absolute, location } = confinement(root, read_roots, allow_vcs_metadata)
        .resolve(root, Path::new(requested), access)
        .map_err(tool_error)?;
    Ok(ResolvedPath {
        requested: requested.to_string(),
        absolute,
        location,
    })
}

/// A refusal as the model sees it.
pub(crate) fn tool_error(error: PathError) -> ToolError {
    ToolError::new(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from("/work/repo")
    }

    fn write(requested: &str) -> Result<ResolvedPath, ToolError> {
        resolve(&root(), &[], requested, Access::Write, false)
    }

    #[test]
    fn results_keep_the_models_words_and_name_paths_relatively() {
        let resolved = write("src/./main.rs").unwrap();
        assert_eq!(resolved.requested, "src/./main.rs");
        assert_eq!(resolved.absolute, PathBuf::from("/work/repo/src/main.rs"));
        assert_eq!(resolved.display(), "src/main.rs");
        assert_eq!(write("/work/repo/").unwrap().display(), ".");
        let read_roots = vec![PathBuf::from("/opt/docs")];
        let read = resolve(&root(), &read_roots, "/opt/docs/a.md", Access::Read, false).unwrap();
        assert_eq!(read.relative(), None);
        assert_eq!(read.display(), "/opt/docs/a.md");
    }

    #[test]
    fn refusals_name_the_path_and_the_workspace() {
        let error = write("../x").unwrap_err();
        assert!(
            error
                .0
                .starts_with(r#"path "../x" is outside the workspace /work/repo"#),
            "{error}"
        );
        assert!(write("").unwrap_err().0.contains("must not be empty"));
        assert!(write("a\0b").unwrap_err().0.contains("NUL"));
        assert!(
            write(".git/config")
                .unwrap_err()
                .0
                .contains(".git directory")
        );
    }
}
