//! Path normalisation and confinement, written once for the builtin tools
//! and every runner (see the README's "Paths" section for the rules).
//!
//! Two layers. [`lexical`] is pure (no I/O): it folds `.` and `..` so that a
//! relative path never climbs above its root, and decides whether the result
//! lies under the root or a read root. That is all a runner over a remote
//! filesystem (a container, a sprite) can check from here, so
//! [`runner_path`] stops there. [`host`] adds, for host directories, the
//! filesystem's answer: the deepest existing ancestor is canonicalised, so a
//! symlink inside the root cannot lead out of it.

mod error;
mod host;
mod lexical;

pub use error::PathError;
pub use host::{ConfinedRoot, check_real, real_path};
pub use lexical::{
    Access, Confined, Confinement, Location, display_path, is_vcs_metadata, normalize, runner_path,
};

#[cfg(all(test, unix))]
mod host_tests;
#[cfg(all(test, unix))]
mod lexical_tests;
