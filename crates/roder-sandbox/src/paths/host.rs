//! The host half of confinement: where a lexically confined path really
//! leads once symlinks are followed.
//!
//! These functions block on the filesystem (`std::fs`); async callers run
//! them on `spawn_blocking`. The check happens before the operation, so a
//! process racing to swap in a symlink is not defended against: this
//! confines the model's paths, it is not a sandbox (Landlock is).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::error::PathError;
use super::lexical::{Access, Confined, Confinement, Location, is_vcs_metadata, normalize};

/// The canonical form of the deepest existing ancestor of `absolute`, with
/// the missing rest appended, so the result need not exist.
///
/// An ancestor is found with `lstat`, so a dangling symlink counts as
/// existing and is then refused ([`PathError::Dangling`]): writing through it
/// would create its target, wherever that is. A file in the middle of the
/// path (`file/x`) counts as missing below it; the operation then fails.
/// `requested` names the path in errors.
pub fn real_path(absolute: &Path, requested: &Path) -> Result<PathBuf, PathError> {
    let mut existing = absolute;
    let mut missing = Vec::new();
    loop {
        match std::fs::symlink_metadata(existing) {
            Ok(metadata) => {
                return match std::fs::canonicalize(existing) {
                    Ok(mut real) => {
                        real.extend(missing.iter().rev());
                        Ok(real)
                    }
                    Err(error) if metadata.file_type().is_symlink() && is_missing(&error) => {
                        Err(PathError::Dangling {
                            requested: requested.to_path_buf(),
                            link: existing.to_path_buf(),
                        })
                    }
                    Err(error) => Err(PathError::Io {
                        requested: requested.to_path_buf(),
                        action: "resolve",
                        error: error.to_string(),
                    }),
                };
            }
            Err(error) if is_missing(&error) => {
                let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
                    return Err(PathError::Io {
                        requested: requested.to_path_buf(),
                        action: "resolve",
                        error: "no ancestor of it exists".to_string(),
                    });
                };
                missing.push(name);
                existing = parent;
            }
            Err(error) => {
                return Err(PathError::Io {
                    requested: requested.to_path_buf(),
                    action: "inspect",
                    error: error.to_string(),
                });
            }
        }
    }
}

fn is_missing(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// Checks that the real location of a lexically `confined` path stays where
/// `access` allows: under the canonical root or, for reads, a canonical read
/// root (read roots that do not resolve are skipped), and for writes not
/// inside `.git` unless the policy allows it. For callers that do not keep
/// the root open (the tools' local workspace resolves it on every call, so a
/// root that is replaced is seen).
pub fn check_real(
    confinement: &Confinement<'_>,
    confined: &Confined,
    requested: &Path,
    access: Access,
) -> Result<(), PathError> {
    let root = normalize(confinement.root);
    let canonical_root = std::fs::canonicalize(&root).map_err(|error| PathError::RootUnusable {
        label: confinement.label.to_string(),
        root: root.clone(),
        error: error.to_string(),
    })?;
    let mut allowed = vec![canonical_root.clone()];
    if access == Access::Read {
        allowed.extend(
            confinement
                .read_roots
                .iter()
                .filter_map(|read_root| std::fs::canonicalize(read_root).ok()),
        );
    }
    let real = real_path(&confined.absolute, requested)?;
    if !allowed.iter().any(|prefix| real.starts_with(prefix)) {
        return Err(PathError::LeavesThroughLink {
            requested: requested.to_path_buf(),
            label: confinement.label.to_string(),
            root,
            real,
        });
    }
    if access == Access::Write
        && !confinement.allow_vcs_metadata
        && real
            .strip_prefix(&canonical_root)
            .is_ok_and(is_vcs_metadata)
    {
        return Err(PathError::VcsMetadata {
            requested: requested.to_path_buf(),
            through_link: true,
        });
    }
    Ok(())
}

/// A host directory that paths are confined to, as given and as the
/// filesystem resolved it when opened (the runners' root: opened once per
/// session).
///
/// Both are kept because callers speak in terms of the given path
/// (`/tmp/ws/file`) while containment must be checked on the real one
/// (`/private/tmp/ws` where `/tmp` is a symlink). Relative paths are taken
/// against a base directory the caller names (a thread's working directory
/// need not be the root's top), so one root serves every working directory
/// inside it. `.git` is not refused here: the runtime's tools do that before
/// a request reaches a runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinedRoot {
    given: PathBuf,
    canonical: PathBuf,
    label: &'static str,
}

