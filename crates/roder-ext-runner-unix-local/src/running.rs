//! The commands a session is running, by command id, so that
//! `cancel_command` (called from another task) can reach them.
//!
//! Each entry is the cancellation token of one `roder_sandbox::run`; the
//! sandbox kills the command's process group when it fires, on timeout, and when the
//! `run_command` future is dropped, so this registry only routes cancels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::bail;
use tokio_util::sync::CancellationToken;

/// Shared registry of running commands of one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunningCommands {
    entries: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl RunningCommands {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        // The map stays consistent even if a holder panicked: every critical
        // section is a single insert/lookup/remove.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `command_id` before spawning, so a duplicate id is refused
    /// before any process starts and a cancel that races the spawn is not
    /// lost (the token is already cancelled when the command starts).
    pub(crate) fn reserve(&self, command_id: &str) -> anyhow::Result<Reservation> {
        let mut entries = self.lock();
        if entries.contains_key(command_id) {
            bail!(
                "a command with id `{command_id}` is already running in this session; use a new id or wait for it to finish"
            );
        }
        let token = CancellationToken::new();
        entries.insert(command_id.to_string(), token.clone());
        Ok(Reservation {
            commands: self.clone(),
            command_id: command_id.to_string(),
            token,
        })
    }

    /// Cancels a running command. Returns whether one was running.
    pub(crate) fn cancel(&self, command_id: &str) -> bool {
        match self.lock().get(command_id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One running command's claim on its id; releases it when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    commands: RunningCommands,
    command_id: String,
    token: CancellationToken,
}

impl Reservation {
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.commands.lock().remove(&self.command_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_ids_are_refused_until_the_first_finishes() {
        let commands = RunningCommands::default();
        let reservation = commands.reserve("c1").unwrap();
        let error = commands.reserve("c1").unwrap_err();
        assert!(error.to_string().contains("`c1` is already running"));
        drop(reservation);
        assert_eq!(commands.len(), 0);
        assert!(commands.reserve("c1").is_ok());
    }

    #[test]
    fn cancel_reports_whether_a_command_was_running() {
        let commands = RunningCommands::default();
        assert!(!commands.cancel("nope"));
        let reservation = commands.reserve("c1").unwrap();
        assert!(!reservation.token().is_cancelled());
        assert!(commands.cancel("c1"));
        assert!(reservation.token().is_cancelled());
    }
}
