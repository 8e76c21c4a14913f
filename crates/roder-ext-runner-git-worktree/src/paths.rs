//! Confinement of paths to a checkout.
//!
//! A path is resolved in two steps: lexically (so `..` cannot climb out
//! whatever the filesystem holds), then on disk by canonicalising the deepest
//! ancestor that exists (so a symlink inside the checkout cannot lead out of
//! it, and a dangling one is refused). Relative paths are taken against a
//! base directory inside the checkout (a thread's working directory), which
//! need not be the checkout's top.
//!
//! The functions here block on the filesystem; async callers run them on
//! `spawn_blocking`. Checks happen before the operation, so a process racing
//! to swap in a symlink is not defended against: this confines the model's
//! paths, it is not a sandbox.

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

/// A checkout as recorded and as the filesystem resolves it now.
///
/// Both are kept because callers speak in terms of the recorded path while
/// containment must be checked on the real one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Confinement {
    pub(crate) given: PathBuf,
    pub(crate) canonical: PathBuf,
}

impl Confinement {
    /// Resolves an existing checkout directory.
    pub(crate) fn open(checkout: &Path) -> anyhow::Result<Self> {
        let canonical = std::fs::canonicalize(checkout)
            .with_context(|| format!("checkout `{}` cannot be resolved", checkout.display()))?;
        if !canonical.is_dir() {
            bail!("checkout `{}` is not a directory", checkout.display());
        }
        Ok(Self {
            given: normalize(checkout),
            canonical,
        })
    }

    /// Resolves `path` (relative to `base`, or absolute) to a host path
    /// inside the checkout. Refuses `..` escapes and symlinks that leave the
    /// checkout, naming the path. The result need not exist; its existing
    /// part is canonical.
    pub(crate) fn resolve(&self, base: &Path, path: &Path) -> anyhow::Result<PathBuf> {
        let joined = normalize(&base.join(path));
        let inside = joined
            .strip_prefix(&self.given)
            .or_else(|_| joined.strip_prefix(&self.canonical))
            .map_err(|_| {
                anyhow::anyhow!(
                    "path `{}` is outside the worktree `{}`",
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
                "path `{}` leaves the worktree `{}` through a symlink",
                path.display(),
                self.given.display()
            );
        }
        resolved.extend(missing.iter().rev());
        Ok(resolved)
    }

    /// Resolves an existing directory inside the checkout.
    pub(crate) fn resolve_dir(&self, base: &Path, path: &Path) -> anyhow::Result<PathBuf> {
        let resolved = self.resolve(base, path)?;
        match std::fs::metadata(&resolved) {
            Ok(metadata) if metadata.is_dir() => Ok(resolved),
            Ok(_) => bail!("directory `{}` is not a directory", path.display()),
            Err(error) => {
                Err(error).with_context(|| format!("directory `{}` does not exist", path.display()))
            }
        }
    }
}

/// The working directory a claim asks for: `relative_cwd` must be relative,
/// must not climb out with `..`, must exist as a directory and must stay in
/// the checkout once symlinks are resolved. Blocks on the filesystem.
pub(crate) fn claimed_cwd(checkout: &Path, relative_cwd: Option<&Path>) -> anyhow::Result<PathBuf> {
    let confinement = Confinement::open(checkout)?;
    let Some(relative) = relative_cwd else {
        return Ok(confinement.canonical);
    };
    if relative.is_absolute() {
        bail!(
            "relative_cwd `{}` must be relative to the worktree's checkout",
            relative.display()
        );
    }
    if normalize(relative).starts_with(Component::ParentDir) {
        bail!(
            "relative_cwd `{}` is outside the worktree `{}`",
            relative.display(),
            checkout.display()
        );
    }
    confinement
        .resolve_dir(&confinement.canonical, relative)
        .with_context(|| format!("relative_cwd `{}` is not usable", relative.display()))
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
    fn relative_paths_resolve_against_the_base_inside_the_checkout() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        let confinement = Confinement::open(dir.path()).unwrap();
        let canonical = confinement.canonical.clone();
        let base = canonical.join("sub");
        assert_eq!(
            confinement
                .resolve(&base, Path::new("new/file.txt"))
                .unwrap(),
            canonical.join("sub/new/file.txt")
        );
        // Leaving the base is fine while staying in the checkout.
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
    fn escapes_are_refused_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
        let confinement = Confinement::open(dir.path()).unwrap();
        let base = confinement.canonical.clone();
        let error = confinement.resolve(&base, Path::new("../x")).unwrap_err();
        assert!(error.to_string().contains("`../x` is outside the worktree"));
        let error = confinement
            .resolve(&base, Path::new("/etc/passwd"))
            .unwrap_err();
        assert!(error.to_string().contains("`/etc/passwd` is outside"));
        let error = confinement.resolve(&base, Path::new("link/f")).unwrap_err();
        assert!(error.to_string().contains("`link/f` leaves the worktree"));
        let error = confinement
            .resolve(&base, Path::new("dangling"))
            .unwrap_err();
        assert!(error.to_string().contains("cannot be resolved"));
    }

    #[test]
    fn claimed_cwd_rules() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/bin")).unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("src", dir.path().join("alias")).unwrap();
        let canonical = std::fs::canonicalize(dir.path()).unwrap();

        assert_eq!(claimed_cwd(dir.path(), None).unwrap(), canonical);
        assert_eq!(
            claimed_cwd(dir.path(), Some(Path::new("src/./bin"))).unwrap(),
            canonical.join("src/bin")
        );
        assert_eq!(
            claimed_cwd(dir.path(), Some(Path::new("alias"))).unwrap(),
            canonical.join("src")
        );
        let error = |path: &str| {
            format!(
                "{:#}",
                claimed_cwd(dir.path(), Some(Path::new(path))).unwrap_err()
            )
        };
        assert!(error("..").contains("outside the worktree"));
        assert!(error("src/../../x").contains("outside the worktree"));
        assert!(error("/tmp").contains("must be relative"));
        assert!(error("out").contains("leaves the worktree"));
        assert!(error("missing").contains("does not exist"));
        assert!(error("file").contains("is not a directory"));
    }
}
