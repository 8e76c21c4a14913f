//! Confinement of paths to a session root.
//!
//! A path is resolved in two steps: lexically (so `..` cannot climb out
//! whatever the filesystem holds), then on disk by canonicalising the deepest
//! ancestor that exists (so a symlink inside the root cannot lead out of it).
//! The functions here block on the filesystem; callers run them on
//! `spawn_blocking`.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};

/// Drops `.` and applies `..` to the preceding component without touching
/// the filesystem. `..` at the filesystem root stays at the root, as the
/// kernel does; a leading `..` of a relative path is kept.
pub(crate) fn normalize(path: &Path) -> PathBuf {
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

/// A session's root: as configured and as the filesystem resolves it.
///
/// Both are kept because callers speak in terms of the configured path
/// (`/tmp/ws/file`) while containment must be checked on the real one
/// (`/private/tmp/ws` where `/tmp` is a symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionRoot {
    pub(crate) given: PathBuf,
    pub(crate) canonical: PathBuf,
}

impl SessionRoot {
    /// Resolves an existing root directory.
    pub(crate) fn open(given: &Path) -> anyhow::Result<Self> {
        let canonical = std::fs::canonicalize(given)
            .with_context(|| format!("runner root `{}` cannot be resolved", given.display()))?;
        if !canonical.is_dir() {
            bail!("runner root `{}` is not a directory", given.display());
        }
        Ok(Self {
            given: normalize(given),
            canonical,
        })
    }

    /// Resolves `path` (relative to the root, or absolute) to a host path
    /// inside the root. Refuses `..` escapes and symlinks that leave the root,
    /// naming the path. The result need not exist; its existing part is
    /// canonical.
    pub(crate) fn resolve(&self, path: &Path) -> anyhow::Result<PathBuf> {
        let joined = if path.is_absolute() {
            normalize(path)
        } else {
            normalize(&self.given.join(path))
        };
        let inside = joined
            .strip_prefix(&self.given)
            .or_else(|_| joined.strip_prefix(&self.canonical))
            .map_err(|_| {
                anyhow::anyhow!(
                    "path `{}` is outside the runner root `{}`",
                    path.display(),
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
                "path `{}` leaves the runner root `{}` through a symlink",
                path.display(),
                self.given.display()
            );
        }
        resolved.extend(missing.iter().rev());
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let root = SessionRoot::open(dir.path()).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let canonical = &root.canonical;
        assert_eq!(
            root.resolve(Path::new("sub/new/file.txt")).unwrap(),
            canonical.join("sub/new/file.txt")
        );
        assert_eq!(
            root.resolve(&dir.path().join("sub/../x")).unwrap(),
            canonical.join("x")
        );
        assert_eq!(root.resolve(Path::new("")).unwrap(), *canonical);
        assert_eq!(root.resolve(Path::new(".")).unwrap(), *canonical);
    }

    #[test]
    fn refuses_dot_dot_escapes_and_foreign_absolute_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = SessionRoot::open(dir.path()).unwrap();
        let error = root.resolve(Path::new("../outside")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`../outside` is outside the runner root")
        );
        let error = root.resolve(Path::new("a/../../b")).unwrap_err();
        assert!(error.to_string().contains("a/../../b"));
        let error = root.resolve(Path::new("/etc/passwd")).unwrap_err();
        assert!(error.to_string().contains("/etc/passwd"));
    }

    #[test]
    fn refuses_symlinks_that_leave_the_root() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = SessionRoot::open(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
        std::os::unix::fs::symlink("sub", dir.path().join("inner")).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();

        let error = root.resolve(Path::new("link/secret")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`link/secret` leaves the runner root")
        );
        let error = root.resolve(Path::new("dangling")).unwrap_err();
        assert!(error.to_string().contains("`dangling` cannot be resolved"));
        assert_eq!(
            root.resolve(Path::new("inner/f")).unwrap(),
            root.canonical.join("sub/f")
        );
    }
}
