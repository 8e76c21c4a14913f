//! Spawning one supervised process and the handle that stops its group.

use std::io;
use std::process::ExitStatus;

#[cfg(target_os = "linux")]
use crate::warden::{Warden, warden};

/// A running command, leader of its own process group. Dropping it while the
/// command runs kills the group: a tool future dropped at any await (turn
/// interrupted, lease lost, runtime shutting down) leaves nothing behind.
#[derive(Debug)]
pub struct Supervised {
    child: tokio::process::Child,
    /// The group (= the leader's pid) while it is ours to signal: `None`
    /// once the leader is reaped, so a reused pid is never signalled.
    pgid: Option<libc::pid_t>,
    #[cfg(target_os = "linux")]
    warden: Option<&'static Warden>,
}

/// Spawns `command` supervised: in a new process group that is killed on
/// [`Supervised::stop`] and drop, and (Linux) by this process's warden if
/// this process dies while the command runs. The command's stdio, env, cwd
/// and args are the caller's; do not set `pre_exec` (it forces a fork, whose
/// cost grows with this process's memory) or another `process_group`.
///
/// Exec failures (no such program, no such directory) are errors, as with a
/// plain spawn.
pub async fn spawn(mut command: tokio::process::Command) -> io::Result<Supervised> {
    supervise(async move {
        command.process_group(0);
        let child = command.spawn();
        // The command keeps our copies of any pipe write ends: drop them
        // now, so readers see EOF once the process group is done with them.
        drop(command);
        child
    })
    .await
}

/// Supervises the child `start` spawns (in its own process group, which
/// `start` must arrange). The warden is up before `start` runs, so it is
/// never started from a confined spawner thread.
pub(crate) async fn supervise(
    start: impl std::future::Future<Output = io::Result<tokio::process::Child>>,
) -> io::Result<Supervised> {
    #[cfg(target_os = "linux")]
    let warden = warden().await;
    let child = start.await?;
    let pgid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
    #[cfg(target_os = "linux")]
    if let (Some(warden), Some(pgid)) = (warden, pgid) {
        warden.watch(pgid);
    }
    Ok(Supervised {
        child,
        pgid,
        #[cfg(target_os = "linux")]
        warden,
    })
}

impl Supervised {
    /// The leader's pid (= the group id), until it is reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGKILLs the whole group now. [`Supervised::wait`] then returns once
    /// the leader is reaped.
    pub fn stop(&mut self) {
        let Some(pgid) = self.pgid else {
            return;
        };
        if pgid > 1 {
            // SAFETY: killpg has no memory-safety preconditions; the leader
            // is unreaped, so the group id names no one else's group.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
        // Killed already: nothing is left for the warden to do.
        self.release();
    }

    /// Waits for the leader to end and reports how it did. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await;
        if status.is_ok() {
            self.release();
        }
        status
    }

    /// The command ended on its own: leave whatever it deliberately put in
    /// the background (a dev server for a port preview) alone on drop.
    pub fn disarm(&mut self) {
        self.release();
    }

    /// Stops watching the group: it is dead, or reaped, or disowned.
    fn release(&mut self) {
        #[cfg(target_os = "linux")]
        if let (Some(warden), Some(pgid)) = (self.warden, self.pgid) {
            warden.forget(pgid);
        }
        self.pgid = None;
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}
