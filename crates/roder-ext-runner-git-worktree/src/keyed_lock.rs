//! Process-wide async locks keyed by path.
//!
//! Two kinds of state need serializing across tasks, and across every
//! materializer or provider instance of this process (the runtime holds one
//! of each over the same root):
//!
//! * a source repository's worktree list: concurrent `git worktree add`,
//!   `remove` and `prune` race on `.git/worktrees/` (git picks admin-dir
//!   names and takes its own locks, and fails rather than waits);
//! * one worktree's record: bind, unbind and cleanup read, change and
//!   rewrite it.
//!
//! When both are needed the record lock is taken first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

/// A map from key to its lock. Entries nobody holds are pruned on each
/// call, so the map stays as small as the set of keys in use.
#[derive(Default)]
pub(crate) struct KeyedLocks {
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeyedLocks {
    /// Waits for the lock of `key` and holds it until the guard drops.
    pub(crate) async fn lock(&self, key: &Path) -> OwnedMutexGuard<()> {
        let lock = {
            // Every critical section is a map lookup/insert, so a poisoned
            // map is still consistent.
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry(key.to_path_buf()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// The lock of `key` if nobody holds it (tests check exclusion with it
    /// instead of racing a timer).
    #[cfg(test)]
    fn try_lock(&self, key: &Path) -> Option<OwnedMutexGuard<()>> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            locks.entry(key.to_path_buf()).or_default().clone()
        };
        lock.try_lock_owned().ok()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Keyed by a repository's common git directory (shared by all its
/// worktrees, so two paths to one repository share a lock).
pub(crate) static REPOSITORIES: LazyLock<KeyedLocks> = LazyLock::new(KeyedLocks::default);

/// Keyed by a worktree's directory `<root>/<id>`.
pub(crate) static RECORDS: LazyLock<KeyedLocks> = LazyLock::new(KeyedLocks::default);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn same_key_excludes_other_keys_do_not() {
        let locks = KeyedLocks::default();
        let held = locks.lock(Path::new("/a")).await;
        assert!(locks.try_lock(Path::new("/a")).is_none(), "/a is held");
        assert!(locks.try_lock(Path::new("/b")).is_some(), "/b is free");
        drop(held);
        assert!(locks.try_lock(Path::new("/a")).is_some(), "/a was released");
        let _c = locks.lock(Path::new("/c")).await;
        assert_eq!(locks.len(), 1, "unused entries are pruned");
    }
}
