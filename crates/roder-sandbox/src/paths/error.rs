//! Why a path was refused, in one set of words for every caller.
//!
//! Every message names the path as it was requested (quoted with escapes, so
//! a control character in a model's path cannot garble it), the root it was
//! checked against, and what to do instead. Callers turn it into their own
//! error type with `to_string()` (the tools) or `?` (anyhow, the runners).

use std::fmt;
use std::path::PathBuf;

use super::lexical::Access;

/// A path refused by confinement, or a filesystem answer that stopped the
/// check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// The empty path, where a caller does not take it to mean the root.
    Empty { label: String, root: PathBuf },
    /// A NUL byte: no filesystem name holds one, and a C API would cut the
    /// path there.
    Nul { requested: PathBuf },
    /// A runner path that is not UTF-8 (runner protocols carry text).
    NotUtf8 { requested: PathBuf },
    /// The path lies outside the root (and, for reads, its read roots).
    /// `climbs` when a `..` of a relative path went above the root.
    Outside {
        requested: PathBuf,
        label: String,
        root: PathBuf,
        read_roots: Vec<PathBuf>,
        access: Access,
        climbs: bool,
    },
    /// A write inside a `.git` directory, which the policy does not allow;
    /// `through_link` when only the resolved path is inside it.
    VcsMetadata {
        requested: PathBuf,
        through_link: bool,
    },
    /// A symlink inside the root leads out of it.
    LeavesThroughLink {
        requested: PathBuf,
        label: String,
        root: PathBuf,
        real: PathBuf,
    },
    /// The path goes through a symlink whose target does not exist (writing
    /// through it would create the target, wherever that is).
    Dangling { requested: PathBuf, link: PathBuf },
    /// The filesystem refused to answer (permission, a symlink loop).
    Io {
        requested: PathBuf,
        action: &'static str,
        error: String,
    },
    /// The root itself cannot be resolved.
    RootUnusable {
        label: String,
        root: PathBuf,
        error: String,
    },
    /// The root exists but is not a directory.
    RootNotDir { label: String, root: PathBuf },
    /// A directory was asked for (`what`: "working directory") and the path
    /// names something else.
    NotADirectory { what: String, requested: PathBuf },
    /// A directory was asked for and nothing is there.
    Missing {
        what: String,
        requested: PathBuf,
        error: String,
    },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty { label, root } => write!(
                f,
                "path must not be empty: name a file or directory relative to the {label} {}, or an absolute path",
                root.display()
            ),
            Self::Nul { requested } => write!(
                f,
                "path {requested:?} contains a NUL byte, which no file name can hold"
            ),
            Self::NotUtf8 { requested } => write!(
                f,
                "path {requested:?} is not valid UTF-8, which runner paths must be; rename the file or name it by a UTF-8 path"
            ),
            Self::Outside {
                requested,
                label,
                root,
                read_roots,
                access,
                climbs,
            } => {
                write!(
                    f,
                    "path {requested:?} is outside the {label} {}",
                    root.display()
                )?;
                if !read_roots.is_empty() {
                    let roots: Vec<String> = read_roots
                        .iter()
                        .map(|root| root.display().to_string())
                        .collect();
                    if *access == Access::Read {
                        write!(f, " and its read roots ({})", roots.join(", "))?;
                    } else {
                        write!(f, " (read roots are readable but never writable)")?;
                    }
                }
                if *climbs {
                    write!(
                        f,
                        ": its '..' climbs out of the {label} {}; use a path inside the {label}, or an absolute path",
                        root.display()
                    )?;
                }
                Ok(())
            }
            Self::VcsMetadata {
                requested,
                through_link: false,
            } => write!(
                f,
                "path {requested:?} is inside a .git directory; the policy does not allow writing version-control metadata"
            ),
            Self::VcsMetadata {
                requested,
                through_link: true,
            } => write!(
                f,
                "path {requested:?} resolves through a symbolic link into a .git directory; the policy does not allow writing version-control metadata"
            ),
            Self::LeavesThroughLink {
                requested,
                label,
                root,
                real,
            } => write!(
                f,
                "path {requested:?} resolves through a symbolic link to {}, which is outside the {label} {} (the link leaves the {label})",
                real.display(),
                root.display()
            ),
            Self::Dangling { requested, link } => write!(
                f,
                "path {requested:?} cannot be resolved: it goes through the dangling symbolic link {}",
                link.display()
            ),
            Self::Io {
                requested,
                action,
                error,
            } => write!(f, "cannot {action} path {requested:?}: {error}"),
            Self::RootUnusable { label, root, error } => {
                write!(f, "{label} {} cannot be resolved: {error}", root.display())
            }
            Self::RootNotDir { label, root } => {
                write!(f, "{label} {} is not a directory", root.display())
            }
            Self::NotADirectory { what, requested } => {
                write!(f, "{what} {requested:?} is not a directory")
            }
            Self::Missing {
                what,
                requested,
                error,
            } => write!(f, "{what} {requested:?} does not exist ({error})"),
        }
    }
}

impl std::error::Error for PathError {}
