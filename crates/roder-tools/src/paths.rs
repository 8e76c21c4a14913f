//! Lexical path confinement, shared by local and remote workspaces.
//!
//! Confinement is the default (SPEC section 4): a path the model names is
//! resolved against the workspace root, `..` is folded lexically, and the
//! result must stay under the root (writes, working directories) or under the
//! root or one of its read roots (reads). This module is pure: no I/O, so it is
//! the same for a host directory and a runner's file system. The local
//! workspace adds a symlink check on top (see `workspace::local`).

use std::path::{Component, Path, PathBuf};

use crate::tool::ToolError;

/// What a resolved path will be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reading a file or searching: the root and its read roots.
    Read,
    /// Creating, changing or deleting a file: the root only, never inside
    /// `.git` unless the policy allows it.
    Write,
    /// A command's working directory: the root only.
    Workdir,
}

/// Where a resolved path lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// Under the workspace root; the path relative to it (empty for the root).
    Root(PathBuf),
    /// Under one of the read roots (and not under the workspace root).
    ReadRoot,
}

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

/// How a path found under `absolute` is shown: relative to the root when it
/// is under it.
pub(crate) fn display_path(absolute: &Path, relative: Option<&Path>) -> String {
    match relative {
        Some(relative) if relative.as_os_str().is_empty() => ".".to_string(),
        Some(relative) => relative.to_string_lossy().into_owned(),
        None => absolute.to_string_lossy().into_owned(),
    }
}

/// Folds `.` and `..` without touching the file system. `..` at the top of an
/// absolute path stays at `/` (as the kernel does); at the top of a relative
/// path it is kept, so the result cannot be mistaken for a path under a root.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                Some(Component::RootDir) | Some(Component::Prefix(_)) => {}
                _ => parts.push(component),
            },
            other => parts.push(other),
        }
    }
    let mut normalized = PathBuf::new();
    for part in parts {
        normalized.push(part.as_os_str());
    }
    normalized
}

/// Resolves `requested` against `root` for `access`.
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
        return Err(ToolError::new("path must not be empty"));
    }
    if requested.contains('\0') {
        return Err(ToolError::new(format!(
            "path {requested:?} contains a NUL byte"
        )));
    }
    let root = normalize(root);
    let requested_path = Path::new(requested);
    let absolute = if requested_path.is_absolute() {
        normalize(requested_path)
    } else {
        normalize(&root.join(requested_path))
    };

    if let Ok(relative) = absolute.strip_prefix(&root) {
        let relative = relative.to_path_buf();
        if access == Access::Write && !allow_vcs_metadata && is_vcs_metadata(&relative) {
            return Err(ToolError::new(format!(
                "path {requested:?} is inside a .git directory; the policy does not allow writing version-control metadata"
            )));
        }
        return Ok(ResolvedPath {
            requested: requested.to_string(),
            absolute,
            location: Location::Root(relative),
        });
    }

    if access == Access::Read {
        let under_read_root = read_roots
            .iter()
            .map(|read_root| normalize(read_root))
            .any(|read_root| read_root.is_absolute() && absolute.starts_with(&read_root));
        if under_read_root {
            return Ok(ResolvedPath {
                requested: requested.to_string(),
                absolute,
                location: Location::ReadRoot,
            });
        }
    }
    Err(outside_error(requested, &root, read_roots, access))
}

/// The refusal for a path outside the workspace, naming the path and the root.
pub(crate) fn outside_error(
    requested: &str,
    root: &Path,
    read_roots: &[PathBuf],
    access: Access,
) -> ToolError {
    let mut message = format!(
        "path {requested:?} is outside the workspace {}",
        root.display()
    );
    if access == Access::Read && !read_roots.is_empty() {
        let roots: Vec<String> = read_roots
            .iter()
            .map(|root| root.display().to_string())
            .collect();
        message.push_str(&format!(" and its read roots ({})", roots.join(", ")));
    }
    if access != Access::Read && !read_roots.is_empty() {
        message.push_str(" (read roots are readable but never writable)");
    }
    ToolError::new(message)
}

