//! Starting a stdio MCP server: a supervised child process (its own process
//! group, killed when its connection is dropped or Roder dies) whose stdin
//! and stdout carry the protocol and whose stderr goes to Roder's log.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::net::unix::pipe;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::StdioServer;

/// Roder's variables a server gets without asking: enough to find programs,
/// a home and a locale. Everything else (API keys above all) stays with
/// Roder unless the server's `env_vars` names it.
pub const BASE_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR",
    "TZ",
];

/// How many of the last stderr lines are kept for the log message of a
/// failed start-up.
const STDERR_TAIL_LINES: usize = 20;

/// A started server process.
pub(crate) struct StdioChild {
    /// The server's stdout: the protocol's incoming side.
    pub reader: pipe::Receiver,
    /// The server's stdin.
    pub writer: pipe::Sender,
    /// The last lines of its stderr, for Roder's log only.
    pub stderr_tail: StderrTail,
    /// Cancelled once the process has exited.
    pub exited: CancellationToken,
    /// The process id (its group's id too).
    pub pid: Option<u32>,
    /// Dropping it kills the process group.
    pub guard: DropGuard,
}

/// The end of a server's stderr, shared with the task that logs it.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    pub(crate) fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() == STDERR_TAIL_LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }

    pub fn text(&self) -> String {
        match self.0.lock() {
            Ok(lines) => lines.iter().cloned().collect::<Vec<_>>().join("\n"),
            Err(_) => String::new(),
        }
    }
}

/// Spawns `server` in `default_cwd` (unless it names its own). Errors when
/// the program cannot be started at all (not found, not executable, no such
/// directory).
pub(crate) async fn spawn(
    name: &str,
    server: &StdioServer,
    default_cwd: &Path,
) -> anyhow::Result<StdioChild> {
    let (stdin_read, stdin_write) = std::io::pipe().context("cannot create a pipe")?;
    let (stdout_read, stdout_write) = std::io::pipe().context("cannot create a pipe")?;
    let (stderr_read, stderr_write) = std::io::pipe().context("cannot create a pipe")?;
    let cwd = server.cwd.as_deref().unwrap_or(default_cwd);
    let mut command = tokio::process::Command::new(&server.command);
    command
        .args(&server.args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::from(stderr_write));
    for variable in BASE_ENV
        .iter()
        .copied()
        .chain(server.env_vars.iter().map(String::as_str))
    {
        if let Some(value) = std::env::var_os(variable) {
            command.env(variable, value);
        }
    }
    command.envs(&server.env);
    // `spawn` drops the command, and with it our copies of the child's ends.
    let mut supervised = roder_sandbox::spawn(command).await.with_context(|| {
        format!(
            "cannot start MCP server \"{name}\": `{}` could not be run in {}",
            server.command,
            cwd.display()
        )
    })?;
    let pid = supervised.id();
    let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout_read))?;
    let writer = pipe::Sender::from_owned_fd(OwnedFd::from(stdin_write))?;
    let stderr = pipe::Receiver::from_owned_fd(OwnedFd::from(stderr_read))?;

    let stderr_tail = StderrTail::default();
    tokio::spawn(log_stderr(name.to_string(), stderr, stderr_tail.clone()));

    let exited = CancellationToken::new();
    let stop = CancellationToken::new();
    let guard = stop.clone().drop_guard();
    let watcher_exited = exited.clone();
    let watcher_name = name.to_string();
    tokio::spawn(async move {
        tokio::select! {
            status = supervised.wait() => {
                match status {
                    Ok(status) => tracing::warn!(server = %watcher_name, "MCP server exited ({status})"),
                    Err(error) => tracing::warn!(server = %watcher_name, "MCP server could not be waited for: {error}"),
                }
            }
            // Dropping `supervised` kills the group.
            () = stop.cancelled() => drop(supervised),
        }
        watcher_exited.cancel();
    });
    Ok(StdioChild {
        reader,
        writer,
        stderr_tail,
        exited,
        pid,
        guard,
    })
}

/// The longest stderr line logged as one; a longer one is logged in pieces,
/// so a server writing an endless line costs bounded memory.
const MAX_STDERR_LINE: u64 = 8 * 1024;

/// Logs each stderr line of the server (lossily decoded) until it closes.
/// This is the only place a server's stderr goes: never to the model.
async fn log_stderr(name: String, stderr: pipe::Receiver, tail: StderrTail) {
    use tokio::io::AsyncReadExt as _;
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_STDERR_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                tracing::info!(target: "roder_ext_mcp::stderr", server = %name, "{text}");
                tail.push(text);
            }
        }
    }
}
