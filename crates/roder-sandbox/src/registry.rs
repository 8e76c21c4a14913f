//! The commands a session is running, by command id, so that
//! `cancel_command` (called from another task) can reach them.
//!
//! One type for every runner (unix-local, docker, sprites). Each entry is a
//! cancellation token the command's runner watches: [`crate::run`] kills the
//! process group when it fires, the docker runner stops the exec, the
//! sprites runner aborts the exec request. The registry only routes cancels;
//! it never kills anything itself.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

/// Shared registry of one session's running commands; clones share it.
#[derive(Debug, Clone, Default)]
pub struct RunningCommands {
    entries: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

/// A second command under an id that is still running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlreadyRunning {
    pub command_id: String,
}

impl fmt::Display for AlreadyRunning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a command with id {:?} is already running in this session; use a new id or wait for it to finish",
            self.command_id
        )
    }
}

impl std::error::Error for AlreadyRunning {}

impl RunningCommands {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        // Every critical section is one insert, lookup, remove or loop over
        // tokens, so the map is consistent even if a holder panicked.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `command_id` before anything starts, so a duplicate id is
    /// refused before any process starts and a cancel that races the start
    /// is not lost (the token is already cancelled when the command starts).
    pub fn reserve(&self, command_id: &str) -> Result<Reservation, AlreadyRunning> {
        let mut entries = self.lock();
        if entries.contains_key(command_id) {
            return Err(AlreadyRunning {
                command_id: command_id.to_string(),
            });
        }
        let token = CancellationToken::new();
        entries.insert(command_id.to_string(), token.clone());
        Ok(Reservation {
            commands: self.clone(),
            command_id: command_id.to_string(),
            token,
        })
    }

    /// Signals a running command to stop. Returns whether one was running
    /// (a command cancelled but not yet finished still counts).
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

    /// How many commands are running.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no command is running.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// One running command's claim on its id; releases it when dropped, however
/// the command ends (even when its future is dropped).
#[derive(Debug)]
pub struct Reservation {
    commands: RunningCommands,
    command_id: String,
    token: CancellationToken,
}

impl Reservation {
    /// Fires on `cancel`/`cancel_all` for this id.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn command_id(&self) -> &str {
        &self.command_id
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
        assert!(
            error.to_string().contains("\"c1\" is already running"),
            "{error}"
        );
        assert_eq!(commands.len(), 1);
        drop(reservation);
        assert!(commands.is_empty());
        assert!(commands.reserve("c1").is_ok());
    }

    #[test]
    fn cancel_reaches_only_its_token_and_reports_whether_one_ran() {
        let commands = RunningCommands::default();
        assert!(!commands.cancel("nope"));
        let first = commands.reserve("c1").unwrap();
        let second = commands.reserve("c2").unwrap();
        assert!(!first.token().is_cancelled());
        assert!(commands.cancel("c1"));
        assert!(first.token().is_cancelled());
        assert!(!second.token().is_cancelled());
        drop(first);
        assert!(!commands.cancel("c1"));
    }

    #[test]
    fn cancel_all_reaches_every_running_command() {
        let commands = RunningCommands::default();
        let first = commands.reserve("a").unwrap();
        let second = commands.clone().reserve("b").unwrap();
        commands.cancel_all();
        assert!(first.token().is_cancelled() && second.token().is_cancelled());
        assert_eq!(first.command_id(), "a");
    }
}
