//! The warden: one small process per Roder process that kills the process
//! groups of running commands when Roder dies, however it dies.
//!
//! Why one watcher and not a keeper per command: anything forked from Roder
//! costs a copy of Roder's page tables (about 9 ms per fork with a 200 MB
//! heap, measured) and then shares Roder's memory copy-on-write for as long
//! as it lives, while std's `posix_spawn` path costs the same whatever the
//! heap. So commands keep the fast spawn, and the watcher is a *fresh*
//! process: this executable, re-executed once with [`WARDEN_ENV`] set and
//! caught by [`WARDEN_HOOK`] in `.init_array`, before `main` runs.
//!
//! Protocol, over the warden's stdin (a pipe whose only writer is Roder's
//! close-on-exec end): `+PGID\n` watch a group, `-PGID\n` forget it. When
//! the pipe reaches end-of-file — Roder exited or was killed; the kernel
//! closes the fd either way — the warden SIGKILLs every group it still
//! watches and exits. A group is watched from just after its leader is
//! spawned until Roder has reaped the leader (or killed the group), so a
//! watched group id cannot have been reused.

use std::collections::HashSet;
use std::io::{BufRead as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::sync::OnceCell;

/// Set (to any value) only in the warden's environment.
const WARDEN_ENV: &str = "RODER_SANDBOX_WARDEN";

/// The argument the warden is started with: should the hook ever be missing,
/// the executable's own `main` sees an unknown flag and exits at once.
const WARDEN_ARG: &str = "--roder-sandbox-warden";

/// How long Roder waits for the warden to say it is up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs before `main` in every process of an executable linking this crate;
/// does nothing unless this process is a warden.
#[used]
#[unsafe(link_section = ".init_array")]
static WARDEN_HOOK: extern "C" fn() = warden_hook;

extern "C" fn warden_hook() {
    if std::env::var_os(WARDEN_ENV).is_some() {
        warden_main();
    }
}

/// The warden's whole life. Never returns.
fn warden_main() -> ! {
    // SAFETY: setting dispositions to SIG_IGN has no preconditions. Stop
    // signals meant for Roder's session or cgroup must not end the watch:
    // the warden ends when Roder does.
    unsafe {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_IGN);
        }
    }
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(b"R").and_then(|()| stdout.flush());
    // SAFETY: closing our own stdout, which nothing uses after the handshake.
    unsafe {
        libc::close(1);
    }
    let mut watched: HashSet<libc::pid_t> = HashSet::new();
    let mut line = String::new();
    let mut stdin = std::io::stdin().lock();
    loop {
        line.clear();
        match stdin.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        apply(&mut watched, &line);
    }
    for pgid in watched {
        // SAFETY: killpg has no memory-safety preconditions; a watched group
        // is one Roder started and had not reaped.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
    std::process::exit(0)
}

/// Applies one control line; anything that is not `+N`/`-N` with N > 1 is
/// ignored (groups 0 and 1 would be our own and init's).
fn apply(watched: &mut HashSet<libc::pid_t>, line: &str) {
    let text = line.trim_end();
    let parse = |number: &str| number.parse::<libc::pid_t>().ok().filter(|pgid| *pgid > 1);
    if let Some(pgid) = text.strip_prefix('+').and_then(parse) {
        watched.insert(pgid);
    } else if let Some(pgid) = text.strip_prefix('-').and_then(parse) {
        watched.remove(&pgid);
    }
}

/// Roder's end of the warden.
#[derive(Debug)]
pub(crate) struct Warden {
    control: std::io::PipeWriter,
    /// Kept so the handle is never dropped; never waited on (the warden
    /// ends with this process).
    _process: tokio::process::Child,
}

static WARDEN: OnceCell<Option<Warden>> = OnceCell::const_new();

/// The warden of this process, started on first use. `None` (with a
/// warning logged once) when it could not be started: commands still run
/// and are still killed on timeout, cancel and drop, but not if Roder dies.
pub(crate) async fn warden() -> Option<&'static Warden> {
    WARDEN
        .get_or_init(|| async {
            match start().await {
                Ok(warden) => Some(warden),
                Err(error) => {
                    tracing::warn!(
                        "could not start the warden that kills commands if this process dies ({error}); commands still stop on timeout, cancel and drop"
                    );
                    None
                }
            }
        })
        .await
        .as_ref()
}

async fn start() -> std::io::Result<Warden> {
    // Keep the hook linked: an unreferenced static might be left out.
    std::hint::black_box(&WARDEN_HOOK);
    let (reader, writer) = std::io::pipe()?;
    let mut command = tokio::process::Command::new("/proc/self/exe");
    command
        .arg(WARDEN_ARG)
        .env(WARDEN_ENV, "1")
        .stdin(Stdio::from(reader))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Its own group: Ctrl-C in Roder's terminal is not its business.
        .process_group(0);
    let mut process = command.spawn()?;
    drop(command);
    let mut handshake = [0_u8; 1];
    let Some(mut stdout) = process.stdout.take() else {
        return Err(std::io::Error::other("the warden has no stdout"));
    };
    let answered = tokio::time::timeout(HANDSHAKE_TIMEOUT, stdout.read(&mut handshake)).await;
    if !matches!(answered, Ok(Ok(1))) || handshake != *b"R" {
        let _ = process.start_kill();
        return Err(std::io::Error::other(
            "the warden did not answer its handshake (is the .init_array hook missing from this executable?)",
        ));
    }
    // Registration must never block a caller: the warden reads at once, and
    // a full pipe (a stuck warden) only costs the protection, not a hang.
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let fd = writer.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    Ok(Warden {
        control: writer,
        _process: process,
    })
}

impl Warden {
    /// Kill group `pgid` if this process dies before [`Warden::forget`].
    pub(crate) fn watch(&self, pgid: libc::pid_t) {
        self.send(&format!("+{pgid}\n"));
    }

    pub(crate) fn forget(&self, pgid: libc::pid_t) {
        self.send(&format!("-{pgid}\n"));
    }

    fn send(&self, message: &str) {
        // One write under PIPE_BUF is atomic, so concurrent callers do not
        // interleave.
        let _ = (&self.control).write_all(message.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_watch_and_forget_and_nothing_else() {
        let mut watched = HashSet::new();
        for line in [
            "+42\n",
            "+43\n",
            "-42\n",
            "+1\n",
            "+0\n",
            "+-5\n",
            "é9\n",
            "+\n",
            "",
            "42\n",
            "+99999999999\n",
        ] {
            apply(&mut watched, line);
        }
        assert_eq!(watched, HashSet::from([43]));
    }
}
