//! The lexical half of confinement: pure functions over `Path`, no I/O, so
//! the same rules hold for a host directory and a runner's filesystem.

use std::path::{Component, Path, PathBuf};

use super::error::PathError;

/// What a resolved path will be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading a file or searching: the root and its read roots.
    Read,
    /// Creating, changing or deleting a file: the root only, and not inside
    /// `.git` unless the policy allows it.
    Write,
    /// A command's working directory: the root only.
    Workdir,
}

/// Where a confined path lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Under the root; the path relative to it (empty for the root itself).
    Root(PathBuf),
    /// Under one of the read roots (and not under the root).
    ReadRoot,
}

/// A path that passed lexical confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// Absolute and folded: no `.`, no `..`.
    pub absolute: PathBuf,
    pub location: Location,
}

/// The places a path may lie in, and the policy on `.git`.
#[derive(Debug, Clone, Copy)]
pub struct Confinement<'a> {
    /// The root (the workspace); folded before use.
    pub root: &'a Path,
    /// Directories that reads may also use; only absolute ones count.
    pub read_roots: &'a [PathBuf],
    /// What errors call the root ("workspace", "runner root", "worktree"),
    /// so a refusal reads in the words of what the user configured.
    pub label: &'a str,
    /// Lifts the `.git` write refusal (the policy's bypass mode).
    pub allow_vcs_metadata: bool,
}

impl Confinement<'_> {
    /// Resolves `requested` (relative to `base`, or absolute) for `access`.
    ///
    /// `base` is where relative paths start (a working directory inside the
    /// root, or the root); their `..` may leave `base` but never climbs above
    /// the root, at any step: `a/../b` is fine, `../root/b` is refused even
    /// though it would come back in. An absolute path is folded (`..` stops
    /// at `/`) and must then lie under the root or, for reads, a read root.
    /// The empty path is `base`; callers for whom it is a mistake refuse it
    /// first ([`PathError::Empty`]).
    pub fn resolve(
        &self,
        base: &Path,
        requested: &Path,
        access: Access,
    ) -> Result<Confined, PathError> {
        refuse_nul(requested)?;
        let root = normalize(self.root);
        let Some(absolute) = fold(&root, base, requested) else {
            return Err(self.outside(requested, &root, access, true));
        };
        if let Ok(relative) = absolute.strip_prefix(&root) {
            let relative = relative.to_path_buf();
            if access == Access::Write && !self.allow_vcs_metadata && is_vcs_metadata(&relative) {
                return Err(PathError::VcsMetadata {
                    requested: requested.to_path_buf(),
                    through_link: false,
                });
            }
            return Ok(Confined {
                absolute,
                location: Location::Root(relative),
            });
        }
        if access == Access::Read
            && self
                .read_roots
                .iter()
                .map(|read_root| normalize(read_root))
                .any(|read_root| read_root.is_absolute() && absolute.starts_with(&read_root))
        {
            return Ok(Confined {
                absolute,
                location: Location::ReadRoot,
            });
        }
        Err(self.outside(requested, &root, access, false))
    }

    /// The refusal of a path outside the root; naming the read roots where
    /// there are some.
    pub fn outside(
        &self,
        requested: &Path,
        root: &Path,
        access: Access,
        climbs: bool,
    ) -> PathError {
        PathError::Outside {
            requested: requested.to_path_buf(),
            label: self.label.to_string(),
            root: root.to_path_buf(),
            read_roots: self.read_roots.to_vec(),
            access,
            climbs,
        }
    }
}

/// A runner path: `requested` resolved against the runner's workspace
/// `root`, as absolute folded text.
///
/// Lexical only, because the runner's filesystem is remote (a container, a
/// sprite): what a symlink there points to is the runner's to enforce. A
/// relative path may not climb above `root` (as [`Confinement::resolve`]);
/// an absolute one is only folded, because the runner is the sandbox and the
/// runtime has already checked it against its root and read roots. The empty
/// path and `.` are `root`. Refuses NUL bytes and non-UTF-8 paths (runner
/// protocols carry text).
pub fn runner_path(root: &str, requested: &Path, label: &str) -> Result<String, PathError> {
    if requested.to_str().is_none() {
        return Err(PathError::NotUtf8 {
            requested: requested.to_path_buf(),
        });
    }
    refuse_nul(requested)?;
    let root_path = normalize(Path::new(root));
    let folded = fold(&root_path, &root_path, requested).ok_or_else(|| PathError::Outside {
        requested: requested.to_path_buf(),
        label: label.to_string(),
        root: root_path.clone(),
        read_roots: Vec::new(),
        access: Access::Read,
        climbs: true,
    })?;
    // Built from UTF-8 components, so this always holds.
    folded
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| PathError::NotUtf8 {
            requested: requested.to_path_buf(),
        })
}

/// Drops `.` and applies `..` to the preceding component without touching
/// the filesystem. `..` at the filesystem root stays at the root, as the
/// kernel does; a leading `..` of a relative path is kept, so the result
/// cannot be mistaken for a path under a root. Trailing slashes go.
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

/// `requested` folded onto `base`, or `None` when a `..` of a relative
/// `requested` climbs above `root` (above `base` when `base` is not under
/// `root`). An absolute `requested` is [`normalize`]d.
fn fold(root: &Path, base: &Path, requested: &Path) -> Option<PathBuf> {
    if requested.has_root() {
        return Some(normalize(requested));
    }
    let mut out = normalize(base);
    let floor = if out.starts_with(root) {
        root.components().count()
    } else {
        out.components().count()
    };
    let mut depth = out.components().count();
    for component in requested.components() {
        match component {
            Component::CurDir => {}
            Component::Normal(name) => {
                out.push(name);
                depth += 1;
            }
            Component::ParentDir => {
                let above_a_name =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if depth <= floor || !above_a_name {
                    return None;
                }
                out.pop();
                depth -= 1;
            }
            // A prefix without a root (Windows `C:x`) names another drive's
            // working directory: never under the root.
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether a path relative to the root lies inside a `.git` directory (or is
/// one). Names that merely contain `.git` (`.gitignore`) are ordinary.
pub fn is_vcs_metadata(relative: &Path) -> bool {
    relative
        .components()
        .any(|component| component.as_os_str() == ".git")
}

/// How results name a path: relative to the root when under it (`.` for the
/// root itself), absolute otherwise, so the model can pass the name straight
/// back to another tool.
pub fn display_path(absolute: &Path, relative: Option<&Path>) -> String {
    match relative {
        Some(relative) if relative.as_os_str().is_empty() => ".".to_string(),
        Some(relative) => relative.to_string_lossy().into_owned(),
        None => absolute.to_string_lossy().into_owned(),
    }
}

fn refuse_nul(requested: &Path) -> Result<(), PathError> {
    if requested.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(PathError::Nul {
            requested: requested.to_path_buf(),
        });
    }
    Ok(())
}
