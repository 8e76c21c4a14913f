//! Confinement of paths to a root directory: [`roder_sandbox::paths`], where
//! the rules for the tools and every runner live (see that crate's README,
//! "Paths"), re-exported here because this runner's public API has offered
//! them to other runners over host directories.
//!
//! A path is resolved in two steps: lexically (so `..` cannot climb out
//! whatever the filesystem holds), then on disk by canonicalising the deepest
//! ancestor that exists (so a symlink inside the root cannot lead out of it,
//! and a dangling one is refused). [`ConfinedRoot`] blocks on the
//! filesystem; async callers run it on `spawn_blocking`.

pub use roder_sandbox::paths::{ConfinedRoot, PathError, normalize};
