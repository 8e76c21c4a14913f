//! Confinement of paths to a root directory, public so that other runners
//! over host directories (the git-worktree runner) confine paths the same
//! way instead of keeping a copy.
//!
//! A path is resolved in two steps: lexically (so `..` cannot climb out
//! whatever the filesystem holds), then on disk by canonicalising the deepest
//! ancestor that exists (so a symlink inside the root cannot lead out of it,
//! and a dangling one is refused). The functions here block on the
//! filesystem; async callers run them on `spawn_blocking`. Checks happen
//! before the operation, so a process racing to swap in a symlink is not
//! defended against: this confines the model's paths, it is not a sandbox.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};

/// Drops `.` and applies `..` to the preceding component without touching
/// the filesystem. `..` at the filesystem root stays at the root, as the
/// kernel does; a leading `..` of a relative path is kept.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => {
                    out.push(Component::ParentDir);
                }
            },
            other => out.push(other),
        }
    }
    out
}

/// A directory that paths are confined to, as given and as the filesystem
/// resolves it.
///
/// Both are kept because callers speak in terms of the given path
/// (`/tmp/ws/file`) while containment must be checked on the real one
/// (`/private/tmp/ws` where `/tmp` is a symlink). Relative paths are taken
/// against a base directory the caller names (a thread's working directory
/// need not be the root's top), so one root serves every working directory
/// inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinedRoot {
    given: PathBuf,
    canonical: PathBuf,
    /// What errors call the root (`runner root`, `worktree`), so a refusal
    /// reads in the words of the runner the user configured.
    label: &'static str,
}

impl ConfinedRoot {
    /// Resolves an existing root directory; `label` names it in errors.
    pub fn open(given: &Path, label: &'static str) -> anyhow::Result<Self> {
        let canonical = std::fs::canonicalize(given)
            .with_context(|| format!("{label} `{}` cannot be resolved", given.display()))?;
        if !canonical.is_dir() {
            bail!("{label} `{}` is not a directory", given.display());
        }
        Ok(Self {
            given: normalize(given),
            canonical,
            label,
        })
    }

    /// The root as given, lexically normalised.
    pub fn given(&self) -> &Path {
        &self.given
    }

    /// The root as the filesystem resolved it when it was opened.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    /// Resolves `path` (relative to `base`, or absolute) to a host path
    /// inside the root. Refuses `..` escapes and symlinks that leave the root,
    /// naming the path. The result need not exist; its existing part is
    /// canonical. `base` is joined lexically, so it may be given either as
    /// configured or canonical.
    pub fn resolve(&self, base: &Path, path: &Path) -> anyhow::Result<PathBuf> {
        let joined = normalize(&base.join(path));
        let inside = joined
            .strip_prefix(&self.given)
            .or_else(|_| joined.strip_prefix(&self.canonical))
            .map_err(|_| {
                anyhow::anyhow!(
                    "path `{}` is outside the {} `{}`",
                    path.display(),
                    self.label,
                    self.given.display()
                )
            })?;
        let candidate = self.canonical.join(inside);

        // Walk up to the deepest ancestor that exists (lstat, so a dangling
        // symlink counts as existing and then fails to canonicalise).
        let mut existing = candidate.as_path();
        let mut missing = Vec::new();
        loop {
            match std::fs::symlink_metadata(existing) {
                Ok(_) => break,
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    let (Some(name), Some(parent)) = (existing.file_name(), existing.parent())
                    else {
                        bail!("path `{}` has no existing ancestor", path.display());
                    };
                    missing.push(name.to_owned());
                    existing = parent;
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("cannot inspect path `{}`", path.display()));
                }
            }
        }
        let mut resolved = std::fs::canonicalize(existing).with_context(|| {
            format!(
                "path `{}` cannot be resolved (dangling symlink?)",
                path.display()
            )
        })?;
        if !resolved.starts_with(&self.canonical) {
            bail!(
                "path `{}` leaves the {} `{}` through a symlink",
                path.display(),
                self.label,
                self.given.display()
            );
        }
        resolved.extend(missing.iter().rev());
        Ok(resolved)
    }

    /// Resolves an existing directory inside the root, as [`Self::resolve`]
    /// does. `what` names the directory's role in errors, as in "working
    /// directory `src` does not exist".
    pub fn resolve_dir(&self, base: &Path, path: &Path, what: &str) -> anyhow::Result<PathBuf> {
        let resolved = self.resolve(base, path)?;
        match std::fs::metadata(&resolved) {
            Ok(metadata) if metadata.is_dir() => Ok(resolved),
            Ok(_) => bail!("{what} `{}` is not a directory", path.display()),
            Err(error) => {
                Err(error).with_context(|| format!("{what} `{}` does not exist", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> ConfinedRoot {
        ConfinedRoot::open(dir, "runner root").unwrap()
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalize(Path::new("./")), PathBuf::new());
    }

    #[test]
    fn resolves_relative_and_absolute_paths_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = open(dir.path());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let canonical = root.canonical();
        assert_eq!(
            root.resolve(root.given(), Path::new("sub/new/file.txt"))
                .unwrap(),
            canonical.join("sub/new/file.txt")
        );
        assert_eq!(
            root.resolve(root.given(), &dir.path().join("sub/../x"))
                .unwrap(),
            canonical.join("x")
        );
        assert_eq!(
            root.resolve(root.given(), Path::new("")).unwrap(),
            canonical
        );
        assert_eq!(
            root.resolve(root.given(), Path::new(".")).unwrap(),
            canonical
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_base_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        let confinement = open(dir.path());
        let canonical = confinement.canonical().to_path_buf();
        let base = canonical.join("sub");
        assert_eq!(
            confinement
                .resolve(&base, Path::new("new/file.txt"))
                .unwrap(),
            canonical.join("sub/new/file.txt")
        );
        // Leaving the base is fine while staying in the root.
        assert_eq!(
            confinement.resolve(&base, Path::new("../top.txt")).unwrap(),
            canonical.join("top.txt")
        );
        assert_eq!(
            confinement
                .resolve(&base, &dir.path().join("sub/../x"))
                .unwrap(),
            canonical.join("x")
        );
        assert_eq!(confinement.resolve(&base, Path::new("")).unwrap(), base);
    }

    #[test]
    fn refuses_dot_dot_escapes_and_foreign_absolute_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = open(dir.path());
        let error = root
            .resolve(root.given(), Path::new("../outside"))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`../outside` is outside the runner root")
        );
        let error = root
            .resolve(root.given(), Path::new("a/../../b"))
            .unwrap_err();
        assert!(error.to_string().contains("a/../../b"));
        let error = root
            .resolve(root.given(), Path::new("/etc/passwd"))
            .unwrap_err();
        assert!(error.to_string().contains("/etc/passwd"));
    }

    #[test]
    fn refuses_symlinks_that_leave_the_root() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = open(dir.path());
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
        std::os::unix::fs::symlink("sub", dir.path().join("inner")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();

        let error = root
            .resolve(root.given(), Path::new("link/secret"))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`link/secret` leaves the runner root")
        );
        let error = root
            .resolve(root.given(), Path::new("dangling"))
            .unwrap_err();
        assert!(error.to_string().contains("`dangling` cannot be resolved"));
        assert_eq!(
            root.resolve(root.given(), Path::new("inner/f")).unwrap(),
            root.canonical().join("sub/f")
        );
    }
}
