//! Spawning one supervised process and the handle that stops its tree.

use std::io;
use std::process::ExitStatus;

/// A running command under its keeper. Dropping it while the command runs
/// stops the whole tree: a tool future dropped at any await (turn
/// interrupted, lease lost, runtime shutting down) leaves nothing behind.
#[derive(Debug)]
pub struct Supervised {
    child: tokio::process::Child,
    /// The keeper's pid while it is ours to signal: `None` once reaped, so a
    /// reused pid is never signalled.
    pid: Option<libc::pid_t>,
}

/// Spawns `command` supervised: in a new process group, under a keeper that
/// kills the tree if this process dies (Linux). The command's stdio, env,
/// cwd and args are the caller's; do not set `kill_on_drop` (it would kill
/// the keeper alone) or another `process_group`.
///
/// Exec failures (no such program, ...) are returned as errors, as with a
/// plain spawn.
pub fn spawn(mut command: tokio::process::Command) -> io::Result<Supervised> {
    command.process_group(0);
    #[cfg(target_os = "linux")]
    crate::keeper::install(&mut command);
    let child = command.spawn()?;
    // The command keeps our copies of any pipe write ends: drop them now, so
    // readers see EOF once the process tree is done with them.
    drop(command);
    let pid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
    Ok(Supervised { child, pid })
}

impl Supervised {
    /// The pid of the process Roder forked (the keeper on Linux).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops the command and everything it started, now. Returns at once;
    /// [`Supervised::wait`] returns after the tree is gone.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid else {
            return;
        };
        if pid <= 1 {
            return;
        }
        // SAFETY: `pid` is our unreaped child, so it names no other process.
        #[cfg(target_os = "linux")]
        unsafe {
            libc::kill(pid, crate::keeper::STOP_SIGNAL);
        }
        // SAFETY: as above; without a keeper the child leads the group.
        #[cfg(not(target_os = "linux"))]
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }

    /// Waits for the command to end and reports how it did (its own exit
    /// code or signal). Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await;
        if status.is_ok() {
            self.pid = None;
        }
        status
    }

    /// The command ended on its own: leave whatever it deliberately put in
    /// the background (a dev server for a port preview) alone on drop.
    pub fn disarm(&mut self) {
        self.pid = None;
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}
