//! In-process serialization of workspace tool executions per runner session.
//!
//! Keyed by provider id and session id, so two threads of one runtime that
//! share a sandbox never interleave a read-modify-write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

#[derive(Default)]
pub(crate) struct ExecutionLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl ExecutionLocks {
    /// Waits for exclusive use of workspace `key` (held until the guard drops).
    pub async fn lock(&self, key: String) -> OwnedMutexGuard<()> {
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_default()
            .clone();
        lock.lock_owned().await
    }
}

/// The lock key of a runner session.
pub(crate) fn session_key(provider_id: &str, session_id: &str) -> String {
    format!("runner\u{0}{provider_id}\u{0}{session_id}")
}

/// The lock key of a local workspace directory.
pub(crate) fn local_key(root: &std::path::Path) -> String {
    format!("local\u{0}{}", root.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn same_key_excludes_and_other_keys_do_not() {
        let locks = ExecutionLocks::default();
        let held = locks.lock(session_key("p", "s")).await;
        let other = locks.lock(session_key("p", "t")).await;
        let waiting = locks.lock(session_key("p", "s"));
        tokio::pin!(waiting);
        assert!(futures::poll!(&mut waiting).is_pending());
        drop(held);
        let _acquired = waiting.await;
        drop(other);
    }
}
