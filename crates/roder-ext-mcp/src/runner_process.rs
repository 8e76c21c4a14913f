//! Starting a stdio MCP server inside a runner session (`placement =
//! "runner"`): the process runs in the thread's sandbox through
//! [`RemoteRunnerSession::spawn_process`], and a task pumps its stdio
//! between the runner's process stream and an in-memory pipe that rmcp reads
//! and writes like a child's stdin/stdout. Its stderr goes to Roder's log
//! only.

use std::sync::Arc;

use anyhow::Context as _;
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerProcess, RunnerProcessEvent, RunnerProcessRequest,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream, ReadHalf, WriteHalf};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::StdioServer;
use crate::stdio::StderrTail;

/// How much of the protocol the in-memory pipe buffers each way.
const PIPE_BUFFER: usize = 256 * 1024;

/// A server process started in a sandbox.
pub(crate) struct RunnerChild {
    /// The server's stdout: the protocol's incoming side.
    pub reader: ReadHalf<DuplexStream>,
    /// The server's stdin.
    pub writer: WriteHalf<DuplexStream>,
    pub stderr_tail: StderrTail,
    /// Cancelled once the process has ended (or its stream broke).
    pub exited: CancellationToken,
    /// Dropping it ends the pump, which drops the process: the runner kills
    /// it and everything it started.
    pub guard: DropGuard,
}

/// Spawns `server` in `session`: its `cwd` (default: the session's
/// workspace), its `env` only (a sandbox has its own environment; Roder's
/// variables are never passed in, `env_vars` included). Errors when the
/// provider cannot run interactive processes or the program cannot start.
pub(crate) async fn spawn(
    name: &str,
    server: &StdioServer,
    session: Arc<dyn RemoteRunnerSession>,
) -> anyhow::Result<RunnerChild> {
    let request = RunnerProcessRequest {
        program: server.command.clone(),
        args: server.args.clone(),
        cwd: server.cwd.clone(),
        env: server
            .env
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    };
    let provider = session.state().provider_id;
    let process = session.spawn_process(request).await.with_context(|| {
        format!(
            "cannot start MCP server \"{name}\" (`{}`) in the thread's runner ({provider})",
            server.command
        )
    })?;
    let (ours, theirs) = tokio::io::duplex(PIPE_BUFFER);
    let (reader, writer) = tokio::io::split(ours);
    let stderr_tail = StderrTail::default();
    let exited = CancellationToken::new();
    let stop = CancellationToken::new();
    let guard = stop.clone().drop_guard();
    tokio::spawn(pump(
        name.to_string(),
        process,
        theirs,
        stderr_tail.clone(),
        exited.clone(),
        stop,
    ));
    Ok(RunnerChild {
        reader,
        writer,
        stderr_tail,
        exited,
        guard,
    })
}

/// Carries bytes between rmcp's end of the pipe and the process until the
/// process ends, the pipe closes or `stop` is cancelled; then drops the
/// process (killing it) and cancels `exited`.
async fn pump(
    name: String,
    mut process: Box<dyn RunnerProcess>,
    pipe: DuplexStream,
    tail: StderrTail,
    exited: CancellationToken,
    stop: CancellationToken,
) {
    let (mut from_client, mut to_client) = tokio::io::split(pipe);
    let mut stderr = StderrLines::new(name.clone(), tail);
    let mut buffer = vec![0u8; 64 * 1024];
    let mut stdin_open = true;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            read = from_client.read(&mut buffer), if stdin_open => match read {
                Ok(0) | Err(_) => {
                    stdin_open = false;
                    let _ = process.close_stdin();
                }
                Ok(n) => {
                    if let Err(error) = process.write_stdin(&buffer[..n]) {
                        tracing::warn!(server = %name, "MCP server in the runner: cannot write its stdin: {error:#}");
                        break;
                    }
                }
            },
            // The runner's event stream is a channel: cancel safe.
            event = process.next_event() => match event {
                Ok(RunnerProcessEvent::Stdout(data)) => {
                    if to_client.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Ok(RunnerProcessEvent::Stderr(data)) => stderr.push(&data),
                Ok(RunnerProcessEvent::Exited { exit_code }) => {
                    tracing::warn!(server = %name, "MCP server in the runner exited ({exit_code:?})");
                    break;
                }
                Err(error) => {
                    tracing::warn!(server = %name, "MCP server in the runner: its process stream broke: {error:#}");
                    break;
                }
            },
        }
    }
    stderr.finish();
    let _ = to_client.shutdown().await;
    drop(process);
    exited.cancel();
}

/// The longest stderr line logged as one (as for host servers).
const MAX_STDERR_LINE: usize = 8 * 1024;

/// Splits a server's stderr chunks into log lines. The log is the only
/// place they go: never the model.
struct StderrLines {
    name: String,
    tail: StderrTail,
    partial: Vec<u8>,
}

impl StderrLines {
    fn new(name: String, tail: StderrTail) -> Self {
        Self {
            name,
            tail,
            partial: Vec::new(),
        }
    }

    fn push(&mut self, data: &[u8]) {
        for byte in data {
            if *byte == b'\n' {
                self.emit();
            } else {
                self.partial.push(*byte);
                if self.partial.len() >= MAX_STDERR_LINE {
                    self.emit();
                }
            }
        }
    }

    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.emit();
        }
    }

    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.partial)
            .trim_end()
            .to_string();
        self.partial.clear();
        tracing::info!(target: "roder_ext_mcp::stderr", server = %self.name, "{text}");
        self.tail.push(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_chunks_become_lines_and_long_lines_pieces() {
        let tail = StderrTail::default();
        let mut lines = StderrLines::new("s".into(), tail.clone());
        lines.push(b"first\nsec");
        lines.push(b"ond\n");
        lines.push(&vec![b'x'; MAX_STDERR_LINE + 10]);
        lines.finish();
        let text = tail.text();
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(&got[..2], &["first", "second"]);
        assert_eq!(got[2].len(), MAX_STDERR_LINE);
        assert_eq!(got[3], "x".repeat(10));
    }
}
