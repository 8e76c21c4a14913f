//! The commands a session is running, by command id, so that
//! `cancel_command` (called from another task) can reach their process group.
//!
//! (The same mechanism as the unix-local runner's: both run host processes
//! and must stop them the same way.)
//!
//! Each command holds a [`GroupGuard`] for its whole life. The guard kills the
//! group when it is dropped while armed, which is what makes dropping a
//! `run_command` future (turn interrupted, deadline hit) stop the processes
//! instead of leaking them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::bail;

/// Sends SIGKILL to every process in group `pgid`.
///
/// Ids of 0 and 1 are refused: `killpg(0)` would hit our own group.
pub(crate) fn kill_group(pgid: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; an unknown or
    // already-empty group only yields ESRCH, which there is nothing to do about.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

#[derive(Debug, Default)]
struct Entry {
    /// Set once the process is spawned; `None` while it is being started.
    pgid: Option<i32>,
    /// Set by `cancel`; a command cancelled before it is spawned is killed
    /// as soon as it is.
    cancelled: bool,
}

/// Shared registry of running commands of one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunningCommands {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
}

impl RunningCommands {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // The map stays consistent even if a holder panicked: every critical
        // section is a single insert/lookup/remove.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `command_id` before spawning, so a duplicate id is refused
    /// before any process starts and a cancel that races the spawn is not lost.
    pub(crate) fn reserve(&self, command_id: &str) -> anyhow::Result<GroupGuard> {
        let mut entries = self.lock();
        if entries.contains_key(command_id) {
            bail!("a command with id `{command_id}` is already running in this session");
        }
        entries.insert(command_id.to_string(), Entry::default());
        Ok(GroupGuard {
            commands: self.clone(),
            command_id: command_id.to_string(),
            pgid: None,
            armed: true,
        })
    }

    /// Kills the group of a running command. Returns whether one was running.
    pub(crate) fn cancel(&self, command_id: &str) -> bool {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(command_id) else {
            return false;
        };
        entry.cancelled = true;
        if let Some(pgid) = entry.pgid {
            kill_group(pgid);
        }
        true
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One running command's claim on its id and its process group.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    commands: RunningCommands,
    command_id: String,
    pgid: Option<i32>,
    armed: bool,
}

impl GroupGuard {
    /// Records the spawned process group; kills it at once if the command
    /// was cancelled while it was starting.
    pub(crate) fn attach(&mut self, pgid: i32) {
        self.pgid = Some(pgid);
        let mut entries = self.commands.lock();
        if let Some(entry) = entries.get_mut(&self.command_id) {
            entry.pgid = Some(pgid);
            if entry.cancelled {
                kill_group(pgid);
            }
        }
    }

    /// Kills the whole group now (timeout).
    pub(crate) fn kill(&self) {
        if let Some(pgid) = self.pgid {
            kill_group(pgid);
        }
    }

    pub(crate) fn was_cancelled(&self) -> bool {
        self.commands
            .lock()
            .get(&self.command_id)
            .is_some_and(|entry| entry.cancelled)
    }

    /// The group leader exited on its own: leave anything it started in the
    /// background (a dev server for a port preview) alive.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            self.kill();
        }
        self.commands.lock().remove(&self.command_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_ids_are_refused_until_the_first_finishes() {
        let commands = RunningCommands::default();
        let guard = commands.reserve("c1").unwrap();
        let error = commands.reserve("c1").unwrap_err();
        assert!(error.to_string().contains("`c1` is already running"));
        drop(guard);
        assert_eq!(commands.len(), 0);
        assert!(commands.reserve("c1").is_ok());
    }

    #[test]
    fn cancel_reports_whether_a_command_was_running() {
        let commands = RunningCommands::default();
        assert!(!commands.cancel("nope"));
        let guard = commands.reserve("c1").unwrap();
        assert!(!guard.was_cancelled());
        assert!(commands.cancel("c1"));
        assert!(guard.was_cancelled());
    }

    #[test]
    fn kill_group_ignores_our_own_group_ids() {
        // Must not signal the test process's group.
        kill_group(0);
        kill_group(1);
        kill_group(-5);
    }
}
