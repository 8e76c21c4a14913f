//! The commands a session is running, by command id, so that
//! `cancel_command` (called from another task) can reach them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::bail;
use tokio_util::sync::CancellationToken;

/// Shared registry of one session's running commands.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunningCommands {
    entries: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl RunningCommands {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        // Every critical section is one insert/lookup/remove, so the map is
        // consistent even if a holder panicked.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `command_id` before anything starts, so a duplicate id is
    /// refused and a cancel racing the start is not lost.
    pub fn register(&self, command_id: &str) -> anyhow::Result<Registration> {
        let mut entries = self.lock();
        if entries.contains_key(command_id) {
            bail!("a command with id `{command_id}` is already running in this session");
        }
        let token = CancellationToken::new();
        entries.insert(command_id.to_string(), token.clone());
        Ok(Registration {
            commands: self.clone(),
            command_id: command_id.to_string(),
            token,
        })
    }

    /// Signals a running command to stop. Returns whether one was running.
    pub fn cancel(&self, command_id: &str) -> bool {
        match self.lock().get(command_id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Signals every running command (the session is closing).
    pub fn cancel_all(&self) {
        for token in self.lock().values() {
            token.cancel();
        }
    }
}

/// A registered command; unregisters itself when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    commands: RunningCommands,
    command_id: String,
    token: CancellationToken,
}

impl Registration {
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.commands.lock().remove(&self.command_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_and_cancel_reaches_the_token() {
        let commands = RunningCommands::default();
        let first = commands.register("c").unwrap();
        assert!(commands.register("c").is_err());
        assert!(!commands.cancel("other"));
        assert!(commands.cancel("c"));
        assert!(first.token().is_cancelled());
        drop(first);
        assert!(!commands.cancel("c"));
        assert!(commands.register("c").is_ok());
    }
}