impl ConfinedRoot {
    /// Resolves an existing root directory; `label` names it in errors.
    pub fn open(given: &Path, label: &'static str) -> Result<Self, PathError> {
        let canonical = std::fs::canonicalize(given).map_err(|error| PathError::RootUnusable {
            label: label.to_string(),
            root: given.to_path_buf(),
            error: error.to_string(),
        })?;
        if !canonical.is_dir() {
            return Err(PathError::RootNotDir {
                label: label.to_string(),
                root: given.to_path_buf(),
            });
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
    /// inside the root: lexically first ([`Confinement::resolve`], against the
    /// given root or the canonical one, whichever `base` or `path` is
    /// written under), then through [`real_path`], which must stay under the
    /// canonical root. The result need not exist; its existing part is
    /// canonical.
    pub fn resolve(&self, base: &Path, path: &Path) -> Result<PathBuf, PathError> {
        let inside = self.lexical(base, path)?;
        let candidate = self.canonical.join(inside);
        let real = real_path(&candidate, path)?;
        if !real.starts_with(&self.canonical) {
            return Err(PathError::LeavesThroughLink {
                requested: path.to_path_buf(),
                label: self.label.to_string(),
                root: self.given.clone(),
                real,
            });
        }
        Ok(real)
    }

    /// Resolves an existing directory inside the root, as [`Self::resolve`]
    /// does. `what` names the directory's role in errors, as in "working
    /// directory "src" does not exist".
    pub fn resolve_dir(&self, base: &Path, path: &Path, what: &str) -> Result<PathBuf, PathError> {
        let resolved = self.resolve(base, path)?;
        match std::fs::metadata(&resolved) {
            Ok(metadata) if metadata.is_dir() => Ok(resolved),
            Ok(_) => Err(PathError::NotADirectory {
                what: what.to_string(),
                requested: path.to_path_buf(),
            }),
            Err(error) => Err(PathError::Missing {
                what: what.to_string(),
                requested: path.to_path_buf(),
                error: error.to_string(),
            }),
        }
    }

    /// The path relative to the root, lexically.
    fn lexical(&self, base: &Path, path: &Path) -> Result<PathBuf, PathError> {
        let base_is_canonical = !base.starts_with(&self.given) && base.starts_with(&self.canonical);
        let (first, second) = if base_is_canonical {
            (&self.canonical, &self.given)
        } else {
            (&self.given, &self.canonical)
        };
        let confined = match self.confinement(first).resolve(base, path, Access::Write) {
            // An absolute path may be written under the other spelling.
            Err(PathError::Outside { climbs: false, .. }) if path.has_root() => self
                .confinement(second)
                .resolve(base, path, Access::Write)
                .map_err(|_| {
                    self.confinement(&self.given)
                        .outside(path, &self.given, Access::Write, false)
                })?,
            Err(PathError::Outside { climbs, .. }) => {
                return Err(self.confinement(&self.given).outside(
                    path,
                    &self.given,
                    Access::Write,
                    climbs,
                ));
            }
            other => other?,
        };
        match confined.location {
            Location::Root(relative) => Ok(relative),
            Location::ReadRoot => {
                Err(self
                    .confinement(&self.given)
                    .outside(path, &self.given, Access::Write, false))
            }
        }
    }

    fn confinement<'a>(&'a self, root: &'a Path) -> Confinement<'a> {
        Confinement {
            root,
            read_roots: &[],
            label: self.label,
            allow_vcs_metadata: true,
        }
    }
}