/// Whether a path relative to the root lies inside a `.git` directory (or is
/// one).
pub(crate) fn is_vcs_metadata(relative: &Path) -> bool {
    relative
        .components()
        .any(|component| component.as_os_str() == ".git")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn root() -> PathBuf {
        PathBuf::from("/work/repo")
    }

    fn write(requested: &str) -> Result<ResolvedPath, ToolError> {
        resolve(&root(), &[], requested, Access::Write, false)
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalize(Path::new("/a/b/")), PathBuf::from("/a/b"));
    }

    #[test]
    fn relative_paths_resolve_under_the_root() {
        let resolved = write("src/main.rs").unwrap();
        assert_eq!(resolved.absolute, PathBuf::from("/work/repo/src/main.rs"));
        assert_eq!(resolved.relative(), Some(Path::new("src/main.rs")));
        assert_eq!(resolved.display(), "src/main.rs");
    }

    #[test]
    fn absolute_paths_inside_the_root_become_relative() {
        let resolved = write("/work/repo/out.txt").unwrap();
        assert_eq!(resolved.relative(), Some(Path::new("out.txt")));
        let root_itself = write("/work/repo/").unwrap();
        assert_eq!(root_itself.display(), ".");
        assert_eq!(write(".").unwrap().relative(), Some(Path::new("")));
    }

    #[test]
    fn dot_dot_that_stays_inside_is_fine() {
        let resolved = write("src/../README.md").unwrap();
        assert_eq!(resolved.relative(), Some(Path::new("README.md")));
    }

    #[test]
    fn escapes_are_refused_naming_the_path_and_root() {
        let error = write("../x").unwrap_err();
        assert_eq!(
            error.0,
            r#"path "../x" is outside the workspace /work/repo"#
        );
        let error = write("/etc/passwd").unwrap_err();
        assert!(error.0.contains(r#""/etc/passwd""#), "{error}");
        let error = write("a/../../repo2/x").unwrap_err();
        assert!(error.0.contains("outside the workspace"), "{error}");
        // A sibling whose name starts with the root's name is not under it.
        assert!(write("/work/repository/x").is_err());
    }

    #[test]
    fn read_roots_widen_reads_only() {
        let read_roots = vec![PathBuf::from("/opt/docs")];
        let read = resolve(&root(), &read_roots, "/opt/docs/a.md", Access::Read, false).unwrap();
        assert_eq!(read.location, Location::ReadRoot);
        assert_eq!(read.display(), "/opt/docs/a.md");

        let error =
            resolve(&root(), &read_roots, "/opt/docs/a.md", Access::Write, false).unwrap_err();
        assert!(error.0.contains("never writable"), "{error}");
        let error = resolve(&root(), &read_roots, "/opt/other", Access::Read, false).unwrap_err();
        assert!(error.0.contains("read roots (/opt/docs)"), "{error}");
        let error =
            resolve(&root(), &read_roots, "/opt/docs/../x", Access::Read, false).unwrap_err();
        assert!(error.0.contains("outside"), "{error}");
    }

    #[test]
    fn git_metadata_writes_need_the_bypass_policy() {
        let error = write(".git/config").unwrap_err();
        assert!(error.0.contains(".git directory"), "{error}");
        assert!(write("sub/.git/hooks/pre-commit").is_err());
        assert!(resolve(&root(), &[], ".git/config", Access::Write, true).is_ok());
        assert!(resolve(&root(), &[], ".git/config", Access::Read, false).is_ok());
        assert!(resolve(&root(), &[], ".git", Access::Workdir, false).is_ok());
        // Names that merely contain ".git" are ordinary files.
        assert!(write(".gitignore").is_ok());
        assert!(write("x.git/y").is_ok());
    }

    #[test]
    fn empty_and_nul_paths_are_refused() {
        assert!(write("").unwrap_err().0.contains("must not be empty"));
        assert!(write("a\0b").unwrap_err().0.contains("NUL"));
    }

    fn component() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just("repo".to_string()),
            Just("work".to_string()),
            Just(".git".to_string()),
            "[a-z]{1,3}",
        ]
    }

    proptest! {
        #[test]
        fn resolved_paths_never_leave_the_root(
            absolute in any::<bool>(),
            parts in proptest::collection::vec(component(), 0..8),
        ) {
            let requested = format!("{}{}", if absolute { "/" } else { "" }, parts.join("/"));
            prop_assume!(!requested.is_empty());
            if let Ok(resolved) = resolve(&root(), &[], &requested, Access::Write, false) {
                prop_assert!(resolved.absolute.starts_with(root()));
                prop_assert!(resolved
                    .absolute
                    .components()
                    .all(|c| !matches!(c, Component::ParentDir | Component::CurDir)));
                let relative = resolved.relative().unwrap();
                prop_assert_eq!(root().join(relative), resolved.absolute.clone());
                prop_assert!(!is_vcs_metadata(relative));
            }
        }

        #[test]
        fn normalize_is_idempotent(parts in proptest::collection::vec(component(), 0..8)) {
            let path = PathBuf::from(format!("/{}", parts.join("/")));
            let once = normalize(&path);
            prop_assert_eq!(normalize(&once), once);
        }
    }
}
